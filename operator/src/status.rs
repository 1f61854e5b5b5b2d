//! Status from observations (pure): StatefulSets, pods, validation problems and the topology
//! engine's report in, `RedisClusterStatus` out.
//!
//! The one rule that matters most: phase Ready (and condition Ready=True) only when the
//! topology engine reports a converged cluster with cluster_state ok and all 16384 slots
//! served, and every desired pod is ready. Without a report the cluster is never Ready.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::children::{shard_name, ANNOTATION_CONFIG_HASH};
use crate::crd::{
    Phase, RedisClusterSpec, RedisClusterStatus, ReshardProgress, ShardStatus, SlotMove,
    CLUSTER_SLOTS,
};
use crate::pods::{pod_ready, shard_of, LABEL_CLUSTER, REVISION_LABEL};
use crate::restart::{update_revision, RolloutView, REASON as ROLLING_RESTART};
use tessera_topology::report::is_sync_wait;
use tessera_topology::TopologyReport;

/// What happened with the topology step of this reconcile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TopologyOutcome {
    /// Not called (pods not up yet); the string says why.
    NotRun(String),
    /// The engine ran and reported.
    Report(TopologyReport),
    /// The engine failed as a whole.
    Error(String),
}

/// Everything status is computed from.
#[derive(Debug, Clone)]
pub struct StatusInput<'a> {
    pub name: &'a str,
    pub generation: Option<i64>,
    pub spec: &'a RedisClusterSpec,
    pub previous: Option<&'a RedisClusterStatus>,
    pub stateful_sets: &'a [StatefulSet],
    pub pods: &'a [Pod],
    pub problems: &'a [String],
    pub topology: &'a TopologyOutcome,
    /// A rolling restart in progress (see `crate::restart`): phase Rebalancing, Progressing
    /// reason RollingRestart, unless the cluster is failing or the spec invalid.
    pub rollout: Option<&'a RolloutView>,
    pub now: Timestamp,
}

/// True when the cluster reached full slot coverage at some point (so a shortfall now is
/// degradation or scaling, not creation).
pub fn was_formed(previous: Option<&RedisClusterStatus>) -> bool {
    previous.is_some_and(|s| {
        s.slots_assigned == CLUSTER_SLOTS
            || matches!(
                s.phase,
                Phase::Ready | Phase::Scaling | Phase::Rebalancing | Phase::Degraded
            )
    })
}

/// Formats inclusive slot ranges as `a-b` (or `a` for a single slot).
pub fn format_ranges(ranges: &[(u16, u16)]) -> Vec<String> {
    ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect()
}

