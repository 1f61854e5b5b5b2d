//! Encoding values the way Redis 7.0 writes them: compact encodings (listpack, intset,
//! quicklist 2) for small collections, integer-encoded and LZF-compressed strings.

use bytes::Bytes;

use crate::containers::backlen_size;
use crate::lzf;
use crate::types::*;
use crate::value::RdbValue;

/// Redis 7.0 defaults for compact encodings.
const HASH_MAX_LISTPACK_ENTRIES: usize = 512;
const HASH_MAX_LISTPACK_VALUE: usize = 64;
const ZSET_MAX_LISTPACK_ENTRIES: usize = 128;
const ZSET_MAX_LISTPACK_VALUE: usize = 64;
const SET_MAX_INTSET_ENTRIES: usize = 512;
/// list-max-listpack-size -2: quicklist nodes of at most 8 KiB.
const LIST_NODE_MAX_BYTES: usize = 8192;
/// Strings shorter than this are never worth compressing (Redis uses the same bound).
const LZF_MIN_LEN: usize = 21;

/// Appends an RDB length.
pub(crate) fn write_len(out: &mut Vec<u8>, n: u64) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.push(0x40 | (n >> 8) as u8);
        out.push((n & 0xff) as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// The value of `s` if it is the canonical decimal form of an i64 (what string2ll accepts).
pub(crate) fn canonical_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let t = std::str::from_utf8(s).ok()?;
    let v: i64 = t.parse().ok()?;
    // Rejects "+1", "01", "-0" and the like, which Redis keeps as strings.
    (v.to_string() == t).then_some(v)
}

/// Appends an RDB string: integer-encoded when possible, LZF when it pays, raw otherwise.
pub(crate) fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(v) = canonical_int(s) {
            if let Ok(b) = i8::try_from(v) {
                out.push(0xc0);
                out.push(b as u8);
                return;
            } else if let Ok(h) = i16::try_from(v) {
                out.push(0xc1);
                out.extend_from_slice(&h.to_le_bytes());
                return;
            } else if let Ok(w) = i32::try_from(v) {
                out.push(0xc2);
                out.extend_from_slice(&w.to_le_bytes());
                return;
            }
        }
    }
    if s.len() >= LZF_MIN_LEN {
        if let Some(c) = lzf::compress(s, s.len() - 4) {
            out.push(0xc3);
            write_len(out, c.len() as u64);
            write_len(out, s.len() as u64);
            out.extend_from_slice(&c);
            return;
        }
    }
    write_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Builds a listpack blob from elements (integers in canonical form get integer encodings).
pub(crate) struct ListpackBuilder {
    buf: Vec<u8>,
    count: usize,
}

impl ListpackBuilder {
    pub(crate) fn new() -> Self {
        ListpackBuilder {
            buf: vec![0; 6],
            count: 0,
        }
    }

    /// Bytes the listpack would take if finished now.
    pub(crate) fn size(&self) -> usize {
        self.buf.len() + 1
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size of one element, for node splitting decisions.
    pub(crate) fn entry_size(s: &[u8]) -> usize {
        let n = match canonical_int(s) {
            Some(v) => int_entry_len(v),
            None => str_header_len(s.len()) + s.len(),
        };
        n + backlen_size(n as u64)
    }

    pub(crate) fn push(&mut self, s: &[u8]) {
        let start = self.buf.len();
        match canonical_int(s) {
            Some(v) => self.push_int_raw(v),
            None => {
                let n = s.len();
                if n < 64 {
                    self.buf.push(0x80 | n as u8);
                } else if n < 4096 {
                    self.buf.push(0xe0 | (n >> 8) as u8);
                    self.buf.push((n & 0xff) as u8);
                } else {
                    self.buf.push(0xf0);
                    self.buf.extend_from_slice(&(n as u32).to_le_bytes());
                }
                self.buf.extend_from_slice(s);
            }
        }
        let l = (self.buf.len() - start) as u64;
        push_backlen(&mut self.buf, l);
        self.count += 1;
    }

    /// Appends an integer element (streams store IDs, flags and counts this way).
    pub(crate) fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        self.push_int_raw(v);
        let l = (self.buf.len() - start) as u64;
        push_backlen(&mut self.buf, l);
        self.count += 1;
    }

    /// Appends the elements of `other` after ours.
    pub(crate) fn append(&mut self, other: ListpackBuilder) {
        self.buf.extend_from_slice(&other.buf[6..]);
        self.count += other.count;
    }

