//! The execution context a handler gets: the locked part of the keyspace (`ks`), the
//! reply buffer (`out`), the client's state (`cl`) and the server (`srv`).
//!
//! `ks` and `out` are separate fields so a handler can hold a value borrowed from `ks`
//! while writing it to `out`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use crate::blocking::BlockRequest;
use crate::db::{Entry, LockSet, SBytes, Stripe, Value, NO_EXPIRE};
use crate::notify::Event;
use crate::resp::Out;
use crate::server::{ClientState, Server};
use crate::slot::key_hash_slot;
use crate::types::{HashValue, ListValue, SetValue, ZSetValue};

use super::CmdError;

pub struct Ctx<'a> {
    pub srv: &'a Arc<Server>,
    pub cl: &'a mut ClientState,
    pub out: &'a mut Out,
    pub ks: KeyView<'a>,
    /// Set by a blocking command that found nothing to serve (see [`Ctx::block_on`]).
    pub block: Option<BlockRequest>,
    /// True while running inside EXEC (blocking commands must not block).
    pub in_exec: bool,
    /// True when re-running a blocked client's command on its behalf.
    pub serving_blocked: bool,
    /// Set by a write command's handler that changed nothing (see [`Ctx::unchanged`]):
    /// not propagated, not counted as a change.
    pub noop: bool,
    /// Set when the command's keys are not to be signalled modified (no WATCH touched, no
    /// tracking invalidation): see [`Ctx::unchanged`] and [`Ctx::metadata_only`].
    pub untouched: bool,
    /// How much the command adds to rdb_changes_since_last_save (redis's `server.dirty`):
    /// 1 unless the handler counts its elements (see [`Ctx::count_changes`]).
    pub changes: u64,
}

