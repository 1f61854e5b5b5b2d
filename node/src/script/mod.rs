//! Lua scripting (EVAL family): a per-worker-thread sandboxed Lua 5.1 state, the script
//! cache, and running one script with the caller's locks held.
//!
//! The script's `redis.call`s run through [`crate::cmd::run_locked`] with `in_exec` set, so
//! their writes are collected by the propagation layer and fed to AOF/replicas as one
//! MULTI/EXEC block at the end (Redis 7.0 effects replication), WATCHes are touched and
//! keyspace notifications fire exactly as for the same commands sent by a client.

mod bit;
mod cjson;
mod cluster;
pub mod convert;
mod sandbox;
mod shebang;

use std::cell::RefCell;
use std::sync::OnceLock;

use bytes::Bytes;
use mlua::{Function, Lua, MultiValue, Table, Value};
use parking_lot::Mutex;

use crate::cmd::{flags, table, CmdError, Ctx};
use convert::Parsed;

/// SHA1 hex (lower case) of a script body.
pub fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// The script cache: sha -> body (shared by all threads; SCRIPT FLUSH empties it).
fn cache() -> &'static Mutex<hashbrown::HashMap<String, Bytes>> {
    static C: OnceLock<Mutex<hashbrown::HashMap<String, Bytes>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

pub fn cache_get(sha: &str) -> Option<Bytes> {
    cache().lock().get(&sha.to_ascii_lowercase()).cloned()
}

pub fn cache_put(sha: String, body: Bytes) {
    cache().lock().insert(sha, body);
}

pub fn cache_flush() {
    cache().lock().clear();
    FLUSHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// A worker thread's Lua state, its `redis` table and the xpcall error handler.
struct Engine {
    lua: Lua,
    /// The real globals (the script's environment is a read-only proxy of them).
    globals: Table,
    redis: Table,
    handler: Function,
    /// Compiled scripts by sha (cleared when SCRIPT FLUSH bumps [`FLUSHES`]).
    compiled: RefCell<(u64, Compiled)>,
}

/// A thread's compiled scripts by sha, with their shebang flags.
type Compiled = hashbrown::HashMap<String, (Function, shebang::ScriptFlags)>;

/// Bumped by SCRIPT FLUSH: every thread drops its compiled scripts on its next run.
static FLUSHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Compiled scripts a thread keeps at most (beyond that it starts over).
const MAX_COMPILED: usize = 1000;

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
    /// The last error `redis.call` raised: a script failing with exactly it is reported
    /// without the "ERR " prefix a plain Lua error gets (as Redis does).
    static LAST_CALL_ERR: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn new_engine() -> mlua::Result<Engine> {
    let (lua, globals, redis) = sandbox::build(|| LAST_CALL_ERR.with(|l| l.borrow().clone()))?;
    // The xpcall handler: the error's message and the user-script line it came from.
    let handler = lua.create_function(|lua, e: Value| {
        let mut line: i64 = 0;
        for level in 1..32 {
            let Some((src, l)) = lua.inspect_stack(level, |d| {
                (
                    d.source()
                        .source
                        .map(|s| s.into_owned())
                        .unwrap_or_default(),
                    d.current_line().map_or(0, |l| l as i64),
                )
            }) else {
                break;
            };
            if src == "@user_script" {
                line = l;
                break;
            }
        }
        let msg = match &e {
            Value::String(s) => {
                let s = String::from_utf8_lossy(&s.as_bytes()).into_owned();
                let from_call = LAST_CALL_ERR.with(|l| l.borrow().as_deref() == Some(&s));
                if from_call {
                    s
                } else {
                    format!("ERR {s}")
                }
            }
            Value::Table(t) => match t.raw_get::<Value>("err") {
                Ok(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                _ => "ERR unknown error".to_string(),
            },
            Value::Error(err) => {
                let m = innermost(err);
                let from_call = LAST_CALL_ERR.with(|l| l.borrow().as_deref() == Some(&m));
                if from_call {
                    m
                } else {
                    format!("ERR {m}")
                }
            }
            other => format!("ERR {other:?}"),
        };
        let t = lua.create_table()?;
        t.raw_set("msg", msg)?;
        t.raw_set("line", line)?;
        Ok(t)
    })?;
    Ok(Engine {
        lua,
        globals,
        redis,
        handler,
        compiled: RefCell::new((0, hashbrown::HashMap::new())),
    })
}

/// The message of the error a Rust callback raised (without mlua's wrapping/traceback).
fn innermost(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => innermost(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::BadArgument { cause, .. } => innermost(cause),
        other => other.to_string(),
    }
}

/// Compiles `body` (SCRIPT LOAD checks it this way): Redis's compile-error text.
pub fn compile_check(body: &[u8]) -> Result<(), CmdError> {
    with_engine(|e| compile(&e.lua, body).map(|_| ()))
}

fn compile(lua: &Lua, body: &[u8]) -> Result<(Function, shebang::ScriptFlags), CmdError> {
    let (flags, src) = shebang::parse(body)?;
    lua.load(src.as_deref().unwrap_or(body))
        .set_name("@user_script")
        .into_function()
        .map(|f| (f, flags))
        .map_err(|e| {
            let m = match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            };
            CmdError::msg(format!("ERR Error compiling script (new function): {m}"))
        })
}

fn with_engine<R>(f: impl FnOnce(&Engine) -> Result<R, CmdError>) -> Result<R, CmdError> {
    ENGINE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let e = new_engine()
                .map_err(|e| CmdError::msg(format!("ERR Lua initialisation failed: {e}")))?;
            *slot = Some(e);
        }
        match slot.as_ref() {
            Some(e) => f(e),
            None => Err(CmdError::msg("ERR Lua unavailable")),
        }
    })
}

