use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::ByteString;
use serde_json::json;

use super::*;
use crate::children::{configmap, service, statefulset};
use crate::validate::validate;

fn rc(tls: serde_json::Value) -> RedisCluster {
    serde_json::from_value(json!({
        "apiVersion": "tessera.rs/v1alpha1", "kind": "RedisCluster",
        "metadata": {"name": "demo", "namespace": "t", "uid": "uid-demo"},
        "spec": {"shards": 3, "replicasPerShard": 1, "tls": tls},
    }))
    .expect("rc")
}

fn secret(keys: &[(&str, Vec<u8>)]) -> Secret {
    Secret {
        data: Some(
            keys.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.clone())))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Secret::default()
    }
}

fn read(p: &std::path::Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn a_secret_gives_the_material_and_the_leaf_fingerprint() {
    let certs = tessera_testkit::tls::Certs::new();
    let a = &certs.main;
    let (ca, crt, key) = (read(&a.ca), read(&a.server_cert), read(&a.server_key));
    let m = material(&secret(&[
        (CA_KEY, ca.clone()),
        (CERT_KEY, crt.clone()),
        (KEY_KEY, key.clone()),
    ]))
    .expect("material");
    let leaf = certificates(&crt).expect("leaf");
    assert_eq!(m.fingerprint, fingerprint(leaf[0].as_ref()));
    assert_eq!(m.fingerprint.len(), 64);
    assert_eq!(m.client.ca_pem, ca);

    // Each key is needed, and each must parse.
    let missing = material(&secret(&[(CERT_KEY, crt.clone()), (KEY_KEY, key.clone())]));
    assert!(missing.unwrap_err().contains("ca.crt"));
    let garbage = material(&secret(&[
        (CA_KEY, ca.clone()),
        (CERT_KEY, b"not a certificate".to_vec()),
        (KEY_KEY, key.clone()),
    ]));
    assert!(garbage.unwrap_err().contains("tls.crt"));
    let bad_key = material(&secret(&[
        (CA_KEY, ca),
        (CERT_KEY, crt),
        (
            KEY_KEY,
            b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_vec(),
        ),
    ]));
    assert!(bad_key.is_err());

    // An X.509 v1 certificate (openssl x509 -req without extensions) is refused with why:
    // the nodes would take it, the operator's admin connections would not.
    let v1 = tessera_testkit::tls::Certs::openssl_v1();
    let a = &v1.main;
    let refused = material(&secret(&[
        (CA_KEY, read(&a.ca)),
        (CERT_KEY, read(&a.server_cert)),
        (KEY_KEY, read(&a.server_key)),
    ]));
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("X.509 v1")),
        "{refused:?}"
    );
}

#[test]
fn the_certificate_names_every_pod_and_is_a_client_certificate_too() {
    let r = rc(json!({"issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}));
    let pod = |ip: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"podIP": ip}}))
            .expect("pod")
    };
    let issuer = r
        .spec
        .tls
        .as_ref()
        .and_then(|t| t.issuer_ref.clone())
        .expect("issuer");
    assert_eq!(issuer.group, "cert-manager.io");
    let cert = certificate(
        &r,
        &issuer,
        &[pod("10.0.0.2"), pod("10.0.0.1"), pod("10.0.0.2")],
    )
    .expect("certificate");
    assert_eq!(cert.metadata.name.as_deref(), Some("demo-tls"));
    let spec = &cert.data["spec"];
    assert_eq!(spec["secretName"], "demo-tls");
    assert_eq!(spec["ipAddresses"], json!(["10.0.0.1", "10.0.0.2"]));
    let dns: Vec<&str> = spec["dnsNames"]
        .as_array()
        .expect("dnsNames")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(dns.contains(&"demo.t.svc"), "{dns:?}");
    assert!(dns.contains(&"*.demo-nodes.t.svc.cluster.local"), "{dns:?}");
    let usages = spec["usages"].to_string();
    assert!(usages.contains("server auth") && usages.contains("client auth"));
    assert_eq!(spec["issuerRef"]["kind"], "ClusterIssuer");
    assert_eq!(
        secret_name("demo", r.spec.tls.as_ref().expect("tls")),
        "demo-tls"
    );
}

