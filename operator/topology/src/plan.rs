//! Plan (pure, no I/O): the next steps that move the observed cluster toward the desired one.
//!
//! Order of a plan: Reset, SetConfigEpoch, AssignSlots, Meet, Forget, Replicate,
//! RepairReplication and Takeover (a lost master's replica promoted when no majority can
//! elect it, see `plan/takeover.rs`), then Failover (handing a shard over before
//! `replicasPerShard` drops, see `plan/handover.rs`; slot work waits a pass) or FixOpenSlot,
//! AssignUnassigned, MigrateSlots. A pod being reset takes no part in the rest of the plan
//! (its node id is about to change); slot work waits for the next pass. While any pod is
//! unreachable or any pod's node is PFAIL/FAIL in some view, only healing steps (Meet,
//! Forget, Replicate, RepairReplication, Takeover) are planned. Slot work waits until every
//! pod knows every other pod, so a migration never targets an unknown node.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::snapshot::Snapshot;
use super::Desired;

mod handover;
mod repair;
mod reset;
mod slots;
mod takeover;

pub use repair::LINK_DOWN_GRACE_SECS;
pub use takeover::SILENCE_TIMEOUTS;

/// A node the executor will talk to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRef {
    pub id: String,
    pub pod: String,
    pub host: String,
    pub port: u16,
}

/// One idempotent action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    /// Wipe a slotless node back to a fresh one (FLUSHALL when `flush`, then CLUSTER RESET
    /// HARD: new node id, no peers) so it can be met and attached anew; see `plan/reset.rs`.
    Reset {
        node: NodeRef,
        flush: bool,
        reason: String,
    },
    /// Give a fresh master a distinct config epoch (only valid before it knows other nodes).
    SetConfigEpoch { node: NodeRef, epoch: u64 },
    /// Fresh cluster: give a master its contiguous share.
    AssignSlots {
        node: NodeRef,
        ranges: Vec<(u16, u16)>,
    },
    /// `node` runs CLUSTER MEET for the target address.
    Meet {
        node: NodeRef,
        target: NodeRef,
        cport: u16,
    },
    /// CLUSTER FORGET `id` on every node in `on`.
    Forget { id: String, on: Vec<NodeRef> },
    /// `node` becomes a replica of `master_id`.
    Replicate { node: NodeRef, master_id: String },
    /// `node`, already `master_id`'s replica in the cluster, gets CLUSTER REPLICATE again
    /// because its replication does not run toward the master; see `plan/repair.rs`.
    RepairReplication {
        node: NodeRef,
        master_id: String,
        master_pod: String,
        reason: String,
    },
    /// Close an open slot: move keys from `sources` to `owner`, then make `owner` the owner
    /// everywhere (which clears MIGRATING/IMPORTING on `open_on`).
    FixOpenSlot {
        slot: u16,
        /// The node that owns the slot now (by config epoch), if it is a pod.
        current: Option<NodeRef>,
        owner: NodeRef,
        sources: Vec<NodeRef>,
        open_on: Vec<NodeRef>,
    },
    /// Existing cluster: assign slots no node claims.
    AssignUnassigned {
        node: NodeRef,
        ranges: Vec<(u16, u16)>,
    },
    /// Move `slots` from `from` to `to`, Redis-style (IMPORTING/MIGRATING/MIGRATE/NODE).
    MigrateSlots {
        from: NodeRef,
        to: NodeRef,
        slots: Vec<u16>,
    },
    /// CLUSTER FAILOVER (coordinated, no FORCE) on `node`, an in-sync replica of `master`
    /// that stays, because the StatefulSet is about to remove `master`'s pod; see
    /// `plan/handover.rs`.
    Failover {
        shard: u32,
        node: NodeRef,
        master: NodeRef,
        reason: String,
    },
    /// CLUSTER FAILOVER TAKEOVER on `node`, the best-synced replica of `master`, a master
    /// lost for good while the other masters are no majority (Redis's election cannot win);
    /// see `plan/takeover.rs` for when this is safe. `master.pod` names the pod that ran it,
    /// or the node when no pod does any more.
    Takeover {
        shard: u32,
        node: NodeRef,
        master: NodeRef,
        reason: String,
    },
}

impl Step {
    /// A repair of one node's state (not a step of forming or resharding): an Event each.
    pub fn is_repair(&self) -> bool {
        matches!(
            self,
            Step::Reset { .. } | Step::RepairReplication { .. } | Step::Takeover { .. }
        )
    }

