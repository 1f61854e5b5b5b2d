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
use kube::Resource;

use crate::apply::{stamped, up_to_date};
use crate::auth;
use crate::children::{self, shard_name, ChildError, Children};
use crate::crd::{Phase, RedisCluster, RedisClusterSpec, RedisClusterStatus, CLUSTER_SLOTS};
use crate::observe::{Observed, SecretError};
use crate::pods::{all_desired_started, endpoints, shard_of};
use crate::status::{was_formed, TopologyOutcome};
use crate::storage::{self, StsActions};
use tessera_topology::shrink::{shrink_blocked, Known};
use tessera_topology::{AdminLogin, EngineOptions, PodEndpoint, TopologyReport};

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

/// What to do with `<cluster>-node-auth` (the node's logins as config, `children::auth`).
#[derive(Debug, Clone, PartialEq)]
pub enum NodeAuth {
    /// Apply it (the operator's user, spec.auth's password), before the StatefulSets whose
    /// pods mount it. Every cluster has one.
    Apply(Box<Secret>),
    /// The operator's password is not known (its Secret is made before this step).
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
    let node_auth = match (
        o.passwords.as_ref().map(|p| p.desired.as_ref()),
        &o.admin_password,
    ) {
        (Some(Err(e)), _) => NodeAuth::Unreadable(e.to_string()),
        (Some(Ok(requirepass)), Some(admin)) => {
            let logins = children::auth::NodeLogins {
                admin_password: admin,
                requirepass: requirepass.as_deref(),
            };
            NodeAuth::Apply(Box::new(children::auth::build(rc, logins)?))
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
    /// The operator's own user's password (`crate::auth::admin_secret_name`), logged in with
    /// first.
    pub admin: Option<String>,
    /// spec.tls: the nodes take TLS only; the CA and certificate of `crate::tls`.
    pub tls: Option<tessera_topology::tls::TlsClient>,
}

impl Passwords {
    /// The observed passwords, or why spec.auth's Secret is unusable.
    pub fn from_observed(p: crate::observe::ObservedPasswords) -> Result<Passwords, SecretError> {
        Ok(Passwords {
            desired: p.desired?,
            active: p.active,
            admin: None,
            tls: None,
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
    opts.tls = p.tls.clone();
    opts.admin = p.admin.clone().map(|password| AdminLogin {
        user: crate::users::ADMIN_USER.to_string(),
        password,
    });
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

/// One Event to publish about the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    pub warning: bool,
    pub reason: String,
    pub action: &'static str,
    pub note: String,
    /// The pod the Event is about (its related object), so Events about different pods are
    /// Events of their own.
    pub pod: Option<String>,
}

/// Events on phase transitions, on new validation problems and for topology actions. Pure.
pub fn events(
    previous: Option<&RedisClusterStatus>,
    new: &RedisClusterStatus,
    topology: &TopologyOutcome,
    pods: &[Pod],
) -> Vec<EventSpec> {
    let mut out = Vec::new();
    let old_phase = previous.map(|s| s.phase);
    let degraded_msg = |s: &RedisClusterStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Degraded")
            .map(|c| c.message.clone())
    };
    // A still-invalid spec whose problems changed is news too.
    let new_problems = new.phase == Phase::Failed
        && old_phase == Some(Phase::Failed)
        && previous.and_then(degraded_msg) != degraded_msg(new);
    if old_phase != Some(new.phase) || new_problems {
        let ready = new.conditions.iter().find(|c| c.type_ == "Ready");
        let degraded = new.conditions.iter().find(|c| c.type_ == "Degraded");
        let (warning, note) = match new.phase {
            Phase::Failed | Phase::Degraded => (
                true,
                degraded.map(|c| c.message.clone()).unwrap_or_default(),
            ),
            _ => (false, ready.map(|c| c.message.clone()).unwrap_or_default()),
        };
        let reason = match new.phase {
            Phase::Failed => "InvalidSpec".to_string(),
            p => p.as_str().to_string(),
        };
        out.push(EventSpec {
            warning,
            reason,
            action: "Reconcile",
            note,
            pod: None,
        });
    }
    if let TopologyOutcome::Report(r) = topology {
        let names: Vec<&str> = pods
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        // Each repair names the pod it repaired first: that pod is the Event's related object.
        for repair in &r.repairs {
            let reason = if repair.starts_with("reset ") {
                "NodeReset"
            } else {
                "ReplicationRepaired"
            };
            out.push(EventSpec {
                warning: false,
                reason: reason.into(),
                action: "Repair",
                note: repair.clone(),
                pod: first_pod_named(repair, &names).map(str::to_string),
            });
        }
        for h in &r.handovers {
            out.push(EventSpec {
                warning: false,
                reason: "ScaleInFailover".into(),
                action: "Failover",
                note: h.clone(),
                pod: first_pod_named(h, &names).map(str::to_string),
            });
        }
        if !r.actions.is_empty() {
            let mut note = r
                .actions
                .iter()
                .take(10)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ");
            if r.actions.len() > 10 {
                note.push_str(&format!("; and {} more", r.actions.len() - 10));
            }
            out.push(EventSpec {
                warning: false,
                reason: "Topology".into(),
                action: "Reconfigure",
                note,
                pod: None,
            });
        }
    }
    out
}

/// The first of `pods` that `text` names, as a whole name (`demo-1-1` is not found in
/// `demo-1-10`).
pub fn first_pod_named<'a>(text: &str, pods: &[&'a str]) -> Option<&'a str> {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
    pods.iter()
        .filter(|p| !p.is_empty())
        .filter_map(|&p| {
            text.match_indices(p)
                .find(|&(i, _)| {
                    let before = text[..i].chars().next_back();
                    let after = text[i + p.len()..].chars().next();
                    !before.is_some_and(part) && !after.is_some_and(part)
                })
                .map(|(i, _)| (i, p))
        })
        .min_by_key(|&(i, _)| i)
        .map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::ObservedPasswords;
    use serde_json::json;
    use tessera_topology::ShardView;

    fn rc(spec: serde_json::Value) -> RedisCluster {
        serde_json::from_value(json!({
            "apiVersion": "tessera.rs/v1alpha1", "kind": "RedisCluster",
            "metadata": {"name": "demo", "namespace": "t", "uid": "uid-demo"},
            "spec": spec,
        }))
        .expect("rc")
    }

    fn spec(shards: u32, replicas: u32) -> serde_json::Value {
        json!({"shards": shards, "replicasPerShard": replicas, "image": "redis:7.0"})
    }

    /// The live StatefulSet of shard `shard` with `replicas` pods.
    fn live_sts(shard: u32, replicas: i32) -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": format!("demo-{shard}"),
                         "labels": {"tessera.rs/shard": shard.to_string()}},
            "spec": {"replicas": replicas, "selector": {}, "template": {}},
        }))
        .expect("sts")
    }

    fn pod(shard: u32, ordinal: u32, started: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("demo-{shard}-{ordinal}"),
                         "labels": {"tessera.rs/shard": shard.to_string()}},
            "status": {"podIP": format!("127.0.{}.{}", shard + 1, ordinal + 1),
                       "containerStatuses": [{"name": "node", "image": "", "imageID": "",
                           "ready": started, "restartCount": 0, "started": started}]},
        }))
        .expect("pod")
    }

    fn master_report(masters: &[(u32, &str)], slots: &[(u32, (u16, u16))]) -> TopologyReport {
        TopologyReport {
            cluster_state: "ok".into(),
            shards: masters
                .iter()
                .map(|&(shard, pod)| ShardView {
                    shard,
                    master_pod: Some(pod.into()),
                    slot_ranges: slots
                        .iter()
                        .filter(|(s, _)| *s == shard)
                        .map(|&(_, r)| r)
                        .collect(),
                    ..ShardView::default()
                })
                .collect(),
            ..TopologyReport::default()
        }
    }

    #[test]
    fn fewer_replicas_are_held_and_new_statefulsets_are_not() {
        let r = rc(spec(2, 1));
        let o = Observed {
            stateful_sets: vec![live_sts(0, 3)],
            ..Observed::default()
        };
        let plan = children(&r, &o).expect("plan");
        assert_eq!(plan.held.len(), 1);
        assert_eq!(
            (plan.held[0].shard, plan.held[0].live_replicas),
            (0, 3),
            "shard 0 shrinks from 3"
        );
        let names: Vec<_> = plan
            .desired
            .stateful_sets
            .iter()
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        assert_eq!(
            names,
            ["demo-1"],
            "the held one is applied after the topology step"
        );
        assert_eq!(plan.node_auth, NodeAuth::Nothing);
    }

    #[test]
    fn the_node_password_file_follows_the_observed_passwords() {
        let with_auth = rc(
            json!({"shards": 1, "replicasPerShard": 0, "image": "redis:7.0",
                                   "auth": {"secretName": "pw"}}),
        );
        let observed = |desired: Result<Option<String>, SecretError>, recorded| Observed {
            passwords: Some(ObservedPasswords {
                desired,
                active: None,
            }),
            recorded_before: recorded,
            admin_password: Some("adm".into()),
            ..Observed::default()
        };
        let conf = |p: Result<ChildrenPlan, ChildError>| match p.map(|p| p.node_auth) {
            Ok(NodeAuth::Apply(s)) => {
                assert_eq!(s.metadata.name.as_deref(), Some("demo-node-auth"));
                let data = s.data.unwrap_or_default();
                String::from_utf8(data["auth.conf"].0.clone()).expect("utf-8")
            }
            other => panic!("{other:?}"),
        };
        let with_pw = conf(children(
            &with_auth,
            &observed(Ok(Some("s3cr3t".into())), false),
        ));
        assert!(with_pw.contains("requirepass \"s3cr3t\"\n"), "{with_pw}");
        assert!(
            with_pw.contains("masteruser tessera-operator\n"),
            "{with_pw}"
        );
        let unreadable = observed(Err(SecretError::Bad("pw".into(), "no key".into())), true);
        assert!(matches!(
            children(&with_auth, &unreadable).map(|p| p.node_auth),
            Ok(NodeAuth::Unreadable(_))
        ));
        // Without spec.auth: the operator's user and the replication login only.
        let without = rc(spec(1, 0));
        let plain = conf(children(&without, &observed(Ok(None), true)));
        assert!(!plain.contains("requirepass"), "{plain}");
        assert!(plain.contains("masterauth \"adm\"\n"), "{plain}");
        let no_admin = Observed {
            admin_password: None,
            ..observed(Ok(None), false)
        };
        assert_eq!(
            children(&without, &no_admin).map(|p| p.node_auth),
            Ok(NodeAuth::Nothing)
        );
    }

    #[test]
    fn only_outdated_children_are_applied() {
        let desired = children::build(&rc(spec(2, 0))).expect("children");
        let none = Observed::default();
        let (all, current) = children_to_apply(&desired, &none);
        assert_eq!((all.len(), current), (1 + 2 + 2 + 2, 0));
        // What was applied is up to date; a drifted StatefulSet is applied again.
        let stamped_sts: Vec<StatefulSet> = desired.stateful_sets.iter().map(stamped).collect();
        let mut drifted = stamped_sts[1].clone();
        if let Some(s) = drifted.spec.as_mut() {
            s.replicas = Some(7);
        }
        let o = Observed {
            config_maps: vec![stamped(&desired.config_map)],
            services: vec![
                stamped(&desired.headless_service),
                stamped(&desired.client_service),
            ],
            stateful_sets: vec![stamped_sts[0].clone(), drifted],
            pdbs: desired.pdbs.iter().map(stamped).collect(),
            ..Observed::default()
        };
        let (apply, current) = children_to_apply(&desired, &o);
        assert_eq!(current, 6);
        match apply.as_slice() {
            [Child::StatefulSet(s)] => assert_eq!(s.metadata.name.as_deref(), Some("demo-1")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_applied_object_replaces_the_observed_one() {
        let mut list = vec![live_sts(0, 1), live_sts(1, 1)];
        replace_by_name(&mut list, live_sts(1, 2));
        replace_by_name(&mut list, live_sts(2, 1));
        let got: Vec<_> = list
            .iter()
            .map(|s| {
                (
                    s.metadata.name.clone(),
                    s.spec.as_ref().and_then(|s| s.replicas),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Some("demo-0".into()), Some(1)),
                (Some("demo-1".into()), Some(2)),
                (Some("demo-2".into()), Some(1)),
            ]
        );
    }

    #[test]
    fn the_engine_waits_for_every_pod_before_forming() {
        let s: RedisClusterSpec = serde_json::from_value(spec(1, 1)).expect("spec");
        assert_eq!(
            topology_endpoints(&s, &[], None),
            Err("no pod has an IP yet".into())
        );
        let one_started = [pod(0, 0, true), pod(0, 1, false)];
        assert!(topology_endpoints(&s, &one_started, None)
            .is_err_and(|e| e.starts_with("waiting for all 2 pods")));
        // Once formed, the pods there are enough (a pod restarting is what repair is for).
        let formed = RedisClusterStatus {
            slots_assigned: CLUSTER_SLOTS,
            ..RedisClusterStatus::default()
        };
        let eps = topology_endpoints(&s, &one_started, Some(&formed)).expect("endpoints");
        assert_eq!(eps.len(), 2);
        let both = [pod(0, 1, true), pod(0, 0, true)];
        let eps = topology_endpoints(&s, &both, None).expect("endpoints");
        assert_eq!(
            eps.iter().map(|e| e.pod.as_str()).collect::<Vec<_>>(),
            ["demo-0-0", "demo-0-1"]
        );
    }

    #[test]
    fn a_shrink_waits_for_its_master_to_move() {
        let mut desired = live_sts(0, 1);
        desired.metadata.name = Some("demo-0".into());
        let held = [HeldShrink {
            shard: 0,
            live_replicas: 2,
            desired,
        }];
        let replicas = |v: &[(StatefulSet, Option<String>)]| {
            v.iter()
                .map(|(s, why)| (s.spec.as_ref().and_then(|s| s.replicas), why.is_some()))
                .collect::<Vec<_>>()
        };
        let on_removed = master_report(&[(0, "demo-0-1")], &[]);
        assert_eq!(
            replicas(&shrinks(&held, Known::Report(&on_removed))),
            [(Some(2), true)]
        );
        assert_eq!(replicas(&shrinks(&held, Known::Failed)), [(Some(2), true)]);
        let moved = master_report(&[(0, "demo-0-0")], &[]);
        assert_eq!(
            replicas(&shrinks(&held, Known::Report(&moved))),
            [(Some(1), false)]
        );
        assert_eq!(replicas(&shrinks(&held, Known::NotRun)), [(Some(1), false)]);
    }

    #[test]
    fn removed_shards_go_once_drained() {
        let live = [live_sts(0, 1), live_sts(1, 1), live_sts(2, 1)];
        let draining = master_report(
            &[(0, "demo-0-0"), (1, "demo-1-0"), (2, "demo-2-0")],
            &[(0, (0, 8191)), (1, (8192, 16000)), (2, (16001, 16383))],
        );
        assert!(shards_to_remove("demo", 2, &draining, &live).is_empty());
        let drained = master_report(
            &[(0, "demo-0-0"), (1, "demo-1-0"), (2, "demo-2-0")],
            &[(0, (0, 8191)), (1, (8192, 16383))],
        );
        assert_eq!(shards_to_remove("demo", 2, &drained, &live), ["demo-2"]);
        let mut failing = drained.clone();
        failing.cluster_state = "fail".into();
        assert!(shards_to_remove("demo", 2, &failing, &live).is_empty());
    }

    #[test]
    fn engine_options_fall_back_to_the_recorded_password_while_they_differ() {
        let base = EngineOptions::default();
        let same = Passwords {
            desired: Some("a".into()),
            active: Some("a".into()),
            admin: None,
            tls: None,
        };
        let o = engine_options(&base, &same);
        assert_eq!(o.password.as_deref(), Some("a"));
        assert!(o.fallback_passwords.is_empty());
        let changing = Passwords {
            desired: Some("b".into()),
            active: Some("a".into()),
            admin: Some("adm".into()),
            tls: None,
        };
        let o = engine_options(&base, &changing);
        assert_eq!(o.password.as_deref(), Some("b"));
        assert_eq!(o.fallback_passwords, [Some("a".to_string()), None]);
    }

    #[test]
    fn events_say_what_changed_and_name_the_pod_repaired() {
        let status = |phase: Phase, degraded: &str| RedisClusterStatus {
            phase,
            conditions: vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: "Degraded".into(),
                status: "True".into(),
                reason: "X".into(),
                message: degraded.into(),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    "2026-01-01T00:00:00Z".parse().expect("time"),
                ),
                observed_generation: None,
            }],
            ..RedisClusterStatus::default()
        };
        let not_run = TopologyOutcome::NotRun(String::new());
        let ready = status(Phase::Ready, "");
        assert!(events(Some(&ready), &ready, &not_run, &[]).is_empty());
        let failed = status(Phase::Failed, "shards must be >= 1");
        let e = events(Some(&ready), &failed, &not_run, &[]);
        assert_eq!(
            e.iter()
                .map(|e| (e.warning, e.reason.as_str(), e.note.as_str()))
                .collect::<Vec<_>>(),
            [(true, "InvalidSpec", "shards must be >= 1")]
        );
        assert!(events(Some(&failed), &failed, &not_run, &[]).is_empty());
        let other = status(Phase::Failed, "image is empty");
        assert_eq!(events(Some(&failed), &other, &not_run, &[]).len(), 1);

        let mut r = master_report(&[(0, "demo-0-0")], &[]);
        r.repairs = vec![
            "reset demo-0-10 (a node of another cluster)".into(),
            "demo-0-1 replicates demo-0-0 again".into(),
        ];
        r.actions = (0..12).map(|i| format!("step {i}")).collect();
        let pods = [pod(0, 0, true), pod(0, 1, true), pod(0, 10, true)];
        let e = events(Some(&ready), &ready, &TopologyOutcome::Report(r), &pods);
        let got: Vec<_> = e
            .iter()
            .map(|e| (e.reason.as_str(), e.pod.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("NodeReset", Some("demo-0-10")),
                ("ReplicationRepaired", Some("demo-0-1")),
                ("Topology", None),
            ]
        );
        assert!(e[2].note.ends_with("step 9; and 2 more"), "{}", e[2].note);
    }
}
