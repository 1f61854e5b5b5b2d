//! Observe: read every pod's view of the cluster into one [`Snapshot`]. Unreachable pods are
//! recorded, never fatal.

use std::collections::BTreeSet;

use futures::future::join_all;
use tracing::{debug, instrument};

use super::conn::{cluster, connect, NodeConn};
use super::nodes::{parse_cluster_nodes, parse_info};
use super::snapshot::{PodState, ReplicationInfo, Snapshot};
use super::{EngineOptions, PodEndpoint, TopologyError, SLOTS};

/// Observe every pod concurrently, then count keys in the slots that need it.
#[instrument(skip_all, fields(pods = pods.len()))]
pub async fn observe(pods: &[PodEndpoint], opts: &EngineOptions) -> Snapshot {
    let results = join_all(pods.iter().map(|p| observe_pod(p, opts))).await;
    let mut snap = Snapshot::default();
    let mut conns = Vec::with_capacity(pods.len());
    for (ep, r) in pods.iter().zip(results) {
        match r {
            Ok((state, conn)) => {
                snap.pods.push(state);
                conns.push(Some(conn));
            }
            Err(e) => {
                debug!(pod = %ep.pod, error = %e, "unreachable");
                snap.pods.push(PodState {
                    endpoint: ep.clone(),
                    reachable: false,
                    error: Some(e.to_string()),
                    cluster_state: "unknown".to_string(),
                    ..PodState::default()
                });
                conns.push(None);
            }
        }
    }
    snap.node_timeout_ms = join_all(conns.iter_mut().flatten().map(node_timeout))
        .await
        .into_iter()
        .flatten()
        .max();
    count_keys(&mut snap, &mut conns, opts).await;
    snap
}

/// The node's `cluster-node-timeout` in ms (CONFIG GET); `None` when it does not say.
async fn node_timeout(c: &mut NodeConn) -> Option<u64> {
    let reply: redis::Value = c
        .run(redis::cmd("CONFIG").arg("GET").arg("cluster-node-timeout"))
        .await
        .map_err(|e| debug!(node = %c.addr, error = %e, "CONFIG GET cluster-node-timeout"))
        .ok()?;
    // RESP2: [name, value]; RESP3: {name: value}.
    let value = match reply {
        redis::Value::Array(v) => v.into_iter().nth(1)?,
        redis::Value::Map(m) => m.into_iter().next()?.1,
        _ => return None,
    };
    redis::from_redis_value::<String>(value)
        .ok()?
        .trim()
        .parse()
        .ok()
}

async fn observe_pod(
    ep: &PodEndpoint,
    opts: &EngineOptions,
) -> Result<(PodState, NodeConn), TopologyError> {
    let mut c = connect(&ep.host, ep.port, opts, opts.command_timeout).await?;
    let nodes = parse_cluster_nodes(&c.text(&cluster("NODES")).await?)?;
    let info = parse_info(&c.text(&cluster("INFO")).await?);
    let dbsize: u64 = c.run(&redis::cmd("DBSIZE")).await?;
    let repl = parse_info(&c.text(redis::cmd("INFO").arg("replication")).await?);
    let num = |k: &str| info.get(k).and_then(|v| v.trim().parse::<u64>().ok());
    let state = PodState {
        endpoint: ep.clone(),
        reachable: true,
        error: None,
        myself: Some(nodes.myself),
        peers: nodes.others,
        migrating: nodes.migrating,
        importing: nodes.importing,
        cluster_state: info
            .get("cluster_state")
            .map_or_else(|| "unknown".to_string(), |s| s.trim().to_string()),
        current_epoch: num("cluster_current_epoch").unwrap_or(0),
        known_nodes: num("cluster_known_nodes").unwrap_or(0) as u32,
        dbsize,
        keys_in_slot: Default::default(),
        replication: Some(ReplicationInfo::from_info(&repl)),
    };
    Ok((state, c))
}

/// COUNTKEYSINSLOT, pipelined, for the slots the planner must judge by where keys are: open
/// slots (on every reachable node holding keys) and unassigned slots (bounded per pass).
async fn count_keys(snap: &mut Snapshot, conns: &mut [Option<NodeConn>], opts: &EngineOptions) {
    let open: BTreeSet<u16> = snap.open_slots().keys().copied().collect();
    let owners = snap.slot_owners();
    let assigned = owners.iter().filter(|o| o.is_some()).count();
    let unassigned: Vec<u16> = if assigned == 0 {
        Vec::new() // fresh cluster: nothing to judge
    } else {
        (0..SLOTS)
            .filter(|s| owners[usize::from(*s)].is_none())
            .take(opts.max_count_slots)
            .collect()
    };
    let jobs = snap.pods.iter().zip(conns.iter_mut()).map(|(p, c)| {
        let slots: Vec<u16> = if p.dbsize == 0 {
            Vec::new()
        } else {
            open.iter().chain(unassigned.iter()).copied().collect()
        };
        async move {
            let Some(c) = c else { return Vec::new() };
            if slots.is_empty() {
                return Vec::new();
            }
            let mut pipe = redis::pipe();
            for s in &slots {
                pipe.add_command(cluster("COUNTKEYSINSLOT").arg(*s).clone());
            }
            match pipe.query_async::<Vec<u64>>(&mut c.conn).await {
                Ok(counts) => slots.into_iter().zip(counts).collect(),
                Err(e) => {
                    debug!(node = %c.addr, error = %e, "COUNTKEYSINSLOT failed");
                    Vec::new()
                }
            }
        }
    });
    let counted = join_all(jobs).await;
    for (p, counts) in snap.pods.iter_mut().zip(counted) {
        p.keys_in_slot.extend(counts);
    }
}
