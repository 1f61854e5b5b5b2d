//! Stream commands (Redis 7.0.15's t_stream.c behaviour): XADD, XLEN, XRANGE, XREVRANGE,
//! XDEL, XTRIM. Reads and consumer groups: `stream_group.rs`.

use bytes::Bytes;
use tessera_rdb::StreamId;

use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx, KeyView};
use crate::db::Value;
use crate::resp::Out;
use crate::types::stream::{self, StreamValue};

pub(super) const MAX_ID: StreamId = StreamId {
    ms: u64::MAX,
    seq: u64::MAX,
};

pub fn commands() -> Vec<CommandSpec> {
    let c = |name, arity, fl, keys, h| {
        CommandSpec::new(name, arity, fl, keys, h)
            .group("stream")
            .since("5.0.0")
    };
    vec![
        c("xadd", -5, "write denyoom fast", (1, 1, 1), xadd),
        c("xlen", 2, "readonly fast", (1, 1, 1), xlen),
        c("xrange", -4, "readonly", (1, 1, 1), xrange),
        c("xrevrange", -4, "readonly", (1, 1, 1), xrevrange),
        c("xdel", -3, "write fast", (1, 1, 1), xdel),
        c("xtrim", -4, "write", (1, 1, 1), xtrim),
    ]
}

/// What a stream command did besides its reply, gathered while a stream value is
/// borrowed from the keyspace and handed to the context afterwards ([`StreamFx::apply`],
/// [`StreamFx::finish`]).
#[derive(Default)]
pub(super) struct StreamFx {
    /// Whether stream events are enabled (else none is recorded).
    notify: bool,
    /// Whether anyone receives writes (else no rewrite is built).
    propagating: bool,
    /// Keyspace events (Redis 7.0's names) with their keys.
    events: Vec<(&'static str, Bytes)>,
    /// None: propagated as received. Some: these commands instead (maybe none), as Redis
    /// 7.0's streamPropagateXCLAIM and friends: XADD/XTRIM's deterministic form;
    /// XREADGROUP/XCLAIM/XAUTOCLAIM's XCLAIM / XGROUP commands.
    rewrites: Option<Vec<Vec<Bytes>>>,
    /// Changes counted as Redis's server.dirty by XREADGROUP / XCLAIM / XAUTOCLAIM.
    changes: usize,
}

impl StreamFx {
    /// Records events only (the command propagates as received or sets its rewrite).
    pub(super) fn new(ctx: &Ctx<'_>) -> Self {
        StreamFx {
            notify: ctx.notifies(crate::notify::STREAM),
            propagating: ctx.propagating(),
            ..StreamFx::default()
        }
    }

    /// Also starts an empty list of propagated commands ([`StreamFx::push_rewrite`] adds
    /// to it) and the change count.
    pub(super) fn rewriting(ctx: &Ctx<'_>) -> Self {
        let fx = StreamFx::new(ctx);
        StreamFx {
            rewrites: fx.propagating.then(Vec::new),
            ..fx
        }
    }

    /// Records event `ev` on `key`.
    pub(super) fn event(&mut self, ev: &'static str, key: &[u8]) {
        if self.notify {
            self.events.push((ev, Bytes::copy_from_slice(key)));
        }
    }

    /// Replaces what is propagated by what `f` builds (only built when propagating).
    pub(super) fn set_rewrite(&mut self, f: impl FnOnce() -> Vec<Bytes>) {
        if self.propagating {
            self.rewrites = Some(vec![f()]);
        }
    }

    /// Whether [`StreamFx::push_rewrite`] keeps anything (skip building what it won't).
    pub(super) fn collects(&self) -> bool {
        self.rewrites.is_some()
    }

    /// Adds to the list started by [`StreamFx::rewriting`].
    pub(super) fn push_rewrite(&mut self, v: Vec<Bytes>) {
        if let Some(l) = self.rewrites.as_mut() {
            l.push(v);
        }
    }

    /// Counts `n` changes of the running XREADGROUP/XCLAIM/XAUTOCLAIM: Redis adds one per
    /// consumer created, per stream served by XREADGROUP, per entry claimed and per
    /// pending entry dropped because its stream entry is gone.
    pub(super) fn add_changes(&mut self, n: usize) {
        self.changes += n;
    }

