//! Shared helpers for the topology end-to-end tests: real node processes on loopback (killed
//! on drop), a converge loop, key loading/checking through a real cluster client, and
//! `redis-cli --cluster check`.
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use futures::StreamExt;
use redis::AsyncCommands;
use tessera_operator::topology::{reconcile, Desired, EngineOptions, PodEndpoint, TopologyReport};

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

/// Ports 20000-22999 belong to these tests (bus ports +10000).
static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

fn free(ip: Ipv4Addr, port: u16) -> bool {
    TcpListener::bind(SocketAddrV4::new(ip, port)).is_ok()
        && TcpListener::bind(SocketAddrV4::new(ip, port + 10000)).is_ok()
}

/// A port whose bus port is free too, on 127.0.0.1 and the other addresses tests move to.
pub fn pick_port() -> u16 {
    let _ = NEXT_PORT.compare_exchange(
        0,
        20000 + (std::process::id() % 60) as u16 * 40,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    loop {
        let mut p = NEXT_PORT.fetch_add(1, Ordering::SeqCst);
        if p >= 23000 {
            NEXT_PORT.store(20000, Ordering::SeqCst);
            p = 20000;
        }
        let ips: Vec<Ipv4Addr> = (1..=7).map(|d| Ipv4Addr::new(127, 0, 0, d)).collect();
        if ips.iter().all(|ip| free(*ip, p)) {
            return p;
        }
    }
}

/// A node process; killed (SIGKILL) on drop.
pub struct Node {
    pub bin: String,
    pub ip: String,
    pub port: u16,
    pub dir: PathBuf,
    pub child: Option<Child>,
    pub extra: Vec<String>,
}

impl Node {
    /// Start a cluster-mode node in `dir` (created), listening on ip:port.
    pub fn start(bin: &str, ip: &str, port: u16, dir: &Path, extra: &[&str]) -> Node {
        std::fs::create_dir_all(dir).expect("node dir");
        let mut n = Node {
            bin: bin.to_string(),
            ip: ip.to_string(),
            port,
            dir: dir.to_path_buf(),
            child: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        n.spawn();
        n
    }

    fn spawn(&mut self) {
        let log = self.dir.join("node.log");
        let mut cmd = Command::new(&self.bin);
        cmd.args(["--port", &self.port.to_string()])
            .args(["--bind", &self.ip])
            .args(["--cluster-enabled", "yes"])
            .args(["--cluster-config-file", "nodes.conf"])
            .args(["--cluster-node-timeout", "3000"])
            .args(["--cluster-announce-ip", &self.ip])
            .args(["--dir", self.dir.to_str().expect("utf8 dir")])
            .args(["--save", ""])
            .args(["--protected-mode", "no"])
            .args(["--daemonize", "no"])
            .args(["--logfile", log.to_str().expect("utf8 log")])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.child = Some(cmd.spawn().expect("spawn node"));
    }

    pub fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
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

    /// SIGTERM (so persistence is flushed) and wait, bounded: Redis refuses to exit while it
    /// writes its initial AOF, so SIGTERM is repeated, then SIGKILL after ~15 s.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            for i in 0..150 {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    return;
                }
                if i % 10 == 0 {
                    let _ = Command::new("kill")
                        .args(["-TERM", &c.id().to_string()])
                        .status();
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Restart on another address with the same directory (and nodes.conf).
    pub fn restart_on(&mut self, ip: &str) {
        self.stop();
        self.ip = ip.to_string();
        self.spawn();
    }

    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        open(&format!("redis://{}/", self.addr()))
            .await
            .expect("connect")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
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

/// Start `count` nodes of `bin` on 127.0.0.1 under `root`.
pub async fn start_nodes(bin: &str, root: &Path, count: usize, extra: &[&str]) -> Vec<Node> {
    let mut v = Vec::new();
    for _ in 0..count {
        let port = pick_port();
        v.push(Node::start(
            bin,
            "127.0.0.1",
            port,
            &root.join(port.to_string()),
            extra,
        ));
    }
    for n in &v {
        wait_up(n).await;
    }
    v
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
    let out = Command::new("redis-cli")
        .args(["--cluster", "check", addr])
        .output()
        .expect("run redis-cli");
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

/// A reference server's binary: on PATH (`make` puts the project's `.tools/bin` first), else
/// in the workspace's `.tools/bin` where `make deps` links what does not land on PATH.
pub fn program(name: &str) -> String {
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin");
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(std::iter::once(tools))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not found on PATH or in .tools/bin: run `make deps`"))
        .display()
        .to_string()
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
