//! MULTI / EXEC / DISCARD / WATCH / UNWATCH, the WATCH registry, and re-running a blocked
//! client's command on its behalf.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::{flags, table, CmdError, CmdResult, CommandSpec, Ctx, KeyView, Outcome};
use crate::resp::Out;
use crate::server::watches::Watcher;
pub use crate::server::watches::Watches;
use crate::server::{now_ms, ClientState, Server};

/// A key as a watch sees it: absent, or present with its expiry (ms, `NO_EXPIRE`).
type Phys = Option<u64>;

/// The physical state of `key` (expired entries included), through the stripes this
/// context holds or a short lock of its own (never one it already holds: no self-deadlock).
pub fn peek(ks: &mut KeyView<'_>, db: usize, key: &[u8]) -> Phys {
    let slot = crate::slot::key_hash_slot(key);
    let idx = crate::db::stripe_of(slot);
    match ks.locks.stripe(idx) {
        Some(st) => st.get(db, slot, key).map(|e| e.expire_at()),
        None => {
            let st = ks.srv.ks.lock_stripe(idx);
            st.get(db, slot, key).map(|e| e.expire_at())
        }
    }
}

fn logically_expired(p: Phys, now: u64) -> bool {
    p.is_some_and(|at| at != crate::db::NO_EXPIRE && at <= now)
}

