//! `spec.tls`: nodes that serve clients, replicas and the cluster bus on TLS only, and a
//! certificate changed without a restart.
//!
//! The Secret (`spec.tls.secretName`, or `<cluster>-tls` that cert-manager writes for the
//! Certificate the operator makes from `spec.tls.issuerRef`) is mounted in every pod; the
//! operator reads it too, for its own connections (the CA to verify the nodes, the certificate
//! to present to nodes that want one).
//!
//! Rotation: when the Secret's certificate is not the one the status records, each running
//! node is asked which certificate it serves (a TLS handshake); a node serving another one gets
//! `CONFIG SET tls-cert-file .. tls-key-file .. tls-ca-cert-file ..` with its own current
//! paths, which makes Redis 7.0 (and tessera-node, valkey) read the files again: new
//! connections get the new certificate, open ones go on. The kubelet updates mounted Secrets
//! some time after the Secret changes (a minute or more), so a node still serving the old one
//! after the reload is pending and asked again a few seconds later. Once every node serves the
//! Secret's certificate, the status records its fingerprint and an Event says so.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Client, ResourceExt};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use crate::children::{headless_name, owner_ref, ChildError};
use crate::crd::{IssuerRef, RedisCluster, TlsSpec, TlsStatus};
use k8s_openapi::jiff::Timestamp;
use tessera_topology::conn::{connect, value_text};
use tessera_topology::tls::{certificates, served_certificate, TlsClient};
use tessera_topology::{EngineOptions, PodEndpoint, TopologyError};

/// Where the Secret is mounted in node pods.
pub const TLS_DIR: &str = "/tls";
/// The Secret's keys (cert-manager's and `kubernetes.io/tls`'s names).
pub const CERT_KEY: &str = "tls.crt";
pub const KEY_KEY: &str = "tls.key";
pub const CA_KEY: &str = "ca.crt";
/// The node's TLS file directives, reloaded together.
const FILE_DIRECTIVES: [&str; 3] = ["tls-cert-file", "tls-key-file", "tls-ca-cert-file"];

/// The Secret the nodes' certificate is read from.
pub fn secret_name(cluster: &str, tls: &TlsSpec) -> String {
    match &tls.secret_name {
        Some(s) => s.clone(),
        None => certificate_name(cluster),
    }
}

/// The cert-manager Certificate made for `spec.tls.issuerRef` (and the Secret it writes).
pub fn certificate_name(cluster: &str) -> String {
    format!("{cluster}-tls")
}

/// The TLS material of one reconcile, read from the Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Material {
    pub client: TlsClient,
    /// SHA-256 (hex) of the leaf certificate.
    pub fingerprint: String,
    /// SHA-256 (hex) of ca.crt as it is (a bundle of CAs during a CA move).
    pub ca_fingerprint: String,
}

/// SHA-256 (hex) of a certificate's DER.
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The material of a TLS Secret, or what is wrong with it. Pure.
pub fn material(secret: &Secret) -> Result<Material, String> {
    let get = |key: &str| -> Result<Vec<u8>, String> {
        let data = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.clone());
        let string = secret
            .string_data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|s| s.as_bytes().to_vec());
        data.or(string)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("has no {key:?}"))
    };
    let client = TlsClient {
        ca_pem: get(CA_KEY)?,
        cert_pem: get(CERT_KEY)?,
        key_pem: get(KEY_KEY)?,
    };
    let leaf = certificates(&client.cert_pem).map_err(|e| format!("{CERT_KEY}: {e}"))?;
    // The nodes take v1 certificates (as redis-server does), but the operator's admin
    // connections go through the redis crate's rustls, which refuses them mid-handshake.
    if tessera_tls::is_legacy(leaf[0].as_ref()) {
        return Err(format!(
            "{CERT_KEY} is an X.509 v1 certificate; the operator needs v3 (cert-manager issues v3; with `openssl x509 -req`, add `-extfile` with e.g. `basicConstraints=CA:FALSE`)"
        ));
    }
    certificates(&client.ca_pem).map_err(|e| format!("{CA_KEY}: {e}"))?;
    // Also proves the key parses and matches nothing unusual: rustls builds the config.
    client.client_config().map_err(|e| e.to_string())?;
    Ok(Material {
        fingerprint: fingerprint(leaf[0].as_ref()),
        ca_fingerprint: fingerprint(&client.ca_pem),
        client,
    })
}

