//! `ThinBuf`: a growable byte buffer behind one 8-byte word. Up to 7 bytes live inline in
//! the word; beyond that the word points at a heap block in one of two forms:
//! - short, up to 254 bytes: `[len: u8][bytes...]`, and the block is always exactly the
//!   allocator's size class for `1 + len` bytes, so its capacity follows from its length and
//!   needs no field;
//! - long: `[0xFF][len: u32][cap: u32][bytes...]`, `9 + cap` bytes.
//!
//! Small hashes, sets, sorted sets and lists live unboxed inside `db::Value` (24 bytes), which
//! only works if their packed storage is one thin pointer, so a 3-member hash is ONE heap
//! block like Redis's listpack. Why the short form: memory per small collection is compared
//! with Valkey's listpacks (7 bytes of header and end mark), and the 8-byte len/cap header we
//! had put a two-field hash's pack in a 40-byte block instead of 32. Hand-rolled rather than
//! the `thin-vec` crate because ThinVec's header is two `usize`s (16 bytes). Packs are bounded
//! far below 4 GiB (listpack limits, proto-max-bulk-len), so `u32` length and capacity
//! suffice (checked).

use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::ops::{Deref, DerefMut, Range};

/// Bytes of a long block's header (marker, len, cap).
pub(crate) const HEAD: usize = 9;
/// Bytes stored inline, in the pointer word itself (no heap block at all).
const INLINE: usize = 7;
/// Longest length a short block holds (its length byte; 0xFF marks a long block).
const SHORT_MAX: usize = 254;
const LONG: u8 = 0xFF;

/// The word is one of: all zero (empty); byte 0 odd (inline: byte 0 = len << 1 | 1, bytes
/// 1..8 = data, e.g. an intset of three small integers); else the little-endian address of
/// the heap block (2-aligned, so never odd). Bytes rather than a pointer so the inline form
/// has no provenance questions; the heap address is exposed on allocation.
#[repr(C, align(8))]
pub struct ThinBuf {
    b: [u8; 8],
}

// SAFETY: ThinBuf uniquely owns its block, like Vec<u8>.
unsafe impl Send for ThinBuf {}
// SAFETY: shared access only reads the block.
unsafe impl Sync for ThinBuf {}

/// Where the bytes are.
#[derive(Clone, Copy)]
enum Form {
    Empty,
    Inline,
    Short(*mut u8),
    Long(*mut u8),
}

/// A heap block of `size` bytes (2-aligned so that its address is never odd).
fn layout(size: usize) -> Layout {
    match Layout::from_size_align(size, 2) {
        Ok(l) => l,
        Err(_) => panic!("ThinBuf capacity overflow"),
    }
}

/// The block size of a short form holding `len` bytes: the size class of `1 + len`.
#[inline]
fn short_block(len: usize) -> usize {
    crate::alloc::real_size(1 + len) as usize
}

fn to_u32(n: usize) -> u32 {
    match u32::try_from(n) {
        Ok(v) if (v as usize) < u32::MAX as usize - HEAD => v,
        _ => panic!("ThinBuf larger than 4 GiB"),
    }
}

/// Allocates a block of `size` bytes or aborts like `Vec` does.
fn alloc_block(size: usize) -> *mut u8 {
    // SAFETY: every caller asks for at least 2 bytes.
    let p = unsafe { alloc(layout(size)) };
    if p.is_null() {
        handle_alloc_error(layout(size));
    }
    p
}

/// Resizes a block from `old` to `new` bytes or aborts.
///
/// # Safety
/// `p` was allocated by this module with `layout(old)`.
unsafe fn realloc_block(p: *mut u8, old: usize, new: usize) -> *mut u8 {
    let q = realloc(p, layout(old), new);
    if q.is_null() {
        handle_alloc_error(layout(new));
    }
    q
}

/// # Safety
/// `p` is a live long block.
#[inline]
unsafe fn long_len(p: *const u8) -> usize {
    std::ptr::read_unaligned(p.add(1) as *const u32) as usize
}

/// # Safety
/// `p` is a live long block.
#[inline]
unsafe fn long_cap(p: *const u8) -> usize {
    std::ptr::read_unaligned(p.add(5) as *const u32) as usize
}

/// # Safety
/// `p` is a long block of at least HEAD bytes, uniquely ours.
#[inline]
unsafe fn set_long_header(p: *mut u8, len: usize, cap: u32) {
    *p = LONG;
    std::ptr::write_unaligned(p.add(1) as *mut u32, len as u32);
    std::ptr::write_unaligned(p.add(5) as *mut u32, cap);
}

impl ThinBuf {
    pub const fn new() -> Self {
        ThinBuf { b: [0; 8] }
    }

