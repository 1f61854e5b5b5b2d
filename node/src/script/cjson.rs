//! The `cjson` library Redis embeds (lua-cjson 2.1.0: encode, decode, null, new and the
//! settings functions, encode_sparse_array ... decode_invalid_numbers).
//!
//! Hand-written rather than on serde_json because scripts depend on lua-cjson's exact
//! behaviour, which a general JSON crate doesn't have: strings are byte strings (invalid
//! UTF-8 passes through both ways), `Inf`/`NaN`/hex/`+`/leading-zero numbers decode as C's
//! strtod reads them, nesting is capped at 1000, errors name the token and character
//! ("Expected comma or array end but found T_END at character 5"), and encoding follows
//! its array detection, `%.14g` numbers and `\/` escapes.

use std::cell::RefCell;
use std::rc::Rc;

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

/// How encode_invalid_numbers is set: refuse, print as C does ("inf", "nan"), or null.
#[derive(Clone, Copy, PartialEq)]
enum Invalid {
    Off,
    On,
    Null,
}

/// One module's settings (lua-cjson keeps them per module table; `cjson.new()` makes a
/// table with its own).
#[derive(Clone)]
struct Cfg {
    sparse_convert: bool,
    sparse_ratio: i64,
    sparse_safe: i64,
    encode_max_depth: i64,
    decode_max_depth: i64,
    precision: i64,
    keep_buffer: bool,
    encode_invalid: Invalid,
    decode_invalid: bool,
}

impl Default for Cfg {
    fn default() -> Self {
        Cfg {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            precision: 14,
            keep_buffer: true,
            encode_invalid: Invalid::Off,
            decode_invalid: true,
        }
    }
}

type Shared = Rc<RefCell<Cfg>>;

/// The `cjson` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    module(lua, Rc::new(RefCell::new(Cfg::default())))
}

