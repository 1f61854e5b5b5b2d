//! The observe step: everything one reconcile needs from the API, read once, into a plain
//! [`Observed`] value. The steps after it (`crate::steps`, `crate::storage::plan_all`,
//! `crate::auth::plan`, `crate::restart::plan`, `crate::status::compute`) are pure functions
//! of the spec, this value and the topology engine's report; the controller executes what they
//! return. The RedisCluster itself comes from the controller's watch cache; the topology
//! engine reads the nodes (CLUSTER NODES/INFO) itself.
//!
//! Secrets are read by name only (RBAC grants no list or watch): spec.auth's and the
//! operator's record `<cluster>-auth-active`, the latter only for a cluster with spec.auth or
//! a record left to clear.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use crate::auth;
use crate::children::auth::node_auth_secret_name;
use crate::crd::RedisCluster;
use crate::pods::LABEL_CLUSTER;
use crate::storage::CLAIM_TEMPLATE;

/// Why the observe step could not read what the reconcile needs.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// The operator's record of the nodes' password is there but unusable.
    #[error("active password secret: {0}")]
    ActiveSecret(String),
    /// The operator's own password Secret is there but unusable (it is never replaced).
    #[error("operator password secret: {0}")]
    AdminSecret(String),
}

/// spec.auth's password Secret could not be used. Kept in [`Observed`] rather than failing the
/// observe step: the children are still applied, then the password step reports it.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// Reading it failed (404: it does not exist; 403: RBAC).
    #[error("auth secret {0}: {1}")]
    Api(String, #[source] kube::Error),
    /// It is there but unusable (no such key, not UTF-8).
    #[error("auth secret {0}: {1}")]
    Bad(String, String),
}

/// The passwords of one reconcile, as read.
#[derive(Debug)]
pub struct ObservedPasswords {
    /// From spec.auth's Secret (None without spec.auth).
    pub desired: Result<Option<String>, SecretError>,
    /// The operator's record of the password the nodes run with (`crate::auth`).
    pub active: Option<String>,
}

/// Everything one reconcile reads from the API. Plain data: no clients inside.
#[derive(Debug, Default)]
pub struct Observed {
    /// The cluster's StatefulSets (label `tessera.rs/cluster=<name>`).
    pub stateful_sets: Vec<StatefulSet>,
    /// The cluster's pods.
    pub pods: Vec<Pod>,
    /// Children compared with the desired ones before applying (read for a valid spec only).
    pub config_maps: Vec<ConfigMap>,
    pub services: Vec<Service>,
    pub pdbs: Vec<PodDisruptionBudget>,
    /// The cluster's claims, read only when storage matters (spec.storage, or a live
    /// StatefulSet with a data claim template) and the spec is valid.
    pub claims: Vec<PersistentVolumeClaim>,
    /// The nodes may run a password the operator recorded: status.passwordRecorded, or a live
    /// StatefulSet whose pods mount `<cluster>-node-auth` (a status from before that field).
    pub recorded_before: bool,
    /// Read for a valid spec only (None otherwise).
    pub passwords: Option<ObservedPasswords>,
    /// The operator's own password (`<cluster>-operator-admin`), None when that Secret does
    /// not exist yet (read for a valid spec only).
    pub admin_password: Option<String>,
    /// The password of each spec.users entry, by user name, or why it could not be read.
    pub user_passwords: std::collections::BTreeMap<String, Result<String, String>>,
    /// spec.tls's Secret, or why it cannot be used (None without spec.tls or for an invalid
    /// spec).
    pub tls: Option<Result<crate::tls::Material, String>>,
}

/// The label selector of a cluster's children and pods.
pub fn selector(cluster: &str) -> ListParams {
    ListParams::default().labels(&format!("{LABEL_CLUSTER}={cluster}"))
}

/// Reads everything the reconcile of `rc` needs, once. `valid`: the spec passed validation
/// (an invalid spec is applied nothing, so its children, claims and Secrets are not read).
pub async fn observe(
    client: &Client,
    rc: &RedisCluster,
    ns: &str,
    valid: bool,
) -> Result<Observed, ObserveError> {
    let name = rc.name_any();
    let sel = selector(&name);
    let mut o = Observed {
        stateful_sets: Api::<StatefulSet>::namespaced(client.clone(), ns)
            .list(&sel)
            .await?
            .items,
        pods: Api::<Pod>::namespaced(client.clone(), ns)
            .list(&sel)
            .await?
            .items,
        ..Observed::default()
    };
    o.recorded_before = rc.status.as_ref().is_some_and(|s| s.password_recorded)
        || mounts_node_auth(&o.stateful_sets, &name);
    if !valid {
        return Ok(o);
    }
    o.config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list(&sel)
        .await?
        .items;
    o.services = Api::<Service>::namespaced(client.clone(), ns)
        .list(&sel)
        .await?
        .items;
    o.pdbs = Api::<PodDisruptionBudget>::namespaced(client.clone(), ns)
        .list(&sel)
        .await?
        .items;
    if storage_matters(rc, &o.stateful_sets) {
        o.claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
            .list(&sel)
            .await?
            .items;
    }
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    let desired = match &rc.spec.auth {
        Some(a) => match secrets.get(&a.secret_name).await {
            Ok(s) => password_of(&s, &a.key).map(Some),
            Err(e) => Err(SecretError::Api(a.secret_name.clone(), e)),
        },
        None => Ok(None),
    };
    let active = if rc.spec.auth.is_some() || o.recorded_before {
        match secrets.get_opt(&auth::active_secret_name(&name)).await? {
            Some(s) => Some(auth::active_password(&s).map_err(ObserveError::ActiveSecret)?),
            None => None,
        }
    } else {
        None
    };
    o.passwords = Some(ObservedPasswords { desired, active });
    o.tls = crate::tls::observe(client, rc, ns).await;
    o.admin_password = match secrets.get_opt(&auth::admin_secret_name(&name)).await? {
        Some(s) => Some(auth::active_password(&s).map_err(ObserveError::AdminSecret)?),
        None => None,
    };
    for u in &rc.spec.users {
        // `default` has none: its password is spec.auth's.
        let Some(r) = &u.password_secret else {
            continue;
        };
        let pw = match secrets.get(&r.name).await {
            Ok(s) => password_of(&s, &r.key).map_err(|e| e.to_string()),
            Err(e) => Err(format!("secret {}: {e}", r.name)),
        };
        o.user_passwords.insert(u.name.clone(), pw);
    }
    Ok(o)
}

