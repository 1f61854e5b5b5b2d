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
use tessera_topology::conn::{connect_with, Login, NodeConn};
use tessera_topology::{EngineOptions, PodEndpoint, TopologyError};

/// Key of the password in the operator's Secret.
pub const ACTIVE_KEY: &str = "password";

/// Name of the Secret holding the password the nodes run with.
pub fn active_secret_name(cluster: &str) -> String {
    format!("{cluster}-auth-active")
}

/// Name of the Secret holding the operator's own password (`crate::users::ADMIN_USER`, key
/// [`ACTIVE_KEY`]): made once, never regenerated while it exists.
pub fn admin_secret_name(cluster: &str) -> String {
    format!("{cluster}-operator-admin")
}

/// An operator-owned Secret of cluster `rc` holding one password under [`ACTIVE_KEY`]
/// (the nodes' active password, the operator user's password).
fn password_secret(
    rc: &RedisCluster,
    ns: &str,
    name: &str,
    password: Vec<u8>,
) -> Result<Secret, AuthError> {
    Ok(Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
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
            ByteString(password),
        )])),
        type_: Some("Opaque".into()),
        ..Default::default()
    })
}

/// A new password for the operator's user: 32 random bytes, hex.
pub fn new_admin_password() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates `<cluster>-operator-admin` with a new password, owned by the RedisCluster, and
/// returns the password it holds: the existing one when another writer created it first
/// (create, not apply: an existing password is never replaced).
pub async fn create_admin(
    client: &Client,
    rc: &RedisCluster,
    ns: &str,
) -> Result<String, AuthError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let name = admin_secret_name(&rc.name_any());
    let secret = password_secret(rc, ns, &name, new_admin_password().into_bytes())?;
    let made = match api.create(&kube::api::PostParams::default(), &secret).await {
        Ok(s) => s,
        Err(kube::Error::Api(e)) if e.code == 409 => api.get(&name).await?,
        Err(e) => return Err(e.into()),
    };
    info!(secret = %name, "operator user's password Secret created");
    active_password(&made).map_err(AuthError::BadSecret)
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
    let secret = password_secret(rc, ns, &name, pw.as_bytes().to_vec())?;
    api.patch(
        &name,
        &PatchParams::apply("tessera-operator").force(),
        &Patch::Apply(&secret),
    )
    .await?;
    Ok(())
}

/// What one node needs for the switch to `desired` (pure): nothing when it runs it already,
/// else `requirepass`, and `masterauth` before it unless the node's replicas log in as the
/// operator's user (`masteruser`, see `crate::users`: `masterauth` is that user's password
/// then). `requirepass` is the node's CONFIG GET value, read when logged in as the operator's
/// user; otherwise the password the node took tells.
pub fn switch_directives(
    login: &Login,
    requirepass: Option<&str>,
    masteruser: &str,
    desired: Option<&str>,
) -> Vec<&'static str> {
    let runs = match login {
        Login::Admin => requirepass.unwrap_or("") == desired.unwrap_or(""),
        Login::Default(pw) => pw.as_deref() == desired,
    };
    if runs {
        Vec::new()
    } else if masteruser == crate::users::ADMIN_USER {
        vec!["requirepass"]
    } else {
        vec!["masterauth", "requirepass"]
    }
}

/// A CONFIG GET value (RESP2: `[name, value]`), empty when unset.
async fn config_get(conn: &mut NodeConn, name: &str) -> Result<String, AuthError> {
    let v: Vec<String> = conn.run(redis::cmd("CONFIG").arg("GET").arg(name)).await?;
    Ok(v.get(1).cloned().unwrap_or_default())
}

/// Switches every node in `pods` to `desired`: masterauth on all first (it only matters when
/// a replica reconnects), then requirepass (see [`switch_directives`]). Returns how many nodes
/// were changed; an error when a node could not be reached or refused, so the record is not
/// updated yet.
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
        let (mut conn, login) = connect_with(&p.host, p.port, &o, timeout).await?;
        let requirepass = match login {
            Login::Admin => Some(config_get(&mut conn, "requirepass").await?),
            Login::Default(_) => None,
        };
        let masteruser = config_get(&mut conn, "masteruser").await?;
        let todo = switch_directives(&login, requirepass.as_deref(), &masteruser, desired);
        if !todo.is_empty() {
            stale.push((p, conn, todo));
        }
    }
    let value = desired.unwrap_or("");
    for directive in ["masterauth", "requirepass"] {
        for (p, conn, todo) in &mut stale {
            if !todo.contains(&directive) {
                continue;
            }
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
    /// Secret named. A cluster seen for the first time is returned too: its Secret may have
    /// changed between the cluster's creation and this first poll (a cluster formed in a
    /// second and its password changed at once lost the change), and one extra reconcile
    /// finds out. Clusters absent from `now` are forgotten.
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
            if last.is_none_or(|(n, v)| *n != name || *v != version) {
                changed.push(cluster.clone());
            }
            next.insert(cluster, (name, version));
        }
        self.seen = next;
        changed
    }
}