/// Reads the cluster's TLS Secret: None without spec.tls; Err says why it cannot be used
/// (missing: cert-manager has not issued it yet, or a wrong name).
pub async fn observe(
    client: &Client,
    rc: &RedisCluster,
    ns: &str,
) -> Option<Result<Material, String>> {
    let tls = rc.spec.tls.as_ref()?;
    let name = secret_name(&rc.name_any(), tls);
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    Some(match api.get_opt(&name).await {
        Ok(Some(s)) => material(&s).map_err(|e| format!("TLS Secret {name} {e}")),
        Ok(None) => Err(format!("TLS Secret {name} does not exist (yet)")),
        Err(e) => Err(format!("TLS Secret {name}: {e}")),
    })
}

/// cert-manager's Certificate kind.
fn certificate_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
        "certificates",
    )
}

/// The Certificate for `issuer`: the client Service's and every pod's DNS names (the
/// headless Service's wildcard) and the IPs of the pods running now, usable as server and
/// client certificate (nodes present it on the bus and to their masters). Pure.
pub fn certificate(
    rc: &RedisCluster,
    issuer: &IssuerRef,
    pods: &[Pod],
) -> Result<DynamicObject, ChildError> {
    let name = rc.name_any();
    let ns = rc.namespace().unwrap_or_default();
    let headless = headless_name(&name);
    let mut dns = Vec::new();
    for svc in [&name, &headless] {
        dns.push(format!("{svc}.{ns}.svc"));
        dns.push(format!("{svc}.{ns}.svc.cluster.local"));
    }
    dns.push(format!("*.{headless}.{ns}.svc"));
    dns.push(format!("*.{headless}.{ns}.svc.cluster.local"));
    let mut ips: Vec<String> = pods
        .iter()
        .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
        .filter(|ip| !ip.is_empty())
        .collect();
    ips.sort();
    ips.dedup();
    let mut obj = DynamicObject::new(&certificate_name(&name), &certificate_resource());
    obj.metadata.namespace = Some(ns);
    obj.metadata.labels = Some(crate::children::cluster_labels(&name));
    obj.metadata.owner_references = Some(vec![owner_ref(rc)?]);
    obj.data = serde_json::json!({
        "spec": {
            "secretName": certificate_name(&name),
            "commonName": format!("{name}.{}.svc", rc.namespace().unwrap_or_default()),
            "dnsNames": dns,
            "ipAddresses": ips,
            "usages": ["server auth", "client auth", "digital signature", "key encipherment"],
            "privateKey": {"rotationPolicy": "Always"},
            "issuerRef": {"name": issuer.name, "kind": issuer.kind, "group": issuer.group},
        }
    });
    Ok(obj)
}

/// Applies the Certificate (server-side apply, the operator's field manager). A 404 means
/// cert-manager's CRD is not installed, said so.
pub async fn apply_certificate(
    client: &Client,
    ns: &str,
    cert: &DynamicObject,
    field_manager: &str,
) -> Result<(), String> {
    let ar = certificate_resource();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let mut body = serde_json::to_value(cert).map_err(|e| e.to_string())?;
    body["apiVersion"] = "cert-manager.io/v1".into();
    body["kind"] = "Certificate".into();
    let pp = PatchParams::apply(field_manager).force();
    match api.patch(&cert.name_any(), &pp, &Patch::Apply(&body)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Err(
            "cert-manager is not installed (no certificates.cert-manager.io): use spec.tls.secretName"
                .into(),
        ),
        Err(e) => Err(format!("Certificate {}: {e}", cert.name_any())),
    }
}

/// What one node serves after the reload step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeTls {
    /// It serves the Secret's certificate (reloaded: it did not before this step).
    Current { reloaded: bool },
    /// It still serves another one, or could not be asked (why).
    Pending(String),
}

/// Brings every endpoint to the Secret's certificate (see the module doc). Never fails as a
/// whole: each node's outcome is reported.
/// `force`: reload nodes that already serve the certificate too (a CA change).
pub async fn reload_all(
    eps: &[PodEndpoint],
    opts: &EngineOptions,
    want: &Material,
    force: bool,
) -> Vec<(String, NodeTls)> {
    join_all(
        eps.iter()
            .map(|ep| async move { (ep.pod.clone(), reload_one(ep, opts, want, force).await) }),
    )
    .await
}

