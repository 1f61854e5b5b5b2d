//! Bitmap commands: SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO.

use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx};
use crate::db::Value;
use crate::notify::{GENERIC, STRING};

pub fn commands() -> Vec<CommandSpec> {
    let s = |name, arity, fl, keys, h| CommandSpec::new(name, arity, fl, keys, h).group("bitmap");
    vec![
        s("setbit", 4, "write denyoom", (1, 1, 1), setbit).since("2.2.0"),
        s("getbit", 3, "readonly fast", (1, 1, 1), getbit).since("2.2.0"),
        s("bitcount", -2, "readonly", (1, 1, 1), bitcount).since("2.6.0"),
        s("bitpos", -3, "readonly", (1, 1, 1), bitpos).since("2.8.7"),
        s("bitop", -4, "write denyoom", (2, -1, 1), bitop).since("2.6.0"),
        s("bitfield", -2, "write denyoom", (1, 1, 1), bitfield).since("3.2.0"),
        s("bitfield_ro", -2, "readonly fast", (1, 1, 1), bitfield_ro).since("6.0.0"),
    ]
}

const MAX_BITS: u64 = 4 * 1024 * 1024 * 1024; // 512 MB worth of bits

fn bit_offset(a: &[u8]) -> Result<u64, CmdError> {
    let err = || CmdError::msg("ERR bit offset is not an integer or out of range");
    let v = arg_i64(a).map_err(|_| err())?;
    if v < 0 || v as u64 >= MAX_BITS {
        return Err(err());
    }
    Ok(v as u64)
}

/// String bytes at `key` (empty when absent); WRONGTYPE for other types.
fn read_bytes(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    let mut t = itoa::Buffer::new();
    match ctx.ks.get(key) {
        None => Ok(None),
        Some(v) => v
            .str_bytes(&mut t)
            .map(|b| Some(b.to_vec()))
            .ok_or(CmdError::WrongType),
    }
}

/// The growable buffer of the string at `key`, created when absent, at least `len` long,
/// and whether it was created or grown (Redis's `lookupStringForBitCommand` dirty flag:
/// such a write counts as a change even when the bits it sets were already 0).
fn write_buf<'c>(
    ctx: &'c mut Ctx<'_>,
    key: &[u8],
    len: usize,
) -> Result<(&'c mut Vec<u8>, bool), CmdError> {
    super::strings::check_size(ctx, len as u64)?;
    let mut grew = false;
    match ctx.ks.get_w(key) {
        None => {
            ctx.ks.set(key, Value::Buf(Box::default()));
            grew = true;
        }
        Some(v) if !v.is_string() => return Err(CmdError::WrongType),
        Some(_) => {}
    }
    let v = ctx.ks.get_w(key).ok_or(CmdError::NoSuchKey)?;
    let b = v.make_buf().ok_or(CmdError::WrongType)?;
    if b.len() < len {
        b.resize(len, 0);
        grew = true;
    }
    Ok((b, grew))
}

fn setbit(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let off = bit_offset(args[2])?;
    let on = match args[3] {
        b"1" => true,
        b"0" => false,
        _ => return Err(CmdError::msg("ERR bit is not an integer or out of range")),
    };
    let byte = (off >> 3) as usize;
    let (buf, grew) = write_buf(ctx, args[1], byte + 1)?;
    let mask = 1u8 << (7 - (off & 7));
    let cell = buf.get_mut(byte).ok_or(CmdError::NoSuchKey)?;
    let old = *cell & mask != 0;
    if on {
        *cell |= mask;
    } else {
        *cell &= !mask;
    }
    // As Redis: a bit set to what it was, in a string neither created nor grown, is no
    // change (not counted, propagated, nor notified).
    if grew || old != on {
        ctx.notify(STRING, "setbit", args[1]);
    } else {
        ctx.unchanged();
    }
    ctx.out.int(old as i64);
    Ok(())
}

fn getbit(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let off = bit_offset(args[2])?;
    let b = read_bytes(ctx, args[1])?.unwrap_or_default();
    let byte = (off >> 3) as usize;
    let bit = b.get(byte).is_some_and(|c| c & (1 << (7 - (off & 7))) != 0);
    ctx.out.int(bit as i64);
    Ok(())
}

