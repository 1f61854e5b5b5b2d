//! The keyspace: 16 (configurable) databases × 16384 hash slots, each slot its own small
//! map, guarded by striped locks so commands on different slots run on different cores.
//!
//! Stripe `s` holds slots `s, s+1024, s+2048, ...` of every database. A command locks the
//! sorted, de-duplicated set of stripes its keys hash to (see [`Keyspace::lock`]); in cluster
//! mode all keys of a command share one slot, hence one stripe. Whole-keyspace commands
//! (KEYS, SCAN, FLUSHALL, SWAPDB) visit stripes one at a time or lock all of them in order.
//! Because the stripe depends only on the slot, the same key in two databases (MOVE, COPY
//! ... DB) is always under one lock.

pub mod slotmap;
pub mod value;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::slot::{key_hash_slot, SLOTS};
pub use value::{Entry, SBytes, Value, NO_EXPIRE};

pub const STRIPES: usize = 1024;
pub const SLOTS_PER_STRIPE: usize = SLOTS / STRIPES;

pub use slotmap::SlotMap;

/// Count of keys with a TTL in one keyspace, shared by its stripes and their databases.
/// The active expiry cycle skips its sweep when it is 0: visiting 1024 stripes × databases
/// ten times a second cost ~8% of the CPU of a pipeline-depth-1 benchmark with no TTL.
#[derive(Clone, Default)]
struct VolatileCount(Arc<AtomicUsize>);

impl VolatileCount {
    #[inline]
    fn delta(&self, added: u32, removed: u32) {
        if added > removed {
            self.0
                .fetch_add((added - removed) as usize, Ordering::Relaxed);
        } else if removed > added {
            self.0
                .fetch_sub((removed - added) as usize, Ordering::Relaxed);
        }
    }
}

/// The slots of one database that fall in one stripe.
pub struct DbSlots {
    pub maps: [SlotMap; SLOTS_PER_STRIPE],
    /// Keys with a TTL per slot map, so the active expiry cycle skips maps without any.
    pub volatile: [u32; SLOTS_PER_STRIPE],
    count: VolatileCount,
}

impl Drop for DbSlots {
    /// FLUSHDB/FLUSHALL and replica resyncs drop whole `DbSlots`: their TTL keys leave the
    /// keyspace's count with them.
    fn drop(&mut self) {
        let v: u32 = self.volatile.iter().sum();
        self.count.delta(0, v);
    }
}

impl DbSlots {
    fn new(count: VolatileCount) -> Self {
        DbSlots {
            maps: Default::default(),
            volatile: [0; SLOTS_PER_STRIPE],
            count,
        }
    }

    pub fn len(&self) -> usize {
        self.maps.iter().map(|m| m.len()).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.maps.iter().all(|m| m.is_empty())
    }
    pub fn volatile_len(&self) -> usize {
        self.volatile.iter().map(|&v| v as usize).sum()
    }
}

/// One lock's worth of the keyspace: for each database, its slots in this stripe.
pub struct Stripe {
    pub dbs: Vec<Option<Box<DbSlots>>>,
    count: VolatileCount,
}

#[inline]
pub fn stripe_of(slot: u16) -> usize {
    slot as usize & (STRIPES - 1)
}

#[inline]
fn local_of(slot: u16) -> usize {
    slot as usize >> 10
}

impl Stripe {
    fn new(ndb: usize, count: VolatileCount) -> Self {
        Stripe {
            dbs: (0..ndb).map(|_| None).collect(),
            count,
        }
    }

    #[inline]
    pub fn db(&self, db: usize) -> Option<&DbSlots> {
        self.dbs.get(db).and_then(|d| d.as_deref())
    }

    #[inline]
    pub fn db_mut(&mut self, db: usize) -> Option<&mut DbSlots> {
        self.dbs.get_mut(db).and_then(|d| d.as_deref_mut())
    }

