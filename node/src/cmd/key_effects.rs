//! The dispatcher's per-key effects that need the command's key spec: read misses for
//! keyspace notifications (`keymiss`) and client-side caching (remembering a tracking
//! client's read keys, invalidating a write's keys). They live here, not in `notify` or
//! `tracking`, which sit below the command layer and take plain keys.

use super::{flags, CommandSpec, Ctx};
use crate::{notify, tracking};

/// State of one key before the command ran.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyState {
    pub exists: bool,
    pub ttl: bool,
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

/// A read command's key arguments that were missing before it ran (Redis's `keymiss`,
/// fired by its read lookups). None (and no work beyond one load) unless the 'm' class is
/// enabled and the command only reads.
#[inline]
pub fn missing_keys(ctx: &mut Ctx<'_>, cmd: &CommandSpec, args: &[&[u8]]) -> Option<Vec<usize>> {
    if ctx.srv.notify.on() & notify::KEY_MISS == 0 || !cmd.has(flags::READONLY) {
        return None;
    }
    let mut idx = Vec::new();
    cmd.key_indices(args, &mut idx);
    let db = ctx.ks.db;
    idx.retain(|&i| !state(ctx, db, args[i]).exists);
    Some(idx)
}

/// After a read command that succeeded: `keymiss` for the keys [`missing_keys`] found.
pub fn keymiss(ctx: &Ctx<'_>, args: &[&[u8]], missing: &[usize]) {
    for &i in missing {
        notify::emit(ctx.srv, notify::KEY_MISS, "keymiss", args[i], ctx.ks.db);
    }
}

/// Bit i set: the write command's i-th key (of the first 64) doesn't exist before it runs.
/// A key absent before and after was not modified: redis sends no invalidation for it
/// (DEL of a missing key, SET XX on one), while the command's key list can't tell.
pub fn absent_keys(ctx: &mut Ctx<'_>, cmd: &CommandSpec, args: &[&[u8]]) -> u64 {
    let mut idx = Vec::new();
    cmd.key_indices(args, &mut idx);
    let db = ctx.ks.db;
    let mut bits = 0u64;
    for (n, i) in idx.into_iter().enumerate().take(64) {
        if !state(ctx, db, args[i]).exists {
            bits |= 1 << n;
        }
    }
    bits
}

/// After a command ran (from `run_locked`): invalidates the keys a successful write
/// modified and remembers the keys a tracking client read. `absent`: from [`absent_keys`]
/// before the command ran.
pub fn track_after_run(
    ctx: &mut Ctx<'_>,
    cmd: &CommandSpec,
    args: &[&[u8]],
    ok: bool,
    writes: bool,
    absent: u64,
) {
    if ok && writes {
        // (FLUSHDB / FLUSHALL invalidate everything themselves: `tracking::on_flush`.)
        let mut idx = Vec::new();
        cmd.key_indices(args, &mut idx);
        let db = ctx.ks.db;
        for (n, i) in idx.into_iter().enumerate() {
            if n < 64 && absent & (1 << n) != 0 && !state(ctx, db, args[i]).exists {
                continue;
            }
            tracking::invalidate(ctx.srv, Some(ctx.cl.id), args[i]);
        }
        if ctx.cl.from_master {
            tracking::flush_bcast(ctx.srv);
        }
    }
    if !tracking::tracks_reads(ctx.cl.tracking)
        || !cmd.has(flags::READONLY)
        || cmd.has(flags::PUBSUB)
    {
        return;
    }
    if matches!(cmd.name, "eval_ro" | "evalsha_ro" | "fcall_ro") {
        return;
    }
    // A script's read: its caller tracks the keys the script declared (crate::script).
    if ctx.cl.in_script {
        return;
    }
    let mut idx = Vec::new();
    cmd.key_indices(args, &mut idx);
    if idx.is_empty() {
        return;
    }
    tracking::remember(ctx.srv, ctx.cl.id, idx.into_iter().map(|i| args[i]));
}
