//! Set commands: SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SMOVE SINTER
//! SINTERCARD SUNION SDIFF (+STORE) SSCAN.

use rand::Rng;

use super::hash::{distinct_positions, parse_scan, rand_count, write_scan};
use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx, KeyPos};
use bytes::Bytes;

use crate::db::Value;
use crate::notify::{GENERIC, SET};
use crate::types::SetValue;

/// Key-spec flags of SUNIONSTORE / SDIFFSTORE: the destination is overwritten.
const STORE_FLAGS: &[&[&str]] = &[&["OW", "update"], &["RO", "access"]];

pub fn commands() -> Vec<CommandSpec> {
    let c = |name, arity, fl, keys, h| {
        CommandSpec::new(name, arity, fl, keys, h)
            .group("set")
            .since("1.0.0")
    };
    vec![
        c("sadd", -3, "write denyoom fast", (1, 1, 1), sadd),
        c("srem", -3, "write fast", (1, 1, 1), srem),
        c("smembers", 2, "readonly", (1, 1, 1), smembers),
        c("sismember", 3, "readonly fast", (1, 1, 1), sismember),
        c("smismember", -3, "readonly fast", (1, 1, 1), smismember).since("6.2.0"),
        c("scard", 2, "readonly fast", (1, 1, 1), scard),
        c("spop", -2, "write fast", (1, 1, 1), spop),
        c("srandmember", -2, "readonly", (1, 1, 1), srandmember),
        c("smove", 4, "write fast", (1, 2, 1), smove).key_flags(super::list::MOVE_FLAGS),
        c("sinter", -2, "readonly", (1, -1, 1), sinter),
        c("sintercard", -3, "readonly", (0, 0, 0), sintercard)
            .since("7.0.0")
            .keys(KeyPos::Keynum {
                numkeys: 1,
                first: 1,
                step: 1,
            }),
        c("sunion", -2, "readonly", (1, -1, 1), sunion),
        c("sdiff", -2, "readonly", (1, -1, 1), sdiff),
        c("sinterstore", -3, "write denyoom", (1, -1, 1), sinterstore)
            .key_flags(&[&["RW", "update"], &["RO", "access"]]),
        c("sunionstore", -3, "write denyoom", (1, -1, 1), sunionstore).key_flags(STORE_FLAGS),
        c("sdiffstore", -3, "write denyoom", (1, -1, 1), sdiffstore).key_flags(STORE_FLAGS),
        c("sscan", -3, "readonly", (1, 1, 1), sscan).since("2.6.0"),
    ]
}

fn sadd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let lim = ctx.limits();
    let key = &args[1];
    if ctx.ks.get_set(key)?.is_none() {
        ctx.ks
            .set(key, Value::Set(SetValue::new_for(args[2], &lim)));
    }
    let s = ctx.ks.set_or_create(key)?;
    let n = args[2..].iter().filter(|m| s.insert(m, &lim)).count();
    if n > 0 {
        ctx.notify(SET, "sadd", key);
    }
    ctx.changed_by(n);
    ctx.out.int(n as i64);
    Ok(())
}

fn srem(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut n = 0;
    let mut emptied = false;
    if let Some(s) = ctx.ks.get_set(args[1])? {
        n = args[2..].iter().filter(|m| s.remove(m)).count();
        emptied = s.is_empty();
    }
    if n > 0 {
        ctx.notify(SET, "srem", args[1]);
    }
    if emptied {
        ctx.ks.del(args[1]);
        ctx.notify(GENERIC, "del", args[1]);
    }
    ctx.changed_by(n);
    ctx.out.int(n as i64);
    Ok(())
}

fn write_set(out: &mut crate::resp::Out, members: &[Vec<u8>]) {
    out.set(members.len());
    for m in members {
        out.bulk(m);
    }
}

fn smembers(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let out = &mut *ctx.out;
    match ctx.ks.get_set(args[1])? {
        Some(s) => {
            out.set(s.len());
            s.for_each(|m| out.bulk(m));
        }
        None => out.set(0),
    }
    Ok(())
}

fn sismember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let r = ctx
        .ks
        .get_set(args[1])?
        .is_some_and(|s| s.contains(args[2]));
    ctx.out.int(r as i64);
    Ok(())
}

fn smismember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let s = ctx.ks.get_set(args[1])?;
    ctx.out.array(args.len() - 2);
    for m in &args[2..] {
        let r = s.as_ref().is_some_and(|s| s.contains(m));
        ctx.out.int(r as i64);
    }
    Ok(())
}

fn scard(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let n = ctx.ks.get_set(args[1])?.map_or(0, |s| s.len());
    ctx.out.int(n as i64);
    Ok(())
}

