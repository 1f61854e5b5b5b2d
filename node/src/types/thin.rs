//! `ThinBuf`: a growable byte buffer behind one 8-byte word: up to 7 bytes inline in the word,
//! beyond that a pointer to a heap block with its length and capacity in the block's header
//! (`[len: u32][cap: u32][bytes...]`); empty or inline = no allocation.
//!
//! Small hashes, sets and sorted sets live unboxed inside `db::Value` (24 bytes), which only
//! works if their packed storage is one thin pointer, so a 3-member hash is ONE heap block
//! like Redis's listpack. Hand-rolled rather than the `thin-vec` crate because ThinVec's header
//! is two `usize`s (16 bytes): with glibc's 16-byte chunk steps the 8 bytes saved here move
//! half of the small packs down a size class. Packs are bounded far below 4 GiB (listpack
//! limits, proto-max-bulk-len), so `u32` length and capacity suffice (checked).

use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::ops::{Deref, DerefMut, Range};

/// Bytes of the block header (len, cap).
pub(crate) const HEAD: usize = 8;
/// Bytes stored inline, in the pointer word itself (no heap block at all).
const INLINE: usize = 7;

/// The word is one of: all zero (empty); byte 0 odd (inline: byte 0 = len << 1 | 1, bytes
/// 1..8 = data, e.g. an intset of three small integers); else the little-endian address of
/// the heap block (at least 4-aligned, so never odd). Bytes rather than a pointer so the
/// inline form has no provenance questions; the heap address is exposed on allocation.
#[repr(C, align(8))]
pub struct ThinBuf {
    b: [u8; 8],
}

// SAFETY: ThinBuf uniquely owns its block, like Vec<u8>.
unsafe impl Send for ThinBuf {}
// SAFETY: shared access only reads the block.
unsafe impl Sync for ThinBuf {}

fn layout(cap: usize) -> Layout {
    // Alignment 4 (the u32 header); the size is bounded by `to_u32` before this is called.
    match Layout::from_size_align(HEAD + cap, 4) {
        Ok(l) => l,
        Err(_) => panic!("ThinBuf capacity overflow"),
    }
}

fn to_u32(n: usize) -> u32 {
    match u32::try_from(n) {
        Ok(v) if (v as usize) < u32::MAX as usize - HEAD => v,
        _ => panic!("ThinBuf larger than 4 GiB"),
    }
}

impl ThinBuf {
    pub const fn new() -> Self {
        ThinBuf { b: [0; 8] }
    }

    /// An empty buffer with room for exactly `cap` bytes (inline up to 7).
    pub fn with_capacity(cap: usize) -> Self {
        let mut b = ThinBuf::new();
        b.set_capacity(cap);
        b
    }

    pub fn from_slice(s: &[u8]) -> Self {
        let mut b = ThinBuf::with_capacity(s.len());
        b.extend_from_slice(s);
        b
    }

    #[inline]
    fn is_inline(&self) -> bool {
        self.b[0] & 1 == 1
    }

    /// The heap block's header, if the bytes live on the heap.
    #[inline]
    fn heap(&self) -> Option<*mut u32> {
        let w = usize::from_le_bytes(self.b);
        (w != 0 && w & 1 == 0).then(|| std::ptr::with_exposed_provenance_mut::<u32>(w))
    }

    fn set_heap(&mut self, p: *mut u32) {
        self.b = p.expose_provenance().to_le_bytes();
    }