impl Ctx<'_> {
    /// Asks the dispatcher to block this client on `keys` until one is signalled ready
    /// (see `crate::blocking`), or `timeout_ms` passes (0 = forever). Inside MULTI or when
    /// serving a blocked client this is not possible: the caller must check
    /// [`Ctx::can_block`] first and reply with a null instead.
    pub fn block_on(&mut self, keys: &[&[u8]], timeout_ms: u64) {
        self.block = Some(BlockRequest {
            db: self.ks.db,
            keys: super::owned_args(keys),
            timeout_ms,
            args: None,
        });
    }

    /// The string value to store for argument `arg`. A big argument that arrived in a read
    /// buffer of its own ([`ClientState::req_buf`]) is kept in that buffer rather than
    /// copied, as Redis stores a big argument's query buffer as the value: the copy was a
    /// quarter of a 100 KB SET's CPU. Only when the argument is nearly all of the buffer,
    /// so that the value never holds much memory it does not use.
    #[inline]
    pub fn string_value(&self, arg: &[u8]) -> Value {
        match &self.cl.req_buf {
            Some(buf) if arg.len() >= crate::db::SHARED_MIN && arg.len() >= buf.len() / 8 * 7 => {
                let (start, end) = (buf.as_ptr() as usize, buf.as_ptr() as usize + buf.len());
                let a = arg.as_ptr() as usize;
                if a >= start && a + arg.len() <= end {
                    Value::Str(SBytes::shared(buf.slice_ref(arg)))
                } else {
                    Value::string(arg)
                }
            }
            _ => Value::string(arg),
        }
    }

    /// Called by a write command's handler that found nothing to change (DEL of missing
    /// keys, SADD of present members, a failed SET NX...). As in Redis, where such a call
    /// leaves `server.dirty` alone, it then neither reaches replicas and the AOF nor
    /// touches WATCHed or tracked keys, nor counts in rdb_changes_since_last_save.
    pub fn unchanged(&mut self) {
        self.noop = true;
        self.untouched = true;
    }

    /// [`Ctx::unchanged`] when `changed` is false.
    pub fn changed_if(&mut self, changed: bool) {
        if !changed {
            self.unchanged();
        }
    }

    /// Sets how many changes the command made, as redis counts them for
    /// rdb_changes_since_last_save and the `save` rules (SADD: members added; MSET: keys
    /// set; FLUSHALL: keys removed...). Does not decide propagation: see
    /// [`Ctx::changed_by`] for counts where 0 means nothing changed.
    pub fn count_changes(&mut self, n: usize) {
        self.changes = n as u64;
    }

    /// [`Ctx::count_changes`], and [`Ctx::unchanged`] when `n` is 0.
    pub fn changed_by(&mut self, n: usize) {
        self.count_changes(n);
        if n == 0 {
            self.unchanged();
        }
    }

    /// Called by a write that changes only a stream's consumer groups or last ID
    /// (XREADGROUP, XACK, XCLAIM, XAUTOCLAIM, XGROUP, XSETID): Redis propagates and counts
    /// it but does not signal the key modified, so WATCHes and tracking clients of the
    /// key are not told.
    pub fn metadata_only(&mut self) {
        self.untouched = true;
    }

    /// Called by a write that signals its key modified but propagates nothing (LTRIM
    /// that trims nothing: Redis signals the key and adds 0 to `server.dirty`).
    pub fn signal_only(&mut self) {
        self.noop = true;
    }

    /// Records keyspace event `event` of `class` (Redis's NOTIFY_* bit, see
    /// `crate::notify`) on `key` in the selected database; published after the handler
    /// succeeds. Nothing is recorded (nor allocated) unless the class is enabled.
    #[inline]
    pub fn notify(&mut self, class: u32, event: &'static str, key: &[u8]) {
        let db = self.ks.db;
        self.ks.notify_in(db, class, event, key);
    }

    /// [`Ctx::notify`] for a key of another database (COPY ... DB, MOVE).
    #[inline]
    pub fn notify_in(&mut self, db: usize, class: u32, event: &'static str, key: &[u8]) {
        self.ks.notify_in(db, class, event, key);
    }

    /// Whether any of `class` is enabled: lets a handler skip work done only to notify.
    #[inline]
    pub fn notifies(&self, class: u32) -> bool {
        self.ks.fx.notify_on & class != 0
    }

    /// Whether replicas or the AOF receive writes: a handler builds a rewrite for
    /// [`Ctx::propagate_as`] only then.
    #[inline]
    pub fn propagating(&self) -> bool {
        self.srv.persist.prop.active()
    }

    /// Replicas and the AOF get `argv` instead of the command as received (a relative TTL
    /// made absolute, a blocking pop as its non-blocking form...).
    pub fn propagate_as(&mut self, argv: Vec<Bytes>) {
        self.ks.fx.propagate = Some(vec![argv]);
    }

    /// Replicas and the AOF get nothing for this command unless [`Ctx::propagate_also`]
    /// adds some (Redis 7.0's XREADGROUP: the XCLAIMs of what it delivered, maybe none).
    /// Still counted as a change unless the handler says otherwise.
    pub fn propagate_none(&mut self) {
        self.ks.fx.propagate = Some(Vec::new());
    }

    /// Adds `argv` to what is propagated for this command (after [`Ctx::propagate_none`]
    /// or [`Ctx::propagate_as`]); more than one command travel as MULTI ... EXEC.
    pub fn propagate_also(&mut self, argv: Vec<Bytes>) {
        self.ks.fx.propagate.get_or_insert_with(Vec::new).push(argv);
    }

    pub fn can_block(&self) -> bool {
        !self.in_exec && !self.serving_blocked
    }

    /// Encoding thresholds from the config (hash-max-listpack-entries...).
    pub fn limits(&self) -> crate::types::Limits {
        self.srv.type_limits()
    }
}

/// The locked part of the keyspace, seen from one database.
pub struct KeyView<'a> {
    pub srv: &'a Server,
    pub locks: LockSet<'a>,
    /// Selected database.
    pub db: usize,
    /// Cached unix time in ms for this command (expiry decisions are consistent within it).
    pub now: u64,
    /// Keys signalled ready for blocked clients (served after the locks are released).
    pub ready: Vec<(usize, Bytes)>,
    /// Hash slots of the running command's key arguments, computed once when its locks were
    /// taken, so handlers don't recompute CRC16 per access (it was ~10% of INCR's CPU and
    /// ~25% of MSET's). See [`SlotHints`].
    pub slot_hints: SlotHints,
    /// What the running command did besides its reply (events, rewrite), collected by
    /// the dispatcher after the handler: see [`Effects`].
    pub fx: Effects,
    /// The command comes from our master's stream (`ClientState::from_master`): on a
    /// replica it still sees keys whose TTL passed (their DEL comes from the master).
    pub from_master: bool,
}

