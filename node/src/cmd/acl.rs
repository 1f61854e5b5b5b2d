//! The ACL command and the ACL checks of calls, over the pure rules of `crate::acl`.
//!
//! Users live in the server's `server::auth` state: `default` (its passwords from
//! `requirepass` or ACL SETUSER, its rules all-access until ACL SETUSER changes them) and
//! the others (ACL SETUSER, `user` config lines). ACL SETUSER/GETUSER/LIST/USERS/DELUSER/
//! DRYRUN/CAT/WHOAMI/GENPASS/LOG answer as redis-server 7.0.15; `check_call` (every call,
//! from the dispatcher), `check_exec_call` (EXEC) and `check_script_call` (redis.call) refuse
//! what the connection's user may not run, with Redis's -NOPERM texts and ACL LOG entries.
//! Users come from the config's `user` lines or the `aclfile` at startup
//! ([`load_at_startup`]); ACL LOAD/SAVE read and write the aclfile; CONFIG REWRITE writes
//! them back as `user` lines ([`config_user_lines`]).

use std::sync::atomic::Ordering;

use crate::acl::catalog::CATEGORIES;

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

/// The ACL catalog of the command table: every command and subcommand with the ACL
/// categories Redis 7.0 gives it (`command_meta`), in table order.
pub fn build_catalog() -> crate::acl::Catalog {
    let t = table();
    let mut descs: Vec<(String, Vec<&'static str>, bool)> = Vec::new();
    for c in &t.cmds {
        for s in std::iter::once(c).chain(c.subcommands.iter()) {
            let cats = super::command::command_meta::meta(&s.full_name)
                .map(|m| m.acl.clone())
                .unwrap_or_default();
            descs.push((
                s.full_name.clone(),
                cats,
                s.flags & super::spec::flags::NO_AUTH != 0,
            ));
        }
    }
    crate::acl::Catalog::new(descs.iter().map(|(n, c, na)| crate::acl::CommandDesc {
        name: n,
        categories: c,
        no_auth: *na,
    }))
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

/// Redis's subcommand syntax error for ACL.
fn syntax_error(args: &[&[u8]]) -> CmdError {
    CmdError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
        String::from_utf8_lossy(args[1])
    ))
}

const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

fn whoami(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let name = ctx.cl.handle.user_name();
    ctx.out.bulk(name.as_bytes());
    Ok(())
}

fn users(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let mut names: Vec<Vec<u8>> = acl_users(ctx.srv).keys().cloned().collect();
    names.push(b"default".to_vec());
    names.sort();
    ctx.out.array(names.len());
    for n in &names {
        ctx.out.bulk(n);
    }
    Ok(())
}

/// The server's ACL users (other than default), loaded by [`load_at_startup`] (or here, on
/// first use, by a server a test built without starting it).
pub fn acl_users(srv: &crate::server::Server) -> crate::server::auth::UsersGuard<'_> {
    let acl = &srv.default_user.1;
    acl.loaded.get_or_init(|| {
        if let Err(e) = load_users(srv) {
            tracing::warn!("{e}");
        }
    });
    acl.users.lock()
}

/// Redis's ACLLoadUsersAtStartup: the config's `user` lines (a `default` line replaces the
/// default user, requirepass included), then the `aclfile`. An error is what Redis logs
/// before it exits.
pub fn load_at_startup(srv: &crate::server::Server) -> Result<(), String> {
    let mut r = Ok(());
    srv.default_user
        .1
        .loaded
        .get_or_init(|| r = load_users(srv));
    r
}

