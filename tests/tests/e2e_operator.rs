//! End-to-end: kube-in-a-box in-process + the real tessera-operator binary + the real kubectl.
//! Every test here runs its pods on image redis:7.0 (→ /usr/bin/redis-server), because
//! tessera-node has no cluster mode yet; switch `IMAGE` once it does.
//!
//! The tests share one machine's two cores, so they run one at a time (SERIAL), each with its
//! own pod address range. The operator binary must be built (`make test` builds every bin
//! first); if it is missing the tests fail and say how to build it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};
use serde_json::Value;
use tessera_tests::kiab::api::testing::{kubectl_binaries, Kubectl};
use tessera_tests::kiab::images::workspace_root;
use tessera_tests::kiab::testkit::{
    is_ready, operator_binary, pod_ip, pods, wait_for, OperatorProcess,
};
use tessera_tests::kiab::{BoxConfig, KubeInABox};

const IMAGE: &str = "redis:7.0";
const WAIT: Duration = Duration::from_secs(240);
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs one async test body alone on a fresh runtime.
fn serial<F: std::future::Future<Output = ()>>(f: F) {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(f);
}

fn rcl_resource() -> ApiResource {
    ApiResource {
        group: "tessera.rs".into(),
        version: "v1alpha1".into(),
        api_version: "tessera.rs/v1alpha1".into(),
        kind: "RedisCluster".into(),
        plural: "redisclusters".into(),
    }
}

fn manifest(name: &str, shards: u32, replicas: u32, extra: &str) -> String {
    format!(
        "apiVersion: tessera.rs/v1alpha1\nkind: RedisCluster\nmetadata:\n  name: {name}\nspec:\n  shards: {shards}\n  replicasPerShard: {replicas}\n  image: {IMAGE}\n{extra}"
    )
}

/// The box, the operator and a kubectl, torn down on drop.
struct Env {
    kiab: KubeInABox,
    operator: Option<OperatorProcess>,
    kubectl: Kubectl,
    client: Client,
    /// Kept (not deleted) when the test panics, so the logs can be read.
    _dir: KeepOnPanic,
}

/// Deletes the test's directory, unless the test panicked: then it is kept for its logs.
struct KeepOnPanic(Option<tempfile::TempDir>);

impl Drop for KeepOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(d) = self.0.take() {
                eprintln!(
                    "test failed: box state, pod logs and operator.log kept in {}",
                    d.keep().display()
                );
            }
        }
    }
}

impl Env {
    async fn start(ip_base: &str, with_operator: bool) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = BoxConfig::new(dir.path().join("box"));
        cfg.ip_base = ip_base.parse().expect("ip base");
        let kiab = KubeInABox::start(cfg).await.expect("start kube-in-a-box");
        kiab.apply_crds(&workspace_root().join("crds"))
            .await
            .expect("apply CRDs");
        let kubeconfig = std::fs::read_to_string(kiab.kubeconfig_path()).expect("kubeconfig");
        let bin = kubectl_binaries()
            .into_iter()
            .next()
            .expect("kubectl installed (make deps)");
        let kubectl = Kubectl::new(bin, &kubeconfig).expect("kubectl");
        let operator = with_operator.then(|| {
            let bin = operator_binary().unwrap_or_else(|e| panic!("{e}"));
            OperatorProcess::start(
                &bin,
                kiab.kubeconfig_path(),
                dir.path().join("operator.log"),
            )
            .expect("start tessera-operator")
        });
        let client = kiab.client();
        Env {
            kiab,
            operator,
            kubectl,
            client,
            _dir: KeepOnPanic(Some(dir)),
        }
    }

    fn rcl(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), "default", &rcl_resource())
    }

    async fn apply(&self, yaml: &str) {
        self.kubectl.ok_stdin(&["apply", "-f", "-"], yaml).await;
    }

    /// Operator log tail for failure messages (and a check it is still alive).
    fn operator_state(&mut self) -> String {
        match self.operator.as_mut() {
            Some(op) => {
                let exited = op
                    .exited()
                    .map(|c| format!("EXITED with {c}; "))
                    .unwrap_or_default();
                format!("{exited}operator log tail:\n{}", op.log_tail(15))
            }
            None => String::new(),
        }
    }

    /// Waits until the RedisCluster is Ready at its generation with `shards` shards, every
    /// slot assigned, and every pod reports cluster_state:ok.
    async fn wait_ready(&mut self, name: &str, shards: u64, nodes: usize, timeout: Duration) {
        let api = self.rcl();
        let client = self.client.clone();
        let r = wait_for(
            &format!("{name} Ready with {shards} shards"),
            timeout,
            || async {
                let o = api.get(name).await.map_err(|e| e.to_string())?;
                let st = o.data.get("status").cloned().unwrap_or(Value::Null);
                let ok = st["phase"] == "Ready"
                    && st["observedGeneration"].as_i64() == o.metadata.generation
                    && st["shards"].as_u64() == Some(shards)
                    && st["slotsAssigned"].as_u64() == Some(16384);
                if !ok {
                    return Err(format!("status {st}"));
                }
                cluster_ok(&client, name, nodes).await
            },
        )
        .await;
        if let Err(e) = r {
            let mut nodes = String::new();
            for ip in pod_ips(&self.client, name).await {
                let n = cluster_nodes(&ip).await.unwrap_or_else(|e| e);
                nodes.push_str(&format!("CLUSTER NODES from {ip}:\n{n}\n"));
            }
            panic!("{e}\n{nodes}{}", self.operator_state());
        }
    }

    async fn stop(mut self) {
        if let Some(op) = self.operator.take() {
            op.stop().await;
        }
        self.kiab.stop().await;
    }
}

