//! XINFO STREAM / GROUPS / CONSUMERS / HELP (Redis 7.0.15 reply shapes).
//!
//! `radix-tree-keys` / `radix-tree-nodes` describe Redis's internal rax of listpack nodes:
//! our entry blocks split where redis's nodes do, so the keys are redis's; the rax node
//! count is that of the canonical compressed trie of their IDs.

use tessera_rdb::StreamId;

use super::stream::{fmt_id, get_stream, write_entry};
use super::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::types::stream::{Group, StreamValue};

pub fn commands() -> Vec<CommandSpec> {
    let c = |name, arity, fl, keys, h| {
        CommandSpec::new(name, arity, fl, keys, h)
            .group("stream")
            .since("5.0.0")
    };
    let none = (0, 0, 0);
    vec![c("xinfo", -2, "", none, xinfo_help).subs(vec![
        c("stream", -3, "readonly", (2, 2, 1), xinfo_stream),
        c("groups", 3, "readonly", (2, 2, 1), xinfo_groups),
        c("consumers", 4, "readonly", (2, 2, 1), xinfo_consumers),
        c("help", 2, "loading stale", none, xinfo_help),
    ])]
}

fn stream_or_err<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<&'c mut StreamValue, CmdError> {
    get_stream(&mut ctx.ks, key)?.ok_or(CmdError::NoSuchKey)
}

fn id_bulk(out: &mut crate::resp::Out, id: StreamId) {
    out.bulk(fmt_id(id).as_bytes());
}

fn syntax(args: &[&[u8]]) -> CmdError {
    CmdError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
        String::from_utf8_lossy(args[1])
    ))
}

/// `FULL [COUNT n]` after the key, as Redis 7.0 parses it (after the key lookup): how
/// many entries / PEL rows to show, 0 meaning all, a negative count the default 10.
fn full_count(args: &[&[u8]]) -> Result<Option<usize>, CmdError> {
    match args.len() {
        3 => return Ok(None),
        4 | 6 if super::eq_ic(args[3], "full") => {}
        _ => return Err(syntax(args)),
    }
    if args.len() == 4 {
        return Ok(Some(10));
    }
    if !super::eq_ic(args[4], "count") {
        return Err(syntax(args));
    }
    let n = super::arg_i64(args[5])?;
    Ok(Some(if n < 0 { 10 } else { n as usize }))
}

fn xinfo_stream(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let out = &mut *ctx.out;
    let Some(s) = get_stream(&mut ctx.ks, args[2])? else {
        return Err(CmdError::NoSuchKey);
    };
    let full = full_count(args)?;
    if let Some(count) = full {
        stream_full(out, s, count);
        return Ok(());
    }
    out.map(10);
    stream_fields(out, s);
    out.bulk(b"groups");
    out.int(s.groups.len() as i64);
    out.bulk(b"first-entry");
    match s.entries.iter().next() {
        Some((id, p)) => write_entry(out, id, p),
        None => out.null(),
    }
    out.bulk(b"last-entry");
    match s
        .entries
        .last_id()
        .and_then(|id| Some((id, s.entries.get(id)?)))
    {
        Some((id, p)) => write_entry(out, id, p),
        None => out.null(),
    }
    Ok(())
}

/// A group's last-delivered-id, entries-read and lag (XINFO GROUPS and STREAM FULL).
fn group_progress(out: &mut crate::resp::Out, s: &StreamValue, g: &Group) {
    out.bulk(b"last-delivered-id");
    id_bulk(out, g.last_id);
    out.bulk(b"entries-read");
    if g.entries_read != -1 {
        out.int(g.entries_read);
    } else {
        out.null();
    }
    out.bulk(b"lag");
    match lag(s, g) {
        Some(l) => out.int(l),
        None => out.null(),
    }
}

/// The seven fields XINFO STREAM and XINFO STREAM FULL both start with.
fn stream_fields(out: &mut crate::resp::Out, s: &StreamValue) {
    out.bulk(b"length");
    out.int(s.len() as i64);
    out.bulk(b"radix-tree-keys");
    out.int(s.entries.nodes() as i64);
    out.bulk(b"radix-tree-nodes");
    out.int(s.entries.rax_nodes() as i64);
    out.bulk(b"last-generated-id");
    id_bulk(out, s.last_id);
    out.bulk(b"max-deleted-entry-id");
    id_bulk(out, s.max_deleted_id);
    out.bulk(b"entries-added");
    out.int(s.entries_added as i64);
    out.bulk(b"recorded-first-entry-id");
    id_bulk(out, s.first_id);
}

