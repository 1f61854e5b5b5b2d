//! CLIENT subcommands.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx};
use crate::server::clients::ReplyMode;

pub fn commands() -> Vec<CommandSpec> {
    let s = |name, arity, fl, h| CommandSpec::new(name, arity, fl, (0, 0, 0), h);
    vec![CommandSpec::new("client", -2, "", (0, 0, 0), help)
        .group("connection")
        .since("2.4.0")
        .subs(vec![
            s("id", 2, "noscript loading stale", id),
            s("setname", 3, "noscript loading stale", setname),
            s("getname", 2, "noscript loading stale", getname),
            s("list", -2, "admin noscript loading stale", list),
            s("info", 2, "noscript loading stale", info),
            s("kill", -3, "admin noscript loading stale", kill),
            s("pause", -3, "admin noscript loading stale", pause),
            s("unpause", 2, "admin noscript loading stale", unpause),
            s("no-evict", 3, "admin noscript loading stale", no_evict),
            s("unblock", -3, "admin noscript loading stale", unblock),
            s("reply", 3, "noscript loading stale", reply),
            s("help", 2, "loading stale", help),
            s("tracking", -3, "noscript loading stale", tracking),
            s("caching", 3, "noscript loading stale", caching),
            s("getredir", 2, "noscript loading stale", getredir),
            s("trackinginfo", 2, "noscript loading stale", trackinginfo),
        ])]
}

/// Client names can't contain spaces or newlines (they'd break CLIENT LIST).
pub fn validate_name(n: &[u8]) -> Result<(), CmdError> {
    if n.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::msg(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let lines = [
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CACHING (YES|NO)",
        "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
        "GETREDIR",
        "    Return the client ID we are redirecting to when tracking is enabled.",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:",
        "    * ADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made from the specified address",
        "    * LADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made to specified local address",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Kill connections by type.",
        "    * USER <username>",
        "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)",
        "      Skip killing current connection (default: yes).",
        "LIST [options ...]",
        "    Return information about client connections. Options:",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Return clients of specified type.",
        "UNPAUSE",
        "    Stop the current client pause, resuming traffic.",
        "PAUSE <timeout> [WRITE|ALL]",
        "    Suspend all, or just write, clients for <timeout> milliseconds.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
        "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
        "         [OPTIN] [OPTOUT] [NOLOOP]",
        "    Control server assisted client side caching.",
        "TRACKINGINFO",
        "    Report tracking status for the current connection.",
        "NO-EVICT (ON|OFF)",
        "    Protect current client connection from eviction.",
        "HELP",
        "    Prints this help.",
    ];
    super::help_lines(ctx, &lines)
}

fn id(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.out.int(ctx.cl.id as i64);
    Ok(())
}

fn setname(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    validate_name(args[2])?;
    *ctx.cl.handle.name.lock() = if args[2].is_empty() {
        None
    } else {
        Some(Bytes::copy_from_slice(args[2]))
    };
    ctx.out.ok();
    Ok(())
}

fn getname(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    match ctx.cl.handle.name.lock().as_ref() {
        Some(n) => ctx.out.bulk(n),
        None => ctx.out.null(),
    }
    Ok(())
}

/// A TYPE argument, with Redis's "slave" alias folded into "replica".
fn type_arg(t: &[u8]) -> Result<&'static str, CmdError> {
    let t = String::from_utf8_lossy(t).to_ascii_lowercase();
    Ok(match t.as_str() {
        "normal" => "normal",
        "master" => "master",
        "replica" | "slave" => "replica",
        "pubsub" => "pubsub",
        _ => return Err(CmdError::msg(format!("ERR Unknown client type '{t}'"))),
    })
}

fn list(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    show_running(ctx, "list");
    let mut ty: Option<&str> = None;
    let mut ids: Option<Vec<u64>> = None;
    let mut i = 2;
    while i < args.len() {
        if eq_ic(args[i], "type") && i + 1 < args.len() {
            ty = Some(type_arg(args[i + 1])?);
            i += 2;
        } else if eq_ic(args[i], "id") && i + 1 < args.len() {
            let mut v = Vec::new();
            for a in &args[i + 1..] {
                let n = arg_i64(a).map_err(|_| CmdError::msg("ERR Invalid client ID"))?;
                v.push(n as u64);
            }
            ids = Some(v);
            i = args.len();
        } else {
            return Err(CmdError::Syntax);
        }
    }
    ctx.cl.handle.db.store(ctx.cl.db, Ordering::Relaxed);
    let mut s = String::new();
    for h in ctx.srv.clients.all() {
        if ty.is_some_and(|t| t != h.client_type()) {
            continue;
        }
        // Killed or evicted: gone for Redis at once, whenever its connection task ends.
        if h.killed.load(Ordering::Relaxed) && h.id != ctx.cl.id {
            continue;
        }
        if ids.as_ref().is_some_and(|v| !v.contains(&h.id)) {
            continue;
        }
        let obl = if h.id == ctx.cl.id {
            pending_out(ctx)
        } else {
            0
        };
        s.push_str(&h.info_line_with(ctx.srv, obl));
        s.push('\n');
    }
    ctx.out.verbatim(s.as_bytes(), "txt");
    Ok(())
}

