//! The `bit` library Redis embeds (LuaBitOp 1.0): 32-bit operations on Lua numbers.

use mlua::{Lua, MultiValue, Table, Value};

/// LuaBitOp's normalisation: the number rounded and wrapped to a signed 32-bit integer
/// (it adds 2^52+2^51 and keeps the low word of the double).
fn tobit(lua: &Lua, v: &Value) -> mlua::Result<i32> {
    let n = match v {
        Value::Integer(i) => *i as f64,
        Value::Number(n) => *n,
        Value::String(_) => match lua.coerce_number(v.clone())? {
            Some(n) => n,
            None => {
                return Err(mlua::Error::RuntimeError(
                    "bad argument (number expected)".into(),
                ))
            }
        },
        other => {
            return Err(mlua::Error::RuntimeError(format!(
                "bad argument #1 (number expected, got {})",
                other.type_name()
            )))
        }
    };
    Ok(((n + 6_755_399_441_055_744.0).to_bits() as u32) as i32)
}

fn arg(lua: &Lua, a: &MultiValue, i: usize) -> mlua::Result<i32> {
    tobit(lua, a.get(i).unwrap_or(&Value::Nil))
}

/// The `bit` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let unary = |f: fn(i32) -> i32| {
        lua.create_function(move |lua, a: MultiValue| Ok(f(arg(lua, &a, 0)?) as f64))
    };
    t.raw_set("tobit", unary(|x| x)?)?;
    t.raw_set("bnot", unary(|x| !x)?)?;
    t.raw_set("bswap", unary(|x| x.swap_bytes())?)?;
    let fold = |f: fn(i32, i32) -> i32| {
        lua.create_function(move |lua, a: MultiValue| {
            let mut acc = arg(lua, &a, 0)?;
            for i in 1..a.len() {
                acc = f(acc, arg(lua, &a, i)?);
            }
            Ok(acc as f64)
        })
    };
    t.raw_set("band", fold(|x, y| x & y)?)?;
    t.raw_set("bor", fold(|x, y| x | y)?)?;
    t.raw_set("bxor", fold(|x, y| x ^ y)?)?;
    let shift = |f: fn(i32, u32) -> i32| {
        lua.create_function(move |lua, a: MultiValue| {
            let x = arg(lua, &a, 0)?;
            let n = (arg(lua, &a, 1)? & 31) as u32;
            Ok(f(x, n) as f64)
        })
    };
    t.raw_set("lshift", shift(|x, n| ((x as u32) << n) as i32)?)?;
    t.raw_set("rshift", shift(|x, n| ((x as u32) >> n) as i32)?)?;
    t.raw_set("arshift", shift(|x, n| x >> n)?)?;
    t.raw_set("rol", shift(|x, n| (x as u32).rotate_left(n) as i32)?)?;
    t.raw_set("ror", shift(|x, n| (x as u32).rotate_right(n) as i32)?)?;
    t.raw_set(
        "tohex",
        lua.create_function(|lua, a: MultiValue| {
            let x = arg(lua, &a, 0)? as u32;
            let mut n = match a.get(1) {
                None | Some(Value::Nil) => 8,
                Some(_) => arg(lua, &a, 1)?,
            };
            // LuaBitOp negated INT32_MIN into a negative width and wrote past its
            // buffer (CVE-2024-31449); Redis's fix takes it as INT32_MIN + 1.
            let upper = n < 0;
            if upper {
                n = n.saturating_neg();
            }
            let n = n.clamp(0, 8) as usize;
            let s = if upper {
                format!("{x:08X}")
            } else {
                format!("{x:08x}")
            };
            Ok(s[8 - n..].to_string())
        })?,
    )?;
    Ok(t)
}
