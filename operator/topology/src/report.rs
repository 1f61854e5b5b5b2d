//! Report: the observed state and the plan, summarised for the controller.

use std::collections::BTreeSet;

use super::nodes::to_ranges;
use super::plan::Planned;
use super::snapshot::{PodState, ReplicaLink, ReplicationInfo, Snapshot};
use super::{Desired, Progress, ReplicaSync, ShardView, TopologyReport};

/// True for the `stuck` line about replicas still syncing ("waiting for N replicas to sync:
/// ..."): status treats it as progress (the cluster is forming), not as a stuck engine.
pub fn is_sync_wait(line: &str) -> bool {
    line.starts_with("waiting for ") && line.contains(" replicas to sync")
}

/// The replication link of replica pod `p` against its master's INFO replication (`master`).
/// In sync means: the replica's link is up after its first sync ([`ReplicationInfo::
/// replica_in_sync`]), its offset trails the master's `master_repl_offset` by at most
/// [`ReplicationInfo::MAX_IN_SYNC_LAG_BYTES`], and the master lists it as an online replica
/// (`listed`). A link state alone is not enough: a node may say it is up while its master has
/// no replica, or trail far behind.
fn replica_sync(p: &PodState, master: Option<&ReplicationInfo>, listed: bool) -> ReplicaSync {
    let r = p.replication.as_ref();
    let lag_bytes = master
        .and_then(|m| m.master_repl_offset)
        .zip(r.and_then(|r| r.slave_repl_offset))
        .map(|(m, s)| m.saturating_sub(s));
    ReplicaSync {
        pod: p.endpoint.pod.clone(),
        in_sync: r.is_some_and(|r| r.replica_in_sync())
            && listed
            && lag_bytes.is_some_and(|l| l <= ReplicationInfo::MAX_IN_SYNC_LAG_BYTES),
        link_status: r.and_then(|r| r.master_link_status.clone()),
        sync_in_progress: r.is_some_and(|r| r.master_sync_in_progress),
        last_io_seconds_ago: r.and_then(|r| r.master_last_io_seconds_ago),
        lag_bytes,
    }
}

/// Which of `replicas` their master lists as online replicas. A line matches a pod by
/// address; lines whose address is no pod's (a replica connecting from another source
/// address, as on loopback) vouch, by count, for the replicas no line matched.
fn listed_by_master(replicas: &[&PodState], master: Option<&ReplicationInfo>) -> Vec<bool> {
    let Some(m) = master else {
        return vec![false; replicas.len()];
    };
    let online: Vec<&ReplicaLink> = m.links.iter().filter(|l| l.state == "online").collect();
    let exact = |p: &PodState| {
        online
            .iter()
            .any(|l| l.ip == p.endpoint.host && l.port == p.endpoint.port)
    };
    let spare = online
        .iter()
        .filter(|l| {
            !replicas
                .iter()
                .any(|p| l.ip == p.endpoint.host && l.port == p.endpoint.port)
        })
        .count();
    let unmatched = replicas.iter().filter(|p| !exact(p)).count();
    replicas
        .iter()
        .map(|p| exact(p) || unmatched <= spare)
        .collect()
}

