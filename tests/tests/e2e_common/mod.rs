//! Shared pieces of the kube-in-a-box end-to-end suites (e2e_operator.rs, e2e_rolling.rs):
//! the box + operator + kubectl environment, cluster checks, and a writer whose acknowledged
//! writes must all survive. Each test binary uses a subset. Clusters with `spec.tls` listen
//! on TLS only: their helpers take a [`TlsClient`] (the `_tls` variants).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client};
use serde_json::Value;
use tessera_tests::kiab::api::testing::{kubectl_binaries, Kubectl};
use tessera_tests::kiab::images::workspace_root;
use tessera_tests::kiab::testkit::{
    is_ready, operator_binary, pod_ip, pods, wait_for, OperatorProcess,
};
use tessera_tests::kiab::{BoxConfig, KubeInABox};
use tokio_rustls::rustls;

/// Pods run the operator's default image (`tessera/tessera-node:<version>`), which
/// kube-in-a-box maps to the workspace's built tessera-node.
pub const IMAGE: Option<&str> = None;
/// Reference servers: one suite each proves the operator drives any Redis Cluster node.
pub const REDIS_IMAGE: &str = "redis:7.0";
pub const VALKEY_IMAGE: &str = "valkey/valkey:9";
pub const WAIT: Duration = Duration::from_secs(240);
/// How many e2e bodies of one test binary run at once.
static RUNNING: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// At most `TESSERA_E2E_PARALLEL` (default 2) bodies run together: each test has its own
/// loopback address and box, and a body spends most of its time waiting on pods and
/// reconciles, so two share 2 cores without starving each other's nodes. 1 runs them alone.
fn e2e_parallel() -> usize {
    std::env::var("TESSERA_E2E_PARALLEL")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(2)
}

/// Holds one of the [`e2e_parallel`] places until dropped.
struct Place;

impl Place {
    fn take() -> Place {
        let (count, freed) = &RUNNING;
        let limit = e2e_parallel();
        let mut running = count.lock().unwrap_or_else(|e| e.into_inner());
        while *running >= limit {
            running = freed.wait(running).unwrap_or_else(|e| e.into_inner());
        }
        *running += 1;
        Place
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let (count, freed) = &RUNNING;
        *count.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        freed.notify_one();
    }
}

/// Runs one async test body on a fresh runtime, with at most [`e2e_parallel`] others.
pub fn serial<F: std::future::Future<Output = ()>>(f: F) {
    let _place = Place::take();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(f);
}

pub fn rcl_resource() -> ApiResource {
    ApiResource {
        group: "tessera.rs".into(),
        version: "v1alpha1".into(),
        api_version: "tessera.rs/v1alpha1".into(),
        kind: "RedisCluster".into(),
        plural: "redisclusters".into(),
    }
}

/// A RedisCluster on the default node image ([`IMAGE`]).
pub fn manifest(name: &str, shards: u32, replicas: u32, extra: &str) -> String {
    manifest_on(IMAGE, name, shards, replicas, extra)
}

/// A RedisCluster on `image` (`None`: no `spec.image`, so the operator's default).
pub fn manifest_on(
    image: Option<&str>,
    name: &str,
    shards: u32,
    replicas: u32,
    extra: &str,
) -> String {
    let image = image.map(|i| format!("  image: {i}\n")).unwrap_or_default();
    format!(
        "apiVersion: tessera.rs/v1alpha1\nkind: RedisCluster\nmetadata:\n  name: {name}\nspec:\n  shards: {shards}\n  replicasPerShard: {replicas}\n{image}{extra}"
    )
}

/// The box, the operator and a kubectl, torn down on drop.
pub struct Env {
    pub kiab: KubeInABox,
    pub operator: Option<OperatorProcess>,
    pub kubectl: Kubectl,
    pub client: Client,
    /// Kept (not deleted) when the test panics, so the logs can be read.
    _dir: KeepOnPanic,
}

/// Deletes the test's directory, unless the test panicked (or `TESSERA_E2E_KEEP` is set in
/// the environment): then it is kept for its logs.
pub struct KeepOnPanic(Option<tempfile::TempDir>);

impl Drop for KeepOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() || std::env::var_os("TESSERA_E2E_KEEP").is_some() {
            if let Some(d) = self.0.take() {
                eprintln!(
                    "box state, pod logs and operator.log kept in {}",
                    d.keep().display()
                );
            }
        }
    }
}

