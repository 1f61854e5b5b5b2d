//! List commands: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LRANGE LINDEX LSET LINSERT LREM
//! LTRIM LPOS LMOVE RPOPLPUSH LMPOP and the blocking BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP.
//!
//! Blocking follows `crate::blocking`: serve now if possible, else `block_on` (or, inside
//! MULTI, answer as if timed out; when re-run for a blocked client, write nothing).

use bytes::Bytes;

use super::{arg_i64, arg_timeout, eq_ic, CmdError, CmdResult, CommandSpec, Ctx, KeyPos};
use crate::notify::{GENERIC, LIST};

/// Key-spec flags of the source/destination commands (LMOVE, SMOVE...): the source is read
/// and may be deleted, the destination gets an insert.
pub const MOVE_FLAGS: &[&[&str]] = &[&["RW", "access", "delete"], &["RW", "insert"]];

pub fn commands() -> Vec<CommandSpec> {
    let c = |name, arity, fl, keys, h| {
        CommandSpec::new(name, arity, fl, keys, h)
            .group("list")
            .since("1.0.0")
    };
    let keynum = |at| KeyPos::Keynum {
        numkeys: at,
        first: 1,
        step: 1,
    };
    vec![
        c("lpush", -3, "write denyoom fast", (1, 1, 1), lpush),
        c("rpush", -3, "write denyoom fast", (1, 1, 1), rpush),
        c("lpushx", -3, "write denyoom fast", (1, 1, 1), lpushx).since("2.2.0"),
        c("rpushx", -3, "write denyoom fast", (1, 1, 1), rpushx).since("2.2.0"),
        c("lpop", -2, "write fast", (1, 1, 1), lpop),
        c("rpop", -2, "write fast", (1, 1, 1), rpop),
        c("llen", 2, "readonly fast", (1, 1, 1), llen),
        c("lrange", 4, "readonly", (1, 1, 1), lrange),
        c("lindex", 3, "readonly", (1, 1, 1), lindex),
        c("lset", 4, "write denyoom", (1, 1, 1), lset),
        c("linsert", 5, "write denyoom", (1, 1, 1), linsert).since("2.2.0"),
        c("lrem", 4, "write", (1, 1, 1), lrem),
        c("ltrim", 4, "write", (1, 1, 1), ltrim),
        c("lpos", -3, "readonly", (1, 1, 1), lpos).since("6.0.6"),
        c("lmove", 5, "write denyoom", (1, 2, 1), lmove)
            .since("6.2.0")
            .key_flags(MOVE_FLAGS),
        c("rpoplpush", 3, "write denyoom", (1, 2, 1), rpoplpush)
            .since("1.2.0")
            .key_flags(MOVE_FLAGS),
        c("lmpop", -4, "write", (0, 0, 0), lmpop)
            .since("7.0.0")
            .keys(keynum(1))
            .key_flags(&[&["RW", "access", "delete"]]),
        c("blpop", -3, "write noscript blocking", (1, -2, 1), blpop)
            .since("2.0.0")
            .key_flags(&[&["RW", "access", "delete"]]),
        c("brpop", -3, "write noscript blocking", (1, -2, 1), brpop)
            .since("2.0.0")
            .key_flags(&[&["RW", "access", "delete"]]),
        c(
            "blmove",
            6,
            "write denyoom noscript blocking",
            (1, 2, 1),
            blmove,
        )
        .since("6.2.0")
        .key_flags(MOVE_FLAGS),
        c(
            "brpoplpush",
            4,
            "write denyoom noscript blocking",
            (1, 2, 1),
            brpoplpush,
        )
        .since("2.2.0")
        .key_flags(MOVE_FLAGS),
        c("blmpop", -5, "write blocking", (0, 0, 0), blmpop)
            .since("7.0.0")
            .keys(keynum(2))
            .key_flags(&[&["RW", "access", "delete"]]),
    ]
}

fn push(ctx: &mut Ctx<'_>, args: &[&[u8]], left: bool, only_existing: bool) -> CmdResult {
    let key = &args[1];
    let lim = ctx.limits();
    let l = if only_existing {
        match ctx.ks.get_list(key)? {
            Some(l) => l,
            None => {
                ctx.unchanged();
                ctx.out.int(0);
                return Ok(());
            }
        }
    } else {
        ctx.ks.list_or_create(key)?
    };
    for v in &args[2..] {
        if left {
            l.push_front(v, &lim);
        } else {
            l.push_back(v, &lim);
        }
    }
    let n = l.len();
    ctx.notify(LIST, if left { "lpush" } else { "rpush" }, key);
    ctx.ks.signal_ready(key);
    ctx.count_changes(args.len() - 2);
    ctx.out.int(n as i64);
    Ok(())
}

