//! Pure builders of the child objects of a RedisCluster, one file per kind.
//!
//! Every builder takes the resource and returns the full object the operator wants to exist;
//! the controller server-side-applies it under one field manager, so what a builder leaves out
//! is removed from the live object on the next apply.

pub mod auth;
pub mod configmap;
pub mod pdb;
pub mod service;
pub mod statefulset;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use crate::crd::RedisCluster;

pub use crate::pods::{CLIENT_PORT, LABEL_CLUSTER, LABEL_SHARD};
/// Pod-template annotation with a hash of node.conf, to spot pods running an older config.
pub const ANNOTATION_CONFIG_HASH: &str = "tessera.rs/config-hash";
/// Cluster bus port.
pub const BUS_PORT: i32 = 16379;
/// tessera-node's `metrics-port` in the operator's pods (redis_exporter's usual port), the
/// container port named `metrics`.
pub const METRICS_PORT: u16 = 9121;
/// Where the ConfigMap is mounted.
pub const CONFIG_DIR: &str = "/etc/tessera";
/// Where node data (nodes.conf, RDB, AOF) lives.
pub const DATA_DIR: &str = "/data";

/// Why a child could not be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChildError {
    #[error("the RedisCluster has no {0} yet")]
    MissingMeta(&'static str),
}

/// Everything the controller applies for one cluster, in apply order.
#[derive(Debug, Clone, PartialEq)]
pub struct Children {
    pub config_map: ConfigMap,
    pub headless_service: Service,
    pub client_service: Service,
    pub stateful_sets: Vec<StatefulSet>,
    pub pdbs: Vec<PodDisruptionBudget>,
}

/// Builds every child for the spec. Pure.
pub fn build(rc: &RedisCluster) -> Result<Children, ChildError> {
    let config_map = configmap::build(rc)?;
    let hash = configmap::config_hash(&config_map);
    let mut stateful_sets = Vec::new();
    let mut pdbs = Vec::new();
    for shard in 0..rc.spec.shards {
        stateful_sets.push(statefulset::build(rc, shard, &hash)?);
        pdbs.push(pdb::build(rc, shard)?);
    }
    Ok(Children {
        config_map,
        headless_service: service::headless(rc)?,
        client_service: service::client(rc)?,
        stateful_sets,
        pdbs,
    })
}

/// Labels shared by every child: the recommended app.kubernetes.io set plus the cluster label.
pub fn cluster_labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "tessera".to_string()),
        ("app.kubernetes.io/instance".to_string(), name.to_string()),
        (
            "app.kubernetes.io/component".to_string(),
            "node".to_string(),
        ),
        (
            "app.kubernetes.io/managed-by".to_string(),
            "tessera-operator".to_string(),
        ),
        (LABEL_CLUSTER.to_string(), name.to_string()),
    ])
}

/// Cluster labels plus the shard label.
pub fn shard_labels(name: &str, shard: u32) -> BTreeMap<String, String> {
    let mut labels = cluster_labels(name);
    labels.insert(LABEL_SHARD.to_string(), shard.to_string());
    labels
}

/// Selector of one shard's pods (stable: StatefulSet selectors are immutable).
pub fn shard_selector(name: &str, shard: u32) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_CLUSTER.to_string(), name.to_string()),
        (LABEL_SHARD.to_string(), shard.to_string()),
    ])
}

/// Name of shard `shard`'s StatefulSet (and PDB).
pub fn shard_name(name: &str, shard: u32) -> String {
    format!("{name}-{shard}")
}

/// Name of the headless Service that gives pods stable DNS.
pub fn headless_name(name: &str) -> String {
    format!("{name}-nodes")
}

/// Name of the ConfigMap holding node.conf.
pub fn config_map_name(name: &str) -> String {
    format!("{name}-config")
}

/// Metadata for a child: name, namespace, labels and the controller owner reference that lets
/// the garbage collector delete it with the RedisCluster.
pub fn child_meta(
    rc: &RedisCluster,
    name: String,
    labels: BTreeMap<String, String>,
) -> Result<ObjectMeta, ChildError> {
    let owner = owner_ref(rc)?;
    Ok(ObjectMeta {
        name: Some(name),
        namespace: Some(rc.namespace().ok_or(ChildError::MissingMeta("namespace"))?),
        labels: Some(labels),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    })
}

/// Controller owner reference to the RedisCluster.
pub fn owner_ref(rc: &RedisCluster) -> Result<OwnerReference, ChildError> {
    if rc.meta().name.is_none() {
        return Err(ChildError::MissingMeta("name"));
    }
    let mut owner = rc
        .controller_owner_ref(&())
        .ok_or(ChildError::MissingMeta("uid"))?;
    owner.block_owner_deletion = Some(true);
    Ok(owner)
}
