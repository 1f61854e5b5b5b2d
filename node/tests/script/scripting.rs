//! Lua scripting (EVAL family): the same scripts run against tessera-node and the real
//! redis-server 7.0 with replies compared exactly; plus replication of a script's effects
//! (tessera master -> tessera replica), atomicity under concurrent clients, and cluster-mode
//! key checks against a redis-server cluster.
// The replication and cluster harnesses each include common/proc.rs as their own module.
#![allow(clippy::duplicate_mod)]

use tessera_testkit::diff::*;
use tessera_testkit::*;

/// Scripts (numkeys 0) covering every conversion, errors and the sandbox.
const SCRIPTS: &[&str] = &[
    // Lua -> reply conversions
    "return 1",
    "return 3.99",
    "return -3.99",
    "return 1e20",
    "return 'hello'",
    "return true",
    "return false",
    "return nil",
    "return {1,2,3,'x',nil,5}",
    "return {1,{2,{3}}}",
    "return {1.5, true, false, {ok='a'}, {err='b'}}",
    "return {ok='x'}",
    "return {err='x y'}",
    "return {ok=5}",
    "return {}",
    "return redis.status_reply('FINE')",
    "return redis.error_reply('FOO bar')",
    "return redis.error_reply('nospace')",
    "return redis.error_reply('-FOO bar')",
    "return redis.sha1hex('')",
    "return redis.sha1hex('abc')",
    "return redis.LOG_NOTICE",
    "return redis.log(redis.LOG_WARNING, 'from a test')",
    "return tostring(1e20)",
    "return string.format('%d-%s', 5, 'x')",
    "return math.floor(3.7)",
    "return table.concat({'a','b'}, ',')",
    "return #KEYS + #ARGV",
    // reply -> Lua conversions
    "return redis.call('set', 'str', 'abc')",
    "return redis.call('get', 'str')",
    "return redis.call('get', 'nokey')",
    "return type(redis.call('get', 'nokey'))",
    "return redis.call('ping')",
    "return type(redis.call('ping'))",
    "return redis.call('ping')['ok']",
    "return redis.call('set', 'n', 5)",
    "return redis.call('incr', 'n')",
    "return type(redis.call('incr', 'n'))",
    "return redis.call('incrbyfloat', 'n', '1.5')",
    "return redis.call('get', 1.5)",
    "return redis.call('lrange', 'nolist', 0, -1)",
    "return redis.call('exists', 'str', 'n', 'zz')",
    "return redis.call('set', 'a', 'b', 'xx')",
    "return redis.pcall('incr', 'str')",
    "local t = redis.pcall('incr', 'str'); return t['err']",
    "return redis.pcall('nosuch')",
    "return redis.pcall('get')",
    "return redis.pcall('lpush', 'str', 'x')",
    "local ok, e = pcall(redis.call, 'incr', 'str'); return {tostring(ok), e}",
    "local ok, e = pcall(redis.call, 'get', 'str'); return {tostring(ok), e}",
    "local ok, e = pcall(error, 'x'); return {tostring(ok), e}",
    "local ok, e = pcall(function() return 7 end); return {tostring(ok), e}",
    "local ok, e = pcall(redis.call, 'nosuch'); return redis.call('get', 'str')",
    // errors
    "return redis.call('incr', 'str')",
    "return redis.call('lpush', 'str', 'x')",
    "return redis.call('hgetall', 'str')",
    "return redis.call('nosuch')",
    "return redis.call('eval', 'return 1', '0')",
    "return redis.call('multi')",
    "return redis.call('set')",
    "return redis.call()",
    "return redis.call(1)",
    "return redis.call('get', {})",
    "return 1 +",
    "error('boom')",
    "error('ERR2 boom')",
    "error({err='MY bad'})",
    "\nlocal a = 1\n\nerror('on line four')",
    "local a = 1\nreturn redis.call('incr', 'str')",
    "return nil + 1",
    // sandbox
    "x = 5",
    "return os",
    "return io",
    "return type(require)",
    "return type(dofile)",
    "return redis.setresp(2)",
    // cjson (objects of one key only: key order follows Lua's hash order)
    "return cjson.encode({1,2,'a',{x=1}})",
    "return cjson.encode({a='x/y'})",
    "return cjson.encode({d=cjson.null})",
    "return cjson.encode({})",
    "return cjson.encode(1/3)",
    "return cjson.encode('\"\\n\\1\\t\\\\')",
    "local t = cjson.decode('{\"a\":[1,2,{\"b\":null}],\"c\":1.5e3,\"d\":\"x\\\\u00e9\"}'); return {t.a[1], t.a[2], tostring(t.a[3].b == cjson.null), t.c, t.d, type(t.a[3].b)}",
    "return cjson.encode({[1]=1,[3]=3})",
    "return cjson.encode({[1]=1,[2]=2,[20]=3})",
    "return cjson.encode(12345678901234)",
    "return cjson.encode(1e20)",
    "return cjson.encode(-0.5)",
    "return cjson.encode(function() end)",
    "return cjson.decode('true')",
    "return cjson.decode('\"str\"')",
    "return cjson.decode('12.5')",
    "return cjson.encode({1,nil,3})",
    "return cjson.decode()",
    "return cjson.encode()",
    "return type(cjson.decode('null'))",
    "return cjson.encode(0/0)",
    "return cjson.encode(cjson.decode('[1,[2,[3,{\"k\":\"v\"}]],true,false,null]'))",
    "return cjson.encode({[1.5]=1})",
    "return cjson.encode({[true]=1})",
    "return cjson.encode(true)",
    "return cjson.encode(nil)",
    "cjson.x = 1",
    "return cjson.encode(redis.call('lrange', 'nolist', 0, -1))",
    // numeric command arguments ("%.17g")
    "redis.call('set','k', 0.1+0.2) return redis.call('get','k')",
    "redis.call('set','k', 1e20) return redis.call('get','k')",
    "redis.call('set','k', 1/3) return redis.call('get','k')",
    "redis.call('set','k', -0.0) return redis.call('get','k')",
    "redis.call('set','k', 123456789012345678) return redis.call('get','k')",
    "redis.call('set','k', 1e-7) return redis.call('get','k')",
    "redis.call('set','k', 2^53) return redis.call('get','k')",
    "redis.call('set','k', 100) return redis.call('get','k')",
    "redis.call('set','k', 1.5) return redis.call('get','k')",
    "redis.call('set','k', 0/0) return redis.call('get','k')",
    "redis.call('set','k', math.huge) return redis.call('get','k')",
    // redis.setresp(3) and the RESP3 Lua forms (maps/sets of one element: Lua hash order)
    "return redis.call('hset','hh','a','1')",
    "return redis.call('sadd','ss','m')",
    "redis.setresp(3); local r = redis.call('hgetall','hh'); return {type(r), type(r.map), r.map and r.map.a}",
    "redis.setresp(3); local r = redis.call('get','nokey'); return type(r)",
    "redis.setresp(3); return redis.call('hgetall','hh')",
    "return {map={a=1}}",
    "return {double=1.5}",
    "redis.setresp(3); local r = redis.call('smembers','ss'); return {type(r), type(r.set), tostring(r.set.m)}",
    "redis.setresp(3); local r = redis.call('exists','hh'); return type(r)",
    "redis.setresp(3); return redis.call('zscore','nz','a')",
    "return {set={a=true}}",
    "return {big_number='123'}",
    "return {verbatim_string={format='txt',string='x'}}",
    "return {double='x'}",
    "redis.setresp(3); return true",
    "redis.setresp(3); return false",
    "redis.setresp(3); return redis.call('smembers','ss')",
    "redis.setresp(3); return {double=2.5}",
    "redis.setresp(3); return redis.call('hget','hh','a')",
    "redis.setresp(3); return redis.call('ping')",
    "redis.setresp(3); return redis.call('incrbyfloat','fl','1.5')",
    "redis.setresp(3); return redis.call('zadd','z','1.5','m')",
    "redis.setresp(3); local r = redis.call('zscore','z','m'); return {type(r), r.double}",
    "redis.setresp(3); return redis.call('zscore','z','m')",
    "redis.setresp(3); return redis.call('zrange','z',0,-1,'withscores')",
    "redis.setresp(2); return redis.call('zrange','z',0,-1,'withscores')",
    "return false",
    // bit (LuaBitOp)
    "return bit.tobit(0xffffffff)",
    "return bit.tobit(2^32 + 5)",
    "return bit.tobit(1.5)",
    "return bit.tobit(2.5)",
    "return bit.tobit(-1.5)",
    "return bit.tobit('12')",
    "return bit.bnot(0)",
    "return bit.band(0xff, 0x0f, 0x3)",
    "return bit.bor(1, 2, 4, 8)",
    "return bit.bxor(0xf0, 0xff)",
    "return bit.lshift(1, 31)",
    "return bit.lshift(1, 32)",
    "return bit.rshift(-1, 28)",
    "return bit.arshift(-256, 4)",
    "return bit.rol(0x12345678, 8)",
    "return bit.ror(0x12345678, 8)",
    "return bit.bswap(0x12345678)",
    "return bit.tohex(255)",
    "return bit.tohex(255, 2)",
    "return bit.tohex(-1, -4)",
    "return bit.tohex(0x12345678, 12)",
    "return bit.band(5)",
    "bit.x = 1",
    "return bit.tohex(bit.bxor(bit.lshift(7, 3), 0x55), -8)",
    // more of the sandbox and the redis library
    "return type(loadstring)",
    "return type(setfenv)",
    "return type(getfenv)",
    "return type(print)",
    "return type(unpack)",
    "return type(rawset)",
    "return type(debug)",
    "return type(collectgarbage)",
    "return type(newproxy)",
    "return type(gcinfo)",
    "return type(module)",
    "return type(select)",
    "return type(coroutine)",
    "return type(_G)",
    "return type(load)",
    "redis.call = nil",
    "string.x = 1",
    "redis.x = 1",
    "_G.x = 1",
    "rawset(_G, 'y', 1)",
    "return nosuch",
    "nosuch = 1",
    "return type(getmetatable(_G))",
    "return tostring(getmetatable(_G).__index == nil)",
    "getmetatable(_G).__index.x = 1 return x",
    "setmetatable(_G, nil)",
    // library tables are read-only but iterable, as redis's
    "local t = {} for k in pairs(string) do t[#t + 1] = k end table.sort(t) return t",
    "local t = {} for k in pairs(math) do t[#t + 1] = k end table.sort(t) return t",
    "local t = {} for k in pairs(table) do t[#t + 1] = k end table.sort(t) return t",
    "local n = 0 for k, v in pairs(redis) do if k == 'call' and type(v) == 'function' then n = n + 1 end end return n",
    "return type(rawget(redis, 'call'))",
    "return type(rawget(_G, 'redis'))",
    "return next(redis) ~= nil",
    "return next({})",
    "return pairs(nil)",
    "return next(nil)",
    "return rawget(nil, 1)",
    "return rawget({})",
    "return pairs()",
    "return next()",
    "return next({}, 'nokey')",
    "local t = {} for k, v in pairs({a = 1, b = 2}) do t[#t + 1] = k .. v end table.sort(t) return t",
    // redis.acl_check_cmd: the default user may run anything the server has
    "return redis.acl_check_cmd('get', 'a')",
    "return redis.acl_check_cmd('GET')",
    "return redis.acl_check_cmd('config', 'get', 'x')",
    "return redis.acl_check_cmd('config')",
    "return redis.acl_check_cmd('config', 'nosub')",
    "return redis.acl_check_cmd('config|get')",
    "return redis.acl_check_cmd('nosuch')",
    "return redis.acl_check_cmd()",
    "return redis.acl_check_cmd(1)",
    "return redis.acl_check_cmd('get', 5)",
    "return redis.acl_check_cmd({})",
    "return redis.acl_check_cmd('get', nil)",
    "setmetatable(redis, nil)",
    "return type(setmetatable({}, {}))",
    "return type(redis.breakpoint)",
    "return type(redis.debug)",
    "return type(redis.replicate_commands)",
    "return redis.replicate_commands()",
    "return type(redis.set_repl)",
    "return redis.REPL_ALL",
    "return type(redis.setresp)",
    "return type(redis.REDIS_VERSION)",
    "return redis.REDIS_VERSION_NUM",
    "return redis.setresp(4)",
    "return redis.sha1hex()",
    "return redis.sha1hex(5)",
    "return redis.log()",
    "return redis.error_reply(5)",
    "return redis.status_reply()",
    "return _VERSION",
    "return tostring(math.huge)",
    "return math.huge",
    "return -math.huge",
    "return 0/0",
    "return {1, 2, nil, 4}",
    "return string.rep('x', 3)",
    "local t = {} t[1] = 'a' t[3] = 'c' return t",
    "return redis.call('get', true)",
    "return redis.call('get', nil)",
    "return redis.call('echo', '')",
    "return redis.pcall()",
];