fn lpush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    push(ctx, args, true, false)
}
fn rpush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    push(ctx, args, false, false)
}
fn lpushx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    push(ctx, args, true, true)
}
fn rpushx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    push(ctx, args, false, true)
}

/// Pops up to `n` elements from one end of the list at `key`, deleting it when emptied
/// (with the pop's event, then `del`).
fn pop_n(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    left: bool,
    n: usize,
) -> Result<Option<Vec<Vec<u8>>>, CmdError> {
    let Some(l) = ctx.ks.get_list(key)? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(n.min(l.len()));
    for _ in 0..n {
        match if left { l.pop_front() } else { l.pop_back() } {
            Some(v) => out.push(v),
            None => break,
        }
    }
    let emptied = l.is_empty();
    if !out.is_empty() {
        ctx.notify(LIST, if left { "lpop" } else { "rpop" }, key);
    }
    if emptied {
        ctx.ks.del(key);
        ctx.notify(GENERIC, "del", key);
    }
    Ok(Some(out))
}

fn pop(ctx: &mut Ctx<'_>, args: &[&[u8]], left: bool) -> CmdResult {
    // Arity -2 with at most one count: Redis answers the arity error for more.
    if args.len() > 3 {
        return Err(CmdError::msg(format!(
            "ERR wrong number of arguments for '{}' command",
            if left { "lpop" } else { "rpop" }
        )));
    }
    let count = match args.get(2) {
        Some(c) => Some(positive_count(c)?),
        None => None,
    };
    match count {
        None => match pop_n(ctx, args[1], left, 1)?.and_then(|mut v| v.pop()) {
            Some(v) => ctx.out.bulk(&v),
            None => {
                ctx.unchanged();
                ctx.out.null();
            }
        },
        Some(n) => match pop_n(ctx, args[1], left, n)? {
            Some(v) => {
                // LPOP key 0 pops nothing.
                ctx.changed_by(v.len());
                ctx.out.bulks(v.iter());
            }
            None => {
                ctx.unchanged();
                ctx.out.null_array();
            }
        },
    }
    Ok(())
}

/// A count parsed like Redis's getPositiveLongFromObjectOrReply (LPOP, SPOP, ZPOPMIN...):
/// non-integers and negatives get the same message.
pub(crate) fn positive_count(b: &[u8]) -> Result<usize, CmdError> {
    match arg_i64(b) {
        Ok(n) if n >= 0 => Ok(n as usize),
        _ => Err(CmdError::msg("ERR value is out of range, must be positive")),
    }
}

fn lpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    pop(ctx, args, true)
}
fn rpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    pop(ctx, args, false)
}

fn llen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let n = ctx.ks.get_list(args[1])?.map_or(0, |l| l.len());
    ctx.out.int(n as i64);
    Ok(())
}

/// Normalises a Redis `start stop` pair against `len`; None when the range is empty.
pub(crate) fn norm_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut s = if start < 0 { start + len } else { start };
    let mut e = if stop < 0 { stop + len } else { stop };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as usize, e as usize))
}

fn lrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (start, stop) = (arg_i64(args[2])?, arg_i64(args[3])?);
    let out = &mut *ctx.out;
    match ctx.ks.get_list(args[1])? {
        Some(l) => match norm_range(start, stop, l.len()) {
            Some((s, e)) => {
                out.array(e - s + 1);
                l.for_range(s, e, |v| out.bulk(v));
            }
            None => out.array(0),
        },
        None => out.array(0),
    }
    Ok(())
}

fn index_of(i: i64, len: usize) -> Option<usize> {
    let i = if i < 0 { i + len as i64 } else { i };
    (i >= 0 && (i as usize) < len).then_some(i as usize)
}

/// The key is looked up (missing: nil; WRONGTYPE) before the index is parsed, as Redis.
fn lindex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Some(l) = ctx.ks.get_list(args[1])? else {
        ctx.out.null();
        return Ok(());
    };
    let i = arg_i64(args[2])?;
    let v = index_of(i, l.len()).and_then(|i| l.get(i));
    match v {
        Some(v) => ctx.out.bulk(v),
        None => ctx.out.null(),
    }
    Ok(())
}