fn load_users(srv: &crate::server::Server) -> Result<(), String> {
    let (lines, file) = {
        let c = srv.config.read();
        (c.acl_users.clone(), acl_file_of(&c))
    };
    if file.is_some() && !lines.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    let env = env_of(srv);
    for line in &lines {
        let Some((name, rules)) = line.split_first() else {
            continue;
        };
        if crate::acl::has_spaces(name.as_bytes()) {
            tracing::warn!("Spaces not allowed in ACL usernames");
            return Err(CRITICAL.into());
        }
        let rules: Vec<&[u8]> = rules.iter().map(|r| r.as_bytes()).collect();
        // Checked when the config was read: only an unknown command fails here.
        let rules = crate::acl::merge_selector_args(&rules).map_err(|e| e.to_string())?;
        let mut u = crate::acl::User::new(env);
        if name == "default" {
            let _ = u.apply(env, b"reset");
        }
        for r in &rules {
            if let Err(e) = u.apply(env, r) {
                tracing::warn!(
                    "Error loading ACL rule '{}' for the user named '{name}': {e}",
                    String::from_utf8_lossy(r)
                );
                return Err(CRITICAL.into());
            }
        }
        if !u.enabled {
            tracing::info!("The user '{name}' is disabled (there is no 'on' modifier in the user description). Make sure this is not a configuration error.");
        }
        if name == "default" {
            install_default(srv, u);
        } else {
            srv.default_user
                .1
                .users
                .lock()
                .insert(name.as_bytes().to_vec(), u);
        }
    }
    if let Some((shown, path)) = file {
        let loaded = crate::acl::file::read(&path, &shown)
            .and_then(|t| crate::acl::file::parse(&t, &shown, env))
            .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
        install_loaded(srv, loaded);
    }
    Ok(())
}

const CRITICAL: &str = "Critical error while loading ACLs. Exiting.";

/// The `aclfile` as configured (what errors name) and its path (relative to `dir`, where
/// Redis, which changes into `dir`, finds it).
fn acl_file_of(c: &crate::config::Config) -> Option<(String, std::path::PathBuf)> {
    let f = &c.typed.aclfile;
    (!f.is_empty()).then(|| (f.clone(), c.typed.dir.join(f)))
}

/// The default user becomes `u`, credentials and rules (connections stay logged in).
fn install_default(srv: &crate::server::Server, u: crate::acl::User) {
    srv.default_user.set(crate::server::auth::DefaultUser {
        passwords: u.passwords.clone(),
        nopass: u.nopass,
    });
    let acl = &srv.default_user.1;
    acl.default_restricted
        .store(!u.allows_everything(), Ordering::Relaxed);
    *acl.default_rules.lock() = Some(u);
    srv.config_changed();
}

/// An ACL file's users replace all of the server's: the default user in place, the others
/// as new users (their connections are the caller's to close).
fn install_loaded(srv: &crate::server::Server, l: crate::acl::file::Loaded) {
    *srv.default_user.1.users.lock() = l.users;
    install_default(srv, l.default);
}

/// Every user, `default` included, in name order (ACL LIST, SAVE, CONFIG REWRITE).
fn all_users(srv: &crate::server::Server) -> Vec<(Vec<u8>, crate::acl::User)> {
    let mut all: Vec<(Vec<u8>, crate::acl::User)> = acl_users(srv)
        .iter()
        .map(|(n, u)| (n.clone(), u.clone()))
        .collect();
    all.push((b"default".to_vec(), default_full_of(srv)));
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// The `user` lines CONFIG REWRITE writes (Redis's rewriteConfigUserOption): every user as
/// ACL LIST describes it, as [name, rules].
pub fn config_user_lines(srv: &crate::server::Server) -> Vec<Vec<String>> {
    let cat = srv.default_user.1.catalog.get_or_init(build_catalog);
    all_users(srv)
        .iter()
        .map(|(n, u)| {
            vec![
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(&u.describe(cat)).into_owned(),
            ]
        })
        .collect()
}

/// The catalog ACL rules name commands from, built once per server.
fn catalog<'a>(ctx: &Ctx<'a>) -> &'a crate::acl::Catalog {
    ctx.srv.default_user.1.catalog.get_or_init(build_catalog)
}

/// What new users and selectors start with (`acl-pubsub-default`).
fn acl_env<'a>(ctx: &Ctx<'a>) -> crate::acl::Env<'a> {
    env_of(ctx.srv)
}

fn env_of(srv: &crate::server::Server) -> crate::acl::Env<'_> {
    crate::acl::Env {
        catalog: srv.default_user.1.catalog.get_or_init(build_catalog),
        pubsub_allchannels: srv.config.read().typed.acl_pubsub_default == "allchannels",
    }
}

/// The default user as one ACL user: its rules (all access unless ACL SETUSER changed
/// them) with its passwords (`requirepass`, or what ACL SETUSER set).
fn default_full(ctx: &Ctx<'_>) -> crate::acl::User {
    default_full_of(ctx.srv)
}