impl Env {
    pub async fn start(ip_base: &str, with_operator: bool) -> Env {
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

    pub fn rcl(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), "default", &rcl_resource())
    }

    pub async fn apply(&self, yaml: &str) {
        self.kubectl.ok_stdin(&["apply", "-f", "-"], yaml).await;
    }

    /// Operator log tail for failure messages (and a check it is still alive).
    pub fn operator_state(&mut self) -> String {
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
    pub async fn wait_ready(&mut self, name: &str, shards: u64, nodes: usize, timeout: Duration) {
        self.wait_ready_with(name, shards, nodes, timeout, None)
            .await
    }

    /// [`Env::wait_ready`] for a cluster with `spec.tls`: every node is asked over TLS.
    pub async fn wait_ready_tls(
        &mut self,
        name: &str,
        shards: u64,
        nodes: usize,
        timeout: Duration,
        tls: &TlsClient,
    ) {
        self.wait_ready_with(name, shards, nodes, timeout, Some(tls))
            .await
    }

    async fn wait_ready_with(
        &mut self,
        name: &str,
        shards: u64,
        nodes: usize,
        timeout: Duration,
        tls: Option<&TlsClient>,
    ) {
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
                cluster_ok_with(&client, name, nodes, tls).await
            },
        )
        .await;
        if let Err(e) = r {
            let mut nodes = String::new();
            for ip in pod_ips(&self.client, name).await {
                let n = cluster_nodes_with(&ip, None, tls)
                    .await
                    .unwrap_or_else(|e| e);
                nodes.push_str(&format!("CLUSTER NODES from {ip}:\n{n}\n"));
            }
            panic!("{e}\n{nodes}{}", self.operator_state());
        }
    }

    /// SIGKILLs the operator (no graceful shutdown, as a crash or an OOM kill would).
    pub async fn kill_operator(&mut self) {
        if let Some(op) = self.operator.take() {
            op.kill().await;
        }
    }

    /// The operator's /metrics text (empty while it is not listening yet).
    pub async fn operator_metrics(&self) -> String {
        match self.operator.as_ref().and_then(|o| o.metrics_addr()) {
            Some(addr) => metrics_at(&addr.to_string()).await,
            None => String::new(),
        }
    }

    /// Starts the operator again (after [`Env::kill_operator`]), appending to the same log.
    pub fn start_operator(&mut self) {
        self.start_operator_with(&[]);
    }

    /// Starts the operator with `extra` arguments to `run` (an [`Env::start`] without one).
    pub fn start_operator_with(&mut self, extra: &[&str]) {
        assert!(self.operator.is_none(), "the operator is already running");
        let dir = self._dir.0.as_ref().expect("test dir").path();
        let bin = operator_binary().unwrap_or_else(|e| panic!("{e}"));
        self.operator = Some(
            OperatorProcess::start_with_args(
                &bin,
                self.kiab.kubeconfig_path(),
                dir.join("operator.log"),
                extra,
            )
            .expect("start tessera-operator"),
        );
    }

    /// A kube client that does not retry 429s (kube-rs backs off for minutes by default):
    /// for calls whose refusal the test expects, such as an eviction blocked by a budget.
    pub fn client_without_retry(&self) -> Client {
        let url = self.kiab.api_url().parse().expect("api url");
        let mut config = kube::Config::new(url);
        config.default_namespace = "default".into();
        config.read_timeout = Some(Duration::from_secs(30));
        config.default_retry = false;
        Client::try_from(config).expect("kube client")
    }

    pub async fn stop(mut self) {
        if let Some(op) = self.operator.take() {
            op.stop().await;
        }
        self.kiab.stop().await;
    }
}

/// All `n` pods of cluster `name` Ready and answering cluster_state:ok with a full slot map.
pub async fn cluster_ok(client: &Client, name: &str, n: usize) -> Result<(), String> {
    cluster_ok_with(client, name, n, None).await
}

/// [`cluster_ok`] asked over TLS.
pub async fn cluster_ok_tls(
    client: &Client,
    name: &str,
    n: usize,
    tls: &TlsClient,
) -> Result<(), String> {
    cluster_ok_with(client, name, n, Some(tls)).await
}