    fn push_int_raw(&mut self, v: i64) {
        let b = &mut self.buf;
        if (0..=127).contains(&v) {
            b.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u64) & 0x1fff;
            b.push(0xc0 | (u >> 8) as u8);
            b.push((u & 0xff) as u8);
        } else if let Ok(h) = i16::try_from(v) {
            b.push(0xf1);
            b.extend_from_slice(&h.to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            b.push(0xf2);
            b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if let Ok(w) = i32::try_from(v) {
            b.push(0xf3);
            b.extend_from_slice(&w.to_le_bytes());
        } else {
            b.push(0xf4);
            b.extend_from_slice(&v.to_le_bytes());
        }
    }

    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xff);
        let total = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        let count = self.count.min(usize::from(u16::MAX)) as u16;
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

fn int_entry_len(v: i64) -> usize {
    if (0..=127).contains(&v) {
        1
    } else if (-4096..=4095).contains(&v) {
        2
    } else if i16::try_from(v).is_ok() {
        3
    } else if (-(1 << 23)..(1 << 23)).contains(&v) {
        4
    } else if i32::try_from(v).is_ok() {
        5
    } else {
        9
    }
}

fn str_header_len(n: usize) -> usize {
    if n < 64 {
        1
    } else if n < 4096 {
        2
    } else {
        5
    }
}

fn push_backlen(buf: &mut Vec<u8>, l: u64) {
    let n = backlen_size(l);
    for i in (0..n).rev() {
        let group = ((l >> (7 * i)) & 0x7f) as u8;
        buf.push(if i == n - 1 { group } else { group | 0x80 });
    }
}

/// Text of a zset score as stored in a listpack: integers as integers (so they get integer
/// encodings), otherwise the shortest text that parses back to the same double.
pub(crate) fn score_text(x: f64) -> String {
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if x == 0.0 && x.is_sign_negative() {
        return "-0".to_string();
    }
    if x.fract() == 0.0 && x.abs() < 9.007_199_254_740_992e15 {
        return (x as i64).to_string();
    }
    ryu::Buffer::new().format_finite(x).to_string()
}

/// The RDB type byte Redis 7.0 would use for this value.
pub(crate) fn value_type(v: &RdbValue) -> u8 {
    match v {
        RdbValue::String(_) => TYPE_STRING,
        RdbValue::List(_) => TYPE_LIST_QUICKLIST_2,
        RdbValue::Set(m) => {
            if m.len() <= SET_MAX_INTSET_ENTRIES && m.iter().all(|s| canonical_int(s).is_some()) {
                TYPE_SET_INTSET
            } else {
                TYPE_SET
            }
        }
        RdbValue::Hash(p) => {
            if p.len() <= HASH_MAX_LISTPACK_ENTRIES
                && p.iter().all(|(f, v)| {
                    f.len() <= HASH_MAX_LISTPACK_VALUE && v.len() <= HASH_MAX_LISTPACK_VALUE
                })
            {
                TYPE_HASH_LISTPACK
            } else {
                TYPE_HASH
            }
        }
        RdbValue::Stream(_) => TYPE_STREAM_LISTPACKS_2,
        RdbValue::ZSet(p) => {
            if p.len() <= ZSET_MAX_LISTPACK_ENTRIES
                && p.iter().all(|(m, _)| m.len() <= ZSET_MAX_LISTPACK_VALUE)
            {
                TYPE_ZSET_LISTPACK
            } else {
                TYPE_ZSET_2
            }
        }
    }
}

/// Appends the body of `v` encoded as type `ty` (as chosen by [`value_type`]).
pub(crate) fn write_value_body(out: &mut Vec<u8>, v: &RdbValue, ty: u8) {
    match (v, ty) {
        (RdbValue::String(s), _) => write_string(out, s),
        (RdbValue::List(items), _) => write_quicklist2(out, items),
        (RdbValue::Set(m), TYPE_SET_INTSET) => write_string(out, &intset_blob(m)),
        (RdbValue::Set(m), _) => {
            write_len(out, m.len() as u64);
            for s in m {
                write_string(out, s);
            }
        }
        (RdbValue::Hash(p), TYPE_HASH_LISTPACK) => {
            let mut lp = ListpackBuilder::new();
            for (f, v) in p {
                lp.push(f);
                lp.push(v);
            }
            write_string(out, &lp.finish());
        }
        (RdbValue::Hash(p), _) => {
            write_len(out, p.len() as u64);
            for (f, v) in p {
                write_string(out, f);
                write_string(out, v);
            }
        }
        (RdbValue::ZSet(p), TYPE_ZSET_LISTPACK) => {
            // A listpack zset must be in ascending (score, member) order.
            let mut sorted: Vec<&(Bytes, f64)> = p.iter().collect();
            sorted.sort_by(|a, b| {
                a.1.partial_cmp(&b.1)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| a.0.cmp(&b.0))
            });
            let mut lp = ListpackBuilder::new();
            for (m, s) in sorted {
                lp.push(m);
                lp.push(score_text(*s).as_bytes());
            }
            write_string(out, &lp.finish());
        }
        (RdbValue::Stream(s), _) => crate::stream::write_stream(out, s),
        (RdbValue::ZSet(p), _) => {
            write_len(out, p.len() as u64);
            for (m, s) in p {
                write_string(out, m);
                out.extend_from_slice(&s.to_le_bytes());
            }
        }
    }
}

fn write_quicklist2(out: &mut Vec<u8>, items: &[Bytes]) {
    let mut nodes: Vec<Vec<u8>> = Vec::new();
    let mut lp = ListpackBuilder::new();
    for it in items {
        if !lp.is_empty() && lp.size() + ListpackBuilder::entry_size(it) > LIST_NODE_MAX_BYTES {
            nodes.push(std::mem::replace(&mut lp, ListpackBuilder::new()).finish());
        }
        lp.push(it);
    }
    if !lp.is_empty() {
        nodes.push(lp.finish());
    }
    write_len(out, nodes.len() as u64);
    for n in nodes {
        write_len(out, QUICKLIST_NODE_PACKED);
        write_string(out, &n);
    }
}

/// An intset blob: sorted, unique, in the narrowest width that holds every member.
fn intset_blob(members: &[Bytes]) -> Vec<u8> {
    let mut vals: Vec<i64> = members.iter().filter_map(|s| canonical_int(s)).collect();
    vals.sort_unstable();
    vals.dedup();
    let width: usize = if vals.iter().all(|v| i16::try_from(*v).is_ok()) {
        2
    } else if vals.iter().all(|v| i32::try_from(*v).is_ok()) {
        4
    } else {
        8
    };
    let mut b = Vec::with_capacity(8 + width * vals.len());
    b.extend_from_slice(&(width as u32).to_le_bytes());
    b.extend_from_slice(&(vals.len() as u32).to_le_bytes());
    for v in vals {
        b.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    b
}
