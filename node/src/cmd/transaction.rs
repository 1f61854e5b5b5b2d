//! MULTI / EXEC / DISCARD / WATCH / UNWATCH, the WATCH registry, and re-running a blocked
//! client's command on its behalf.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;

use super::{flags, table, CmdError, CmdResult, CommandSpec, Ctx, KeyView, Outcome};
use crate::resp::Out;
use crate::server::{now_ms, ClientState, Server};

/// Watched keys → the dirty flags of the clients watching them.
type WatchMap = hashbrown::HashMap<(usize, Bytes), Vec<(u64, Arc<AtomicBool>)>>;

#[derive(Default)]
pub struct Watches {
    map: Mutex<WatchMap>,
    count: AtomicUsize,
}

impl Watches {
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    pub fn watch(&self, cl: &mut ClientState, key: &Bytes) {
        let k = (cl.db, key.clone());
        if cl.watched.contains(&k) {
            return;
        }
        self.map
            .lock()
            .entry(k.clone())
            .or_default()
            .push((cl.id, cl.watch_dirty.clone()));
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
                v.retain(|(id, _)| *id != cl.id);
                if v.is_empty() {
                    m.remove(&k);
                }
            }
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        cl.watch_dirty.store(false, Ordering::Relaxed);
    }

    /// A key was modified: EXEC of its watchers will fail.
    pub fn touch(&self, db: usize, key: &[u8]) {
        if !self.active() {
            return;
        }
        let m = self.map.lock();
        if let Some(v) = m.get(&(db, Bytes::copy_from_slice(key))) {
            for (_, f) in v {
                f.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Every watched key of `db` (None: all dbs) is touched (FLUSHDB, FLUSHALL, SWAPDB).
    pub fn touch_db(&self, db: Option<usize>) {
        if !self.active() {
            return;
        }
        for ((d, _), v) in self.map.lock().iter() {
            if db.is_none_or(|x| x == *d) {
                for (_, f) in v {
                    f.store(true, Ordering::Relaxed);
                }
            }
        }
    }
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

fn multi(ctx: &mut Ctx<'_>, _: &[Bytes]) -> CmdResult {
    if ctx.cl.multi.is_some() {
        return Err(CmdError::msg("ERR MULTI calls can not be nested"));
    }
    ctx.cl.multi = Some(Vec::new());
    ctx.cl.multi_error = false;
    ctx.cl.handle.in_multi.store(true, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

fn exec_placeholder(_: &mut Ctx<'_>, _: &[Bytes]) -> CmdResult {
    Err(CmdError::msg("ERR EXEC without MULTI"))
}

fn end_multi(srv: &Server, cl: &mut ClientState) {
    cl.multi = None;
    cl.multi_error = false;
    cl.handle.in_multi.store(false, Ordering::Relaxed);
    srv.watch.unwatch(cl);
}

fn discard(ctx: &mut Ctx<'_>, _: &[Bytes]) -> CmdResult {
    if ctx.cl.multi.is_none() {
        return Err(CmdError::msg("ERR DISCARD without MULTI"));
    }
    end_multi(ctx.srv, ctx.cl);
    ctx.out.ok();
    Ok(())
}

fn watch(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    if ctx.cl.multi.is_some() {
        return Err(CmdError::msg("ERR WATCH inside MULTI is not allowed"));
    }
    for k in &args[1..] {
        ctx.srv.watch.watch(ctx.cl, k);
    }
    ctx.out.ok();
    Ok(())
}

fn unwatch(ctx: &mut Ctx<'_>, _: &[Bytes]) -> CmdResult {
    ctx.srv.watch.unwatch(ctx.cl);
    ctx.out.ok();
    Ok(())
}

/// EXEC: aborts on queueing errors or touched WATCH keys; otherwise locks the union of the
/// queued commands' stripes (all of them if one is a whole-keyspace command) and runs them
/// atomically.
pub fn exec(srv: &Arc<Server>, cl: &mut ClientState, out: &mut Out) -> Outcome {
    let Some(queue) = cl.multi.take() else {
        out.error("ERR EXEC without MULTI");
        return Outcome::Done;
    };
    if cl.multi_error {
        end_multi(srv, cl);
        out.error("EXECABORT Transaction discarded because of previous errors.");
        return Outcome::Done;
    }
    let t = table();
    let mut cmds: Vec<(&'static CommandSpec, &Vec<Bytes>)> = Vec::with_capacity(queue.len());
    let mut global = false;
    let mut slots = Vec::new();
    let mut idx = Vec::new();
    for args in &queue {
        // Queued commands were resolved when queued; a failure here can't happen, but an
        // error reply is better than a panic.
        let Ok(c) = t.resolve(args) else {
            end_multi(srv, cl);
            out.error("EXECABORT Transaction discarded because of previous errors.");
            return Outcome::Done;
        };
        if c.has(flags::GLOBAL) {
            global = true;
        }
        idx.clear();
        c.key_indices(args, &mut idx);
        slots.extend(idx.iter().map(|&i| crate::slot::key_hash_slot(&args[i])));
        cmds.push((c, args));
    }
    if cmds.iter().any(|(c, _)| c.has(flags::DENYOOM)) {
        if let Err(e) = crate::server::evict::ensure_memory(srv) {
            end_multi(srv, cl);
            out.error(&format!("EXECABORT Transaction discarded because of: {e}"));
            return Outcome::Done;
        }
    }
    let locks = if global {
        srv.ks.lock_all()
    } else {
        srv.ks.lock(&mut slots)
    };
    // Checked under the locks: a writer touches watched keys before releasing its own.
    if cl.watch_dirty.load(Ordering::SeqCst) {
        drop(locks);
        end_multi(srv, cl);
        out.null_array();
        return Outcome::Done;
    }
    let db = cl.db;
    // The client's clock for this batch when set (AOF replay freezes it).
    let now = match cl.now_ms {
        0 => now_ms(),
        t => t,
    };
    let mut ctx = Ctx {
        srv,
        cl,
        out,
        ks: KeyView::new(srv, locks, db, now),
        block: None,
        in_exec: true,
        serving_blocked: false,
    };
    ctx.out.array(cmds.len());
    for (c, args) in &cmds {
        // SELECT inside MULTI changes the db for the following commands.
        ctx.ks.db = ctx.cl.db;
        super::run_locked(&mut ctx, c, args);
        c.stats.calls.fetch_add(1, Ordering::Relaxed);
    }
    crate::persist::propagate::end_exec(&ctx);
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

/// Re-runs a blocked client's command. Returns its reply and the keys it made ready, or
/// None if it still has nothing to serve (the handler wrote no reply).
pub fn run_for_waiter(
    srv: &Arc<Server>,
    db: usize,
    client_id: u64,
    resp3: bool,
    args: &[Bytes],
) -> Option<(BytesMut, Vec<(usize, Bytes)>)> {
    let c = table().resolve(args).ok()?;
    let mut cl = ClientState::detached(client_id, db);
    let mut out = Out {
        buf: BytesMut::new(),
        resp3,
    };
    let mut idx = Vec::new();
    c.key_indices(args, &mut idx);
    let mut slots: Vec<u16> = idx
        .iter()
        .map(|&i| crate::slot::key_hash_slot(&args[i]))
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
    };
    super::run_locked(&mut ctx, c, args);
    let ready = std::mem::take(&mut ctx.ks.ready);
    drop(ctx);
    if out.buf.is_empty() {
        return None;
    }
    c.stats.calls.fetch_add(1, Ordering::Relaxed);
    Some((out.buf, ready))
}
