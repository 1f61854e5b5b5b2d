//! Keyspace and data-type differences found running Redis 7.0.15's own suites (issue 18),
//! each compared with redis-server: SCAN of a small keyspace in one call, far-future expiry
//! times (EXPIRETIME, RDB reload, RESTORE ABSTTL), the dirty counts of SETBIT/BITFIELD/
//! SMOVE/BITOP, BITCOUNT/BITPOS ranges, and the error texts and order of checks of malformed
//! list/set/zset/string calls.

use tessera_testkit::diff::*;
use tessera_testkit::resp::encode;

/// Both servers, saving only when told, no AOF.
fn pair() -> (Server, Server) {
    let args = ["--save", "", "--appendonly", "no"];
    (Server::tessera(&args), Server::redis(&args))
}

/// Runs every line on both connections; returns the lines whose replies differ.
fn diff_lines(t: &mut Conn, r: &mut Conn, lines: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for l in lines {
        let (a, b) = (t.line(l), r.line(l));
        if a != b {
            out.push(format!("`{l}`:\n  tessera: {a:?}\n  redis:   {b:?}"));
        }
    }
    out
}

fn dirty(c: &mut Conn) -> i64 {
    let Reply::Bulk(info) = c.cmd(&["INFO", "persistence"]) else {
        panic!("INFO persistence");
    };
    let info = String::from_utf8_lossy(&info).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("rdb_changes_since_last_save")
}

/// A small keyspace comes back from one SCAN with the default COUNT, cursor 0, as in
/// Redis (whose hash table of a few keys has a few buckets); so do SSCAN/HSCAN/ZSCAN.
#[test]
fn scan_of_small_keyspace_is_one_call() {
    diff_script(
        "scan-small",
        r#"
        scan 0
        set k v
        scan 0
        scan 0 count 10
        ~scan 0 match k*
        mset a 1 b 2 c 3 d 4
        ~scan 0
        ~scan 0 count 1000
        ~scan 0 type string
        scan 0 type list
        ~scan 0 match [ab]
        rpush l1 x
        sadd s1 x
        ~scan 0 count 10
        ~scan 0 count 1000 type set
        mset e 1 f 2 g 3 h 4 i 5 j 6 k2 7 l 8 m 9 n 10 o 11 p 12
        ~scan 0 count 1000
        sadd s 1 2 3 a b c
        ~sscan s 0
        hset h a 1 b 2 c 3
        ~hscan h 0
        zadd z 1 a 2 b 3 c
        ~zscan z 0
        "#,
    );
}

/// Every key present for a whole SCAN comes back even when the keyspace is sparse
/// (one key per thousand slots), the cursor ends at 0, and COUNT 10 calls that are not
/// the last return keys (no run of empty answers).
#[test]
fn scan_counts_keys_not_slots() {
    let t = tessera();
    let mut c = Conn::connect(t.port);
    let keys: Vec<String> = (0..40).map(|i| format!("sparse:{i}")).collect();
    for k in &keys {
        c.cmd(&["SET", k, "v"]);
    }
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    let mut calls = 0;
    loop {
        let Reply::Array(parts) = c.cmd(&["SCAN", &cursor, "COUNT", "10"]) else {
            panic!("SCAN");
        };
        let Reply::Bulk(cur) = &parts[0] else {
            panic!("cursor");
        };
        cursor = String::from_utf8_lossy(cur).into_owned();
        let Reply::Array(batch) = &parts[1] else {
            panic!("keys");
        };
        calls += 1;
        assert!(calls <= 40, "SCAN COUNT 10 over 40 keys took {calls} calls");
        if cursor != "0" {
            assert!(
                batch.len() >= 10,
                "a non-final call returned {} keys",
                batch.len()
            );
        }
        seen.extend(batch.iter().map(|b| match b {
            Reply::Bulk(k) => String::from_utf8_lossy(k).into_owned(),
            other => panic!("key {other:?}"),
        }));
        if cursor == "0" {
            break;
        }
    }
    seen.sort();
    let mut want = keys.clone();
    want.sort();
    assert_eq!(seen, want);
}

