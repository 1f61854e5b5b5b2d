//! `redis.set_repl`, compared with redis-server 7.0 (issue 18, unit/scripting): its
//! argument checks, and REPL_NONE keeping a script's writes from its replica.

use std::time::Duration;

use tessera_testkit::diff::*;
use tessera_testkit::*;

#[test]
fn set_repl_arguments_match_redis() {
    let (t, r) = (tessera(), redis());
    let (mut a, mut b) = (t.resp(), r.resp());
    let scripts = [
        "redis.set_repl()",
        "redis.set_repl(12345)",
        "redis.set_repl(1, 2)",
        "redis.set_repl('a') return 1",
        "redis.set_repl(1.5) return 1",
        "redis.set_repl(-1) return 1",
        "redis.set_repl(4) return 1",
        "redis.set_repl(redis.REPL_ALL) return 1",
        "return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}",
    ];
    let mut fails = Vec::new();
    for s in scripts {
        let (x, y) = (a.cmd(&["EVAL", s, "0"]), b.cmd(&["EVAL", s, "0"]));
        if x != y {
            fails.push(format!("{s}\n  tessera: {x:?}\n  redis:   {y:?}"));
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// What a replica of `bin` holds after a script that writes a, then b under REPL_NONE,
/// then d under REPL_ALL again.
fn replica_view(bin: &'static str) -> (Reply, Reply) {
    let m = Launch::new(bin)
        .args(&["--save", "", "--appendonly", "no"])
        .start();
    let port = m.port.to_string();
    let r = Launch::new(bin)
        .args(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--replicaof",
            "127.0.0.1",
            &port,
        ])
        .start();
    let mut mc = m.resp();
    let mut rc = r.resp();
    wait_until(
        "the replica in sync",
        Duration::from_secs(60),
        || matches!(rc.cmd(&["INFO", "replication"]), Reply::Bulk(b) if String::from_utf8_lossy(&b).contains("master_link_status:up")),
    );
    mc.cmd(&[
        "EVAL",
        "redis.call('set','a','1'); redis.set_repl(redis.REPL_NONE); redis.call('set','b','2'); redis.set_repl(redis.REPL_ALL); redis.call('set','d','4')",
        "0",
    ]);
    mc.cmd(&["SET", "done", "1"]);
    wait_until("the writes on the replica", Duration::from_secs(60), || {
        rc.cmd(&["GET", "done"]) == Reply::Bulk(b"1".to_vec())
    });
    (
        mc.cmd(&["MGET", "a", "b", "d"]),
        rc.cmd(&["MGET", "a", "b", "d"]),
    )
}

#[test]
fn repl_none_keeps_writes_from_the_replica_as_redis() {
    let want = replica_view(redis_bin());
    assert_eq!(
        want.1,
        Reply::Array(vec![
            Reply::Bulk(b"1".to_vec()),
            Reply::Null,
            Reply::Bulk(b"4".to_vec())
        ])
    );
    assert_eq!(replica_view(tessera_bin()), want);
}

/// On a replica whose link is down with replica-serve-stale-data no, an allow-stale script
/// may run but the commands it calls must be flagged stale themselves (Redis's
/// scriptVerifyAllowStale): GET answers "Can not execute the command on a stale replica".
#[test]
fn stale_replica_script_calls_match_redis() {
    let (t, r) = (tessera(), redis());
    let lib = "#!lua name=test
redis.register_function{function_name='f1', callback=function() return 'hello' end, flags={'no-writes'}}
redis.register_function{function_name='f2', callback=function() return 'hello' end, flags={'allow-stale', 'no-writes'}}
redis.register_function{function_name='f3', callback=function() return redis.call('get', 'x') end, flags={'allow-stale', 'no-writes'}}
redis.register_function{function_name='f4', callback=function() return type(redis.call('info', 'server')) end, flags={'allow-stale', 'no-writes'}}
redis.register_function{function_name='f5', callback=function() return redis.pcall('get', 'x') end, flags={'allow-stale', 'no-writes'}}";
    let steps: &[&[&str]] = &[
        &["FUNCTION", "LOAD", lib],
        &["CONFIG", "SET", "replica-serve-stale-data", "no"],
        &["REPLICAOF", "127.0.0.1", "1"],
        &["FCALL", "f1", "0"],
        &["FCALL", "f2", "0"],
        &["FCALL", "f3", "0"],
        &["FCALL", "f4", "0"],
        &["FCALL", "f5", "0"],
        &[
            "EVAL",
            "#!lua flags=allow-stale,no-writes\nreturn redis.call('get','x')",
            "0",
        ],
        &[
            "EVAL",
            "#!lua flags=allow-stale,no-writes\nreturn redis.pcall('ping')",
            "0",
        ],
        &["REPLICAOF", "NO", "ONE"],
        &["FCALL", "f3", "0"],
    ];
    let (mut a, mut b) = (t.resp(), r.resp());
    let mut fails = Vec::new();
    for s in steps {
        let (x, y) = (a.cmd(s), b.cmd(s));
        if x != y {
            fails.push(format!("{s:?}\n  tessera: {x:?}\n  redis:   {y:?}"));
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// DEBUG LOADAOF on a read-only replica replays the AOF's writes (FUNCTION LOAD, SET...):
/// the replay is the server's own client, not refused as a write from a user (unit/functions
/// "FUNCTION can processes create, delete and flush commands in AOF when doing debug
/// loadaof in read-only slaves").
#[test]
fn loadaof_on_a_read_only_replica_matches_redis() {
    let args = ["--enable-debug-command", "yes", "--appendonly", "yes"];
    let (t, r) = (tessera_with(&args), Server::redis(&args));
    let lib = "#!lua name=test\nredis.register_function('test', function() return 'hello' end)";
    let steps: &[&[&str]] = &[
        &["FUNCTION", "LOAD", lib],
        &["SET", "k", "v"],
        &["CONFIG", "SET", "replica-read-only", "yes"],
        &["REPLICAOF", "127.0.0.1", "0"],
        &["DEBUG", "LOADAOF"],
        &["REPLICAOF", "NO", "ONE"],
        &["FUNCTION", "LIST"],
        &["GET", "k"],
        &["FUNCTION", "DELETE", "test"],
        &["REPLICAOF", "127.0.0.1", "0"],
        &["DEBUG", "LOADAOF"],
        &["REPLICAOF", "NO", "ONE"],
        &["FUNCTION", "LIST"],
    ];
    let (mut a, mut b) = (t.resp(), r.resp());
    let mut fails = Vec::new();
    for s in steps {
        let (x, y) = (a.cmd(s), b.cmd(s));
        if x != y {
            fails.push(format!("{s:?}\n  tessera: {x:?}\n  redis:   {y:?}"));
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// unit/scripting "Test selective replication of certain Redis commands from Lua": under
/// REPL_AOF a write reaches the AOF and not the replica, under REPL_REPLICA the replica and
/// not the AOF. Returns (the replica's view, the master's view after DEBUG LOADAOF).
fn selective_view(bin: &'static str) -> (Reply, Reply) {
    let m = Launch::new(bin)
        .args(&[
            "--save",
            "",
            "--appendonly",
            "yes",
            "--enable-debug-command",
            "yes",
        ])
        .start();
    let port = m.port.to_string();
    let r = Launch::new(bin)
        .args(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--replicaof",
            "127.0.0.1",
            &port,
        ])
        .start();
    let (mut mc, mut rc) = (m.resp(), r.resp());
    wait_until(
        "the replica in sync",
        Duration::from_secs(60),
        || matches!(rc.cmd(&["INFO", "replication"]), Reply::Bulk(b) if String::from_utf8_lossy(&b).contains("master_link_status:up")),
    );
    let script = "redis.call('set','a','1')
redis.set_repl(redis.REPL_NONE)
redis.call('set','b','2')
redis.set_repl(redis.REPL_AOF)
redis.call('set','c','3')
redis.set_repl(redis.REPL_REPLICA)
redis.call('set','e','5')
redis.set_repl(redis.REPL_ALL)
redis.call('set','d','4')";
    let r1 = mc.cmd(&["EVAL", script, "0"]);
    assert_eq!(r1, Reply::Null, "{bin}");
    mc.cmd(&["SET", "done", "1"]);
    wait_until("the writes on the replica", Duration::from_secs(60), || {
        rc.cmd(&["GET", "done"]) == Reply::Bulk(b"1".to_vec())
    });
    let keys = ["MGET", "a", "b", "c", "d", "e"];
    let replica = rc.cmd(&keys);
    let r2 = mc.cmd(&["DEBUG", "LOADAOF"]);
    assert_eq!(r2, Reply::Simple("OK".into()), "{bin}");
    (replica, mc.cmd(&keys))
}

#[test]
fn repl_aof_and_repl_replica_reach_their_target_only_as_redis() {
    let want = selective_view(redis_bin());
    let b = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    assert_eq!(
        want,
        (
            Reply::Array(vec![b("1"), Reply::Null, Reply::Null, b("4"), b("5")]),
            Reply::Array(vec![b("1"), Reply::Null, b("3"), b("4"), Reply::Null]),
        )
    );
    assert_eq!(selective_view(tessera_bin()), want);
}

/// unit/scripting "not enough good replicas" right after the replica left: the master
/// counts its good replicas again when one goes (Redis's refreshGoodSlavesCount), so
/// min-replicas-to-write refuses writes at once instead of after its next cron.
fn writes_after_replica_left(bin: &'static str) -> Vec<String> {
    let m = Launch::new(bin)
        .args(&["--save", "", "--appendonly", "no"])
        .start();
    let port = m.port.to_string();
    let mut r = Launch::new(bin)
        .args(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--replicaof",
            "127.0.0.1",
            &port,
        ])
        .start();
    let mut mc = m.resp();
    let online = |mc: &mut Conn, want: &str| matches!(mc.cmd(&["INFO", "replication"]), Reply::Bulk(b) if String::from_utf8_lossy(&b).contains(want));
    wait_until("the replica online", Duration::from_secs(60), || {
        online(&mut mc, "connected_slaves:1")
    });
    // Let the master's periodic count see the replica as good.
    std::thread::sleep(Duration::from_millis(1500));
    r.kill();
    wait_until("the replica gone", Duration::from_secs(60), || {
        online(&mut mc, "connected_slaves:0")
    });
    let mut out = vec![format!(
        "{:?}",
        mc.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"])
    )];
    for args in [
        &["EVAL", "#!lua\nreturn 1", "0"][..],
        &["SET", "x", "1"],
        &["EVAL", "#!lua flags=no-writes\nreturn 1", "0"],
    ] {
        out.push(format!("{args:?} -> {:?}", mc.cmd(args)));
    }
    out
}

#[test]
fn good_replicas_recounted_when_one_leaves_as_redis() {
    let want = writes_after_replica_left(redis_bin());
    assert_eq!(writes_after_replica_left(tessera_bin()), want);
}

/// unit/scripting "not enough good replicas state change during long script": a script
/// writes, then loops on INFO until its master has no replica left, then writes again. The
/// replica is told REPLICAOF NO ONE meanwhile. Redis notices the closed link from inside
/// the busy script; tessera-node with one I/O thread (the replica's link on the script's
/// own thread) hung until the script ended, that is forever.
fn script_sees_replica_leave(bin: &'static str, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["--save", "", "--appendonly", "no"];
    args.extend_from_slice(extra);
    let m = Launch::new(bin).args(&args).start();
    let r = Launch::new(bin).args(&args).start();
    let mut mc = m.resp();
    let mut rc = r.resp();
    let port = m.port.to_string();
    rc.cmd(&["REPLICAOF", "127.0.0.1", &port]);
    let online = |mc: &mut Conn| matches!(mc.cmd(&["INFO", "replication"]), Reply::Bulk(b) if String::from_utf8_lossy(&b).contains("state=online"));
    wait_until("the replica online", Duration::from_secs(60), || {
        online(&mut mc)
    });
    let mut out = vec![
        format!(
            "{:?}",
            mc.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"])
        ),
        format!("{:?}", mc.cmd(&["CONFIG", "SET", "lua-time-limit", "10"])),
    ];
    let mut sc = m.resp();
    sc.send(&[
        "EVAL",
        "redis.call('set','x','script value')\n\
         while true do\n\
           local info = redis.call('info','replication')\n\
           if string.match(info, 'connected_slaves:0') then\n\
             redis.call('set','x','after')\n\
             break\n\
           end\n\
         end\n\
         return 1",
        "1",
        "x",
    ]);
    wait_until(
        "the script busy",
        Duration::from_secs(30),
        || matches!(mc.cmd(&["PING"]), Reply::Error(ref e) if e.starts_with("BUSY")),
    );
    out.push(format!("{:?}", rc.cmd(&["REPLICAOF", "NO", "ONE"])));
    // A 30 s read timeout: the script that never sees the replica go is a failure, not a hang.
    sc.w.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    out.push(format!("{:?}", sc.read()));
    out.push(format!("{:?}", mc.cmd(&["GET", "x"])));
    out
}

#[test]
fn replica_leaving_during_a_busy_script_is_seen_like_redis() {
    let want = script_sees_replica_leave(redis_bin(), &[]);
    assert_eq!(
        want.last(),
        Some(&format!("{:?}", Reply::Bulk(b"after".to_vec()))),
        "redis-server: {want:?}"
    );
    assert_eq!(
        script_sees_replica_leave(tessera_bin(), &["--worker-threads", "1"]),
        want
    );
}