async fn cluster_ok_with(
    client: &Client,
    name: &str,
    n: usize,
    tls: Option<&TlsClient>,
) -> Result<(), String> {
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
        let info = cluster_info_with(&ip, tls).await?;
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

pub async fn node(ip: &str) -> Result<redis::aio::MultiplexedConnection, String> {
    node_auth(ip, None).await
}

/// A connection to one node, logged in with `password` when given.
pub async fn node_auth(
    ip: &str,
    password: Option<&str>,
) -> Result<redis::aio::MultiplexedConnection, String> {
    node_with(ip, password, None).await
}

/// A TLS connection to one node (`rediss://`), trusting and presenting what `tls` holds.
pub async fn node_tls(
    ip: &str,
    tls: &TlsClient,
) -> Result<redis::aio::MultiplexedConnection, String> {
    node_with(ip, None, Some(tls)).await
}

async fn node_with(
    ip: &str,
    password: Option<&str>,
    tls: Option<&TlsClient>,
) -> Result<redis::aio::MultiplexedConnection, String> {
    // Bounded connect and replies: a dead node fails a poll, never hangs the test.
    let cfg = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(10)));
    let auth = password.map(|p| format!(":{p}@")).unwrap_or_default();
    let client = match tls {
        None => redis::Client::open(format!("redis://{auth}{ip}:6379/")),
        Some(t) => t.client(&format!("rediss://{auth}{ip}:6379/")),
    };
    client
        .map_err(|e| e.to_string())?
        .get_multiplexed_async_connection_with_config(&cfg)
        .await
        .map_err(|e| format!("{ip}: {e}"))
}

pub async fn cluster_info(ip: &str) -> Result<String, String> {
    cluster_info_with(ip, None).await
}

/// CLUSTER INFO from one node, over TLS.
pub async fn cluster_info_tls(ip: &str, tls: &TlsClient) -> Result<String, String> {
    cluster_info_with(ip, Some(tls)).await
}

async fn cluster_info_with(ip: &str, tls: Option<&TlsClient>) -> Result<String, String> {
    let mut c = node_with(ip, None, tls).await?;
    redis::cmd("CLUSTER")
        .arg("INFO")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())
}

pub async fn cluster_nodes(ip: &str) -> Result<String, String> {
    cluster_nodes_auth(ip, None).await
}

/// CLUSTER NODES from one node, logged in with `password` when given.
pub async fn cluster_nodes_auth(ip: &str, password: Option<&str>) -> Result<String, String> {
    cluster_nodes_with(ip, password, None).await
}

/// CLUSTER NODES from one node, over TLS.
pub async fn cluster_nodes_tls(ip: &str, tls: &TlsClient) -> Result<String, String> {
    cluster_nodes_with(ip, None, Some(tls)).await
}

async fn cluster_nodes_with(
    ip: &str,
    password: Option<&str>,
    tls: Option<&TlsClient>,
) -> Result<String, String> {
    let mut c = node_with(ip, password, tls).await?;
    redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())
}

/// IPs of the cluster's current pods.
pub async fn pod_ips(client: &Client, name: &str) -> Vec<String> {
    pods(client, "default", &format!("tessera.rs/cluster={name}"))
        .await
        .unwrap_or_default()
        .iter()
        .filter_map(pod_ip)
        .collect()
}

pub async fn cluster_conn(ips: &[String]) -> redis::cluster_async::ClusterConnection {
    cluster_conn_auth(ips, None).await
}

/// A cluster connection seeded with `ips`, logged in with `password` when given.
pub async fn cluster_conn_auth(
    ips: &[String],
    password: Option<&str>,
) -> redis::cluster_async::ClusterConnection {
    try_cluster_conn(ips, password)
        .await
        .expect("cluster connection")
}

/// [`cluster_conn_auth`] that reports failure instead of panicking.
pub async fn try_cluster_conn(
    ips: &[String],
    password: Option<&str>,
) -> Result<redis::cluster_async::ClusterConnection, String> {
    try_cluster_conn_with(ips, password, None).await
}

/// A TLS cluster connection seeded with `ips` (`rediss://`; the nodes it learns from CLUSTER
/// SLOTS are reached over TLS too).
pub async fn cluster_conn_tls(
    ips: &[String],
    tls: &TlsClient,
) -> redis::cluster_async::ClusterConnection {
    try_cluster_conn_tls(ips, tls)
        .await
        .expect("TLS cluster connection")
}

/// [`cluster_conn_tls`] that reports failure instead of panicking.
pub async fn try_cluster_conn_tls(
    ips: &[String],
    tls: &TlsClient,
) -> Result<redis::cluster_async::ClusterConnection, String> {
    try_cluster_conn_with(ips, None, Some(tls)).await
}

