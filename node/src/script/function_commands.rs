//! FCALL / FCALL_RO and FUNCTION LOAD / DELETE / FLUSH / LIST / STATS / DUMP / RESTORE /
//! KILL / HELP (the registry and the Lua side are `crate::script::function`).

use bytes::Bytes;

use crate::cmd::{eq_ic, CmdError, CmdResult, CommandSpec, Ctx};
use crate::script::function::{self as func, Policy, FLAG_NAMES};

pub fn commands() -> Vec<CommandSpec> {
    // Registry changes hold every stripe (lock_all) so they fall on one side of a snapshot
    // point taken with all stripes locked (a full sync, a save), like a keyspace write.
    let fc = |name, ro, h| super::commands::lua_call_spec(name, ro, "7.0.0", h);
    let s = |name, arity, f, h| CommandSpec::new(name, arity, f, (0, 0, 0), h);
    vec![
        fc("fcall", false, fcall),
        fc("fcall_ro", true, fcall_ro),
        CommandSpec::new("function", -2, "", (0, 0, 0), help)
            .group("scripting")
            .since("7.0.0")
            .subs(vec![
                s("load", -3, "write denyoom noscript lock_all", load),
                s("delete", 3, "write noscript lock_all", delete),
                s("flush", -2, "write noscript lock_all", flush),
                s("list", -2, "noscript", list),
                s("stats", 2, "noscript allow_busy", stats),
                s("dump", 2, "noscript", dump),
                s("restore", -3, "write denyoom noscript lock_all", restore),
                s("kill", 2, "noscript allow_busy", kill),
                s("help", 2, "loading stale", help),
            ]),
    ]
}

fn fcall_impl(ctx: &mut Ctx<'_>, args: &[&[u8]], ro: bool) -> CmdResult {
    if ctx.srv.scripts.functions.lookup(args[1]).is_none() {
        return Err(CmdError::msg("ERR Function not found"));
    }
    let n = crate::types::parse_i64_strict(args[2])
        .ok_or_else(|| CmdError::msg("ERR Bad number of keys provided"))?;
    let rest = &args[3..];
    if n > rest.len() as i64 {
        return Err(CmdError::msg(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    if n < 0 {
        return Err(CmdError::msg("ERR Number of keys can't be negative"));
    }
    let (keys, argv) = rest.split_at(n as usize);
    func::call(ctx, args, args[1], keys, argv, ro)
}

fn fcall(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    fcall_impl(ctx, args, false)
}

fn fcall_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    fcall_impl(ctx, args, true)
}

/// FUNCTION LOAD [REPLACE] code.
fn load(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut replace = false;
    let mut i = 2;
    while i < args.len() - 1 {
        if eq_ic(args[i], "replace") {
            replace = true;
            i += 1;
        } else {
            return Err(CmdError::msg(format!(
                "ERR Unknown option given: {}",
                String::from_utf8_lossy(args[i])
            )));
        }
    }
    if i != args.len() - 1 {
        return Err(CmdError::msg("ERR Function code is missing"));
    }
    let name = ctx
        .srv
        .scripts
        .functions
        .load(Bytes::copy_from_slice(args[i]), replace)?;
    ctx.out.bulk(name.as_bytes());
    Ok(())
}

fn delete(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.srv.scripts.functions.delete(args[2])?;
    ctx.out.ok();
    Ok(())
}

/// Redis's addReplySubcommandSyntaxError (too many arguments for FLUSH / RESTORE).
fn syntax_error(args: &[&[u8]]) -> CmdError {
    CmdError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
        String::from_utf8_lossy(&args[1][..args[1].len().min(128)])
    ))
}