fn module(lua: &Lua, cfg: Shared) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(lua_error(
                    lua,
                    "bad argument #1 to 'encode' (expected 1 argument)",
                ));
            }
            let cfg = c.borrow().clone();
            let mut out = Vec::new();
            encode(lua, &args[0], &mut out, 0, &cfg)?;
            lua.create_string(out)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        lua.create_function(move |lua, args: MultiValue| {
            let s = match (args.len(), args.front()) {
                (1, Some(Value::String(s))) => s.as_bytes().to_vec(),
                (1, Some(v @ (Value::Number(_) | Value::Integer(_)))) => lua
                    .coerce_string(v.clone())?
                    .map(|s| s.as_bytes().to_vec())
                    .unwrap_or_default(),
                (1, Some(other)) => {
                    let ty = match other {
                        Value::LightUserData(_) => "userdata",
                        v => v.type_name(),
                    };
                    return Err(lua_error(
                        lua,
                        &format!("bad argument #1 to 'decode' (string expected, got {ty})"),
                    ));
                }
                _ => {
                    return Err(lua_error(
                        lua,
                        "bad argument #1 to 'decode' (expected 1 argument)",
                    ))
                }
            };
            let cfg = c.borrow().clone();
            decode(lua, &s, &cfg)
        })?,
    )?;
    // The settings functions: each returns the setting(s) after applying its arguments.
    let c = cfg.clone();
    t.raw_set(
        "encode_sparse_array",
        lua.create_function(move |lua, args: MultiValue| {
            arg_count(lua, "encode_sparse_array", &args, 3)?;
            let mut g = c.borrow_mut();
            if let Some(on) = bool_option(lua, "encode_sparse_array", &args, 0, &["off", "on"])? {
                g.sparse_convert = on == 1;
            }
            if let Some(r) = int_option(lua, "encode_sparse_array", &args, 1, 0, i32::MAX as i64)? {
                g.sparse_ratio = r;
            }
            if let Some(v) = int_option(lua, "encode_sparse_array", &args, 2, 0, i32::MAX as i64)? {
                g.sparse_safe = v;
            }
            Ok((g.sparse_convert, g.sparse_ratio, g.sparse_safe))
        })?,
    )?;
    let int_setting = |name: &'static str,
                       min: i64,
                       max: i64,
                       field: fn(&mut Cfg) -> &mut i64|
     -> mlua::Result<mlua::Function> {
        let c = cfg.clone();
        lua.create_function(move |lua, args: MultiValue| {
            arg_count(lua, name, &args, 1)?;
            let mut g = c.borrow_mut();
            if let Some(v) = int_option(lua, name, &args, 0, min, max)? {
                *field(&mut g) = v;
            }
            Ok(*field(&mut g))
        })
    };
    t.raw_set(
        "encode_max_depth",
        int_setting("encode_max_depth", 1, i32::MAX as i64, |c| {
            &mut c.encode_max_depth
        })?,
    )?;
    t.raw_set(
        "decode_max_depth",
        int_setting("decode_max_depth", 1, i32::MAX as i64, |c| {
            &mut c.decode_max_depth
        })?,
    )?;
    t.raw_set(
        "encode_number_precision",
        int_setting("encode_number_precision", 1, 14, |c| &mut c.precision)?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_keep_buffer",
        lua.create_function(move |lua, args: MultiValue| {
            arg_count(lua, "encode_keep_buffer", &args, 1)?;
            let mut g = c.borrow_mut();
            if let Some(on) = bool_option(lua, "encode_keep_buffer", &args, 0, &["off", "on"])? {
                g.keep_buffer = on == 1;
            }
            Ok(g.keep_buffer)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |lua, args: MultiValue| {
            arg_count(lua, "encode_invalid_numbers", &args, 1)?;
            let mut g = c.borrow_mut();
            let opts = ["off", "on", "null"];
            if let Some(i) = bool_option(lua, "encode_invalid_numbers", &args, 0, &opts)? {
                g.encode_invalid = [Invalid::Off, Invalid::On, Invalid::Null][i];
            }
            Ok(match g.encode_invalid {
                Invalid::Off => Value::Boolean(false),
                Invalid::On => Value::Boolean(true),
                Invalid::Null => Value::String(lua.create_string("null")?),
            })
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_invalid_numbers",
        lua.create_function(move |lua, args: MultiValue| {
            arg_count(lua, "decode_invalid_numbers", &args, 1)?;
            let mut g = c.borrow_mut();
            if let Some(on) = bool_option(lua, "decode_invalid_numbers", &args, 0, &["off", "on"])?
            {
                g.decode_invalid = on == 1;
            }
            Ok(g.decode_invalid)
        })?,
    )?;
    t.raw_set(
        "new",
        lua.create_function(|lua, ()| module(lua, Rc::new(RefCell::new(Cfg::default()))))?,
    )?;
    Ok(t)
}

/// lua-cjson's json_verify_arg_count.
fn arg_count(lua: &Lua, name: &str, args: &MultiValue, max: usize) -> mlua::Result<()> {
    if args.len() > max {
        return Err(lua_error(
            lua,
            &format!(
                "bad argument #{} to '{name}' (found too many arguments)",
                max + 1
            ),
        ));
    }
    Ok(())
}

/// lua-cjson's json_integer_option: None when the argument is absent or nil.
fn int_option(
    lua: &Lua,
    name: &str,
    args: &MultiValue,
    i: usize,
    min: i64,
    max: i64,
) -> mlua::Result<Option<i64>> {
    let v = match args.get(i) {
        None | Some(Value::Nil) => return Ok(None),
        Some(Value::Integer(n)) => *n,
        Some(Value::Number(n)) => *n as i64,
        Some(Value::String(s)) => match std::str::from_utf8(&s.as_bytes())
            .ok()
            .and_then(|t| t.trim().parse::<f64>().ok())
        {
            Some(n) => n as i64,
            None => return Err(type_error(lua, name, i, "number", &args[i])),
        },
        Some(other) => return Err(type_error(lua, name, i, "number", other)),
    };
    if v < min || v > max {
        return Err(lua_error(
            lua,
            &format!(
                "bad argument #{} to '{name}' (expected integer between {min} and {max})",
                i + 1
            ),
        ));
    }
    Ok(Some(v))
}

/// lua-cjson's json_enum_option: a boolean (true is option 1) or one of `opts` by name;
/// None when absent or nil.
fn bool_option(
    lua: &Lua,
    name: &str,
    args: &MultiValue,
    i: usize,
    opts: &[&str],
) -> mlua::Result<Option<usize>> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(None),
        Some(Value::Boolean(b)) => Ok(Some(*b as usize)),
        // luaL_checkoption takes numbers as their string form.
        Some(v @ (Value::String(_) | Value::Integer(_) | Value::Number(_))) => {
            let s = lua
                .coerce_string(v.clone())?
                .map(|s| s.to_string_lossy())
                .unwrap_or_default();
            match opts.iter().position(|o| *o == s) {
                Some(p) => Ok(Some(p)),
                None => Err(lua_error(
                    lua,
                    &format!("bad argument #{} to '{name}' (invalid option '{s}')", i + 1),
                )),
            }
        }
        Some(other) => Err(type_error(lua, name, i, "string", other)),
    }
}

