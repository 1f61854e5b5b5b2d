//! XCLAIM, XAUTOCLAIM and XSETID (Redis 7.0.15's t_stream.c).

use bytes::Bytes;
use tessera_rdb::StreamId;

use super::stream::{fmt_id, get_stream_w, parse_bound, parse_id, write_entry, StreamFx};
use super::stream_group::consumer_entry;
use super::{eq_ic, CmdError, CmdResult, CommandSpec, Ctx};
use crate::types::parse_i64_strict;
use crate::types::stream::{Group, Pending, StreamValue};

pub fn commands() -> Vec<CommandSpec> {
    let c = |name, arity, fl, keys, h| {
        CommandSpec::new(name, arity, fl, keys, h)
            .group("stream")
            .since("5.0.0")
    };
    vec![
        c("xclaim", -6, "write fast", (1, 1, 1), xclaim),
        c("xautoclaim", -6, "write fast", (1, 1, 1), xautoclaim).since("6.2.0"),
        c("xsetid", -3, "write denyoom fast", (1, 1, 1), xsetid),
    ]
}

fn int_or(b: &[u8], msg: &'static str) -> Result<i64, CmdError> {
    parse_i64_strict(b).ok_or(CmdError::msg(msg))
}

fn nogroup(args: &[&[u8]]) -> CmdError {
    CmdError::msg(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(args[1]),
        String::from_utf8_lossy(args[2])
    ))
}

/// Moves pending entry `id` to consumer `name` (created if missing), as XCLAIM/XAUTOCLAIM do.
fn transfer(fx: &mut StreamFx, g: &mut Group, key: &[u8], id: StreamId, name: &[u8], now: u64) {
    let old = g.pel.get(&id).map(|p| p.owner.clone());
    if let Some(old) = old {
        if &old[..] != name {
            if let Some(c) = g.consumers.get_mut(&old) {
                c.pending.remove(&id);
            }
        }
    }
    if !g.consumers.contains_key(name) {
        fx.event("xgroup-createconsumer", key);
        fx.add_changes(1);
    }
    fx.add_changes(1);
    let c = consumer_entry(g, name, now);
    c.seen_time = now;
    c.pending.insert(id);
    if let Some(p) = g.pel.get_mut(&id) {
        p.owner = Bytes::copy_from_slice(name);
    }
}

/// Drops pending entry `id` (its stream entry is gone); replicas get it as an XCLAIM to
/// its owner, which drops it there too (Redis 7.0).
fn drop_pending(fx: &mut StreamFx, g: &mut Group, key: &[u8], group: &[u8], id: StreamId) {
    if let Some(p) = g.pel.remove(&id) {
        fx.add_changes(1);
        super::stream::push_xclaim(fx, key, group, id, &p, g.last_id);
        if let Some(c) = g.consumers.get_mut(&p.owner) {
            c.pending.remove(&id);
        }
    }
}

/// Redis 7.0's streamPropagateGroupID: `XGROUP SETID key group <last id> ENTRIESREAD <n>`.
pub(super) fn push_setid(fx: &mut StreamFx, key: &[u8], group: &[u8], g: &Group) {
    if !fx.collects() {
        return;
    }
    let st = |s: &'static str| Bytes::from_static(s.as_bytes());
    fx.push_rewrite(vec![
        st("XGROUP"),
        st("SETID"),
        Bytes::copy_from_slice(key),
        Bytes::copy_from_slice(group),
        Bytes::from(fmt_id(g.last_id)),
        st("ENTRIESREAD"),
        Bytes::from(g.entries_read.to_string()),
    ]);
}

fn claimed_reply(out: &mut crate::resp::Out, s: &StreamValue, id: StreamId, justid: bool) {
    if justid {
        out.bulk(fmt_id(id).as_bytes());
    } else if let Some(p) = s.entries.get(id) {
        write_entry(out, id, p);
    }
}

fn xclaim(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.metadata_only();
    let mut fx = StreamFx::rewriting(ctx);
    let r = xclaim_run(ctx, args, &mut fx);
    fx.finish(ctx);
    r
}

