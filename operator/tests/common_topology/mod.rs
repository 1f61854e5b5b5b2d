//! Shared helpers for the topology end-to-end tests: real node processes on loopback (the
//! test kit's spawner, ports and binaries lookup), a converge loop, key loading/checking through a real cluster client, and
//! `redis-cli --cluster check`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use redis::AsyncCommands;
use tessera_testkit::{Launch, Server};
use tessera_topology::{reconcile, Desired, EngineOptions, PodEndpoint, TopologyReport};

/// Every test connection has these bounds, so a dead or stopped node fails a test instead
/// of hanging it.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection to one node (`redis://...` URL) with connect and response timeouts.
pub async fn open(url: &str) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let cfg = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&cfg)
        .await
}

/// A cluster client builder for `urls` with connect and response timeouts.
pub fn cluster_builder(urls: Vec<String>) -> redis::cluster::ClusterClientBuilder {
    redis::cluster::ClusterClientBuilder::new(urls)
        .connection_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
}

/// A cluster-mode node process (the kit's [`Server`], killed on drop, its log's tail printed
/// when a test panics) with what these tests ask of it: its pod endpoint, an async
/// connection, and a restart on another loopback address keeping its port and nodes.conf.
pub struct Node {
    pub srv: Server,
}

tessera_testkit::deref_server!(Node);

impl Node {
    /// Start a cluster-mode node in `dir` (created) on a free port of `ip`.
    pub fn start(bin: &str, ip: &str, dir: &Path, extra: &[&str]) -> Node {
        std::fs::create_dir_all(dir).expect("node dir");
        let srv = Launch::new(bin)
            .ip(ip)
            .dir(dir)
            .logfile()
            .args(&[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "3000",
                // `{ip}` follows the node to the address of a restart_on.
                "--cluster-announce-ip",
                "{ip}",
                "--save",
                "",
                "--protected-mode",
                "no",
                "--daemonize",
                "no",
            ])
            .args(extra)
            .start();
        Node { srv }
    }

    pub fn endpoint(&self, shard: u32, ordinal: u32) -> PodEndpoint {
        PodEndpoint {
            pod: format!("s{shard}-{ordinal}@{}", self.port),
            shard,
            ordinal,
            host: self.ip.clone(),
            port: self.port,
        }
    }

    /// Restart on another address with the same port and directory (and nodes.conf): a pod
    /// deleted and scheduled again. Stops cleanly first unless already stopped.
    pub fn restart_on(&mut self, ip: &str) {
        self.srv.stop();
        self.srv.ip = ip.to_string();
        let port = self.port;
        self.srv.restart_at(port);
    }

    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        open(&format!("redis://{}/", self.addr()))
            .await
            .expect("connect")
    }
}