/// Shows the running command in this client's own line (`cmd=client|info`), as Redis does:
/// the dispatcher records the last command only after it ran.
fn show_running(ctx: &mut Ctx<'_>, sub: &str) {
    if let Some(c) = super::table()
        .get(b"client")
        .and_then(|c| c.subcommands.iter().find(|s| s.name == sub))
    {
        ctx.cl.handle.touch_cmd(c.full_name.as_str());
    }
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: 1 if the client was blocked on keys and is now
/// released with its timeout reply (or the UNBLOCKED error), else 0.
fn unblock(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 4 {
        return Err(sub_syntax(args));
    }
    let id = arg_i64(args[2])?;
    let error = match args.get(3) {
        None => false,
        Some(a) if args.len() == 4 && eq_ic(a, "timeout") => false,
        Some(a) if args.len() == 4 && eq_ic(a, "error") => true,
        Some(_) => {
            return Err(CmdError::msg(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    let done = id > 0
        && crate::blocking::Blocking::unblock(ctx.srv, id as u64, |resp3, name| {
            let mut o = crate::resp::Out::new(resp3);
            if error {
                o.error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
            } else if name.eq_ignore_ascii_case(b"blmove")
                || name.eq_ignore_ascii_case(b"brpoplpush")
            {
                o.null();
            } else {
                o.null_array();
            }
            o.buf
        });
    ctx.out.int(i64::from(done));
    Ok(())
}

fn info(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    show_running(ctx, "info");
    ctx.cl.handle.db.store(ctx.cl.db, Ordering::Relaxed);
    let mut s = ctx.cl.handle.info_line_with(ctx.srv, pending_out(ctx));
    s.push('\n');
    ctx.out.verbatim(s.as_bytes(), "txt");
    Ok(())
}

/// CLIENT LIST / INFO's `obl` of the running client: the replies of its batch written so
/// far (Redis's fixed reply buffer, 16 KiB; what passes it goes to the reply list).
fn pending_out(ctx: &Ctx<'_>) -> usize {
    ctx.out.len().min(16 * 1024)
}

fn kill(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() == 3 {
        // Old form: CLIENT KILL addr:port
        let addr = String::from_utf8_lossy(args[2]).into_owned();
        for h in ctx.srv.clients.all() {
            if h.addr == addr {
                h.kill();
                if h.id == ctx.cl.id {
                    ctx.cl.close_after_reply = true;
                }
                ctx.out.ok();
                return Ok(());
            }
        }
        return Err(CmdError::msg("ERR No such client"));
    }
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut id = None;
    let mut addr = None;
    let mut laddr = None;
    let mut user: Option<String> = None;
    let mut ty = None;
    let mut skipme = true;
    for p in args[2..].chunks(2) {
        let v = String::from_utf8_lossy(p[1]).into_owned();
        if eq_ic(p[0], "id") {
            // Redis refuses a non-number and a non-positive id alike.
            let n = arg_i64(p[1]).ok().filter(|&n| n > 0);
            id = Some(
                n.ok_or_else(|| CmdError::msg("ERR client-id should be greater than 0"))? as u64,
            );
        } else if eq_ic(p[0], "addr") {
            addr = Some(v);
        } else if eq_ic(p[0], "laddr") {
            laddr = Some(v);
        } else if eq_ic(p[0], "type") {
            ty = Some(type_arg(p[1])?);
        } else if eq_ic(p[0], "user") {
            if v != "default" && !super::acl::acl_users(ctx.srv).contains_key(p[1]) {
                return Err(CmdError::msg(format!("ERR No such user '{v}'")));
            }
            user = Some(v);
        } else if eq_ic(p[0], "skipme") {
            skipme = match v.to_ascii_lowercase().as_str() {
                "yes" => true,
                "no" => false,
                _ => return Err(CmdError::Syntax),
            };
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut n = 0;
    for h in ctx.srv.clients.all() {
        if id.is_some_and(|i| i != h.id)
            || addr.as_ref().is_some_and(|a| *a != h.addr)
            || laddr.as_ref().is_some_and(|a| *a != h.laddr)
            || ty.is_some_and(|t| t != h.client_type())
            || user.as_ref().is_some_and(|u| *u != h.user_name())
            || (skipme && h.id == ctx.cl.id)
        {
            continue;
        }
        if h.id == ctx.cl.id {
            ctx.cl.close_after_reply = true;
        } else {
            h.kill();
        }
        n += 1;
    }
    ctx.out.int(n);
    Ok(())
}

/// Redis's answer to a subcommand given too many arguments (it is quoted as typed).
fn sub_syntax(args: &[&[u8]]) -> CmdError {
    CmdError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
        String::from_utf8_lossy(args.get(1).copied().unwrap_or_default())
    ))
}

fn pause(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 4 {
        return Err(sub_syntax(args));
    }
    let ms = arg_i64(args[2])
        .map_err(|_| CmdError::msg("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    let write_only = match args.get(3) {
        None => false,
        Some(a) if eq_ic(a, "write") => true,
        Some(a) if eq_ic(a, "all") => false,
        Some(_) => return Err(CmdError::msg("ERR CLIENT PAUSE mode must be WRITE or ALL")),
    };
    // As Redis's pauseClients: a pause in effect is only ever extended (the later end, ALL
    // over WRITE); an end past the clock's range pauses nothing (Redis's sum wraps negative).
    let p = &ctx.srv.pause;
    let now = crate::server::now_ms();
    let end = i64::try_from(now)
        .ok()
        .and_then(|n| n.checked_add(ms))
        .and_then(|e| u64::try_from(e).ok());
    if let Some(end) = end {
        if p.until.load(Ordering::Relaxed) > now {
            if !write_only {
                p.write_only.store(false, Ordering::Relaxed);
            }
            p.until.fetch_max(end, Ordering::Relaxed);
        } else {
            p.write_only.store(write_only, Ordering::Relaxed);
            p.until.store(end, Ordering::Relaxed);
        }
    }
    ctx.out.ok();
    Ok(())
}

/// Redis's `may-replicate` commands: they write nothing to the keyspace but may reach the
/// replication stream (PUBLISH, SPUBLISH, PFCOUNT's cache update, a script without declared
/// flags), so CLIENT PAUSE WRITE holds them and read-only scripts refuse them.
pub fn may_replicate(cmd: &CommandSpec) -> bool {
    matches!(
        cmd.name,
        "publish" | "spublish" | "pfcount" | "eval" | "evalsha" | "fcall"
    )
}

/// Whether CLIENT PAUSE WRITE holds this command, as Redis's processCommand decides it: a
/// write or may-replicate command (a script as its shebang or function flags declare it),
/// or an EXEC whose queue holds one.
pub(crate) fn held_by_write_pause(
    srv: &crate::server::Server,
    cl: &crate::server::ClientState,
    cmd: &CommandSpec,
    args: &[&[u8]],
) -> bool {
    let t = super::table();
    let may_write = |cmd: &CommandSpec, args: &[&[u8]]| {
        if let Some(declared) = t.hooks.script_writes.and_then(|f| f(srv, cmd, args)) {
            return declared;
        }
        cmd.has(super::flags::WRITE) || may_replicate(cmd)
    };
    if cmd.name == "exec" && cmd.has(super::flags::CONN) {
        return cl.multi.as_ref().is_some_and(|q| {
            q.iter().any(|a| {
                let a = crate::resp::arg_view(a);
                t.resolve(&a).is_ok_and(|c| may_write(c, &a))
            })
        });
    }
    may_write(cmd, args)
}

fn unpause(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.srv.pause.lift();
    ctx.out.ok();
    Ok(())
}

fn no_evict(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let on = if eq_ic(args[2], "on") {
        true
    } else if eq_ic(args[2], "off") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    ctx.cl.handle.no_evict.store(on, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

fn reply(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if eq_ic(args[2], "on") {
        ctx.cl.reply_mode = ReplyMode::On;
        ctx.out.ok();
    } else if eq_ic(args[2], "off") {
        ctx.cl.reply_mode = ReplyMode::Off;
    } else if eq_ic(args[2], "skip") {
        if ctx.cl.reply_mode == ReplyMode::On {
            ctx.cl.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        return Err(CmdError::Syntax);
    }
    Ok(())
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p]... [BCAST] [OPTIN] [OPTOUT] [NOLOOP]:
/// options parsed and checked in redis's order (syntax first, then ON's conflicts).
fn tracking(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    use crate::tracking as tr;
    let mut redirect = 0u64;
    let mut opts = 0u8;
    let mut prefixes: Vec<Bytes> = Vec::new();
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let a = args[j];
        if eq_ic(a, "redirect") && more {
            j += 1;
            if redirect != 0 {
                return Err(CmdError::msg(
                    "ERR A client can only redirect to a single other client",
                ));
            }
            let id = arg_i64(args[j])?;
            if id <= 0 || ctx.srv.clients.get(id as u64).is_none() {
                return Err(CmdError::msg(
                    "ERR The client ID you want redirect to does not exist",
                ));
            }
            redirect = id as u64;
        } else if eq_ic(a, "bcast") {
            opts |= tr::BCAST;
        } else if eq_ic(a, "optin") {
            opts |= tr::OPTIN;
        } else if eq_ic(a, "optout") {
            opts |= tr::OPTOUT;
        } else if eq_ic(a, "noloop") {
            opts |= tr::NOLOOP;
        } else if eq_ic(a, "prefix") && more {
            j += 1;
            prefixes.push(Bytes::copy_from_slice(args[j]));
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if eq_ic(args[2], "on") {
        if let Some(e) = tr::check_on(ctx.srv, ctx.cl, opts, &prefixes) {
            return Err(CmdError::msg(e));
        }
        tr::enable(ctx.srv, ctx.cl, redirect, opts, &prefixes);
    } else if eq_ic(args[2], "off") {
        tr::disable(ctx.srv, ctx.cl);
    } else {
        return Err(CmdError::Syntax);
    }
    ctx.out.ok();
    Ok(())
}

/// CLIENT CACHING YES|NO: the next command is (YES, OPTIN) or isn't (NO, OPTOUT) tracked.
fn caching(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    use crate::tracking as tr;
    let f = ctx.cl.tracking;
    if f & tr::ON == 0 {
        return Err(CmdError::msg("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"));
    }
    if eq_ic(args[2], "yes") {
        if f & tr::OPTIN == 0 {
            return Err(CmdError::msg(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if eq_ic(args[2], "no") {
        if f & tr::OPTOUT == 0 {
            return Err(CmdError::msg(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(CmdError::Syntax);
    }
    ctx.cl.tracking |= tr::CACHING;
    ctx.out.ok();
    Ok(())
}

/// CLIENT GETREDIR: the redirect id, 0 without one, -1 when not tracking.
fn getredir(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let r = crate::tracking::describe(ctx.srv, ctx.cl.id).map_or(-1, |(_, r, _)| r as i64);
    ctx.out.int(r);
    Ok(())
}

/// CLIENT TRACKINGINFO: a map of flags (a set), redirect and prefixes, as redis 7.0.
fn trackinginfo(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    use crate::tracking as tr;
    let d = tr::describe(ctx.srv, ctx.cl.id);
    let f = d.as_ref().map_or(0, |d| d.0);
    let caching = ctx.cl.tracking & tr::CACHING != 0;
    let mut names: Vec<&str> = vec![if f & tr::ON != 0 { "on" } else { "off" }];
    if f & tr::BCAST != 0 {
        names.push("bcast");
    }
    if f & tr::OPTIN != 0 {
        names.push("optin");
        if caching {
            names.push("caching-yes");
        }
    }
    if f & tr::OPTOUT != 0 {
        names.push("optout");
        if caching {
            names.push("caching-no");
        }
    }
    if f & tr::NOLOOP != 0 {
        names.push("noloop");
    }
    if f & tr::BROKEN != 0 {
        names.push("broken_redirect");
    }
    ctx.out.map(3);
    ctx.out.bulk(b"flags");
    ctx.out.set(names.len());
    for n in names {
        ctx.out.bulk(n.as_bytes());
    }
    ctx.out.bulk(b"redirect");
    ctx.out.int(d.as_ref().map_or(-1, |d| d.1 as i64));
    ctx.out.bulk(b"prefixes");
    let prefixes = d.map(|d| d.2).unwrap_or_default();
    ctx.out.array(prefixes.len());
    for p in prefixes {
        ctx.out.bulk(&p);
    }
    Ok(())
}