impl Watches {
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// Watches `key` given its state now (see [`peek`]).
    fn watch(&self, cl: &mut ClientState, key: &[u8], phys: Phys, now: u64) {
        let k = (cl.db, Bytes::copy_from_slice(key));
        if cl.watched.contains(&k) {
            return;
        }
        let expired = logically_expired(phys, now);
        self.map.lock().entry(k.clone()).or_default().push(Watcher {
            id: cl.id,
            dirty: cl.watch_dirty.clone(),
            existed: phys.is_some() && !expired,
            expired,
            pending: false,
        });
        cl.watched.push(k);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    pub fn unwatch(&self, cl: &mut ClientState) {
        if cl.watched.is_empty() {
            cl.watch_dirty.store(false, Ordering::Relaxed);
            return;
        }
        let mut m = self.map.lock();
        for k in cl.watched.drain(..) {
            if let Some(v) = m.get_mut(&k) {
                v.retain(|w| w.id != cl.id);
                if v.is_empty() {
                    m.remove(&k);
                }
            }
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        cl.watch_dirty.store(false, Ordering::Relaxed);
    }

    /// A key was modified: EXEC of its watchers will fail (for a key that was already
    /// expired at WATCH time, only if it still exists at EXEC).
    pub fn touch(&self, db: usize, key: &[u8]) {
        if !self.active() {
            return;
        }
        let mut m = self.map.lock();
        if let Some(v) = m.get_mut(&(db, Bytes::copy_from_slice(key))) {
            for w in v {
                if w.expired {
                    w.pending = true;
                } else {
                    w.dirty.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    /// Every watched key of `db` (None: all dbs) is touched (a full resync).
    pub fn touch_db(&self, db: Option<usize>) {
        if !self.active() {
            return;
        }
        for ((d, _), v) in self.map.lock().iter() {
            if db.is_none_or(|x| x == *d) {
                for w in v {
                    w.dirty.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    fn keys_of(&self, db: Option<usize>) -> Vec<(usize, Bytes)> {
        self.map
            .lock()
            .keys()
            .filter(|(d, _)| db.is_none_or(|x| x == *d))
            .cloned()
            .collect()
    }

    /// Redis 7.0 `touchAllWatchedKeysInDb(emptied, replaced_with)` for one key, given the
    /// key in the emptied db and in the db replacing it (None for a flush).
    fn touch_replaced(&self, k: &(usize, Bytes), emptied: Phys, repl: Option<Phys>, now: u64) {
        let in_repl = repl.flatten();
        if emptied.is_none() && in_repl.is_none() {
            return;
        }
        let mut m = self.map.lock();
        let Some(v) = m.get_mut(k) else { return };
        for w in v {
            if w.expired {
                if in_repl.is_none() {
                    w.expired = false; // an expired key got deleted: no logical change
                    w.pending = false;
                    continue;
                }
                if logically_expired(in_repl, now) {
                    continue;
                }
            } else if emptied.is_none() && logically_expired(in_repl, now) {
                w.expired = true;
                continue;
            }
            w.dirty.store(true, Ordering::Relaxed);
        }
    }
}

/// FLUSHDB / FLUSHALL (call before emptying): watchers of keys that exist are touched.
pub fn touch_flushed(ctx: &mut Ctx<'_>, db: Option<usize>) {
    if !ctx.srv.watch.active() {
        return;
    }
    let now = ctx.ks.now;
    for k in ctx.srv.watch.keys_of(db) {
        let p = peek(&mut ctx.ks, k.0, &k.1);
        ctx.srv.watch.touch_replaced(&k, p, None, now);
    }
}

/// SWAPDB a b (call before swapping): each db is emptied and replaced by the other.
pub fn touch_swapped(ctx: &mut Ctx<'_>, a: usize, b: usize) {
    if !ctx.srv.watch.active() {
        return;
    }
    let now = ctx.ks.now;
    for (x, y) in [(a, b), (b, a)] {
        for k in ctx.srv.watch.keys_of(Some(x)) {
            let here = peek(&mut ctx.ks, x, &k.1);
            let there = peek(&mut ctx.ks, y, &k.1);
            ctx.srv.watch.touch_replaced(&k, here, Some(there), now);
        }
    }
}

/// EXEC-time checks Redis 7.0 adds to the dirty flag (`isWatchedKeyExpired` and friends):
/// a key that existed at WATCH and is now gone or logically expired was changed (expired
/// or deleted by the expiry cycle); an expired-at-WATCH key written since counts if it
/// exists now.
fn watched_changed(srv: &Server, cl: &ClientState, ks: &mut KeyView<'_>) -> bool {
    if cl.watched.is_empty() {
        return false;
    }
    let now = ks.now;
    let mine: Vec<((usize, Bytes), bool, bool, bool)> = {
        let m = srv.watch.map.lock();
        cl.watched
            .iter()
            .filter_map(|k| {
                let w = m.get(k)?.iter().find(|w| w.id == cl.id)?;
                Some((k.clone(), w.existed, w.expired, w.pending))
            })
            .collect()
    };
    mine.into_iter()
        .any(|((db, key), existed, expired, pending)| {
            let p = peek(ks, db, &key);
            if expired {
                pending && p.is_some()
            } else {
                existed && (p.is_none() || logically_expired(p, now))
                    || !existed && logically_expired(p, now)
            }
        })
}

pub fn commands() -> Vec<CommandSpec> {
    vec![
        CommandSpec::new(
            "multi",
            1,
            "noscript loading stale fast allow_busy conn",
            (0, 0, 0),
            multi,
        )
        .group("transactions")
        .since("1.2.0"),
        CommandSpec::new(
            "exec",
            1,
            "noscript loading stale conn",
            (0, 0, 0),
            exec_placeholder,
        )
        .group("transactions")
        .since("1.2.0"),
        CommandSpec::new(
            "discard",
            1,
            "noscript loading stale fast allow_busy conn",
            (0, 0, 0),
            discard,
        )
        .group("transactions")
        .since("2.0.0"),
        CommandSpec::new(
            "watch",
            -2,
            "noscript loading stale fast allow_busy conn",
            (1, -1, 1),
            watch,
        )
        .group("transactions")
        .since("2.2.0"),
        CommandSpec::new(
            "unwatch",
            1,
            "noscript loading stale fast allow_busy conn",
            (0, 0, 0),
            unwatch,
        )
        .group("transactions")
        .since("2.2.0"),
    ]
}

/// Commands that run immediately even inside MULTI.
pub fn runs_inside_multi(name: &str) -> bool {
    matches!(
        name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

fn multi(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    if ctx.cl.multi.is_some() {
        return Err(CmdError::msg("ERR MULTI calls can not be nested"));
    }
    ctx.cl.multi = Some(Vec::new());
    ctx.cl.multi_error = false;
    ctx.cl.handle.in_multi.store(true, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

fn exec_placeholder(_: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    Err(CmdError::msg("ERR EXEC without MULTI"))
}

pub(crate) fn end_multi(srv: &Server, cl: &mut ClientState) {
    cl.multi = None;
    cl.multi_error = false;
    cl.handle.in_multi.store(false, Ordering::Relaxed);
    srv.watch.unwatch(cl);
}

fn discard(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    if ctx.cl.multi.is_none() {
        return Err(CmdError::msg("ERR DISCARD without MULTI"));
    }
    end_multi(ctx.srv, ctx.cl);
    ctx.out.ok();
    Ok(())
}

fn watch(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if ctx.cl.multi.is_some() {
        return Err(CmdError::msg("ERR WATCH inside MULTI is not allowed"));
    }
    // A fresh clock, not the read batch's: Redis checks expiry at the moment of WATCH.
    let (db, now) = (ctx.cl.db, now_ms());
    for k in &args[1..] {
        let phys = peek(&mut ctx.ks, db, k);
        ctx.srv.watch.watch(ctx.cl, k, phys, now);
    }
    ctx.out.ok();
    Ok(())
}

fn unwatch(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.srv.watch.unwatch(ctx.cl);
    ctx.out.ok();
    Ok(())
}

/// EXEC: aborts on queueing errors or touched WATCH keys; otherwise locks the union of the
/// queued commands' stripes (all of them if one is a whole-keyspace command) and runs them
/// atomically.
pub fn exec(
    srv: &Arc<Server>,
    cl: &mut ClientState,
    out: &mut Out,
    exec_cmd: &CommandSpec,
) -> Outcome {
    let Some(queue) = cl.multi.take() else {
        failed(srv, cl, out, exec_cmd, "ERR EXEC without MULTI");
        return Outcome::Done;
    };
    if cl.multi_error {
        end_multi(srv, cl);
        failed(srv, cl, out, exec_cmd, EXECABORT);
        return Outcome::Done;
    }
    let t = table();
    // Borrowed views of the queued (owned) arguments, run through the same handlers.
    let views: Vec<Vec<&[u8]>> = queue.iter().map(|a| super::arg_view(a)).collect();
    let mut cmds: Vec<(&'static CommandSpec, &[&[u8]])> = Vec::with_capacity(queue.len());
    let mut global = false;
    let mut slots = Vec::new();
    let mut idx = Vec::new();
    for args in &views {
        // Queued commands were resolved when queued; a failure here can't happen, but an
        // error reply is better than a panic.
        let Ok(c) = t.resolve(args) else {
            end_multi(srv, cl);
            failed(srv, cl, out, exec_cmd, EXECABORT);
            return Outcome::Done;
        };
        if c.has(flags::GLOBAL) {
            global = true;
        }
        idx.clear();
        c.key_indices(args, &mut idx);
        slots.extend(idx.iter().map(|&i| crate::slot::key_hash_slot(args[i])));
        cmds.push((c, args));
    }
    // The watched keys' stripes too: EXEC checks them (see `watched_changed`) and must not
    // lock one more stripe out of order while holding these.
    slots.extend(
        cl.watched
            .iter()
            .map(|(_, k)| crate::slot::key_hash_slot(k)),
    );
    let locks = if global {
        srv.ks.lock_all()
    } else {
        srv.ks.lock(&mut slots)
    };
    let db = cl.db;
    // The client's clock for this batch when set (AOF replay freezes it).
    let now = match cl.now_ms {
        0 => now_ms(),
        t => t,
    };
    let mut ks = KeyView::new(srv, locks, db, now);
    ks.from_master = cl.from_master;
    // Checked under the locks: a writer touches watched keys before releasing its own.
    if cl.watch_dirty.load(Ordering::SeqCst) || watched_changed(srv, cl, &mut ks) {
        drop(ks);
        end_multi(srv, cl);
        out.null_array();
        return Outcome::Done;
    }
    let mut ctx = Ctx {
        srv,
        cl,
        out,
        ks,
        block: None,
        in_exec: true,
        serving_blocked: false,
        noop: false,
        untouched: false,
        changes: 1,
    };
    ctx.out.array(cmds.len());
    for (c, args) in &cmds {
        // SELECT inside MULTI changes the db for the following commands.
        ctx.ks.db = ctx.cl.db;
        // ACL rules are checked again as each queued command runs (Redis's execCommand).
        if let Some(e) = super::acl::check_exec_call(srv, ctx.cl, c, args) {
            ctx.out.error(&e);
            continue;
        }
        let start = crate::server::stats::CmdTimer::start();
        super::run_locked(&mut ctx, c, args);
        // Each queued command is a call of its own: commandstats, latency, slow log and
        // MONITOR, as Redis's EXEC runs each through call().
        super::record(srv, ctx.cl, c, args, start);
    }
    super::propagation::end_exec(&mut ctx);
    let ready = std::mem::take(&mut ctx.ks.ready);
    drop(ctx);
    end_multi(srv, cl);
    if !ready.is_empty() {
        crate::blocking::serve(srv, ready);
    }
    if cl.close_after_reply {
        return Outcome::Close;
    }
    Outcome::Done
}

const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// An EXEC that fails without running anything: its error counted and its `failed_calls`.
fn failed(srv: &Server, cl: &ClientState, out: &mut Out, exec_cmd: &CommandSpec, msg: &str) {
    exec_cmd.stats.live().failed.fetch_add(1, Ordering::Relaxed);
    super::count_error(srv, cl, msg.as_bytes());
    out.error(msg);
}

/// How the blocking layer re-runs and accounts for this layer's blocked clients.
pub const WAITER_OPS: crate::blocking::WaiterOps = crate::blocking::WaiterOps {
    rerun: run_for_waiter,
    unblocked,
};

/// Re-runs a blocked client's command. Returns its reply and the keys it made ready, or
/// None if it still has nothing to serve (the handler wrote no reply).
pub fn run_for_waiter(
    srv: &Arc<Server>,
    w: &crate::blocking::Woken<'_>,
    args: &[&[u8]],
) -> Option<(BytesMut, Vec<(usize, Bytes)>)> {
    let (db, resp3) = (w.db, w.resp3);
    let start = crate::server::stats::CmdTimer::start();
    let c = table().resolve(args).ok()?;
    let mut cl = ClientState::detached(w.client_id, db);
    let mut out = Out::new(resp3);
    let mut idx = Vec::new();
    c.key_indices(args, &mut idx);
    let mut slots: Vec<u16> = idx
        .iter()
        .map(|&i| crate::slot::key_hash_slot(args[i]))
        .collect();
    let locks = srv.ks.lock(&mut slots);
    let mut ctx = Ctx {
        srv,
        cl: &mut cl,
        out: &mut out,
        ks: KeyView::new(srv, locks, db, now_ms()),
        block: None,
        in_exec: false,
        serving_blocked: true,
        noop: false,
        untouched: false,
        changes: 1,
    };
    // Redis serves a client only from a key holding the type it waits for: a list replaced
    // by a string leaves BLPOP blocked (XREADGROUP is re-run whatever the key holds: it
    // answers the end of its stream itself).
    if let Some(want) = waits_for(c) {
        if ctx.ks.get_w(w.key).map(|v| v.type_name()) != Some(want) {
            return None;
        }
    }
    super::run_locked(&mut ctx, c, args);
    let ready = std::mem::take(&mut ctx.ks.ready);
    drop(ctx);
    if out.buf.is_empty() {
        return None;
    }
    // Its call was counted when it blocked; run_locked counted a failure already.
    super::record_unblocked(
        srv,
        w.client,
        c,
        &super::arg_view(w.sent),
        start.elapsed_us(),
        false,
    );
    Some((out.buf, ready))
}

/// The type a blocked command is served from (Redis's per-type serveClientsBlockedOn*Key).
fn waits_for(c: &CommandSpec) -> Option<&'static str> {
    match c.name {
        "blpop" | "brpop" | "blmove" | "brpoplpush" | "blmpop" => Some("list"),
        "bzpopmin" | "bzpopmax" | "bzmpop" => Some("zset"),
        "xread" => Some("stream"),
        _ => None,
    }
}

/// A wait CLIENT UNBLOCK ended (Redis 7.0.15's updateStatsOnUnblock(.., had_errors=1) in
/// CLIENT UNBLOCK, for TIMEOUT too): the command's `failed_calls` and slow log entry, and
/// the UNBLOCKED error counted when that is the reply.
pub fn unblocked(
    srv: &Server,
    client: &Arc<crate::server::ClientHandle>,
    sent: &[Bytes],
    reply: &[u8],
) {
    let args = super::arg_view(sent);
    let Ok(c) = table().resolve(&args) else {
        return;
    };
    if let Some(msg) = super::error_text(reply) {
        srv.stats.errors.count(msg);
        // Redis counts a command failed when an error reply was counted while it ran, to
        // whomever it went: CLIENT UNBLOCK ... ERROR fails too.
        if let Ok(unblock) = table().resolve(&[b"client", b"unblock"]) {
            unblock.stats.live().failed.fetch_add(1, Ordering::Relaxed);
        }
    }
    super::record_unblocked(srv, client, c, &args, 0, true);
}
