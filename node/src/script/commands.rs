//! EVAL / EVALSHA / EVAL_RO / EVALSHA_RO and SCRIPT LOAD / EXISTS / FLUSH / HELP
//! (the engine is `crate::script`).

use bytes::Bytes;

use crate::cmd::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx, KeyPos};
use crate::script;

/// The spec of a command running Lua with `numkeys key... arg...` (EVAL*, FCALL*). Every
/// stripe is locked for the run: a script may touch keys it did not declare, and must run
/// atomically.
pub(super) fn lua_call_spec(
    name: &'static str,
    ro: bool,
    since: &'static str,
    h: crate::cmd::spec::Handler,
) -> CommandSpec {
    let f = if ro {
        "readonly noscript stale lock_all"
    } else {
        "noscript stale lock_all"
    };
    CommandSpec::new(name, -3, f, (0, 0, 0), h)
        .group("scripting")
        .since(since)
        .keys(KeyPos::Keynum {
            numkeys: 2,
            first: 1,
            step: 1,
        })
        .key_flags(if ro {
            &[&["RO", "access"]]
        } else {
            &[&["RW", "access", "update"]]
        })
}

pub fn commands() -> Vec<CommandSpec> {
    let e = |name, ro, h| lua_call_spec(name, ro, "2.6.0", h);
    let s = |name, arity, f, h| CommandSpec::new(name, arity, f, (0, 0, 0), h);
    vec![
        e("eval", false, eval),
        e("evalsha", false, evalsha),
        e("eval_ro", true, eval_ro).since("7.0.0"),
        e("evalsha_ro", true, evalsha_ro).since("7.0.0"),
        CommandSpec::new("script", -2, "", (0, 0, 0), help)
            .group("scripting")
            .since("2.6.0")
            .subs(vec![
                s("load", 3, "noscript stale", load),
                s("exists", -3, "noscript", exists),
                s("flush", -2, "noscript", flush),
                s("kill", 2, "noscript allow_busy", kill),
                s("debug", 3, "noscript", debug),
                s("help", 2, "loading stale", help),
            ]),
    ]
}

/// A run of borrowed arguments.
type ArgSlice<'a, 'b> = &'a [&'b [u8]];

/// Splits `numkeys key... arg...` (args[2..]) into keys and argv, with Redis's errors.
fn split<'a, 'b>(args: ArgSlice<'a, 'b>) -> Result<(ArgSlice<'a, 'b>, ArgSlice<'a, 'b>), CmdError> {
    let n = arg_i64(args[2])?;
    if n < 0 {
        return Err(CmdError::msg("ERR Number of keys can't be negative"));
    }
    let rest = &args[3..];
    if n as u64 > rest.len() as u64 {
        return Err(CmdError::msg(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    Ok(rest.split_at(n as usize))
}

fn eval_impl(ctx: &mut Ctx<'_>, args: &[&[u8]], ro: bool) -> CmdResult {
    if ctx.cl.lua_debug {
        // SCRIPT DEBUG SYNC: this EVAL runs under the Lua debugger (numkeys is checked
        // inside the session, as Redis does).
        return script::run_debugged(ctx, args[1], |ctx| eval_plain(ctx, args, ro));
    }
    eval_plain(ctx, args, ro)
}

fn eval_plain(ctx: &mut Ctx<'_>, args: &[&[u8]], ro: bool) -> CmdResult {
    let (keys, argv) = split(args)?;
    let sha = script::eval_sha(args[1]);
    script::run(ctx, Some(args[1]), sha.as_str(), keys, argv, ro)
}

fn evalsha_impl(ctx: &mut Ctx<'_>, args: &[&[u8]], ro: bool) -> CmdResult {
    // As redis: a sha of the wrong length is NOSCRIPT at once; otherwise numkeys is
    // checked before the script is looked up.
    let sha = args[1];
    if sha.len() != 40 {
        return Err(CmdError::msg(
            "NOSCRIPT No matching script. Please use EVAL.",
        ));
    }
    if ctx.cl.lua_debug {
        return Err(CmdError::msg(
            "ERR Please use EVAL instead of EVALSHA for debugging",
        ));
    }
    let (keys, argv) = split(args)?;
    let mut lower = [0u8; 40];
    lower.copy_from_slice(sha);
    lower.make_ascii_lowercase();
    // Not hex: no cached script has that name.
    let sha = std::str::from_utf8(&lower)
        .map_err(|_| CmdError::msg("NOSCRIPT No matching script. Please use EVAL."))?;
    // No body: the thread's compiled copy, else the shared cache (else NOSCRIPT).
    script::run(ctx, None, sha, keys, argv, ro)
}

fn eval(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    eval_impl(ctx, args, false)
}

fn eval_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    eval_impl(ctx, args, true)
}

fn evalsha(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    evalsha_impl(ctx, args, false)
}

fn evalsha_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    evalsha_impl(ctx, args, true)
}

fn load(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let body = Bytes::copy_from_slice(args[2]);
    script::compile_check(&body)?;
    let sha = script::sha1_hex(&body);
    ctx.out.bulk(sha.as_bytes());
    ctx.srv.scripts.cache_put(sha, body);
    Ok(())
}

fn exists(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.out.array(args.len() - 2);
    for a in &args[2..] {
        let found = ctx
            .srv
            .scripts
            .cache_get(&String::from_utf8_lossy(a))
            .is_some();
        ctx.out.int(found as i64);
    }
    Ok(())
}

fn flush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    match args.get(2) {
        None => {}
        Some(a) if args.len() == 3 && (eq_ic(a, "sync") || eq_ic(a, "async")) => {}
        Some(_) => {
            return Err(CmdError::msg(
                "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
            ))
        }
    }
    ctx.srv.scripts.cache_flush();
    ctx.out.ok();
    Ok(())
}

