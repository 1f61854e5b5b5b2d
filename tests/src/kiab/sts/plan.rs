//! The StatefulSet controller's pure part: from a StatefulSet and the pods it owns, the next
//! actions (create/delete by ordinal) and the status to report. No I/O, so it is unit-tested.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::kiab::kubelet::NODE_NAME;

pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// What the controller should do next.
#[derive(Debug, Clone)]
pub enum Action {
    CreatePvc(Box<PersistentVolumeClaim>),
    CreatePod(Box<Pod>),
    DeletePod { name: String, uid: Option<String> },
}

impl Action {
    /// Short human description, for logs.
    pub fn describe(&self) -> String {
        match self {
            Action::CreatePvc(p) => {
                format!("create pvc {}", p.metadata.name.as_deref().unwrap_or(""))
            }
            Action::CreatePod(p) => {
                format!("create pod {}", p.metadata.name.as_deref().unwrap_or(""))
            }
            Action::DeletePod { name, .. } => format!("delete pod {name}"),
        }
    }
}

/// Hash of a pod template, the StatefulSet "revision" (`<sts>-<hash>`). FNV-1a over the
/// template's JSON: stable across runs, unlike std's randomly seeded hasher.
pub fn revision(sts_name: &str, template: &PodTemplateSpec) -> String {
    let json = serde_json::to_string(template).unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in json.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{sts_name}-{:010x}", h & 0xff_ffff_ffff)
}

/// `web-3` of StatefulSet `web` → 3.
pub fn ordinal_of(sts_name: &str, pod_name: &str) -> Option<u32> {
    pod_name
        .strip_prefix(sts_name)?
        .strip_prefix('-')?
        .parse()
        .ok()
}

fn pod_ready(p: &Pod) -> bool {
    let Some(st) = &p.status else { return false };
    st.phase.as_deref() == Some("Running")
        && st
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn terminating(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

fn pod_revision(p: &Pod) -> Option<&str> {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REVISION_LABEL))
        .map(String::as_str)
}

pub(crate) fn owner_ref(sts: &StatefulSet) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "StatefulSet".into(),
        name: sts.metadata.name.clone().unwrap_or_default(),
        uid: sts.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// PVC name for a claim template and ordinal: `<claim>-<sts>-<i>`.
pub fn claim_name(claim: &str, sts_name: &str, ordinal: u32) -> String {
    format!("{claim}-{sts_name}-{ordinal}")
}

/// The PVCs pod `ordinal` needs.
pub fn pvcs_for(sts: &StatefulSet, ordinal: u32) -> Vec<PersistentVolumeClaim> {
    let name = sts.metadata.name.clone().unwrap_or_default();
    let spec = sts.spec.as_ref();
    let selector = spec
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default();
    let delete_with_sts = spec
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref())
        .and_then(|p| p.when_deleted.as_deref())
        == Some("Delete");
    spec.iter()
        .flat_map(|s| s.volume_claim_templates.iter().flatten())
        .map(|t| {
            let claim = t.metadata.name.clone().unwrap_or_default();
            let mut labels = selector.clone();
            labels.extend(t.metadata.labels.clone().unwrap_or_default());
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(&claim, &name, ordinal)),
                    namespace: sts.metadata.namespace.clone(),
                    labels: Some(labels),
                    annotations: t.metadata.annotations.clone(),
                    owner_references: delete_with_sts.then(|| vec![owner_ref(sts)]),
                    ..Default::default()
                },
                spec: t.spec.clone(),
                status: None,
            }
        })
        .collect()
}