async fn try_cluster_conn_with(
    ips: &[String],
    password: Option<&str>,
    tls: Option<&TlsClient>,
) -> Result<redis::cluster_async::ClusterConnection, String> {
    let auth = password.map(|p| format!(":{p}@")).unwrap_or_default();
    let scheme = if tls.is_some() { "rediss" } else { "redis" };
    let nodes: Vec<String> = ips
        .iter()
        .map(|ip| format!("{scheme}://{auth}{ip}:6379/"))
        .collect();
    let mut builder = redis::cluster::ClusterClient::builder(nodes)
        .retries(6)
        .connection_timeout(Duration::from_secs(3))
        .response_timeout(Duration::from_secs(5));
    if let Some(t) = tls {
        // The CA is checked, the name is not: node certificates carry no pod IPs.
        builder = builder
            .certs(t.certificates())
            .danger_accept_invalid_hostnames(true);
    }
    let client = builder.build().map_err(|e| e.to_string())?;
    tokio::time::timeout(Duration::from_secs(15), client.get_async_connection())
        .await
        .map_err(|_| "cluster connection timed out".to_string())?
        .map_err(|e| e.to_string())
}

/// Writes keys in the background; every acknowledged write must be readable afterwards, and
/// every write that failed (an error or no reply within 10 s) is counted, never dropped.
pub struct DataChecker {
    pub acked: Arc<Mutex<BTreeMap<String, String>>>,
    /// Writes that got an error or no reply: not acknowledged, so not checked, but reported.
    pub failed: Arc<AtomicU64>,
    /// The first few failure messages, for the report.
    pub failures: Arc<Mutex<Vec<String>>>,
    pub stop: Arc<AtomicBool>,
    pub handle: tokio::task::JoinHandle<()>,
    /// The Secret the password is read from, when the cluster requires one.
    secret: Option<(Client, String)>,
    /// How to reach a cluster with `spec.tls` (None: plaintext).
    tls: Option<TlsClient>,
}

/// Where a following writer finds the cluster's pods, and its password, after a failure.
#[derive(Clone)]
struct Follow {
    client: Client,
    name: String,
    /// Secret whose `password` key the cluster requires: re-read on every reconnect, as a
    /// client mounting the Secret would.
    secret: Option<String>,
}

/// What a [`DataChecker`] saw: acknowledged writes (all verified present) and failed ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteTally {
    pub acked: usize,
    pub failed: u64,
    /// Up to 5 failure messages.
    pub failures: Vec<String>,
}

impl std::fmt::Display for WriteTally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} acknowledged writes, 0 lost, {} failed",
            self.acked, self.failed
        )?;
        if !self.failures.is_empty() {
            write!(f, " (e.g. {:?})", self.failures)?;
        }
        Ok(())
    }
}

impl DataChecker {
    pub async fn start(ips: &[String], prefix: &str, preload: usize) -> DataChecker {
        Self::start_with(ips, None, None, prefix, preload).await
    }

    /// [`DataChecker::start`] on a cluster with `spec.tls`: the writer and
    /// [`DataChecker::verify`] connect over TLS with `tls`.
    pub async fn start_tls(
        ips: &[String],
        tls: &TlsClient,
        prefix: &str,
        preload: usize,
    ) -> DataChecker {
        Self::start_with(ips, None, Some(tls.clone()), prefix, preload).await
    }

    /// Like [`DataChecker::start`], but the writer follows the pods of cluster `name`: after
    /// a failed write it reconnects (at most once a second) to the pods' current addresses,
    /// as a client behind a Service would. Needed when every pod may be replaced at once.
    pub async fn start_following(
        client: &Client,
        name: &str,
        prefix: &str,
        preload: usize,
    ) -> DataChecker {
        let ips = pod_ips(client, name).await;
        let follow = Follow {
            client: client.clone(),
            name: name.to_string(),
            secret: None,
        };
        Self::start_with(&ips, Some(follow), None, prefix, preload).await
    }

    /// [`DataChecker::start_following`] on a cluster that requires the password in Secret
    /// `secret`: the writer reads it at start and again whenever a write fails (a password
    /// rotation), and [`DataChecker::verify`] reads with the current one.
    pub async fn start_auth(
        client: &Client,
        name: &str,
        secret: &str,
        prefix: &str,
        preload: usize,
    ) -> DataChecker {
        let ips = pod_ips(client, name).await;
        let follow = Follow {
            client: client.clone(),
            name: name.to_string(),
            secret: Some(secret.to_string()),
        };
        Self::start_with(&ips, Some(follow), None, prefix, preload).await
    }

