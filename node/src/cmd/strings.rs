//! String commands: GET SET SETNX SETEX PSETEX GETSET GETDEL GETEX MGET MSET MSETNX INCR DECR
//! INCRBY DECRBY INCRBYFLOAT APPEND STRLEN GETRANGE SUBSTR SETRANGE LCS.

use bytes::Bytes;

use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx, KeyView};
use crate::db::{SBytes, Value, NO_EXPIRE};
use crate::notify::{GENERIC, STRING};
use crate::types::ldouble::LDouble;

pub fn commands() -> Vec<CommandSpec> {
    let s = |name, arity, fl, keys, h| CommandSpec::new(name, arity, fl, keys, h).group("string");
    vec![
        s("get", 2, "readonly fast", (1, 1, 1), get),
        s("set", -3, "write denyoom", (1, 1, 1), set),
        s("setnx", 3, "write denyoom fast", (1, 1, 1), setnx),
        s("setex", 4, "write denyoom", (1, 1, 1), setex).since("2.0.0"),
        s("psetex", 4, "write denyoom", (1, 1, 1), psetex).since("2.6.0"),
        s("getset", 3, "write denyoom fast", (1, 1, 1), getset),
        s("getdel", 2, "write fast", (1, 1, 1), getdel).since("6.2.0"),
        s("getex", -2, "write fast", (1, 1, 1), getex).since("6.2.0"),
        s("mget", -2, "readonly fast", (1, -1, 1), mget),
        s("mset", -3, "write denyoom", (1, -1, 2), mset).since("1.0.1"),
        s("msetnx", -3, "write denyoom", (1, -1, 2), msetnx).since("1.0.1"),
        s("incr", 2, "write denyoom fast", (1, 1, 1), incr),
        s("decr", 2, "write denyoom fast", (1, 1, 1), decr),
        s("incrby", 3, "write denyoom fast", (1, 1, 1), incrby),
        s("decrby", 3, "write denyoom fast", (1, 1, 1), decrby),
        s(
            "incrbyfloat",
            3,
            "write denyoom fast",
            (1, 1, 1),
            incrbyfloat,
        )
        .since("2.6.0"),
        s("append", 3, "write denyoom fast", (1, 1, 1), append).since("2.0.0"),
        s("strlen", 2, "readonly fast", (1, 1, 1), strlen).since("2.2.0"),
        s("getrange", 4, "readonly", (1, 1, 1), getrange).since("2.4.0"),
        s("substr", 4, "readonly", (1, 1, 1), getrange),
        s("setrange", 4, "write denyoom", (1, 1, 1), setrange).since("2.2.0"),
        s("lcs", -3, "readonly", (1, 2, 1), lcs).since("7.0.0"),
    ]
}

