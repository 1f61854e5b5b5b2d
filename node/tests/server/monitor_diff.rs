//! MONITOR's feed against redis-server 7.0 (issue 18): the same commands on both servers,
//! the monitor's lines compared with the timestamp and the client address masked.

use tessera_testkit::*;

/// What a monitor saw while another client ran `cmds` (each line without its timestamp
/// and with the client's address as ADDR), up to the final PING.
fn monitor_lines(s: &Server, cmds: &[&[&str]]) -> Vec<String> {
    let mut m = s.resp();
    assert_eq!(m.cmd(&["MONITOR"]), Reply::Simple("OK".into()));
    let mut c = s.resp();
    let addr = match c.cmd(&["CLIENT", "INFO"]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b)
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("addr=").map(String::from))
            .expect("addr"),
        r => panic!("CLIENT INFO: {r:?}"),
    };
    for args in cmds {
        c.cmd(args);
    }
    c.cmd(&["PING"]);
    let mut lines = Vec::new();
    for _ in 0..200 {
        let Reply::Simple(l) = m.read() else {
            panic!("monitor read a non-line after {lines:?}")
        };
        // "<secs>.<usecs> [<db> <origin>] args"
        let l = l.split_once(' ').map(|(_, rest)| rest).unwrap_or(&l);
        let l = l.replace(&addr, "ADDR");
        let done = l.ends_with("\"PING\"");
        lines.push(l);
        if done {
            return lines;
        }
    }
    panic!("no PING line in {lines:?}");
}

/// Commands run by scripts and functions show as `[<db> lua] "cmd" ...` right after the
/// EVAL / EVALSHA / FCALL line (fed before the script runs), in the script's db, also
/// inside MULTI; the rest of the feed (MULTI/EXEC, redaction) as Redis.
#[test]
fn monitor_shows_script_commands_like_redis() {
    let script = "redis.call('set',KEYS[1],ARGV[1]); redis.call('select','5'); \
                  redis.call('incrby','n',7); return redis.pcall('get','x')";
    let lib = "#!lua name=test\nredis.register_function('test', function() \
               return redis.call('set', 'foo', 'bar') end)";
    let sha = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";
    let cmds: &[&[&str]] = &[
        &["SELECT", "3"],
        &["EVAL", script, "1", "foo", "bar"],
        &["EVAL", "return 1", "0"],
        &["SCRIPT", "LOAD", "return redis.call('get', 'foo')"],
        &["EVALSHA", sha, "0"],
        &["EVALSHA_RO", sha, "0"],
        &["EVAL_RO", "return redis.call('exists', 'foo')", "0"],
        &["EVALSHA", &"0".repeat(40), "0"],
        &["EVAL", "return redis.call('nosuchcmd')", "0"],
        &["FUNCTION", "LOAD", "REPLACE", lib],
        &["FCALL", "test", "0"],
        &["FCALL", "nosuchfn", "0"],
        &["MULTI"],
        &["SET", "a", "1"],
        &["EVAL", "return redis.call('incr','n')", "0"],
        &["EXEC"],
        &["MULTI"],
        &["SYNTAX", "ERR"],
        &["EXEC"],
        &["AUTH", "x"],
        &["AUTH", "x", "y"],
        &["HELLO", "2", "AUTH", "a", "b"],
        &["CONFIG", "SET", "maxmemory", "0"],
        &["SET", "i", "-12"],
    ];
    let [r, t] = [Launch::redis(), Launch::tessera()].map(|l| l.args(&["--save", ""]).start());
    assert_eq!(monitor_lines(&r, cmds), monitor_lines(&t, cmds));
}
