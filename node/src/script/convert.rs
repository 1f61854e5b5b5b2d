//! Conversions between command replies (RESP2 bytes written by a handler) and Lua values,
//! and from a script's Lua result to the client's reply, as Redis 7.0 documents them.

use mlua::{Lua, Table, Value};

use crate::resp::Out;

/// One parsed reply: a Lua value, or an error reply (the message without its '-').
pub enum Parsed {
    Val(Value),
    Err(String),
}

/// Reads one CRLF-terminated line starting at `*pos`.
fn line<'b>(r: &'b [u8], pos: &mut usize) -> Option<&'b [u8]> {
    let rest = r.get(*pos..)?;
    let end = memchr::memchr(b'\r', rest)?;
    *pos += end + 2;
    Some(&rest[..end])
}

fn num(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Parses one RESP2 reply at `*pos` into a Lua value: integer -> number, bulk -> string,
/// nil bulk / nil array -> false, status -> {ok=...}, error -> {err=...} (nested) or
/// [`Parsed::Err`] (top level), array -> table.
pub fn parse_reply(lua: &Lua, r: &[u8], pos: &mut usize, top: bool) -> mlua::Result<Parsed> {
    parse_nested(lua, r, pos, top, 0)
}

/// Nesting [`parse_reply`] follows at most. Command replies nest a few levels (COMMAND DOCS,
/// the deepest, under ten); a level costs ~14 KiB of stack in a debug build, so the bound
/// keeps arbitrary input, as the fuzz target feeds, well inside a 2 MiB thread.
const MAX_PARSE_DEPTH: usize = 64;

/// `n` bytes at `*pos` and the CRLF after them, or None past the end.
fn payload<'b>(r: &'b [u8], pos: &mut usize, n: i64) -> Option<&'b [u8]> {
    let n = usize::try_from(n).ok()?;
    let end = pos.checked_add(n)?;
    let s = r.get(*pos..end)?;
    *pos = end.checked_add(2)?;
    Some(s)
}

fn parse_nested(
    lua: &Lua,
    r: &[u8],
    pos: &mut usize,
    top: bool,
    depth: usize,
) -> mlua::Result<Parsed> {
    let bad = || mlua::Error::RuntimeError("ERR malformed reply from command".into());
    if depth > MAX_PARSE_DEPTH {
        return Err(bad());
    }
    let parse_reply =
        |lua: &Lua, r: &[u8], pos: &mut usize, top: bool| parse_nested(lua, r, pos, top, depth + 1);
    let kind = *r.get(*pos).ok_or_else(bad)?;
    *pos += 1;
    let l = line(r, pos).ok_or_else(bad)?;
    let v = match kind {
        b'+' => {
            let t = lua.create_table()?;
            t.raw_set("ok", lua.create_string(l)?)?;
            Value::Table(t)
        }
        b'-' => {
            let msg = String::from_utf8_lossy(l).into_owned();
            if top {
                return Ok(Parsed::Err(msg));
            }
            let t = lua.create_table()?;
            t.raw_set("err", msg)?;
            Value::Table(t)
        }
        b':' => Value::Number(num(l).ok_or_else(bad)? as f64),
        b'$' => {
            let n = num(l).ok_or_else(bad)?;
            if n < 0 {
                Value::Boolean(false)
            } else {
                let s = payload(r, pos, n).ok_or_else(bad)?;
                Value::String(lua.create_string(s)?)
            }
        }
        b'*' => {
            let n = num(l).ok_or_else(bad)?;
            if n < 0 {
                Value::Boolean(false)
            } else {
                // Every element takes at least 3 bytes: a count beyond that is a lie.
                let room = r.len().saturating_sub(*pos) / 3;
                let t = lua.create_table_with_capacity((n as usize).min(room), 0)?;
                for i in 0..n {
                    match parse_reply(lua, r, pos, false)? {
                        Parsed::Val(v) => t.raw_set(i + 1, v)?,
                        Parsed::Err(_) => return Err(bad()),
                    }
                }
                Value::Table(t)
            }
        }
        // RESP3 (after redis.setresp(3)): Redis 7.0's Lua forms.
        b'_' => Value::Nil,
        b'#' => Value::Boolean(l == b"t"),
        b',' => {
            let n: f64 = std::str::from_utf8(l)
                .ok()
                .and_then(|s| match s {
                    "inf" => Some(f64::INFINITY),
                    "-inf" => Some(f64::NEG_INFINITY),
                    "nan" => Some(f64::NAN),
                    s => s.parse().ok(),
                })
                .ok_or_else(bad)?;
            let t = lua.create_table()?;
            t.raw_set("double", n)?;
            Value::Table(t)
        }
        b'(' => {
            let t = lua.create_table()?;
            t.raw_set("big_number", lua.create_string(l)?)?;
            Value::Table(t)
        }
        b'=' => {
            let n = num(l).ok_or_else(bad)?;
            let s = payload(r, pos, n).ok_or_else(bad)?;
            let (fmt, text) = if s.len() >= 4 {
                s.split_at(4)
            } else {
                (&s[..0], s)
            };
            let v = lua.create_table()?;
            v.raw_set(
                "format",
                lua.create_string(&fmt[..fmt.len().saturating_sub(1)])?,
            )?;
            v.raw_set("string", lua.create_string(text)?)?;
            let t = lua.create_table()?;
            t.raw_set("verbatim_string", v)?;
            Value::Table(t)
        }
        b'%' | b'~' => {
            let n = num(l).ok_or_else(bad)?;
            let inner = lua.create_table()?;
            for _ in 0..n.max(0) {
                let k = match parse_reply(lua, r, pos, false)? {
                    Parsed::Val(v) => v,
                    Parsed::Err(_) => return Err(bad()),
                };
                let v = if kind == b'%' {
                    match parse_reply(lua, r, pos, false)? {
                        Parsed::Val(v) => v,
                        Parsed::Err(_) => return Err(bad()),
                    }
                } else {
                    Value::Boolean(true)
                };
                // A nil key (`_` in a set or as a map key) cannot index a table: raw_set
                // would raise outside any protected call. It is left out, as a Lua table
                // cannot hold it anyway.
                if !k.is_nil() {
                    inner.raw_set(k, v)?;
                }
            }
            let t = lua.create_table()?;
            t.raw_set(if kind == b'%' { "map" } else { "set" }, inner)?;
            Value::Table(t)
        }
        // An attribute: not exposed to scripts (as Redis 7.0); the reply after it counts.
        b'|' => {
            let n = num(l).ok_or_else(bad)?;
            for _ in 0..n.max(0).saturating_mul(2) {
                if let Parsed::Err(_) = parse_reply(lua, r, pos, false)? {
                    return Err(bad());
                }
            }
            return parse_reply(lua, r, pos, top);
        }
        _ => return Err(bad()),
    };
    Ok(Parsed::Val(v))
}

