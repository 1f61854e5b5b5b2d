//! ACL for the one user tessera-node has: `default`, with `requirepass` as its password.
//!
//! Everything that reads ACL state answers as redis-server 7.0 does for that user (WHOAMI,
//! USERS, LIST, GETUSER, CAT, DRYRUN, GENPASS, LOG with the failed AUTHs); ACL SETUSER
//! takes the rules that keep `default` an all-access user and manages its passwords as
//! redis does (several at once, `nopass`, `resetpass`), for tools that manage the password
//! through ACL. `CONFIG SET requirepass` replaces them with the one password again (and
//! `CONFIG GET requirepass` keeps showing the config, as in redis). Other users are refused
//! with a reason: the node has no per-user permissions.
//!
//! The ACL state is one per process (tests may run several servers in one; they share it
//! only if they use ACL SETUSER).

use std::sync::atomic::Ordering;

use sha2::{Digest, Sha256};

use super::{help_lines, table, CmdError, CmdResult, CommandSpec, Ctx};

pub fn commands() -> Vec<CommandSpec> {
    let s = |name, arity, f, h| CommandSpec::new(name, arity, f, (0, 0, 0), h);
    let admin = "admin noscript loading stale";
    vec![CommandSpec::new("acl", -2, "", (0, 0, 0), help)
        .group("server")
        .since("6.0.0")
        .subs(vec![
            s("cat", -2, "noscript loading stale", cat),
            s("deluser", -3, admin, deluser),
            s("dryrun", -4, admin, dryrun),
            s("getuser", 3, admin, getuser),
            s("genpass", -2, "noscript loading stale", genpass),
            s("list", 2, admin, list),
            s("load", 2, admin, load),
            s("log", -2, admin, log),
            s("save", 2, admin, save),
            s("setuser", -3, admin, setuser),
            s("users", 2, admin, users),
            s("whoami", 2, "noscript loading stale", whoami),
            s("help", 2, "loading stale", help),
        ])]
}

fn help(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    help_lines(
        ctx,
        &[
            "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
            "HELP",
            "    Prints this help.",
        ],
    )
}

/// Redis 7.0's ACL categories, in its order.
const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Redis's subcommand syntax error for ACL.
fn syntax_error(args: &[&[u8]]) -> CmdError {
    CmdError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
        String::from_utf8_lossy(args[1])
    ))
}

const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

fn whoami(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.out.bulk(b"default");
    Ok(())
}

fn users(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.out.array(1);
    ctx.out.bulk(b"default");
    Ok(())
}

