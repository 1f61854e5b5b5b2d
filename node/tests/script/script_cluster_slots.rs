//! EVAL in cluster mode, compared with redis-server 7.0 (issue 18, unit/cluster-scripting):
//! a script with a shebang keeps to one slot (the declared keys' one, else the first it
//! touches) unless it declares allow-cross-slot-keys; a script without a shebang may touch
//! any local slot.

use std::time::Duration;

use tessera_testkit::*;

fn one_node_cluster(bin: &str) -> Server {
    let s = Launch::new(bin)
        .args(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--cluster-enabled",
            "yes",
        ])
        .start();
    let mut c = s.resp();
    assert_eq!(
        c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        Reply::Simple("OK".into())
    );
    wait_until(
        "cluster_state:ok",
        Duration::from_secs(60),
        || matches!(c.cmd(&["CLUSTER", "INFO"]), Reply::Bulk(b) if String::from_utf8_lossy(&b).contains("cluster_state:ok")),
    );
    s
}

#[test]
fn eval_slot_rules_in_cluster_mode_match_redis() {
    let cases: &[&[&str]] = &[
        &["EVAL", "#!lua\nredis.call('set', 'foo', 'bar')\nredis.call('set', 'bar', 'foo')\nreturn 'OK'", "0"],
        &["EVAL", "redis.call('set', 'foo', 'bar'); redis.call('set', 'bar', 'foo')", "0"],
        &["EVAL", "#!lua flags=allow-cross-slot-keys\nredis.call('set', 'foo', 'bar'); redis.call('set', 'bar', 'foo')", "0"],
        &["EVAL", "#!lua\nredis.call('set', 'foo', 'bar')\nreturn 'OK'", "1", "bar"],
        &["EVAL", "#!lua\nredis.call('set', 'bar', 'x')\nreturn redis.call('get', 'bar')", "1", "bar"],
        &["EVAL", "#!lua\nreturn redis.pcall('get', 'foo')", "1", "bar"],
        &["EVAL", "#!lua\nredis.call('get', '{bar}1')\nreturn redis.pcall('get', 'foo')", "0"],
        &["EVAL", "#!lua flags=no-writes\nreturn redis.pcall('mget', 'foo', 'bar')", "0"],
        &["FUNCTION", "LOAD", "REPLACE", "#!lua name=crossslot\nlocal function f(keys, args)\n  redis.call('set', 'foo', 'bar')\n  redis.call('set', 'bar', 'foo')\n  return 'OK'\nend\nredis.register_function('test_cross_slot', f)\nredis.register_function{function_name='cross_ok', callback=f, flags={'allow-cross-slot-keys'}}"],
        &["FCALL", "test_cross_slot", "0"],
        &["FCALL", "cross_ok", "0"],
    ];
    let run = |s: &Server| {
        let mut c = s.resp();
        cases
            .iter()
            .map(|a| format!("{a:?} -> {:?}", c.cmd(a)))
            .collect::<Vec<_>>()
    };
    let (r, t) = (
        one_node_cluster(redis_bin()),
        one_node_cluster(tessera_bin()),
    );
    let (want, got) = (run(&r), run(&t));
    let diffs: Vec<String> = want
        .iter()
        .zip(&got)
        .filter(|(w, g)| w != g)
        .map(|(w, g)| format!("redis:   {w}\ntessera: {g}"))
        .collect();
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