/// Expiry times far in the future (past the year 2159, up to Redis's i64 milliseconds)
/// are kept exactly, and the overflow errors match.
#[test]
fn far_future_expiry_is_exact() {
    diff_script(
        "expire-far",
        r#"
        set k v
        expireat k 33177117420
        expiretime k
        pexpiretime k
        pexpireat k 33177117420123
        pexpiretime k
        expiretime k
        pexpireat k 9223372036854770000
        pexpiretime k
        expiretime k
        pexpireat k 9223372036854775807
        pexpiretime k
        expireat k 9223372036854775
        pexpiretime k
        expireat k 9223372036854776
        expire k 9223370399119966
        expire k 9223372036854776
        expire k 10000000000000000
        expire k 18446744073709561
        expire k -9223372036854776
        pexpire k 9223372036854770000
        set k2 v exat 33177117420
        expiretime k2
        set k3 v pxat 4102444800001
        pexpiretime k3
        set k4 v ex 10000000000000000
        set k4 v exat 9223372036854776
        getex k2 pxat 9223372036854770000
        pexpiretime k2
        getex k2 exat 10000000000000000
        persist k2
        expiretime k2
        expireat k2 33177117420 nx
        expireat k2 33177117420 gt
        expireat k2 33177117421 gt
        expiretime k2
        expireat k2 33177117420 lt
        expiretime k2
        set k5 v
        pexpireat k5 2000000000000
        pexpiretime k5
        pexpireat k5 1577836800001
        exists k5
        "#,
    );
}

