//! Generic key commands: DEL UNLINK EXISTS TYPE EXPIRE* TTL PTTL EXPIRETIME PEXPIRETIME
//! PERSIST RENAME RENAMENX COPY MOVE KEYS SCAN RANDOMKEY TOUCH.

use bytes::Bytes;
use rand::Rng;

use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx};
use crate::db::{Entry, NO_EXPIRE, SLOTS_PER_STRIPE, STRIPES};
use crate::notify::GENERIC;
use crate::pubsub::glob_match;
use crate::slot::SLOTS;

pub fn commands() -> Vec<CommandSpec> {
    let s = |name, arity, fl, keys, h| CommandSpec::new(name, arity, fl, keys, h).group("generic");
    vec![
        s("del", -2, "write", (1, -1, 1), del),
        s("unlink", -2, "write fast", (1, -1, 1), unlink).since("4.0.0"),
        s("exists", -2, "readonly fast", (1, -1, 1), exists),
        s("type", 2, "readonly fast", (1, 1, 1), type_),
        s("expire", -3, "write fast", (1, 1, 1), expire),
        s("pexpire", -3, "write fast", (1, 1, 1), pexpire).since("2.6.0"),
        s("expireat", -3, "write fast", (1, 1, 1), expireat).since("1.2.0"),
        s("pexpireat", -3, "write fast", (1, 1, 1), pexpireat).since("2.6.0"),
        s("ttl", 2, "readonly fast", (1, 1, 1), ttl),
        s("pttl", 2, "readonly fast", (1, 1, 1), pttl).since("2.6.0"),
        s("expiretime", 2, "readonly fast", (1, 1, 1), expiretime).since("7.0.0"),
        s("pexpiretime", 2, "readonly fast", (1, 1, 1), pexpiretime).since("7.0.0"),
        s("persist", 2, "write fast", (1, 1, 1), persist).since("2.2.0"),
        s("rename", 3, "write", (1, 2, 1), rename),
        s("renamenx", 3, "write fast", (1, 2, 1), renamenx),
        s("copy", -3, "write denyoom", (1, 2, 1), copy).since("6.2.0"),
        s("move", 3, "write fast", (1, 1, 1), move_),
        s("keys", 2, "readonly global", (0, 0, 0), keys),
        s("scan", -2, "readonly global", (0, 0, 0), scan).since("2.8.0"),
        s("randomkey", 1, "readonly global", (0, 0, 0), randomkey),
        s("touch", -2, "readonly fast", (1, -1, 1), touch).since("3.2.1"),
    ]
}

fn del(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let lazy = ctx.srv.config.read().typed.lazyfree_lazy_user_del;
    del_keys(ctx, args, lazy)
}

/// UNLINK: DEL whose big values are freed on the lazyfree thread.
fn unlink(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    del_keys(ctx, args, true)
}

fn del_keys(ctx: &mut Ctx<'_>, args: &[&[u8]], lazy: bool) -> CmdResult {
    let mut n = 0;
    for k in &args[1..] {
        if let Some(e) = ctx.ks.remove(k) {
            if lazy {
                ctx.srv.stats.lazyfree.free_value(e.value);
            }
            ctx.notify(GENERIC, "del", k);
            n += 1;
        }
    }
    ctx.changed_by(n);
    ctx.out.int(n as i64);
    Ok(())
}

fn exists(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let n = args[1..].iter().filter(|k| ctx.ks.exists(k)).count();
    ctx.out.int(n as i64);
    Ok(())
}

fn touch(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let n = args[1..].iter().filter(|k| ctx.ks.get(k).is_some()).count();
    ctx.out.int(n as i64);
    Ok(())
}

fn type_(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let t = ctx
        .ks
        .get_w(args[1])
        .map(|v| v.type_name())
        .unwrap_or("none");
    ctx.out.simple(t);
    Ok(())
}

