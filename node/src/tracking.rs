//! Client-side caching (CLIENT TRACKING), after redis 7.0's tracking.c.
//!
//! The tables are the server's ([`Tracking`], `Server::tracking`), like redis's: the default-mode
//! table maps a key name (any db, as redis) to the ids of the clients that read it, and the
//! BCAST table maps each prefix to its clients and the keys modified since the last
//! broadcast. Every key modification reaches [`invalidate`] through one of: `run_locked`
//! (every command, including EXEC's and scripts' and the master's stream), expiry and
//! eviction (`crate::notify::expired` / `evicted`; the active expiry sweep takes its per-key
//! path while [`live`]), and flushes ([`on_flush`]). When no client tracks and the table is
//! empty, those hooks cost one relaxed load ([`live`]).
//!
//! Which keys a write modified is taken from the command's key list, minus the keys absent
//! both before and after it (`cmd::key_effects`, which reads the command's key spec and calls
//! [`invalidate`] and [`remember`]): an existing key a write left unchanged (SADD
//! of a present member, SET NX on an existing key) still gets an invalidation that redis
//! would not send. An extra invalidation only costs the client a refetch; a missed one
//! would serve stale data, so the list errs on that side.
//!
//! Messages go out through the receiving client's out-of-band queue
//! (`ClientHandle::send`, the pub/sub delivery path), so another I/O thread's client gets
//! them and the writer's own invalidation lands after its reply.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;

use crate::resp::Out;
use crate::server::{ClientHandle, ClientState, Server};

/// Tracking flags (redis's CLIENT_TRACKING_* bits, our numbering).
pub const ON: u8 = 1;
pub const BCAST: u8 = 2;
pub const OPTIN: u8 = 4;
pub const OPTOUT: u8 = 8;
pub const NOLOOP: u8 = 16;
/// CLIENT CACHING YES (OPTIN) / NO (OPTOUT) given for the next command.
pub const CACHING: u8 = 32;
/// The redirect target disappeared (CLIENT LIST 'R', TRACKINGINFO broken_redirect).
pub const BROKEN: u8 = 64;

/// Channel RESP2 redirect targets receive invalidations on.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

/// One tracking client as the delivery side sees it.
struct Tracker {
    handle: Arc<ClientHandle>,
    flags: u8,
    redirect: u64,
    prefixes: BTreeSet<Bytes>,
}

#[derive(Default)]
struct Bcast {
    clients: BTreeSet<u64>,
    /// Keys modified since the last broadcast → the client that wrote them (0: the server).
    keys: BTreeMap<Bytes, u64>,
}

#[derive(Default)]
struct Inner {
    table: hashbrown::HashMap<Bytes, hashbrown::HashSet<u64>>,
    items: usize,
    prefixes: BTreeMap<Bytes, Bcast>,
    clients: hashbrown::HashMap<u64, Tracker>,
}

impl Inner {
    fn update_live(&self, live: &AtomicBool) {
        let now = !self.clients.is_empty() || !self.table.is_empty() || !self.prefixes.is_empty();
        live.store(now, Ordering::Relaxed);
    }
}

/// One server's tracking state (`Server::tracking`): each server in a process has its own
/// tables, so tests running several servers in one process do not see each other's clients.
#[derive(Default)]
pub struct Tracking {
    /// Whether the tables hold anything: the write path's single relaxed load.
    live: AtomicBool,
    tables: Mutex<Inner>,
    /// The table's key count as last seen by [`remember`] / [`enforce_limit`] (may run
    /// high after invalidations): lets the per-command limit check skip the lock.
    size: std::sync::atomic::AtomicUsize,
}

/// Whether any tracking state exists (the write path's single check).
#[inline]
pub fn live(srv: &Server) -> bool {
    srv.tracking.live.load(Ordering::Relaxed)
}

/// What one invalidation carries.
enum Payload {
    Keys(Vec<Bytes>),
    /// FLUSHDB / FLUSHALL: a null in the tracking client's protocol.
    Null,
}

/// A message to send once the tables are unlocked.
struct Delivery {
    id: u64,
    handle: Arc<ClientHandle>,
    redirect: u64,
    payload: Payload,
}

