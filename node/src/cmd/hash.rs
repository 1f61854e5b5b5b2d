//! Hash commands: HSET HSETNX HGET HMGET HMSET HDEL HEXISTS HLEN HKEYS HVALS HGETALL HINCRBY
//! HINCRBYFLOAT HSTRLEN HRANDFIELD HSCAN. Also the SCAN-argument parser the collection SCANs
//! share.

use bytes::Bytes;
use rand::Rng;

use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx};
use crate::notify::{GENERIC, HASH};
use crate::types::ldouble::LDouble;
use crate::types::{parse_i64_strict, HashValue};

pub fn commands() -> Vec<CommandSpec> {
    let c = |name, arity, fl, keys, h| {
        CommandSpec::new(name, arity, fl, keys, h)
            .group("hash")
            .since("2.0.0")
    };
    vec![
        c("hset", -4, "write denyoom fast", (1, 1, 1), hset),
        c("hsetnx", 4, "write denyoom fast", (1, 1, 1), hsetnx),
        c("hmset", -4, "write denyoom fast", (1, 1, 1), hmset),
        c("hget", 3, "readonly fast", (1, 1, 1), hget),
        c("hmget", -3, "readonly fast", (1, 1, 1), hmget),
        c("hdel", -3, "write fast", (1, 1, 1), hdel),
        c("hexists", 3, "readonly fast", (1, 1, 1), hexists),
        c("hlen", 2, "readonly fast", (1, 1, 1), hlen),
        c("hkeys", 2, "readonly", (1, 1, 1), hkeys),
        c("hvals", 2, "readonly", (1, 1, 1), hvals),
        c("hgetall", 2, "readonly", (1, 1, 1), hgetall),
        c("hincrby", 4, "write denyoom fast", (1, 1, 1), hincrby),
        c(
            "hincrbyfloat",
            4,
            "write denyoom fast",
            (1, 1, 1),
            hincrbyfloat,
        )
        .since("2.6.0"),
        c("hstrlen", 3, "readonly fast", (1, 1, 1), hstrlen).since("3.2.0"),
        c("hrandfield", -2, "readonly", (1, 1, 1), hrandfield).since("6.2.0"),
        c("hscan", -3, "readonly", (1, 1, 1), hscan).since("2.8.0"),
    ]
}

fn set_pairs(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<i64, CmdError> {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::msg(format!(
            "ERR wrong number of arguments for '{}' command",
            String::from_utf8_lossy(args[0]).to_lowercase()
        )));
    }
    let lim = ctx.limits();
    let h = ctx.ks.hash_or_create(args[1])?;
    let mut added = 0;
    for p in args[2..].chunks_exact(2) {
        added += h.set(p[0], p[1], &lim) as i64;
    }
    ctx.notify(HASH, "hset", args[1]);
    Ok(added)
}

fn hset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let n = set_pairs(ctx, args)?;
    ctx.count_changes((args.len() - 2) / 2);
    ctx.out.int(n);
    Ok(())
}

fn hmset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    set_pairs(ctx, args)?;
    ctx.count_changes((args.len() - 2) / 2);
    ctx.out.ok();
    Ok(())
}

fn hsetnx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let lim = ctx.limits();
    if let Some(h) = ctx.ks.get_hash(args[1])? {
        if h.contains(args[2]) {
            ctx.unchanged();
            ctx.out.int(0);
            return Ok(());
        }
    }
    ctx.ks.hash_or_create(args[1])?.set(args[2], args[3], &lim);
    ctx.notify(HASH, "hset", args[1]);
    ctx.out.int(1);
    Ok(())
}

fn hget(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    match ctx.ks.get_hash(args[1])?.and_then(|h| h.get(args[2])) {
        Some(v) => ctx.out.bulk(v),
        None => ctx.out.null(),
    }
    Ok(())
}

