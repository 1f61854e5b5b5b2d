//! CLIENT UNBLOCK / NO-EVICT / INFO / LIST against redis-server 7.0 (kept under this
//! helper's `pubsub_` test prefix): the same session on both servers, replies compared.
// Sessions are transcripts: one push per step reads in the order the steps happen.
#![allow(clippy::vec_init_then_push)]

use tessera_testkit::pubsub::*;
use tessera_testkit::*;

/// Field names of a CLIENT INFO / LIST line, in order.
fn field_names(line: &str) -> Vec<String> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_string()))
        .collect()
}

fn field(line: &str, name: &str) -> String {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_default()
        .to_string()
}

fn client_id(c: &mut Raw) -> String {
    c.cmd(&["CLIENT", "ID"]).s()
}

/// Blocks `a` with `cmd`, then unblocks it from `b` with the given reason.
fn unblocked_reply(a: &mut Raw, b: &mut Raw, cmd: &[&str], reason: Option<&str>) -> String {
    let id = client_id(a);
    let v: Vec<&[u8]> = cmd.iter().map(|x| x.as_bytes()).collect();
    a.send(&encode(&v));
    // Wait until the server has it blocked (CLIENT LIST flags 'b'), then unblock.
    tessera_testkit::pubsub::wait_for(std::time::Duration::from_secs(20), "client blocked", || {
        let list = b.cmd(&["CLIENT", "LIST"]).s();
        list.lines()
            .any(|l| field(l, "id") == id && field(l, "flags").contains('b'))
    });
    let mut args = vec!["CLIENT", "UNBLOCK", id.as_str()];
    args.extend(reason);
    let r = b.cmd(&args).s();
    format!("unblock={r} blocked-client-got={:?}", a.read())
}

fn session(bin: &'static str) -> Vec<String> {
    let p = Proc::start(bin, &[]);
    let mut a = p.raw();
    let mut b = p.raw();
    let mut t = Vec::new();
    t.push(unblocked_reply(
        &mut a,
        &mut b,
        &["BLPOP", "nol", "0"],
        None,
    ));
    t.push(unblocked_reply(
        &mut a,
        &mut b,
        &["BRPOP", "nol", "0"],
        Some("TIMEOUT"),
    ));
    t.push(unblocked_reply(
        &mut a,
        &mut b,
        &["BZPOPMIN", "noz", "0"],
        Some("ERROR"),
    ));
    t.push(unblocked_reply(
        &mut a,
        &mut b,
        &["BLMOVE", "nol", "x", "LEFT", "LEFT", "0"],
        Some("timeout"),
    ));
    // The unblocked client works normally afterwards.
    t.push(a.cmd(&["PING"]).s());
    let ida = client_id(&mut a);
    t.push(b.cmd(&["CLIENT", "UNBLOCK", &ida]).s());
    t.push(b.cmd(&["CLIENT", "UNBLOCK", "999999"]).s());
    t.push(b.cmd(&["CLIENT", "UNBLOCK", &ida, "foo"]).s());
    t.push(b.cmd(&["CLIENT", "UNBLOCK", "abc"]).s());
    t.push(b.cmd(&["CLIENT", "UNBLOCK"]).s());
    // NO-EVICT shows as flag 'e'.
    t.push(b.cmd(&["CLIENT", "NO-EVICT", "ON"]).s());
    t.push(field(&b.cmd(&["CLIENT", "INFO"]).s(), "flags"));
    t.push(b.cmd(&["CLIENT", "NO-EVICT", "maybe"]).s());
    t.push(b.cmd(&["CLIENT", "NO-EVICT", "OFF"]).s());
    t.push(field(&b.cmd(&["CLIENT", "INFO"]).s(), "flags"));
    // CLIENT INFO: same fields in the same order; the running command is shown.
    let info = b.cmd(&["CLIENT", "INFO"]).s();
    t.push(field_names(&info).join(" "));
    t.push(field(&info, "cmd"));
    // A subscriber's line: flags P and the sub/psub/ssub counts.
    let mut s = p.raw();
    s.cmd(&["SUBSCRIBE", "c1"]);
    s.cmd(&["PSUBSCRIBE", "p*"]);
    s.cmd(&["SSUBSCRIBE", "s1"]);
    let list = b.cmd(&["CLIENT", "LIST"]).s();
    let line = list
        .lines()
        .find(|l| field(l, "sub") == "1")
        .unwrap_or_default()
        .to_string();
    for f in ["flags", "sub", "psub", "ssub", "cmd"] {
        t.push(format!("{f}={}", field(&line, f)));
    }
    t.push(field_names(&line).join(" "));
    t.push(format!(
        "pubsub type list has subscriber: {}",
        b.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"])
            .s()
            .lines()
            .count()
    ));
    t
}

