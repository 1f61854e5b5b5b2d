//! Hostile input: lua (issue 15). Scripts as an attacker writes them: precompiled bytecode,
//! poisoning of the shared Lua state through library tables and metatables, each published
//! Redis Lua CVE, RESP injection through status/error/RESP3 replies, and scripts that trip
//! the Lua binding's limits. The node must refuse or bound each one, keep serving, and keep
//! the next script's world unchanged.

use std::io::Read;
use std::time::{Duration, Instant};

use tessera_testkit::*;

/// EVAL `script` with no keys on `c`.
fn eval(c: &mut Raw, script: &str) -> R {
    c.cmd(&["EVAL", script, "0"])
}

/// EVAL of a raw byte body with no keys.
fn eval_bytes(c: &mut Raw, body: &[u8]) -> R {
    c.send(&encode(&[b"EVAL", body, b"0"]));
    c.read()
}

/// A reply as readable text with its type (for assertion messages and comparisons).
fn show(r: &R) -> String {
    match r {
        R::Simple(s) => format!("+{s}"),
        R::Err(s) => format!("-{s}"),
        R::Int(i) => format!(":{i}"),
        R::Bulk(b) => format!("${:?}", String::from_utf8_lossy(b)),
        R::Nil => "nil".into(),
        R::Arr(v) => format!("[{}]", v.iter().map(show).collect::<Vec<_>>().join(", ")),
        R::Agg(t, v) => format!(
            "{}[{}]",
            *t as char,
            v.iter().map(show).collect::<Vec<_>>().join(", ")
        ),
        R::Other(t, s) => format!("{}{s}", *t as char),
    }
}

