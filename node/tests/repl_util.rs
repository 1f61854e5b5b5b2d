//! Harness for the replication tests: tessera-node, redis-server and valkey-server processes
//! on loopback ports 27000-27999 (bus ports +10000), killed on drop; a write load over every
//! type; and a server-independent dataset picture to compare a master with its replica.
//! Included by the `repl_*` tests with `#[path]`.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

const PORT_LO: u16 = 27000;
const PORT_HI: u16 = 27999;
static NEXT: AtomicU16 = AtomicU16::new(0);

/// A free port in our range whose bus port (+10000) is free too, spread apart by pid.
pub fn free_port() -> u16 {
    let span = PORT_HI - PORT_LO + 1;
    let base = (std::process::id() % span as u32) as u16;
    for _ in 0..span {
        let off = NEXT.fetch_add(7, Ordering::Relaxed);
        let p = PORT_LO + base.wrapping_add(off) % span;
        if TcpListener::bind(("127.0.0.1", p)).is_ok()
            && TcpListener::bind(("127.0.0.1", p + 10000)).is_ok()
        {
            return p;
        }
    }
    panic!("no free port in {PORT_LO}-{PORT_HI}");
}

pub fn node_bin() -> &'static str {
    env!("CARGO_BIN_EXE_tessera-node")
}

pub fn valkey_bin() -> String {
    format!("{}/../.tools/bin/valkey-server", env!("CARGO_MANIFEST_DIR"))
}

/// A server process, killed and reaped on drop.
pub struct Proc {
    pub child: Option<Child>,
    pub port: u16,
    pub name: &'static str,
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
    /// Starts `bin` with `--port P --bind 127.0.0.1 --dir DIR` plus `extra` (`{port}` in an
    /// argument is replaced by P); waits until it answers PING.
    pub fn start(name: &'static str, bin: &str, dir: &Path, extra: &[&str]) -> Proc {
        for _ in 0..5 {
            let port = free_port();
            let args: Vec<String> = extra
                .iter()
                .map(|a| a.replace("{port}", &port.to_string()))
                .collect();
            let mut child = Command::new(bin)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
                .arg(dir)
                .args(&args)
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
                        name,
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
        Proc::start("tessera", node_bin(), dir, extra)
    }

    pub fn redis(dir: &Path, extra: &[&str]) -> Proc {
        let mut a = vec!["--save", "", "--appendonly", "no"];
        a.extend_from_slice(extra);
        Proc::start("redis", "redis-server", dir, &a)
    }

    pub fn valkey(dir: &Path, extra: &[&str]) -> Proc {
        let mut a = vec!["--save", "", "--appendonly", "no"];
        a.extend_from_slice(extra);
        Proc::start("valkey", Box::leak(valkey_bin().into_boxed_str()), dir, &a)
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.port))
    }

    /// A field of INFO <section>.
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        info_field(&mut self.conn(), section, field)
    }

    /// kill -9.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> Option<String> {
    let s: String = redis::cmd("INFO").arg(section).query(c).ok()?;
    s.lines().find_map(|l| {
        l.strip_prefix(&format!("{field}:"))
            .map(|v| v.trim().to_string())
    })
}

/// Polls `f` every 50 ms until it returns true; panics with `what` after `max`.
pub fn wait_for(max: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + max;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

/// Makes `replica` replicate `master` and waits until the link is up and caught up.
pub fn replicate(replica: &Proc, master: &Proc) {
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port)
        .query(&mut replica.conn())
        .expect("replicaof");
    wait_link_up(replica);
}

pub fn wait_link_up(replica: &Proc) {
    wait_for(Duration::from_secs(60), "master_link_status:up", || {
        replica.info("replication", "master_link_status").as_deref() == Some("up")
    });
}

/// Waits until the replica processed every byte the master produced.
pub fn wait_caught_up(master: &Proc, replica: &Proc) {
    wait_for(
        Duration::from_secs(60),
        "replica offset = master offset",
        || {
            let m = master.info("replication", "master_repl_offset");
            let r = replica.info("replication", "slave_repl_offset");
            m.is_some() && m == r
        },
    );
}

include!("common/dataset.rs");

/// [`snapshot_of`] over a new connection to `p`.
pub fn snapshot(p: &Proc, dbs: u32) -> Snapshot {
    snapshot_of(&mut p.conn(), dbs)
}

/// Number of keys per db 0..dbs (DBSIZE).
pub fn dbsizes(p: &Proc, dbs: u32) -> Vec<i64> {
    let mut c = p.conn();
    (0..dbs)
        .map(|db| {
            let _: () = redis::cmd("SELECT").arg(db).query(&mut c).expect("select");
            redis::cmd("DBSIZE").query(&mut c).expect("dbsize")
        })
        .collect()
}