/// Pod `ordinal` from `template` at revision `rev`.
pub fn new_pod(sts: &StatefulSet, template: &PodTemplateSpec, ordinal: u32, rev: &str) -> Pod {
    let sts_name = sts.metadata.name.clone().unwrap_or_default();
    let name = format!("{sts_name}-{ordinal}");
    let mut labels: BTreeMap<String, String> = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), rev.to_string());
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.hostname = Some(name.clone());
    if let Some(svc) = sts
        .spec
        .as_ref()
        .and_then(|s| s.service_name.clone())
        .filter(|s| !s.is_empty())
    {
        spec.subdomain = Some(svc);
    }
    // The box has one node; binding here stands in for the scheduler.
    spec.node_name = Some(NODE_NAME.into());
    let claims: Vec<String> = sts
        .spec
        .iter()
        .flat_map(|s| s.volume_claim_templates.iter().flatten())
        .filter_map(|t| t.metadata.name.clone())
        .collect();
    let mut volumes: Vec<Volume> = spec.volumes.take().unwrap_or_default();
    volumes.retain(|v| !claims.contains(&v.name));
    for c in &claims {
        volumes.push(Volume {
            name: c.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(c, &sts_name, ordinal),
                read_only: None,
            }),
            ..Default::default()
        });
    }
    spec.volumes = Some(volumes);
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: sts.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.clone()),
            owner_references: Some(vec![owner_ref(sts)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// Inputs of one planning pass.
pub struct PlanInput<'a> {
    pub sts: &'a StatefulSet,
    /// Pods owned by the StatefulSet.
    pub pods: &'a [Pod],
    /// Names of existing PVCs in the namespace.
    pub pvcs: &'a HashSet<String>,
    /// Template of the current revision if known (for pods below a rollout partition).
    pub current_template: Option<&'a PodTemplateSpec>,
}

/// The actions of one pass and the status to report.
pub fn plan(input: &PlanInput<'_>) -> (Vec<Action>, StatefulSetStatus) {
    let sts = input.sts;
    let name = sts.metadata.name.clone().unwrap_or_default();
    let spec = sts.spec.clone().unwrap_or_default();
    let replicas = spec.replicas.unwrap_or(1).max(0) as u32;
    let parallel = spec.pod_management_policy.as_deref() == Some("Parallel");
    let strategy = spec.update_strategy.clone().unwrap_or_default();
    let on_delete = strategy.type_.as_deref() == Some("OnDelete");
    let partition = strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.partition)
        .unwrap_or(0)
        .max(0) as u32;
    let update_rev = revision(&name, &spec.template);
    let current_rev = sts
        .status
        .as_ref()
        .and_then(|s| s.current_revision.clone())
        .unwrap_or_else(|| update_rev.clone());

    let mut by_ordinal: BTreeMap<u32, &Pod> = BTreeMap::new();
    for p in input.pods {
        if let Some(o) = p
            .metadata
            .name
            .as_deref()
            .and_then(|n| ordinal_of(&name, n))
        {
            by_ordinal.insert(o, p);
        }
    }
    let mut actions = Vec::new();
    let delete = |p: &Pod| Action::DeletePod {
        name: p.metadata.name.clone().unwrap_or_default(),
        uid: p.metadata.uid.clone(),
    };

    // 1. Replace failed pods, create missing ones (ordered: one at a time, each after the
    //    previous is Running and Ready).
    let mut blocked = false;
    for o in 0..replicas {
        match by_ordinal.get(&o) {
            Some(p) if terminating(p) => {
                if !parallel {
                    blocked = true;
                    break;
                }
            }
            Some(p) if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed") => {
                actions.push(delete(p));
                if !parallel {
                    blocked = true;
                    break;
                }
            }
            Some(p) => {
                if !parallel && !pod_ready(p) {
                    blocked = true;
                    break;
                }
            }
            None => {
                let use_current = !on_delete && o < partition && current_rev != update_rev;
                let (template, rev) = match (use_current, input.current_template) {
                    (true, Some(t)) => (t, current_rev.as_str()),
                    _ => (&spec.template, update_rev.as_str()),
                };
                for pvc in pvcs_for(sts, o) {
                    if !input
                        .pvcs
                        .contains(pvc.metadata.name.as_deref().unwrap_or(""))
                    {
                        actions.push(Action::CreatePvc(Box::new(pvc)));
                    }
                }
                actions.push(Action::CreatePod(Box::new(new_pod(sts, template, o, rev))));
                if !parallel {
                    blocked = true;
                    break;
                }
            }
        }
    }

    // 2. Scale down: highest ordinal first; ordered mode one at a time once all others are healthy.
    let condemned: Vec<&Pod> = by_ordinal
        .range(replicas..)
        .rev()
        .map(|(_, p)| *p)
        .collect();
    if parallel {
        actions.extend(
            condemned
                .iter()
                .filter(|p| !terminating(p))
                .map(|p| delete(p)),
        );
    } else if !blocked && !condemned.is_empty() {
        let any_terminating = condemned.iter().any(|p| terminating(p));
        if !any_terminating {
            actions.push(delete(condemned[0]));
        }
        blocked = true;
    }

    // 3. Rolling update: from the highest ordinal down to the partition, one pod at a time,
    //    only while every pod is Running and Ready.
    let all_healthy = (0..replicas).all(|o| {
        by_ordinal
            .get(&o)
            .is_some_and(|p| pod_ready(p) && !terminating(p))
    });
    if !on_delete && !blocked && all_healthy {
        for o in (partition..replicas).rev() {
            if let Some(p) = by_ordinal.get(&o) {
                if pod_revision(p) != Some(update_rev.as_str()) {
                    actions.push(delete(p));
                    break;
                }
            }
        }
    }

    // Status.
    let live: Vec<&Pod> = by_ordinal.values().copied().collect();
    let count = |f: &dyn Fn(&Pod) -> bool| live.iter().filter(|p| f(p)).count() as i32;
    let ready = count(&|p| pod_ready(p) && !terminating(p));
    let updated = count(&|p| pod_revision(p) == Some(update_rev.as_str()));
    let at_update = updated == replicas as i32 && live.len() == replicas as usize;
    let new_current = if at_update {
        update_rev.clone()
    } else {
        current_rev.clone()
    };
    let current = count(&|p| pod_revision(p) == Some(new_current.as_str()));
    let status = StatefulSetStatus {
        observed_generation: sts.metadata.generation,
        replicas: live.len() as i32,
        ready_replicas: Some(ready),
        available_replicas: Some(ready),
        current_replicas: Some(current),
        updated_replicas: Some(updated),
        current_revision: Some(new_current),
        update_revision: Some(update_rev),
        collision_count: Some(0),
        conditions: None,
    };
    (actions, status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sts(replicas: i32, extra: serde_json::Value) -> StatefulSet {
        let mut v = json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "sts-uid", "generation": 4},
            "spec": {
                "replicas": replicas,
                "serviceName": "web-headless",
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "node", "image": "redis:7.0"}]}
                },
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
            }
        });
        if let (Some(spec), Some(extra)) = (v["spec"].as_object_mut(), extra.as_object()) {
            for (k, x) in extra {
                spec.insert(k.clone(), x.clone());
            }
        }
        serde_json::from_value(v).expect("sts")
    }

    fn pod(s: &StatefulSet, o: u32, rev: &str, ready: bool) -> Pod {
        let tmpl = s.spec.as_ref().expect("spec").template.clone();
        let mut p = new_pod(s, &tmpl, o, rev);
        p.metadata.uid = Some(format!("pod-{o}"));
        p.status = Some(
            serde_json::from_value(json!({
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]
            }))
            .expect("status"),
        );
        p
    }

    fn run(s: &StatefulSet, pods: &[Pod]) -> (Vec<Action>, StatefulSetStatus) {
        let pvcs = HashSet::new();
        plan(&PlanInput {
            sts: s,
            pods,
            pvcs: &pvcs,
            current_template: None,
        })
    }

    fn created(a: &[Action]) -> Vec<String> {
        a.iter()
            .filter_map(|a| match a {
                Action::CreatePod(p) => p.metadata.name.clone(),
                _ => None,
            })
            .collect()
    }

    fn deleted(a: &[Action]) -> Vec<String> {
        a.iter()
            .filter_map(|a| match a {
                Action::DeletePod { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    fn rev(s: &StatefulSet) -> String {
        revision("web", &s.spec.as_ref().expect("spec").template)
    }

    #[test]
    fn ordered_creation_one_at_a_time_with_pvcs_and_identity() {
        let s = sts(3, json!({}));
        let (a, st) = run(&s, &[]);
        assert_eq!(created(&a), vec!["web-0"]);
        let pvc = a.iter().find_map(|a| match a {
            Action::CreatePvc(p) => Some(p.clone()),
            _ => None,
        });
        let pvc = pvc.expect("pvc created with the pod");
        assert_eq!(pvc.metadata.name.as_deref(), Some("data-web-0"));
        assert!(
            pvc.metadata.owner_references.is_none(),
            "PVCs are retained by default"
        );
        let p = a.iter().find_map(|a| match a {
            Action::CreatePod(p) => Some(p.clone()),
            _ => None,
        });
        let p = p.expect("pod");
        let labels = p.metadata.labels.clone().expect("labels");
        assert_eq!(labels[POD_NAME_LABEL], "web-0");
        assert_eq!(labels[POD_INDEX_LABEL], "0");
        assert_eq!(labels["app"], "web");
        let spec = p.spec.clone().expect("spec");
        assert_eq!(spec.hostname.as_deref(), Some("web-0"));
        assert_eq!(spec.subdomain.as_deref(), Some("web-headless"));
        let owner = &p.metadata.owner_references.clone().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("StatefulSet", "sts-uid", Some(true))
        );
        let vol = spec
            .volumes
            .expect("volumes")
            .into_iter()
            .find(|v| v.name == "data")
            .expect("data volume");
        assert_eq!(
            vol.persistent_volume_claim.expect("pvc").claim_name,
            "data-web-0"
        );
        assert_eq!(st.replicas, 0);
        assert_eq!(st.observed_generation, Some(4));

        let r = rev(&s);
        let (a, _) = run(&s, &[pod(&s, 0, &r, false)]);
        assert!(a.is_empty(), "waits for web-0 to be Ready: {a:?}");
        let (a, st) = run(&s, &[pod(&s, 0, &r, true)]);
        assert_eq!(created(&a), vec!["web-1"]);
        assert_eq!((st.replicas, st.ready_replicas), (1, Some(1)));
    }

    #[test]
    fn parallel_creates_and_deletes_at_once() {
        let s = sts(3, json!({"podManagementPolicy": "Parallel"}));
        assert_eq!(created(&run(&s, &[]).0), vec!["web-0", "web-1", "web-2"]);
        let r = rev(&s);
        let s1 = sts(1, json!({"podManagementPolicy": "Parallel"}));
        let pods: Vec<Pod> = (0..3).map(|o| pod(&s, o, &r, true)).collect();
        assert_eq!(deleted(&run(&s1, &pods).0), vec!["web-2", "web-1"]);
    }

    #[test]
    fn ordered_scale_down_deletes_highest_ordinal_only() {
        let s3 = sts(3, json!({}));
        let r = rev(&s3);
        let pods: Vec<Pod> = (0..3).map(|o| pod(&s3, o, &r, true)).collect();
        let s1 = sts(1, json!({}));
        assert_eq!(deleted(&run(&s1, &pods).0), vec!["web-2"]);
        let mut term = pods.clone();
        term[2].metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        assert!(
            deleted(&run(&s1, &term).0).is_empty(),
            "waits for web-2 to go"
        );
    }

    #[test]
    fn rolling_update_honours_partition_and_on_delete() {
        let old = sts(3, json!({}));
        let old_rev = rev(&old);
        let pods: Vec<Pod> = (0..3).map(|o| pod(&old, o, &old_rev, true)).collect();
        let mut new = sts(
            3,
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}}),
        );
        if let Some(spec) = new.spec.as_mut() {
            spec.template.metadata.as_mut().expect("md").annotations =
                Some([("v".to_string(), "2".to_string())].into());
        }
        new.status = Some(StatefulSetStatus {
            current_revision: Some(old_rev.clone()),
            ..Default::default()
        });
        let new_rev = rev(&new);
        assert_ne!(old_rev, new_rev);
        let (a, st) = run(&new, &pods);
        assert_eq!(deleted(&a), vec!["web-2"]);
        assert_eq!(st.update_revision.as_deref(), Some(new_rev.as_str()));
        assert_eq!(st.current_revision.as_deref(), Some(old_rev.as_str()));
        let mut p2 = pods.clone();
        p2[2] = pod(&new, 2, &new_rev, true);
        let (a, st) = run(&new, &p2);
        assert_eq!(deleted(&a), vec!["web-1"]);
        assert_eq!(
            (st.updated_replicas, st.current_replicas),
            (Some(1), Some(2))
        );
        p2[1] = pod(&new, 1, &new_rev, true);
        assert!(
            deleted(&run(&new, &p2).0).is_empty(),
            "partition keeps web-0"
        );

        let mut ondel = new.clone();
        if let Some(spec) = ondel.spec.as_mut() {
            spec.update_strategy = serde_json::from_value(json!({"type": "OnDelete"})).ok();
        }
        assert!(run(&ondel, &pods).0.is_empty());
        // All pods at the new revision: currentRevision follows.
        let all: Vec<Pod> = (0..3).map(|o| pod(&new, o, &new_rev, true)).collect();
        let (_, st) = run(&new, &all);
        assert_eq!(st.current_revision.as_deref(), Some(new_rev.as_str()));
        assert_eq!(st.current_replicas, Some(3));
    }

    #[test]
    fn failed_pod_is_replaced() {
        let s = sts(2, json!({}));
        let r = rev(&s);
        let mut p0 = pod(&s, 0, &r, false);
        if let Some(st) = p0.status.as_mut() {
            st.phase = Some("Failed".into());
        }
        assert_eq!(deleted(&run(&s, &[p0]).0), vec!["web-0"]);
        assert_eq!(ordinal_of("web", "web-12"), Some(12));
        assert_eq!(ordinal_of("web", "webx-1"), None);
        assert_eq!(ordinal_of("web", "web-1-0"), None);
    }
}
