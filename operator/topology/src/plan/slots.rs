//! Slot planning: which pod is each shard's master, fresh assignment, open-slot repair,
//! unassigned slots and rebalancing.
//!
//! "Balanced" means: with S desired shards, q = 16384 / S and r = 16384 % S, every shard
//! master owns q or q+1 slots and no other node owns any (so exactly r own q+1).

use std::collections::{BTreeMap, BTreeSet};

use super::super::nodes::to_ranges;
use super::super::snapshot::{Claim, Snapshot};
use super::super::{Desired, SLOTS};
use super::{node_ref, Planned, Step};

/// Pick each shard's master among its reachable pods: the slot holder with the most slots;
/// else a master its shard's replicas already follow; else the lowest-ordinal master.
pub(super) fn shard_masters(
    desired: &Desired,
    snap: &Snapshot,
    reach: &[usize],
    owners: &[Option<Claim>],
    stuck: &mut Vec<String>,
) -> BTreeMap<u32, usize> {
    let mut by_shard: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for &i in reach {
        by_shard
            .entry(snap.pods[i].endpoint.shard)
            .or_default()
            .push(i);
    }
    let pod_ids = snap.pod_ids();
    let slot_holders: BTreeSet<&str> = owners.iter().flatten().map(|c| c.id.as_str()).collect();
    let mut out = BTreeMap::new();
    for (shard, mut members) in by_shard {
        members.sort_by_key(|&i| snap.pods[i].endpoint.ordinal);
        let with_slots = members
            .iter()
            .copied()
            .filter(|&i| snap.pods[i].is_master() && snap.pods[i].own_slot_count() > 0)
            .max_by_key(|&i| {
                (
                    snap.pods[i].own_slot_count(),
                    std::cmp::Reverse(snap.pods[i].endpoint.ordinal),
                )
            });
        if let Some(m) = with_slots {
            out.insert(shard, m);
            continue;
        }
        // A member following a slot holder outside the pods (a replaced master): wait for the
        // nodes to fail over rather than pick a new, empty master.
        let orphan = members.iter().find_map(|&i| {
            let m = snap.pods[i].replica_of()?;
            (!pod_ids.contains(m) && slot_holders.contains(m)).then_some(m)
        });
        if let Some(m) = orphan {
            if shard < desired.shards {
                stuck.push(format!(
                    "shard {shard}: replicas follow {m}, which is gone; waiting for failover"
                ));
            }
            continue;
        }
        let followed = members.iter().copied().find(|&i| {
            snap.pods[i].is_master()
                && members
                    .iter()
                    .any(|&j| j != i && snap.pods[j].replica_of() == snap.pods[i].id())
        });
        let first_master = members.iter().copied().find(|&i| snap.pods[i].is_master());
        match followed.or(first_master) {
            Some(m) => {
                out.insert(shard, m);
            }
            // A drained master may have become a replica of the node that took its last slot.
            None if shard >= desired.shards => {}
            None => stuck.push(format!("shard {shard}: no pod is a master")),
        }
    }
    out
}

/// Targets per shard master: q or q+1, the extra slots going to the masters that already hold
/// the most (fewest moves).
fn targets(counts: &[(u32, u32)], shards: u32) -> BTreeMap<u32, u32> {
    let q = u32::from(SLOTS) / shards;
    let r = (u32::from(SLOTS) % shards) as usize;
    let mut order: Vec<(u32, u32)> = counts.to_vec();
    order.sort_by_key(|&(shard, c)| (std::cmp::Reverse(c), shard));
    order
        .iter()
        .enumerate()
        .map(|(k, &(shard, _))| (shard, if k < r { q + 1 } else { q }))
        .collect()
}

/// Contiguous ranges for a fresh cluster, plus distinct config epochs.
pub(super) fn fresh_assignment(
    desired: &Desired,
    snap: &Snapshot,
    masters: &BTreeMap<u32, usize>,
    steps: &mut Vec<Step>,
    stuck: &mut Vec<String>,
) {
    let missing: Vec<u32> = (0..desired.shards)
        .filter(|s| !masters.contains_key(s))
        .collect();
    if !missing.is_empty() {
        stuck.push(format!(
            "fresh cluster: waiting for pods of shards {missing:?}"
        ));
        return;
    }
    let n = desired.shards;
    let mut epochs = Vec::new();
    let mut assigns = Vec::new();
    for shard in 0..n {
        let m = masters[&shard];
        let Some(node) = node_ref(snap, m) else {
            continue;
        };
        let lo = (u32::from(SLOTS) * shard / n) as u16;
        let hi = (u32::from(SLOTS) * (shard + 1) / n - 1) as u16;
        let p = &snap.pods[m];
        let epoch0 = p.myself.as_ref().is_some_and(|v| v.config_epoch == 0);
        if epoch0 && p.peers.is_empty() {
            epochs.push(Step::SetConfigEpoch {
                node: node.clone(),
                epoch: u64::from(shard) + 1,
            });
        }
        assigns.push(Step::AssignSlots {
            node,
            ranges: vec![(lo, hi)],
        });
    }
    steps.extend(epochs);
    steps.extend(assigns);
}