/// Runs one script with `ctx`'s locks held and writes its reply (or error) to `ctx.out`.
pub fn run(
    ctx: &mut Ctx<'_>,
    body: &[u8],
    sha: &str,
    keys: &[&[u8]],
    argv: &[&[u8]],
    read_only: bool,
) -> Result<(), CmdError> {
    with_engine(|e| {
        let (f, sflags) = {
            let mut c = e.compiled.borrow_mut();
            let gen = FLUSHES.load(std::sync::atomic::Ordering::Relaxed);
            if c.0 != gen || c.1.len() >= MAX_COMPILED {
                *c = (gen, hashbrown::HashMap::new());
            }
            match c.1.get(sha) {
                Some(f) => f.clone(),
                None => {
                    let f = compile(&e.lua, body)?;
                    c.1.insert(sha.to_string(), f.clone());
                    f
                }
            }
        };
        if sflags.no_cluster && ctx.srv.cluster.get().is_some() {
            return Err(CmdError::msg(
                "ERR Can not run script on cluster, 'no-cluster' flag is set.",
            ));
        }
        let read_only = read_only || sflags.no_writes;
        let lua = &e.lua;
        let mk = |v: &[&[u8]]| -> mlua::Result<Table> {
            let t = lua.create_table_with_capacity(v.len(), 0)?;
            for (i, b) in v.iter().enumerate() {
                t.raw_set(i + 1, lua.create_string(b)?)?;
            }
            Ok(t)
        };
        let lua_err = |err: mlua::Error| CmdError::msg(format!("ERR {err}"));
        let g = &e.globals;
        g.raw_set("KEYS", mk(keys).map_err(lua_err)?)
            .map_err(lua_err)?;
        g.raw_set("ARGV", mk(argv).map_err(lua_err)?)
            .map_err(lua_err)?;
        let xpcall: Function = g.raw_get("xpcall").map_err(lua_err)?;
        // SELECT inside a script changes the script's db only (Redis 7.0).
        let caller_db = ctx.cl.db;
        convert::SCRIPT_RESP.with(|r| r.set(2));
        let was_exec = ctx.in_exec;
        let was_resp3 = ctx.out.resp3;
        ctx.in_exec = true;
        let cell = RefCell::new(&mut *ctx);
        let result = lua.scope(|scope| {
            let call = scope.create_function(|lua, args: MultiValue| {
                let mut c = cell.borrow_mut();
                match call_command(lua, &mut c, args, read_only)? {
                    Ok(v) => Ok(v),
                    Err(m) => {
                        LAST_CALL_ERR.with(|l| *l.borrow_mut() = Some(m.clone()));
                        Err(mlua::Error::RuntimeError(m))
                    }
                }
            })?;
            let pcall = scope.create_function(|lua, args: MultiValue| {
                let mut c = cell.borrow_mut();
                match call_command(lua, &mut c, args, read_only)? {
                    Ok(v) => Ok(v),
                    Err(m) => {
                        let t = lua.create_table()?;
                        t.raw_set("err", m)?;
                        Ok(Value::Table(t))
                    }
                }
            })?;
            e.redis.raw_set("call", call)?;
            e.redis.raw_set("pcall", pcall)?;
            let r: MultiValue = xpcall.call((f.clone(), e.handler.clone()))?;
            e.redis.raw_set("call", Value::Nil)?;
            e.redis.raw_set("pcall", Value::Nil)?;
            let mut it = r.into_iter();
            let ok = matches!(it.next(), Some(Value::Boolean(true)));
            Ok((ok, it.next().unwrap_or(Value::Nil)))
        });
        let _ = cell.into_inner();
        // The reply is in the client's protocol, whatever the script's redis.call used.
        ctx.out.resp3 = was_resp3;
        match &result {
            Ok((true, v)) => convert::write_value(ctx.out, v),
            Ok((false, v)) => {
                let (msg, line) = match v {
                    Value::Table(t) => (
                        t.raw_get::<String>("msg").unwrap_or_default(),
                        t.raw_get::<i64>("line").unwrap_or(0),
                    ),
                    _ => ("ERR script failed".to_string(), 0),
                };
                ctx.out
                    .error(&format!("{msg} script: {sha}, on @user_script:{line}."));
            }
            Err(_) => {}
        }
        ctx.in_exec = was_exec;
        ctx.cl.db = caller_db;
        ctx.ks.db = caller_db;
        ctx.out.resp3 = was_resp3;
        LAST_CALL_ERR.with(|l| l.borrow_mut().take());
        if !was_exec {
            crate::persist::propagate::end_exec(ctx);
        }
        result.map(|_| ()).map_err(lua_err)
    })
}

