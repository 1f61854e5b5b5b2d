//! min-replicas-to-write refuses scripts that declare writes (a function without the
//! no-writes flag, an EVAL with a shebang without it) up front with NOREPLICAS, as Redis's
//! processCommand does with the script's effective flags (integration/replication-4
//! "With min-slaves-to-write function without no-write flag"). Compared with redis-server.

use tessera_testkit::*;

use crate::start;

fn scripts_without_replicas(tessera: bool) -> Vec<String> {
    let master = start(tessera, &["--save", ""]);
    let mut m = master.resp();
    let lib = "#!lua name=test\n\
        redis.register_function{function_name='f_default_flags', callback=function(keys, args) return redis.call('get',keys[1]) end, flags={}}\n\
        redis.register_function{function_name='f_no_writes', callback=function(keys, args) return redis.call('get',keys[1]) end, flags={'no-writes'}}";
    let mut seen = Vec::new();
    for c in [
        vec!["FUNCTION", "LOAD", "REPLACE", lib],
        vec!["SET", "foo", "12345"],
        vec!["CONFIG", "SET", "min-replicas-to-write", "1"],
        vec!["FCALL", "f_default_flags", "1", "foo"],
        vec!["FCALL_RO", "f_default_flags", "1", "foo"],
        vec!["FCALL", "f_no_writes", "1", "foo"],
        vec!["FCALL_RO", "f_no_writes", "1", "foo"],
        vec!["EVAL", "#!lua\nreturn redis.call('get','foo')", "0"],
        vec![
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get','foo')",
            "0",
        ],
        vec!["EVAL", "return redis.call('get','foo')", "0"],
        vec!["SET", "foo", "bar"],
        vec!["GET", "foo"],
    ] {
        seen.push(format!("{} -> {}", c[0], R::from(m.cmd(&c)).s()));
    }
    seen
}

#[test]
fn scripts_that_may_write_get_noreplicas_like_redis() {
    let theirs = scripts_without_replicas(false);
    let ours = scripts_without_replicas(true);
    assert_eq!(ours, theirs);
}