fn xclaim_run(ctx: &mut Ctx<'_>, args: &[&[u8]], fx: &mut StreamFx) -> CmdResult {
    let now = ctx.ks.now;
    let Some(s) = get_stream_w(&mut ctx.ks, args[1])? else {
        return Err(nogroup(args));
    };
    if !s.groups.contains_key(args[2]) {
        return Err(nogroup(args));
    }
    let minidle = int_or(args[4], "ERR Invalid min-idle-time argument for XCLAIM")?.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match parse_id(args[j], 0, true, false) {
            Ok((id, _)) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let (mut force, mut justid, mut retry, mut delivery) = (false, false, -1i64, -1i64);
    let mut last_id = StreamId::default();
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args[j];
        if eq_ic(opt, "force") {
            force = true;
        } else if eq_ic(opt, "justid") {
            justid = true;
        } else if eq_ic(opt, "idle") && more > 0 {
            j += 1;
            let v = int_or(args[j], "ERR Invalid IDLE option argument for XCLAIM")?;
            delivery = (now as i64).wrapping_sub(v);
        } else if eq_ic(opt, "time") && more > 0 {
            j += 1;
            delivery = int_or(args[j], "ERR Invalid TIME option argument for XCLAIM")?;
        } else if eq_ic(opt, "retrycount") && more > 0 {
            j += 1;
            retry = int_or(args[j], "ERR Invalid RETRYCOUNT option argument for XCLAIM")?;
        } else if eq_ic(opt, "lastid") && more > 0 {
            j += 1;
            last_id = parse_id(args[j], 0, true, false)?.0;
        } else {
            return Err(CmdError::msg(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(opt)
            )));
        }
        j += 1;
    }
    let delivery = if delivery < 0 || delivery > now as i64 {
        now
    } else {
        delivery as u64
    };
    // LASTID applies before the claims (their XCLAIMs carry it), as in Redis 7.0.
    let mut advanced = false;
    if let Some(g) = s.groups.get_mut(args[2]) {
        if last_id > g.last_id {
            g.last_id = last_id;
            advanced = true;
        }
    }
    let mut body = crate::resp::Out::new(ctx.out.resp3);
    let mut n = 0usize;
    let name = args[3];
    for id in ids {
        let exists = s.entries.contains_key(id);
        let Some(g) = s.groups.get_mut(args[2]) else {
            break;
        };
        if !exists {
            drop_pending(fx, g, args[1], args[2], id);
            continue;
        }
        let mut fresh = false;
        if force && !g.pel.contains_key(&id) {
            g.pel.insert(
                id,
                Pending {
                    delivery_time: now,
                    delivery_count: 1,
                    owner: Bytes::new(),
                },
            );
            fresh = true;
        }
        let Some(p) = g.pel.get(&id) else {
            continue;
        };
        if !fresh && minidle > 0 && (now as i64 - p.delivery_time as i64) < minidle {
            continue;
        }
        transfer(fx, g, args[1], id, name, now);
        if let Some(p) = g.pel.get_mut(&id) {
            p.delivery_time = delivery;
            if retry >= 0 {
                p.delivery_count = retry as u64;
            } else if !justid {
                p.delivery_count += 1;
            }
        }
        if let Some(p) = g.pel.get(&id) {
            super::stream::push_xclaim(fx, args[1], args[2], id, p, g.last_id);
        }
        claimed_reply(&mut body, s, id, justid);
        n += 1;
    }
    if advanced {
        if let Some(g) = s.groups.get(args[2]) {
            push_setid(fx, args[1], args[2], g);
        }
    }
    ctx.out.array(n);
    ctx.out.raw(&body.buf);
    Ok(())
}

fn xautoclaim(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.metadata_only();
    let mut fx = StreamFx::rewriting(ctx);
    let r = xautoclaim_run(ctx, args, &mut fx);
    fx.finish(ctx);
    r
}

