//! Consumer-group state reaches replicas as redis 7.0 sends it: XREADGROUP (plain, NOACK,
//! blocked then served, inside MULTI), XCLAIM and XAUTOCLAIM are propagated as XCLAIM ...
//! FORCE JUSTID LASTID per entry and XGROUP CREATECONSUMER / SETID ... ENTRIESREAD.
//! One workload runs on a redis-server master (with a redis replica) and on a tessera
//! master (with a redis and a tessera replica); every replica must end with the group state
//! of redis's replica (time fields left out), and the two masters with the same state.
//! The same commands in tessera's AOF (MULTI-wrapped XCLAIMs) load back to that state.

use redis::Value as V;
use tessera_testkit::repl::*;

fn q(c: &mut redis::Connection, args: &[&str]) -> V {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn xrg(c: &mut redis::Connection, group: &str, consumer: &str, extra: &[&str]) -> V {
    let mut a = vec!["XREADGROUP", "GROUP", group, consumer];
    a.extend_from_slice(extra);
    q(c, &a)
}

/// Polls INFO until `n` clients are blocked.
fn wait_blocked(p: &Proc, n: usize) {
    wait_for(
        std::time::Duration::from_secs(30),
        "blocked_clients",
        || p.info("clients", "blocked_clients") == Some(n.to_string()),
    );
}

/// The same commands, in the same order, on either master.
fn workload(m: &Proc) -> Vec<V> {
    let mut c = m.conn();
    let mut replies = Vec::new();
    for i in 1..=12 {
        q(
            &mut c,
            &["XADD", "s", &format!("{i}-1"), "f", &format!("v{i}")],
        );
    }
    q(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    q(&mut c, &["XGROUP", "CREATE", "s", "g2", "$"]);
    let mut r = |_: &mut redis::Connection, v: V| replies.push(v);
    let v = xrg(&mut c, "g", "alice", &["COUNT", "3", "STREAMS", "s", ">"]);
    r(&mut c, v);
    let v = xrg(&mut c, "g", "bob", &["COUNT", "2", "STREAMS", "s", ">"]);
    r(&mut c, v);
    // NOACK by a new consumer, then by an existing one.
    let v = xrg(
        &mut c,
        "g",
        "carol",
        &["NOACK", "COUNT", "2", "STREAMS", "s", ">"],
    );
    r(&mut c, v);
    let v = xrg(
        &mut c,
        "g",
        "alice",
        &["NOACK", "COUNT", "1", "STREAMS", "s", ">"],
    );
    r(&mut c, v);
    // History reads (nothing propagated), one by a consumer that does not exist yet.
    let v = xrg(&mut c, "g", "alice", &["STREAMS", "s", "0"]);
    r(&mut c, v);
    let v = xrg(&mut c, "g", "dave", &["STREAMS", "s", "0"]);
    r(&mut c, v);
    let v = q(&mut c, &["XACK", "s", "g", "2-1"]);
    r(&mut c, v);
    let v = q(&mut c, &["XCLAIM", "s", "g", "bob", "0", "1-1"]);
    r(&mut c, v);
    let v = q(&mut c, &["XCLAIM", "s", "g", "erin", "0", "3-1", "JUSTID"]);
    r(&mut c, v);
    let v = q(
        &mut c,
        &["XCLAIM", "s", "g", "bob", "0", "4-1", "LASTID", "9-1"],
    );
    r(&mut c, v);
    // A pending entry deleted: the claims drop it (and tell the replicas).
    q(&mut c, &["XDEL", "s", "5-1"]);
    let v = q(
        &mut c,
        &["XAUTOCLAIM", "s", "g", "frank", "0", "0", "COUNT", "3"],
    );
    r(&mut c, v);
    let v = q(
        &mut c,
        &["XAUTOCLAIM", "s", "g", "gina", "0", "0", "JUSTID"],
    );
    r(&mut c, v);
    // Two streams in one read.
    q(&mut c, &["XADD", "s2", "1-1", "a", "b"]);
    q(&mut c, &["XGROUP", "CREATE", "s2", "g", "0"]);
    let v = xrg(&mut c, "g", "multi", &["STREAMS", "s", "s2", ">", ">"]);
    r(&mut c, v);
    // Inside MULTI.
    q(&mut c, &["MULTI"]);
    for args in [
        &["XREADGROUP", "GROUP", "g2", "m1", "STREAMS", "s", ">"][..],
        &["XADD", "s", "20-1", "x", "y"],
        &[
            "XREADGROUP",
            "GROUP",
            "g2",
            "m2",
            "NOACK",
            "STREAMS",
            "s",
            ">",
        ],
        &["XREADGROUP", "GROUP", "g2", "m1", "STREAMS", "s", "0"],
    ] {
        q(&mut c, args);
    }
    let v = q(&mut c, &["EXEC"]);
    r(&mut c, v);
    // Group g reads up to 20-1, so the next reads block.
    let v = xrg(&mut c, "g", "multi", &["STREAMS", "s", ">"]);
    r(&mut c, v);
    // Blocked, then served by an XADD; once plain, once NOACK.
    for (consumer, noack) in [("waiter", false), ("waiter2", true)] {
        let mut w = m.conn();
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP").arg("g").arg(consumer);
        if noack {
            cmd.arg("NOACK");
        }
        cmd.arg("BLOCK").arg(0).arg("STREAMS").arg("s").arg(">");
        w.send_packed_command(&cmd.get_packed_command())
            .expect("send");
        wait_blocked(m, 1);
        let id = if noack { "31-1" } else { "30-1" };
        q(&mut c, &["XADD", "s", id, "f", "w"]);
        let v = w.recv_response().expect("served");
        r(&mut c, v);
        wait_blocked(m, 0);
    }
    q(&mut c, &["XGROUP", "SETID", "s", "g2", "$"]);
    let v = xrg(&mut c, "g2", "late", &["STREAMS", "s", ">"]);
    r(&mut c, v);
    replies
}

/// Keeps the fields of a flat XINFO reply (`[k, v, k, v...]`) whose key is in `keep`.
fn fields(v: &V, keep: &[&str]) -> V {
    let V::Array(kv) = v else {
        return v.clone();
    };
    let mut out = Vec::new();
    for p in kv.chunks(2) {
        if let [V::BulkString(k), val] = p {
            if keep.contains(&String::from_utf8_lossy(k).as_ref()) {
                out.push(p[0].clone());
                out.push(val.clone());
            }
        }
    }
    V::Array(out)
}

/// The group state of `key` that does not depend on the clock.
fn group_state(p: &Proc, key: &str) -> Vec<V> {
    let mut c = p.conn();
    let mut out = vec![
        q(&mut c, &["XRANGE", key, "-", "+"]),
        q(&mut c, &["XINFO", "GROUPS", key]),
    ];
    for g in ["g", "g2"] {
        let Ok(V::Array(consumers)) = redis::cmd("XINFO")
            .arg("CONSUMERS")
            .arg(key)
            .arg(g)
            .query::<V>(&mut c)
        else {
            continue;
        };
        let names: Vec<V> = consumers
            .iter()
            .map(|cv| fields(cv, &["name", "pending"]))
            .collect();
        out.push(V::Array(names));
        out.push(q(&mut c, &["XPENDING", key, g]));
        // [id, consumer, idle, deliveries]: the idle time left out.
        let V::Array(ext) = q(&mut c, &["XPENDING", key, g, "-", "+", "100"]) else {
            panic!("xpending");
        };
        out.extend(ext.into_iter().map(|e| match e {
            V::Array(mut a) if a.len() == 4 => {
                a.remove(2);
                V::Array(a)
            }
            e => e,
        }));
    }
    out
}

#[test]
fn stream_group_writes_reach_replicas_as_redis_sends_them() {
    let dirs: Vec<_> = (0..5).map(|_| tempfile::tempdir().expect("tmp")).collect();
    let rm = Proc::redis(dirs[0].path(), &[]);
    let rr = Proc::redis(dirs[1].path(), &[]);
    let tm = Proc::node(dirs[2].path(), &[]);
    let tr_redis = Proc::redis(dirs[3].path(), &[]);
    let tr_node = Proc::node(dirs[4].path(), &[]);
    replicate(&rr, &rm);
    replicate(&tr_redis, &tm);
    replicate(&tr_node, &tm);
    let want_replies = workload(&rm);
    let got_replies = workload(&tm);
    assert_eq!(got_replies, want_replies, "replies");
    wait_caught_up(&rm, &rr);
    wait_caught_up(&tm, &tr_redis);
    wait_caught_up(&tm, &tr_node);
    for key in ["s", "s2"] {
        let want = group_state(&rr, key);
        assert_eq!(
            group_state(&rm, key),
            group_state(&tm, key),
            "masters: {key}"
        );
        assert_eq!(group_state(&tr_redis, key), want, "redis replica: {key}");
        assert_eq!(group_state(&tr_node, key), want, "tessera replica: {key}");
    }
}

/// The propagated forms also go to the AOF: a restart replays them to the groups a replica
/// has (which the test above shows equal to redis's replica).
#[test]
fn stream_group_writes_replay_from_the_aof() {
    let (dir, rdir) = two_dirs();
    let aof = [
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ];
    let replica = Proc::node(rdir.path(), &[]);
    let want: Vec<_> = {
        let m = Proc::node(dir.path(), &aof);
        replicate(&replica, &m);
        workload(&m);
        wait_caught_up(&m, &replica);
        ["s", "s2"]
            .iter()
            .map(|k| group_state(&replica, k))
            .collect()
    };
    let m = Proc::node(dir.path(), &aof);
    let after: Vec<_> = ["s", "s2"].iter().map(|k| group_state(&m, k)).collect();
    assert_eq!(after, want);
}
