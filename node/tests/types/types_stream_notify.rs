//! Stream keyspace notifications, differential against redis-server 7.0: the same stream
//! commands on both with `notify-keyspace-events KEA` (and `KEAn`), and a PSUBSCRIBE client
//! must see the same messages in the same order.

use tessera_testkit::pubsub::*;
use tessera_testkit::*;

const SCRIPT: &[&[&str]] = &[
    &["XADD", "s", "1-0", "a", "1"],
    &["XADD", "s", "2-0", "a", "2"],
    &["XADD", "s", "MAXLEN", "1", "3-0", "a", "3"],
    &["XADD", "s", "1-0", "a", "1"],
    &["XADD", "nokey", "NOMKSTREAM", "1-0", "a", "1"],
    &["XDEL", "s", "9-0"],
    &["XDEL", "s", "3-0"],
    &["XADD", "s", "4-0", "a", "4"],
    &["XADD", "s", "5-0", "a", "5"],
    &["XTRIM", "s", "MAXLEN", "5"],
    &["XTRIM", "s", "MAXLEN", "1"],
    &["XSETID", "s", "10-0"],
    &["XGROUP", "CREATE", "s", "g", "0"],
    &["XGROUP", "CREATE", "s", "g", "0"],
    &["XGROUP", "CREATE", "t", "g", "$", "MKSTREAM"],
    &["XGROUP", "SETID", "s", "g", "0"],
    &["XGROUP", "CREATECONSUMER", "s", "g", "c1"],
    &["XGROUP", "CREATECONSUMER", "s", "g", "c1"],
    &["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">"],
    &["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">"],
    &["XCLAIM", "s", "g", "c3", "0", "5-0"],
    &["XAUTOCLAIM", "s", "g", "c4", "0", "0"],
    &["XACK", "s", "g", "5-0"],
    &["XGROUP", "DELCONSUMER", "s", "g", "c1"],
    &["XGROUP", "DELCONSUMER", "s", "g", "nobody"],
    &["XGROUP", "DESTROY", "s", "g"],
    &["XGROUP", "DESTROY", "s", "g"],
    &["DEL", "t"],
    &["SET", "end", "v"],
];

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
    let mut seen = Vec::new();
    loop {
        let m = sub.read().s();
        let done = m.contains("__keyevent@0__:set,end");
        seen.push(m);
        if done {
            break;
        }
        assert!(seen.len() < 5000, "{bin}: runaway");
    }
    seen
}

#[test]
fn stream_events_match_redis() {
    for flags in ["KEA", "KEAn"] {
        let ours = session(tessera_bin(), flags);
        let theirs = session(redis_bin(), flags);
        assert_eq!(ours, theirs, "{flags}");
    }
}