/// Open slots, unassigned slots, then rebalancing — each only when the previous kind is done.
pub(super) fn slot_steps(
    desired: &Desired,
    snap: &Snapshot,
    masters: &BTreeMap<u32, usize>,
    owners: &[Option<Claim>],
    out: &mut Planned,
) {
    let kept: BTreeMap<u32, usize> = masters
        .iter()
        .filter(|(s, _)| **s < desired.shards)
        .map(|(s, i)| (*s, *i))
        .collect();
    let kept_idx: BTreeSet<usize> = kept.values().copied().collect();

    // 1. Open slots: finish a migration toward a kept master, else keep the keys where most are.
    let open = snap.open_slots();
    for (&slot, open_on) in &open {
        let owner = owners[usize::from(slot)]
            .as_ref()
            .and_then(|c| snap.pod_of(&c.id));
        let mut cands: BTreeSet<usize> = open_on.iter().copied().collect();
        cands.extend(owner);
        for &i in open_on {
            let p = &snap.pods[i];
            for id in p
                .migrating
                .get(&slot)
                .into_iter()
                .chain(p.importing.get(&slot))
            {
                cands.extend(snap.pod_of(id));
            }
        }
        let keys = |i: usize| snap.keys_in(i, slot).unwrap_or(1);
        let in_progress = owner.and_then(|o| {
            let t = snap.pod_of(snap.pods[o].migrating.get(&slot)?)?;
            let back = snap.pods[t].importing.get(&slot)?;
            (Some(back.as_str()) == snap.pods[o].id() && kept_idx.contains(&t)).then_some(t)
        });
        let masters_only = |i: &usize| snap.pods[*i].is_master();
        let best_keys = cands
            .iter()
            .copied()
            .filter(masters_only)
            .max_by_key(|&i| (keys(i), kept_idx.contains(&i), Some(i) == owner));
        let final_owner = in_progress
            .or_else(|| {
                owner.filter(|&o| keys(o) > 0 || cands.iter().all(|&i| i == o || keys(i) == 0))
            })
            .or(best_keys)
            .or_else(|| kept.values().next().copied());
        let Some(f) = final_owner else { continue };
        let Some(owner_ref) = node_ref(snap, f) else {
            continue;
        };
        let sources = cands
            .iter()
            .copied()
            .filter(|&i| i != f && snap.pods[i].is_master() && keys(i) > 0)
            .filter_map(|i| node_ref(snap, i))
            .collect();
        let open_refs = open_on.iter().filter_map(|&i| node_ref(snap, i)).collect();
        out.steps.push(Step::FixOpenSlot {
            slot,
            current: owner.and_then(|o| node_ref(snap, o)),
            owner: owner_ref,
            sources,
            open_on: open_refs,
        });
    }
    if !open.is_empty() {
        return;
    }

    // 2. Unassigned slots: to the master holding their keys, else to the masters below target.
    let unassigned: Vec<u16> = (0..SLOTS)
        .filter(|s| owners[usize::from(*s)].is_none())
        .collect();
    let mut counts: BTreeMap<usize, u32> = BTreeMap::new();
    for c in owners.iter().flatten() {
        if let Some(i) = snap.pod_of(&c.id) {
            *counts.entry(i).or_default() += 1;
        }
    }
    if !unassigned.is_empty() {
        if kept.is_empty() {
            out.stuck
                .push("unassigned slots but no master to take them".to_string());
            return;
        }
        let tgt = targets(
            &kept
                .iter()
                .map(|(s, i)| (*s, counts.get(i).copied().unwrap_or(0)))
                .collect::<Vec<_>>(),
            desired.shards.max(kept.len() as u32),
        );
        let mut deficit: Vec<(usize, i64)> = kept
            .iter()
            .map(|(s, i)| {
                let t = i64::from(tgt.get(s).copied().unwrap_or(0));
                (*i, t - i64::from(counts.get(i).copied().unwrap_or(0)))
            })
            .collect();
        let mut grant: BTreeMap<usize, Vec<u16>> = BTreeMap::new();
        let mut cur = 0usize;
        for &slot in &unassigned {
            let holder = (0..snap.pods.len())
                .filter(|&i| {
                    snap.pods[i].is_master()
                        && snap.pods[i].keys_in_slot.get(&slot).copied().unwrap_or(0) > 0
                })
                .max_by_key(|&i| snap.pods[i].keys_in_slot.get(&slot).copied().unwrap_or(0));
            let to = match holder {
                Some(h) => h,
                None => {
                    while cur < deficit.len() && deficit[cur].1 <= 0 {
                        cur += 1;
                    }
                    if cur < deficit.len() {
                        deficit[cur].1 -= 1;
                        deficit[cur].0
                    } else {
                        // Everyone is at target (drained nodes still hold slots): least loaded.
                        let (i, d) = deficit
                            .iter_mut()
                            .max_by_key(|(_, d)| *d)
                            .expect("kept is non-empty");
                        *d -= 1;
                        *i
                    }
                }
            };
            grant.entry(to).or_default().push(slot);
        }
        for (i, slots) in grant {
            if let Some(node) = node_ref(snap, i) {
                out.steps.push(Step::AssignUnassigned {
                    node,
                    ranges: to_ranges(slots),
                });
            }
        }
        return;
    }

    // 3. Rebalance: a node whose cluster_state is not ok refuses RESTORE-ASKING, so wait for
    // every master to see a healthy cluster (a new node needs a moment after MEET).
    let not_ok: Vec<&str> = snap
        .pods
        .iter()
        .filter(|p| p.reachable && p.is_master() && p.cluster_state != "ok")
        .map(|p| p.endpoint.pod.as_str())
        .collect();
    if !not_ok.is_empty() {
        out.stuck.push(format!(
            "waiting for cluster_state ok on {not_ok:?} before moving slots"
        ));
        return;
    }
    // Needs every desired shard's master, so slots move once.
    let missing: Vec<u32> = (0..desired.shards)
        .filter(|s| !kept.contains_key(s))
        .collect();
    if !missing.is_empty() {
        out.stuck.push(format!(
            "waiting for pods of shards {missing:?} before moving slots"
        ));
        return;
    }
    let tgt = targets(
        &kept
            .iter()
            .map(|(s, i)| (*s, counts.get(i).copied().unwrap_or(0)))
            .collect::<Vec<_>>(),
        desired.shards,
    );
    // Slots each node owns, ascending.
    let mut owned: BTreeMap<usize, Vec<u16>> = BTreeMap::new();
    for (s, c) in owners.iter().enumerate() {
        if let Some(i) = c.as_ref().and_then(|c| snap.pod_of(&c.id)) {
            owned.entry(i).or_default().push(s as u16);
        }
    }
    // Donors: drained nodes give everything, kept masters their surplus (highest slots first).
    let mut give: Vec<(usize, Vec<u16>)> = Vec::new();
    for (&i, slots) in &owned {
        if !kept_idx.contains(&i) {
            give.push((i, slots.clone()));
        }
    }
    for (s, &i) in &kept {
        let have = owned.get(&i).map_or(&[][..], Vec::as_slice);
        let t = tgt.get(s).copied().unwrap_or(0) as usize;
        if have.len() > t {
            give.push((i, have[t..].to_vec()));
        }
    }
    let mut need: Vec<(usize, usize)> = kept
        .iter()
        .filter_map(|(s, &i)| {
            let have = owned.get(&i).map_or(0, Vec::len);
            let t = tgt.get(s).copied().unwrap_or(0) as usize;
            (t > have).then(|| (i, t - have))
        })
        .collect();
    let mut r = 0usize;
    for (from, slots) in give {
        let mut rest = &slots[..];
        while !rest.is_empty() && r < need.len() {
            let take = need[r].1.min(rest.len());
            let (chunk, tail) = rest.split_at(take);
            if let (Some(f), Some(t)) = (node_ref(snap, from), node_ref(snap, need[r].0)) {
                out.slots_to_move += chunk.len() as u32;
                out.steps.push(Step::MigrateSlots {
                    from: f,
                    to: t,
                    slots: chunk.to_vec(),
                });
            }
            need[r].1 -= take;
            if need[r].1 == 0 {
                r += 1;
            }
            rest = tail;
        }
    }
}
