//! AOF: kill -9 loses no acknowledged write (always) or about a second (everysec); an
//! appendonlydir from redis-server 7.0 loads; BGREWRITEAOF under load keeps counters exact;
//! truncated and corrupt files are handled as aof-load-truncated says.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_testkit::persist::*;

const AOF: &[&str] = &["--save", "", "--appendonly", "yes"];

fn aof_args(fsync: &str) -> Vec<&str> {
    let mut v = AOF.to_vec();
    v.extend_from_slice(&["--appendfsync", fsync]);
    v
}

/// Writers SET keys until stopped; returns the keys each got acknowledged, in order.
fn write_load(port: u16, writers: usize, run: Duration) -> Vec<Vec<String>> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = Vec::new();
    for w in 0..writers {
        let mut c = conn(port);
        let stop = stop.clone();
        hs.push(std::thread::spawn(move || {
            let mut acked = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let k = format!("w{w}:{i}");
                let r: redis::RedisResult<()> = redis::cmd("SET").arg(&k).arg(i).query(&mut c);
                if r.is_err() {
                    break;
                }
                acked.push(k);
                i += 1;
            }
            acked
        }));
    }
    std::thread::sleep(run);
    stop.store(true, Ordering::Relaxed);
    hs.into_iter()
        .map(|h| h.join().expect("writer thread"))
        .collect()
}

/// Writes for `run`, then kill -9 while the writers are still going; returns what was acked.
fn kill_during_load(dir: &Path, fsync: &str) -> (Vec<Vec<String>>, Duration) {
    let n = Proc::node(dir, &aof_args(fsync));
    let port = n.port;
    let start = Instant::now();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        n.kill9();
    });
    let acked = write_load(port, 4, Duration::from_secs(3));
    killer.join().expect("killer");
    (acked, start.elapsed())
}

/// A node with `appendonly yes`, `appendfsync always` over a fresh data dir.
fn always_node() -> (tempfile::TempDir, Proc) {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = Proc::node(dir.path(), &aof_args("always"));
    (dir, n)
}

/// Hash `h` with a TTL of `ms`, written to after the PEXPIRE (a write keeps the TTL).
fn volatile_hash(c: &mut redis::Connection, ms: u64) {
    let _: i64 = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .query(c)
        .expect("hset");
    let _: i64 = redis::cmd("PEXPIRE")
        .arg("h")
        .arg(ms)
        .query(c)
        .expect("pexpire");
    let _: i64 = redis::cmd("HSET")
        .arg("h")
        .arg("f2")
        .arg("v2")
        .query(c)
        .expect("hset");
}

/// How many writes were acknowledged in all; asserts the load did real work.
fn acked_total(acked: &[Vec<String>]) -> usize {
    let total: usize = acked.iter().map(|v| v.len()).sum();
    assert!(total > 50, "too few writes acknowledged: {total}");
    total
}

/// How many of `keys` exist on a node restarted over `dir` (replaying its AOF).
fn existing_after_replay(dir: &Path, keys: &[&str]) -> i64 {
    let n = Proc::node(dir, &aof_args("always"));
    redis::cmd("EXISTS")
        .arg(keys)
        .query(&mut n.conn())
        .expect("exists")
}

fn missing(p: &Proc, acked: &[Vec<String>]) -> usize {
    let mut c = p.conn();
    let mut miss = 0;
    for keys in acked {
        for chunk in keys.chunks(500) {
            let v: Vec<Option<String>> = redis::cmd("MGET").arg(chunk).query(&mut c).expect("mget");
            miss += v.iter().filter(|x| x.is_none()).count();
        }
    }
    miss
}

#[test]
fn kill9_with_appendfsync_always_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (acked, _) = kill_during_load(dir.path(), "always");
    let total = acked_total(&acked);
    let n = Proc::node(dir.path(), &aof_args("always"));
    assert_eq!(
        missing(&n, &acked),
        0,
        "acknowledged writes lost out of {total}"
    );
}

