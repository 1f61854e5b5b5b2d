//! Clients blocked on keys (BLPOP, BRPOP, BLMOVE, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP).
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
//! behalf (`ctx.serving_blocked = true`); the first one served gets the data, later ones are
//! tried while the command keeps serving. A client that times out gets a null array.
//!
//! The reply of a served client travels back to its connection through a oneshot channel,
//! and is produced before the pushing client's own reply is flushed (Redis's ordering).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::server::{ClientState, Server};

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

struct Waiter {
    db: usize,
    keys: Vec<Bytes>,
    args: Vec<Bytes>,
    resp3: bool,
    client_id: u64,
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
}

#[derive(Default)]
pub struct Blocking {
    state: Mutex<State>,
    count: AtomicUsize,
    next_id: AtomicU64,
}

impl Blocking {
    /// True when at least one client is blocked (a lock-free check for the hot path).
    #[inline]
    pub fn has_waiters(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    pub fn blocked_clients(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn register(
        &self,
        req: BlockRequest,
        cl: &ClientState,
        args: &[&[u8]],
        resp3: bool,
    ) -> WaitHandle {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = oneshot::channel();
        let mut st = self.state.lock();
        for k in &req.keys {
            st.by_key
                .entry((req.db, k.clone()))
                .or_default()
                .push_back(id);
        }
        st.waiters.insert(
            id,
            Waiter {
                db: req.db,
                keys: req.keys,
                args: req.args.unwrap_or_else(|| crate::cmd::owned_args(args)),
                resp3,
                client_id: cl.id,
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

    fn detach(st: &mut State, id: u64) -> Option<Waiter> {
        let w = st.waiters.remove(&id)?;
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
    /// builds. False if that client is not blocked on keys.
    pub fn unblock(&self, client_id: u64, reply: impl FnOnce(bool, &[u8]) -> BytesMut) -> bool {
        let mut st = self.state.lock();
        let Some(id) = st
            .waiters
            .iter()
            .find(|(_, w)| w.client_id == client_id)
            .map(|(id, _)| *id)
        else {
            return false;
        };
        let Some(w) = Self::detach(&mut st, id) else {
            return false;
        };
        drop(st);
        self.count.fetch_sub(1, Ordering::Relaxed);
        let name = w.args.first().map(|a| &a[..]).unwrap_or_default();
        let _ = w.tx.send(reply(w.resp3, name));
        true
    }

    /// The client ids blocked right now (CLIENT LIST flags).
    pub fn is_blocked(&self, client_id: u64) -> bool {
        self.state
            .lock()
            .waiters
            .values()
            .any(|w| w.client_id == client_id)
    }

    /// Takes the first waiter of a key, out of every queue it is in.
    fn take_first(&self, db: usize, key: &Bytes) -> Option<(u64, Waiter)> {
        let mut st = self.state.lock();
        let id = *st.by_key.get(&(db, key.clone()))?.front()?;
        let w = Self::detach(&mut st, id)?;
        Some((id, w))
    }

    /// Puts back a waiter that could not be served, at the front of its queues.
    fn put_back(&self, id: u64, w: Waiter) {
        let mut st = self.state.lock();
        for k in &w.keys {
            st.by_key
                .entry((w.db, k.clone()))
                .or_default()
                .push_front(id);
        }
        st.waiters.insert(id, w);
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
            loop {
                let Some((id, w)) = srv.blocking.take_first(db, &key) else {
                    break;
                };
                if w.tx.is_closed() {
                    // The connection went away: forget it, try the next one.
                    srv.blocking.count.fetch_sub(1, Ordering::Relaxed);
                    continue;
                }
                match crate::cmd::transaction::run_for_waiter(
                    srv,
                    w.db,
                    w.client_id,
                    w.resp3,
                    &crate::cmd::arg_view(&w.args),
                ) {
                    Some((reply, more)) => {
                        srv.blocking.count.fetch_sub(1, Ordering::Relaxed);
                        let _ = w.tx.send(reply);
                        next.extend(more);
                    }
                    None => {
                        srv.blocking.put_back(id, w);
                        break;
                    }
                }
            }
        }
        ready = next;
    }
}
