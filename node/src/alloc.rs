//! The global allocator: mimalloc, wrapped to count live heap bytes so INFO `used_memory`
//! and maxmemory eviction see what the process really holds (the count is ours, not
//! mimalloc's statistics, so that reading it costs one relaxed load per thread shard).
//! Blocks past 64 KiB and up to 512 KiB go to glibc's malloc instead, which sizes them to
//! the byte (see `exact`), and so do stored strings and byte buffers past 32 KiB of sizes
//! glibc fits tighter than mimalloc's classes (see `alloc_bytes`).
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

/// Requests above this, up to [`MI_LARGE_MAX_OBJ_SIZE`], go to glibc's malloc instead
/// (see [`exact`]).
const EXACT_MIN: usize = 64 * 1024;

/// glibc's malloc alignment on 64-bit targets (its MALLOC_ALIGNMENT, 2 * size_t).
const LIBC_ALIGN: usize = 16;

/// Whether a request of `size` bytes aligned to `align` goes to glibc's malloc: big
/// blocks that mimalloc would round up to one of its four classes per power of two. A
/// 100 KB string value (a big argument's read buffer, kept as the value) took a 112 KiB
/// block, 12% of used_memory per key more than valkey, whose libc malloc sizes a block of
/// that size to the byte (plus a 16-byte header). Such blocks are few and large, so
/// mimalloc's per-thread pages matter little for them; above 512 KiB mimalloc already
/// sizes blocks in whole pages.
///
/// Byte buffers (alignment 1) go there from [`EXACT_BYTES_MIN`] on when glibc's chunk is
/// the smaller: a big argument's read buffer, which a SET keeps as the value, is sized to
/// the request (a 40000-byte value took a 40 KiB class); powers of two, which most
/// growing buffers are, stay in mimalloc.
#[inline]
fn exact(align: usize, size: usize) -> bool {
    size > EXACT_BYTES_MIN
        && size <= MI_LARGE_MAX_OBJ_SIZE
        && align <= LIBC_ALIGN
        && (size > EXACT_MIN || (align == 1 && libc_tighter(size)))
}

/// Byte buffers past this size may go to glibc's malloc (see [`exact`]): the size from
/// which a big argument gets a read buffer of its own (Redis's PROTO_MBULK_BIG_ARG).
const EXACT_BYTES_MIN: usize = 32 * 1024;

/// The chunk glibc's malloc carves for `size` bytes: the size plus its 8-byte header,
/// rounded up to 16, and never below its 32-byte minimum. A block it maps on its own (past
/// its mmap threshold, 128 KiB until a free raises it) is rounded to pages instead;
/// counting the chunk there is off by less than a page.
#[inline]
fn libc_chunk(size: usize) -> u64 {
    (size + 8).next_multiple_of(16).max(32) as u64
}

/// Bytes the allocator really takes for a byte buffer (alignment 1) of `size` bytes:
/// glibc's chunk for the big blocks `exact` sends there, else mimalloc's block
/// (`mi_block_size`). For other layouts, [`counted`].
#[inline]
pub fn real_size(size: usize) -> u64 {
    if exact(1, size) {
        return libc_chunk(size);
    }
    mi_block_size(size)
}

