//! A shard whose master is lost while the other masters are no majority: promote its replica.
//!
//! Redis promotes a replica only by an election that a majority of the slot-holding masters
//! must vote for (and only the same majority can even flag the master FAIL; a minority stops
//! at PFAIL). With 2 shards, one lost master leaves one voter of two: no replica is ever
//! elected, the shard's slots stay unserved and the cluster stays `fail` for good. The
//! engine then does what the election cannot: CLUSTER FAILOVER TAKEOVER on the replica
//! with the best replication offset, which takes the slots under a new config epoch
//! without asking anyone.
//!
//! Safety. TAKEOVER bypasses the majority, the one thing that keeps two masters from
//! serving the same slots, so it is planned only when all of these hold:
//! - the majority cannot exist: the failing slot holders are at least half of them (then
//!   the rest are fewer than `size / 2 + 1`). With 3+ shards and one master lost, the others
//!   are a majority and Redis's own election promotes the replica; the engine only waits;
//! - the master is failing (PFAIL or FAIL) in the view of every reachable pod that knows it,
//!   and the operator cannot read it either (no reachable pod runs its node id). Just before
//!   the command the executor probes its address once more and refuses if it answers as
//!   itself;
//! - it still holds slots (no replica was promoted meanwhile), and Redis had its chance: the
//!   chosen replica has heard nothing from it for [`SILENCE_TIMEOUTS`] node timeouts (one
//!   until the failure is flagged, two for an election, as Redis's own failover timeout);
//! - the replica was in sync: a completed first sync (its link went down after being up, or
//!   is still up and silent), no sync in progress, and the best offset of the master's
//!   reachable replicas, so the fewest acknowledged writes are at stake.
//!
//! If the old master comes back (a frozen process resumed, a partition healed), it sees its
//! slots claimed under a higher config epoch by its former replica and turns into that
//! node's replica (Redis's UPDATE handling; tessera-node does the same), so no slot ends up
//! with two masters for longer than one gossip round. Writes it acknowledged after the
//! replica last heard from it are lost, as in any Redis failover.

use std::collections::{BTreeMap, BTreeSet};

use super::super::snapshot::{Claim, ReplicationInfo, Snapshot};
use super::{node_ref, NodeRef, Step};

/// How many node timeouts the chosen replica must have heard nothing from its master.
pub const SILENCE_TIMEOUTS: u64 = 3;

/// Seconds a replica has heard nothing from its master: `master_last_io_seconds_ago` while the
/// link is still up (a frozen master keeps its socket open until repl-timeout), else
/// `master_link_down_since_seconds`. `None` when the replica never completed a sync (Redis
/// prints -1 then) or is syncing now: it has no data worth promoting.
fn silence_secs(r: &ReplicationInfo) -> Option<u64> {
    if r.role != "slave" || r.master_sync_in_progress {
        return None;
    }
    match r.master_link_status.as_deref() {
        Some("up") => r
            .master_last_io_seconds_ago
            .and_then(|s| u64::try_from(s).ok()),
        _ => r.master_link_down_since_seconds,
    }
}

/// Takeover steps for lost masters, in `reach` order of their best replica. `reach` are the
/// usable pods, `owners` the slot owners.
pub(super) fn takeovers(
    snap: &Snapshot,
    reach: &[usize],
    owners: &[Option<Claim>],
    stuck: &mut Vec<String>,
) -> Vec<Step> {
    let holders: BTreeSet<&str> = owners.iter().flatten().map(|c| c.id.as_str()).collect();
    let size = holders.len();
    // Slot holders the operator cannot read and every reachable pod that knows them sees
    // failing, with the address they were last seen at.
    let mut lost: BTreeMap<&str, (String, u16)> = BTreeMap::new();
    for &id in &holders {
        if snap.pod_of(id).is_some() {
            continue; // the operator reads it: not lost, whatever the others think
        }
        let views: Vec<_> = reach
            .iter()
            .filter_map(|&i| snap.pods[i].view_of(id))
            .collect();
        if !views.is_empty() && views.iter().all(|v| v.failing()) {
            let v = views
                .iter()
                .find(|v| !v.host.is_empty())
                .unwrap_or(&views[0]);
            lost.insert(id, (v.host.clone(), v.port));
        }
    }
    if lost.is_empty() {
        return Vec::new();
    }
    let failing = lost.len();
    let majority_left = failing * 2 < size;
    let timeout_ms = snap.node_timeout_ms();
    let bound_secs = (timeout_ms.saturating_mul(SILENCE_TIMEOUTS)).div_ceil(1000);
    let mut out = Vec::new();
    for (id, (host, port)) in lost {
        // The pod that ran it: an unreachable pod at its address, if any.
        let pod_at = snap
            .pods
            .iter()
            .find(|p| p.myself.is_none() && p.endpoint.host == host && p.endpoint.port == port);
        let replicas: Vec<usize> = reach
            .iter()
            .copied()
            .filter(|&p| snap.pods[p].replica_of() == Some(id))
            .collect();
        let shard = pod_at
            .map(|p| p.endpoint.shard)
            .or_else(|| replicas.first().map(|&p| snap.pods[p].endpoint.shard));
        let shard_txt = shard.map_or_else(|| "?".to_string(), |s| s.to_string());
        let master = NodeRef {
            id: id.to_string(),
            pod: pod_at.map_or_else(|| format!("node {id}"), |p| p.endpoint.pod.clone()),
            host: host.clone(),
            port,
        };
        if majority_left {
            stuck.push(format!(
                "shard {shard_txt}: its master {} ({host}:{port}) is failing; the other \
                 masters are a majority, so Redis's election promotes a replica",
                master.pod
            ));
            continue;
        }
        // The best-synced replica: highest offset, then lowest ordinal.
        let best = replicas
            .iter()
            .copied()
            .filter_map(|p| {
                let r = snap.pods[p].replication.as_ref()?;
                Some((p, silence_secs(r)?, r.slave_repl_offset?))
            })
            .max_by_key(|&(p, _, offset)| {
                (offset, std::cmp::Reverse(snap.pods[p].endpoint.ordinal))
            });
        let Some((p, silent, offset)) = best else {
            stuck.push(format!(
                "shard {shard_txt}: its master {} ({host}:{port}) is lost and the other masters \
                 are no majority, but no reachable replica of it was in sync to take over",
                master.pod
            ));
            continue;
        };
        let pod = &snap.pods[p];
        if silent < bound_secs {
            stuck.push(format!(
                "shard {}: its master {} ({host}:{port}) is failing and the other masters are \
                 no majority; {} takes over (CLUSTER FAILOVER TAKEOVER) once it has heard \
                 nothing from it for {bound_secs}s (now {silent}s)",
                pod.endpoint.shard, master.pod, pod.endpoint.pod
            ));
            continue;
        }
        let Some(node) = node_ref(snap, p) else {
            continue;
        };
        out.push(Step::Takeover {
            shard: pod.endpoint.shard,
            node,
            master,
            reason: format!(
                "silent for {silent}s (node timeout {timeout_ms} ms), {failing} of {size} \
                 masters failing: no majority can elect a replica; offset {offset} is the best \
                 of {} replicas",
                replicas.len()
            ),
        });
    }
    out
}
