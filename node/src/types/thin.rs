//! `ThinBuf`: a growable byte buffer behind one 8-byte pointer, with its length and capacity
//! in the heap block's header (`[len: u32][cap: u32][bytes...]`); empty = no allocation.
//!
//! Small hashes, sets and sorted sets live unboxed inside `db::Value` (24 bytes), which only
//! works if their packed storage is one thin pointer, so a 3-member hash is ONE heap block
//! like Redis's listpack. Hand-rolled rather than the `thin-vec` crate because ThinVec's header
//! is two `usize`s (16 bytes): with glibc's 16-byte chunk steps the 8 bytes saved here move
//! half of the small packs down a size class. Packs are bounded far below 4 GiB (listpack
//! limits, proto-max-bulk-len), so `u32` length and capacity suffice (checked).

use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::ops::{Deref, DerefMut, Range};
use std::ptr::NonNull;

/// Bytes of the block header (len, cap).
const HEAD: usize = 8;

pub struct ThinBuf {
    /// Points at the header; `None` when the capacity is zero.
    ptr: Option<NonNull<u32>>,
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
        ThinBuf { ptr: None }
    }

    /// An empty buffer with room for exactly `cap` bytes.
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
    pub fn len(&self) -> usize {
        match self.ptr {
            // SAFETY: a live block starts with the initialised u32 length.
            Some(p) => unsafe { *p.as_ptr() as usize },
            None => 0,
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn capacity(&self) -> usize {
        match self.ptr {
            // SAFETY: the capacity is the header's second u32.
            Some(p) => unsafe { *p.as_ptr().add(1) as usize },
            None => 0,
        }
    }

    /// Heap bytes held, header included (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        match self.ptr {
            Some(_) => HEAD + self.capacity(),
            None => 0,
        }
    }

    #[inline]
    fn data(&self) -> *mut u8 {
        match self.ptr {
            // SAFETY: the bytes follow the 8-byte header inside the block.
            Some(p) => unsafe { (p.as_ptr() as *mut u8).add(HEAD) },
            None => NonNull::<u8>::dangling().as_ptr(),
        }
    }

    /// Sets the length; `n` must be <= capacity and bytes up to `n` initialised.
    #[inline]
    fn set_len(&mut self, n: usize) {
        debug_assert!(n <= self.capacity());
        if let Some(p) = self.ptr {
            // SAFETY: writing the header's length field of our own block.
            unsafe { *p.as_ptr() = n as u32 };
        }
    }

    /// Reallocates to exactly `cap` bytes (>= len); 0 frees the block.
    fn set_capacity(&mut self, cap: usize) {
        let len = self.len();
        debug_assert!(cap >= len);
        let old = self.capacity();
        if cap == old {
            return;
        }
        let c32 = to_u32(cap);
        match self.ptr {
            Some(p) if cap == 0 => {
                // SAFETY: the block was allocated with layout(old).
                unsafe { dealloc(p.as_ptr() as *mut u8, layout(old)) };
                self.ptr = None;
            }
            None if cap == 0 => {}
            Some(p) => {
                // SAFETY: same block and layout it was allocated with; new size is non-zero.
                let np = unsafe { realloc(p.as_ptr() as *mut u8, layout(old), HEAD + cap) };
                let np =
                    NonNull::new(np as *mut u32).unwrap_or_else(|| handle_alloc_error(layout(cap)));
                // SAFETY: header of the (re)allocated block.
                unsafe { *np.as_ptr().add(1) = c32 };
                self.ptr = Some(np);
            }
            None => {
                // SAFETY: non-zero size layout.
                let np = unsafe { alloc(layout(cap)) };
                let np =
                    NonNull::new(np as *mut u32).unwrap_or_else(|| handle_alloc_error(layout(cap)));
                // SAFETY: initialising the header of the fresh block.
                unsafe {
                    *np.as_ptr() = 0;
                    *np.as_ptr().add(1) = c32;
                }
                self.ptr = Some(np);
            }
        }
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
            self.set_capacity(need.max(self.capacity() * 2).max(8));
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
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.data().add(len), s.len()) };
        self.set_len(len + s.len());
    }

    /// Grows (zero-filled) or shrinks to `n` bytes.
    pub fn resize(&mut self, n: usize) {
        let len = self.len();
        if n > len {
            self.reserve(n - len);
            // SAFETY: capacity >= n.
            unsafe { std::ptr::write_bytes(self.data().add(len), 0, n - len) };
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
        let d = self.data();
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
        if let Some(p) = self.ptr {
            // SAFETY: allocated with layout(capacity) and not used after this.
            unsafe { dealloc(p.as_ptr() as *mut u8, layout(self.capacity())) };
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
        // SAFETY: as in `deref`, with unique access.
        unsafe { std::slice::from_raw_parts_mut(self.data(), self.len()) }
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
        b.reserve_exact(5);
        b.extend_from_slice(b"hello");
        assert_eq!((b.capacity(), &*b), (5, &b"hello"[..]));
        b.reserve(1);
        assert!(b.capacity() >= 10);
        b.shrink_to(0);
        assert_eq!(b.capacity(), 5);
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
                    _ => { t.shrink_to(n); let c = t.clone(); prop_assert_eq!(c.capacity(), c.len()); t = c; }
                }
                prop_assert_eq!(&*t, &v[..]);
                prop_assert!(t.capacity() >= t.len());
            }
        }
    }
}
