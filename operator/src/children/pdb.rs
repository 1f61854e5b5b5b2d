//! One PodDisruptionBudget per shard with maxUnavailable 1: a node drain never takes a whole
//! shard (master and its replicas) down at once.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::{child_meta, shard_labels, shard_name, shard_selector, ChildError};
use crate::crd::RedisCluster;

/// Builds shard `shard`'s PDB.
pub fn build(rc: &RedisCluster, shard: u32) -> Result<PodDisruptionBudget, ChildError> {
    let name = rc.name_any();
    Ok(PodDisruptionBudget {
        metadata: child_meta(rc, shard_name(&name, shard), shard_labels(&name, shard))?,
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(shard_selector(&name, shard)),
                match_expressions: None,
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    })
}
