//! Keyspace notifications, differential against redis-server 7.0: the same commands run on
//! both with `notify-keyspace-events` set, and a PSUBSCRIBE '__key*__:*' client must see the
//! same messages in the same order. Also CONFIG SET/GET of the setting (normalized string,
//! error text) and the config-file form.

use tessera_testkit::pubsub::*;
use tessera_testkit::*;

/// Every command family the node has, including the cases that emit nothing.
const SCRIPT: &[&[&str]] = &[
    // Generic.
    &["SET", "k1", "v"],
    &["DEL", "k1", "missing"],
    &["SET", "k2", "v"],
    &["EXPIRE", "k2", "100"],
    &["PERSIST", "k2"],
    &["PERSIST", "k2"],
    &["PEXPIRE", "k2", "100000"],
    &["EXPIRE", "k2", "100", "NX"],
    &["EXPIREAT", "k2", "1"],
    &["SET", "k3", "v"],
    &["RENAME", "k3", "k4"],
    &["RENAME", "k4", "k4"],
    &["RENAMENX", "k4", "k5"],
    &["SET", "k6", "x"],
    &["RENAMENX", "k5", "k6"],
    &["RENAME", "k5", "k6"],
    &["COPY", "k6", "k7"],
    &["COPY", "k6", "k7"],
    &["COPY", "k6", "k7", "REPLACE"],
    &["COPY", "k6", "k8", "DB", "1"],
    &["MOVE", "k7", "2"],
    &["UNLINK", "k6", "k8"],
    &["SELECT", "1"],
    &["DEL", "k8"],
    &["SELECT", "0"],
    // Strings.
    &["SET", "k9", "v", "EX", "100"],
    &["SET", "k9", "w", "KEEPTTL"],
    &["SETEX", "k10", "100", "v"],
    &["PSETEX", "k11", "100000", "v"],
    &["SETNX", "k12", "v"],
    &["SETNX", "k12", "v"],
    &["GETSET", "k12", "w"],
    &["SET", "nx", "v", "NX"],
    &["SET", "nx", "v", "NX"],
    &["SET", "xx", "v", "XX"],
    &["SET", "nx", "v2", "XX", "GET"],
    &["MSET", "m1", "a", "m2", "b"],
    &["MSETNX", "m1", "a", "m3", "c"],
    &["MSETNX", "n1", "a", "n2", "b"],
    &["GETDEL", "n1"],
    &["GETDEL", "n1"],
    &["GETEX", "n2", "EX", "100"],
    &["GETEX", "n2", "PERSIST"],
    &["GETEX", "n2", "PERSIST"],
    &["GETEX", "n2"],
    &["INCR", "c"],
    &["DECR", "c"],
    &["INCRBY", "c", "5"],
    &["DECRBY", "c", "2"],
    &["INCRBYFLOAT", "f", "1.5"],
    &["APPEND", "s", "abc"],
    &["SETRANGE", "s", "1", "X"],
    &["SETRANGE", "s", "0", ""],
    &["SETRANGE", "s0", "0", ""],
    &["SETBIT", "b", "3", "1"],
    &["BITFIELD", "bf", "SET", "u8", "0", "5"],
    &["BITFIELD", "bf", "GET", "u8", "0"],
    &["BITOP", "AND", "dst", "b", "bf"],
    &["BITOP", "AND", "dst2", "nokey", "nokey2"],
    &["BITOP", "AND", "dst", "nokey", "nokey2"],
    &["PFADD", "h1", "a", "b"],
    &["PFADD", "h1", "a"],
    &["PFMERGE", "h2", "h1"],
    &["GET", "m1"],
    // Hashes.
    &["HSET", "h", "f", "v", "f2", "v2"],
    &["HSET", "h", "f", "v"],
    &["HSETNX", "h", "f", "v"],
    &["HSETNX", "h", "f3", "v"],
    &["HMSET", "h", "f4", "v"],
    &["HDEL", "h", "nope"],
    &["HDEL", "h", "f", "f2", "f3", "f4"],
    &["HINCRBY", "hi", "f", "1"],
    &["HINCRBYFLOAT", "hi", "g", "1.5"],
    // Lists.
    &["LPUSH", "l", "a", "b", "c"],
    &["RPUSH", "l", "d"],
    &["LPUSHX", "nol", "a"],
    &["RPUSHX", "l", "e"],
    &["LPOP", "l"],
    &["RPOP", "l"],
    &["LPOP", "nol"],
    &["LPOP", "l", "2"],
    &["RPUSH", "l", "p", "q", "r"],
    &["LSET", "l", "0", "z"],
    &["LINSERT", "l", "BEFORE", "z", "y"],
    &["LINSERT", "l", "BEFORE", "nope", "y"],
    &["LREM", "l", "0", "y"],
    &["LREM", "l", "0", "nope"],
    &["LTRIM", "l", "0", "0"],
    &["LTRIM", "nol", "0", "1"],
    &["RPOPLPUSH", "l", "l2"],
    &["RPOPLPUSH", "nol", "l2"],
    &["LMOVE", "l2", "l3", "LEFT", "RIGHT"],
    &["RPUSH", "l4", "a", "b"],
    &["LMPOP", "2", "nol", "l4", "LEFT", "COUNT", "5"],
    &["BLPOP", "l3", "0.1"],
    &["RPUSH", "l5", "a", "b"],
    &["LMOVE", "l5", "l5", "LEFT", "RIGHT"],
    &["BLMOVE", "l5", "l6", "RIGHT", "LEFT", "0"],
    &["BRPOPLPUSH", "l6", "l7", "0"],
    &["BLMPOP", "0", "1", "l7", "RIGHT"],
    &["BRPOP", "l5", "0"],
    &["RPUSH", "left", "a", "b"],
    &["LMPOP", "1", "left", "RIGHT"],
    &["BLMPOP", "0", "1", "left", "RIGHT"],
    &["LTRIM", "l", "5", "10"],
    // Sets.
    &["SADD", "s1", "a", "b", "c"],
    &["SADD", "s1", "a"],
    &["SREM", "s1", "nope"],
    &["SREM", "s1", "a"],
    &["SMOVE", "s1", "s2", "b"],
    &["SMOVE", "s1", "s2", "nope"],
    &["SPOP", "s1"],
    &["SPOP", "s1"],
    &["SADD", "s3", "x", "y"],
    &["SADD", "s4", "y", "z"],
    &["SINTERSTORE", "s5", "s3", "s4"],
    &["SUNIONSTORE", "s6", "s3", "s4"],
    &["SDIFFSTORE", "s7", "s3", "s3"],
    &["SDIFFSTORE", "s5", "s3", "s3"],
    &["SPOP", "s3", "5"],
    &["SADD", "s8", "a"],
    &["SMOVE", "s8", "s6", "a"],
    &["SADD", "s9", "a", "b"],
    &["SMOVE", "s9", "s6", "a"],
    // Sorted sets.
    &["ZADD", "z", "1", "a", "2", "b"],
    &["ZADD", "z", "1", "a"],
    &["ZADD", "z", "3", "a"],
    &["ZADD", "z", "CH", "3", "a"],
    &["ZADD", "z", "XX", "1", "new"],
    &["ZADD", "zm", "1", "incr"],
    &["ZADD", "zm", "1", "incr"],
    &["ZADD", "min", "1", "x"],
    &["ZMPOP", "1", "min", "MAX"],
    &["ZINCRBY", "z", "1", "a"],
    &["ZADD", "z", "INCR", "1", "b"],
    &["ZADD", "z", "NX", "INCR", "1", "b"],
    &["ZREM", "z", "nope"],
    &["ZREM", "z", "a"],
    &["ZADD", "z", "5", "c", "6", "d", "7", "e"],
    &["ZREMRANGEBYRANK", "z", "0", "0"],
    &["ZREMRANGEBYSCORE", "z", "6", "6"],
    &["ZREMRANGEBYSCORE", "z", "100", "200"],
    &["ZADD", "zl", "0", "a", "0", "b", "0", "c", "0", "d"],
    &["ZREMRANGEBYLEX", "zl", "[a", "[a"],
    &["ZPOPMIN", "z"],
    &["ZPOPMAX", "z"],
    &["ZPOPMIN", "z"],
    &["ZUNIONSTORE", "zu", "2", "zl", "zl"],
    &["ZINTERSTORE", "zi", "1", "zl"],
    &["ZDIFFSTORE", "zd", "2", "zl", "zl"],
    &["ZDIFFSTORE", "zi", "2", "zl", "zl"],
    &["ZRANGESTORE", "zr", "zl", "0", "0"],
    &["ZMPOP", "1", "zl", "MIN"],
    &["BZPOPMIN", "zl", "0.01"],
    &["BZPOPMAX", "zr", "0"],
    &["BZMPOP", "0", "1", "zu", "MAX", "COUNT", "10"],
    // Geo: GEOADD notifies as ZADD (added or moved members only), the STORE forms as
    // geosearchstore / georadiusstore, or del when the result is empty.
    &[
        "GEOADD",
        "g",
        "13.361389",
        "38.115556",
        "Palermo",
        "15.087269",
        "37.502669",
        "Catania",
    ],
    &["GEOADD", "g", "13.361389", "38.115556", "Palermo"],
    &["GEOADD", "g", "XX", "13.4", "38.1", "Palermo"],
    &["GEOADD", "g", "NX", "13.4", "38.1", "Palermo"],
    &[
        "GEOSEARCHSTORE",
        "gs",
        "g",
        "FROMLONLAT",
        "15",
        "37",
        "BYRADIUS",
        "200",
        "km",
        "ASC",
    ],
    &[
        "GEOSEARCHSTORE",
        "gs",
        "g",
        "FROMLONLAT",
        "0",
        "0",
        "BYRADIUS",
        "1",
        "km",
        "ASC",
    ],
    &["GEORADIUS", "g", "15", "37", "200", "km", "STORE", "gr"],
    &[
        "GEORADIUSBYMEMBER",
        "g",
        "Palermo",
        "500",
        "km",
        "STOREDIST",
        "gd",
    ],
    &["GEORADIUS", "g", "15", "37", "200", "km"],
    &[
        "GEOSEARCH",
        "g",
        "FROMMEMBER",
        "Palermo",
        "BYBOX",
        "400",
        "400",
        "km",
    ],
    // DUMP/RESTORE (payload produced by the same server).
    &["SET", "dumped", "value"],
    // Transactions notify per command.
    &["MULTI"],
    &["SET", "t1", "a"],
    &["INCR", "t2"],
    &["DEL", "t1"],
    &["EXEC"],
    // Flushes and SWAPDB emit nothing.
    &["SELECT", "3"],
    &["SET", "x", "y"],
    &["SWAPDB", "3", "4"],
    &["FLUSHDB"],
    &["SELECT", "0"],
];