fn type_error(lua: &Lua, name: &str, i: usize, want: &str, got: &Value) -> mlua::Error {
    let ty = match got {
        Value::LightUserData(_) => "userdata",
        v => v.type_name(),
    };
    lua_error(
        lua,
        &format!(
            "bad argument #{} to '{name}' ({want} expected, got {ty})",
            i + 1
        ),
    )
}

/// One token of lua-cjson's tokenizer; `index` is where it starts (0-based).
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    /// T_ERROR with its message ("invalid token", "invalid number", ...).
    Error(&'static str),
}

impl Tok {
    /// The name lua-cjson prints for a token ("found T_END"), or the error text.
    fn name(&self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str(_) => "T_STRING",
            Tok::Num(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(m) => m,
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
    max_depth: usize,
    /// decode_invalid_numbers: Inf, NaN, hex, a leading + or zero read as strtod does.
    invalid_ok: bool,
}

/// The byte at `i`, or NUL past the end (lua-cjson reads a NUL-terminated buffer: an
/// embedded NUL ends the input too).
fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

fn hex4(s: &[u8], i: usize) -> Option<u32> {
    let mut v = 0u32;
    for k in 0..4 {
        v = v * 16 + (at(s, i + k) as char).to_digit(16)?;
    }
    Some(v)
}

/// C's strtod over the characters lua-cjson's fpconv_strtod hands it (digits, signs, `.`,
/// exponent, hex and inf/nan letters): (value, bytes consumed; 0 when nothing parsed).
fn strtod(s: &[u8]) -> (f64, usize) {
    let valid = |c: u8| c.is_ascii_hexdigit() || b"+-.xXiInNtTyY".contains(&c);
    let n = s.iter().take_while(|&&c| valid(c)).count();
    let Ok(c) = std::ffi::CString::new(&s[..n]) else {
        return (0.0, 0);
    };
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `c` is NUL-terminated and outlives the call; strtod writes `end` inside it.
    // The process never calls setlocale, so the C locale's '.' is the decimal point.
    let v = unsafe { libc::strtod(c.as_ptr(), &mut end) };
    (v, (end as usize).saturating_sub(c.as_ptr() as usize))
}

impl Parser<'_> {
    fn next(&mut self) -> (Tok, usize) {
        while matches!(at(self.s, self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let i = self.pos;
        let single = match at(self.s, i) {
            0 => return (Tok::End, i),
            b'{' => Tok::ObjBegin,
            b'}' => Tok::ObjEnd,
            b'[' => Tok::ArrBegin,
            b']' => Tok::ArrEnd,
            b':' => Tok::Colon,
            b',' => Tok::Comma,
            b'"' => return self.string(),
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' | b'-' | b'0'..=b'9' => {
                return self.word()
            }
            _ => return (Tok::Error("invalid token"), i),
        };
        self.pos += 1;
        (single, i)
    }

    /// Numbers (JSON's, and with lua-cjson's decode_invalid_numbers also what strtod
    /// takes: Inf, NaN, hex, a leading + or zero), true, false, null; in lua-cjson's order
    /// and with its errors.
    fn word(&mut self) -> (Tok, usize) {
        let i = self.pos;
        let rest = &self.s[i.min(self.s.len())..];
        let c = at(self.s, i);
        if c == b'-' || c.is_ascii_digit() {
            if !self.invalid_ok && self.invalid_number() {
                return (Tok::Error("invalid number"), i);
            }
            return self.number(rest, i);
        }
        for (w, t) in [
            (&b"true"[..], Tok::Bool(true)),
            (b"false", Tok::Bool(false)),
            (b"null", Tok::Null),
        ] {
            if rest.starts_with(w) {
                self.pos += w.len();
                return (t, i);
            }
        }
        if self.invalid_ok && self.invalid_number() {
            return self.number(rest, i);
        }
        (Tok::Error("invalid token"), i)
    }

    fn number(&mut self, rest: &[u8], i: usize) -> (Tok, usize) {
        let (v, n) = strtod(rest);
        if n == 0 {
            return (Tok::Error("invalid number"), i);
        }
        self.pos += n;
        (Tok::Num(v), i)
    }

    /// lua-cjson's json_is_invalid_number: a token strtod would read that JSON forbids.
    fn invalid_number(&self) -> bool {
        let mut p = self.pos;
        match at(self.s, p) {
            b'+' => return true,
            b'-' => p += 1,
            _ => {}
        }
        let c = at(self.s, p);
        if c == b'0' {
            let c2 = at(self.s, p + 1);
            return c2 | 0x20 == b'x' || c2.is_ascii_digit();
        }
        if c <= b'9' {
            return false;
        }
        let three = |w: &[u8]| (0..3).all(|k| at(self.s, p + k).eq_ignore_ascii_case(&w[k]));
        three(b"inf") || three(b"nan")
    }

    fn string(&mut self) -> (Tok, usize) {
        let start = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let c = at(self.s, self.pos);
            match c {
                b'"' => break,
                0 => return (Tok::Error("unexpected end of string"), self.pos),
                b'\\' => {
                    let e = match at(self.s, self.pos + 1) {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            if !self.unicode_escape(&mut out) {
                                return (Tok::Error("invalid unicode escape code"), self.pos);
                            }
                            continue;
                        }
                        _ => return (Tok::Error("invalid escape code"), self.pos),
                    };
                    out.push(e);
                    self.pos += 2;
                }
                _ => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
        self.pos += 1;
        (Tok::Str(out), start)
    }

    /// `\uXXXX` (a UTF-16 surrogate pair takes two) appended as UTF-8; false, leaving
    /// `pos` on the backslash, when malformed.
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(mut cp) = hex4(self.s, self.pos + 2) else {
            return false;
        };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0
                || at(self.s, self.pos + 6) != b'\\'
                || at(self.s, self.pos + 7) != b'u'
            {
                return false;
            }
            let Some(low) = hex4(self.s, self.pos + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let Some(ch) = char::from_u32(cp) else {
            return false;
        };
        let mut b = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
        self.pos += len;
        true
    }
}

fn parse_error(lua: &Lua, expected: &str, tok: &(Tok, usize)) -> mlua::Error {
    lua_error(
        lua,
        &format!(
            "Expected {expected} but found {} at character {}",
            tok.0.name(),
            tok.1 + 1
        ),
    )
}

fn decode(lua: &Lua, s: &[u8], cfg: &Cfg) -> mlua::Result<Value> {
    if s.len() >= 2 && (s[0] == 0 || s[1] == 0) {
        return Err(lua_error(
            lua,
            "JSON parser does not support UTF-16 or UTF-32",
        ));
    }
    let mut p = Parser {
        s,
        pos: 0,
        depth: 0,
        max_depth: cfg.decode_max_depth.min(MAX_NESTING) as usize,
        invalid_ok: cfg.decode_invalid,
    };
    let first = p.next();
    let v = value(lua, &mut p, first)?;
    let last = p.next();
    if !matches!(last.0, Tok::End) {
        return Err(parse_error(lua, "the end", &last));
    }
    Ok(v)
}

fn value(lua: &Lua, p: &mut Parser<'_>, tok: (Tok, usize)) -> mlua::Result<Value> {
    Ok(match tok.0 {
        Tok::Str(s) => Value::String(lua.create_string(s)?),
        Tok::Num(n) => Value::Number(n),
        Tok::Bool(b) => Value::Boolean(b),
        Tok::Null => null(),
        Tok::ObjBegin => object(lua, p)?,
        Tok::ArrBegin => array(lua, p)?,
        _ => return Err(parse_error(lua, "value", &tok)),
    })
}

fn descend(lua: &Lua, p: &mut Parser<'_>) -> mlua::Result<()> {
    p.depth += 1;
    if p.depth > p.max_depth {
        return Err(lua_error(
            lua,
            &format!(
                "Found too many nested data structures ({}) at character {}",
                p.depth, p.pos
            ),
        ));
    }
    Ok(())
}

fn object(lua: &Lua, p: &mut Parser<'_>) -> mlua::Result<Value> {
    descend(lua, p)?;
    let t = lua.create_table()?;
    let mut tok = p.next();
    if matches!(tok.0, Tok::ObjEnd) {
        p.depth -= 1;
        return Ok(Value::Table(t));
    }
    loop {
        let Tok::Str(k) = tok.0 else {
            return Err(parse_error(lua, "object key string", &tok));
        };
        let colon = p.next();
        if !matches!(colon.0, Tok::Colon) {
            return Err(parse_error(lua, "colon", &colon));
        }
        let vt = p.next();
        let v = value(lua, p, vt)?;
        t.raw_set(lua.create_string(k)?, v)?;
        let sep = p.next();
        match sep.0 {
            Tok::ObjEnd => {
                p.depth -= 1;
                return Ok(Value::Table(t));
            }
            Tok::Comma => tok = p.next(),
            _ => return Err(parse_error(lua, "comma or object end", &sep)),
        }
    }
}

fn array(lua: &Lua, p: &mut Parser<'_>) -> mlua::Result<Value> {
    descend(lua, p)?;
    let t = lua.create_table()?;
    let mut tok = p.next();
    if matches!(tok.0, Tok::ArrEnd) {
        p.depth -= 1;
        return Ok(Value::Table(t));
    }
    let mut i = 1;
    loop {
        let v = value(lua, p, tok)?;
        t.raw_set(i, v)?;
        i += 1;
        let sep = p.next();
        match sep.0 {
            Tok::ArrEnd => {
                p.depth -= 1;
                return Ok(Value::Table(t));
            }
            Tok::Comma => tok = p.next(),
            _ => return Err(parse_error(lua, "comma or array end", &sep)),
        }
    }
}

fn number(lua: &Lua, n: f64, out: &mut Vec<u8>, cfg: &Cfg) -> mlua::Result<()> {
    if !n.is_finite() {
        match cfg.encode_invalid {
            Invalid::Off => {
                return Err(lua_error(
                    lua,
                    "Cannot serialise number: must not be NaN or Inf",
                ))
            }
            Invalid::Null => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
            // As C's printf writes them (this lua-cjson has no special case).
            Invalid::On => {
                let s = match (n.is_nan(), n.is_sign_negative()) {
                    (true, true) => "-nan",
                    (true, false) => "nan",
                    (false, true) => "-inf",
                    (false, false) => "inf",
                };
                out.extend_from_slice(s.as_bytes());
                return Ok(());
            }
        }
    }
    out.extend_from_slice(fmt_g(n, cfg.precision as usize).as_bytes());
    Ok(())
}

/// lua-cjson's escaping, byte by byte: control bytes, `"`, `\\`, `/` and DEL escaped,
/// everything else (bytes >= 0x80 included) copied as is.
fn string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            8 => out.extend_from_slice(b"\\b"),
            12 => out.extend_from_slice(b"\\f"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

/// Nesting the encoder and the decoder follow at most, whatever `*_max_depth` says: each
/// level holds a reference of the binding's (about 8,000 in all) and a frame of Rust
/// stack. lua-cjson's own bound is Lua's stack (about 8,000 levels); past this one the
/// same "excessive nesting" / "too many nested data structures" errors are raised.
const MAX_NESTING: i64 = 1000;

fn encode(lua: &Lua, v: &Value, out: &mut Vec<u8>, depth: usize, cfg: &Cfg) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        // Lua 5.1 numbers are doubles: lua-cjson prints them all with %.14g.
        Value::Integer(i) => number(lua, *i as f64, out, cfg)?,
        Value::Number(n) => number(lua, *n, out, cfg)?,
        Value::String(s) => string(&s.as_bytes(), out),
        Value::Table(t) => {
            if depth as i64 >= cfg.encode_max_depth.min(MAX_NESTING) {
                return Err(lua_error(
                    lua,
                    &format!("Cannot serialise, excessive nesting ({})", depth + 1),
                ));
            }
            table(lua, t, out, depth + 1, cfg)?
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

fn table(lua: &Lua, t: &Table, out: &mut Vec<u8>, depth: usize, cfg: &Cfg) -> mlua::Result<()> {
    // Two passes over the pairs, none kept: each key and value holds a slot of the
    // binding's reference stack (about 8,000) while held, fewer than a big table's pairs.
    // lua-cjson: an array when every key is a positive integer, not excessively sparse.
    let mut max = 0usize;
    let mut count = 0usize;
    let mut is_array = true;
    for p in t.clone().pairs::<Value, Value>() {
        let (k, _) = p?;
        count += 1;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => {
                is_array = false;
                continue;
            }
        };
        if n >= 1.0 && n.fract() == 0.0 && n <= u32::MAX as f64 {
            max = max.max(n as usize);
        } else {
            is_array = false;
        }
    }
    let is_array = is_array && count > 0;
    let pairs = || t.pairs::<Value, Value>();
    // Excessively sparse (encode_sparse_array): an error, or an object if converting.
    let sparse = cfg.sparse_ratio > 0
        && max as i64 > count as i64 * cfg.sparse_ratio
        && max as i64 > cfg.sparse_safe;
    if is_array && sparse && !cfg.sparse_convert {
        return Err(lua_error(
            lua,
            "Cannot serialise table: excessively sparse array",
        ));
    }
    if is_array && !sparse {
        out.push(b'[');
        for i in 1..=max {
            if i > 1 {
                out.push(b',');
            }
            let v: Value = t.raw_get(i)?;
            encode(lua, &v, out, depth, cfg)?;
        }
        out.push(b']');
        return Ok(());
    }
    out.push(b'{');
    for (i, p) in pairs().enumerate() {
        let (k, v) = p?;
        if i > 0 {
            out.push(b',');
        }
        match k {
            Value::String(s) => string(&s.as_bytes(), out),
            Value::Integer(n) => string(fmt_g(n as f64, cfg.precision as usize).as_bytes(), out),
            Value::Number(n) => string(fmt_g(n, cfg.precision as usize).as_bytes(), out),
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
        out.push(b':');
        encode(lua, &v, out, depth, cfg)?;
    }
    out.push(b'}');
    Ok(())
}