/// A command's side effects as its handler reports them (through [`Ctx::notify`],
/// [`Ctx::propagate_as`]...); `run_locked` publishes the events and feeds replicas and
/// the AOF after a successful handler, and drops them after an error.
#[derive(Default)]
pub struct Effects {
    /// The `notify-keyspace-events` flags when the keyspace was locked (0: off, then
    /// nothing is recorded).
    pub notify_on: u32,
    /// Keyspace events in the order Redis fires them.
    pub events: Vec<Event>,
    /// What replicas and the AOF get instead of the command as received: None = as
    /// received; an empty list = nothing; several are wrapped in MULTI ... EXEC.
    pub propagate: Option<Vec<Vec<Bytes>>>,
    /// Inside EXEC or a script: the (db, command) writes so far, fed to replicas and the
    /// AOF as one MULTI ... EXEC block when it ends (`cmd::propagation::end_exec`).
    /// Each with who gets it (PUBLISH: replicas only).
    pub exec_writes: Vec<(usize, Vec<Bytes>, crate::propagate::Target)>,
}

/// `(address, length, slot)` of argument keys whose slot is known. A key slice matches a
/// hint only by address and length, which is sound because hints are set from the command's
/// own argument slices (immutable, alive while the handler runs) and cleared when the
/// handler returns ([`KeyView::clear_slot_hints`]): no other live slice can have that
/// address and length with different bytes.
pub type SlotHints = smallvec::SmallVec<[(usize, u32, u16); MAX_SLOT_HINTS]>;

/// Keys beyond this many per command fall back to computing their slot (MSET of 10 pairs,
/// the benchmark's shape, fits).
pub const MAX_SLOT_HINTS: usize = 16;

/// `key`'s slot from `hints` if it is one of the hinted slices, else computed.
#[inline]
pub fn hinted_slot(hints: &SlotHints, key: &[u8]) -> u16 {
    let p = key.as_ptr() as usize;
    for &(hp, hl, s) in hints {
        if hp == p && hl as usize == key.len() {
            return s;
        }
    }
    key_hash_slot(key)
}

/// Records `key`'s slot in `hints` (no-op when full).
#[inline]
pub fn push_slot_hint(hints: &mut SlotHints, key: &[u8], slot: u16) {
    if hints.len() < MAX_SLOT_HINTS && key.len() <= u32::MAX as usize {
        hints.push((key.as_ptr() as usize, key.len() as u32, slot));
    }
}

macro_rules! typed_getters {
    ($get:ident, $get_or_create:ident, $variant:ident, $ty:ty) => {
        /// The value at `key` if it has this type; WRONGTYPE if another type; None if absent.
        pub fn $get(&mut self, key: &[u8]) -> Result<Option<&mut $ty>, CmdError> {
            match self.get(key) {
                None => Ok(None),
                Some(Value::$variant(v)) => Ok(Some(v)),
                Some(_) => Err(CmdError::WrongType),
            }
        }

        /// Like the plain getter but creates an empty value (no TTL) when absent.
        pub fn $get_or_create(&mut self, key: &[u8]) -> Result<&mut $ty, CmdError> {
            let present = match self.get_w(key) {
                None => false,
                Some(Value::$variant(_)) => true,
                Some(_) => return Err(CmdError::WrongType),
            };
            if !present {
                self.set(key, Value::$variant(Default::default()));
            }
            match self.get_w(key) {
                Some(Value::$variant(v)) => Ok(v),
                _ => Err(CmdError::WrongType),
            }
        }
    };
}

impl<'a> KeyView<'a> {
    pub fn new(srv: &'a Server, locks: LockSet<'a>, db: usize, now: u64) -> Self {
        KeyView {
            srv,
            locks,
            db,
            now,
            ready: Vec::new(),
            slot_hints: SlotHints::new(),
            fx: Effects {
                notify_on: srv.notify.on(),
                ..Effects::default()
            },
            from_master: false,
        }
    }

    /// See [`Ctx::notify_in`].
    #[inline]
    pub fn notify_in(&mut self, db: usize, class: u32, event: &'static str, key: &[u8]) {
        if self.fx.notify_on & class != 0 {
            self.fx.events.push(Event {
                class,
                event,
                key: Bytes::copy_from_slice(key),
                db,
            });
        }
    }

    /// The hash slot of `key`: from the hints when it is one of the command's key
    /// arguments, else computed.
    #[inline]
    pub fn slot_of(&self, key: &[u8]) -> u16 {
        hinted_slot(&self.slot_hints, key)
    }

    /// Forgets the hints; called when the handler that owns the argument keys returns.
    #[inline]
    pub fn clear_slot_hints(&mut self) {
        self.slot_hints.clear();
    }