/// Every `period`, gets (by name) the password Secrets of each cluster in `clusters` (spec.auth's
/// and spec.users'), and yields the clusters whose Secret changed (see [`SecretVersions::update`]).
/// Clusters without either cost nothing.
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
            let Some(ns) = rc.namespace() else {
                continue;
            };
            // spec.auth's Secret and each spec.users Secret, polled as one: the names joined,
            // their versions joined (a change to any of them is a change).
            // spec.tls's Secret too: a renewed certificate is reloaded on the nodes.
            let tls = rc
                .spec
                .tls
                .as_ref()
                .map(|t| crate::tls::secret_name(&rc.name_any(), t));
            let names: Vec<&str> = rc
                .spec
                .auth
                .iter()
                .map(|a| a.secret_name.as_str())
                .chain(
                    rc.spec
                        .users
                        .iter()
                        .filter_map(|u| u.password_secret.as_ref())
                        .map(|r| r.name.as_str()),
                )
                .chain(tls.as_deref())
                .collect();
            if names.is_empty() {
                continue;
            }
            let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
            let mut versions = Vec::with_capacity(names.len());
            let mut seen = None;
            for name in &names {
                match api.get_opt(name).await {
                    Ok(s) => versions.push(
                        s.and_then(|s| s.metadata.resource_version)
                            .unwrap_or_else(|| "-".into()),
                    ),
                    Err(e) => {
                        debug!(secret = %name, namespace = %ns, error = %e, "password Secret not read");
                        seen = Some(SecretSeen::Unknown);
                        break;
                    }
                }
            }
            let seen = seen.unwrap_or_else(|| SecretSeen::Version(Some(versions.join(","))));
            now.push((ObjectRef::from_obj(rc.as_ref()), names.join(","), seen));
        }
        let changed = versions.update(now);
        for c in &changed {
            info!(cluster = %c, "password or TLS Secret changed");
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
        // First sight: reported, as the Secret may have changed before it.
        assert_eq!(
            sv.update(vec![
                (a.clone(), "pw".into(), seen(Some("1"))),
                (b.clone(), "other".into(), seen(None)),
            ]),
            vec![a.clone(), b.clone()]
        );
        // A first read that fails reports nothing until a read succeeds.
        let c = cluster("c");
        assert!(sv
            .update(vec![
                (a.clone(), "pw".into(), seen(Some("1"))),
                (b.clone(), "other".into(), seen(None)),
                (c.clone(), "pw".into(), SecretSeen::Unknown),
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
        assert_eq!(
            sv.update(vec![(b.clone(), "other".into(), seen(Some("9")))]),
            vec![b.clone()]
        );
        // Another Secret named.
        assert_eq!(
            sv.update(vec![(b.clone(), "new".into(), seen(Some("9")))]),
            vec![b]
        );
    }

    #[test]
    fn admin_passwords_are_64_hex_digits_and_differ() {
        let (a, b) = (new_admin_password(), new_admin_password());
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(admin_secret_name("demo"), "demo-operator-admin");
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
    fn the_switch_leaves_masterauth_to_the_operators_user() {
        let admin = Login::Admin;
        let old = Login::Default(Some("a".into()));
        // Logged in as the operator's user: CONFIG GET requirepass tells.
        assert!(switch_directives(&admin, Some("b"), "tessera-operator", Some("b")).is_empty());
        assert!(switch_directives(&admin, Some(""), "", None).is_empty());
        assert_eq!(
            switch_directives(&admin, Some("a"), "tessera-operator", Some("b")),
            vec!["requirepass"]
        );
        assert_eq!(
            switch_directives(&admin, Some("a"), "tessera-operator", None),
            vec!["requirepass"]
        );
        // An older pod (no masteruser): both, as before.
        assert_eq!(
            switch_directives(&old, None, "", Some("b")),
            vec!["masterauth", "requirepass"]
        );
        assert!(switch_directives(&old, None, "", Some("a")).is_empty());
        assert_eq!(
            switch_directives(&old, None, "tessera-operator", Some("b")),
            vec!["requirepass"]
        );
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