/// Wait until the node answers PING (bounded).
pub async fn wait_up(n: &Node) {
    for _ in 0..200 {
        {
            if let Ok(mut conn) = open(&format!("redis://{}/", n.addr())).await {
                // NOAUTH counts as up: the node answered.
                match redis::cmd("PING").query_async::<String>(&mut conn).await {
                    Ok(_) => return,
                    Err(e) if e.code() == Some("NOAUTH") => return,
                    Err(_) => {}
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("node {} did not come up", n.addr());
}

/// Start `count` nodes of `bin` on 127.0.0.1, each in a directory of its own under `root`.
pub async fn start_nodes(bin: &str, root: &Path, count: usize, extra: &[&str]) -> Vec<Node> {
    let mut v = Vec::new();
    for _ in 0..count {
        v.push(Node::start(bin, "127.0.0.1", &new_dir(root), extra));
    }
    for n in &v {
        wait_up(n).await;
    }
    v
}

/// `root/node-K` for the first K not taken yet (created here, so two calls never share one).
fn new_dir(root: &Path) -> PathBuf {
    std::fs::create_dir_all(root).expect("root dir");
    (0..10_000)
        .map(|k| root.join(format!("node-{k}")))
        .find(|d| std::fs::create_dir(d).is_ok())
        .expect("a free node directory")
}

/// Every pod deleted at once: all `nodes` stop, then node k comes back on 127.0.0.{2+k}
/// with its directory (nodes.conf, data) and port, answering.
pub async fn readdress_all(nodes: &mut [Node]) {
    for n in nodes.iter_mut() {
        n.stop();
    }
    for (k, n) in nodes.iter_mut().enumerate() {
        n.restart_on(&format!("127.0.0.{}", 2 + k));
    }
    for n in nodes.iter() {
        wait_up(n).await;
    }
}

/// The first `shards` shards of `report` each have `replicas` replicas, all in sync.
pub fn assert_replicas_in_sync(report: &TopologyReport, shards: usize, replicas: usize) {
    for v in report.shards.iter().take(shards) {
        assert_eq!(v.replicas.len(), replicas, "{v:?}");
        assert_eq!(v.replicas_in_sync(), v.replicas, "{v:?}");
    }
}

/// Endpoints for `nodes` grouped in shards of `group` (= 1 + replicas).
pub fn endpoints(nodes: &[&Node], group: usize) -> Vec<PodEndpoint> {
    nodes
        .iter()
        .enumerate()
        .map(|(k, n)| n.endpoint((k / group) as u32, (k % group) as u32))
        .collect()
}

pub fn test_opts() -> EngineOptions {
    EngineOptions {
        pass_budget: Duration::from_secs(10),
        ..EngineOptions::default()
    }
}

/// Run passes until converged; panics after `limit`. Returns every report.
pub async fn converge(
    shards: u32,
    replicas: u32,
    pods: &[PodEndpoint],
    opts: &EngineOptions,
    limit: Duration,
) -> Vec<TopologyReport> {
    let desired = Desired {
        shards,
        replicas_per_shard: replicas,
        paused: false,
    };
    let start = std::time::Instant::now();
    let mut reports = Vec::new();
    loop {
        match reconcile(&desired, pods, opts).await {
            Ok(r) => {
                for a in &r.actions {
                    eprintln!("action: {a}");
                }
                for s in r.stuck.iter().take(3) {
                    eprintln!("stuck: {s}");
                }
                let done = r.converged;
                let stuck = r.stuck.clone();
                reports.push(r);
                if done {
                    return reports;
                }
                if start.elapsed() > limit {
                    dump(pods).await;
                    panic!("not converged after {limit:?}: {stuck:?}");
                }
            }
            Err(e) => {
                if start.elapsed() > limit {
                    panic!("not converged after {limit:?}: {e}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// INFO replication of the node at `ep`.
pub async fn replication_info(ep: &PodEndpoint) -> String {
    let mut c = open(&format!("redis://{}:{}/", ep.host, ep.port))
        .await
        .unwrap_or_else(|e| panic!("connect {}: {e}", ep.pod));
    redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut c)
        .await
        .unwrap_or_else(|e| panic!("INFO replication of {}: {e}", ep.pod))
}

/// Print every pod's CLUSTER NODES (for failure diagnosis).
pub async fn dump(pods: &[PodEndpoint]) {
    for p in pods {
        let Ok(mut conn) = open(&format!("redis://{}:{}/", p.host, p.port)).await else {
            eprintln!("{}: unreachable", p.pod);
            continue;
        };
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut conn)
            .await
            .unwrap_or_default();
        let mine: Vec<&str> = text.lines().filter(|l| l.contains("myself")).collect();
        eprintln!("{} sees:\n{text}\n(myself: {mine:?})", p.pod);
    }
}

pub async fn cluster_conn(seed: &Node) -> redis::cluster_async::ClusterConnection {
    let client = cluster_builder(vec![format!("redis://{}/", seed.addr())])
        .retries(30)
        .build()
        .expect("cluster client");
    client
        .get_async_connection()
        .await
        .expect("cluster connect")
}

pub fn key(i: usize) -> String {
    format!("key:{i}")
}

pub fn value(i: usize) -> String {
    format!("value-{i}-{}", "x".repeat(i % 40))
}

/// SET key:i for i in range through the cluster client.
pub async fn load_keys(
    conn: &redis::cluster_async::ClusterConnection,
    range: std::ops::Range<usize>,
) {
    let results: Vec<redis::RedisResult<()>> = futures::stream::iter(range)
        .map(|i| {
            let mut c = conn.clone();
            async move { c.set(key(i), value(i)).await }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    for r in results {
        r.expect("SET through the cluster client");
    }
}

/// Every key:i in range must read back its value; returns the number of bad keys (absent,
/// wrong, or unreadable). A read that errors (the cluster still settling after a failover:
/// CLUSTERDOWN, a refused connection to a node that just left) is retried for up to 10 s
/// before it counts, so that only lost or unreachable data does; the first few bad keys
/// are printed with what was read.
pub async fn missing_keys(
    conn: &redis::cluster_async::ClusterConnection,
    range: std::ops::Range<usize>,
) -> usize {
    let bad: Vec<Option<String>> = futures::stream::iter(range)
        .map(|i| {
            let mut c = conn.clone();
            async move {
                let mut last = String::new();
                for _ in 0..100 {
                    let v: redis::RedisResult<Option<String>> = c.get(key(i)).await;
                    match v {
                        Ok(Some(ref s)) if *s == value(i) => return None,
                        Ok(other) => return Some(format!("{}: {other:?}", key(i))),
                        Err(e) => last = format!("{}: {e}", key(i)),
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Some(last)
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let bad: Vec<String> = bad.into_iter().flatten().collect();
    for b in bad.iter().take(5) {
        eprintln!("bad key {b}");
    }
    bad.len()
}

/// `redis-cli --cluster check`; returns (passed, output).
pub fn cluster_check(addr: &str) -> (bool, String) {
    let out = tessera_testkit::cli::cli_out(&[], &["--cluster", "check", addr]);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let ok = out.status.success()
        && text.contains("[OK] All 16384 slots covered.")
        && !text.contains("[ERR]")
        && !text.contains("[WARNING]");
    (ok, text)
}

/// Poll `redis-cli --cluster check` until it passes (nodes agree after gossip settles).
pub async fn wait_check(addr: &str) {
    let mut last = String::new();
    for _ in 0..150 {
        let (ok, text) = cluster_check(addr);
        if ok {
            return;
        }
        last = text;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("redis-cli --cluster check never passed:\n{last}");
}

/// Sum of DBSIZE over the masters among `nodes`.
pub async fn master_keys(nodes: &[&Node]) -> u64 {
    let mut total = 0;
    for n in nodes {
        let mut c = n.conn().await;
        let role: redis::Value = redis::cmd("ROLE").query_async(&mut c).await.expect("ROLE");
        let is_master = matches!(&role, redis::Value::Array(v) if matches!(v.first(), Some(redis::Value::BulkString(b)) if b == b"master"));
        if is_master {
            let n: u64 = redis::cmd("DBSIZE")
                .query_async(&mut c)
                .await
                .expect("DBSIZE");
            total += n;
        }
    }
    total
}

/// What a [`Writer`] did: writes acknowledged, failed (an error reply or no reply: the value
/// may or may not have landed), and acknowledged writes that do not read back (lost).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteTally {
    pub acked: usize,
    pub failed: usize,
    pub lost: usize,
}

/// A writer that SETs `<prefix>:<n>` = n in sequence (a few hundred a second) through a
/// cluster client until stopped, counting failed writes instead of dropping them.
pub struct Writer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<(Vec<usize>, usize)>,
    prefix: String,
}

impl Writer {
    pub fn start(conn: redis::cluster_async::ClusterConnection, prefix: &str) -> Writer {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let p = prefix.to_string();
        let task = tokio::spawn(async move {
            let mut c = conn;
            let (mut acked, mut failed) = (Vec::new(), 0usize);
            let mut i = 0usize;
            while !flag.load(Ordering::SeqCst) {
                let r: redis::RedisResult<()> = c.set(format!("{p}:{i}"), i).await;
                match r {
                    Ok(()) => acked.push(i),
                    Err(e) => {
                        eprintln!("writer: SET {p}:{i} failed: {e}");
                        failed += 1;
                    }
                }
                i += 1;
                // A steady trickle, not a flood: enough writes to see any failure or loss
                // without starving the nodes of the 2 cores the test machines have.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            (acked, failed)
        });
        Writer {
            stop,
            task,
            prefix: prefix.to_string(),
        }
    }

    /// Stops the writer and reads every acknowledged write back through `conn`.
    pub async fn finish(self, conn: &redis::cluster_async::ClusterConnection) -> WriteTally {
        self.stop.store(true, Ordering::SeqCst);
        let (acked, failed) = self.task.await.expect("writer task");
        let mut lost = 0;
        for i in &acked {
            let mut c = conn.clone();
            let v: redis::RedisResult<Option<usize>> = c.get(format!("{}:{i}", self.prefix)).await;
            if !matches!(v, Ok(Some(n)) if n == *i) {
                eprintln!("writer: {}:{i} acknowledged, reads back {v:?}", self.prefix);
                lost += 1;
            }
        }
        WriteTally {
            acked: acked.len(),
            failed,
            lost,
        }
    }
}