/// Largest string Redis lets a command build (proto-max-bulk-len).
pub fn check_size(ctx: &Ctx<'_>, len: u64) -> CmdResult {
    let max = ctx.srv.config.read().typed.proto_max_bulk_len;
    if len > max {
        return Err(CmdError::msg(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    Ok(())
}

/// A string value as a bulk reply: a big value kept in its arrival buffer goes out from
/// that buffer when the connection allows it (`Out::bulk_shared`), not copied.
fn bulk_value(out: &mut crate::resp::Out, s: &SBytes) {
    match s {
        SBytes::Shared(b) => out.bulk_shared(b),
        s => out.bulk(s),
    }
}

/// Writes the string value at `key` (or null); WRONGTYPE for other types.
fn reply_string(ks: &mut KeyView<'_>, out: &mut crate::resp::Out, key: &[u8]) -> CmdResult {
    match ks.get(key) {
        None => out.null(),
        Some(Value::Int(i)) => out.bulk_int(*i),
        Some(Value::Str(s)) => bulk_value(out, s),
        Some(Value::Buf(b)) => out.bulk(b),
        Some(_) => return Err(CmdError::WrongType),
    }
    Ok(())
}

fn get(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_string(&mut ctx.ks, ctx.out, args[1])
}

/// Parses an EX/PX/EXAT/PXAT amount into an absolute unix-ms deadline.
pub fn parse_expire(
    arg: &[u8],
    unit_ms: u64,
    absolute: bool,
    now: u64,
    cmd: &str,
) -> Result<u64, CmdError> {
    let v = arg_i64(arg)?;
    let bad = || CmdError::msg(format!("ERR invalid expire time in '{cmd}' command"));
    if v <= 0 {
        return Err(bad());
    }
    let ms = (v as u64).checked_mul(unit_ms).ok_or_else(bad)?;
    let at = if absolute {
        ms
    } else {
        ms.checked_add(now).ok_or_else(bad)?
    };
    if at > i64::MAX as u64 {
        return Err(bad());
    }
    Ok(at)
}

#[derive(Default)]
struct SetOpts {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    expire: Option<u64>,
}

/// The deadline options of SET and GETEX.
const EXPIRE_OPTS: [&str; 4] = ["ex", "px", "exat", "pxat"];

/// What replicas and the AOF get for a SET with a deadline, as Redis 7.0 rewrites it:
/// `SET key value PXAT <absolute ms>` (NX/XX/GET dropped: already applied), so a replay
/// gives the same TTL. None when the command already reads exactly so.
fn with_pxat(args: &[&[u8]], at: u64) -> Option<Vec<Bytes>> {
    let ms = super::keys::num(at);
    if args.len() == 5 && args[0] == b"SET" && args[3] == b"PXAT" && args[4] == &ms[..] {
        return None;
    }
    let b = |a: &[u8]| Bytes::copy_from_slice(a);
    Some(vec![
        Bytes::from_static(b"SET"),
        b(args[1]),
        b(args[2]),
        Bytes::from_static(b"PXAT"),
        ms,
    ])
}

/// In Redis's order: every option's syntax first (the same deadline option may repeat,
/// the last wins; two different ones are a syntax error), then the deadline's value.
fn parse_set_opts(args: &[&[u8]], now: u64, allow_get: bool) -> Result<SetOpts, CmdError> {
    let mut o = SetOpts::default();
    // The deadline option given and its value.
    let mut deadline: Option<(&str, &[u8])> = None;
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        let opt = EXPIRE_OPTS.into_iter().find(|k| eq_ic(a, k));
        if eq_ic(a, "nx") && !o.xx {
            o.nx = true;
        } else if eq_ic(a, "xx") && !o.nx {
            o.xx = true;
        } else if eq_ic(a, "get") && allow_get {
            o.get = true;
        } else if eq_ic(a, "keepttl") && deadline.is_none() {
            o.keepttl = true;
        } else if let Some(k) = opt
            .filter(|k| !o.keepttl && deadline.is_none_or(|(p, _)| p == *k) && i + 1 < args.len())
        {
            deadline = Some((k, args[i + 1]));
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if let Some((k, v)) = deadline {
        let unit = if k.starts_with('e') { 1000 } else { 1 };
        o.expire = Some(parse_expire(v, unit, k.ends_with("at"), now, "set")?);
    }
    Ok(o)
}

fn set(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let o = parse_set_opts(args, ctx.ks.now, true)?;
    let key = &args[1];
    if o.get {
        reply_string(&mut ctx.ks, ctx.out, key)?;
    }
    if o.nx || o.xx {
        let exists = ctx.ks.exists(key);
        if (o.nx && exists) || (o.xx && !exists) {
            ctx.unchanged();
            if !o.get {
                ctx.out.null();
            }
            return Ok(());
        }
    }
    let v = ctx.string_value(args[2]);
    if o.keepttl {
        ctx.ks.set_keepttl(key, v);
        ctx.notify(STRING, "set", key);
    } else {
        ctx.ks.set(key, v);
        ctx.notify(STRING, "set", key);
        if let Some(at) = o.expire {
            ctx.ks.set_expire(key, at);
            ctx.notify(GENERIC, "expire", key);
            if let Some(argv) = ctx.propagating().then(|| with_pxat(args, at)).flatten() {
                ctx.propagate_as(argv);
            }
        }
    }
    if o.get && o.expire.is_none() && ctx.propagating() {
        // Replicas and the AOF get the SET without its GET (Redis 7.0's setGenericCommand).
        let argv = args
            .iter()
            .enumerate()
            .filter(|(i, a)| *i < 3 || !eq_ic(a, "get"))
            .map(|(_, a)| Bytes::copy_from_slice(a))
            .collect();
        ctx.propagate_as(argv);
    }
    if !o.get {
        ctx.out.ok();
    }
    Ok(())
}

fn setnx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if ctx.ks.exists(args[1]) {
        ctx.unchanged();
        ctx.out.int(0);
    } else {
        let v = ctx.string_value(args[2]);
        ctx.ks.set(args[1], v);
        ctx.notify(STRING, "set", args[1]);
        ctx.out.int(1);
    }
    Ok(())
}

fn setex_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], unit: u64, name: &str) -> CmdResult {
    let at = parse_expire(args[2], unit, false, ctx.ks.now, name)?;
    let v = ctx.string_value(args[3]);
    ctx.ks.set(args[1], v);
    ctx.notify(STRING, "set", args[1]);
    ctx.ks.set_expire(args[1], at);
    ctx.notify(GENERIC, "expire", args[1]);
    if ctx.propagating() {
        // SET key value PXAT <absolute ms>: the same TTL whenever it is replayed.
        ctx.propagate_as(vec![
            Bytes::from_static(b"SET"),
            Bytes::copy_from_slice(args[1]),
            Bytes::copy_from_slice(args[3]),
            Bytes::from_static(b"PXAT"),
            super::keys::num(at),
        ]);
    }
    ctx.out.ok();
    Ok(())
}

fn setex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    setex_generic(ctx, args, 1000, "setex")
}

