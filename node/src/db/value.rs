//! Stored values: a small-string-optimised byte string for keys and string values, the
//! `Value` enum (containers come from `crate::types`) and the per-key `Entry`.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

use crate::types::{HashValue, ListValue, SetValue, ZSetValue};

const INLINE: usize = 22;

/// Byte string stored inline up to 22 bytes (no heap block), boxed beyond. 24 bytes.
/// Hand-rolled rather than `smallvec` because SmallVec<[u8; 16]> is 24 bytes but only inlines
/// 16, and this layout leaves a niche that keeps `Value` at 24 bytes.
#[derive(Clone)]
pub enum SBytes {
    Inline { len: u8, data: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl SBytes {
    #[inline]
    pub fn new(b: &[u8]) -> Self {
        if b.len() <= INLINE {
            let mut data = [0u8; INLINE];
            data[..b.len()].copy_from_slice(b);
            SBytes::Inline {
                len: b.len() as u8,
                data,
            }
        } else {
            SBytes::Heap(b.into())
        }
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        match self {
            SBytes::Inline { len, data } => &data[..*len as usize],
            SBytes::Heap(b) => b,
        }
    }

    /// Heap bytes owned beyond the struct itself.
    pub fn heap_size(&self) -> usize {
        match self {
            SBytes::Inline { .. } => 0,
            SBytes::Heap(b) => b.len(),
        }
    }

    pub fn is_inline(&self) -> bool {
        matches!(self, SBytes::Inline { .. })
    }
}

impl std::ops::Deref for SBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Borrow<[u8]> for SBytes {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for SBytes {
    fn eq(&self, o: &Self) -> bool {
        self.as_slice() == o.as_slice()
    }
}
impl Eq for SBytes {}

impl Hash for SBytes {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.as_slice().hash(h)
    }
}

impl std::fmt::Debug for SBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_slice()))
    }
}

/// A value. Strings are `Str` (immutable, inline when short), `Int` (integer encoding, as
/// Redis's OBJECT ENCODING "int") or `Buf` (grown in place by APPEND/SETRANGE/SETBIT).
#[derive(Clone, Debug)]
pub enum Value {
    Str(SBytes),
    Int(i64),
    Buf(Box<Vec<u8>>),
    List(Box<ListValue>),
    Hash(Box<HashValue>),
    Set(Box<SetValue>),
    ZSet(Box<ZSetValue>),
}

/// Redis's canonical integer test: no leading zeros/plus, fits i64, at most 20 chars.
pub fn parse_canonical_int(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let s = std::str::from_utf8(b).ok()?;
    let v: i64 = s.parse().ok()?;
    let mut buf = itoa::Buffer::new();
    if buf.format(v).as_bytes() == b {
        Some(v)
    } else {
        None
    }
}

impl Value {
    /// A string value, integer-encoded when `b` is a canonical integer.
    #[inline]
    pub fn string(b: &[u8]) -> Value {
        if b.len() <= 20 && !b.is_empty() && (b[0].is_ascii_digit() || b[0] == b'-') {
            if let Some(v) = parse_canonical_int(b) {
                return Value::Int(v);
            }
        }
        Value::Str(SBytes::new(b))
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) | Value::Int(_) | Value::Buf(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
        }
    }

    pub fn is_string(&self) -> bool {
        matches!(self, Value::Str(_) | Value::Int(_) | Value::Buf(_))
    }

    /// String bytes; integers are formatted into `tmp`.
    #[inline]
    pub fn str_bytes<'a>(&'a self, tmp: &'a mut itoa::Buffer) -> Option<&'a [u8]> {
        match self {
            Value::Str(s) => Some(s.as_slice()),
            Value::Buf(b) => Some(b.as_slice()),
            Value::Int(i) => Some(tmp.format(*i).as_bytes()),
            _ => None,
        }
    }

    /// Turns a string value into a growable buffer and returns it (APPEND, SETRANGE, SETBIT).
    pub fn make_buf(&mut self) -> Option<&mut Vec<u8>> {
        let v = match self {
            Value::Buf(_) => None,
            Value::Str(s) => Some(s.as_slice().to_vec()),
            Value::Int(i) => Some(itoa::Buffer::new().format(*i).as_bytes().to_vec()),
            _ => return None,
        };
        if let Some(v) = v {
            *self = Value::Buf(Box::new(v));
        }
        match self {
            Value::Buf(b) => Some(b),
            _ => None,
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Int(_) => "int",
            Value::Str(s) if s.len() <= 44 => "embstr",
            Value::Str(_) | Value::Buf(_) => "raw",
            Value::List(l) => l.encoding(),
            Value::Hash(h) => h.encoding(),
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
        }
    }

    /// Approximate heap bytes owned by the value (MEMORY USAGE, eviction accounting).
    pub fn mem_usage(&self) -> usize {
        match self {
            Value::Str(s) => s.heap_size(),
            Value::Int(_) => 0,
            Value::Buf(b) => b.capacity() + 24,
            Value::List(l) => l.heap_size(),
            Value::Hash(h) => h.heap_size(),
            Value::Set(s) => s.heap_size(),
            Value::ZSet(z) => z.heap_size(),
        }
    }
}

/// Expiry sentinel: the key has no TTL.
pub const NO_EXPIRE: u64 = 0;

/// One key's value with its absolute expiry (unix ms, 0 = none) and LRU/LFU word.
#[derive(Clone, Debug)]
pub struct Entry {
    pub value: Value,
    pub expire_at: u64,
    /// LRU: seconds clock (low 24 bits). LFU: counter in the low 8 bits, decay minutes above.
    pub access: u32,
}

impl Entry {
    pub fn new(value: Value) -> Self {
        Entry {
            value,
            expire_at: NO_EXPIRE,
            access: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<SBytes>(), 24);
        assert_eq!(std::mem::size_of::<Value>(), 24);
    }

    #[test]
    fn int_encoding() {
        assert!(matches!(Value::string(b"123"), Value::Int(123)));
        assert!(matches!(Value::string(b"-5"), Value::Int(-5)));
        assert!(matches!(Value::string(b"0123"), Value::Str(_)));
        assert!(matches!(Value::string(b"+1"), Value::Str(_)));
        assert!(matches!(Value::string(b"-0"), Value::Str(_)));
    }
}
