//! DUMP / RESTORE / MIGRATE between tessera-node and redis-server 7.0, both directions.

use redis::{cmd, Connection, Value};
use tessera_testkit::cluster::*;
use tessera_testkit::*;

fn fill(c: &mut Connection) {
    let _: () = cmd("RPUSH")
        .arg("l")
        .arg(&["a", "b", "c"])
        .query(c)
        .expect("rpush");
    let _: () = cmd("HSET")
        .arg("h")
        .arg(&["f", "v", "g", "w"])
        .query(c)
        .expect("hset");
    let _: () = cmd("ZADD")
        .arg("z")
        .arg(&["1", "a", "2.5", "b"])
        .query(c)
        .expect("zadd");
    let _: () = cmd("SADD")
        .arg("s")
        .arg(&["1", "2", "x"])
        .query(c)
        .expect("sadd");
    let _: () = cmd("SADD")
        .arg("si")
        .arg(&["1", "2", "3"])
        .query(c)
        .expect("sadd");
    let _: () = cmd("SET").arg("n").arg("12345").query(c).expect("set");
    let _: () = cmd("SET")
        .arg("str")
        .arg("hello world")
        .query(c)
        .expect("set");
    let big: Vec<String> = (0..300).map(|i| format!("member-{i}")).collect();
    let _: () = cmd("SADD").arg("bigset").arg(&big).query(c).expect("sadd");
    let _: () = cmd("RPUSH")
        .arg("biglist")
        .arg(&big)
        .query(c)
        .expect("rpush");
    let pairs: Vec<String> = (0..300)
        .flat_map(|i| [format!("{i}"), format!("m{i}")])
        .collect();
    let _: () = cmd("ZADD").arg("bigz").arg(&pairs).query(c).expect("zadd");
    let _: () = cmd("PFADD").arg("hll").arg(&big).query(c).expect("pfadd");
}

const KEYS: [&str; 11] = [
    "l", "h", "z", "s", "si", "n", "str", "bigset", "biglist", "bigz", "hll",
];

/// A canonical, order-independent rendering of a key's contents.
fn contents(c: &mut Connection, k: &str) -> String {
    let ty: String = cmd("TYPE").arg(k).query(c).expect("type");
    let mut v: Vec<Vec<u8>> = match ty.as_str() {
        "string" => vec![cmd("GET").arg(k).query::<Vec<u8>>(c).expect("get")],
        "list" => cmd("LRANGE")
            .arg(k)
            .arg(0)
            .arg(-1)
            .query(c)
            .expect("lrange"),
        "set" => cmd("SMEMBERS").arg(k).query(c).expect("smembers"),
        "hash" => cmd("HGETALL").arg(k).query(c).expect("hgetall"),
        "zset" => cmd("ZRANGE")
            .arg(k)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(c)
            .expect("zrange"),
        other => panic!("type {other}"),
    };
    if ty == "set" {
        v.sort();
    }
    format!("{ty}:{v:?}")
}

fn dump(c: &mut Connection, k: &str) -> Vec<u8> {
    cmd("DUMP").arg(k).query(c).expect("dump")
}

fn restore(c: &mut Connection, k: &str, ttl: u64, p: &[u8], extra: &[&str]) -> Result<(), String> {
    cmd("RESTORE")
        .arg(k)
        .arg(ttl)
        .arg(p)
        .arg(extra)
        .query::<()>(c)
        .map_err(|e| e.to_string())
}

#[test]
fn dump_restore_both_ways_with_redis() {
    let redis = Proc::standalone(redis_bin());
    let tess = Proc::standalone(tessera_bin());
    let (mut r, mut t) = (redis.client(), tess.client());
    fill(&mut r);
    for k in KEYS {
        let p = dump(&mut r, k);
        restore(&mut t, k, 0, &p, &[]).expect("restore into tessera");
        assert_eq!(contents(&mut t, k), contents(&mut r, k), "{k}");
        // And back: tessera's payload restores into redis-server 7.0.
        let p2 = dump(&mut t, k);
        let k2 = format!("{k}:back");
        restore(&mut r, &k2, 0, &p2, &[]).expect("restore into redis");
        assert_eq!(contents(&mut r, &k2), contents(&mut r, k), "{k} back");
    }
    // Compact encodings dump byte for byte like redis-server. Not "s": a
    // hashtable set's element order depends on redis's per-process hash seed.
    for k in ["l", "h", "z", "si", "n", "str"] {
        assert_eq!(dump(&mut t, k), dump(&mut r, k), "payload of {k}");
    }
    let p = dump(&mut r, "str");
    assert_eq!(
        raw_line(&tess.addr(), &[b"RESTORE", b"str", b"0", &p]),
        "-BUSYKEY Target key name already exists.\r\n"
    );
    let mut bad = p.clone();
    let n = bad.len();
    bad[n - 1] ^= 0xff;
    for srv in [&tess, &redis] {
        assert_eq!(
            raw_line(&srv.addr(), &[b"RESTORE", b"x", b"0", &bad]),
            "-ERR DUMP payload version or checksum are wrong\r\n"
        );
    }
    // REPLACE, TTL, ABSTTL, FREQ, IDLETIME.
    restore(&mut t, "str", 100_000, &dump(&mut r, "l"), &["REPLACE"]).expect("replace");
    let ty: String = cmd("TYPE").arg("str").query(&mut t).expect("type");
    assert_eq!(ty, "list");
    let pttl: i64 = cmd("PTTL").arg("str").query(&mut t).expect("pttl");
    assert!(pttl > 90_000 && pttl <= 100_000, "{pttl}");
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
        + 50_000;
    restore(&mut t, "abs", at, &p, &["ABSTTL"]).expect("absttl");
    let pttl: i64 = cmd("PTTL").arg("abs").query(&mut t).expect("pttl");
    assert!(pttl > 40_000 && pttl <= 50_000, "{pttl}");
    restore(&mut t, "past", 1, &p, &["ABSTTL"]).expect("expired absttl answers OK");
    let e: i64 = cmd("EXISTS").arg("past").query(&mut t).expect("exists");
    assert_eq!(e, 0);
    restore(&mut t, "idle", 0, &p, &["IDLETIME", "100"]).expect("idletime");
    restore(&mut t, "freq", 0, &p, &["FREQ", "10"]).expect("freq");
    for (args, want) in [
        (
            vec!["FREQ", "300"],
            "-ERR Invalid FREQ value, must be >= 0 and <= 255\r\n",
        ),
        (
            vec!["IDLETIME", "-1"],
            "-ERR Invalid IDLETIME value, must be >= 0\r\n",
        ),
        (vec!["BOGUS"], "-ERR syntax error\r\n"),
    ] {
        let mut a: Vec<&[u8]> = vec![b"RESTORE", b"y", b"0", &p];
        a.extend(args.iter().map(|s| s.as_bytes()));
        assert_eq!(raw_line(&tess.addr(), &a), want);
        assert_eq!(raw_line(&redis.addr(), &a), want, "redis agrees");
    }
    let v: Value = cmd("DUMP").arg("nope").query(&mut t).expect("dump");
    assert_eq!(v, Value::Nil);
}

