//! CONFIG GET / SET / RESETSTAT / REWRITE.

use super::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::pubsub::glob_match;

pub fn commands() -> Vec<CommandSpec> {
    let s = |name, arity, h| {
        CommandSpec::new(name, arity, "admin noscript loading stale", (0, 0, 0), h)
    };
    vec![CommandSpec::new("config", -2, "", (0, 0, 0), help)
        .group("server")
        .since("2.0.0")
        .subs(vec![
            s("get", -3, get),
            s("set", -4, set),
            s("resetstat", 2, resetstat),
            s("rewrite", 2, rewrite),
            s("help", 2, help),
        ])]
}

fn help(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let lines = [
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "REWRITE",
        "    Rewrite the configuration file.",
        "HELP",
        "    Prints this help.",
    ];
    super::help_lines(ctx, &lines)
}

fn get(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = ctx.srv.config.read();
    let mut pairs: Vec<(&'static str, String)> = Vec::new();
    for name in c.names() {
        if pairs.iter().any(|(n, _)| *n == name) {
            continue;
        }
        // A hidden (test-only) setting answers its exact name only, as in Redis.
        let hidden = crate::config::find(name).is_some_and(|d| d.hidden);
        if args[2..].iter().any(|p| {
            !(hidden && p.iter().any(|c| matches!(c, b'*' | b'?' | b'[')))
                && glob_match(&p.to_ascii_lowercase(), name.as_bytes(), true)
        }) {
            if let Some(v) = c.get(name) {
                pairs.push((name, v));
            }
        }
    }
    drop(c);
    ctx.out.map(pairs.len());
    for (n, v) in pairs {
        ctx.out.bulk(n.as_bytes());
        ctx.out.bulk(v.as_bytes());
    }
    Ok(())
}

fn set(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::msg(format!(
            "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
            String::from_utf8_lossy(args[2])
        )));
    }
    // As Redis 7.0, every name is checked (unknown, immutable, protected, given twice)
    // before any value; these errors name the argument as the client spelled it.
    let mut named: Vec<(String, &'static crate::config::Directive)> = Vec::new();
    for p in args[2..].chunks(2) {
        let spelled = String::from_utf8_lossy(p[0]);
        let name = spelled.to_ascii_lowercase();
        let Some(d) = crate::config::find(&name) else {
            return Err(CmdError::msg(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{spelled}'"
            )));
        };
        let refuse = |why: &str| {
            CmdError::msg(format!(
                "ERR CONFIG SET failed (possibly related to argument '{spelled}') - {why}"
            ))
        };
        if d.immutable {
            return Err(refuse("can't set immutable config"));
        }
        // Redis 7.0's protected configs: where the server writes its files.
        if matches!(d.name, "dir" | "dbfilename")
            && !protected_action_allowed(
                ctx.srv.config.read().typed.enable_protected_configs,
                ctx.cl,
            )
        {
            return Err(refuse("can't set protected config"));
        }
        // Redis 7.0's DENY_LOADING_CONFIG: where the data lives and whether the AOF logs
        // it can't change under a load, nor under a replica's async (swapdb) load.
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        if matches!(d.name, "dir" | "appendonly")
            && (ctx.srv.persist.loading.load(relaxed) || ctx.srv.repl.async_loading.load(relaxed))
        {
            return Err(CmdError::msg(super::LOADING));
        }
        // The same name twice (an alias and its name are two, as in Redis 7.0).
        if named.iter().any(|(n, _)| *n == name) {
            return Err(refuse("duplicate parameter"));
        }
        named.push((name, d));
    }
    let before = ctx.srv.config.snapshot();
    let old_listen = (before.typed.bind.clone(), before.typed.port);
    let old_tls = (ctx.srv.tls.load_full(), before.typed.tls_port);
    // Validate everything on a copy, then publish it whole (Redis 7 multi-set semantics).
    ctx.srv.config.update(|copy| {
        for ((name, d), p) in named.iter().zip(args[2..].chunks(2)) {
            let val = String::from_utf8_lossy(p[1]).into_owned();
            copy.set_directive(name, &directive_args(d, val))
                .map_err(|reason| {
                    CmdError::msg(format!(
                        "ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}"
                    ))
                })?;
        }
        Ok(())
    })?;
    // Applying failed: every setting of the call goes back to its old value, as Redis's
    // restoreBackupConfig (a successful apply of another one included).
    let applied = listen_changed(ctx, args, old_listen.clone())
        .and_then(|_| tls_changed(ctx, args, (&old_listen.0, old_tls.1)))
        .and_then(|_| oom_changed(ctx, args));
    if let Err(e) = applied {
        ctx.srv.config.update(|c| {
            for (name, d) in &named {
                let old = before.get(name).unwrap_or_default();
                c.set_directive(name, &directive_args(d, old))
                    .map_err(CmdError::msg)?;
            }
            Ok::<(), CmdError>(())
        })?;
        let now = {
            let c = &ctx.srv.config.read().typed;
            (c.bind.clone(), c.port, c.tls_port)
        };
        if (&now.0, now.1) != (&old_listen.0, old_listen.1) {
            let _ =
                ctx.srv
                    .listeners
                    .rebind(ctx.srv, (&old_listen.0, old_listen.1), (&now.0, now.1));
        }
        ctx.srv.tls.store(old_tls.0.clone());
        if (&now.0, now.2) != (&old_listen.0, old_tls.1) {
            let _ =
                ctx.srv
                    .listeners
                    .rebind_tls(ctx.srv, (&old_listen.0, old_tls.1), (&now.0, now.2));
        }
        let _ = ctx.srv.oom.apply_for(ctx.srv);
        return Err(e);
    }
    if named.iter().any(|(n, _)| n == "requirepass") {
        ctx.srv.default_user.requirepass_set();
    }
    if ctx.in_exec {
        // Turning the AOF on inside EXEC schedules its rewrite (persist::aof).
        let on = ctx.srv.config.read().typed.appendonly;
        ctx.srv.persist.aof.configure_in_exec(on);
    }
    ctx.srv.config_changed();
    if let Some(applied) = super::table().hooks.config_set {
        applied(ctx.srv);
    }
    if named.iter().any(|(n, _)| n == "maxmemory") {
        crate::server::evict::evict_soon(ctx.srv);
    }
    ctx.out.ok();
    Ok(())
}