    fn db_create(&mut self, db: usize) -> &mut DbSlots {
        let count = &self.count;
        self.dbs[db].get_or_insert_with(|| Box::new(DbSlots::new(count.clone())))
    }

    #[inline]
    pub fn map(&self, db: usize, slot: u16) -> Option<&SlotMap> {
        self.db(db).map(|d| &d.maps[local_of(slot)])
    }

    #[inline]
    pub fn get_mut(&mut self, db: usize, slot: u16, key: &[u8]) -> Option<&mut Entry> {
        self.db_mut(db)?.maps[local_of(slot)].get_mut(key)
    }

    #[inline]
    pub fn get(&self, db: usize, slot: u16, key: &[u8]) -> Option<&Entry> {
        self.db(db)?.maps[local_of(slot)].get(key)
    }

    /// Inserts or replaces; keeps the volatile counter right. Returns the old entry.
    pub fn insert(&mut self, db: usize, slot: u16, key: &[u8], e: Entry) -> Option<Entry> {
        let l = local_of(slot);
        let d = self.db_create(db);
        let newvol = (e.expire_at() != NO_EXPIRE) as u32;
        let old = match d.maps[l].get_mut(key) {
            Some(slot_e) => Some(std::mem::replace(slot_e, e)),
            None => {
                d.maps[l].insert_new(SBytes::new(key), e);
                None
            }
        };
        let oldvol = old
            .as_ref()
            .map(|o| (o.expire_at() != NO_EXPIRE) as u32)
            .unwrap_or(0);
        d.volatile[l] = d.volatile[l] + newvol - oldvol;
        d.count.delta(newvol, oldvol);
        old
    }

    pub fn remove(&mut self, db: usize, slot: u16, key: &[u8]) -> Option<Entry> {
        let l = local_of(slot);
        let d = self.db_mut(db)?;
        let old = d.maps[l].remove(key)?;
        if old.expire_at() != NO_EXPIRE {
            d.volatile[l] -= 1;
            d.count.delta(0, 1);
        }
        Some(old)
    }

    /// Sets or clears (`NO_EXPIRE`) a key's expiry. Returns false if the key is absent.
    pub fn set_expire(&mut self, db: usize, slot: u16, key: &[u8], at: u64) -> bool {
        let l = local_of(slot);
        let Some(d) = self.db_mut(db) else {
            return false;
        };
        let Some(e) = d.maps[l].get_mut(key) else {
            return false;
        };
        let was = (e.expire_at() != NO_EXPIRE) as u32;
        let now = (at != NO_EXPIRE) as u32;
        e.set_expire_at(at);
        d.volatile[l] = d.volatile[l] + now - was;
        d.count.delta(now, was);
        true
    }

    /// Removes every key of `db` whose deadline is ≤ `now`; returns how many.
    pub fn expire_sweep(&mut self, db: usize, now: u64) -> usize {
        let Some(d) = self.db_mut(db) else {
            return 0;
        };
        let mut n = 0;
        for l in 0..SLOTS_PER_STRIPE {
            if d.volatile[l] == 0 {
                continue;
            }
            let before = d.maps[l].len();
            d.maps[l].retain(|_, e| e.expire_at() == NO_EXPIRE || e.expire_at() > now);
            let removed = before - d.maps[l].len();
            d.volatile[l] -= removed as u32;
            d.count.delta(0, removed as u32);
            n += removed;
            if d.maps[l].is_empty() && d.maps[l].capacity() > 0 {
                d.maps[l] = SlotMap::default();
            }
        }
        n
    }
}

/// Cache-line padding so neighbouring stripe locks don't false-share.
#[repr(align(64))]
pub struct Padded<T>(pub T);

/// All databases of the node.
pub struct Keyspace {
    stripes: Box<[Padded<Mutex<Stripe>>]>,
    ndb: usize,
    volatile: VolatileCount,
}

