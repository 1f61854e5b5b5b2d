//! Stream reads and consumer groups (Redis 7.0.15's t_stream.c): XREAD and XREADGROUP
//! (with BLOCK, through `crate::blocking`), XGROUP, XACK, XPENDING.

use bytes::Bytes;
use tessera_rdb::StreamId;

use super::stream::{
    fmt_id, get_stream, get_stream_w, incr, parse_bound, parse_id, write_entry, StreamFx, MAX_ID,
};
use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx, KeyPos};
use crate::notify::STREAM;
use crate::types::stream::{Consumer, Group, Pending, StreamValue};

pub fn commands() -> Vec<CommandSpec> {
    let c = |name, arity, fl, keys, h| {
        CommandSpec::new(name, arity, fl, keys, h)
            .group("stream")
            .since("5.0.0")
    };
    let none = (0, 0, 0);
    vec![
        c("xread", -4, "readonly blocking", none, xread).keys(KeyPos::Custom(read_keys)),
        c("xreadgroup", -7, "write blocking", none, xreadgroup).keys(KeyPos::Custom(read_keys)),
        c("xack", -4, "write fast", (1, 1, 1), xack),
        c("xpending", -3, "readonly", (1, 1, 1), xpending),
        c("xgroup", -2, "", none, xgroup_help).subs(vec![
            c("create", -5, "write denyoom", (2, 2, 1), xgroup_create),
            c("setid", -5, "write", (2, 2, 1), xgroup_setid),
            c("destroy", 4, "write", (2, 2, 1), xgroup_destroy),
            c(
                "createconsumer",
                5,
                "write denyoom",
                (2, 2, 1),
                xgroup_createconsumer,
            )
            .since("6.2.0"),
            c("delconsumer", 5, "write", (2, 2, 1), xgroup_delconsumer),
            c("help", 2, "loading stale", none, xgroup_help),
        ]),
    ]
}

/// XREAD/XREADGROUP keys: the first half of the arguments after STREAMS.
fn read_keys(args: &[&[u8]], out: &mut Vec<usize>) {
    if let Some(p) = args.iter().skip(1).position(|a| eq_ic(a, "streams")) {
        let first = p + 2;
        let n = (args.len() - first) / 2;
        out.extend(first..first + n);
    }
}

