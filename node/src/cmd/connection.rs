//! Connection commands: PING ECHO QUIT RESET HELLO AUTH SELECT.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx};

pub fn commands() -> Vec<CommandSpec> {
    let g = "connection";
    vec![
        CommandSpec::new("ping", -1, "fast", (0, 0, 0), ping).group(g),
        CommandSpec::new("echo", 2, "loading stale fast", (0, 0, 0), echo).group(g),
        CommandSpec::new(
            "quit",
            -1,
            "noscript loading stale fast no_auth allow_busy",
            (0, 0, 0),
            quit,
        )
        .group(g),
        CommandSpec::new(
            "reset",
            1,
            "noscript loading stale fast no_auth allow_busy",
            (0, 0, 0),
            reset,
        )
        .group(g)
        .since("6.2.0"),
        CommandSpec::new(
            "hello",
            -1,
            "noscript loading stale fast no_auth allow_busy",
            (0, 0, 0),
            hello,
        )
        .group(g)
        .since("6.0.0"),
        CommandSpec::new(
            "auth",
            -2,
            "noscript loading stale fast no_auth allow_busy",
            (0, 0, 0),
            auth,
        )
        .group(g),
        CommandSpec::new("select", 2, "loading stale fast", (0, 0, 0), select).group(g),
    ]
}

fn ping(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 2 {
        return Err(super::arity_error(
            super::table().get(b"ping").ok_or(CmdError::Syntax)?,
        ));
    }
    if ctx.cl.in_pubsub_context() && !ctx.out.resp3 {
        ctx.out.array(2);
        ctx.out.bulk(b"pong");
        ctx.out.bulk(args.get(1).map(|b| &b[..]).unwrap_or(b""));
        return Ok(());
    }
    match args.get(1) {
        Some(m) => ctx.out.bulk(m),
        None => ctx.out.simple("PONG"),
    }
    Ok(())
}

fn echo(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.out.bulk(args[1]);
    Ok(())
}

fn quit(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.out.ok();
    ctx.cl.close_after_reply = true;
    Ok(())
}

fn reset(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let srv = ctx.srv;
    ctx.cl.multi = None;
    ctx.cl.multi_error = false;
    ctx.cl.handle.in_multi.store(false, Ordering::Relaxed);
    srv.watch.unwatch(ctx.cl);
    srv.pubsub.unsubscribe_all(ctx.cl);
    srv.monitors.remove(ctx.cl.id);
    ctx.cl.handle.monitor.store(false, Ordering::Relaxed);
    ctx.cl.db = 0;
    ctx.cl.handle.db.store(0, Ordering::Relaxed);
    crate::tracking::disable(ctx.srv, ctx.cl);
    ctx.cl.reply_mode = crate::server::clients::ReplyMode::On;
    ctx.cl.handle.no_evict.store(false, Ordering::Relaxed);
    *ctx.cl.handle.name.lock() = None;
    ctx.cl.authenticated = !srv.requires_auth();
    ctx.cl.handle.set_acl_user(None);
    ctx.out.resp3 = false;
    ctx.cl.handle.resp3.store(false, Ordering::Relaxed);
    ctx.out.simple("RESET");
    Ok(())
}

/// Checks a password against requirepass (user must be "default"); a failure is entered in
/// ACL LOG under `command` (the name as the client sent it, as Redis logs it).
fn check_password(
    ctx: &Ctx<'_>,
    command: &str,
    user: Option<&[u8]>,
    pass: &[u8],
) -> Result<(), CmdError> {
    let r = password_matches(ctx, user, pass);
    if r.is_err() {
        super::acl::log_auth_failure(ctx, command, user.unwrap_or(b"default"));
    }
    r
}

