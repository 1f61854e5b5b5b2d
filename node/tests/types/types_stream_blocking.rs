//! XREAD BLOCK / XREADGROUP BLOCK: woken by XADD in FIFO order, `$` resolved when the
//! client blocks, timeouts answer a null array, blocking does not happen inside MULTI,
//! and a served XREADGROUP reaches a replica (as XCLAIM ... FORCE JUSTID LASTID).

use std::time::{Duration, Instant};
use tessera_testkit::diff::*;

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

/// `[[key, [[id, [f, v]]]]]` in RESP2.
fn one_entry(key: &str, id: &str, f: &str, v: &str) -> Reply {
    Reply::Array(vec![Reply::Array(vec![
        bulk(key),
        Reply::Array(vec![Reply::Array(vec![
            bulk(id),
            Reply::Array(vec![bulk(f), bulk(v)]),
        ])]),
    ])])
}

#[test]
fn xread_block_dollar_is_woken_by_xadd() {
    let s = tessera();
    let mut ctl = Conn::connect(s.port);
    ctl.cmd(&["XADD", "s", "1-0", "old", "x"]);
    let mut a = Conn::connect(s.port);
    a.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    wait_blocked(&mut ctl, 1);
    // Another key does not wake it; the entry after `$` does.
    ctl.cmd(&["XADD", "other", "5-0", "f", "v"]);
    ctl.cmd(&["XADD", "s", "2-0", "new", "y"]);
    assert_eq!(a.read(), one_entry("s", "2-0", "new", "y"));
    wait_blocked(&mut ctl, 0);
    // A stream that does not exist yet: created by the XADD that wakes the reader.
    a.send(&["XREAD", "COUNT", "5", "BLOCK", "0", "STREAMS", "fresh", "$"]);
    wait_blocked(&mut ctl, 1);
    ctl.cmd(&["XADD", "fresh", "7-1", "a", "b"]);
    assert_eq!(a.read(), one_entry("fresh", "7-1", "a", "b"));
}

