//! Stored values: a small-string-optimised byte string for keys and string values, the
//! `Value` enum (containers come from `crate::types`) and the per-key `Entry`.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

use bytes::Bytes;

use crate::types::{HashValue, ListValue, SetValue, StreamValue, ZSetValue};

const INLINE: usize = 22;

/// String values from this size on are stored refcounted ([`SBytes::Shared`]): a big
/// argument's read buffer is kept as the value with no copy (`Ctx::string_value`), and a
/// reply writes a big value from its buffer without copying it. Redis's
/// PROTO_MBULK_BIG_ARG, the size from which it keeps an argument's query buffer.
pub const SHARED_MIN: usize = 32 * 1024;

/// Byte string stored inline up to 22 bytes (no heap block), boxed beyond. 24 bytes.
/// Hand-rolled rather than `smallvec` because SmallVec<[u8; 16]> is 24 bytes but only inlines
/// 16, and this layout leaves a niche that keeps `Value` at 24 bytes.
#[derive(Clone)]
pub enum SBytes {
    Inline {
        len: u8,
        data: [u8; INLINE],
    },
    Heap(HeapBytes),
    /// A big value kept in the buffer it arrived in (a slice of the request's read buffer,
    /// see `Ctx::string_value`): storing it costs no copy, as Redis keeps a big argument's
    /// query buffer as the value. Refcounted, because the connection still reads the
    /// request's arguments after the command (propagation, the reply mode), while another
    /// thread may already have deleted the key. Boxed to keep this type at 24 bytes.
    Shared(Box<Bytes>),
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
            SBytes::Heap(HeapBytes::new(b))
        }
    }

    /// A value held in `b`'s buffer, no copy made (see [`SBytes::Shared`]).
    pub fn shared(b: Bytes) -> Self {
        SBytes::Shared(Box::new(b))
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        match self {
            SBytes::Inline { len, data } => &data[..*len as usize],
            SBytes::Heap(b) => b,
            SBytes::Shared(b) => b,
        }
    }

    /// Heap bytes owned beyond the struct itself.
    pub fn heap_size(&self) -> usize {
        match self {
            SBytes::Inline { .. } => 0,
            SBytes::Heap(b) => crate::alloc::bytes_size(b.len()) as usize,
            // The box, and the buffer's refcount block that `bytes` allocates.
            SBytes::Shared(b) => b.len() + 2 * std::mem::size_of::<Bytes>(),
        }
    }

    pub fn is_inline(&self) -> bool {
        matches!(self, SBytes::Inline { .. })
    }
}

/// The heap form of [`SBytes`]: the bytes in a block of their exact size from
/// [`crate::alloc::alloc_bytes`], which places it in whichever allocator wastes less on
/// that size. A `Box<[u8]>` (what this was) always took a mimalloc size class.
pub struct HeapBytes {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: a HeapBytes owns its block alone, as a Box<[u8]> does, and hands out only
// shared references to it through `&self`.
unsafe impl Send for HeapBytes {}
// SAFETY: as above; nothing mutates the bytes after `new`.
unsafe impl Sync for HeapBytes {}

impl HeapBytes {
    pub fn new(b: &[u8]) -> Self {
        let p = crate::alloc::alloc_bytes(b.len());
        let Some(ptr) = std::ptr::NonNull::new(p) else {
            // As Box and Vec do when the allocator fails.
            std::alloc::handle_alloc_error(std::alloc::Layout::for_value(b))
        };
        // SAFETY: `p` is a fresh block of b.len() bytes, not overlapping `b`.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len()) };
        HeapBytes { ptr, len: b.len() }
    }
}

impl std::ops::Deref for HeapBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: the block holds `len` initialised bytes for as long as self lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for HeapBytes {
    fn clone(&self) -> Self {
        HeapBytes::new(self)
    }
}

impl Drop for HeapBytes {
    fn drop(&mut self) {
        // SAFETY: the block came from alloc_bytes(self.len) in `new` and is freed once.
        unsafe { crate::alloc::free_bytes(self.ptr.as_ptr(), self.len) }
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
/// Lists, hashes, sets and sorted sets are held unboxed (16 bytes each: a thin pointer to the
/// packed block, or to the boxed big encoding), so a small one costs a single heap block.
#[derive(Clone, Debug)]
pub enum Value {
    Str(SBytes),
    Int(i64),
    Buf(Box<Vec<u8>>),
    List(ListValue),
    Hash(HashValue),
    Set(SetValue),
    ZSet(ZSetValue),
    /// Boxed: streams are rare and their header is large.
    Stream(Box<StreamValue>),
}

// One (key, Entry) node must stay in a 64-byte chunk: unboxing must not grow `Value`.
const _: () = assert!(std::mem::size_of::<Value>() == 24);
const _: () = assert!(std::mem::size_of::<Entry>() == 32);

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
        if b.len() >= SHARED_MIN {
            // Refcounted, so that a reply can send it from here (`Out::bulk_shared`): the
            // same allocation as a boxed slice, plus the box.
            return Value::Str(SBytes::shared(Bytes::copy_from_slice(b)));
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
            Value::Stream(_) => "stream",
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
            Value::Stream(_) => "stream",
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
            Value::Stream(s) => s.heap_size(),
        }
    }
}

/// Expiry sentinel: the key has no TTL.
pub const NO_EXPIRE: u64 = 0;

/// Near deadlines are ms since this base (2020-01-01) in the low `NEAR_BITS` bits of an
/// entry's meta word (until 2089), beside the access word.
const EXPIRE_BASE: u64 = 1_577_836_800_000;
const NEAR_BITS: u32 = 41;
const NEAR_MASK: u64 = (1 << NEAR_BITS) - 1;
/// Set for a far deadline (Redis accepts any i64 of milliseconds): the other 63 bits are
/// then the absolute unix ms, and the key has no access word (rare enough to not grow
/// every entry for it).
const FAR: u64 = 1 << 63;
/// Bits of the LRU/LFU access word.
pub const ACCESS_BITS: u32 = 22;
pub const ACCESS_MASK: u32 = (1 << ACCESS_BITS) - 1;

/// One key's value with its absolute expiry and LRU/LFU word, packed into one u64 so the
/// entry is 32 bytes and a node with a key of up to 15 bytes is 48 (see db::slotmap).
#[derive(Clone, Debug)]
pub struct Entry {
    pub value: Value,
    meta: u64,
}

impl Entry {
    pub fn new(value: Value) -> Self {
        Entry { value, meta: 0 }
    }