/// Computes the new status. Pure.
pub fn compute(o: &StatusInput<'_>) -> RedisClusterStatus {
    let spec = o.spec;
    let desired_nodes = spec.desired_nodes();
    let want_pods = 1 + spec.replicas_per_shard as i32;
    let ready_nodes = o
        .pods
        .iter()
        .filter(|p| pod_ready(p) && shard_of(&p.metadata).is_some_and(|s| s < spec.shards))
        .count() as u32;
    let sts_shards: BTreeSet<u32> = o
        .stateful_sets
        .iter()
        .filter_map(|s| shard_of(&s.metadata))
        .collect();
    let shards_mismatch = sts_shards != (0..spec.shards).collect()
        || o.stateful_sets.iter().any(|s| {
            shard_of(&s.metadata).is_some_and(|sh| sh < spec.shards)
                && s.spec.as_ref().and_then(|x| x.replicas) != Some(want_pods)
        });
    let pods_short = ready_nodes < desired_nodes;
    let formed = was_formed(o.previous);
    let report = match o.topology {
        TopologyOutcome::Report(r) => Some(r),
        _ => None,
    };

    let (mut phase, mut reason, mut message) = decide_phase(
        o,
        report,
        formed,
        shards_mismatch,
        pods_short,
        ready_nodes,
        desired_nodes,
    );
    if let Some(r) = o.rollout {
        // A pod down or not yet rejoined is what a restart looks like; anything else (a
        // failing cluster, an engine error, an invalid spec, scaling) says more.
        let expected = match phase {
            Phase::Ready | Phase::Rebalancing => true,
            Phase::Degraded => reason == "PodsNotReady" || reason == "TopologyStuck",
            _ => false,
        };
        if expected {
            phase = Phase::Rebalancing;
            reason = ROLLING_RESTART.to_string();
            message = r.message.clone();
        }
    }

    let mut shard_statuses = Vec::new();
    // Desired shards plus removed ones whose StatefulSet still exists (being drained); a
    // removed shard without a StatefulSet is gone even if its pods still terminate.
    let all_shards: BTreeSet<u32> = (0..spec.shards).chain(sts_shards.iter().copied()).collect();
    for shard in all_shards {
        let sts = o
            .stateful_sets
            .iter()
            .find(|s| shard_of(&s.metadata) == Some(shard));
        let view = report.and_then(|r| r.shards.iter().find(|v| v.shard == shard));
        shard_statuses.push(ShardStatus {
            shard,
            stateful_set: shard_name(o.name, shard),
            ready_pods: o
                .pods
                .iter()
                .filter(|p| shard_of(&p.metadata) == Some(shard) && pod_ready(p))
                .count() as u32,
            desired_pods: if shard < spec.shards {
                want_pods as u32
            } else {
                sts.and_then(|s| s.spec.as_ref()?.replicas)
                    .unwrap_or(0)
                    .max(0) as u32
            },
            master_pod: view.and_then(|v| v.master_pod.clone()),
            master_id: view.and_then(|v| v.master_id.clone()),
            slot_ranges: view
                .map(|v| format_ranges(&v.slot_ranges))
                .unwrap_or_default(),
            replica_pods: view.map(|v| v.replicas.clone()).unwrap_or_default(),
            replicas_in_sync: view.map(|v| v.replicas_in_sync()).unwrap_or_default(),
            replication_lag_bytes: view
                .and_then(|v| v.replica_sync.iter().filter_map(|r| r.lag_bytes).max()),
            stale_config_pods: sts
                .map(|s| stale_pods(s, o.pods, shard))
                .unwrap_or_default(),
        });
    }

    let shards = match report {
        Some(r) => r
            .shards
            .iter()
            .filter(|s| !s.slot_ranges.is_empty())
            .count() as u32,
        None => sts_shards.len() as u32,
    };
    let conditions = conditions(o, phase, &reason, &message);
    RedisClusterStatus {
        observed_generation: o.generation,
        phase,
        shards,
        selector: format!("{LABEL_CLUSTER}={}", o.name),
        ready_nodes,
        desired_nodes,
        ready_text: format!("{ready_nodes}/{desired_nodes}"),
        slots_assigned: report.map_or(0, |r| r.slots_assigned),
        cluster_state: report.map_or_else(|| "unknown".to_string(), |r| r.cluster_state.clone()),
        replication_lag_bytes: shard_statuses
            .iter()
            .filter_map(|s| s.replication_lag_bytes)
            .max(),
        conditions,
        shard_statuses,
        progress: match report {
            Some(r) => {
                migration_progress(spec.shards, r, o.previous.and_then(|p| p.progress.as_ref()))
            }
            // Nothing observed: the last known progress stands.
            None => o.previous.and_then(|p| p.progress.clone()),
        },
        // Kept; the controller sets it after the password step (crate::auth).
        password_recorded: o.previous.is_some_and(|p| p.password_recorded),
        // Kept; the controller sets it after the users step (crate::users).
        users: o.previous.map(|p| p.users.clone()).unwrap_or_default(),
        // Kept; the controller sets it after the certificate step (crate::tls).
        tls: o.previous.and_then(|p| p.tls.clone()),
    }
}

