//! Operator-driven rolling restart (pure planning; the I/O is in [`exec`]).
//!
//! The StatefulSets use the OnDelete update strategy, so a changed pod template (config, image,
//! resources, auth...) reaches a pod only when that pod is deleted. Deleting a master is a
//! failover decision, so the operator makes it: per shard, one pod at a time, replicas first;
//! the master is failed over to an in-sync replica (CLUSTER FAILOVER, which waits for the
//! replica to catch up, so no acknowledged write is lost) and then restarted as a replica.
//!
//! Nothing is kept in memory: progress is derived from the observed pods (their
//! `controller-revision-hash` label against the StatefulSet's `status.updateRevision`) and
//! the topology report, so a restarted operator picks up where the last one stopped. Each
//! action waits for a healthy cluster: every desired pod Ready, the topology engine converged
//! (cluster_state ok, all slots served, every replica's link up, no pending step), no node
//! flagged PFAIL/FAIL. So at most one pod is ever down because of the restart.
//!
//! With `replicasPerShard: 0` there is no failover target: the master is restarted alone (its
//! slots are unavailable until it is back) and only when `spec.storage` is set, because a pod
//! on an emptyDir comes back empty under a new node id and its keys would be gone.

pub mod exec;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use crate::crd::{RedisClusterSpec, RedisClusterStatus};
use crate::pods::{ordinal_of, pod_ready, shard_of};
use tessera_topology::TopologyReport;

pub use crate::pods::REVISION_LABEL;
/// Reason of the Progressing condition (and of Events) while a rolling restart runs.
pub const REASON: &str = "RollingRestart";

/// A pod the restart acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub name: String,
    /// Deletion is conditional on this uid, so a pod already replaced is never deleted again.
    pub uid: Option<String>,
    pub shard: u32,
}

/// The one action of a reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestartAction {
    /// Delete a pod that is not its shard's master; the StatefulSet recreates it at the new
    /// revision and the topology engine makes it a replica again.
    DeleteReplica(PodRef),
    /// CLUSTER FAILOVER on `replica` (in sync, already at the new revision), so the stale
    /// master becomes a replica and can be restarted without losing its slots.
    Failover {
        shard: u32,
        master_pod: String,
        replica: PodRef,
        host: String,
        port: u16,
    },
    /// Restart the only node of a shard (replicasPerShard 0, persistent storage): its slots
    /// are unavailable until it is back.
    DeleteLoneMaster(PodRef),
}

impl RestartAction {
    /// One human line for logs and Events.
    pub fn describe(&self) -> String {
        match self {
            RestartAction::DeleteReplica(p) => {
                format!("restarting replica pod {} (shard {})", p.name, p.shard)
            }
            RestartAction::Failover {
                shard,
                master_pod,
                replica,
                ..
            } => format!(
                "failing over shard {shard} from {master_pod} to {} before restarting it",
                replica.name
            ),
            RestartAction::DeleteLoneMaster(p) => format!(
                "restarting pod {} alone: shard {} has no replica, its slots are unavailable until it is back",
                p.name, p.shard
            ),
        }
    }
}

/// What the restart should do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Every pod runs its StatefulSet's current template.
    Nothing,
    /// Stale pods exist, but it is not safe to act now; the string says why.
    Wait(String),
    /// Stale pods exist and the operator will not restart them (paused, or unsafe by design).
    Blocked(String),
    Act(RestartAction),
}

/// The plan of one reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartPlan {
    /// Live pods of desired shards whose revision is not their StatefulSet's update revision.
    pub stale: Vec<String>,
    /// Desired pods at the update revision, and desired pods in total.
    pub updated: u32,
    pub total: u32,
    pub next: Next,
}

/// Everything the planner looks at.
#[derive(Debug, Clone, Copy)]
pub struct RestartInput<'a> {
    pub spec: &'a RedisClusterSpec,
    pub stateful_sets: &'a [StatefulSet],
    pub pods: &'a [Pod],
    pub report: Option<&'a TopologyReport>,
}

/// The update revision of a StatefulSet, once its controller has observed the current spec.
pub fn update_revision(sts: &StatefulSet) -> Option<&str> {
    let st = sts.status.as_ref()?;
    if sts.metadata.generation.is_some() && st.observed_generation != sts.metadata.generation {
        return None;
    }
    st.update_revision.as_deref()
}

fn revision_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(REVISION_LABEL)
        .map(String::as_str)
}

fn live(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
}

/// Plans the next restart action. Pure.
pub fn plan(input: &RestartInput<'_>) -> RestartPlan {
    let spec = input.spec;
    let mut stale: BTreeMap<u32, Vec<&Pod>> = BTreeMap::new();
    let mut unobserved = Vec::new();
    let mut updated = 0;
    for shard in 0..spec.shards {
        let sts = input
            .stateful_sets
            .iter()
            .find(|s| shard_of(&s.metadata) == Some(shard));
        let Some(rev) = sts.and_then(update_revision) else {
            unobserved.push(shard);
            continue;
        };
        for p in input
            .pods
            .iter()
            .filter(|p| live(p) && shard_of(&p.metadata) == Some(shard))
        {
            // A pod without the label was not made by a StatefulSet: never ours to restart.
            match revision_of(p) {
                Some(r) if r != rev => stale.entry(shard).or_default().push(p),
                Some(_) => updated += 1,
                None => {}
            }
        }
    }
    let mut stale_names: Vec<String> = stale.values().flatten().map(|p| p.name_any()).collect();
    stale_names.sort();
    let mut out = RestartPlan {
        stale: stale_names,
        updated,
        total: spec.desired_nodes(),
        next: Next::Nothing,
    };
    if stale.is_empty() {
        if !unobserved.is_empty() && input.report.is_some() {
            out.next = Next::Wait(format!(
                "the StatefulSet controller has not observed shards {unobserved:?} yet"
            ));
        }
        return out;
    }
    out.next = next_action(input, &stale, &unobserved);
    out
}

