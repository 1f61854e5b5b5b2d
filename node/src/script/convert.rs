//! Conversions between command replies (RESP2 bytes written by a handler) and Lua values,
//! and from a script's Lua result to the client's reply, as Redis 7.0 documents them.

use mlua::{Lua, Table, Value};

use crate::resp::Out;

thread_local! {
    /// The protocol the running script asked for with `redis.setresp` (2 by default).
    pub static SCRIPT_RESP: std::cell::Cell<u8> = const { std::cell::Cell::new(2) };
}

fn resp3_script() -> bool {
    SCRIPT_RESP.with(|r| r.get() == 3)
}

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
    let bad = || mlua::Error::RuntimeError("ERR malformed reply from command".into());
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
                let s = r.get(*pos..*pos + n as usize).ok_or_else(bad)?;
                *pos += n as usize + 2;
                Value::String(lua.create_string(s)?)
            }
        }
        b'*' => {
            let n = num(l).ok_or_else(bad)?;
            if n < 0 {
                Value::Boolean(false)
            } else {
                let t = lua.create_table_with_capacity(n as usize, 0)?;
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
            let n = num(l).ok_or_else(bad)? as usize;
            let s = r.get(*pos..*pos + n).ok_or_else(bad)?;
            *pos += n + 2;
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
                inner.raw_set(k, v)?;
            }
            let t = lua.create_table()?;
            t.raw_set(if kind == b'%' { "map" } else { "set" }, inner)?;
            Value::Table(t)
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
pub fn write_value(out: &mut Out, v: &Value) {
    write_nested(out, v, 0);
}

/// Nesting a reply may have: Redis stops at Lua's C stack limit (about 8000 levels) with
/// this error; we stop earlier so a self-referencing table can't overflow a worker's stack.
const MAX_DEPTH: usize = 1000;

fn write_nested(out: &mut Out, v: &Value, depth: usize) {
    if depth >= MAX_DEPTH {
        out.error("ERR reached lua stack limit");
        return;
    }
    match v {
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Integer(i) => out.int(*i),
        Value::Number(n) => out.int(lua_int(*n)),
        Value::Boolean(b) if resp3_script() => out.boolean(*b),
        Value::Boolean(true) => out.int(1),
        Value::Table(t) => write_table(out, t, depth),
        _ => out.null(),
    }
}

fn write_table(out: &mut Out, t: &Table, depth: usize) {
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        let msg = String::from_utf8_lossy(&e.as_bytes()).into_owned();
        out.error(&msg);
        return;
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        let msg = String::from_utf8_lossy(&s.as_bytes()).into_owned();
        out.simple(&msg);
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
        out.big_number(&String::from_utf8_lossy(&s.as_bytes()));
        return;
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().filter_map(|p| p.ok()).collect();
        out.map(pairs.len());
        for (k, v) in &pairs {
            write_nested(out, k, depth + 1);
            write_nested(out, v, depth + 1);
        }
        return;
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("set") {
        let keys: Vec<Value> = m
            .pairs::<Value, Value>()
            .filter_map(|p| p.ok().map(|(k, _)| k))
            .collect();
        out.set(keys.len());
        for k in &keys {
            write_nested(out, k, depth + 1);
        }
        return;
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
        if let (Ok(Value::String(f)), Ok(Value::String(s))) =
            (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
        {
            out.verbatim(&s.as_bytes(), &String::from_utf8_lossy(&f.as_bytes()));
            return;
        }
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
    }
    out.array(items.len());
    for v in &items {
        write_nested(out, v, depth + 1);
    }
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