#[test]
fn kill9_with_everysec_loses_at_most_about_a_second() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (acked, took) = kill_during_load(dir.path(), "everysec");
    let total = acked_total(&acked);
    let n = Proc::node(dir.path(), &aof_args("everysec"));
    let lost = missing(&n, &acked);
    let per_sec = total as f64 / took.as_secs_f64().max(0.1);
    assert!(
        (lost as f64) <= per_sec * 1.5,
        "lost {lost} of {total} acked writes ({per_sec:.0}/s)"
    );
}

#[test]
fn bgrewriteaof_under_load_keeps_every_increment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = Proc::node(dir.path(), &aof_args("everysec"));
    fill(&n);
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = Vec::new();
    for w in 0..3 {
        let mut c = n.conn();
        let stop = stop.clone();
        hs.push(std::thread::spawn(move || {
            let mut acked = vec![0i64; 64];
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let k = format!("ctr{w}:{}", i % 64);
                let v: i64 = redis::cmd("INCR").arg(&k).query(&mut c).expect("incr");
                acked[i % 64] = v;
                i += 1;
            }
            acked
        }));
    }
    let mut c = n.conn();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(300));
        let r: String = redis::cmd("BGREWRITEAOF")
            .query(&mut c)
            .expect("bgrewriteaof");
        assert!(r.contains("rewriting started"), "{r}");
        let done = |i: &str| i.contains("aof_rewrite_in_progress:0");
        if let Some(info) = poll_persistence(&mut c, 600, Duration::from_millis(20), done) {
            assert!(info.contains("aof_last_bgrewrite_status:ok"), "{info}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<Vec<i64>> = hs.into_iter().map(|h| h.join().expect("writer")).collect();
    let before = snapshot(&n, 6);
    // One base, one incr file after the rewrites: old files are gone.
    let files: Vec<String> = std::fs::read_dir(dir.path().join("appendonlydir"))
        .expect("appendonlydir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 3, "{files:?}");
    n.shutdown("NOSAVE");
    let n = Proc::node(dir.path(), &aof_args("everysec"));
    assert_eq!(snapshot(&n, 6), before);
    let mut c = n.conn();
    for (w, vals) in acked.iter().enumerate() {
        for (i, &v) in vals.iter().enumerate() {
            let got: Option<i64> = redis::cmd("GET")
                .arg(format!("ctr{w}:{i}"))
                .query(&mut c)
                .expect("get");
            assert_eq!(got.unwrap_or(0), v, "ctr{w}:{i}");
        }
    }
}

#[test]
fn redis_server_appendonlydir_loads_into_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = Proc::start(
        "redis-server",
        dir.path(),
        &[
            "--save",
            "",
            "--appendonly",
            "yes",
            "--aof-use-rdb-preamble",
            "no",
        ],
    );
    fill(&r);
    let mut c = r.conn();
    let _: () = redis::cmd("INCRBYFLOAT")
        .arg("f")
        .arg("1.5")
        .query(&mut c)
        .map(|_: String| ())
        .expect("incrbyfloat");
    let _: () = redis::cmd("DEL")
        .arg("str")
        .query(&mut c)
        .map(|_: i64| ())
        .expect("del");
    let theirs = snapshot(&r, 6);
    drop(c);
    r.shutdown("NOSAVE");
    assert!(dir
        .path()
        .join("appendonlydir/appendonly.aof.manifest")
        .exists());
    let n = Proc::node(dir.path(), &aof_args("everysec"));
    assert_eq!(snapshot(&n, 6), theirs);
    // Our incr file continues the same directory, and redis-server reads it back.
    let mut c = n.conn();
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("1")
        .query(&mut c)
        .expect("set");
    n.shutdown("NOSAVE");
    let r = Proc::start(
        "redis-server",
        dir.path(),
        &["--save", "", "--appendonly", "yes"],
    );
    let mut c = r.conn();
    let v: String = redis::cmd("GET").arg("after").query(&mut c).expect("get");
    assert_eq!(v, "1");
}

fn incr_file(dir: &Path) -> std::path::PathBuf {
    let d = dir.join("appendonlydir");
    std::fs::read_dir(&d)
        .expect("appendonlydir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .expect("an incr file")
}

#[test]
fn truncated_and_corrupt_aof() {
    let (dir, n) = always_node();
    let mut c = n.conn();
    for i in 0..10 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut c)
            .expect("set");
    }
    n.shutdown("NOSAVE");
    let incr = incr_file(dir.path());
    let good = std::fs::read(&incr).expect("read incr");
    // A half-written last command.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&incr)
        .expect("open");
    f.write_all(b"*3\r\n$3\r\nSET\r\n$2\r\nzz\r\n$5\r\nab")
        .expect("append");
    drop(f);
    let mut no = AOF.to_vec();
    no.extend_from_slice(&["--aof-load-truncated", "no"]);
    let out = node_expect_exit(dir.path(), &no);
    let all =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "loaded a truncated AOF with aof-load-truncated no"
    );
    assert!(!all.contains("panicked"), "{all}");
    assert!(all.contains("incr.aof"), "message lacks the file: {all}");
    // aof-load-truncated yes (the default): loads the valid part and cuts the tail off.
    let n = Proc::node(dir.path(), AOF);
    let mut c = n.conn();
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    assert_eq!(size, 10);
    n.shutdown("NOSAVE");
    assert_eq!(std::fs::read(&incr).expect("read"), good);
    // Garbage in the middle: corrupt, the node stops with the file and offset.
    let mut bad = good.clone();
    let at = good.len() / 2;
    bad[at..at + 4].copy_from_slice(b"!!!!");
    std::fs::write(&incr, &bad).expect("write");
    let out = node_expect_exit(dir.path(), AOF);
    let all =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    assert!(!all.contains("panicked"), "{all}");
    assert!(all.contains("incr.aof") && all.contains("offset"), "{all}");
}

