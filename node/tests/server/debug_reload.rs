//! The DEBUG subcommands Redis 7.0.15's own suites drive (issue 18), against redis-server:
//! DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE] and DEBUG LOADAOF keep the dataset (same DEBUG
//! DIGEST), DEBUG SET-ACTIVE-EXPIRE 0 stops the active expiry (unit/expire's lazy expiry
//! test), and the small switches and probes (PROTOCOL, ERROR, LOG, LISTPACK, ...) answer
//! as Redis does.

use std::time::Duration;

use tessera_testkit::*;

fn both(extra: &[&str]) -> [Server; 2] {
    [Launch::redis(), Launch::tessera()].map(|l| {
        l.args(&["--save", "", "--enable-debug-command", "yes"])
            .args(extra)
            .start()
    })
}

fn words(s: &str) -> Vec<String> {
    s.split(' ').map(String::from).collect()
}

/// Runs `cmds` on both connections; every reply differing is reported.
fn compare(rc: &mut Conn, tc: &mut Conn, cmds: &[&str], diffs: &mut Vec<String>) {
    for c in cmds {
        let w = words(c);
        let args: Vec<&str> = w.iter().map(String::as_str).collect();
        let (want, got) = (rc.cmd(&args), tc.cmd(&args));
        if want != got {
            diffs.push(format!("{c}: redis {want:?}, tessera {got:?}"));
        }
    }
}

const DATASET: &[&str] = &[
    "SET s v",
    "SET n 12345",
    "RPUSH l a b c",
    "HSET h f v g w",
    "SADD si 1 2 3",
    "SADD ss a b",
    "ZADD z 1 m 2.5 n",
    "XADD st 1-1 f v",
    "SET ttl x EX 1000",
    "SELECT 1",
    "SET other y",
    "SELECT 0",
];

fn field(c: &mut Conn, name: &str) -> String {
    let info = R::from(c.cmd(&["INFO", "persistence"])).s();
    info_field(&info, name).unwrap_or_default()
}