fn spop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        Some(c) => Some(super::list::positive_count(c)?),
        None => None,
    };
    // A missing key, or a count of 0 (after the type check), pops nothing.
    let s = match ctx.ks.get_set(args[1])? {
        Some(s) if count != Some(0) => s,
        _ => {
            ctx.unchanged();
            match count {
                None => ctx.out.null(),
                Some(_) => ctx.out.set(0),
            }
            return Ok(());
        }
    };
    let popped: Vec<Vec<u8>> = match count {
        None => {
            let m = s.pop_random();
            match &m {
                Some(m) => ctx.out.bulk(m),
                None => ctx.out.null(),
            }
            m.into_iter().collect()
        }
        Some(n) => {
            let popped: Vec<Vec<u8>> = if n >= s.len() {
                let all = s.members();
                *s = SetValue::default();
                all
            } else {
                (0..n).filter_map(|_| s.pop_random()).collect()
            };
            write_set(ctx.out, &popped);
            popped
        }
    };
    let emptied = s.is_empty();
    if !popped.is_empty() {
        ctx.notify(SET, "spop", args[1]);
        // Replicas and the AOF remove the very members popped here.
        if ctx.propagating() {
            let mut p = Vec::with_capacity(popped.len() + 2);
            p.push(Bytes::from_static(b"SREM"));
            p.push(Bytes::copy_from_slice(args[1]));
            p.extend(popped.into_iter().map(Bytes::from));
            ctx.propagate_as(p);
        }
    }
    if emptied {
        ctx.ks.del(args[1]);
        ctx.notify(GENERIC, "del", args[1]);
    }
    Ok(())
}

fn srandmember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        Some(c) => Some(rand_count(c)?),
        None => None,
    };
    let s = ctx.ks.get_set(args[1])?;
    let out = &mut *ctx.out;
    let Some(count) = count else {
        match s.and_then(|s| s.random_member()) {
            Some(m) => out.bulk(&m),
            None => out.null(),
        }
        return Ok(());
    };
    let Some(s) = s else {
        out.array(0);
        return Ok(());
    };
    if count < 0 {
        let n = count.unsigned_abs() as usize;
        let len = s.len();
        let mut rng = rand::rng();
        out.array(n);
        for _ in 0..n {
            // Past the client's output limit the client is closed: stop (Redis's
            // CLIENT_CLOSE_ASAP check).
            if ctx.cl.reply_overflow(out.len()) {
                break;
            }
            match s.get_index(rng.random_range(0..len)) {
                Some(m) => out.bulk(&m),
                None => out.null(),
            }
        }
    } else if count as usize >= s.len() {
        out.bulks(s.members().iter());
    } else {
        let picks: Vec<Vec<u8>> = distinct_positions(s.len(), count as usize)
            .into_iter()
            .filter_map(|i| s.get_index(i))
            .collect();
        out.array(picks.len());
        for m in &picks {
            out.bulk(m);
        }
    }
    Ok(())
}

