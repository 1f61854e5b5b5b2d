//! Parsers for the compact blobs Redis stores inside RDB strings: ziplist, listpack, intset and
//! zipmap. Every access is bounds-checked; a malformed blob is an error, never a panic.

use bytes::Bytes;

use crate::error::{RdbError, Result};
use crate::source::int_bytes;

/// A bounds-checked cursor over a blob.
struct Cur<'a> {
    b: &'a [u8],
    p: usize,
    what: &'static str,
}

impl<'a> Cur<'a> {
    fn new(b: &'a [u8], what: &'static str) -> Self {
        Cur { b, p: 0, what }
    }
    fn err(&self, d: &str) -> RdbError {
        RdbError::corrupt(self.what, format!("{d} at offset {}", self.p))
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.p.checked_add(n).ok_or_else(|| self.err("overflow"))?;
        let s = self
            .b
            .get(self.p..end)
            .ok_or_else(|| self.err("past end"))?;
        self.p = end;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.arr::<1>()?[0])
    }
    fn peek(&self) -> Result<u8> {
        self.b
            .get(self.p)
            .copied()
            .ok_or_else(|| self.err("past end"))
    }
    fn done(&self) -> bool {
        self.p == self.b.len()
    }
}

fn sign_extend(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// Elements of a ziplist (strings; integers rendered as decimal text).
pub fn ziplist_entries(blob: &[u8]) -> Result<Vec<Bytes>> {
    let mut c = Cur::new(blob, "ziplist");
    let zlbytes = u32::from_le_bytes(c.arr()?) as usize;
    let zltail = u32::from_le_bytes(c.arr()?) as usize;
    let zllen = u16::from_le_bytes(c.arr()?);
    if zlbytes != blob.len() {
        return Err(c.err("zlbytes does not match blob size"));
    }
    let mut out = Vec::with_capacity(usize::from(zllen).min(blob.len()));
    // Redis's deep check (ziplistValidateIntegrity): every entry's prevlen is the previous
    // entry's size and zltail is the offset of the last entry (the header's end when empty).
    let (mut prev_start, mut prev_size) = (c.p, 0usize);
    loop {
        if c.peek()? == 0xff {
            c.p += 1;
            break;
        }
        let start = c.p;
        let prev = c.u8()?;
        let prevlen = if prev == 0xfe {
            u32::from_le_bytes(c.arr()?) as usize
        } else if prev == 0xff {
            return Err(c.err("bad prevlen"));
        } else {
            usize::from(prev)
        };
        if prevlen != prev_size {
            return Err(c.err("prevlen does not match the previous entry"));
        }
        let enc = c.u8()?;
        let entry = match enc >> 6 {
            0 => Bytes::copy_from_slice(c.take(usize::from(enc & 0x3f))?),
            1 => {
                let n = (usize::from(enc & 0x3f) << 8) | usize::from(c.u8()?);
                Bytes::copy_from_slice(c.take(n)?)
            }
            2 => {
                if enc != 0x80 {
                    return Err(c.err("bad string encoding"));
                }
                let n = u32::from_be_bytes(c.arr()?) as usize;
                Bytes::copy_from_slice(c.take(n)?)
            }
            _ => {
                let v: i64 = match enc {
                    0xc0 => i64::from(i16::from_le_bytes(c.arr()?)),
                    0xd0 => i64::from(i32::from_le_bytes(c.arr()?)),
                    0xe0 => i64::from_le_bytes(c.arr()?),
                    0xf0 => {
                        let b: [u8; 3] = c.arr()?;
                        sign_extend(u64::from(u32::from_le_bytes([b[0], b[1], b[2], 0])), 24)
                    }
                    0xfe => i64::from(c.u8()? as i8),
                    0xf1..=0xfd => i64::from(enc & 0x0f) - 1,
                    _ => return Err(c.err("bad integer encoding")),
                };
                int_bytes(v)
            }
        };
        out.push(entry);
        (prev_start, prev_size) = (start, c.p - start);
    }
    if !c.done() {
        return Err(c.err("data after end marker"));
    }
    if zltail != prev_start {
        return Err(c.err("zltail is not the last entry's offset"));
    }
    if zllen != u16::MAX && usize::from(zllen) != out.len() {
        return Err(c.err("element count mismatch"));
    }
    Ok(out)
}

/// Elements of a listpack (strings; integers rendered as decimal text).
pub fn listpack_entries(blob: &[u8]) -> Result<Vec<Bytes>> {
    let mut c = Cur::new(blob, "listpack");
    let total = u32::from_le_bytes(c.arr()?) as usize;
    let count = u16::from_le_bytes(c.arr()?);
    if total != blob.len() {
        return Err(c.err("total bytes do not match blob size"));
    }
    let mut out = Vec::with_capacity(usize::from(count).min(blob.len()));
    loop {
        let start = c.p;
        let enc = c.u8()?;
        if enc == 0xff {
            break;
        }
        let entry = if enc & 0x80 == 0 {
            int_bytes(i64::from(enc & 0x7f))
        } else if enc & 0xc0 == 0x80 {
            Bytes::copy_from_slice(c.take(usize::from(enc & 0x3f))?)
        } else if enc & 0xe0 == 0xc0 {
            let v = (u64::from(enc & 0x1f) << 8) | u64::from(c.u8()?);
            int_bytes(sign_extend(v, 13))
        } else if enc & 0xf0 == 0xe0 {
            let n = (usize::from(enc & 0x0f) << 8) | usize::from(c.u8()?);
            Bytes::copy_from_slice(c.take(n)?)
        } else {
            match enc {
                0xf0 => {
                    let n = u32::from_le_bytes(c.arr()?) as usize;
                    Bytes::copy_from_slice(c.take(n)?)
                }
                0xf1 => int_bytes(i64::from(i16::from_le_bytes(c.arr()?))),
                0xf2 => {
                    let b: [u8; 3] = c.arr()?;
                    int_bytes(sign_extend(
                        u64::from(u32::from_le_bytes([b[0], b[1], b[2], 0])),
                        24,
                    ))
                }
                0xf3 => int_bytes(i64::from(i32::from_le_bytes(c.arr()?))),
                0xf4 => int_bytes(i64::from_le_bytes(c.arr()?)),
                _ => return Err(c.err("bad entry encoding")),
            }
        };
        let entry_len = (c.p - start) as u64;
        let backlen = backlen_size(entry_len);
        let back = c.take(backlen)?;
        if decode_backlen(back) != Some(entry_len) {
            return Err(c.err("bad backlen"));
        }
        out.push(entry);
    }
    if !c.done() {
        return Err(c.err("data after end marker"));
    }
    if count != u16::MAX && usize::from(count) != out.len() {
        return Err(c.err("element count mismatch"));
    }
    Ok(out)
}

/// Size of a listpack entry's back-length field for an entry of `l` bytes.
pub(crate) fn backlen_size(l: u64) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Decodes a back-length field stored left to right (most significant 7-bit group first).
fn decode_backlen(b: &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate() {
        // The first byte has the high bit clear, every later byte has it set.
        if (i > 0) != (byte & 0x80 != 0) {
            return None;
        }
        v = (v << 7) | u64::from(byte & 0x7f);
    }
    Some(v)
}

/// Members of an intset, as decimal text.
pub fn intset_members(blob: &[u8]) -> Result<Vec<Bytes>> {
    let mut c = Cur::new(blob, "intset");
    let width = u32::from_le_bytes(c.arr()?) as usize;
    let len = u32::from_le_bytes(c.arr()?) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err(c.err("bad encoding width"));
    }
    if len.checked_mul(width).and_then(|n| n.checked_add(8)) != Some(blob.len()) {
        return Err(c.err("length does not match blob size"));
    }
    let mut out = Vec::with_capacity(len);
    let mut prev: Option<i64> = None;
    for _ in 0..len {
        let v = match width {
            2 => i64::from(i16::from_le_bytes(c.arr()?)),
            4 => i64::from(i32::from_le_bytes(c.arr()?)),
            _ => i64::from_le_bytes(c.arr()?),
        };
        // Redis keeps intsets sorted and unique (and deep sanitisation checks it).
        if prev.is_some_and(|p| p >= v) {
            return Err(c.err("members not strictly ascending"));
        }
        prev = Some(v);
        out.push(int_bytes(v));
    }
    Ok(out)
}

