//! The pure steps of a reconcile after the observe step (`crate::observe`): each takes the
//! spec, the [`Observed`] value and (later steps) the topology engine's report, and returns
//! what to do; the controller executes it. No I/O here, so each step is unit-tested alone.
//!
//! Order in the controller: [`children`] (desired children, held shrinks, node password file,
//! storage actions) → [`children_to_apply`] → password switch (`crate::auth::plan`) →
//! [`topology_endpoints`] and the engine → [`shrinks`] → [`shards_to_remove`] → restart
//! (`crate::restart::plan`) → status (`crate::status::compute`).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::{Resource, ResourceExt};

use crate::apply::{stamped, up_to_date};
use crate::auth;
use crate::children::{self, shard_name, ChildError, Children};
use crate::crd::{RedisCluster, RedisClusterSpec, RedisClusterStatus, CLUSTER_SLOTS};
use crate::observe::{Observed, SecretError};
use crate::pods::{all_desired_started, endpoints, shard_of};
use crate::status::was_formed;
use crate::storage::{self, StsActions};
use crate::topology::shrink::{shrink_blocked, Known};
use crate::topology::{EngineOptions, PodEndpoint, TopologyReport};

/// A StatefulSet the spec makes smaller than the live one: a shrink removes the highest
/// ordinals, which may run a shard's master, so it is applied after the topology step.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldShrink {
    pub shard: u32,
    /// The live StatefulSet's replicas.
    pub live_replicas: i32,
    /// The desired StatefulSet (at the smaller size, with the live claim template).
    pub desired: StatefulSet,
}

/// What to do with `<cluster>-node-auth` (the password as node config, `children::auth`).
#[derive(Debug, Clone, PartialEq)]
pub enum NodeAuth {
    /// Apply it (spec.auth's password), before the StatefulSets whose pods mount it.
    Apply(Box<Secret>),
    /// spec.auth is gone while the nodes may still have a password: delete it (by name).
    Delete(String),
    Nothing,
    /// spec.auth's Secret cannot be read: only logged here (the pods wait for their volume,
    /// the password step reports the error, the Secret poll brings the cluster back).
    Unreadable(String),
}

/// The children step of a valid spec.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildrenPlan {
    /// What to apply now: held shrinks taken out, storage edits made.
    pub desired: Children,
    pub held: Vec<HeldShrink>,
    pub node_auth: NodeAuth,
    /// Storage actions of the StatefulSets that exist (`crate::storage::plan_all`).
    pub storage: Vec<StsActions>,
}

/// Desired children of a valid spec against what was observed. Pure.
pub fn children(rc: &RedisCluster, o: &Observed) -> Result<ChildrenPlan, ChildError> {
    let mut desired = children::build(rc)?;
    let mut held = hold_shrinks(&mut desired.stateful_sets, &o.stateful_sets);
    // A held shrink keeps its live claim template: storage grows once it is not held.
    for h in held.iter_mut() {
        storage::keep_live_size(&mut h.desired, &o.stateful_sets);
    }
    let node_auth = match o.passwords.as_ref().map(|p| p.desired.as_ref()) {
        Some(Ok(Some(password))) => NodeAuth::Apply(Box::new(children::auth::build(rc, password)?)),
        Some(Err(e)) => NodeAuth::Unreadable(e.to_string()),
        // No spec.auth: the file goes while the nodes may still have a password.
        _ if o.recorded_before => {
            NodeAuth::Delete(children::auth::node_auth_secret_name(&rc.name_any()))
        }
        _ => NodeAuth::Nothing,
    };
    let storage = storage::plan_all(&mut desired.stateful_sets, &o.stateful_sets, &o.claims);
    Ok(ChildrenPlan {
        desired,
        held,
        node_auth,
        storage,
    })
}

/// Takes out of `desired` each StatefulSet smaller than its live one (see [`HeldShrink`]).
pub fn hold_shrinks(desired: &mut Vec<StatefulSet>, live: &[StatefulSet]) -> Vec<HeldShrink> {
    let replicas = |s: &StatefulSet| s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let mut held = Vec::new();
    desired.retain(|sts| {
        let Some(live) = live.iter().find(|l| l.metadata.name == sts.metadata.name) else {
            return true;
        };
        match shard_of(&sts.metadata) {
            Some(shard) if replicas(sts) < replicas(live) => {
                held.push(HeldShrink {
                    shard,
                    live_replicas: replicas(live),
                    desired: sts.clone(),
                });
                false
            }
            _ => true,
        }
    });
    held
}

/// One child to server-side apply.
#[derive(Debug, Clone, PartialEq)]
pub enum Child {
    ConfigMap(Box<ConfigMap>),
    Service(Box<Service>),
    StatefulSet(Box<StatefulSet>),
    Pdb(Box<PodDisruptionBudget>),
}