    /// Absolute expiry in unix ms, or `NO_EXPIRE`.
    #[inline]
    pub fn expire_at(&self) -> u64 {
        if self.meta & FAR != 0 {
            return self.meta & !FAR;
        }
        match self.meta & NEAR_MASK {
            0 => NO_EXPIRE,
            v => v + EXPIRE_BASE,
        }
    }

    /// Sets the expiry (unix ms; `NO_EXPIRE` clears it), exactly up to `i64::MAX` (larger
    /// values are clamped to it; deadlines before 2020 are kept as 2020-01-01, already
    /// past). A far deadline drops the access word; leaving it starts a fresh one.
    #[inline]
    pub fn set_expire_at(&mut self, at: u64) {
        let access = (self.access() as u64) << NEAR_BITS;
        if at == NO_EXPIRE {
            self.meta = access;
            return;
        }
        let near = at.saturating_sub(EXPIRE_BASE).max(1);
        self.meta = if near <= NEAR_MASK {
            access | near
        } else {
            FAR | at.min(i64::MAX as u64)
        };
    }

    #[inline]
    pub fn has_expire(&self) -> bool {
        self.meta & (FAR | NEAR_MASK) != 0
    }

    /// LRU clock (seconds) or LFU word (minutes << 8 | counter), `ACCESS_BITS` wide; 0 for
    /// a key with a far deadline.
    #[inline]
    pub fn access(&self) -> u32 {
        if self.meta & FAR != 0 {
            return 0;
        }
        (self.meta >> NEAR_BITS) as u32 & ACCESS_MASK
    }

    #[inline]
    pub fn set_access(&mut self, a: u32) {
        if self.meta & FAR == 0 {
            self.meta = (self.meta & NEAR_MASK) | (((a & ACCESS_MASK) as u64) << NEAR_BITS);
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
        assert_eq!(std::mem::size_of::<Entry>(), 32);
        let mut e = Entry::new(Value::Int(1));
        assert_eq!(e.expire_at(), NO_EXPIRE);
        e.set_access(12345);
        e.set_expire_at(1_800_000_000_123);
        assert_eq!((e.expire_at(), e.access()), (1_800_000_000_123, 12345));
        e.set_expire_at(NO_EXPIRE);
        assert!(!e.has_expire());
        assert_eq!(e.access(), 12345);
    }

    /// Deadlines past the packed range (2089) up to i64::MAX ms are exact (issue 18:
    /// EXPIREAT k 33177117420 read back as 5975883311).
    #[test]
    fn far_deadlines_are_exact() {
        let mut e = Entry::new(Value::Int(1));
        e.set_access(777);
        for at in [
            33_177_117_420_000,
            33_177_117_420_123,
            EXPIRE_BASE + NEAR_MASK + 1,
            9_223_372_036_854_770_000,
            i64::MAX as u64,
        ] {
            e.set_expire_at(at);
            assert!(e.has_expire());
            assert_eq!(e.expire_at(), at);
        }
        e.set_expire_at(u64::MAX);
        assert_eq!(e.expire_at(), i64::MAX as u64);
        // Back to a near deadline, then none: the access word is usable again.
        e.set_expire_at(EXPIRE_BASE + NEAR_MASK);
        assert_eq!(e.expire_at(), EXPIRE_BASE + NEAR_MASK);
        e.set_access(99);
        assert_eq!(e.access(), 99);
        e.set_expire_at(NO_EXPIRE);
        assert!(!e.has_expire());
        assert_eq!((e.expire_at(), e.access()), (NO_EXPIRE, 99));
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