fn sha256_hex(p: &str) -> String {
    Sha256::digest(p.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The default user's password hashes and its nopass flag.
fn credentials(ctx: &Ctx<'_>) -> (Vec<String>, bool) {
    let u = ctx
        .srv
        .default_user
        .current(&ctx.srv.config.read().typed.requirepass);
    (
        u.passwords.iter().map(|p| sha256_hex(p)).collect(),
        u.nopass,
    )
}

fn list(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let (hashes, nopass) = credentials(ctx);
    let mut line = String::from("user default on");
    if nopass {
        line.push_str(" nopass");
    }
    for h in &hashes {
        line.push_str(" #");
        line.push_str(h);
    }
    line.push_str(" ~* &* +@all");
    ctx.out.array(1);
    ctx.out.bulk(line.as_bytes());
    Ok(())
}

fn getuser(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args[2] != b"default" {
        ctx.out.null();
        return Ok(());
    }
    let (hashes, nopass) = credentials(ctx);
    let out = &mut *ctx.out;
    out.map(6);
    out.bulk(b"flags");
    let flags: &[&[u8]] = if nopass {
        &[b"on", b"nopass"]
    } else {
        &[b"on"]
    };
    out.set(flags.len());
    for f in flags {
        out.bulk(f);
    }
    out.bulk(b"passwords");
    out.array(hashes.len());
    for h in &hashes {
        out.bulk(h.as_bytes());
    }
    out.bulk(b"commands");
    out.bulk(b"+@all");
    out.bulk(b"keys");
    out.bulk(b"~*");
    out.bulk(b"channels");
    out.bulk(b"&*");
    out.bulk(b"selectors");
    out.array(0);
    Ok(())
}

fn cat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(syntax_error(args));
    }
    let Some(want) = args.get(2) else {
        ctx.out.array(CATEGORIES.len());
        for c in CATEGORIES {
            ctx.out.bulk(c.as_bytes());
        }
        return Ok(());
    };
    let want = String::from_utf8_lossy(want).to_ascii_lowercase();
    if !CATEGORIES.contains(&want.as_str()) {
        return Err(CmdError::msg(format!("ERR Unknown category '{want}'")));
    }
    let tag = format!("@{want}");
    let mut names: Vec<&str> = Vec::new();
    let in_cat = |c: &CommandSpec| {
        super::command::command_meta::meta(&c.full_name)
            .is_some_and(|m| m.acl.contains(&tag.as_str()))
    };
    // A container (COMMAND, CLIENT...) is listed when it is itself in the category, its
    // subcommands each when they are.
    for c in &table().cmds {
        if in_cat(c) {
            names.push(&c.full_name);
        }
        names.extend(
            c.subcommands
                .iter()
                .filter(|s| in_cat(s))
                .map(|s| s.full_name.as_str()),
        );
    }
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk(n.as_bytes());
    }
    Ok(())
}

fn dryrun(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args[2] != b"default" {
        return Err(CmdError::msg(format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(args[2])
        )));
    }
    let cmd = &args[3..];
    let Some(spec) = table().get(cmd[0]) else {
        return Err(CmdError::msg(format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(cmd[0])
        )));
    };
    if !spec.arity_ok(cmd.len()) {
        return Err(CmdError::msg(format!(
            "ERR wrong number of arguments for '{}' command",
            spec.full_name
        )));
    }
    // The default user may run everything.
    ctx.out.ok();
    Ok(())
}

fn genpass(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let bits = match args.get(2) {
        None => 256,
        Some(a) => crate::types::parse_i64_strict(a)
            .ok_or_else(|| CmdError::msg("ERR value is not an integer or out of range"))
            .map(Some)?
            .filter(|b| (1..=4096).contains(b))
            .ok_or_else(|| {
                CmdError::msg("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")
            })?,
    };
    let chars = (bits as usize).div_ceil(4);
    let mut s = String::with_capacity(chars);
    while s.len() < chars {
        let b: u8 = rand::random();
        s.push_str(&format!("{b:02x}"));
    }
    s.truncate(chars);
    ctx.out.bulk(s.as_bytes());
    Ok(())
}

fn deluser(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args[2..].iter().any(|u| *u == b"default") {
        return Err(CmdError::msg("ERR The 'default' user cannot be removed"));
    }
    // No other user exists.
    ctx.out.int(0);
    Ok(())
}

fn load(_: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    Err(CmdError::msg(NO_ACL_FILE))
}

fn save(_: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    Err(CmdError::msg(NO_ACL_FILE))
}