/// All `n` pods of cluster `name` Ready and answering cluster_state:ok with a full slot map.
async fn cluster_ok(client: &Client, name: &str, n: usize) -> Result<(), String> {
    let ps = pods(client, "default", &format!("tessera.rs/cluster={name}")).await?;
    let live: Vec<&Pod> = ps
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    if live.len() != n || !live.iter().all(|p| is_ready(p)) {
        return Err(format!(
            "{} of {n} pods ready",
            live.iter().filter(|p| is_ready(p)).count()
        ));
    }
    for p in live {
        let ip = pod_ip(p).ok_or("no ip")?;
        let info = cluster_info(&ip).await?;
        if !info.contains("cluster_state:ok") || !info.contains("cluster_slots_assigned:16384") {
            return Err(format!(
                "{ip}: {}",
                info.lines().take(3).collect::<Vec<_>>().join(" ")
            ));
        }
        let known = info
            .lines()
            .find_map(|l| l.strip_prefix("cluster_known_nodes:"))
            .and_then(|v| v.trim().parse::<usize>().ok());
        if known != Some(n) {
            return Err(format!("{ip} knows {known:?} nodes, want {n}"));
        }
    }
    Ok(())
}

async fn node(ip: &str) -> Result<redis::aio::MultiplexedConnection, String> {
    let c = redis::Client::open(format!("redis://{ip}:6379/")).map_err(|e| e.to_string())?;
    tokio::time::timeout(Duration::from_secs(5), c.get_multiplexed_async_connection())
        .await
        .map_err(|_| format!("{ip}: connect timeout"))?
        .map_err(|e| format!("{ip}: {e}"))
}

async fn cluster_info(ip: &str) -> Result<String, String> {
    let mut c = node(ip).await?;
    redis::cmd("CLUSTER")
        .arg("INFO")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())
}

async fn cluster_nodes(ip: &str) -> Result<String, String> {
    let mut c = node(ip).await?;
    redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())
}

/// IPs of the cluster's current pods.
async fn pod_ips(client: &Client, name: &str) -> Vec<String> {
    pods(client, "default", &format!("tessera.rs/cluster={name}"))
        .await
        .unwrap_or_default()
        .iter()
        .filter_map(pod_ip)
        .collect()
}

async fn cluster_conn(ips: &[String]) -> redis::cluster_async::ClusterConnection {
    let nodes: Vec<String> = ips.iter().map(|ip| format!("redis://{ip}:6379/")).collect();
    redis::cluster::ClusterClient::builder(nodes)
        .retries(6)
        .connection_timeout(Duration::from_secs(3))
        .response_timeout(Duration::from_secs(5))
        .build()
        .expect("cluster client")
        .get_async_connection()
        .await
        .expect("cluster connection")
}