#[test]
fn xread_block_times_out_and_does_not_block_in_multi() {
    let s = tessera();
    let mut c = Conn::connect(s.port);
    assert_eq!(
        c.cmd(&["XREAD", "BLOCK", "50", "STREAMS", "s", "$"]),
        Reply::NullArray
    );
    c.cmd(&["XADD", "s", "1-0", "f", "v"]);
    // Data already there: served at once even with BLOCK.
    assert_eq!(
        c.cmd(&["XREAD", "BLOCK", "0", "STREAMS", "s", "0"]),
        one_entry("s", "1-0", "f", "v")
    );
    c.cmd(&["MULTI"]);
    c.cmd(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    assert_eq!(c.cmd(&["EXEC"]), Reply::Array(vec![Reply::NullArray]));
    assert_eq!(
        c.cmd(&["XREAD", "BLOCK", "x", "STREAMS", "s", "$"]),
        Reply::Error("ERR timeout is not an integer or out of range".into())
    );
    assert_eq!(
        c.cmd(&["XREAD", "BLOCK", "-1", "STREAMS", "s", "$"]),
        Reply::Error("ERR timeout is negative".into())
    );
}

#[test]
fn xreadgroup_block_serves_consumers_in_fifo_order() {
    let s = tessera();
    let mut ctl = Conn::connect(s.port);
    ctl.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let mut readers = Vec::new();
    for name in ["c1", "c2", "c3"] {
        let mut r = Conn::connect(s.port);
        r.send(&[
            "XREADGROUP",
            "GROUP",
            "g",
            name,
            "COUNT",
            "1",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ]);
        readers.push(r);
        wait_blocked(&mut ctl, readers.len());
    }
    ctl.cmd(&["XADD", "s", "1-0", "n", "1"]);
    assert_eq!(readers[0].read(), one_entry("s", "1-0", "n", "1"));
    wait_blocked(&mut ctl, 2);
    ctl.cmd(&["XADD", "s", "2-0", "n", "2"]);
    assert_eq!(readers[1].read(), one_entry("s", "2-0", "n", "2"));
    ctl.cmd(&["XADD", "s", "3-0", "n", "3"]);
    assert_eq!(readers[2].read(), one_entry("s", "3-0", "n", "3"));
    wait_blocked(&mut ctl, 0);
    // Each consumer owns what it was served.
    let summary = ctl.cmd(&["XPENDING", "s", "g"]);
    assert_eq!(
        summary,
        Reply::Array(vec![
            Reply::Int(3),
            bulk("1-0"),
            bulk("3-0"),
            Reply::Array(
                ["c1", "c2", "c3"]
                    .iter()
                    .map(|c| Reply::Array(vec![bulk(c), bulk("1")]))
                    .collect()
            ),
        ])
    );
}

#[test]
fn served_xreadgroup_block_reaches_a_replica() {
    let m = tessera();
    let r = tessera_with(&["--replicaof", "127.0.0.1", &m.port.to_string()]);
    let mut mc = Conn::connect(m.port);
    let mut rc = Conn::connect(r.port);
    mc.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let mut reader = Conn::connect(m.port);
    reader.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]);
    wait_blocked(&mut mc, 1);
    mc.cmd(&["XADD", "s", "1-0", "f", "v"]);
    assert_eq!(reader.read(), one_entry("s", "1-0", "f", "v"));
    mc.cmd(&["XADD", "s", "2-0", "f", "w"]);
    let want = Reply::Array(vec![
        Reply::Int(1),
        bulk("1-0"),
        bulk("1-0"),
        Reply::Array(vec![Reply::Array(vec![bulk("c"), bulk("1")])]),
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = rc.cmd(&["XPENDING", "s", "g"]);
        let len = rc.cmd(&["XLEN", "s"]);
        if got == want && len == Reply::Int(2) {
            break;
        }
        assert!(Instant::now() < deadline, "replica: {got:?} {len:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The replica's link client never blocked.
    wait_blocked(&mut rc, 0);
}

/// Readers of one stream that want different things: an unserved one (its group already
/// got the entry) does not stop the ones behind it (another group, a plain XREAD), as in
/// redis; it is served, in its turn, by the next XADD. Same replies on redis-server.
#[test]
fn blocked_stream_readers_behind_an_unserved_one_are_served() {
    let run = |port: u16| -> Vec<Reply> {
        let mut ctl = Conn::connect(port);
        ctl.cmd(&["FLUSHALL"]);
        ctl.cmd(&["XGROUP", "CREATE", "s", "g1", "$", "MKSTREAM"]);
        ctl.cmd(&["XGROUP", "CREATE", "s", "g2", "$"]);
        let reads: [&[&str]; 4] = [
            &[
                "XREADGROUP",
                "GROUP",
                "g1",
                "a",
                "BLOCK",
                "0",
                "STREAMS",
                "s",
                ">",
            ],
            &[
                "XREADGROUP",
                "GROUP",
                "g1",
                "b",
                "BLOCK",
                "0",
                "STREAMS",
                "s",
                ">",
            ],
            &[
                "XREADGROUP",
                "GROUP",
                "g2",
                "c",
                "BLOCK",
                "0",
                "STREAMS",
                "s",
                ">",
            ],
            &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"],
        ];
        let mut readers = Vec::new();
        for r in reads {
            let mut c = Conn::connect(port);
            c.send(r);
            readers.push(c);
            wait_blocked(&mut ctl, readers.len());
        }
        ctl.cmd(&["XADD", "s", "1-0", "n", "1"]);
        let mut got = vec![readers[0].read(), readers[2].read(), readers[3].read()];
        wait_blocked(&mut ctl, 1);
        ctl.cmd(&["XADD", "s", "2-0", "n", "2"]);
        got.push(readers[1].read());
        wait_blocked(&mut ctl, 0);
        got
    };
    let s = tessera();
    let got = run(s.port);
    assert_eq!(
        got,
        vec![
            one_entry("s", "1-0", "n", "1"),
            one_entry("s", "1-0", "n", "1"),
            one_entry("s", "1-0", "n", "1"),
            one_entry("s", "2-0", "n", "2"),
        ]
    );
    let r = redis();
    assert_eq!(run(r.port), got);
}

/// A reader blocked on two streams that both get an entry in one MULTI is served from the
/// first one only (redis serves it from the stream that became ready); the group's other
/// stream keeps its entry undelivered. Same replies on redis-server.
#[test]
fn blocked_reader_of_two_streams_is_served_from_the_first_ready() {
    let run = |port: u16| -> Vec<Reply> {
        let mut ctl = Conn::connect(port);
        ctl.cmd(&["FLUSHALL"]);
        for k in ["s1", "s2"] {
            ctl.cmd(&["XADD", k, "1-1", "a", "b"]);
            ctl.cmd(&["XGROUP", "CREATE", k, "g", "$"]);
        }
        let mut plain = Conn::connect(port);
        plain.send(&["XREAD", "BLOCK", "0", "STREAMS", "s1", "s2", "$", "$"]);
        wait_blocked(&mut ctl, 1);
        let mut group = Conn::connect(port);
        group.send(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "s1",
            "s2",
            ">",
            ">",
        ]);
        wait_blocked(&mut ctl, 2);
        ctl.cmd(&["MULTI"]);
        ctl.cmd(&["XADD", "s1", "2-1", "x", "y"]);
        ctl.cmd(&["XADD", "s2", "2-1", "z", "w"]);
        ctl.cmd(&["EXEC"]);
        let got = vec![
            plain.read(),
            group.read(),
            ctl.cmd(&["XPENDING", "s2", "g"]),
            ctl.cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s2", ">"]),
        ];
        wait_blocked(&mut ctl, 0);
        got
    };
    let s = tessera();
    let got = run(s.port);
    assert_eq!(got[0], one_entry("s1", "2-1", "x", "y"));
    assert_eq!(got[1], one_entry("s1", "2-1", "x", "y"));
    assert_eq!(got[3], one_entry("s2", "2-1", "z", "w"));
    let r = redis();
    assert_eq!(run(r.port), got);
}
