//! Sorted-set commands: ZADD ZINCRBY ZREM ZCARD ZCOUNT ZLEXCOUNT ZSCORE ZMSCORE ZRANK
//! ZREVRANK, the ZRANGE family (+STORE), ZREMRANGEBY*, ZPOPMIN/MAX, BZPOPMIN/MAX, ZMPOP,
//! BZMPOP, ZUNION/ZINTER/ZDIFF (+STORE), ZINTERCARD, ZRANDMEMBER, ZSCAN.

mod pops;
mod setops;

use rand::Rng;

use super::hash::{check_pair_count, distinct_positions, parse_scan, rand_count};
use super::list::norm_range;
use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx, KeyPos};
use crate::db::Value;
use crate::notify::{GENERIC, ZSET};
use crate::resp::Out;
use crate::types::zset::{LexBound, ScoreBound};
use crate::types::{format_double, parse_f64, ZSetValue};

pub fn commands() -> Vec<CommandSpec> {
    let c = |name, arity, fl, keys, h| {
        CommandSpec::new(name, arity, fl, keys, h)
            .group("sorted-set")
            .since("1.2.0")
    };
    let keynum = |at| KeyPos::Keynum {
        numkeys: at,
        first: 1,
        step: 1,
    };
    vec![
        c("zadd", -4, "write denyoom fast", (1, 1, 1), zadd),
        c("zincrby", 4, "write denyoom fast", (1, 1, 1), zincrby),
        c("zrem", -3, "write fast", (1, 1, 1), zrem),
        c("zcard", 2, "readonly fast", (1, 1, 1), zcard),
        c("zcount", 4, "readonly fast", (1, 1, 1), zcount).since("2.0.0"),
        c("zlexcount", 4, "readonly fast", (1, 1, 1), zlexcount).since("2.8.9"),
        c("zscore", 3, "readonly fast", (1, 1, 1), zscore),
        c("zmscore", -3, "readonly fast", (1, 1, 1), zmscore).since("6.2.0"),
        c("zrank", 3, "readonly fast", (1, 1, 1), zrank).since("2.0.0"),
        c("zrevrank", 3, "readonly fast", (1, 1, 1), zrevrank).since("2.0.0"),
        c("zrange", -4, "readonly", (1, 1, 1), zrange),
        c("zrevrange", -4, "readonly", (1, 1, 1), zrevrange),
        c("zrangebyscore", -4, "readonly", (1, 1, 1), zrangebyscore).since("1.0.5"),
        c(
            "zrevrangebyscore",
            -4,
            "readonly",
            (1, 1, 1),
            zrevrangebyscore,
        )
        .since("2.2.0"),
        c("zrangebylex", -4, "readonly", (1, 1, 1), zrangebylex).since("2.8.9"),
        c("zrevrangebylex", -4, "readonly", (1, 1, 1), zrevrangebylex).since("2.8.9"),
        c("zrangestore", -5, "write denyoom", (1, 2, 1), zrangestore)
            .since("6.2.0")
            .key_flags(&[&["OW", "update"], &["RO", "access"]]),
        c("zremrangebyrank", 4, "write", (1, 1, 1), zremrangebyrank).since("2.0.0"),
        c("zremrangebyscore", 4, "write", (1, 1, 1), zremrangebyscore),
        c("zremrangebylex", 4, "write", (1, 1, 1), zremrangebylex).since("2.8.9"),
        c("zpopmin", -2, "write fast", (1, 1, 1), pops::zpopmin).since("5.0.0"),
        c("zpopmax", -2, "write fast", (1, 1, 1), pops::zpopmax).since("5.0.0"),
        c(
            "bzpopmin",
            -3,
            "write noscript blocking fast",
            (1, -2, 1),
            pops::bzpopmin,
        )
        .since("5.0.0"),
        c(
            "bzpopmax",
            -3,
            "write noscript blocking fast",
            (1, -2, 1),
            pops::bzpopmax,
        )
        .since("5.0.0"),
        c("zmpop", -4, "write", (0, 0, 0), pops::zmpop)
            .since("7.0.0")
            .keys(keynum(1))
            .key_flags(POP_FLAGS),
        c("bzmpop", -5, "write blocking", (0, 0, 0), pops::bzmpop)
            .since("7.0.0")
            .keys(keynum(2))
            .key_flags(POP_FLAGS),
        c("zunion", -3, "readonly", (0, 0, 0), setops::zunion)
            .since("6.2.0")
            .keys(keynum(1)),
        c("zinter", -3, "readonly", (0, 0, 0), setops::zinter)
            .since("6.2.0")
            .keys(keynum(1)),
        c("zdiff", -3, "readonly", (0, 0, 0), setops::zdiff)
            .since("6.2.0")
            .keys(keynum(1)),
        c(
            "zunionstore",
            -4,
            "write denyoom",
            (1, 1, 1),
            setops::zunionstore,
        )
        .since("2.0.0")
        .keys(STORE_KEYS)
        .key_flags(&[&["OW", "update"], &["RO", "access"]]),
        c(
            "zinterstore",
            -4,
            "write denyoom",
            (1, 1, 1),
            setops::zinterstore,
        )
        .since("2.0.0")
        .keys(STORE_KEYS)
        .key_flags(&[&["OW", "update"], &["RO", "access"]]),
        c(
            "zdiffstore",
            -4,
            "write denyoom",
            (1, 1, 1),
            setops::zdiffstore,
        )
        .since("6.2.0")
        .keys(STORE_KEYS)
        .key_flags(&[&["OW", "update"], &["RO", "access"]]),
        c("zintercard", -3, "readonly", (0, 0, 0), setops::zintercard)
            .since("7.0.0")
            .keys(keynum(1)),
        c("zrandmember", -2, "readonly", (1, 1, 1), zrandmember).since("6.2.0"),
        c("zscan", -3, "readonly", (1, 1, 1), zscan).since("2.8.0"),
    ]
}

