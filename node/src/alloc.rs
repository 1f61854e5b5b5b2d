//! The global allocator: mimalloc, wrapped to count live heap bytes so INFO `used_memory`
//! and maxmemory eviction see what the process really holds (the count is ours, not
//! mimalloc's statistics, so that reading it costs one relaxed load per thread shard).
//!
//! Why mimalloc rather than the system (glibc) malloc: a key lookup is a chain of dependent
//! loads (slot map, control bytes, node) into a heap of ~80 MB at 1M keys, and on this
//! kind of virtual machine every TLB miss is a two-level page walk. mimalloc backs its
//! segments with transparent huge pages (it madvises them) and keeps each size class in its
//! own pages. Measured with redis-benchmark -P 16 GET over 1M random keys: 2130 ns of server
//! CPU per request with glibc malloc, 1480 ns with mimalloc (redis-server 7.0: 1520 ns).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::Ordering;

use mimalloc::MiMalloc;

use crate::counter::Counter;

/// Live bytes, sharded per thread: a locked add on one shared line per malloc and free was
/// a measurable part of a pipelined write's CPU.
static USED: Counter = Counter::new();

/// Largest request mimalloc serves from its size classes; above it, whole OS pages.
const MI_LARGE_MAX_OBJ_SIZE: usize = 512 * 1024;

/// Bytes mimalloc really takes for a request (its `mi_good_size`, computed here because the
/// C function is a call per malloc and free): 8-byte granularity up to 64 (mimalloc built
/// with MI_MAX_ALIGN_SIZE=8, see .cargo/config.toml), then four classes per power of two,
/// then 4 KiB pages. No per-block header.
#[inline]
pub fn real_size(size: usize) -> u64 {
    let w = size.div_ceil(8);
    if w <= 1 {
        return 8;
    }
    if w <= 8 {
        return (w * 8) as u64;
    }
    if size > MI_LARGE_MAX_OBJ_SIZE {
        return size.next_multiple_of(4096) as u64;
    }
    // w-1 has its top bit at b; the two bits below it pick one of four classes, whose
    // block is the largest word count with that prefix.
    let v = w - 1;
    let b = usize::BITS - 1 - v.leading_zeros();
    let top = (v >> (b - 2)) & 3;
    (((5 + top) << (b - 2)) * 8) as u64
}

pub struct CountingAlloc;

/// The alignment every mimalloc block has: its MI_MAX_ALIGN_SIZE, which we build as 8
/// (.cargo/config.toml) so that small size classes are 8 bytes apart.
const MI_MAX_ALIGN: usize = 8;

/// Whether plain `mi_malloc` already aligns a block of `l` (as Rust's own System allocator
/// decides for malloc). The `mimalloc` crate sends every layout to `mi_malloc_aligned`,
/// whose fast path only serves a size class whose current page still has a free block;
/// otherwise, for a class that is not a power of two (48, 80, 96, 768 bytes...), it
/// over-allocates size + align - 1 in the next class and never opens a new page of its
/// own. Measured on 1M keyspace nodes of 43 bytes: nearly all went to 64-byte blocks, 16
/// bytes per key of RSS that used_memory (which counts 48) did not show.
#[inline]
fn plain(align: usize, size: usize) -> bool {
    align <= MI_MAX_ALIGN && align <= size
}