fn encode(dest_resp3: bool, pubsub: bool, tracker_resp3: bool, p: &Payload) -> Option<Bytes> {
    // Sized up front: grown by doubling, a message for a 1 KB key held 2 KB, and ten
    // tracking clients' copies of it weigh on maxmemory until they are written.
    let keys = match p {
        Payload::Keys(keys) => keys.iter().map(|k| k.len() + 24).sum(),
        Payload::Null => 0,
    };
    let mut o = Out::with_buf(BytesMut::with_capacity(64 + keys), dest_resp3);
    if dest_resp3 {
        o.push(2);
        o.bulk(b"invalidate");
    } else if pubsub {
        o.push(3);
        o.bulk(b"message");
        o.bulk(CHANNEL);
    } else {
        // RESP2 without a subscribed redirect target: nowhere to send (as redis).
        return None;
    }
    match p {
        Payload::Keys(keys) => {
            o.array(keys.len());
            for k in keys {
                o.bulk(k);
            }
        }
        Payload::Null if tracker_resp3 => o.raw(b"_\r\n"),
        Payload::Null => o.raw(b"$-1\r\n"),
    }
    // The estimate may end in a larger allocator size class than the message needs: then
    // a copy of exactly its size is what waits in the queues.
    let b = o.buf;
    if crate::alloc::real_size(b.capacity()) > crate::alloc::real_size(b.len()) {
        return Some(Bytes::copy_from_slice(&b));
    }
    Some(b.freeze())
}

/// Sends the collected messages (redis's sendTrackingMessage), resolving redirects.
fn deliver(srv: &Server, list: Vec<Delivery>) {
    if list.is_empty() {
        return;
    }
    let limit = srv.config.read().cobl[2];
    for d in list {
        let tracker_resp3 = d.handle.resp3.load(Ordering::Relaxed);
        let (dest, redirected) = if d.redirect != 0 {
            match srv.clients.get(d.redirect) {
                Some(h) => (h, true),
                None => {
                    if let Some(t) = srv.tracking.tables.lock().clients.get_mut(&d.id) {
                        t.flags |= BROKEN;
                    }
                    if tracker_resp3 {
                        let mut o = Out::new(true);
                        o.push(2);
                        o.bulk(b"tracking-redir-broken");
                        o.int(d.redirect as i64);
                        d.handle.send(o.buf.freeze(), limit);
                    }
                    continue;
                }
            }
        } else {
            (d.handle.clone(), false)
        };
        let dest_resp3 = dest.resp3.load(Ordering::Relaxed);
        let pubsub = redirected && dest.pubsub_count() > 0;
        if let Some(msg) = encode(dest_resp3, pubsub, tracker_resp3, &d.payload) {
            dest.send(msg, limit);
        }
    }
}

/// Invalidates `key` for its default-mode readers and queues it for BCAST prefixes
/// (redis's trackingInvalidateKey). `writer`: the client that modified it (NOLOOP).
pub fn invalidate(srv: &Server, writer: Option<u64>, key: &[u8]) {
    if !live(srv) {
        return;
    }
    let list = {
        let mut t = srv.tracking.tables.lock();
        let list = invalidate_locked(&mut t, writer, key);
        t.update_live(&srv.tracking.live);
        list
    };
    deliver(srv, list);
}

fn invalidate_locked(t: &mut Inner, writer: Option<u64>, key: &[u8]) -> Vec<Delivery> {
    if !t.prefixes.is_empty() {
        for (p, b) in t.prefixes.iter_mut() {
            if key.starts_with(p) {
                b.keys
                    .insert(Bytes::copy_from_slice(key), writer.unwrap_or(0));
            }
        }
    }
    let Some(ids) = t.table.remove(key) else {
        return Vec::new();
    };
    t.items -= ids.len();
    let mut list = Vec::new();
    for id in ids {
        let Some(c) = t.clients.get(&id) else {
            continue;
        };
        if c.flags & BCAST != 0 || (c.flags & NOLOOP != 0 && writer == Some(id)) {
            continue;
        }
        list.push(Delivery {
            id,
            handle: c.handle.clone(),
            redirect: c.redirect,
            payload: Payload::Keys(vec![Bytes::copy_from_slice(key)]),
        });
    }
    list
}