fn err_of(r: &R) -> String {
    match r {
        R::Err(e) => e.clone(),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// The node still answers (it did not crash or wedge).
fn alive(node: &Node) {
    let mut c = node.raw();
    assert_eq!(c.cmd(&["PING"]), R::Simple("PONG".into()));
}

fn redis_server() -> Server {
    Launch::new(redis_bin()).args(&["--save", ""]).start()
}

// ---------------------------------------------------------------------------------------
// Item 1: bytecode. Redis 7.0.15 keeps `string.dump` but parses every chunk as text (its
// patched f_parser never undumps), so a binary chunk fails with "unexpected symbol near
// 'char(27)'". The same holds for CVE-2015-4335 (loadstring of bytecode).
// ---------------------------------------------------------------------------------------

/// The bytecode of `src` (compiled as text, then `string.dump`ed) through `c`.
fn bytecode(c: &mut Raw, src: &str) -> Vec<u8> {
    let r = eval(
        c,
        &format!("return string.dump(assert(loadstring({src:?})))"),
    );
    match r {
        R::Bulk(b) => {
            assert_eq!(b.first(), Some(&0x1b), "not a binary chunk: {b:?}");
            b
        }
        other => panic!("string.dump: {other:?}"),
    }
}

#[test]
fn bytecode_loadstring_of_string_dump_does_not_run() {
    let node = Node::start();
    let mut c = node.raw();
    let r = eval(
        &mut c,
        "return loadstring(string.dump(function() return 42 end))()",
    );
    assert_ne!(r, R::Int(42), "loadstring ran bytecode");
    assert!(err_of(&r).contains("attempt to call a nil value"), "{r:?}");
    // loadstring answers nil and Redis's parse error, naming the chunk as Lua does.
    let r = eval(
        &mut c,
        "local f, e = loadstring(string.dump(function() return 42 end)) \
         return {tostring(f), e}",
    );
    assert_eq!(
        r,
        R::Arr(vec![
            R::Bulk(b"nil".to_vec()),
            R::Bulk(b"[string \"\x1bLuaQ\"]:1: unexpected symbol near 'char(27)'".to_vec()),
        ])
    );
    // CVE-2015-4335's shape: a hand-made chunk with an explicit name.
    let r = eval(
        &mut c,
        "local f, e = loadstring('\\27Lua\\81\\0', 'x') return {tostring(f), e}",
    );
    assert_eq!(
        r,
        R::Arr(vec![
            R::Bulk(b"nil".to_vec()),
            R::Bulk(b"[string \"x\"]:1: unexpected symbol near 'char(27)'".to_vec()),
        ])
    );
    // Text still loads.
    assert_eq!(eval(&mut c, "return loadstring('return 7')()"), R::Int(7));
    alive(&node);
}

#[test]
fn bytecode_loadstring_matches_redis() {
    let node = Node::start();
    let redis = redis_server();
    let scripts = [
        "local f, e = loadstring(string.dump(function() return 42 end)) return {tostring(f), e}",
        "return {pcall(loadstring, string.dump(function() return 1 end), 'name')}",
        "return type(string.dump)",
        "local f, e = loadstring('\\27') return {tostring(f), e}",
        "local f, e = loadstring('return 1', '\\27') return {type(f), tostring(e)}",
        "return loadstring(' return 8')()",
        "return {pcall(loadstring)}",
        "return {pcall(load)}",
        "return {pcall(load, 5)}",
    ];
    let mut a = node.raw();
    let mut b = Raw::connect(redis.port);
    for s in scripts {
        assert_eq!(show(&eval(&mut a, s)), show(&eval(&mut b, s)), "{s}");
    }
}

#[test]
fn bytecode_eval_body_refused() {
    let node = Node::start();
    let mut c = node.raw();
    let bc = bytecode(&mut c, "return 42");
    let r = eval_bytes(&mut c, &bc);
    assert_ne!(r, R::Int(42), "an EVAL body of bytecode ran");
    let e = err_of(&r);
    assert!(
        e.starts_with("ERR Error compiling script (new function): user_script:1: unexpected symbol near 'char(27)'"),
        "{e}"
    );
    // SCRIPT LOAD compiles the same way.
    c.send(&encode(&[b"SCRIPT", b"LOAD", &bc]));
    let e = err_of(&c.read());
    assert!(e.contains("unexpected symbol near 'char(27)'"), "{e}");
    // A shebang line in front does not make it loadable either.
    let mut body = b"#!lua\n".to_vec();
    body.extend_from_slice(&bc);
    let r = eval_bytes(&mut c, &body);
    assert_ne!(r, R::Int(42));
    err_of(&r);
    alive(&node);
}

#[test]
fn bytecode_eval_body_error_matches_redis() {
    let node = Node::start();
    let redis = redis_server();
    let mut a = node.raw();
    let mut b = Raw::connect(redis.port);
    // Redis's own bytecode (same Lua 5.1 format) and a minimal header.
    let bc = bytecode(&mut b, "return 42");
    for body in [bc.as_slice(), b"\x1bLua", b"\x1b"] {
        assert_eq!(
            show(&eval_bytes(&mut a, body)),
            show(&eval_bytes(&mut b, body)),
            "{body:?}"
        );
    }
}

#[test]
fn bytecode_function_load_refused() {
    let node = Node::start();
    let mut c = node.raw();
    let bc = bytecode(
        &mut c,
        "redis.register_function('f', function() return 42 end)",
    );
    let mut lib = b"#!lua name=bc\n".to_vec();
    lib.extend_from_slice(&bc);
    c.send(&encode(&[b"FUNCTION", b"LOAD", &lib]));
    let e = err_of(&c.read());
    assert!(
        e.starts_with(
            "ERR Error compiling function: user_function:2: unexpected symbol near 'char(27)'"
        ),
        "{e}"
    );
    assert_ne!(c.cmd(&["FCALL", "f", "0"]), R::Int(42));
    // Inside a library, loadstring is text only too.
    let lib = "#!lua name=inner\n\
               redis.register_function('g', function() \
                 local f, e = loadstring(string.dump(function() return 42 end)) \
                 return tostring(f) .. ' ' .. e end)";
    assert_eq!(
        c.cmd(&["FUNCTION", "LOAD", lib]),
        R::Bulk(b"inner".to_vec())
    );
    match c.cmd(&["FCALL", "g", "0"]) {
        R::Bulk(b) => {
            let s = String::from_utf8_lossy(&b);
            assert!(
                s.starts_with("nil ") && s.ends_with("unexpected symbol near 'char(27)'"),
                "{s}"
            )
        }
        other => panic!("{other:?}"),
    }
    alive(&node);
}

#[test]
fn bytecode_load_with_reader_refused() {
    let node = Node::start();
    let mut c = node.raw();
    // The reader hands the chunk over in pieces; the first byte is the signature.
    let script = "local s = string.dump(function() return 42 end) \
                  local i = 0 \
                  local f, e = load(function() \
                    i = i + 1 \
                    if i > #s then return nil end \
                    return string.sub(s, i, i) end) \
                  if f then return f() end \
                  return e";
    let r = eval(&mut c, script);
    assert_eq!(
        r,
        R::Bulk(b"(load):1: unexpected symbol near 'char(27)'".to_vec())
    );
    // A reader returning text still works, and a bad reader is an error as in Lua 5.1.
    let r = eval(
        &mut c,
        "local done = false \
         local f = load(function() if done then return nil end done = true return 'return 5' end) \
         return f()",
    );
    assert_eq!(r, R::Int(5));
    let r = eval(
        &mut c,
        "local f, e = load(function() return {} end) return {tostring(f), e}",
    );
    assert_eq!(
        show(&r),
        show(&R::Arr(vec![
            R::Bulk(b"nil".to_vec()),
            R::Bulk(b"reader function must return a string".to_vec())
        ]))
    );
    alive(&node);
}

#[test]
fn bytecode_load_with_reader_matches_redis() {
    let node = Node::start();
    let redis = redis_server();
    let scripts = [
        "local s = string.dump(function() return 42 end) local done = false \
         local f, e = load(function() if done then return nil end done = true return s end) \
         return {tostring(f), e}",
        "local done = false local f, e = load(function() if done then return nil end \
         done = true return 'return 6' end, 'named') return f()",
        "local f, e = load(function() return nil end) return {type(f), tostring(e)}",
        "local n = 0 local f, e = load(function() n = n + 1 if n == 1 then return 'retu' \
         elseif n == 2 then return 'rn 9' end end) return f()",
    ];
    let mut a = node.raw();
    let mut b = Raw::connect(redis.port);
    for s in scripts {
        assert_eq!(show(&eval(&mut a, s)), show(&eval(&mut b, s)), "{s}");
    }
}

// ---------------------------------------------------------------------------------------
// Item 2: shared-state poisoning. Debian's redis-server 7.0.15 carries the 2025 fixes: every
// attack below answers "Attempt to modify a readonly table" (or fails to reach a table at
// all) and the next script sees the libraries unchanged. We answer byte for byte the same.
// ---------------------------------------------------------------------------------------

/// What a later script sees of every library (behaviour, not addresses).
const PROBE: &str = "return {string.upper('a'), ('a'):upper(), ('ab'):rep(2), \
    type(coroutine.create), tostring(math.floor(1.5)), table.concat({'a', 'b'}), \
    bit.band(3, 1), cjson.encode({1}), struct.pack('B', 65), cmsgpack.pack('a'), \
    redis.sha1hex(''), type(redis.call), type(redis.pcall), tostring(getmetatable(string)), \
    tostring(getmetatable(coroutine)), tostring(rawequal(getmetatable('').__index, string)), \
    select(2, pcall(function() return undefined_x end)), type(getmetatable('').__index.upper), \
    type(loadstring), type(load), type(unpack), type(pcall)}";

/// Attacks on the shared state; each must fail as it does on redis-server 7.0.15.
const ATTACKS: &[&str] = &[
    "getmetatable('').__index.upper = function() return 'PWNED' end",
    "getmetatable('').__index = {upper = function() return 'PWNED' end}",
    "getmetatable('').__index = nil",
    "rawset(getmetatable(''), '__index', {})",
    "getmetatable('').__metatable = 1",
    "getmetatable('').__add = function() return 1 end",
    "local m = getmetatable('') m.__index.rep = nil",
    "string.upper = function() return 'PWNED' end",
    "rawset(string, 'upper', function() return 'PWNED' end)",
    "setmetatable(string, {__index = function() return 'PWNED' end})",
    "getmetatable(string).__index.upper = function() return 'PWNED' end",
    "getmetatable(string).__newindex = nil",
    "coroutine.create = function() return 'PWNED' end",
    "rawset(coroutine, 'create', 1)",
    "setmetatable(coroutine, {})",
    "getmetatable(coroutine).__index.create = 1",
    "table.concat = function() return 'PWNED' end",
    "rawset(table, 'concat', 1)",
    "math.floor = function() return 'PWNED' end",
    "bit.band = function() return 'PWNED' end",
    "cjson.encode = function() return 'PWNED' end",
    "cmsgpack.pack = function() return 'PWNED' end",
    "struct.pack = function() return 'PWNED' end",
    "redis.sha1hex = function() return 'PWNED' end",
    "redis.call = function() return 'PWNED' end",
    "rawset(redis, 'call', 1)",
    "getmetatable(redis).__index.call = 1",
    "getmetatable(_G).__index = function() return 'PWNED' end",
    "rawset(getmetatable(_G), '__index', function() return 'PWNED' end)",
    "getmetatable(_G).undefined_x = 1",
    "setmetatable(_G, nil)",
    "_G.string = {}",
    "rawset(_G, 'string', {})",
    "string = {}",
    "loadstring = function() return 'PWNED' end",
    "for k, v in pairs(string) do string[k] = nil end",
    "for k, v in pairs(_G) do rawset(_G, k, nil) end",
    "for k, v in pairs(_G) do if type(v) == 'table' then v.x = 1 end end",
    "for k, v in pairs(_G) do if type(v) == 'table' then rawset(v, 'x', 1) end end",
];

#[test]
fn poisoning_the_string_metatable_and_libraries_fails_and_leaves_no_trace() {
    let node = Node::start();
    let mut c = node.raw();
    let before = eval(&mut c, PROBE);
    assert!(matches!(before, R::Arr(_)), "{before:?}");
    for a in ATTACKS {
        let r = eval(&mut c, a);
        assert!(matches!(r, R::Err(_)), "attack answered {r:?}: {a}");
        assert_eq!(eval(&mut c, PROBE), before, "after: {a}");
    }
    // The item's own reproduction: string.upper of a later script.
    assert_eq!(
        eval(&mut c, "return string.upper('a')"),
        R::Bulk(b"A".to_vec())
    );
    assert_eq!(eval(&mut c, "return ('a'):upper()"), R::Bulk(b"A".to_vec()));
    // Another connection (maybe another I/O thread) sees the same.
    let mut d = node.raw();
    assert_eq!(eval(&mut d, PROBE), before);
}

#[test]
fn poisoning_attacks_answer_as_redis() {
    let node = Node::start();
    let redis = redis_server();
    let mut a = node.raw();
    let mut b = Raw::connect(redis.port);
    assert_eq!(
        show(&eval(&mut a, PROBE)),
        show(&eval(&mut b, PROBE)),
        "probe"
    );
    for s in ATTACKS {
        assert_eq!(show(&eval(&mut a, s)), show(&eval(&mut b, s)), "{s}");
    }
    assert_eq!(
        show(&eval(&mut a, PROBE)),
        show(&eval(&mut b, PROBE)),
        "probe after"
    );
}

#[test]
fn poisoning_from_a_function_does_not_reach_eval_or_other_functions() {
    let node = Node::start();
    let mut c = node.raw();
    let before = eval(&mut c, PROBE);
    let mut lib = String::from("#!lua name=poison\n");
    for (i, a) in ATTACKS.iter().enumerate() {
        lib.push_str(&format!(
            "redis.register_function('p{i}', function() {a} end)\n"
        ));
    }
    lib.push_str(&format!(
        "redis.register_function('probe', function() {PROBE} end)\n"
    ));
    assert_eq!(
        c.cmd(&["FUNCTION", "LOAD", &lib]),
        R::Bulk(b"poison".to_vec())
    );
    let fprobe = c.cmd(&["FCALL", "probe", "0"]);
    for (i, a) in ATTACKS.iter().enumerate() {
        let r = c.cmd(&["FCALL", &format!("p{i}"), "0"]);
        assert!(matches!(r, R::Err(_)), "{a}: {r:?}");
    }
    assert_eq!(c.cmd(&["FCALL", "probe", "0"]), fprobe);
    assert_eq!(eval(&mut c, PROBE), before);
}

// ---------------------------------------------------------------------------------------
// One test per published Redis Lua CVE. Each runs the CVE's shape; the node must answer (an
// error where Redis errors) and keep serving.
// ---------------------------------------------------------------------------------------

/// Runs `f` on a thread with a big stack: the reply reader recurses once per level of a
/// reply nested 1,000 deep.
fn big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
}

/// Runs each script on the node and on redis-server: same replies, node alive.
fn same_as_redis(scripts: &[&str]) {
    let node = Node::start();
    let redis = redis_server();
    let mut a = node.raw();
    let mut b = Raw::connect(redis.port);
    for s in scripts {
        assert_eq!(show(&eval(&mut a, s)), show(&eval(&mut b, s)), "{s}");
    }
    alive(&node);
}

/// CVE-2025-49844: the parser's chunk name could be collected while a chunk compiles (a
/// reader that runs the collector, memory pressure, many string constants).
#[test]
fn cve_2025_49844_parser_gc_use_after_free() {
    let node = Node::start();
    let mut c = node.raw();
    let scripts = [
        // Memory pressure, then a big source compiled while the collector runs.
        "local junk = {} for i = 1, 200 do junk[i] = string.rep('x', 1000) .. i end \
         junk = nil collectgarbage('collect') \
         local parts = {'return {'} for i = 1, 20000 do parts[#parts + 1] = '\"s' .. i .. '\",' end \
         parts[#parts + 1] = '}' local src = table.concat(parts) \
         for r = 1, 5 do local f = assert(loadstring(src, 'name\\0with a nul ' .. r)) \
           collectgarbage('collect') assert(#f() == 20000) end return 1",
        // A reader that collects garbage between every piece of a chunk.
        "local src = 'local a = \"' .. string.rep('y', 5000) .. '\" return #a' \
         local i = 0 local f = load(function() \
           collectgarbage('collect') local junk = string.rep('z', 4096) .. i \
           i = i + 1 if i > #src then return nil end return string.sub(src, i, i) end, \
           '=' .. string.rep('n', 200)) \
         return f()",
    ];
    assert_eq!(eval(&mut c, scripts[0]), R::Int(1));
    assert_eq!(eval(&mut c, scripts[1]), R::Int(5000));
    alive(&node);
}

/// CVE-2025-46817: unpack with a range that overflows an int.
#[test]
fn cve_2025_46817_unpack_huge_ranges() {
    same_as_redis(&[
        "return unpack({}, 0, 2147483647)",
        "return unpack({}, -2, 2147483647)",
        "return unpack({}, -2147483648, 2147483647)",
        "return unpack({}, -2147483648, -1)",
        "return unpack({}, 2147483647, 2147483647)",
        "return unpack({1, 2, 3}, 2147483646, 2147483647)",
        "return {unpack({1, 2, 3}, -1, 1)}",
        "return unpack({1, 2, 3}, 1, 1e10)",
        "return {pcall(unpack, {}, 1, 8000)}",
        "return #{unpack({}, 1, 7990)}",
    ]);
}

/// CVE-2025-46818: metatables of basic types, to run code in another script's context.
#[test]
fn cve_2025_46818_basic_type_metatables() {
    same_as_redis(&[
        "getmetatable('').__index = function() return 'PWNED' end",
        "getmetatable('').__len = function() return 1 end",
        "getmetatable('').__concat = function() return 'PWNED' end",
        "local mt = getmetatable('a') mt.__index.format = function() return 'PWNED' end",
        "return tostring(debug)",
        "return {pcall(setmetatable, 1, {})}",
        "return {pcall(setmetatable, 'x', {})}",
        "return ('%d'):format(5) .. ('x'):rep(3)",
    ]);
}

/// CVE-2025-46819: out-of-bound read in the lexer on long string brackets.
#[test]
fn cve_2025_46819_lexer_long_string_brackets() {
    same_as_redis(&[
        "return {loadstring('return [=')}",
        "return {loadstring('return [==')}",
        "return {loadstring('return [==x')}",
        "return {loadstring('return [=[abc')}",
        "return {loadstring('return [==[abc]=]')}",
        "return {loadstring('--[=[ comment')}",
        "return {loadstring('--[==')}",
        "return {loadstring('[' .. string.rep('=', 100000))}",
        "return {loadstring('return [' .. string.rep('=', 70000) .. '[x]' .. string.rep('=', 70000) .. ']')}",
        "return {loadstring('x = \"\\\\' .. string.rep('9', 5000))}",
        "return {loadstring('return [[' .. string.rep('a', 10000))}",
    ]);
    let node = Node::start();
    let mut c = node.raw();
    for body in ["return [=", "return [==[x", "x = [=[", "[==="] {
        let e = err_of(&eval(&mut c, body));
        assert!(e.starts_with("ERR Error compiling script"), "{e}");
    }
    alive(&node);
}

/// CVE-2024-31449: bit.tohex with INT_MIN digits.
#[test]
fn cve_2024_31449_bit_tohex_int_min() {
    same_as_redis(&[
        "return bit.tohex(65535, -2147483648)",
        "return bit.tohex(65535, 2147483647)",
        "return bit.tohex(-1, -2147483647)",
        "return bit.tohex(1, 0)",
        "return bit.tohex(1, -0)",
        "return bit.tohex(1, 2^31)",
    ]);
}

/// CVE-2024-46981: the collector and SCRIPT FLUSH (Redis freed the Lua state under live
/// objects). Scripts build garbage and closures, SCRIPT FLUSH (sync and async) runs between
/// and while another client runs scripts.
#[test]
fn cve_2024_46981_script_flush_and_gc() {
    let node = Node::start();
    let port = node.port;
    let worker = std::thread::spawn(move || {
        let mut c = Raw::connect(port);
        for i in 0..200 {
            let r = eval(
                &mut c,
                &format!(
                    "local t = {{}} for i = 1, 200 do t[i] = {{function() return i end, string.rep('x', 100)}} end \
                     collectgarbage('step') return {i}"
                ),
            );
            assert_eq!(r, R::Int(i), "worker");
        }
    });
    let mut c = node.raw();
    for i in 0..50 {
        let sha = match c.cmd(&["SCRIPT", "LOAD", &format!("return {i}")]) {
            R::Bulk(b) => String::from_utf8(b).expect("sha"),
            other => panic!("{other:?}"),
        };
        assert_eq!(c.cmd(&["EVALSHA", &sha, "0"]), R::Int(i));
        let mode = if i % 2 == 0 { "SYNC" } else { "ASYNC" };
        assert_eq!(c.cmd(&["SCRIPT", "FLUSH", mode]), R::Simple("OK".into()));
        assert!(matches!(c.cmd(&["EVALSHA", &sha, "0"]), R::Err(e) if e.starts_with("NOSCRIPT")));
        assert_eq!(
            eval(&mut c, "collectgarbage('collect') return 1"),
            R::Int(1)
        );
    }
    worker.join().expect("worker");
    alive(&node);
}

/// CVE-2022-24736: a script replacing what the engine itself calls (the error handler, the
/// globals' metatable) crashed Redis when it next raised an error.
#[test]
fn cve_2022_24736_engine_globals_cannot_be_replaced() {
    same_as_redis(&[
        "__redis__err__handler = nil",
        "rawset(_G, '__redis__err__handler', 1)",
        "setmetatable(_G, {})",
        "local g = getmetatable(_G) g.__index = {}",
        "redis = function() return 1 end",
        "_G = {}",
        "error('after the attempts')",
        "return redis.call('nosuchcommand')",
        "return redis.pcall('nosuchcommand')",
        "return {pcall(error, {err = 'x'})}",
        "return {pcall(error)}",
    ]);
}

/// CVE-2022-24735: code injected by one user's script ran in another user's: what one
/// client's script does to the globals is invisible to a second client's.
#[test]
fn cve_2022_24735_no_injection_across_scripts() {
    let node = Node::start();
    let mut a = node.raw();
    let mut b = node.raw();
    let before = eval(&mut b, PROBE);
    for s in [
        "tostring = function() return 'PWNED' end",
        "rawset(_G, 'tostring', function() return 'PWNED' end)",
        "pcall = function() return 'PWNED' end",
        "getmetatable('').__index.format = function() return 'PWNED' end",
        "KEYS = {'PWNED'}",
        "local t = getmetatable(_G) if t then t.__index = function() return 'PWNED' end end",
    ] {
        assert!(matches!(eval(&mut a, s), R::Err(_)), "{s}");
        assert_eq!(eval(&mut b, PROBE), before, "{s}");
        assert_eq!(eval(&mut a, PROBE), before, "{s}");
    }
    assert_eq!(
        b.cmd(&["EVAL", "return KEYS[1]", "1", "mine"]),
        R::Bulk(b"mine".to_vec())
    );
}

/// CVE-2021-32626: the Lua stack overflowed with large replies and many arguments.
#[test]
fn cve_2021_32626_lua_stack_with_large_replies() {
    big_stack(|| {
        same_as_redis(&[
        "local a = {} for i = 1, 7999 do a[i] = 1 end return redis.call('lpush', 'l', unpack(a))",
        "local a = {} for i = 1, 7990 do a[i] = 'v' .. i end return redis.call('rpush', 'l2', unpack(a))",
        "return #redis.call('lrange', 'l2', 0, -1)",
        "local r = redis.call('lrange', 'l2', 0, -1) return r",
        "return {unpack(redis.call('lrange', 'l2', 0, 7000))}",
        "local t = {} for i = 1, 100000 do t[i] = 'x' .. i end return t",
        "local t = {} for i = 1, 20000 do t[i] = {i, {ok = 's'}, 'x'} end return t",
        "local t = {} for i = 1, 7990 do t[i] = 'k' .. i end return #redis.call('mget', unpack(t))",
        "redis.call('del', 'l', 'l2') return 1",
    ])
    });
}

/// CVE-2020-14147 and CVE-2018-11219: integer overflows in struct's sizes and offsets.
#[test]
fn cve_2020_14147_and_2018_11219_struct_integer_overflow() {
    same_as_redis(&[
        "return {pcall(struct.pack, 'i2147483648', 1)}",
        "return {pcall(struct.pack, 'i17', 1)}",
        "return {pcall(struct.pack, 'c99999999999999999999', 'x')}",
        "return {pcall(struct.pack, '!2147483648i', 1)}",
        "return {pcall(struct.pack, '!4294967296i', 1)}",
        "return {pcall(struct.unpack, 'c2147483647', 'x')}",
        "return {pcall(struct.unpack, 'c4294967297', 'x')}",
        "return {pcall(struct.unpack, 'c-1', 'x')}",
        "return {pcall(struct.unpack, 'i', 'x', 2147483647)}",
        "return {pcall(struct.unpack, 'i', 'x', -2147483648)}",
        "return {pcall(struct.unpack, 'i', 'xxxxxxxx', 1e300)}",
        "return {pcall(struct.unpack, 'c0', 'x')}",
        "return {pcall(struct.unpack, 'bc0', '\\255x')}",
        "return {pcall(struct.unpack, 'ic0', '\\255\\255\\255\\127x')}",
        "return {pcall(struct.unpack, 's', 'x')}",
        "return {pcall(struct.size, 'c2147483647c2147483647')}",
        "return {pcall(struct.size, 'c9223372036854775807c9223372036854775807')}",
        "return {pcall(struct.pack, 'x2147483647')}",
        "return {pcall(struct.unpack, 'x2147483647', 'x')}",
        "return {pcall(struct.pack, string.rep('i', 10000), 1)}",
    ]);
}

/// CVE-2018-11218: cmsgpack overflowed the C stack on deep nesting and many values.
#[test]
fn cve_2018_11218_cmsgpack_stack() {
    same_as_redis(&[
        "return {pcall(cmsgpack.unpack, string.rep('\\145', 100000) .. '\\0')}",
        "return {pcall(cmsgpack.unpack, string.rep('\\129\\0', 100000) .. '\\0')}",
        "local t = {} local c = t for i = 1, 10000 do c[1] = {} c = c[1] end return #cmsgpack.pack(t)",
        "local s = string.rep(cmsgpack.pack('ab'), 10000) return {pcall(cmsgpack.unpack, s)}",
        // Redis returns up to ~7,990 values; we return up to 7,000 (see cmsgpack's MAX_RETURN).
        "local s = string.rep(cmsgpack.pack('ab'), 4000) return select('#', cmsgpack.unpack(s))",
        "return {pcall(cmsgpack.unpack, '\\221\\255\\255\\255\\255')}",
        "return {pcall(cmsgpack.unpack, '\\223\\255\\255\\255\\255')}",
        "return {pcall(cmsgpack.unpack_limit, string.rep('\\1', 10000), 2147483647)}",
        "return {pcall(cmsgpack.unpack_one, '\\1', 2147483647)}",
        "return {pcall(cmsgpack.unpack_limit, '\\1\\2', -1, -2147483648)}",
    ]);
}

/// CVE-2015-4335: loadstring of hand-made bytecode (its published shape).
#[test]
fn cve_2015_4335_loadstring_bytecode() {
    let node = Node::start();
    let mut c = node.raw();
    let r = eval(
        &mut c,
        "local f = loadstring(string.dump(function() local a = 1 return a end)) \
         if f then return 'RAN' end return 'refused'",
    );
    assert_eq!(r, R::Bulk(b"refused".to_vec()));
    // The published exploit hand-patches a dump; any first byte \27 must be refused.
    let r = eval(
        &mut c,
        "local s = string.dump(function() return 1 end) \
         s = s:sub(1, 12) .. string.rep('\\255', #s - 12) \
         local f = loadstring(s) return tostring(f)",
    );
    assert_eq!(r, R::Bulk(b"nil".to_vec()));
    alive(&node);
}

// ---------------------------------------------------------------------------------------
// Item 6: RESP injection. Redis maps \r and \n to spaces in status and error replies (Lua's
// {ok=}/{err=} tables and redis.status_reply/error_reply); verbatim strings are length
// prefixed. For big numbers Redis 7.0 writes the bytes as they are, which lets a script
// inject replies: we map \r and \n to spaces there too (the only place we differ).
// ---------------------------------------------------------------------------------------

/// The raw bytes of `EVAL script 0` then `PING`, read until the PONG (the PONG included):
/// what a client sees, and proof the stream is still aligned.
fn exchange(port: u16, resp3: bool, script: &str) -> Vec<u8> {
    let mut c = Raw::connect(port);
    if resp3 {
        c.send(&encode(&[b"HELLO", b"3"]));
        assert!(matches!(c.read(), R::Agg(b'%', _)), "HELLO 3");
    }
    let mut req = encode(&[b"EVAL", script.as_bytes(), b"0"]);
    req.extend_from_slice(&encode(&[b"PING"]));
    c.send(&req);
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 4096];
    while !out.ends_with(b"+PONG\r\n") {
        assert!(
            Instant::now() < deadline,
            "no PONG: {:?}",
            String::from_utf8_lossy(&out)
        );
        let n = c.r.read(&mut buf).expect("read");
        assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&out));
        out.extend_from_slice(&buf[..n]);
    }
    out
}