/// DEBUG RELOAD saves, empties and loads back: the same digest, the TTL kept, the change
/// counter and rdb_saves as after a SAVE; NOSAVE loads the file as it is, NOFLUSH MERGE
/// adds it to what is there; inside MULTI it works too; an unknown option is refused.
#[test]
fn debug_reload_like_redis() {
    let [r, t] = both(&[]);
    let (mut rc, mut tc) = (r.resp(), t.resp());
    let mut diffs = Vec::new();
    compare(&mut rc, &mut tc, DATASET, &mut diffs);
    let before = tc.cmd(&["DEBUG", "DIGEST"]);
    compare(
        &mut rc,
        &mut tc,
        &["DEBUG DIGEST", "DEBUG RELOAD", "DEBUG DIGEST", "DBSIZE"],
        &mut diffs,
    );
    assert_eq!(tc.cmd(&["DEBUG", "DIGEST"]), before, "digest after RELOAD");
    for c in [&mut rc, &mut tc] {
        let ttl = c.cmd(&["TTL", "ttl"]).as_int().unwrap_or(-3);
        assert!((900..=1000).contains(&ttl), "TTL after RELOAD: {ttl}");
    }
    for f in ["rdb_changes_since_last_save", "rdb_saves"] {
        let (want, got) = (field(&mut rc, f), field(&mut tc, f));
        if want != got {
            diffs.push(format!("INFO {f}: redis {want}, tessera {got}"));
        }
    }
    compare(
        &mut rc,
        &mut tc,
        &[
            "SET s changed",
            "DEBUG RELOAD NOSAVE",
            "GET s",
            "SET extra 1",
            "SET s changed2",
            "DEBUG RELOAD NOSAVE NOFLUSH MERGE",
            "GET extra",
            "GET s",
            "DEBUG RELOAD BOGUS",
            "debug reload merge noflush",
            "DBSIZE",
            "MULTI",
            "SET m 1",
            "DEBUG RELOAD",
            "GET m",
            "EXEC",
            "DEBUG DIGEST",
        ],
        &mut diffs,
    );
    for f in ["rdb_changes_since_last_save", "rdb_saves"] {
        let (want, got) = (field(&mut rc, f), field(&mut tc, f));
        if want != got {
            diffs.push(format!("INFO {f} at the end: redis {want}, tessera {got}"));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// DEBUG LOADAOF (appendonly yes): the AOF is flushed, the dataset emptied and replayed
/// from the base and incr files: the same digest, before and after a rewrite; the change
/// counter is 0 afterwards, as Redis sets it.
#[test]
fn debug_loadaof_like_redis() {
    let [r, t] = both(&["--appendonly", "yes"]);
    let (mut rc, mut tc) = (r.resp(), t.resp());
    let mut diffs = Vec::new();
    compare(&mut rc, &mut tc, DATASET, &mut diffs);
    compare(
        &mut rc,
        &mut tc,
        &[
            "INCR counter",
            "INCR counter",
            "DEL s",
            "DEBUG DIGEST",
            "DEBUG LOADAOF",
            "DEBUG DIGEST",
            "GET counter",
            "DBSIZE",
            // The replay is not appended again: a second load gives the same.
            "DEBUG LOADAOF",
            "GET counter",
            "DEBUG DIGEST",
        ],
        &mut diffs,
    );
    let f = "rdb_changes_since_last_save";
    let (want, got) = (field(&mut rc, f), field(&mut tc, f));
    if want != got {
        diffs.push(format!("INFO {f}: redis {want}, tessera {got}"));
    }
    for c in [&mut rc, &mut tc] {
        assert!(matches!(c.cmd(&["BGREWRITEAOF"]), Reply::Simple(_)));
        wait_until("the AOF rewrite", Duration::from_secs(30), || {
            field(c, "aof_rewrite_in_progress") == "0"
        });
    }
    compare(
        &mut rc,
        &mut tc,
        &[
            "SET after rewrite",
            "LPUSH l z",
            "DEBUG LOADAOF",
            "DEBUG DIGEST",
            "LRANGE l 0 -1",
            "GET after",
        ],
        &mut diffs,
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// unit/expire's "Redis should lazy expire keys": with DEBUG SET-ACTIVE-EXPIRE 0 keys past
/// their TTL stay until touched (3 3 0); 1 turns the active expiry back on.
#[test]
fn set_active_expire_off_like_redis() {
    let [r, t] = both(&[]);
    let mut sizes = Vec::new();
    for s in [&r, &t] {
        let mut c = s.resp();
        c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        for k in ["key1{t}", "key2{t}", "key3{t}"] {
            c.cmd(&["PSETEX", k, "500", "a"]);
        }
        let size1 = c.cmd(&["DBSIZE"]);
        std::thread::sleep(Duration::from_millis(1000));
        let size2 = c.cmd(&["DBSIZE"]);
        c.cmd(&["MGET", "key1{t}", "key2{t}", "key3{t}"]);
        let size3 = c.cmd(&["DBSIZE"]);
        c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
        c.cmd(&["PSETEX", "again", "100", "a"]);
        wait_until("the active expiry back on", Duration::from_secs(10), || {
            c.cmd(&["DBSIZE"]).as_int() == Some(0)
        });
        sizes.push((s.bin().to_string(), vec![size1, size2, size3]));
    }
    assert_eq!(
        sizes[0].1,
        vec![Reply::Int(3), Reply::Int(3), Reply::Int(0)],
        "redis-server"
    );
    assert_eq!(sizes[1].1, sizes[0].1, "tessera-node vs redis-server");
}

/// The small DEBUG switches and probes the suites use, in RESP2 and RESP3.
#[test]
fn debug_switches_and_probes_like_redis() {
    let [r, t] = both(&[]);
    let mut diffs = Vec::new();
    let probes: &[&str] = &[
        "DEBUG PROTOCOL string",
        "DEBUG PROTOCOL integer",
        "DEBUG PROTOCOL double",
        "DEBUG PROTOCOL bignum",
        "DEBUG PROTOCOL null",
        "DEBUG PROTOCOL array",
        "DEBUG PROTOCOL set",
        "DEBUG PROTOCOL map",
        "DEBUG PROTOCOL verbatim",
        "DEBUG PROTOCOL true",
        "DEBUG PROTOCOL false",
        "DEBUG PROTOCOL nosuch",
        "PING",
    ];
    for resp3 in [false, true] {
        let (mut rc, mut tc) = (r.resp(), t.resp());
        if !resp3 {
            compare(
                &mut rc,
                &mut tc,
                &["DEBUG PROTOCOL attrib", "DEBUG PROTOCOL push"],
                &mut diffs,
            );
        }
        if resp3 {
            rc.cmd(&["HELLO", "3"]);
            tc.cmd(&["HELLO", "3"]);
        }
        compare(&mut rc, &mut tc, probes, &mut diffs);
        if resp3 {
            // An attribute and a push come before the command's real reply.
            for p in ["attrib", "push"] {
                let args = ["DEBUG", "PROTOCOL", p];
                let want = [rc.cmd(&args), rc.read()];
                let got = [tc.cmd(&args), tc.read()];
                if want != got {
                    diffs.push(format!("RESP3 {p}: redis {want:?}, tessera {got:?}"));
                }
            }
        }
    }
    let (mut rc, mut tc) = (r.resp(), t.resp());
    compare(
        &mut rc,
        &mut tc,
        &[
            "DEBUG ERROR Some-error",
            "DEBUG LOG hello",
            "DEBUG SLEEP 0",
            "DEBUG SLEEP 0.01",
            "DEBUG CHANGE-REPL-ID",
            "DEBUG QUICKLIST-PACKED-THRESHOLD 1b",
            "DEBUG QUICKLIST-PACKED-THRESHOLD 0",
            "DEBUG QUICKLIST-PACKED-THRESHOLD abc",
            "DEBUG QUICKLIST-PACKED-THRESHOLD 5gb",
            "DEBUG SET-SKIP-CHECKSUM-VALIDATION 1",
            "DEBUG SET-SKIP-CHECKSUM-VALIDATION 0",
            "DEBUG PAUSE-CRON 0",
            "DEBUG SET-DISABLE-DENY-SCRIPTS 0",
            "DEBUG AOF-FLUSH-SLEEP 0",
            "DEBUG REPLYBUFFER PEAK-RESET-TIME NEVER",
            "DEBUG REPLYBUFFER PEAK-RESET-TIME RESET",
            "DEBUG REPLYBUFFER PEAK-RESET-TIME 100",
            "DEBUG REPLYBUFFER PEAK-RESET-TIME abc",
            "DEBUG REPLYBUFFER RESIZING 0",
            "DEBUG REPLYBUFFER RESIZING 1",
            "DEBUG REPLYBUFFER BOGUS 1",
            "HSET h f v",
            "DEBUG LISTPACK h",
            "DEBUG LISTPACK nosuch",
            "SET str v",
            "DEBUG LISTPACK str",
            "DEBUG QUICKLIST nosuch",
            "DEBUG QUICKLIST h",
            "DEBUG STRINGMATCH-TEST",
            "DEBUG SET-ACTIVE-EXPIRE 1",
            "DEBUG NOSUCH",
        ],
        &mut diffs,
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    // CHANGE-REPL-ID gives a new replication id.
    let id = |c: &mut Conn| {
        info_field(
            &R::from(c.cmd(&["INFO", "replication"])).s(),
            "master_replid",
        )
    };
    let a = id(&mut tc);
    assert_eq!(
        tc.cmd(&["DEBUG", "CHANGE-REPL-ID"]),
        Reply::Simple("OK".into())
    );
    assert_ne!(id(&mut tc), a, "DEBUG CHANGE-REPL-ID changes master_replid");
}

/// key-load-delay slows every key a load reads (Redis's rdbLoad): a DEBUG RELOAD of 500
/// keys at 2 ms a key lasts at least a second, and loads them all. (Redis answers other
/// clients -LOADING meanwhile; tessera-node's I/O thread running the reload serves no one
/// else until it ends, as during DEBUG SLEEP: not compared.)
#[test]
fn key_load_delay_slows_a_load_like_redis() {
    let [r, t] = both(&[]);
    for s in [&r, &t] {
        let mut a = s.resp();
        let mut b = s.resp();
        assert_eq!(
            a.cmd(&["DEBUG", "POPULATE", "500", "key", "100"]),
            Reply::Simple("OK".into())
        );
        assert_eq!(a.cmd(&["SAVE"]), Reply::Simple("OK".into()));
        a.cmd(&["CONFIG", "SET", "key-load-delay", "2000"]);
        let started = std::time::Instant::now();
        a.send(&["DEBUG", "RELOAD", "NOSAVE"]);
        assert_eq!(a.read(), Reply::Simple("OK".into()), "{}", s.bin());
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(1),
            "{}: 500 keys at 2 ms each loaded in {took:?}",
            s.bin()
        );
        assert_eq!(b.cmd(&["DBSIZE"]), Reply::Int(500), "{}", s.bin());
    }
}

/// DEBUG LOADAOF with appendonly no (unit/aofrw): the files a BGREWRITEAOF made are
/// loaded, so a key written after the rewrite is gone, as in Redis.
#[test]
fn debug_loadaof_with_aof_off_like_redis() {
    let [r, t] = both(&[]);
    let (mut rc, mut tc) = (r.resp(), t.resp());
    let mut diffs = Vec::new();
    compare(&mut rc, &mut tc, &["SET a 1", "RPUSH l x y"], &mut diffs);
    for c in [&mut rc, &mut tc] {
        assert!(matches!(c.cmd(&["BGREWRITEAOF"]), Reply::Simple(_)));
        wait_until("the AOF rewrite", Duration::from_secs(30), || {
            field(c, "aof_rewrite_in_progress") == "0"
        });
    }
    compare(
        &mut rc,
        &mut tc,
        &[
            "SET b 2",
            "DEBUG LOADAOF",
            "GET a",
            "GET b",
            "LRANGE l 0 -1",
            "DEBUG DIGEST",
        ],
        &mut diffs,
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// DEBUG REPLICATE args...: the command goes to the replicas only (Redis's
/// replicationFeedSlaves, for the suites' data divergence tests): the replica has the key,
/// the master does not.
#[test]
fn debug_replicate_feeds_only_replicas_like_redis() {
    for launch in [Launch::redis, Launch::tessera] {
        let start = || {
            launch()
                .args(&["--save", "", "--enable-debug-command", "yes"])
                .start()
        };
        let (m, r) = (start(), start());
        let (mut mc, mut rc) = (m.resp(), r.resp());
        let port = m.port.to_string();
        assert_eq!(
            rc.cmd(&["REPLICAOF", "127.0.0.1", &port]),
            Reply::Simple("OK".into())
        );
        wait_until("the replica's link", Duration::from_secs(30), || {
            let info = R::from(rc.cmd(&["INFO", "replication"])).s();
            info_field(&info, "master_link_status").as_deref() == Some("up")
        });
        assert_eq!(
            mc.cmd(&["DEBUG", "REPLICATE", "SET", "diverged", "1"]),
            Reply::Simple("OK".into()),
            "{}",
            m.bin()
        );
        mc.cmd(&["SET", "after", "2"]);
        wait_until("the write after it", Duration::from_secs(30), || {
            rc.cmd(&["GET", "after"]) == Reply::Bulk(b"2".to_vec())
        });
        assert_eq!(
            rc.cmd(&["GET", "diverged"]),
            Reply::Bulk(b"1".to_vec()),
            "{}",
            m.bin()
        );
        assert_eq!(mc.cmd(&["GET", "diverged"]), Reply::Null, "{}", m.bin());
    }
}

/// unit/type/stream-cgroups' "Empty stream with no lastid can be rewrite into AOF
/// correctly": an empty stream with a group survives BGREWRITEAOF (no RDB preamble) and
/// DEBUG LOADAOF, as in Redis (the rewrite creates it with XADD ... MAXLEN 0 0-1).
#[test]
fn empty_stream_survives_rewrite_and_loadaof_like_redis() {
    let [r, t] = both(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    let (mut rc, mut tc) = (r.resp(), t.resp());
    let mut diffs = Vec::new();
    compare(
        &mut rc,
        &mut tc,
        &[
            "XGROUP CREATE mystream group-name $ MKSTREAM",
            "XINFO GROUPS mystream",
        ],
        &mut diffs,
    );
    for c in [&mut rc, &mut tc] {
        assert!(matches!(c.cmd(&["BGREWRITEAOF"]), Reply::Simple(_)));
        wait_until("the AOF rewrite", Duration::from_secs(30), || {
            field(c, "aof_rewrite_in_progress") == "0"
        });
    }
    compare(
        &mut rc,
        &mut tc,
        &[
            "DEBUG LOADAOF",
            "EXISTS mystream",
            "XLEN mystream",
            "XINFO GROUPS mystream",
        ],
        &mut diffs,
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// unit/introspection's "CONFIG REWRITE sanity": DEBUG CONFIG-REWRITE-FORCE-ALL writes every
/// option (defaults too) into the config file, and a restart from it has the very same
/// CONFIG GET *.
#[test]
fn config_rewrite_force_all_like_redis() {
    for launch in [Launch::redis, Launch::tessera] {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = ports::free_port();
        let path = dir.path().join("node.conf");
        std::fs::write(
            &path,
            format!("port {port}\nbind 127.0.0.1\nsave \"\"\nenable-debug-command yes\nmaxmemory 100mb\n"),
        )
        .expect("config file");
        let conf = path.display().to_string();
        let mut s = launch()
            .verbatim()
            .dir(dir.path())
            .cwd()
            .args(&[conf.as_str()])
            .start_at(port);
        let all = |s: &Server| {
            let Reply::Array(v) = s.resp().cmd(&["CONFIG", "GET", "*"]) else {
                panic!("CONFIG GET *")
            };
            let mut pairs: Vec<(String, String)> = v
                .chunks(2)
                .map(|p| (R::from(p[0].clone()).s(), R::from(p[1].clone()).s()))
                .collect();
            pairs.sort();
            pairs
        };
        let before = all(&s);
        assert_eq!(
            s.resp().cmd(&["DEBUG", "CONFIG-REWRITE-FORCE-ALL"]),
            Reply::Simple("OK".into()),
            "{}",
            s.bin()
        );
        let text = std::fs::read_to_string(&path).expect("rewritten file");
        assert!(
            text.contains("hz 10"),
            "{}: defaults written too:\n{text}",
            s.bin()
        );
        s.restart_at(port);
        let after = all(&s);
        let changed: Vec<_> = before.iter().zip(&after).filter(|(a, b)| a != b).collect();
        assert!(
            before.len() == after.len() && changed.is_empty(),
            "{}: {changed:?}",
            s.bin()
        );
    }
}

/// DEBUG SET-SKIP-CHECKSUM-VALIDATION 1 (integration/corrupt-dump's setup): RESTORE takes a
/// payload whose CRC64 is wrong (the version is still checked); 0 checks it again.
#[test]
fn skip_checksum_validation_like_redis() {
    let [r, t] = both(&[]);
    let mut diffs = Vec::new();
    for s in [&r, &t] {
        let mut c = s.resp();
        c.cmd(&["RPUSH", "src", "a", "b", "c"]);
        let Reply::Bulk(mut payload) = c.cmd(&["DUMP", "src"]) else {
            panic!("DUMP")
        };
        let n = payload.len();
        payload[n - 1] ^= 0xff;
        let mut bad_version = payload.clone();
        bad_version[n - 10] = 0xff;
        let restore = |c: &mut Conn, key: &str, p: &[u8]| {
            let mut out = Vec::new();
            let args: [&[u8]; 4] = [b"RESTORE", key.as_bytes(), b"0", p];
            c.raw_write(&tessera_testkit::resp::encode(&args));
            out.push(c.read());
            out
        };
        let mut got = Vec::new();
        got.extend(restore(&mut c, "k1", &payload));
        got.push(c.cmd(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]));
        got.extend(restore(&mut c, "k2", &payload));
        got.push(c.cmd(&["LRANGE", "k2", "0", "-1"]));
        got.extend(restore(&mut c, "k3", &bad_version));
        got.push(c.cmd(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "0"]));
        got.extend(restore(&mut c, "k4", &payload));
        diffs.push(got);
    }
    assert_eq!(diffs[1], diffs[0], "tessera-node vs redis-server");
}
