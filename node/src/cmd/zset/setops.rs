//! ZUNION ZINTER ZDIFF (+STORE) and ZINTERCARD: sources may be sorted sets or plain sets
//! (score 1), combined with WEIGHTS and AGGREGATE like Redis.

use super::super::{arg_i64, eq_ic, CmdError, CmdResult, Ctx};
use super::{store_result, write_items, Scored};
use crate::db::Value;
use crate::types::parse_f64;

// ---- ZUNION / ZINTER / ZDIFF ----

#[derive(Clone, Copy, PartialEq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Agg {
    Sum,
    Min,
    Max,
}

fn aggregate(agg: Agg, acc: &mut f64, v: f64) {
    match agg {
        Agg::Sum => {
            *acc += v;
            if acc.is_nan() {
                *acc = 0.0;
            }
        }
        Agg::Min => *acc = acc.min(v),
        Agg::Max => *acc = acc.max(v),
    }
}

/// Reads a set or sorted set as (member, score) pairs (plain sets score 1).
fn load_source(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<Scored>, CmdError> {
    Ok(match ctx.ks.get(key) {
        None => None,
        Some(Value::ZSet(z)) => {
            let mut v = Vec::with_capacity(z.len());
            z.for_each(|m, s| v.push((m.to_vec(), s)));
            Some(v)
        }
        Some(Value::Set(s)) => Some(s.members().into_iter().map(|m| (m, 1.0)).collect()),
        Some(_) => return Err(CmdError::WrongType),
    })
}

/// Parses and computes a ZUNION/ZINTER/ZDIFF (`numkeys` at `at`); returns the result in
/// score order and whether WITHSCORES was given.
fn setop(
    ctx: &mut Ctx<'_>,
    args: &[&[u8]],
    at: usize,
    op: SetOp,
    store: bool,
    card: bool,
) -> Result<(Scored, bool), CmdError> {
    let n = arg_i64(args[at])?;
    if n < 1 {
        return Err(CmdError::msg(format!(
            "ERR at least 1 input key is needed for '{}' command",
            String::from_utf8_lossy(args[0]).to_lowercase()
        )));
    }
    if n as usize > args.len() - at - 1 {
        return Err(CmdError::Syntax);
    }
    let n = n as usize;
    let keys = &args[at + 1..at + 1 + n];
    let mut srcs = Vec::with_capacity(n);
    for k in keys {
        srcs.push(load_source(ctx, k)?);
    }
    let mut weights = vec![1.0; n];
    let (mut agg, mut withscores, mut limit) = (Agg::Sum, false, usize::MAX);
    let mut j = at + 1 + n;
    while j < args.len() {
        let rem = args.len() - j;
        let a = &args[j];
        if op != SetOp::Diff && !card && rem > n && eq_ic(a, "weights") {
            for (i, w) in weights.iter_mut().enumerate() {
                *w = parse_f64(args[j + 1 + i])
                    .ok_or_else(|| CmdError::msg("ERR weight value is not a float"))?;
            }
            j += 1 + n;
        } else if op != SetOp::Diff && !card && rem >= 2 && eq_ic(a, "aggregate") {
            let w = &args[j + 1];
            agg = if eq_ic(w, "sum") {
                Agg::Sum
            } else if eq_ic(w, "min") {
                Agg::Min
            } else if eq_ic(w, "max") {
                Agg::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if !store && !card && eq_ic(a, "withscores") {
            withscores = true;
            j += 1;
        } else if card && rem >= 2 && eq_ic(a, "limit") {
            let l =
                arg_i64(args[j + 1]).map_err(|_| CmdError::msg("ERR LIMIT can't be negative"))?;
            if l < 0 {
                return Err(CmdError::msg("ERR LIMIT can't be negative"));
            }
            limit = if l == 0 { usize::MAX } else { l as usize };
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut acc = crate::types::indexed::IndexedMap::<f64>::new();
    let weighted = |w: f64, s: f64| {
        let v = w * s;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    match op {
        SetOp::Union => {
            for (src, &w) in srcs.iter().zip(&weights) {
                for (m, s) in src.iter().flatten() {
                    let v = weighted(w, *s);
                    match acc.get_mut(m) {
                        Some(cur) => aggregate(agg, cur, v),
                        None => {
                            acc.insert(m, v);
                        }
                    }
                }
            }
        }
        SetOp::Inter => {
            if srcs.iter().all(Option::is_some) {
                let mut order: Vec<usize> = (0..n).collect();
                order.sort_by_key(|&i| srcs[i].as_ref().map_or(0, Vec::len));
                let maps: Vec<hashbrown::HashMap<&[u8], f64>> = srcs
                    .iter()
                    .map(|s| s.iter().flatten().map(|(m, s)| (&m[..], *s)).collect())
                    .collect();
                let first = order[0];
                'outer: for (m, s) in srcs[first].iter().flatten() {
                    let mut v = weighted(weights[first], *s);
                    for &i in &order[1..] {
                        match maps[i].get(&m[..]) {
                            Some(&s2) => aggregate(agg, &mut v, weighted(weights[i], s2)),
                            None => continue 'outer,
                        }
                    }
                    acc.insert(m, v);
                    if acc.len() >= limit {
                        break;
                    }
                }
            }
        }
        SetOp::Diff => {
            if let Some(first) = &srcs[0] {
                let others: Vec<hashbrown::HashSet<&[u8]>> = srcs[1..]
                    .iter()
                    .map(|s| s.iter().flatten().map(|(m, _)| &m[..]).collect())
                    .collect();
                for (m, s) in first {
                    if !others.iter().any(|o| o.contains(&m[..])) {
                        acc.insert(m, *s);
                    }
                }
            }
        }
    }
    let mut items: Vec<(Vec<u8>, f64)> = acc.iter().map(|(m, s)| (m.to_vec(), *s)).collect();
    items.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    Ok((items, withscores))
}

fn setop_reply(ctx: &mut Ctx<'_>, args: &[&[u8]], op: SetOp) -> CmdResult {
    let (items, withscores) = setop(ctx, args, 1, op, false, false)?;
    let nested = ctx.out.resp3;
    write_items(ctx.out, &items, withscores, nested);
    Ok(())
}

fn setop_store(ctx: &mut Ctx<'_>, args: &[&[u8]], op: SetOp) -> CmdResult {
    let (items, _) = setop(ctx, args, 2, op, true, false)?;
    let event = match op {
        SetOp::Union => "zunionstore",
        SetOp::Inter => "zinterstore",
        SetOp::Diff => "zdiffstore",
    };
    store_result(ctx, args[1], items, event);
    Ok(())
}

pub(super) fn zunion(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    setop_reply(ctx, args, SetOp::Union)
}
pub(super) fn zinter(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    setop_reply(ctx, args, SetOp::Inter)
}
pub(super) fn zdiff(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    setop_reply(ctx, args, SetOp::Diff)
}
pub(super) fn zunionstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    setop_store(ctx, args, SetOp::Union)
}
pub(super) fn zinterstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    setop_store(ctx, args, SetOp::Inter)
}
pub(super) fn zdiffstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    setop_store(ctx, args, SetOp::Diff)
}

pub(super) fn zintercard(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (items, _) = setop(ctx, args, 1, SetOp::Inter, false, true)?;
    ctx.out.int(items.len() as i64);
    Ok(())
}
