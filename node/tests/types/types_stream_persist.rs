//! Streams survive SAVE + restart, travel in both directions between tessera-node and
//! redis-server 7.0 as dump.rdb files (with consumer groups and pending entries), and
//! replicate both ways (full sync and the command stream, where tessera propagates the
//! concrete ID of `*` and exact trimming for `~`).

use redis::Value as V;
use tessera_testkit::repl::*;

fn q(c: &mut redis::Connection, args: &[&str]) -> V {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Everything observable about stream `key` that does not depend on the clock.
fn stream_state(p: &Proc, key: &str) -> Vec<V> {
    let mut c = p.conn();
    vec![
        q(&mut c, &["TYPE", key]),
        q(&mut c, &["XLEN", key]),
        q(&mut c, &["XRANGE", key, "-", "+"]),
        q(&mut c, &["XREVRANGE", key, "+", "-", "COUNT", "3"]),
    ]
}

/// redis's XINFO STREAM FULL of `key` (groups, PELs, consumers, all stored fields).
fn xinfo_full(p: &Proc, key: &str) -> V {
    q(&mut p.conn(), &["XINFO", "STREAM", key, "FULL"])
}

/// A stream with deletions, trimming, two groups, pending entries and an idle consumer.
fn build_on_redis(c: &mut redis::Connection) {
    for i in 1..=30 {
        let id = format!("{i}-1");
        let v = format!("v{i}");
        q(c, &["XADD", "s", &id, "f", &v, "g", "x"]);
    }
    q(c, &["XDEL", "s", "3-1", "30-1"]);
    q(c, &["XTRIM", "s", "MAXLEN", "25"]);
    q(c, &["XGROUP", "CREATE", "s", "g1", "0"]);
    q(c, &["XGROUP", "CREATE", "s", "g2", "$"]);
    q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "alice",
            "COUNT",
            "4",
            "STREAMS",
            "s",
            ">",
        ],
    );
    q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "bob",
            "COUNT",
            "2",
            "STREAMS",
            "s",
            ">",
        ],
    );
    q(c, &["XACK", "s", "g1", "8-1"]);
    q(c, &["XGROUP", "CREATECONSUMER", "s", "g2", "idle"]);
    q(c, &["XADD", "empty", "1-0", "a", "b"]);
    q(c, &["XDEL", "empty", "1-0"]);
}

#[test]
fn redis_dump_with_groups_loads_saves_and_loads_back_into_redis() {
    let (d1, _d2) = two_dirs();
    let r = Proc::redis(d1.path(), &[]);
    let mut rc = r.conn();
    build_on_redis(&mut rc);
    let before = (stream_state(&r, "s"), stream_state(&r, "empty"));
    let full_before = (xinfo_full(&r, "s"), xinfo_full(&r, "empty"));
    q(&mut rc, &["SAVE"]);
    drop(rc);
    drop(r);
    // Into tessera, which keeps everything, and saves it back.
    let n = Proc::node(d1.path(), &["--save", ""]);
    assert_eq!((stream_state(&n, "s"), stream_state(&n, "empty")), before);
    q(&mut n.conn(), &["SAVE"]);
    drop(n);
    // Restart of tessera on its own file.
    let n = Proc::node(d1.path(), &["--save", ""]);
    assert_eq!((stream_state(&n, "s"), stream_state(&n, "empty")), before);
    drop(n);
    let check = tessera_testkit::output_within(
        std::process::Command::new(tessera_testkit::bins::tool("redis-check-rdb"))
            .arg(d1.path().join("dump.rdb")),
        std::time::Duration::from_secs(60),
    );
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    // Back into redis: groups, PELs, consumers and metadata identical.
    let r = Proc::redis(d1.path(), &[]);
    assert_eq!((xinfo_full(&r, "s"), xinfo_full(&r, "empty")), full_before);
}

#[test]
fn tessera_master_redis_replica_with_streams() {
    let (dm, dr) = two_dirs();
    let master = Proc::node(dm.path(), &[]);
    let replica = Proc::redis(dr.path(), &[]);
    let mut mc = master.conn();
    for i in 1..=150 {
        q(&mut mc, &["XADD", "before", &format!("{i}-0"), "f", "v"]);
    }
    replicate(&replica, &master);
    // After the full sync: `*` IDs and approximate trimming must land identically.
    for i in 0..350 {
        let v = i.to_string();
        q(&mut mc, &["XADD", "s", "MAXLEN", "~", "120", "*", "f", &v]);
    }
    q(
        &mut mc,
        &[
            "XADD", "s", "MINID", "~", "0-1", "LIMIT", "100", "*", "f", "x",
        ],
    );
    q(&mut mc, &["XTRIM", "before", "MAXLEN", "~", "20"]);
    q(&mut mc, &["XDEL", "before", "140-0"]);
    q(&mut mc, &["XADD", "before", "200-*", "f", "v"]);
    wait_caught_up(&master, &replica);
    for k in ["s", "before"] {
        assert_eq!(stream_state(&replica, k), stream_state(&master, k), "{k}");
    }
}