fn psetex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    setex_generic(ctx, args, 1, "psetex")
}

fn getset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_string(&mut ctx.ks, ctx.out, args[1])?;
    let v = ctx.string_value(args[2]);
    ctx.ks.set(args[1], v);
    ctx.notify(STRING, "set", args[1]);
    // Propagated as SET, as Redis 7.0's getsetCommand rewrites itself.
    if ctx.propagating() {
        ctx.propagate_as(vec![
            Bytes::from_static(b"SET"),
            Bytes::copy_from_slice(args[1]),
            Bytes::copy_from_slice(args[2]),
        ]);
    }
    Ok(())
}

fn getdel(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_string(&mut ctx.ks, ctx.out, args[1])?;
    let deleted = ctx.ks.del(args[1]);
    if deleted {
        ctx.notify(GENERIC, "del", args[1]);
        // Replicas and the AOF get a DEL (UNLINK with lazyfree-lazy-user-del), as Redis
        // 7.0 rewrites GETDEL.
        if ctx.propagating() {
            let lazy = ctx.srv.config.read().typed.lazyfree_lazy_user_del;
            let name: &'static [u8] = if lazy { b"UNLINK" } else { b"DEL" };
            ctx.propagate_as(vec![
                Bytes::from_static(name),
                Bytes::copy_from_slice(args[1]),
            ]);
        }
    }
    ctx.changed_if(deleted);
    Ok(())
}

