//! Clients blocked on keys (BLPOP, BRPOP, BLMOVE, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP,
//! XREAD, XREADGROUP).
//!
//! # API for blocking commands
//! A blocking handler first tries to serve immediately. If it can't and
//! [`Ctx::can_block`](crate::cmd::Ctx::can_block) is true, it calls
//! `ctx.block_on(keys, timeout_ms)` and returns `Ok(())` *without writing a reply*; if it
//! can't block (inside MULTI, or when being re-run for a blocked client) it writes the
//! timeout reply (null array) itself — except when `ctx.serving_blocked` is true, where it
//! must write nothing, which tells the server the client was not served.
//!
//! Commands that add data a blocked client may want (LPUSH, ZADD, LMOVE's destination...)
//! call `ctx.ks.signal_ready(key)`. After such a command releases its locks, [`serve`] takes
//! the blocked clients of each ready key in FIFO order and re-runs their command on their
//! behalf (`ctx.serving_blocked = true`, through the [`Rerun`] the command layer gave at
//! registration); the first one served gets the data, later ones are tried while the
//! command keeps serving. A client that times out gets a null array.
//!
//! The reply of a served client travels back to its connection through a oneshot channel,
//! and is produced before the pushing client's own reply is flushed (Redis's ordering).
//!
//! Stream readers differ from the rest: each is re-run for the ready key only, and one
//! that can't be served doesn't stop the ones behind it. A stream leaving a key (DEL,
//! overwrite, expiry, FLUSHALL) or a destroyed group (XGROUP DESTROY) re-runs the
//! XREADGROUP readers of that key once the command is over (the keyspace's
//! [`StreamGone`] hook, [`arm_stream_gone`]), and the re-run answers Redis 7.0's
//! UNBLOCKED or NOGROUP error, or serves a stream and group the command re-created.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::db::StreamGone;
use crate::server::{ClientHandle, ClientState, Server};

/// Redis 7.0's reply to a client blocked in XREADGROUP whose stream key went away.
pub const UNBLOCKED_DELETED: &str = "UNBLOCKED the stream key no longer exists";
/// ... and whose group did (XGROUP DESTROY, or the key replaced by a stream without it).
pub const NOGROUP_DESTROYED: &str =
    "NOGROUP the consumer group this client was blocked on no longer exists";

/// What a blocking handler asks for.
#[derive(Debug, Clone)]
pub struct BlockRequest {
    pub db: usize,
    pub keys: Vec<Bytes>,
    /// 0 = block forever.
    pub timeout_ms: u64,
    /// The command to re-run when woken, if not the one sent (XREAD resolves `$` to the
    /// stream's last ID when it blocks, as Redis does).
    pub args: Option<Vec<Bytes>>,
}

/// A woken waiter's reply and the keys its run made ready in turn.
pub type Served = (BytesMut, Vec<(usize, Bytes)>);

/// The blocked client a command is re-run for.
pub struct Woken<'a> {
    pub db: usize,
    pub client_id: u64,
    pub resp3: bool,
    /// Its connection's handle (address and name, for the slow log).
    pub client: &'a Arc<ClientHandle>,
    /// The command as the client sent it (the re-run may get it narrowed to one key).
    pub sent: &'a [Bytes],
    /// The key that became ready.
    pub key: &'a [u8],
}

