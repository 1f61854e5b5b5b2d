//! The `cmsgpack` library Redis embeds (lua-cmsgpack 0.4, as patched in Redis 7.0):
//! `pack`, `unpack`, `unpack_one`, `unpack_limit`.
//!
//! Hand-rolled rather than on `rmp`: the format is a handful of markers, and what scripts
//! (BullMQ...) rely on is lua-cmsgpack's exact choices, which a general crate doesn't make:
//! which numbers are ints and which float32, str8 for strings (never bin), tables as arrays
//! only when keys are exactly 1..n, nesting cut to nil at 16 levels, and on decoding the
//! two error classes ("Missing bytes" / "Bad data format"), no bin/ext, and the Lua C stack
//! limit (8000 slots) that bounds how many values and how deep a nesting it returns.

use mlua::{Lua, MultiValue, Table, Value};

use super::cjson::lua_error;

/// lua-cmsgpack's LUACMSGPACK_MAX_NESTING: a table this deep is packed as nil.
const MAX_NESTING: usize = 16;

/// Lua 5.1's LUAI_MAXCSTACK: the slots a C function may use (lua_checkstack's limit).
const MAX_CSTACK: usize = 8000;

/// The Lua type name luaL_typename gives (`None`: the argument is absent).
pub(crate) fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::LightUserData(_)) => "userdata",
        Some(Value::Integer(_)) => "number",
        Some(v) => v.type_name(),
    }
}

/// luaL_argerror's message (with luaL_error's script-line prefix).
/// The function is named as its caller saw it ("?" when called from C, e.g. by pcall);
/// `fname` when the debug info has no name.
pub(crate) fn arg_error(lua: &Lua, n: usize, fname: &str, msg: &str) -> mlua::Error {
    let from_lua = lua
        .inspect_stack(1, |d| d.current_line().is_some())
        .unwrap_or(false);
    let name = if from_lua {
        lua.inspect_stack(0, |d| d.names().name.map(|s| s.into_owned()))
            .flatten()
            .unwrap_or_else(|| fname.to_string())
    } else {
        "?".to_string()
    };
    lua_error(lua, &format!("bad argument #{n} to '{name}' ({msg})"))
}

/// luaL_checklstring: a string, or a number converted as Lua does.
pub(crate) fn check_bytes(
    lua: &Lua,
    args: &MultiValue,
    i: usize,
    fname: &str,
) -> mlua::Result<Vec<u8>> {
    let v = args.get(i);
    let s = match v {
        Some(Value::String(s)) => Some(s.as_bytes().to_vec()),
        Some(v @ (Value::Integer(_) | Value::Number(_))) => {
            lua.coerce_string(v.clone())?.map(|s| s.as_bytes().to_vec())
        }
        _ => None,
    };
    s.ok_or_else(|| {
        arg_error(
            lua,
            i + 1,
            fname,
            &format!("string expected, got {}", type_name(v)),
        )
    })
}

/// luaL_checknumber: a number, or a string Lua converts to one.
pub(crate) fn check_number(
    lua: &Lua,
    args: &MultiValue,
    i: usize,
    fname: &str,
) -> mlua::Result<f64> {
    let v = args.get(i);
    // struct.pack pushes a nil mark after its arguments: the first missing one is "nil".
    let v = match v {
        None if fname == "pack" && i == args.len() => Some(&Value::Nil),
        v => v,
    };
    let n = match v {
        Some(Value::Integer(i)) => Some(*i as f64),
        Some(Value::Number(n)) => Some(*n),
        Some(v @ Value::String(_)) => lua.coerce_number(v.clone())?,
        _ => None,
    };
    n.ok_or_else(|| {
        arg_error(
            lua,
            i + 1,
            fname,
            &format!("number expected, got {}", type_name(v)),
        )
    })
}

/// C's `(int64_t)d` as x86-64 computes it (cvttsd2si): out of range or NaN gives i64::MIN.
pub(crate) fn c_i64(d: f64) -> i64 {
    if d > -9_223_372_036_854_775_809.0 && d < 9_223_372_036_854_775_808.0 {
        d as i64
    } else {
        i64::MIN
    }
}

