//! Lua's `cjson` library against redis-server 7.0's (lua-cjson 2.1): the same inputs
//! decoded on both servers (dumped by a script with sorted keys, so table order doesn't
//! matter), the same values encoded, and every error text (which names the token and the
//! character) compared exactly. Strings are byte strings in both directions.

use tessera_testkit::diff::*;

/// Dumps a decoded value deterministically: tables with sorted keys, numbers with 17
/// digits, strings with %q (byte-exact), cjson.null as `null`.
const DUMP: &str = r#"
local function dump(v)
  local t = type(v)
  if t == 'table' then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. '=' .. dump(v[k]) end
    return '{' .. table.concat(parts, ',') .. '}'
  elseif t == 'userdata' then
    return 'null'
  elseif t == 'number' then
    return string.format('%.17g', v)
  elseif t == 'string' then
    return string.format('%q', v)
  end
  return tostring(v)
end
return dump(cjson.decode(ARGV[1]))
"#;

/// JSON texts to decode (valid, lua-cjson extensions, and malformed).
const DECODE: &[&str] = &[
    "[1,2,3]",
    "{\"a\":1,\"b\":[true,false,null],\"c\":{\"d\":\"e\"}}",
    "  [ 1 , 2 ]  ",
    "\"plain\"",
    "123",
    "-0",
    "1.5e3",
    "1E-2",
    "-12.25",
    "1e400",
    "-1e400",
    "[1e-400]",
    "0x10",
    "0X1f",
    "+5",
    "01",
    "-01",
    "inf",
    "-Infinity",
    "nan",
    "NaN",
    "[1.]",
    "[.5]",
    "[-]",
    "[1,2",
    "[1,2,]",
    "[,]",
    "{\"a\":1,}",
    "{\"a\" 1}",
    "{1:2}",
    "{\"a\":}",
    "",
    "   ",
    "nul",
    "tru",
    "falsey",
    "[true false]",
    "[1] x",
    "[1]]",
    "\"unterminated",
    "\"bad \\q escape\"",
    "\"\\u00e9\\u4e2d\\ud83d\\ude00\"",
    "\"\\ud800\"",
    "\"\\ud800\\u0041\"",
    "\"\\udc00\"",
    "\"\\u12\"",
    "\"\\u0000x\"",
    "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"",
    "\"tab\there\"",
    "{\"dup\":1,\"dup\":2}",
    "[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]",
    "{\"a\":{\"b\":{\"c\":[{}]}}}",
    "[]",
    "{}",
    "[{},[],\"\",0]",
    "x",
    "'single'",
    "[1]\u{0}garbage",
];

fn eval(c: &mut Conn, script: &str, args: &[&str]) -> Reply {
    let mut v = vec!["EVAL", script, "0"];
    v.extend_from_slice(args);
    c.cmd(&v)
}

fn servers() -> (Server, Server) {
    let t = tessera();
    let r = redis();
    (t, r)
}