/// In Redis's order: the options' syntax, then the key (missing: nil; WRONGTYPE), then
/// the expire value.
fn getex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let now = ctx.ks.now;
    // The option given (PERSIST, EX, PX, EXAT, PXAT): repeating it is allowed (the
    // last value wins), mixing two is a syntax error, as Redis.
    let mut kind: Option<&str> = None;
    // (value, unit ms, absolute) of EX/PX/EXAT/PXAT, parsed once the key is known.
    let mut expire: Option<(&[u8], u64, bool)> = None;
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        let Some(k) = std::iter::once("persist")
            .chain(EXPIRE_OPTS)
            .find(|k| eq_ic(a, k))
        else {
            return Err(CmdError::Syntax);
        };
        if kind.is_some_and(|p| p != k) || (k != "persist" && i + 1 >= args.len()) {
            return Err(CmdError::Syntax);
        }
        kind = Some(k);
        if k != "persist" {
            let unit = if k.starts_with('e') { 1000 } else { 1 };
            expire = Some((args[i + 1], unit, k.ends_with("at")));
            i += 1;
        }
        i += 1;
    }
    let persist = kind == Some("persist");
    match ctx.ks.get(args[1]) {
        None => {
            ctx.unchanged();
            ctx.out.null();
            return Ok(());
        }
        Some(v) if !v.is_string() => return Err(CmdError::WrongType),
        Some(_) => {}
    }
    // Some(NO_EXPIRE) = persist
    let action: Option<u64> = match expire {
        Some((v, unit, abs)) => Some(parse_expire(v, unit, abs, now, "getex")?),
        None => persist.then_some(NO_EXPIRE),
    };
    reply_string(&mut ctx.ks, ctx.out, args[1])?;
    // Without an option, on a missing key, or PERSIST of a key without a TTL: a read.
    let cur = ctx.ks.entry(args[1]).map(|e| e.expire_at());
    // Replicas and the AOF get what happened, as Redis 7.0 rewrites it: DEL, PERSIST or
    // PEXPIREAT with the absolute deadline.
    let key = || Bytes::copy_from_slice(args[1]);
    let rewrite = match (action, cur) {
        (Some(at), Some(_)) if at != NO_EXPIRE && at <= now => {
            ctx.ks.del(args[1]);
            ctx.notify(GENERIC, "del", args[1]);
            vec![Bytes::from_static(b"DEL"), key()]
        }
        (Some(NO_EXPIRE), Some(NO_EXPIRE)) | (_, None) | (None, _) => {
            ctx.unchanged();
            return Ok(());
        }
        (Some(NO_EXPIRE), Some(_)) => {
            ctx.ks.set_expire(args[1], NO_EXPIRE);
            ctx.notify(GENERIC, "persist", args[1]);
            vec![Bytes::from_static(b"PERSIST"), key()]
        }
        (Some(at), Some(_)) => {
            ctx.ks.set_expire(args[1], at);
            ctx.notify(GENERIC, "expire", args[1]);
            vec![
                Bytes::from_static(b"PEXPIREAT"),
                key(),
                super::keys::num(at),
            ]
        }
    };
    if ctx.propagating() {
        ctx.propagate_as(rewrite);
    }
    Ok(())
}

fn mget(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.out.array(args.len() - 1);
    for k in &args[1..] {
        match ctx.ks.get(k) {
            Some(Value::Int(i)) => ctx.out.bulk_int(*i),
            Some(Value::Str(s)) => bulk_value(ctx.out, s),
            Some(Value::Buf(b)) => ctx.out.bulk(b),
            _ => ctx.out.null(),
        }
    }
    Ok(())
}

fn mset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(super::arity_error(
            super::table().get(args[0]).ok_or(CmdError::Syntax)?,
        ));
    }
    for p in args[1..].chunks(2) {
        let v = ctx.string_value(p[1]);
        ctx.ks.set(p[0], v);
        ctx.notify(STRING, "set", p[0]);
    }
    ctx.count_changes(args.len() / 2);
    ctx.out.ok();
    Ok(())
}

fn msetnx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(super::arity_error(
            super::table().get(args[0]).ok_or(CmdError::Syntax)?,
        ));
    }
    if args[1..].chunks(2).any(|p| ctx.ks.exists(p[0])) {
        ctx.unchanged();
        ctx.out.int(0);
        return Ok(());
    }
    for p in args[1..].chunks(2) {
        let v = ctx.string_value(p[1]);
        ctx.ks.set(p[0], v);
        ctx.notify(STRING, "set", p[0]);
    }
    ctx.count_changes(args.len() / 2);
    ctx.out.int(1);
    Ok(())
}