    async fn start_with(
        ips: &[String],
        follow: Option<Follow>,
        tls: Option<TlsClient>,
        prefix: &str,
        preload: usize,
    ) -> DataChecker {
        let acked = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let secret = follow
            .as_ref()
            .and_then(|f| Some((f.client.clone(), f.secret.clone()?)));
        let password = match &secret {
            Some((c, s)) => Some(secret_password(c, s).await.expect("password Secret")),
            None => None,
        };
        let mut conn = try_cluster_conn_with(ips, password.as_deref(), tls.as_ref())
            .await
            .expect("cluster connection");
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
        let failed = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let (a, s, p) = (acked.clone(), stop.clone(), prefix.to_string());
        let (fc, fm) = (failed.clone(), failures.clone());
        let writer_tls = tls.clone();
        let handle = tokio::spawn(async move {
            let mut i = preload;
            let mut reconnected = std::time::Instant::now();
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
                match r {
                    Ok(()) => {
                        a.lock().expect("lock").insert(k, v);
                    }
                    Err(e) => {
                        fc.fetch_add(1, Ordering::SeqCst);
                        {
                            let mut m = fm.lock().expect("lock");
                            if m.len() < 5 {
                                m.push(format!("SET {k}: {e}"));
                            }
                        }
                        if let Some(f) = &follow {
                            if reconnected.elapsed() >= Duration::from_secs(1) {
                                reconnected = std::time::Instant::now();
                                let ips = pod_ips(&f.client, &f.name).await;
                                let password = match &f.secret {
                                    Some(s) => secret_password(&f.client, s).await.ok(),
                                    None => None,
                                };
                                if let Ok(c) = try_cluster_conn_with(
                                    &ips,
                                    password.as_deref(),
                                    writer_tls.as_ref(),
                                )
                                .await
                                {
                                    conn = c;
                                }
                            }
                        }
                    }
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        DataChecker {
            acked,
            failed,
            failures,
            stop,
            handle,
            secret,
            tls,
        }
    }

    /// Stops writing and checks every acknowledged key (none may be lost); returns the tally
    /// of acknowledged and failed writes.
    pub async fn verify(self, ips: &[String]) -> WriteTally {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.handle.await;
        let acked = self.acked.lock().expect("lock").clone();
        let password = match &self.secret {
            Some((c, s)) => Some(secret_password(c, s).await.expect("password Secret")),
            None => None,
        };
        let mut conn = try_cluster_conn_with(ips, password.as_deref(), self.tls.as_ref())
            .await
            .expect("cluster connection");
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
        WriteTally {
            acked: acked.len(),
            failed: self.failed.load(Ordering::SeqCst),
            failures: self.failures.lock().expect("lock").clone(),
        }
    }
}

/// `CONFIG GET name` on one node.
pub async fn config_get(ip: &str, name: &str) -> Result<String, String> {
    let mut c = node(ip).await?;
    let kv: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    kv.get(1).cloned().ok_or_else(|| format!("{ip}: no {name}"))
}

/// The sorted node ids of the nodes at `ips`.
pub async fn node_ids(ips: &[String]) -> Vec<String> {
    let mut ids = Vec::new();
    for ip in ips {
        let nodes = cluster_nodes(ip).await.expect("CLUSTER NODES");
        let id = nodes
            .lines()
            .find(|l| l.contains("myself"))
            .and_then(|l| l.split_whitespace().next())
            .expect("myself line");
        ids.push(id.to_string());
    }
    ids.sort();
    ids
}

/// Every replica has finished its sync and every master's replicas are at its offset.
/// (redis-server needs a completed initial sync before a replica may ever fail over, and the
/// operator may report Ready before that; see the report.)
pub async fn replication_in_sync(client: &Client, name: &str) -> Result<(), String> {
    replication_within(client, name, 0, None).await
}

/// [`replication_in_sync`] asked over TLS.
pub async fn replication_in_sync_tls(
    client: &Client,
    name: &str,
    tls: &TlsClient,
) -> Result<(), String> {
    replication_within(client, name, 0, Some(tls)).await
}

/// Every replica's link is up and each master's replicas are online within `max_lag` bytes of
/// its offset.
async fn replication_within(
    client: &Client,
    name: &str,
    max_lag: u64,
    tls: Option<&TlsClient>,
) -> Result<(), String> {
    for ip in pod_ips(client, name).await {
        let mut c = node_with(&ip, None, tls).await?;
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
            continue;
        }
        let offset: u64 = field("master_repl_offset")
            .and_then(|o| o.parse().ok())
            .unwrap_or(0);
        for l in info
            .lines()
            .filter(|l| l.starts_with("slave") && l.contains("offset="))
        {
            let o: u64 = l
                .split(',')
                .find_map(|kv| kv.strip_prefix("offset="))
                .and_then(|o| o.parse().ok())
                .unwrap_or(0);
            if !l.contains("state=online") || offset.saturating_sub(o) > max_lag {
                return Err(format!(
                    "{ip}: replica {l} not online within {max_lag} bytes of master offset {offset}"
                ));
            }
        }
    }
    Ok(())
}

/// Stronger than [`replication_in_sync`]: exactly `shards` masters own slots, each with
/// `replicas` online replicas at its `master_repl_offset`, and every other pod is a replica
/// (by INFO and by its own CLUSTER NODES line) whose link is up. Call with writes stopped.
pub async fn replicas_linked(
    client: &Client,
    name: &str,
    shards: usize,
    replicas: usize,
) -> Result<(), String> {
    replicas_linked_auth(client, name, shards, replicas, None).await
}

/// [`replicas_linked`] on a cluster that requires `password`.
pub async fn replicas_linked_auth(
    client: &Client,
    name: &str,
    shards: usize,
    replicas: usize,
    password: Option<&str>,
) -> Result<(), String> {
    replicas_linked_with(client, name, shards, replicas, password, None).await
}

/// [`replicas_linked`] asked over TLS.
pub async fn replicas_linked_tls(
    client: &Client,
    name: &str,
    shards: usize,
    replicas: usize,
    tls: &TlsClient,
) -> Result<(), String> {
    replicas_linked_with(client, name, shards, replicas, None, Some(tls)).await
}

async fn replicas_linked_with(
    client: &Client,
    name: &str,
    shards: usize,
    replicas: usize,
    password: Option<&str>,
    tls: Option<&TlsClient>,
) -> Result<(), String> {
    let mut masters = 0;
    for ip in pod_ips(client, name).await {
        let mut c = node_with(&ip, password, tls).await?;
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut c)
            .await
            .map_err(|e| e.to_string())?;
        let nodes = cluster_nodes_with(&ip, password, tls).await?;
        let me = nodes
            .lines()
            .find(|l| l.contains("myself"))
            .ok_or_else(|| format!("{ip}: no myself line"))?;
        let listed_replica = me.split_whitespace().nth(3).is_some_and(|m| m != "-");
        let owns_slots = me.split_whitespace().nth(8).is_some();
        let field = |k: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}:")))
                .map(|v| v.trim().to_string())
        };
        if owns_slots && !listed_replica {
            masters += 1;
            let offset = field("master_repl_offset").unwrap_or_default();
            let links: Vec<&str> = info
                .lines()
                .filter(|l| l.starts_with("slave") && l.contains("offset="))
                .collect();
            if links.len() != replicas {
                return Err(format!(
                    "{ip}: master has {} replicas linked, want {replicas}",
                    links.len()
                ));
            }
            for l in links {
                let o = l
                    .split(',')
                    .find_map(|kv| kv.strip_prefix("offset="))
                    .unwrap_or("");
                if o != offset || !l.contains("state=online") {
                    return Err(format!("{ip}: replica {l} not at master offset {offset}"));
                }
            }
        } else {
            if !listed_replica || field("role").as_deref() != Some("slave") {
                return Err(format!(
                    "{ip}: neither a slot owner nor a replica (role {:?}): {me}",
                    field("role")
                ));
            }
            if field("master_link_status").as_deref() != Some("up") {
                return Err(format!("{ip}: replica link not up"));
            }
        }
    }
    if masters != shards {
        return Err(format!("{masters} masters own slots, want {shards}"));
    }
    Ok(())
}