fn hmget(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let h = ctx.ks.get_hash(args[1])?;
    ctx.out.array(args.len() - 2);
    for f in &args[2..] {
        match h.as_ref().and_then(|h| h.get(f)) {
            Some(v) => ctx.out.bulk(v),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn hdel(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut n = 0;
    let mut emptied = false;
    if let Some(h) = ctx.ks.get_hash(args[1])? {
        for f in &args[2..] {
            n += h.remove(f) as i64;
        }
        emptied = h.is_empty();
    }
    if n > 0 {
        ctx.notify(HASH, "hdel", args[1]);
    }
    if emptied {
        ctx.ks.del(args[1]);
        ctx.notify(GENERIC, "del", args[1]);
    }
    ctx.changed_by(n as usize);
    ctx.out.int(n);
    Ok(())
}

fn hexists(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let e = ctx
        .ks
        .get_hash(args[1])?
        .is_some_and(|h| h.contains(args[2]));
    ctx.out.int(e as i64);
    Ok(())
}

fn hlen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let n = ctx.ks.get_hash(args[1])?.map_or(0, |h| h.len());
    ctx.out.int(n as i64);
    Ok(())
}

fn hstrlen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let n = ctx
        .ks
        .get_hash(args[1])?
        .and_then(|h| h.get(args[2]).map(<[u8]>::len))
        .unwrap_or(0);
    ctx.out.int(n as i64);
    Ok(())
}

/// Which halves of the pairs HKEYS/HVALS/HGETALL return.
fn getall(ctx: &mut Ctx<'_>, args: &[&[u8]], keys: bool, vals: bool) -> CmdResult {
    let Some(h) = ctx.ks.get_hash(args[1])? else {
        if keys && vals {
            ctx.out.map(0);
        } else {
            ctx.out.array(0);
        }
        return Ok(());
    };
    let out = &mut *ctx.out;
    if keys && vals {
        out.map(h.len());
    } else {
        out.array(h.len());
    }
    h.for_each(|k, v| {
        if keys {
            out.bulk(k);
        }
        if vals {
            out.bulk(v);
        }
    });
    Ok(())
}

fn hkeys(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    getall(ctx, args, true, false)
}

fn hvals(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    getall(ctx, args, false, true)
}

fn hgetall(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    getall(ctx, args, true, true)
}

fn hincrby(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let incr = arg_i64(args[3])?;
    let lim = ctx.limits();
    let h = ctx.ks.hash_or_create(args[1])?;
    let cur = match h.get(args[2]) {
        Some(v) => {
            parse_i64_strict(v).ok_or_else(|| CmdError::msg("ERR hash value is not an integer"))?
        }
        None => 0,
    };
    let new = cur.checked_add(incr).ok_or(CmdError::Overflow)?;
    h.set(args[2], itoa::Buffer::new().format(new).as_bytes(), &lim);
    ctx.notify(HASH, "hincrby", args[1]);
    ctx.out.int(new);
    Ok(())
}

fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    // Redis adds in 80-bit long double and prints with %.17Lf: emulate it exactly.
    let incr = LDouble::parse(args[3]).ok_or(CmdError::NotFloat)?;
    if !incr.is_finite() {
        return Err(CmdError::msg("ERR value is NaN or Infinity"));
    }
    let lim = ctx.limits();
    let h = ctx.ks.hash_or_create(args[1])?;
    let cur = match h.get(args[2]) {
        Some(v) => {
            LDouble::parse(v).ok_or_else(|| CmdError::msg("ERR hash value is not a float"))?
        }
        None => LDouble::parse(b"0").ok_or(CmdError::NotFloat)?,
    };
    let new = cur + incr;
    if !new.is_finite() {
        return Err(CmdError::msg("ERR increment would produce NaN or Infinity"));
    }
    let s = new.to_human();
    h.set(args[2], s.as_bytes(), &lim);
    ctx.notify(HASH, "hincrbyfloat", args[1]);
    // As Redis: replicas and the AOF get the result (HSET key field value).
    if ctx.propagating() {
        ctx.propagate_as(vec![
            Bytes::from_static(b"HSET"),
            Bytes::copy_from_slice(args[1]),
            Bytes::copy_from_slice(args[2]),
            Bytes::copy_from_slice(s.as_bytes()),
        ]);
    }
    ctx.out.bulk(s.as_bytes());
    Ok(())
}

/// Picks `n` distinct uniformly random positions out of `len` (n < len).
pub(crate) fn distinct_positions(len: usize, n: usize) -> Vec<usize> {
    rand::seq::index::sample(&mut rand::rng(), len, n).into_vec()
}