/// One lookup: an int-encoded value is updated in place (no re-insert, no allocation).
fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], by: i64) -> CmdResult {
    let n = match ctx.ks.get_w(key) {
        Some(Value::Int(i)) => {
            let n = i.checked_add(by).ok_or(CmdError::Overflow)?;
            *i = n;
            n
        }
        Some(v @ (Value::Str(_) | Value::Buf(_))) => {
            let mut t = itoa::Buffer::new();
            let b = v.str_bytes(&mut t).unwrap_or(b"");
            let cur = crate::types::parse_i64_strict(b).ok_or(CmdError::NotInt)?;
            let n = cur.checked_add(by).ok_or(CmdError::Overflow)?;
            *v = Value::Int(n);
            n
        }
        Some(_) => return Err(CmdError::WrongType),
        None => {
            ctx.ks.set(key, Value::Int(by));
            by
        }
    };
    ctx.notify(STRING, "incrby", key);
    ctx.out.int(n);
    Ok(())
}

fn incr(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    incr_by(ctx, args[1], 1)
}

fn decr(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    incr_by(ctx, args[1], -1)
}

fn incrby(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    incr_by(ctx, args[1], arg_i64(args[2])?)
}

fn decrby(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let by = arg_i64(args[2])?;
    if by == i64::MIN {
        return Err(CmdError::msg("ERR decrement would overflow"));
    }
    incr_by(ctx, args[1], -by)
}

/// Like Redis, adds in 80-bit long double and prints with `%.17Lf` (trailing zeros cut):
/// `SET k 0.3; INCRBYFLOAT k 1e3` gives `1000.29999999999999999`, which f64 can't produce.
fn incrbyfloat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let cur = match ctx.ks.get_w(args[1]) {
        None => None,
        Some(v) if v.is_string() => {
            let mut t = itoa::Buffer::new();
            let b = v.str_bytes(&mut t).unwrap_or(b"");
            Some(LDouble::parse(b).ok_or(CmdError::NotFloat)?)
        }
        Some(_) => return Err(CmdError::WrongType),
    };
    let by = LDouble::parse(args[2]).ok_or(CmdError::NotFloat)?;
    // A missing key counts as 0 (and 0 + -0 must print "0", as in Redis).
    let cur = match cur {
        Some(c) => c,
        None => LDouble::parse(b"0").ok_or(CmdError::NotFloat)?,
    };
    let n = cur + by;
    if !n.is_finite() {
        return Err(CmdError::msg("ERR increment would produce NaN or Infinity"));
    }
    let s = n.to_human();
    ctx.ks.set_keepttl(args[1], Value::string(s.as_bytes()));
    ctx.notify(STRING, "incrbyfloat", args[1]);
    // As Redis: replicas and the AOF get the result (SET key value KEEPTTL), so float
    // arithmetic is never redone elsewhere.
    if ctx.propagating() {
        ctx.propagate_as(vec![
            Bytes::from_static(b"SET"),
            Bytes::copy_from_slice(args[1]),
            Bytes::copy_from_slice(s.as_bytes()),
            Bytes::from_static(b"KEEPTTL"),
        ]);
    }
    ctx.out.bulk(s.as_bytes());
    Ok(())
}

fn append(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let cur_len = match ctx.ks.get_w(args[1]) {
        None => None,
        Some(v) if v.is_string() => {
            let mut t = itoa::Buffer::new();
            Some(v.str_bytes(&mut t).map(|b| b.len()).unwrap_or(0))
        }
        Some(_) => return Err(CmdError::WrongType),
    };
    match cur_len {
        None => {
            let v = ctx.string_value(args[2]);
            ctx.ks.set(args[1], v);
            ctx.out.int(args[2].len() as i64);
        }
        Some(l) => {
            check_size(ctx, (l + args[2].len()) as u64)?;
            let v = ctx.ks.get_w(args[1]).ok_or(CmdError::NoSuchKey)?;
            let buf = v.make_buf().ok_or(CmdError::WrongType)?;
            buf.extend_from_slice(args[2]);
            ctx.out.int(buf.len() as i64);
        }
    }
    ctx.notify(STRING, "append", args[1]);
    Ok(())
}

