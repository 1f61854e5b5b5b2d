//! maxmemory: LRU/LFU access words and eviction by sampling (Redis's approximated
//! algorithms), for all eight maxmemory policies.

use std::sync::atomic::Ordering;

use rand::Rng;

use super::{now_ms, Server};
use crate::config::MaxmemoryPolicy;
use crate::db::{SLOTS_PER_STRIPE, STRIPES};

const LFU_INIT: u32 = 5;
/// LFU decay clock: the access word holds minutes above the 8-bit counter.
const MINUTES_MASK: u64 = (crate::db::value::ACCESS_MASK >> 8) as u64;

#[inline]
fn minutes(now_ms: u64) -> u32 {
    ((now_ms / 60_000) & MINUTES_MASK) as u32
}

/// Access word of a new key under LFU.
pub fn lfu_new(now_ms: u64) -> u32 {
    (minutes(now_ms) << 8) | LFU_INIT
}

/// LFU counter after decay (lfu-decay-time 1: one step per idle minute).
pub fn lfu_counter(word: u32, now_ms: u64) -> u32 {
    let last = word >> 8;
    let now = minutes(now_ms);
    let elapsed = if now >= last {
        now - last
    } else {
        MINUTES_MASK as u32 - last + now
    };
    (word & 0xff).saturating_sub(elapsed)
}

/// Refreshes a key's access word on a read/write.
#[inline]
pub fn touch(e: &mut crate::db::Entry, clock: u32, lfu: bool) {
    if lfu {
        let now = now_ms();
        let mut c = lfu_counter(e.access(), now);
        if c < 255 {
            let base = c.saturating_sub(LFU_INIT) as f64;
            let p = 1.0 / (base * 10.0 + 1.0);
            if rand::rng().random::<f64>() < p {
                c += 1;
            }
        }
        e.set_access((minutes(now) << 8) | c);
    } else {
        e.set_access(clock);
    }
}

/// Used memory stays above maxmemory after eviction did what it could. Its text is the OOM
/// reply the dispatcher sends (eviction sits below `cmd`, so it has its own error type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("OOM command not allowed when used memory > 'maxmemory'.")]
pub struct OutOfMemory;

/// Over maxmemory? Evicts per policy; [`OutOfMemory`] if that isn't enough.
pub fn ensure_memory(srv: &Server) -> Result<(), OutOfMemory> {
    let (max, policy, samples) = {
        let c = &srv.config.read().typed;
        (c.maxmemory, c.maxmemory_policy, c.maxmemory_samples)
    };
    if max == 0 {
        return Ok(());
    }
    let mut rounds = 0;
    while crate::alloc::used_memory() > max {
        if policy == MaxmemoryPolicy::Noeviction
            || rounds > 100_000
            || !evict_one(srv, policy, samples.max(1) as usize)
        {
            return Err(OutOfMemory);
        }
        rounds += 1;
    }
    Ok(())
}

/// Samples keys and evicts the best candidate. False when nothing is evictable.
fn evict_one(srv: &Server, policy: MaxmemoryPolicy, samples: usize) -> bool {
    let volatile = policy.is_volatile();
    let now = now_ms();
    let clock = srv.access_clock(now);
    let ndb = srv.ks.databases();
    let mut rng = rand::rng();
    let mut best: Option<(u64, usize, usize, Vec<u8>)> = None;
    let mut found = 0;
    let start = rng.random_range(0..STRIPES);
    for step in 0..STRIPES {
        if found >= samples {
            break;
        }
        let idx = (start + step * 7919) % STRIPES;
        let st = srv.ks.lock_stripe(idx);
        for db in 0..ndb {
            let Some(d) = st.db(db) else { continue };
            if volatile && d.volatile_len() == 0 || d.is_empty() {
                continue;
            }
            for l in 0..SLOTS_PER_STRIPE {
                let m = &d.maps[l];
                if m.is_empty() || (volatile && d.volatile[l] == 0) {
                    continue;
                }
                let skip = rng.random_range(0..m.len());
                for (k, e) in m.iter().skip(skip).chain(m.iter().take(skip)) {
                    if volatile && e.expire_at() == 0 {
                        continue;
                    }
                    let score = match policy {
                        MaxmemoryPolicy::VolatileLru | MaxmemoryPolicy::AllkeysLru => {
                            (clock.wrapping_sub(e.access()) & crate::db::value::ACCESS_MASK) as u64
                        }
                        MaxmemoryPolicy::VolatileLfu | MaxmemoryPolicy::AllkeysLfu => {
                            255 - lfu_counter(e.access(), now) as u64
                        }
                        MaxmemoryPolicy::VolatileTtl => u64::MAX - e.expire_at(),
                        MaxmemoryPolicy::VolatileRandom
                        | MaxmemoryPolicy::AllkeysRandom
                        | MaxmemoryPolicy::Noeviction => rng.random::<u32>() as u64,
                    };
                    if best.as_ref().is_none_or(|b| score > b.0) {
                        best = Some((score, idx, db, k.to_vec()));
                    }
                    found += 1;
                    break;
                }
                if found >= samples {
                    break;
                }
            }
        }
    }
    let Some((_, idx, db, key)) = best else {
        return false;
    };
    let slot = crate::slot::key_hash_slot(&key);
    let mut st = srv.ks.lock_stripe(idx);
    if st.remove(db, slot, &key).is_some() {
        // The stripe's last key of this db: free its slot table too (about half a KB, more
        // than a small key), or evicting sparse keys could never get under the limit.
        if st.db(db).is_some_and(|d| d.is_empty()) {
            if let Some(d) = st.dbs.get_mut(db) {
                *d = None;
            }
        }
        crate::propagate::deleted(srv, db, &key);
        crate::notify::evicted(srv, db, &key);
        srv.stats.evicted_keys.fetch_add(1, Ordering::Relaxed);
        drop(st);
        srv.watch.touch(db, &key);
    }
    true
}