/// How a woken waiter's command is re-run (with these arguments); None while it still has
/// nothing to serve.
pub type Rerun = fn(&Arc<Server>, &Woken<'_>, &[&[u8]]) -> Option<Served>;

/// What the command layer hands a waiter when it registers it ([`Blocking::register`]), so
/// this layer never calls up into it.
#[derive(Clone, Copy)]
pub struct WaiterOps {
    /// Re-runs the command when a key it waits on is ready.
    pub rerun: Rerun,
    /// Accounts for a wait CLIENT UNBLOCK ended (the client, its command, the reply sent).
    pub unblocked: fn(&Server, &Arc<ClientHandle>, &[Bytes], &[u8]),
}

struct Waiter {
    /// Re-runs the command when a key it waits on is ready.
    ops: &'static WaiterOps,
    client: Arc<ClientHandle>,
    db: usize,
    keys: Vec<Bytes>,
    args: Vec<Bytes>,
    /// The group of an XREADGROUP (what a vanished stream key ends).
    group: Option<Bytes>,
    resp3: bool,
    tx: oneshot::Sender<BytesMut>,
}

/// Handed to the blocked connection.
pub struct WaitHandle {
    pub id: u64,
    pub timeout_ms: u64,
    pub rx: oneshot::Receiver<BytesMut>,
}

#[derive(Default)]
struct State {
    by_key: hashbrown::HashMap<(usize, Bytes), VecDeque<u64>>,
    waiters: hashbrown::HashMap<u64, Waiter>,
    /// Waiters with a `group`, shared with [`GoneSink`] for its lock-free check.
    group_waiters: Arc<AtomicUsize>,
    /// Clients held by CLIENT PAUSE (see [`Blocking::hold_paused`]).
    paused: hashbrown::HashSet<u64>,
}

#[derive(Default)]
pub struct Blocking {
    state: Mutex<State>,
    count: AtomicUsize,
    next_id: AtomicU64,
    sink: std::sync::OnceLock<Arc<GoneSink>>,
}

/// A client blocked on several keys re-run for one ready `key`: its arguments with only
/// that key, as Redis serves a blocked client from the one key that became ready (a MULTI
/// adding to two of its streams serves the first; BLPOP on a key turned into a string and a
/// list that got data pops the list). For stream reads that key and its ID after STREAMS;
/// for BLPOP / BRPOP / BZPOPMIN / BZPOPMAX and BLMPOP / BZMPOP the key list is that key.
/// None when the command waits on that one key only.
fn narrowed_to(args: &[Bytes], key: &[u8]) -> Option<Vec<Bytes>> {
    let name = args.first()?;
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    if is("blpop") || is("brpop") || is("bzpopmin") || is("bzpopmax") {
        // NAME key... timeout
        let keys = args.get(1..args.len().checked_sub(1)?)?;
        if keys.len() < 2 || !keys.iter().any(|k| k[..] == *key) {
            return None;
        }
        return Some(vec![
            name.clone(),
            Bytes::copy_from_slice(key),
            args.last()?.clone(),
        ]);
    }
    if is("blmpop") || is("bzmpop") {
        // NAME timeout numkeys key... rest
        let n: usize = std::str::from_utf8(args.get(2)?).ok()?.parse().ok()?;
        let keys = args.get(3..3usize.checked_add(n)?)?;
        if n < 2 || !keys.iter().any(|k| k[..] == *key) {
            return None;
        }
        let mut v = vec![
            name.clone(),
            args[1].clone(),
            Bytes::from_static(b"1"),
            Bytes::copy_from_slice(key),
        ];
        v.extend(args[3 + n..].iter().cloned());
        return Some(v);
    }
    if !is("xread") && !is("xreadgroup") {
        return None;
    }
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        if a.eq_ignore_ascii_case(b"streams") {
            break;
        }
        i += if a.eq_ignore_ascii_case(b"group") {
            3
        } else if a.eq_ignore_ascii_case(b"count") || a.eq_ignore_ascii_case(b"block") {
            2
        } else {
            1
        };
    }
    let rest = args.get(i + 1..)?;
    let n = rest.len() / 2;
    if n < 2 || rest.len() % 2 != 0 {
        return None;
    }
    let k = rest[..n].iter().position(|x| x[..] == *key)?;
    let mut v = args[..=i].to_vec();
    v.push(rest[k].clone());
    v.push(rest[n + k].clone());
    Some(v)
}