#[test]
fn decode_matches_redis() {
    let (t, r) = servers();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    let mut inputs: Vec<String> = DECODE.iter().map(|s| s.to_string()).collect();
    // Nesting around lua-cjson's limit of 1000.
    for depth in [999, 1000, 1001, 5000] {
        inputs.push(format!("{}{}", "[".repeat(depth), "]".repeat(depth)));
    }
    inputs.push(format!("{}1", "{\"k\":".repeat(1001)));
    let mut failures = Vec::new();
    for input in &inputs {
        let (x, y) = (eval(&mut a, DUMP, &[input]), eval(&mut b, DUMP, &[input]));
        if x != y {
            failures.push(format!(
                "decode {input:?}:\n  tessera: {x:?}\n  redis:   {y:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{} decodes identical to redis-server's", inputs.len());
}

/// Scripts whose reply is cjson's output or error; tables have at most one non-array key
/// so the encoded order doesn't depend on the hash table's.
const ENCODE: &[&str] = &[
    "return cjson.encode({1, 2, 3})",
    "return cjson.encode({})",
    "return cjson.encode({a = {b = {1, 'x', false}}})",
    "return cjson.encode('\\255\\0\\1\\127\\31 \"\\\\/')",
    "return cjson.encode({['\\200key'] = '\\200value'})",
    "return cjson.encode(1/3)",
    "return cjson.encode(123456789012345678)",
    "return cjson.encode(-0.0)",
    "return cjson.encode(1e300)",
    "return cjson.encode(1/0)",
    "return cjson.encode(0/0)",
    "return cjson.encode({[1] = 1, [3] = 3})",
    "return cjson.encode({[1] = 1, [20] = 20})",
    "return cjson.encode({[2.5] = 'x'})",
    "return cjson.encode({[true] = 1})",
    "return cjson.encode(cjson.null)",
    "return cjson.encode(nil)",
    "return cjson.encode(print)",
    "return cjson.encode()",
    "return cjson.encode(1, 2)",
    "return cjson.decode()",
    "return cjson.decode('[1]', 2)",
    "return cjson.decode(12)",
    "return cjson.decode({})",
    "return cjson.decode(true)",
    "return cjson.decode(nil)",
    "return cjson.decode(cjson.null)",
    "return cjson.encode({[123456789012345678] = 1})",
    "return cjson.encode({[1e20] = 1})",
    "local t = {} local c = t for i = 1, 1000 do c[1] = {} c = c[1] end return cjson.encode(t)",
    "local t = {} local c = t for i = 1, 998 do c[1] = {} c = c[1] end return #cjson.encode(t)",
    "return cjson.decode(cjson.encode('\\255\\254')) == '\\255\\254'",
    "return cjson.decode('\"\\255\\254\"') == '\\255\\254'",
    "return cjson.encode(cjson.decode('[\"\\\\u00e9\"]'))",
];

#[test]
fn encode_matches_redis() {
    let (t, r) = servers();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    let mut failures = Vec::new();
    for script in ENCODE {
        let (x, y) = (eval(&mut a, script, &[]), eval(&mut b, script, &[]));
        if x != y {
            failures.push(format!("{script}:\n  tessera: {x:?}\n  redis:   {y:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Random byte strings through cjson.decode: never a crash, and the same reply as redis
/// (a decoded value or the same error).
#[test]
fn random_inputs_match_redis() {
    let (t, r) = servers();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    let mut rng = tessera_testkit::diff::Rng(0x5eed_c15a);
    let alphabet = b"[]{}:,\"\\ -+.0123456789eExXtrufalsniINfy/bu\t\n";
    let mut failures = Vec::new();
    for _ in 0..1500 {
        let len = rng.below(24) as usize;
        let s: String = (0..len)
            .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize] as char)
            .collect();
        let (x, y) = (eval(&mut a, DUMP, &[&s]), eval(&mut b, DUMP, &[&s]));
        if x != y {
            failures.push(format!("decode {s:?}:\n  tessera: {x:?}\n  redis:   {y:?}"));
        }
    }
    assert_eq!(a.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert!(
        failures.is_empty(),
        "{} of 1500 differ:\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// lua-cjson's settings functions, in order on one connection (settings persist from one
/// script to the next, as in redis's one Lua state): returned values, their effect on
/// encode/decode, argument errors, and `cjson.new()` tables with settings of their own.
const SETTINGS: &[&str] = &[
    "return {cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision()}",
    "return {cjson.encode_sparse_array()}",
    "return {cjson.encode_keep_buffer(), cjson.decode_invalid_numbers()}",
    "return cjson.encode_invalid_numbers()",
    "return {cjson._NAME, cjson._VERSION}",
    "return cjson.encode_max_depth(2)",
    "return cjson.encode({{1}})",
    "return cjson.encode({{{1}}})",
    "return cjson.encode_max_depth(1000)",
    "return cjson.decode_max_depth(2)",
    "return cjson.decode('[[1]]')[1][1]",
    "return cjson.decode('[[[1]]]')",
    "return cjson.decode('{\"a\":{\"b\":{}}}')",
    "return cjson.decode_max_depth(1000)",
    "return cjson.encode({[1] = 1, [20] = 5})",
    "return {cjson.encode_sparse_array(true)}",
    "return cjson.encode({[1] = 1, [20] = 5})",
    "return {cjson.encode_sparse_array(false, 0)}",
    "return cjson.encode({[1] = 1, [20] = 5})",
    "return {cjson.encode_sparse_array(false, 3, 5)}",
    "return cjson.encode({[1] = 1, [7] = 7})",
    "return cjson.encode({[1] = 1, [4] = 4})",
    "return {cjson.encode_sparse_array(false, 2, 10)}",
    "return cjson.encode_number_precision(3)",
    "return cjson.encode({3.14159, 1/3, 123456})",
    "return cjson.encode({[2.5] = 1})",
    "return cjson.encode_number_precision(14)",
    "return cjson.encode_number_precision(15)",
    "return cjson.encode_number_precision(0)",
    "return cjson.encode_max_depth('x')",
    "return cjson.encode_max_depth('5')",
    "return cjson.encode_max_depth(1000)",
    "return cjson.encode_max_depth(1, 2)",
    "return cjson.encode_invalid_numbers(true)",
    "return cjson.encode({1/0, -1/0})",
    "return cjson.encode_invalid_numbers('null')",
    "return cjson.encode({1/0, 5})",
    "return cjson.encode_invalid_numbers('x')",
    "return cjson.encode_invalid_numbers(false)",
    "return cjson.encode(1/0)",
    "return cjson.decode_invalid_numbers(false)",
    "return cjson.decode('NaN')",
    "return cjson.decode('0x10')",
    "return cjson.decode('[+1]')",
    "return cjson.decode('[01]')",
    "return cjson.decode('[-Infinity]')",
    "return cjson.decode_invalid_numbers('on')",
    "return cjson.decode('0x10')",
    "return cjson.encode_keep_buffer('off')",
    "return cjson.encode_keep_buffer(true)",
    "return cjson.encode_keep_buffer(5)",
    "local c = cjson.new() c.encode_max_depth(1) return {cjson.encode_max_depth(), c.encode_max_depth(), c.encode({1}), (pcall(c.encode, {{1}}))}",
    "local c = cjson.new() return {c.encode({a = 1}), c._NAME, type(c.null)}",
];

#[test]
fn settings_match_redis() {
    let (t, r) = servers();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    let mut failures = Vec::new();
    for script in SETTINGS {
        let (x, y) = (eval(&mut a, script, &[]), eval(&mut b, script, &[]));
        if x != y {
            failures.push(format!("{script}:\n  tessera: {x:?}\n  redis:   {y:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