#[test]
fn tls_pods_serve_tls_only_and_probe_over_it() {
    let r = rc(json!({"secretName": "certs"}));
    let cm = configmap::node_conf(&r);
    assert!(cm.contains("tls-cluster yes\n"), "{cm}");
    assert!(cm.contains("tls-replication yes\n"));
    assert!(cm.contains("tls-auth-clients yes\n"));
    let sts = statefulset::build(&r, 0, "h").expect("sts");
    let pod = sts.spec.and_then(|s| s.template.spec).expect("pod spec");
    let c = &pod.containers[0];
    let args = c.args.clone().unwrap_or_default().join(" ");
    assert!(args.contains("--port 0 "), "{args}");
    assert!(args.contains("--tls-port 6379"), "{args}");
    assert!(args.contains("--tls-cert-file /tls/tls.crt"), "{args}");
    assert!(args.contains("--tls-ca-cert-file /tls/ca.crt"), "{args}");
    let vol = pod
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.name == "tls")
        .expect("tls volume");
    assert_eq!(
        vol.secret.and_then(|s| s.secret_name).as_deref(),
        Some("certs")
    );
    assert!(c
        .volume_mounts
        .iter()
        .flatten()
        .any(|m| m.mount_path == TLS_DIR));
    let probe = c
        .readiness_probe
        .as_ref()
        .and_then(|p| p.exec.as_ref())
        .and_then(|e| e.command.clone())
        .unwrap_or_default()
        .join(" ");
    assert!(probe.contains("--tls-ca-cert-file /tls/ca.crt"), "{probe}");
    let redis = statefulset::ready_command("redis:7.0", true).join(" ");
    assert!(redis.contains("--tls --cert /tls/tls.crt"), "{redis}");
    let port = service::client(&r)
        .expect("svc")
        .spec
        .and_then(|s| s.ports)
        .expect("ports");
    assert_eq!(port[0].name.as_deref(), Some("tls"));

    // Without spec.tls nothing changes.
    let plain: RedisCluster = serde_json::from_value(json!({
        "apiVersion": "tessera.rs/v1alpha1", "kind": "RedisCluster",
        "metadata": {"name": "demo", "namespace": "t", "uid": "u"},
        "spec": {"shards": 1},
    }))
    .expect("rc");
    assert!(!configmap::node_conf(&plain).contains("tls-"));
    let args = statefulset::build(&plain, 0, "h")
        .expect("sts")
        .spec
        .and_then(|s| s.template.spec)
        .map(|p| p.containers[0].args.clone().unwrap_or_default().join(" "))
        .unwrap_or_default();
    assert!(
        args.contains("--port 6379") && !args.contains("tls"),
        "{args}"
    );
}

#[test]
fn a_tls_spec_needs_one_source_and_owns_the_tls_directives() {
    let both = rc(json!({"secretName": "s", "issuerRef": {"name": "i"}}));
    assert!(validate("demo", &both.spec)
        .iter()
        .any(|p| p.contains("exactly one")));
    let neither = rc(json!({"authClients": "no"}));
    assert!(!validate("demo", &neither.spec).is_empty());
    let kind = rc(json!({"issuerRef": {"name": "i", "kind": "Vault"}}));
    assert!(validate("demo", &kind.spec)
        .iter()
        .any(|p| p.contains("Issuer or ClusterIssuer")));
    let ok = rc(json!({"issuerRef": {"name": "i"}, "authClients": "optional"}));
    assert_eq!(validate("demo", &ok.spec), Vec::<String>::new());
    let mut files = ok.spec.clone();
    files.config.insert("tls-cert-file".into(), "/x".into());
    files
        .config
        .insert("tls-protocols".into(), "TLSv1.3".into());
    let problems = validate("demo", &files);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("spec.tls"), "{problems:?}");
}

#[test]
fn the_summary_sorts_reloaded_and_pending_nodes() {
    let s = summarize(vec![
        ("b".into(), NodeTls::Current { reloaded: true }),
        ("a".into(), NodeTls::Current { reloaded: true }),
        ("c".into(), NodeTls::Current { reloaded: false }),
        ("d".into(), NodeTls::Pending("old".into())),
    ]);
    assert_eq!(s.reloaded, ["a", "b"]);
    assert_eq!(s.pending.keys().collect::<Vec<_>>(), ["d"]);
}

#[test]
fn a_new_ca_is_reloaded_everywhere_for_a_window_then_recorded() {
    let m = Material {
        client: TlsClient::default(),
        fingerprint: "leaf2".into(),
        ca_fingerprint: "ca2".into(),
    };
    let now: Timestamp = "2026-12-04T12:00:00Z".parse().expect("time");
    let window = std::time::Duration::from_secs(120);
    let rec = |leaf: Option<&str>, ca: Option<&str>, seen: Option<&str>| TlsStatus {
        secret_name: "s".into(),
        certificate_fingerprint: leaf.map(str::to_string),
        ca_fingerprint: ca.map(str::to_string),
        ca_change_seen_at: seen.map(str::to_string),
        pending_pods: Vec::new(),
    };
    // Nothing recorded: check the certificate, record at once.
    let p = plan(None, &m, now, window);
    assert!(p.check && !p.force_reload && p.may_record && p.ca_seen_at.is_none());
    // In sync: nothing to do.
    let p = plan(
        Some(&rec(Some("leaf2"), Some("ca2"), None)),
        &m,
        now,
        window,
    );
    assert!(!p.check);
    // A new certificate, same CA: checked node by node, recorded once all serve it.
    let p = plan(
        Some(&rec(Some("leaf1"), Some("ca2"), None)),
        &m,
        now,
        window,
    );
    assert!(p.check && !p.force_reload && p.may_record);
    // A new CA: every node reloaded, first seen now, not recorded before the window.
    let p = plan(
        Some(&rec(Some("leaf2"), Some("ca1"), None)),
        &m,
        now,
        window,
    );
    assert!(p.check && p.force_reload && !p.may_record);
    assert_eq!(p.ca_seen_at, Some(now));
    let p = plan(
        Some(&rec(
            Some("leaf2"),
            Some("ca1"),
            Some("2026-12-04T11:59:00Z"),
        )),
        &m,
        now,
        window,
    );
    assert!(p.force_reload && !p.may_record, "60 s into the window");
    let p = plan(
        Some(&rec(
            Some("leaf2"),
            Some("ca1"),
            Some("2026-12-04T11:57:00Z"),
        )),
        &m,
        now,
        window,
    );
    assert!(p.force_reload && p.may_record, "past the window");
    // A garbled or future time restarts the window rather than skipping it.
    let p = plan(
        Some(&rec(Some("leaf2"), Some("ca1"), Some("tomorrow"))),
        &m,
        now,
        window,
    );
    assert_eq!((p.ca_seen_at, p.may_record), (Some(now), false));
}