/// A CONFIG SET value as [`crate::config::Config::set_directive`] takes it: the words of a
/// multi-word directive, else the one value.
fn directive_args(d: &crate::config::Directive, val: String) -> Vec<String> {
    match d.kind {
        crate::config::Kind::Special => val.split_whitespace().map(String::from).collect(),
        _ => vec![val],
    }
}

/// Rebinds the listeners after CONFIG SET port / bind, as Redis's updatePort / applyBind
/// (port only when it changed, bind always); on failure the old listeners keep serving and
/// the reply is Redis's error (the caller puts the old values back).
fn listen_changed(ctx: &mut Ctx<'_>, args: &[&[u8]], old: (String, u16)) -> CmdResult {
    let named = |n: &[u8]| args[2..].chunks(2).any(|p| p[0].eq_ignore_ascii_case(n));
    let new = {
        let c = &ctx.srv.config.read().typed;
        (c.bind.clone(), c.port)
    };
    let (arg, reason) = if named(b"bind") {
        ("bind", "Failed to bind to specified addresses.")
    } else if named(b"port") && new.1 != old.1 {
        ("port", "Unable to listen on this port. Check server logs.")
    } else {
        return Ok(());
    };
    let res = ctx
        .srv
        .listeners
        .rebind(ctx.srv, (&new.0, new.1), (&old.0, old.1));
    if res.is_err() {
        tracing::warn!(
            "Failed applying new configuration. Possibly related to new {arg} setting. Restoring previous settings."
        );
        return Err(CmdError::msg(format!(
            "ERR CONFIG SET failed (possibly related to argument '{arg}') - {reason}"
        )));
    }
    Ok(())
}

