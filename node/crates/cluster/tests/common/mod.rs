//! Test harness: real redis-server / valkey-server processes and in-process ClusterNodes on
//! loopback, in this crate's port range (17000-18999, bus ports +10000).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tessera_cluster::{commands, ClusterConfig, ClusterNode, Host, NullHost};

/// A reference program from PATH, else `<workspace>/.tools/bin` (where `make deps` puts
/// valkey-server); a missing one fails the test, saying how to install it. (Not the
/// testkit's finder: the testkit depends on this crate.)
fn reference(cell: &'static OnceLock<String>, name: &str) -> &'static str {
    cell.get_or_init(|| {
        let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../.tools/bin");
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .chain([tools])
            .map(|d| d.join(name))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{name} not found on PATH or in .tools/bin: run `make deps`"))
            .display()
            .to_string()
    })
}

pub fn redis_bin() -> &'static str {
    static CELL: OnceLock<String> = OnceLock::new();
    reference(&CELL, "redis-server")
}

pub fn valkey_bin() -> &'static str {
    static CELL: OnceLock<String> = OnceLock::new();
    reference(&CELL, "valkey-server")
}

static NEXT: AtomicU16 = AtomicU16::new(0);

/// A client port P in 17000..19000 with P and P+10000 both free right now.
pub fn free_port() -> u16 {
    // Spread test binaries (they run in parallel) over the range by pid.
    let base = 17000 + (std::process::id() % 40) as u16 * 50;
    for _ in 0..2000 {
        let off = NEXT.fetch_add(1, Ordering::SeqCst);
        let p = 17000 + ((base - 17000 + off) % 2000);
        let a = TcpListener::bind(("127.0.0.1", p));
        let b = TcpListener::bind(("127.0.0.1", p + 10000));
        if a.is_ok() && b.is_ok() {
            return p;
        }
    }
    panic!("no free port pair in 17000-18999");
}

