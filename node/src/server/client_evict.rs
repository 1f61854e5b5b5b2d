//! Client eviction (`maxmemory-clients`, Redis 7.0): every normal and pub/sub client's
//! memory (query buffer, arguments, output, MULTI queue, subscriptions, watched keys, fixed
//! overhead) is summed; past the limit the biggest evictable clients are closed until the
//! sum is back under it. Replica and master links and CLIENT NO-EVICT clients are never
//! evicted (their memory still counts, as in Redis).

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::clients::{ClientHandle, KIND_MASTER, KIND_REPLICA};
use super::Server;

/// What a client costs beyond its buffers (Redis's `client` struct and its lists): an idle
/// Redis 7.0 client shows tot-mem = query buffer + reply buffer + about this.
pub const CLIENT_OVERHEAD: usize = 784;
/// Per watched key or subscription (a list node and its entry).
pub const ENTRY_OVERHEAD: usize = 48;
/// Per CLIENT TRACKING prefix: Redis estimates 32 bytes per node of the client's prefix
/// tree, a little over one node per prefix (measured with redis-server: a client adding
/// 12-byte prefixes grows by 36 bytes for each).
pub const PREFIX_OVERHEAD: usize = 36;

/// The memory of all clients, and the eviction counter (INFO evicted_clients).
#[derive(Default)]
pub struct ClientsMem {
    /// Sum of the charges of every client that counts (normal and pub/sub).
    total: AtomicUsize,
    /// maxmemory-clients in bytes as the connections last resolved it (0: off).
    limit: AtomicUsize,
    /// Clients evicted since the start (or CONFIG RESETSTAT).
    pub evicted: AtomicU64,
    /// One eviction pass at a time.
    pass: Mutex<()>,
    /// Bytes sent to clients' out-of-band queues (pub/sub, invalidations) that their
    /// connections have not taken yet. Signed: a take may be counted before its send.
    in_flight: AtomicI64,
}

impl ClientsMem {
    pub fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// Sets maxmemory-clients in bytes, as resolved from the configuration (0: off).
    pub fn set_limit(&self, bytes: usize) {
        self.limit.store(bytes, Ordering::Relaxed);
    }

    /// Whether maxmemory-clients is set.
    pub fn limited(&self) -> bool {
        self.limit.load(Ordering::Relaxed) > 0
    }

    /// Messages between threads (see `in_flight`): Redis writes a client's pending
    /// replies out before its next command, so key eviction does not count them
    /// (`evict::not_counted_memory`), or ten tracking clients' invalidations of the keys
    /// just evicted would make the next command evict ten times more.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed).max(0) as u64
    }

    /// Over maxmemory-clients (cheap: two loads).
    pub fn over(&self) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        limit > 0 && self.total() > limit
    }
}

/// One client's share of [`ClientsMem::total`]: what was last added for it, under a lock
/// so the connection and the tasks queueing messages to it never double count.
#[derive(Default)]
pub struct Charge {
    pool: OnceLock<Arc<ClientsMem>>,
    state: Mutex<ChargeState>,
    /// `state.charged`, readable without the lock: a connection recharges after every
    /// batch, and most batches leave its memory as it was.
    charged: AtomicUsize,
}

#[derive(Default)]
struct ChargeState {
    charged: usize,
    retired: bool,
    /// What eviction took off the pool and moved to `in_flight` until the connection,
    /// which holds the buffers, has ended ([`Charge::finish`]).
    dying: usize,
    finished: bool,
}

impl Charge {
    /// Joins the pool (once, when the connection is admitted).
    pub fn attach(&self, pool: Arc<ClientsMem>) {
        let _ = self.pool.set(pool);
    }

    /// Sets this client's memory to `bytes` (its charge in the pool follows).
    pub fn set(&self, bytes: usize) {
        // Unchanged: nothing to add. A client retired meanwhile stays retired either way.
        if self.charged.load(Ordering::Relaxed) == bytes {
            return;
        }
        let Some(pool) = self.pool.get() else {
            return;
        };
        let mut st = self.state.lock();
        if st.retired {
            return;
        }
        if bytes >= st.charged {
            pool.total.fetch_add(bytes - st.charged, Ordering::Relaxed);
        } else {
            pool.total.fetch_sub(st.charged - bytes, Ordering::Relaxed);
        }
        st.charged = bytes;
        self.charged.store(bytes, Ordering::Relaxed);
    }