/// Runs the script with a pattern subscriber attached; returns the messages it saw.
fn session(bin: &'static str, flags: &str) -> Vec<String> {
    let p = Proc::start(bin, &["--notify-keyspace-events", flags]);
    let mut sub = p.raw();
    assert_eq!(
        sub.cmd(&["PSUBSCRIBE", "__key*__:*"]).s(),
        "[psubscribe,__key*__:*,1]"
    );
    let mut c = p.raw();
    for cmd in SCRIPT {
        let r = c.cmd(cmd);
        assert!(!matches!(r, R::Other(..)), "{bin}: {cmd:?} -> {r:?}");
    }
    // RESTORE from this server's own DUMP.
    let payload = match c.cmd(&["DUMP", "dumped"]) {
        R::Bulk(b) => b,
        other => panic!("DUMP: {other:?}"),
    };
    let restore: Vec<&[u8]> = vec![b"RESTORE", b"restored", b"0", &payload];
    c.send(&encode(&restore));
    assert_eq!(c.read(), R::Simple("OK".into()));
    // Lazy expiry of a key read after its TTL, then active expiry of one never read.
    c.cmd(&["SET", "lazy", "v", "PX", "1"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    c.cmd(&["GET", "lazy"]);
    c.cmd(&["SET", "active", "v", "PX", "1"]);
    let mut seen = Vec::new();
    loop {
        let m = sub.read().s();
        let done = m.contains("__keyevent@0__:expired,active");
        seen.push(m);
        if done {
            break;
        }
        assert!(seen.len() < 5000, "{bin}: runaway");
    }
    seen
}

fn compare(flags: &str) {
    let ours = session(tessera_bin(), flags);
    let theirs = session(redis_bin(), flags);
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(
            a,
            b,
            "message {i} differs ({flags}); redis context: {:?}",
            &theirs[i.saturating_sub(3)..(i + 3).min(theirs.len())]
        );
    }
    assert_eq!(ours.len(), theirs.len(), "message count ({flags})");
}

#[test]
fn events_match_redis_kea() {
    compare("KEA");
}

#[test]
fn events_match_redis_with_new_and_subset() {
    compare("KEAn");
    compare("Elgx");
}

fn config_session(bin: &'static str) -> Vec<String> {
    let p = Proc::start(bin, &[]);
    let mut c: Raw = p.raw();
    let mut t = vec![c.cmd(&["CONFIG", "GET", "notify-keyspace-events"]).s()];
    for v in [
        "KEA",
        "Q",
        "Elg",
        "g$lshzxetdKEmn",
        "x",
        "K$",
        "KA",
        "KEn",
        "Kgd",
        "",
    ] {
        t.push(c.cmd(&["CONFIG", "SET", "notify-keyspace-events", v]).s());
        t.push(c.cmd(&["CONFIG", "GET", "notify-keyspace-events"]).s());
    }
    t
}

#[test]
fn config_set_get_match_redis() {
    assert_eq!(config_session(tessera_bin()), config_session(redis_bin()));
}

#[test]
fn off_by_default_and_config_set_turns_on() {
    let p = Proc::start(tessera_bin(), &[]);
    let mut sub = p.raw();
    sub.cmd(&["PSUBSCRIBE", "__key*__:*"]);
    let mut c = p.raw();
    c.cmd(&["SET", "quiet", "v"]);
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Eg"]);
    c.cmd(&["SET", "quiet", "v"]);
    c.cmd(&["DEL", "quiet"]);
    // The first message is the DEL: the SETs (off, then class '$' not enabled) said nothing.
    assert_eq!(
        sub.read().s(),
        "[pmessage,__key*__:*,__keyevent@0__:del,quiet]"
    );
}

#[test]
fn bad_config_file_value_stops_the_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path().join("bad.conf");
    std::fs::write(&conf, "notify-keyspace-events Q\n").expect("write");
    let conf = conf.display().to_string();
    let out = Launch::tessera()
        .verbatim()
        .args(&[conf.as_str(), "--port", "0"])
        .run_to_exit(dir.path(), std::time::Duration::from_secs(60));
    assert!(out.failed(), "{out:?}");
    let text = out.output;
    assert!(
        text.contains("Invalid event class character. Use 'Ag$lshzxeKEtmdn'."),
        "{text}"
    );
}