    /// One human line describing the step (for logs, Events and the CLI).
    pub fn describe(&self) -> String {
        match self {
            Step::Reset {
                node,
                flush,
                reason,
            } => format!(
                "reset {} (CLUSTER RESET HARD{}): {reason}",
                node.pod,
                if *flush { " after FLUSHALL" } else { "" }
            ),
            Step::SetConfigEpoch { node, epoch } => {
                format!("set config epoch {epoch} on {}", node.pod)
            }
            Step::AssignSlots { node, ranges } => {
                format!("assign slots {} to {}", fmt_ranges(ranges), node.pod)
            }
            Step::Meet { node, target, .. } => format!(
                "meet {} ({}:{}) from {}",
                target.pod, target.host, target.port, node.pod
            ),
            Step::Forget { id, on } => format!("forget node {id} on {} nodes", on.len()),
            Step::Replicate { node, master_id } => {
                format!("make {} a replica of {master_id}", node.pod)
            }
            Step::RepairReplication {
                node,
                master_pod,
                reason,
                ..
            } => format!(
                "repair replication of {} to its master {master_pod}: {reason}",
                node.pod
            ),
            Step::FixOpenSlot {
                slot,
                owner,
                sources,
                ..
            } => format!(
                "fix open slot {slot}: owner {} (keys from {} nodes)",
                owner.pod,
                sources.len()
            ),
            Step::AssignUnassigned { node, ranges } => {
                format!(
                    "assign unassigned slots {} to {}",
                    fmt_ranges(ranges),
                    node.pod
                )
            }
            Step::MigrateSlots { from, to, slots } => format!(
                "migrate {} slots {} from {} to {}",
                slots.len(),
                fmt_ranges(&super::nodes::to_ranges(slots.iter().copied())),
                from.pod,
                to.pod
            ),
            Step::Failover {
                shard,
                node,
                master,
                reason,
            } => format!(
                "fail shard {shard} over from {} to {} (CLUSTER FAILOVER): {reason}",
                master.pod, node.pod
            ),
            Step::Takeover {
                shard,
                node,
                master,
                reason,
            } => format!(
                "promote {} to master of shard {shard} in place of its lost master {} \
                 ({}:{}) (CLUSTER FAILOVER TAKEOVER): {reason}",
                node.pod, master.pod, master.host, master.port
            ),
        }
    }
}

fn fmt_ranges(r: &[(u16, u16)]) -> String {
    let parts: Vec<String> = r
        .iter()
        .take(8)
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    let more = if r.len() > 8 { ",..." } else { "" };
    format!("{}{more}", parts.join(","))
}

/// A plan plus what the report needs to explain it.
#[derive(Debug, Clone, Default)]
pub struct Planned {
    pub steps: Vec<Step>,
    /// Why something that should happen cannot happen yet.
    pub stuck: Vec<String>,
    /// shard -> pod index of the shard's master (for shards that have one).
    pub shard_masters: BTreeMap<u32, usize>,
    pub slots_to_move: u32,
}

/// The next steps toward `desired`. Empty exactly when the cluster is converged.
pub fn plan(desired: &Desired, snap: &Snapshot) -> Vec<Step> {
    plan_full(desired, snap).steps
}

pub(crate) fn node_ref(snap: &Snapshot, i: usize) -> Option<NodeRef> {
    let p = &snap.pods[i];
    Some(NodeRef {
        id: p.id()?.to_string(),
        pod: p.endpoint.pod.clone(),
        host: p.endpoint.host.clone(),
        port: p.endpoint.port,
    })
}

