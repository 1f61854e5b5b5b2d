//! Scripts sent to a cluster replica, tessera-node and redis-server 7.0 side by side (issue
//! 18): without READONLY a script with keys is redirected (-MOVED) like any command; with
//! READONLY a script that may write (a shebang without no-writes) is still redirected,
//! other scripts run on the replica and a write inside them answers -READONLY; keys of two
//! slots answer -CROSSSLOT. The replies must be the same.

use std::time::Duration;

use tessera_testkit::cluster::*;
use tessera_testkit::*;

/// One reply line, with a MOVED's address dropped (ports differ).
fn norm(l: &str) -> String {
    let l = l.trim_end();
    match l.strip_prefix("-MOVED ") {
        Some(rest) => format!("-MOVED {}", rest.split(' ').next().unwrap_or("")),
        None => l.to_string(),
    }
}

/// A master serving every slot and its replica; the replies of the cases sent to the
/// replica, each on a fresh connection (with READONLY first when `readonly`).
fn replies(bin: &'static str) -> Vec<String> {
    let m = Proc::cluster(bin, "127.0.0.1", 5000);
    let r = Proc::cluster(bin, "127.0.0.1", 5000);
    assert_eq!(
        m.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]).trim(),
        "OK"
    );
    let mp = m.port.to_string();
    assert_eq!(r.cli(&["CLUSTER", "MEET", "127.0.0.1", &mp]).trim(), "OK");
    let mid = m.myid();
    wait_for(
        Duration::from_secs(60),
        "the replica to know its master",
        || r.nodes().iter().any(|l| l.starts_with(&mid)),
    );
    assert_eq!(r.cli(&["CLUSTER", "REPLICATE", &mid]).trim(), "OK");
    wait_for(Duration::from_secs(60), "the replica in sync", || {
        r.cli(&["INFO", "replication"])
            .contains("master_link_status:up")
            && r.cluster_info("cluster_state") == "ok"
            && m.cluster_info("cluster_state") == "ok"
    });
    assert_eq!(m.cli(&["SET", "foo", "bar"]).trim(), "OK");
    wait_for(Duration::from_secs(60), "foo on the replica", || {
        raw_lines(&r.addr(), &[&[b"READONLY"], &[b"GET", b"foo"]])
            .last()
            .is_some_and(|l| l.starts_with("$3"))
    });
    let lib = "#!lua name=rlib\nredis.register_function{function_name='ro', callback=function(keys) return redis.call('exists', keys[1]) end, flags={'no-writes'}}\nredis.register_function('rw', function(keys) return redis.call('exists', keys[1]) end)";
    assert_eq!(m.cli(&["FUNCTION", "LOAD", lib]).trim(), "rlib");
    wait_for(
        Duration::from_secs(60),
        "the library on the replica",
        || r.cli(&["FUNCTION", "LIST"]).contains("rlib"),
    );
    let get = "return redis.call('get', KEYS[1])";
    let set = "return redis.call('set', KEYS[1], 'x')";
    let cases: &[&[&str]] = &[
        &["EVAL", get, "1", "foo"],
        &["EVAL", set, "1", "foo"],
        &["EVAL_RO", get, "1", "foo"],
        &[
            "EVAL",
            "#!lua\nreturn redis.call('get', KEYS[1])",
            "1",
            "foo",
        ],
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])",
            "1",
            "foo",
        ],
        &["EVAL", "return 1", "0"],
        &["EVAL", "return redis.call('set', 'foo', 'x')", "0"],
        &["EVAL", "return redis.call('get', 'foo')", "0"],
        &["EVAL", get, "2", "foo", "bar"],
        &["EVAL_RO", get, "2", "foo", "{foo}x"],
        &["FCALL", "rw", "1", "foo"],
        &["FCALL", "ro", "1", "foo"],
        &["FCALL_RO", "ro", "1", "foo"],
    ];
    let mut out = Vec::new();
    for readonly in [false, true] {
        for c in cases {
            let args: Vec<&[u8]> = c.iter().map(|s| s.as_bytes()).collect();
            let mut cmds: Vec<&[&[u8]]> = Vec::new();
            if readonly {
                cmds.push(&[b"READONLY"]);
            }
            cmds.push(&args);
            let lines = raw_lines(&r.addr(), &cmds);
            let last = lines.last().map(|l| norm(l)).unwrap_or_default();
            out.push(format!("readonly {readonly} {c:?}: {last}"));
        }
    }
    out
}

#[test]
fn scripts_on_a_cluster_replica_match_redis() {
    let theirs = replies(redis_bin());
    let ours = replies(tessera_bin());
    let diffs: Vec<String> = ours
        .iter()
        .zip(&theirs)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("tessera {a}\n  redis {b}"))
        .collect();
    assert!(
        diffs.is_empty(),
        "{} differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
