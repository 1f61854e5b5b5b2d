//! Report: the observed state and the plan, summarised for the controller.

use std::collections::BTreeSet;

use super::nodes::to_ranges;
use super::plan::Planned;
use super::snapshot::Snapshot;
use super::{Desired, Progress, ShardView, TopologyReport};

/// Build the report of a pass from what was observed and planned (before executing).
pub fn build(desired: &Desired, snap: &Snapshot, planned: &Planned) -> TopologyReport {
    let reachable: Vec<_> = snap.pods.iter().filter(|p| p.reachable).collect();
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
    let shards = shard_ids
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
            let replicas = snap
                .pods
                .iter()
                .filter(|p| master_id.is_some() && p.replica_of() == master_id.as_deref())
                .map(|p| p.endpoint.pod.clone())
                .collect();
            ShardView {
                shard,
                master_pod: m.map(|i| snap.pods[i].endpoint.pod.clone()),
                master_id,
                slot_ranges,
                replicas,
            }
        })
        .collect();
    let progress = (planned.slots_to_move > 0).then_some(Progress {
        slots_moved: 0,
        slots_to_move: planned.slots_to_move,
    });
    TopologyReport {
        converged: planned.steps.is_empty()
            && planned.stuck.is_empty()
            && cluster_state == "ok"
            && slots_assigned == u32::from(super::SLOTS),
        cluster_state: cluster_state.to_string(),
        slots_assigned,
        shards,
        progress,
        stuck: planned.stuck.clone(),
        actions: Vec::new(),
    }
}
