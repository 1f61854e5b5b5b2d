//! PodDisruptionBudgets: a small disruption controller that keeps each budget's status
//! (expected/current/desired healthy pods, disruptionsAllowed) up to date from the pods it
//! selects, and the `pods/{name}/eviction` subresource that honours it (what `kubectl drain`
//! uses). expectedPods comes from the selected pods' controllers' scale (like the real
//! controller), or is the selected pod count for pods without one.

use super::error::ApiError;
use super::meta::{meta_str, now_rfc3339};
use super::ops::{self, DeleteOpts, Propagation, Sub, WriteOpts};
use super::registry::{GroupResource, ResourceType};
use super::selectors::LabelSelector;
use super::store::{Store, Txn};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;
use tracing::warn;

fn pods_gr() -> GroupResource {
    GroupResource::new("", "pods")
}

fn pdb_gr() -> GroupResource {
    GroupResource::new("policy", "poddisruptionbudgets")
}

fn pdb_type(t: &Txn<'_>) -> Option<ResourceType> {
    t.registry().by_resource(&pdb_gr()).cloned()
}

fn ready(pod: &Value) -> bool {
    meta_str(pod, "deletionTimestamp").is_none()
        && pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.get("type") == Some(&json!("Ready"))
                        && c.get("status") == Some(&json!("True"))
                })
            })
}

/// An int-or-percent against `total` (percentages round up, as the real controller does).
fn scaled(v: &Value, total: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let p: i64 = s.strip_suffix('%')?.parse().ok()?;
            Some((p * total + 99) / 100)
        }
        _ => None,
    }
}

fn selected<'a>(pdb: &Value, pods: &'a [Value]) -> Vec<&'a Value> {
    let Some(sel) = pdb.pointer("/spec/selector") else {
        return vec![];
    };
    let sel = LabelSelector::from_object(sel);
    pods.iter().filter(|p| sel.matches(p)).collect()
}

/// Expected pods: the replicas of the selected pods' controllers (found through their
/// controller ownerReference and the owner kind's scale path), else the selected pod count.
fn expected_pods(t: &Txn<'_>, ns: &str, sel: &[&Value]) -> i64 {
    let mut owners: Vec<(String, String, String)> = vec![];
    for p in sel {
        let refs = p
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array);
        if let Some(r) = refs
            .into_iter()
            .flatten()
            .find(|r| r.get("controller") == Some(&json!(true)))
        {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let key = (s("apiVersion"), s("kind"), s("name"));
            if !owners.contains(&key) {
                owners.push(key);
            }
        }
    }
    let mut total = 0;
    for (av, kind, name) in &owners {
        let replicas = t.registry().by_kind(av, kind).and_then(|rt| {
            let path = rt.scale.as_ref()?.spec_replicas.clone();
            let owner = t.get(&GroupResource::new(&rt.group, &rt.plural), ns, name)?;
            super::meta::get_path(owner, &path)?.as_i64()
        });
        match replicas {
            Some(r) => total += r,
            None => return sel.len() as i64,
        }
    }
    if owners.is_empty() {
        sel.len() as i64
    } else {
        total
    }
}

/// The status a budget should have now (keeping its disruptedPods bookkeeping).
fn status_for(t: &Txn<'_>, pdb: &Value, pods: &[Value]) -> Value {
    let sel = selected(pdb, pods);
    let expected = expected_pods(t, meta_str(pdb, "namespace").unwrap_or(""), &sel);
    let healthy = sel.iter().filter(|p| ready(p)).count() as i64;
    let desired = if let Some(min) = pdb.pointer("/spec/minAvailable") {
        scaled(min, expected).unwrap_or(expected)
    } else if let Some(max) = pdb.pointer("/spec/maxUnavailable") {
        (expected - scaled(max, expected).unwrap_or(0)).max(0)
    } else {
        expected
    };
    // Pods evicted but not yet gone still count against the budget.
    let disrupted = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let pending = disrupted
        .keys()
        .filter(|name| {
            sel.iter().any(|p| {
                meta_str(p, "name") == Some(name.as_str())
                    && meta_str(p, "deletionTimestamp").is_none()
            })
        })
        .count() as i64;
    let allowed = (healthy - desired - pending).max(0);
    let old_cond = pdb
        .pointer("/status/conditions/0")
        .cloned()
        .unwrap_or(Value::Null);
    let status = if allowed > 0 { "True" } else { "False" };
    let cond = if old_cond.get("status") == Some(&json!(status)) {
        old_cond
    } else {
        json!({"type": "DisruptionAllowed", "status": status,
               "reason": if allowed > 0 { "SufficientPods" } else { "InsufficientPods" },
               "message": "", "lastTransitionTime": now_rfc3339(),
               "observedGeneration": pdb.pointer("/metadata/generation").cloned().unwrap_or(json!(1))})
    };
    let kept: serde_json::Map<String, Value> = disrupted
        .into_iter()
        .filter(|(name, _)| {
            sel.iter().any(|p| {
                meta_str(p, "name") == Some(name.as_str())
                    && meta_str(p, "deletionTimestamp").is_none()
            })
        })
        .collect();
    let mut st = json!({
        "observedGeneration": pdb.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        "expectedPods": expected, "currentHealthy": healthy, "desiredHealthy": desired,
        "disruptionsAllowed": allowed, "conditions": [cond],
    });
    if !kept.is_empty() {
        st["disruptedPods"] = Value::Object(kept);
    }
    st
}