/// Writes keys in the background; every acknowledged write must be readable afterwards.
struct DataChecker {
    acked: Arc<Mutex<BTreeMap<String, String>>>,
    stop: Arc<AtomicBool>,
    handle: tokio::task::JoinHandle<()>,
}

impl DataChecker {
    async fn start(ips: &[String], prefix: &str, preload: usize) -> DataChecker {
        let acked = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut conn = cluster_conn(ips).await;
        for i in 0..preload {
            let (k, v) = (format!("{prefix}:{i}"), format!("v{i}"));
            let _: () = redis::cmd("SET")
                .arg(&k)
                .arg(&v)
                .query_async(&mut conn)
                .await
                .expect("preload SET");
            acked.lock().expect("lock").insert(k, v);
        }
        let (a, s, p) = (acked.clone(), stop.clone(), prefix.to_string());
        let handle = tokio::spawn(async move {
            let mut i = preload;
            while !s.load(Ordering::SeqCst) && i < preload + 50_000 {
                let (k, v) = (format!("{p}:{i}"), format!("v{i}"));
                let r: Result<(), _> = tokio::time::timeout(
                    Duration::from_secs(10),
                    redis::cmd("SET").arg(&k).arg(&v).query_async(&mut conn),
                )
                .await
                .unwrap_or_else(|_| {
                    Err(redis::RedisError::from((redis::ErrorKind::Io, "timeout")))
                });
                if r.is_ok() {
                    a.lock().expect("lock").insert(k, v);
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        DataChecker {
            acked,
            stop,
            handle,
        }
    }

    /// Stops writing and checks every acknowledged key; returns how many were checked.
    async fn verify(self, ips: &[String]) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.handle.await;
        let acked = self.acked.lock().expect("lock").clone();
        let mut conn = cluster_conn(ips).await;
        let mut lost = Vec::new();
        for (k, v) in &acked {
            let got: Option<String> = redis::cmd("GET")
                .arg(k)
                .query_async(&mut conn)
                .await
                .expect("GET");
            if got.as_deref() != Some(v.as_str()) {
                lost.push(k.clone());
            }
        }
        assert!(
            lost.is_empty(),
            "{} of {} acknowledged keys lost, e.g. {:?}",
            lost.len(),
            acked.len(),
            &lost[..lost.len().min(5)]
        );
        acked.len()
    }
}

#[test]
fn invalid_manifest_is_rejected() {
    serial(async {
        let env = Env::start("127.0.10.1", false).await;
        let bad = manifest("bad", 0, 1, "");
        let r = env
            .kubectl
            .run_with(&["apply", "-f", "-"], Some(&bad), Duration::from_secs(60))
            .await;
        assert!(!r.ok, "shards: 0 must be rejected; stdout {}", r.stdout);
        assert!(
            r.stderr.contains("shards"),
            "error names the field: {}",
            r.stderr
        );
        let bad_type = manifest("bad2", 3, 1, "").replace("shards: 3", "shards: three");
        let r = env
            .kubectl
            .run_with(
                &["apply", "-f", "-"],
                Some(&bad_type),
                Duration::from_secs(60),
            )
            .await;
        assert!(!r.ok, "a string shard count must be rejected");
        assert!(env
            .rcl()
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty());
        env.stop().await;
    });
}

#[test]
fn apply_becomes_ready_and_delete_removes_every_child() {
    serial(async {
        let mut env = Env::start("127.0.11.1", true).await;
        env.apply(&manifest("e2e", 3, 1, "")).await;
        env.wait_ready("e2e", 3, 6, WAIT).await;
        let out = env.kubectl.ok(&["get", "rcl", "e2e"]).await;
        assert!(out.contains("Ready"), "{out}");
        let uid = env
            .rcl()
            .get("e2e")
            .await
            .expect("get rcl")
            .metadata
            .uid
            .expect("uid");

        env.kubectl
            .ok(&["delete", "rcl", "e2e", "--wait=false"])
            .await;
        let client = env.client.clone();
        let kiab = &env.kiab;
        let r = wait_for("every child gone", WAIT, || {
            let (client, uid) = (client.clone(), uid.clone());
            async move {
                let mut left = Vec::new();
                for (group, version, kind, plural) in [
                    ("apps", "v1", "StatefulSet", "statefulsets"),
                    ("", "v1", "Pod", "pods"),
                    ("", "v1", "Service", "services"),
                    ("", "v1", "ConfigMap", "configmaps"),
                    (
                        "policy",
                        "v1",
                        "PodDisruptionBudget",
                        "poddisruptionbudgets",
                    ),
                ] {
                    let ar = ApiResource {
                        group: group.into(),
                        version: version.into(),
                        api_version: if group.is_empty() {
                            version.into()
                        } else {
                            format!("{group}/{version}")
                        },
                        kind: kind.into(),
                        plural: plural.into(),
                    };
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), "default", &ar);
                    for o in api
                        .list(&ListParams::default())
                        .await
                        .map_err(|e| e.to_string())?
                        .items
                    {
                        let owned = o
                            .metadata
                            .owner_references
                            .iter()
                            .flatten()
                            .any(|r| r.uid == uid);
                        let labelled = o.metadata.labels.as_ref().is_some_and(|l| {
                            l.get("tessera.rs/cluster").map(String::as_str) == Some("e2e")
                        });
                        if owned || labelled {
                            left.push(format!("{kind}/{}", o.metadata.name.unwrap_or_default()));
                        }
                    }
                }
                if left.is_empty() && kiab.live_processes() == 0 {
                    Ok(())
                } else {
                    Err(format!(
                        "left: {left:?}, {} processes",
                        kiab.live_processes()
                    ))
                }
            }
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        env.stop().await;
    });
}

#[test]
fn scale_out_and_in_loses_no_key() {
    serial(async {
        let mut env = Env::start("127.0.12.1", true).await;
        env.apply(&manifest("scale", 3, 1, "")).await;
        env.wait_ready("scale", 3, 6, WAIT).await;
        let ips = pod_ips(&env.client, "scale").await;
        let checker = DataChecker::start(&ips, "scale", 2000).await;

        env.kubectl
            .ok(&["scale", "rcl/scale", "--replicas=4"])
            .await;
        env.wait_ready("scale", 4, 8, WAIT).await;
        env.kubectl
            .ok(&[
                "patch",
                "rcl",
                "scale",
                "--type=merge",
                "-p",
                r#"{"spec":{"shards":2}}"#,
            ])
            .await;
        env.wait_ready("scale", 2, 4, WAIT).await;

        let ips = pod_ips(&env.client, "scale").await;
        let checked = checker.verify(&ips).await;
        assert!(checked >= 2000, "checked {checked} keys");
        eprintln!("scale 3→4→2: {checked} acknowledged keys all present");
        env.stop().await;
    });
}

/// Every replica has finished its sync and every master's replicas are at its offset.
/// (redis-server needs a completed initial sync before a replica may ever fail over, and the
/// operator may report Ready before that; see the report.)
async fn replication_in_sync(client: &Client, name: &str) -> Result<(), String> {
    for ip in pod_ips(client, name).await {
        let mut c = node(&ip).await?;
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut c)
            .await
            .map_err(|e| e.to_string())?;
        let field = |k: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}:")))
                .map(|v| v.trim().to_string())
        };
        if field("role").as_deref() == Some("slave") {
            if field("master_link_status").as_deref() != Some("up") {
                return Err(format!("{ip}: replica link not up"));
            }
        } else {
            let offset = field("master_repl_offset").unwrap_or_default();
            for l in info
                .lines()
                .filter(|l| l.starts_with("slave") && l.contains("offset="))
            {
                let o = l
                    .split(',')
                    .find_map(|kv| kv.strip_prefix("offset="))
                    .unwrap_or("");
                if o != offset {
                    return Err(format!("{ip}: replica {l} behind master offset {offset}"));
                }
            }
        }
    }
    Ok(())
}