    /// Hands the events and the rewrite to the context.
    pub(super) fn apply(self, ctx: &mut Ctx<'_>) {
        for (ev, k) in &self.events {
            ctx.notify(crate::notify::STREAM, ev, k);
        }
        if let Some(l) = self.rewrites {
            ctx.propagate_none();
            for c in l {
                ctx.propagate_also(c);
            }
        }
    }

    /// [`StreamFx::apply`] after XREADGROUP, XCLAIM or XAUTOCLAIM, with the changes
    /// counted as Redis counts them; none at all is, as in Redis, no write (no WATCH
    /// touched, nothing propagated). A change with nothing to propagate (a consumer
    /// reading its empty history) still counts.
    pub(super) fn finish(self, ctx: &mut Ctx<'_>) {
        match self.changes {
            0 => ctx.unchanged(),
            n => ctx.changed_by(n),
        }
        self.apply(ctx);
    }
}

/// Redis 7.0's streamPropagateXCLAIM: `XCLAIM key group consumer 0 id TIME <ms>
/// RETRYCOUNT <n> FORCE JUSTID LASTID <group's last id>` for one pending entry `p`.
pub(super) fn push_xclaim(
    fx: &mut StreamFx,
    key: &[u8],
    group: &[u8],
    id: StreamId,
    p: &crate::types::stream::Pending,
    last_id: StreamId,
) {
    if !fx.collects() {
        return;
    }
    let b = |s: &[u8]| Bytes::copy_from_slice(s);
    let st = |s: &'static str| Bytes::from_static(s.as_bytes());
    fx.push_rewrite(vec![
        st("XCLAIM"),
        b(key),
        b(group),
        p.owner.clone(),
        st("0"),
        Bytes::from(fmt_id(id)),
        st("TIME"),
        Bytes::from(p.delivery_time.to_string()),
        st("RETRYCOUNT"),
        Bytes::from(p.delivery_count.to_string()),
        st("FORCE"),
        st("JUSTID"),
        st("LASTID"),
        Bytes::from(fmt_id(last_id)),
    ]);
}

fn invalid_id() -> CmdError {
    CmdError::msg("ERR Invalid stream ID specified as stream command argument")
}

/// Parses `<ms>[-<seq>]` like Redis's streamGenericParseIDOrReply. `strict`: `-`/`+` are
/// refused. `seq_star`: `<ms>-*` allowed (returns seq None).
pub(super) fn parse_id(
    b: &[u8],
    missing_seq: u64,
    strict: bool,
    seq_star: bool,
) -> Result<(StreamId, bool), CmdError> {
    if b.len() > 127 {
        return Err(invalid_id());
    }
    if !strict && b == b"-" {
        return Ok((StreamId::default(), true));
    }
    if !strict && b == b"+" {
        return Ok((MAX_ID, true));
    }
    let (ms_b, seq_b) = match b.iter().position(|&c| c == b'-') {
        Some(p) => (&b[..p], Some(&b[p + 1..])),
        None => (b, None),
    };
    let ms = parse_u64(ms_b).ok_or_else(invalid_id)?;
    let (seq, given) = match seq_b {
        Some(b"*") if seq_star => (0, false),
        Some(s) => (parse_u64(s).ok_or_else(invalid_id)?, true),
        None => (missing_seq, true),
    };
    Ok((StreamId { ms, seq }, given))
}

/// Redis's string2ull: decimal digits only, no sign, fits u64.
fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

pub(super) fn fmt_id(id: StreamId) -> String {
    id.to_string()
}

pub(super) fn get_stream<'c>(
    ks: &'c mut KeyView<'_>,
    key: &[u8],
) -> Result<Option<&'c mut StreamValue>, CmdError> {
    match ks.get(key) {
        None => Ok(None),
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(CmdError::WrongType),
    }
}