/// Bytes mimalloc really takes for a request (its `mi_good_size`, computed here because the
/// C function is a call per malloc and free): 8-byte granularity up to 64 (mimalloc built
/// with MI_MAX_ALIGN_SIZE=8, see .cargo/config.toml), then four classes per power of two,
/// then 4 KiB pages. No per-block header.
#[inline]
fn mi_block_size(size: usize) -> u64 {
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

/// Whether glibc's malloc holds `size` bytes in less than mimalloc does. mimalloc rounds a
/// block past 64 bytes up to one of four classes per power of two (up to 25% more than
/// asked, ~11% on average); glibc's chunk is the size plus 8, to 16 bytes.
#[inline]
fn libc_tighter(size: usize) -> bool {
    size <= MI_LARGE_MAX_OBJ_SIZE && libc_chunk(size) < mi_block_size(size)
}

/// A block of `size` bytes (alignment 1) for a stored byte string, from whichever
/// allocator takes less for that size ([`bytes_size`]); freed with [`free_bytes`] and the
/// same size. Values are where used_memory goes, and their sizes are whatever clients
/// send: a 30000-byte value took a 32 KiB mimalloc block, 9% of used_memory per key more
/// than valkey's (libc malloc) 30065. Only stored strings come here, not buffers: those
/// are mostly powers of two (which mimalloc fits exactly) and are taken and freed on every
/// request, where mimalloc's per-thread free lists are the faster path.
/// Returns null when out of memory.
#[inline]
pub fn alloc_bytes(size: usize) -> *mut u8 {
    // SAFETY: plain malloc calls; a zero size still gets a unique freeable block.
    let p = unsafe {
        if libc_tighter(size) {
            libc::malloc(size) as *mut u8
        } else {
            libmimalloc_sys::mi_malloc(size) as *mut u8
        }
    };
    if !p.is_null() {
        USED.fetch_add(bytes_size(size), Ordering::Relaxed);
    }
    p
}

/// Frees a block from [`alloc_bytes`].
///
/// # Safety
/// `p` came from `alloc_bytes(size)` with this `size` and is not used again.
#[inline]
pub unsafe fn free_bytes(p: *mut u8, size: usize) {
    if libc_tighter(size) {
        libc::free(p as *mut libc::c_void);
    } else {
        libmimalloc_sys::mi_free(p as *mut std::ffi::c_void);
    }
    USED.fetch_sub(bytes_size(size), Ordering::Relaxed);
}

/// What a block from [`alloc_bytes`] of `size` bytes takes (and counts in used_memory).
#[inline]
pub fn bytes_size(size: usize) -> u64 {
    if libc_tighter(size) {
        libc_chunk(size)
    } else {
        mi_block_size(size)
    }
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

/// What a block of layout `l` counts for in used_memory: what its allocator really takes.
#[inline]
pub fn counted(l: Layout) -> u64 {
    if exact(l.align(), l.size()) {
        libc_chunk(l.size())
    } else {
        mi_block_size(l.size())
    }
}

unsafe impl GlobalAlloc for CountingAlloc {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = if exact(l.align(), l.size()) {
            libc::malloc(l.size()) as *mut u8
        } else if plain(l.align(), l.size()) {
            libmimalloc_sys::mi_malloc(l.size()) as *mut u8
        } else {
            MiMalloc.alloc(l)
        };
        if !p.is_null() {
            USED.fetch_add(counted(l), Ordering::Relaxed);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = if exact(l.align(), l.size()) {
            libc::calloc(1, l.size()) as *mut u8
        } else if plain(l.align(), l.size()) {
            libmimalloc_sys::mi_zalloc(l.size()) as *mut u8
        } else {
            MiMalloc.alloc_zeroed(l)
        };
        if !p.is_null() {
            USED.fetch_add(counted(l), Ordering::Relaxed);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if exact(l.align(), l.size()) {
            libc::free(p as *mut libc::c_void);
        } else {
            MiMalloc.dealloc(p, l);
        }
        USED.fetch_sub(counted(l), Ordering::Relaxed);
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let to = Layout::from_size_align_unchecked(new, l.align());
        let (was_libc, is_libc) = (exact(l.align(), l.size()), exact(l.align(), new));
        let q = if was_libc != is_libc {
            // Between the two allocators: a new block, the bytes copied, the old one freed.
            let q = self.alloc(to);
            if !q.is_null() {
                std::ptr::copy_nonoverlapping(p, q, l.size().min(new));
                self.dealloc(p, l);
            }
            return q;
        } else if is_libc {
            libc::realloc(p as *mut libc::c_void, new) as *mut u8
        } else if plain(l.align(), new) {
            libmimalloc_sys::mi_realloc(p as *mut std::ffi::c_void, new) as *mut u8
        } else {
            MiMalloc.realloc(p, l, new)
        };
        if !q.is_null() {
            USED.fetch_add(counted(to).wrapping_sub(counted(l)), Ordering::Relaxed);
        }
        q
    }
}

/// Sets glibc's malloc up for the blocks `exact` sends it, before the server allocates
/// any: they all come from its heaps, none mapped on its own. By default glibc maps a
/// block of 128 KiB or more with its own mmap (a system call and fresh zeroed pages for
/// every such block) until a free raises that threshold; and it would then count a
/// block in whole pages. Above 512 KiB mimalloc takes the blocks anyway.
///
/// Setting the mmap threshold also freezes glibc's trim threshold at its 128 KiB default:
/// each free that left that much free at the top of a heap handed it back, and the next
/// big block faulted its pages in again (GET of 100 KB values, whose reply buffer was such
/// a block, took one page fault per request). The trim threshold is raised to 4 MiB: a
/// few big blocks' worth stays at hand, and `purge(true)` (FLUSHALL, FLUSHDB) trims all.
pub fn init() {
    // SAFETY: mallopt only sets parameters of glibc's allocator; thread-safe.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 4 << 20);
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
    if force {
        // SAFETY: malloc_trim only returns glibc's free memory to the OS (the big blocks
        // that `exact` sends there); thread-safe.
        unsafe { libc::malloc_trim(0) };
    }
}

/// Turns transparent huge pages off for this process and its save children (Redis's
/// `disable-thp yes`, its default). mimalloc asks for huge pages on its arenas, and with
/// THP each first touch of a fresh region zeroes 2 MiB, each purge of a 64 KiB page
/// splits one again: a storm of 5000 new connections took 350 ms to answer with THP
/// and 70 ms without (redis-server 70-90), at 216 MB of peak RSS against 86.
/// `false` turns them back on (`disable-thp no`).
pub fn set_thp_disabled(off: bool) -> std::io::Result<()> {
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and only sets a flag on this
    // process's memory map (kept across fork and exec).
    let r = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, libc::c_ulong::from(off), 0, 0, 0) };
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
            assert_eq!(super::mi_block_size(s), good, "size {s}");
            if !super::exact(1, s) {
                assert_eq!(real_size(s), good, "size {s}");
            }
        }
    }

    /// Blocks past 64 KiB and up to 512 KiB come from glibc, sized to the byte (a 100 KB
    /// value took a 112 KiB mimalloc block), and count as glibc's chunk; a realloc across
    /// either bound moves the bytes to the other allocator and keeps them.
    #[test]
    fn big_blocks_are_sized_to_the_byte() {
        use std::alloc::{GlobalAlloc, Layout};
        super::init();
        let a = super::CountingAlloc;
        for size in [64 * 1024 + 1, 100 * 1024 + 42, 300_000, MI_MAX] {
            let l = Layout::from_size_align(size, 8).expect("layout");
            // SAFETY: a valid non-zero layout, freed below with the same one.
            let p = unsafe { a.alloc(l) };
            assert!(!p.is_null());
            // SAFETY: p is a live block of `size` bytes from glibc's malloc.
            let usable = unsafe { libc::malloc_usable_size(p as *mut libc::c_void) };
            assert!(usable >= size && usable < size + 16, "{size}: {usable}");
            assert_eq!(real_size(size), (usable + 8) as u64, "{size}");
            // SAFETY: allocated above with `l`, freed once.
            unsafe { a.dealloc(p, l) };
        }
        assert_eq!(real_size(64 * 1024), 64 * 1024, "mimalloc's last class");
        assert_eq!(
            real_size(MI_MAX + 1),
            (MI_MAX + 4096) as u64,
            "mimalloc's pages"
        );
        let l = Layout::from_size_align(1000, 8).expect("layout");
        // SAFETY: each step reallocs the live block with its current layout; the bytes
        // written first are read back within the smallest size the block had.
        unsafe {
            let before = super::thread_allocated();
            let mut p = a.alloc(l);
            for i in 0..1000 {
                *p.add(i) = i as u8;
            }
            let mut size = 1000;
            for new in [80_000, 600_000, 200_000, 2000, 150_000, 1000] {
                p = a.realloc(p, Layout::from_size_align(size, 8).expect("layout"), new);
                assert!(!p.is_null());
                size = new;
                for i in 0..1000 {
                    assert_eq!(*p.add(i), i as u8, "byte {i} after a realloc to {new}");
                }
            }
            a.dealloc(p, l);
            assert_eq!(super::thread_allocated(), before, "counted as freed");
        }
    }

    const MI_MAX: usize = super::MI_LARGE_MAX_OBJ_SIZE;

    /// A stored string's block comes from the allocator that takes less for its size, is
    /// counted as what that allocator really takes, and counts nothing once freed.
    #[test]
    fn byte_strings_take_the_tighter_allocator() {
        super::init();
        let before = super::thread_allocated();
        for size in [
            0, 1, 23, 64, 100, 200, 1024, 1100, 4096, 5000, 30_000, 40_000, 100_000,
        ] {
            let p = super::alloc_bytes(size);
            assert!(!p.is_null(), "{size}");
            // SAFETY: p is a live block of `size` bytes.
            unsafe { std::ptr::write_bytes(p, 0xAB, size) };
            let real = super::bytes_size(size);
            assert!(real >= size as u64, "{size}: {real}");
            assert!(
                real <= super::mi_block_size(size),
                "{size}: never worse than mimalloc"
            );
            if super::libc_tighter(size) {
                // SAFETY: p is a live block from glibc's malloc.
                let usable = unsafe { libc::malloc_usable_size(p as *mut libc::c_void) };
                assert_eq!(real, (usable + 8) as u64, "{size}: glibc's chunk");
            } else {
                // SAFETY: p is a live block from mimalloc.
                let usable = unsafe { libmimalloc_sys::mi_usable_size(p as *const _) };
                assert_eq!(real, usable as u64, "{size}: mimalloc's block");
            }
            // SAFETY: from alloc_bytes(size) above, freed once.
            unsafe { super::free_bytes(p, size) };
        }
        assert_eq!(super::thread_allocated(), before, "counted as freed");
        assert!(
            super::libc_tighter(30_000),
            "a 32 KiB class for 30000 bytes"
        );
        assert!(!super::libc_tighter(1024), "1024 is a mimalloc class");
    }

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
