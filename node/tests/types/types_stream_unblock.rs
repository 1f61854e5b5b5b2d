//! A client blocked in XREADGROUP whose stream key goes away (DEL, overwrite, RENAME,
//! expiry, FLUSHALL) or whose group is destroyed gets redis-server 7.0.15's error at once,
//! decided after the command (a MULTI that re-creates the stream, or the group, serves
//! it instead); XREAD waiters stay blocked. Each scenario runs on tessera-node and, when
//! installed, on redis-server, and the blocked client's replies must be equal.

use std::time::{Duration, Instant};
use tessera_testkit::diff::*;

const GROUP_READ: &[&str] = &[
    "XREADGROUP",
    "GROUP",
    "g",
    "c",
    "BLOCK",
    "0",
    "STREAMS",
    "s",
    ">",
];
const PLAIN_READ: &[&str] = &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"];

/// One scenario: the reader's command, then the control client's commands (a command
/// starting with "!" is "poll until EXISTS s is 0", to let a 1 ms TTL pass).
struct Case {
    name: &'static str,
    reader: &'static [&'static str],
    ctl: &'static [&'static [&'static str]],
}

const UNBLOCKED: &str = "UNBLOCKED the stream key no longer exists";
const NOGROUP: &str = "NOGROUP the consumer group this client was blocked on no longer exists";

fn cases() -> Vec<(Case, Reply)> {
    let err = |s: &str| Reply::Error(s.into());
    let entry = |id: &str, f: &str, v: &str| {
        let b = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
        Reply::Array(vec![Reply::Array(vec![
            b("s"),
            Reply::Array(vec![Reply::Array(vec![
                b(id),
                Reply::Array(vec![b(f), b(v)]),
            ])]),
        ])])
    };
    let c = |name, reader, ctl| Case { name, reader, ctl };
    vec![
        (c("del", GROUP_READ, &[&["DEL", "s"]]), err(UNBLOCKED)),
        (c("set", GROUP_READ, &[&["SET", "s", "x"]]), err(UNBLOCKED)),
        (c("flushall", GROUP_READ, &[&["FLUSHALL"]]), err(UNBLOCKED)),
        (
            c("flushall async", GROUP_READ, &[&["FLUSHALL", "ASYNC"]]),
            err(UNBLOCKED),
        ),
        (
            c("rename away", GROUP_READ, &[&["RENAME", "s", "t"]]),
            err(UNBLOCKED),
        ),
        (
            c(
                "renamed over by a stream without the group",
                GROUP_READ,
                &[&["XADD", "t", "1-1", "a", "b"], &["RENAME", "t", "s"]],
            ),
            err(NOGROUP),
        ),
        (
            c(
                "group destroyed",
                GROUP_READ,
                &[&["XGROUP", "DESTROY", "s", "g"]],
            ),
            err(NOGROUP),
        ),
        (
            c("expired", GROUP_READ, &[&["PEXPIRE", "s", "1"], &["!"]]),
            err(UNBLOCKED),
        ),
        (
            c(
                "multi re-creates the stream",
                GROUP_READ,
                &[
                    &["MULTI"],
                    &["DEL", "s"],
                    &["XADD", "s", "2-1", "a", "b"],
                    &["EXEC"],
                ],
            ),
            err(NOGROUP),
        ),
        (
            c(
                "multi re-creates the stream and group",
                GROUP_READ,
                &[
                    &["MULTI"],
                    &["DEL", "s"],
                    &["XADD", "s", "2-1", "a", "b"],
                    &["XGROUP", "CREATE", "s", "g", "0"],
                    &["EXEC"],
                ],
            ),
            entry("2-1", "a", "b"),
        ),
        (
            c(
                "multi re-creates the group",
                GROUP_READ,
                &[
                    &["MULTI"],
                    &["XGROUP", "DESTROY", "s", "g"],
                    &["XGROUP", "CREATE", "s", "g", "0"],
                    &["EXEC"],
                ],
            ),
            entry("1-1", "f", "v"),
        ),
        (
            c(
                "multi deletes, sets and deletes",
                GROUP_READ,
                &[
                    &["MULTI"],
                    &["DEL", "s"],
                    &["SET", "s", "x"],
                    &["DEL", "s"],
                    &["EXEC"],
                ],
            ),
            err(UNBLOCKED),
        ),
        (
            c(
                "another db flushed",
                GROUP_READ,
                &[
                    &["SELECT", "1"],
                    &["XADD", "s", "1-1", "a", "b"],
                    &["FLUSHDB"],
                    &["SELECT", "0"],
                    &["XADD", "s", "3-1", "n", "1"],
                ],
            ),
            entry("3-1", "n", "1"),
        ),
        (
            c(
                "swapdb with an empty db",
                GROUP_READ,
                &[&["SWAPDB", "0", "1"]],
            ),
            err(UNBLOCKED),
        ),
        (
            c(
                "swapdb brings a stream without the group",
                GROUP_READ,
                &[
                    &["SELECT", "1"],
                    &["XADD", "s", "5-1", "x", "y"],
                    &["SWAPDB", "0", "1"],
                ],
            ),
            err(NOGROUP),
        ),
        (
            c(
                "swapdb brings a stream with the group and an entry",
                GROUP_READ,
                &[
                    &["SELECT", "1"],
                    &["XADD", "s", "5-1", "x", "y"],
                    &["XGROUP", "CREATE", "s", "g", "0"],
                    &["SWAPDB", "0", "1"],
                ],
            ),
            entry("5-1", "x", "y"),
        ),
        (
            c(
                "xread keeps waiting",
                PLAIN_READ,
                &[&["DEL", "s"], &["XADD", "s", "4-1", "n", "2"]],
            ),
            entry("4-1", "n", "2"),
        ),
    ]
}