/// The children of `desired` that are not already as desired in `o` (see `crate::apply` for
/// the rule), stamped, in apply order (ConfigMap, Services, StatefulSets, PDBs); and how many
/// were up to date. Pure.
pub fn children_to_apply(desired: &Children, o: &Observed) -> (Vec<Child>, usize) {
    let mut out = Vec::new();
    let mut current = 0;
    let mut take = |c: Option<Child>| match c {
        Some(c) => out.push(c),
        None => current += 1,
    };
    take(outdated(&desired.config_map, &o.config_maps).map(|c| Child::ConfigMap(Box::new(c))));
    take(outdated(&desired.headless_service, &o.services).map(|s| Child::Service(Box::new(s))));
    take(outdated(&desired.client_service, &o.services).map(|s| Child::Service(Box::new(s))));
    for sts in &desired.stateful_sets {
        take(outdated(sts, &o.stateful_sets).map(|s| Child::StatefulSet(Box::new(s))));
    }
    for pdb in &desired.pdbs {
        take(outdated(pdb, &o.pdbs).map(|p| Child::Pdb(Box::new(p))));
    }
    (out, current)
}

/// The stamped object when the live one of its name (in `live`) is not up to date. Pure.
pub fn outdated<K>(obj: &K, live: &[K]) -> Option<K>
where
    K: Resource + serde::Serialize + Clone,
{
    let s = stamped(obj);
    let current = live
        .iter()
        .find(|l| l.meta().name.is_some() && l.meta().name == obj.meta().name);
    (!up_to_date(&s, current)).then_some(s)
}

/// Replaces (or adds) `obj` in `list` by name: the observed state after a write the API
/// answered with the object.
pub fn replace_by_name<K: Resource>(list: &mut Vec<K>, obj: K) {
    let name = obj.meta().name.clone();
    match list.iter_mut().find(|l| l.meta().name == name) {
        Some(slot) => *slot = obj,
        None => list.push(obj),
    }
}

/// The passwords of one reconcile once spec.auth's Secret was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passwords {
    /// From spec.auth's Secret (None without spec.auth).
    pub desired: Option<String>,
    /// The operator's record of the password the nodes run with (`crate::auth`).
    pub active: Option<String>,
}

impl Passwords {
    /// The observed passwords, or why spec.auth's Secret is unusable.
    pub fn from_observed(p: crate::observe::ObservedPasswords) -> Result<Passwords, SecretError> {
        Ok(Passwords {
            desired: p.desired?,
            active: p.active,
        })
    }
}

/// The engine options of this cluster: the desired password and, while a password change
/// has not reached every node, the recorded one as a fallback. Pure.
pub fn engine_options(base: &EngineOptions, p: &Passwords) -> EngineOptions {
    let mut opts = base.clone();
    if p.desired != p.active {
        opts.fallback_passwords = auth::candidates(p.desired.as_deref(), p.active.as_deref())
            .into_iter()
            .skip(1)
            .collect();
    }
    opts.password = p.desired.clone();
    opts
}

/// The pods the topology engine manages, or why it is not called yet. Pure.
pub fn topology_endpoints(
    spec: &RedisClusterSpec,
    pods: &[Pod],
    previous: Option<&RedisClusterStatus>,
) -> Result<Vec<PodEndpoint>, String> {
    let eps = endpoints(pods);
    if eps.is_empty() {
        return Err("no pod has an IP yet".into());
    }
    if !was_formed(previous) && !all_desired_started(pods, spec.shards, spec.replicas_per_shard) {
        return Err(format!(
            "waiting for all {} pods to start before forming the cluster",
            spec.desired_nodes()
        ));
    }
    Ok(eps)
}

/// A held shrink as applied after the topology step: at its new size once no pod it removes
/// is a master (`topology::shrink`), else at its live size with the reason. Pure.
pub fn shrinks(held: &[HeldShrink], known: Known<'_>) -> Vec<(StatefulSet, Option<String>)> {
    held.iter()
        .map(|h| {
            let keep = h
                .desired
                .spec
                .as_ref()
                .and_then(|s| s.replicas)
                .and_then(|r| u32::try_from(r).ok())
                .unwrap_or(0);
            match shrink_blocked(known, h.shard, keep) {
                None => (h.desired.clone(), None),
                Some(why) => {
                    let mut kept = h.desired.clone();
                    if let Some(spec) = kept.spec.as_mut() {
                        spec.replicas = Some(h.live_replicas);
                    }
                    (kept, Some(why))
                }
            }
        })
        .collect()
}

/// True when every slot is served by a shard that stays: removed shards hold nothing. Pure.
pub fn drained_cluster(report: &TopologyReport, desired_shards: u32) -> bool {
    let kept: u32 = report
        .shards
        .iter()
        .filter(|s| s.shard < desired_shards)
        .flat_map(|s| s.slot_ranges.iter())
        .map(|&(a, b)| u32::from(b.saturating_sub(a)) + 1)
        .sum();
    report.cluster_state == "ok" && kept == CLUSTER_SLOTS
}

/// Scale-in: the StatefulSets (and PDBs, same name) of removed shards to delete, once their
/// slots live elsewhere. Pure.
pub fn shards_to_remove(
    cluster: &str,
    shards: u32,
    report: &TopologyReport,
    live: &[StatefulSet],
) -> Vec<String> {
    if !drained_cluster(report, shards) {
        return Vec::new();
    }
    live.iter()
        .filter_map(|sts| shard_of(&sts.metadata).filter(|s| *s >= shards))
        .map(|shard| shard_name(cluster, shard))
        .collect()
}