#[test]
fn migrate_both_ways_with_redis() {
    let redis = Proc::standalone(redis_bin());
    let tess = Proc::standalone(tessera_bin());
    let (mut r, mut t) = (redis.client(), tess.client());
    fill(&mut t);
    let _: () = cmd("PEXPIRE")
        .arg("str")
        .arg(100_000)
        .query(&mut t)
        .expect("pexpire");
    let rp = redis.port.to_string();
    let tp = tess.port.to_string();
    // tessera → redis: single key, then KEYS (all types), source keys deleted.
    assert_eq!(
        tess.cli(&["MIGRATE", "127.0.0.1", &rp, "str", "0", "5000"])
            .trim(),
        "OK"
    );
    let pttl: i64 = cmd("PTTL").arg("str").query(&mut r).expect("pttl");
    assert!(pttl > 90_000 && pttl <= 100_000, "ttl travels: {pttl}");
    let mut args = vec!["MIGRATE", "127.0.0.1", &rp, "", "0", "5000", "KEYS"];
    let rest: Vec<&str> = KEYS.iter().copied().filter(|k| *k != "str").collect();
    args.extend(rest.iter().copied());
    let expect: Vec<String> = rest.iter().map(|k| contents(&mut t, k)).collect();
    assert_eq!(tess.cli(&args).trim(), "OK");
    for (k, want) in rest.iter().zip(&expect) {
        assert_eq!(&contents(&mut r, k), want, "{k}");
    }
    let n: i64 = cmd("DBSIZE").query(&mut t).expect("dbsize");
    assert_eq!(n, 0, "source keys deleted");
    assert_eq!(
        tess.cli(&["MIGRATE", "127.0.0.1", &rp, "gone", "0", "5000"])
            .trim(),
        "NOKEY"
    );
    // BUSYKEY on the target is reported; COPY keeps the source; REPLACE overwrites.
    let _: () = cmd("SET").arg("l").arg("mine").query(&mut t).expect("set");
    assert_eq!(
        raw_line(
            &tess.addr(),
            &[b"MIGRATE", b"127.0.0.1", rp.as_bytes(), b"l", b"0", b"5000"]
        ),
        "-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n"
    );
    assert_eq!(
        tess.cli(&[
            "MIGRATE",
            "127.0.0.1",
            &rp,
            "l",
            "0",
            "5000",
            "COPY",
            "REPLACE"
        ])
        .trim(),
        "OK"
    );
    let v: String = cmd("GET").arg("l").query(&mut r).expect("get");
    assert_eq!(v, "mine");
    let v: String = cmd("GET").arg("l").query(&mut t).expect("get");
    assert_eq!(v, "mine");
    // redis → tessera.
    assert_eq!(
        redis
            .cli(&[
                "MIGRATE",
                "127.0.0.1",
                &tp,
                "",
                "0",
                "5000",
                "KEYS",
                "h",
                "z",
                "bigz",
                "hll"
            ])
            .trim(),
        "OK"
    );
    for k in ["h", "z", "bigz", "hll"] {
        assert_eq!(
            contents(&mut t, k),
            expect[rest.iter().position(|x| *x == k).unwrap_or(0)]
        );
    }
    let n: i64 = cmd("PFCOUNT").arg("hll").query(&mut t).expect("pfcount");
    assert!((290..=310).contains(&n), "{n}");
    // Same error texts as redis-server for a target that refuses connections.
    let closed = free_port_on("127.0.0.1").to_string();
    let a: [&[u8]; 6] = [
        b"MIGRATE",
        b"127.0.0.1",
        closed.as_bytes(),
        b"l",
        b"0",
        b"500",
    ];
    assert_eq!(raw_line(&tess.addr(), &a), raw_line(&redis.addr(), &a));
}