/// luaL_optinteger / luaL_checkinteger (`default` None: the argument is required).
fn opt_int(
    lua: &Lua,
    args: &MultiValue,
    i: usize,
    fname: &str,
    default: Option<i64>,
) -> mlua::Result<i64> {
    match (args.get(i), default) {
        (None | Some(Value::Nil), Some(d)) => Ok(d),
        _ => Ok(c_i64(check_number(lua, args, i, fname)?)),
    }
}

/// The most strings and tables a library function returns at once here. Lua allows 8000
/// stack slots, but mlua holds each Rust-side string or table in an auxiliary stack of as
/// many slots, and running out of it panics; past this, the function raises the stack
/// error instead. (Numbers, booleans and nil take no slot.)
const MAX_RETURN: usize = 7000;

/// Values a library function returns, kept in a Lua table while they are collected (so
/// they hold no slot of mlua's auxiliary stack until they are returned).
pub(crate) struct Results {
    t: Table,
    n: usize,
    /// Strings and tables among them.
    refs: usize,
}

impl Results {
    pub(crate) fn new(lua: &Lua) -> mlua::Result<Results> {
        Ok(Results {
            t: lua.create_table()?,
            n: 0,
            refs: 0,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.n
    }

    pub(crate) fn push(&mut self, v: Value) -> mlua::Result<()> {
        self.n += 1;
        self.refs += matches!(v, Value::String(_) | Value::Table(_)) as usize;
        self.t.raw_set(self.n, v)
    }

    pub(crate) fn last(&self) -> mlua::Result<Value> {
        self.t.raw_get(self.n)
    }

    pub(crate) fn pop(&mut self) -> mlua::Result<()> {
        let v: Value = self.t.raw_get(self.n)?;
        self.refs -= matches!(v, Value::String(_) | Value::Table(_)) as usize;
        self.t.raw_set(self.n, Value::Nil)?;
        self.n = self.n.saturating_sub(1);
        Ok(())
    }

    /// The values (after `first`, if any); luaL_checkstack's error with `what` beyond
    /// [`MAX_RETURN`].
    pub(crate) fn finish(
        self,
        lua: &Lua,
        first: Option<Value>,
        what: &str,
    ) -> mlua::Result<MultiValue> {
        if self.refs > MAX_RETURN {
            return Err(lua_error(lua, &format!("stack overflow ({what})")));
        }
        let mut out = Vec::with_capacity(self.n + 1);
        out.extend(first);
        for i in 1..=self.n {
            out.push(self.t.raw_get(i)?);
        }
        Ok(MultiValue::from_iter(out))
    }
}

/// The `cmsgpack` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(arg_error(lua, 0, "pack", "MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                encode(v, 0, &mut out)?;
            }
            lua.create_string(out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            let s = check_bytes(lua, &args, 0, "unpack")?;
            unpack_full(lua, &s, 0, 0, args.len().max(1))
        })?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            let offset = opt_int(lua, &args, 1, "unpack_one", Some(0))?;
            let s = check_bytes(lua, &args, 0, "unpack_one")?;
            unpack_full(lua, &s, 1, offset, 1)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let limit = opt_int(lua, &args, 1, "unpack_limit", None)?;
            let offset = opt_int(lua, &args, 2, "unpack_limit", Some(0))?;
            let s = check_bytes(lua, &args, 0, "unpack_limit")?;
            unpack_full(lua, &s, limit, offset, 1)
        })?,
    )?;
    Ok(t)
}

// ---- encoding ----