    /// The locked stripe holding `slot`. A key outside the command's declared keys is locked
    /// on demand (a wrong key spec would otherwise be a panic).
    #[inline]
    pub fn stripe(&mut self, slot: u16) -> &mut Stripe {
        let idx = crate::db::stripe_of(slot);
        if !self.locks.holds(idx) {
            tracing::warn!(slot, "key outside declared key spec; locking on demand");
            self.locks.add(&self.srv.ks, idx);
        }
        match self.locks.stripe(idx) {
            Some(s) => s,
            None => unreachable!("stripe {idx} was just locked"),
        }
    }

    /// Looks up `key` in `db`, deleting it if its TTL passed.
    pub fn lookup_in(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        let slot = self.slot_of(key);
        let now = self.now;
        let srv = self.srv;
        let from_master = self.from_master;
        let st = self.stripe(slot);
        let e: *mut Entry = st.get_mut(db, slot, key)?;
        // SAFETY: `e` points into a map owned by `st`, which we borrow mutably for the whole
        // function; on the expired branch the map is mutated and `e` is never used again,
        // otherwise `e` is returned with the borrow of `self`. (The borrow checker can't see
        // that the conditional return ends the first borrow; this saves a second lookup.)
        if unsafe { (*e).expire_at() != NO_EXPIRE && (*e).expire_at() <= now } {
            // A replica leaves expiry to its master (whose DEL arrives in the stream): the
            // master's commands still see the key, other clients see it missing.
            if srv.repl.is_replica() {
                if from_master {
                    return Some(unsafe { &mut *e });
                }
                return None;
            }
            // A pause keeps the dataset still (Redis's expireIfNeeded): the key reads as
            // missing and goes once the pause ends.
            if srv.clients_paused() {
                return None;
            }
            st.remove(db, slot, key);
            srv.stats.expired_keys.fetch_add(1, Ordering::Relaxed);
            crate::propagate::deleted(srv, db, key);
            crate::notify::expired(srv, db, key);
            return None;
        }
        Some(unsafe { &mut *e })
    }

