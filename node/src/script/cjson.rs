//! The `cjson` library Redis embeds (lua-cjson 2.1 subset: encode, decode, null), on
//! serde_json for parsing. Encoding is hand-written because lua-cjson's rules (array
//! detection, `%.14g` numbers, `\/` escapes) are what scripts' outputs depend on.

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use crate::resp::writer::fmt_g;

/// Raises `msg` the way luaL_error does: prefixed with the calling script line.
pub fn lua_error(lua: &Lua, msg: &str) -> mlua::Error {
    let at = lua
        .inspect_stack(1, |d| {
            let src = d.source().short_src.map(|s| s.into_owned());
            (src, d.current_line())
        })
        .and_then(|(s, l)| Some(format!("{}:{}: ", s?, l?)))
        .unwrap_or_default();
    mlua::Error::RuntimeError(format!("{at}{msg}"))
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// The `cjson` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("null", null())?;
    t.raw_set(
        "encode",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(lua_error(
                    lua,
                    "bad argument #1 to 'encode' (expected 1 argument)",
                ));
            }
            let mut out = String::new();
            encode(lua, &args[0], &mut out, 0)?;
            lua.create_string(out)
        })?,
    )?;
    t.raw_set(
        "decode",
        lua.create_function(|lua, args: MultiValue| {
            let s = match (args.len(), args.front()) {
                (1, Some(Value::String(s))) => s.as_bytes().to_vec(),
                (1, Some(v @ (Value::Number(_) | Value::Integer(_)))) => lua
                    .coerce_string(v.clone())?
                    .map(|s| s.as_bytes().to_vec())
                    .unwrap_or_default(),
                _ => {
                    return Err(lua_error(
                        lua,
                        "bad argument #1 to 'decode' (expected 1 argument)",
                    ))
                }
            };
            let v: serde_json::Value = serde_json::from_slice(&s).map_err(|e| {
                lua_error(lua, &format!("Expected value but found invalid token: {e}"))
            })?;
            to_lua(lua, &v)
        })?,
    )?;
    Ok(t)
}

fn to_lua(lua: &Lua, v: &serde_json::Value) -> mlua::Result<Value> {
    use serde_json::Value as J;
    Ok(match v {
        J::Null => null(),
        J::Bool(b) => Value::Boolean(*b),
        J::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        J::String(s) => Value::String(lua.create_string(s)?),
        J::Array(a) => {
            let t = lua.create_table_with_capacity(a.len(), 0)?;
            for (i, x) in a.iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, x)?)?;
            }
            Value::Table(t)
        }
        J::Object(o) => {
            let t = lua.create_table_with_capacity(0, o.len())?;
            for (k, x) in o {
                t.raw_set(k.as_str(), to_lua(lua, x)?)?;
            }
            Value::Table(t)
        }
    })
}

fn number(lua: &Lua, n: f64, out: &mut String) -> mlua::Result<()> {
    if !n.is_finite() {
        return Err(lua_error(
            lua,
            "Cannot serialise number: must not be NaN or Inf",
        ));
    }
    out.push_str(&fmt_g(n, 14));
    Ok(())
}

fn string(s: &[u8], out: &mut String) {
    out.push('"');
    for ch in String::from_utf8_lossy(s).chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn encode(lua: &Lua, v: &Value, out: &mut String, depth: usize) -> mlua::Result<()> {
    match v {
        Value::Nil => out.push_str("null"),
        Value::LightUserData(p) if p.0.is_null() => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Integer(i) => out.push_str(&i.to_string()),
        Value::Number(n) => number(lua, *n, out)?,
        Value::String(s) => string(&s.as_bytes(), out),
        Value::Table(t) => {
            if depth >= 1000 {
                return Err(lua_error(
                    lua,
                    &format!("Cannot serialise, excessive nesting ({})", depth + 1),
                ));
            }
            table(lua, t, out, depth + 1)?
        }
        other => {
            return Err(lua_error(
                lua,
                &format!("Cannot serialise {}: type not supported", other.type_name()),
            ))
        }
    }
    Ok(())
}

fn table(lua: &Lua, t: &Table, out: &mut String, depth: usize) -> mlua::Result<()> {
    let mut pairs: Vec<(Value, Value)> = Vec::new();
    for p in t.clone().pairs::<Value, Value>() {
        pairs.push(p?);
    }
    // lua-cjson: an array when every key is a positive integer, not excessively sparse.
    let mut max = 0usize;
    let is_array = !pairs.is_empty()
        && pairs.iter().all(|(k, _)| {
            let n = match k {
                Value::Integer(i) => *i as f64,
                Value::Number(n) => *n,
                _ => return false,
            };
            if n >= 1.0 && n.fract() == 0.0 && n <= u32::MAX as f64 {
                max = max.max(n as usize);
                true
            } else {
                false
            }
        });
    if is_array {
        if max > 10 && max > pairs.len() * 2 {
            return Err(lua_error(
                lua,
                "Cannot serialise table: excessively sparse array",
            ));
        }
        out.push('[');
        for i in 1..=max {
            if i > 1 {
                out.push(',');
            }
            let v: Value = t.raw_get(i)?;
            encode(lua, &v, out, depth)?;
        }
        out.push(']');
        return Ok(());
    }
    out.push('{');
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match k {
            Value::String(s) => string(&s.as_bytes(), out),
            Value::Integer(n) => string(n.to_string().as_bytes(), out),
            Value::Number(n) => string(fmt_g(*n, 14).as_bytes(), out),
            other => {
                return Err(lua_error(
                    lua,
                    &format!(
                        "Cannot serialise {}: table key must be a number or string",
                        other.type_name()
                    ),
                ))
            }
        }
        out.push(':');
        encode(lua, v, out, depth)?;
    }
    out.push('}');
    Ok(())
}