const INJECTIONS: &[&str] = &[
    "return {ok='x\\r\\n:666'}",
    "return {ok='x\\n:666\\r'}",
    "return {err='x\\r\\n:666'}",
    "return {err='ERR x\\r\\n+OK\\r\\n'}",
    "return redis.status_reply('x\\r\\n:666')",
    "return redis.error_reply('x\\r\\n:666')",
    "return redis.error_reply('-ERR\\r\\n:666')",
    "return {1, {ok='a\\r\\n:1'}, {err='b\\r\\n:2'}}",
    "error({err='x\\r\\n:666'})",
    "error('x\\r\\n:666')",
    "return redis.pcall('nosuch\\r\\n:1')",
    "return {double=1.5}",
    "return {double=1/0}",
    "return {verbatim_string={format='txt', string='a\\r\\n:1'}}",
    "return {verbatim_string={format='t\\r\\n', string='b'}}",
    "return {verbatim_string={format='', string='c'}}",
    "return {verbatim_string={format='txtlonger', string='d'}}",
    "return {map={['k\\r\\n']={ok='v\\r\\n:1'}}}",
    "return {set={['s\\r\\n']=true}}",
];

#[test]
fn resp_injection_matches_redis_in_resp2_and_resp3() {
    let node = Node::start();
    let redis = redis_server();
    for resp3 in [false, true] {
        for s in INJECTIONS {
            let ours = exchange(node.port, resp3, s);
            let theirs = exchange(redis.port, resp3, s);
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs),
                "resp3={resp3}: {s}"
            );
        }
    }
}