/// Sends the keys BCAST prefixes collected (redis's trackingBroadcastInvalidationMessages,
/// run once per event-loop turn there; here at the end of each read batch of a client,
/// after expiry/eviction, and after each command of the master's stream).
pub fn flush_bcast(srv: &Server) {
    if !live(srv) {
        return;
    }
    let list = {
        let mut t = srv.tracking.tables.lock();
        let t = &mut *t;
        let mut list = Vec::new();
        for b in t.prefixes.values_mut() {
            if b.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut b.keys);
            for id in &b.clients {
                let Some(c) = t.clients.get(id) else {
                    continue;
                };
                let sel: Vec<Bytes> = keys
                    .iter()
                    .filter(|(_, w)| c.flags & NOLOOP == 0 || **w != *id)
                    .map(|(k, _)| k.clone())
                    .collect();
                if sel.is_empty() {
                    continue;
                }
                list.push(Delivery {
                    id: *id,
                    handle: c.handle.clone(),
                    redirect: c.redirect,
                    payload: Payload::Keys(sel),
                });
            }
        }
        list
    };
    deliver(srv, list);
}

/// FLUSHDB / FLUSHALL: every tracking client gets a null invalidation and the table is
/// emptied (redis's trackingInvalidateKeysOnFlush, which frees the whole table on any flush).
pub fn on_flush(srv: &Server) {
    if !live(srv) {
        return;
    }
    let list = {
        let mut t = srv.tracking.tables.lock();
        t.table.clear();
        t.items = 0;
        let list = t
            .clients
            .iter()
            .map(|(id, c)| Delivery {
                id: *id,
                handle: c.handle.clone(),
                redirect: c.redirect,
                payload: Payload::Null,
            })
            .collect();
        t.update_live(&srv.tracking.live);
        list
    };
    deliver(srv, list);
}

/// Whether a client with tracking flags `f` has its next read's keys remembered: default
/// mode only (BCAST remembers nothing), and with OPTIN only after CLIENT CACHING YES, with
/// OPTOUT not after CLIENT CACHING NO.
pub fn tracks_reads(f: u8) -> bool {
    let caching = f & CACHING != 0;
    f & ON != 0 && f & BCAST == 0 && !((f & OPTIN != 0 && !caching) || (f & OPTOUT != 0 && caching))
}

/// Remembers that client `id` read `keys` (it gets their invalidation later), then evicts
/// keys past tracking-table-max-keys. The command layer decides which reads count
/// (`cmd::key_effects`).
pub fn remember<'k>(srv: &Server, id: u64, keys: impl IntoIterator<Item = &'k [u8]>) {
    let max = srv.config.read().typed.tracking_table_max_keys as usize;
    let list = {
        let mut t = srv.tracking.tables.lock();
        for key in keys {
            let inserted = match t.table.get_mut(key) {
                Some(ids) => ids.insert(id),
                None => {
                    let mut ids = hashbrown::HashSet::new();
                    ids.insert(id);
                    t.table.insert(Bytes::copy_from_slice(key), ids);
                    true
                }
            };
            if inserted {
                t.items += 1;
            }
        }
        trim_and_publish(srv, &mut t, max)
    };
    deliver(srv, list);
}

/// tracking-table-max-keys lowered while keys are tracked: Redis evicts the excess
/// (trackingLimitUsedSlots) from its cron and before each client command, without waiting
/// for the next read. Called by the clients' periodic loop and the connection before each
/// command; true when invalidations were sent.
pub fn enforce_limit(srv: &Server) -> bool {
    if !live(srv) {
        return false;
    }
    let max = srv.config.read().typed.tracking_table_max_keys as usize;
    if max == 0 || srv.tracking.size.load(Ordering::Relaxed) <= max {
        return false;
    }
    let list = {
        let mut t = srv.tracking.tables.lock();
        trim_and_publish(srv, &mut t, max)
    };
    let sent = !list.is_empty();
    deliver(srv, list);
    sent
}

/// Trims the table to `max` keys (0: no limit) and publishes its new size: the
/// invalidations to send once the lock is let go.
fn trim_and_publish(srv: &Server, t: &mut Inner, max: usize) -> Vec<Delivery> {
    let list = if max > 0 && t.table.len() > max {
        limit_table(t, max)
    } else {
        Vec::new()
    };
    t.update_live(&srv.tracking.live);
    srv.tracking.size.store(t.table.len(), Ordering::Relaxed);
    list
}

