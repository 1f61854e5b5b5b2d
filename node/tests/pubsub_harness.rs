//! Harness for the pub/sub, keyspace-notification and WATCH tests (included with `#[path]`):
//! tessera-node and redis-server processes on loopback ports 28000-28999 (bus ports +10000),
//! SIGKILLed on drop. Raw RESP parsing comes from `common` (`Raw`, `R`).
#![allow(dead_code)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

#[path = "common/mod.rs"]
pub mod common;

#[allow(unused_imports)]
pub use common::{Raw, R};

pub const TESSERA: &str = env!("CARGO_BIN_EXE_tessera-node");
pub const REDIS: &str = "/usr/bin/redis-server";

static NEXT: AtomicU16 = AtomicU16::new(0);

/// A port P in 28000..29000 with P and P+10000 free on 127.0.0.1 right now.
pub fn free_port() -> u16 {
    let base = (std::process::id() % 20) as u16 * 50;
    for _ in 0..1000 {
        let off = NEXT.fetch_add(1, Ordering::SeqCst);
        let p = 28000 + (base + off) % 1000;
        if TcpListener::bind(("127.0.0.1", p)).is_ok()
            && TcpListener::bind(("127.0.0.1", p + 10000)).is_ok()
        {
            return p;
        }
    }
    panic!("no free port pair in 28000-28999");
}

/// Polls `f` every 50 ms until it holds or `limit` passes (then panics with `what`).
pub fn wait_for(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        if start.elapsed() > limit {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One server process.
pub struct Proc {
    pub bin: &'static str,
    pub port: u16,
    pub dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Proc {
    /// Starts `bin` with extra `--directive value` arguments.
    pub fn start(bin: &'static str, extra: &[&str]) -> Proc {
        for _attempt in 0..5 {
            let dir = tempfile::tempdir().expect("tempdir");
            let port = free_port();
            let child = Command::new(bin)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--dir"])
                .arg(dir.path())
                .arg("--logfile")
                .arg(dir.path().join("log"))
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn server");
            let mut p = Proc {
                bin,
                port,
                dir,
                child: Some(child),
            };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(15) {
                if p.cli(&["PING"]).trim() == "PONG" {
                    return p;
                }
                if let Some(Ok(Some(_))) = p.child.as_mut().map(|c| c.try_wait()) {
                    break; // lost a port race: retry elsewhere
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("{bin} did not start");
    }

    pub fn cluster(bin: &'static str) -> Proc {
        Proc::start(
            bin,
            &["--cluster-enabled", "yes", "--cluster-node-timeout", "3000"],
        )
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// redis-cli output (no -c) for one command, bounded by redis-cli's own timeouts.
    pub fn cli(&self, args: &[&str]) -> String {
        let o = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    pub fn raw(&self) -> Raw {
        Raw::connect(self.port)
    }

    pub fn myid(&self) -> String {
        self.cli(&["CLUSTER", "MYID"]).trim().to_string()
    }

    pub fn cluster_info(&self, field: &str) -> String {
        self.cli(&["CLUSTER", "INFO"])
            .lines()
            .find_map(|l| {
                l.strip_prefix(&format!("{field}:"))
                    .map(|v| v.trim().to_string())
            })
            .unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Connects the nodes (MEET from the first) and waits until all see each other.
pub fn meet_all(nodes: &[&Proc]) {
    for n in &nodes[1..] {
        let r = nodes[0].cli(&["CLUSTER", "MEET", "127.0.0.1", &n.port.to_string()]);
        assert_eq!(r.trim(), "OK", "MEET: {r}");
    }
    let want = nodes.len();
    wait_for(
        Duration::from_secs(30),
        "every node knows every node",
        || {
            nodes.iter().all(|n| {
                let out = n.cli(&["CLUSTER", "NODES"]);
                out.lines().filter(|l| !l.contains("handshake")).count() == want
            })
        },
    );
}

/// A key name (no hash tag) whose slot is `slot`: brute force over "c<n>".
pub fn name_in_slot(prefix: &str, slot: u16) -> String {
    (0u64..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| tessera_cluster::key_hash_slot(k.as_bytes()) == slot)
        .expect("some name hashes to every slot")
}

/// A name whose slot lies in `lo..=hi`.
pub fn name_in_range(prefix: &str, lo: u16, hi: u16) -> String {
    (0u64..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| (lo..=hi).contains(&tessera_cluster::key_hash_slot(k.as_bytes())))
        .expect("some name hashes into the range")
}

pub fn slot_of(k: &str) -> u16 {
    tessera_cluster::key_hash_slot(k.as_bytes())
}