fn expire_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], unit: i64, absolute: bool) -> CmdResult {
    let name = String::from_utf8_lossy(args[0]).to_ascii_lowercase();
    let v = arg_i64(args[2])?;
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in &args[3..] {
        if eq_ic(a, "nx") {
            nx = true;
        } else if eq_ic(a, "xx") {
            xx = true;
        } else if eq_ic(a, "gt") {
            gt = true;
        } else if eq_ic(a, "lt") {
            lt = true;
        } else {
            return Err(CmdError::msg(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(a)
            )));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::msg(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(CmdError::msg(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    let bad = || CmdError::msg(format!("ERR invalid expire time in '{name}' command"));
    let ms = v.checked_mul(unit).ok_or_else(bad)?;
    let at = if absolute {
        ms
    } else {
        ms.checked_add(ctx.ks.now as i64).ok_or_else(bad)?
    };
    let Some(e) = ctx.ks.entry(args[1]) else {
        ctx.unchanged();
        ctx.out.int(0);
        return Ok(());
    };
    let cur = e.expire_at();
    let ok = if nx {
        cur == NO_EXPIRE
    } else if xx && cur == NO_EXPIRE {
        false
    } else if gt {
        cur != NO_EXPIRE && at > cur as i64
    } else if lt {
        cur == NO_EXPIRE || at < (cur as i64)
    } else {
        true
    };
    if !ok {
        ctx.unchanged();
        ctx.out.int(0);
        return Ok(());
    }
    if at <= ctx.ks.now as i64 {
        ctx.ks.del(args[1]);
        ctx.notify(GENERIC, "del", args[1]);
        // Replicas never expire keys themselves: they get the deletion (Redis 7.0).
        if ctx.propagating() {
            ctx.propagate_as(vec![
                Bytes::from_static(b"DEL"),
                Bytes::copy_from_slice(args[1]),
            ]);
        }
    } else {
        ctx.ks.set_expire(args[1], at as u64);
        ctx.notify(GENERIC, "expire", args[1]);
    }
    // Replicas and the AOF get the absolute deadline (PEXPIREAT) unless it already is.
    if at > ctx.ks.now as i64 && !(absolute && unit == 1) && ctx.propagating() {
        let mut v = vec![
            Bytes::from_static(b"PEXPIREAT"),
            Bytes::copy_from_slice(args[1]),
            num(at.max(0) as u64),
        ];
        v.extend(args[3..].iter().map(|a| Bytes::copy_from_slice(a)));
        ctx.propagate_as(v);
    }
    ctx.out.int(1);
    Ok(())
}

fn expire(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, 1000, false)
}
fn pexpire(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, 1, false)
}
fn expireat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, 1000, true)
}
fn pexpireat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, 1, true)
}

/// -2 missing, -1 no TTL, otherwise the deadline in unix ms.
fn deadline(ctx: &mut Ctx<'_>, key: &[u8]) -> i64 {
    match ctx.ks.entry(key) {
        None => -2,
        Some(e) if e.expire_at() == NO_EXPIRE => -1,
        Some(e) => e.expire_at() as i64,
    }
}

fn ttl_generic(ctx: &mut Ctx<'_>, key: &[u8], ms: bool) {
    let d = deadline(ctx, key);
    if d < 0 {
        ctx.out.int(d);
        return;
    }
    let left = (d - ctx.ks.now as i64).max(0);
    ctx.out.int(if ms { left } else { (left + 500) / 1000 });
}

fn ttl(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, args[1], false);
    Ok(())
}
fn pttl(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, args[1], true);
    Ok(())
}
fn expiretime(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let d = deadline(ctx, args[1]);
    ctx.out.int(if d < 0 { d } else { d / 1000 });
    Ok(())
}
fn pexpiretime(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let d = deadline(ctx, args[1]);
    ctx.out.int(d);
    Ok(())
}

fn persist(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let had = matches!(ctx.ks.entry(args[1]), Some(e) if e.expire_at() != NO_EXPIRE);
    if had {
        ctx.ks.set_expire(args[1], NO_EXPIRE);
        ctx.notify(GENERIC, "persist", args[1]);
    }
    ctx.changed_if(had);
    ctx.out.int(had as i64);
    Ok(())
}

fn rename_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], nx: bool) -> CmdResult {
    let (src, dst) = (&args[1], &args[2]);
    if !ctx.ks.exists(src) {
        return Err(CmdError::NoSuchKey);
    }
    if src == dst {
        ctx.unchanged();
        if nx {
            ctx.out.int(0);
        } else {
            ctx.out.ok();
        }
        return Ok(());
    }
    if nx && ctx.ks.exists(dst) {
        ctx.unchanged();
        ctx.out.int(0);
        return Ok(());
    }
    let e = ctx.ks.remove(src).ok_or(CmdError::NoSuchKey)?;
    let db = ctx.ks.db;
    // Redis deletes the destination, then adds it: its `new` event fires either way.
    ctx.ks.remove(dst);
    ctx.ks.insert_in(db, dst, e);
    ctx.notify(GENERIC, "rename_from", src);
    ctx.notify(GENERIC, "rename_to", dst);
    ctx.ks.signal_ready(dst);
    ctx.srv.watch.touch(db, src);
    if nx {
        ctx.out.int(1);
    } else {
        ctx.out.ok();
    }
    Ok(())
}