#[test]
fn relative_ttls_replay_as_absolute() {
    let (dir, n) = always_node();
    let mut c = n.conn();
    let _: () = redis::cmd("SETEX")
        .arg("a")
        .arg(100)
        .arg("v")
        .query(&mut c)
        .expect("setex");
    let _: () = redis::cmd("SET")
        .arg("b")
        .arg("v")
        .arg("PX")
        .arg(1200)
        .query(&mut c)
        .expect("set px");
    let _: i64 = redis::cmd("EXPIRE")
        .arg("a")
        .arg(50)
        .query(&mut c)
        .expect("expire");
    n.shutdown("NOSAVE");
    let text = std::fs::read_to_string(incr_file(dir.path())).expect("read");
    assert!(
        text.contains("PEXPIREAT") && text.contains("PXAT"),
        "{text}"
    );
    std::thread::sleep(Duration::from_millis(1300));
    let n = Proc::node(dir.path(), AOF);
    let mut c = n.conn();
    let ttl: i64 = redis::cmd("TTL").arg("a").query(&mut c).expect("ttl");
    assert!((40..=50).contains(&ttl), "ttl {ttl}");
    let b: Option<String> = redis::cmd("GET").arg("b").query(&mut c).expect("get");
    assert_eq!(b, None);
}

#[test]
fn spop_and_blocking_pops_replay_to_the_same_state() {
    let (dir, n) = always_node();
    let mut c = n.conn();
    let members: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
    let _: i64 = redis::cmd("SADD")
        .arg("s")
        .arg(&members)
        .query(&mut c)
        .expect("sadd");
    let _: Vec<String> = redis::cmd("SPOP")
        .arg("s")
        .arg(50)
        .query(&mut c)
        .expect("spop n");
    let _: Option<String> = redis::cmd("SPOP").arg("s").query(&mut c).expect("spop");
    let _: i64 = redis::cmd("RPUSH")
        .arg("l")
        .arg("a")
        .arg("b")
        .query(&mut c)
        .expect("rpush");
    let _: Option<(String, String)> = redis::cmd("BLPOP")
        .arg("none")
        .arg("l")
        .arg(1)
        .query(&mut c)
        .expect("blpop");
    let before = snapshot(&n, 1);
    n.kill9();
    let n = Proc::node(dir.path(), &aof_args("always"));
    assert_eq!(snapshot(&n, 1), before);
}

