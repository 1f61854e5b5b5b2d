//! Keyspace notifications (`notify-keyspace-events`, Redis 7.0 names and flag letters).
//!
//! A command handler records its events through its context (`crate::cmd::Ctx::notify`,
//! in Redis's order; a key's creation fires `new` by itself); the dispatcher publishes them
//! with [`publish`] after the handler succeeded. Read misses (`keymiss`) are found by the
//! dispatcher (`cmd::key_effects`, which reads the command's key spec) and sent by [`emit`];
//! expiry and eviction call [`expired`] / [`evicted`]. When
//! the setting is empty (the default) all of this costs one relaxed atomic load per
//! command ([`Notify::on`]).

use std::sync::atomic::{AtomicU32, Ordering};

use crate::server::Server;

// The class bits and the `notify-keyspace-events` letters are the config's encoding (the
// directive is parsed in the config layer); re-exported so events name their class here.
pub use crate::config::keyspace_events::*;

/// The active flags. Zero unless K or E and at least one class is set, so the dispatcher's
/// check is one load.
#[derive(Default)]
pub struct Notify {
    flags: AtomicU32,
}

impl Notify {
    /// Applies the flag bits the config layer parsed (`Config::notify_flags`).
    pub fn configure(&self, f: u32) {
        let effective = if f & (KEYSPACE | KEYEVENT) != 0 && f & !(KEYSPACE | KEYEVENT) != 0 {
            f
        } else {
            0
        };
        self.flags.store(effective, Ordering::Relaxed);
    }

    /// The active flags (0 = notifications off).
    #[inline]
    pub fn on(&self) -> u32 {
        self.flags.load(Ordering::Relaxed)
    }
}

/// Publishes one event (keyspace then keyevent channel, as Redis) if its class is enabled.
pub fn emit(srv: &Server, class: u32, event: &str, key: &[u8], db: usize) {
    let f = srv.notify.on();
    if f & class == 0 {
        return;
    }
    let limit = srv.config.read().cobl[2];
    let mut dbs = itoa::Buffer::new();
    let dbs = dbs.format(db);
    if f & KEYSPACE != 0 {
        let mut ch = Vec::with_capacity(16 + dbs.len() + key.len());
        ch.extend_from_slice(b"__keyspace@");
        ch.extend_from_slice(dbs.as_bytes());
        ch.extend_from_slice(b"__:");
        ch.extend_from_slice(key);
        srv.pubsub.publish(&ch, event.as_bytes(), limit);
    }
    if f & KEYEVENT != 0 {
        let mut ch = Vec::with_capacity(16 + dbs.len() + event.len());
        ch.extend_from_slice(b"__keyevent@");
        ch.extend_from_slice(dbs.as_bytes());
        ch.extend_from_slice(b"__:");
        ch.extend_from_slice(event.as_bytes());
        srv.pubsub.publish(&ch, key, limit);
    }
}

/// One keyspace event a command recorded (see `crate::cmd::Ctx::notify`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub class: u32,
    pub event: &'static str,
    pub key: bytes::Bytes,
    pub db: usize,
}

/// Publishes the events a command recorded, in order.
pub fn publish(srv: &Server, events: &[Event]) {
    for e in events {
        emit(srv, e.class, e.event, &e.key, e.db);
    }
}

/// A key removed because its TTL passed (lazily or by the active cycle).
#[inline]
pub fn expired(srv: &Server, db: usize, key: &[u8]) {
    if crate::tracking::live(srv) {
        crate::tracking::invalidate(srv, None, key);
        crate::tracking::flush_bcast(srv);
    }
    if srv.notify.on() & EXPIRED != 0 {
        emit(srv, EXPIRED, "expired", key, db);
    }
}

/// A key removed by maxmemory eviction.
#[inline]
pub fn evicted(srv: &Server, db: usize, key: &[u8]) {
    if crate::tracking::live(srv) {
        crate::tracking::invalidate(srv, None, key);
        crate::tracking::flush_bcast(srv);
    }
    if srv.notify.on() & EVICTED != 0 {
        emit(srv, EVICTED, "evicted", key, db);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_like_redis() {
        assert_eq!(to_config_string(parse("KEA").unwrap_or(0)), "AKE");
        assert_eq!(to_config_string(parse("Elg").unwrap_or(0)), "glE");
        assert_eq!(
            to_config_string(parse("g$lshzxetdKEmn").unwrap_or(0)),
            "AKEm"
        );
        assert_eq!(to_config_string(parse("KEn").unwrap_or(0)), "nKE");
        assert_eq!(to_config_string(parse("Kgd").unwrap_or(0)), "gdK");
        assert_eq!(to_config_string(parse("").unwrap_or(1)), "");
        assert!(parse("KEQ").is_none());
    }
}