fn rename(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    rename_generic(ctx, args, false)
}
fn renamenx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    rename_generic(ctx, args, true)
}

fn parse_db(ctx: &Ctx<'_>, a: &[u8]) -> Result<usize, CmdError> {
    let n = arg_i64(a)?;
    if n < 0 || n as usize >= ctx.srv.ks.databases() {
        return Err(CmdError::msg("ERR DB index is out of range"));
    }
    Ok(n as usize)
}

fn copy(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut dstdb = ctx.ks.db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if eq_ic(args[i], "replace") {
            replace = true;
        } else if eq_ic(args[i], "db") && i + 1 < args.len() {
            dstdb = parse_db(ctx, args[i + 1])?;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let (src, dst) = (&args[1], &args[2]);
    let db = ctx.ks.db;
    if src == dst && db == dstdb {
        return Err(CmdError::msg(
            "ERR source and destination objects are the same",
        ));
    }
    let Some(e) = ctx.ks.lookup_in(db, src).cloned() else {
        ctx.unchanged();
        ctx.out.int(0);
        return Ok(());
    };
    if ctx.ks.lookup_in(dstdb, dst).is_some() {
        if !replace {
            ctx.unchanged();
            ctx.out.int(0);
            return Ok(());
        }
        ctx.ks.remove_in(dstdb, dst);
    }
    ctx.ks.insert_in(dstdb, dst, e);
    ctx.notify_in(dstdb, GENERIC, "copy_to", dst);
    if dstdb != db {
        ctx.srv.watch.touch(dstdb, dst);
    }
    ctx.out.int(1);
    Ok(())
}

fn move_(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let dstdb = parse_db(ctx, args[2])?;
    let db = ctx.ks.db;
    if dstdb == db {
        return Err(CmdError::msg(
            "ERR source and destination objects are the same",
        ));
    }
    let key = &args[1];
    if ctx.ks.lookup_in(db, key).is_none() || ctx.ks.lookup_in(dstdb, key).is_some() {
        ctx.unchanged();
        ctx.out.int(0);
        return Ok(());
    }
    let e: Entry = ctx.ks.remove_in(db, key).ok_or(CmdError::NoSuchKey)?;
    ctx.ks.insert_in(dstdb, key, e);
    ctx.notify_in(db, GENERIC, "move_from", key);
    ctx.notify_in(dstdb, GENERIC, "move_to", key);
    ctx.srv.watch.touch(dstdb, key);
    ctx.out.int(1);
    Ok(())
}

fn keys(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let pat = &args[1];
    let all = &pat[..] == b"*";
    let db = ctx.ks.db;
    let now = ctx.ks.now;
    let mut found: Vec<Vec<u8>> = Vec::new();
    let hidden = &ctx.srv.ks.hidden;
    ctx.ks.for_each_stripe(|i, st| {
        if let Some(d) = st.db(db) {
            let mask = hidden.stripe_mask(i);
            let shown = d.maps().filter(|(l, _)| crate::db::hidden::shown(mask, *l));
            for (_, m) in shown {
                for (k, e) in m {
                    if (e.expire_at() == NO_EXPIRE || e.expire_at() > now)
                        && (all || glob_match(pat, k, false))
                    {
                        found.push(k.to_vec());
                    }
                }
            }
        }
    });
    ctx.out.bulks(found.iter());
    Ok(())
}

/// SCAN's cursor is the next hash slot to visit, in stripe-major order: each call returns
/// whole slots, so a key present for the whole scan is always returned, whatever rehashing
/// happens in between. A call visits slots until COUNT keys were seen or the keyspace ends
/// (empty slots cost only a look), so a small keyspace comes back in one call, as in Redis.
fn scan(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let cursor: u64 = std::str::from_utf8(args[1])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| CmdError::msg("ERR invalid cursor"))?;
    let mut pat: Option<Bytes> = None;
    let mut count: i64 = 10;
    let mut ty: Option<String> = None;
    let mut i = 2;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Err(CmdError::Syntax);
        }
        if eq_ic(args[i], "match") {
            pat = Some(Bytes::copy_from_slice(args[i + 1]));
        } else if eq_ic(args[i], "count") {
            count = arg_i64(args[i + 1])?;
            if count < 1 {
                return Err(CmdError::Syntax);
            }
        } else if eq_ic(args[i], "type") {
            ty = Some(String::from_utf8_lossy(args[i + 1]).to_ascii_lowercase());
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let db = ctx.ks.db;
    let now = ctx.ks.now;
    // Position in stripe-major order: `pos / SLOTS_PER_STRIPE` is the stripe, the rest
    // its local slot, so one lock serves up to 16 slots.
    let mut pos = usize::try_from(cursor).unwrap_or(SLOTS).min(SLOTS);
    let srv = ctx.srv;
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut visited = 0i64;
    // Expired keys the pattern lets through, deleted as a lookup would (Redis's SCAN
    // calls expireIfNeeded on them).
    let mut dead: Vec<Vec<u8>> = Vec::new();
    while pos < SLOTS && visited < count {
        let sidx = pos / SLOTS_PER_STRIPE;
        let mut visit = |st: &mut crate::db::Stripe| {
            while pos < SLOTS && pos / SLOTS_PER_STRIPE == sidx && visited < count {
                let local = pos % SLOTS_PER_STRIPE;
                pos += 1;
                let Some(d) = st.db(db) else {
                    continue;
                };
                if srv.ks.hidden.is_hidden((local * STRIPES + sidx) as u16) {
                    continue;
                }
                for (k, e) in d.map(local).into_iter().flatten() {
                    visited += 1;
                    if pat.as_ref().is_some_and(|p| !glob_match(p, k, false)) {
                        continue;
                    }
                    if e.expire_at() != NO_EXPIRE && e.expire_at() <= now {
                        dead.push(k.to_vec());
                        continue;
                    }
                    if ty.as_ref().is_some_and(|t| t != e.value.type_name()) {
                        continue;
                    }
                    out.push(k.to_vec());
                }
                for k in dead.drain(..) {
                    expire_now(srv, st, db, &k);
                }
            }
        };
        match ctx.ks.locks.stripe(sidx) {
            Some(st) => visit(st),
            None => visit(&mut ctx.srv.ks.lock_stripe(sidx)),
        }
    }
    let next = if pos >= SLOTS { 0 } else { pos };
    ctx.out.array(2);
    ctx.out.bulk_int(next as i64);
    ctx.out.bulks(out.iter());
    Ok(())
}

