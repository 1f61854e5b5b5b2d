//! Smaller unit/scripting behaviours, compared with redis-server 7.0 (issue 18): SORT of a
//! set BY a constant inside a script is ordered (ALPHA), as Redis forces it for scripts.

use tessera_testkit::diff::*;

#[test]
fn sort_by_constant_in_a_script_is_ordered_like_redis() {
    let cases: &[&[&str]] = &[
        &[
            "SADD", "myset", "a", "b", "c", "d", "e", "f", "g", "h", "i", "l", "m", "n", "o", "p",
            "q", "r", "s", "t", "u", "v", "z", "aa", "aaa", "azz",
        ],
        &[
            "EVAL",
            "return redis.call('sort',KEYS[1],'by','_')",
            "1",
            "myset",
        ],
        &[
            "EVAL",
            "return redis.call('sort',KEYS[1],'by','_','get','#','get','_:*')",
            "1",
            "myset",
        ],
        &[
            "EVAL",
            "return redis.call('sort',KEYS[1],'by','_','limit','0','3')",
            "1",
            "myset",
        ],
        &["RPUSH", "mylist", "c", "a", "b"],
        &[
            "EVAL",
            "return redis.call('sort',KEYS[1],'by','_')",
            "1",
            "mylist",
        ],
    ];
    let run = |s: &Server| {
        let mut c = Conn::connect(s.port);
        cases
            .iter()
            .map(|a| format!("{a:?} -> {:?}", c.cmd(a)))
            .collect::<Vec<_>>()
    };
    let (r, t) = (redis(), tessera());
    assert_eq!(run(&t), run(&r));
}

/// What a script declaring writes (a shebang without no-writes) gets up front, as Redis
/// flags such an EVAL a write command (unit/scripting "no-writes shebang flag on replica",
/// "not enough good replicas"): NOREPLICAS, READONLY on a read-only replica, MASTERDOWN on
/// a stale one without allow-stale, and the *_RO refusal.
#[test]
fn declared_write_scripts_refused_up_front_like_redis() {
    let cases: &[&[&str]] = &[
        &["SET", "x", "some value"],
        &["EVAL_RO", "#!lua\nreturn redis.call('get','x')", "1", "x"],
        &[
            "EVAL_RO",
            "#!lua flags=no-writes\nreturn redis.call('get','x')",
            "1",
            "x",
        ],
        &["CONFIG", "SET", "min-replicas-to-write", "1"],
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get','x')",
            "1",
            "x",
        ],
        &["EVAL", "return redis.call('get','x')", "1", "x"],
        &["EVAL", "#!lua\nreturn redis.call('get','x')", "1", "x"],
        &["EVAL", "return redis.call('set','x', 1)", "1", "x"],
        &["CONFIG", "SET", "min-replicas-to-write", "0"],
        &["REPLICAOF", "127.0.0.1", "1"],
        &["EVAL", "#!lua\nreturn redis.call('get','x')", "1", "x"],
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get','x')",
            "1",
            "x",
        ],
        &["EVAL", "return redis.call('get','x')", "1", "x"],
        &["EVAL", "return redis.pcall('set','x','y')", "1", "x"],
        &["CONFIG", "SET", "replica-serve-stale-data", "no"],
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get','x')",
            "1",
            "x",
        ],
        &["EVAL", "#!lua flags=no-writes,allow-stale\nreturn 1", "0"],
        &["EVAL", "return 1", "0"],
        &["CONFIG", "SET", "replica-read-only", "no"],
        &["EVAL", "#!lua\nreturn 1", "0"],
        &["CONFIG", "SET", "replica-serve-stale-data", "yes"],
        &["EVAL", "#!lua\nreturn redis.call('set','x','z')", "0"],
        &["REPLICAOF", "NO", "ONE"],
    ];
    let run = |s: &Server| {
        let mut c = Conn::connect(s.port);
        cases
            .iter()
            .map(|a| format!("{a:?} -> {:?}", c.cmd(a)))
            .collect::<Vec<_>>()
    };
    let (r, t) = (redis(), tessera());
    let (want, got) = (run(&r), run(&t));
    let diffs: Vec<String> = want
        .iter()
        .zip(&got)
        .filter(|(w, g)| w != g)
        .map(|(w, g)| format!("redis:   {w}\ntessera: {g}"))
        .collect();
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// INFO from inside a script answers as from a client (it failed with "C stack
/// overflow": the Lua state's memory was read through a borrow the running script held).
#[test]
fn info_from_a_script_matches_redis() {
    let cases: &[&[&str]] = &[
        &["EVAL", "return type(redis.call('info','memory'))", "0"],
        &[
            "EVAL",
            "return string.match(redis.call('info','memory'), 'used_memory_lua:%d+') ~= nil",
            "0",
        ],
        &["EVAL", "return type(redis.call('info'))", "0"],
    ];
    let run = |s: &Server| {
        let mut c = Conn::connect(s.port);
        cases
            .iter()
            .map(|a| format!("{a:?} -> {:?}", c.cmd(a)))
            .collect::<Vec<_>>()
    };
    let (r, t) = (redis(), tessera());
    assert_eq!(run(&t), run(&r));
}

