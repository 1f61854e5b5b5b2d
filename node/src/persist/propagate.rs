//! Write propagation: every command that changed the dataset, in execution order, in the
//! deterministic form its handler chose (`Ctx::propagate_as`: relative TTLs made absolute,
//! blocking pops as their non-blocking forms...; as received otherwise), fed to subscribers:
//! the AOF and replication.
//!
//! The dispatcher calls [`propagate`] with the command's locks still held, so the order
//! subscribers see is the execution order for every key. When no subscriber is registered
//! the cost is one relaxed atomic load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;

use crate::cmd::Ctx;

/// What a subscriber is told about one write.
pub struct Write<'a> {
    /// Database the command ran in.
    pub db: usize,
    /// The command in its deterministic form.
    pub args: &'a [&'a [u8]],
    /// Stripes the command held locked (empty: a keyless or whole-keyspace command).
    pub stripes: &'a [u16],
    /// Applied from our master's stream (the replica link's client).
    pub from_master: bool,
}

/// A consumer of the write stream (AOF, replication).
pub trait WriteSubscriber: Send + Sync {
    /// Called with the command's key locks held: keep it short (buffer, don't block).
    fn feed(&self, w: &Write<'_>);
}

/// The registered subscribers.
#[derive(Default)]
pub struct Propagator {
    active: AtomicBool,
    subs: RwLock<Vec<Arc<dyn WriteSubscriber>>>,
}

impl Propagator {
    pub fn subscribe(&self, s: Arc<dyn WriteSubscriber>) {
        let mut v = self.subs.write();
        v.push(s);
        self.active.store(true, Ordering::Release);
    }

    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }
}

/// Feeds a successful write command to the subscribers (called by the dispatcher).
/// Commands that changed nothing (a blocking command that blocked, a DEL of missing keys...)
/// never get here: `run_locked` decides.
/// `rewrite`: what the handler asked to propagate instead (`Ctx::propagate_as`).
pub fn propagate(ctx: &mut Ctx<'_>, args: &[&[u8]], rewrite: Option<Vec<Vec<Bytes>>>) {
    let p = &ctx.srv.persist.prop;
    let rewritten = match rewrite {
        Some(cmds) if cmds.len() != 1 => return propagate_many(ctx, cmds),
        Some(mut cmds) => cmds.pop(),
        None => None,
    };
    if ctx.in_exec {
        // Inside EXEC: collected, then fed as one MULTI ... EXEC block by `end_exec`.
        let owned = rewritten.unwrap_or_else(|| crate::cmd::owned_args(args));
        let db = ctx.ks.db;
        ctx.ks.fx.exec_writes.push((db, owned));
        return;
    }
    let view;
    let args = match &rewritten {
        Some(v) => {
            view = crate::cmd::arg_view(v);
            &view[..]
        }
        None => args,
    };
    let stripes = held_stripes(ctx);
    let w = Write {
        db: ctx.ks.db,
        args,
        stripes: &stripes,
        from_master: ctx.cl.from_master,
    };
    for s in p.subs.read().iter() {
        s.feed(&w);
    }
    ctx.cl.aof_mark = ctx.srv.persist.aof.written_mark();
}

/// Several commands standing for one (a stream read's XCLAIMs): none is sent for an empty
/// list, and more than one travel as MULTI ... EXEC (Redis 7.0's also-propagate).
fn propagate_many(ctx: &mut Ctx<'_>, cmds: Vec<Vec<Bytes>>) {
    if cmds.is_empty() {
        return;
    }
    if ctx.in_exec {
        let db = ctx.ks.db;
        ctx.ks
            .fx
            .exec_writes
            .extend(cmds.into_iter().map(|c| (db, c)));
        return;
    }
    let stripes = held_stripes(ctx);
    let subs = ctx.srv.persist.prop.subs.read();
    let from_master = ctx.cl.from_master;
    let feed = |args: &[&[u8]]| {
        let w = Write {
            db: ctx.ks.db,
            args,
            stripes: &stripes,
            from_master,
        };
        for s in subs.iter() {
            s.feed(&w);
        }
    };
    let wrap = cmds.len() > 1;
    if wrap {
        feed(&[b"MULTI"]);
    }
    for c in &cmds {
        feed(&crate::cmd::arg_view(c));
    }
    if wrap {
        feed(&[b"EXEC"]);
    }
    drop(subs);
    ctx.cl.aof_mark = ctx.srv.persist.aof.written_mark();
}

fn held_stripes(ctx: &Ctx<'_>) -> smallvec::SmallVec<[u16; 4]> {
    if ctx.ks.locks.all {
        smallvec::SmallVec::new()
    } else {
        ctx.ks.locks.guards.iter().map(|(i, _)| *i).collect()
    }
}

/// End of an EXEC (its locks still held): feeds its writes, wrapped in MULTI/EXEC when
/// there are several, so a crash never replays half a transaction.
pub fn end_exec(ctx: &mut Ctx<'_>) {
    let cmds = std::mem::take(&mut ctx.ks.fx.exec_writes);
    if cmds.is_empty() {
        return;
    }
    let p = &ctx.srv.persist.prop;
    let stripes = held_stripes(ctx);
    let subs = p.subs.read();
    let db0 = cmds[0].0;
    let wrap = cmds.len() > 1;
    let from_master = ctx.cl.from_master;
    let feed = |db: usize, args: &[&[u8]]| {
        let w = Write {
            db,
            args,
            stripes: &stripes,
            from_master,
        };
        for s in subs.iter() {
            s.feed(&w);
        }
    };
    if wrap {
        feed(db0, &[b"MULTI"]);
    }
    for (db, args) in &cmds {
        feed(*db, &crate::cmd::arg_view(args));
    }
    if wrap {
        feed(cmds[cmds.len() - 1].0, &[b"EXEC"]);
    }
    drop(subs);
    ctx.cl.aof_mark = ctx.srv.persist.aof.written_mark();
}

/// A key removed by expiry or eviction: subscribers get `DEL key` (called with the key's
/// stripe locked, so it is ordered with the commands on that key).
pub fn deleted(srv: &crate::server::Server, db: usize, key: &[u8]) {
    let p = &srv.persist.prop;
    if !p.active() {
        return;
    }
    let stripe = [crate::db::stripe_of(crate::slot::key_hash_slot(key)) as u16];
    let args: [&[u8]; 2] = [b"DEL", key];
    let w = Write {
        db,
        args: &args,
        stripes: &stripe,
        from_master: false,
    };
    for s in p.subs.read().iter() {
        s.feed(&w);
    }
}

/// The active expiry sweep of one locked stripe and database when there are subscribers:
/// like `Stripe::expire_sweep`, but each removed key is propagated as DEL.
pub fn expire_sweep(
    srv: &crate::server::Server,
    st: &mut crate::db::Stripe,
    db: usize,
    now: u64,
) -> usize {
    let mut dead: Vec<Vec<u8>> = Vec::new();
    if let Some(d) = st.db(db) {
        for m in d.maps.iter() {
            for (k, e) in m.iter() {
                let at = e.expire_at();
                if at != crate::db::NO_EXPIRE && at <= now {
                    dead.push(k.as_slice().to_vec());
                }
            }
        }
    }
    for k in &dead {
        let slot = crate::slot::key_hash_slot(k);
        if st.remove(db, slot, k).is_some() {
            deleted(srv, db, k);
            crate::notify::expired(srv, db, k);
        }
    }
    dead.len()
}
