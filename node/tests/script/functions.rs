//! Redis 7.0 functions, differential: FUNCTION LOAD / LIST / STATS / DELETE / FLUSH / DUMP
//! errors / RESTORE errors / HELP, FCALL and FCALL_RO (replies and every error) sent to
//! tessera-node and to redis-server 7.0.15, in RESP2 and RESP3; replies must be identical
//! (FUNCTION LIST, whose order is Redis's hash order, after sorting).

use tessera_testkit::*;

fn start(bin: &str) -> Server {
    Launch::new(bin)
        .args(&["--save", "", "--appendonly", "no"])
        .start()
}

/// The library most cases use: every registration form and flag, calls that succeed and
/// calls that fail in each way a function can.
const LIB: &str = "#!lua name=lib1
local function helper(x) return x .. '!' end
redis.register_function('set1', function(keys, args) return redis.call('set', keys[1], args[1]) end)
redis.register_function{function_name='get1', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes', 'allow-stale'}, description='reads one key'}
redis.register_function('unknown_cmd', function(keys, args) return redis.call('nope') end)
redis.register_function('bad_global', function(keys, args) return foo end)
redis.register_function('raise', function(keys, args) error('bad') end)
redis.register_function('reg_at_run', function(keys, args) return redis.register_function('z', function() end) end)
redis.register_function('set_global', function(keys, args) bar = 1 end)
redis.register_function('resp3', function(keys, args) redis.setresp(3) return redis.call('hgetall', keys[1]) end)
redis.register_function('pcall_err', function(keys, args) return redis.pcall('nope') end)
redis.register_function('err_reply', function(keys, args) return redis.error_reply('MY err') end)
redis.register_function{function_name='ro_writes', callback=function(keys, args) return redis.call('set', 'a', 'b') end, flags={'no-writes'}}
redis.register_function('counts', function(keys, args) return {#keys, #args, helper(args[1] or 'none')} end)
redis.register_function{function_name='flagged', callback=function() return 'ok' end, flags={'allow-oom', 'no-cluster', 'allow-cross-slot-keys'}}
redis.register_function('nested', function(keys, args) return redis.call('fcall', 'counts', 0) end)
redis.register_function('types', function() return {1, 'two', {3}, true, false, 3.99, redis.status_reply('ST')} end)
";

/// Each case: the arguments, and whether the reply is unordered.
fn cases() -> Vec<(Vec<String>, bool)> {
    let load = |body: &str| vec!["FUNCTION".into(), "LOAD".into(), body.to_string()];
    let lib = |name: &str, body: &str| format!("#!lua name={name}\n{body}");
    let reg_f = "redis.register_function('f', function() return 1 end)";
    let mut v: Vec<(Vec<String>, bool)> = Vec::new();
    let mut push = |a: Vec<String>| v.push((a, false));
    // Metadata and registration errors.
    for body in [
        "return 1".to_string(),
        "#!lua\nreturn 1".into(),
        "#!lua name=x foo=bar\nreturn 1".into(),
        "#!lua name=x foo\nreturn 1".into(),
        "#!py name=x\nreturn 1".into(),
        "#!lua name=a-b\nreturn 1".into(),
        "#!lua name=\nreturn 1".into(),
        "#!lua name=x".into(),
        "#!lua name=x name=y\nreturn 1".into(),
        lib("x", "return 1"),
        lib("x", "redis.register_function('a-b', function() return 1 end)"),
        lib("x", "redis.register_function('', function() return 1 end)"),
        lib("x", "redis.call('set','a','b')"),
        lib("x", "local x = redis.pcall"),
        lib("x", "local x = redis.setresp"),
        lib("x", "return math.random()"),
        lib("x", "error('boom')"),
        lib("x", "a = 1"),
        lib("x", &format!("{reg_f}\n{reg_f}")),
        lib("x", "redis.register_function('f')"),
        lib("x", "redis.register_function('f', 1)"),
        lib("x", "redis.register_function({}, function() end)"),
        lib("x", "redis.register_function(1,2,3)"),
        lib("x", "redis.register_function()"),
        lib("x", "redis.register_function{function_name='f', callback=function() return 1 end, flags={'bad'}}"),
        lib("x", "redis.register_function{function_name='f', callback=function() return 1 end, flags={1}}"),
        lib("x", "redis.register_function{function_name='f', callback=function() return 1 end, foo=1}"),
        lib("x", "redis.register_function{function_name='f'}"),
        lib("x", "redis.register_function{callback=function() return 1 end}"),
        lib("x", "redis.register_function{function_name='f', callback=function() return 1 end, flags='no-writes'}"),
        lib("x", "redis.register_function{function_name='f', callback=function() return 1 end, description={}}"),
        lib("x", "redis.register_function{function_name={}, callback=function() return 1 end}"),
        lib("x", "redis.register_function{function_name='f', callback=1}"),
        lib("x", "syntax error here"),
        lib("x", "redis.log(redis.LOG_WARNING)"),
        lib("x", "local a = 1 while true do a = a + 1 end"),
    ] {
        push(load(&body));
    }
    push(vec!["FUNCTION".into(), "LOAD".into()]);
    push(vec![
        "FUNCTION".into(),
        "LOAD".into(),
        "FOO".into(),
        lib("x", reg_f),
    ]);
    // A good library, loaded twice, replaced, and a function name clash.
    push(load(LIB));
    push(load(LIB));
    push(vec![
        "FUNCTION".into(),
        "LOAD".into(),
        "replace".into(),
        LIB.into(),
    ]);
    push(load(&lib(
        "other",
        "redis.register_function('set1', function() return 1 end)",
    )));
    push(load(&lib("lib2", &format!("{reg_f} redis.register_function{{function_name='g', callback=function() return redis.REDIS_VERSION end, description=7}}"))));
    push(load(&lib("LIB3", "redis.register_function('num', function(k, a) return tonumber(a[1]) * 2 end) redis.log(redis.LOG_DEBUG, 'loaded')")));
    // Function names are case-insensitive, library names are not.
    push(load(&lib(
        "LIB1",
        "redis.register_function('SET1', function() return 1 end)",
    )));
    push(load(&lib("LIB1", "redis.register_function('other_fn', function() return 1 end) redis.register_function('OTHER_FN', function() return 1 end)")));
    push(load(&lib(
        "LIB1",
        "redis.register_function('lib1_upper', function() return 'upper' end)",
    )));
    push(vec!["MULTI".into()]);
    push(load(&lib(
        "inmulti",
        "redis.register_function('im', function() return 'im' end)",
    )));
    push(vec!["FCALL".into(), "im".into(), "0".into()]);
    push(vec!["EXEC".into()]);
    push(vec!["FCALL".into(), "im".into(), "0".into()]);
    let c = |s: &str| -> Vec<String> { s.split(' ').map(str::to_string).collect() };
    for line in [
        "FCALL set1 1 k v",
        "FCALL get1 1 k",
        "FCALL_RO get1 1 k",
        "FCALL_RO set1 1 k v",
        "FCALL unknown_cmd 0",
        "FCALL bad_global 0",
        "FCALL raise 0",
        "FCALL reg_at_run 0",
        "FCALL set_global 0",
        "HSET hh a b",
        "FCALL resp3 1 hh",
        "FCALL pcall_err 0",
        "FCALL err_reply 0",
        "FCALL ro_writes 0",
        "FCALL_RO ro_writes 0",
        "FCALL counts 2 a b c d",
        "FCALL counts 0",
        "FCALL flagged 0",
        "FCALL nested 0",
        "FCALL types 0",
        "FCALL f 0",
        "FCALL g 0",
        "FCALL num 0 21",
        "FCALL SET1 1 k V",
        "FCALL Get1 1 k",
        "FCALL lib1_UPPER 0",
        "FUNCTION DELETE LiB1",
        "FCALL nope 0",
        "FCALL set1 3 a",
        "FCALL set1 -1",
        "FCALL set1 x",
        "FCALL nope x",
        "FCALL set1",
        "FCALL",
        "FCALL_RO",
        "EVAL return(redis.call('fcall','counts','0')) 0",
        "MULTI",
        "FCALL set1 1 k inmulti",
        "FCALL get1 1 k",
        "EXEC",
        "FCALL set1 99999999999999999999 k",
        "FCALL set1 1.5 k",
        "EVAL return(redis.call('function','stats')) 0",
        "EVAL return(redis.pcall('function','delete','lib1')) 0",
        "MULTI",
        "FUNCTION DELETE LIB3",
        "FCALL num 0 1",
        "FUNCTION LOAD #!lua_name=bad",
        "EXEC",
        "FCALL num 0 1",
        "FUNCTION STATS",
        "FUNCTION STATS extra",
        "FUNCTION LIST LIBRARYNAME",
        "FUNCTION LIST foo",
        "FUNCTION LIST WITHCODE WITHCODE",
        "FUNCTION DELETE nope",
        "FUNCTION DELETE",
        "FUNCTION FLUSH foo",
        "FUNCTION FLUSH sync extra",
        "FUNCTION KILL",
        "FUNCTION RESTORE abc",
        "FUNCTION RESTORE abc foo",
        "FUNCTION RESTORE abc flush extra",
        "FUNCTION HELP",
        "FUNCTION NOSUCH",
        "FUNCTION",
        "FUNCTION DUMP extra",
    ] {
        push(c(line));
    }
    for line in [
        "FUNCTION LIST",
        "FUNCTION LIST WITHCODE",
        "FUNCTION LIST LIBRARYNAME lib*",
        "FUNCTION LIST libraryname LIB? withcode",
        "FUNCTION LIST LIBRARYNAME nomatch",
    ] {
        v.push((c(line), true));
    }
    for (line, unordered) in [
        ("FUNCTION DELETE lib2", false),
        ("FCALL f 0", false),
        ("FUNCTION DELETE lib2", false),
        ("FLUSHALL", false),
        ("FCALL counts 1 x", false),
        ("FUNCTION LIST", true),
        ("FUNCTION FLUSH ASYNC", false),
        ("FUNCTION LIST", false),
        ("FUNCTION STATS", false),
        ("FCALL counts 0", false),
        ("FUNCTION FLUSH", false),
    ] {
        v.push((c(line), unordered));
    }
    v
}

fn check(a: &mut Conn, b: &mut Conn, cases: &[(Vec<String>, bool)], label: &str) -> usize {
    let mut failures = Vec::new();
    for (args, unordered) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (mut x, mut y): (Reply, Reply) = (a.cmd(&args), b.cmd(&args));
        if *unordered {
            x = x.normalized(true);
            y = y.normalized(true);
        }
        if x != y {
            failures.push(format!(
                "{label}: {args:?}\n  tessera: {x:?}\n  redis:   {y:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    cases.len()
}

#[test]
fn functions_match_redis() {
    let t = start(tessera_bin());
    let r = start(redis_bin());
    let cases = cases();
    for resp3 in [false, true] {
        let mut a = Conn::with_proto(t.port, resp3);
        let mut b = Conn::with_proto(r.port, resp3);
        for c in [&mut a, &mut b] {
            c.cmd(&["FUNCTION", "FLUSH"]);
            c.cmd(&["FLUSHALL"]);
        }
        let label = if resp3 { "RESP3" } else { "RESP2" };
        let n = check(&mut a, &mut b, &cases, label);
        eprintln!("functions: {n} commands identical ({label})");
    }
}

/// Sends `args` on a fresh connection of its own and returns its reply (for a call that
/// blocks the server until it is killed).
fn call_in_thread(port: u16, args: &[&str]) -> std::thread::JoinHandle<Reply> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut c = Conn::with_proto(port, false);
    std::thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        c.cmd(&a)
    })
}

/// PING on a new connection: its reply line, None if none came within a second.
fn probe_ping(port: u16) -> Option<String> {
    use std::io::{BufRead, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(1)))
        .ok()?;
    s.write_all(b"PING\r\n").ok()?;
    let mut line = String::new();
    std::io::BufReader::new(s).read_line(&mut line).ok()?;
    Some(line.trim_end().to_string())
}

/// FUNCTION STATS with the running time zeroed (it differs between any two runs).
fn stats_shape(c: &mut Conn) -> Reply {
    fn zero(r: Reply) -> Reply {
        match r {
            Reply::Map(kv) => Reply::Map(
                kv.into_iter()
                    .map(|(k, v)| {
                        let v = match (&k, v) {
                            (Reply::Bulk(n), Reply::Int(_)) if n == b"duration_ms" => Reply::Int(0),
                            (_, v) => zero(v),
                        };
                        (k, v)
                    })
                    .collect(),
            ),
            other => other,
        }
    }
    zero(c.cmd(&["FUNCTION", "STATS"]))
}

/// A function past busy-reply-threshold: other clients get -BUSY, FUNCTION STATS shows it,
/// SCRIPT KILL refuses, FUNCTION KILL stops it; replies as redis-server's.
#[test]
fn busy_function_stats_and_kill_match_redis() {
    let t = start(tessera_bin());
    let r = start(redis_bin());
    let lib = "#!lua name=loop\nredis.register_function{function_name='spin', callback=function() local a = 0 while true do a = a + 1 end end, flags={'no-writes'}}\nredis.register_function('other_fn', function() return 'lower' end)\nredis.register_function('OTHER_FN', function() return 'upper' end)";
    let mut transcripts = Vec::new();
    for port in [t.port, r.port] {
        let mut c = Conn::with_proto(port, true);
        let mut log = vec![
            c.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"]),
            c.cmd(&["FUNCTION", "LOAD", lib]),
            // (FCALL OTHER_FN is left out: which of the two redis keeps depends on its
            // random hash seed.)
        ];
        drop(c);
        let spin = call_in_thread(port, &["FCALL", "SPIN", "0"]);
        let started = std::time::Instant::now();
        // Probe on fresh connections with a short timeout until the server answers BUSY: in
        // tessera a connection accepted before the script passed the threshold may share
        // its I/O thread and wait for it (later ones avoid that thread).
        let busy = loop {
            if let Some(line) = probe_ping(port) {
                if line.starts_with("-BUSY") {
                    break line;
                }
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "never BUSY"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        log.push(Reply::Error(busy[1..].to_string()));
        let mut c = Conn::with_proto(port, true);
        log.push(stats_shape(&mut c));
        log.push(c.cmd(&["SCRIPT", "KILL"]));
        log.push(c.cmd(&["FUNCTION", "KILL"]));
        log.push(spin.join().expect("spin thread"));
        log.push(c.cmd(&["PING"]));
        log.push(c.cmd(&["FUNCTION", "KILL"]));
        log.push(stats_shape(&mut c));
        transcripts.push(log);
    }
    assert_eq!(transcripts[0], transcripts[1]);
}

/// allow-oom and allow-stale: with used memory over maxmemory a function that may write
/// and lacks allow-oom is refused; on a replica whose link is down with
/// replica-serve-stale-data no, one without allow-stale is. Transcripts as redis-server's.
#[test]
fn oom_and_stale_flags_match_redis() {
    let t = start(tessera_bin());
    let r = start(redis_bin());
    let lib = "#!lua name=flags
redis.register_function('plain', function() return redis.call('ping') end)
redis.register_function{function_name='ro', callback=function() return 'ro' end, flags={'no-writes'}}
redis.register_function{function_name='oom', callback=function() return 'oom' end, flags={'allow-oom'}}
redis.register_function{function_name='stale', callback=function() return 'stale' end, flags={'allow-stale'}}
redis.register_function{function_name='stale_ro', callback=function() return 'stale_ro' end, flags={'allow-stale', 'no-writes'}}";
    // A port nobody listens on: the replica's link stays down.
    let dead = free_port().to_string();
    let script: Vec<Vec<&str>> = vec![
        vec!["FUNCTION", "LOAD", lib],
        vec!["CONFIG", "SET", "maxmemory", "1"],
        vec!["FCALL", "plain", "0"],
        vec!["FCALL", "ro", "0"],
        vec!["FCALL", "oom", "0"],
        vec!["FCALL_RO", "ro", "0"],
        vec!["CONFIG", "SET", "maxmemory", "0"],
        vec!["FCALL", "plain", "0"],
        vec!["CONFIG", "SET", "replica-serve-stale-data", "no"],
        vec!["REPLICAOF", "127.0.0.1", &dead],
        vec!["FCALL", "plain", "0"],
        vec!["FCALL", "ro", "0"],
        vec!["FCALL", "stale", "0"],
        vec!["FCALL", "stale_ro", "0"],
        vec!["FCALL_RO", "stale_ro", "0"],
        vec!["CONFIG", "SET", "replica-serve-stale-data", "yes"],
        vec!["FCALL", "ro", "0"],
        vec!["FCALL", "plain", "0"],
        vec!["REPLICAOF", "NO", "ONE"],
        vec!["FCALL", "plain", "0"],
    ];
    let mut out = Vec::new();
    for port in [t.port, r.port] {
        let mut c = Conn::with_proto(port, false);
        out.push(script.iter().map(|a| c.cmd(a)).collect::<Vec<_>>());
    }
    for (i, a) in script.iter().enumerate() {
        assert_eq!(out[0][i], out[1][i], "{a:?}");
    }
}

/// INFO memory's function lines: counts as redis-server's, memory figures present and
/// growing with a library.
#[test]
fn info_memory_counts_functions_as_redis() {
    let t = start(tessera_bin());
    let r = start(redis_bin());
    let field = |port: u16, name: &str| -> i64 {
        let mut c = Conn::with_proto(port, false);
        let Reply::Bulk(b) = c.cmd(&["INFO", "memory"]) else {
            panic!("INFO memory");
        };
        let text = String::from_utf8_lossy(&b).into_owned();
        info_field(&text, name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing in {text}"))
    };
    let before = field(t.port, "used_memory_functions");
    for port in [t.port, r.port] {
        let mut c = Conn::with_proto(port, false);
        c.cmd(&["FUNCTION", "LOAD", LIB]);
        c.cmd(&["FCALL", "counts", "0"]);
    }
    for name in ["number_of_functions", "number_of_libraries"] {
        let ours = field(t.port, name);
        assert!(ours > 0, "{name}");
        assert_eq!(ours, field(r.port, name), "{name}");
    }
    assert!(field(t.port, "used_memory_functions") > before);
    assert!(field(t.port, "used_memory_vm_functions") > 0);
}