fn default_full_of(srv: &crate::server::Server) -> crate::acl::User {
    let env = env_of(srv);
    let creds = srv
        .default_user
        .current(&srv.config.read().typed.requirepass);
    let mut u = srv
        .default_user
        .1
        .default_rules
        .lock()
        .clone()
        .unwrap_or_else(|| crate::acl::User::default_user(env));
    u.passwords = creds.passwords;
    u.nopass = creds.nopass;
    u
}

fn list(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let cat = catalog(ctx);
    let all = all_users(ctx.srv);
    ctx.out.array(all.len());
    for (n, u) in &all {
        let mut l = b"user ".to_vec();
        l.extend_from_slice(n);
        l.push(b' ');
        l.extend_from_slice(&u.describe(cat));
        ctx.out.bulk(&l);
    }
    Ok(())
}

/// GETUSER's commands, keys and channels fields of one selector.
fn reply_selector(ctx: &mut Ctx<'_>, s: &crate::acl::Selector) {
    let cat = catalog(ctx);
    let out = &mut *ctx.out;
    out.bulk(b"commands");
    out.bulk(s.describe_commands(cat).as_bytes());
    out.bulk(b"keys");
    out.bulk(&s.describe_keys());
    out.bulk(b"channels");
    out.bulk(&s.describe_channels());
}

/// ACL GETUSER's reply.
fn getuser_reply(ctx: &mut Ctx<'_>, u: Option<crate::acl::User>) -> CmdResult {
    let Some(u) = u else {
        ctx.out.null();
        return Ok(());
    };
    ctx.out.map(6);
    ctx.out.bulk(b"flags");
    let flags = u.flags();
    ctx.out.set(flags.len());
    for f in flags {
        ctx.out.bulk(f.as_bytes());
    }
    ctx.out.bulk(b"passwords");
    ctx.out.array(u.passwords.len());
    for p in &u.passwords {
        ctx.out.bulk(p.as_bytes());
    }
    reply_selector(ctx, &u.root);
    ctx.out.bulk(b"selectors");
    ctx.out.array(u.selectors.len());
    for s in &u.selectors {
        ctx.out.map(3);
        reply_selector(ctx, s);
    }
    Ok(())
}

fn getuser(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let u = if args[2] == b"default" {
        Some(default_full(ctx))
    } else {
        acl_users(ctx.srv).get(args[2]).cloned()
    };
    getuser_reply(ctx, u)
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
    let given = want;
    let want = String::from_utf8_lossy(want).to_ascii_lowercase();
    if !CATEGORIES.contains(&want.as_str()) {
        // Named as given, at most 128 bytes (Redis's '%.128s').
        let shown = &given[..given.len().min(128)];
        return Err(CmdError::msg(format!(
            "ERR Unknown category '{}'",
            String::from_utf8_lossy(shown)
        )));
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
    let user = if args[2] == b"default" {
        Some(default_full(ctx))
    } else {
        let u = acl_users(ctx.srv).get(args[2]).cloned();
        Some(u.ok_or_else(|| {
            CmdError::msg(format!(
                "ERR User '{}' not found",
                String::from_utf8_lossy(args[2])
            ))
        })?)
    };
    let cmd = &args[3..];
    // As Redis's lookupCommand: a container's unknown subcommand is no command either.
    let spec = match (table().get(cmd[0]), table().resolve(cmd)) {
        (Some(c), _) if c.subcommands.is_empty() || cmd.len() == 1 => c,
        (Some(_), Ok(s)) => s,
        _ => {
            return Err(CmdError::msg(format!(
                "ERR Command '{}' not found",
                String::from_utf8_lossy(cmd[0])
            )))
        }
    };
    if !spec.arity_ok(cmd.len()) {
        return Err(CmdError::msg(format!(
            "ERR wrong number of arguments for '{}' command",
            spec.full_name
        )));
    }
    let Some(u) = user else {
        ctx.out.ok();
        return Ok(());
    };
    let cat = catalog(ctx);
    let arg = |pos: usize| {
        String::from_utf8_lossy(cmd.get(pos).copied().unwrap_or_default()).into_owned()
    };
    match super::acl_check::check_user(&u, cat, spec, cmd) {
        Ok(()) => ctx.out.ok(),
        Err(d) => {
            let msg = match d.kind {
                crate::acl::DeniedKind::Command => format!(
                    "This user has no permissions to run the '{}' command",
                    spec.full_name
                ),
                crate::acl::DeniedKind::Key => format!(
                    "This user has no permissions to access the '{}' key",
                    arg(d.pos)
                ),
                crate::acl::DeniedKind::Channel => format!(
                    "This user has no permissions to access the '{}' channel",
                    arg(d.pos)
                ),
            };
            ctx.out.bulk(msg.as_bytes());
        }
    }
    Ok(())
}

fn genpass(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(syntax_error(args));
    }
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
    let removed: Vec<Vec<u8>> = {
        let mut users = acl_users(ctx.srv);
        args[2..]
            .iter()
            .filter(|n| users.remove(**n).is_some())
            .map(|n| n.to_vec())
            .collect()
    };
    let deleted = removed.len();
    // Their connections are closed (this one after the reply), as Redis's
    // ACLFreeUserAndKillClients.
    for h in ctx.srv.clients.all() {
        let gone = h
            .acl_user
            .lock()
            .as_ref()
            .is_some_and(|u| removed.iter().any(|r| r.as_slice() == u.as_ref()));
        if !gone {
            continue;
        }
        // The name stays: the check refuses every command of a user that is gone, until
        // the connection closes.
        if h.id == ctx.cl.id {
            ctx.cl.authenticated = false;
            ctx.cl.close_after_reply = true;
        } else {
            h.kill();
        }
    }
    ctx.out.int(deleted as i64);
    Ok(())
}