/// Keys of Z*STORE: the destination, then `numkeys` sources after argument 2.
const STORE_KEYS: KeyPos = KeyPos::DestThenKeynum {
    dest: 1,
    numkeys: 2,
};

/// Key-spec flags of commands that pop from their keys (and may delete them).
const POP_FLAGS: &[&[&str]] = &[&["RW", "access", "delete"]];

/// (member, score) pairs in reply order.
type Scored = Vec<(Vec<u8>, f64)>;

fn float_arg(b: &[u8]) -> Result<f64, CmdError> {
    parse_f64(b).ok_or(CmdError::NotFloat)
}

/// Scored items: RESP2 flat `member score`; RESP3 `[member, double]` pairs when `nested`.
fn write_items(out: &mut Out, items: &[(Vec<u8>, f64)], scores: bool, nested: bool) {
    if !scores {
        out.array(items.len());
        for (m, _) in items {
            out.bulk(m);
        }
    } else if nested {
        out.array(items.len());
        for (m, s) in items {
            out.array(2);
            out.bulk(m);
            out.double(*s);
        }
    } else {
        out.array(items.len() * 2);
        for (m, s) in items {
            out.bulk(m);
            out.double(*s);
        }
    }
}

// ---- ZADD / ZINCRBY ----

#[derive(Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