/// A blocked client served by a later push: the pusher's events, then the pop's.
fn served_session(bin: &'static str) -> Vec<String> {
    let p = Proc::start(bin, &["--notify-keyspace-events", "KEA"]);
    let mut sub = p.raw();
    sub.cmd(&["PSUBSCRIBE", "__keyevent*__:*"]);
    let mut blk = p.raw();
    let mut c = p.raw();
    let id = c.cmd(&["CLIENT", "ID"]).s().parse::<u64>().unwrap_or(0) - 1;
    blk.send(&encode(&[b"BLPOP", b"bl", b"0"]));
    tessera_testkit::pubsub::wait_for(std::time::Duration::from_secs(20), "BLPOP blocked", || {
        c.cmd(&["CLIENT", "LIST"])
            .s()
            .lines()
            .any(|l| l.starts_with(&format!("id={id} ")) && l.contains("flags=b"))
    });
    c.cmd(&["RPUSH", "bl", "x"]);
    assert_eq!(blk.read().s(), "[bl,x]");
    c.cmd(&["SET", "end", "1"]);
    let mut seen = Vec::new();
    loop {
        let m = sub.read().s();
        let done = m.ends_with(":set,end]");
        seen.push(m);
        if done {
            break;
        }
    }
    seen
}

#[test]
fn served_blocked_client_events_match_redis() {
    assert_eq!(served_session(tessera_bin()), served_session(redis_bin()));
}