fn strlen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let n = match ctx.ks.get(args[1]) {
        None => 0,
        Some(v) if v.is_string() => {
            let mut t = itoa::Buffer::new();
            v.str_bytes(&mut t).map(|b| b.len()).unwrap_or(0)
        }
        Some(_) => return Err(CmdError::WrongType),
    };
    ctx.out.int(n as i64);
    Ok(())
}

/// Resolves Redis's inclusive (start, end) with negative indices over `len`.
pub fn clamp_range(mut start: i64, mut end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    if start < 0 && end < 0 && start > end {
        return None;
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        return None;
    }
    Some((start as usize, end as usize))
}

fn getrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let start = arg_i64(args[2])?;
    let end = arg_i64(args[3])?;
    let mut t = itoa::Buffer::new();
    match ctx.ks.get(args[1]) {
        None => ctx.out.bulk(b""),
        Some(v) => {
            let b = v.str_bytes(&mut t).ok_or(CmdError::WrongType)?;
            match clamp_range(start, end, b.len()) {
                Some((s, e)) => ctx.out.bulk(&b[s..=e]),
                None => ctx.out.bulk(b""),
            }
        }
    }
    Ok(())
}

fn setrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let off = arg_i64(args[2])?;
    if off < 0 {
        return Err(CmdError::msg("ERR offset is out of range"));
    }
    let off = off as usize;
    let val = &args[3];
    let exists = match ctx.ks.get_w(args[1]) {
        None => false,
        Some(v) if v.is_string() => true,
        Some(_) => return Err(CmdError::WrongType),
    };
    if !exists {
        if val.is_empty() {
            ctx.unchanged();
            ctx.out.int(0);
            return Ok(());
        }
        check_size(ctx, (off + val.len()) as u64)?;
        ctx.ks.set(args[1], Value::Buf(Box::default()));
    } else if !val.is_empty() {
        check_size(ctx, (off + val.len()) as u64)?;
    }
    let v = ctx.ks.get_w(args[1]).ok_or(CmdError::NoSuchKey)?;
    if val.is_empty() {
        let mut t = itoa::Buffer::new();
        let n = v.str_bytes(&mut t).map(|b| b.len()).unwrap_or(0);
        ctx.out.int(n as i64);
        ctx.unchanged();
        return Ok(());
    }
    let buf = v.make_buf().ok_or(CmdError::WrongType)?;
    if buf.len() < off + val.len() {
        buf.resize(off + val.len(), 0);
    }
    buf[off..off + val.len()].copy_from_slice(val);
    ctx.out.int(buf.len() as i64);
    ctx.notify(STRING, "setrange", args[1]);
    Ok(())
}

