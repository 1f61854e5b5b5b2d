//! The keyspace: 16 (configurable) databases × 16384 hash slots, each slot its own small
//! map, guarded by striped locks so commands on different slots run on different cores.
//!
//! Stripe `s` holds slots `s, s+1024, s+2048, ...` of every database. A command locks the
//! sorted, de-duplicated set of stripes its keys hash to (see [`Keyspace::lock`]); in cluster
//! mode all keys of a command share one slot, hence one stripe. Whole-keyspace commands
//! (KEYS, SCAN, FLUSHALL, SWAPDB) visit stripes one at a time or lock all of them in order.
//! Because the stripe depends only on the slot, the same key in two databases (MOVE, COPY
//! ... DB) is always under one lock.

pub mod hidden;
pub mod rdb;
pub mod slotmap;
pub mod value;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::slot::{key_hash_slot, SLOTS};
pub use value::{Entry, SBytes, Value, NO_EXPIRE, SHARED_MIN};

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

/// Told when a stream value leaves a key (deleted, expired, overwritten, flushed), so
/// clients blocked in XREADGROUP on it get Redis 7.0's error (its
/// `signalDeletedKeyAsReady` / `scanDatabaseForDeletedStreams`) instead of waiting for
/// their timeout. Implemented by `crate::blocking`; the keyspace can't reach the server.
pub trait StreamGone: Send + Sync {
    /// Lock-free: whether any client waits in XREADGROUP at all (the hot-path check).
    fn active(&self) -> bool;
    /// `db` is None for a dropped database (FLUSHDB/FLUSHALL, resync), whose index a
    /// `DbSlots` doesn't know (SWAPDB moves them): the waiters then look for themselves.
    fn gone(&self, db: Option<usize>, key: &[u8]);
}

/// The keyspace's [`StreamGone`] hook, shared by its stripes; set once, by the first
/// XREADGROUP that blocks.
#[derive(Clone, Default)]
struct GoneHook(Arc<OnceLock<Arc<dyn StreamGone>>>);

impl GoneHook {
    /// The hook when someone waits (a stream leaving a key costs one branch otherwise).
    #[inline]
    fn armed(&self) -> Option<&dyn StreamGone> {
        self.0.get().map(|h| &**h).filter(|h| h.active())
    }

    #[inline]
    fn left(&self, db: Option<usize>, key: &[u8], old: &Value) {
        if matches!(old, Value::Stream(_)) {
            if let Some(h) = self.armed() {
                h.gone(db, key);
            }
        }
    }
}

/// One slot's map in a [`DbSlots`], with its count of keys that have a TTL (so the active
/// expiry cycle skips maps without any).
#[derive(Default)]
struct SlotEntry {
    map: SlotMap,
    volatile: u32,
}

/// The local slots whose bits are set in `mask`, lowest first: with a [`DbSlots`]'s mask,
/// the local slot of each of its entries, in order.
fn locals(mut mask: u16) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let l = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            l
        })
    })
}

/// The slots of one database that fall in one stripe: only those that ever held a key of
/// the database have a map, found through a bitmap of the stripe's 16 local slots (the
/// map of local slot `l` is entry number popcount(mask below `l`)).
///
/// Why not a map for each of the 16 slots: this block is a fixed cost of every stripe
/// holding a key of the database. With 16 inline maps it was 384 bytes, so 1,000 keys
/// (which touch ~640 of the 1024 stripes) paid ~250 bytes each for it, more than their
/// nodes and tables; now such a stripe pays 40 bytes plus 24 per slot in use. A stripe
/// with all 16 slots in use pays 424 instead of 384, nothing against its keys.
pub struct DbSlots {
    /// Bit `l`: local slot `l` has an entry.
    mask: u16,
    /// The entries, in local-slot order; sized exactly (a slot's first key adds one).
    entries: Box<[SlotEntry]>,
    count: VolatileCount,
    gone: GoneHook,
}

impl Drop for DbSlots {
    /// FLUSHDB/FLUSHALL and replica resyncs drop whole `DbSlots`: their TTL keys leave the
    /// keyspace's count with them, their streams wake their XREADGROUP readers.
    fn drop(&mut self) {
        self.count.delta(0, self.volatile_len() as u32);
        if self.gone.armed().is_some() {
            for e in self.entries.iter() {
                for (k, v) in e.map.iter() {
                    self.gone.left(None, k, &v.value);
                }
            }
        }
    }
}