    /// Read lookup: counts keyspace hits/misses and refreshes the LRU/LFU word.
    #[inline]
    pub fn get(&mut self, key: &[u8]) -> Option<&mut Value> {
        let db = self.db;
        let srv = self.srv;
        let clock = srv.access_clock(self.now);
        let lfu = srv.lfu_enabled();
        match self.lookup_in(db, key) {
            Some(e) => {
                srv.stats.keyspace_hits.fetch_add(1, Ordering::Relaxed);
                crate::server::evict::touch(e, clock, lfu);
                Some(&mut e.value)
            }
            None => {
                srv.stats.keyspace_misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Write lookup: no hit/miss stats.
    #[inline]
    pub fn get_w(&mut self, key: &[u8]) -> Option<&mut Value> {
        let db = self.db;
        self.lookup_in(db, key).map(|e| &mut e.value)
    }

    /// The entry (value + TTL) at `key`.
    pub fn entry(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let db = self.db;
        self.lookup_in(db, key)
    }

    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.get_w(key).is_some()
    }

    /// Sets `key` to `v`, dropping any TTL (SET semantics).
    pub fn set(&mut self, key: &[u8], v: Value) {
        let mut e = Entry::new(v);
        e.set_access(self.srv.new_access(self.now));
        let db = self.db;
        self.insert_in(db, key, e);
    }

    /// Sets `key` to `v`, keeping its TTL if it has one.
    pub fn set_keepttl(&mut self, key: &[u8], v: Value) {
        let ttl = self.entry(key).map(|e| e.expire_at()).unwrap_or(NO_EXPIRE);
        let mut e = Entry::new(v);
        e.set_expire_at(ttl);
        e.set_access(self.srv.new_access(self.now));
        let db = self.db;
        self.insert_in(db, key, e);
    }

    /// Inserts `e` at `key`. A key that did not exist gets Redis's `new` event (its
    /// dbAdd fires it), recorded before the command's own events.
    pub fn insert_in(&mut self, db: usize, key: &[u8], e: Entry) -> Option<Entry> {
        if self.fx.notify_on & (crate::notify::NEW | crate::notify::EXPIRED) != 0 {
            // Expires a dead key first (its `expired` event, then `new`), as Redis's
            // lookupKeyWrite before dbAdd.
            let existed = self.lookup_in(db, key).is_some();
            let slot = self.slot_of(key);
            let old = self.stripe(slot).insert(db, slot, key, e);
            if !existed {
                self.notify_in(db, crate::notify::NEW, "new", key);
            }
            return old;
        }
        let slot = self.slot_of(key);
        self.stripe(slot).insert(db, slot, key, e)
    }

    /// Removes `key`; returns the old entry if it existed (and was not expired).
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let db = self.db;
        self.remove_in(db, key)
    }

    pub fn remove_in(&mut self, db: usize, key: &[u8]) -> Option<Entry> {
        self.lookup_in(db, key)?;
        let slot = self.slot_of(key);
        self.stripe(slot).remove(db, slot, key)
    }

    pub fn del(&mut self, key: &[u8]) -> bool {
        self.remove(key).is_some()
    }

    /// Sets (or with `NO_EXPIRE` clears) the TTL; false when the key is absent.
    pub fn set_expire(&mut self, key: &[u8], at: u64) -> bool {
        if self.entry(key).is_none() {
            return false;
        }
        let slot = self.slot_of(key);
        let db = self.db;
        // A writable replica expires the TTLs its own clients set (Redis 7.0).
        if at != NO_EXPIRE && !self.from_master && self.srv.repl.is_replica() {
            self.srv.replica_ttls.remember(db, key);
        }
        self.stripe(slot).set_expire(db, slot, key, at)
    }

    /// Deletes `key` if it holds an empty collection (Redis never keeps empty ones), with
    /// Redis's `del` event: call it after recording the command's own event.
    pub fn remove_if_empty(&mut self, key: &[u8]) {
        let empty = match self.get_w(key) {
            Some(Value::List(l)) => l.is_empty(),
            Some(Value::Hash(h)) => h.is_empty(),
            Some(Value::Set(s)) => s.is_empty(),
            Some(Value::ZSet(z)) => z.is_empty(),
            _ => false,
        };
        if empty && self.remove(key).is_some() {
            let db = self.db;
            self.notify_in(db, crate::notify::GENERIC, "del", key);
        }
    }

    /// Tells clients blocked on `key` (BLPOP, BZPOPMIN...) that it may have data now. Cheap
    /// when nobody is blocked.
    pub fn signal_ready(&mut self, key: &[u8]) {
        if self.srv.blocking.has_waiters() {
            self.ready.push((self.db, Bytes::copy_from_slice(key)));
        }
    }

    typed_getters!(get_list, list_or_create, List, ListValue);
    typed_getters!(get_hash, hash_or_create, Hash, HashValue);
    typed_getters!(get_set, set_or_create, Set, SetValue);
    typed_getters!(get_zset, zset_or_create, ZSet, ZSetValue);

    /// Runs `f` on every stripe: the held ones if all are locked (inside EXEC), otherwise
    /// locking one stripe at a time (KEYS, SCAN, DBSIZE don't stop the world).
    pub fn for_each_stripe(&mut self, mut f: impl FnMut(usize, &mut Stripe)) {
        if self.locks.all {
            self.locks.for_each(f);
        } else {
            for i in 0..crate::db::STRIPES {
                if let Some(s) = self.locks.stripe(i) {
                    f(i, s);
                } else {
                    let mut g = self.srv.ks.lock_stripe(i);
                    f(i, &mut g);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hint answers only for the very slice it was made from: an equal key elsewhere in
    /// memory, or a prefix of the hinted slice (same address, shorter), is computed.
    #[test]
    fn slot_hints_match_by_address_and_length() {
        let args = [
            Bytes::from_static(b"user:1000"),
            Bytes::from_static(b"{a}b"),
        ];
        let mut hints = SlotHints::new();
        // A deliberately wrong slot proves which path answered.
        push_slot_hint(&mut hints, &args[0], 7);
        push_slot_hint(&mut hints, &args[1], key_hash_slot(&args[1]));
        assert_eq!(hinted_slot(&hints, &args[0]), 7);
        let copy = args[0].to_vec();
        assert_eq!(hinted_slot(&hints, &copy), key_hash_slot(b"user:1000"));
        assert_eq!(hinted_slot(&hints, &args[0][..4]), key_hash_slot(b"user"));
        assert_eq!(hinted_slot(&hints, &args[1]), key_hash_slot(b"a"));
    }

    #[test]
    fn slot_hints_stop_at_capacity() {
        let keys: Vec<Vec<u8>> = (0..MAX_SLOT_HINTS + 4)
            .map(|i| format!("k{i}").into_bytes())
            .collect();
        let mut hints = SlotHints::new();
        for k in &keys {
            push_slot_hint(&mut hints, k, key_hash_slot(k));
        }
        assert_eq!(hints.len(), MAX_SLOT_HINTS);
        assert!(!hints.spilled());
        for k in &keys {
            assert_eq!(hinted_slot(&hints, k), key_hash_slot(k));
        }
    }
}