fn smove(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (src, dst, m) = (&args[1], &args[2], &args[3]);
    let lim = ctx.limits();
    let Some(s) = ctx.ks.get_set(src)? else {
        ctx.ks.get_set(dst)?;
        ctx.unchanged();
        ctx.out.int(0);
        return Ok(());
    };
    let present = s.contains(m);
    ctx.ks.get_set(dst)?;
    if src == dst || !present {
        ctx.unchanged();
        ctx.out.int(present as i64);
        return Ok(());
    }
    if let Some(s) = ctx.ks.get_set(src)? {
        s.remove(m);
    }
    ctx.notify(SET, "srem", src);
    ctx.ks.remove_if_empty(src);
    if ctx.ks.get_set(dst)?.is_none() {
        ctx.ks.set(dst, Value::Set(SetValue::new_for(m, &lim)));
    }
    // Redis counts the removal and, if the member was new there, the addition.
    let added = ctx.ks.set_or_create(dst)?.insert(m, &lim);
    if added {
        ctx.notify(SET, "sadd", dst);
    } else {
        // Redis signals the destination modified only when the member was new there:
        // signal the source alone (WATCH, client-side caching), still count and propagate.
        ctx.metadata_only();
        ctx.srv.watch.touch(ctx.ks.db, src);
        crate::tracking::invalidate(ctx.srv, Some(ctx.cl.id), src);
    }
    ctx.count_changes(1 + usize::from(added));
    ctx.out.int(1);
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// Computes a set operation over `keys`; WRONGTYPE if any key holds another type.
fn compute(
    ctx: &mut Ctx<'_>,
    keys: &[&[u8]],
    op: Op,
    limit: usize,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let mut lens = Vec::with_capacity(keys.len());
    for k in keys {
        lens.push(ctx.ks.get_set(k)?.map(|s| s.len()));
    }
    match op {
        Op::Inter => {
            if lens.iter().any(|l| l.is_none()) {
                return Ok(Vec::new());
            }
            let mut order: Vec<usize> = (0..keys.len()).collect();
            order.sort_by_key(|&i| lens[i]);
            let mut acc = match ctx.ks.get_set(keys[order[0]])? {
                Some(s) => s.members(),
                None => Vec::new(),
            };
            for &i in &order[1..] {
                if acc.is_empty() {
                    break;
                }
                if let Some(s) = ctx.ks.get_set(keys[i])? {
                    acc.retain(|m| s.contains(m));
                }
            }
            acc.truncate(limit);
            Ok(acc)
        }
        Op::Union => {
            let mut acc = crate::types::indexed::IndexedMap::new();
            for k in keys {
                if let Some(s) = ctx.ks.get_set(k)? {
                    s.for_each(|m| {
                        acc.insert(m, ());
                    });
                }
            }
            Ok(acc.iter().map(|(m, _)| m.to_vec()).collect())
        }
        Op::Diff => {
            let Some(first) = ctx.ks.get_set(keys[0])? else {
                return Ok(Vec::new());
            };
            let mut acc = first.members();
            for k in &keys[1..] {
                if acc.is_empty() {
                    break;
                }
                if let Some(s) = ctx.ks.get_set(k)? {
                    acc.retain(|m| !s.contains(m));
                }
            }
            Ok(acc)
        }
    }
}

fn reply_op(ctx: &mut Ctx<'_>, args: &[&[u8]], op: Op) -> CmdResult {
    let r = compute(ctx, &args[1..], op, usize::MAX)?;
    write_set(ctx.out, &r);
    Ok(())
}

fn store_op(ctx: &mut Ctx<'_>, args: &[&[u8]], op: Op) -> CmdResult {
    let r = compute(ctx, &args[2..], op, usize::MAX)?;
    let lim = ctx.limits();
    let dst = &args[1];
    if r.is_empty() {
        // An empty result deletes the destination: a change only if it existed.
        let deleted = ctx.ks.del(dst);
        if deleted {
            ctx.notify(GENERIC, "del", dst);
        }
        ctx.changed_if(deleted);
    } else {
        ctx.ks
            .set(dst, Value::Set(SetValue::from_members(&r, &lim)));
        let event = match op {
            Op::Inter => "sinterstore",
            Op::Union => "sunionstore",
            Op::Diff => "sdiffstore",
        };
        ctx.notify(SET, event, dst);
    }
    ctx.out.int(r.len() as i64);
    Ok(())
}

fn sinter(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_op(ctx, args, Op::Inter)
}
fn sunion(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_op(ctx, args, Op::Union)
}
fn sdiff(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_op(ctx, args, Op::Diff)
}
fn sinterstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    store_op(ctx, args, Op::Inter)
}
fn sunionstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    store_op(ctx, args, Op::Union)
}
fn sdiffstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    store_op(ctx, args, Op::Diff)
}

/// Parses `numkeys key...` as the *INTERCARD / *MPOP commands do; returns the key slice.
pub(crate) fn numkeys_args<'a, 'b>(
    args: &'a [&'b [u8]],
    at: usize,
) -> Result<&'a [&'b [u8]], CmdError> {
    // Non-integers get the same message (Redis's getRangeLongFromObjectOrReply).
    let n = arg_i64(args[at]).unwrap_or(0);
    if n <= 0 {
        return Err(CmdError::msg("ERR numkeys should be greater than 0"));
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if n > args.len().saturating_sub(at + 1) {
        return Err(CmdError::msg(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    Ok(&args[at + 1..at + 1 + n])
}

fn sintercard(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let keys = numkeys_args(args, 1)?;
    let mut limit = 0usize;
    let mut i = 2 + keys.len();
    while i < args.len() {
        if eq_ic(args[i], "limit") && i + 1 < args.len() {
            let l =
                arg_i64(args[i + 1]).map_err(|_| CmdError::msg("ERR LIMIT can't be negative"))?;
            if l < 0 {
                return Err(CmdError::msg("ERR LIMIT can't be negative"));
            }
            limit = l as usize;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let limit = if limit == 0 { usize::MAX } else { limit };
    let r = compute(ctx, keys, Op::Inter, limit)?;
    ctx.out.int(r.len() as i64);
    Ok(())
}

fn sscan(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let sa = parse_scan(args)?;
    let mut items = Vec::new();
    let mut next = 0;
    if let Some(s) = ctx.ks.get_set(args[1])? {
        next = s.scan(sa.cursor, sa.count, |m| {
            if sa.matches(m) {
                items.push(m.to_vec());
            }
        });
    }
    write_scan(ctx.out, next, &items);
    Ok(())
}