impl DbSlots {
    fn new(count: VolatileCount, gone: GoneHook) -> Self {
        DbSlots {
            mask: 0,
            entries: Box::default(),
            count,
            gone,
        }
    }

    /// Where local slot `l`'s entry is (or would be inserted), and whether it is there.
    #[inline(always)]
    fn index(&self, l: usize) -> (usize, bool) {
        let bit = 1u16 << l;
        (
            (self.mask & (bit - 1)).count_ones() as usize,
            self.mask & bit != 0,
        )
    }

    #[inline(always)]
    fn entry(&self, l: usize) -> Option<&SlotEntry> {
        match self.index(l) {
            (i, true) => self.entries.get(i),
            _ => None,
        }
    }

    #[inline(always)]
    fn entry_mut(&mut self, l: usize) -> Option<&mut SlotEntry> {
        match self.index(l) {
            (i, true) => self.entries.get_mut(i),
            _ => None,
        }
    }

    /// Local slot `l`'s entry, made when the slot gets its first key.
    fn entry_or_insert(&mut self, l: usize) -> &mut SlotEntry {
        let (i, present) = self.index(l);
        if !present {
            let old = std::mem::take(&mut self.entries).into_vec();
            let mut v = Vec::with_capacity(old.len() + 1);
            let mut rest = old.into_iter();
            v.extend(rest.by_ref().take(i));
            v.push(SlotEntry::default());
            v.extend(rest);
            self.entries = v.into_boxed_slice();
            self.mask |= 1 << l;
        }
        &mut self.entries[i]
    }

    /// The map of local slot `l`, if that slot ever held a key here.
    #[inline]
    pub fn map(&self, l: usize) -> Option<&SlotMap> {
        self.entry(l).map(|e| &e.map)
    }

    /// The maps there are, with their local slot, in slot order.
    pub fn maps(&self) -> impl Iterator<Item = (usize, &SlotMap)> + '_ {
        locals(self.mask)
            .zip(self.entries.iter())
            .map(|(l, e)| (l, &e.map))
    }

    /// Keys with a TTL in local slot `l`.
    pub fn volatile_of(&self, l: usize) -> u32 {
        self.entry(l).map_or(0, |e| e.volatile)
    }

    pub fn len(&self) -> usize {
        self.entries.iter().map(|e| e.map.len()).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.iter().all(|e| e.map.is_empty())
    }
    pub fn volatile_len(&self) -> usize {
        self.entries.iter().map(|e| e.volatile as usize).sum()
    }
    /// Keys and keys with a TTL in the slots `mask` shows ([`hidden::HiddenSlots::stripe_mask`]).
    pub fn shown_lens(&self, mask: u16) -> (usize, usize) {
        if mask == 0 {
            return (self.len(), self.volatile_len());
        }
        locals(self.mask)
            .zip(self.entries.iter())
            .filter(|(l, _)| hidden::shown(mask, *l))
            .fold((0, 0), |(n, v), (_, e)| {
                (n + e.map.len(), v + e.volatile as usize)
            })
    }
}

