//! Harness for the persistence tests: tessera-node and redis-server processes on loopback
//! ports 9000-9999 over a data directory that outlives restarts; dataset snapshots for
//! comparing two servers. Included by the `persist_*` tests with `#[path]`.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

const PORT_LO: u16 = 9000;
const PORT_HI: u16 = 9999;
static NEXT: AtomicU16 = AtomicU16::new(0);

/// A free port in our range (and its cluster bus port), spread apart by pid.
pub fn free_port() -> u16 {
    let span = PORT_HI - PORT_LO + 1;
    let base = (std::process::id() % span as u32) as u16;
    for _ in 0..span {
        let off = NEXT.fetch_add(13, Ordering::Relaxed);
        let p = PORT_LO + base.wrapping_add(off) % span;
        if TcpListener::bind(("127.0.0.1", p)).is_ok() {
            return p;
        }
    }
    panic!("no free port in {PORT_LO}-{PORT_HI}");
}

pub fn node_bin() -> &'static str {
    env!("CARGO_BIN_EXE_tessera-node")
}

/// A server process, killed and reaped on drop.
pub struct Proc {
    pub child: Option<Child>,
    pub port: u16,
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn ready(port: u16) -> bool {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        .is_ok()
}

impl Proc {
    /// Starts `bin` with `--port P --bind 127.0.0.1 --dir DIR` plus `extra`; waits (up to
    /// 60 s, loading may take a while) until it answers PING.
    pub fn start(bin: &str, dir: &Path, extra: &[&str]) -> Proc {
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(bin)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
                .arg(dir)
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("start {bin}: {e}"));
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if ready(port) {
                    return Proc {
                        child: Some(child),
                        port,
                    };
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("{bin} did not start in {}", dir.display());
    }

    pub fn node(dir: &Path, extra: &[&str]) -> Proc {
        Proc::start(node_bin(), dir, extra)
    }

    pub fn redis(dir: &Path, extra: &[&str]) -> Proc {
        let mut a = vec!["--save", "", "--appendonly", "no"];
        a.extend_from_slice(extra);
        Proc::start("redis-server", dir, &a)
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.port))
    }

    /// SHUTDOWN with the given flag, then waits for the process to exit.
    pub fn shutdown(mut self, flag: &str) {
        let mut c = self.conn();
        let mut cmd = redis::cmd("SHUTDOWN");
        if !flag.is_empty() {
            cmd.arg(flag);
        }
        let _ = cmd.query::<()>(&mut c);
        if let Some(mut ch) = self.child.take() {
            wait_exit(&mut ch, Duration::from_secs(60));
        }
    }

    /// kill -9.
    pub fn kill9(mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_exit(ch: &mut Child, max: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + max;
    while Instant::now() < deadline {
        if let Ok(Some(s)) = ch.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = ch.kill();
    let _ = ch.wait();
    None
}

/// Runs tessera-node expecting it to fail at start: returns its exit status and output.
pub fn node_expect_exit(dir: &Path, extra: &[&str]) -> Output {
    let port = free_port();
    let mut child = Command::new(node_bin())
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tessera-node");
    let status = wait_exit(&mut child, Duration::from_secs(60));
    let out = child.wait_with_output().expect("collect output");
    assert!(status.is_some(), "tessera-node did not exit on bad data");
    out
}

include!("common/dataset.rs");

/// [`snapshot_of`] over a new connection to `p`.
pub fn snapshot(p: &Proc, dbs: u32) -> Snapshot {
    snapshot_of(&mut p.conn(), dbs)
}

/// Fills a server with every type, encodings small and large, TTLs and several dbs.
pub fn fill(p: &Proc) {
    let mut c = p.conn();
    let q = |c: &mut redis::Connection, args: &[&str]| {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query::<redis::Value>(c)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    };
    for db in [0u32, 1, 5] {
        q(&mut c, &["SELECT", &db.to_string()]);
        q(&mut c, &["SET", "str", "hello"]);
        q(&mut c, &["SET", "int", "12345"]);
        q(&mut c, &["SET", "big", &"x".repeat(5000)]);
        q(&mut c, &["SET", "ttl", "v", "EX", "1000"]);
        q(&mut c, &["RPUSH", "list", "a", "b", "3"]);
        q(&mut c, &["SADD", "iset", "1", "2", "3"]);
        q(&mut c, &["SADD", "sset", "a", "b"]);
        q(&mut c, &["HSET", "hash", "f1", "v1", "f2", "2"]);
        q(&mut c, &["ZADD", "zset", "1.5", "a", "-2", "b", "inf", "c"]);
        q(&mut c, &["PFADD", "hll", "a", "b", "c"]);
        for i in 0..300 {
            let s = i.to_string();
            q(&mut c, &["RPUSH", "biglist", &format!("elem-{i}")]);
            q(&mut c, &["SADD", "bigset", &format!("m{i}")]);
            q(&mut c, &["SADD", "bigiset", &s]);
            q(&mut c, &["HSET", "bighash", &format!("f{i}"), &s]);
            q(&mut c, &["ZADD", "bigzset", &s, &format!("m{i}")]);
        }
        q(&mut c, &["EXPIRE", "bighash", "5000"]);
    }
    q(&mut c, &["SELECT", "0"]);
}