/// Evicts keys (sending their invalidations) until the table holds at most `max`, as
/// redis's trackingLimitUsedSlots (which picks random keys; hash order here).
fn limit_table(t: &mut Inner, max: usize) -> Vec<Delivery> {
    let mut list = Vec::new();
    while t.table.len() > max {
        let Some(k) = t.table.keys().next().cloned() else {
            break;
        };
        list.extend(invalidate_locked(t, None, &k));
    }
    list
}

/// After a top-level command of a connection: CLIENT CACHING lasts one command (or the
/// whole MULTI), as redis's resetClient.
pub fn after_command(cl: &mut ClientState, was_client_cmd: bool) {
    if cl.tracking & CACHING != 0 && cl.multi.is_none() && !was_client_cmd {
        cl.tracking &= !CACHING;
    }
}

/// Stops tracking (CLIENT TRACKING OFF, RESET, disconnect). Keys it read stay in the
/// table until invalidated, as in redis.
pub fn disable(srv: &Server, cl: &mut ClientState) {
    if cl.tracking & ON == 0 {
        return;
    }
    cl.tracking = 0;
    cl.tracking_prefixes = 0;
    let mut t = srv.tracking.tables.lock();
    if let Some(c) = t.clients.remove(&cl.id) {
        for p in &c.prefixes {
            if let Some(b) = t.prefixes.get_mut(p) {
                b.clients.remove(&cl.id);
                if b.clients.is_empty() {
                    t.prefixes.remove(p);
                }
            }
        }
    }
    t.update_live(&srv.tracking.live);
}

/// Whether one of two prefixes starts the other (redis's stringCheckPrefix).
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// The first of a client's prefixes (in order) that overlaps `p`, as Redis's scan of its
/// prefix tree finds it, in O(log n): a client's prefixes never overlap each other, so the
/// only one `p` can start with is the greatest below it, and those starting with `p` begin
/// at the least from it. A scan of all of them per command made a client adding prefixes
/// one at a time quadratic (unit/client-eviction's 200,000 never ended).
fn first_overlap<'a>(set: &'a BTreeSet<Bytes>, p: &[u8]) -> Option<&'a Bytes> {
    use std::ops::Bound;
    let below = set
        .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(p)))
        .next_back()
        .filter(|e| p.starts_with(e));
    below.or_else(|| {
        set.range::<[u8], _>((Bound::Included(p), Bound::Unbounded))
            .next()
            .filter(|e| e.starts_with(p))
    })
}

/// The reason CLIENT TRACKING ON with these options is refused, or None.
pub fn check_on(srv: &Server, cl: &ClientState, opts: u8, prefixes: &[Bytes]) -> Option<String> {
    if opts & BCAST == 0 && !prefixes.is_empty() {
        return Some("ERR PREFIX option requires BCAST mode to be enabled".into());
    }
    let cur = cl.tracking;
    if cur & ON != 0 && (cur & BCAST != 0) != (opts & BCAST != 0) {
        return Some("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.".into());
    }
    if opts & BCAST != 0 && opts & (OPTIN | OPTOUT) != 0 {
        return Some("ERR OPTIN and OPTOUT are not compatible with BCAST".into());
    }
    if opts & OPTIN != 0 && opts & OPTOUT != 0 {
        return Some("ERR You can't specify both OPTIN mode and OPTOUT mode".into());
    }
    if (opts & OPTIN != 0 && cur & OPTOUT != 0) || (opts & OPTOUT != 0 && cur & OPTIN != 0) {
        return Some("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.".into());
    }
    if opts & BCAST != 0 {
        let t = srv.tracking.tables.lock();
        let existing = t.clients.get(&cl.id).map(|c| &c.prefixes);
        for (i, p) in prefixes.iter().enumerate() {
            if let Some(ex) = existing {
                if let Some(e) = first_overlap(ex, p) {
                    return Some(format!(
                        "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                        String::from_utf8_lossy(p),
                        String::from_utf8_lossy(e)
                    ));
                }
            }
            if let Some(q) = prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
                return Some(format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(q)
                ));
            }
        }
    }
    None
}