/// The XREADGROUP group named in `args`, if they are an XREADGROUP.
fn group_of(args: &[Bytes]) -> Option<Bytes> {
    if !args.first()?.eq_ignore_ascii_case(b"xreadgroup") {
        return None;
    }
    let at = args
        .iter()
        .skip(1)
        .take_while(|a| !a.eq_ignore_ascii_case(b"streams"))
        .position(|a| a.eq_ignore_ascii_case(b"group"))?;
    args.get(at + 2).cloned()
}

/// The keyspace's [`StreamGone`] hook: a stream left a key that XREADGROUP clients wait
/// on. Their commands are re-run once the deleting command (or MULTI, or script) released
/// its locks, as Redis's `handleClientsBlockedOnKeys` does after the command: the re-run
/// answers the UNBLOCKED or NOGROUP error, or serves a stream re-created with the group.
struct GoneSink {
    group_waiters: Arc<AtomicUsize>,
    /// Weak: the server owns the keyspace that owns this hook.
    srv: std::sync::Weak<Server>,
    /// Keys to re-check; a task is spawned when this turns non-empty.
    pending: Mutex<Vec<(usize, Bytes)>>,
}

impl StreamGone for GoneSink {
    fn active(&self) -> bool {
        self.group_waiters.load(Ordering::Relaxed) > 0
    }

    fn gone(&self, db: Option<usize>, key: &[u8]) {
        let Some(srv) = self.srv.upgrade() else {
            return;
        };
        let keys: Vec<(usize, Bytes)> = {
            let st = srv.blocking.state.lock();
            let has_group = |q: &VecDeque<u64>| {
                q.iter()
                    .any(|id| st.waiters.get(id).is_some_and(|w| w.group.is_some()))
            };
            st.by_key
                .iter()
                .filter(|((d, k), q)| k[..] == *key && db.is_none_or(|x| x == *d) && has_group(q))
                .map(|(k, _)| k.clone())
                .collect()
        };
        if keys.is_empty() {
            return;
        }
        let first = {
            let mut p = self.pending.lock();
            let was_empty = p.is_empty();
            p.extend(keys);
            was_empty
        };
        if !first {
            return; // a task is already on its way
        }
        match tokio::runtime::Handle::try_current() {
            // Runs after the current command: this thread holds its locks until then.
            Ok(h) => {
                h.spawn(async move { serve_gone(&srv) });
            }
            // A lazy FLUSHALL's freeing thread: no locks are held here.
            Err(_) => serve_gone(&srv),
        }
    }
}

/// Runs a waiter's command (narrowed to `key`, the one that became ready). If it got
/// something, sends the reply and returns the keys its run made ready in turn; otherwise
/// hands the waiter back, still waiting.
fn try_serve(srv: &Arc<Server>, w: Waiter, key: &[u8]) -> Result<Vec<(usize, Bytes)>, Waiter> {
    let narrowed = narrowed_to(&w.args, key);
    let woken = Woken {
        db: w.db,
        client_id: w.client.id,
        resp3: w.resp3,
        client: &w.client,
        sent: &w.args,
        key,
    };
    let Some((reply, more)) = (w.ops.rerun)(
        srv,
        &woken,
        &crate::resp::arg_view(narrowed.as_deref().unwrap_or(&w.args)),
    ) else {
        return Err(w);
    };
    srv.blocking.count.fetch_sub(1, Ordering::Relaxed);
    let _ = w.tx.send(reply);
    Ok(more)
}

/// Re-runs the XREADGROUP waiters of the keys [`GoneSink`] collected.
fn serve_gone(srv: &Arc<Server>) {
    let Some(sink) = srv.blocking.sink.get() else {
        return;
    };
    let keys = std::mem::take(&mut *sink.pending.lock());
    for (db, key) in keys {
        let ids: Vec<u64> = {
            let st = srv.blocking.state.lock();
            st.by_key
                .get(&(db, key.clone()))
                .map(|q| {
                    q.iter()
                        .copied()
                        .filter(|id| st.waiters.get(id).is_some_and(|w| w.group.is_some()))
                        .collect()
                })
                .unwrap_or_default()
        };
        for id in ids {
            let Some(w) = Blocking::detach(&mut srv.blocking.state.lock(), id) else {
                continue; // served or timed out meanwhile
            };
            if w.tx.is_closed() {
                srv.blocking.count.fetch_sub(1, Ordering::Relaxed);
                continue;
            }
            match try_serve(srv, w, &key) {
                Ok(more) => serve(srv, more),
                Err(w) => srv.blocking.put_back(id, w),
            }
        }
    }
}