fn encode(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Table(t) if level < MAX_NESTING => encode_table(t, level, out)?,
        Value::String(s) => encode_bytes(&s.as_bytes(), out),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_number(*i as f64, out),
        Value::Number(n) => encode_number(*n, out),
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_bytes(s: &[u8], out: &mut Vec<u8>) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// An integral double in int64 range is an int (smallest encoding), else float32 when
/// exact, else float64 (lua-cmsgpack's IS_INT64_EQUIVALENT, with C's conversions).
fn encode_number(n: f64, out: &mut Vec<u8>) {
    if n.is_finite() && c_i64(n) as f64 == n {
        encode_int(c_i64(n), out);
    } else if (n as f32) as f64 == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// A number key that lua-cmsgpack counts as an array index: `n > 0 && (int)n == n`.
fn array_index(k: &Value) -> Option<f64> {
    let n = match k {
        Value::Integer(i) => *i as f64,
        Value::Number(n) => *n,
        _ => return None,
    };
    (n > 0.0 && n < 2_147_483_648.0 && n.trunc() == n).then_some(n)
}

/// lua-cmsgpack's table_is_an_array: only positive integral keys, as many as the largest.
fn is_array(t: &Table) -> mlua::Result<bool> {
    let (mut count, mut max) = (0f64, 0f64);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        match array_index(&k) {
            Some(n) => {
                max = max.max(n);
                count += 1.0;
            }
            None => return Ok(false),
        }
    }
    Ok(max == count)
}

fn encode_table(t: &Table, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    if is_array(t)? {
        let len = t.raw_len();
        header(len, 0x90, 0xdc, out);
        for j in 1..=len {
            encode(&t.raw_get::<Value>(j)?, level + 1, out)?;
        }
    } else {
        let mut n = 0usize;
        t.for_each(|_: Value, _: Value| {
            n += 1;
            Ok(())
        })?;
        header(n, 0x80, 0xde, out);
        for pair in t.pairs::<Value, Value>() {
            let (k, v) = pair?;
            encode(&k, level + 1, out)?;
            encode(&v, level + 1, out)?;
        }
    }
    Ok(())
}

/// An array or map header: fix (<16), 16-bit or 32-bit length.
fn header(len: usize, fix: u8, m16: u8, out: &mut Vec<u8>) {
    if len <= 15 {
        out.push(fix | len as u8);
    } else if len <= 0xffff {
        out.push(m16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(m16 + 1);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

// ---- decoding ----

/// Why a decode stopped: lua-cmsgpack's cursor errors, or an error it raises at once.
enum DecErr {
    Eof,
    BadFmt,
    Raised(mlua::Error),
}

impl From<mlua::Error> for DecErr {
    fn from(e: mlua::Error) -> Self {
        DecErr::Raised(e)
    }
}

/// The input and position, as lua-cmsgpack's mp_cur.
struct Cursor<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.s.len() - self.pos
    }

    /// `n` bytes from the cursor (not consumed), or Eof.
    fn need(&self, n: usize) -> Result<&[u8], DecErr> {
        if self.left() < n {
            Err(DecErr::Eof)
        } else {
            Ok(&self.s[self.pos..self.pos + n])
        }
    }

    /// A big-endian unsigned field of `w` bytes after the marker.
    fn field(&self, w: usize) -> Result<u64, DecErr> {
        let b = self.need(1 + w)?;
        Ok(b[1..].iter().fold(0u64, |a, &x| (a << 8) | x as u64))
    }
}

/// lua_checkstack(L, 1) failing: luaL_checkstack's error.
fn stack_check(lua: &Lua, used: usize, what: &str) -> Result<(), DecErr> {
    if used + 1 > MAX_CSTACK {
        Err(DecErr::Raised(lua_error(
            lua,
            &format!("stack overflow ({what})"),
        )))
    } else {
        Ok(())
    }
}

const TOO_MANY: &str = "too many return values at once; use unpack_one or unpack_limit instead.";

/// What one marker starts: a value, or a container header (already consumed).
enum Item {
    Val(Value),
    Array(u64),
    Map(u64),
}

/// Reads one marker (and a scalar's payload). `used` counts the Lua C stack slots
/// lua-cmsgpack would hold at this point (arguments, values returned so far, the tables and
/// keys being filled), so the same inputs hit the same stack-limit error.
fn read_item(lua: &Lua, c: &mut Cursor<'_>, used: usize) -> Result<Item, DecErr> {
    let m = c.need(1)?[0];
    stack_check(lua, used, TOO_MANY)?;
    let (v, adv) = match m {
        0xcc => (num(c.field(1)? as f64), 2),
        0xd0 => (num(c.field(1)? as u8 as i8 as f64), 2),
        0xcd => (num(c.field(2)? as f64), 3),
        0xd1 => (num(c.field(2)? as u16 as i16 as f64), 3),
        0xce => (num(c.field(4)? as f64), 5),
        0xd2 => (num(c.field(4)? as u32 as i32 as f64), 5),
        // Lua 5.1 has no lua_pushunsigned: lua-cmsgpack pushes a uint64 as lua_Integer.
        0xcf => (num(c.field(8)? as i64 as f64), 9),
        0xd3 => (num(c.field(8)? as i64 as f64), 9),
        0xc0 => (Value::Nil, 1),
        0xc3 => (Value::Boolean(true), 1),
        0xc2 => (Value::Boolean(false), 1),
        0xca => (num(f32::from_bits(c.field(4)? as u32) as f64), 5),
        0xcb => (num(f64::from_bits(c.field(8)?)), 9),
        0xd9 => return string(lua, c, 1, 0),
        0xda => return string(lua, c, 2, 0),
        0xdb => return string(lua, c, 4, 0),
        0xdc => {
            let n = c.field(2)?;
            c.pos += 3;
            return Ok(Item::Array(n));
        }
        0xdd => {
            let n = c.field(4)?;
            c.pos += 5;
            return Ok(Item::Array(n));
        }
        0xde => {
            let n = c.field(2)?;
            c.pos += 3;
            return Ok(Item::Map(n));
        }
        0xdf => {
            let n = c.field(4)?;
            c.pos += 5;
            return Ok(Item::Map(n));
        }
        m if m & 0x80 == 0 => (num(m as f64), 1),
        m if m & 0xe0 == 0xe0 => (num(m as i8 as f64), 1),
        m if m & 0xe0 == 0xa0 => return string(lua, c, 0, (m & 0x1f) as usize),
        m if m & 0xf0 == 0x90 => {
            c.pos += 1;
            return Ok(Item::Array((m & 0x0f) as u64));
        }
        m if m & 0xf0 == 0x80 => {
            c.pos += 1;
            return Ok(Item::Map((m & 0x0f) as u64));
        }
        _ => return Err(DecErr::BadFmt),
    };
    c.pos += adv;
    Ok(Item::Val(v))
}

fn num(n: f64) -> Value {
    Value::Number(n)
}

/// A string: a `w`-byte length after the marker (fixstr: w = 0 and `fix` is the length).
fn string(lua: &Lua, c: &mut Cursor<'_>, w: usize, fix: usize) -> Result<Item, DecErr> {
    let l = if w == 0 { fix } else { c.field(w)? as usize };
    let b = c.need(1 + w + l)?;
    let v = Value::String(lua.create_string(&b[1 + w..])?);
    c.pos += 1 + w + l;
    Ok(Item::Val(v))
}

/// A table being filled: an array (next index) or a map (its key, once decoded).
/// The table and a decoded key live in a Lua-side store (slots 2d+1, 2d+2 for depth d):
/// mlua keeps each Rust-held value in a stack limited to 8000 slots, which nesting this
/// deep would exhaust.
struct Frame {
    arr: bool,
    left: u64,
    idx: u64,
    has_key: bool,
}

/// Decodes one top-level value. Iterative (an explicit stack of tables being filled), as
/// the input decides the nesting depth; the Lua stack limit bounds it below 8000 levels.
fn decode(lua: &Lua, c: &mut Cursor<'_>, base: usize) -> Result<Value, DecErr> {
    let mut frames: Vec<Frame> = Vec::new();
    // Made at the first container; `cur` is the innermost table (also in the store).
    let mut store: Option<Table> = None;
    let mut cur: Option<Table> = None;
    let mut used = base;
    loop {
        let mut val = match read_item(lua, c, used)? {
            Item::Val(v) => v,
            item @ (Item::Array(_) | Item::Map(_)) => {
                // The new table is on the stack; never preallocate from a claimed length.
                let t = lua.create_table()?;
                let (arr, n) = match item {
                    Item::Array(n) => {
                        stack_check(lua, used + 1, "in function mp_decode_to_lua_array")?;
                        (true, n)
                    }
                    Item::Map(n) => (false, n),
                    Item::Val(_) => (false, 0),
                };
                if n == 0 {
                    Value::Table(t)
                } else {
                    let st = match &store {
                        Some(st) => st,
                        None => store.insert(lua.create_table()?),
                    };
                    st.raw_set(2 * frames.len() + 1, &t)?;
                    cur = Some(t);
                    frames.push(Frame {
                        arr,
                        left: n,
                        idx: 0,
                        has_key: false,
                    });
                    // An array holds its table and the index being filled; a map its table.
                    used += if arr { 2 } else { 1 };
                    continue;
                }
            }
        };
        // Store the value into the tables it completes, innermost first.
        loop {
            let depth = frames.len();
            let (Some(f), Some(st), Some(t)) = (frames.last_mut(), &store, &cur) else {
                return Ok(val);
            };
            let slot = 2 * (depth - 1) + 1;
            if f.arr {
                f.idx += 1;
                t.raw_set(f.idx as f64, val)?;
            } else if !f.has_key {
                st.raw_set(slot + 1, val)?;
                f.has_key = true;
                used += 1;
                break;
            } else {
                used -= 1;
                f.has_key = false;
                let k: Value = st.raw_get(slot + 1)?;
                st.raw_set(slot + 1, Value::Nil)?;
                match k {
                    Value::Nil => {
                        return Err(mlua::Error::RuntimeError("table index is nil".into()).into())
                    }
                    Value::Number(x) if x.is_nan() => {
                        return Err(mlua::Error::RuntimeError("table index is NaN".into()).into())
                    }
                    k => t.raw_set(k, val)?,
                }
            }
            f.left -= 1;
            if f.left > 0 {
                break;
            }
            let arr = f.arr;
            frames.pop();
            used -= if arr { 2 } else { 1 };
            st.raw_set(slot, Value::Nil)?;
            val = Value::Table(t.clone());
            cur = if slot > 1 {
                Some(st.raw_get(slot - 2)?)
            } else {
                None
            };
        }
    }
}

/// lua-cmsgpack's mp_unpack_full: up to `limit` values from `offset` (limit and offset 0:
/// all values, no offset returned), else the next offset (-1 at the end) first. `args` is
/// how many arguments stay on the C stack while decoding.
fn unpack_full(
    lua: &Lua,
    s: &[u8],
    limit: i64,
    offset: i64,
    args: usize,
) -> mlua::Result<MultiValue> {
    let decode_all = limit == 0 && offset == 0;
    // The messages print `(int)` casts of the offset and of the input length.
    if offset < 0 || limit < 0 {
        return Err(lua_error(
            lua,
            &format!(
                "Invalid request to unpack with offset of {} and limit of {}.",
                offset as i32,
                s.len() as i32
            ),
        ));
    }
    if offset as u64 > s.len() as u64 {
        return Err(lua_error(
            lua,
            &format!(
                "Start offset {} greater than input length {}.",
                offset as i32,
                s.len() as i32
            ),
        ));
    }
    let limit = if decode_all { i64::MAX } else { limit };
    let mut c = Cursor {
        s,
        pos: offset as usize,
    };
    let mut out = Results::new(lua)?;
    while c.left() > 0 && (out.len() as i64) < limit {
        match decode(lua, &mut c, args + out.len()) {
            Ok(v) => out.push(v)?,
            Err(DecErr::Eof) => return Err(lua_error(lua, "Missing bytes in input.")),
            Err(DecErr::BadFmt) => return Err(lua_error(lua, "Bad data format in input.")),
            Err(DecErr::Raised(e)) => return Err(e),
        }
    }
    let mut first = None;
    if !decode_all {
        if args + out.len() + 1 > MAX_CSTACK {
            return Err(lua_error(
                lua,
                "Too many returned values at once; use unpack_one or unpack_limit instead.",
            ));
        }
        let next = if c.left() == 0 {
            -1.0
        } else {
            (s.len() - c.left()) as u32 as i32 as f64
        };
        first = Some(Value::Number(next));
    }
    out.finish(lua, first, TOO_MANY)
}