/// Lua number -> reply integer: truncated like C's `(long long)` cast (out of range gives
/// i64::MIN as on x86, which is what redis-server replies for 1e20).
pub fn lua_int(n: f64) -> i64 {
    if !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// Writes a script's result: string -> bulk, number -> integer, true -> 1, false/nil ->
/// nil bulk, {err=s} -> error, {ok=s} -> status, other tables -> array up to the first nil.
/// `resp3_script`: the script asked for RESP3 (`redis.setresp(3)`): booleans stay booleans.
pub fn write_value(out: &mut Out, v: &Value, resp3_script: bool) {
    write_nested(out, v, 0, resp3_script);
}

/// Nesting a reply may have: Redis stops at Lua's C stack limit (about 8000 levels) with
/// this error; we stop earlier so a self-referencing table can't overflow a worker's stack.
const MAX_DEPTH: usize = 1000;

fn write_nested(out: &mut Out, v: &Value, depth: usize, resp3_script: bool) {
    if depth >= MAX_DEPTH {
        out.error("ERR reached lua stack limit");
        return;
    }
    match v {
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Integer(i) => out.int(*i),
        Value::Number(n) => out.int(lua_int(*n)),
        Value::Boolean(b) if resp3_script => out.boolean(*b),
        Value::Boolean(true) => out.int(1),
        Value::Table(t) => write_table(out, t, depth, resp3_script),
        _ => out.null(),
    }
}

/// A line-type reply's text with CR and LF replaced by spaces, as Redis does for status
/// and error replies: a script can't end the line early and write replies of its own.
fn one_line(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace(['\r', '\n'], " ")
}

/// A verbatim string's format as Redis writes it: exactly 3 bytes, cut or padded with
/// spaces (a longer one would break the length the reply declares).
fn verbatim_format(f: &[u8]) -> String {
    let mut fmt: Vec<u8> = f.iter().copied().take(3).collect();
    fmt.resize(3, b' ');
    // Inside a length-prefixed payload any byte is safe; non-UTF-8 ones become '?'.
    fmt.iter()
        .map(|&c| if c.is_ascii() { c as char } else { '?' })
        .collect()
}

fn write_table(out: &mut Out, t: &Table, depth: usize, resp3_script: bool) {
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        // Redis trims line breaks at both ends of an error, then maps the inner ones.
        let b = e.as_bytes();
        let crlf = |c: &u8| *c == b'\r' || *c == b'\n';
        let start = b.iter().position(|c| !crlf(c)).unwrap_or(b.len());
        let end = b.iter().rposition(|c| !crlf(c)).map_or(start, |i| i + 1);
        out.error(&one_line(b.get(start..end).unwrap_or_default()));
        return;
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        out.simple(&one_line(&s.as_bytes()));
        return;
    }
    if let Ok(Value::Number(d)) = t.raw_get::<Value>("double") {
        out.double(d);
        return;
    }
    if let Ok(Value::Integer(d)) = t.raw_get::<Value>("double") {
        out.double(d as f64);
        return;
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
        // Redis 7.0 writes these bytes as they are; a line break would let the script
        // write replies of its own, so it gets the status line's treatment.
        out.big_number(&one_line(&s.as_bytes()));
        return;
    }
    // Aggregates are counted first and then written element by element: each element's
    // Lua reference is dropped before the next is taken (the binding's reference stack
    // holds about 8,000, fewer than the elements of a big reply).
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        out.map(m.pairs::<Value, Value>().filter(|p| p.is_ok()).count());
        for (k, v) in m.pairs::<Value, Value>().filter_map(|p| p.ok()) {
            write_nested(out, &k, depth + 1, resp3_script);
            write_nested(out, &v, depth + 1, resp3_script);
        }
        return;
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("set") {
        out.set(m.pairs::<Value, Value>().filter(|p| p.is_ok()).count());
        for (k, _) in m.pairs::<Value, Value>().filter_map(|p| p.ok()) {
            write_nested(out, &k, depth + 1, resp3_script);
        }
        return;
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
        if let (Ok(Value::String(f)), Ok(Value::String(s))) =
            (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
        {
            out.verbatim(&s.as_bytes(), &verbatim_format(&f.as_bytes()));
            return;
        }
    }
    // Up to the first nil, as Redis.
    let mut n = 0usize;
    while matches!(t.raw_get::<Value>(n + 1), Ok(v) if !v.is_nil()) {
        n += 1;
    }
    out.array(n);
    for i in 1..=n {
        match t.raw_get::<Value>(i) {
            Ok(v) => write_nested(out, &v, depth + 1, resp3_script),
            Err(_) => out.null(),
        }
    }
}

/// Fuzzing entry point for the Lua value conversions (issue 15), without a connection:
/// `data` is read as one command reply (RESP2, plus the RESP3 types a script sees after
/// `redis.setresp(3)`) into the Lua value `redis.call` would hand a script; that value is
/// then written back as a script's reply, in RESP2 and in RESP3, and the RESP2 bytes are
/// parsed once more. Returns the two encodings, or None when `data` does not start with
/// one well-formed reply (an error reply included). Drive it with any bytes and one
/// `mlua::Lua::new()` (reusable across inputs); it must neither panic nor overflow the
/// stack, whatever the input.
pub fn fuzz_roundtrip(lua: &Lua, data: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut pos = 0;
    let v = match parse_reply(lua, data, &mut pos, true).ok()? {
        Parsed::Val(v) => v,
        Parsed::Err(_) => return None,
    };
    let mut encoded = [Vec::new(), Vec::new()];
    for (resp3, bytes) in [false, true].into_iter().zip(encoded.iter_mut()) {
        let mut out = Out::new(resp3);
        write_value(&mut out, &v, false);
        *bytes = out.buf.to_vec();
    }
    let mut pos = 0;
    let _ = parse_reply(lua, &encoded[0], &mut pos, true);
    let [resp2, resp3] = encoded;
    Some((resp2, resp3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_truncate_like_a_c_cast() {
        assert_eq!(lua_int(3.99), 3);
        assert_eq!(lua_int(-3.99), -3);
        assert_eq!(lua_int(1e20), i64::MIN);
        assert_eq!(lua_int(f64::NAN), i64::MIN);
    }

    #[test]
    fn replies_become_lua_values() {
        let lua = Lua::new();
        let r = b"*3\r\n:5\r\n$-1\r\n+OK\r\n";
        let mut pos = 0;
        let Parsed::Val(Value::Table(t)) = parse_reply(&lua, r, &mut pos, true).expect("parse")
        else {
            panic!("not a table");
        };
        assert_eq!(pos, r.len());
        assert_eq!(t.raw_get::<f64>(1).expect("1"), 5.0);
        assert!(!t.raw_get::<bool>(2).expect("2"));
        let ok: Table = t.raw_get(3).expect("3");
        assert_eq!(ok.raw_get::<String>("ok").expect("ok"), "OK");
        let mut pos = 0;
        assert!(matches!(
            parse_reply(&lua, b"-ERR x\r\n", &mut pos, true),
            Ok(Parsed::Err(m)) if m == "ERR x"
        ));
    }
}
