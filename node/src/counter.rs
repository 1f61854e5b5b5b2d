//! A counter sharded per thread, for statistics bumped on every command and for the
//! allocator's live-byte count.
//!
//! A locked read-modify-write costs ~20 cycles even uncontended, and a pipelined SET did
//! several per request. So the first seven threads that count (the worker threads, in
//! practice) each own a shard and bump it with a plain load and store; only later threads
//! share the last shard with `fetch_add`. Reads sum the shards; a reset moves a base instead
//! of writing the shards, so it never races an owner's store. Values wrap, so a shard may go
//! "negative" (bytes allocated on one thread and freed on another) and still sum correctly.
//! Hand-rolled: crates like `thread_local` allocate per thread, which the allocator can't.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

pub(crate) const SHARDS: usize = 8;
/// Shards `0..OWNED` each belong to one thread; later threads share the last one.
pub(crate) const OWNED: usize = SHARDS - 1;
const UNASSIGNED: usize = usize::MAX;

#[repr(align(64))]
struct Shard(AtomicU64);

/// The method names mirror `AtomicU64` (the ordering argument is accepted and ignored:
/// counters are always Relaxed).
pub struct Counter {
    shards: [Shard; SHARDS],
    base: AtomicU64,
}

impl Default for Counter {
    fn default() -> Self {
        Self::new()
    }
}

/// Deals shards to threads. Process-wide by nature, not server state: threads are the
/// process's, and the global allocator counts through these shards before any server exists.
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    // This thread's shard: a cache of the choice (any shard sums correctly), not a
    // contract. `const` and without a destructor: safe to touch from inside the global
    // allocator.
    static MY_SHARD: Cell<usize> = const { Cell::new(UNASSIGNED) };
}

/// This thread's shard index (owned below [`OWNED`], shared at it).
#[inline]
pub(crate) fn my_shard() -> usize {
    MY_SHARD
        .try_with(|c| {
            let v = c.get();
            if v != UNASSIGNED {
                return v;
            }
            let v = NEXT_SHARD.fetch_add(1, Ordering::Relaxed).min(OWNED);
            c.set(v);
            v
        })
        .unwrap_or(OWNED)
}

impl Counter {
    pub const fn new() -> Self {
        Counter {
            shards: [const { Shard(AtomicU64::new(0)) }; SHARDS],
            base: AtomicU64::new(0),
        }
    }

    #[inline]
    pub fn fetch_add(&self, n: u64, _: Ordering) {
        let i = my_shard();
        let s = &self.shards[i].0;
        if i < OWNED {
            // Only this thread writes shard `i`: no lock prefix needed.
            s.store(s.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        } else {
            s.fetch_add(n, Ordering::Relaxed);
        }
    }

    #[inline]
    pub fn fetch_sub(&self, n: u64, o: Ordering) {
        self.fetch_add(n.wrapping_neg(), o)
    }

    fn sum(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .fold(0u64, |a, b| a.wrapping_add(b))
    }

    /// The raw value of the calling thread's shard: what this thread added minus what it
    /// took (wrapping), plus, on the shared shard, what the few other sharing threads did.
    /// A difference of two reads measures this thread's own work, not the other threads'.
    pub fn mine(&self) -> u64 {
        self.shards[my_shard()].0.load(Ordering::Relaxed)
    }

    pub fn load(&self, _: Ordering) -> u64 {
        self.sum().wrapping_sub(self.base.load(Ordering::Relaxed))
    }

    /// Makes the counter read `v` from now on.
    pub fn store(&self, v: u64, _: Ordering) {
        self.base
            .store(self.sum().wrapping_sub(v), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// More threads than owned shards: owners and sharers together lose no count, and a
    /// reset (store) holds while later adds keep counting.
    #[test]
    fn counter_sums_every_thread() {
        let c = Arc::new(Counter::default());
        let threads: Vec<_> = (0..12)
            .map(|i| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        c.fetch_add(3, Ordering::Relaxed);
                        // Frees on another thread than the allocation: shards go negative.
                        if i % 2 == 0 {
                            c.fetch_sub(2, Ordering::Relaxed);
                        } else {
                            c.fetch_sub(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("counting thread");
        }
        assert_eq!(c.load(Ordering::Relaxed), 6 * 10_000 + 6 * 20_000);
        c.store(0, Ordering::Relaxed);
        assert_eq!(c.load(Ordering::Relaxed), 0);
        c.fetch_add(5, Ordering::Relaxed);
        assert_eq!(c.load(Ordering::Relaxed), 5);
        c.store(42, Ordering::Relaxed);
        assert_eq!(c.load(Ordering::Relaxed), 42);
    }
}
