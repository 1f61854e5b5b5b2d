//! Write propagation: every command that changed the dataset, in execution order, in the
//! deterministic form its handler chose (`Ctx::propagate_as`: relative TTLs made absolute,
//! blocking pops as their non-blocking forms...; as received otherwise), fed to subscribers:
//! the AOF and replication. It sits beside notify and tracking, below the command layer and
//! below both of its consumers (it used to live in persist/, but it feeds replicas too).
//!
//! The dispatcher (`cmd::propagation`) feeds each write through [`Propagator::feed`] with
//! the command's locks still held, so the order subscribers see is the execution order for
//! every key; expiry and eviction feed their DELs here ([`deleted`], [`expire_sweep`]).
//! When no subscriber is registered the cost is one relaxed atomic load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

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

/// Who gets a propagated command (Redis's PROPAGATE_AOF / PROPAGATE_REPL targets).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Target {
    /// Replicas and the AOF: every write.
    #[default]
    All,
    /// Replicas only: PUBLISH and SPUBLISH outside cluster mode, which Redis forwards so
    /// that a replica's subscribers hear its master's messages, but never writes to disk.
    Replicas,
    /// The AOF only (a script's `redis.set_repl(redis.REPL_AOF)`).
    Aof,
}

/// A consumer of the write stream (AOF, replication).
pub trait WriteSubscriber: Send + Sync {
    /// Called with the command's key locks held: keep it short (buffer, don't block).
    fn feed(&self, w: &Write<'_>);

    /// True for a replication stream: it gets [`Target::Replicas`] commands and not
    /// [`Target::Aof`] ones. Every other subscriber is fed as the AOF is.
    fn is_replication(&self) -> bool {
        false
    }
}

impl Target {
    /// Whether a subscriber (a replication stream or not) gets a command of this target.
    fn reaches(self, replication: bool) -> bool {
        match self {
            Target::All => true,
            Target::Replicas => replication,
            Target::Aof => !replication,
        }
    }
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

    /// Removes `s` (compared by pointer); the last one out makes [`Propagator::active`]
    /// false again.
    pub fn unsubscribe(&self, s: &Arc<dyn WriteSubscriber>) {
        let mut v = self.subs.write();
        v.retain(|x| !Arc::ptr_eq(x, s));
        self.active.store(!v.is_empty(), Ordering::Release);
    }

    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Takes every subscriber out: DEBUG LOADAOF replays the AOF without feeding it back
    /// to the AOF or to replicas. [`Propagator::reattach`] puts them back.
    pub fn detach_all(&self) -> Vec<Arc<dyn WriteSubscriber>> {
        let mut v = self.subs.write();
        self.active.store(false, Ordering::Release);
        std::mem::take(&mut *v)
    }

    /// Puts back what [`Propagator::detach_all`] took (with any subscribed meanwhile).
    pub fn reattach(&self, subs: Vec<Arc<dyn WriteSubscriber>>) {
        let mut v = self.subs.write();
        v.extend(subs);
        self.active.store(!v.is_empty(), Ordering::Release);
    }

    /// Feeds the commands `cmds` ((db, args, target) each) of one write to their
    /// subscribers under one read of the list, wrapped in MULTI ... EXEC (for everyone)
    /// when there are several (Redis's also-propagate and EXEC: a crash never replays half
    /// of them; as in Redis, the AOF gets the MULTI/EXEC pair even when every command
    /// between them was for replicas only).
    pub fn feed<'c>(
        &self,
        cmds: &[(usize, &'c [&'c [u8]], Target)],
        stripes: &[u16],
        from_master: bool,
    ) {
        let (Some(first), Some(last)) = (cmds.first(), cmds.last()) else {
            return;
        };
        let subs = self.subs.read();
        let feed = |db: usize, args: &[&[u8]], target: Target| {
            let w = Write {
                db,
                args,
                stripes,
                from_master,
            };
            for s in subs.iter() {
                if target.reaches(s.is_replication()) {
                    s.feed(&w);
                }
            }
        };
        let wrap = cmds.len() > 1;
        if wrap {
            feed(first.0, &[b"MULTI"], Target::All);
        }
        for (db, args, target) in cmds {
            feed(*db, args, *target);
        }
        if wrap {
            feed(last.0, &[b"EXEC"], Target::All);
        }
    }
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
    hidden: u16,
) -> usize {
    let mut dead: Vec<Vec<u8>> = Vec::new();
    if let Some(d) = st.db(db) {
        let shown = d
            .maps()
            .filter(|(l, _)| crate::db::hidden::shown(hidden, *l));
        for (_, m) in shown {
            for (k, e) in m.iter() {
                let at = e.expire_at();
                if at != crate::db::NO_EXPIRE && at <= now {
                    dead.push(k.to_vec());
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