/// Resharding progress after this pass (None once no slot has to move). Pure.
///
/// Counts run from the start of the resharding: `previous` (the status's progress) plus what
/// this pass moved. What is left comes from the engine's count when it planned moves this
/// pass, else (a pass that waited) from the shards' slot counts against their share. The
/// moves pair shards above their share (removed shards first) with shards below it, in shard
/// order, as the planner does; this pass's moved slots are taken off them in that order.
pub fn migration_progress(
    shards: u32,
    report: &TopologyReport,
    previous: Option<&ReshardProgress>,
) -> Option<ReshardProgress> {
    let (mut moves, surplus) = planned_moves(shards, report);
    let (moved_now, left) = match &report.progress {
        Some(p) => (p.slots_moved, p.slots_to_move.saturating_sub(p.slots_moved)),
        None => (0, surplus),
    };
    if left == 0 {
        return None;
    }
    let mut take = moved_now;
    for m in moves.iter_mut() {
        let t = take.min(m.slots);
        m.slots -= t;
        take -= t;
    }
    moves.retain(|m| m.slots > 0);
    let slots_moved = previous
        .map_or(0, |p| p.slots_moved)
        .saturating_add(moved_now);
    let slots_to_move = slots_moved.saturating_add(left);
    Some(ReshardProgress {
        slots_moved,
        slots_to_move,
        summary: format!("{slots_moved}/{slots_to_move}"),
        moves,
    })
}

/// Source -> target moves that bring every shard to its share of the slots (`shards` kept
/// shards get 16384/shards, the remainder going to those holding the most; removed shards
/// get none), and the number of slots they move.
fn planned_moves(shards: u32, report: &TopologyReport) -> (Vec<SlotMove>, u32) {
    if shards == 0 {
        return (Vec::new(), 0);
    }
    let count = |shard: u32| -> u32 {
        report
            .shards
            .iter()
            .filter(|v| v.shard == shard)
            .flat_map(|v| v.slot_ranges.iter())
            .map(|&(a, b)| u32::from(b.saturating_sub(a)) + 1)
            .sum()
    };
    let pod = |shard: u32| {
        report
            .shards
            .iter()
            .find(|v| v.shard == shard)
            .and_then(|v| v.master_pod.clone())
    };
    let q = CLUSTER_SLOTS / shards;
    let r = (CLUSTER_SLOTS % shards) as usize;
    let mut kept: Vec<(u32, u32)> = (0..shards).map(|s| (s, count(s))).collect();
    kept.sort_by_key(|&(s, c)| (std::cmp::Reverse(c), s));
    let mut share: Vec<(u32, u32, u32)> = kept
        .iter()
        .enumerate()
        .map(|(k, &(s, c))| (s, c, if k < r { q + 1 } else { q }))
        .collect();
    share.sort_by_key(|&(s, _, _)| s);
    let removed: BTreeSet<u32> = report
        .shards
        .iter()
        .map(|v| v.shard)
        .filter(|&s| s >= shards)
        .collect();
    let mut give: Vec<(u32, u32)> = removed
        .iter()
        .map(|&s| (s, count(s)))
        .filter(|&(_, c)| c > 0)
        .collect();
    give.extend(
        share
            .iter()
            .filter(|&&(_, c, t)| c > t)
            .map(|&(s, c, t)| (s, c - t)),
    );
    let mut need: Vec<(u32, u32)> = share
        .iter()
        .filter(|&&(_, c, t)| t > c)
        .map(|&(s, c, t)| (s, t - c))
        .collect();
    let mut moves = Vec::new();
    let mut total = 0u32;
    let mut n = 0usize;
    for (from, mut left) in give {
        while left > 0 {
            let Some((to, want)) = need.get_mut(n) else {
                break;
            };
            let slots = left.min(*want);
            moves.push(SlotMove {
                from_shard: from,
                from_pod: pod(from),
                to_shard: *to,
                to_pod: pod(*to),
                slots,
            });
            total = total.saturating_add(slots);
            left -= slots;
            *want -= slots;
            if *want == 0 {
                n += 1;
            }
        }
    }
    (moves, total)
}