async fn reload_one(
    ep: &PodEndpoint,
    opts: &EngineOptions,
    want: &Material,
    force: bool,
) -> NodeTls {
    let serves = |what: &str, e: TopologyError| NodeTls::Pending(format!("{what}: {e}"));
    let timeout = opts.command_timeout;
    match served_certificate(&ep.host, ep.port, &want.client, timeout).await {
        Ok(der) if fingerprint(&der) == want.fingerprint && !force => {
            return NodeTls::Current { reloaded: false }
        }
        Ok(_) => {}
        Err(e) => return serves("handshake", e),
    }
    let mut conn = match connect(&ep.host, ep.port, opts, timeout).await {
        Ok(c) => c,
        Err(e) => return serves("connect", e),
    };
    // The node's own paths (kube-in-a-box rewrites them; on Kubernetes they are TLS_DIR's).
    let mut set = redis::cmd("CONFIG");
    set.arg("SET");
    for d in FILE_DIRECTIVES {
        let got = conn
            .run::<redis::Value>(redis::cmd("CONFIG").arg("GET").arg(d))
            .await;
        let path = match got {
            Ok(redis::Value::Array(v)) if v.len() == 2 => value_text(&v[1]),
            Ok(redis::Value::Map(m)) if m.len() == 1 => value_text(&m[0].1),
            Ok(other) => return NodeTls::Pending(format!("CONFIG GET {d}: {other:?}")),
            Err(e) => return serves("CONFIG GET", e),
        };
        match path.filter(|p| !p.is_empty()) {
            Some(p) => set.arg(d).arg(p),
            None => return NodeTls::Pending(format!("the node has no {d}")),
        };
    }
    if let Err(e) = conn.run::<redis::Value>(&set).await {
        return serves("CONFIG SET", e);
    }
    match served_certificate(&ep.host, ep.port, &want.client, timeout).await {
        Ok(der) if fingerprint(&der) == want.fingerprint => NodeTls::Current { reloaded: true },
        Ok(der) => NodeTls::Pending(format!(
            "serves {} after the reload (its mounted files not updated yet)",
            &fingerprint(&der)[..16]
        )),
        Err(e) => serves("handshake after the reload", e),
    }
}

/// What the certificate step does this reconcile (see [`plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Ask the nodes at all (false: the record matches the Secret).
    pub check: bool,
    /// Reload every node, also those already serving the certificate: ca.crt changed, and
    /// which CA a node trusts cannot be seen from outside.
    pub force_reload: bool,
    /// When the CA change was first seen (kept in the status while it lasts).
    pub ca_seen_at: Option<Timestamp>,
    /// Once every node serves the certificate, the Secret may be recorded as applied.
    pub may_record: bool,
}

/// Decides the certificate step from the record (the status, for this Secret) and the
/// Secret's material. Pure.
///
/// A new certificate is checked node by node (a TLS handshake shows it). A new ca.crt cannot
/// be checked, so every node is reloaded on each reconcile for `window` after the change was
/// first seen, long enough for the kubelet to refresh every pod's mounted copy, and only
/// then recorded.
pub fn plan(record: Option<&TlsStatus>, want: &Material, now: Timestamp, window: Duration) -> Plan {
    let leaf = record.and_then(|r| r.certificate_fingerprint.as_deref());
    let ca = record.and_then(|r| r.ca_fingerprint.as_deref());
    if leaf.is_none() {
        // Nothing recorded yet (a new cluster, or a new Secret name): every pod started
        // with the files of now, so checking the certificate is enough.
        return Plan {
            check: true,
            force_reload: false,
            ca_seen_at: None,
            may_record: true,
        };
    }
    if ca == Some(want.ca_fingerprint.as_str()) {
        return Plan {
            check: leaf != Some(want.fingerprint.as_str()),
            force_reload: false,
            ca_seen_at: None,
            may_record: true,
        };
    }
    let seen = record
        .and_then(|r| r.ca_change_seen_at.as_deref())
        .and_then(|t| t.parse::<Timestamp>().ok())
        .filter(|t| *t <= now)
        .unwrap_or(now);
    let waited = Duration::try_from(now.duration_since(seen)).unwrap_or(Duration::ZERO);
    Plan {
        check: true,
        force_reload: true,
        ca_seen_at: Some(seen),
        may_record: waited >= window,
    }
}

/// The step's result for the status and Events.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReloadSummary {
    pub reloaded: Vec<String>,
    pub pending: BTreeMap<String, String>,
}

/// Sorts the outcomes. Pure.
pub fn summarize(outcomes: Vec<(String, NodeTls)>) -> ReloadSummary {
    let mut s = ReloadSummary::default();
    for (pod, o) in outcomes {
        match o {
            NodeTls::Current { reloaded: true } => s.reloaded.push(pod),
            NodeTls::Current { reloaded: false } => {}
            NodeTls::Pending(why) => {
                s.pending.insert(pod, why);
            }
        }
    }
    s.reloaded.sort();
    s
}

/// Logs the step's outcome.
pub fn log(summary: &ReloadSummary) {
    if !summary.reloaded.is_empty() {
        info!(pods = ?summary.reloaded, "TLS certificate reloaded");
    }
    for (pod, why) in &summary.pending {
        warn!(%pod, %why, "TLS certificate not served yet");
    }
}

/// How long before a pending node is asked again.
pub const RETRY: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests;
