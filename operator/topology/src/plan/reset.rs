//! Which pods to wipe back to a fresh node (CLUSTER RESET HARD) before they can be attached
//! where the plan wants them.
//!
//! A pod that comes back on a kept volume brings its old nodes.conf. After a scale-in the
//! cluster FORGOT that identity, and after a later scale-out the pod may rejoin (when met) as a
//! replica of another shard's master, leaving its own shard without a master. Neither state
//! heals by MEET or REPLICATE alone, so such a pod is reset: it gets a new node id, knows
//! nobody, and is then met and given slots or a master like a new pod. Only a pod without
//! slots is ever reset; its keys are stale copies (a replica's, or a drained master's whose
//! slots all live elsewhere), and a master's are flushed only when every slot has an owner.

use std::collections::BTreeSet;

use super::super::snapshot::{Claim, Snapshot};
use super::super::Desired;

/// One pod to reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reset {
    /// Pod index in the snapshot.
    pub pod: usize,
    /// FLUSHALL first: the node is a master holding (stale) keys.
    pub flush: bool,
    pub reason: String,
}

/// The cluster proper: reachable masters that hold slots.
fn holders(snap: &Snapshot, reach: &[usize]) -> Vec<usize> {
    reach
        .iter()
        .copied()
        .filter(|&i| snap.pods[i].is_master() && snap.pods[i].own_slot_count() > 0)
        .collect()
}

/// Pods whose node id the cluster forgot: the pod knows others (an old nodes.conf), no slot
/// holder knows it (a pod the planner met was met by a holder, so it is known). They are
/// reset, never met with that id: see [`resets`] for when.
pub(super) fn forgotten(desired: &Desired, snap: &Snapshot, reach: &[usize]) -> Vec<usize> {
    let holders = holders(snap, reach);
    if holders.is_empty() {
        return Vec::new();
    }
    reach
        .iter()
        .copied()
        .filter(|&p| {
            let pp = &snap.pods[p];
            let Some(id) = pp.id() else { return false };
            if pp.endpoint.shard >= desired.shards || pp.own_slot_count() > 0 {
                return false;
            }
            let knows_others = pp.peers.iter().any(|v| !v.handshake);
            let known = holders
                .iter()
                .any(|&h| h != p && snap.pods[h].view_of(id).is_some());
            knows_others && !known
        })
        .collect()
}

/// Pods to reset this pass. `reach` are the reachable pods with a known node. Nothing is
/// reset while a pod is unreachable (it may be the one that knows the pod) or a handshake is
/// in flight (a node just met is briefly unknown to the rest).
pub(super) fn resets(
    desired: &Desired,
    snap: &Snapshot,
    reach: &[usize],
    all_reachable: bool,
    owners: &[Option<Claim>],
    stuck: &mut Vec<String>,
) -> Vec<Reset> {
    let handshaking = reach
        .iter()
        .any(|&i| snap.pods[i].peers.iter().any(|v| v.handshake));
    if !all_reachable || handshaking {
        return Vec::new();
    }
    if holders(snap, reach).is_empty() {
        return Vec::new(); // a fresh cluster: nothing to be forgotten by
    }
    // 1. Identities the cluster forgot.
    let mut picked: Vec<(usize, String)> = forgotten(desired, snap, reach)
        .into_iter()
        .map(|p| {
            let id = snap.pods[p].id().unwrap_or("?");
            (
                p,
                format!("its node {id} is unknown to the cluster (forgotten after a scale-in)"),
            )
        })
        .collect();

    // 2. A kept shard none of whose pods can become its master: every one follows a master of
    // another shard (or a node gone without slots). Reset its lowest ordinal; the others
    // are then made its replicas.
    let slot_holders: BTreeSet<&str> = owners.iter().flatten().map(|c| c.id.as_str()).collect();
    for shard in 0..desired.shards {
        let mut members: Vec<usize> = reach
            .iter()
            .copied()
            .filter(|&i| snap.pods[i].endpoint.shard == shard)
            .collect();
        members.sort_by_key(|&i| snap.pods[i].endpoint.ordinal);
        if members.is_empty() || members.iter().any(|m| picked.iter().any(|(p, _)| p == m)) {
            continue;
        }
        let follows_elsewhere = |i: usize| {
            let Some(m) = snap.pods[i].replica_of() else {
                return false; // a master: it can lead the shard
            };
            match snap.pod_of(m) {
                Some(mi) => snap.pods[mi].endpoint.shard != shard,
                // A gone master that holds slots: its replicas fail over, wait for that.
                None => !slot_holders.contains(m),
            }
        };
        if members.iter().all(|&i| follows_elsewhere(i)) {
            let p = members[0];
            let master = snap.pods[p].replica_of().unwrap_or("?").to_string();
            picked.push((
                p,
                format!("shard {shard} has no master: its nodes follow {master} of another shard"),
            ));
        }
    }

    // Keys: a replica's are dropped by the reset itself; a slotless master's are stale only
    // when every slot has an owner and no migration is open.
    let settled = owners.iter().all(Option::is_some) && snap.open_slots().is_empty();
    let mut out = Vec::new();
    for (p, reason) in picked {
        let pp = &snap.pods[p];
        let flush = pp.is_master() && pp.dbsize > 0;
        if flush && !settled {
            stuck.push(format!(
                "pod {} must be reset ({reason}) but holds {} keys while slots are unassigned or open",
                pp.endpoint.pod, pp.dbsize
            ));
            continue;
        }
        out.push(Reset {
            pod: p,
            flush,
            reason,
        });
    }
    out
}