/// Runs `case` on the server at `port`; returns the blocked reader's reply.
fn run(port: u16, case: &Case) -> Reply {
    let mut ctl = Conn::connect(port);
    ctl.cmd(&["FLUSHALL"]);
    ctl.cmd(&["XADD", "s", "1-1", "f", "v"]);
    ctl.cmd(&["XGROUP", "CREATE", "s", "g", "$"]);
    let mut reader = Conn::connect(port);
    reader.send(case.reader);
    wait_blocked(&mut ctl, 1);
    for cmd in case.ctl {
        if cmd[0] == "!" {
            let deadline = Instant::now() + Duration::from_secs(30);
            while ctl.cmd(&["EXISTS", "s"]) != Reply::Int(0) {
                assert!(Instant::now() < deadline, "{}: s never expired", case.name);
                std::thread::sleep(Duration::from_millis(5));
            }
            continue;
        }
        let r = ctl.cmd(cmd);
        assert!(
            !matches!(r, Reply::Error(_)),
            "{}: {cmd:?} -> {r:?}",
            case.name
        );
    }
    let got = reader.read();
    wait_blocked(&mut ctl, 0);
    // The reader's connection goes on working.
    assert_eq!(reader.cmd(&["PING"]), Reply::Simple("PONG".into()));
    got
}

#[test]
fn blocked_xreadgroup_ends_as_redis_when_its_stream_or_group_goes() {
    let t = tessera();
    let r = redis();
    for (case, want) in cases() {
        let got = run(t.port, &case);
        assert_eq!(got, want, "tessera: {}", case.name);
        assert_eq!(run(r.port, &case), got, "redis vs tessera: {}", case.name);
    }
}

/// SWAPDB serves a BLPOP whose key the swapped-in database has (redis re-checks the
/// blocked keys of both databases).
#[test]
fn swapdb_serves_blocked_list_pops_as_redis() {
    let t = tessera();
    let r = redis();
    let run = |port: u16| -> Reply {
        let mut ctl = Conn::connect(port);
        ctl.cmd(&["FLUSHALL"]);
        ctl.cmd(&["SELECT", "1"]);
        ctl.cmd(&["RPUSH", "k", "v1", "v2"]);
        let mut reader = Conn::connect(port);
        reader.send(&["BLPOP", "k", "0"]);
        wait_blocked(&mut ctl, 1);
        assert_eq!(ctl.cmd(&["SWAPDB", "0", "1"]), Reply::Simple("OK".into()));
        let got = reader.read();
        wait_blocked(&mut ctl, 0);
        assert_eq!(
            ctl.cmd(&["LLEN", "k"]),
            Reply::Int(0),
            "db 1 now holds the old db 0"
        );
        ctl.cmd(&["SELECT", "0"]);
        assert_eq!(ctl.cmd(&["LLEN", "k"]), Reply::Int(1));
        got
    };
    let got = run(t.port);
    assert_eq!(
        got,
        Reply::Array(vec![
            Reply::Bulk(b"k".to_vec()),
            Reply::Bulk(b"v1".to_vec())
        ])
    );
    assert_eq!(run(r.port), got);
}

/// Many readers on many streams, one FLUSHALL: all of them get the error (the re-check
/// is batched), and their consumers' later reads work.
#[test]
fn flushall_ends_every_blocked_group_reader() {
    let t = tessera();
    let mut ctl = Conn::connect(t.port);
    let keys: Vec<String> = (0..20).map(|i| format!("s{i}")).collect();
    let mut readers = Vec::new();
    for k in &keys {
        ctl.cmd(&["XGROUP", "CREATE", k, "g", "$", "MKSTREAM"]);
        let mut r = Conn::connect(t.port);
        r.send(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            k,
            ">",
        ]);
        readers.push(r);
        wait_blocked(&mut ctl, readers.len());
    }
    ctl.cmd(&["FLUSHALL"]);
    for r in &mut readers {
        assert_eq!(r.read(), Reply::Error(UNBLOCKED.into()));
    }
    wait_blocked(&mut ctl, 0);
    assert_eq!(
        readers[0].cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s0", ">"]),
        Reply::Error(
            "NOGROUP No such key 's0' or consumer group 'g' in XREADGROUP with GROUP option".into()
        )
    );
}