/// Pods of `shard` that do not run their StatefulSet's template: by revision once the
/// StatefulSet controller reports one (covers every template field), else by config hash.
fn stale_pods(sts: &StatefulSet, pods: &[Pod], shard: u32) -> Vec<String> {
    if let Some(rev) = update_revision(sts) {
        let mut out: Vec<String> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| shard_of(&p.metadata) == Some(shard))
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(REVISION_LABEL))
                    .is_some_and(|r| r != rev)
            })
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        out.sort();
        return out;
    }
    let hash_of = |m: Option<&ObjectMeta>| {
        m.and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(ANNOTATION_CONFIG_HASH))
            .cloned()
    };
    let Some(want) = hash_of(sts.spec.as_ref().and_then(|s| s.template.metadata.as_ref())) else {
        return Vec::new();
    };
    let mut out: Vec<String> = pods
        .iter()
        .filter(|p| shard_of(&p.metadata) == Some(shard))
        .filter(|p| hash_of(Some(&p.metadata)).is_some_and(|h| h != want))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    out.sort();
    out
}

/// Phase plus the reason/message that explain it.
fn decide_phase(
    o: &StatusInput<'_>,
    report: Option<&TopologyReport>,
    formed: bool,
    shards_mismatch: bool,
    pods_short: bool,
    ready: u32,
    desired: u32,
) -> (Phase, String, String) {
    if !o.problems.is_empty() {
        return (Phase::Failed, "InvalidSpec".into(), o.problems.join("; "));
    }
    if o.stateful_sets.is_empty() && o.pods.is_empty() {
        return (
            Phase::Pending,
            "NoPods".into(),
            "waiting for StatefulSets and pods".into(),
        );
    }
    let pods_msg = format!("{ready}/{desired} pods ready");
    let Some(r) = report else {
        let (reason, msg) = match o.topology {
            TopologyOutcome::Error(e) => {
                ("TopologyError", format!("{pods_msg}; topology engine: {e}"))
            }
            TopologyOutcome::NotRun(why) => ("WaitingForTopology", format!("{pods_msg}; {why}")),
            TopologyOutcome::Report(_) => ("WaitingForTopology", pods_msg.clone()),
        };
        let phase = if !formed {
            Phase::Creating
        } else if shards_mismatch {
            Phase::Scaling
        } else {
            Phase::Degraded
        };
        return (phase, reason.into(), msg);
    };
    let full = r.slots_assigned == CLUSTER_SLOTS;
    let summary = format!(
        "{pods_msg}; cluster_state {}; {}/{} slots assigned",
        r.cluster_state, r.slots_assigned, CLUSTER_SLOTS
    );
    // Replicas still syncing are progress, not a stuck engine: kept apart from `stuck`.
    let (syncing, stuck): (Vec<String>, Vec<String>) = r
        .stuck
        .iter()
        .filter(|s| !s.starts_with("paused"))
        .cloned()
        .partition(|s| is_sync_wait(s));
    if r.converged && r.cluster_state == "ok" && full && !pods_short && !shards_mismatch {
        return (Phase::Ready, "ClusterReady".into(), summary);
    }
    if !formed && !full {
        let msg = if stuck.is_empty() {
            summary
        } else {
            format!("{summary}; {}", stuck.join("; "))
        };
        return (Phase::Creating, "Forming".into(), msg);
    }
    if r.cluster_state == "fail" {
        return (Phase::Degraded, "ClusterStateFail".into(), summary);
    }
    if !stuck.is_empty() && r.actions.is_empty() {
        return (
            Phase::Degraded,
            "TopologyStuck".into(),
            format!("{summary}; {}", stuck.join("; ")),
        );
    }
    let report_shards = r
        .shards
        .iter()
        .filter(|s| !s.slot_ranges.is_empty())
        .count() as u32;
    if shards_mismatch || report_shards != o.spec.shards {
        return (Phase::Scaling, "Scaling".into(), summary);
    }
    if r.progress
        .as_ref()
        .is_some_and(|p| p.slots_to_move > p.slots_moved)
    {
        return (Phase::Rebalancing, "MigratingSlots".into(), summary);
    }
    if pods_short {
        return (Phase::Degraded, "PodsNotReady".into(), summary);
    }
    if !full {
        return (Phase::Degraded, "SlotsNotCovered".into(), summary);
    }
    if !syncing.is_empty() {
        let phase = if formed && o.previous.is_some_and(|p| p.phase != Phase::Creating) {
            Phase::Rebalancing
        } else {
            Phase::Creating
        };
        return (
            phase,
            "ReplicasSyncing".into(),
            format!("{summary}; {}", syncing.join("; ")),
        );
    }
    (Phase::Rebalancing, "Converging".into(), summary)
}