#[test]
fn resp_injection_big_numbers_cannot_carry_crlf() {
    let node = Node::start();
    for resp3 in [false, true] {
        for s in [
            "return {big_number='1\\r\\n:666'}",
            "return {big_number='1\\n:666\\r'}",
            "return {1, {big_number='2\\r\\n+OK'}}",
        ] {
            let out = exchange(node.port, resp3, s);
            let text = String::from_utf8_lossy(&out).into_owned();
            // RESP2 sends a big number as a bulk string: length-prefixed, any bytes are
            // safe. RESP3's '(' line must not hold a line break.
            if resp3 {
                assert!(!text.contains("\r\n:666"), "{s}: {text:?}");
                assert!(!text.contains("\r\n+OK\r\n"), "{s}: {text:?}");
            }
            // One reply then the PONG: nothing injected in between.
            let mut c = node.raw();
            if resp3 {
                c.send(&encode(&[b"HELLO", b"3"]));
                c.read();
            }
            let mut req = encode(&[b"EVAL", s.as_bytes(), b"0"]);
            req.extend_from_slice(&encode(&[b"PING"]));
            c.send(&req);
            c.read();
            assert_eq!(c.read(), R::Simple("PONG".into()), "resp3={resp3} {s}");
        }
    }
    // A well-formed big number is still one.
    let out = exchange(
        node.port,
        true,
        "return {big_number='-123456789012345678901234567890'}",
    );
    assert_eq!(
        out,
        b"(-123456789012345678901234567890\r\n+PONG\r\n".to_vec()
    );
}