pub(super) fn get_stream_w<'c>(
    ks: &'c mut KeyView<'_>,
    key: &[u8],
) -> Result<Option<&'c mut StreamValue>, CmdError> {
    match ks.get_w(key) {
        None => Ok(None),
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(CmdError::WrongType),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Strategy {
    None,
    MaxLen(u64),
    MinId(StreamId),
}

/// XADD/XTRIM options (Redis's streamParseAddOrTrimArgsOrReply).
struct TrimArgs {
    strategy: Strategy,
    approx: bool,
    /// 0: no limit.
    limit: u64,
    /// Index of the threshold argument (rewritten for propagation).
    arg_idx: usize,
    nomkstream: bool,
    /// Explicit ID (XADD), with whether its sequence was given.
    id: Option<(StreamId, bool)>,
    /// Index where XADD's field/values start (after the ID).
    next: usize,
}

/// `node_entries` is stream-node-max-entries: `~` without LIMIT does at most 100 nodes'
/// worth of work (10000 when that is 0 or past Redis's bound), as Redis 7.0.
fn parse_trim_args(args: &[&[u8]], xadd: bool, node_entries: u64) -> Result<TrimArgs, CmdError> {
    let mut t = TrimArgs {
        strategy: Strategy::None,
        approx: false,
        limit: 0,
        arg_idx: 0,
        nomkstream: false,
        id: None,
        next: args.len(),
    };
    let mut limit_given = false;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args[i];
        if xadd && opt == b"*" {
            break;
        } else if (eq_ic(opt, "maxlen") || eq_ic(opt, "minid")) && more > 0 {
            if t.strategy != Strategy::None {
                return Err(CmdError::msg(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            t.approx = false;
            let next = args[i + 1];
            if more >= 2 && next == b"~" {
                t.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            if eq_ic(opt, "maxlen") {
                let n = arg_i64(args[i + 1])?;
                if n < 0 {
                    return Err(CmdError::msg("ERR The MAXLEN argument must be >= 0."));
                }
                t.strategy = Strategy::MaxLen(n as u64);
            } else {
                let (id, _) = parse_id(args[i + 1], 0, true, false)?;
                t.strategy = Strategy::MinId(id);
            }
            i += 1;
            t.arg_idx = i;
        } else if eq_ic(opt, "limit") && more > 0 {
            let n = arg_i64(args[i + 1])?;
            if n < 0 {
                return Err(CmdError::msg("ERR The LIMIT argument must be >= 0."));
            }
            t.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && eq_ic(opt, "nomkstream") {
            t.nomkstream = true;
        } else if xadd {
            t.id = Some(parse_id(opt, 0, true, true)?);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    t.next = i + 1;
    if t.limit != 0 && t.strategy == Strategy::None {
        return Err(CmdError::msg(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && t.strategy == Strategy::None {
        return Err(CmdError::msg(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit_given {
        if !t.approx {
            return Err(CmdError::msg(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if t.approx {
        t.limit = match node_entries.saturating_mul(100) {
            0 => 10_000,
            l if l > NODE_LIMIT_CAP => 10_000,
            l => l,
        };
    }
    Ok(t)
}

/// Redis's STREAM_LISTPACK_MAX_SIZE, the bound of `~`'s default LIMIT.
const NODE_LIMIT_CAP: u64 = 1 << 30;

/// Trims `s` per `t` as redis's streamTrim (whole nodes, then entries of one node unless
/// `~`); returns the number of entries removed.
fn trim(s: &mut StreamValue, t: &TrimArgs) -> usize {
    let how = match t.strategy {
        Strategy::None => return 0,
        Strategy::MaxLen(max) => stream::Trim::MaxLen(max),
        Strategy::MinId(min) => stream::Trim::MinId(min),
    };
    s.trim(how, t.approx, if t.approx { t.limit } else { 0 })
}

/// The exact form of an approximate trim, for propagation (Redis's
/// streamRewriteApproxSpecifier + streamRewriteTrimArgument).
fn exact_rewrite(
    args: &[&[u8]],
    t: &TrimArgs,
    s: &StreamValue,
    id: Option<StreamId>,
) -> Vec<Bytes> {
    let mut v: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
    if t.approx && t.arg_idx > 0 {
        v[t.arg_idx - 1] = Bytes::from_static(b"=");
        v[t.arg_idx] = match t.strategy {
            Strategy::MinId(_) => Bytes::from(fmt_id(s.first_id)),
            _ => Bytes::from(s.len().to_string()),
        };
        // LIMIT only applies to approximate trimming: drop it with the `~`.
        let mut i = 2;
        while i + 1 < v.len() && i < t.next.saturating_sub(1) {
            if eq_ic(&v[i], "limit") && i != t.arg_idx {
                v.drain(i..i + 2);
                break;
            }
            i += 1;
        }
    }
    if let Some(id) = id {
        if let Some(p) = v.iter().position(|a| &a[..] == b"*" || a.ends_with(b"-*")) {
            v[p] = Bytes::from(fmt_id(id));
        }
    }
    v
}

fn xadd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let lim = {
        let c = &ctx.srv.config.read().typed;
        stream::NodeLimits {
            entries: c.stream_node_max_entries,
            bytes: c.stream_node_max_bytes,
        }
    };
    let mut fx = StreamFx::new(ctx);
    let t = parse_trim_args(args, true, lim.entries)?;
    let fields = args.get(t.next..).unwrap_or(&[]);
    if fields.len() < 2 || fields.len() % 2 == 1 {
        return Err(CmdError::msg(
            "ERR wrong number of arguments for 'xadd' command",
        ));
    }
    if let Some((id, true)) = t.id {
        if id == StreamId::default() {
            return Err(CmdError::msg(
                "ERR The ID specified in XADD must be greater than 0-0",
            ));
        }
    }
    let now = ctx.ks.now;
    if get_stream_w(&mut ctx.ks, args[1])?.is_none() {
        if t.nomkstream {
            ctx.unchanged();
            ctx.out.null();
            return Ok(());
        }
        ctx.ks.set(args[1], Value::Stream(Box::default()));
    }
    let Some(s) = get_stream_w(&mut ctx.ks, args[1])? else {
        return Err(CmdError::WrongType);
    };
    if s.last_id == MAX_ID {
        return Err(CmdError::msg(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let last = s.last_id;
    let too_small = || {
        CmdError::msg(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item",
        )
    };
    let id = match t.id {
        None => {
            if now > last.ms {
                StreamId { ms: now, seq: 0 }
            } else if last.seq == u64::MAX {
                StreamId {
                    ms: last.ms + 1,
                    seq: 0,
                }
            } else {
                StreamId {
                    ms: last.ms,
                    seq: last.seq + 1,
                }
            }
        }
        Some((id, false)) => {
            if id.ms == last.ms {
                if last.seq == u64::MAX {
                    return Err(too_small());
                }
                StreamId {
                    ms: id.ms,
                    seq: last.seq + 1,
                }
            } else if id.ms > last.ms {
                StreamId { ms: id.ms, seq: 0 }
            } else {
                return Err(too_small());
            }
        }
        Some((id, true)) => {
            if id <= last {
                return Err(too_small());
            }
            id
        }
    };
    let p = stream::pack(fields.chunks_exact(2).map(|c| (c[0], c[1])));
    s.append_limited(id, &p, lim);
    fx.event("xadd", args[1]);
    if trim(s, &t) > 0 {
        fx.event("xtrim", args[1]);
    }
    fx.set_rewrite(|| exact_rewrite(args, &t, s, Some(id)));
    fx.apply(ctx);
    ctx.out.bulk(fmt_id(id).as_bytes());
    ctx.ks.signal_ready(args[1]);
    Ok(())
}

fn xtrim(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let node_entries = ctx.srv.config.read().typed.stream_node_max_entries;
    let mut fx = StreamFx::new(ctx);
    let t = parse_trim_args(args, false, node_entries)?;
    if t.next < args.len() {
        return Err(CmdError::Syntax);
    }
    let Some(s) = get_stream_w(&mut ctx.ks, args[1])? else {
        ctx.unchanged();
        ctx.out.int(0);
        return Ok(());
    };
    let n = trim(s, &t);
    if t.approx {
        fx.set_rewrite(|| exact_rewrite(args, &t, s, None));
    }
    if n > 0 {
        fx.event("xtrim", args[1]);
    }
    fx.apply(ctx);
    ctx.changed_by(n);
    ctx.out.int(n as i64);
    Ok(())
}

fn xlen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let n = get_stream(&mut ctx.ks, args[1])?.map_or(0, |s| s.len());
    ctx.out.int(n as i64);
    Ok(())
}

fn xdel(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut fx = StreamFx::new(ctx);
    let mut ids = Vec::with_capacity(args.len() - 2);
    for a in &args[2..] {
        ids.push(parse_id(a, 0, true, false)?.0);
    }
    let mut n = 0;
    if let Some(s) = get_stream_w(&mut ctx.ks, args[1])? {
        for id in ids {
            n += s.delete(id) as i64;
        }
        if n > 0 {
            fx.event("xdel", args[1]);
        }
    }
    fx.apply(ctx);
    ctx.changed_by(n as usize);
    ctx.out.int(n);
    Ok(())
}

/// Parses an XRANGE bound (`-`, `+`, `(` exclusive, incomplete IDs).
pub(super) fn parse_bound(b: &[u8], start: bool) -> Result<StreamId, CmdError> {
    let missing = if start { 0 } else { u64::MAX };
    if b.len() > 1 && b[0] == b'(' {
        let (id, _) = parse_id(&b[1..], missing, true, false)?;
        if start {
            incr(id).ok_or_else(|| CmdError::msg("ERR invalid start ID for the interval"))
        } else {
            decr(id).ok_or_else(|| CmdError::msg("ERR invalid end ID for the interval"))
        }
    } else {
        Ok(parse_id(b, missing, false, false)?.0)
    }
}

pub(super) fn incr(id: StreamId) -> Option<StreamId> {
    if id.seq == u64::MAX {
        Some(StreamId {
            ms: id.ms.checked_add(1)?,
            seq: 0,
        })
    } else {
        Some(StreamId {
            ms: id.ms,
            seq: id.seq + 1,
        })
    }
}

pub(super) fn decr(id: StreamId) -> Option<StreamId> {
    if id.seq == 0 {
        Some(StreamId {
            ms: id.ms.checked_sub(1)?,
            seq: u64::MAX,
        })
    } else {
        Some(StreamId {
            ms: id.ms,
            seq: id.seq - 1,
        })
    }
}

/// One entry as `[id, [field, value, ...]]`.
pub(super) fn write_entry(out: &mut Out, id: StreamId, p: &[u8]) {
    out.array(2);
    out.bulk(fmt_id(id).as_bytes());
    out.array(stream::item_count(p));
    for it in stream::items(p) {
        out.bulk(it);
    }
}

/// Writes entries of `s` in [start, end] (reversed if `rev`), at most `count` (0: all).
fn write_range(
    out: &mut Out,
    s: &StreamValue,
    start: StreamId,
    end: StreamId,
    rev: bool,
    count: usize,
) {
    if start > end {
        out.array(0);
        return;
    }
    let take = if count > 0 { count } else { usize::MAX };
    let picked: Vec<(StreamId, &[u8])> = if rev {
        s.entries.range_rev(start, end).take(take).collect()
    } else {
        s.entries.range(start, end).take(take).collect()
    };
    out.array(picked.len());
    for (id, p) in picked {
        write_entry(out, id, p);
    }
}

fn range_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]], rev: bool) -> CmdResult {
    let (a, b) = if rev {
        (args[3], args[2])
    } else {
        (args[2], args[3])
    };
    let start = parse_bound(a, true)?;
    let end = parse_bound(b, false)?;
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if eq_ic(args[j], "count") && j + 1 < args.len() {
            count = arg_i64(args[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(s) = get_stream(&mut ctx.ks, args[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    if count == 0 {
        ctx.out.null_array();
        return Ok(());
    }
    write_range(ctx.out, s, start, end, rev, count.max(0) as usize);
    Ok(())
}

fn xrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    range_cmd(ctx, args, false)
}

fn xrevrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    range_cmd(ctx, args, true)
}
