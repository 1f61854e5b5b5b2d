//! SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE PUBLISH PUBSUB, and the shard forms
//! SSUBSCRIBE SUNSUBSCRIBE SPUBLISH (the channel is the key: cluster routing applies).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::resp::Out;
use crate::server::{ClientState, Server};

use super::{CmdError, CmdResult, CommandSpec, Ctx};

/// Key-spec flags of the shard commands' channel argument (as Redis 7.0).
const NOT_KEY: &[&[&str]] = &[&["not_key"]];

pub fn commands() -> Vec<CommandSpec> {
    let g = "pubsub";
    let fl = "pubsub noscript loading stale";
    vec![
        CommandSpec::new("subscribe", -2, fl, (0, 0, 0), subscribe)
            .group(g)
            .since("2.0.0"),
        CommandSpec::new("unsubscribe", -1, fl, (0, 0, 0), unsubscribe)
            .group(g)
            .since("2.0.0"),
        CommandSpec::new("psubscribe", -2, fl, (0, 0, 0), psubscribe)
            .group(g)
            .since("2.0.0"),
        CommandSpec::new("punsubscribe", -1, fl, (0, 0, 0), punsubscribe)
            .group(g)
            .since("2.0.0"),
        CommandSpec::new(
            "publish",
            3,
            "pubsub loading stale fast",
            (0, 0, 0),
            publish,
        )
        .group(g)
        .since("2.0.0"),
        CommandSpec::new("ssubscribe", -2, fl, (1, -1, 1), ssubscribe)
            .group(g)
            .since("7.0.0")
            .key_flags(NOT_KEY),
        CommandSpec::new("sunsubscribe", -1, fl, (1, -1, 1), sunsubscribe)
            .group(g)
            .since("7.0.0")
            .key_flags(NOT_KEY),
        CommandSpec::new(
            "spublish",
            3,
            "pubsub loading stale fast",
            (1, 1, 1),
            spublish,
        )
        .group(g)
        .since("7.0.0")
        .key_flags(NOT_KEY),
        CommandSpec::new("pubsub", -2, "", (0, 0, 0), help)
            .group(g)
            .since("2.8.0")
            .subs(vec![
                CommandSpec::new("channels", -2, "pubsub loading stale", (0, 0, 0), channels),
                CommandSpec::new("numsub", -2, "pubsub loading stale", (0, 0, 0), numsub),
                CommandSpec::new("numpat", 2, "pubsub loading stale", (0, 0, 0), numpat),
                CommandSpec::new(
                    "shardchannels",
                    -2,
                    "pubsub loading stale",
                    (0, 0, 0),
                    shardchannels,
                ),
                CommandSpec::new(
                    "shardnumsub",
                    -2,
                    "pubsub loading stale",
                    (0, 0, 0),
                    shardnumsub,
                ),
                CommandSpec::new("help", 2, "loading stale", (0, 0, 0), help),
            ]),
    ]
}

/// What a RESP2 client in subscribed state may still run.
pub fn allowed_in_context(name: &str) -> bool {
    matches!(
        name,
        "subscribe"
            | "unsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "ping"
            | "quit"
            | "reset"
            | "ssubscribe"
            | "sunsubscribe"
    )
}

/// Runs a (un)subscribe that writes confirmation pushes. Under CLIENT REPLY OFF|SKIP they
/// are kept aside and still sent (Redis's CLIENT_PUSHING), in RESP2 as in RESP3.
fn confirm(ctx: &mut Ctx<'_>, f: impl FnOnce(&Arc<Server>, &mut ClientState, &mut Out)) {
    if ctx.cl.replies_dropped() {
        let mut o = Out::new(ctx.out.resp3);
        f(ctx.srv, ctx.cl, &mut o);
        ctx.cl.kept_pushes.extend_from_slice(&o.buf);
    } else {
        f(ctx.srv, ctx.cl, ctx.out);
    }
}

