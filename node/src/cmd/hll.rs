//! HyperLogLog commands: PFADD PFCOUNT PFMERGE. Values are plain strings in Redis's HLL
//! format (see `crate::types::hll`), so GET/SET/DUMP/RESTORE move them between servers.

use super::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::db::Value;
use crate::notify::STRING;
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
        c("pfmerge", -2, "write denyoom", (1, -1, 1), pfmerge)
            .key_flags(&[&["RW", "access", "insert"], &["RO", "access"]]),
        c("pfdebug", 3, "write denyoom admin", (2, 2, 1), pfdebug),
        c("pfselftest", 1, "admin", (0, 0, 0), pfselftest),
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

fn pfadd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let key = &args[1];
    let sparse_max = ctx.limits().hll_sparse_max_bytes;
    // Changes as redis counts them: the creation, and each element that set a register.
    let mut changes = 0;
    if hll_buf(ctx, key)?.is_none() {
        ctx.ks.set(key, Value::Buf(Box::new(hll::new_sparse())));
        changes += 1;
    }
    let buf = hll_buf(ctx, key)?.ok_or(CmdError::NoSuchKey)?;
    for e in &args[2..] {
        changes += usize::from(hll::add(buf, e, sparse_max).map_err(hll_err)?);
    }
    if changes > 0 {
        hll::invalidate_cache(buf);
        ctx.notify(STRING, "pfadd", key);
    }
    ctx.changed_by(changes);
    ctx.out.int(i64::from(changes > 0));
    Ok(())
}

fn pfcount(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
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
    let cached = match ctx.ks.get(args[1]) {
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
            let buf = hll_buf(ctx, args[1])?.ok_or(CmdError::NoSuchKey)?;
            let c = hll::count(buf).map_err(hll_err)?;
            hll::set_cached_card(buf, c);
            c
        }
    };
    ctx.out.int(card as i64);
    Ok(())
}

fn pfmerge(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
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
    // Redis 7.0's PFMERGE notifies "pfadd".
    ctx.notify(STRING, "pfadd", key);
    ctx.out.ok();
    Ok(())
}

/// PFDEBUG GETREG | DECODE | ENCODING | TODENSE key (Redis's debugging entry points).
fn pfdebug(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    enum R {
        Regs(Vec<u8>),
        Text(String),
        Simple(&'static str),
        Int(i64),
    }
    let sub = String::from_utf8_lossy(args[1]).to_lowercase();
    let buf = hll_buf(ctx, args[2])?
        .ok_or_else(|| CmdError::msg("ERR The specified key does not exist"))?;
    let r = match sub.as_str() {
        "getreg" => {
            hll::to_dense(buf).map_err(hll_err)?;
            let mut regs = vec![0u8; hll::REGISTERS];
            hll::merge_into(&mut regs, buf).map_err(hll_err)?;
            R::Regs(regs)
        }
        "decode" => {
            if hll::is_dense(buf) {
                return Err(CmdError::msg("ERR HLL encoding is not sparse"));
            }
            R::Text(hll::decode_sparse(buf).map_err(hll_err)?)
        }
        "encoding" => R::Simple(if hll::is_dense(buf) {
            "dense"
        } else {
            "sparse"
        }),
        "todense" => {
            let was_sparse = !hll::is_dense(buf);
            hll::to_dense(buf).map_err(hll_err)?;
            R::Int(was_sparse as i64)
        }
        _ => {
            return Err(CmdError::msg(format!(
                "ERR Unknown PFDEBUG subcommand '{}'",
                String::from_utf8_lossy(args[1])
            )))
        }
    };
    match r {
        R::Regs(regs) => {
            ctx.out.array(regs.len());
            for r in regs {
                ctx.out.int(r as i64);
            }
        }
        R::Text(t) => ctx.out.bulk(t.as_bytes()),
        R::Simple(s) => ctx.out.simple(s),
        R::Int(i) => ctx.out.int(i),
    }
    Ok(())
}

/// PFSELFTEST: sparse and dense encodings must agree register for register and count the
/// same while growing past the promotion point.
fn pfselftest(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let mut sparse = hll::new_sparse();
    let mut dense = hll::new_sparse();
    hll::to_dense(&mut dense).map_err(hll_err)?;
    for i in 0..20_000u32 {
        let e = i.to_le_bytes();
        let a = hll::add(&mut sparse, &e, 3000).map_err(hll_err)?;
        let b = hll::add(&mut dense, &e, 3000).map_err(hll_err)?;
        let counts_differ = i % 1000 == 0 && hll::count(&sparse) != hll::count(&dense);
        if a != b || counts_differ {
            return Err(CmdError::msg(format!(
                "ERR TESTFAILED sparse/dense mismatch after {i} elements"
            )));
        }
    }
    ctx.out.ok();
    Ok(())
}