fn zadd_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], mut f: AddFlags) -> CmdResult {
    let mut idx = 2;
    while idx < args.len() {
        let a = &args[idx];
        if eq_ic(a, "nx") {
            f.nx = true;
        } else if eq_ic(a, "xx") {
            f.xx = true;
        } else if eq_ic(a, "ch") {
            f.ch = true;
        } else if eq_ic(a, "incr") {
            f.incr = true;
        } else if eq_ic(a, "gt") {
            f.gt = true;
        } else if eq_ic(a, "lt") {
            f.lt = true;
        } else {
            break;
        }
        idx += 1;
    }
    let rest = &args[idx..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if f.nx && f.xx {
        return Err(CmdError::msg(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(CmdError::msg(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && rest.len() > 2 {
        return Err(CmdError::msg(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let scores = rest
        .chunks_exact(2)
        .map(|p| float_arg(p[0]))
        .collect::<Result<Vec<f64>, _>>()?;
    let key = &args[1];
    // Limits are only read when something is inserted (a config read is not free).
    let srv = ctx.srv;
    let mut lim_cache = None;
    let (mut added, mut updated, mut processed, mut last) = (0, 0, 0, 0.0);
    let exists = ctx.ks.get_zset(key)?.is_some();
    if exists || !f.xx {
        if !exists {
            let maxlen = rest.chunks_exact(2).map(|p| p[1].len()).max().unwrap_or(0);
            let lim = lim_cache.get_or_insert_with(|| srv.type_limits());
            ctx.ks
                .set(key, Value::ZSet(ZSetValue::new_for(maxlen, lim)));
        }
        let z = ctx.ks.get_zset(key)?.ok_or(CmdError::NoSuchKey)?;
        for (p, &score) in rest.chunks_exact(2).zip(&scores) {
            let m = &p[1];
            let mut score = score;
            match z.score(m) {
                Some(cur) => {
                    if f.nx {
                        continue;
                    }
                    if f.incr {
                        score += cur;
                        if score.is_nan() {
                            ctx.ks.remove_if_empty(key);
                            return Err(CmdError::msg("ERR resulting score is not a number (NaN)"));
                        }
                    }
                    if (f.lt && score >= cur) || (f.gt && score <= cur) {
                        continue;
                    }
                    last = score;
                    processed += 1;
                    if score != cur {
                        let lim = lim_cache.get_or_insert_with(|| srv.type_limits());
                        z.insert(m, score, lim);
                        updated += 1;
                    }
                }
                None if !f.xx => {
                    let lim = lim_cache.get_or_insert_with(|| srv.type_limits());
                    z.insert(m, score, lim);
                    added += 1;
                    processed += 1;
                    last = score;
                }
                None => {}
            }
        }
        if added > 0 {
            ctx.ks.signal_ready(key);
        }
    }
    // Redis notifies only when a member was added or its score changed.
    if added + updated > 0 {
        ctx.notify(ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    ctx.changed_by((added + updated) as usize);
    if f.incr {
        if processed > 0 {
            ctx.out.double(last);
        } else {
            ctx.out.null();
        }
    } else {
        ctx.out.int(if f.ch { added + updated } else { added });
    }
    Ok(())
}

fn zadd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    zadd_generic(ctx, args, AddFlags::default())
}

fn zincrby(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let f = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    zadd_generic(ctx, args, f)
}

// ---- simple reads and removals ----

fn zrem(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut n = 0;
    let mut emptied = false;
    if let Some(z) = ctx.ks.get_zset(args[1])? {
        n = args[2..].iter().filter(|m| z.remove(m)).count();
        emptied = z.is_empty();
    }
    removed(ctx, args[1], "zrem", n, emptied);
    ctx.changed_by(n);
    ctx.out.int(n as i64);
    Ok(())
}

fn zcard(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let n = ctx.ks.get_zset(args[1])?.map_or(0, |z| z.len());
    ctx.out.int(n as i64);
    Ok(())
}

fn score_range(min: &[u8], max: &[u8]) -> Result<(ScoreBound, ScoreBound), CmdError> {
    match (ScoreBound::parse(min), ScoreBound::parse(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(CmdError::msg("ERR min or max is not a float")),
    }
}

fn lex_range(min: &[u8], max: &[u8]) -> Result<(LexBound, LexBound), CmdError> {
    match (LexBound::parse(min), LexBound::parse(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(CmdError::msg("ERR min or max not valid string range item")),
    }
}

fn zcount(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (min, max) = score_range(args[2], args[3])?;
    let n = ctx.ks.get_zset(args[1])?.map_or(0, |z| {
        let (a, b) = z.score_range(min, max);
        b - a
    });
    ctx.out.int(n as i64);
    Ok(())
}

fn zlexcount(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (min, max) = lex_range(args[2], args[3])?;
    let n = ctx.ks.get_zset(args[1])?.map_or(0, |z| {
        let (a, b) = z.lex_range(&min, &max);
        b - a
    });
    ctx.out.int(n as i64);
    Ok(())
}

fn zscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    match ctx.ks.get_zset(args[1])?.and_then(|z| z.score(args[2])) {
        Some(s) => ctx.out.double(s),
        None => ctx.out.null(),
    }
    Ok(())
}

fn zmscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let z = ctx.ks.get_zset(args[1])?;
    ctx.out.array(args.len() - 2);
    for m in &args[2..] {
        match z.as_ref().and_then(|z| z.score(m)) {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn rank(ctx: &mut Ctx<'_>, args: &[&[u8]], rev: bool) -> CmdResult {
    match ctx.ks.get_zset(args[1])?.and_then(|z| z.rank(args[2], rev)) {
        Some(r) => ctx.out.int(r as i64),
        None => ctx.out.null(),
    }
    Ok(())
}

fn zrank(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    rank(ctx, args, false)
}

fn zrevrank(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    rank(ctx, args, true)
}

// ---- the ZRANGE family ----

#[derive(Clone, Copy, PartialEq)]
enum By {
    Auto,
    Rank,
    Score,
    Lex,
}

enum Range {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

struct RangeQuery {
    range: Range,
    rev: bool,
    /// (offset, count); count < 0 means no limit.
    limit: Option<(i64, i64)>,
    withscores: bool,
}

/// Parses `<min> <max> [options]` starting at `at` like Redis's zrangeGenericCommand.
/// `by`/`rev` are preset by the legacy commands (which then reject BYSCORE/REV words).
fn parse_range(
    args: &[&[u8]],
    at: usize,
    mut by: By,
    rev: Option<bool>,
    store: bool,
) -> Result<RangeQuery, CmdError> {
    let mut q_rev = rev;
    let (mut withscores, mut limit) = (false, None);
    let mut j = at + 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if !store && eq_ic(a, "withscores") {
            withscores = true;
        } else if eq_ic(a, "limit") && left >= 2 {
            limit = Some((arg_i64(args[j + 1])?, arg_i64(args[j + 2])?));
            j += 2;
        } else if rev.is_none() && q_rev.is_none() && eq_ic(a, "rev") {
            q_rev = Some(true);
        } else if by == By::Auto && eq_ic(a, "bylex") {
            by = By::Lex;
        } else if by == By::Auto && eq_ic(a, "byscore") {
            by = By::Score;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let rev = q_rev.unwrap_or(false);
    if by == By::Auto {
        by = By::Rank;
    }
    if limit.is_some() && by == By::Rank {
        return Err(CmdError::msg(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && by == By::Lex {
        return Err(CmdError::msg(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (mut lo, mut hi) = (&args[at], &args[at + 1]);
    if rev && by != By::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let range = match by {
        By::Score => {
            let (a, b) = score_range(lo, hi)?;
            Range::Score(a, b)
        }
        By::Lex => {
            let (a, b) = lex_range(lo, hi)?;
            Range::Lex(a, b)
        }
        _ => Range::Rank(arg_i64(lo)?, arg_i64(hi)?),
    };
    Ok(RangeQuery {
        range,
        rev,
        limit,
        withscores,
    })
}

/// Runs a range query over a sorted set, in reply order.
fn select(z: &ZSetValue, q: &RangeQuery) -> Vec<(Vec<u8>, f64)> {
    let len = z.len();
    let (a, b) = match &q.range {
        Range::Rank(s, e) => {
            return match norm_range(*s, *e, len) {
                None => Vec::new(),
                Some((s, e)) if q.rev => z.range(len - 1 - e, len - s, true),
                Some((s, e)) => z.range(s, e + 1, false),
            };
        }
        Range::Score(min, max) => z.score_range(*min, *max),
        Range::Lex(min, max) => z.lex_range(min, max),
    };
    let n = b - a;
    let (off, take) = match q.limit {
        None => (0, n),
        Some((off, _)) if off < 0 => return Vec::new(),
        Some((off, cnt)) => {
            let off = (off as u64).min(n as u64) as usize;
            let rem = n - off;
            (
                off,
                if cnt < 0 {
                    rem
                } else {
                    (cnt as u64).min(rem as u64) as usize
                },
            )
        }
    };
    if q.rev {
        z.range(b - off - take, b - off, true)
    } else {
        z.range(a + off, a + off + take, false)
    }
}

fn range_reply(ctx: &mut Ctx<'_>, args: &[&[u8]], by: By, rev: Option<bool>) -> CmdResult {
    let q = parse_range(args, 2, by, rev, false)?;
    let items = match ctx.ks.get_zset(args[1])? {
        Some(z) => select(z, &q),
        None => Vec::new(),
    };
    let nested = ctx.out.resp3;
    write_items(ctx.out, &items, q.withscores, nested);
    Ok(())
}

fn zrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    range_reply(ctx, args, By::Auto, None)
}
fn zrevrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    range_reply(ctx, args, By::Rank, Some(true))
}
fn zrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    range_reply(ctx, args, By::Score, Some(false))
}
fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    range_reply(ctx, args, By::Score, Some(true))
}
fn zrangebylex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    range_reply(ctx, args, By::Lex, Some(false))
}
fn zrevrangebylex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    range_reply(ctx, args, By::Lex, Some(true))
}

/// The events of a removal of `n` members from `key`: `event`, then `del` (and the
/// deletion) when it `emptied` the set.
fn removed(ctx: &mut Ctx<'_>, key: &[u8], event: &'static str, n: usize, emptied: bool) {
    if n > 0 {
        ctx.notify(ZSET, event, key);
    }
    if emptied {
        ctx.ks.del(key);
        ctx.notify(GENERIC, "del", key);
    }
}

/// Stores `items` at `dst` as a sorted set (deleting it when empty), notifying `event`;
/// replies the count.
fn store_result(ctx: &mut Ctx<'_>, dst: &[u8], items: Vec<(Vec<u8>, f64)>, event: &'static str) {
    let n = items.len();
    if n == 0 {
        // An empty result deletes the destination: a change only if it existed.
        let deleted = ctx.ks.del(dst);
        if deleted {
            ctx.notify(GENERIC, "del", dst);
        }
        ctx.changed_if(deleted);
    } else {
        let lim = ctx.limits();
        let z = ZSetValue::from_pairs(items, &lim);
        ctx.ks.set(dst, Value::ZSet(z));
        ctx.notify(ZSET, event, dst);
        ctx.ks.signal_ready(dst);
    }
    ctx.out.int(n as i64);
}

fn zrangestore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let q = parse_range(args, 3, By::Auto, None, true)?;
    let items = match ctx.ks.get_zset(args[2])? {
        Some(z) => select(z, &q),
        None => Vec::new(),
    };
    store_result(ctx, args[1], items, "zrangestore");
    Ok(())
}

fn remrange(ctx: &mut Ctx<'_>, args: &[&[u8]], by: By) -> CmdResult {
    let range = match by {
        By::Score => {
            let (a, b) = score_range(args[2], args[3])?;
            Range::Score(a, b)
        }
        By::Lex => {
            let (a, b) = lex_range(args[2], args[3])?;
            Range::Lex(a, b)
        }
        _ => Range::Rank(arg_i64(args[2])?, arg_i64(args[3])?),
    };
    let mut n = 0;
    let mut emptied = false;
    if let Some(z) = ctx.ks.get_zset(args[1])? {
        let (a, b) = match &range {
            Range::Rank(s, e) => norm_range(*s, *e, z.len()).map_or((0, 0), |(s, e)| (s, e + 1)),
            Range::Score(min, max) => z.score_range(*min, *max),
            Range::Lex(min, max) => z.lex_range(min, max),
        };
        n = z.remove_range(a, b);
        emptied = z.is_empty();
    }
    let event = match by {
        By::Score => "zremrangebyscore",
        By::Lex => "zremrangebylex",
        _ => "zremrangebyrank",
    };
    removed(ctx, args[1], event, n, emptied);
    ctx.changed_by(n);
    ctx.out.int(n as i64);
    Ok(())
}

fn zremrangebyrank(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    remrange(ctx, args, By::Rank)
}
fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    remrange(ctx, args, By::Score)
}
fn zremrangebylex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    remrange(ctx, args, By::Lex)
}

// ---- ZRANDMEMBER / ZSCAN ----

fn zrandmember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let count = args.get(2).map(|c| rand_count(c)).transpose()?;
    if args.len() > 4 || (args.len() == 4 && !eq_ic(args[3], "withscores")) {
        return Err(CmdError::Syntax);
    }
    let withscores = args.len() == 4;
    check_pair_count(count, withscores)?;
    let z = ctx.ks.get_zset(args[1])?;
    let out = &mut *ctx.out;
    let Some(count) = count else {
        let pick = z.and_then(|z| {
            let n = z.len();
            (n > 0).then(|| z.get_index(rand::rng().random_range(0..n)))?
        });
        match pick {
            Some((m, _)) => out.bulk(&m),
            None => out.null(),
        }
        return Ok(());
    };
    let Some(z) = z else {
        out.array(0);
        return Ok(());
    };
    if count < 0 {
        // Written as picked, nothing collected first: a huge count stops once the reply
        // passes the client's output limit (the client is being closed), as Redis stops
        // on CLIENT_CLOSE_ASAP. The count only sizes the header, never an allocation.
        let n = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
        let len = z.len();
        let mut rng = rand::rng();
        let nested = out.resp3 && withscores;
        out.array(if withscores && !out.resp3 {
            n.saturating_mul(2)
        } else {
            n
        });
        for _ in 0..n {
            if ctx.cl.reply_overflow(out.len()) {
                break;
            }
            if nested {
                out.array(2);
            }
            match z.get_index(rng.random_range(0..len)) {
                Some((m, s)) => {
                    out.bulk(&m);
                    if withscores {
                        out.double(s);
                    }
                }
                None => {
                    out.null();
                    if withscores {
                        out.null();
                    }
                }
            }
        }
        return Ok(());
    }
    let items: Vec<(Vec<u8>, f64)> = if count as usize >= z.len() {
        z.range(0, usize::MAX, false)
    } else {
        distinct_positions(z.len(), count as usize)
            .into_iter()
            .filter_map(|i| z.get_index(i))
            .collect()
    };
    let nested = out.resp3;
    write_items(out, &items, withscores, nested);
    Ok(())
}

fn zscan(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let sa = parse_scan(args)?;
    let mut items = Vec::new();
    let mut next = 0;
    if let Some(z) = ctx.ks.get_zset(args[1])? {
        next = z.scan(sa.cursor, sa.count, |m, s| {
            if sa.matches(m) {
                items.push(m.to_vec());
                items.push(format_double(s).into_bytes());
            }
        });
    }
    super::hash::write_scan(ctx.out, next, &items);
    Ok(())
}