fn next_action(
    input: &RestartInput<'_>,
    stale: &BTreeMap<u32, Vec<&Pod>>,
    unobserved: &[u32],
) -> Next {
    let spec = input.spec;
    if spec.paused {
        return Next::Blocked("spec.paused: no pod is restarted".into());
    }
    if !unobserved.is_empty() {
        return Next::Wait(format!(
            "the StatefulSet controller has not observed shards {unobserved:?} yet"
        ));
    }
    let Some(report) = input.report else {
        return Next::Wait("the topology was not observed".into());
    };
    if report.cluster_state != "ok" {
        return Next::Wait(format!("cluster_state is {}", report.cluster_state));
    }
    if !report.failing_pods.is_empty() {
        return Next::Wait(format!(
            "nodes flagged PFAIL/FAIL: {}",
            report.failing_pods.join(", ")
        ));
    }
    if let Some(p) = input.pods.iter().find(|p| !live(p)) {
        return Next::Wait(format!("pod {} is terminating", p.name_any()));
    }
    for shard in 0..spec.shards {
        for ordinal in 0..=spec.replicas_per_shard {
            let ok = input.pods.iter().any(|p| {
                shard_of(&p.metadata) == Some(shard)
                    && ordinal_of(&p.name_any()) == Some(ordinal)
                    && pod_ready(p)
            });
            if !ok {
                return Next::Wait(format!("pod {ordinal} of shard {shard} is not Ready"));
            }
        }
    }
    if !report.converged {
        let why = if report.stuck.is_empty() {
            "topology steps pending".to_string()
        } else {
            report.stuck.join("; ")
        };
        return Next::Wait(format!("the cluster has not converged: {why}"));
    }
    // First shard with stale pods: its stale replicas, then its master.
    let Some((&shard, pods)) = stale.iter().next() else {
        return Next::Nothing;
    };
    let Some(view) = report.shards.iter().find(|v| v.shard == shard) else {
        return Next::Wait(format!("shard {shard} is not in the topology report"));
    };
    let Some(master) = view.master_pod.as_deref() else {
        return Next::Wait(format!("shard {shard} has no master"));
    };
    if !view.master_agreed {
        return Next::Wait(format!(
            "not every node sees {master} as shard {shard}'s master yet"
        ));
    }
    let pod_ref = |p: &Pod| PodRef {
        name: p.name_any(),
        uid: p.metadata.uid.clone(),
        shard,
    };
    let mut replicas: Vec<&&Pod> = pods.iter().filter(|p| p.name_any() != master).collect();
    replicas.sort_by_key(|p| ordinal_of(&p.name_any()));
    if let Some(p) = replicas.first() {
        return Next::Act(RestartAction::DeleteReplica(pod_ref(p)));
    }
    let Some(master_pod) = pods.iter().find(|p| p.name_any() == master) else {
        return Next::Nothing;
    };
    if spec.replicas_per_shard == 0 {
        if spec.storage.is_none() {
            return Next::Blocked(format!(
                "{master} is the only node of shard {shard} and has no persistent storage: \
                 restarting it would lose its keys; set replicasPerShard >= 1 or spec.storage, \
                 or delete the pod yourself"
            ));
        }
        return Next::Act(RestartAction::DeleteLoneMaster(pod_ref(master_pod)));
    }
    let stale_names: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
    let mut candidates: Vec<&Pod> = view
        .replica_sync
        .iter()
        .filter(|r| r.in_sync && !stale_names.contains(&r.pod))
        .filter_map(|r| input.pods.iter().find(|p| p.name_any() == r.pod))
        .collect();
    candidates.sort_by_key(|p| ordinal_of(&p.name_any()));
    let Some(target) = candidates.first() else {
        return Next::Wait(format!(
            "shard {shard} has no in-sync replica at the new revision to fail over to"
        ));
    };
    let Some(host) = target.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
        return Next::Wait(format!("pod {} has no IP", target.name_any()));
    };
    Next::Act(RestartAction::Failover {
        shard,
        master_pod: master.to_string(),
        replica: pod_ref(target),
        host,
        port: crate::pods::CLIENT_PORT as u16,
    })
}

/// What status shows about a rolling restart (`None` when none runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutView {
    /// Progressing message: counts, what is next or why it waits.
    pub message: String,
}

/// Whether a rolling restart is running, for status: stale pods are being replaced, or the
/// last one was just replaced and the cluster has not settled yet (derived from the previous
/// status, so it survives an operator restart). A blocked restart is not running.
pub fn rollout_view(
    plan: &RestartPlan,
    previous: Option<&RedisClusterStatus>,
    settled: bool,
) -> Option<RolloutView> {
    let counts = format!("{}/{} pods at the new revision", plan.updated, plan.total);
    match &plan.next {
        Next::Blocked(_) => None,
        Next::Act(a) => Some(RolloutView {
            message: format!("{counts}; {}", a.describe()),
        }),
        Next::Wait(why) if !plan.stale.is_empty() => Some(RolloutView {
            message: format!("{counts}; waiting: {why}"),
        }),
        _ => {
            let was = previous.is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Progressing" && c.status == "True" && c.reason == REASON)
            });
            (was && !settled).then(|| RolloutView {
                message: format!("{counts}; waiting for the last restarted pod to rejoin"),
            })
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
