//! Keyspace notifications (`notify-keyspace-events`, Redis 7.0 names and flag letters).
//!
//! A command handler records its events through its context (`crate::cmd::Ctx::notify`,
//! in Redis's order; a key's creation fires `new` by itself); the dispatcher publishes them
//! with [`publish`] after the handler succeeded. Read misses (`keymiss`) are found by the
//! dispatcher ([`missing_keys`]); expiry and eviction call [`expired`] / [`evicted`]. When
//! the setting is empty (the default) all of this costs one relaxed atomic load per
//! command ([`Notify::on`]).

use std::sync::atomic::{AtomicU32, Ordering};

use crate::cmd::{flags, CommandSpec, Ctx};
use crate::server::Server;

// Redis's NOTIFY_* bits (server.h), so the letters map one to one.
pub const KEYSPACE: u32 = 1 << 0;
pub const KEYEVENT: u32 = 1 << 1;
pub const GENERIC: u32 = 1 << 2;
pub const STRING: u32 = 1 << 3;
pub const LIST: u32 = 1 << 4;
pub const SET: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const ZSET: u32 = 1 << 7;
pub const EXPIRED: u32 = 1 << 8;
pub const EVICTED: u32 = 1 << 9;
pub const STREAM: u32 = 1 << 10;
pub const KEY_MISS: u32 = 1 << 11;
pub const MODULE: u32 = 1 << 12;
pub const NEW: u32 = 1 << 13;
/// The 'A' alias: every class but key-miss and new.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Where the config keeps the parsed flags: the shown string can lose bits (Redis 7.0
/// doesn't print 'n' next to 'A'), so the bits are stored beside it.
pub const FLAGS_KEY: &str = "notify-keyspace-events-flags";

/// Validates a config value (config file and CONFIG SET): the string CONFIG GET shows and
/// the flag bits, or Redis's reason.
pub fn normalize(value: &str) -> Result<(String, u32), String> {
    parse(value)
        .map(|f| (to_config_string(f), f))
        .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string())
}

/// Parses a `notify-keyspace-events` value; None on an unknown letter (Redis refuses it).
pub fn parse(s: &str) -> Option<u32> {
    let mut f = 0;
    for c in s.chars() {
        f |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(f)
}

/// The normalized string CONFIG GET shows (Redis's `keyspaceEventsFlagsToString`).
pub fn to_config_string(f: u32) -> String {
    let mut s = String::new();
    if f & ALL == ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if f & bit != 0 {
                s.push(c);
            }
        }
    }
    // Redis 7.0 shows 'n' only without 'A' (it sits in the class branch).
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if f & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// The active flags. Zero unless K or E and at least one class is set, so the dispatcher's
/// check is one load.
#[derive(Default)]
pub struct Notify {
    flags: AtomicU32,
}

impl Notify {
    /// Applies the flag bits stored by the config layer (see [`FLAGS_KEY`]).
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
    if crate::tracking::live() {
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
    if crate::tracking::live() {
        crate::tracking::invalidate(srv, None, key);
        crate::tracking::flush_bcast(srv);
    }
    if srv.notify.on() & EVICTED != 0 {
        emit(srv, EVICTED, "evicted", key, db);
    }
}

/// State of one key before the command ran.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyState {
    pub exists: bool,
    pub ttl: bool,
}

/// A read command's key arguments that were missing before it ran (Redis's `keymiss`,
/// fired by its read lookups). None (and no work beyond one load) unless the 'm' class is
/// enabled and the command only reads.
#[inline]
pub fn missing_keys(ctx: &mut Ctx<'_>, cmd: &CommandSpec, args: &[&[u8]]) -> Option<Vec<usize>> {
    if ctx.srv.notify.on() & KEY_MISS == 0 || !cmd.has(flags::READONLY) {
        return None;
    }
    let mut idx = Vec::new();
    cmd.key_indices(args, &mut idx);
    let db = ctx.ks.db;
    idx.retain(|&i| !state(ctx, db, args[i]).exists);
    Some(idx)
}

/// The state of `key` in `db` now.
pub fn state(ctx: &mut Ctx<'_>, db: usize, key: &[u8]) -> KeyState {
    match ctx.ks.lookup_in(db, key) {
        Some(e) => KeyState {
            exists: true,
            ttl: e.expire_at() != crate::db::NO_EXPIRE,
        },
        None => KeyState::default(),
    }
}

/// After a read command that succeeded: `keymiss` for the keys [`missing_keys`] found.
pub fn keymiss(ctx: &Ctx<'_>, args: &[&[u8]], missing: &[usize]) {
    for &i in missing {
        emit(ctx.srv, KEY_MISS, "keymiss", args[i], ctx.ks.db);
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