/// One lock's worth of the keyspace: for each database, its slots in this stripe.
pub struct Stripe {
    pub dbs: Vec<Option<Box<DbSlots>>>,
    count: VolatileCount,
    gone: GoneHook,
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
    fn new(ndb: usize, count: VolatileCount, gone: GoneHook) -> Self {
        Stripe {
            dbs: (0..ndb).map(|_| None).collect(),
            count,
            gone,
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
        let (count, gone) = (&self.count, &self.gone);
        self.dbs[db].get_or_insert_with(|| Box::new(DbSlots::new(count.clone(), gone.clone())))
    }

    #[inline]
    pub fn map(&self, db: usize, slot: u16) -> Option<&SlotMap> {
        self.db(db)?.map(local_of(slot))
    }

    #[inline]
    pub fn get_mut(&mut self, db: usize, slot: u16, key: &[u8]) -> Option<&mut Entry> {
        self.db_mut(db)?.entry_mut(local_of(slot))?.map.get_mut(key)
    }

    #[inline]
    pub fn get(&self, db: usize, slot: u16, key: &[u8]) -> Option<&Entry> {
        self.map(db, slot)?.get(key)
    }

    /// Inserts or replaces; keeps the volatile counter right. Returns the old entry.
    pub fn insert(&mut self, db: usize, slot: u16, key: &[u8], e: Entry) -> Option<Entry> {
        let d = self.db_create(db);
        let newvol = (e.expire_at() != NO_EXPIRE) as u32;
        let se = d.entry_or_insert(local_of(slot));
        let old = se.map.insert(key, e);
        let oldvol = old
            .as_ref()
            .map(|o| (o.expire_at() != NO_EXPIRE) as u32)
            .unwrap_or(0);
        se.volatile = se.volatile + newvol - oldvol;
        d.count.delta(newvol, oldvol);
        if let Some(o) = &old {
            d.gone.left(Some(db), key, &o.value);
        }
        old
    }

    pub fn remove(&mut self, db: usize, slot: u16, key: &[u8]) -> Option<Entry> {
        let d = self.db_mut(db)?;
        let se = d.entry_mut(local_of(slot))?;
        let old = se.map.remove(key)?;
        if old.expire_at() != NO_EXPIRE {
            se.volatile -= 1;
            d.count.delta(0, 1);
        }
        d.gone.left(Some(db), key, &old.value);
        Some(old)
    }

    /// Sets or clears (`NO_EXPIRE`) a key's expiry. Returns false if the key is absent.
    pub fn set_expire(&mut self, db: usize, slot: u16, key: &[u8], at: u64) -> bool {
        let Some(d) = self.db_mut(db) else {
            return false;
        };
        let Some(se) = d.entry_mut(local_of(slot)) else {
            return false;
        };
        let Some(e) = se.map.get_mut(key) else {
            return false;
        };
        let was = (e.expire_at() != NO_EXPIRE) as u32;
        let now = (at != NO_EXPIRE) as u32;
        e.set_expire_at(at);
        se.volatile = se.volatile + now - was;
        d.count.delta(now, was);
        true
    }

    /// Removes every key of `db` whose deadline is ≤ `now`, in the slots `hidden` (a
    /// [`hidden::HiddenSlots::stripe_mask`]) does not hide; returns how many.
    pub fn expire_sweep(&mut self, db: usize, now: u64, hidden: u16) -> usize {
        let Some(d) = self.db_mut(db) else {
            return 0;
        };
        let mut n = 0;
        let (gone, count) = (&d.gone, &d.count);
        for (l, se) in locals(d.mask).zip(d.entries.iter_mut()) {
            if se.volatile == 0 || !hidden::shown(hidden, l) {
                continue;
            }
            let before = se.map.len();
            se.map.retain(|k, e| {
                let keep = e.expire_at() == NO_EXPIRE || e.expire_at() > now;
                if !keep {
                    gone.left(Some(db), k, &e.value);
                }
                keep
            });
            let removed = before - se.map.len();
            se.volatile -= removed as u32;
            count.delta(0, removed as u32);
            n += removed;
            if se.map.is_empty() && se.map.capacity() > 0 {
                se.map = SlotMap::default();
            }
        }
        n
    }
}

/// Cache-line padding so neighbouring stripe locks don't false-share.
#[repr(align(64))]
pub struct Padded<T>(pub T);

/// Most shards of the world lock (see [`Keyspace`]).
const WORLD_SHARDS: usize = 32;

/// Shards of the world lock: one per core (at least 4, for the threads beside the I/O
/// ones), so I/O threads rarely share one, and stopping the world takes few.
fn world_shards() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(4, |n| n.get())
            .clamp(4, WORLD_SHARDS)
    })
}

/// This thread's world-lock shard, dealt round-robin on first use.
fn world_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        /// A cache of this thread's shard choice (any shard is correct; a stable one
        /// keeps threads apart), not a contract.
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % world_shards();
    }
    SHARD.with(|s| *s)
}