/// Recomputes every budget of `ns` and writes the ones whose status changed.
fn refresh(t: &mut Txn<'_>, ns: &str) {
    let Some(rt) = pdb_type(t) else { return };
    let pods = t.list(&pods_gr(), Some(ns));
    for pdb in t.list(&pdb_gr(), Some(ns)) {
        let st = status_for(t, &pdb, &pods);
        if pdb.get("status") == Some(&st) {
            continue;
        }
        let mut new = pdb.clone();
        new["status"] = st;
        let opts = WriteOpts {
            field_manager: Some("kube-controller-manager".into()),
            ..WriteOpts::default()
        };
        if let Err(e) = ops::finish_update(t, &rt, &pdb, new, Sub::Status, &opts) {
            warn!(error = %e, "pdb status update failed");
        }
    }
}

/// Keeps budget statuses current until shutdown.
pub(crate) async fn run(store: Store, mut shutdown: watch::Receiver<bool>) {
    let mut rx = store.subscribe();
    loop {
        let ns = tokio::select! {
            ev = rx.recv() => match ev {
                Ok(ev) if ev.gr == pods_gr() || ev.gr == pdb_gr() => Some(ev.namespace.clone()),
                Ok(_) => continue,
                Err(RecvError::Lagged(_)) => None,
                Err(RecvError::Closed) => return,
            },
            _ = tokio::time::sleep(Duration::from_secs(10)) => None,
            _ = shutdown.changed() => return,
        };
        let _ = store.transact(|t| {
            let namespaces: Vec<String> = match ns {
                Some(n) => vec![n],
                None => t
                    .list(&GroupResource::new("", "namespaces"), None)
                    .iter()
                    .filter_map(|n| meta_str(n, "name").map(String::from))
                    .collect(),
            };
            for n in namespaces {
                refresh(t, &n);
            }
            Ok(())
        });
    }
}

/// `POST pods/{name}/eviction`: deletes the pod unless a budget forbids it (429).
pub(crate) fn evict(store: &Store, ns: &str, name: &str, body: &Value) -> Result<Value, ApiError> {
    store.transact(|t| {
        let pod = t
            .get(&pods_gr(), ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found("pods", "", name))?;
        let pod_rt = t
            .registry()
            .by_resource(&pods_gr())
            .cloned()
            .ok_or_else(|| ApiError::internal("pods not registered"))?;
        let pods = t.list(&pods_gr(), Some(ns));
        let budgets: Vec<Value> = t
            .list(&pdb_gr(), Some(ns))
            .into_iter()
            .filter(|b| selected(b, std::slice::from_ref(&pod)).len() == 1)
            .collect();
        if budgets.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        let dopts = body.get("deleteOptions").cloned().unwrap_or(json!({}));
        let opts = DeleteOpts {
            propagation: Propagation::Background,
            grace_seconds: dopts.get("gracePeriodSeconds").and_then(Value::as_i64),
            dry_run: dopts
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|x| x == "All")),
            ..DeleteOpts::default()
        };
        if let (Some(b), true) = (budgets.first(), ready(&pod)) {
            let st = status_for(t, b, &pods);
            let allowed = st["disruptionsAllowed"].as_i64().unwrap_or(0);
            if allowed < 1 {
                let bname = meta_str(b, "name").unwrap_or("");
                let mut e = ApiError::new(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                );
                e.details = Some(json!({"causes": [{"reason": "DisruptionBudget", "message": format!(
                    "The disruption budget {bname} needs {} healthy pods and has {} currently",
                    st["desiredHealthy"], st["currentHealthy"])}]}));
                return Err(e);
            }
            if !opts.dry_run {
                let rt = pdb_type(t).ok_or_else(|| ApiError::internal("pdbs not registered"))?;
                let mut new = b.clone();
                let mut st = st;
                st["disruptionsAllowed"] = json!(allowed - 1);
                st["disruptedPods"][name] = json!(now_rfc3339());
                new["status"] = st;
                ops::finish_update(t, &rt, b, new, Sub::Status, &WriteOpts::default())?;
            }
        }
        ops::delete_in(t, &pod_rt, pod, &opts)?;
        Ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}))
    })
}