/// Plan with explanations.
pub fn plan_full(desired: &Desired, snap: &Snapshot) -> Planned {
    let mut out = Planned::default();
    let reach: Vec<usize> = (0..snap.pods.len())
        .filter(|&i| snap.pods[i].reachable && snap.pods[i].myself.is_some())
        .collect();
    let unreachable: Vec<&str> = snap
        .pods
        .iter()
        .filter(|p| !p.reachable || p.myself.is_none())
        .map(|p| p.endpoint.pod.as_str())
        .collect();
    // Desired pods the controller did not hand us (no IP yet, or not created yet): such a pod
    // may run any node id the others know, so nothing is forgotten meanwhile (a FORGET
    // blacklists the id cluster-wide for 60 s; see tests/topology_restart.rs).
    let absent: Vec<(u32, u32)> = (0..desired.shards)
        .flat_map(|s| (0..=desired.replicas_per_shard).map(move |o| (s, o)))
        .filter(|&(s, o)| {
            !snap
                .pods
                .iter()
                .any(|p| p.endpoint.shard == s && p.endpoint.ordinal == o)
        })
        .collect();
    let all_seen = unreachable.is_empty() && absent.is_empty();
    let owners = snap.slot_owners();
    let resets = reset::resets(
        desired,
        snap,
        &reach,
        unreachable.is_empty(),
        &owners,
        &mut out.stuck,
    );
    let mut reset_steps = Vec::new();
    for r in &resets {
        if let Some(node) = node_ref(snap, r.pod) {
            reset_steps.push(Step::Reset {
                node,
                flush: r.flush,
                reason: r.reason.clone(),
            });
        }
    }
    // A forgotten identity whose reset has to wait (a handshake in flight, a pod unreachable)
    // is not met meanwhile: met, its id would count as known and never be reset, while the
    // cluster keeps it blacklisted for 60 s (see tests/topology_rejoin.rs).
    let waiting: Vec<usize> = reset::forgotten(desired, snap, &reach)
        .into_iter()
        .filter(|p| !resets.iter().any(|r| r.pod == *p))
        .collect();
    for &p in &waiting {
        out.stuck.push(format!(
            "pod {} waits to be reset (its node {} is unknown to the cluster) before it is met",
            snap.pods[p].endpoint.pod,
            snap.pods[p].id().unwrap_or("?")
        ));
    }
    // The rest of the plan ignores pods being reset or waiting for it. Slot holders come
    // first, so a newcomer is met by a slot holder and is at once known to the cluster proper.
    let mut reach: Vec<usize> = reach
        .into_iter()
        .filter(|i| !resets.iter().any(|r| r.pod == *i) && !waiting.contains(i))
        .collect();
    reach.sort_by_key(|&i| !(snap.pods[i].is_master() && snap.pods[i].own_slot_count() > 0));
    for pod in &unreachable {
        out.stuck.push(format!("pod {pod} is unreachable"));
    }
    for shard in 0..desired.shards {
        let have = snap
            .pods
            .iter()
            .filter(|p| p.endpoint.shard == shard)
            .count();
        let want = desired.replicas_per_shard as usize + 1;
        if have < want {
            out.stuck
                .push(format!("shard {shard} has {have} of {want} pods"));
        }
    }
    let pod_ids = snap.pod_ids();
    let owns_slots: BTreeSet<&str> = owners.iter().flatten().map(|c| c.id.as_str()).collect();

    // Failure flags on any pod's node, as seen by any reachable pod.
    let mut degraded = !unreachable.is_empty();
    let mut flagged = BTreeSet::new();
    for &i in &reach {
        for v in &snap.pods[i].peers {
            if v.failing() && pod_ids.contains(v.id.as_str()) {
                degraded = true;
                flagged.insert(v.id.as_str());
            }
        }
    }

    // Meet: every reachable pod must know every other one at its current address.
    let mut meets: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut first: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut handshaking = false;
    // `c` knows `x` by its id at its current address.
    let right = |c: usize, x: usize| {
        let px = &snap.pods[x];
        px.id().is_some_and(|idx| {
            snap.pods[c].view_of(idx).is_some_and(|v| {
                !v.handshake && v.host == px.endpoint.host && v.port == px.endpoint.port
            })
        })
    };
    // Some other pod knows `x` rightly: `x` is in the cluster.
    let known = |x: usize, but: usize| reach.iter().any(|&c| c != x && c != but && right(c, x));
    for &a in &reach {
        handshaking |= snap.pods[a].peers.iter().any(|v| v.handshake);
        for &b in &reach {
            if a == b || meets.contains(&(b, a)) {
                continue;
            }
            let Some(idb) = snap.pods[b].id() else {
                continue;
            };
            if right(a, b) {
                continue;
            }
            // Both in the cluster, `b` unknown to `a`: gossip would introduce them, but only
            // at the pace of routine pings (a second or more); a MEET's handshake takes a
            // round trip.
            let unknown = snap.pods[a].view_of(idb).is_none();
            if unknown && known(b, a) {
                if known(a, b) {
                    meets.insert((a, b));
                }
                continue;
            }
            // First contact: one MEET per newcomer, from the first pod in `reach` (a slot
            // holder when there is one), so it joins the cluster proper; a newcomer met
            // this pass meets nobody itself.
            if first.iter().any(|&(_, y)| y == b || y == a) {
                continue;
            }
            first.insert((a, b));
            meets.insert((a, b));
        }
    }
    let mut meet_steps = Vec::new();
    for (a, b) in &meets {
        if let (Some(node), Some(target)) = (node_ref(snap, *a), node_ref(snap, *b)) {
            let cport = snap.pods[*b]
                .myself
                .as_ref()
                .map(|m| m.cport)
                .filter(|c| {
                    *c != 0
                        && snap.pods[*b]
                            .myself
                            .as_ref()
                            .is_some_and(|m| m.port == target.port)
                })
                .unwrap_or_else(|| target.port.saturating_add(10000));
            meet_steps.push(Step::Meet {
                node,
                target,
                cport,
            });
        }
    }

    // Forget: nodes no pod runs any more (removed, or replaced by a new node id).
    let mut forget_steps = Vec::new();
    let foreign = snap.foreign_nodes();
    if !foreign.is_empty() && !unreachable.is_empty() {
        out.stuck.push(
            "not forgetting unknown nodes while a pod is unreachable (it may be one of them)"
                .to_string(),
        );
    } else if !foreign.is_empty() && !absent.is_empty() {
        out.stuck.push(format!(
            "not forgetting unknown nodes while {} desired pods have no address yet (they may be among them)",
            absent.len()
        ));
    }
    for (id, view) in &foreign {
        if owns_slots.contains(id.as_str()) {
            degraded = true;
            out.stuck.push(format!(
                "node {id} ({}:{}) is not a pod but owns slots; waiting for its replica to fail over",
                view.host, view.port
            ));
            continue;
        }
        if !all_seen {
            continue;
        }
        let on: Vec<_> = reach
            .iter()
            .filter(|&&i| snap.pods[i].view_of(id).is_some())
            .filter(|&&i| snap.pods[i].replica_of() != Some(id.as_str()))
            .filter_map(|&i| node_ref(snap, i))
            .collect();
        if !on.is_empty() {
            forget_steps.push(Step::Forget { id: id.clone(), on });
        }
    }

    // Shard masters and replicas.
    let masters = slots::shard_masters(desired, snap, &reach, &owners, &mut out.stuck);
    // A shard whose pod is being reset gets its master from that pod next pass.
    for r in &resets {
        let line = format!(
            "shard {}: no pod is a master",
            snap.pods[r.pod].endpoint.shard
        );
        out.stuck.retain(|s| *s != line);
    }
    out.shard_masters = masters.clone();
    let mut replicate_steps = Vec::new();
    for (&shard, &m) in masters.iter().filter(|(s, _)| **s < desired.shards) {
        let Some(mid) = snap.pods[m].id() else {
            continue;
        };
        let master_failing = reach
            .iter()
            .any(|&i| snap.pods[i].view_of(mid).is_some_and(|v| v.failing()));
        for &p in reach.iter().filter(|&&p| p != m) {
            let pp = &snap.pods[p];
            if pp.endpoint.shard != shard || pp.replica_of() == Some(mid) {
                continue;
            }
            if pp.is_master() && pp.own_slot_count() > 0 {
                continue; // a second slot holder in the shard: drained first
            }
            let knows = pp.view_of(mid).is_some_and(|v| !v.handshake);
            if knows && !master_failing {
                if let Some(node) = node_ref(snap, p) {
                    replicate_steps.push(Step::Replicate {
                        node,
                        master_id: mid.to_string(),
                    });
                }
            }
        }
    }

    replicate_steps.extend(repair::repairs(snap, &reach));
    // A shard whose master is lost while the rest are no majority (see `plan/takeover.rs`).
    replicate_steps.extend(takeover::takeovers(snap, &reach, &owners, &mut out.stuck));

    // Fresh cluster: epochs and contiguous slot ranges go in before the first MEET.
    let fresh = owners.iter().all(Option::is_none) && snap.open_slots().is_empty();
    let mut head = Vec::new();
    if fresh && !reach.is_empty() {
        if degraded {
            out.stuck
                .push("fresh cluster: waiting for every pod before assigning slots".to_string());
        } else {
            slots::fresh_assignment(desired, snap, &masters, &mut head, &mut out.stuck);
        }
    }

    let topology_ready = !degraded
        && reset_steps.is_empty()
        && meets.is_empty()
        && !handshaking
        && forget_steps.is_empty();
    out.steps.extend(reset_steps);
    out.steps.extend(head);
    out.steps.extend(meet_steps);
    out.steps.extend(forget_steps);
    out.steps.extend(replicate_steps);
    if fresh || !topology_ready {
        // Waiting with nothing to do is not converged: the report says converged when there
        // are no steps and nothing stuck, and a handshake or a failure flag seen right after
        // a MEET or a replica attachment made it report a cluster whose slots had not moved.
        if !fresh && out.steps.is_empty() {
            if handshaking {
                out.stuck
                    .push("waiting for node handshakes to complete".to_string());
            }
            if !flagged.is_empty() {
                out.stuck.push(format!(
                    "waiting: nodes flagged failing by a peer: {}",
                    flagged.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        return out;
    }
    // A shard whose master's pod is about to be removed is handed over first; an open slot
    // is closed first (its MIGRATING state would not follow the failover).
    if snap.open_slots().is_empty() {
        let handovers = handover::handovers(desired, snap, &reach, &masters, &mut out.stuck);
        if !handovers.is_empty() {
            out.steps.extend(handovers);
            return out;
        }
    }
    slots::slot_steps(desired, snap, &masters, &owners, &mut out);
    out
}