/// The key is looked up (no such key; WRONGTYPE) before the index is parsed, as Redis.
fn lset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let lim = ctx.limits();
    let l = ctx.ks.get_list(args[1])?.ok_or(CmdError::NoSuchKey)?;
    let i = arg_i64(args[2])?;
    let i = index_of(i, l.len()).ok_or(CmdError::OutOfRange)?;
    l.set(i, args[3], &lim);
    ctx.notify(LIST, "lset", args[1]);
    ctx.out.ok();
    Ok(())
}

fn linsert(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let before = if eq_ic(args[2], "before") {
        true
    } else if eq_ic(args[2], "after") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let lim = ctx.limits();
    let Some(l) = ctx.ks.get_list(args[1])? else {
        ctx.unchanged();
        ctx.out.int(0);
        return Ok(());
    };
    let pos = l.iter().position(|e| e == args[3]);
    match pos {
        Some(p) => {
            l.insert(if before { p } else { p + 1 }, args[4], &lim);
            let n = l.len();
            ctx.notify(LIST, "linsert", args[1]);
            ctx.out.int(n as i64);
        }
        None => {
            ctx.unchanged();
            ctx.out.int(-1);
        }
    }
    Ok(())
}

fn lrem(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let count = arg_i64(args[2])?;
    let mut n = 0;
    let mut emptied = false;
    if let Some(l) = ctx.ks.get_list(args[1])? {
        n = l.remove(count, args[3]);
        emptied = l.is_empty();
    }
    if n > 0 {
        ctx.notify(LIST, "lrem", args[1]);
    }
    if emptied {
        ctx.ks.del(args[1]);
        ctx.notify(GENERIC, "del", args[1]);
    }
    ctx.changed_by(n);
    ctx.out.int(n as i64);
    Ok(())
}

fn ltrim(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (start, stop) = (arg_i64(args[2])?, arg_i64(args[3])?);
    let Some(l) = ctx.ks.get_list(args[1])? else {
        ctx.unchanged();
        ctx.out.ok();
        return Ok(());
    };
    let before = l.len();
    match norm_range(start, stop, l.len()) {
        Some((s, e)) => l.trim(s, e),
        None => l.trim(1, 0),
    }
    let trimmed = before - l.len();
    let emptied = l.is_empty();
    // Redis notifies even when nothing was trimmed.
    ctx.notify(LIST, "ltrim", args[1]);
    if emptied {
        ctx.ks.del(args[1]);
        ctx.notify(GENERIC, "del", args[1]);
    }
    ctx.count_changes(trimmed);
    if trimmed == 0 {
        ctx.signal_only();
    }
    ctx.out.ok();
    Ok(())
}

