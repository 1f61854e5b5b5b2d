//! maxmemory: LRU/LFU access words and eviction by sampling (Redis's approximated
//! algorithms), for all eight maxmemory policies.

use std::sync::atomic::Ordering;

use rand::Rng;

use super::{now_ms, Server};
use crate::config::MaxmemoryPolicy;
use crate::db::hidden::shown;
use crate::db::STRIPES;

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
///
/// As Redis's performEvictions: the memory to free is measured once, as used memory minus
/// what eviction cannot free (replication buffers, the AOF buffer) minus maxmemory, and
/// each evicted key counts what its own removal freed. What the eviction itself then
/// allocates (invalidation messages to tracking clients, the DEL it propagates) does not
/// make it evict more: re-measuring after each key let 10 tracking clients' messages empty
/// the database.
pub fn ensure_memory(srv: &Server) -> Result<(), OutOfMemory> {
    ensure_memory_with(srv, &srv.config.read().typed)
}

/// [`ensure_memory`] under the settings snapshot the caller holds (a command's checks).
pub fn ensure_memory_with(srv: &Server, c: &crate::config::Settings) -> Result<(), OutOfMemory> {
    let (max, policy, samples, replica_ignores) = (
        c.maxmemory,
        c.maxmemory_policy,
        c.maxmemory_samples,
        c.replica_ignore_maxmemory,
    );
    if max == 0 || crate::alloc::used_memory() <= max {
        return Ok(());
    }
    // A replica is its master's copy: the master evicts and sends the DELs.
    if replica_ignores && srv.repl.is_replica() {
        return Ok(());
    }
    // During CLIENT PAUSE (or a failover's) the dataset stays still, evictions included,
    // as Redis 7.0's performEvictions: they resume when the pause ends.
    if srv.clients_paused() {
        return Ok(());
    }
    // One eviction at a time; the second caller measures again once the first is done.
    let _one = srv.ks.eviction_guard();
    let to_free = match memory_to_free(srv, max) {
        0 => return Ok(()),
        n => n,
    };
    if policy == MaxmemoryPolicy::Noeviction {
        return Err(OutOfMemory);
    }
    let mut freed = 0u64;
    let mut rounds = 0;
    while freed < to_free {
        if rounds > 100_000 {
            return Err(OutOfMemory);
        }
        match evict_one(srv, policy, samples.max(1) as usize) {
            Some(n) => freed = freed.saturating_add(n),
            None => return Err(OutOfMemory),
        }
        rounds += 1;
    }
    Ok(())
}

/// Bytes over maxmemory that eviction can free (Redis's getMaxmemoryState).
fn memory_to_free(srv: &Server, max: u64) -> u64 {
    let used = crate::alloc::used_memory();
    if used <= max {
        return 0;
    }
    used.saturating_sub(not_counted_memory(srv))
        .saturating_sub(max)
}

/// Memory eviction leaves out of its count (INFO mem_not_counted_for_evict, Redis's
/// freeMemoryGetNotCountedMemory): the replication buffer past the backlog's own share,
/// that is what slow replicas hold, or a replica falling behind would make its master
/// evict its data. The AOF buffer is written out before each reply: nothing to add. Also
/// the messages still on their way to other threads' clients (`ClientsMem::in_flight`).
pub fn not_counted_memory(srv: &Server) -> u64 {
    srv.repl
        .not_counted_memory()
        .saturating_add(srv.clients.mem.in_flight())
}

/// Evicts what the next command's own check would (Redis's processCommand) ahead of it,
/// for a connection that tracks keys: the invalidations of the evicted keys must reach it
/// before the command's reply, so its connection takes them from its queue first. True
/// when keys were evicted meanwhile.
pub fn evict_before_command(srv: &Server) -> bool {
    // A running script holds the keyspace: the command's own checks answer BUSY first.
    if srv.scripts.busy.active() {
        return false;
    }
    let before = srv.stats.evicted_keys.load(Ordering::Relaxed);
    let _ = ensure_memory(srv);
    srv.stats.evicted_keys.load(Ordering::Relaxed) != before
}

/// Evicts right after the command that lowered maxmemory (CONFIG SET), as Redis's
/// updateMaxmemory starts its eviction time event: a client waiting for the `evicted`
/// events sends no command that would evict first. Off the command's thread, so the keys
/// a transaction holds are evicted once it let them go.
pub fn evict_soon(srv: &std::sync::Arc<Server>) {
    if srv.config.read().typed.maxmemory == 0 {
        return;
    }
    let s = srv.clone();
    let run = move || {
        let _ = ensure_memory(&s);
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) => {
            h.spawn_blocking(run);
        }
        Err(_) => {
            if let Err(e) = std::thread::Builder::new().name("evict".into()).spawn(run) {
                tracing::warn!("cannot start eviction after CONFIG SET maxmemory: {e}");
            }
        }
    }
}

/// Whether small integer values are shared objects (OBJECT REFCOUNT 2147483647), as
/// Redis's tryObjectEncoding decides: not under an LRU or LFU policy with a maxmemory,
/// where each key keeps its own access time. tessera-node keeps no shared objects nor a
/// per-key mark, so this is answered from the current settings.
pub fn shares_integers(srv: &Server) -> bool {
    let c = &srv.config.read().typed;
    c.maxmemory == 0
        || !matches!(
            c.maxmemory_policy,
            MaxmemoryPolicy::AllkeysLru
                | MaxmemoryPolicy::VolatileLru
                | MaxmemoryPolicy::AllkeysLfu
                | MaxmemoryPolicy::VolatileLfu
        )
}

/// Samples keys and evicts the best candidate: the bytes its removal freed, None when
/// nothing is evictable.
fn evict_one(srv: &Server, policy: MaxmemoryPolicy, samples: usize) -> Option<u64> {
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
        let hidden = srv.ks.hidden.stripe_mask(idx);
        for db in 0..ndb {
            let Some(d) = st.db(db) else { continue };
            if volatile && d.volatile_len() == 0 || d.is_empty() {
                continue;
            }
            for (l, m) in d.maps() {
                // Slots being imported belong to their source until the hand-off.
                if m.is_empty() || (volatile && d.volatile_of(l) == 0) || !shown(hidden, l) {
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
    let (_, idx, db, key) = best?;
    let slot = crate::slot::key_hash_slot(&key);
    let mut st = srv.ks.lock_stripe(idx);
    // Measured on this thread's allocation count: the connections of tracking clients
    // allocate the invalidations of the keys evicted just before on their own threads
    // meanwhile (ten clients, ten times a key's name), and a process-wide measure
    // counted nothing freed and emptied the database.
    let before = crate::alloc::thread_allocated();
    let mut freed = 0;
    if let Some(gone) = st.remove(db, slot, &key) {
        drop(gone);
        // The stripe's last key of this db: free its slot block too (40 bytes and 24 per
        // slot used, more than a small key), or evicting sparse keys could never get
        // under the limit.
        if st.db(db).is_some_and(|d| d.is_empty()) {
            if let Some(d) = st.dbs.get_mut(db) {
                *d = None;
            }
        }
        freed = (before.wrapping_sub(crate::alloc::thread_allocated()) as i64).max(0) as u64;
        crate::propagate::deleted(srv, db, &key);
        crate::notify::evicted(srv, db, &key);
        srv.stats.evicted_keys.fetch_add(1, Ordering::Relaxed);
        drop(st);
        srv.watch.touch(db, &key);
    }
    Some(freed)
}