fn subscribe(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    confirm(ctx, |srv, cl, out| {
        srv.pubsub.subscribe(cl, out, &args[1..], false)
    });
    Ok(())
}

fn unsubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    confirm(ctx, |srv, cl, out| {
        srv.pubsub.unsubscribe(cl, out, &args[1..], false)
    });
    Ok(())
}

fn psubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    confirm(ctx, |srv, cl, out| {
        srv.pubsub.subscribe(cl, out, &args[1..], true)
    });
    Ok(())
}

fn punsubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    confirm(ctx, |srv, cl, out| {
        srv.pubsub.unsubscribe(cl, out, &args[1..], true)
    });
    Ok(())
}

fn publish(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    publish_to(ctx, args, false)
}

/// PUBLISH (`shard` false: every node of the cluster) and SPUBLISH (`shard` true: the
/// nodes of this shard): local subscribers first, then the bus.
fn publish_to(ctx: &mut Ctx<'_>, args: &[&[u8]], shard: bool) -> CmdResult {
    let limit = ctx.srv.config.read().cobl[2];
    let n = if shard {
        ctx.srv.pubsub.spublish(args[1], args[2], limit)
    } else {
        ctx.srv.pubsub.publish(args[1], args[2], limit)
    };
    // The bus, from the cluster node in the server's state (not the glue above us);
    // outside cluster mode, the replicas (Redis's publishCommand/spublishCommand).
    if let Some(node) = ctx.srv.cluster.get() {
        node.with_state(|st| st.publish(args[1], args[2], shard));
    } else {
        super::propagation::to_replicas(ctx, args);
    }
    ctx.srv
        .stats
        .pubsub_messages
        .fetch_add(1, Ordering::Relaxed);
    ctx.out.int(n as i64);
    Ok(())
}

fn ssubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if ctx.in_exec {
        return Err(CmdError::msg(
            "ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client",
        ));
    }
    confirm(ctx, |srv, cl, out| {
        srv.pubsub.ssubscribe(srv, cl, out, &args[1..])
    });
    Ok(())
}

fn sunsubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    confirm(ctx, |srv, cl, out| {
        srv.pubsub.sunsubscribe(cl, out, &args[1..])
    });
    Ok(())
}

fn spublish(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    publish_to(ctx, args, true)
}

fn shardchannels(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(channels_syntax(args[1]));
    }
    let v = ctx.srv.pubsub.shard_channels(args.get(2).map(|b| &b[..]));
    ctx.out.bulks(v.iter());
    Ok(())
}

/// A flat array of channel, count pairs in RESP3 too (Redis 7.0 answers no map).
fn shardnumsub(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.out.array(2 * (args.len() - 2));
    for c in &args[2..] {
        ctx.out.bulk(c);
        ctx.out.int(ctx.srv.pubsub.shard_numsub(c) as i64);
    }
    Ok(())
}

/// CHANNELS / SHARDCHANNELS with more than a pattern: Redis's subcommand syntax error.
/// The subcommand is quoted as typed.
fn channels_syntax(sub: &[u8]) -> CmdError {
    CmdError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
        String::from_utf8_lossy(sub)
    ))
}

fn channels(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(channels_syntax(args[1]));
    }
    let v = ctx.srv.pubsub.channels(args.get(2).map(|b| &b[..]));
    ctx.out.bulks(v.iter());
    Ok(())
}

/// A flat array of channel, count pairs in RESP3 too (Redis 7.0 answers no map).
fn numsub(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.out.array(2 * (args.len() - 2));
    for c in &args[2..] {
        ctx.out.bulk(c);
        ctx.out.int(ctx.srv.pubsub.numsub(c) as i64);
    }
    Ok(())
}

fn numpat(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.out.int(ctx.srv.pubsub.numpat() as i64);
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let lines = [
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Prints this help.",
    ];
    super::help_lines(ctx, &lines)
}