/// `redis.call` / `redis.pcall` body: the reply as a Lua value, or the error message.
fn call_command(
    lua: &Lua,
    ctx: &mut Ctx<'_>,
    args: MultiValue,
    read_only: bool,
) -> mlua::Result<Result<Value, String>> {
    let fail = |m: &str| -> mlua::Result<Result<Value, String>> { Ok(Err(m.to_string())) };
    if args.is_empty() {
        return fail("ERR Please specify at least one argument for this redis lib call");
    }
    let mut argv: Vec<Bytes> = Vec::with_capacity(args.len());
    for a in args.iter() {
        match a {
            Value::String(s) => argv.push(Bytes::copy_from_slice(&s.as_bytes())),
            // Redis formats numeric arguments with "%.17g" (not Lua's "%.14g").
            Value::Number(n) if n.is_finite() => {
                argv.push(Bytes::from(crate::resp::writer::fmt_g(*n, 17)))
            }
            // Lua 5.1 numbers are doubles (mlua shows integral ones as Integer).
            Value::Integer(i) => argv.push(Bytes::from(crate::resp::writer::fmt_g(*i as f64, 17))),
            Value::Number(_) => match lua.coerce_string(a.clone())? {
                Some(s) => argv.push(Bytes::copy_from_slice(&s.as_bytes())),
                None => {
                    return fail("ERR Lua redis lib command arguments must be strings or integers")
                }
            },
            _ => return fail("ERR Lua redis lib command arguments must be strings or integers"),
        }
    }
    // Handlers take borrowed arguments: a view over the owned ones built above.
    let owned = argv;
    let argv = crate::cmd::arg_view(&owned);
    let Some(cmd) = table().get(argv[0]) else {
        return fail("ERR Unknown Redis command called from script");
    };
    let cmd = match table().resolve(&argv) {
        Ok(c) => c,
        Err(_) if !cmd.subcommands.is_empty() => cmd,
        Err(e) => return fail(&e.to_string()),
    };
    if !cmd.arity_ok(argv.len()) {
        return fail("ERR Wrong number of args calling Redis command from script");
    }
    if cmd.has(flags::NOSCRIPT) || cmd.has(flags::CONN) {
        return fail("ERR This Redis command is not allowed from script");
    }
    if cmd.has(flags::WRITE) && read_only {
        return fail("ERR Write commands are not allowed from read-only scripts.");
    }
    if cmd.has(flags::WRITE) {
        if let Some(e) = crate::repl::deny(ctx.srv, ctx.cl, cmd) {
            return fail(e);
        }
    }
    if let Some(e) = cluster::check_local(ctx, cmd, &argv) {
        return fail(e);
    }
    let at = ctx.out.len();
    ctx.out.resp3 = convert::SCRIPT_RESP.with(|r| r.get() == 3);
    ctx.ks.db = ctx.cl.db;
    crate::cmd::run_locked(ctx, cmd, &argv);
    // INFO commandstats counts commands scripts run, as EXEC does for queued ones.
    cmd.stats
        .calls
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut pos = at;
    let parsed = convert::parse_reply(lua, &ctx.out.buf, &mut pos, true);
    ctx.out.buf.truncate(at);
    match parsed? {
        Parsed::Val(v) => Ok(Ok(v)),
        Parsed::Err(m) => fail(&m),
    }
}
