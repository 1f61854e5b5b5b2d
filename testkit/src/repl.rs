//! The replication tests' helpers: tessera-node, redis-server and valkey-server over data
//! directories, a write load over every type, and waiting until a replica holds exactly its
//! master's data.

use std::path::Path;
use std::time::{Duration, Instant};

pub use crate::dataset::{snapshot_of, Snapshot};
use crate::server::{Launch, Server};
pub use crate::wait::wait_for;

pub fn node_bin() -> &'static str {
    crate::bins::tessera_bin()
}

/// A server process, killed and reaped on drop; derefs to the shared [`Server`] guard.
pub struct Proc {
    pub srv: Server,
    pub name: &'static str,
}

crate::deref_server!(Proc);

impl Proc {
    /// Starts `bin` with `--port P --bind 127.0.0.1 --dir DIR` plus `extra` (`{port}` in an
    /// argument is replaced by P); waits until it answers PING.
    pub fn start(name: &'static str, bin: &str, dir: &Path, extra: &[&str]) -> Proc {
        let srv = Launch::new(bin).dir(dir).args(extra).start();
        Proc { srv, name }
    }

    pub fn node(dir: &Path, extra: &[&str]) -> Proc {
        Proc::start("tessera", node_bin(), dir, extra)
    }

    pub fn redis(dir: &Path, extra: &[&str]) -> Proc {
        let mut a = vec!["--save", "", "--appendonly", "no"];
        a.extend_from_slice(extra);
        Proc::start("redis", crate::bins::redis_bin(), dir, &a)
    }

    pub fn valkey(dir: &Path, extra: &[&str]) -> Proc {
        let mut a = vec!["--save", "", "--appendonly", "no"];
        a.extend_from_slice(extra);
        Proc::start("valkey", crate::bins::valkey_bin(), dir, &a)
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.port))
    }

    /// A field of INFO <section>.
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        conn_info(&mut self.conn(), section, field)
    }

    /// kill -9.
    pub fn kill9(&mut self) {
        self.srv.kill();
    }
}

/// A field of `INFO section` over an open connection.
pub fn conn_info(c: &mut redis::Connection, section: &str, field: &str) -> Option<String> {
    let s: String = redis::cmd("INFO").arg(section).query(c).ok()?;
    crate::info_field(&s, field)
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

/// Two fresh data directories (a master's and a replica's).
pub fn two_dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    )
}

/// `INFO stats <field>` of `p`, "" when absent.
pub fn stat(p: &Proc, field: &str) -> String {
    p.info("stats", field).unwrap_or_default()
}

/// Data present before the sync travels in the RDB, the rest in the stream: a load, REPLICAOF,
/// another load; waits until the replica holds exactly the master's data.
pub fn sync_under_load(master: &Proc, replica: &Proc) {
    write_load(master, 0);
    replicate(replica, master);
    write_load(master, 1);
    wait_caught_up(master, replica);
    assert_same_data(master, replica, 16);
}

/// After the link was cut: another load; the link comes back with a partial resync
/// (+CONTINUE), the datasets end equal, and the master counted no second full sync.
pub fn resumes_partially(master: &Proc, replica: &Proc) {
    write_load(master, 2);
    wait_link_up(replica);
    wait_for(Duration::from_secs(30), "sync_partial_ok:1", || {
        stat(master, "sync_partial_ok") == "1"
    });
    wait_caught_up(master, replica);
    assert_same_data(master, replica, 16);
    assert_eq!(stat(master, "sync_full"), "1", "no second full sync");
}

/// SET `key` 1 on the master, then `WAIT 1 10000`: how many replicas acknowledged it.
pub fn set_and_wait(mc: &mut redis::Connection, key: &str) -> i64 {
    let _: () = redis::cmd("SET").arg(key).arg("1").query(mc).expect("set");
    redis::cmd("WAIT")
        .arg(1)
        .arg(10000)
        .query(mc)
        .expect("wait")
}

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
            conn_info(&mut c, "clients", "blocked_clients").as_deref() == Some("1")
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