/// XGROUP DESTROY: the XREADGROUP clients blocked on `key` re-run after this command.
pub fn recheck_group_readers(srv: &Server, db: usize, key: &[u8]) {
    if let Some(sink) = srv.blocking.sink.get() {
        if sink.active() {
            sink.gone(Some(db), key);
        }
    }
}

/// Lets the keyspace re-check XREADGROUP waits on streams that leave their key (called by
/// the XREADGROUP that is about to block; only the first call installs the hook).
pub fn arm_stream_gone(srv: &Arc<Server>) {
    let sink = srv.blocking.sink.get_or_init(|| {
        Arc::new(GoneSink {
            group_waiters: srv.blocking.state.lock().group_waiters.clone(),
            srv: Arc::downgrade(srv),
            pending: Mutex::new(Vec::new()),
        })
    });
    srv.ks
        .set_stream_gone(|| sink.clone() as Arc<dyn StreamGone>);
}

impl Blocking {
    /// True when at least one client is blocked (a lock-free check for the hot path).
    #[inline]
    pub fn has_waiters(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// The keys clients are blocked on in databases `dbs` (SWAPDB re-checks them all).
    pub fn waiting_keys(&self, dbs: &[usize]) -> Vec<(usize, Bytes)> {
        if !self.has_waiters() {
            return Vec::new();
        }
        let st = self.state.lock();
        st.by_key
            .keys()
            .filter(|(d, _)| dbs.contains(d))
            .cloned()
            .collect()
    }

    pub fn blocked_clients(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Counts a client blocked outside the key waits (SHUTDOWN waiting for replicas) in
    /// INFO blocked_clients while the guard lives.
    pub fn hold_other(&self) -> HeldBlock<'_> {
        self.count.fetch_add(1, Ordering::Relaxed);
        HeldBlock(self)
    }

    /// Counts a client held by CLIENT PAUSE as blocked while the guard lives: Redis blocks
    /// such a client (BLOCKED_POSTPONE), so it shows in INFO blocked_clients and with the
    /// `b` flag in CLIENT LIST, and the suites wait for that count.
    pub fn hold_paused(&self, client_id: u64) -> HeldPause<'_> {
        self.state.lock().paused.insert(client_id);
        self.count.fetch_add(1, Ordering::Relaxed);
        HeldPause(self, client_id)
    }

    pub fn register(
        &self,
        req: BlockRequest,
        cl: &ClientState,
        args: &[&[u8]],
        resp3: bool,
        ops: &'static WaiterOps,
    ) -> WaitHandle {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = oneshot::channel();
        let args = req.args.unwrap_or_else(|| crate::resp::owned_args(args));
        let group = group_of(&args);
        let mut st = self.state.lock();
        for k in &req.keys {
            st.by_key
                .entry((req.db, k.clone()))
                .or_default()
                .push_back(id);
        }
        Self::insert(
            &mut st,
            id,
            Waiter {
                ops,
                client: cl.handle.clone(),
                db: req.db,
                keys: req.keys,
                args,
                group,
                resp3,
                tx,
            },
        );
        self.count.fetch_add(1, Ordering::Relaxed);
        WaitHandle {
            id,
            timeout_ms: req.timeout_ms,
            rx,
        }
    }

    fn insert(st: &mut State, id: u64, w: Waiter) {
        if w.group.is_some() {
            st.group_waiters.fetch_add(1, Ordering::Relaxed);
        }
        st.waiters.insert(id, w);
    }