/// ACL SETUSER default with rules that keep it an all-access user: `on`, `~*`, `&*`,
/// `+@all` and their long names, and the password rules `>pw`, `<pw`, `nopass`,
/// `resetpass`. Applied all or nothing.
fn setuser(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args[2] != b"default" {
        return Err(CmdError::msg(
            "ERR tessera-node has only the 'default' user (ACL users are not supported)",
        ));
    }
    let mut u = ctx
        .srv
        .default_user
        .current(&ctx.srv.config.read().typed.requirepass);
    for rule in &args[3..] {
        let r = String::from_utf8_lossy(rule);
        match r.as_ref() {
            "on" | "~*" | "allkeys" | "&*" | "allchannels" | "+@all" | "allcommands" => {}
            "nopass" => {
                u.nopass = true;
                u.passwords.clear();
            }
            "resetpass" => {
                u.nopass = false;
                u.passwords.clear();
            }
            p if p.starts_with('>') => {
                let p = p[1..].to_string();
                u.nopass = false;
                if !u.passwords.contains(&p) {
                    u.passwords.push(p);
                }
            }
            p if p.starts_with('<') => {
                let p = &p[1..];
                let before = u.passwords.len();
                u.passwords.retain(|x| x != p);
                if u.passwords.len() == before {
                    return Err(CmdError::msg(format!(
                        "ERR Error in ACL SETUSER modifier '{r}': The password you are trying to remove from the user does not exist"
                    )));
                }
            }
            _ => {
                return Err(CmdError::msg(format!(
                    "ERR Error in ACL SETUSER modifier '{r}': tessera-node keeps 'default' an all-access user (only its passwords can change)"
                )))
            }
        }
    }
    ctx.srv.default_user.set(u);
    ctx.srv.config_changed();
    ctx.out.ok();
    Ok(())
}

/// Entries newest first; same reason, context, object and user within this many ms
/// count as one (Redis's grouping).
const GROUP_MS: u64 = 60_000;

use crate::server::auth::Entry;

/// Records a failed AUTH/HELLO AUTH (called by the connection commands).
pub fn log_auth_failure(ctx: &Ctx<'_>, command: &str, username: &[u8]) {
    let now = crate::server::now_ms();
    let max = ctx.srv.config.read().typed.acllog_max_len as usize;
    ctx.cl.handle.db.store(ctx.cl.db, Ordering::Relaxed);
    // The entry shows the failing command as the client's current one.
    if let Some(c) = table().get(command.as_bytes()) {
        ctx.cl.handle.touch_cmd(c.full_name.as_str());
    }
    let info = ctx.cl.handle.info_line(ctx.srv);
    let context = if ctx.in_exec { "multi" } else { "toplevel" };
    let username = String::from_utf8_lossy(username).into_owned();
    let mut log = ctx.srv.acl_log.0.lock();
    if let Some(e) = log.iter_mut().find(|e| {
        e.reason == "auth"
            && e.context == context
            && e.object == command
            && e.username == username
            && now.saturating_sub(e.at_ms) < GROUP_MS
    }) {
        e.count += 1;
        e.at_ms = now;
        e.client_info = info;
        return;
    }
    log.push_front(Entry {
        count: 1,
        reason: "auth",
        context,
        object: command.to_string(),
        username,
        at_ms: now,
        client_info: info,
    });
    log.truncate(max);
}

fn log(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(syntax_error(args));
    }
    let count = match args.get(2) {
        None => 10,
        Some(a) if a.eq_ignore_ascii_case(b"reset") => {
            ctx.srv.acl_log.0.lock().clear();
            ctx.out.ok();
            return Ok(());
        }
        Some(a) => crate::types::parse_i64_strict(a)
            .ok_or_else(|| CmdError::msg("ERR value is not an integer or out of range"))?
            .max(0) as usize,
    };
    let now = crate::server::now_ms();
    let log = ctx.srv.acl_log.0.lock();
    let n = count.min(log.len());
    ctx.out.array(n);
    for e in log.iter().take(n) {
        ctx.out.map(7);
        ctx.out.bulk(b"count");
        ctx.out.int(e.count as i64);
        ctx.out.bulk(b"reason");
        ctx.out.bulk(e.reason.as_bytes());
        ctx.out.bulk(b"context");
        ctx.out.bulk(e.context.as_bytes());
        ctx.out.bulk(b"object");
        ctx.out.bulk(e.object.as_bytes());
        ctx.out.bulk(b"username");
        ctx.out.bulk(e.username.as_bytes());
        ctx.out.bulk(b"age-seconds");
        ctx.out.double(now.saturating_sub(e.at_ms) as f64 / 1000.0);
        ctx.out.bulk(b"client-info");
        ctx.out.bulk(e.client_info.as_bytes());
    }
    Ok(())
}