/// Parses the count of HRANDFIELD / SRANDMEMBER / ZRANDMEMBER as Redis does (its
/// getRangeLongFromObjectOrReply over -LONG_MAX..LONG_MAX), before any other argument.
pub(crate) fn rand_count(b: &[u8]) -> Result<i64, CmdError> {
    let n = arg_i64(b)?;
    if n == i64::MIN {
        return Err(CmdError::msg(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    Ok(n)
}

/// With WITHVALUES/WITHSCORES the reply has two entries per pick: Redis refuses counts
/// whose double would overflow (checked after the syntax).
pub(crate) fn check_pair_count(n: Option<i64>, pairs: bool) -> Result<(), CmdError> {
    match n {
        Some(n) if pairs && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&n) => {
            Err(CmdError::msg("ERR value is out of range"))
        }
        _ => Ok(()),
    }
}

fn hrandfield(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let count = args.get(2).map(|c| rand_count(c)).transpose()?;
    if args.len() > 4 || (args.len() == 4 && !eq_ic(args[3], "withvalues")) {
        return Err(CmdError::Syntax);
    }
    let withvalues = args.len() == 4;
    check_pair_count(count, withvalues)?;
    let h = ctx.ks.get_hash(args[1])?;
    let out = &mut *ctx.out;
    let Some(count) = count else {
        match h.and_then(|h| h.random_pair()) {
            Some((f, _)) => out.bulk(&f),
            None => out.null(),
        }
        return Ok(());
    };
    let Some(h) = h else {
        out.array(0);
        return Ok(());
    };
    if count < 0 {
        // Written as picked: a huge count stops once the reply passes the client's output
        // limit (the client is being closed), as Redis stops on CLIENT_CLOSE_ASAP.
        let n = count.unsigned_abs() as usize;
        let len = h.len();
        let mut rng = rand::rng();
        let nested = out.resp3 && withvalues;
        out.array(if withvalues && !out.resp3 { n * 2 } else { n });
        for _ in 0..n {
            if ctx.cl.reply_overflow(out.len()) {
                break;
            }
            let pick = h.get_index(rng.random_range(0..len));
            if nested {
                out.array(2);
            }
            match pick {
                Some((f, v)) => {
                    out.bulk(&f);
                    if withvalues {
                        out.bulk(&v);
                    }
                }
                None => {
                    out.null();
                    if withvalues {
                        out.null();
                    }
                }
            }
        }
        return Ok(());
    }
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = if count as usize >= h.len() {
        h.pairs()
    } else {
        distinct_positions(h.len(), count as usize)
            .into_iter()
            .filter_map(|i| h.get_index(i))
            .collect()
    };
    write_pairs(
        out,
        pairs.iter().map(|(f, v)| (&f[..], &v[..])),
        pairs.len(),
        withvalues,
    );
    Ok(())
}

/// Writes field (+value) picks: flat in RESP2, [field, value] pairs in RESP3.
fn write_pairs<'a>(
    out: &mut crate::resp::Out,
    pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    n: usize,
    withvalues: bool,
) {
    if !withvalues {
        out.array(n);
        for (f, _) in pairs {
            out.bulk(f);
        }
    } else if out.resp3 {
        out.array(n);
        for (f, v) in pairs {
            out.array(2);
            out.bulk(f);
            out.bulk(v);
        }
    } else {
        out.array(n * 2);
        for (f, v) in pairs {
            out.bulk(f);
            out.bulk(v);
        }
    }
}

/// Parsed `cursor [MATCH pattern] [COUNT count]` of HSCAN/SSCAN/ZSCAN.
pub(crate) struct ScanArgs<'a> {
    pub cursor: u64,
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
}

pub(crate) fn parse_scan<'a>(args: &[&'a [u8]]) -> Result<ScanArgs<'a>, CmdError> {
    let cursor = std::str::from_utf8(args[2])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| CmdError::msg("ERR invalid cursor"))?;
    let mut sa = ScanArgs {
        cursor,
        pattern: None,
        count: 10,
    };
    let mut i = 3;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Err(CmdError::Syntax);
        }
        if eq_ic(args[i], "count") {
            let n = arg_i64(args[i + 1])?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            sa.count = n as usize;
        } else if eq_ic(args[i], "match") {
            let p = args[i + 1];
            // "*" matches everything: skip the matcher, as Redis does.
            sa.pattern = (p != b"*").then_some(p);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(sa)
}

impl ScanArgs<'_> {
    pub fn matches(&self, s: &[u8]) -> bool {
        self.pattern
            .is_none_or(|p| crate::pubsub::glob_match(p, s, false))
    }
}

/// Writes a SCAN reply: `[cursor, [items...]]`.
pub(crate) fn write_scan(out: &mut crate::resp::Out, cursor: u64, items: &[Vec<u8>]) {
    out.array(2);
    out.bulk(itoa::Buffer::new().format(cursor).as_bytes());
    out.array(items.len());
    for it in items {
        out.bulk(it);
    }
}

fn hscan(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let sa = parse_scan(args)?;
    let mut items = Vec::new();
    let mut next = 0;
    if let Some(h) = ctx.ks.get_hash(args[1])? {
        next = scan_hash(h, &sa, &mut items);
    }
    write_scan(ctx.out, next, &items);
    Ok(())
}

fn scan_hash(h: &HashValue, sa: &ScanArgs<'_>, items: &mut Vec<Vec<u8>>) -> u64 {
    h.scan(sa.cursor, sa.count, |f, v| {
        if sa.matches(f) {
            items.push(f.to_vec());
            items.push(v.to_vec());
        }
    })
}