/// Stops a script past busy-reply-threshold that has not written (see `script::busy`).
fn kill(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.srv.scripts.busy.kill(script::busy::Kind::Eval)?;
    ctx.out.ok();
    Ok(())
}

/// SCRIPT DEBUG: NO turns the debugger off; SYNC makes the client's next EVAL run under
/// the Lua debugger (`script::run_debugged`, Redis's synchronous mode: the server is
/// blocked while the session lasts and the script's changes are kept). YES, Redis's forked
/// session (changes thrown away with the child), is refused plainly: a multi-threaded
/// process cannot fork itself to run one script.
fn debug(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if ctx.in_exec {
        return Err(CmdError::msg(
            "ERR SCRIPT DEBUG must be called outside MULTI",
        ));
    }
    // Redis: replies of earlier pipelined commands not yet sent (clientHasPendingReplies).
    if !ctx.out.is_empty() {
        return Err(CmdError::msg(
            "ERR SCRIPT DEBUG must be called outside a pipeline",
        ));
    }
    let mode = args[2];
    if eq_ic(mode, "no") {
        ctx.cl.lua_debug = false;
    } else if eq_ic(mode, "sync") {
        ctx.cl.lua_debug = true;
    } else if eq_ic(mode, "yes") {
        return Err(CmdError::msg(
            "ERR SCRIPT DEBUG YES (a forked debugging session) is not supported by tessera-node: use SCRIPT DEBUG SYNC (changes made by the script are kept)",
        ));
    } else {
        return Err(CmdError::msg("ERR Use SCRIPT DEBUG YES/SYNC/NO"));
    }
    ctx.out.ok();
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let lines = [
        "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DEBUG (YES|SYNC|NO)",
        "    Set the debug mode for subsequent scripts executed.",
        "EXISTS <sha1> [<sha1> ...]",
        "    Return information about the existence of the scripts in the script cache.",
        "FLUSH [ASYNC|SYNC]",
        "    Flush the Lua scripts cache. Very dangerous on replicas.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the scripts cache.",
        "    * SYNC: Synchronously flush the scripts cache.",
        "KILL",
        "    Kill the currently executing Lua script.",
        "LOAD <script>",
        "    Load a script into the scripts cache without executing it.",
        "HELP",
        "    Prints this help.",
    ];
    crate::cmd::help_lines(ctx, &lines)
}