/// Guards of the locked stripes; inline for the common one- or two-stripe command so
/// locking allocates nothing.
pub type Guards<'a> = smallvec::SmallVec<[(u16, MutexGuard<'a, Stripe>); 2]>;

/// Locks held by one command: sorted by stripe index.
pub struct LockSet<'a> {
    pub guards: Guards<'a>,
    pub all: bool,
}

impl<'a> LockSet<'a> {
    pub fn empty() -> Self {
        LockSet {
            guards: Guards::new(),
            all: false,
        }
    }

    /// The locked stripe, if this set holds it.
    #[inline]
    pub fn stripe(&mut self, idx: usize) -> Option<&mut Stripe> {
        if self.all {
            return self.guards.get_mut(idx).map(|(_, g)| &mut **g);
        }
        if self.guards.len() == 1 {
            let (i, g) = &mut self.guards[0];
            return if *i as usize == idx {
                Some(&mut **g)
            } else {
                None
            };
        }
        let pos = self
            .guards
            .binary_search_by_key(&(idx as u16), |(i, _)| *i)
            .ok()?;
        Some(&mut *self.guards[pos].1)
    }

    pub fn holds(&self, idx: usize) -> bool {
        self.all || self.guards.iter().any(|(i, _)| *i as usize == idx)
    }
}

impl Keyspace {
    pub fn new(ndb: usize) -> Self {
        let volatile = VolatileCount::default();
        let stripes = (0..STRIPES)
            .map(|_| Padded(Mutex::new(Stripe::new(ndb, volatile.clone()))))
            .collect::<Vec<_>>()
            .into_boxed_slice();
        Keyspace {
            stripes,
            ndb,
            volatile,
        }
    }

    /// Keys with a TTL in all databases (exact; 0 means there is nothing to expire).
    pub fn volatile_keys(&self) -> usize {
        self.volatile.0.load(Ordering::Relaxed)
    }

    pub fn databases(&self) -> usize {
        self.ndb
    }