/// Waits until the replica's dataset equals the master's (every db < `dbs`).
pub fn assert_same_data(master: &Proc, replica: &Proc, dbs: u32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (m, r) = (snapshot(master, dbs), snapshot(replica, dbs));
        if m == r && dbsizes(master, dbs) == dbsizes(replica, dbs) {
            assert!(!m.is_empty(), "the load wrote nothing");
            return;
        }
        if Instant::now() > deadline {
            let only_m: Vec<_> = m.iter().filter(|x| !r.contains(x)).take(5).collect();
            let only_r: Vec<_> = r.iter().filter(|x| !m.contains(x)).take(5).collect();
            panic!(
                "{} master and {} replica differ ({} vs {} keys); master only: {only_m:?}; replica only: {only_r:?}",
                master.name,
                replica.name,
                m.len(),
                r.len()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn q(c: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query::<redis::Value>(c)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// A write load over every type and several dbs: TTLs (some expire during the load),
/// MULTI/EXEC, SPOP, INCRBYFLOAT, and blocking pops served by later pushes. `round`
/// makes key names distinct between calls.
pub fn write_load(p: &Proc, round: u32) {
    let mut c = p.conn();
    for db in [0u32, 3, 9] {
        q(&mut c, &["SELECT", &db.to_string()]);
        let r = round.to_string();
        for i in 0..60 {
            let k = |p: &str| format!("{p}:{r}:{i}");
            let s = i.to_string();
            q(&mut c, &["SET", &k("str"), &format!("value-{i}")]);
            q(&mut c, &["INCRBY", &k("ctr"), &s]);
            q(&mut c, &["INCRBYFLOAT", &k("flt"), "1.1"]);
            q(&mut c, &["APPEND", &k("str"), "-tail"]);
            q(&mut c, &["SET", &k("ex"), "v", "EX", "1000"]);
            q(&mut c, &["SETEX", &k("sx"), "500", "v"]);
            q(&mut c, &["SET", &k("short"), "v", "PX", "150"]);
            q(&mut c, &["RPUSH", &k("list"), "a", "b", "c", &s]);
            q(&mut c, &["LPOP", &k("list")]);
            q(&mut c, &["SADD", &k("set"), "a", "b", "c", "d", "e", &s]);
            q(&mut c, &["SPOP", &k("set")]);
            q(&mut c, &["SPOP", &k("set"), "2"]);
            q(&mut c, &["SADD", &k("iset"), "1", "2", "3", &s]);
            q(&mut c, &["HSET", &k("hash"), "f1", "v1", "f2", &s]);
            q(&mut c, &["HINCRBY", &k("hash"), "n", "7"]);
            q(
                &mut c,
                &["ZADD", &k("zset"), "1.5", "a", "-2", "b", &s, "c"],
            );
            q(&mut c, &["ZINCRBY", &k("zset"), "0.25", "a"]);
            q(&mut c, &["PFADD", &k("hll"), "x", "y", &s]);
            q(&mut c, &["EXPIRE", &k("hash"), "3000"]);
            q(&mut c, &["PEXPIRE", &k("iset"), "100"]);
            if i % 5 == 0 {
                q(&mut c, &["DEL", &k("ctr")]);
                q(&mut c, &["RENAME", &k("flt"), &k("flt2")]);
            }
            if i % 7 == 0 {
                q(&mut c, &["MULTI"]);
                q(&mut c, &["INCR", &k("tx")]);
                q(&mut c, &["LPUSH", &k("txl"), "x", "y"]);
                q(&mut c, &["SPOP", &k("set")]);
                q(&mut c, &["EXEC"]);
            }
        }
    }
    q(&mut c, &["SELECT", "0"]);
    blocking_pops(p, round);
}

/// Blocking pops that block, then are served by a push from another client.
fn blocking_pops(p: &Proc, round: u32) {
    let port = p.port;
    let keys = [
        ("BLPOP", format!("bq:{round}")),
        ("BZPOPMIN", format!("bz:{round}")),
        ("BLMOVE", format!("bm:{round}")),
    ];
    for (cmd, key) in keys {
        let k2 = key.clone();
        let waiter = std::thread::spawn(move || {
            let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
                .expect("connect");
            let mut cmdv = redis::cmd(cmd);
            cmdv.arg(&k2);
            if cmd == "BLMOVE" {
                cmdv.arg(format!("{k2}:dst")).arg("LEFT").arg("RIGHT");
            }
            cmdv.arg(30);
            cmdv.query::<redis::Value>(&mut c).expect("blocking pop")
        });
        let mut c = p.conn();
        // Wait until the pop is blocked, so the push is what serves it.
        wait_for(Duration::from_secs(20), "a blocked client", || {
            info_field(&mut c, "clients", "blocked_clients").as_deref() == Some("1")
        });
        match cmd {
            "BZPOPMIN" => {
                q(&mut c, &["ZADD", &key, "1", "one", "2", "two"]);
            }
            _ => {
                q(&mut c, &["RPUSH", &key, "first", "second"]);
            }
        }
        let v = waiter.join().expect("waiter thread");
        assert!(!matches!(v, redis::Value::Nil), "{cmd} was not served");
    }
}