/// Expired keys met on the way are deleted, as Redis's dbRandomKey does.
fn randomkey(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let db = ctx.ks.db;
    let now = ctx.ks.now;
    let srv = ctx.srv;
    let mut rng = rand::rng();
    let start = rng.random_range(0..SLOTS);
    let mut found: Option<Vec<u8>> = None;
    for off in 0..SLOTS {
        let slot = (start + off) % SLOTS;
        if srv.ks.hidden.is_hidden(slot as u16) {
            continue;
        }
        let sidx = slot & (STRIPES - 1);
        let local = slot >> 10;
        let pick = |st: &mut crate::db::Stripe| -> Option<Vec<u8>> {
            let m = st.db(db)?.map(local)?;
            if m.is_empty() {
                return None;
            }
            let (live, dead): (Vec<_>, Vec<_>) = m
                .iter()
                .partition(|(_, e)| e.expire_at() == NO_EXPIRE || e.expire_at() > now);
            let pick = (!live.is_empty())
                .then(|| live[rand::rng().random_range(0..live.len())].0.to_vec());
            let dead: Vec<Vec<u8>> = dead.iter().map(|(k, _)| k.to_vec()).collect();
            for k in dead {
                expire_now(srv, st, db, &k);
            }
            pick
        };
        found = match ctx.ks.locks.stripe(sidx) {
            Some(st) => pick(st),
            None => pick(&mut ctx.srv.ks.lock_stripe(sidx)),
        };
        if found.is_some() {
            break;
        }
    }
    match found {
        Some(k) => ctx.out.bulk(&k),
        None => ctx.out.null(),
    }
    Ok(())
}

/// Deletes `key` of `db`, found past its TTL by SCAN or RANDOMKEY, as a lookup would
/// (Redis's expireIfNeeded): counted, DEL to replicas and the AOF, the `expired` event. A
/// replica leaves it to its master; a pause keeps it until it ends.
fn expire_now(srv: &crate::server::Server, st: &mut crate::db::Stripe, db: usize, key: &[u8]) {
    if srv.repl.is_replica() || srv.clients_paused() {
        return;
    }
    let slot = crate::slot::key_hash_slot(key);
    if st.remove(db, slot, key).is_some() {
        srv.stats
            .expired_keys
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        crate::propagate::deleted(srv, db, key);
        crate::notify::expired(srv, db, key);
    }
}

/// `n` as a decimal argument.
pub(crate) fn num(n: u64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}