    /// An empty buffer. A capacity that only a long block has is reserved now; smaller
    /// buffers size themselves exactly as they are written.
    pub fn with_capacity(cap: usize) -> Self {
        let mut b = ThinBuf::new();
        if cap > SHORT_MAX {
            b.make_long(cap, 0);
        }
        b
    }

    pub fn from_slice(s: &[u8]) -> Self {
        let mut b = ThinBuf::with_capacity(s.len());
        b.extend_from_slice(s);
        b
    }

    #[inline]
    fn form(&self) -> Form {
        let w = usize::from_le_bytes(self.b);
        if w == 0 {
            Form::Empty
        } else if w & 1 == 1 {
            Form::Inline
        } else {
            let p = std::ptr::with_exposed_provenance_mut::<u8>(w);
            // SAFETY: a non-zero even word is the address of our live block, whose first
            // byte is initialised (a short length or the long marker).
            if unsafe { *p } == LONG {
                Form::Long(p)
            } else {
                Form::Short(p)
            }
        }
    }

    fn set_heap(&mut self, p: *mut u8) {
        self.b = p.expose_provenance().to_le_bytes();
    }

    #[inline]
    pub fn len(&self) -> usize {
        match self.form() {
            Form::Empty => 0,
            Form::Inline => (self.b[0] >> 1) as usize,
            // SAFETY: a short block starts with its length byte.
            Form::Short(p) => unsafe { *p as usize },
            // SAFETY: a long block starts with its header.
            Form::Long(p) => unsafe { long_len(p) },
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn capacity(&self) -> usize {
        match self.form() {
            Form::Empty => 0,
            Form::Inline => INLINE,
            Form::Short(_) => (short_block(self.len()) - 1).min(SHORT_MAX),
            // SAFETY: a long block starts with its header.
            Form::Long(p) => unsafe { long_cap(p) },
        }
    }

    /// Heap bytes held, header included (MEMORY USAGE); 0 while empty or inline.
    pub fn heap_size(&self) -> usize {
        match self.form() {
            Form::Empty | Form::Inline => 0,
            Form::Short(_) => short_block(self.len()),
            Form::Long(_) => HEAD + self.capacity(),
        }
    }

    #[inline]
    fn data(&self) -> *const u8 {
        match self.form() {
            Form::Empty => std::ptr::NonNull::<u8>::dangling().as_ptr(),
            // SAFETY: inline bytes follow the tag byte inside `self.b`.
            Form::Inline => unsafe { self.b.as_ptr().add(1) },
            // SAFETY: the bytes follow the header inside the block.
            Form::Short(p) => unsafe { p.add(1) },
            // SAFETY: as above.
            Form::Long(p) => unsafe { p.add(HEAD) },
        }
    }

    #[inline]
    fn data_mut(&mut self) -> *mut u8 {
        match self.form() {
            Form::Empty => std::ptr::NonNull::<u8>::dangling().as_ptr(),
            // SAFETY: as in `data`, with unique access.
            Form::Inline => unsafe { self.b.as_mut_ptr().add(1) },
            // SAFETY: as in `data`; the block is uniquely ours.
            Form::Short(p) => unsafe { p.add(1) },
            // SAFETY: as above.
            Form::Long(p) => unsafe { p.add(HEAD) },
        }
    }

    /// Frees a short or long block (the word is left dangling: callers overwrite it).
    fn free_block(&mut self) {
        match self.form() {
            // SAFETY: allocated with this size (a short block is always its length's
            // class) and not used after this.
            Form::Short(p) => unsafe { dealloc(p, layout(short_block(*p as usize))) },
            // SAFETY: allocated with HEAD + cap and not used after this.
            Form::Long(p) => unsafe { dealloc(p, layout(HEAD + long_cap(p))) },
            Form::Empty | Form::Inline => {}
        }
    }

    /// Moves the bytes into a long block of capacity `cap`, or resizes the long block to
    /// it, and records the length `new_len` (<= cap, >= the bytes kept: the caller writes
    /// any beyond the current length).
    fn make_long(&mut self, cap: usize, new_len: usize) {
        let len = self.len();
        debug_assert!(cap >= len && cap >= new_len);
        let c32 = to_u32(cap);
        match self.form() {
            Form::Long(p) => {
                // SAFETY: our long block, allocated with HEAD + its cap.
                let q = unsafe { realloc_block(p, HEAD + long_cap(p), HEAD + cap) };
                // SAFETY: the header of the resized block.
                unsafe { set_long_header(q, new_len, c32) };
                self.set_heap(q);
            }
            _ => {
                let q = alloc_block(HEAD + cap);
                // SAFETY: the fresh block holds HEAD + cap >= HEAD + len bytes and doesn't
                // overlap our current bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(self.data(), q.add(HEAD), len);
                    set_long_header(q, new_len, c32);
                }
                self.free_block();
                self.set_heap(q);
            }
        }
    }

    /// Makes the storage hold `new_len` bytes and records that length, keeping the first
    /// `min(len, new_len)` bytes; the rest is for the caller to write before any read.
    /// Below a long block the form follows from the length (empty, inline, or a short
    /// block of exactly its size class); a long block stays long and grows (doubling when
    /// `double`, for amortised appends).
    fn set_room(&mut self, new_len: usize, double: bool) {
        let len = self.len();
        let form = self.form();
        if let Form::Long(p) = form {
            if new_len == 0 {
                self.free_block();
                self.b = [0; 8];
                return;
            }
            // SAFETY: a long block's header.
            let cap = unsafe { long_cap(p) };
            if new_len > cap {
                let grown = if double {
                    new_len.max(2 * cap)
                } else {
                    new_len
                };
                self.make_long(grown, new_len);
            } else {
                // SAFETY: the header of our long block; new_len <= its cap (a u32).
                unsafe { set_long_header(p, new_len, cap as u32) };
            }
            return;
        }
        if new_len == 0 {
            self.free_block();
            self.b = [0; 8];
        } else if new_len <= INLINE {
            let keep = len.min(new_len);
            let mut tmp = [0u8; 8];
            tmp[1..1 + keep].copy_from_slice(&self[..keep]);
            tmp[0] = ((new_len as u8) << 1) | 1;
            self.free_block();
            self.b = tmp;
        } else if new_len <= SHORT_MAX {
            let size = short_block(new_len);
            let q = match form {
                Form::Short(p) => {
                    let old = short_block(len);
                    if old == size {
                        p
                    } else {
                        // SAFETY: our short block, allocated with its length's class.
                        unsafe { realloc_block(p, old, size) }
                    }
                }
                _ => {
                    let q = alloc_block(size);
                    // SAFETY: the fresh block has room for len (<= 7) bytes after its
                    // length byte; the inline source doesn't overlap it.
                    unsafe { std::ptr::copy_nonoverlapping(self.data(), q.add(1), len) };
                    q
                }
            };
            // SAFETY: the length byte of our short block.
            unsafe { *q = new_len as u8 };
            self.set_heap(q);
        } else {
            let cap = if double {
                new_len.max(2 * self.capacity())
            } else {
                new_len
            };
            self.make_long(cap, new_len);
        }
    }

    /// Room for `extra` more bytes, growing to exactly the size needed. (Below a long
    /// block's size there is nothing to reserve: writes size the block exactly.)
    pub fn reserve_exact(&mut self, extra: usize) {
        let need = self.len() + extra;
        if need > SHORT_MAX && need > self.capacity() {
            self.make_long(need, self.len());
        }
    }

    /// Room for `extra` more bytes, growing at least 2x (amortised O(1) appends).
    pub fn reserve(&mut self, extra: usize) {
        let need = self.len() + extra;
        if need > SHORT_MAX && need > self.capacity() {
            self.make_long(need.max(2 * self.capacity()), self.len());
        }
    }

    /// Shrinks the capacity to `max(len, cap)`; a long block that small becomes short.
    pub fn shrink_to(&mut self, cap: usize) {
        let c = cap.max(self.len());
        if let Form::Long(p) = self.form() {
            // SAFETY: a long block's header.
            if c >= unsafe { long_cap(p) } {
                return;
            }
            if c > SHORT_MAX {
                self.make_long(c, self.len());
            } else {
                *self = ThinBuf::from_slice(self);
            }
        }
    }

    pub fn extend_from_slice(&mut self, s: &[u8]) {
        self.extend_from_slices(&[s]);
    }

    /// Appends several slices with one resize (a pack entry is header, payload, trailer).
    pub fn extend_from_slices(&mut self, parts: &[&[u8]]) {
        let len = self.len();
        let total: usize = parts.iter().map(|s| s.len()).sum();
        if total == 0 {
            return;
        }
        self.set_room(len + total, true);
        let mut at = len;
        for s in parts {
            // SAFETY: the storage holds len + total bytes; `s` cannot alias our block (we
            // hold &mut self).
            unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.data_mut().add(at), s.len()) };
            at += s.len();
        }
    }

    /// Grows (zero-filled) or shrinks to `n` bytes.
    pub fn resize(&mut self, n: usize) {
        let len = self.len();
        self.set_room(n, n > len);
        if n > len {
            // SAFETY: the storage holds n bytes.
            unsafe { std::ptr::write_bytes(self.data_mut().add(len), 0, n - len) };
        }
    }

    pub fn truncate(&mut self, n: usize) {
        if n < self.len() {
            self.set_room(n, false);
        }
    }

    /// Replaces the bytes in `r` with `with` (Vec::splice / drain in one call).
    pub fn replace_range(&mut self, r: Range<usize>, with: &[u8]) {
        let len = self.len();
        assert!(
            r.start <= r.end && r.end <= len,
            "ThinBuf range out of bounds"
        );
        let new_len = len - (r.end - r.start) + with.len();
        if new_len > len {
            self.set_room(new_len, true);
        }
        let d = self.data_mut();
        // SAFETY: the storage holds max(len, new_len) bytes here, which both the tail move
        // and the copy stay within; `with` cannot alias our block.
        unsafe {
            std::ptr::copy(d.add(r.end), d.add(r.start + with.len()), len - r.end);
            std::ptr::copy_nonoverlapping(with.as_ptr(), d.add(r.start), with.len());
        }
        if new_len < len {
            self.set_room(new_len, false);
        }
    }
}

