//! The `struct` library Redis embeds (Roberto Ierusalimschy's lua_struct 0.2, with Redis's
//! bounds fixes): `pack`, `unpack`, `size` over a format of endianness (`<` `>`), alignment
//! (`!n`), integers `b B h H l L T i[n] I[n]`, `f d`, strings `s c[n]` and padding `x`.
//!
//! Hand-written: no crate speaks this format language, and scripts depend on its exact
//! quirks (C's double→integer conversions on x86-64, n-byte integers up to 32 bytes,
//! `c0` taking the previous number as a length, error texts).

use mlua::{Lua, MultiValue, Table, Value};

use super::cjson::lua_error;
use super::cmsgpack::{arg_error, c_i64, check_bytes, check_number, Results};

/// lua_struct's MAXINTSIZE.
const MAX_INT_SIZE: usize = 32;
/// lua_struct's MAXALIGN on x86-64 (the alignment of the largest scalar).
const MAX_ALIGN: usize = 8;

#[derive(Clone, Copy)]
struct Header {
    little: bool,
    align: usize,
}

/// The native defaults (x86-64: little endian, alignment 1).
const DEFAULT: Header = Header {
    little: true,
    align: 1,
};

/// A format being read: the bytes up to the first NUL (C reads a C string).
struct Fmt<'a> {
    f: &'a [u8],
    i: usize,
}

impl Fmt<'_> {
    fn new(f: &[u8]) -> Fmt<'_> {
        let end = memchr::memchr(0, f).unwrap_or(f.len());
        Fmt { f: &f[..end], i: 0 }
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.f.get(self.i).copied()?;
        self.i += 1;
        Some(c)
    }

    /// lua_struct's getnum: the digits here, or `df` when there are none.
    fn num(&mut self, lua: &Lua, df: usize) -> mlua::Result<usize> {
        if !self.f.get(self.i).is_some_and(u8::is_ascii_digit) {
            return Ok(df);
        }
        let mut a: i32 = 0;
        while let Some(d) = self.f.get(self.i).filter(|d| d.is_ascii_digit()) {
            let d = (d - b'0') as i32;
            if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
                return Err(lua_error(lua, "integral size overflow"));
            }
            a = a * 10 + d;
            self.i += 1;
        }
        Ok(a as usize)
    }

    /// lua_struct's optsize: the size of option `opt` (0 for those without one).
    fn size(&mut self, lua: &Lua, opt: u8) -> mlua::Result<usize> {
        Ok(match opt {
            b'b' | b'B' | b'x' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.num(lua, 1)?,
            b'i' | b'I' => {
                let sz = self.num(lua, 4)?;
                if sz > MAX_INT_SIZE {
                    return Err(lua_error(
                        lua,
                        &format!("integral size {sz} is larger than limit of {MAX_INT_SIZE}"),
                    ));
                }
                sz
            }
            _ => 0,
        })
    }
}

/// lua_struct's gettoalign: padding before an item of `size` at `len`.
fn to_align(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & size.wrapping_sub(1))) & size.wrapping_sub(1)
}

/// lua_struct's controloptions: endianness, alignment, spaces; anything else is an error.
fn control(lua: &Lua, opt: u8, f: &mut Fmt<'_>, h: &mut Header, fname: &str) -> mlua::Result<()> {
    match opt {
        b' ' => Ok(()),
        b'>' => {
            h.little = false;
            Ok(())
        }
        b'<' => {
            h.little = true;
            Ok(())
        }
        b'!' => {
            let a = f.num(lua, MAX_ALIGN)?;
            if a == 0 || a & (a - 1) != 0 {
                return Err(lua_error(
                    lua,
                    &format!("alignment {a} is not a power of 2"),
                ));
            }
            h.align = a;
            Ok(())
        }
        _ => Err(arg_error(
            lua,
            1,
            fname,
            &format!("invalid format option '{}'", opt as char),
        )),
    }
}

/// C's `(unsigned long long)d` as gcc compiles it on x86-64 (>= 2^64 gives 0, NaN 2^63).
fn c_u64(d: f64) -> u64 {
    if d >= 9_223_372_036_854_775_808.0 {
        (c_i64(d - 9_223_372_036_854_775_808.0) as u64) ^ (1 << 63)
    } else {
        c_i64(d) as u64
    }
}

/// lua_struct's putinteger: the low bytes of a 64-bit value (zeros beyond 8 bytes).
fn put_int(out: &mut Vec<u8>, n: f64, little: bool, size: usize) {
    let v = if n < 0.0 { c_i64(n) as u64 } else { c_u64(n) };
    let mut b: Vec<u8> = (0..size)
        .map(|i| if i < 8 { (v >> (8 * i)) as u8 } else { 0 })
        .collect();
    if !little {
        b.reverse();
    }
    out.extend_from_slice(&b);
}