/// Prints the scenario's line of issue 16's closing table, in the one form the table is
/// built from.
/// With `TESSERA_SCENARIO_LOG=<file>` the line is also appended there, so a whole `make test`
/// run leaves the lifecycle table behind (cargo hides a passing test's stderr).
pub fn report_scenario(name: &str, ready: Duration, tally: &WriteTally) {
    let line = format!(
        "SCENARIO {name} | ready {:.1}s | acked {} | lost 0 | failed {}",
        ready.as_secs_f64(),
        tally.acked,
        tally.failed
    );
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("TESSERA_SCENARIO_LOG") {
        use std::io::Write;
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = appended {
            eprintln!(
                "TESSERA_SCENARIO_LOG {}: {e}",
                std::path::Path::new(&path).display()
            );
        }
    }
    if !tally.failures.is_empty() {
        eprintln!("  failed writes, e.g. {:?}", tally.failures);
    }
}

/// Every node of cluster `name` sees each of the 16384 slots owned by exactly one master,
/// and no slot is left MIGRATING or IMPORTING (`[slot->-id]` / `[slot-<-id]` in CLUSTER
/// NODES).
pub async fn slots_settled(client: &Client, name: &str) -> Result<(), String> {
    slots_settled_with(client, name, None).await
}

/// [`slots_settled`] asked over TLS.
pub async fn slots_settled_tls(client: &Client, name: &str, tls: &TlsClient) -> Result<(), String> {
    slots_settled_with(client, name, Some(tls)).await
}

