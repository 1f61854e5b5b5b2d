//! One PodDisruptionBudget per shard: a node drain never takes a whole shard (master and its
//! replicas) down at once. With replicas, one pod at a time may go (a SIGTERMed master hands
//! its slots over first); without, none may: evicting the only pod would leave the shard's
//! slots unserved (and, without storage, lose them), so a drain waits until an admin decides.
//! The operator's own restarts delete pods rather than evict them, so the budget never blocks
//! them.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::{child_meta, shard_labels, shard_name, shard_selector, ChildError};
use crate::crd::RedisCluster;

/// Pods of one shard a voluntary disruption may take at once.
pub fn max_unavailable(rc: &RedisCluster) -> i32 {
    if rc.spec.replicas_per_shard == 0 {
        0
    } else {
        1
    }
}

/// Builds shard `shard`'s PDB.
pub fn build(rc: &RedisCluster, shard: u32) -> Result<PodDisruptionBudget, ChildError> {
    let name = rc.name_any();
    Ok(PodDisruptionBudget {
        metadata: child_meta(rc, shard_name(&name, shard), shard_labels(&name, shard))?,
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(max_unavailable(rc))),
            selector: Some(LabelSelector {
                match_labels: Some(shard_selector(&name, shard)),
                match_expressions: None,
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    })
}