#[test]
fn redis_master_tessera_replica_with_streams() {
    let (dm, dr) = two_dirs();
    let master = Proc::redis(dm.path(), &["--repl-diskless-sync", "no"]);
    let replica = Proc::node(dr.path(), &[]);
    let mut mc = master.conn();
    build_on_redis(&mut mc);
    replicate(&replica, &master);
    for i in 0..300 {
        let v = i.to_string();
        q(&mut mc, &["XADD", "t", "MAXLEN", "~", "50", "*", "f", &v]);
    }
    q(&mut mc, &["XDEL", "s", "10-1"]);
    q(&mut mc, &["XTRIM", "s", "MINID", "12"]);
    wait_caught_up(&master, &replica);
    for k in ["s", "t", "empty"] {
        assert_eq!(stream_state(&replica, k), stream_state(&master, k), "{k}");
    }
}

/// The same group history built on tessera and on redis: tessera's dump, loaded into
/// redis, reports the same XINFO GROUPS (last-delivered-id, entries-read, lag, pending).
#[test]
fn tessera_group_state_matches_redis_after_load() {
    let (d1, d2) = two_dirs();
    let n = Proc::node(d1.path(), &["--save", ""]);
    let r = Proc::redis(d2.path(), &[]);
    let (mut nc, mut rc) = (n.conn(), r.conn());
    build_on_redis(&mut nc);
    build_on_redis(&mut rc);
    for c in [&mut nc, &mut rc] {
        q(
            c,
            &["XREADGROUP", "GROUP", "g2", "carol", "STREAMS", "s", ">"],
        );
        q(c, &["XADD", "s", "40-1", "f", "new"]);
        q(
            c,
            &["XREADGROUP", "GROUP", "g2", "carol", "STREAMS", "s", ">"],
        );
        q(
            c,
            &[
                "XREADGROUP",
                "GROUP",
                "g1",
                "alice",
                "COUNT",
                "3",
                "STREAMS",
                "s",
                ">",
            ],
        );
        q(c, &["XGROUP", "CREATE", "s", "g3", "0"]);
        q(c, &["XDEL", "s", "20-1"]);
        q(
            c,
            &[
                "XREADGROUP",
                "GROUP",
                "g3",
                "dan",
                "COUNT",
                "30",
                "STREAMS",
                "s",
                ">",
            ],
        );
    }
    let groups = |c: &mut redis::Connection| q(c, &["XINFO", "GROUPS", "s"]);
    let theirs = groups(&mut rc);
    assert_eq!(groups(&mut nc), theirs, "XINFO GROUPS");
    // XINFO STREAM without Redis's internal rax node counts.
    let info = |c: &mut redis::Connection| match q(c, &["XINFO", "STREAM", "s"]) {
        V::Array(v) => v
            .chunks(2)
            .filter(|p| !matches!(&p[0], V::BulkString(k) if k.starts_with(b"radix-tree")))
            .flat_map(|p| p.to_vec())
            .collect::<Vec<_>>(),
        other => panic!("xinfo stream: {other:?}"),
    };
    assert_eq!(info(&mut nc), info(&mut rc), "XINFO STREAM");
    q(&mut nc, &["SAVE"]);
    drop(nc);
    drop(n);
    drop(rc);
    drop(r);
    let r = Proc::redis(d1.path(), &[]);
    assert_eq!(groups(&mut r.conn()), theirs);
}

/// DUMP/RESTORE both ways with redis-server 7.0 (groups included); MEMORY USAGE grows with
/// the entries.
#[test]
fn dump_restore_with_redis_and_memory_usage() {
    let (d1, d2) = two_dirs();
    let n = Proc::node(d1.path(), &["--save", ""]);
    let r = Proc::redis(d2.path(), &[]);
    let (mut nc, mut rc) = (n.conn(), r.conn());
    build_on_redis(&mut rc);
    let dump = |c: &mut redis::Connection, k: &str| -> Vec<u8> {
        redis::cmd("DUMP").arg(k).query(c).expect("dump")
    };
    let restore = |c: &mut redis::Connection, k: &str, p: &[u8]| {
        let _: () = redis::cmd("RESTORE")
            .arg(k)
            .arg(0)
            .arg(p)
            .query(c)
            .expect("restore");
    };
    let groups = |c: &mut redis::Connection, k: &str| q(c, &["XINFO", "GROUPS", k]);
    restore(&mut nc, "s", &dump(&mut rc, "s"));
    assert_eq!(stream_state(&n, "s"), stream_state(&r, "s"));
    assert_eq!(groups(&mut nc, "s"), groups(&mut rc, "s"));
    restore(&mut rc, "back", &dump(&mut nc, "s"));
    assert_eq!(stream_state(&r, "back"), stream_state(&r, "s"));
    assert_eq!(xinfo_full(&r, "back"), xinfo_full(&r, "s"));
    let usage = |c: &mut redis::Connection| -> i64 {
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg("m")
            .query(c)
            .expect("memory usage")
    };
    q(&mut nc, &["XADD", "m", "1-0", "f", "v"]);
    let small = usage(&mut nc);
    for i in 2..=1000 {
        q(&mut nc, &["XADD", "m", &format!("{i}-0"), "f", "v"]);
    }
    let big = usage(&mut nc);
    // Entries packed in blocks: ~8 bytes each for these tiny ones (redis reports ~20).
    assert!(small > 0 && big > small + 1000 * 4, "{small} -> {big}");
}