/// lua_struct's getinteger, with C's shifts as x86-64 does them (count mod 64).
fn get_int(b: &[u8], little: bool, signed: bool) -> f64 {
    let size = b.len();
    let mut l: u64 = 0;
    let mut push = |x: u8| l = (l << 8) | x as u64;
    if little {
        b.iter().rev().for_each(|&x| push(x));
    } else {
        b.iter().for_each(|&x| push(x));
    }
    if !signed {
        return l as f64;
    }
    let mask = u64::MAX.wrapping_shl((size as u32).wrapping_mul(8).wrapping_sub(1));
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn is_int_opt(opt: u8) -> bool {
    matches!(
        opt,
        b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I'
    )
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::String> {
    let fmt = check_bytes(lua, &args, 0, "pack")?;
    let mut f = Fmt::new(&fmt);
    let mut h = DEFAULT;
    let mut arg = 1usize;
    let mut out = Vec::new();
    let mut total = 0usize;
    while let Some(opt) = f.next() {
        let mut size = f.size(lua, opt)?;
        let pad = to_align(total, &h, opt, size);
        total += pad;
        out.resize(out.len() + pad, 0);
        match opt {
            o if is_int_opt(o) => {
                let n = check_number(lua, &args, arg, "pack")?;
                arg += 1;
                put_int(&mut out, n, h.little, size);
            }
            b'x' => out.push(0),
            b'f' => {
                let n = check_number(lua, &args, arg, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    n.to_le_bytes()
                } else {
                    n.to_be_bytes()
                });
            }
            b'd' => {
                let n = check_number(lua, &args, arg, "pack")?;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    n.to_le_bytes()
                } else {
                    n.to_be_bytes()
                });
            }
            b'c' | b's' => {
                let s = check_bytes(lua, &args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // lua_struct checks after moving on: the error names the next argument.
                    return Err(arg_error(lua, arg + 1, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                    size += 1;
                }
            }
            _ => control(lua, opt, &mut f, &mut h, "pack")?,
        }
        total += size;
    }
    lua.create_string(out)
}

fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let fmt = check_bytes(lua, &args, 0, "unpack")?;
    let data = check_bytes(lua, &args, 1, "unpack")?;
    let ld = data.len();
    let start = match args.get(2) {
        None | Some(Value::Nil) => 1,
        Some(_) => c_i64(check_number(lua, &args, 2, "unpack")?),
    };
    // Redis checks the offset as a size_t > 0 (a negative one then fails the length check
    // here, where redis's wrapping arithmetic would read out of bounds).
    let mut pos = (start as u64 as usize).wrapping_sub(1);
    if start == 0 {
        return Err(arg_error(lua, 3, "unpack", "offset must be 1 or greater"));
    }
    let short = || arg_error(lua, 2, "unpack", "data string too short");
    let mut f = Fmt::new(&fmt);
    let mut h = DEFAULT;
    let mut out = Results::new(lua)?;
    while let Some(opt) = f.next() {
        let mut size = f.size(lua, opt)?;
        pos += to_align(pos, &h, opt, size);
        if pos.checked_add(size).is_none_or(|e| e > ld) {
            return Err(short());
        }
        if args.len() + out.len() + 2 > 8000 {
            return Err(lua_error(lua, "stack overflow (too many results)"));
        }
        match opt {
            o if is_int_opt(o) => {
                let v = get_int(&data[pos..pos + size], h.little, o.is_ascii_lowercase());
                out.push(Value::Number(v))?;
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                let v = if h.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                out.push(Value::Number(v as f64))?;
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                let v = if h.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                out.push(Value::Number(v))?;
            }
            b'c' => {
                if size == 0 {
                    let prev = match out.last()? {
                        v @ (Value::Integer(_) | Value::Number(_) | Value::String(_))
                            if out.len() != 0 =>
                        {
                            lua.coerce_number(v)?
                        }
                        _ => None,
                    };
                    let Some(n) = prev else {
                        return Err(lua_error(lua, "format 'c0' needs a previous size"));
                    };
                    out.pop()?;
                    size = c_u64(n) as usize;
                    if size > ld || pos > ld - size {
                        return Err(short());
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?))?;
            }
            b's' => {
                let Some(e) = memchr::memchr(0, &data[pos..]) else {
                    return Err(lua_error(lua, "unfinished string in data"));
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + e])?))?;
                size = e + 1;
            }
            _ => control(lua, opt, &mut f, &mut h, "unpack")?,
        }
        pos += size;
    }
    out.push(Value::Number((pos + 1) as f64))?;
    out.finish(lua, None, "too many results")
}

fn size(lua: &Lua, args: MultiValue) -> mlua::Result<f64> {
    let fmt = check_bytes(lua, &args, 0, "size")?;
    let mut f = Fmt::new(&fmt);
    let mut h = DEFAULT;
    let mut pos = 0usize;
    while let Some(opt) = f.next() {
        let size = f.size(lua, opt)?;
        pos += to_align(pos, &h, opt, size);
        if opt == b's' {
            return Err(arg_error(lua, 1, "size", "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(arg_error(lua, 1, "size", "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            control(lua, opt, &mut f, &mut h, "size")?;
        }
        pos += size;
    }
    Ok(pos as f64)
}

/// The `struct` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lua.create_function(pack)?)?;
    t.raw_set("unpack", lua.create_function(unpack)?)?;
    t.raw_set("size", lua.create_function(size)?)?;
    Ok(t)
}