    #[inline]
    pub fn len(&self) -> usize {
        if self.is_inline() {
            return (self.b[0] >> 1) as usize;
        }
        match self.heap() {
            // SAFETY: a live block starts with the initialised u32 length.
            Some(p) => unsafe { *p as usize },
            None => 0,
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn capacity(&self) -> usize {
        if self.is_inline() {
            return INLINE;
        }
        match self.heap() {
            // SAFETY: the capacity is the header's second u32.
            Some(p) => unsafe { *p.add(1) as usize },
            None => 0,
        }
    }

    /// Heap bytes held, header included (MEMORY USAGE); 0 while empty or inline.
    pub fn heap_size(&self) -> usize {
        match self.heap() {
            Some(_) => HEAD + self.capacity(),
            None => 0,
        }
    }

    #[inline]
    fn data(&self) -> *const u8 {
        if self.is_inline() {
            // SAFETY: inline bytes follow the tag byte inside `self.b`.
            return unsafe { self.b.as_ptr().add(1) };
        }
        match self.heap() {
            // SAFETY: the bytes follow the 8-byte header inside the block.
            Some(p) => unsafe { (p as *const u8).add(HEAD) },
            None => std::ptr::NonNull::<u8>::dangling().as_ptr(),
        }
    }

    #[inline]
    fn data_mut(&mut self) -> *mut u8 {
        if self.is_inline() {
            // SAFETY: as in `data`, with unique access.
            return unsafe { self.b.as_mut_ptr().add(1) };
        }
        match self.heap() {
            // SAFETY: as in `data`; the block is uniquely ours.
            Some(p) => unsafe { (p as *mut u8).add(HEAD) },
            None => std::ptr::NonNull::<u8>::dangling().as_ptr(),
        }
    }

    /// Sets the length; `n` must be <= capacity and bytes up to `n` initialised.
    #[inline]
    fn set_len(&mut self, n: usize) {
        debug_assert!(n <= self.capacity());
        if self.is_inline() {
            self.b[0] = ((n as u8) << 1) | 1;
        } else if let Some(p) = self.heap() {
            // SAFETY: writing the header's length field of our own block.
            unsafe { *p = n as u32 };
        }
    }

    /// Re-homes the bytes: inline when `cap` <= 7 (empty when 0), else a heap block of
    /// exactly `cap` bytes. `cap` must be >= len.
    fn set_capacity(&mut self, cap: usize) {
        let len = self.len();
        debug_assert!(cap >= len);
        if cap <= INLINE {
            let heap = self.heap();
            if heap.is_none() && (cap > 0 || len > 0) && self.is_inline() {
                return; // already inline
            }
            let mut tmp = [0u8; 8];
            tmp[1..1 + len].copy_from_slice(&self[..len]);
            if let Some(p) = heap {
                let old = self.capacity();
                // SAFETY: the block was allocated with layout(old); not used after this.
                unsafe { dealloc(p as *mut u8, layout(old)) };
            }
            if cap == 0 {
                self.b = [0; 8];
            } else {
                tmp[0] = ((len as u8) << 1) | 1;
                self.b = tmp;
            }
            return;
        }
        let old = self.capacity();
        if cap == old {
            return;
        }
        let c32 = to_u32(cap);
        let np = match self.heap() {
            Some(p) => {
                // SAFETY: same block and layout it was allocated with; new size is non-zero.
                unsafe { realloc(p as *mut u8, layout(old), HEAD + cap) as *mut u32 }
            }
            None => {
                // SAFETY: non-zero size layout.
                let np = unsafe { alloc(layout(cap)) as *mut u32 };
                if !np.is_null() {
                    // SAFETY: fresh block of HEAD + cap >= len bytes; the old bytes are
                    // inline in `self.b` (or there are none).
                    unsafe {
                        std::ptr::copy_nonoverlapping(self.data(), (np as *mut u8).add(HEAD), len)
                    };
                    // SAFETY: initialising the length in the fresh block's header.
                    unsafe { *np = len as u32 };
                }
                np
            }
        };
        if np.is_null() {
            handle_alloc_error(layout(cap));
        }
        // SAFETY: header of the (re)allocated block.
        unsafe { *np.add(1) = c32 };
        self.set_heap(np);
    }

    /// Room for `extra` more bytes, growing to exactly the size needed.
    pub fn reserve_exact(&mut self, extra: usize) {
        let need = self.len() + extra;
        if need > self.capacity() {
            self.set_capacity(need);
        }
    }

    /// Room for `extra` more bytes, growing at least 2x (amortised O(1) appends).
    pub fn reserve(&mut self, extra: usize) {
        let need = self.len() + extra;
        if need > self.capacity() {
            let c = if need <= INLINE {
                need
            } else {
                need.max(self.capacity() * 2)
            };
            self.set_capacity(c);
        }
    }

    /// Shrinks the capacity to `max(len, cap)`.
    pub fn shrink_to(&mut self, cap: usize) {
        let c = cap.max(self.len());
        if c < self.capacity() {
            self.set_capacity(c);
        }
    }

    pub fn extend_from_slice(&mut self, s: &[u8]) {
        self.reserve(s.len());
        let len = self.len();
        // SAFETY: capacity >= len + s.len(); `s` cannot alias our block (we hold &mut self).
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.data_mut().add(len), s.len()) };
        self.set_len(len + s.len());
    }