fn flush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(syntax_error(args));
    }
    match args.get(2) {
        None => {}
        Some(a) if args.len() == 3 && (eq_ic(a, "sync") || eq_ic(a, "async")) => {}
        Some(_) => {
            return Err(CmdError::msg(
                "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
            ))
        }
    }
    ctx.srv.scripts.functions.flush();
    ctx.out.ok();
    Ok(())
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]: maps (RESP3) or flat arrays (RESP2).
fn list(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (mut with_code, mut pattern): (bool, Option<&[u8]>) = (false, None);
    let mut i = 2;
    while i < args.len() {
        if !with_code && eq_ic(args[i], "withcode") {
            with_code = true;
        } else if pattern.is_none() && eq_ic(args[i], "libraryname") {
            if i + 1 >= args.len() {
                return Err(CmdError::msg("ERR library name argument was not given"));
            }
            i += 1;
            pattern = Some(args[i]);
        } else {
            return Err(CmdError::msg(format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(args[i])
            )));
        }
        i += 1;
    }
    let libs: Vec<_> = ctx
        .srv
        .scripts
        .functions
        .libraries()
        .into_iter()
        .filter(|l| pattern.is_none_or(|p| crate::pubsub::glob_match(p, l.name.as_bytes(), true)))
        .collect();
    let out = &mut *ctx.out;
    out.array(libs.len());
    for lib in libs {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(lib.name.as_bytes());
        out.bulk(b"engine");
        out.bulk(b"LUA");
        out.bulk(b"functions");
        out.array(lib.funcs.len());
        for f in &lib.funcs {
            out.map(3);
            out.bulk(b"name");
            out.bulk(f.name.as_bytes());
            out.bulk(b"description");
            match &f.desc {
                Some(d) => out.bulk(d),
                None => out.null(),
            }
            out.bulk(b"flags");
            let names: Vec<&str> = FLAG_NAMES
                .iter()
                .enumerate()
                .filter(|(b, _)| f.flags & (1 << b) != 0)
                .map(|(_, n)| *n)
                .collect();
            out.set(names.len());
            for n in names {
                out.simple(n);
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&lib.code);
        }
    }
    Ok(())
}

/// FUNCTION STATS: the running function (one past busy-reply-threshold lets this through).
fn stats(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let (libs, funcs) = ctx.srv.scripts.functions.counts();
    let out = &mut *ctx.out;
    out.map(2);
    out.bulk(b"running_script");
    match ctx.srv.scripts.functions.running() {
        Some((name, command, ms)) => {
            out.map(3);
            out.bulk(b"name");
            out.bulk(name.as_bytes());
            out.bulk(b"command");
            out.array(command.len());
            for a in &command {
                out.bulk(a);
            }
            out.bulk(b"duration_ms");
            out.int(ms as i64);
        }
        None => out.null(),
    }
    out.bulk(b"engines");
    out.map(1);
    out.bulk(b"LUA");
    out.map(2);
    out.bulk(b"libraries_count");
    out.int(libs as i64);
    out.bulk(b"functions_count");
    out.int(funcs as i64);
    Ok(())
}

fn dump(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let payload = func::dump(&ctx.srv.scripts.functions)?;
    ctx.out.bulk(&payload);
    Ok(())
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE] (APPEND by default).
fn restore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 4 {
        return Err(syntax_error(args));
    }
    let policy =
        match args.get(3) {
            None => Policy::Append,
            Some(p) if args.len() == 4 && eq_ic(p, "flush") => Policy::Flush,
            Some(p) if args.len() == 4 && eq_ic(p, "append") => Policy::Append,
            Some(p) if args.len() == 4 && eq_ic(p, "replace") => Policy::Replace,
            Some(_) => return Err(CmdError::msg(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            )),
        };
    let codes = func::parse_dump(args[2])?;
    ctx.srv.scripts.functions.install(codes, policy)?;
    ctx.out.ok();
    Ok(())
}

/// Stops a function past busy-reply-threshold that has not written (`script::busy`).
fn kill(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.srv
        .scripts
        .busy
        .kill(crate::script::busy::Kind::Function)?;
    ctx.out.ok();
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let lines = [
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the libraries.",
        "    * SYNC: Synchronously flush the libraries.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
        "      libraries with the new libraries (notice that even on this option there is a chance of failure",
        "      in case of functions name collision with another library).",
        "HELP",
        "    Prints this help.",
    ];
    crate::cmd::help_lines(ctx, &lines)
}
