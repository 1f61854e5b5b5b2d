//! ZPOPMIN ZPOPMAX BZPOPMIN BZPOPMAX ZMPOP BZMPOP.

use super::super::list::{mpop_keys, pop_argv};
use super::super::{arg_timeout, eq_ic, CmdError, CmdResult, Ctx};
use super::{write_items, Scored};
use crate::resp::Out;

// ---- pops ----

/// Pops from the first non-empty sorted set among `keys` (all type-checked in order).
fn mpop<'k>(
    ctx: &mut Ctx<'_>,
    keys: &[&'k [u8]],
    max: bool,
    count: usize,
) -> Result<Option<(&'k [u8], Scored)>, CmdError> {
    for k in keys {
        if let Some(z) = ctx.ks.get_zset(k)? {
            if !z.is_empty() {
                let items = z.pop(count, max);
                let emptied = z.is_empty();
                let event = if max { "zpopmax" } else { "zpopmin" };
                super::removed(ctx, k, event, items.len(), emptied);
                return Ok(Some((k, items)));
            }
        }
    }
    Ok(None)
}

fn zpop(ctx: &mut Ctx<'_>, args: &[&[u8]], max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        Some(c) => Some(super::super::list::positive_count(c)?),
        None => None,
    };
    let items = match count {
        Some(0) => {
            ctx.ks.get_zset(args[1])?;
            Vec::new()
        }
        _ => mpop(ctx, &args[1..2], max, count.unwrap_or(1))?
            .map(|(_, v)| v)
            .unwrap_or_default(),
    };
    ctx.changed_by(items.len());
    let nested = ctx.out.resp3 && count.is_some();
    write_items(ctx.out, &items, true, nested);
    Ok(())
}

pub(super) fn zpopmin(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    zpop(ctx, args, false)
}
pub(super) fn zpopmax(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    zpop(ctx, args, true)
}

fn block_or_timeout(ctx: &mut Ctx<'_>, keys: &[&[u8]], timeout_ms: u64) {
    ctx.unchanged();
    if ctx.can_block() {
        ctx.block_on(keys, timeout_ms);
    } else if !ctx.serving_blocked {
        ctx.out.null_array();
    }
}

fn bzpop(ctx: &mut Ctx<'_>, args: &[&[u8]], max: bool) -> CmdResult {
    let timeout = arg_timeout(args[args.len() - 1])?;
    let keys = &args[1..args.len() - 1];
    match mpop(ctx, keys, max, 1)? {
        Some((k, items)) => {
            let (m, s) = items.into_iter().next().unwrap_or_default();
            ctx.out.array(3);
            ctx.out.bulk(k);
            ctx.out.bulk(&m);
            ctx.out.double(s);
            if ctx.propagating() {
                // Replayed as ZPOPMIN/ZPOPMAX of the key served, as Redis.
                ctx.propagate_as(pop_argv(zpop_name(max), k, None));
            }
        }
        None => block_or_timeout(ctx, keys, timeout),
    }
    Ok(())
}

pub(super) fn bzpopmin(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    bzpop(ctx, args, false)
}
pub(super) fn bzpopmax(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    bzpop(ctx, args, true)
}

/// Parses `MIN|MAX [COUNT n]` at `at`.
fn mpop_opts(args: &[&[u8]], at: usize) -> Result<(bool, usize), CmdError> {
    let w = args.get(at).ok_or(CmdError::Syntax)?;
    let max = if eq_ic(w, "min") {
        false
    } else if eq_ic(w, "max") {
        true
    } else {
        return Err(CmdError::Syntax);
    };
    Ok((max, crate::cmd::list::mpop_count(args, at + 1)?))
}

/// The pop replicas and the AOF get for ZMPOP/BZMPOP/BZPOPMIN/BZPOPMAX, as Redis.
fn zpop_name(max: bool) -> &'static [u8] {
    if max {
        b"ZPOPMAX"
    } else {
        b"ZPOPMIN"
    }
}

fn write_mpop(out: &mut Out, key: &[u8], items: &[(Vec<u8>, f64)]) {
    out.array(2);
    out.bulk(key);
    write_items(out, items, true, true);
}

pub(super) fn zmpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let keys = mpop_keys(args, 1)?;
    let (max, count) = mpop_opts(args, 2 + keys.len())?;
    match mpop(ctx, keys, max, count)? {
        Some((k, items)) => {
            ctx.count_changes(items.len());
            write_mpop(ctx.out, k, &items);
            if ctx.propagating() {
                ctx.propagate_as(pop_argv(zpop_name(max), k, Some(items.len())));
            }
        }
        None => {
            ctx.unchanged();
            ctx.out.null_array();
        }
    }
    Ok(())
}

pub(super) fn bzmpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let timeout = arg_timeout(args[1])?;
    let keys = mpop_keys(args, 2)?;
    let (max, count) = mpop_opts(args, 3 + keys.len())?;
    match mpop(ctx, keys, max, count)? {
        Some((k, items)) => {
            ctx.count_changes(items.len());
            write_mpop(ctx.out, k, &items);
            if ctx.propagating() {
                ctx.propagate_as(pop_argv(zpop_name(max), k, Some(items.len())));
            }
        }
        None => block_or_timeout(ctx, keys, timeout),
    }
    Ok(())
}