/// All databases of the node.
///
/// Commands lock the stripes of their keys. A command that needs everything (EVAL, EXEC
/// of a global command, FLUSHALL, SWAPDB...) used to lock all 1024 stripes, which cost
/// ~14 us, 90% of an EVALSHA. Instead every stripe lock is taken under a shared "world"
/// lock, and stopping the world takes that exclusively (a write lock per shard), then every
/// stripe is ours without touching its mutex. The world lock is sharded by thread so the
/// shared side is an uncontended atomic on a cache line of the thread's own.
pub struct Keyspace {
    stripes: Box<[Padded<Mutex<Stripe>>]>,
    world: Box<[Padded<RwLock<()>>]>,
    ndb: usize,
    volatile: VolatileCount,
    gone: GoneHook,
    /// Held by whoever is evicting (`server::evict`): one eviction at a time measures and
    /// frees memory, as Redis's single thread does; a second would free it again.
    evicting: Mutex<()>,
    /// Slots being imported by an atomic slot migration: held, not shown (see [`hidden`]).
    pub hidden: hidden::HiddenSlots,
    /// Bumped by every FLUSHDB/FLUSHALL, so work that holds data across commands (a slot
    /// import) can tell its data went.
    pub flushes: AtomicU64,
}

/// Guards of the locked stripes; inline for the common one- or two-stripe command so
/// locking allocates nothing.
pub type Guards<'a> = smallvec::SmallVec<[(u16, MutexGuard<'a, Stripe>); 2]>;

/// How a [`LockSet`] holds the world lock.
enum World<'a> {
    None,
    /// The shared side, under which its stripe guards were taken (held for its Drop).
    Shared(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    /// Every shard exclusively (held for their Drop): every stripe belongs to this set.
    All(
        &'a Keyspace,
        #[allow(dead_code)] smallvec::SmallVec<[RwLockWriteGuard<'a, ()>; 8]>,
    ),
}

/// Locks held by one command: sorted by stripe index.
pub struct LockSet<'a> {
    /// Dropped before `world` (fields drop in order): stripes are released under it.
    pub guards: Guards<'a>,
    pub all: bool,
    world: World<'a>,
}

impl<'a> LockSet<'a> {
    pub fn empty() -> Self {
        LockSet {
            guards: Guards::new(),
            all: false,
            world: World::None,
        }
    }

    /// The locked stripe, if this set holds it.
    #[inline]
    pub fn stripe(&mut self, idx: usize) -> Option<&mut Stripe> {
        if self.all {
            let World::All(ks, _) = &self.world else {
                return None;
            };
            let m = &ks.stripes.get(idx)?.0;
            // SAFETY: this set holds every world shard exclusively, and stripe mutexes are
            // only ever locked under a shared world shard (the only ways to lock one are
            // Keyspace's methods), so no other thread can hold or take this stripe; the
            // &mut borrow of self keeps this set from handing it out twice.
            return Some(unsafe { &mut *m.data_ptr() });
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

    /// Runs `f` on every held stripe, in index order.
    pub fn for_each(&mut self, mut f: impl FnMut(usize, &mut Stripe)) {
        if self.all {
            for i in 0..STRIPES {
                if let Some(s) = self.stripe(i) {
                    f(i, s);
                }
            }
        } else {
            for (i, g) in self.guards.iter_mut() {
                f(*i as usize, g);
            }
        }
    }

    /// Adds stripe `idx` (a key outside the declared ones), keeping `guards` sorted. Out of
    /// order, so only for what a key spec missed.
    pub fn add(&mut self, ks: &'a Keyspace, idx: usize) {
        if self.holds(idx) {
            return;
        }
        if matches!(self.world, World::None) {
            self.world = World::Shared(ks.world_read());
        }
        let g = ks.stripes[idx].0.lock();
        let pos = self
            .guards
            .binary_search_by_key(&(idx as u16), |(i, _)| *i)
            .unwrap_or_else(|p| p);
        self.guards.insert(pos, (idx as u16, g));
    }
}

/// One stripe locked on its own (with the shared world lock it was taken under).
pub struct StripeGuard<'a> {
    /// Dropped before `_world`.
    g: MutexGuard<'a, Stripe>,
    _world: RwLockReadGuard<'a, ()>,
}

impl std::ops::Deref for StripeGuard<'_> {
    type Target = Stripe;
    fn deref(&self) -> &Stripe {
        &self.g
    }
}