impl Default for ThinBuf {
    fn default() -> Self {
        ThinBuf::new()
    }
}

impl Drop for ThinBuf {
    fn drop(&mut self) {
        self.free_block();
    }
}

impl Deref for ThinBuf {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: bytes 0..len are initialised; dangling pointer with length 0 when empty.
        unsafe { std::slice::from_raw_parts(self.data(), self.len()) }
    }
}

impl DerefMut for ThinBuf {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len();
        // SAFETY: as in `deref`, with unique access.
        unsafe { std::slice::from_raw_parts_mut(self.data_mut(), len) }
    }
}

impl Clone for ThinBuf {
    /// Clones exactly sized (a copy does not inherit growth slack).
    fn clone(&self) -> Self {
        ThinBuf::from_slice(self)
    }
}

impl PartialEq for ThinBuf {
    fn eq(&self, o: &Self) -> bool {
        **self == **o
    }
}
impl Eq for ThinBuf {}

impl std::fmt::Debug for ThinBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", &**self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn thin_and_exact() {
        assert_eq!(std::mem::size_of::<ThinBuf>(), 8);
        let mut b = ThinBuf::new();
        assert_eq!((b.len(), b.capacity(), b.heap_size()), (0, 0, 0));
        b.extend_from_slice(b"hello");
        assert_eq!((b.capacity(), b.heap_size(), &*b), (7, 0, &b"hello"[..]));
        // A short block: one length byte, the block exactly the size class of 1 + 11.
        b.extend_from_slice(b" world");
        assert_eq!(
            (b.capacity(), b.heap_size(), &*b),
            (15, 16, &b"hello world"[..])
        );
        b.reserve_exact(5);
        assert_eq!(b.heap_size(), 16, "nothing to reserve below a long block");
        b.replace_range(2..11, b"");
        assert_eq!((b.capacity(), b.heap_size(), &*b), (7, 0, &b"he"[..]));
        b.truncate(0);
        assert_eq!((b.capacity(), b.heap_size(), b.len()), (0, 0, 0));
        // Past 254 bytes a long block with its capacity in the header, kept on truncation
        // (like Vec) until shrunk.
        b.resize(300);
        assert_eq!((b.capacity(), b.heap_size()), (300, HEAD + 300));
        b.reserve(1);
        assert_eq!(b.capacity(), 600);
        b.truncate(10);
        assert_eq!((b.len(), b.capacity()), (10, 600));
        b.shrink_to(0);
        assert_eq!((b.capacity(), b.heap_size(), &*b), (15, 16, &[0u8; 10][..]));
        let c = ThinBuf::with_capacity(1000);
        assert_eq!(
            (c.len(), c.capacity(), c.heap_size()),
            (0, 1000, HEAD + 1000)
        );
    }

    /// The capacity an exactly sized buffer of `len` bytes has.
    fn exact_cap(len: usize) -> usize {
        match len {
            0 => 0,
            1..=INLINE => INLINE,
            _ if len <= SHORT_MAX => (short_block(len) - 1).min(SHORT_MAX),
            _ => len,
        }
    }

    proptest! {
        #[test]
        fn matches_vec(ops in proptest::collection::vec((0u8..5, 0usize..600, proptest::collection::vec(any::<u8>(), 0..300)), 0..80)) {
            let mut t = ThinBuf::new();
            let mut v: Vec<u8> = Vec::new();
            for (op, n, data) in ops {
                match op {
                    0 => { t.extend_from_slice(&data); v.extend_from_slice(&data); }
                    1 => { let a = n.min(v.len()); let b = (a + data.len() % 200).min(v.len());
                           t.replace_range(a..b, &data); v.splice(a..b, data.iter().copied()); }
                    2 => { t.truncate(n); v.truncate(n); }
                    3 => { t.resize(n); v.resize(n, 0); }
                    _ => { t.shrink_to(n); let c = t.clone(); prop_assert_eq!(c.capacity(), exact_cap(c.len())); t = c; }
                }
                prop_assert_eq!(&*t, &v[..]);
                prop_assert!(t.capacity() >= t.len());
                prop_assert_eq!(t.heap_size() == 0, t.len() <= INLINE && t.capacity() <= INLINE);
            }
        }
    }
}