fn nogroup_read(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::msg(format!(
        "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

fn xread(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut fx = StreamFx::new(ctx);
    let r = read_generic(ctx, args, false, &mut fx);
    fx.apply(ctx);
    r
}

fn xreadgroup(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.metadata_only();
    // Replicas and the AOF get XCLAIM / XGROUP SETID for what is served (nothing for an
    // XREADGROUP that blocks or serves nothing).
    let mut fx = StreamFx::rewriting(ctx);
    let r = read_generic(ctx, args, true, &mut fx);
    fx.finish(ctx);
    r
}

/// Redis's xreadCommand (without BLOCK).
fn read_generic(
    ctx: &mut Ctx<'_>,
    args: &[&[u8]],
    group_cmd: bool,
    fx: &mut StreamFx,
) -> CmdResult {
    let mut count = 0usize;
    let mut streams_at = None;
    let mut group: Option<(&[u8], &[u8])> = None;
    let mut noack = false;
    let mut timeout: Option<u64> = None;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let o = args[i];
        if eq_ic(o, "block") && more > 0 {
            if ctx.cl.in_script {
                // As Redis: refused when parsed, before the timeout is read.
                return Err(CmdError::msg(format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(args[0])
                )));
            }
            let t = crate::types::parse_i64_strict(args[i + 1]).ok_or(CmdError::msg(
                "ERR timeout is not an integer or out of range",
            ))?;
            if t < 0 {
                return Err(CmdError::TimeoutNegative);
            }
            timeout = Some(t as u64);
            i += 1;
        } else if eq_ic(o, "count") && more > 0 {
            count = arg_i64(args[i + 1])?.max(0) as usize;
            i += 1;
        } else if eq_ic(o, "streams") && more > 0 {
            streams_at = Some(i + 1);
            if !(args.len() - i - 1).is_multiple_of(2) {
                let (name, sym) = if group_cmd {
                    ("XREADGROUP", '>')
                } else {
                    ("XREAD", '$')
                };
                return Err(CmdError::msg(format!(
                    "ERR Unbalanced {name} list of streams: for each stream key an ID or '{sym}' must be specified."
                )));
            }
            break;
        } else if eq_ic(o, "group") && more >= 2 {
            if !group_cmd {
                return Err(CmdError::msg(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some((args[i + 1], args[i + 2]));
            i += 2;
        } else if eq_ic(o, "noack") {
            if !group_cmd {
                return Err(CmdError::msg(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let Some(first) = streams_at else {
        return Err(CmdError::Syntax);
    };
    if group_cmd && group.is_none() {
        return Err(CmdError::msg("ERR Missing GROUP option for XREADGROUP"));
    }
    let rest = &args[first..];
    let n = rest.len() / 2;
    // Parse the IDs (and check keys and groups) before serving anything.
    let mut ids = Vec::with_capacity(n);
    for k in 0..n {
        let (key, a) = (rest[k], rest[n + k]);
        let s = match get_stream(&mut ctx.ks, key) {
            // Woken because the key went away or changed type: Redis 7.0's reply.
            Ok(None) | Err(_) if ctx.serving_blocked && group.is_some() => {
                return Err(CmdError::msg(crate::blocking::UNBLOCKED_DELETED));
            }
            r => r?,
        };
        if let Some((g, _)) = group {
            if !s.as_ref().is_some_and(|s| s.groups.contains_key(g)) {
                if ctx.serving_blocked {
                    return Err(CmdError::msg(crate::blocking::NOGROUP_DESTROYED));
                }
                return Err(nogroup_read(key, g));
            }
        }
        let id = if a == b"$" {
            if group_cmd {
                return Err(CmdError::msg(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                ));
            }
            s.map(|s| s.last_id).unwrap_or_default()
        } else if a == b">" {
            if !group_cmd {
                return Err(CmdError::msg(
                    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ));
            }
            MAX_ID
        } else {
            parse_id(a, 0, true, false)?.0
        };
        ids.push(id);
    }
    let now = ctx.ks.now;
    let resp3 = ctx.out.resp3;
    // Replies are built per stream, then counted: only served streams appear.
    let mut body = crate::resp::Out::new(resp3);
    let mut served = 0usize;
    for k in 0..n {
        let key = rest[k];
        let Some(s) = get_stream_w(&mut ctx.ks, key)? else {
            continue;
        };
        let mut gt = ids[k];
        match group {
            Some((gname, cname)) => {
                let history = gt != MAX_ID;
                let max_valid = s.entries.last_id();
                let Some(g) = s.groups.get_mut(gname) else {
                    continue;
                };
                let mut serve = history;
                if !history {
                    if let Some(m) = max_valid {
                        if m > g.last_id {
                            serve = true;
                            gt = g.last_id;
                        }
                    }
                }
                // Redis 7.0 creates the consumer only when it serves the stream.
                if !serve {
                    continue;
                }
                let created = !g.consumers.contains_key(cname);
                if created {
                    fx.event("xgroup-createconsumer", key);
                }
                let c = consumer_entry(g, cname, now);
                c.seen_time = now;
                served += 1;
                fx.add_changes(1 + created as usize);
                if !resp3 {
                    body.array(2);
                }
                body.bulk(key);
                if history {
                    serve_history(&mut body, s, gname, cname, gt, count, now);
                } else {
                    let how = NewRead {
                        key,
                        group: gname,
                        consumer: cname,
                        noack,
                        created,
                    };
                    serve_new(&mut body, s, &how, gt, count, now, fx);
                }
            }
            None => {
                let Some(start) = incr(gt) else { continue };
                if s.entries.range(start, MAX_ID).next().is_none() {
                    continue;
                }
                served += 1;
                if !resp3 {
                    body.array(2);
                }
                body.bulk(key);
                let picked: Vec<_> = s.entries.range(start, MAX_ID).take(nz(count)).collect();
                body.array(picked.len());
                for (id, p) in picked {
                    write_entry(&mut body, id, p);
                }
            }
        }
    }
    if served == 0 {
        if let Some(t) = timeout {
            if ctx.can_block() {
                // Woken by XADD (FIFO per key); `$` is re-run as the ID it stood for now.
                let mut again = super::owned_args(args);
                for k in 0..n {
                    if rest[n + k] == b"$" {
                        again[first + n + k] = Bytes::from(fmt_id(ids[k]));
                    }
                }
                if group_cmd {
                    crate::blocking::arm_stream_gone(ctx.srv);
                }
                ctx.block_on(&rest[..n], t);
                if let Some(b) = ctx.block.as_mut() {
                    b.args = Some(again);
                }
                return Ok(());
            }
            if ctx.serving_blocked {
                // Not served this time: stay blocked.
                return Ok(());
            }
        }
        ctx.out.null_array();
        return Ok(());
    }
    if resp3 {
        ctx.out.map(served);
    } else {
        ctx.out.array(served);
    }
    ctx.out.raw(&body.buf);
    Ok(())
}

fn nz(count: usize) -> usize {
    if count == 0 {
        usize::MAX
    } else {
        count
    }
}

/// The consumer `name` of `g`, created (seen now) when missing.
pub fn consumer_entry<'g>(g: &'g mut Group, name: &[u8], now: u64) -> &'g mut Consumer {
    g.consumers
        .entry(Bytes::copy_from_slice(name))
        .or_insert_with(|| Consumer {
            seen_time: now,
            active_time: None,
            pending: Default::default(),
        })
}

/// Who reads new entries, and how.
struct NewRead<'a> {
    key: &'a [u8],
    group: &'a [u8],
    consumer: &'a [u8],
    noack: bool,
    /// The consumer was created by this read (NOACK then propagates its creation).
    created: bool,
}

/// `>`: entries after `gt`, added to the group and consumer PELs (unless NOACK), and
/// propagated as Redis 7.0 does: an XCLAIM per entry, or for NOACK one XGROUP SETID.
fn serve_new(
    out: &mut crate::resp::Out,
    s: &mut StreamValue,
    how: &NewRead<'_>,
    gt: StreamId,
    count: usize,
    now: u64,
    fx: &mut StreamFx,
) {
    let (gname, cname, noack) = (how.group, how.consumer, how.noack);
    let Some(start) = incr(gt) else {
        out.array(0);
        return;
    };
    let picked: Vec<StreamId> = s
        .entries
        .range(start, MAX_ID)
        .take(nz(count))
        .map(|(id, _)| id)
        .collect();
    out.array(picked.len());
    let picked_none = picked.is_empty();
    for id in picked {
        let tomb = s.has_tombstones_from(id);
        let est = s.estimate_distance(id);
        let added = s.entries_added;
        let Some(g) = s.groups.get_mut(gname) else {
            return;
        };
        if id > g.last_id {
            if g.entries_read != -1 && !tomb {
                // A restored counter may sit at the maximum: wrap as Redis does.
                g.entries_read = g.entries_read.wrapping_add(1);
            } else if added > 0 {
                g.entries_read = est;
            }
            g.last_id = id;
        }
        if let Some(p) = s.entries.get(id) {
            write_entry(out, id, p);
        }
        let Some(g) = s.groups.get_mut(gname) else {
            return;
        };
        if !noack {
            let owner = Bytes::copy_from_slice(cname);
            if let Some(old) = g.pel.insert(
                id,
                Pending {
                    delivery_time: now,
                    delivery_count: 1,
                    owner: owner.clone(),
                },
            ) {
                if let Some(c) = g.consumers.get_mut(&old.owner) {
                    c.pending.remove(&id);
                }
            }
            if let Some(c) = g.consumers.get_mut(cname) {
                c.pending.insert(id);
            }
            if let Some(p) = g.pel.get(&id) {
                super::stream::push_xclaim(fx, how.key, gname, id, p, g.last_id);
            }
        }
    }
    if noack && !picked_none {
        if let Some(g) = s.groups.get(gname) {
            let b = |s: &[u8]| Bytes::copy_from_slice(s);
            let st = |s: &'static str| Bytes::from_static(s.as_bytes());
            if how.created {
                fx.push_rewrite(vec![
                    st("XGROUP"),
                    st("CREATECONSUMER"),
                    b(how.key),
                    b(gname),
                    b(cname),
                ]);
            }
            super::stream_claim::push_setid(fx, how.key, gname, g);
        }
    }
}

/// A history ID: the consumer's own pending entries after `gt`.
fn serve_history(
    out: &mut crate::resp::Out,
    s: &mut StreamValue,
    gname: &[u8],
    cname: &[u8],
    gt: StreamId,
    count: usize,
    now: u64,
) {
    let Some(g) = s.groups.get_mut(gname) else {
        out.array(0);
        return;
    };
    let ids: Vec<StreamId> = match g.consumers.get(cname) {
        Some(c) => match incr(gt) {
            Some(start) => c.pending.range(start..).take(nz(count)).copied().collect(),
            None => Vec::new(),
        },
        None => Vec::new(),
    };
    for id in &ids {
        // Redis counts a delivery only for an entry that still exists.
        if !s.entries.contains_key(*id) {
            continue;
        }
        if let Some(p) = g.pel.get_mut(id) {
            p.delivery_time = now;
            p.delivery_count += 1;
        }
    }
    out.array(ids.len());
    for id in ids {
        match s.entries.get(id) {
            Some(p) => write_entry(out, id, p),
            None => {
                out.array(2);
                out.bulk(fmt_id(id).as_bytes());
                out.null_array();
            }
        }
    }
}

fn xack(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.metadata_only();
    let Some(s) = get_stream_w(&mut ctx.ks, args[1])? else {
        ctx.unchanged();
        ctx.out.int(0);
        return Ok(());
    };
    let Some(g) = s.groups.get_mut(args[2]) else {
        ctx.unchanged();
        ctx.out.int(0);
        return Ok(());
    };
    let mut ids = Vec::with_capacity(args.len() - 3);
    for a in &args[3..] {
        ids.push(parse_id(a, 0, true, false)?.0);
    }
    let mut n = 0;
    for id in ids {
        if let Some(p) = g.pel.remove(&id) {
            if let Some(c) = g.consumers.get_mut(&p.owner) {
                c.pending.remove(&id);
            }
            n += 1;
        }
    }
    ctx.changed_by(n as usize);
    ctx.out.int(n);
    Ok(())
}

fn xpending(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let justinfo = args.len() == 3;
    if !justinfo && !(6..=9).contains(&args.len()) {
        return Err(CmdError::Syntax);
    }
    let (mut min_idle, mut start, mut end, mut count, mut consumer) =
        (0i64, StreamId::default(), MAX_ID, 0i64, None);
    if args.len() >= 6 {
        let mut si = 3;
        if eq_ic(args[3], "idle") {
            min_idle = arg_i64(args[4])?;
            if args.len() < 8 {
                return Err(CmdError::Syntax);
            }
            si += 2;
        }
        count = arg_i64(args[si + 2])?.max(0);
        start = parse_bound(args[si], true)?;
        end = parse_bound(args[si + 1], false)?;
        if si + 3 < args.len() {
            consumer = Some(args[si + 3]);
        }
    }
    let now = ctx.ks.now;
    let nogroup = || {
        CmdError::msg(format!(
            "NOGROUP No such key '{}' or consumer group '{}'",
            String::from_utf8_lossy(args[1]),
            String::from_utf8_lossy(args[2])
        ))
    };
    let Some(s) = get_stream(&mut ctx.ks, args[1])? else {
        return Err(nogroup());
    };
    let Some(g) = s.groups.get(args[2]) else {
        return Err(nogroup());
    };
    let out = &mut *ctx.out;
    if justinfo {
        out.array(4);
        out.int(g.pel.len() as i64);
        match (g.pel.keys().next(), g.pel.keys().next_back()) {
            (Some(a), Some(b)) => {
                out.bulk(fmt_id(*a).as_bytes());
                out.bulk(fmt_id(*b).as_bytes());
                let with: Vec<_> = g
                    .consumers
                    .iter()
                    .filter(|(_, c)| !c.pending.is_empty())
                    .collect();
                out.array(with.len());
                for (name, c) in with {
                    out.array(2);
                    out.bulk(name);
                    out.bulk_int(c.pending.len() as i64);
                }
            }
            _ => {
                out.null();
                out.null();
                out.null_array();
            }
        }
        return Ok(());
    }
    let ids: Vec<StreamId> = match consumer {
        Some(cn) => match g.consumers.get(cn) {
            Some(c) => c.pending.range(start..).copied().collect(),
            None => {
                out.array(0);
                return Ok(());
            }
        },
        None => g.pel.range(start..).map(|(id, _)| *id).collect(),
    };
    let mut rows = Vec::new();
    for id in ids {
        if rows.len() as i64 >= count || id > end {
            break;
        }
        let Some(p) = g.pel.get(&id) else { continue };
        let idle = now as i64 - p.delivery_time as i64;
        if min_idle != 0 && idle < min_idle {
            continue;
        }
        rows.push((id, p, idle.max(0)));
    }
    out.array(rows.len());
    for (id, p, idle) in rows {
        out.array(4);
        out.bulk(fmt_id(id).as_bytes());
        out.bulk(&p.owner);
        out.int(idle);
        out.int(p.delivery_count as i64);
    }
    Ok(())
}

fn subcommand_syntax(args: &[&[u8]]) -> CmdError {
    CmdError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try XGROUP HELP.",
        String::from_utf8_lossy(args[1])
    ))
}

/// CREATE/SETID options from index 5: (MKSTREAM, ENTRIESREAD).
fn group_opts(args: &[&[u8]], create: bool) -> Result<(bool, i64), CmdError> {
    let (mut mk, mut er) = (false, -1i64);
    let mut i = 5;
    while i < args.len() {
        if create && eq_ic(args[i], "mkstream") {
            mk = true;
            i += 1;
        } else if eq_ic(args[i], "entriesread") && i + 1 < args.len() {
            er = arg_i64(args[i + 1])?;
            if er < 0 && er != -1 {
                return Err(CmdError::msg(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
            i += 2;
        } else {
            return Err(subcommand_syntax(args));
        }
    }
    Ok((mk, er))
}

fn need_key() -> CmdError {
    CmdError::msg("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
}

fn nogroup(args: &[&[u8]]) -> CmdError {
    CmdError::msg(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(args[3]),
        String::from_utf8_lossy(args[2])
    ))
}

/// The stream for an XGROUP subcommand, with Redis's checks: type, key exists (unless
/// `mkstream`), group exists (when `need_group`).
fn group_target<'c>(
    ctx: &'c mut Ctx<'_>,
    args: &[&[u8]],
    mkstream: bool,
    need_group: bool,
) -> Result<Option<&'c mut StreamValue>, CmdError> {
    let s = get_stream_w(&mut ctx.ks, args[2])?;
    if let Some(s) = &s {
        if need_group && !s.groups.contains_key(args[3]) {
            return Err(nogroup(args));
        }
    } else if !mkstream {
        return Err(need_key());
    }
    Ok(s)
}

fn xgroup_create(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (mk, er) = group_opts(args, true)?;
    let exists = group_target(ctx, args, mk, false)?.is_some();
    if exists {
        // MKSTREAM's new key is signalled modified; a group on an existing one is not.
        ctx.metadata_only();
    }
    if args.len() > 8 {
        return Err(subcommand_syntax(args));
    }
    let id = if args[4] == b"$" {
        get_stream(&mut ctx.ks, args[2])?
            .map(|s| s.last_id)
            .unwrap_or_default()
    } else {
        parse_id(args[4], 0, true, false)?.0
    };
    if !exists {
        ctx.ks
            .set(args[2], crate::db::Value::Stream(Box::default()));
    }
    let Some(s) = get_stream_w(&mut ctx.ks, args[2])? else {
        return Err(CmdError::WrongType);
    };
    if s.groups.contains_key(args[3]) {
        return Err(CmdError::msg(
            "BUSYGROUP Consumer Group name already exists",
        ));
    }
    s.groups.insert(
        Bytes::copy_from_slice(args[3]),
        Group {
            last_id: id,
            entries_read: er,
            pel: Default::default(),
            consumers: Default::default(),
        },
    );
    ctx.notify(STREAM, "xgroup-create", args[2]);
    ctx.out.ok();
    Ok(())
}

fn xgroup_setid(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.metadata_only();
    let (_, er) = group_opts(args, false)?;
    let Some(s) = group_target(ctx, args, false, true)? else {
        return Err(need_key());
    };
    if args.len() != 5 && args.len() != 7 {
        return Err(subcommand_syntax(args));
    }
    let id = if args[4] == b"$" {
        s.last_id
    } else {
        parse_id(args[4], 0, false, false)?.0
    };
    if let Some(g) = s.groups.get_mut(args[3]) {
        g.last_id = id;
        g.entries_read = er;
    }
    ctx.notify(STREAM, "xgroup-setid", args[2]);
    ctx.out.ok();
    Ok(())
}

fn xgroup_destroy(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.metadata_only();
    let Some(s) = group_target(ctx, args, false, false)? else {
        return Err(need_key());
    };
    let n = s.groups.remove(args[3]).is_some() as i64;
    if n == 1 {
        ctx.notify(STREAM, "xgroup-destroy", args[2]);
        // Its blocked readers re-run (after this command) and get the NOGROUP error.
        crate::blocking::recheck_group_readers(ctx.srv, ctx.ks.db, args[2]);
    }
    ctx.changed_if(n == 1);
    ctx.out.int(n);
    Ok(())
}

fn xgroup_createconsumer(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.metadata_only();
    let now = ctx.ks.now;
    let Some(s) = group_target(ctx, args, false, true)? else {
        return Err(need_key());
    };
    let Some(g) = s.groups.get_mut(args[3]) else {
        return Err(nogroup(args));
    };
    let created = !g.consumers.contains_key(args[4]);
    consumer_entry(g, args[4], now);
    if created {
        ctx.notify(STREAM, "xgroup-createconsumer", args[2]);
    }
    ctx.changed_if(created);
    ctx.out.int(created as i64);
    Ok(())
}

fn xgroup_delconsumer(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.metadata_only();
    let Some(s) = group_target(ctx, args, false, true)? else {
        return Err(need_key());
    };
    let Some(g) = s.groups.get_mut(args[3]) else {
        return Err(nogroup(args));
    };
    let mut n = 0;
    let deleted = match g.consumers.remove(args[4]) {
        Some(c) => {
            n = c.pending.len() as i64;
            for id in c.pending {
                g.pel.remove(&id);
            }
            true
        }
        None => false,
    };
    if deleted {
        ctx.notify(STREAM, "xgroup-delconsumer", args[2]);
    } else {
        ctx.unchanged();
    }
    ctx.out.int(n);
    Ok(())
}

fn xgroup_help(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    super::help_lines(
        ctx,
        &[
            "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
            "HELP",
            "    Prints this help.",
        ],
    )
}
