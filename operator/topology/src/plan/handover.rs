//! Lowering `replicasPerShard`: hand a shard over before its StatefulSet shrinks.
//!
//! A StatefulSet shrinks from its highest ordinal. Roles float, so the pod it removes may be
//! the shard's master; killing it would leave the shard's slots unserved until failure
//! detection promotes a replica, and writes acknowledged in that window may be lost. So while
//! a pod beyond the desired count (`ordinal > replicasPerShard`) is the master of a kept
//! shard, the plan fails the shard over (CLUSTER FAILOVER, the coordinated kind: the master
//! stops writes until the replica has its whole stream) to an in-sync replica that stays.
//! The controller shrinks the StatefulSet only once no removed pod is a master
//! (`super::super::shrink`), and the removed nodes are then forgotten like any gone node.

use std::collections::BTreeMap;

use super::super::snapshot::{ReplicationInfo, Snapshot};
use super::super::Desired;
use super::{node_ref, Step};

/// Failover steps for the kept shards whose master is a pod the StatefulSet will remove.
/// `masters` are the planner's shard masters (pod indexes), `reach` the usable pods.
pub(super) fn handovers(
    desired: &Desired,
    snap: &Snapshot,
    reach: &[usize],
    masters: &BTreeMap<u32, usize>,
    stuck: &mut Vec<String>,
) -> Vec<Step> {
    let mut out = Vec::new();
    for (&shard, &m) in masters.iter().filter(|(s, _)| **s < desired.shards) {
        let mp = &snap.pods[m];
        if mp.endpoint.ordinal <= desired.replicas_per_shard || mp.own_slot_count() == 0 {
            continue;
        }
        let Some(mid) = mp.id() else { continue };
        let master_offset = mp.replication.as_ref().and_then(|r| r.master_repl_offset);
        // A replica that stays, follows this master and could take over now.
        let mut candidates: Vec<usize> = reach
            .iter()
            .copied()
            .filter(|&p| {
                let pp = &snap.pods[p];
                pp.endpoint.shard == shard
                    && pp.endpoint.ordinal <= desired.replicas_per_shard
                    && pp.replica_of() == Some(mid)
                    && pp.replication.as_ref().is_some_and(|r| {
                        r.replica_in_sync()
                            && master_offset
                                .zip(r.slave_repl_offset)
                                .is_some_and(|(a, b)| {
                                    a.saturating_sub(b) <= ReplicationInfo::MAX_IN_SYNC_LAG_BYTES
                                })
                    })
            })
            .collect();
        candidates.sort_by_key(|&p| snap.pods[p].endpoint.ordinal);
        let target = candidates.first().copied();
        match (target.and_then(|t| node_ref(snap, t)), node_ref(snap, m)) {
            (Some(node), Some(master)) => out.push(Step::Failover {
                shard,
                node,
                master,
                reason: format!(
                    "replicasPerShard {} removes {} (ordinal {})",
                    desired.replicas_per_shard, mp.endpoint.pod, mp.endpoint.ordinal
                ),
            }),
            _ => stuck.push(format!(
                "shard {shard}: its master {} is removed by replicasPerShard {}; waiting for an \
                 in-sync replica among ordinals 0..={} to fail over to",
                mp.endpoint.pod, desired.replicas_per_shard, desired.replicas_per_shard
            )),
        }
    }
    out
}
