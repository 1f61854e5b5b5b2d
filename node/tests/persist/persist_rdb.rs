//! dump.rdb: restarts keep every type, TTL and database; our file passes redis-check-rdb
//! and loads into redis-server 7.0 identically; redis-server's file loads into us; bad
//! files stop the node with a message instead of a panic.

use std::time::Duration;

use tessera_testkit::persist::*;

const DBS: u32 = 6;

#[test]
fn restart_keeps_types_ttls_and_databases() {
    let (dir, n) = filled_node();
    let mut c = n.conn();
    let _: () = redis::cmd("SET")
        .arg("short")
        .arg("v")
        .arg("PX")
        .arg(1500)
        .query(&mut c)
        .expect("set px");
    let ttl_before: i64 = redis::cmd("PTTL").arg("ttl").query(&mut c).expect("pttl");
    let before = snapshot(&n, DBS);
    // SHUTDOWN SAVE forces a save even with no save points.
    n.shutdown("SAVE");
    assert!(dir.path().join("dump.rdb").exists());
    std::thread::sleep(Duration::from_millis(1600));
    let n = Proc::node(dir.path(), &["--save", ""]);
    let mut c = n.conn();
    let short: Option<String> = redis::cmd("GET").arg("short").query(&mut c).expect("get");
    assert_eq!(
        short, None,
        "a key that expired while the node was down came back"
    );
    let ttl_after: i64 = redis::cmd("PTTL").arg("ttl").query(&mut c).expect("pttl");
    assert!(
        ttl_after <= ttl_before && ttl_after > ttl_before - 30_000,
        "ttl {ttl_before} -> {ttl_after}"
    );
    let after = snapshot(&n, DBS);
    let before: Vec<_> = before.into_iter().filter(|k| k.1 != b"short").collect();
    assert_eq!(before, after);
    let enc: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("bigiset")
        .query(&mut c)
        .expect("object encoding");
    assert_eq!(enc, "intset");
    // SHUTDOWN NOSAVE leaves the file alone even after changes.
    let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("flushall");
    n.shutdown("NOSAVE");
    let n = Proc::node(dir.path(), &["--save", ""]);
    assert_eq!(snapshot(&n, DBS), after);
}

#[test]
fn our_dump_passes_redis_check_rdb_and_loads_into_redis_server() {
    let (dir, n) = filled_node();
    let ours = snapshot(&n, DBS);
    let mut c = n.conn();
    let r: String = redis::cmd("BGSAVE").query(&mut c).expect("bgsave");
    assert_eq!(r, "Background saving started");
    // Poll until the background save finished.
    let done = |i: &str| i.contains("rdb_bgsave_in_progress:0");
    if let Some(info) = poll_persistence(&mut c, 600, Duration::from_millis(50), done) {
        assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
        assert!(info.contains("rdb_changes_since_last_save:0"), "{info}");
    }
    let rdb = dir.path().join("dump.rdb");
    let check = tessera_testkit::output_within(
        std::process::Command::new(tessera_testkit::bins::tool("redis-check-rdb")).arg(&rdb),
        std::time::Duration::from_secs(60),
    );
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "redis-check-rdb: {text}");
    assert!(text.contains("RDB looks OK"), "{text}");
    drop(n);
    let r = Proc::redis(dir.path(), &["--dbfilename", "dump.rdb"]);
    assert_eq!(snapshot(&r, DBS), ours);
}

#[test]
fn redis_server_dump_loads_into_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = Proc::redis(dir.path(), &[]);
    fill(&r);
    let theirs = snapshot(&r, DBS);
    let mut c = r.conn();
    let _: () = redis::cmd("SAVE").query(&mut c).expect("save");
    drop(r);
    let n = Proc::node(dir.path(), &["--save", ""]);
    assert_eq!(snapshot(&n, DBS), theirs);
}

#[test]
fn bad_rdb_stops_the_node_with_a_message() {
    let (dir, n) = filled_node();
    n.shutdown("SAVE");
    let path = dir.path().join("dump.rdb");
    let good = std::fs::read(&path).expect("read dump");
    // Truncated at several points, and a flipped byte (checksum mismatch).
    let mut cases: Vec<Vec<u8>> = [5, 9, 40, good.len() / 2, good.len() - 3]
        .iter()
        .map(|&n| good[..n].to_vec())
        .collect();
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x5a;
    cases.push(flipped);
    cases.push(b"this is not an rdb file at all".to_vec());
    for (i, bad) in cases.iter().enumerate() {
        std::fs::write(&path, bad).expect("write bad dump");
        let out = node_expect_exit(dir.path(), &["--save", ""]);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "case {i}: node accepted a bad rdb");
        assert!(!all.contains("panicked"), "case {i}: panic: {all}");
        assert!(
            all.contains("dump.rdb"),
            "case {i}: message lacks the file: {all}"
        );
    }
}

#[test]
fn save_points_trigger_a_background_save() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = Proc::node(dir.path(), &["--save", "1 3"]);
    let mut c = n.conn();
    let before: i64 = redis::cmd("LASTSAVE").query(&mut c).expect("lastsave");
    for i in 0..5 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut c)
            .expect("set");
    }
    let path = dir.path().join("dump.rdb");
    let mut saved = false;
    for _ in 0..300 {
        let info: String = redis::cmd("INFO")
            .arg("persistence")
            .query(&mut c)
            .expect("info");
        if path.exists() && info.contains("rdb_changes_since_last_save:0") {
            saved = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(saved, "no save after 5 changes with save 1 3");
    let after: i64 = redis::cmd("LASTSAVE").query(&mut c).expect("lastsave");
    assert!(after >= before);
    n.kill9();
    let n = Proc::node(dir.path(), &["--save", ""]);
    let mut c = n.conn();
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    assert_eq!(size, 5);
}