    fn detach(st: &mut State, id: u64) -> Option<Waiter> {
        let w = st.waiters.remove(&id)?;
        if w.group.is_some() {
            st.group_waiters.fetch_sub(1, Ordering::Relaxed);
        }
        for k in &w.keys {
            let key = (w.db, k.clone());
            if let Some(q) = st.by_key.get_mut(&key) {
                q.retain(|&x| x != id);
                if q.is_empty() {
                    st.by_key.remove(&key);
                }
            }
        }
        Some(w)
    }

    /// Removes a waiter (timeout, disconnect, CLIENT KILL). False if it was already served.
    pub fn cancel(&self, id: u64) -> bool {
        let mut st = self.state.lock();
        let found = Self::detach(&mut st, id).is_some();
        if found {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        found
    }

    /// CLIENT UNBLOCK: ends the wait of `client_id` with the reply `reply(resp3, command)`
    /// builds, and has the command layer account for it. False if that client is not
    /// blocked on keys.
    pub fn unblock(
        srv: &Server,
        client_id: u64,
        reply: impl FnOnce(bool, &[u8]) -> BytesMut,
    ) -> bool {
        let this = &srv.blocking;
        let mut st = this.state.lock();
        let Some(id) = st
            .waiters
            .iter()
            .find(|(_, w)| w.client.id == client_id)
            .map(|(id, _)| *id)
        else {
            return false;
        };
        let Some(w) = Self::detach(&mut st, id) else {
            return false;
        };
        drop(st);
        this.count.fetch_sub(1, Ordering::Relaxed);
        let name = w.args.first().map(|a| &a[..]).unwrap_or_default();
        let r = reply(w.resp3, name);
        (w.ops.unblocked)(srv, &w.client, &w.args, &r);
        let _ = w.tx.send(r);
        true
    }

    /// The client ids blocked right now (CLIENT LIST flags).
    pub fn is_blocked(&self, client_id: u64) -> bool {
        let st = self.state.lock();
        st.paused.contains(&client_id) || st.waiters.values().any(|w| w.client.id == client_id)
    }

    /// Takes the first waiter of a key not in `tried`, out of every queue it is in.
    fn take_first(&self, db: usize, key: &Bytes, tried: &[u64]) -> Option<(u64, Waiter)> {
        let mut st = self.state.lock();
        let id = *st
            .by_key
            .get(&(db, key.clone()))?
            .iter()
            .find(|id| !tried.contains(id))?;
        let w = Self::detach(&mut st, id)?;
        Some((id, w))
    }

    /// Puts back a waiter that could not be served, at its place in its queues: ids grow
    /// with registration, so a queue in id order is in FIFO order.
    fn put_back(&self, id: u64, w: Waiter) {
        let mut st = self.state.lock();
        for k in &w.keys {
            let q = st.by_key.entry((w.db, k.clone())).or_default();
            let at = q.partition_point(|&x| x < id);
            q.insert(at, id);
        }
        Self::insert(&mut st, id, w);
    }
}

/// Serves blocked clients of the ready keys, FIFO per key; cascades when serving makes more
/// keys ready (BLMOVE into a key someone else is blocked on).
pub fn serve(srv: &Arc<Server>, mut ready: Vec<(usize, Bytes)>) {
    let mut rounds = 0;
    while !ready.is_empty() && rounds < 1000 {
        rounds += 1;
        let mut next = Vec::new();
        for (db, key) in ready.drain(..) {
            // Stream readers each want something else (their own group, their own ID): one
            // that can't be served doesn't stop the next, as in Redis's
            // serveClientsBlockedOnStreamKey. For the other types, the first unserved
            // waiter means the key has nothing left.
            let mut tried = Vec::new();
            loop {
                let Some((id, w)) = srv.blocking.take_first(db, &key, &tried) else {
                    break;
                };
                if w.tx.is_closed() {
                    // The connection went away: forget it, try the next one.
                    srv.blocking.count.fetch_sub(1, Ordering::Relaxed);
                    continue;
                }
                match try_serve(srv, w, &key) {
                    Ok(more) => next.extend(more),
                    Err(w) => {
                        let stream = w.args.first().is_some_and(|c| {
                            c.eq_ignore_ascii_case(b"xread")
                                || c.eq_ignore_ascii_case(b"xreadgroup")
                        });
                        srv.blocking.put_back(id, w);
                        if !stream {
                            break;
                        }
                        tried.push(id);
                    }
                }
            }
        }
        ready = next;
    }
}

/// In cluster mode, ends with a redirection the waits this node can no longer serve, as
/// Redis 7.0's clusterRedirectBlockedClientIfNeeded (from its clients cron): the cluster is
/// down (`CLUSTERDOWN The cluster is down`), or the slot of the keys is neither ours nor
/// being imported (`MOVED` to its owner, `CLUSTERDOWN Hash slot not served` if it has
/// none). A read-only wait (XREAD) on a replica of the slot's owner stays. Called every
/// tick of the server's cron.
pub fn redirect_cluster_waiters(srv: &Server) {
    let Some(node) = srv.cluster.get() else {
        return;
    };
    if !srv.blocking.has_waiters() {
        return;
    }
    // (id, slot, whether the command writes): all of a command's keys share one slot.
    let waits: Vec<(u64, u16, bool)> = {
        let st = srv.blocking.state.lock();
        st.waiters
            .iter()
            .filter_map(|(&id, w)| {
                let key = w.keys.first()?;
                let write = !w
                    .args
                    .first()
                    .is_some_and(|c| c.eq_ignore_ascii_case(b"xread"));
                Some((id, crate::slot::key_hash_slot(key), write))
            })
            .collect()
    };
    if waits.is_empty() {
        return;
    }
    let redirects: Vec<(u64, String)> = node.with_state(|st| {
        waits
            .iter()
            .filter_map(|&(id, slot, write)| {
                if !st.state_ok {
                    return Some((id, "CLUSTERDOWN The cluster is down".to_string()));
                }
                let owner = st.slots.get(usize::from(slot)).copied().flatten();
                let me = st.me();
                let served = owner == Some(st.myself)
                    || (!write && me.is_replica() && owner.is_some() && me.master == owner)
                    || st.importing[usize::from(slot)].is_some();
                if served {
                    return None;
                }
                let msg = match owner.and_then(|o| st.nodes.get(&o)) {
                    Some(n) => format!(
                        "MOVED {slot} {}:{}",
                        tessera_cluster::routing::preferred_endpoint(st, n),
                        n.port
                    ),
                    None => "CLUSTERDOWN Hash slot not served".to_string(),
                };
                Some((id, msg))
            })
            .collect()
    });
    for (id, msg) in redirects {
        let Some(w) = Blocking::detach(&mut srv.blocking.state.lock(), id) else {
            continue; // served or timed out meanwhile
        };
        srv.blocking.count.fetch_sub(1, Ordering::Relaxed);
        srv.stats.errors.count(msg.as_bytes());
        let mut reply = BytesMut::with_capacity(msg.len() + 3);
        reply.extend_from_slice(b"-");
        reply.extend_from_slice(msg.as_bytes());
        reply.extend_from_slice(b"\r\n");
        let _ = w.tx.send(reply);
    }
}

/// See [`Blocking::hold_other`].
pub struct HeldBlock<'a>(&'a Blocking);

impl Drop for HeldBlock<'_> {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::Relaxed);
    }
}

/// See [`Blocking::hold_paused`].
pub struct HeldPause<'a>(&'a Blocking, u64);

impl Drop for HeldPause<'_> {
    fn drop(&mut self) {
        self.0.state.lock().paused.remove(&self.1);
        self.0.count.fetch_sub(1, Ordering::Relaxed);
    }
}