/// Ready / Progressing / Degraded, keeping lastTransitionTime unless the status flips.
fn conditions(o: &StatusInput<'_>, phase: Phase, reason: &str, message: &str) -> Vec<Condition> {
    let progressing = matches!(phase, Phase::Creating | Phase::Scaling | Phase::Rebalancing);
    let (p_reason, p_msg) = if o.spec.paused && phase != Phase::Ready {
        (
            "Paused",
            "spec.paused: topology changes are stopped".to_string(),
        )
    } else if progressing {
        (reason, message.to_string())
    } else {
        (phase.as_str(), format!("phase {}", phase.as_str()))
    };
    let degraded = matches!(phase, Phase::Degraded | Phase::Failed);
    let wanted = [
        ("Ready", phase == Phase::Ready, reason, message.to_string()),
        (
            "Progressing",
            progressing && !o.spec.paused,
            p_reason,
            p_msg,
        ),
        (
            "Degraded",
            degraded,
            if degraded { reason } else { "AsExpected" },
            if degraded {
                message.to_string()
            } else {
                String::new()
            },
        ),
    ];
    wanted
        .into_iter()
        .map(|(type_, on, reason, message)| {
            let status = if on { "True" } else { "False" };
            let prev = o
                .previous
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_));
            let since = match prev {
                Some(c) if c.status == status => c.last_transition_time.clone(),
                _ => Time(o.now),
            };
            Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason: reason.to_string(),
                message,
                last_transition_time: since,
                observed_generation: o.generation,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::restart::tests::{pod, report, spec, sts, NEW, OLD};

    #[test]
    fn status_shows_a_rollout_but_not_over_a_real_problem() {
        let s = spec(1, 1);
        let sets = [sts(0)];
        let pods = vec![pod(0, 0, NEW), pod(0, 1, OLD)];
        let view = RolloutView {
            message: "1/2 pods at the new revision".into(),
        };
        let formed = RedisClusterStatus {
            phase: Phase::Ready,
            slots_assigned: 16384,
            ..RedisClusterStatus::default()
        };
        let status = |topology: &TopologyOutcome, rollout: Option<&RolloutView>| {
            compute(&StatusInput {
                name: "demo",
                generation: Some(2),
                spec: &s,
                previous: Some(&formed),
                stateful_sets: &sets,
                pods: &pods,
                problems: &[],
                topology,
                rollout,
                now: "2026-01-01T00:00:00Z".parse().expect("time"),
            })
        };
        let ok = TopologyOutcome::Report(report(&[0], 1));
        assert_eq!(status(&ok, None).phase, Phase::Ready);
        let st = status(&ok, Some(&view));
        assert_eq!(st.phase, Phase::Rebalancing);
        let progressing = st
            .conditions
            .iter()
            .find(|c| c.type_ == "Progressing")
            .expect("Progressing");
        assert_eq!(
            (progressing.status.as_str(), progressing.reason.as_str()),
            ("True", ROLLING_RESTART)
        );
        assert_eq!(st.shard_statuses[0].stale_config_pods, ["demo-0-1"]);

        let mut failing = report(&[0], 1);
        failing.cluster_state = "fail".into();
        failing.converged = false;
        let st = status(&TopologyOutcome::Report(failing), Some(&view));
        assert_eq!(st.phase, Phase::Degraded, "a failing cluster is not hidden");
        let st = status(&TopologyOutcome::Error("boom".into()), Some(&view));
        assert_eq!(st.phase, Phase::Degraded);
    }
}
