//! Scripts past maxmemory, compared with redis-server 7.0 (issue 18, unit/scripting
//! "Script - disallow write on OOM" and "allow-oom shebang flag"): a script without a
//! shebang may not run a deny-oom command before its first write when the server was out
//! of memory as it started; a shebang without allow-oom (or no-writes) is refused up front.

use tessera_testkit::diff::*;

#[test]
fn scripts_out_of_memory_like_redis() {
    let cases: &[&[&str]] = &[
        &["SET", "x", "123"],
        &["CONFIG", "SET", "maxmemory", "1"],
        &["EVAL", "redis.call('set', 'x', 1)", "0"],
        &["EVAL", "return redis.pcall('set', 'x', 1)", "0"],
        &["EVAL", "return redis.call('get', 'x')", "1", "x"],
        &[
            "EVAL",
            "redis.call('get', 'x'); return redis.pcall('set', 'x', 2)",
            "0",
        ],
        // A write that is not deny-oom makes the script dirty: later writes go through.
        &[
            "EVAL",
            "redis.call('del', 'y'); return redis.pcall('set', 'x', 3)",
            "0",
        ],
        &["GET", "x"],
        &["EVAL", "#!lua flags=\nreturn 1", "0"],
        &["EVAL", "#!lua\nreturn 1", "0"],
        &[
            "EVAL",
            "#!lua flags=allow-oom\nredis.call('set','x',4)\nreturn 1",
            "1",
            "x",
        ],
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get','x')",
            "0",
        ],
        &["EVAL_RO", "return redis.call('get','x')", "1", "x"],
        &["GET", "x"],
        &["CONFIG", "SET", "maxmemory", "0"],
        &["EVAL", "return redis.call('set', 'x', 5)", "0"],
        &["GET", "x"],
    ];
    let run = |s: &Server| {
        let mut c = Conn::connect(s.port);
        cases
            .iter()
            .map(|args| format!("{args:?} -> {:?}", c.cmd(args)))
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