/// BYTE or BIT (the unit of a BITCOUNT/BITPOS range): true for BIT.
fn parse_unit(a: &[u8]) -> Result<bool, CmdError> {
    if eq_ic(a, "bit") {
        Ok(true)
    } else if eq_ic(a, "byte") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Redis's clamping of a `start end` range to a string of `total` units (bytes, or bits
/// with BIT), as an inclusive bit range; None when empty.
fn clamp_range(start: i64, end: i64, total: i64, is_bit: bool) -> Option<(u64, u64)> {
    let (mut s, mut e) = (start, end);
    if s < 0 {
        s = s.saturating_add(total);
    }
    if e < 0 {
        e = e.saturating_add(total);
    }
    s = s.max(0);
    e = e.max(0);
    if e >= total {
        e = total - 1;
    }
    if s > e {
        return None;
    }
    let (s, e) = (s as u64, e as u64);
    Some(if is_bit { (s, e) } else { (s * 8, e * 8 + 7) })
}

/// The whole string as a bit range (None when empty).
fn whole(len: usize) -> Option<(u64, u64)> {
    (len > 0).then(|| (0, len as u64 * 8 - 1))
}

/// Units of a string of `len` bytes.
fn units(len: usize, is_bit: bool) -> i64 {
    len as i64 * if is_bit { 8 } else { 1 }
}

fn get_bit(b: &[u8], i: u64) -> bool {
    b.get((i >> 3) as usize)
        .is_some_and(|c| c & (1 << (7 - (i & 7))) != 0)
}

/// In Redis's order: a missing key answers 0 before anything else is parsed; two
/// negative indexes with start > end answer 0 before the unit is parsed.
fn bitcount(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Some(b) = read_bytes(ctx, args[1])? else {
        ctx.out.int(0);
        return Ok(());
    };
    let range = match args.len() {
        2 => whole(b.len()),
        4 | 5 => {
            let start = arg_i64(args[2])?;
            let end = arg_i64(args[3])?;
            if start < 0 && end < 0 && start > end {
                ctx.out.int(0);
                return Ok(());
            }
            let is_bit = match args.get(4) {
                Some(a) => parse_unit(a)?,
                None => false,
            };
            clamp_range(start, end, units(b.len(), is_bit), is_bit)
        }
        _ => return Err(CmdError::Syntax),
    };
    let n = match range {
        None => 0,
        Some((s, e)) => {
            let (sb, eb) = ((s >> 3) as usize, (e >> 3) as usize);
            let mut n: u64 = b
                .get(sb..=eb)
                .unwrap_or_default()
                .iter()
                .map(|c| c.count_ones() as u64)
                .sum();
            // Trim partial first/last bytes (BIT ranges).
            for i in (sb as u64 * 8)..s {
                n -= get_bit(&b, i) as u64;
            }
            for i in (e + 1)..(eb as u64 * 8 + 8) {
                n -= get_bit(&b, i) as u64;
            }
            n
        }
    };
    ctx.out.int(n as i64);
    Ok(())
}

/// In Redis's order: the bit argument, then the key (missing: an endless run of zeros),
/// then start, the unit, end.
fn bitpos(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let bit = match arg_i64(args[2])? {
        1 => true,
        0 => false,
        _ => return Err(CmdError::msg("ERR The bit argument must be 1 or 0.")),
    };
    let Some(b) = read_bytes(ctx, args[1])? else {
        ctx.out.int(if bit { -1 } else { 0 });
        return Ok(());
    };
    let end_given = args.len() >= 5;
    let range = match args.len() {
        3 => whole(b.len()),
        4..=6 => {
            let start = arg_i64(args[3])?;
            let is_bit = match args.get(5) {
                Some(a) => parse_unit(a)?,
                None => false,
            };
            let end = if end_given { arg_i64(args[4])? } else { -1 };
            clamp_range(start, end, units(b.len(), is_bit), is_bit)
        }
        _ => return Err(CmdError::Syntax),
    };
    let Some((s, e)) = range else {
        ctx.out.int(-1);
        return Ok(());
    };
    let mut i = s;
    while i <= e {
        // Skip whole bytes that can't match.
        if i & 7 == 0 && i + 7 <= e {
            let c = b[(i >> 3) as usize];
            if (bit && c == 0) || (!bit && c == 0xff) {
                i += 8;
                continue;
            }
        }
        if get_bit(&b, i) == bit {
            ctx.out.int(i as i64);
            return Ok(());
        }
        i += 1;
    }
    // Looking for 0 with no explicit end: the string is padded with zeros to the right.
    if !bit && !end_given {
        ctx.out.int(e as i64 + 1);
    } else {
        ctx.out.int(-1);
    }
    Ok(())
}

fn bitop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let op = String::from_utf8_lossy(args[1]).to_ascii_lowercase();
    if !matches!(op.as_str(), "and" | "or" | "xor" | "not") {
        return Err(CmdError::Syntax);
    }
    if op == "not" && args.len() != 4 {
        return Err(CmdError::msg(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let mut srcs = Vec::new();
    for k in &args[3..] {
        srcs.push(read_bytes(ctx, k)?.unwrap_or_default());
    }
    let maxlen = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut res = vec![0u8; maxlen];
    for (i, r) in res.iter_mut().enumerate() {
        let byte = |s: &Vec<u8>| s.get(i).copied().unwrap_or(0);
        *r = match op.as_str() {
            "not" => !byte(&srcs[0]),
            "and" => srcs.iter().map(byte).fold(0xff, |a, b| a & b),
            "or" => srcs.iter().map(byte).fold(0, |a, b| a | b),
            _ => srcs.iter().map(byte).fold(0, |a, b| a ^ b),
        };
    }
    // An empty result deletes the destination (no change when there was none).
    if res.is_empty() {
        if ctx.ks.del(args[2]) {
            ctx.notify(GENERIC, "del", args[2]);
        } else {
            ctx.unchanged();
        }
    } else {
        ctx.ks.set(args[2], Value::Buf(Box::new(res)));
        ctx.notify(STRING, "set", args[2]);
    }
    ctx.out.int(maxlen as i64);
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy)]
struct FieldType {
    signed: bool,
    bits: u32,
}

enum Op {
    Get(FieldType, u64),
    Set(FieldType, u64, i64),
    Incr(FieldType, u64, i64),
    Overflow(Overflow),
}

fn parse_type(a: &[u8]) -> Result<FieldType, CmdError> {
    let err = || {
        CmdError::msg("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")
    };
    let (signed, rest) = match a.first() {
        Some(b'i') | Some(b'I') => (true, &a[1..]),
        Some(b'u') | Some(b'U') => (false, &a[1..]),
        _ => return Err(err()),
    };
    let bits: u32 = std::str::from_utf8(rest)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(err)?;
    if bits == 0 || (signed && bits > 64) || (!signed && bits > 63) {
        return Err(err());
    }
    Ok(FieldType { signed, bits })
}

fn parse_field_offset(a: &[u8], t: FieldType) -> Result<u64, CmdError> {
    let err = || CmdError::msg("ERR bit offset is not an integer or out of range");
    let (mul, num) = match a.first() {
        Some(b'#') => (true, &a[1..]),
        _ => (false, a),
    };
    let v = arg_i64(num).map_err(|_| err())?;
    if v < 0 {
        return Err(err());
    }
    let off = if mul {
        (v as u64).checked_mul(t.bits as u64).ok_or_else(err)?
    } else {
        v as u64
    };
    if off + t.bits as u64 > MAX_BITS {
        return Err(err());
    }
    Ok(off)
}

fn read_field(b: &[u8], off: u64, t: FieldType) -> i64 {
    let mut v: u64 = 0;
    for i in 0..t.bits as u64 {
        let idx = off + i;
        let bit = b
            .get((idx >> 3) as usize)
            .is_some_and(|c| c & (1 << (7 - (idx & 7))) != 0);
        v = (v << 1) | bit as u64;
    }
    if t.signed && t.bits < 64 && v & (1 << (t.bits - 1)) != 0 {
        (v | (!0u64 << t.bits)) as i64
    } else {
        v as i64
    }
}

fn write_field(b: &mut [u8], off: u64, t: FieldType, val: i64) {
    let v = val as u64;
    for i in 0..t.bits as u64 {
        let bit = (v >> (t.bits as u64 - 1 - i)) & 1;
        let idx = off + i;
        let byte = &mut b[(idx >> 3) as usize];
        let mask = 1 << (7 - (idx & 7));
        if bit == 1 {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// Applies the overflow policy to `v` (as i128) for the field type; None = FAIL.
fn fit(v: i128, t: FieldType, ov: Overflow) -> Option<i64> {
    let (min, max): (i128, i128) = if t.signed {
        (-(1i128 << (t.bits - 1)), (1i128 << (t.bits - 1)) - 1)
    } else {
        (0, (1i128 << t.bits) - 1)
    };
    if v >= min && v <= max {
        return Some(v as i64);
    }
    match ov {
        Overflow::Fail => None,
        Overflow::Sat => Some(if v < min { min as i64 } else { max as i64 }),
        Overflow::Wrap => {
            let m = 1i128 << t.bits;
            let mut w = v.rem_euclid(m);
            if t.signed && w > max {
                w -= m;
            }
            Some(w as i64)
        }
    }
}

fn parse_ops(args: &[&[u8]], readonly: bool) -> Result<Vec<Op>, CmdError> {
    let mut ops = Vec::new();
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        let left = args.len() - i - 1;
        if eq_ic(a, "get") && left >= 2 {
            let t = parse_type(args[i + 1])?;
            ops.push(Op::Get(t, parse_field_offset(args[i + 2], t)?));
            i += 3;
        } else if eq_ic(a, "set") && left >= 3 && !readonly {
            let t = parse_type(args[i + 1])?;
            let off = parse_field_offset(args[i + 2], t)?;
            ops.push(Op::Set(t, off, arg_i64(args[i + 3])?));
            i += 4;
        } else if eq_ic(a, "incrby") && left >= 3 && !readonly {
            let t = parse_type(args[i + 1])?;
            let off = parse_field_offset(args[i + 2], t)?;
            ops.push(Op::Incr(t, off, arg_i64(args[i + 3])?));
            i += 4;
        } else if eq_ic(a, "overflow") && left >= 1 && !readonly {
            let o = &args[i + 1];
            ops.push(Op::Overflow(if eq_ic(o, "wrap") {
                Overflow::Wrap
            } else if eq_ic(o, "sat") {
                Overflow::Sat
            } else if eq_ic(o, "fail") {
                Overflow::Fail
            } else {
                return Err(CmdError::msg("ERR Invalid OVERFLOW type specified"));
            }));
            i += 2;
        } else if readonly && (eq_ic(a, "set") || eq_ic(a, "incrby") || eq_ic(a, "overflow")) {
            return Err(CmdError::msg(
                "ERR BITFIELD_RO only supports the GET subcommand",
            ));
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(ops)
}

fn bitfield_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], readonly: bool) -> CmdResult {
    let ops = parse_ops(args, readonly)?;
    let writes = ops
        .iter()
        .filter_map(|o| match o {
            Op::Set(t, off, _) | Op::Incr(t, off, _) => Some((off + t.bits as u64).div_ceil(8)),
            _ => None,
        })
        .max();
    let mut results: Vec<Option<i64>> = Vec::new();
    let mut ov = Overflow::Wrap;
    // SETs and INCRBYs that changed the field, or wrote into a string they created or
    // grew (Redis's count; OVERFLOW FAIL may refuse them all).
    let mut changes = 0;
    match writes {
        None => {
            let b = read_bytes(ctx, args[1])?.unwrap_or_default();
            for op in &ops {
                if let Op::Get(t, off) = op {
                    results.push(Some(read_field(&b, *off, *t)));
                }
            }
        }
        Some(need) => {
            let (buf, grew) = write_buf(ctx, args[1], need as usize)?;
            for op in &ops {
                match op {
                    Op::Overflow(o) => ov = *o,
                    Op::Get(t, off) => results.push(Some(read_field(buf, *off, *t))),
                    Op::Set(t, off, v) => {
                        let old = read_field(buf, *off, *t);
                        match fit(*v as i128, *t, ov) {
                            Some(nv) => {
                                write_field(buf, *off, *t, nv);
                                results.push(Some(old));
                                changes += usize::from(grew || nv != old);
                            }
                            None => results.push(None),
                        }
                    }
                    Op::Incr(t, off, by) => {
                        let old = read_field(buf, *off, *t);
                        match fit(old as i128 + *by as i128, *t, ov) {
                            Some(nv) => {
                                write_field(buf, *off, *t, nv);
                                results.push(Some(nv));
                                changes += usize::from(grew || nv != old);
                            }
                            None => results.push(None),
                        }
                    }
                }
            }
        }
    }
    if changes > 0 {
        ctx.notify(STRING, "setbit", args[1]);
    }
    ctx.changed_by(changes);
    ctx.out.array(results.len());
    for r in results {
        match r {
            Some(v) => ctx.out.int(v),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn bitfield(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    bitfield_generic(ctx, args, false)
}

fn bitfield_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    bitfield_generic(ctx, args, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_roundtrip_and_overflow() {
        let mut b = vec![0u8; 8];
        let t = FieldType {
            signed: true,
            bits: 5,
        };
        write_field(&mut b, 3, t, -7);
        assert_eq!(read_field(&b, 3, t), -7);
        let u8t = FieldType {
            signed: false,
            bits: 8,
        };
        assert_eq!(fit(300, u8t, Overflow::Wrap), Some(44));
        assert_eq!(fit(300, u8t, Overflow::Sat), Some(255));
        assert_eq!(fit(300, u8t, Overflow::Fail), None);
        let i8t = FieldType {
            signed: true,
            bits: 8,
        };
        assert_eq!(fit(128, i8t, Overflow::Wrap), Some(-128));
        assert_eq!(fit(-129, i8t, Overflow::Sat), Some(-128));
    }
}