/// A redis-server or valkey-server child, SIGKILLed on drop.
pub struct ServerProc {
    pub child: Option<Child>,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl ServerProc {
    pub fn start(bin: &str, node_timeout: u64) -> ServerProc {
        Self::start_args(bin, node_timeout, &[])
    }
    pub fn start_args(bin: &str, node_timeout: u64, extra: &[&str]) -> ServerProc {
        Self::start_full(bin, node_timeout, extra, None)
    }
    /// Starts with a nodes.conf written beforehand.
    pub fn start_with_conf(bin: &str, node_timeout: u64, conf: &str) -> ServerProc {
        Self::start_full(bin, node_timeout, &[], Some(conf))
    }
    fn start_full(
        bin: &str,
        node_timeout: u64,
        extra: &[&str],
        conf_text: Option<&str>,
    ) -> ServerProc {
        let dir = tempfile::tempdir().expect("tempdir");
        if let Some(t) = conf_text {
            std::fs::write(dir.path().join("nodes.conf"), t).expect("write nodes.conf");
        }
        let port = free_port();
        let conf = dir.path().join("nodes.conf");
        let child = Command::new(bin)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
            ])
            .arg("--cluster-config-file")
            .arg(&conf)
            .args(["--cluster-node-timeout", &node_timeout.to_string()])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(dir.path())
            .args(["--logfile"])
            .arg(dir.path().join("log"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server");
        let s = ServerProc {
            child: Some(child),
            port,
            dir,
        };
        wait_for(
            Duration::from_secs(10),
            "server to accept connections",
            || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
        );
        s
    }
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    pub fn cmd(&self, args: &[&str]) -> redis::RedisResult<redis::Value> {
        run_cmd(self.port, args)
    }
    pub fn nodes(&self) -> String {
        cmd_string(self.port, &["CLUSTER", "NODES"])
    }
    pub fn myid(&self) -> String {
        cmd_string(self.port, &["CLUSTER", "MYID"])
    }
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn run_cmd(port: u16, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let mut con = client.get_connection_with_timeout(Duration::from_secs(5))?;
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(&mut con)
}

pub fn cmd_string(port: u16, args: &[&str]) -> String {
    match run_cmd(port, args) {
        Ok(redis::Value::BulkString(b)) => String::from_utf8_lossy(&b).into_owned(),
        Ok(redis::Value::SimpleString(s)) => s,
        Ok(redis::Value::VerbatimString { text, .. }) => text,
        Ok(redis::Value::Okay) => "OK".into(),
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("ERR {e}"),
    }
}

/// Polls `f` every 50 ms until it holds; panics with `what` after `limit`.
pub fn wait_for(limit: Duration, what: &str, f: impl FnMut() -> bool) -> Duration {
    wait_or_show(limit, what, f, String::new)
}

/// `wait_for` that puts `show()` (the nodes' views, a log) in the panic message, for waits
/// whose failure cannot be understood from the condition alone.
pub fn wait_or_show(
    limit: Duration,
    what: &str,
    mut f: impl FnMut() -> bool,
    show: impl FnOnce() -> String,
) -> Duration {
    let t0 = Instant::now();
    loop {
        if f() {
            return t0.elapsed();
        }
        if t0.elapsed() > limit {
            panic!("timed out after {limit:?} waiting for {what}\n{}", show());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An in-process tessera cluster node with its own runtime thread pool.
pub struct TestNode {
    pub node: Option<ClusterNode>,
    pub port: u16,
    pub dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    rt: Option<tokio::runtime::Runtime>,
}

impl TestNode {
    pub fn start(node_timeout: u64) -> TestNode {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let mut t = Self::start_in(&dir, free_port(), "127.0.0.1", node_timeout);
        t._tmp = Some(tmp);
        t
    }
    pub fn start_in(dir: &Path, port: u16, bind: &str, node_timeout: u64) -> TestNode {
        Self::start_with(dir, port, bind, node_timeout, Arc::new(NullHost))
    }
    pub fn start_with_host(node_timeout: u64, host: Arc<dyn Host>) -> TestNode {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let mut t = Self::start_with(&dir, free_port(), "127.0.0.1", node_timeout, host);
        t._tmp = Some(tmp);
        t
    }
    pub fn start_with(
        dir: &Path,
        port: u16,
        bind: &str,
        node_timeout: u64,
        host: Arc<dyn Host>,
    ) -> TestNode {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let cfg = ClusterConfig {
            enabled: true,
            config_file: dir.join("nodes.conf"),
            node_timeout_ms: node_timeout,
            port,
            bind: bind.into(),
            ..Default::default()
        };
        Self::start_cfg(dir, cfg, host, rt)
    }

    /// Starts with a config tweaked by the caller (fresh temp dir and port).
    pub fn start_custom(node_timeout: u64, tweak: impl FnOnce(&mut ClusterConfig)) -> TestNode {
        let tmp = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let mut cfg = ClusterConfig {
            enabled: true,
            config_file: tmp.path().join("nodes.conf"),
            node_timeout_ms: node_timeout,
            port,
            bind: "127.0.0.1".into(),
            ..Default::default()
        };
        tweak(&mut cfg);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let mut t = Self::start_cfg(tmp.path(), cfg, Arc::new(NullHost), rt);
        t._tmp = Some(tmp);
        t
    }

    fn start_cfg(
        dir: &Path,
        cfg: ClusterConfig,
        host: Arc<dyn Host>,
        rt: tokio::runtime::Runtime,
    ) -> TestNode {
        let port = cfg.port;
        let node = rt
            .block_on(ClusterNode::start(cfg, host))
            .expect("start cluster node");
        TestNode {
            node: Some(node),
            port,
            dir: dir.to_path_buf(),
            _tmp: None,
            rt: Some(rt),
        }
    }
    pub fn node(&self) -> &ClusterNode {
        self.node.as_ref().expect("running")
    }
    pub fn cluster(&self, args: &[&str]) -> tessera_cluster::Reply {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        commands::cluster_command(self.node(), &a, false)
    }
    pub fn cluster_str(&self, args: &[&str]) -> String {
        match self.cluster(args) {
            tessera_cluster::Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
            tessera_cluster::Reply::Verbatim(s) => s,
            tessera_cluster::Reply::Simple(s) => s,
            tessera_cluster::Reply::Ok => "OK".into(),
            tessera_cluster::Reply::Error(e) => format!("ERR {e}"),
            r => format!("{r:?}"),
        }
    }
    pub fn nodes(&self) -> String {
        self.cluster_str(&["NODES"])
    }
    pub fn myid(&self) -> String {
        self.cluster_str(&["MYID"])
    }
    /// Stops the bus (like a crash: no goodbye messages).
    pub fn stop(&mut self) {
        self.node.take();
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Parsed CLUSTER NODES line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLine {
    pub id: String,
    pub addr: String,
    pub flags: Vec<String>,
    pub master: String,
    pub epoch: u64,
    pub link: String,
    pub slots: Vec<String>,
}

pub fn parse_nodes(text: &str) -> BTreeMap<String, NodeLine> {
    let mut m = BTreeMap::new();
    for l in text.lines().filter(|l| !l.is_empty()) {
        let f: Vec<&str> = l.split(' ').collect();
        if f.len() < 8 {
            continue;
        }
        let nl = NodeLine {
            id: f[0].into(),
            addr: f[1].split(',').next().unwrap_or("").into(),
            flags: f[2].split(',').map(String::from).collect(),
            master: f[3].into(),
            epoch: f[6].parse().unwrap_or(0),
            link: f[7].into(),
            slots: f[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .map(|s| s.to_string())
                .collect(),
        };
        m.insert(nl.id.clone(), nl);
    }
    m
}

/// Every node in `ids` appears in `text`, connected and out of handshake, and nothing else.
pub fn sees_all_connected(text: &str, ids: &[String]) -> bool {
    let m = parse_nodes(text);
    m.len() == ids.len()
        && ids.iter().all(|id| {
            m.get(id).is_some_and(|n| {
                n.link == "connected"
                    && !n
                        .flags
                        .iter()
                        .any(|f| f == "handshake" || f.starts_with("fail"))
            })
        })
}

/// Every view shows every node with the same config epoch, and no two masters share one:
/// the epoch-collision round after forming is over everywhere. A master that bumps its
/// epoch and dies before its replica hears of it leaves the replica asking for votes with
/// the old epoch, which every voter that heard the new one refuses (redis-server 7.0 as
/// well): a test that kills a master first waits for this.
pub fn config_settled(views: &[String]) -> bool {
    let parsed: Vec<_> = views.iter().map(|v| parse_nodes(v)).collect();
    let Some(first) = parsed.first() else {
        return true;
    };
    let same = parsed.iter().all(|m| {
        m.len() == first.len()
            && first
                .iter()
                .all(|(id, n)| m.get(id).is_some_and(|o| o.epoch == n.epoch))
    });
    let mut master_epochs: Vec<u64> = first
        .values()
        .filter(|n| n.flags.iter().any(|f| f == "master"))
        .map(|n| n.epoch)
        .collect();
    let masters = master_epochs.len();
    master_epochs.sort_unstable();
    master_epochs.dedup();
    same && master_epochs.len() == masters
}

/// Slot ownership as id → slot ranges.
pub fn slot_view(text: &str) -> BTreeMap<String, Vec<String>> {
    parse_nodes(text)
        .into_iter()
        .map(|(id, n)| (id, n.slots))
        .collect()
}

pub fn flags_of(text: &str, id: &str) -> Vec<String> {
    parse_nodes(text)
        .get(id)
        .map(|n| n.flags.clone())
        .unwrap_or_default()
}

/// Sends one command over raw RESP and returns the raw reply bytes (exact wire comparison).
pub fn raw_reply(port: u16, args: &[&str]) -> Vec<u8> {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut req = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        req.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    s.write_all(&req).expect("write");
    let mut rd = BufReader::new(s);
    fn one(rd: &mut BufReader<std::net::TcpStream>, out: &mut Vec<u8>) {
        let mut line = Vec::new();
        rd.read_until(b'\n', &mut line).expect("read");
        out.extend_from_slice(&line);
        let n: i64 = std::str::from_utf8(&line[1..line.len() - 2])
            .ok()
            .and_then(|x| x.parse().ok())
            .unwrap_or(0);
        match line[0] {
            b'$' if n >= 0 => {
                let mut b = vec![0u8; n as usize + 2];
                rd.read_exact(&mut b).expect("read bulk");
                out.extend_from_slice(&b);
            }
            b'*' | b'%' => {
                let k = if line[0] == b'%' { n * 2 } else { n };
                for _ in 0..k.max(0) {
                    one(rd, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    one(&mut rd, &mut out);
    out
}

/// (channel, message, shard) delivered by the bus.
pub type Published = (Vec<u8>, Vec<u8>, bool);

/// A Host that records what the bus delivers to local subscribers.
#[derive(Default)]
pub struct RecordingHost {
    pub published: std::sync::Mutex<Vec<Published>>,
}

impl RecordingHost {
    pub fn got(&self, channel: &str, message: &str, shard: bool) -> bool {
        self.published
            .lock()
            .map(|v| {
                v.iter().any(|(c, m, s)| {
                    c == channel.as_bytes() && m == message.as_bytes() && *s == shard
                })
            })
            .unwrap_or(false)
    }
}

impl Host for RecordingHost {
    fn count_keys_in_slot(&self, _slot: u16) -> usize {
        0
    }
    fn keys_in_slot(&self, _slot: u16, _count: usize) -> Vec<Vec<u8>> {
        Vec::new()
    }
    fn delete_keys_in_slot(&self, _slot: u16) -> usize {
        0
    }
    fn db_size(&self) -> usize {
        0
    }
    fn publish_local(&self, channel: &[u8], message: &[u8], shard: bool) {
        if let Ok(mut v) = self.published.lock() {
            v.push((channel.to_vec(), message.to_vec(), shard));
        }
    }
}