    /// `n` bytes entered (positive) or left (negative) this client's out-of-band queue.
    pub fn in_flight(&self, n: i64) {
        if let Some(pool) = self.pool.get() {
            pool.in_flight.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The memory last charged.
    pub fn get(&self) -> usize {
        self.state.lock().charged
    }

    /// Retires an evicted client whose buffers its connection frees when it next runs:
    /// until then its memory counts as in flight, so key eviction does not take it for
    /// data (Redis frees an evicted client at once).
    pub fn retire_dying(&self) {
        let Some(pool) = self.pool.get() else {
            return;
        };
        let mut st = self.state.lock();
        if st.retired {
            return;
        }
        pool.total.fetch_sub(st.charged, Ordering::Relaxed);
        if !st.finished {
            st.dying = st.charged;
            pool.in_flight.fetch_add(st.dying as i64, Ordering::Relaxed);
        }
        st.charged = 0;
        self.charged.store(0, Ordering::Relaxed);
        st.retired = true;
    }

    /// The connection has ended and freed its buffers.
    pub fn finish(&self) {
        let Some(pool) = self.pool.get() else {
            return;
        };
        let mut st = self.state.lock();
        st.finished = true;
        pool.in_flight
            .fetch_sub(std::mem::take(&mut st.dying) as i64, Ordering::Relaxed);
    }

    /// Leaves the pool for good (the client is closing, evicted, or became a replica link).
    pub fn retire(&self) {
        let Some(pool) = self.pool.get() else {
            return;
        };
        let mut st = self.state.lock();
        if !st.retired {
            pool.total.fetch_sub(st.charged, Ordering::Relaxed);
            st.charged = 0;
            self.charged.store(0, Ordering::Relaxed);
            st.retired = true;
        }
    }
}

/// maxmemory-clients in bytes: a size, or a percentage of maxmemory (0 when maxmemory is).
pub fn limit_bytes(c: &crate::config::Settings) -> usize {
    let v = c.maxmemory_clients.as_str();
    if v == "0" {
        return 0;
    }
    match v.strip_suffix('%') {
        Some(p) => {
            let p: u64 = p.parse().unwrap_or(0);
            (c.maxmemory.saturating_mul(p) / 100) as usize
        }
        None => crate::config::parse_memory(v).unwrap_or(0) as usize,
    }
}

/// Whether eviction may pick this client.
fn evictable(h: &ClientHandle) -> bool {
    !h.no_evict.load(Ordering::Relaxed)
        && !h.killed.load(Ordering::Relaxed)
        && !matches!(h.kind.load(Ordering::Relaxed), KIND_REPLICA | KIND_MASTER)
}

/// Redis's evictClients: while the clients' memory is over maxmemory-clients, closes the
/// biggest evictable client. Returns how many were evicted.
pub fn evict(srv: &Server) -> usize {
    let pool = &srv.clients.mem;
    if !pool.over() {
        return 0;
    }
    let _pass = pool.pass.lock();
    let mut cands: Vec<(usize, Arc<ClientHandle>)> = srv
        .clients
        .all()
        .into_iter()
        .filter(|h| evictable(h))
        .map(|h| (h.charge.get(), h))
        .collect();
    // Biggest first (Redis walks power-of-two buckets from the top; exact order here).
    cands.sort_by_key(|c| std::cmp::Reverse(c.0));
    let mut n = 0;
    for (_, h) in cands {
        if !pool.over() {
            break;
        }
        tracing::debug!("Evicting client: {}", h.info_line(srv));
        h.charge.retire_dying();
        h.kill();
        pool.evicted.fetch_add(1, Ordering::Relaxed);
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_follow_the_client() {
        let pool = Arc::new(ClientsMem::default());
        let a = Charge::default();
        let b = Charge::default();
        a.attach(pool.clone());
        b.attach(pool.clone());
        a.set(100);
        b.set(50);
        a.set(30);
        assert_eq!(pool.total(), 80);
        a.retire();
        a.set(1000);
        assert_eq!(pool.total(), 50);
        b.retire();
        assert_eq!(pool.total(), 0);
    }

    /// An evicted client's memory is in flight until its connection ends, once.
    #[test]
    fn evicted_client_is_in_flight_until_its_connection_ends() {
        let pool = Arc::new(ClientsMem::default());
        let (a, b) = (Charge::default(), Charge::default());
        a.attach(pool.clone());
        b.attach(pool.clone());
        a.set(100);
        b.set(70);
        a.retire_dying();
        assert_eq!((pool.total(), pool.in_flight()), (70, 100));
        a.retire_dying();
        a.finish();
        assert_eq!((pool.total(), pool.in_flight()), (70, 0));
        a.finish();
        assert_eq!(pool.in_flight(), 0);
        // Ended before eviction got to it: nothing left to free.
        b.finish();
        b.retire_dying();
        assert_eq!((pool.total(), pool.in_flight()), (0, 0));
    }
}