fn both() -> (Server, Server) {
    let t = tessera();
    let r = redis();
    (t, r)
}

fn compare(a: &mut Conn, b: &mut Conn, args: &[&str], fails: &mut Vec<String>) {
    let (x, y) = (a.cmd(args), b.cmd(args));
    if x != y {
        fails.push(format!("{args:?}\n  tessera: {x:?}\n  redis:   {y:?}"));
    }
}

#[test]
fn eval_conversions_and_errors_match_redis() {
    let (t, r) = both();
    for resp3 in [false, true] {
        let mut a = Conn::with_proto(t.port, resp3);
        let mut b = Conn::with_proto(r.port, resp3);
        a.cmd(&["FLUSHALL"]);
        b.cmd(&["FLUSHALL"]);
        let mut fails = Vec::new();
        for s in SCRIPTS {
            compare(&mut a, &mut b, &["EVAL", s, "0"], &mut fails);
        }
        assert!(
            fails.is_empty(),
            "RESP{}: {} mismatches:\n{}",
            if resp3 { 3 } else { 2 },
            fails.len(),
            fails.join("\n")
        );
        eprintln!("{} scripts identical (resp3: {resp3})", SCRIPTS.len());
    }
}

#[test]
fn keys_argv_evalsha_and_script_commands_match_redis() {
    let (t, r) = both();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    let mut f = Vec::new();
    let body = "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}";
    for args in [
        vec!["EVAL", body, "2", "k1", "k2", "a1", "a2"],
        vec!["EVAL", body, "0", "a1"],
        vec!["EVAL", body, "1"],
        vec!["EVAL", "return 1", "x"],
        vec!["EVAL", "return 1", "5"],
        vec!["EVAL", "return 1", "-1"],
        vec!["EVAL", "return 1"],
        vec!["SCRIPT", "FLUSH"],
        vec!["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"],
        // numkeys is checked before the script is looked up...
        vec!["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "-1"],
        // ... but after a sha of the wrong length (NOSCRIPT at once), and a 40-byte
        // non-hex name is just not found.
        vec!["EVALSHA", "abc", "xyz"],
        vec!["EVALSHA_RO", "", "0"],
        vec![
            "EVALSHA",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8\u{e9}",
            "0",
        ],
        vec!["EVALSHA", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "x"],
        vec![
            "EVALSHA",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
            "5",
            "a",
        ],
        vec!["SCRIPT", "LOAD", "return 1"],
        vec!["SCRIPT", "LOAD", "return 1 +"],
        vec!["SCRIPT", "LOAD"],
        vec![
            "SCRIPT",
            "EXISTS",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
            "nope",
        ],
        vec!["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"],
        vec!["EVALSHA", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "0"],
        vec![
            "EVALSHA_RO",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
            "0",
        ],
        vec!["EVAL", "return ARGV[1]", "0", "cached-by-eval"],
        vec![
            "SCRIPT",
            "EXISTS",
            "4df3d25fd8d9c2e9ac6ff9d4ec81ab0bd5b7c0d3",
        ],
        vec!["SCRIPT", "FLUSH", "X"],
        vec!["SCRIPT", "FLUSH", "ASYNC"],
        vec![
            "SCRIPT",
            "EXISTS",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
        ],
        // Ran (and was compiled) before the flush: NOSCRIPT now.
        vec!["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"],
        vec!["SCRIPT", "FLUSH", "sync"],
        vec!["SCRIPT", "HELP"],
        vec!["SCRIPT", "NOPE"],
        vec!["SCRIPT", "KILL"],
        vec!["EVAL", "return redis.call('script', 'kill')", "0"],
        vec!["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "k"],
        vec![
            "EVAL_RO",
            "return redis.call('set', KEYS[1], 'v')",
            "1",
            "k",
        ],
        vec!["EVAL_RO", "return redis.pcall('del', 'k')", "0"],
        vec![
            "SCRIPT",
            "LOAD",
            "return redis.call('set', KEYS[1], ARGV[1])",
        ],
        vec![
            "EVALSHA_RO",
            "8cd5a7e0cc4a4cfa1f4c5b4ed2e2b9dc5f3f2a4b",
            "1",
            "k",
            "v",
        ],
    ] {
        compare(&mut a, &mut b, &args, &mut f);
    }
    // SELECT inside a script is the script's own.
    for args in [
        vec!["EVAL", "redis.call('select', 1); redis.call('set', 'sel', 'one'); return redis.call('get', 'sel')", "0"],
        vec!["GET", "sel"],
        vec!["SELECT", "1"],
        vec!["GET", "sel"],
        vec!["EVAL", "redis.call('select', 0); return redis.call('exists', 'sel')", "0"],
        vec!["GET", "sel"],
        vec!["SELECT", "0"],
    ] {
        compare(&mut a, &mut b, &args, &mut f);
    }
    // EVALSHA_RO of a cached write script.
    let sha = match a.cmd(&[
        "SCRIPT",
        "LOAD",
        "return redis.call('set', KEYS[1], ARGV[1])",
    ]) {
        Reply::Bulk(s) => String::from_utf8(s).expect("sha"),
        other => panic!("SCRIPT LOAD: {other:?}"),
    };
    b.cmd(&[
        "SCRIPT",
        "LOAD",
        "return redis.call('set', KEYS[1], ARGV[1])",
    ]);
    compare(&mut a, &mut b, &["EVALSHA_RO", &sha, "1", "k", "v"], &mut f);
    compare(&mut a, &mut b, &["EVALSHA", &sha, "1", "k", "v"], &mut f);
    compare(&mut a, &mut b, &["GET", "k"], &mut f);
    assert!(f.is_empty(), "{} mismatches:\n{}", f.len(), f.join("\n"));
}

#[test]
fn eval_in_multi_and_watch_match_redis() {
    let (t, r) = both();
    let mut f = Vec::new();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    let (mut a2, mut b2) = (Conn::connect(t.port), Conn::connect(r.port));
    let set = "return redis.call('set', KEYS[1], ARGV[1])";
    for args in [
        vec!["MULTI"],
        vec!["EVAL", set, "1", "k", "1"],
        vec!["EVAL", "return redis.call('incr', KEYS[1])", "1", "k"],
        vec!["EVAL", "return redis.call('lpush', KEYS[1], 'x')", "1", "k"],
        vec!["EXEC"],
        vec!["GET", "k"],
        vec!["WATCH", "k"],
    ] {
        compare(&mut a, &mut b, &args, &mut f);
    }
    // Another client's script writes the watched key: the EXEC fails.
    compare(&mut a2, &mut b2, &["EVAL", set, "1", "k", "2"], &mut f);
    for args in [
        vec!["MULTI"],
        vec!["GET", "k"],
        vec!["EXEC"],
        vec!["GET", "k"],
    ] {
        compare(&mut a, &mut b, &args, &mut f);
    }
    // A read-only script doesn't touch it.
    compare(&mut a, &mut b, &["WATCH", "k"], &mut f);
    compare(
        &mut a2,
        &mut b2,
        &["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "k"],
        &mut f,
    );
    for args in [vec!["MULTI"], vec!["GET", "k"], vec!["EXEC"]] {
        compare(&mut a, &mut b, &args, &mut f);
    }
    assert!(f.is_empty(), "{} mismatches:\n{}", f.len(), f.join("\n"));
}

#[test]
fn shebang_flags_match_redis() {
    let (t, r) = both();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    let mut f = Vec::new();
    for body in [
        "#!lua\nreturn 1",
        "#!lua flags=no-writes\nreturn redis.call('set','x','1')",
        "#!lua flags=bogus\nreturn 1",
        "#!js\nreturn 1",
        "#!lua name=foo\nreturn 1",
        "#!lua flags=no-writes,allow-stale\nreturn 2",
        "#!lua\nerror('x')",
        "#!lua flags=\nreturn 3",
        "#!lua  flags=no-writes  \nreturn redis.call('get','x')",
        "#!lua flags=no-cluster\nreturn 4",
        "#!lua",
        "#!lua flags=allow-oom,allow-cross-slot-keys\nreturn redis.call('set','x','1')",
    ] {
        compare(&mut a, &mut b, &["EVAL", body, "0"], &mut f);
        compare(&mut a, &mut b, &["SCRIPT", "LOAD", body], &mut f);
    }
    assert!(f.is_empty(), "{} mismatches:\n{}", f.len(), f.join("\n"));
}

/// A script writing several keys of several types; the data afterwards must be the same.
const MULTI_WRITE: &str = "
local n = redis.call('incr', KEYS[1])
redis.call('set', KEYS[2], ARGV[1] .. n)
redis.call('hset', KEYS[3], 'f' .. n, n, 'g', ARGV[1])
redis.call('lpush', KEYS[4], n, ARGV[1])
redis.call('sadd', KEYS[5], n)
redis.call('expire', KEYS[2], 1000)
return {n, redis.call('get', KEYS[2]), redis.call('hlen', KEYS[3]), redis.call('llen', KEYS[4])}
";

#[test]
fn multi_key_write_script_matches_redis() {
    let (t, r) = both();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    let mut f = Vec::new();
    for i in 0..5 {
        let v = format!("v{i}");
        compare(
            &mut a,
            &mut b,
            &["EVAL", MULTI_WRITE, "5", "cnt", "str", "h", "l", "s", &v],
            &mut f,
        );
    }
    for args in [
        vec!["GET", "cnt"],
        vec!["GET", "str"],
        vec!["HGETALL", "h"],
        vec!["LRANGE", "l", "0", "-1"],
        vec!["SCARD", "s"],
        vec!["TTL", "str"],
        vec!["EVAL", MULTI_WRITE, "5", "str", "cnt", "h", "l", "s", "x"],
        vec!["GET", "cnt"],
    ] {
        compare(&mut a, &mut b, &args, &mut f);
    }
    assert!(f.is_empty(), "{} mismatches:\n{}", f.len(), f.join("\n"));
}

#[test]
fn script_effects_replicate_to_a_replica() {
    use tessera_testkit::repl::*;
    let (dm, dr) = two_dirs();
    let master = Proc::node(dm.path(), &[]);
    let replica = Proc::node(dr.path(), &[]);
    replicate(&replica, &master);
    let mut c = master.conn();
    for i in 0..50 {
        let v = format!("v{i}");
        let _: redis::Value = redis::cmd("EVAL")
            .arg(MULTI_WRITE)
            .arg(5)
            .arg("cnt")
            .arg(format!("str{}", i % 7))
            .arg("h")
            .arg(format!("l{}", i % 3))
            .arg("s")
            .arg(&v)
            .query(&mut c)
            .expect("eval");
    }
    // A script that fails half-way keeps its first write (as in Redis): replicated too.
    let r: redis::RedisResult<redis::Value> = redis::cmd("EVAL")
        .arg("redis.call('set', 'half', 'done'); return redis.call('incr', 'half')")
        .arg(0)
        .query(&mut c);
    assert!(r.is_err(), "{r:?}");
    // SPOP-like nondeterminism is replicated as effects: the replica pops the same member.
    let _: redis::Value = redis::cmd("EVAL")
        .arg("return redis.call('spop', 's')")
        .arg(0)
        .query(&mut c)
        .expect("spop");
    wait_caught_up(&master, &replica);
    assert_same_data(&master, &replica, 1);
    let half: Option<String> = redis::cmd("GET")
        .arg("half")
        .query(&mut replica.conn())
        .expect("get");
    assert_eq!(half.as_deref(), Some("done"));
    // The replica is read-only: a writing script is refused, a reading one runs.
    let mut rc = replica.conn();
    let r: redis::RedisResult<redis::Value> = redis::cmd("EVAL")
        .arg("return redis.call('set', 'onreplica', 1)")
        .arg(0)
        .query(&mut rc);
    let e = r.expect_err("write script on a read-only replica");
    assert!(e.to_string().contains("read only replica"), "{e}");
    let n: i64 = redis::cmd("EVAL")
        .arg("return redis.call('exists', 'onreplica', 'half')")
        .arg(0)
        .query(&mut rc)
        .expect("read script on replica");
    assert_eq!(n, 1);
}

#[test]
fn scripts_are_atomic_across_worker_threads() {
    use std::sync::{Arc, Barrier};
    let dir = tempfile::tempdir().expect("tmp");
    let srv = tessera_testkit::repl::Proc::node(dir.path(), &["--worker-threads", "4"]);
    // Two INCRs with a read between: with interleaving another client's INCR could land
    // between them, and the script would see an odd value or a gap.
    let body = "local a = redis.call('incr', KEYS[1]); local b = redis.call('get', KEYS[1]); \
                local c = redis.call('incr', KEYS[1]); return {a, tonumber(b), c}";
    let clients = 6;
    let per = 200;
    let barrier = Arc::new(Barrier::new(clients));
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            let barrier = barrier.clone();
            let port = srv.port;
            std::thread::spawn(move || {
                let mut c = Conn::connect(port);
                barrier.wait();
                let mut seen = Vec::new();
                for _ in 0..per {
                    match c.cmd(&["EVAL", body, "1", "ctr"]) {
                        Reply::Array(v) => {
                            let n: Vec<i64> = v.iter().filter_map(|x| x.as_int()).collect();
                            assert_eq!(n.len(), 3, "{v:?}");
                            assert!(n[0] == n[1] && n[2] == n[0] + 1, "interleaved: {n:?}");
                            seen.push(n[0]);
                        }
                        other => panic!("EVAL: {other:?}"),
                    }
                }
                seen
            })
        })
        .collect();
    let mut all: Vec<i64> = Vec::new();
    for h in handles {
        all.extend(h.join().expect("client thread"));
    }
    all.sort_unstable();
    let expected: Vec<i64> = (0..(clients * per) as i64).map(|i| 2 * i + 1).collect();
    assert_eq!(all, expected, "every script saw a distinct odd value");
    let mut c = Conn::connect(srv.port);
    assert_eq!(
        c.cmd(&["GET", "ctr"]),
        Reply::Bulk((2 * clients * per).to_string().into_bytes())
    );
}

/// First reply line of each script-in-cluster case, sent to the node serving slot 3300
/// ("b"; "bar" and "key2" hash to other slots of the same node, "foo" to another node).
/// MOVED lines keep only the slot (addresses differ between the two clusters).
fn cluster_script_replies(bin: &'static str) -> Vec<String> {
    use tessera_testkit::cluster::*;
    let nodes = cluster_nodes(bin, 3, 5000);
    let refs: Vec<&Proc> = nodes.iter().collect();
    let (ok, out) = cluster_create(&refs, 0);
    assert!(ok, "cluster create ({bin}): {out}");
    wait_state_ok(&refs);
    let owner = nodes
        .iter()
        .find(|n| !raw_line(&n.addr(), &[b"GET", b"b"]).starts_with("-MOVED"))
        .expect("a node serves slot 3300");
    let set = "return redis.call('set', KEYS[1], 'v')";
    let incr = "return redis.call('incr', ARGV[1])";
    let cases: Vec<Vec<&str>> = vec![
        vec!["EVAL", set, "1", "b"],
        vec!["EVAL", set, "1", "foo"],
        vec!["EVAL", set, "2", "b", "bar"],
        vec!["EVAL", set, "2", "b", "{b}x"],
        vec!["EVAL", incr, "0", "bar"],
        vec!["EVAL", incr, "1", "b", "key2"],
        vec!["EVAL", incr, "1", "b", "foo"],
        vec!["EVAL", incr, "0", "foo"],
        vec!["EVAL", "return redis.pcall('get', ARGV[1])", "0", "foo"],
        vec!["EVAL", "return redis.call('mget', 'b', 'bar')", "0"],
        vec!["EVAL", "return redis.call('mget', 'b', '{b}x')", "0"],
        vec!["EVAL_RO", "return redis.call('exists', KEYS[1])", "1", "b"],
        vec!["EVAL", "return 1", "0"],
    ];
    cases
        .iter()
        .map(|c| {
            let args: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
            let l = raw_line(&owner.addr(), &args);
            match l.strip_prefix("-MOVED ") {
                Some(rest) => format!("-MOVED {}", rest.split(' ').next().unwrap_or("")),
                None => l,
            }
        })
        .collect()
}

#[test]
fn cluster_scripts_refuse_non_local_keys_as_redis() {
    let ours = cluster_script_replies(tessera_bin());
    let theirs = cluster_script_replies(redis_bin());
    assert_eq!(ours, theirs);
    eprintln!("{} cluster script cases identical: {ours:?}", ours.len());
}

/// Script effects reach the AOF as MULTI/EXEC blocks: after a SIGKILL with
/// `appendfsync always`, the reloaded dataset equals the one before.
#[test]
fn script_effects_survive_an_aof_restart() {
    use tessera_testkit::repl::*;
    let dir = tempfile::tempdir().expect("tmp");
    let mut p = Proc::node(
        dir.path(),
        &["--appendonly", "yes", "--appendfsync", "always"],
    );
    let mut c = p.conn();
    for i in 0..20 {
        let _: redis::Value = redis::cmd("EVAL")
            .arg(MULTI_WRITE)
            .arg(5)
            .arg("cnt")
            .arg(format!("str{}", i % 4))
            .arg("h")
            .arg("l")
            .arg("s")
            .arg(format!("v{i}"))
            .query(&mut c)
            .expect("eval");
    }
    let r: redis::RedisResult<redis::Value> = redis::cmd("EVAL")
        .arg("redis.call('set', 'half', 'done'); return redis.call('incr', 'half')")
        .arg(0)
        .query(&mut c);
    assert!(r.is_err(), "{r:?}");
    let _: redis::Value = redis::cmd("EVAL")
        .arg("return redis.call('spop', 's', 3)")
        .arg(0)
        .query(&mut c)
        .expect("spop");
    let before = snapshot(&p, 1);
    assert!(!before.is_empty());
    p.restart();
    assert_eq!(snapshot(&p, 1), before, "dataset after AOF reload");
}

/// A self-referencing table is cut at a nesting limit with Redis's error (Redis cuts at
/// Lua's stack limit, ~8000 levels; we stop at 1000), and the server stays up.
#[test]
fn self_referencing_table_is_cut_not_a_crash() {
    let t = tessera();
    let mut c = Conn::connect(t.port);
    let mut r = c.cmd(&["EVAL", "local t = {} t[1] = t return t", "0"]);
    let mut depth = 0;
    while let Reply::Array(mut v) = r {
        assert_eq!(v.len(), 1);
        r = v.remove(0);
        depth += 1;
    }
    assert_eq!(r, Reply::Error("ERR reached lua stack limit".into()));
    assert_eq!(depth, 1000);
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

/// Commands a script runs show in INFO commandstats (as in Redis).
#[test]
fn script_commands_are_counted_in_commandstats() {
    let t = tessera();
    let mut c = Conn::connect(t.port);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&[
        "EVAL",
        "redis.call('incr', 'a'); return redis.call('incr', 'a')",
        "0",
    ]);
    let Reply::Bulk(info) = c.cmd(&["INFO", "commandstats"]) else {
        panic!("INFO");
    };
    let info = String::from_utf8_lossy(&info);
    assert!(info.contains("cmdstat_incr:calls=2,"), "{info}");
    assert!(info.contains("cmdstat_eval:calls=1,"), "{info}");
}