fn password_matches(ctx: &Ctx<'_>, user: Option<&[u8]>, pass: &[u8]) -> Result<(), CmdError> {
    let c = ctx.srv.config.read();
    let rp = c.typed.requirepass.as_str();
    if let Some(u) = user.filter(|u| *u != b"default") {
        // Another ACL user: it must exist, be on, and take the password.
        let ok = super::acl::acl_users(ctx.srv)
            .get(u)
            .is_some_and(|acl| acl.enabled && acl.password_ok(pass));
        return if ok {
            Ok(())
        } else {
            Err(CmdError::msg(
                "WRONGPASS invalid username-password pair or user is disabled.",
            ))
        };
    }
    if ctx.srv.default_user.password_ok(rp, pass) {
        Ok(())
    } else {
        Err(CmdError::msg(
            "WRONGPASS invalid username-password pair or user is disabled.",
        ))
    }
}

/// The connection is now `user`'s (None or `default`: the default user).
fn login_as(ctx: &mut Ctx<'_>, user: Option<&[u8]>) {
    let u = user
        .filter(|u| *u != b"default")
        .map(Bytes::copy_from_slice);
    ctx.cl.handle.set_acl_user(u);
}

fn auth(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    // As Redis: the default user's nopass flag, whether or not it is off.
    let nopass = ctx
        .srv
        .default_user
        .current(&ctx.srv.config.read().typed.requirepass)
        .nopass;
    if args.len() == 2 && nopass {
        return Err(CmdError::msg("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"));
    }
    let (user, pass) = if args.len() == 3 {
        (Some(args[1]), args[2])
    } else {
        (None, args[1])
    };
    check_password(ctx, &String::from_utf8_lossy(args[0]), user, pass)?;
    ctx.cl.authenticated = true;
    login_as(ctx, user);
    ctx.out.ok();
    Ok(())
}

fn hello(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut proto = None;
    let mut i = 1;
    if args.len() >= 2 {
        let v = arg_i64(args[1])
            .map_err(|_| CmdError::msg("ERR Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::msg("NOPROTO unsupported protocol version"));
        }
        proto = Some(v);
        i = 2;
    }
    let mut auth: Option<(Bytes, Bytes)> = None;
    let mut name: Option<Bytes> = None;
    while i < args.len() {
        if eq_ic(args[i], "auth") && i + 2 < args.len() {
            auth = Some((
                Bytes::copy_from_slice(args[i + 1]),
                Bytes::copy_from_slice(args[i + 2]),
            ));
            i += 3;
        } else if eq_ic(args[i], "setname") && i + 1 < args.len() {
            name = Some(Bytes::copy_from_slice(args[i + 1]));
            i += 2;
        } else {
            return Err(CmdError::msg(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(args[i])
            )));
        }
    }
    if let Some((u, p)) = &auth {
        check_password(ctx, &String::from_utf8_lossy(args[0]), Some(u), p)?;
        ctx.cl.authenticated = true;
        login_as(ctx, Some(u));
    }
    if !ctx.cl.authenticated {
        return Err(CmdError::msg("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if let Some(n) = name {
        super::client::validate_name(&n)?;
        *ctx.cl.handle.name.lock() = if n.is_empty() { None } else { Some(n) };
    }
    if let Some(p) = proto {
        ctx.out.resp3 = p == 3;
        ctx.cl.handle.resp3.store(p == 3, Ordering::Relaxed);
    }
    let o = &mut *ctx.out;
    o.map(7);
    o.bulk(b"server");
    o.bulk(b"redis");
    o.bulk(b"version");
    o.bulk(crate::REDIS_VERSION.as_bytes());
    o.bulk(b"proto");
    o.int(if o.resp3 { 3 } else { 2 });
    o.bulk(b"id");
    o.int(ctx.cl.id as i64);
    o.bulk(b"mode");
    o.bulk(b"standalone");
    o.bulk(b"role");
    o.bulk(b"master");
    o.bulk(b"modules");
    o.array(0);
    Ok(())
}

fn select(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let n = arg_i64(args[1])?;
    if n != 0 && super::cluster_mode(ctx.srv) {
        return Err(CmdError::msg("ERR SELECT is not allowed in cluster mode"));
    }
    if n < 0 || n as usize >= ctx.srv.ks.databases() {
        return Err(CmdError::msg("ERR DB index is out of range"));
    }
    ctx.cl.db = n as usize;
    ctx.ks.db = n as usize;
    ctx.cl.handle.db.store(n as usize, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}