#[test]
fn expired_keys_are_logged_as_del_and_stay_dead() {
    let (dir, n) = always_node();
    let mut c = n.conn();
    volatile_hash(&mut c, 300);
    let _: () = redis::cmd("SET")
        .arg("lazy")
        .arg("1")
        .arg("PX")
        .arg(300)
        .query(&mut c)
        .expect("set");
    // Wait until active expiry removed h (polling a key that is not h, so the removal is not lazy).
    let mut gone = false;
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(50));
        let text = std::fs::read_to_string(incr_file(dir.path())).expect("read");
        if text.contains("DEL\r\n$1\r\nh\r\n") {
            gone = true;
            break;
        }
    }
    assert!(gone, "active expiry of h was not logged as DEL");
    let v: Option<String> = redis::cmd("GET").arg("lazy").query(&mut c).expect("get");
    assert_eq!(v, None);
    n.kill9();
    let e = existing_after_replay(dir.path(), &["h", "lazy"]);
    assert_eq!(e, 0, "an expired key came back after replay");
}

#[test]
fn resp_base_without_rdb_preamble_loads_here_and_in_redis_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = aof_args("everysec");
    args.extend_from_slice(&["--aof-use-rdb-preamble", "no"]);
    let n = Proc::node(dir.path(), &args);
    fill(&n);
    let mut c = n.conn();
    let _: i64 = redis::cmd("ZADD")
        .arg("zf")
        .arg("0.1")
        .arg("a")
        .arg("-1e-300")
        .arg("b")
        .query(&mut c)
        .expect("zadd");
    let _: String = redis::cmd("BGREWRITEAOF")
        .query(&mut c)
        .expect("bgrewriteaof");
    poll_persistence(&mut c, 600, Duration::from_millis(20), |i| {
        i.contains("aof_rewrite_in_progress:0") && i.contains("aof_rewrites:1")
    });
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("x")
        .query(&mut c)
        .expect("set");
    let before = snapshot(&n, 6);
    n.shutdown("NOSAVE");
    let base = std::fs::read_dir(dir.path().join("appendonlydir"))
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".base.aof"));
    assert!(base.is_some(), "no RESP base file");
    let n = Proc::node(dir.path(), &args);
    assert_eq!(snapshot(&n, 6), before);
    n.shutdown("NOSAVE");
    let r = Proc::start(
        "redis-server",
        dir.path(),
        &["--save", "", "--appendonly", "yes"],
    );
    assert_eq!(snapshot(&r, 6), before);
}

#[test]
fn transactions_are_logged_whole() {
    let (dir, n) = always_node();
    let mut c = n.conn();
    let _: () = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("t1")
        .arg("a")
        .ignore()
        .cmd("INCR")
        .arg("t2")
        .ignore()
        .query(&mut c)
        .expect("multi/exec");
    n.shutdown("NOSAVE");
    let incr = incr_file(dir.path());
    let text = std::fs::read_to_string(&incr).expect("read");
    let multi = text.find("MULTI").expect("MULTI logged");
    let exec = text.find("EXEC").expect("EXEC logged");
    assert!(multi < text.find("t1").expect("t1") && text.find("t2").expect("t2") < exec);
    // A transaction cut before its EXEC is not applied.
    let cut = text[..exec].rfind('*').expect("EXEC's array header");
    std::fs::write(&incr, &text.as_bytes()[..cut]).expect("write");
    let n = Proc::node(dir.path(), AOF);
    let mut c = n.conn();
    let e: i64 = redis::cmd("EXISTS")
        .arg("t1")
        .arg("t2")
        .query(&mut c)
        .expect("exists");
    assert_eq!(e, 0);
}

#[test]
fn a_key_that_expired_while_down_stays_dead_after_replay() {
    let (dir, n) = always_node();
    let mut c = n.conn();
    volatile_hash(&mut c, 400);
    let _: () = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("m")
        .arg("1")
        .arg("PX")
        .arg(400)
        .ignore()
        .cmd("APPEND")
        .arg("m")
        .arg("2")
        .ignore()
        .query(&mut c)
        .expect("multi");
    n.kill9();
    std::thread::sleep(Duration::from_millis(600));
    let e = existing_after_replay(dir.path(), &["h", "m"]);
    assert_eq!(
        e, 0,
        "a key whose TTL passed while the node was down came back"
    );
}
