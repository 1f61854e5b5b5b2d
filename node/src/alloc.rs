//! A global allocator wrapper that counts live heap bytes, so INFO `used_memory` and
//! maxmemory eviction see what the process really holds (no jemalloc stats in Rust's
//! System allocator, hence hand-rolled).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::Ordering;

use crate::counter::Counter;

/// Live bytes, sharded per thread: a locked add on one shared line per malloc and free was
/// a measurable part of a pipelined write's CPU.
static USED: Counter = Counter::new();

/// Bytes glibc malloc really takes for a request: 8-byte header, 16-byte granularity,
/// 32-byte minimum chunk.
#[inline]
fn real_size(size: usize) -> u64 {
    (((size + 8 + 15) & !15).max(32)) as u64
}

pub struct CountingAlloc;

unsafe impl GlobalAlloc for CountingAlloc {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            USED.fetch_add(real_size(l.size()), Ordering::Relaxed);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            USED.fetch_add(real_size(l.size()), Ordering::Relaxed);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        USED.fetch_sub(real_size(l.size()), Ordering::Relaxed);
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            USED.fetch_add(
                real_size(new).wrapping_sub(real_size(l.size())),
                Ordering::Relaxed,
            );
        }
        q
    }
}

/// Live heap bytes (0 when the binary doesn't install [`CountingAlloc`]).
pub fn used_memory() -> u64 {
    (USED.load(Ordering::Relaxed) as i64).max(0) as u64
}

/// Resident set size of this process from /proc (0 if unavailable).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}