// ---------------------------------------------------------------------------------------
// Item 10 (Lua part): scripts that trip the Lua binding's limits get a clean error (or
// Redis's reply), never a Rust panic.
// ---------------------------------------------------------------------------------------

#[test]
fn binding_limits_give_clean_errors_without_panics() {
    big_stack(binding_limits_body);
}

fn binding_limits_body() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("node.log");
    let node = Node::start_with(&["--logfile", log.to_str().expect("utf-8 path")]);
    let mut c = node.raw();
    let scripts = [
        // cjson with an unbounded depth and a deep document.
        "cjson.decode_max_depth(2^31-1) local s = string.rep('[', 100000) .. string.rep(']', 100000) \
         return cjson.decode(s)",
        "cjson.decode_max_depth(2^31-1) local s = string.rep('{\"a\":', 100000) .. '1' .. string.rep('}', 100000) \
         return cjson.decode(s)",
        "cjson.encode_max_depth(2^31-1) local t = {} local c = t for i = 1, 100000 do c[1] = {} c = c[1] end \
         return cjson.encode(t)",
        // redis.call and the other library functions with ~8000 string arguments.
        "local t = {} for i = 1, 7990 do t[i] = 'x' .. i end return redis.call('del', unpack(t))",
        "local t = {} for i = 1, 7990 do t[i] = 'x' .. i end return redis.pcall('del', unpack(t))",
        "local t = {} for i = 1, 7990 do t[i] = 'x' .. i end return redis.call('echo', unpack(t))",
        "local t = {} for i = 1, 7990 do t[i] = {} end return redis.pcall('del', unpack(t))",
        "local t = {} for i = 1, 7990 do t[i] = 'x' end return redis.log(redis.LOG_DEBUG, unpack(t))",
        "local t = {} for i = 1, 7990 do t[i] = 'x' end return redis.acl_check_cmd('get', unpack(t))",
        "local t = {} for i = 1, 7990 do t[i] = 'x' end return redis.sha1hex(unpack(t))",
        "local t = {} for i = 1, 7990 do t[i] = 'x' end return redis.setresp(unpack(t))",
        "local t = {} for i = 1, 7990 do t[i] = 'x' end return #cmsgpack.pack(unpack(t))",
        "local t = {} for i = 1, 7990 do t[i] = 'x' end return #struct.pack(string.rep('c1', 7990), unpack(t))",
        "local t = {} for i = 1, 7990 do t[i] = '1' end return bit.bor(unpack(t))",
        "local t = {} for i = 1, 7990 do t[i] = {} end return {pcall(cjson.encode, unpack(t))}",
        // Many values coming back from the libraries.
        "return select('#', struct.unpack(string.rep('c1', 7990), string.rep('x', 7990)))",
        "return select('#', cmsgpack.unpack(string.rep(cmsgpack.pack('ab'), 7990)))",
        // Deep recursion, in Lua and through pcall / redis.pcall.
        "local function f(n) return f(n + 1) + 1 end return f(1)",
        "local function f(n) return redis.pcall('eval', 'return 1', 0), f(n + 1) end return f(1)",
        "local function f() return coroutine.wrap(f)() end return f()",
        // pcall nested until the C stack overflows: each level returns one more value, so
        // the stock pcall pushes its flag past a full frame (an assertion in checked builds).
        "local function f(n) return pcall(f, n + 1) end local t = {f(1)} return #t",
        "local function f(n) return pcall(f, n + 1) end return {f(1)}",
        // Huge and self-referencing returns.
        "local t = {} for i = 1, 200000 do t[i] = 'v' .. i end return t",
        "local t = {} for i = 1, 50000 do t[i] = {i, 'x', {ok = 'y'}} end return t",
        "local t = {} local m = {} for i = 1, 50000 do m['k' .. i] = 'v' .. i end t.map = m redis.setresp(3) return t",
        "local a = {} a[1] = a return a",
        "local t = {} local c = t for i = 1, 100000 do c[1] = {} c = c[1] end return t",
        "local t = {} for i = 1, 7990 do t[i] = 'x' end return unpack(t)",
    ];
    for s in scripts {
        let mut req = encode(&[b"EVAL", s.as_bytes(), b"0"]);
        req.extend_from_slice(&encode(&[b"PING"]));
        c.send(&req);
        // The script's reply (any shape), then PONG on the same connection.
        let _ = c.read();
        loop {
            match c.read() {
                R::Simple(p) if p == "PONG" => break,
                // The rest of a reply cut off by an error (a self-referencing table).
                R::Err(_) | R::Arr(_) => continue,
                other => panic!("{s}: {other:?}"),
            }
        }
        alive(&node);
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!text.contains("panicked"), "panic in the log:\n{text}");
    assert!(
        !text.contains("RUST_BACKTRACE"),
        "panic in the log:\n{text}"
    );
}

