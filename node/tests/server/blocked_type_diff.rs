//! A blocked client and a key whose type changes, against redis-server 7.0 (issue 18,
//! Redis's unit/type/list, zset and stream blocking tests): Redis serves a blocked client
//! only from a key that holds the type it waits for, so a list replaced by a string inside
//! MULTI/EXEC leaves BLPOP blocked until a list appears (XREADGROUP has its own rule: it is
//! told its stream is gone).

use std::time::Duration;

use tessera_testkit::*;

fn both() -> [Launch; 2] {
    [Launch::redis(), Launch::tessera()]
}

fn blocked_clients(c: &mut Conn) -> String {
    let info = match c.cmd(&["INFO", "clients"]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO answered {other:?}"),
    };
    info_field(&info, "blocked_clients").unwrap_or_default()
}

/// On each server: `setup`, then a client sends `block` and waits; `steps` run on another
/// connection; then what the blocked client reads (a client still blocked after the steps
/// makes the read time out: the test fails rather than hangs).
fn scenario(setup: &[&[&str]], block: &[&str], steps: &[&[&str]]) -> [String; 2] {
    let [r, t] = both().map(|l| l.args(&["--save", ""]).start());
    [&r, &t].map(|s| {
        let mut c = s.resp();
        for a in setup {
            c.cmd(a);
        }
        let mut rd = s.resp();
        rd.send(block);
        wait_until("the client blocked", Duration::from_secs(10), || {
            blocked_clients(&mut c) == "1"
        });
        let mut replies = Vec::new();
        for a in steps {
            replies.push(format!("{:?}", c.cmd(a)));
        }
        format!("{:?}\n{}", rd.read(), replies.join(" "))
    })
}

fn same(what: &str, setup: &[&[&str]], block: &[&str], steps: &[&[&str]]) -> Option<String> {
    let [want, got] = scenario(setup, block, steps);
    (want != got).then(|| format!("{what}:\n  redis   {want}\n  tessera {got}"))
}

/// A scenario: its name, the blocking command, the steps run meanwhile.
type Case<'a> = (&'a str, &'a [&'a str], &'a [&'a [&'a str]]);

#[test]
fn blocked_pops_wait_for_their_type_like_redis() {
    let replaced: &[&[&str]] = &[
        &["MULTI"],
        &["LPUSH", "k", "a"],
        &["DEL", "k"],
        &["SET", "k", "foo"],
        &["EXEC"],
        &["DEL", "k"],
        &["LPUSH", "k", "b"],
    ];
    let zreplaced: &[&[&str]] = &[
        &["MULTI"],
        &["ZADD", "k", "0", "foo"],
        &["DEL", "k"],
        &["SET", "k", "foo"],
        &["EXEC"],
        &["DEL", "k"],
        &["ZADD", "k", "1", "bar"],
    ];
    let mut diffs = Vec::new();
    let cases: Vec<Case> = vec![
        ("BLPOP, LPUSH + DEL + SET", &["BLPOP", "k", "0"], replaced),
        (
            "BLMPOP, LPUSH + DEL + SET",
            &["BLMPOP", "0", "1", "k", "LEFT"],
            replaced,
        ),
        (
            "BLMOVE, LPUSH + DEL + SET",
            &["BLMOVE", "k", "dst", "LEFT", "RIGHT", "0"],
            replaced,
        ),
        (
            "BRPOPLPUSH, LPUSH + DEL + SET",
            &["BRPOPLPUSH", "k", "dst", "0"],
            replaced,
        ),
        (
            "BZPOPMIN, ZADD + DEL + SET",
            &["BZPOPMIN", "k", "0"],
            zreplaced,
        ),
        (
            "BZMPOP, ZADD + DEL + SET",
            &["BZMPOP", "0", "1", "k", "MIN"],
            zreplaced,
        ),
        (
            "BLPOP on two keys, the first turned into a string",
            &["BLPOP", "k", "k2", "0"],
            &[
                &["MULTI"],
                &["LPUSH", "k", "a"],
                &["DEL", "k"],
                &["SET", "k", "foo"],
                &["EXEC"],
                &["LPUSH", "k2", "b"],
            ],
        ),
        (
            "XREAD, XADD + DEL + LPUSH",
            &["XREAD", "BLOCK", "0", "STREAMS", "k", "$"],
            &[
                &["MULTI"],
                &["XADD", "k", "1-1", "old", "v"],
                &["DEL", "k"],
                &["LPUSH", "k", "foo", "bar"],
                &["EXEC"],
                &["DEL", "k"],
                &["XADD", "k", "2-1", "new", "v"],
            ],
        ),
    ];
    for (what, block, steps) in cases {
        diffs.extend(same(what, &[], block, steps));
    }
    // XREADGROUP is told its stream is gone.
    diffs.extend(same(
        "XREADGROUP, DEL + SADD in a transaction",
        &[
            &["XADD", "k", "666-0", "f", "v"],
            &["XGROUP", "CREATE", "k", "g", "$"],
        ],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "Alice",
            "BLOCK",
            "0",
            "STREAMS",
            "k",
            ">",
        ],
        &[&["MULTI"], &["DEL", "k"], &["SADD", "k", "e1"], &["EXEC"]],
    ));
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
