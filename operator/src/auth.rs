//! Changing the node password without a restart.
//!
//! The nodes read their password from `spec.auth`'s Secret when they start. When the Secret's
//! content (or `spec.auth` itself) changes, restarting pods one by one cannot work: a restarted
//! replica would present the new password to a master still on the old one, and the operator
//! could no longer log in to the nodes not yet restarted. Instead the change is applied live,
//! with `CONFIG SET masterauth` on every node and then `CONFIG SET requirepass` on every node
//! (connections already open stay authenticated, as in Redis). Pods started later read the new
//! password from the Secret, so nothing else has to change.
//!
//! To log in to nodes that still run the old password, the operator keeps the password the
//! nodes run with in a Secret of its own, `<cluster>-auth-active`, owned by the RedisCluster.
//! It is updated only after every running node took the new password.
//!
//! The operator may not list or watch Secrets (that would expose every Secret of the
//! namespace), so a changed password Secret is noticed by [`secret_changes`]: every few seconds
//! it gets, by name, the Secret of each cluster with `spec.auth` and triggers a reconcile of
//! the clusters whose Secret's resourceVersion changed.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use futures::{Stream, StreamExt};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use tracing::{debug, info, instrument};

use crate::children::{owner_ref, ChildError};
use crate::crd::RedisCluster;
use tessera_topology::conn::connect_with;
use tessera_topology::{EngineOptions, PodEndpoint, TopologyError};

/// Key of the password in the operator's Secret.
pub const ACTIVE_KEY: &str = "password";

/// Name of the Secret holding the password the nodes run with.
pub fn active_secret_name(cluster: &str) -> String {
    format!("{cluster}-auth-active")
}

/// What the password step does this reconcile (pure; see [`plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthStep {
    /// The nodes run the desired password.
    InSync,
    /// Remember the desired password as the nodes' own, without talking to them: a cluster
    /// not formed yet whose pods were all started with it.
    Record,
    /// Switch every running node to the desired password (None: no password).
    Switch,
}

/// Decides the password step from the desired password (from `spec.auth`'s Secret), the one
/// recorded as active, and whether the cluster was ever formed.
pub fn plan(desired: Option<&str>, active: Option<&str>, formed: bool) -> AuthStep {
    match (desired, active) {
        (d, a) if d == a => AuthStep::InSync,
        (Some(_), None) if !formed => AuthStep::Record,
        _ => AuthStep::Switch,
    }
}

/// Passwords to try, in order, when logging in to a node: the desired one first, then the
/// recorded one, then none (a cluster that had no password before).
pub fn candidates(desired: Option<&str>, active: Option<&str>) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = Vec::new();
    for c in [desired, active, None] {
        let c = c.map(str::to_string);
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Errors of the password step.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Children(#[from] ChildError),
    #[error("active password secret: {0}")]
    BadSecret(String),
    #[error("{0}")]
    Node(#[from] TopologyError),
}

/// The password in the operator's record (`<cluster>-auth-active`, read by the observe step);
/// an error says why the record is unusable. Pure.
pub fn active_password(s: &Secret) -> Result<String, String> {
    let bytes = s
        .data
        .as_ref()
        .and_then(|d| d.get(ACTIVE_KEY))
        .map(|b| b.0.clone())
        .ok_or_else(|| format!("no key {ACTIVE_KEY:?}"))?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())
}

/// Records `password` as the nodes' own (None deletes the record).
pub async fn write_active(
    client: &Client,
    rc: &RedisCluster,
    ns: &str,
    password: Option<&str>,
) -> Result<(), AuthError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let name = active_secret_name(&rc.name_any());
    let Some(pw) = password else {
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        return Ok(());
    };
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.to_string()),
            labels: Some(BTreeMap::from([
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    "tessera-operator".to_string(),
                ),
                (crate::pods::LABEL_CLUSTER.to_string(), rc.name_any()),
            ])),
            owner_references: Some(vec![owner_ref(rc)?]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            ACTIVE_KEY.to_string(),
            ByteString(pw.as_bytes().to_vec()),
        )])),
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    api.patch(
        &name,
        &PatchParams::apply("tessera-operator").force(),
        &Patch::Apply(&secret),
    )
    .await?;
    Ok(())
}

/// Switches every node in `pods` to `desired`: masterauth on all first (it only matters when
/// a replica reconnects), then requirepass. Returns how many nodes were changed; an error
/// when a node could not be reached or refused, so the record is not updated yet.
#[instrument(skip_all, fields(nodes = pods.len()))]
pub async fn switch(
    pods: &[PodEndpoint],
    opts: &EngineOptions,
    desired: Option<&str>,
    active: Option<&str>,
) -> Result<usize, AuthError> {
    let mut o = opts.clone();
    let mut cands = candidates(desired, active).into_iter();
    o.password = cands.next().flatten();
    o.fallback_passwords = cands.collect();
    let timeout = o.command_timeout.max(Duration::from_secs(1));
    let mut stale = Vec::new();
    for p in pods {
        let (conn, used) = connect_with(&p.host, p.port, &o, timeout).await?;
        if used.as_deref() != desired {
            stale.push((p, conn));
        }
    }
    let value = desired.unwrap_or("");
    for directive in ["masterauth", "requirepass"] {
        for (p, conn) in &mut stale {
            let _: redis::Value = conn
                .run(redis::cmd("CONFIG").arg("SET").arg(directive).arg(value))
                .await?;
            info!(pod = %p.pod, directive, "password changed");
        }
    }
    Ok(stale.len())
}

/// What one poll saw of a cluster's password Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSeen {
    /// Read: its resourceVersion, or None when it does not exist.
    Version(Option<String>),
    /// The read failed: nothing is known this round (the last version is kept).
    Unknown,
}