/// XINFO STREAM key FULL: every stored field, the first `count` entries (0: all), and
/// each group with its PEL and consumers (their PELs too), at most `count` rows each.
fn stream_full(out: &mut crate::resp::Out, s: &StreamValue, count: usize) {
    let take = if count == 0 { usize::MAX } else { count };
    out.map(9);
    stream_fields(out, s);
    out.bulk(b"entries");
    out.array(s.len().min(take));
    for (id, p) in s.entries.iter().take(take) {
        write_entry(out, id, p);
    }
    out.bulk(b"groups");
    out.array(s.groups.len());
    for (name, g) in &s.groups {
        out.map(7);
        out.bulk(b"name");
        out.bulk(name);
        group_progress(out, s, g);
        out.bulk(b"pel-count");
        out.int(g.pel.len() as i64);
        out.bulk(b"pending");
        out.array(g.pel.len().min(take));
        for (id, p) in g.pel.iter().take(take) {
            out.array(4);
            id_bulk(out, *id);
            out.bulk(&p.owner);
            out.int(p.delivery_time as i64);
            out.int(p.delivery_count as i64);
        }
        out.bulk(b"consumers");
        out.array(g.consumers.len());
        for (cname, c) in &g.consumers {
            out.map(4);
            out.bulk(b"name");
            out.bulk(cname);
            out.bulk(b"seen-time");
            out.int(c.seen_time as i64);
            out.bulk(b"pel-count");
            out.int(c.pending.len() as i64);
            out.bulk(b"pending");
            out.array(c.pending.len().min(take));
            for id in c.pending.iter().take(take) {
                let (t, n) = g
                    .pel
                    .get(id)
                    .map_or((0, 0), |p| (p.delivery_time, p.delivery_count));
                out.array(3);
                id_bulk(out, *id);
                out.int(t as i64);
                out.int(n as i64);
            }
        }
    }
}

/// Redis's streamReplyWithCGLag: None when it cannot be known.
fn lag(s: &StreamValue, g: &Group) -> Option<i64> {
    if s.entries_added == 0 {
        return Some(0);
    }
    if g.entries_read != -1 && !s.has_tombstones_from(g.last_id) {
        // Both counters may come from RESTORE: wrap as Redis's long long arithmetic does.
        return Some((s.entries_added as i64).wrapping_sub(g.entries_read));
    }
    match s.estimate_distance(g.last_id) {
        -1 => None,
        read => Some((s.entries_added as i64).wrapping_sub(read)),
    }
}

fn xinfo_groups(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let out = &mut *ctx.out;
    let Some(s) = get_stream(&mut ctx.ks, args[2])? else {
        return Err(CmdError::NoSuchKey);
    };
    out.array(s.groups.len());
    for (name, g) in &s.groups {
        out.map(6);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"consumers");
        out.int(g.consumers.len() as i64);
        out.bulk(b"pending");
        out.int(g.pel.len() as i64);
        group_progress(out, s, g);
    }
    Ok(())
}

fn xinfo_consumers(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let now = ctx.ks.now;
    let s = stream_or_err(ctx, args[2])?;
    let Some(g) = s.groups.get(args[3]) else {
        return Err(CmdError::msg(format!(
            "NOGROUP No such consumer group '{}' for key name '{}'",
            String::from_utf8_lossy(args[3]),
            String::from_utf8_lossy(args[2])
        )));
    };
    let rows: Vec<_> = g
        .consumers
        .iter()
        .map(|(n, c)| (n.clone(), c.pending.len(), now as i64 - c.seen_time as i64))
        .collect();
    let out = &mut *ctx.out;
    out.array(rows.len());
    for (name, pending, idle) in rows {
        out.map(3);
        out.bulk(b"name");
        out.bulk(&name);
        out.bulk(b"pending");
        out.int(pending as i64);
        out.bulk(b"idle");
        out.int(idle.max(0));
    }
    Ok(())
}

fn xinfo_help(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    super::help_lines(
        ctx,
        &[
            "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
            "HELP",
            "    Prints this help.",
        ],
    )
}