fn lpos(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (mut rank, mut count, mut maxlen) = (1i64, None::<usize>, 0usize);
    let mut i = 3;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Err(CmdError::Syntax);
        }
        let v = arg_i64(args[i + 1])?;
        if eq_ic(args[i], "rank") {
            if v == 0 {
                return Err(CmdError::msg("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
            }
            // Redis negates LONG_MIN into itself and then searches like RANK -1.
            rank = if v == i64::MIN { -1 } else { v };
        } else if eq_ic(args[i], "count") {
            if v < 0 {
                return Err(CmdError::msg("ERR COUNT can't be negative"));
            }
            count = Some(v as usize);
        } else if eq_ic(args[i], "maxlen") {
            if v < 0 {
                return Err(CmdError::msg("ERR MAXLEN can't be negative"));
            }
            maxlen = v as usize;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let mut found = Vec::new();
    if let Some(l) = ctx.ks.get_list(args[1])? {
        let len = l.len();
        let want = match count {
            Some(0) => usize::MAX,
            Some(c) => c,
            None => 1,
        };
        let mut skip = rank.unsigned_abs() as usize - 1;
        let limit = if maxlen == 0 { len } else { maxlen.min(len) };
        let it: Box<dyn Iterator<Item = (usize, &[u8])>> = if rank > 0 {
            Box::new(l.iter().enumerate().take(limit))
        } else {
            Box::new(
                l.iter()
                    .rev()
                    .enumerate()
                    .take(limit)
                    .map(|(k, e)| (len - 1 - k, e)),
            )
        };
        for (idx, e) in it {
            if e == args[2] {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                found.push(idx as i64);
                if found.len() >= want {
                    break;
                }
            }
        }
    }
    match count {
        Some(_) => {
            ctx.out.array(found.len());
            for f in found {
                ctx.out.int(f);
            }
        }
        None => match found.first() {
            Some(&f) => ctx.out.int(f),
            None => ctx.out.null(),
        },
    }
    Ok(())
}

fn parse_side(b: &[u8]) -> Result<bool, CmdError> {
    if eq_ic(b, "left") {
        Ok(true)
    } else if eq_ic(b, "right") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// LMOVE core: None when the source is missing or empty (nothing moved).
fn do_move(
    ctx: &mut Ctx<'_>,
    src: &[u8],
    dst: &[u8],
    from_left: bool,
    to_left: bool,
) -> Result<Option<Vec<u8>>, CmdError> {
    match ctx.ks.get_list(src)? {
        Some(l) if !l.is_empty() => {}
        _ => return Ok(None),
    }
    ctx.ks.get_list(dst)?;
    let lim = ctx.limits();
    let Some(l) = ctx.ks.get_list(src)? else {
        return Ok(None);
    };
    let Some(v) = (if from_left {
        l.pop_front()
    } else {
        l.pop_back()
    }) else {
        return Ok(None);
    };
    let d = ctx.ks.list_or_create(dst)?;
    if to_left {
        d.push_front(&v, &lim);
    } else {
        d.push_back(&v, &lim);
    }
    ctx.notify(LIST, if to_left { "lpush" } else { "rpush" }, dst);
    ctx.notify(LIST, if from_left { "lpop" } else { "rpop" }, src);
    ctx.ks.remove_if_empty(src);
    ctx.ks.signal_ready(dst);
    Ok(Some(v))
}

fn lmove(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (from, to) = (parse_side(args[3])?, parse_side(args[4])?);
    match do_move(ctx, args[1], args[2], from, to)? {
        Some(v) => ctx.out.bulk(&v),
        None => {
            ctx.unchanged();
            ctx.out.null();
        }
    }
    Ok(())
}

fn rpoplpush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    match do_move(ctx, args[1], args[2], false, true)? {
        Some(v) => ctx.out.bulk(&v),
        None => {
            ctx.unchanged();
            ctx.out.null();
        }
    }
    Ok(())
}

/// Pops from the first non-empty list among `keys` (all are type-checked first, in order).
/// A popped batch: the key it came from and the elements.
type Popped<'k> = Option<(&'k [u8], Vec<Vec<u8>>)>;

fn mpop<'k>(
    ctx: &mut Ctx<'_>,
    keys: &[&'k [u8]],
    left: bool,
    count: usize,
) -> Result<Popped<'k>, CmdError> {
    for k in keys {
        let non_empty = ctx.ks.get_list(k)?.is_some_and(|l| !l.is_empty());
        if non_empty {
            let v = pop_n(ctx, k, left, count)?.unwrap_or_default();
            return Ok(Some((k, v)));
        }
    }
    Ok(None)
}

/// Parses `LEFT|RIGHT [COUNT n]` at `at`.
fn mpop_opts(args: &[&[u8]], at: usize) -> Result<(bool, usize), CmdError> {
    let left = parse_side(args.get(at).ok_or(CmdError::Syntax)?)?;
    Ok((left, mpop_count(args, at + 1)?))
}

/// Parses the optional `[COUNT n]` tail of LMPOP/ZMPOP and their blocking forms, from `i`
/// (the only argument allowed after the side); 1 when absent.
pub(crate) fn mpop_count(args: &[&[u8]], mut i: usize) -> Result<usize, CmdError> {
    let mut count = None;
    while i < args.len() {
        if eq_ic(args[i], "count") && i + 1 < args.len() && count.is_none() {
            // Redis's getRangeLongFromObjectOrReply: one message for all bad counts.
            let n = arg_i64(args[i + 1]).unwrap_or(0);
            if n <= 0 {
                return Err(CmdError::msg("ERR count should be greater than 0"));
            }
            count = Some(n as usize);
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(count.unwrap_or(1))
}

/// Parses `numkeys key...` of LMPOP/ZMPOP and their blocking forms (a count past the
/// arguments is a syntax error there, unlike SINTERCARD).
pub(crate) fn mpop_keys<'a, 'b>(
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
        return Err(CmdError::Syntax);
    }
    Ok(&args[at + 1..at + 1 + n])
}

/// What replicas and the AOF get for a pop that served `key` (Redis 7.0 rewrites
/// BLPOP/BRPOP, LMPOP/BLMPOP and the zset pops so): `name key [n]`, `n` the elements popped.
pub(crate) fn pop_argv(name: &'static [u8], key: &[u8], n: Option<usize>) -> Vec<Bytes> {
    let mut p = vec![Bytes::from_static(name), Bytes::copy_from_slice(key)];
    if let Some(n) = n {
        p.push(super::keys::num(n as u64));
    }
    p
}

fn write_mpop(out: &mut crate::resp::Out, key: &[u8], vals: &[Vec<u8>]) {
    out.array(2);
    out.bulk(key);
    out.bulks(vals.iter());
}

fn lmpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let keys = mpop_keys(args, 1)?;
    let (left, count) = mpop_opts(args, 2 + keys.len())?;
    match mpop(ctx, keys, left, count)? {
        Some((k, v)) => {
            ctx.count_changes(v.len());
            write_mpop(ctx.out, k, &v);
            if ctx.propagating() {
                let name: &'static [u8] = if left { b"LPOP" } else { b"RPOP" };
                ctx.propagate_as(pop_argv(name, k, Some(v.len())));
            }
        }
        None => {
            ctx.unchanged();
            ctx.out.null_array();
        }
    }
    Ok(())
}

