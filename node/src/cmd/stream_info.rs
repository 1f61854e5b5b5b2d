//! XINFO STREAM / GROUPS / CONSUMERS / HELP (Redis 7.0.15 reply shapes).
//!
//! `radix-tree-keys` / `radix-tree-nodes` describe Redis's internal rax of listpacks; we
//! report the node count an append-only Redis stream would have (100 entries per node) for
//! both, as an estimate. XINFO STREAM FULL is not implemented yet.

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

fn xinfo_stream(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::msg(
            "ERR XINFO STREAM FULL is not supported by this server yet",
        ));
    }
    let out = &mut *ctx.out;
    let Some(s) = get_stream(&mut ctx.ks, args[2])? else {
        return Err(CmdError::NoSuchKey);
    };
    let nodes = s.len().div_ceil(100) as i64;
    out.map(10);
    out.bulk(b"length");
    out.int(s.len() as i64);
    out.bulk(b"radix-tree-keys");
    out.int(nodes);
    out.bulk(b"radix-tree-nodes");
    out.int(nodes);
    out.bulk(b"last-generated-id");
    id_bulk(out, s.last_id);
    out.bulk(b"max-deleted-entry-id");
    id_bulk(out, s.max_deleted_id);
    out.bulk(b"entries-added");
    out.int(s.entries_added as i64);
    out.bulk(b"recorded-first-entry-id");
    id_bulk(out, s.first_id);
    out.bulk(b"groups");
    out.int(s.groups.len() as i64);
    out.bulk(b"first-entry");
    match s.entries.iter().next() {
        Some((id, p)) => write_entry(out, *id, p),
        None => out.null(),
    }
    out.bulk(b"last-entry");
    match s.entries.iter().next_back() {
        Some((id, p)) => write_entry(out, *id, p),
        None => out.null(),
    }
    Ok(())
}

/// Redis's streamReplyWithCGLag: None when it cannot be known.
fn lag(s: &StreamValue, g: &Group) -> Option<i64> {
    if s.entries_added == 0 {
        return Some(0);
    }
    if g.entries_read != -1 && !s.has_tombstones_from(g.last_id) {
        return Some(s.entries_added as i64 - g.entries_read);
    }
    match s.estimate_distance(g.last_id) {
        -1 => None,
        read => Some(s.entries_added as i64 - read),
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
