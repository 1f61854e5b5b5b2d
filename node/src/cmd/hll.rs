//! HyperLogLog commands: PFADD PFCOUNT PFMERGE. Values are plain strings in Redis's HLL
//! format (see `crate::types::hll`), so GET/SET/DUMP/RESTORE move them between servers.

use bytes::Bytes;

use super::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::db::Value;
use crate::types::hll::{self, HllError};

pub fn commands() -> Vec<CommandSpec> {
    let c = |name, arity, fl, keys, h| {
        CommandSpec::new(name, arity, fl, keys, h)
            .group("hyperloglog")
            .since("2.8.9")
    };
    vec![
        c("pfadd", -2, "write denyoom fast", (1, 1, 1), pfadd),
        c("pfcount", -2, "readonly", (1, -1, 1), pfcount),
        c("pfmerge", -2, "write denyoom", (1, -1, 1), pfmerge),
    ]
}

fn hll_err(e: HllError) -> CmdError {
    CmdError::msg(e.to_string())
}

/// The HLL bytes at `key` as a mutable buffer, validated; None if the key is absent.
fn hll_buf<'a>(ctx: &'a mut Ctx<'_>, key: &[u8]) -> Result<Option<&'a mut Vec<u8>>, CmdError> {
    let Some(v) = ctx.ks.get_w(key) else {
        return Ok(None);
    };
    let buf = v.make_buf().ok_or(CmdError::WrongType)?;
    hll::validate(buf).map_err(hll_err)?;
    Ok(Some(buf))
}

/// Validates (read-only) the HLL at `key` and folds its registers into `max`.
fn merge_key(ctx: &mut Ctx<'_>, key: &[u8], max: &mut [u8]) -> Result<Option<bool>, CmdError> {
    let mut tmp = itoa::Buffer::new();
    let Some(v) = ctx.ks.get(key) else {
        return Ok(None);
    };
    let b = v.str_bytes(&mut tmp).ok_or(CmdError::WrongType)?;
    hll::validate(b).map_err(hll_err)?;
    hll::merge_into(max, b).map_err(hll_err)?;
    Ok(Some(hll::is_dense(b)))
}

fn pfadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let sparse_max = ctx.limits().hll_sparse_max_bytes;
    let mut updated = false;
    if hll_buf(ctx, key)?.is_none() {
        ctx.ks.set(key, Value::Buf(Box::new(hll::new_sparse())));
        updated = true;
    }
    let buf = hll_buf(ctx, key)?.ok_or(CmdError::NoSuchKey)?;
    for e in &args[2..] {
        updated |= hll::add(buf, e, sparse_max).map_err(hll_err)?;
    }
    if updated {
        hll::invalidate_cache(buf);
    }
    ctx.out.int(updated as i64);
    Ok(())
}

fn pfcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    if args.len() > 2 {
        let mut max = vec![0u8; hll::REGISTERS];
        for k in &args[1..] {
            merge_key(ctx, k, &mut max)?;
        }
        ctx.out.int(hll::count_raw(&max) as i64);
        return Ok(());
    }
    // One key: answer from the cached cardinality, refreshing it when stale (as Redis does,
    // this rewrites the value's header).
    let mut tmp = itoa::Buffer::new();
    let cached = match ctx.ks.get(&args[1]) {
        None => {
            ctx.out.int(0);
            return Ok(());
        }
        Some(v) => {
            let b = v.str_bytes(&mut tmp).ok_or(CmdError::WrongType)?;
            hll::validate(b).map_err(hll_err)?;
            hll::cached_card(b)
        }
    };
    let card = match cached {
        Some(c) => c,
        None => {
            let buf = hll_buf(ctx, &args[1])?.ok_or(CmdError::NoSuchKey)?;
            let c = hll::count(buf).map_err(hll_err)?;
            hll::set_cached_card(buf, c);
            c
        }
    };
    ctx.out.int(card as i64);
    Ok(())
}

fn pfmerge(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let mut max = vec![0u8; hll::REGISTERS];
    let mut dense = false;
    for k in &args[1..] {
        dense |= merge_key(ctx, k, &mut max)?.unwrap_or(false);
    }
    let key = &args[1];
    let sparse_max = ctx.limits().hll_sparse_max_bytes;
    if hll_buf(ctx, key)?.is_none() {
        ctx.ks.set(key, Value::Buf(Box::new(hll::new_sparse())));
    }
    let buf = hll_buf(ctx, key)?.ok_or(CmdError::NoSuchKey)?;
    if dense {
        hll::to_dense(buf).map_err(hll_err)?;
    }
    for (i, &m) in max.iter().enumerate() {
        if m != 0 {
            hll::set_register(buf, i, m, sparse_max).map_err(hll_err)?;
        }
    }
    hll::invalidate_cache(buf);
    ctx.out.ok();
    Ok(())
}