/// Blocks (or answers as a timeout) when nothing could be served; `null_bulk` picks the
/// timeout reply of BLMOVE/BRPOPLPUSH.
fn block_or_timeout(ctx: &mut Ctx<'_>, keys: &[&[u8]], timeout_ms: u64, null_bulk: bool) {
    ctx.unchanged();
    if ctx.can_block() {
        ctx.block_on(keys, timeout_ms);
    } else if !ctx.serving_blocked {
        if null_bulk {
            ctx.out.null();
        } else {
            ctx.out.null_array();
        }
    }
}

fn bpop(ctx: &mut Ctx<'_>, args: &[&[u8]], left: bool) -> CmdResult {
    let timeout = arg_timeout(args[args.len() - 1])?;
    let keys = &args[1..args.len() - 1];
    match mpop(ctx, keys, left, 1)? {
        Some((k, mut v)) => {
            let val = v.pop().unwrap_or_default();
            ctx.out.array(2);
            ctx.out.bulk(k);
            ctx.out.bulk(&val);
            if ctx.propagating() {
                // Replayed as LPOP/RPOP of the key served, as Redis.
                ctx.propagate_as(pop_argv(if left { b"LPOP" } else { b"RPOP" }, k, None));
            }
        }
        None => block_or_timeout(ctx, keys, timeout, false),
    }
    Ok(())
}

fn blpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    bpop(ctx, args, true)
}
fn brpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    bpop(ctx, args, false)
}

/// `rpoplpush`: BRPOPLPUSH (propagated as RPOPLPUSH), else BLMOVE.
fn bmove(
    ctx: &mut Ctx<'_>,
    (src, dst): (&[u8], &[u8]),
    (from, to): (bool, bool),
    timeout: &[u8],
    rpoplpush: bool,
) -> CmdResult {
    let timeout = arg_timeout(timeout)?;
    match do_move(ctx, src, dst, from, to)? {
        Some(v) => {
            ctx.out.bulk(&v);
            if ctx.propagating() {
                // Replayed as LMOVE (RPOPLPUSH for BRPOPLPUSH, as Redis).
                let side = |l: bool| Bytes::from_static(if l { b"LEFT" } else { b"RIGHT" });
                let (src, dst) = (Bytes::copy_from_slice(src), Bytes::copy_from_slice(dst));
                ctx.propagate_as(if rpoplpush {
                    vec![Bytes::from_static(b"RPOPLPUSH"), src, dst]
                } else {
                    vec![Bytes::from_static(b"LMOVE"), src, dst, side(from), side(to)]
                });
            }
        }
        None => block_or_timeout(ctx, &[src], timeout, true),
    }
    Ok(())
}

fn blmove(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (from, to) = (parse_side(args[3])?, parse_side(args[4])?);
    bmove(ctx, (args[1], args[2]), (from, to), args[5], false)
}

fn brpoplpush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    bmove(ctx, (args[1], args[2]), (false, true), args[3], true)
}

fn blmpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let timeout = arg_timeout(args[1])?;
    let keys = mpop_keys(args, 2)?;
    let (left, count) = mpop_opts(args, 3 + keys.len())?;
    match mpop(ctx, keys, left, count)? {
        Some((k, v)) => {
            ctx.count_changes(v.len());
            write_mpop(ctx.out, k, &v);
            if ctx.propagating() {
                let name: &'static [u8] = if left { b"LPOP" } else { b"RPOP" };
                ctx.propagate_as(pop_argv(name, k, Some(v.len())));
            }
        }
        None => block_or_timeout(ctx, keys, timeout, false),
    }
    Ok(())
}