/// ACL LOAD: the aclfile's users replace the server's, or nothing changes (Redis's error
/// list). As Redis, which frees every old user, every connection logged in as a user other
/// than `default` is closed (this one after the reply).
fn load(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let Some((shown, path)) = acl_file_of(&ctx.srv.config.read()) else {
        return Err(CmdError::msg(NO_ACL_FILE));
    };
    let env = acl_env(ctx);
    let loaded = crate::acl::file::read(&path, &shown)
        .and_then(|t| crate::acl::file::parse(&t, &shown, env))
        // A line may hold a bare CR; the error reply must stay one line.
        .map_err(|e| CmdError::msg(format!("ERR {}", e.replace(['\r', '\n'], " "))))?;
    install_loaded(ctx.srv, loaded);
    for h in ctx.srv.clients.all() {
        if h.acl_user.lock().is_none() {
            continue;
        }
        if h.id == ctx.cl.id {
            ctx.cl.authenticated = false;
            ctx.cl.close_after_reply = true;
        } else {
            h.kill();
        }
    }
    ctx.out.ok();
    Ok(())
}

/// ACL SAVE: every user to the aclfile, written whole then renamed over it.
fn save(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let Some((_, path)) = acl_file_of(&ctx.srv.config.read()) else {
        return Err(CmdError::msg(NO_ACL_FILE));
    };
    let all = all_users(ctx.srv);
    let text = crate::acl::file::render(all.iter().map(|(n, u)| (n.as_slice(), u)), catalog(ctx));
    if let Err(e) = crate::acl::file::save(&path, &text) {
        tracing::warn!(
            "Writing ACL file for ACL SAVE: {}",
            crate::acl::file::os_words(&e)
        );
        return Err(CmdError::msg("ERR There was an error trying to save the ACLs. Please check the server logs for more information"));
    }
    ctx.out.ok();
    Ok(())
}

