//! The persistence tests' helpers: tessera-node and redis-server over a data directory that
//! outlives restarts; a filled dataset to compare two servers with.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

pub use crate::dataset::{snapshot_of, Snapshot};
use crate::server::{Launch, Server};

pub fn node_bin() -> &'static str {
    crate::bins::tessera_bin()
}

/// A server process over a data directory that outlives it; killed and reaped on drop.
pub struct Proc {
    pub srv: Server,
}

crate::deref_server!(Proc);

impl Proc {
    /// Starts `bin` with `--port P --bind 127.0.0.1 --dir DIR` plus `extra`; waits (up to
    /// 60 s, loading may take a while) until it answers PING.
    pub fn start(bin: &str, dir: &Path, extra: &[&str]) -> Proc {
        Proc {
            srv: Launch::new(bin).dir(dir).args(extra).start(),
        }
    }

    pub fn node(dir: &Path, extra: &[&str]) -> Proc {
        Proc::start(node_bin(), dir, extra)
    }

    pub fn redis(dir: &Path, extra: &[&str]) -> Proc {
        let mut a = vec!["--save", "", "--appendonly", "no"];
        a.extend_from_slice(extra);
        Proc::start(crate::bins::redis_bin(), dir, &a)
    }

    pub fn conn(&self) -> redis::Connection {
        conn(self.port)
    }

    /// SHUTDOWN with the given flag, then waits for the process to exit.
    pub fn shutdown(mut self, flag: &str) {
        let mut c = self.conn();
        let mut cmd = redis::cmd("SHUTDOWN");
        if !flag.is_empty() {
            cmd.arg(flag);
        }
        let _ = cmd.query::<()>(&mut c);
        if self.srv.wait_exit(Duration::from_secs(60)).is_none() {
            self.srv.kill();
        }
    }

    /// kill -9.
    pub fn kill9(mut self) {
        self.srv.kill();
    }
}

/// A connection to a server on `port` (one a [`Proc`] in another thread may kill).
pub fn conn(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
        .unwrap_or_else(|e| panic!("connect to {port}: {e}"))
}

/// Runs tessera-node expecting it to fail at start: its exit status and output (stdout
/// and stderr together, in `stdout`).
pub fn node_expect_exit(dir: &Path, extra: &[&str]) -> Output {
    let e = Launch::new(node_bin())
        .args(extra)
        .run_to_exit(dir, Duration::from_secs(60));
    let Some(status) = e.status else {
        panic!("tessera-node did not exit on bad data:\n{}", e.output);
    };
    Output {
        status,
        stdout: e.output.into_bytes(),
        stderr: Vec::new(),
    }
}

/// Polls INFO persistence `tries` times, `every` apart, until `done` holds for it; returns
/// that INFO text, or None when it never held (callers decide whether that fails).
pub fn poll_persistence(
    c: &mut redis::Connection,
    tries: u32,
    every: Duration,
    done: impl Fn(&str) -> bool,
) -> Option<String> {
    for _ in 0..tries {
        let info: String = redis::cmd("INFO")
            .arg("persistence")
            .query(c)
            .expect("info");
        if done(&info) {
            return Some(info);
        }
        std::thread::sleep(every);
    }
    None
}

/// A tessera-node with saving off over a fresh data dir, filled by [`fill`].
pub fn filled_node() -> (tempfile::TempDir, Proc) {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = Proc::node(dir.path(), &["--save", ""]);
    fill(&n);
    (dir, n)
}

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