/// After CONFIG SET of a tls-* setting, bind or tls-port, as Redis's applyTlsCfg /
/// applyTLSPort / changeBindAddr: the TLS settings are rebuilt (certificates and keys
/// read again: new connections use them, connections made keep theirs) and the tls-port
/// listeners follow `bind` and `tls-port`. On failure the reply is Redis's error (the
/// caller puts the old values, settings and listeners back).
fn tls_changed(ctx: &mut Ctx<'_>, args: &[&[u8]], (old_bind, old_port): (&str, u16)) -> CmdResult {
    let names: Vec<String> = args[2..]
        .chunks(2)
        .map(|p| String::from_utf8_lossy(p[0]).to_ascii_lowercase())
        .collect();
    let named = |n: &str| names.iter().any(|x| x == n);
    let files = names
        .iter()
        .any(|n| n.starts_with("tls-") && n != "tls-port");
    let c = ctx.srv.config.snapshot();
    let port = c.typed.tls_port;
    let port_changed = named("tls-port") && port != old_port;
    let refuse = |arg: &str, why: &str| {
        CmdError::msg(format!(
            "ERR CONFIG SET failed (possibly related to argument '{arg}') - {why}"
        ))
    };
    let rebuild = (files && crate::server::tls::wanted(&c))
        || (port_changed && port != 0 && ctx.srv.tls.load().is_none());
    if rebuild {
        match crate::server::tls::server_config(&c) {
            Ok(cfg) => ctx.srv.tls.store(Some(cfg)),
            Err(e) => {
                tracing::warn!("{e}");
                let arg = names
                    .iter()
                    .find(|n| n.starts_with("tls-"))
                    .map_or("tls-port", String::as_str);
                return Err(refuse(
                    arg,
                    "Unable to update TLS configuration. Check server logs.",
                ));
            }
        }
    }
    if port_changed || (named("bind") && port != 0) {
        let res =
            ctx.srv
                .listeners
                .rebind_tls(ctx.srv, (&c.typed.bind, port), (old_bind, old_port));
        if res.is_err() {
            let (arg, why) = if named("bind") {
                ("bind", "Failed to bind to specified addresses.")
            } else {
                (
                    "tls-port",
                    "Unable to listen on this port. Check server logs.",
                )
            };
            return Err(refuse(arg, why));
        }
    }
    Ok(())
}

/// Applies oom-score-adj / oom-score-adj-values to the process after CONFIG SET, as
/// Redis's updateOOMScoreAdj; on failure the reply is Redis's error (the caller puts the
/// old values back and applies them again).
fn oom_changed(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let named = |n: &[u8]| args[2..].chunks(2).any(|p| p[0].eq_ignore_ascii_case(n));
    let arg = if named(b"oom-score-adj") {
        "oom-score-adj"
    } else if named(b"oom-score-adj-values") {
        "oom-score-adj-values"
    } else {
        return Ok(());
    };
    if ctx.srv.oom.apply_for(ctx.srv).is_ok() {
        return Ok(());
    }
    Err(CmdError::msg(format!(
        "ERR CONFIG SET failed (possibly related to argument '{arg}') - Failed to set current oom_score_adj. Check server logs."
    )))
}

/// Redis's allowProtectedAction: `setting` (enable-protected-configs,
/// enable-debug-command, enable-module-command) is "yes", or "local" and the client
/// connected over loopback or a unix socket.
pub fn protected_action_allowed(
    setting: crate::config::Protected,
    cl: &crate::server::clients::ClientState,
) -> bool {
    use crate::config::Protected;
    match setting {
        Protected::Yes => true,
        Protected::Local => match cl.handle.addr.parse::<std::net::SocketAddr>() {
            Ok(a) => a.ip().is_loopback(),
            // Not an IP address: a unix socket peer.
            Err(_) => true,
        },
        Protected::No => false,
    }
}

fn resetstat(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.srv.stats.reset();
    ctx.srv.repl.reset_stats();
    for c in &super::table().cmds {
        c.stats.reset();
        for s in &c.subcommands {
            s.stats.reset();
        }
    }
    ctx.srv.slowlog.entries.lock().clear();
    // Redis's resetServerStats also zeroes these client counters (kept by the registry).
    let clients = &ctx.srv.clients;
    for a in [
        &clients.mem.evicted,
        &clients.reply_buffer_shrinks,
        &clients.reply_buffer_expands,
    ] {
        a.store(0, std::sync::atomic::Ordering::Relaxed);
    }
    // As Redis: the peak restarts from the current usage.
    ctx.srv.memory_peak.store(
        crate::alloc::used_memory(),
        std::sync::atomic::Ordering::Relaxed,
    );
    ctx.out.ok();
    Ok(())
}

fn rewrite(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let mut c = crate::config::Config::clone(&ctx.srv.config.read());
    c.acl_users = super::acl::config_user_lines(ctx.srv);
    c.rewrite()
        .map_err(|e| CmdError::msg(format!("ERR Rewriting config file: {e}")))?;
    ctx.out.ok();
    Ok(())
}