/// Build the report of a pass from what was observed and planned (before executing).
pub fn build(desired: &Desired, snap: &Snapshot, planned: &Planned) -> TopologyReport {
    let all_reachable: Vec<_> = snap.pods.iter().filter(|p| p.reachable).collect();
    // A node that knows only itself (a pod just restarted on an empty volume, not met yet) is
    // not part of the cluster: its "fail" says nothing about the cluster's slots. On a fresh
    // cluster every node is like that, so then all of them count.
    let joined: Vec<_> = all_reachable
        .iter()
        .copied()
        .filter(|p| p.known_nodes > 1)
        .collect();
    let reachable = if joined.is_empty() {
        all_reachable
    } else {
        joined
    };
    let cluster_state = if reachable.is_empty() {
        "unknown"
    } else if reachable.iter().all(|p| p.cluster_state == "ok") {
        "ok"
    } else if reachable.iter().any(|p| p.cluster_state == "fail") {
        "fail"
    } else {
        "unknown"
    };
    let owners = snap.slot_owners();
    let slots_assigned = owners.iter().filter(|o| o.is_some()).count() as u32;
    let mut shard_ids: BTreeSet<u32> = snap.pods.iter().map(|p| p.endpoint.shard).collect();
    shard_ids.extend(0..desired.shards);
    let shards: Vec<ShardView> = shard_ids
        .into_iter()
        .map(|shard| {
            let m = planned.shard_masters.get(&shard).copied();
            let master_id = m.and_then(|i| snap.pods[i].id().map(str::to_string));
            let slot_ranges = master_id.as_deref().map_or_else(Vec::new, |id| {
                to_ranges(
                    owners
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| c.as_ref().is_some_and(|c| c.id == id))
                        .map(|(s, _)| s as u16),
                )
            });
            let master_info = m.and_then(|i| snap.pods[i].replication.as_ref());
            let following: Vec<&PodState> = snap
                .pods
                .iter()
                .filter(|p| master_id.is_some() && p.replica_of() == master_id.as_deref())
                .collect();
            let listed = listed_by_master(&following, master_info);
            let (replicas, replica_sync) = following
                .iter()
                .zip(listed)
                .map(|(p, l)| (p.endpoint.pod.clone(), replica_sync(p, master_info, l)))
                .unzip();
            let master_agreed = master_id
                .as_deref()
                .is_some_and(|id| master_agreed(snap, id));
            ShardView {
                shard,
                master_pod: m.map(|i| snap.pods[i].endpoint.pod.clone()),
                master_id,
                slot_ranges,
                replicas,
                replica_sync,
                master_agreed,
            }
        })
        .collect();
    let mut stuck = planned.stuck.clone();
    // A drained pod (of a group past `shards`) that turned replica when it gave away its
    // last slot (Redis's rule for an emptied master) is on its way out: its sync is not
    // waited for.
    let drained = |pod: &str| {
        snap.pods
            .iter()
            .any(|p| p.endpoint.pod == pod && p.endpoint.shard >= desired.shards)
    };
    let unsynced: Vec<&str> = shards
        .iter()
        .filter(|v| v.shard < desired.shards)
        .flat_map(|v| v.replica_sync.iter().filter(|r| !r.in_sync))
        .map(|r| r.pod.as_str())
        .filter(|pod| !drained(pod))
        .collect();
    if !unsynced.is_empty() {
        stuck.push(format!(
            "waiting for {} replicas to sync: {}",
            unsynced.len(),
            unsynced.join(", ")
        ));
    }
    let progress = (planned.slots_to_move > 0).then_some(Progress {
        slots_moved: 0,
        slots_to_move: planned.slots_to_move,
    });
    TopologyReport {
        converged: planned.steps.is_empty()
            && stuck.is_empty()
            && cluster_state == "ok"
            && slots_assigned == u32::from(super::SLOTS),
        cluster_state: cluster_state.to_string(),
        slots_assigned,
        shards,
        progress,
        stuck,
        actions: Vec::new(),
        failing_pods: failing_pods(snap),
        repairs: Vec::new(),
        handovers: Vec::new(),
    }
}

/// True when every reachable pod sees node `id` as a master that is not PFAIL/FAIL.
fn master_agreed(snap: &Snapshot, id: &str) -> bool {
    let reachable: Vec<&PodState> = snap.pods.iter().filter(|p| p.reachable).collect();
    !reachable.is_empty()
        && reachable.iter().all(|p| match p.id() {
            Some(own) if own == id => p.is_master(),
            _ => p
                .view_of(id)
                .is_some_and(|v| v.master && !v.failing() && !v.handshake),
        })
}

/// Pods whose current node some reachable pod flags PFAIL or FAIL, sorted.
fn failing_pods(snap: &Snapshot) -> Vec<String> {
    let mut out: Vec<String> = snap
        .pods
        .iter()
        .filter(|target| {
            target.id().is_some_and(|id| {
                snap.pods
                    .iter()
                    .filter(|p| p.reachable)
                    .any(|p| p.view_of(id).is_some_and(|v| v.failing()))
            })
        })
        .map(|p| p.endpoint.pod.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}