/// ACL SETUSER default with rules that keep it an all-access user: `on`, `~*`, `&*`,
/// `+@all` and their long names, and the password rules `>pw`, `<pw`, `nopass`,
/// `resetpass`. Applied all or nothing.
fn setuser(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let name = args[2];
    if name
        .iter()
        .any(|&c| c == 0 || c == b' ' || (b'\t'..=b'\r').contains(&c))
    {
        return Err(CmdError::msg(
            "ERR Usernames can't contain spaces or null characters",
        ));
    }
    if name != b"default" {
        let env = acl_env(ctx);
        let mut users = acl_users(ctx.srv);
        let mut u = users
            .get(name)
            .cloned()
            .unwrap_or_else(|| crate::acl::User::new(env));
        let original = u.clone();
        u.apply_all(env, &args[3..])
            .map_err(|e| CmdError::msg(format!("ERR {e}")))?;
        let revoked = u.revoked_channels(&original);
        users.insert(name.to_vec(), u);
        drop(users);
        if let Some(allowed) = revoked {
            kill_revoked_subscribers(ctx, Some(name), &allowed);
        }
        ctx.out.ok();
        return Ok(());
    }
    // The default user: its whole rule set, its passwords kept apart (requirepass).
    let env = acl_env(ctx);
    let mut u = default_full(ctx);
    let original = u.clone();
    u.apply_all(env, &args[3..])
        .map_err(|e| CmdError::msg(format!("ERR {e}")))?;
    let revoked = u.revoked_channels(&original);
    install_default(ctx.srv, u);
    if let Some(allowed) = revoked {
        kill_revoked_subscribers(ctx, None, &allowed);
    }
    ctx.out.ok();
    Ok(())
}

/// Entries newest first; same reason, context, object and user within this many ms
/// count as one (Redis's grouping).
const GROUP_MS: u64 = 60_000;

use crate::server::auth::Entry;

/// Records a failed AUTH/HELLO AUTH (called by the connection commands), grouped with
/// the other entries as Redis's addACLLogEntry does.
pub fn log_auth_failure(ctx: &Ctx<'_>, command: &str, username: &[u8]) {
    ctx.cl.handle.db.store(ctx.cl.db, Ordering::Relaxed);
    // The entry shows the failing command as the client's current one.
    if let Some(c) = table().get(command.as_bytes()) {
        ctx.cl.handle.touch_cmd(c.full_name.as_str());
    }
    let context = if ctx.in_exec { "multi" } else { "toplevel" };
    add_log_entry(
        ctx.srv,
        &ctx.cl.handle,
        "auth",
        context,
        command.to_string(),
        String::from_utf8_lossy(username).into_owned(),
    );
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

/// Closes the user's subscribed connections holding a channel or pattern no longer in
/// `allowed` (Redis's ACLKillPubsubClientsIfNeeded).
fn kill_revoked_subscribers(ctx: &mut Ctx<'_>, user: Option<&[u8]>, allowed: &[Vec<u8>]) {
    use crate::acl::channel_in_list;
    for h in ctx.srv.clients.all() {
        if h.acl_user.lock().as_deref() != user {
            continue;
        }
        let subscribed = h.subs.load(Ordering::Relaxed)
            + h.psubs.load(Ordering::Relaxed)
            + h.ssubs.load(Ordering::Relaxed);
        if subscribed == 0 {
            continue;
        }
        let (chans, pats, shard) = ctx.srv.pubsub.subscriptions_of(h.id);
        let kill = pats.iter().any(|p| !channel_in_list(allowed, p, true))
            || chans
                .iter()
                .chain(shard.iter())
                .any(|c| !channel_in_list(allowed, c, false));
        if !kill {
            continue;
        }
        if h.id == ctx.cl.id {
            ctx.cl.close_after_reply = true;
        } else {
            h.kill();
        }
    }
}

/// Records an ACL LOG entry (Redis's addACLLogEntry: the same reason, context, object and
/// user within a minute count as one, among the 10 newest).
pub fn add_log_entry(
    srv: &crate::server::Server,
    handle: &crate::server::clients::ClientHandle,
    reason: &'static str,
    context: &'static str,
    object: String,
    username: String,
) {
    let now = crate::server::now_ms();
    let max = srv.config.read().typed.acllog_max_len as usize;
    let info = handle.info_line(srv);
    let mut log = srv.acl_log.0.lock();
    if let Some(pos) = log.iter().take(10).position(|e| {
        e.reason == reason
            && e.context == context
            && e.object == object
            && e.username == username
            && now.saturating_sub(e.at_ms) <= GROUP_MS
    }) {
        if let Some(mut e) = log.remove(pos) {
            e.count += 1;
            e.at_ms = now;
            e.client_info = info;
            log.push_front(e);
        }
        return;
    }
    log.push_front(Entry {
        count: 1,
        reason,
        context,
        object,
        username,
        at_ms: now,
        client_info: info,
    });
    log.truncate(max);
}

// The checks of calls live in `super::acl_check`.
pub use super::acl_check::{check_call, check_exec_call, check_script_call, may_run};