fn lcs(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (mut getlen, mut getidx, mut withlen) = (false, false, false);
    let mut minlen: i64 = 0;
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        if eq_ic(a, "len") {
            getlen = true;
        } else if eq_ic(a, "idx") {
            getidx = true;
        } else if eq_ic(a, "withmatchlen") {
            withlen = true;
        } else if eq_ic(a, "minmatchlen") && i + 1 < args.len() {
            minlen = arg_i64(args[i + 1])?.max(0);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if getlen && getidx {
        return Err(CmdError::msg(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    let mut fetch = |k: &[u8]| -> Result<Vec<u8>, CmdError> {
        let mut t = itoa::Buffer::new();
        match ctx.ks.get(k) {
            None => Ok(Vec::new()),
            Some(v) => v
                .str_bytes(&mut t)
                .map(|b| b.to_vec())
                .ok_or_else(|| CmdError::msg("ERR The specified keys must contain string values")),
        }
    };
    let a = fetch(args[1])?;
    let b = fetch(args[2])?;
    let (al, bl) = (a.len(), b.len());
    let cells = (al as u64 + 1) * (bl as u64 + 1);
    if cells.saturating_mul(4) > ctx.srv.config.read().typed.proto_max_bulk_len {
        return Err(CmdError::msg(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let w = bl + 1;
    let mut dp = vec![0u32; (al + 1) * w];
    for i in 1..=al {
        for j in 1..=bl {
            dp[i * w + j] = if a[i - 1] == b[j - 1] {
                dp[(i - 1) * w + j - 1] + 1
            } else {
                dp[(i - 1) * w + j].max(dp[i * w + j - 1])
            };
        }
    }
    let total = dp[al * w + bl] as usize;
    if getlen {
        ctx.out.int(total as i64);
        return Ok(());
    }
    let mut result = vec![0u8; total];
    let mut matches: Vec<(usize, usize, usize, usize)> = Vec::new();
    let (mut i, mut j, mut idx) = (al, bl, total);
    let (mut as_, mut ae, mut bs, mut be) = (al, 0usize, 0usize, 0usize);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            if as_ == al {
                as_ = i - 1;
                ae = i - 1;
                bs = j - 1;
                be = j - 1;
            } else if as_ == i && bs == j {
                as_ -= 1;
                bs -= 1;
            } else {
                emit = true;
            }
            if as_ == 0 || bs == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if dp[(i - 1) * w + j] > dp[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if as_ != al {
                emit = true;
            }
        }
        if emit {
            let mlen = ae - as_ + 1;
            if minlen == 0 || mlen as i64 >= minlen {
                matches.push((as_, ae, bs, be));
            }
            as_ = al;
        }
    }
    if !getidx {
        ctx.out.bulk(&result);
        return Ok(());
    }
    let o = &mut *ctx.out;
    o.map(2);
    o.bulk(b"matches");
    o.array(matches.len());
    for (as_, ae, bs, be) in matches {
        o.array(if withlen { 3 } else { 2 });
        o.array(2);
        o.int(as_ as i64);
        o.int(ae as i64);
        o.array(2);
        o.int(bs as i64);
        o.int(be as i64);
        if withlen {
            o.int((ae - as_ + 1) as i64);
        }
    }
    o.bulk(b"len");
    o.int(total as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SET's deadline reaches replicas as Redis 7.0 sends it, `SET key value PXAT <ms>`,
    /// whatever the option (and when it was repeated, which Redis accepts).
    #[test]
    fn set_rewrite_keeps_one_deadline() {
        let args: Vec<&[u8]> = vec![
            b"set", b"k", b"v", b"ex", b"10", b"NX", b"EX", b"20", b"GET",
        ];
        let o = parse_set_opts(&args, 1_000, true).expect("valid");
        assert_eq!(o.expire, Some(21_000));
        let v = with_pxat(&args, 21_000).expect("rewritten");
        let got: Vec<&[u8]> = v.iter().map(|b| &b[..]).collect();
        let want: Vec<&[u8]> = vec![b"SET", b"k", b"v", b"PXAT", b"21000"];
        assert_eq!(got, want);
        let args: Vec<&[u8]> = vec![b"SET", b"k", b"v", b"pxat", b"21000"];
        let v = with_pxat(&args, 21_000).expect("rewritten");
        assert_eq!(&v[3][..], b"PXAT");
        let args: Vec<&[u8]> = vec![b"SET", b"k", b"v", b"PXAT", b"21000"];
        assert!(with_pxat(&args, 21_000).is_none());
        // Two different deadline options, or KEEPTTL with one: a syntax error first.
        for bad in [
            vec![&b"SET"[..], b"k", b"v", b"EX", b"x", b"PX", b"1"],
            vec![&b"SET"[..], b"k", b"v", b"EX", b"x", b"KEEPTTL"],
            vec![&b"SET"[..], b"k", b"v", b"EX", b"x", b"foo"],
        ] {
            assert!(matches!(
                parse_set_opts(&bad, 0, true),
                Err(CmdError::Syntax)
            ));
        }
    }
}