impl std::ops::DerefMut for StripeGuard<'_> {
    fn deref_mut(&mut self) -> &mut Stripe {
        &mut self.g
    }
}

impl Keyspace {
    pub fn new(ndb: usize) -> Self {
        let volatile = VolatileCount::default();
        let gone = GoneHook::default();
        let stripes = (0..STRIPES)
            .map(|_| Padded(Mutex::new(Stripe::new(ndb, volatile.clone(), gone.clone()))))
            .collect::<Vec<_>>()
            .into_boxed_slice();
        Keyspace {
            stripes,
            world: (0..world_shards())
                .map(|_| Padded(RwLock::new(())))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            ndb,
            volatile,
            gone,
            evicting: Mutex::new(()),
            hidden: hidden::HiddenSlots::default(),
            flushes: AtomicU64::new(0),
        }
    }

    /// Serialises eviction (see the field): held while one caller evicts.
    pub fn eviction_guard(&self) -> MutexGuard<'_, ()> {
        self.evicting.lock()
    }

    /// Installs the [`StreamGone`] hook (the first call wins; later ones are no-ops).
    pub fn set_stream_gone(&self, hook: impl FnOnce() -> Arc<dyn StreamGone>) {
        self.gone.0.get_or_init(hook);
    }

    /// Keys in all databases, estimated from one stripe in 16 (keys spread evenly over
    /// slots by their hash), so a periodic tick can afford it. Never waits: stripes in
    /// use are skipped, and while the world is stopped (a script) there is no estimate.
    pub fn estimated_keys(&self) -> Option<usize> {
        const STEP: usize = 16;
        let _world = self.world[world_shard()].0.try_read_recursive()?;
        let (mut keys, mut seen) = (0usize, 0usize);
        for i in (0..STRIPES).step_by(STEP) {
            if let Some(st) = self.stripes[i].0.try_lock() {
                keys += (0..self.ndb)
                    .filter_map(|db| st.db(db))
                    .map(|d| d.len())
                    .sum::<usize>();
                seen += 1;
            }
        }
        (seen > 0).then(|| keys * STRIPES / seen)
    }

    /// Keys with a TTL in all databases (exact; 0 means there is nothing to expire).
    pub fn volatile_keys(&self) -> usize {
        self.volatile.0.load(Ordering::Relaxed)
    }

    pub fn databases(&self) -> usize {
        self.ndb
    }

    /// The shared side of this thread's world shard. Recursive: a command holding stripes
    /// may lock one more (SCAN, KEYS), and must not wait behind a queued exclusive locker.
    #[inline]
    fn world_read(&self) -> RwLockReadGuard<'_, ()> {
        self.world[world_shard()].0.read_recursive()
    }

    /// Locks the stripes of `slots` in ascending order (deadlock-free).
    pub fn lock(&self, slots: &mut Vec<u16>) -> LockSet<'_> {
        for s in slots.iter_mut() {
            *s = stripe_of(*s) as u16;
        }
        slots.sort_unstable();
        slots.dedup();
        let world = World::Shared(self.world_read());
        let guards = slots
            .iter()
            .map(|&i| (i, self.stripes[i as usize].0.lock()))
            .collect();
        LockSet {
            guards,
            all: false,
            world,
        }
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
        let world = World::Shared(self.world_read());
        let mut guards = Guards::new();
        guards.push((i as u16, self.stripes[i].0.lock()));
        LockSet {
            guards,
            all: false,
            world,
        }
    }

    /// Stops the world: every stripe, without taking their mutexes (see [`Keyspace`]).
    /// The caller must hold no stripe of its own.
    pub fn lock_all(&self) -> LockSet<'_> {
        let shards = self.world.iter().map(|w| w.0.write()).collect();
        LockSet {
            guards: Guards::new(),
            all: true,
            world: World::All(self, shards),
        }
    }

    /// Brings what looking up `keys` (slot, key) of `db` will read into the cache, for a
    /// batch of pipelined requests about to run (as Valkey 8.1 does for its command
    /// queue). A lookup is a chain of dependent misses (the stripe's slot index, the slot
    /// map header, bucket, node); done key after key, the misses of one key wait for each
    /// other and the next key's wait for those. Here each pass issues one level for the
    /// whole batch, so the misses of different keys overlap: slot indexes first, then map
    /// headers, then the bucket where each key's probe starts, then the probe itself,
    /// which only prefetches the node. Holds the
    /// stripes' locks (in order, like a multi-key command) only for the passes; the
    /// commands lock again when they run.
    pub fn prefetch(&self, db: usize, keys: &[(u16, &[u8])], scratch: &mut Vec<u16>) {
        scratch.clear();
        scratch.extend(keys.iter().map(|&(slot, _)| slot));
        let mut ls = self.lock(scratch);
        for &(slot, _) in keys {
            if let Some(d) = ls.stripe(stripe_of(slot)).and_then(|st| st.db(db)) {
                slotmap::prefetch_line(d as *const DbSlots as *const u8);
            }
        }
        for &(slot, _) in keys {
            if let Some(m) = ls.stripe(stripe_of(slot)).and_then(|st| st.map(db, slot)) {
                slotmap::prefetch_line(m as *const SlotMap as *const u8);
            }
        }
        for &(slot, key) in keys {
            if let Some(m) = ls.stripe(stripe_of(slot)).and_then(|st| st.map(db, slot)) {
                m.prefetch_bucket(key);
            }
        }
        for &(slot, key) in keys {
            if let Some(m) = ls.stripe(stripe_of(slot)).and_then(|st| st.map(db, slot)) {
                m.prefetch(key);
            }
        }
    }

    /// Locks one stripe by index.
    pub fn lock_stripe(&self, idx: usize) -> StripeGuard<'_> {
        let w = self.world_read();
        StripeGuard {
            g: self.stripes[idx].0.lock(),
            _world: w,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// A slot of stripe 5 by its local index.
    fn slot_of_local(l: usize) -> u16 {
        (l * STRIPES + 5) as u16
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// A stripe's sparse slot index agrees with a model through inserts (with and
        /// without TTL), removes, TTL changes and sweeps on any mix of its 16 slots: every
        /// key is found in its own slot only, the maps come out in slot order, and the TTL
        /// counts (per slot and keyspace-wide) stay right.
        #[test]
        fn sparse_slots_match_a_model(
            ops in proptest::collection::vec((0u8..4, 0usize..SLOTS_PER_STRIPE, 0u8..6, any::<bool>()), 1..300)
        ) {
            let ks = Keyspace::new(2);
            let mut g = ks.lock_stripe(5);
            // (local, key) -> has a TTL
            let mut model: BTreeMap<(usize, Vec<u8>), bool> = BTreeMap::new();
            for (op, l, k, ttl) in ops {
                let slot = slot_of_local(l);
                let key = format!("k{k}").into_bytes();
                match op {
                    0 => {
                        let mut e = Entry::new(Value::Int(k as i64));
                        if ttl {
                            e.set_expire_at(2_000_000_000_000);
                        }
                        let had = g.insert(1, slot, &key, e).is_some();
                        prop_assert_eq!(had, model.insert((l, key), ttl).is_some());
                    }
                    1 => {
                        let had = g.remove(1, slot, &key).is_some();
                        prop_assert_eq!(had, model.remove(&(l, key)).is_some());
                    }
                    2 => {
                        let at = if ttl { 2_000_000_000_000 } else { NO_EXPIRE };
                        let had = g.set_expire(1, slot, &key, at);
                        let m = model.get_mut(&(l, key));
                        prop_assert_eq!(had, m.is_some());
                        if let Some(v) = m {
                            *v = ttl;
                        }
                    }
                    _ => {
                        // Sweep at a time past every deadline, local slot `l` hidden.
                        let n = g.expire_sweep(1, 3_000_000_000_000, 1 << l);
                        let before = model.len();
                        model.retain(|(ml, _), v| *ml == l || !*v);
                        prop_assert_eq!(n, before - model.len());
                    }
                }
            }
            prop_assert!(g.db(0).is_none());
            let vol = model.values().filter(|v| **v).count();
            prop_assert_eq!(ks.volatile_keys(), vol);
            if let Some(d) = g.db(1) {
                prop_assert_eq!(d.len(), model.len());
                prop_assert_eq!(d.volatile_len(), vol);
                let locals: Vec<usize> = d.maps().map(|(l, _)| l).collect();
                prop_assert!(locals.windows(2).all(|w| w[0] < w[1]));
                let mut seen = Vec::new();
                for (l, m) in d.maps() {
                    let v = model.iter().filter(|((ml, _), v)| *ml == l && **v).count();
                    prop_assert_eq!(d.volatile_of(l) as usize, v);
                    seen.extend(m.iter().map(|(k, _)| (l, k.to_vec())));
                }
                seen.sort();
                let want: Vec<(usize, Vec<u8>)> = model.keys().cloned().collect();
                prop_assert_eq!(seen, want);
            } else {
                prop_assert!(model.is_empty());
            }
            for l in 0..SLOTS_PER_STRIPE {
                for k in 0..6u8 {
                    let key = format!("k{k}").into_bytes();
                    prop_assert_eq!(
                        g.get(1, slot_of_local(l), &key).is_some(),
                        model.contains_key(&(l, key))
                    );
                }
            }
            drop(g);
            for d in ks.lock_stripe(5).dbs.iter_mut() {
                *d = None;
            }
            prop_assert_eq!(ks.volatile_keys(), 0);
        }
    }

    /// A stripe-database block holds an entry (24 bytes) only for the slots in use, beside
    /// its 40 bytes: a stripe's first keys cost a small block, not one sized for 16 slots.
    #[test]
    fn one_slot_in_use_costs_one_entry() {
        let ks = Keyspace::new(1);
        let mut g = ks.lock_stripe(5);
        for k in [b"a", b"b", b"c"] {
            g.insert(0, slot_of_local(3), k, Entry::new(Value::Int(1)));
        }
        g.insert(0, slot_of_local(12), b"d", Entry::new(Value::Int(1)));
        let d = g.db(0).unwrap();
        assert_eq!(d.entries.len(), 2);
        assert_eq!(std::mem::size_of::<SlotEntry>(), 24);
        assert!(crate::alloc::real_size(std::mem::size_of::<DbSlots>()) <= 40);
        assert_eq!(d.maps().map(|(l, _)| l).collect::<Vec<_>>(), [3, 12]);
        assert!(d.map(2).is_none() && d.map(3).is_some_and(|m| m.len() == 3));
        // Emptied slots keep their entry (a slot's first key should not realloc twice).
        g.remove(0, slot_of_local(12), b"d");
        assert_eq!(g.db(0).unwrap().entries.len(), 2);
    }

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
        assert_eq!(st.expire_sweep(0, 1_799_999_999_999, 0), 0);
        assert_eq!(st.expire_sweep(0, 1_800_000_000_000, 0), 1);
        assert_eq!(st.db(0).unwrap().volatile_len(), 0);
        assert!(st.get(0, slot, key).is_none());
    }

    /// A hidden slot (being imported) keeps its expired keys through a sweep and is left
    /// out of the shown counts, while the other slots of the same stripe are swept.
    #[test]
    fn hidden_slots_are_not_swept_or_counted() {
        let ks = Keyspace::new(1);
        // Two slots of one stripe: locals 0 and 1.
        let (a, b) = (7u16, 7 + STRIPES as u16);
        let mut g = ks.lock_stripe(stripe_of(a));
        for (slot, key) in [(a, b"k1".as_slice()), (b, b"k2".as_slice())] {
            let mut e = Entry::new(Value::string(b"v"));
            e.set_expire_at(1_800_000_000_000);
            g.insert(0, slot, key, e);
        }
        ks.hidden.hide(b);
        let mask = ks.hidden.stripe_mask(stripe_of(a));
        assert_eq!(g.db(0).unwrap().shown_lens(mask), (1, 1));
        assert_eq!(g.expire_sweep(0, 1_800_000_000_001, mask), 1);
        assert!(g.get(0, a, b"k1").is_none());
        assert!(g.get(0, b, b"k2").is_some());
        assert_eq!(g.db(0).unwrap().shown_lens(mask), (0, 0));
        ks.hidden.show(b);
        assert_eq!(g.db(0).unwrap().shown_lens(0), (1, 1));
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
            swept += ks.lock_stripe(i).expire_sweep(0, 1_800_000_000_000, 0);
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
