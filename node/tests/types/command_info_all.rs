//! COMMAND INFO of EVERY command and subcommand both tessera-node and redis-server 7.0
//! implement is identical (RESP3; sets compared as sets, subcommand lists as name sets),
//! except for the differences listed in EXCEPTIONS with their reason. Also: COMMAND COUNT,
//! COMMAND and COMMAND LIST agree with each other, and COMMAND GETKEYSANDFLAGS gives redis's
//! keys and key flags for a sample of calls.

use std::collections::BTreeSet;
use tessera_testkit::diff::*;

/// (command, field allowed to differ, why).
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "cluster",
        "subcommands",
        "one more: MYSHARDID (Redis 7.2's)",
    ),
    ("cluster", "flags", "the node's CLUSTER answers while stale"),
    ("memory", "subcommands", "MALLOC-STATS: no jemalloc"),
    (
        "config|help",
        "flags",
        "the node's CONFIG HELP keeps its parent's admin noscript",
    ),
    (
        "memory|doctor",
        "flags",
        "the node answers while loading / stale",
    ),
    (
        "memory|stats",
        "flags",
        "the node answers while loading / stale",
    ),
    (
        "xread",
        "flags",
        "blocking: not (yet) in the stream commands' table",
    ),
    ("xreadgroup", "flags", "blocking, as XREAD"),
];

const FIELDS: [&str; 9] = [
    "name",
    "arity",
    "flags",
    "first key",
    "last key",
    "step",
    "ACL categories",
    "tips",
    "key specs",
];

fn names(r: Reply) -> Vec<String> {
    let (Reply::Array(v) | Reply::Set(v)) = r else {
        panic!("{r:?}")
    };
    v.into_iter()
        .map(|x| match x {
            Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
            Reply::Simple(s) => s,
            other => panic!("{other:?}"),
        })
        .collect()
}

fn info(c: &mut Conn, name: &str) -> Vec<Reply> {
    match c.cmd(&["COMMAND", "INFO", name]) {
        Reply::Array(mut v) if v.len() == 1 => match v.swap_remove(0) {
            Reply::Array(e) if e.len() == 10 => e,
            other => panic!("COMMAND INFO {name}: {other:?}"),
        },
        other => panic!("COMMAND INFO {name}: {other:?}"),
    }
}