/// The password under `key` of spec.auth's Secret (`data`, else `stringData`). Pure.
pub fn password_of(s: &Secret, key: &str) -> Result<String, SecretError> {
    let name = s.name_any();
    let bytes = s
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.clone())
        .or_else(|| {
            s.string_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|v| v.clone().into_bytes())
        })
        .ok_or_else(|| SecretError::Bad(name.clone(), format!("no key {key:?}")))?;
    String::from_utf8(bytes).map_err(|_| SecretError::Bad(name, "password is not UTF-8".into()))
}

/// True when claims matter to this reconcile: the spec asks for storage or a live
/// StatefulSet has a data claim template (`crate::storage`). Pure.
pub fn storage_matters(rc: &RedisCluster, live: &[StatefulSet]) -> bool {
    rc.spec.storage.is_some()
        || live.iter().any(|s| {
            s.spec
                .as_ref()
                .and_then(|s| s.volume_claim_templates.as_ref())
                .is_some_and(|ts| {
                    ts.iter()
                        .any(|t| t.metadata.name.as_deref() == Some(CLAIM_TEMPLATE))
                })
        })
}

/// True when a live StatefulSet's pods were started with spec.auth's password: they mount
/// `<cluster>-node-auth` and get the password's env var (every pod mounts the file now, for
/// the operator's user; only spec.auth adds the env var), so a record of it may exist even
/// where the status does not say so (a status written before `passwordRecorded` existed).
/// Pure.
pub fn mounts_node_auth(stateful_sets: &[StatefulSet], cluster: &str) -> bool {
    let secret = node_auth_secret_name(cluster);
    stateful_sets.iter().any(|sts| {
        let pod = sts.spec.as_ref().and_then(|s| s.template.spec.as_ref());
        let mounts = pod.and_then(|p| p.volumes.as_ref()).is_some_and(|vs| {
            vs.iter().any(|v| {
                v.secret
                    .as_ref()
                    .is_some_and(|s| s.secret_name.as_deref() == Some(secret.as_str()))
            })
        });
        let env = pod.is_some_and(|p| {
            p.containers.iter().any(|c| {
                c.env
                    .iter()
                    .flatten()
                    .any(|e| e.name == crate::children::statefulset::PASSWORD_ENV)
            })
        });
        mounts && env
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(v: serde_json::Value) -> Secret {
        serde_json::from_value(v).expect("secret")
    }

    #[test]
    fn the_password_comes_from_data_then_string_data() {
        let s = secret(json!({"metadata": {"name": "pw"}, "data": {"password": "czNjcjN0"}}));
        assert_eq!(password_of(&s, "password").ok(), Some("s3cr3t".into()));
        let s = secret(json!({"metadata": {"name": "pw"}, "stringData": {"pass": "x"}}));
        assert_eq!(password_of(&s, "pass").ok(), Some("x".into()));
        let err = password_of(&s, "password").map_err(|e| e.to_string());
        assert_eq!(err, Err("auth secret pw: no key \"password\"".into()));
        let s = secret(json!({"metadata": {"name": "pw"}, "data": {"password": "/w=="}}));
        assert!(matches!(
            password_of(&s, "password"),
            Err(SecretError::Bad(..))
        ));
    }

    #[test]
    fn claims_and_the_password_record_matter_only_when_a_pod_may_use_them() {
        let rc: RedisCluster = serde_json::from_value(json!({
            "apiVersion": "tessera.rs/v1alpha1", "kind": "RedisCluster",
            "metadata": {"name": "demo", "namespace": "t", "uid": "u"},
            "spec": {"shards": 1, "replicasPerShard": 0, "image": "redis:7.0"},
        }))
        .expect("rc");
        let plain: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "demo-0"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [],
                "volumes": [{"name": "config", "configMap": {"name": "demo-config"}}]}}},
        }))
        .expect("sts");
        assert!(!storage_matters(&rc, std::slice::from_ref(&plain)));
        assert!(!mounts_node_auth(std::slice::from_ref(&plain), "demo"));
        let with_both: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "demo-0"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "node",
                    "env": [{"name": "REDIS_PASSWORD", "value": "x"}]}],
                "volumes": [{"name": "auth", "secret": {"secretName": "demo-node-auth"}}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}}]},
        }))
        .expect("sts");
        // Every pod mounts the file now (the operator's user); without spec.auth's env var
        // the nodes were never given a password.
        let no_auth: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "demo-0"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "node",
                    "env": [{"name": "POD_IP", "value": "x"}]}],
                "volumes": [{"name": "auth", "secret": {"secretName": "demo-node-auth"}}]}}},
        }))
        .expect("sts");
        assert!(!mounts_node_auth(std::slice::from_ref(&no_auth), "demo"));
        assert!(storage_matters(&rc, std::slice::from_ref(&with_both)));
        assert!(mounts_node_auth(std::slice::from_ref(&with_both), "demo"));
        assert!(!mounts_node_auth(std::slice::from_ref(&with_both), "other"));
    }
}
