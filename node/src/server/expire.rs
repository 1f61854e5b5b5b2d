//! The active expiry cycle: every 1/hz seconds, sweep stripes that hold keys with a TTL and
//! drop the expired ones, one stripe lock at a time, within a CPU budget (25% of a tick).

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{now_ms, Server};
use crate::db::{NO_EXPIRE, STRIPES};

pub async fn active_expire_loop(srv: Arc<Server>) {
    let mut cursor = 0usize;
    let mut idle_ticks = 0u32;
    loop {
        let hz = srv.config.read().typed.hz.clamp(1, 500);
        let tick = Duration::from_millis(1000 / hz);
        tokio::time::sleep(tick).await;
        // The same tick samples memory (the peak for INFO) and the keyspace's size
        // (whether pipelined key prefetch pays).
        let used = crate::alloc::used_memory();
        srv.memory_peak.fetch_max(used, Ordering::Relaxed);
        if let Some(keys) = srv.ks.estimated_keys() {
            super::prefetch::refresh(&srv, keys);
        }
        // MIGRATE's cached connections unused for 10 s are closed (Redis's serverCron).
        srv.migrate_sockets.close_idle();
        // Clients blocked on keys whose slot moved away or whose cluster went down.
        crate::blocking::redirect_cluster_waiters(&srv);
        // Nothing has a TTL: skip the sweep (it touches every stripe). A full sweep still
        // runs every 100 ticks, a safety net should the count ever miss a key.
        if srv.ks.volatile_keys() == 0 && idle_ticks < 100 {
            idle_ticks += 1;
            continue;
        }
        idle_ticks = 0;
        let budget = tick / 4;
        let s = srv.clone();
        let c = cursor;
        // The sweep takes locks; keep it off the async worker threads' fast path.
        let began = Instant::now();
        cursor = tokio::task::spawn_blocking(move || sweep(&s, c, budget))
            .await
            .unwrap_or(0);
        srv.latency.add_sample_if_needed(
            &srv.config.read().typed,
            "expire-cycle",
            began.elapsed().as_millis() as u64,
        );
    }
}

/// Keys a writable replica's own clients gave a TTL (Redis's `slaveKeysWithExpire`): the
/// master never sends a DEL for them, so the replica's expiry cycle removes them.
#[derive(Default)]
pub struct ReplicaTtls(parking_lot::Mutex<HashSet<(usize, Vec<u8>)>>);

impl ReplicaTtls {
    /// Called when a replica's own client sets a TTL on `key` of `db`.
    pub fn remember(&self, db: usize, key: &[u8]) {
        self.0.lock().insert((db, key.to_vec()));
    }

    /// How many keys are remembered (INFO's slave_expires_tracked_keys).
    pub fn len(&self) -> usize {
        self.0.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.lock().is_empty()
    }

    /// Removes the remembered keys that are past their TTL (Redis's `expireSlaveKeys`),
    /// forgetting those gone or without a TTL; at most `MAX` checks per call.
    fn sweep(&self, srv: &Server) {
        const MAX: usize = 1000;
        let batch: Vec<(usize, Vec<u8>)> = self.0.lock().iter().take(MAX).cloned().collect();
        for (db, key) in batch {
            let slot = crate::slot::key_hash_slot(&key);
            let mut st = srv.ks.lock_stripe(crate::db::stripe_of(slot));
            let at = st.get(db, slot, &key).map(|e| e.expire_at());
            let keep = match at {
                Some(at) if at != NO_EXPIRE && at <= now_ms() => {
                    st.remove(db, slot, &key);
                    srv.stats.expired_keys.fetch_add(1, Ordering::Relaxed);
                    crate::propagate::deleted(srv, db, &key);
                    crate::notify::expired(srv, db, &key);
                    false
                }
                Some(at) => at != NO_EXPIRE,
                None => false,
            };
            drop(st);
            if !keep {
                self.0.lock().remove(&(db, key));
            }
        }
    }
}

/// Sweeps stripes from `cursor` until the budget is spent or a full round is done.
/// Returns the next cursor.
pub fn sweep(srv: &Server, mut cursor: usize, budget: Duration) -> usize {
    // DEBUG SET-ACTIVE-EXPIRE 0: keys past their TTL go only when touched.
    if !srv.debug.active_expire.load(Ordering::Relaxed) {
        return cursor;
    }
    // A replica's keys expire by its master's DEL (crate::repl), never by its own clock,
    // except those its own clients gave a TTL.
    if srv.repl.is_replica() {
        srv.replica_ttls.sweep(srv);
        return cursor;
    }
    // A pause keeps the dataset still (Redis's activeExpireCycle returns while paused).
    if srv.clients_paused() {
        return cursor;
    }
    let start = Instant::now();
    let ndb = srv.ks.databases();
    for _ in 0..STRIPES {
        let now = now_ms();
        let mut st = srv.ks.lock_stripe(cursor);
        // Slots being imported expire on their source, which sends the DEL.
        let hidden = srv.ks.hidden.stripe_mask(cursor);
        let mut n = 0;
        for db in 0..ndb {
            if st.db(db).is_some_and(|d| d.volatile_len() > 0) {
                // The per-key path also sends client-side caching invalidations.
                n += if srv.persist.prop.active()
                    || srv.notify.on() != 0
                    || crate::tracking::live(srv)
                {
                    crate::propagate::expire_sweep(srv, &mut st, db, now, hidden)
                } else {
                    st.expire_sweep(db, now, hidden)
                };
            }
        }
        drop(st);
        if n > 0 {
            srv.stats
                .expired_keys
                .fetch_add(n as u64, Ordering::Relaxed);
        }
        cursor = (cursor + 1) % STRIPES;
        if start.elapsed() > budget {
            break;
        }
    }
    cursor
}