fn used_memory_lua(c: &mut Conn) -> u64 {
    let Reply::Bulk(info) = c.cmd(&["INFO", "memory"]) else {
        panic!("INFO memory");
    };
    String::from_utf8_lossy(&info)
        .lines()
        .find_map(|l| l.strip_prefix("used_memory_lua:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(u64::MAX)
}

/// unit/scripting "EVAL does not leak in the Lua stack": after SCRIPT FLUSH ("reset Lua
/// VM") used_memory_lua is back under 100 KB even where no script ran since, as the test
/// asserts of Redis's fresh VM. Tessera's per-thread Lua state drops its compiled scripts
/// when it is next used, or when INFO reads its memory.
#[test]
fn script_flush_releases_the_lua_memory() {
    let t = tessera();
    let mut c = Conn::connect(t.port);
    for i in 0..500 {
        let body = format!("local t = {{}} for i = 1, 10 do t[i] = i * {i} end return #t");
        assert_eq!(c.cmd(&["EVAL", &body, "0"]), Reply::Int(10));
    }
    let before = used_memory_lua(&mut c);
    assert!(
        before > 200 * 1024,
        "500 compiled scripts take room: {before}"
    );
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH"]), Reply::Simple("OK".into()));
    let after = used_memory_lua(&mut c);
    assert!(
        after < 100 * 1024,
        "used_memory_lua {after} after SCRIPT FLUSH"
    );
    // And it stays bounded over many runs, as Redis's periodic GC step keeps it.
    c.cmd(&["SET", "x", "0"]);
    let mut cmds = Vec::new();
    for _ in 0..10_000 {
        cmds.extend(tessera_testkit::resp::encode(&[
            b"EVAL",
            b"return redis.call('incr',KEYS[1])",
            b"1",
            b"x",
        ]));
    }
    let replies = c.pipeline(cmds, 10_000);
    assert_eq!(replies.last(), Some(&Reply::Int(10_000)));
    let end = used_memory_lua(&mut c);
    assert!(end < 100 * 1024, "used_memory_lua {end} after 10000 EVALs");
}

/// EXEC of a queue holding a script that declares writes, once the server became a
/// read-only replica: the whole transaction is refused, as Redis checks the queued
/// commands' effective flags (unit/scripting "no-writes shebang flag on replica").
#[test]
fn exec_of_a_declared_write_script_on_a_replica_like_redis() {
    let run = |s: &Server| {
        let (mut a, mut b, mut c) = (
            Conn::connect(s.port),
            Conn::connect(s.port),
            Conn::connect(s.port),
        );
        let mut out = Vec::new();
        out.push(format!("{:?}", a.cmd(&["MULTI"])));
        out.push(format!("{:?}", a.cmd(&["EVAL", "#!lua\nreturn 1", "0"])));
        out.push(format!("{:?}", b.cmd(&["MULTI"])));
        out.push(format!(
            "{:?}",
            b.cmd(&["EVAL", "redis.call('set','x',1)\nreturn 1", "1", "x"])
        ));
        out.push(format!("{:?}", c.cmd(&["MULTI"])));
        out.push(format!(
            "{:?}",
            c.cmd(&["EVAL", "#!lua flags=no-writes\nreturn 1", "0"])
        ));
        let mut admin = Conn::connect(s.port);
        out.push(format!("{:?}", admin.cmd(&["REPLICAOF", "127.0.0.1", "1"])));
        out.push(format!("{:?}", a.cmd(&["EXEC"])));
        out.push(format!("{:?}", b.cmd(&["EXEC"])));
        out.push(format!("{:?}", c.cmd(&["EXEC"])));
        out.push(format!("{:?}", admin.cmd(&["REPLICAOF", "NO", "ONE"])));
        out
    };
    let (r, t) = (redis(), tessera());
    let (want, got) = (run(&r), run(&t));
    assert_eq!(got, want);
}

/// unit/scripting "allow-stale shebang flag": on a stale replica an allow-stale script may
/// call commands Redis flags stale (ECHO), by EVAL and EVALSHA; COMMAND INFO ECHO agrees.
#[test]
fn allow_stale_script_calls_echo_like_redis() {
    let body = "#!lua flags=allow-stale,no-writes\nreturn redis.call('echo','foobar')";
    let cases: &[&[&str]] = &[
        &["COMMAND", "INFO", "ECHO"],
        &["CONFIG", "SET", "replica-serve-stale-data", "no"],
        &["REPLICAOF", "127.0.0.1", "1"],
        &["EVAL", body, "0"],
        &["SCRIPT", "LOAD", body],
        &["EVALSHA", "0b4b1b1e6e0d4bd19a58a2a8afe19ab1e09f1f4e", "0"],
        &["REPLICAOF", "NO", "ONE"],
    ];
    let run = |s: &Server| {
        let mut c = Conn::connect(s.port);
        let mut out: Vec<String> = cases
            .iter()
            .map(|a| format!("{a:?} -> {:?}", c.cmd(a)))
            .collect();
        c.cmd(&["REPLICAOF", "127.0.0.1", "1"]);
        let Reply::Bulk(sha) = c.cmd(&["SCRIPT", "LOAD", body]) else {
            panic!("SCRIPT LOAD");
        };
        let sha = String::from_utf8_lossy(&sha).into_owned();
        out.push(format!("{:?}", c.cmd(&["EVALSHA", &sha, "0"])));
        c.cmd(&["REPLICAOF", "NO", "ONE"]);
        out
    };
    let (r, t) = (redis(), tessera());
    assert_eq!(run(&t), run(&r));
}