async fn slots_settled_with(
    client: &Client,
    name: &str,
    tls: Option<&TlsClient>,
) -> Result<(), String> {
    for ip in pod_ips(client, name).await {
        let nodes = cluster_nodes_with(&ip, None, tls).await?;
        let mut owners = vec![0u8; 16384];
        for line in nodes.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 {
                continue;
            }
            for s in &f[8..] {
                if s.starts_with('[') {
                    return Err(format!("{ip}: slot left open {s}: {line}"));
                }
                let (a, b) = s.split_once('-').unwrap_or((s, s));
                let (a, b): (usize, usize) = match (a.parse(), b.parse()) {
                    (Ok(a), Ok(b)) if a <= b && b < 16384 => (a, b),
                    _ => return Err(format!("{ip}: bad slot range {s}")),
                };
                for o in &mut owners[a..=b] {
                    *o = o.saturating_add(1);
                }
            }
        }
        if let Some(slot) = owners.iter().position(|&o| o != 1) {
            return Err(format!(
                "{ip}: slot {slot} owned by {} masters",
                owners[slot]
            ));
        }
    }
    Ok(())
}

/// Whether any node of cluster `name` has a slot MIGRATING or IMPORTING right now, or lists
/// an atomic slot migration created at or after `since` (Unix seconds).
///
/// tessera-node moves slots atomically (CLUSTER MIGRATESLOTS): no slot is ever MIGRATING or
/// IMPORTING, and a whole move can end between two polls, so a job listed on a node counts:
/// the scale has started moving slots, and more moves may follow.
pub async fn slot_migrating(client: &Client, name: &str, since: u64) -> bool {
    for ip in pod_ips(client, name).await {
        if let Ok(nodes) = cluster_nodes(&ip).await {
            if nodes.contains("->-") || nodes.contains("-<-") {
                return true;
            }
        }
        let Ok(mut c) = node_with(&ip, None, None).await else {
            continue;
        };
        let jobs: Result<redis::Value, _> = redis::cmd("CLUSTER")
            .arg("GETSLOTMIGRATIONS")
            .query_async(&mut c)
            .await;
        let Ok(redis::Value::Array(jobs)) = jobs else {
            continue;
        };
        for job in jobs {
            let redis::Value::Array(fields) = job else {
                continue;
            };
            let created = fields.chunks(2).find_map(|f| match f {
                [redis::Value::BulkString(k), redis::Value::Int(t)] if k == b"create_time" => {
                    Some(*t as u64)
                }
                _ => None,
            });
            if created.is_some_and(|t| t >= since) {
                return true;
            }
        }
    }
    false
}

/// The `password` key of Secret `secret`.
pub async fn secret_password(client: &Client, secret: &str) -> Result<String, String> {
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::default_namespaced(client.clone());
    let s = api.get(secret).await.map_err(|e| e.to_string())?;
    let bytes = s
        .data
        .as_ref()
        .and_then(|d| d.get("password"))
        .ok_or_else(|| format!("Secret {secret} has no password"))?;
    String::from_utf8(bytes.0.clone()).map_err(|e| e.to_string())
}

/// Every replica's link is up and each master's replicas are online within 1 MiB of its
/// offset: [`replication_in_sync`] for a cluster that is being written to (offsets then never
/// stay equal), e.g. before a disruption while a writer runs.
pub async fn replicas_online(client: &Client, name: &str) -> Result<(), String> {
    replication_within(client, name, 1 << 20, None).await
}