/// CLIENT TRACKING ON (options already checked by [`check_on`]); redis's enableTracking.
pub fn enable(srv: &Server, cl: &mut ClientState, redirect: u64, opts: u8, prefixes: &[Bytes]) {
    let keep_caching = cl.tracking & CACHING;
    cl.tracking = ON | (opts & (BCAST | OPTIN | OPTOUT | NOLOOP)) | keep_caching;
    let mut t = srv.tracking.tables.lock();
    let t = &mut *t;
    let c = t.clients.entry(cl.id).or_insert_with(|| Tracker {
        handle: cl.handle.clone(),
        flags: 0,
        redirect: 0,
        prefixes: BTreeSet::new(),
    });
    c.flags = cl.tracking & !CACHING;
    c.redirect = redirect;
    if opts & BCAST != 0 {
        let list: Vec<Bytes> = if prefixes.is_empty() {
            vec![Bytes::new()]
        } else {
            prefixes.to_vec()
        };
        for p in list {
            c.prefixes.insert(p.clone());
            t.prefixes.entry(p).or_default().clients.insert(cl.id);
        }
    }
    // Counted in the client's memory (maxmemory-clients), as Redis counts its prefix tree.
    cl.tracking_prefixes = c.prefixes.len();
    t.update_live(&srv.tracking.live);
}

/// Number of clients with tracking on (INFO tracking_clients).
pub fn clients(srv: &Server) -> usize {
    if !live(srv) {
        return 0;
    }
    srv.tracking.tables.lock().clients.len()
}

/// INFO stats: tracking_total_keys, tracking_total_items, tracking_total_prefixes.
pub fn totals(srv: &Server) -> (usize, usize, usize) {
    if !live(srv) {
        return (0, 0, 0);
    }
    let t = srv.tracking.tables.lock();
    (t.table.len(), t.items, t.prefixes.len())
}

/// A client's registry flags (ON, BCAST, OPTIN, OPTOUT, NOLOOP, BROKEN), redirect and
/// prefixes; None when it doesn't track.
pub fn describe(srv: &Server, id: u64) -> Option<(u8, u64, Vec<Bytes>)> {
    if !live(srv) {
        return None;
    }
    let t = srv.tracking.tables.lock();
    t.clients
        .get(&id)
        .map(|c| (c.flags, c.redirect, c.prefixes.iter().cloned().collect()))
}

/// CLIENT LIST / INFO: appends `t`, `R`, `B` to the flags and returns `redir`.
pub fn list_info(srv: &Server, id: u64, flags: &mut String) -> i64 {
    match describe(srv, id) {
        Some((f, redirect, _)) => {
            flags.push('t');
            if f & BROKEN != 0 {
                flags.push('R');
            }
            if f & BCAST != 0 {
                flags.push('B');
            }
            redirect as i64
        }
        None => -1,
    }
}

#[cfg(test)]
mod tests {
    use super::{first_overlap, overlap};
    use bytes::Bytes;
    use std::collections::BTreeSet;

    /// The quick search finds what a scan of every prefix in order finds.
    #[test]
    fn first_overlap_matches_a_scan() {
        let sets: [&[&str]; 4] = [
            &[],
            &[""],
            &["ab", "ac", "ba0", "bb", "c"],
            &["000000000001", "000000000002", "000000000010"],
        ];
        let probes = [
            "",
            "a",
            "ab",
            "abc",
            "ac",
            "ad",
            "b",
            "ba",
            "ba0",
            "ba01",
            "bz",
            "c",
            "cc",
            "d",
            "0000",
            "000000000001",
            "0000000000020",
            "00000000001",
        ];
        for set in sets {
            let s: BTreeSet<Bytes> = set.iter().map(|p| Bytes::from(p.to_string())).collect();
            for p in probes {
                let scan = s.iter().find(|e| overlap(e, p.as_bytes()));
                assert_eq!(first_overlap(&s, p.as_bytes()), scan, "{set:?} {p:?}");
            }
        }
    }

    #[test]
    fn prefixes_overlap_when_one_starts_the_other() {
        assert!(overlap(b"a", b"ab"));
        assert!(overlap(b"ab", b"a"));
        assert!(overlap(b"", b"x"));
        assert!(overlap(b"a", b"a"));
        assert!(!overlap(b"ab", b"ac"));
    }
}