#[test]
fn client_commands_match_redis() {
    assert_same_transcript(&session(tessera_bin()), &session(redis_bin()));
}

#[test]
fn unblocked_client_reply_types() {
    let p = Proc::start(tessera_bin(), &[]);
    let mut a = p.raw();
    let mut b = p.raw();
    let r = unblocked_reply(&mut a, &mut b, &["BLPOP", "nol", "0"], Some("ERROR"));
    assert_eq!(
        r,
        format!(
            "unblock=1 blocked-client-got={:?}",
            R::Err("UNBLOCKED client unblocked via CLIENT UNBLOCK".into())
        )
    );
}

/// Drops `history` entries (release-note prose the node doesn't carry) from a docs reply.
fn without_history(r: R) -> R {
    match r {
        R::Agg(b'%', v) => {
            let mut out = Vec::new();
            for pair in v.chunks(2) {
                if pair[0] == R::Bulk(b"history".to_vec()) {
                    continue;
                }
                out.extend(pair.iter().cloned().map(without_history));
            }
            R::Agg(b'%', out)
        }
        R::Agg(t, v) => R::Agg(t, v.into_iter().map(without_history).collect()),
        R::Arr(v) => R::Arr(v.into_iter().map(without_history).collect()),
        other => other,
    }
}

#[test]
fn command_docs_match_redis() {
    let t = Proc::start(tessera_bin(), &[]);
    let r = Proc::start(redis_bin(), &[]);
    let (mut tc, mut rc) = (t.raw(), r.raw());
    for c in [&mut tc, &mut rc] {
        c.cmd(&["HELLO", "3"]);
    }
    let sample: &[&[&str]] = &[
        &["get"],
        &["set"],
        &["zadd"],
        &["lpos"],
        &["bitfield"],
        &["client|kill"],
        &["config|set"],
        &["ssubscribe"],
        &["migrate"],
        &["zunionstore", "expire", "restore"],
        &["nosuchcommand"],
    ];
    for names in sample {
        let mut args = vec!["COMMAND", "DOCS"];
        args.extend_from_slice(names);
        let ours = tc.cmd(&args);
        let theirs = without_history(rc.cmd(&args));
        assert_eq!(ours, theirs, "COMMAND DOCS {names:?} (RESP3)");
    }
    // RESP2 (what redis-cli reads at startup for its hints).
    let (mut t2, mut r2) = (t.raw(), r.raw());
    let ours = t2.cmd(&["COMMAND", "DOCS", "hget"]);
    assert_eq!(ours, r2.cmd(&["COMMAND", "DOCS", "hget"]));
    // A command with subcommands lists only the ones this node has, each documented.
    let client = tc.cmd(&["COMMAND", "DOCS", "client"]).s();
    assert!(
        client.contains("client|unblock")
            && client.contains("Unblock a client blocked in a blocking command")
    );
    // Every implemented command has a summary and a group.
    let all = tc.cmd(&["COMMAND", "DOCS"]);
    let R::Agg(b'%', v) = all else {
        panic!("not a map");
    };
    for pair in v.chunks(2) {
        let doc = pair[1].s();
        assert!(
            doc.starts_with("[summary,") && doc.contains(",group,"),
            "{doc}"
        );
        assert!(
            !doc.starts_with("[summary,,"),
            "empty summary: {}",
            pair[0].s()
        );
    }
}