    /// Locks the stripes of `slots` in ascending order (deadlock-free).
    pub fn lock(&self, slots: &mut Vec<u16>) -> LockSet<'_> {
        for s in slots.iter_mut() {
            *s = stripe_of(*s) as u16;
        }
        slots.sort_unstable();
        slots.dedup();
        let guards = slots
            .iter()
            .map(|&i| (i, self.stripes[i as usize].0.lock()))
            .collect();
        LockSet { guards, all: false }
    }

    /// Locks the stripe of one key.
    #[inline]
    pub fn lock_key(&self, key: &[u8]) -> LockSet<'_> {
        self.lock_slot(key_hash_slot(key))
    }

    /// Locks the stripe of one slot.
    #[inline]
    pub fn lock_slot(&self, slot: u16) -> LockSet<'_> {
        let i = stripe_of(slot);
        let mut guards = Guards::new();
        guards.push((i as u16, self.stripes[i].0.lock()));
        LockSet { guards, all: false }
    }

    /// Locks every stripe, in order.
    pub fn lock_all(&self) -> LockSet<'_> {
        let guards = (0..STRIPES)
            .map(|i| (i as u16, self.stripes[i].0.lock()))
            .collect();
        LockSet { guards, all: true }
    }

    /// Brings what looking up `keys` (slot, key) of `db` will read into the cache, for a
    /// batch of pipelined requests about to run (as Valkey 8.1 does for its command
    /// queue). A lookup is a chain of dependent misses (slot map header, control bytes and
    /// bucket, node); done key after key, the misses of one key wait for each other and the
    /// next key's wait for those. Here each pass issues one level for the whole batch, so
    /// the misses of different keys overlap: headers first, then one probe per key that
    /// only prefetches the node. Holds the stripes' locks (in order, like a multi-key
    /// command) only for the two passes; the commands lock again when they run.
    pub fn prefetch(&self, db: usize, keys: &[(u16, &[u8])], scratch: &mut Vec<u16>) {
        scratch.clear();
        scratch.extend(keys.iter().map(|&(slot, _)| slot));
        let mut ls = self.lock(scratch);
        for &(slot, _) in keys {
            if let Some(d) = ls.stripe(stripe_of(slot)).and_then(|st| st.db(db)) {
                slotmap::prefetch_line(&d.maps[local_of(slot)] as *const SlotMap as *const u8);
            }
        }
        for &(slot, key) in keys {
            if let Some(d) = ls.stripe(stripe_of(slot)).and_then(|st| st.db(db)) {
                d.maps[local_of(slot)].prefetch(key);
            }
        }
    }

    /// Locks one stripe by index.
    pub fn lock_stripe(&self, idx: usize) -> MutexGuard<'_, Stripe> {
        self.stripes[idx].0.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_volatile() {
        let ks = Keyspace::new(16);
        let key = b"foo";
        let slot = key_hash_slot(key);
        let mut ls = ks.lock_key(key);
        let st = ls.stripe(stripe_of(slot)).unwrap();
        let mut e = Entry::new(Value::string(b"bar"));
        e.set_expire_at(1_800_000_000_000);
        assert!(st.insert(0, slot, key, e).is_none());
        assert_eq!(st.db(0).unwrap().volatile_len(), 1);
        assert_eq!(st.expire_sweep(0, 1_799_999_999_999), 0);
        assert_eq!(st.expire_sweep(0, 1_800_000_000_000), 1);
        assert_eq!(st.db(0).unwrap().volatile_len(), 0);
        assert!(st.get(0, slot, key).is_none());
    }

    /// The keyspace-wide TTL count follows inserts, overwrites, PERSIST-like clears,
    /// removals, sweeps and whole-database drops (FLUSHDB).
    #[test]
    fn volatile_count_tracks_every_path() {
        let ks = Keyspace::new(16);
        let ttl = |v: &[u8]| {
            let mut e = Entry::new(Value::string(v));
            e.set_expire_at(1_800_000_000_000);
            e
        };
        let keys: Vec<Vec<u8>> = (0..50).map(|i| format!("k{i}").into_bytes()).collect();
        for (i, k) in keys.iter().enumerate() {
            let slot = key_hash_slot(k);
            let mut g = ks.lock_stripe(stripe_of(slot));
            let e = if i % 2 == 0 {
                ttl(b"v")
            } else {
                Entry::new(Value::string(b"v"))
            };
            g.insert(i % 3, slot, k, e);
        }
        assert_eq!(ks.volatile_keys(), 25);
        // Overwrite a TTL key with a plain one and a plain one with a TTL key: unchanged.
        for (db, k, e) in [
            (0, &keys[0], Entry::new(Value::Int(1))),
            (1, &keys[1], ttl(b"x")),
        ] {
            let slot = key_hash_slot(k);
            ks.lock_stripe(stripe_of(slot)).insert(db, slot, k, e);
        }
        assert_eq!(ks.volatile_keys(), 25);
        // Clear one TTL, remove another TTL key.
        let (k2, k4) = (&keys[2], &keys[4]);
        let s2 = key_hash_slot(k2);
        assert!(ks
            .lock_stripe(stripe_of(s2))
            .set_expire(2, s2, k2, NO_EXPIRE));
        let s4 = key_hash_slot(k4);
        assert!(ks.lock_stripe(stripe_of(s4)).remove(1, s4, k4).is_some());
        assert_eq!(ks.volatile_keys(), 23);
        // Sweep db 0 past the deadline, then drop every remaining database.
        let mut swept = 0;
        for i in 0..STRIPES {
            swept += ks.lock_stripe(i).expire_sweep(0, 1_800_000_000_000);
        }
        assert!(swept > 0);
        assert_eq!(ks.volatile_keys(), 23 - swept);
        for i in 0..STRIPES {
            for d in ks.lock_stripe(i).dbs.iter_mut() {
                *d = None;
            }
        }
        assert_eq!(ks.volatile_keys(), 0);
    }
}