fn xautoclaim_run(ctx: &mut Ctx<'_>, args: &[&[u8]], fx: &mut StreamFx) -> CmdResult {
    let now = ctx.ks.now;
    let minidle = int_or(args[4], "ERR Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let start = parse_bound(args[5], true)?;
    let (mut count, mut justid) = (100i64, false);
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if eq_ic(args[j], "count") && more > 0 {
            let max = i64::MAX / 16;
            count = match parse_i64_strict(args[j + 1]) {
                Some(v) if (1..=max).contains(&v) => v,
                _ => return Err(CmdError::msg("ERR COUNT must be > 0")),
            };
            j += 1;
        } else if eq_ic(args[j], "justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let Some(s) = get_stream_w(&mut ctx.ks, args[1])? else {
        return Err(nogroup(args));
    };
    if !s.groups.contains_key(args[2]) {
        return Err(nogroup(args));
    }
    let mut attempts = count.saturating_mul(10);
    let name = args[3];
    let mut body = crate::resp::Out::new(ctx.out.resp3);
    let (mut claimed, mut deleted) = (0usize, Vec::new());
    let mut cursor = start;
    let mut next: Option<StreamId>;
    loop {
        next = s
            .groups
            .get(args[2])
            .and_then(|g| g.pel.range(cursor..).next().map(|(id, _)| *id));
        if attempts == 0 || count == 0 {
            break;
        }
        attempts -= 1;
        let Some(id) = next else { break };
        cursor = match super::stream::incr(id) {
            Some(c) => c,
            None => {
                next = None;
                break;
            }
        };
        let exists = s.entries.contains_key(id);
        let Some(g) = s.groups.get_mut(args[2]) else {
            break;
        };
        if !exists {
            drop_pending(fx, g, args[1], args[2], id);
            deleted.push(id);
            count -= 1;
            continue;
        }
        let Some(p) = g.pel.get(&id) else { continue };
        if minidle > 0 && (now as i64 - p.delivery_time as i64) < minidle {
            continue;
        }
        transfer(fx, g, args[1], id, name, now);
        if let Some(p) = g.pel.get_mut(&id) {
            p.delivery_time = now;
            if !justid {
                p.delivery_count += 1;
            }
        }
        if let Some(p) = g.pel.get(&id) {
            super::stream::push_xclaim(fx, args[1], args[2], id, p, g.last_id);
        }
        claimed_reply(&mut body, s, id, justid);
        claimed += 1;
        count -= 1;
    }
    let out = &mut *ctx.out;
    out.array(3);
    out.bulk(fmt_id(next.unwrap_or_default()).as_bytes());
    out.array(claimed);
    out.raw(&body.buf);
    out.array(deleted.len());
    for id in deleted {
        out.bulk(fmt_id(id).as_bytes());
    }
    Ok(())
}

fn xsetid(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.metadata_only();
    let id = parse_id(args[2], 0, true, false)?.0;
    let (mut added, mut maxdel) = (-1i64, StreamId::default());
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if eq_ic(args[i], "entriesadded") && more > 0 {
            added = super::arg_i64(args[i + 1])?;
            if added < 0 {
                return Err(CmdError::msg("ERR entries_added must be positive"));
            }
        } else if eq_ic(args[i], "maxdeletedid") && more > 0 {
            maxdel = parse_id(args[i + 1], 0, true, false)?.0;
            if id < maxdel {
                return Err(CmdError::msg(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let Some(s) = get_stream_w(&mut ctx.ks, args[1])? else {
        return Err(CmdError::NoSuchKey);
    };
    // Redis 7.0 does not compare with the current max_deleted_entry_id (later versions do).
    if let Some(top) = s.entries.last_id() {
        if id < top {
            return Err(CmdError::msg(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if added != -1 && s.len() as i64 > added {
            return Err(CmdError::msg(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    s.last_id = id;
    if added != -1 {
        s.entries_added = added as u64;
    }
    if maxdel != StreamId::default() {
        s.max_deleted_id = maxdel;
    }
    ctx.notify(crate::notify::STREAM, "xsetid", args[1]);
    ctx.out.ok();
    Ok(())
}