unsafe impl GlobalAlloc for CountingAlloc {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = if plain(l.align(), l.size()) {
            libmimalloc_sys::mi_malloc(l.size()) as *mut u8
        } else {
            MiMalloc.alloc(l)
        };
        if !p.is_null() {
            USED.fetch_add(real_size(l.size()), Ordering::Relaxed);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = if plain(l.align(), l.size()) {
            libmimalloc_sys::mi_zalloc(l.size()) as *mut u8
        } else {
            MiMalloc.alloc_zeroed(l)
        };
        if !p.is_null() {
            USED.fetch_add(real_size(l.size()), Ordering::Relaxed);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        MiMalloc.dealloc(p, l);
        USED.fetch_sub(real_size(l.size()), Ordering::Relaxed);
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = if plain(l.align(), new) {
            libmimalloc_sys::mi_realloc(p as *mut std::ffi::c_void, new) as *mut u8
        } else {
            MiMalloc.realloc(p, l, new)
        };
        if !q.is_null() {
            USED.fetch_add(
                real_size(new).wrapping_sub(real_size(l.size())),
                Ordering::Relaxed,
            );
        }
        q
    }
}

/// Gives the calling thread's free memory back to the OS. mimalloc returns empty pages
/// only from inside later allocator calls of the thread that freed them, so an idle server
/// that just dropped most of its data (FLUSHALL, expiry, a replica resync) would otherwise
/// keep its peak RSS. `force` (MEMORY PURGE) also purges what is still within mimalloc's
/// purge delay.
pub fn purge(force: bool) {
    // SAFETY: mi_collect only walks and releases the allocator's own free pages; it's
    // callable from any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(force) }
}

/// Turns transparent huge pages off for this process and its save children (Redis's
/// `disable-thp yes`, its default). mimalloc asks for huge pages on its arenas, and with
/// THP each first touch of a fresh region zeroes 2 MiB, each purge of a 64 KiB page
/// splits one again: a storm of 5000 new connections took 350 ms to answer with THP
/// and 70 ms without (redis-server 70-90), at 216 MB of peak RSS against 86.
pub fn disable_thp() -> std::io::Result<()> {
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and only sets a flag on this
    // process's memory map (kept across fork and exec).
    let r = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// INFO's mem_allocator: the linked mimalloc's version (e.g. `mimalloc-3.3.2`).
pub fn allocator_name() -> String {
    // SAFETY: returns a constant.
    let v = unsafe { libmimalloc_sys::mi_version() };
    format!("mimalloc-{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
}

/// Whether the linked mimalloc has the size classes [`real_size`] assumes; false when it
/// was built without .cargo/config.toml's MI_MAX_ALIGN_SIZE=8 (used_memory then counts
/// less than the blocks take).
pub fn size_classes_match() -> bool {
    // SAFETY: a pure function of its argument.
    unsafe { libmimalloc_sys::mi_good_size(24) as u64 == real_size(24) }
}

/// Live heap bytes (0 when the binary doesn't install [`CountingAlloc`]).
pub fn used_memory() -> u64 {
    (USED.load(Ordering::Relaxed) as i64).max(0) as u64
}

/// Bytes this thread allocated minus what it freed, wrapping; only differences mean
/// anything (see `Counter::mine`).
pub fn thread_allocated() -> u64 {
    USED.mine()
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

#[cfg(test)]
mod tests {
    use super::real_size;

    /// The accounting must round exactly as the allocator does, or used_memory drifts from
    /// what the process holds.
    #[test]
    fn real_size_matches_mimalloc_good_size() {
        let mut sizes: Vec<usize> = (1..=70_000).collect();
        sizes.extend((70_000..2_000_000).step_by(997));
        sizes.extend([
            MI_MAX - 1,
            MI_MAX,
            MI_MAX + 1,
            1 << 20,
            (1 << 20) + 1,
            16 << 20,
        ]);
        for s in sizes {
            // SAFETY: a pure function of its argument.
            let good = unsafe { libmimalloc_sys::mi_good_size(s) } as u64;
            assert_eq!(real_size(s), good, "size {s}");
        }
    }

    const MI_MAX: usize = super::MI_LARGE_MAX_OBJ_SIZE;

    /// A run of allocations of one size class whose block is not a power of two (a
    /// keyspace node of a short key) fills blocks of that class, as used_memory counts
    /// them, and each block keeps its layout's alignment; bigger alignments still work.
    #[test]
    fn blocks_are_the_counted_class_and_aligned() {
        use std::alloc::{GlobalAlloc, Layout};
        let a = super::CountingAlloc;
        for (size, align) in [
            (43, 8),
            (24, 8),
            (40, 16),
            (56, 8),
            (24, 16),
            (48, 16),
            (8, 8),
            (768, 8),
            (100, 32),
            (4, 8),
        ] {
            let l = Layout::from_size_align(size, align).expect("layout");
            // Several pages' worth, so the class's first page fills and a new one opens.
            let ptrs: Vec<*mut u8> = (0..5000)
                .map(|i| {
                    // SAFETY: a valid non-zero layout; freed below with the same one.
                    let p = unsafe {
                        if i % 2 == 0 {
                            a.alloc(l)
                        } else {
                            a.alloc_zeroed(l)
                        }
                    };
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    p
                })
                .collect();
            if super::plain(align, size) {
                for &p in &ptrs {
                    // SAFETY: p is a live block from mimalloc.
                    let usable = unsafe { libmimalloc_sys::mi_usable_size(p as *const _) };
                    assert_eq!(usable as u64, real_size(size), "size {size} align {align}");
                }
            }
            for p in ptrs {
                // SAFETY: allocated above with `l`, freed once.
                unsafe {
                    let q = a.realloc(p, l, size * 3);
                    assert_eq!(q as usize % align, 0, "realloc size {size} align {align}");
                    a.dealloc(q, Layout::from_size_align(size * 3, align).expect("layout"));
                }
            }
        }
    }
}