/// Field/value pairs of a zipmap (the pre-2.6 small hash encoding).
pub fn zipmap_pairs(blob: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
    let mut c = Cur::new(blob, "zipmap");
    let _zmlen = c.u8()?;
    let mut out = Vec::new();
    fn zm_len(c: &mut Cur<'_>) -> Result<usize> {
        let b = c.u8()?;
        match b {
            0..=253 => Ok(usize::from(b)),
            254 => Ok(u32::from_le_bytes(c.arr()?) as usize),
            _ => Err(c.err("bad length")),
        }
    }
    loop {
        if c.peek()? == 0xff {
            c.p += 1;
            break;
        }
        let klen = zm_len(&mut c)?;
        let key = Bytes::copy_from_slice(c.take(klen)?);
        let vlen = zm_len(&mut c)?;
        let free = usize::from(c.u8()?);
        let val = Bytes::copy_from_slice(c.take(vlen)?);
        c.take(free)?;
        out.push((key, val));
    }
    if !c.done() {
        return Err(c.err("data after end marker"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::ListpackBuilder;

    #[test]
    fn intset_must_be_sorted_and_unique() {
        let blob = |vals: &[i16]| {
            let mut b = vec![2, 0, 0, 0];
            b.extend_from_slice(&(vals.len() as u32).to_le_bytes());
            for v in vals {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b
        };
        assert_eq!(intset_members(&blob(&[-1, 5])).expect("valid").len(), 2);
        assert!(intset_members(&blob(&[5, -1])).is_err());
        assert!(intset_members(&blob(&[3, 3])).is_err());
        assert!(intset_members(&blob(&[3])[..9]).is_err());
    }

    #[test]
    fn listpack_backlen_and_count_are_checked() {
        let mut lp = ListpackBuilder::new();
        for s in [&b"abc"[..], b"-4096", b"8388607", &[b'x'; 200]] {
            lp.push(s);
        }
        let good = lp.finish();
        let items = listpack_entries(&good).expect("valid");
        assert_eq!(items[1].as_ref(), b"-4096");
        assert_eq!(items[3].len(), 200);
        let mut bad = good.clone();
        bad[4] = 9; // element count
        assert!(listpack_entries(&bad).is_err());
        let mut bad = good.clone();
        bad[10] ^= 0x7f; // backlen of "abc"
        assert!(listpack_entries(&bad).is_err());
        assert!(listpack_entries(&good[..good.len() - 1]).is_err());
    }
}