/// Key-miss events ('m', not part of 'A') for the read commands.
fn keymiss_session(bin: &'static str) -> Vec<String> {
    let p = Proc::start(bin, &["--notify-keyspace-events", "Em"]);
    let mut sub = p.raw();
    sub.cmd(&["PSUBSCRIBE", "__keyevent*__:*"]);
    let mut c = p.raw();
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["HSET", "h", "f", "v"]);
    let reads: &[&[&str]] = &[
        &["GET", "nokey"],
        &["GET", "k"],
        &["MGET", "k", "m1", "m2"],
        &["HGET", "nohash", "f"],
        &["HGET", "h", "nofield"],
        &["STRLEN", "nostr"],
        &["LRANGE", "nolist", "0", "-1"],
        &["SMEMBERS", "noset"],
        &["ZSCORE", "nozset", "m"],
        &["EXISTS", "nokey"],
        &["TYPE", "nokey"],
        &["TTL", "nokey"],
        &["GETRANGE", "nokey", "0", "1"],
        &["SUNION", "s1", "s2"],
        &["PFCOUNT", "nohll"],
        &["DUMP", "nokey"],
    ];
    for r in reads {
        c.cmd(r);
    }
    c.cmd(&["PUBLISH", "__keyevent@0__:end", "end"]);
    let mut seen = Vec::new();
    loop {
        let m = sub.read().s();
        if m.ends_with(":end,end]") {
            break;
        }
        seen.push(m);
    }
    seen
}

#[test]
fn keymiss_events_match_redis() {
    assert_eq!(keymiss_session(tessera_bin()), keymiss_session(redis_bin()));
}

#[test]
fn eviction_notifies_evicted() {
    let p = Proc::start(
        tessera_bin(),
        &[
            "--notify-keyspace-events",
            "Ee",
            "--maxmemory-policy",
            "allkeys-random",
        ],
    );
    let mut sub = p.raw();
    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:evicted"]);
    let mut c = p.raw();
    for i in 0..200 {
        c.cmd(&["SET", &format!("ev{i}"), &"x".repeat(1000)]);
    }
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "1"]).s(), "OK");
    // The next write must make room first: keys go, each with an "evicted" event.
    let _ = c.cmd(&["SET", "trigger", "y"]);
    let m = sub.read().s();
    assert!(m.starts_with("[message,__keyevent@0__:evicted,ev"), "{m}");
}