/// Pod name and IP of the master of shard 0, from the RedisCluster status.
async fn shard0_master(env: &Env, name: &str) -> Result<(String, String), String> {
    let o = env.rcl().get(name).await.map_err(|e| e.to_string())?;
    let pod = o.data["status"]["shardStatuses"][0]["masterPod"]
        .as_str()
        .ok_or("shard 0 has no master in status")?
        .to_string();
    let p: Pod = Api::<Pod>::default_namespaced(env.client.clone())
        .get(&pod)
        .await
        .map_err(|e| e.to_string())?;
    let ip = pod_ip(&p).ok_or("master pod has no ip")?;
    Ok((pod, ip))
}

#[test]
fn deleted_master_fails_over_and_returns_as_replica() {
    serial(async {
        let mut env = Env::start("127.0.13.1", true).await;
        env.apply(&manifest("fo", 3, 1, "  nodeTimeoutMs: 2000\n"))
            .await;
        env.wait_ready("fo", 3, 6, WAIT).await;
        let ips = pod_ips(&env.client, "fo").await;
        let checker = DataChecker::start(&ips, "fo", 500).await;
        checker.stop.store(true, Ordering::SeqCst);
        let client = env.client.clone();
        wait_for("replicas in sync", WAIT, || {
            replication_in_sync(&client, "fo")
        })
        .await
        .expect("replication in sync");
        let (master_pod, master_ip) = shard0_master(&env, "fo").await.expect("shard 0 master");
        let pod_api: Api<Pod> = Api::default_namespaced(env.client.clone());
        let old_uid = pod_api.get(&master_pod).await.expect("pod").metadata.uid;

        env.kubectl
            .ok(&["delete", "pod", &master_pod, "--wait=false"])
            .await;
        // The pod comes back under the same name with a new address...
        let new_ip = wait_for("master pod recreated", WAIT, || async {
            let p = pod_api.get(&master_pod).await.map_err(|e| e.to_string())?;
            match pod_ip(&p) {
                Some(ip) if p.metadata.uid != old_uid && is_ready(&p) => Ok(ip),
                _ => Err("not yet".into()),
            }
        })
        .await
        .expect("recreated");
        assert_ne!(new_ip, master_ip, "a recreated pod gets a new address");
        // ...and rejoins as a replica of the promoted master; the old address is forgotten.
        let r = wait_for("recreated pod rejoins as a replica", WAIT, || async {
            let (now_master, now_master_ip) = shard0_master(&env, "fo").await?;
            if now_master == master_pod {
                return Err("shard 0 has not failed over".into());
            }
            let nodes = cluster_nodes(&now_master_ip).await?;
            let master_id = nodes
                .lines()
                .find(|l| l.contains("myself"))
                .and_then(|l| l.split_whitespace().next())
                .ok_or("no myself line")?;
            let line = nodes
                .lines()
                .find(|l| l.contains(&format!("{new_ip}:6379")))
                .ok_or_else(|| format!("{new_ip} not in CLUSTER NODES:\n{nodes}"))?;
            if !(line.contains("slave") && line.contains(master_id)) {
                return Err(format!("not yet a replica of {master_id}: {line}"));
            }
            if nodes.contains(&format!("{master_ip}:6379")) {
                return Err(format!("old address still known:\n{nodes}"));
            }
            Ok(())
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        env.wait_ready("fo", 3, 6, WAIT).await;
        let ips = pod_ips(&env.client, "fo").await;
        let checked = checker.verify(&ips).await;
        eprintln!("failover: {checked} keys written before the master was deleted all present");
        env.stop().await;
    });
}

#[test]
fn deleting_every_pod_recovers_within_60s() {
    serial(async {
        let mut env = Env::start("127.0.14.1", true).await;
        env.apply(&manifest("all", 3, 1, "  nodeTimeoutMs: 2000\n"))
            .await;
        env.wait_ready("all", 3, 6, WAIT).await;
        let before: Vec<String> = pods(&env.client, "default", "tessera.rs/cluster=all")
            .await
            .expect("pods")
            .into_iter()
            .filter_map(|p| p.metadata.uid)
            .collect();
        let t0 = Instant::now();
        env.kubectl
            .ok(&[
                "delete",
                "pods",
                "-l",
                "tessera.rs/cluster=all",
                "--wait=false",
            ])
            .await;
        let client = env.client.clone();
        let r = wait_for(
            "cluster OK after deleting every pod",
            Duration::from_secs(60),
            || async {
                let ps = pods(&client, "default", "tessera.rs/cluster=all").await?;
                if ps
                    .iter()
                    .any(|p| p.metadata.uid.as_ref().is_some_and(|u| before.contains(u)))
                {
                    return Err("old pods still present".into());
                }
                cluster_ok(&client, "all", 6).await
            },
        )
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        eprintln!(
            "every pod deleted → cluster_state ok on 6 new pods after {:?}",
            t0.elapsed()
        );
        env.stop().await;
    });
}

/// `CONFIG GET name` on one node.
async fn config_get(ip: &str, name: &str) -> Result<String, String> {
    let mut c = node(ip).await?;
    let kv: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    kv.get(1).cloned().ok_or_else(|| format!("{ip}: no {name}"))
}

#[test]
fn config_change_rolls_every_pod_without_losing_writes() {
    serial(async {
        let mut env = Env::start("127.0.15.1", true).await;
        env.apply(&manifest("roll", 3, 1, "")).await;
        env.wait_ready("roll", 3, 6, WAIT).await;
        let ips = pod_ips(&env.client, "roll").await;
        let checker = DataChecker::start(&ips, "roll", 1000).await;
        let before: Vec<String> = pods(&env.client, "default", "tessera.rs/cluster=roll")
            .await
            .expect("pods")
            .into_iter()
            .filter_map(|p| p.metadata.uid)
            .collect();
        assert_eq!(before.len(), 6);

        let t0 = Instant::now();
        env.kubectl
            .ok(&[
                "patch",
                "rcl",
                "roll",
                "--type=merge",
                "-p",
                r#"{"spec":{"config":{"maxmemory-policy":"allkeys-lru"}}}"#,
            ])
            .await;
        // Every pod replaced (one at a time, by the operator) and running the new config.
        let client = env.client.clone();
        let r = wait_for(
            "every pod restarted with the new config",
            Duration::from_secs(600),
            || async {
                let ps = pods(&client, "default", "tessera.rs/cluster=roll").await?;
                let old = ps
                    .iter()
                    .filter(|p| p.metadata.uid.as_ref().is_some_and(|u| before.contains(u)))
                    .count();
                if old > 0 {
                    return Err(format!("{old} pods not restarted yet"));
                }
                for p in &ps {
                    let ip = pod_ip(p).ok_or("no ip")?;
                    let policy = config_get(&ip, "maxmemory-policy").await?;
                    if policy != "allkeys-lru" {
                        return Err(format!("{ip}: maxmemory-policy {policy}"));
                    }
                }
                cluster_ok(&client, "roll", 6).await
            },
        )
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let took = t0.elapsed();
        env.wait_ready("roll", 3, 6, WAIT).await;
        let st = env.rcl().get("roll").await.expect("rcl").data["status"].clone();
        for s in st["shardStatuses"].as_array().expect("shard statuses") {
            assert!(
                s.get("staleConfigPods")
                    .and_then(Value::as_array)
                    .is_none_or(|a| a.is_empty()),
                "{s}"
            );
        }
        let events = env
            .kubectl
            .ok(&["get", "events", "--field-selector", "reason=RollingRestart"])
            .await;
        assert!(events.contains("failing over shard"), "{events}");

        let ips = pod_ips(&env.client, "roll").await;
        let checked = checker.verify(&ips).await;
        let check = tokio::process::Command::new("redis-cli")
            .args(["--cluster", "check", &format!("{}:6379", ips[0])])
            .output()
            .await
            .expect("redis-cli");
        let out = String::from_utf8_lossy(&check.stdout);
        assert!(
            check.status.success() && out.contains("[OK] All 16384 slots covered"),
            "redis-cli --cluster check:\n{out}"
        );
        eprintln!(
            "rolling restart of 3x1 (6 pods) took {took:?}; {checked} acknowledged keys all present"
        );
        env.stop().await;
    });
}