#[test]
fn binding_limits_answer_as_redis() {
    // lua-cjson stops at Lua's stack limit (7,999 levels); we stop at 1,000 levels with
    // the same error (each level costs a reference of the binding's and Rust stack).
    same_as_redis(&[
        "cjson.decode_max_depth(2^31-1) local s = string.rep('[', 100000) .. string.rep(']', 100000) \
         local ok, e = pcall(cjson.decode, s) return {tostring(ok), string.sub(e, 1, 38)}",
        "cjson.decode_max_depth(2^31-1) local s = string.rep('[', 900) .. string.rep(']', 900) \
         local ok, e = pcall(cjson.decode, s) return {tostring(ok), type(e)}",
        "local t = {} for i = 1, 9000 do t[i] = 'x' .. i end return #cjson.encode(t)",
        "local t = {} for i = 1, 9000 do t['k' .. i] = 'x' end return #cjson.encode(t)",
        "local t = {} for i = 1, 7990 do t[i] = 'x' .. i end return redis.call('del', unpack(t))",
        "local t = {} for i = 1, 7999 do t[i] = 'x' .. i end return redis.call('exists', unpack(t))",
        "local function f(n) return f(n + 1) + 1 end return f(1)",
        "local t = {} for i = 1, 200000 do t[i] = 'v' .. i end return #t",
    ]);
}