    /// Grows (zero-filled) or shrinks to `n` bytes.
    pub fn resize(&mut self, n: usize) {
        let len = self.len();
        if n > len {
            self.reserve(n - len);
            // SAFETY: capacity >= n.
            unsafe { std::ptr::write_bytes(self.data_mut().add(len), 0, n - len) };
        }
        self.set_len(n);
    }

    pub fn truncate(&mut self, n: usize) {
        if n < self.len() {
            self.set_len(n);
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
            self.reserve(new_len - len);
        }
        let d = self.data_mut();
        // SAFETY: both the tail move and the copy stay within capacity (>= new_len, len).
        unsafe {
            std::ptr::copy(d.add(r.end), d.add(r.start + with.len()), len - r.end);
            std::ptr::copy_nonoverlapping(with.as_ptr(), d.add(r.start), with.len());
        }
        self.set_len(new_len);
    }
}

impl Default for ThinBuf {
    fn default() -> Self {
        ThinBuf::new()
    }
}

impl Drop for ThinBuf {
    fn drop(&mut self) {
        if let Some(p) = self.heap() {
            // SAFETY: allocated with layout(capacity) and not used after this.
            unsafe { dealloc(p as *mut u8, layout(self.capacity())) };
        }
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
        b.reserve_exact(5);
        assert_eq!((b.capacity(), b.heap_size(), &*b), (10, 18, &b"hello"[..]));
        b.reserve(6);
        assert_eq!(b.capacity(), 20);
        b.extend_from_slice(b" world");
        b.shrink_to(0);
        assert_eq!((b.capacity(), &*b), (11, &b"hello world"[..]));
        b.replace_range(2..11, b"");
        b.shrink_to(0);
        assert_eq!((b.capacity(), b.heap_size(), &*b), (7, 0, &b"he"[..]));
        b.truncate(0);
        b.shrink_to(0);
        assert_eq!((b.capacity(), b.heap_size(), b.len()), (0, 0, 0));
    }

    proptest! {
        #[test]
        fn matches_vec(ops in proptest::collection::vec((0u8..5, 0usize..40, proptest::collection::vec(any::<u8>(), 0..20)), 0..80)) {
            let mut t = ThinBuf::new();
            let mut v: Vec<u8> = Vec::new();
            for (op, n, data) in ops {
                match op {
                    0 => { t.extend_from_slice(&data); v.extend_from_slice(&data); }
                    1 => { let a = n.min(v.len()); let b = (a + data.len() % 7).min(v.len());
                           t.replace_range(a..b, &data); v.splice(a..b, data.iter().copied()); }
                    2 => { t.truncate(n); v.truncate(n); }
                    3 => { t.resize(n); v.resize(n, 0); }
                    _ => { t.shrink_to(n); let c = t.clone(); prop_assert_eq!(c.capacity(), if c.len() <= INLINE && !c.is_empty() { INLINE } else { c.len() }); t = c; }
                }
                prop_assert_eq!(&*t, &v[..]);
                prop_assert!(t.capacity() >= t.len());
            }
        }
    }
}