/// The last seen version of each cluster's password Secret (by cluster and Secret name).
#[derive(Debug, Default)]
pub struct SecretVersions {
    seen: HashMap<ObjectRef<RedisCluster>, (String, Option<String>)>,
}

impl SecretVersions {
    /// Takes one poll's observations (cluster, Secret name, what was seen) and returns the
    /// clusters whose Secret changed since the last poll: created, modified, deleted, or another
    /// Secret named. A cluster seen for the first time is not returned (the controller
    /// reconciles every cluster when it starts); clusters absent from `now` are forgotten.
    pub fn update(
        &mut self,
        now: Vec<(ObjectRef<RedisCluster>, String, SecretSeen)>,
    ) -> Vec<ObjectRef<RedisCluster>> {
        let mut next = HashMap::with_capacity(now.len());
        let mut changed = Vec::new();
        for (cluster, name, seen) in now {
            let last = self.seen.get(&cluster);
            let version = match seen {
                SecretSeen::Version(v) => v,
                SecretSeen::Unknown => match last {
                    Some((n, v)) if *n == name => v.clone(),
                    // Nothing known yet: try again next round.
                    _ => continue,
                },
            };
            if last.is_some_and(|(n, v)| *n != name || *v != version) {
                changed.push(cluster.clone());
            }
            next.insert(cluster, (name, version));
        }
        self.seen = next;
        changed
    }
}

/// Every `period`, gets (by name) the password Secret of each cluster in `clusters` that has
/// `spec.auth`, and yields the clusters whose Secret changed (see [`SecretVersions::update`]).
/// Clusters without `spec.auth` cost nothing.
pub fn secret_changes(
    client: Client,
    clusters: Store<RedisCluster>,
    period: Duration,
) -> impl Stream<Item = ObjectRef<RedisCluster>> + Send + 'static {
    let state = (client, clusters, SecretVersions::default());
    futures::stream::unfold(state, move |(client, clusters, mut versions)| async move {
        tokio::time::sleep(period).await;
        let mut now = Vec::new();
        for rc in clusters.state() {
            let (Some(ns), Some(a)) = (rc.namespace(), rc.spec.auth.as_ref()) else {
                continue;
            };
            let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
            let seen = match api.get_opt(&a.secret_name).await {
                Ok(s) => SecretSeen::Version(s.and_then(|s| s.metadata.resource_version)),
                Err(e) => {
                    debug!(secret = %a.secret_name, namespace = %ns, error = %e, "password Secret not read");
                    SecretSeen::Unknown
                }
            };
            now.push((ObjectRef::from_obj(rc.as_ref()), a.secret_name.clone(), seen));
        }
        let changed = versions.update(now);
        for c in &changed {
            info!(cluster = %c, "password Secret changed");
        }
        Some((futures::stream::iter(changed), (client, clusters, versions)))
    })
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str) -> ObjectRef<RedisCluster> {
        ObjectRef::new(name).within("ns")
    }

    fn seen(v: Option<&str>) -> SecretSeen {
        SecretSeen::Version(v.map(str::to_string))
    }

    #[test]
    fn secret_versions_report_changes_only() {
        let mut sv = SecretVersions::default();
        let (a, b) = (cluster("a"), cluster("b"));
        // First sight: nothing to report.
        assert!(sv
            .update(vec![
                (a.clone(), "pw".into(), seen(Some("1"))),
                (b.clone(), "other".into(), seen(None)),
            ])
            .is_empty());
        // Unchanged: nothing.
        assert!(sv
            .update(vec![
                (a.clone(), "pw".into(), seen(Some("1"))),
                (b.clone(), "other".into(), seen(None)),
            ])
            .is_empty());
        // a's Secret modified, b's created.
        assert_eq!(
            sv.update(vec![
                (a.clone(), "pw".into(), seen(Some("2"))),
                (b.clone(), "other".into(), seen(Some("7"))),
            ]),
            vec![a.clone(), b.clone()]
        );
        // A failed read keeps the last version; the next real change is still noticed.
        assert!(sv
            .update(vec![(a.clone(), "pw".into(), SecretSeen::Unknown)])
            .is_empty());
        assert_eq!(
            sv.update(vec![(a.clone(), "pw".into(), seen(None))]),
            vec![a.clone()],
            "deleted"
        );
        // b left the poll (spec.auth removed) and came back: first sight again.
        assert!(sv
            .update(vec![(b.clone(), "other".into(), seen(Some("9")))])
            .is_empty());
        // Another Secret named.
        assert_eq!(
            sv.update(vec![(b.clone(), "new".into(), seen(Some("9")))]),
            vec![b]
        );
    }

    #[test]
    fn plan_cases() {
        assert_eq!(plan(None, None, true), AuthStep::InSync);
        assert_eq!(plan(Some("a"), Some("a"), true), AuthStep::InSync);
        assert_eq!(plan(Some("a"), None, false), AuthStep::Record);
        // A formed cluster without a record: auth added later, or a cluster from before
        // the record existed; the switch finds out which password each node has.
        assert_eq!(plan(Some("a"), None, true), AuthStep::Switch);
        assert_eq!(plan(Some("b"), Some("a"), true), AuthStep::Switch);
        assert_eq!(plan(Some("b"), Some("a"), false), AuthStep::Switch);
        assert_eq!(plan(None, Some("a"), true), AuthStep::Switch);
    }

    #[test]
    fn candidates_are_desired_then_active_then_none_without_repeats() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(candidates(Some("b"), Some("a")), vec![s("b"), s("a"), None]);
        assert_eq!(candidates(Some("a"), Some("a")), vec![s("a"), None]);
        assert_eq!(candidates(None, Some("a")), vec![None, s("a")]);
        assert_eq!(candidates(None, None), vec![None]);
    }
}