fn sub_names(r: &Reply) -> BTreeSet<String> {
    let (Reply::Array(v) | Reply::Set(v)) = r else {
        panic!("{r:?}")
    };
    v.iter()
        .map(|e| match e {
            Reply::Array(f) => match &f[0] {
                Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect()
}

fn excused(name: &str, field: &str) -> bool {
    EXCEPTIONS.iter().any(|(n, f, _)| *n == name && *f == field)
}

#[test]
fn command_info_of_every_common_command_matches_redis() {
    let t = tessera();
    let r = redis();
    let (mut a, mut b) = (
        Conn::with_proto(t.port, true),
        Conn::with_proto(r.port, true),
    );
    let ours = names(a.cmd(&["COMMAND", "LIST"]));
    let theirs: BTreeSet<String> = names(b.cmd(&["COMMAND", "LIST"])).into_iter().collect();
    let common: Vec<&String> = ours.iter().filter(|n| theirs.contains(*n)).collect();
    let total = common.len();
    assert!(total > 200, "only {total} common commands");
    let (mut identical, mut failures, mut excepted) = (0, Vec::new(), BTreeSet::new());
    for name in common {
        let (x, y) = (info(&mut a, name), info(&mut b, name));
        let mut same = true;
        for (i, field) in FIELDS.iter().enumerate() {
            if x[i].normalized(false) != y[i].normalized(false) {
                same = false;
                if excused(name, field) {
                    excepted.insert((name.clone(), *field));
                } else {
                    failures.push(format!("{name} {field}: ours {:?} redis {:?}", x[i], y[i]));
                }
            }
        }
        let empty = |r: &Reply| matches!(r, Reply::Set(v) if v.is_empty());
        if !excused(name, "subcommands") {
            assert_eq!(
                empty(&x[9]),
                empty(&y[9]),
                "{name}: no subcommands: an empty set"
            );
        }
        if sub_names(&x[9]) != sub_names(&y[9]) {
            same = false;
            if excused(name, "subcommands") {
                excepted.insert((name.clone(), "subcommands"));
            } else {
                failures.push(format!(
                    "{name} subcommands: ours {:?} redis {:?}",
                    sub_names(&x[9]),
                    sub_names(&y[9])
                ));
            }
        }
        identical += same as usize;
    }
    eprintln!(
        "{identical} of {total} commands/subcommands have COMMAND INFO identical to redis; \
         {} listed differences seen",
        excepted.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn command_count_list_and_info_agree() {
    let t = tessera();
    let mut a = Conn::with_proto(t.port, true);
    let count = a.cmd(&["COMMAND", "COUNT"]).as_int().expect("COUNT");
    let Reply::Array(all) = a.cmd(&["COMMAND"]) else {
        panic!("COMMAND")
    };
    assert_eq!(all.len() as i64, count);
    let list = names(a.cmd(&["COMMAND", "LIST"]));
    let top: BTreeSet<&str> = list
        .iter()
        .filter(|n| !n.contains('|'))
        .map(String::as_str)
        .collect();
    assert_eq!(top.len() as i64, count, "COMMAND LIST top-level names");
    let mut subs_listed = 0;
    for e in &all {
        let Reply::Array(f) = e else { panic!("{e:?}") };
        let Reply::Bulk(n) = &f[0] else {
            panic!("{f:?}")
        };
        let n = String::from_utf8_lossy(n).into_owned();
        assert!(
            top.contains(n.as_str()),
            "{n} in COMMAND but not in COMMAND LIST"
        );
        for s in sub_names(&f[9]) {
            assert!(list.contains(&s), "{s} in COMMAND but not in COMMAND LIST");
            subs_listed += 1;
        }
    }
    assert_eq!(
        subs_listed,
        list.len() - top.len(),
        "subcommands in COMMAND LIST"
    );
    for n in &list {
        assert_eq!(
            info(&mut a, n)[0],
            Reply::Bulk(n.clone().into_bytes()),
            "{n}"
        );
    }
}

#[test]
fn getkeysandflags_matches_redis() {
    let t = tessera();
    let r = redis();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    for call in [
        "APPEND k v",
        "DEL a b",
        "EXISTS a b",
        "INCR a",
        "MSET a 1 b 2",
        "SET k v",
        "SET k v GET",
        "SET k v EX 10 get",
        "GETDEL k",
        "GETEX k",
        "HDEL h f",
        "HSET h f v",
        "SADD s m",
        "SMOVE a b m",
        "SINTERSTORE d a b",
        "ZUNIONSTORE d 2 a b",
        "LMOVE a b LEFT RIGHT",
        "RENAME a b",
        "COPY a b",
        "SORT l",
        "SORT l BY w_* STORE d GET #",
        "SORT_RO l",
        "EVAL x 2 a b",
        "BITOP AND d a b",
        "BITFIELD k GET u8 0",
        "BITFIELD k GET u8 0 OVERFLOW SAT SET u8 0 1",
        "BITFIELD k INCRBY u8 0 1",
        "BITFIELD_RO k GET u8 0",
        "GEOSEARCHSTORE d s FROMLONLAT 0 0 BYRADIUS 1 km",
        "GEORADIUS s 0 0 1 km STORE d",
        "RPOPLPUSH a b",
        "PFCOUNT a b",
        "PFMERGE d a b",
        "OBJECT ENCODING k",
        "TOUCH a b",
        "UNLINK a",
        "EXPIRE a 1",
        "LCS a b",
        "BLPOP a b 0",
        "ZRANGESTORE d s 0 1",
        "WATCH a b",
        "DUMP k",
        "MIGRATE h 1 k 0 5",
        "GETSET k v",
        "LMPOP 2 a b LEFT",
        "SINTERCARD 2 a b",
        "MGET a b",
    ] {
        let mut args = vec!["COMMAND", "GETKEYSANDFLAGS"];
        args.extend(call.split_whitespace());
        assert_eq!(a.cmd(&args), b.cmd(&args), "GETKEYSANDFLAGS {call}");
        args[1] = "GETKEYS";
        assert_eq!(a.cmd(&args), b.cmd(&args), "GETKEYS {call}");
    }
}

/// The calls that find no key: EVAL/FCALL with numkeys 0 answer an empty array (Redis's
/// `no_mandatory_keys`), keyless or channel-only commands say so before arity is checked,
/// other misuse is "Invalid arguments" (unit/introspection-2 "COMMAND GETKEYS EVAL without
/// keys").
#[test]
fn getkeys_without_keys_matches_redis() {
    let t = tessera();
    let r = redis();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    for call in [
        "EVAL x 0",
        "EVAL_RO x 0",
        "EVALSHA x 0",
        "FCALL f 0",
        "FCALL_RO f 0",
        "PING",
        "PING x",
        "SSUBSCRIBE ch",
        "SSUBSCRIBE",
        "SPUBLISH c m",
        "ZUNIONSTORE dst 0",
        "XREAD STREAMS",
        "SORT abc",
        "LMPOP 1 a LEFT",
        "NOSUCHCOMMAND a",
        "GET",
    ] {
        let mut args = vec!["COMMAND", "GETKEYS"];
        args.extend(call.split_whitespace());
        assert_eq!(a.cmd(&args), b.cmd(&args), "GETKEYS {call}");
        args[1] = "GETKEYSANDFLAGS";
        assert_eq!(a.cmd(&args), b.cmd(&args), "GETKEYSANDFLAGS {call}");
    }
}

#[test]
fn list_filterby_aclcat_matches_redis() {
    let t = tessera();
    let r = redis();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    let set = |c: &mut Conn, args: &[&str]| -> BTreeSet<String> {
        names(c.cmd(args)).into_iter().collect()
    };
    let ours = set(&mut a, &["COMMAND", "LIST"]);
    let theirs = set(&mut b, &["COMMAND", "LIST"]);
    for cat in "keyspace read write string bitmap hash list set sortedset geo hyperloglog stream \
                pubsub admin fast slow blocking dangerous connection transaction scripting"
        .split_whitespace()
    {
        let args = ["COMMAND", "LIST", "FILTERBY", "ACLCAT", cat];
        let x: BTreeSet<String> = set(&mut a, &args).intersection(&theirs).cloned().collect();
        let y: BTreeSet<String> = set(&mut b, &args).intersection(&ours).cloned().collect();
        assert_eq!(x, y, "COMMAND LIST FILTERBY ACLCAT {cat}");
    }
}
