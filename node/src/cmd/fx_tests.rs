//! What handlers report through their context (keyspace events, propagation rewrites),
//! checked at the handler, in-process: the differential tests against redis-server check
//! the published result end to end.

use std::sync::Arc;

use bytes::Bytes;

use super::{table, Ctx, KeyView};
use crate::config::Config;
use crate::notify::Event;
use crate::propagate::{Write, WriteSubscriber};
use crate::resp::Out;
use crate::server::{ClientState, Server};

/// Counts nothing: its presence makes handlers build their propagation rewrites.
struct Sink;

impl WriteSubscriber for Sink {
    fn feed(&self, _: &Write<'_>) {}
}

/// A server with `notify-keyspace-events` set to `flags` and, if `propagating`, a
/// write subscriber.
pub(super) fn server(flags: &str, propagating: bool) -> Arc<Server> {
    let srv = Server::new(Config::default());
    srv.config
        .update(|c| c.set_directive("notify-keyspace-events", &[flags.to_string()]))
        .expect("notify-keyspace-events");
    srv.config_changed();
    if propagating {
        srv.persist.prop.subscribe(Arc::new(Sink));
    }
    srv
}

/// What one command reported.
pub(super) struct Ran {
    /// `event key` (with `@db` when not db 0), in order.
    pub events: Vec<String>,
    /// The recorded events' buffer capacity (0: nothing was allocated).
    pub capacity: usize,
    pub propagate: Option<Vec<Vec<String>>>,
    pub ok: bool,
    /// The reply's bytes.
    pub reply: Vec<u8>,
}

/// Runs `argv`'s handler on `srv` with every stripe locked, returning its effects as
/// recorded (before the dispatcher publishes them).
pub(super) fn run(srv: &Arc<Server>, argv: &[&str]) -> Ran {
    let args: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
    let cmd = table().resolve(&args).expect("known command");
    let mut cl = ClientState::detached(1, 0);
    let mut out = Out::new(false);
    let mut ctx = Ctx {
        srv,
        cl: &mut cl,
        out: &mut out,
        ks: KeyView::new(srv, srv.ks.lock_all(), 0, crate::server::now_ms()),
        block: None,
        in_exec: false,
        serving_blocked: false,
        noop: false,
        untouched: false,
        changes: 1,
    };
    let ok = (cmd.handler)(&mut ctx, &args).is_ok();
    let fx = std::mem::take(&mut ctx.ks.fx);
    drop(ctx);
    let show = |e: &Event| {
        let key = String::from_utf8_lossy(&e.key);
        match e.db {
            0 => format!("{} {key}", e.event),
            db => format!("{} {key}@{db}", e.event),
        }
    };
    let text = |v: &Vec<Bytes>| {
        v.iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect::<Vec<_>>()
    };
    Ran {
        events: fx.events.iter().map(show).collect(),
        capacity: fx.events.capacity(),
        propagate: fx.propagate.map(|l| l.iter().map(text).collect()),
        ok,
        reply: out.buf.to_vec(),
    }
}

/// Runs each command, asserting it succeeded; returns the last one's effects.
pub(super) fn run_all(srv: &Arc<Server>, cmds: &[&[&str]]) -> Ran {
    let mut last = None;
    for c in cmds {
        let r = run(srv, c);
        assert!(r.ok, "{c:?} failed");
        last = Some(r);
    }
    last.expect("at least one command")
}

fn events(srv: &Arc<Server>, argv: &[&str]) -> Vec<String> {
    run(srv, argv).events
}

/// With notifications off (the default) a write records nothing and allocates nothing,
/// and without subscribers nothing is rewritten: the hot path's cost is a flag test.
#[test]
fn nothing_recorded_when_off() {
    let srv = server("", false);
    for c in [
        &["SET", "k", "v"][..],
        &["EXPIRE", "k", "100"],
        &["RENAME", "k", "k2"],
        &["XADD", "s", "*", "f", "v"],
        &["DEL", "k2", "s"],
    ] {
        let r = run(&srv, c);
        assert!(r.ok, "{c:?}");
        assert_eq!(r.capacity, 0, "{c:?} allocated an event buffer");
        assert!(r.propagate.is_none(), "{c:?} built a rewrite nobody reads");
    }
}

/// A class that is not enabled is not recorded either.
#[test]
fn only_enabled_classes_are_recorded() {
    let srv = server("Kg", false);
    run_all(&srv, &[&["SET", "k", "v"]]);
    assert_eq!(events(&srv, &["EXPIRE", "k", "100"]), ["expire k"]);
    assert!(events(&srv, &["XADD", "s", "*", "f", "v"]).is_empty());
    assert_eq!(events(&srv, &["DEL", "s", "k"]), ["del s", "del k"]);
}

#[test]
fn generic_commands_report_their_events() {
    let srv = server("KEAn", false);
    run_all(&srv, &[&["SET", "a", "1"], &["SET", "b", "2"]]);
    // RENAME onto an existing key: Redis deletes it and adds it again (`new`).
    assert_eq!(
        events(&srv, &["RENAME", "a", "b"]),
        ["new b", "rename_from a", "rename_to b"]
    );
    assert!(events(&srv, &["RENAMENX", "b", "b"]).is_empty());
    assert_eq!(
        events(&srv, &["COPY", "b", "c", "DB", "1"]),
        ["new c@1", "copy_to c@1"]
    );
    assert_eq!(
        events(&srv, &["MOVE", "b", "2"]),
        ["new b@2", "move_from b", "move_to b@2"]
    );
    run_all(&srv, &[&["SET", "e", "1"]]);
    assert_eq!(events(&srv, &["PEXPIRE", "e", "100000"]), ["expire e"]);
    assert_eq!(events(&srv, &["PERSIST", "e"]), ["persist e"]);
    assert!(events(&srv, &["PERSIST", "e"]).is_empty());
    // A deadline in the past deletes.
    assert_eq!(events(&srv, &["EXPIREAT", "e", "1"]), ["del e"]);
    assert!(events(&srv, &["DEL", "e", "nope"]).is_empty());
}

#[test]
fn expire_propagates_an_absolute_deadline() {
    let srv = server("", true);
    run_all(&srv, &[&["SET", "k", "v"]]);
    let r = run(&srv, &["EXPIRE", "k", "100", "LT"]);
    let p = r.propagate.expect("rewritten");
    assert_eq!(p.len(), 1);
    assert_eq!(p[0][0], "PEXPIREAT");
    let at: u64 = p[0][2].parse().expect("ms");
    let now = crate::server::now_ms();
    assert!(at > now + 90_000 && at <= now + 100_000, "{at} vs {now}");
    assert_eq!(p[0][3], "LT");
    let r = run(&srv, &["EXPIREAT", "k", "4000000000"]);
    assert_eq!(
        r.propagate,
        Some(vec![vec![
            "PEXPIREAT".to_string(),
            "k".into(),
            "4000000000000".into()
        ]])
    );
    assert!(run(&srv, &["PEXPIREAT", "k", "4000000000001"])
        .propagate
        .is_none());
}

#[test]
fn stream_commands_report_through_the_context() {
    let srv = server("KEA", true);
    let r = run(&srv, &["XADD", "s", "MAXLEN", "~", "5", "1-1", "f", "v"]);
    assert_eq!(r.events, ["xadd s"]);
    let p = r.propagate.expect("exact form");
    assert_eq!(p.len(), 1);
    assert_eq!(p[0][..2], ["XADD".to_string(), "s".into()]);
    assert_eq!(
        events(&srv, &["XGROUP", "CREATE", "s", "g", "0"]),
        ["xgroup-create s"]
    );
    let r = run(
        &srv,
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"],
    );
    assert_eq!(r.events, ["xgroup-createconsumer s"]);
    let p = r.propagate.expect("XCLAIMs");
    assert_eq!(p.len(), 1);
    assert_eq!(p[0][0], "XCLAIM");
    // Nothing new to read: nothing to propagate.
    let r = run(
        &srv,
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"],
    );
    assert_eq!(r.propagate, Some(vec![]));
    assert_eq!(events(&srv, &["XDEL", "s", "1-1"]), ["xdel s"]);
}

/// The PXAT deadline of a rewritten command at `i`, checked to be `ms` from now.
fn pxat_in(p: &[String], i: usize, ms: u64) {
    assert_eq!(p[i], "PXAT", "{p:?}");
    let at: u64 = p[i + 1].parse().expect("ms");
    let now = crate::server::now_ms();
    assert!(
        at + 10_000 > now + ms && at <= now + ms,
        "{at} vs {now} + {ms}"
    );
}

#[test]
fn string_commands_report_their_events() {
    let srv = server("KEAn", false);
    assert_eq!(
        events(&srv, &["SET", "k", "v", "EX", "100"]),
        ["new k", "set k", "expire k"]
    );
    assert_eq!(events(&srv, &["SET", "k", "w", "KEEPTTL"]), ["set k"]);
    assert!(events(&srv, &["SET", "k", "v", "NX"]).is_empty());
    assert!(events(&srv, &["SETNX", "k", "v"]).is_empty());
    assert_eq!(
        events(&srv, &["MSET", "a", "1", "k", "2", "b", "3"]),
        ["new a", "set a", "set k", "new b", "set b"]
    );
    assert!(events(&srv, &["MSETNX", "a", "1", "z", "2"]).is_empty());
    assert_eq!(events(&srv, &["INCRBY", "a", "2"]), ["incrby a"]);
    assert_eq!(
        events(&srv, &["INCRBYFLOAT", "f", "1.5"]),
        ["new f", "incrbyfloat f"]
    );
    assert_eq!(events(&srv, &["APPEND", "a", "x"]), ["append a"]);
    assert!(events(&srv, &["SETRANGE", "a", "0", ""]).is_empty());
    assert_eq!(events(&srv, &["SETRANGE", "a", "0", "y"]), ["setrange a"]);
    assert_eq!(events(&srv, &["GETEX", "a", "PX", "100000"]), ["expire a"]);
    assert_eq!(events(&srv, &["GETEX", "a", "PERSIST"]), ["persist a"]);
    assert!(events(&srv, &["GETEX", "a", "PERSIST"]).is_empty());
    assert_eq!(events(&srv, &["GETSET", "a", "v"]), ["set a"]);
    assert_eq!(events(&srv, &["GETDEL", "a"]), ["del a"]);
    assert!(events(&srv, &["GETDEL", "a"]).is_empty());
}

#[test]
fn string_ttls_propagate_as_absolute_deadlines() {
    let srv = server("", true);
    let p = run(&srv, &["SET", "k", "v", "EX", "100", "GET"])
        .propagate
        .expect("rewritten");
    assert_eq!(p.len(), 1);
    assert_eq!(p[0][..3], ["SET".to_string(), "k".into(), "v".into()]);
    pxat_in(&p[0], 3, 100_000);
    // Redis 7.0 sends exactly SET key value PXAT <ms> (GET, NX, XX dropped).
    assert_eq!(p[0].len(), 5);
    let p = run(&srv, &["PSETEX", "k", "5000", "v"])
        .propagate
        .expect("rewritten");
    assert_eq!(p[0][..3], ["SET".to_string(), "k".into(), "v".into()]);
    pxat_in(&p[0], 3, 5000);
    let mut p = run(&srv, &["GETEX", "k", "EX", "7"])
        .propagate
        .expect("rewritten");
    // GETEX goes as PEXPIREAT key <ms>: checked as if it read PXAT <ms>.
    assert_eq!(p[0][..2], ["PEXPIREAT".to_string(), "k".into()]);
    p[0][1] = "PXAT".into();
    pxat_in(&p[0], 1, 7000);
    // Already absolute in ms, or no TTL at all: propagated as received.
    assert!(run(&srv, &["SET", "k", "v", "PXAT", "4000000000000"])
        .propagate
        .is_none());
    assert!(run(&srv, &["SET", "k", "v"]).propagate.is_none());
    assert!(run(&srv, &["INCR", "n"]).propagate.is_none());
}

#[test]
fn bitmap_and_hll_commands_report_their_events() {
    let srv = server("KEAn", false);
    assert_eq!(
        events(&srv, &["SETBIT", "b", "3", "1"]),
        ["new b", "setbit b"]
    );
    // The bit already set, the string not grown: no change, no event (Redis 7.0).
    assert!(events(&srv, &["SETBIT", "b", "3", "1"]).is_empty());
    assert_eq!(
        events(&srv, &["BITOP", "NOT", "d", "b"]),
        ["new d", "set d"]
    );
    // An empty result deletes the destination, or does nothing.
    assert_eq!(events(&srv, &["BITOP", "AND", "d", "none"]), ["del d"]);
    assert!(events(&srv, &["BITOP", "AND", "d", "none"]).is_empty());
    assert_eq!(
        events(
            &srv,
            &["BITFIELD", "bf", "SET", "u8", "0", "5", "GET", "u8", "0"]
        ),
        ["new bf", "setbit bf"]
    );
    // Every write refused by OVERFLOW FAIL: no change, so no setbit (Redis counts changes).
    assert!(events(
        &srv,
        &["BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "300"]
    )
    .is_empty());
    assert!(events(&srv, &["BITFIELD", "bf", "GET", "u8", "0"]).is_empty());
    assert_eq!(events(&srv, &["PFADD", "h", "a"]), ["new h", "pfadd h"]);
    assert!(events(&srv, &["PFADD", "h", "a"]).is_empty());
    assert_eq!(
        events(&srv, &["PFMERGE", "h2", "h"]),
        ["new h2", "pfadd h2"]
    );
    assert_eq!(events(&srv, &["PFMERGE", "h2", "h"]), ["pfadd h2"]);
}

#[test]
fn hash_commands_report_their_events() {
    let srv = server("KEAn", false);
    assert_eq!(events(&srv, &["HSET", "h", "f", "v"]), ["new h", "hset h"]);
    assert_eq!(events(&srv, &["HSET", "h", "f", "v"]), ["hset h"]);
    assert!(events(&srv, &["HSETNX", "h", "f", "v"]).is_empty());
    assert_eq!(events(&srv, &["HSETNX", "h", "g", "v"]), ["hset h"]);
    assert_eq!(events(&srv, &["HINCRBY", "h", "n", "1"]), ["hincrby h"]);
    assert_eq!(
        events(&srv, &["HINCRBYFLOAT", "h", "n", "1.5"]),
        ["hincrbyfloat h"]
    );
    assert!(events(&srv, &["HDEL", "h", "nope"]).is_empty());
    assert_eq!(
        events(&srv, &["HDEL", "h", "f", "g", "n"]),
        ["hdel h", "del h"]
    );
}

#[test]
fn list_commands_report_their_events() {
    let srv = server("KEAn", false);
    assert_eq!(
        events(&srv, &["RPUSH", "l", "a", "b", "c"]),
        ["new l", "rpush l"]
    );
    assert!(events(&srv, &["LPUSHX", "nol", "a"]).is_empty());
    assert_eq!(events(&srv, &["LPUSHX", "l", "z"]), ["lpush l"]);
    assert_eq!(events(&srv, &["LSET", "l", "0", "y"]), ["lset l"]);
    assert!(events(&srv, &["LINSERT", "l", "BEFORE", "nope", "x"]).is_empty());
    assert_eq!(
        events(&srv, &["LINSERT", "l", "BEFORE", "y", "x"]),
        ["linsert l"]
    );
    assert_eq!(events(&srv, &["LREM", "l", "0", "x"]), ["lrem l"]);
    assert!(events(&srv, &["LPOP", "l", "0"]).is_empty());
    assert_eq!(
        events(&srv, &["LMOVE", "l", "m", "LEFT", "RIGHT"]),
        ["new m", "rpush m", "lpop l"]
    );
    assert_eq!(events(&srv, &["LTRIM", "l", "0", "-1"]), ["ltrim l"]);
    assert_eq!(
        events(&srv, &["RPOPLPUSH", "m", "l"]),
        ["lpush l", "rpop m", "del m"]
    );
    assert_eq!(
        events(&srv, &["LMPOP", "2", "nol", "l", "RIGHT", "COUNT", "9"]),
        ["rpop l", "del l"]
    );
    run_all(&srv, &[&["RPUSH", "l", "a"]]);
    assert_eq!(
        events(&srv, &["BLPOP", "nol", "l", "0"]),
        ["lpop l", "del l"]
    );
}

#[test]
fn blocking_list_pops_propagate_their_plain_forms() {
    let srv = server("", true);
    let p = |srv: &Arc<Server>, argv: &[&str]| {
        run(srv, argv)
            .propagate
            .expect("rewritten")
            .concat()
            .join(" ")
    };
    run_all(&srv, &[&["RPUSH", "l", "a", "b", "c", "d", "e"]]);
    // As Redis 7.0: the plain pop of the key served, with the count popped for *MPOP.
    assert_eq!(p(&srv, &["BLPOP", "x", "l", "0"]), "LPOP l");
    assert_eq!(p(&srv, &["BRPOP", "l", "1.5"]), "RPOP l");
    assert_eq!(
        p(&srv, &["BLMPOP", "0", "1", "l", "LEFT", "COUNT", "1"]),
        "LPOP l 1"
    );
    assert_eq!(
        p(&srv, &["BLMOVE", "l", "m", "left", "right", "0"]),
        "LMOVE l m LEFT RIGHT"
    );
    assert_eq!(p(&srv, &["BRPOPLPUSH", "l", "m", "0"]), "RPOPLPUSH l m");
    assert!(run(&srv, &["LPOP", "l"]).propagate.is_none());
}

#[test]
fn set_commands_report_their_events() {
    let srv = server("KEAn", false);
    assert_eq!(events(&srv, &["SADD", "s", "a", "b"]), ["new s", "sadd s"]);
    assert!(events(&srv, &["SADD", "s", "a"]).is_empty());
    assert!(events(&srv, &["SREM", "s", "nope"]).is_empty());
    assert_eq!(events(&srv, &["SREM", "s", "a"]), ["srem s"]);
    assert_eq!(
        events(&srv, &["SMOVE", "s", "t", "b"]),
        ["srem s", "del s", "new t", "sadd t"]
    );
    run_all(&srv, &[&["SADD", "u", "b", "c"]]);
    // The destination already has the member: no sadd.
    assert_eq!(events(&srv, &["SMOVE", "u", "t", "b"]), ["srem u"]);
    assert_eq!(
        events(&srv, &["SUNIONSTORE", "d", "t", "u"]),
        ["new d", "sunionstore d"]
    );
    assert_eq!(events(&srv, &["SDIFFSTORE", "d", "t", "t"]), ["del d"]);
    assert_eq!(events(&srv, &["SPOP", "u"]), ["spop u", "del u"]);
    assert!(events(&srv, &["SPOP", "u"]).is_empty());
}

#[test]
fn spop_propagates_the_members_it_removed() {
    let srv = server("", true);
    run_all(&srv, &[&["SADD", "s", "a", "b", "c"]]);
    let p = run(&srv, &["SPOP", "s", "5"]).propagate.expect("rewritten");
    assert_eq!(p.len(), 1);
    let mut members = p[0][2..].to_vec();
    members.sort();
    assert_eq!(p[0][..2], ["SREM".to_string(), "s".into()]);
    assert_eq!(members, ["a", "b", "c"]);
}

#[test]
fn zset_and_geo_commands_report_their_events() {
    let srv = server("KEAn", false);
    assert_eq!(
        events(&srv, &["ZADD", "z", "1", "a", "2", "b"]),
        ["new z", "zadd z"]
    );
    assert!(events(&srv, &["ZADD", "z", "1", "a"]).is_empty());
    assert_eq!(events(&srv, &["ZADD", "z", "CH", "3", "a"]), ["zadd z"]);
    assert!(events(&srv, &["ZADD", "z", "XX", "1", "new"]).is_empty());
    assert_eq!(events(&srv, &["ZINCRBY", "z", "1", "a"]), ["zincr z"]);
    assert!(events(&srv, &["ZADD", "z", "NX", "INCR", "1", "b"]).is_empty());
    assert_eq!(events(&srv, &["ZREM", "z", "a"]), ["zrem z"]);
    assert!(events(&srv, &["ZREMRANGEBYSCORE", "z", "100", "200"]).is_empty());
    assert_eq!(
        events(&srv, &["ZRANGESTORE", "r", "z", "0", "-1"]),
        ["new r", "zrangestore r"]
    );
    assert_eq!(
        events(&srv, &["ZREMRANGEBYRANK", "z", "0", "0"]),
        ["zremrangebyrank z", "del z"]
    );
    assert_eq!(events(&srv, &["ZUNIONSTORE", "r", "1", "nope"]), ["del r"]);
    run_all(&srv, &[&["ZADD", "z", "1", "a", "2", "b"]]);
    assert_eq!(events(&srv, &["ZMPOP", "1", "z", "MAX"]), ["zpopmax z"]);
    assert_eq!(
        events(&srv, &["BZPOPMIN", "nope", "z", "0"]),
        ["zpopmin z", "del z"]
    );
    assert_eq!(
        events(&srv, &["GEOADD", "g", "13.361389", "38.115556", "Palermo"]),
        ["new g", "zadd g"]
    );
    assert!(events(&srv, &["GEOADD", "g", "13.361389", "38.115556", "Palermo"]).is_empty());
    assert_eq!(
        events(
            &srv,
            &["GEORADIUS", "g", "13", "38", "200", "km", "STORE", "gr"]
        ),
        ["new gr", "georadiusstore gr"]
    );
    assert_eq!(
        events(
            &srv,
            &[
                "GEOSEARCHSTORE",
                "gr",
                "g",
                "FROMLONLAT",
                "0",
                "0",
                "BYRADIUS",
                "1",
                "km"
            ]
        ),
        ["del gr"]
    );
}

#[test]
fn blocking_zset_pops_propagate_their_plain_forms() {
    let srv = server("", true);
    let p = |srv: &Arc<Server>, argv: &[&str]| {
        run(srv, argv)
            .propagate
            .expect("rewritten")
            .concat()
            .join(" ")
    };
    run_all(&srv, &[&["ZADD", "z", "1", "a", "2", "b", "3", "c"]]);
    // As Redis 7.0: the plain pop of the key served, with the count popped for BZMPOP.
    assert_eq!(p(&srv, &["BZPOPMIN", "x", "z", "0"]), "ZPOPMIN z");
    assert_eq!(p(&srv, &["BZPOPMAX", "z", "0"]), "ZPOPMAX z");
    assert_eq!(p(&srv, &["BZMPOP", "0", "1", "z", "MIN"]), "ZPOPMIN z 1");
}

#[test]
fn restore_and_its_ttl() {
    let srv = server("KEAn", true);
    run_all(&srv, &[&["SET", "k", "v"]]);
    let mut out = Out::new(false);
    let mut cl = ClientState::detached(1, 0);
    let args: Vec<&[u8]> = vec![b"DUMP", b"k"];
    {
        let mut ctx = Ctx {
            srv: &srv,
            cl: &mut cl,
            out: &mut out,
            ks: KeyView::new(&srv, srv.ks.lock_all(), 0, crate::server::now_ms()),
            block: None,
            in_exec: false,
            serving_blocked: false,
            noop: false,
            untouched: false,
            changes: 1,
        };
        let dump = table().resolve(&args).expect("dump");
        assert!((dump.handler)(&mut ctx, &args).is_ok());
    }
    // `$<len>\r\n<payload>\r\n`
    let buf = out.buf.to_vec();
    let start = buf.iter().position(|&b| b == b'\n').expect("bulk header") + 1;
    let payload = buf[start..buf.len() - 2].to_vec();
    let args: Vec<&[u8]> = vec![b"RESTORE", b"r", b"100000", &payload];
    let mut out = Out::new(false);
    let mut ctx = Ctx {
        srv: &srv,
        cl: &mut cl,
        out: &mut out,
        ks: KeyView::new(&srv, srv.ks.lock_all(), 0, crate::server::now_ms()),
        block: None,
        in_exec: false,
        serving_blocked: false,
        noop: false,
        untouched: false,
        changes: 1,
    };
    let restore = table().resolve(&args).expect("restore");
    assert!((restore.handler)(&mut ctx, &args).is_ok());
    let fx = std::mem::take(&mut ctx.ks.fx);
    let events: Vec<&str> = fx.events.iter().map(|e| e.event).collect();
    assert_eq!(events, ["new", "restore"]);
    let p = fx.propagate.expect("ABSTTL form");
    assert_eq!(p[0].len(), 5);
    assert_eq!(&p[0][4][..], b"ABSTTL");
    let at: u64 = std::str::from_utf8(&p[0][2])
        .expect("utf8")
        .parse()
        .expect("ms");
    assert!(at > crate::server::now_ms() + 90_000);
}

/// Records what replicas and the AOF would get.
#[derive(Default)]
struct Recorder(parking_lot::Mutex<Vec<String>>);

impl WriteSubscriber for Recorder {
    fn feed(&self, w: &Write<'_>) {
        let line: Vec<String> = w
            .args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        self.0.lock().push(line.join(" "));
    }
}

/// Inside EXEC (or a script) the writes are kept with the transaction's context and fed as
/// one MULTI ... EXEC block at its end, rewrites included (no thread-local in between).
#[test]
fn writes_inside_exec_travel_as_one_block() {
    let srv = server("", false);
    let rec = Arc::new(Recorder::default());
    srv.persist.prop.subscribe(rec.clone());
    let mut cl = ClientState::detached(1, 0);
    let mut out = Out::new(false);
    let mut ctx = Ctx {
        srv: &srv,
        cl: &mut cl,
        out: &mut out,
        ks: KeyView::new(&srv, srv.ks.lock_all(), 0, 1_000_000),
        block: None,
        in_exec: true,
        serving_blocked: false,
        noop: false,
        untouched: false,
        changes: 1,
    };
    for argv in [
        &["SET", "k", "v", "PX", "5000"][..],
        &["DEL", "missing"],
        &["INCR", "n"],
    ] {
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        let cmd = table().resolve(&args).expect("known command");
        super::run_locked(&mut ctx, cmd, &args);
    }
    assert!(rec.0.lock().is_empty(), "nothing is fed before the end");
    super::propagation::end_exec(&mut ctx);
    assert_eq!(
        *rec.0.lock(),
        ["MULTI", "SET k v PXAT 1005000", "INCR n", "EXEC"]
    );
}

/// Every refusal in `execute` goes through one path: the reply, the failed-transaction
/// flag and the rejected-calls counter are as before, per kind.
#[test]
fn refusals_keep_their_replies_and_side_effects() {
    let srv = server("", false);
    let mut cl = ClientState::detached(7, 0);
    let mut exec = |argv: &[&str]| {
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        let mut out = Out::new(false);
        super::execute(&srv, &mut cl, &mut out, &args);
        String::from_utf8_lossy(&out.buf).into_owned()
    };
    let get = table().get(b"get").expect("get");
    let save = table().get(b"save").expect("save");
    let (get_rejected, save_rejected) = (
        get.stats
            .live()
            .rejected
            .load(std::sync::atomic::Ordering::Relaxed),
        save.stats
            .live()
            .rejected
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    assert_eq!(exec(&["MULTI"]), "+OK\r\n");
    assert_eq!(
        exec(&["GET"]),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(
        exec(&["SAVE"]),
        "-ERR Command not allowed inside a transaction\r\n"
    );
    assert_eq!(exec(&["SET", "k", "v"]), "+QUEUED\r\n");
    assert_eq!(
        exec(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert!(exec(&["NOSUCH", "a"])
        .starts_with("-ERR unknown command 'NOSUCH', with args beginning with: 'a' "));
    // Arity counts as a rejected call, and so does a command refused inside MULTI (Redis
    // 7.0's rejectCommandFormat).
    let ord = std::sync::atomic::Ordering::Relaxed;
    assert_eq!(get.stats.live().rejected.load(ord), get_rejected + 1);
    assert_eq!(save.stats.live().rejected.load(ord), save_rejected + 1);
    assert_eq!(exec(&["GET", "k"]), "$-1\r\n");
}

/// SORT ... STORE reports through the context like every write: `new` (the destination's
/// creation) comes before `sortstore`, as in Redis; an empty result deletes (`del`); a
/// SORT without STORE only reads (nothing propagated, no WATCH touched).
#[test]
fn sort_store_reports_through_the_context() {
    let srv = server("KEAn", false);
    run_all(&srv, &[&["RPUSH", "l", "3", "1", "2"]]);
    assert_eq!(
        events(&srv, &["SORT", "l", "STORE", "d"]),
        ["new d", "sortstore d"]
    );
    assert_eq!(events(&srv, &["SORT", "l", "STORE", "d"]), ["sortstore d"]);
    assert_eq!(events(&srv, &["SORT", "nope", "STORE", "d"]), ["del d"]);
    let args: Vec<&[u8]> = vec![b"SORT", b"l"];
    let cmd = table().resolve(&args).expect("sort");
    let mut cl = ClientState::detached(1, 0);
    let mut out = Out::new(false);
    let mut ctx = Ctx {
        srv: &srv,
        cl: &mut cl,
        out: &mut out,
        ks: KeyView::new(&srv, srv.ks.lock_all(), 0, crate::server::now_ms()),
        block: None,
        in_exec: false,
        serving_blocked: false,
        noop: false,
        untouched: false,
        changes: 1,
    };
    assert!((cmd.handler)(&mut ctx, &args).is_ok());
    assert!(ctx.noop && ctx.untouched, "SORT without STORE is a read");
}

/// INCRBYFLOAT and HINCRBYFLOAT propagate their result, as Redis 7.0 does (SET ... KEEPTTL,
/// HSET), so a replica or an AOF replay never redoes the float arithmetic.
#[test]
fn float_increments_propagate_their_result() {
    let srv = server("", true);
    let p = |srv: &Arc<Server>, argv: &[&str]| {
        run(srv, argv)
            .propagate
            .map(|l| l.concat().join(" "))
            .unwrap_or_default()
    };
    run_all(&srv, &[&["SET", "f", "0.1", "EX", "100"]]);
    assert_eq!(p(&srv, &["INCRBYFLOAT", "f", "0.2"]), "SET f 0.3 KEEPTTL");
    assert_eq!(p(&srv, &["HINCRBYFLOAT", "h", "x", "1.5"]), "HSET h x 1.5");
    assert_eq!(
        p(&srv, &["HINCRBYFLOAT", "h", "x", "1e2"]),
        "HSET h x 101.5"
    );
}

/// A write that deletes its key because the deadline already passed reaches replicas as
/// DEL, as Redis 7.0 rewrites it: a replica never deletes on its own, so a past PEXPIREAT
/// (or a past RESTORE ... ABSTTL) would leave it an expired key the master never DELs.
/// GETEX goes as PEXPIREAT / PERSIST, as in Redis.
#[test]
fn past_deadlines_propagate_as_del() {
    let srv = server("", true);
    let p = |srv: &Arc<Server>, argv: &[&str]| {
        run(srv, argv)
            .propagate
            .map(|l| l.concat().join(" "))
            .unwrap_or_default()
    };
    run_all(&srv, &[&["SET", "k", "v"]]);
    assert_eq!(p(&srv, &["EXPIREAT", "k", "1"]), "DEL k");
    run_all(&srv, &[&["SET", "k", "v"]]);
    assert_eq!(p(&srv, &["PEXPIRE", "k", "-5"]), "DEL k");
    run_all(&srv, &[&["SET", "k", "v"]]);
    assert_eq!(p(&srv, &["GETEX", "k", "PXAT", "1"]), "DEL k");
    run_all(&srv, &[&["SET", "k", "v", "EX", "100"]]);
    assert_eq!(p(&srv, &["GETEX", "k", "PERSIST"]), "PERSIST k");
    let r = p(&srv, &["GETEX", "k", "EX", "7"]);
    assert!(r.starts_with("PEXPIREAT k "), "{r}");
}

/// Keys of a slot being imported (hidden) are held but left out of DBSIZE, KEYS, SCAN,
/// RANDOMKEY and INFO keyspace, as Valkey hides an atomic migration's importing slots; they
/// show again once the slot is shown.
#[test]
fn hidden_slots_are_left_out_of_keyspace_reads() {
    let srv = server("", false);
    let keys = ["a", "b", "c", "d"];
    for k in keys {
        assert!(run(&srv, &["SET", k, "v"]).ok);
    }
    let text = |argv: &[&str]| String::from_utf8_lossy(&run(&srv, argv).reply).into_owned();
    let hidden = crate::slot::key_hash_slot(b"c");
    assert!(keys
        .iter()
        .filter(|k| **k != "c")
        .all(|k| crate::slot::key_hash_slot(k.as_bytes()) != hidden));
    srv.ks.hidden.hide(hidden);
    assert_eq!(text(&["DBSIZE"]), ":3\r\n");
    let all = text(&["KEYS", "*"]);
    assert!(
        all.starts_with("*3\r\n") && !all.contains("\r\nc\r\n"),
        "{all}"
    );
    let scan = text(&["SCAN", "0", "COUNT", "100000"]);
    assert!(
        scan.contains("*3\r\n") && !scan.contains("\r\nc\r\n"),
        "{scan}"
    );
    for _ in 0..50 {
        assert_ne!(text(&["RANDOMKEY"]), "$1\r\nc\r\n");
    }
    assert!(text(&["INFO", "keyspace"]).contains("db0:keys=3,"));
    // Still there for the slot's own commands.
    assert_eq!(text(&["GET", "c"]), "$1\r\nv\r\n");
    srv.ks.hidden.show(hidden);
    assert_eq!(text(&["DBSIZE"]), ":4\r\n");
}