/// TTL/PTTL of a far key, and its deadline after SAVE and a restart (RDB save and load)
/// and after DUMP + RESTORE ... ABSTTL, match redis-server.
#[test]
fn far_future_expiry_survives_reload_and_restore() {
    let (mut t, mut r) = pair();
    let (mut tc, mut rc) = (Conn::connect(t.port), Conn::connect(r.port));
    for c in [&mut tc, &mut rc] {
        c.cmd(&["SET", "far", "v"]);
        c.cmd(&["EXPIREAT", "far", "33177117420"]);
        c.cmd(&["SET", "max", "v"]);
        c.cmd(&["PEXPIREAT", "max", "9223372036854770000"]);
    }
    for cmd in ["TTL", "PTTL"] {
        let a = tc.cmd(&[cmd, "far"]).as_int().expect("int");
        let b = rc.cmd(&[cmd, "far"]).as_int().expect("int");
        let slack = if cmd == "TTL" { 5 } else { 5000 };
        assert!((a - b).abs() <= slack, "{cmd}: tessera {a}, redis {b}");
    }
    let mut diffs = Vec::new();
    for c in [&mut tc, &mut rc] {
        assert_eq!(c.cmd(&["SAVE"]), Reply::Simple("OK".into()));
    }
    t.restart();
    r.restart();
    let (mut tc, mut rc) = (Conn::connect(t.port), Conn::connect(r.port));
    let lines: Vec<String> = ["pexpiretime far", "pexpiretime max", "expiretime max"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    diffs.extend(diff_lines(&mut tc, &mut rc, &lines));
    // DUMP on redis, RESTORE with absolute far deadlines on both.
    let Reply::Bulk(payload) = rc.cmd(&["DUMP", "far"]) else {
        panic!("DUMP");
    };
    for (key, at) in [("r1", "33177117420000"), ("r2", "9223372036854770000")] {
        for c in [&mut tc, &mut rc] {
            let args: [&[u8]; 5] = [
                b"RESTORE",
                key.as_bytes(),
                at.as_bytes(),
                &payload,
                b"ABSTTL",
            ];
            c.raw_write(&encode(&args));
            assert_eq!(c.read(), Reply::Simple("OK".into()), "RESTORE {key}");
        }
    }
    let lines: Vec<String> = ["pexpiretime r1", "pexpiretime r2", "get r2"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    diffs.extend(diff_lines(&mut tc, &mut rc, &lines));
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// What each write adds to rdb_changes_since_last_save (Redis's `server.dirty`), and its
/// reply, for the bitmap and set writes whose counts differed: a SETBIT or BITFIELD op that
/// leaves the bits as they were counts 0 unless it created or grew the string; BITFIELD
/// counts each op that changed something; BITOP of missing keys onto a missing key is 0.
#[test]
fn bit_and_set_dirty_counts_match_redis() {
    let (t, r) = pair();
    let (mut tc, mut rc) = (Conn::connect(t.port), Conn::connect(r.port));
    let script = r#"
        sadd s1 a b c
        sadd s2 a x
        smove s1 s2 a
        sadd s1 a
        smove s1 s2 a
        smove s1 s2 zz
        smove s1 s1 b
        smove s1 s1 zz
        smove s1 nos c
        set str x
        smove s1 str b
        setbit b 7 1
        setbit b 7 1
        setbit b 7 0
        setbit b 7 0
        setbit b 100 0
        setbit b 100 0
        setbit nb 0 0
        bitfield b set u1 7 0
        bitfield b set u1 7 1
        bitfield b set u1 7 1 set u1 6 1
        bitfield b set u1 7 1 set u1 6 1
        bitfield b set u1 7 1 set u1 6 0
        bitfield b incrby u2 0 0 incrby u2 0 0
        bitfield b overflow sat incrby u8 0 300
        bitfield b overflow sat incrby u8 0 300
        bitfield b overflow wrap incrby u8 0 256
        bitfield b set u8 0 0 set u8 0 0
        bitfield b set u8 0 1 set u8 0 2
        bitfield b set i64 0 0
        bitfield b set i64 1000 0 set i64 1000 0
        bitfield c set u8 0 0
        bitfield d incrby u8 0 0
        bitfield e overflow fail incrby u8 0 300
        exists e
        bitfield b get u8 0
        bitfield_ro b get u8 0
        bitop or dest2 nope1 nope2
        bitop or b2 b nb
        bitop and b2 nope1 nope2
        exists b2
        setrange sr 0 x
        setrange sr 0 x
        "#;
    let mut diffs = Vec::new();
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (t0, r0) = (dirty(&mut tc), dirty(&mut rc));
        let (a, b) = (tc.line(line), rc.line(line));
        let (dt, dr) = (dirty(&mut tc) - t0, dirty(&mut rc) - r0);
        if a != b || dt != dr {
            diffs.push(format!(
                "`{line}`: tessera {a:?} dirty +{dt}, redis {b:?} dirty +{dr}"
            ));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// BITCOUNT and BITPOS over a grid of (start, end) with negative indexes, with and
/// without BYTE/BIT, on strings of several lengths and a missing key.
#[test]
fn bitcount_bitpos_ranges_match_redis() {
    let (t, r) = pair();
    let (mut tc, mut rc) = (Conn::connect(t.port), Conn::connect(r.port));
    let values: [&[u8]; 4] = [b"", b"\xff\xf0\x00", b"foobar", b"\x00\x00\x01\xff"];
    for (i, v) in values.iter().enumerate() {
        let key = format!("v{i}");
        for c in [&mut tc, &mut rc] {
            c.raw_write(&encode(&[b"SET", key.as_bytes(), v]));
            assert_eq!(c.read(), Reply::Simple("OK".into()));
        }
    }
    let idx = [-100, -17, -9, -8, -3, -2, -1, 0, 1, 2, 3, 7, 8, 9, 23, 100];
    let mut lines = Vec::new();
    for key in ["v0", "v1", "v2", "v3", "missing"] {
        lines.push(format!("bitcount {key}"));
        lines.push(format!("bitpos {key} 0"));
        lines.push(format!("bitpos {key} 1"));
        for s in idx {
            for bit in [0, 1] {
                lines.push(format!("bitpos {key} {bit} {s}"));
                lines.push(format!("bitpos {key} {bit} {s} bit"));
            }
            for e in idx {
                for unit in ["", " byte", " bit"] {
                    lines.push(format!("bitcount {key} {s} {e}{unit}"));
                    for bit in [0, 1] {
                        lines.push(format!("bitpos {key} {bit} {s} {e}{unit}"));
                    }
                }
            }
        }
    }
    let diffs = diff_lines(&mut tc, &mut rc, &lines);
    assert!(
        diffs.is_empty(),
        "{} of {} differ:\n{}",
        diffs.len(),
        lines.len(),
        diffs
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Malformed calls: Redis's exact error texts and the order it checks things in (arity,
/// numkeys, count, key lookup before parsing the remaining arguments...).
#[test]
fn malformed_calls_match_redis() {
    diff_script(
        "malformed",
        r#"
        rpush l a b c
        zadd z 1 a 2 b
        sadd s a b
        set str 1234
        lpop l 1 2
        rpop l 1 2
        lpop l -1
        lpop l abc
        lpop l 1.5
        lpop nol -1
        lmpop 0 l left
        lmpop -1 l left
        lmpop abc l left
        lmpop 1.5 l left
        lmpop 01 l left
        lmpop 2 l left
        lmpop 9223372036854775807 l left
        lmpop 1 l
        lmpop 1 l middle
        lmpop 1 l left count 0
        lmpop 1 l left count -1
        lmpop 1 l left count a
        lmpop 1 l left count 1 count 2
        blmpop 0 0 l left
        blmpop 0 abc l left
        blmpop abc 1 l left
        blmpop 0 1 l left count a
        zmpop 0 z min
        zmpop abc z min
        zmpop 2 z min
        zmpop 1 z min count a
        zmpop 1 z min count 9999999999999999999
        zmpop 1 z min count 0
        bzmpop 0 abc z min
        bzmpop abc 1 z min
        bzmpop 0 1 z min count a
        sintercard 0 s
        sintercard -1 s
        sintercard abc s
        sintercard 2 s
        sintercard 1 s limit a
        sintercard 1 s limit -1
        sintercard 1 s limit 1 limit 2
        zintercard 0 z
        zintercard abc z
        zintercard 2 z
        zintercard 1 z limit a
        zunion 0 z
        zunion abc z
        zunion 2 z
        zinter abc z
        zdiff 0 z
        zdiff abc z
        zdiff 2 z
        zunionstore d abc z
        zunionstore d 2 z
        zinterstore d 0 z
        zdiffstore d -1 z
        srandmember s -9223372036854775808
        hset h f v
        hrandfield h -9223372036854775808
        zrandmember z -9223372036854775808
        zrandmember z -9223372036854775808 withscores
        lindex nol a
        lset nol a b
        getex nok ex a
        getex nok ex -1
        bitcount nok a b
        bitcount nok 1
        bitcount nok 1 2 3
        bitcount str 1
        bitcount str 1 2 3
        bitpos nok a
        bitpos nok 2
        bitpos str 01
        bitpos nok 1 1 2 bit 4
        bitpos str 1 1 2 bit 4
        hrandfield h 5000000000000000000 withvalues
        hrandfield h -5000000000000000000 withvalues
        hrandfield h -9223372036854775808 foo
        zrandmember z 5000000000000000000 withscores
        zrandmember z a withscores
        zrandmember z 1 foo
        srandmember s a b
        getex str ex a
        getex str ex 0
        getex str persist ex 10
        getex str ex 10 ex 10
        getex l ex a
        lindex str a
        lset str a b
        lset l a b
        lset l 99 b
        set k v ex 10 ex 20
        ttl k
        set k v px 100000 px 200000
        set k v ex 10 px 10
        set k v ex abc foo
        set k v keepttl keepttl
        set k v ex 10 keepttl
        getex k persist persist
        getex k ex 100 ex 200
        ttl k
        getex k pxat 1 pxat 2
        exists k
        "#,
    );
}

/// The commands of an AOF directory's incremental file, one string each, with absolute
/// millisecond times (13+ digits) masked.
fn aof_commands(dir: &std::path::Path) -> Vec<String> {
    let aofdir = dir.join("appendonlydir");
    let mut out = Vec::new();
    let entries = std::fs::read_dir(&aofdir).unwrap_or_else(|e| panic!("{aofdir:?}: {e}"));
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".incr.aof") {
            continue;
        }
        let text = std::fs::read(e.path()).expect("read aof");
        let text = String::from_utf8_lossy(&text).into_owned();
        let mut cur: Vec<String> = Vec::new();
        let mut left = 0usize;
        for line in text.split("\r\n") {
            if let Some(n) = line.strip_prefix('*') {
                left = n.parse().unwrap_or(0);
                cur.clear();
            } else if line.starts_with('$') {
                continue;
            } else if left > 0 {
                let masked = if line.len() >= 13 && line.bytes().all(|b| b.is_ascii_digit()) {
                    "<ms>".to_string()
                } else {
                    line.to_string()
                };
                cur.push(masked);
                left -= 1;
                if left == 0 {
                    out.push(cur.join(" "));
                }
            }
        }
    }
    out
}

/// SET with EX/PX/EXAT/PXAT (whatever the case, repeated, with NX/GET) reaches the AOF as
/// Redis 7.0 writes it: `SET key value PXAT <ms>` (Redis's unit/expire "All TTL in
/// commands are propagated as absolute timestamp").
#[test]
fn set_deadlines_reach_the_aof_as_redis_writes_them() {
    let args = [
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ];
    let (t, r) = (Server::tessera(&args), Server::redis(&args));
    let (mut tc, mut rc) = (Conn::connect(t.port), Conn::connect(r.port));
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    let lines = [
        "set foo1 bar ex 100".to_string(),
        "set foo2 bar px 100000".to_string(),
        format!("set foo3 bar exat {}", now_ms / 1000 + 100),
        format!("set foo4 bar pxat {}", now_ms + 100_000),
        format!("SET foo5 bar PXAT {}", now_ms + 100_000),
        "set foo6 bar ex 10 ex 100 nx".to_string(),
        "set foo6 baz px 100000 get xx".to_string(),
        "set foo7 bar keepttl".to_string(),
    ];
    let diffs = diff_lines(&mut tc, &mut rc, &lines);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    let (ta, ra) = (aof_commands(&t.dir), aof_commands(&r.dir));
    assert_eq!(ta, ra, "AOF of tessera (left) and redis (right)");
}

/// List and sorted-set pops reach the AOF as Redis 7.0 writes them: LMPOP/BLMPOP as
/// LPOP/RPOP key <popped>, BLPOP/BRPOP as LPOP/RPOP key, ZMPOP/BZMPOP as ZPOPMIN/ZPOPMAX key
/// <popped>, BZPOPMIN/BZPOPMAX as ZPOPMIN/ZPOPMAX key; also when served after blocking
/// (Redis's "LMPOP/BLMPOP/ZMPOP/BZMPOP propagate as pop with count command to replica").
#[test]
fn pops_reach_the_aof_as_redis_writes_them() {
    let args = [
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ];
    let (t, r) = (Server::tessera(&args), Server::redis(&args));
    let lines: Vec<String> = [
        "rpush l a b c d e",
        "lmpop 1 l left count 2",
        "lmpop 2 nol l right count 10",
        "rpush l2 x y z",
        "blpop l2 0",
        "brpop nol l2 0",
        "blmpop 0 1 l2 left count 3",
        "zadd z 1 a 2 b 3 c 4 d 5 e",
        "zmpop 1 z min count 2",
        "bzpopmax z 0",
        "bzpopmin z 0",
        "bzmpop 0 2 noz z max count 9",
        "lmpop 1 nol left",
        "zmpop 1 noz min",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (mut tc, mut rc) = (Conn::connect(t.port), Conn::connect(r.port));
    let diffs = diff_lines(&mut tc, &mut rc, &lines);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    // Served after blocking.
    for (port, c) in [(t.port, &mut tc), (r.port, &mut rc)] {
        let mut blocked = Conn::connect(port);
        blocked.send(&["BLMPOP", "0", "1", "bl", "RIGHT", "COUNT", "2"]);
        wait_blocked(c, 1);
        c.cmd(&["RPUSH", "bl", "1", "2", "3"]);
        assert!(matches!(blocked.read(), Reply::Array(_)));
        blocked.send(&["BZMPOP", "0", "1", "bz", "MIN", "COUNT", "5"]);
        wait_blocked(c, 1);
        c.cmd(&["ZADD", "bz", "1", "x", "2", "y"]);
        assert!(matches!(blocked.read(), Reply::Array(_)));
        blocked.send(&["BLPOP", "bl2", "0"]);
        wait_blocked(c, 1);
        c.cmd(&["RPUSH", "bl2", "q"]);
        assert!(matches!(blocked.read(), Reply::Array(_)));
        // Everything reached the AOF (appendfsync always) once this answers.
        c.cmd(&["PING"]);
    }
    let (ta, ra) = (aof_commands(&t.dir), aof_commands(&r.dir));
    assert_eq!(ta, ra, "AOF of tessera (left) and redis (right)");
}

/// SMOVE signals the destination modified (WATCH, tracking) only when the member was
/// added there, as Redis (its unit/type/set "SMOVE only notify dstset when the addition
/// is successful"); the source is signalled whenever the member moved.
#[test]
fn smove_touches_the_destination_only_when_it_adds() {
    let (t, r) = pair();
    let mut diffs = Vec::new();
    for (watched, expect_fail) in [("dst", false), ("src", true)] {
        let mut got = Vec::new();
        for port in [t.port, r.port] {
            let mut c = Conn::connect(port);
            let mut other = Conn::connect(port);
            c.cmd(&["DEL", "src", "dst"]);
            c.cmd(&["SADD", "src", "a", "b"]);
            c.cmd(&["SADD", "dst", "a"]);
            c.cmd(&["WATCH", watched]);
            c.cmd(&["MULTI"]);
            c.cmd(&["SADD", "dst", "c"]);
            other.cmd(&["SMOVE", "src", "dst", "a"]);
            let exec = c.cmd(&["EXEC"]);
            got.push((exec, c.cmd(&["SCARD", "dst"])));
        }
        if got[0] != got[1] {
            diffs.push(format!(
                "WATCH {watched}: tessera {:?}, redis {:?}",
                got[0], got[1]
            ));
        }
        let aborted = matches!(got[1].0, Reply::NullArray | Reply::Null);
        assert_eq!(aborted, expect_fail, "redis itself: WATCH {watched}");
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

fn expired_keys(c: &mut Conn) -> i64 {
    let Reply::Bulk(info) = c.cmd(&["INFO", "stats"]) else {
        panic!("INFO stats");
    };
    String::from_utf8_lossy(&info)
        .lines()
        .find_map(|l| l.strip_prefix("expired_keys:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("expired_keys")
}

/// SCAN and RANDOMKEY delete the logically expired keys they meet (Redis's
/// expireIfNeeded: counted in expired_keys, DEL propagated), with active expiry off.
#[test]
fn scan_and_randomkey_expire_what_they_meet() {
    let args = [
        "--save",
        "",
        "--appendonly",
        "no",
        "--enable-debug-command",
        "yes",
    ];
    let (t, r) = (Server::tessera(&args), Server::redis(&args));
    let mut diffs = Vec::new();
    for cmd in [
        &["SCAN", "0"][..],
        &["SCAN", "0", "MATCH", "foo*"],
        &["RANDOMKEY"],
    ] {
        let mut got = Vec::new();
        for port in [t.port, r.port] {
            let mut c = Conn::connect(port);
            c.cmd(&["FLUSHALL"]);
            c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
            c.cmd(&["SET", "foo1", "bar", "PX", "1"]);
            c.cmd(&["SET", "foo2", "bar", "PX", "1"]);
            c.cmd(&["SET", "other", "bar", "PX", "1"]);
            std::thread::sleep(std::time::Duration::from_millis(20));
            let before = c.cmd(&["DBSIZE"]);
            let expired0 = expired_keys(&mut c);
            let reply = c.cmd(cmd).normalized(true);
            let expired = expired_keys(&mut c) - expired0;
            got.push((before, reply, c.cmd(&["DBSIZE"]), expired));
            c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
        }
        if got[0] != got[1] {
            diffs.push(format!(
                "{cmd:?}: tessera {:?}\n   redis {:?}",
                got[0], got[1]
            ));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// On a writable replica, a key its own client gave a TTL is removed by the replica's
/// active expiry (its master never sends a DEL for it), as Redis's slaveKeysWithExpire;
/// a key with a TTL from the master stays until the master's DEL (here: no active expiry
/// on the master, so it stays).
#[test]
fn writable_replica_expires_its_own_keys() {
    let mut diffs = Vec::new();
    for tessera in [true, false] {
        let start = |args: &[&str]| {
            if tessera {
                Server::tessera(args)
            } else {
                Server::redis(args)
            }
        };
        let base = [
            "--save",
            "",
            "--appendonly",
            "no",
            "--enable-debug-command",
            "yes",
        ];
        let master = start(&base);
        let port = master.port.to_string();
        let mut args = base.to_vec();
        args.extend([
            "--replicaof",
            "127.0.0.1",
            &port,
            "--replica-read-only",
            "no",
        ]);
        let replica = start(&args);
        let (mut m, mut r) = (Conn::connect(master.port), Conn::connect(replica.port));
        m.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        m.cmd(&["SET", "frommaster", "v", "PX", "1"]);
        m.cmd(&["SET", "marker", "v"]);
        tessera_testkit::wait_until(
            "replica in sync",
            std::time::Duration::from_secs(20),
            || r.cmd(&["DBSIZE"]) == Reply::Int(2),
        );
        let before = expired_keys(&mut r);
        assert_eq!(
            r.cmd(&["SET", "local", "v", "PX", "1"]),
            Reply::Simple("OK".into())
        );
        let mut expired = false;
        for _ in 0..200 {
            if expired_keys(&mut r) > before {
                expired = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        let name = if tessera { "tessera" } else { "redis" };
        if !expired {
            diffs.push(format!("{name}: the replica's own key was not expired"));
        }
        // The master's expired key stays on the replica (only the master expires it).
        let held = r.cmd(&["DBSIZE"]);
        if held != Reply::Int(2) {
            diffs.push(format!(
                "{name}: replica DBSIZE {held:?}, want 2 (the master's keys)"
            ));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