/// [`replicas_online`] asked over TLS.
pub async fn replicas_online_tls(
    client: &Client,
    name: &str,
    tls: &TlsClient,
) -> Result<(), String> {
    replication_within(client, name, 1 << 20, Some(tls)).await
}

/// What a TLS client of a cluster with `spec.tls` trusts and presents, as PEM.
#[derive(Clone)]
pub struct TlsClient {
    /// The CA the nodes' certificates must chain to.
    pub ca: Vec<u8>,
    /// Client certificate and key; None: the client presents no certificate.
    pub cert: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsClient {
    pub fn new(ca_pem: &str, cert: Option<(&str, &str)>) -> TlsClient {
        TlsClient {
            ca: ca_pem.as_bytes().to_vec(),
            cert: cert.map(|(c, k)| (c.as_bytes().to_vec(), k.as_bytes().to_vec())),
        }
    }

    /// The redis crate's form.
    pub fn certificates(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: self
                .cert
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: Some(self.ca.clone()),
        }
    }

    /// A client for `url` (`rediss://`) that checks the CA but not the host name: node
    /// certificates carry no pod IPs (Redis itself never checks names either).
    pub fn client(&self, url: &str) -> redis::RedisResult<redis::Client> {
        let c = redis::Client::build_with_tls(url, self.certificates())?;
        let info = c.get_connection_info().clone();
        let mut addr = info.addr().clone();
        addr.set_danger_accept_invalid_hostnames(true);
        redis::Client::open(info.set_addr(addr))
    }

    /// The same trust for a raw rustls handshake ([`served_certificate`]).
    pub fn rustls_config(&self) -> Result<rustls::ClientConfig, String> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&self.ca) {
            roots
                .add(c.map_err(|e| format!("CA PEM: {e}"))?)
                .map_err(|e| format!("CA certificate: {e}"))?;
        }
        let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .map_err(|e| format!("verifier: {e}"))?;
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyNameVerifier(inner)));
        match &self.cert {
            None => Ok(builder.with_no_client_auth()),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("client certificate PEM: {e}"))?;
                let key = PrivateKeyDer::from_pem_slice(key)
                    .map_err(|e| format!("client key PEM: {e}"))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("client certificate: {e}"))
            }
        }
    }
}

/// Checks the chain to the CA (and the certificate's validity), accepts any name.
#[derive(Debug)]
struct AnyNameVerifier(Arc<rustls::client::WebPkiServerVerifier>);

impl rustls::client::danger::ServerCertVerifier for AnyNameVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The leaf certificate (DER) the node at `ip` serves on 6379, read from a TLS handshake of
/// our own that checks the chain to `tls`'s CA (not the name) and presents `tls`'s client
/// certificate.
pub async fn served_certificate(ip: &str, tls: &TlsClient) -> Result<Vec<u8>, String> {
    let config = tls.rustls_config()?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = rustls::pki_types::ServerName::try_from(ip.to_string())
        .map_err(|e| format!("{ip}: {e}"))?;
    let tcp = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::TcpStream::connect((ip, 6379)),
    )
    .await
    .map_err(|_| format!("{ip}:6379: connect timed out"))?
    .map_err(|e| format!("{ip}:6379: {e}"))?;
    let stream = tokio::time::timeout(Duration::from_secs(10), connector.connect(name, tcp))
        .await
        .map_err(|_| format!("{ip}:6379: TLS handshake timed out"))?
        .map_err(|e| format!("{ip}:6379: TLS handshake: {e}"))?;
    let (_, conn) = stream.get_ref();
    conn.peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .ok_or_else(|| format!("{ip}:6379: the node sent no certificate"))
}

/// The value of the series `name` whose labels include every `key="value"` of `labels`, in a
/// Prometheus text exposition.
pub fn metric_value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let rest = series.strip_prefix(name)?;
        if !(rest.is_empty() || rest.starts_with('{')) {
            return None;
        }
        labels
            .iter()
            .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
            .then(|| value.parse().ok())?
    })
}

/// The body of `GET /metrics` from `addr` (`ip:port`), empty when it cannot be had.
pub async fn metrics_at(addr: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut conn) = tokio::net::TcpStream::connect(addr).await else {
        return String::new();
    };
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if conn.write_all(req.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    text.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default()
}
