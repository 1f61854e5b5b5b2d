//! [`tessera_cluster::Host`] over the node's per-slot keyspace and pub/sub.
//!
//! Holds a `Weak` so the cluster node (owned by the server) does not keep the server alive.
//! Callbacks lock one stripe at a time and never run under the cluster state lock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use crate::db::stripe_of;
use crate::server::Server;

/// Cluster mode uses database 0 only (SELECT is refused).
const DB: usize = 0;

pub struct KeyspaceHost {
    srv: Weak<Server>,
    /// Client writes are paused by a manual failover (not by CLIENT PAUSE).
    paused: AtomicBool,
}

impl KeyspaceHost {
    pub fn new(srv: &Arc<Server>) -> Self {
        KeyspaceHost {
            srv: Arc::downgrade(srv),
            paused: AtomicBool::new(false),
        }
    }
}

/// Number of keys in `slot` of db 0 (one stripe lock, O(1)).
pub fn count_keys(srv: &Server, slot: u16) -> usize {
    let st = srv.ks.lock_stripe(stripe_of(slot));
    st.map(DB, slot).map(|m| m.len()).unwrap_or(0)
}

/// Keys of database 0 per slot, all 16384 of them: each stripe is locked once, for the
/// slots it holds.
pub fn slot_key_counts(srv: &Server) -> Vec<usize> {
    let mut out = vec![0; crate::slot::SLOTS];
    for stripe in 0..crate::db::STRIPES {
        let st = srv.ks.lock_stripe(stripe);
        let mut slot = stripe;
        while slot < out.len() {
            out[slot] = st.map(DB, slot as u16).map_or(0, |m| m.len());
            slot += crate::db::STRIPES;
        }
    }
    out
}

/// Up to `count` key names of `slot`, expired ones included (as Redis's GETKEYSINSLOT).
pub fn keys(srv: &Server, slot: u16, count: usize) -> Vec<Vec<u8>> {
    let st = srv.ks.lock_stripe(stripe_of(slot));
    match st.map(DB, slot) {
        Some(m) => m.iter().take(count).map(|(k, _)| k.to_vec()).collect(),
        None => Vec::new(),
    }
}

/// Deletes every key of `slot` in every database; returns how many.
pub fn delete_slot(srv: &Server, slot: u16) -> usize {
    let mut st = srv.ks.lock_stripe(stripe_of(slot));
    let mut n = 0;
    for db in 0..srv.ks.databases() {
        let names: Vec<Vec<u8>> = match st.map(db, slot) {
            Some(m) => m.iter().map(|(k, _)| k.to_vec()).collect(),
            None => continue,
        };
        for k in names {
            if st.remove(db, slot, &k).is_some() {
                // As Redis 7.0's delKeysInSlot: replicas and the AOF lose the key too.
                crate::propagate::deleted(srv, db, &k);
                n += 1;
            }
        }
    }
    n
}

/// Keys in db 0 (locks stripes one at a time).
pub fn db_size(srv: &Server) -> usize {
    (0..crate::db::STRIPES)
        .map(|i| {
            let st = srv.ks.lock_stripe(i);
            st.db(DB).map(|d| d.len()).unwrap_or(0)
        })
        .sum()
}

impl tessera_cluster::Host for KeyspaceHost {
    /// With tls-cluster: the server side the TLS port uses (reloaded by CONFIG SET) and a
    /// client side made from the current tls-* settings.
    fn bus_tls(&self) -> Result<Option<tessera_cluster::BusTls>, String> {
        let Some(s) = self.srv.upgrade() else {
            return Ok(None);
        };
        let config = s.config.read();
        if !config.typed.tls_cluster {
            return Ok(None);
        }
        let client = crate::server::tls::client_config(&config).map_err(|e| e.to_string())?;
        drop(config);
        let server = s
            .tls
            .load_full()
            .ok_or_else(|| "the TLS settings are not loaded".to_string())?;
        Ok(Some(tessera_cluster::BusTls { server, client }))
    }

    fn count_keys_in_slot(&self, slot: u16) -> usize {
        self.srv
            .upgrade()
            .map(|s| count_keys(&s, slot))
            .unwrap_or(0)
    }

    fn keys_in_slot(&self, slot: u16, count: usize) -> Vec<Vec<u8>> {
        self.srv
            .upgrade()
            .map(|s| keys(&s, slot, count))
            .unwrap_or_default()
    }

    fn delete_keys_in_slot(&self, slot: u16) -> usize {
        let Some(s) = self.srv.upgrade() else {
            return 0;
        };
        let n = delete_slot(&s, slot);
        // A slot lost to a newer owner may be an export's hand-off: its task looks at
        // once instead of at its next tick (writes stay paused until it does).
        s.asm.changed.notify_waiters();
        n
    }

    fn db_size(&self) -> usize {
        self.srv.upgrade().map(|s| db_size(&s)).unwrap_or(0)
    }

    fn flush_all(&self) {
        if let Some(s) = self.srv.upgrade() {
            for slot in 0..crate::slot::SLOTS as u16 {
                delete_slot(&s, slot);
            }
        }
    }

    fn set_replication_master(&self, master: Option<(String, u16)>) {
        if let Some(s) = self.srv.upgrade() {
            // A master demoted by a manual failover lifts its pause: it follows the new
            // master's stream from now on.
            if master.is_some() && self.paused.swap(false, Ordering::SeqCst) {
                s.pause.lift();
            }
            crate::repl::set_master(&s, master);
            // Losing the last slot (an export's hand-off) makes a master a replica.
            s.asm.changed.notify_waiters();
        }
    }

    /// Whom the replica link follows (REPLICAOF is refused in cluster mode, so only the
    /// cluster sets it); the cluster cron re-points it when it is not our master's address.
    fn replication_master(&self) -> Option<Option<(String, u16)>> {
        let s = self.srv.upgrade()?;
        let m = s.repl.master.lock();
        Some(m.as_ref().map(|t| (t.host.clone(), t.port)))
    }

    /// CLUSTER FAILOVER on our replica: pause client writes, wait for the writes already
    /// running to finish (every stripe locked once), and return the final replication
    /// offset, which the PAUSED pings announce to the replica.
    fn pause_writes(&self, until_ms: u64) -> Option<u64> {
        let s = self.srv.upgrade()?;
        if until_ms == 0 {
            if self.paused.swap(false, Ordering::SeqCst) {
                s.pause.lift();
            }
            return None;
        }
        self.paused.store(true, Ordering::SeqCst);
        s.pause.write_only.store(true, Ordering::SeqCst);
        s.pause.until.store(until_ms, Ordering::SeqCst);
        drop(s.ks.lock_all());
        let offset = s.repl.shared.lock().offset;
        Some(offset)
    }

    fn refresh_config(&self, config: &mut tessera_cluster::ClusterConfig) {
        if let Some(s) = self.srv.upgrade() {
            crate::cluster::refresh_config(&s, config);
        }
    }

    fn loading(&self) -> bool {
        self.srv
            .upgrade()
            .is_some_and(|s| s.persist.loading.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn drop_packet_filter(&self) -> i64 {
        self.srv
            .upgrade()
            .map(|s| {
                s.debug
                    .cluster_drop_packet_filter
                    .load(std::sync::atomic::Ordering::Relaxed)
            })
            .unwrap_or(-1)
    }

    fn publish_local(&self, channel: &[u8], message: &[u8], shard: bool) {
        let Some(s) = self.srv.upgrade() else { return };
        let limit = s.config.read().cobl[2];
        if shard {
            s.pubsub.spublish(channel, message, limit);
        } else {
            s.pubsub.publish(channel, message, limit);
        }
    }
}
