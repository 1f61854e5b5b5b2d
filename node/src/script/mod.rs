//! Lua scripting (EVAL family): a per-worker-thread sandboxed Lua 5.1 state, the script
//! cache, and running one script with the caller's locks held.
//!
//! The script's `redis.call`s run through [`crate::cmd::run_locked`] with `in_exec` set, so
//! their writes are collected by the propagation layer and fed to AOF/replicas as one
//! MULTI/EXEC block at the end (Redis 7.0 effects replication), WATCHes are touched and
//! keyspace notifications fire exactly as for the same commands sent by a client.

mod bit;
pub mod busy;
mod cjson;
mod cluster;
mod cmsgpack;
pub mod commands;
pub mod convert;
pub mod function;
pub mod function_commands;
mod ldb;
mod sandbox;
mod shebang;
mod structlib;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use mlua::{Function, Lua, MultiValue, Table, Value};
use parking_lot::Mutex;

use crate::cmd::{flags, table, CmdError, Ctx};
use convert::Parsed;

/// SHA1 hex (lower case) of a script body.
pub fn sha1_hex(body: &[u8]) -> String {
    // By hand, not through the digest's Display (core::fmt cost a third of the hashing
    // of a short script).
    Sha(sha1_bytes(body)).as_str().to_string()
}

/// A script's SHA-1 in hex (40 ASCII bytes on the stack).
#[derive(Clone, Copy)]
pub struct Sha([u8; 40]);

impl Sha {
    pub fn as_str(&self) -> &str {
        // Hex digits only: always UTF-8.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// Bodies longer than this are hashed on every EVAL rather than remembered.
const BODY_SHA_MAX_LEN: usize = 8 * 1024;
/// Bytes of remembered bodies a thread keeps at most (beyond that it starts over).
const BODY_SHA_MAX_BYTES: usize = 1024 * 1024;

thread_local! {
    /// A memo of SHA-1 (a pure function of the body), not a contract: a miss recomputes.
    /// Bodies EVAL ran on this thread, with their sha, and their total size: SHA-1 of a
    /// short script cost more than running it (~2,000 instructions), a lookup by a fast
    /// hash ~100.
    static BODY_SHA: RefCell<(BodyShas, usize)> = RefCell::new((BodyShas::new(), 0));
}

type BodyShas = hashbrown::HashMap<Box<[u8]>, Sha>;

/// The sha EVAL names `body` by (its SHA-1), remembered per thread.
pub fn eval_sha(body: &[u8]) -> Sha {
    let compute = || Sha(sha1_bytes(body));
    if body.len() > BODY_SHA_MAX_LEN {
        return compute();
    }
    BODY_SHA.with(|m| {
        let (m, bytes) = &mut *m.borrow_mut();
        if let Some(s) = m.get(body) {
            return *s;
        }
        if *bytes + body.len() > BODY_SHA_MAX_BYTES {
            m.clear();
            *bytes = 0;
        }
        let s = compute();
        m.insert(body.into(), s);
        *bytes += body.len();
        s
    })
}

fn sha1_bytes(body: &[u8]) -> [u8; 40] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let d = sha1_smol::Sha1::from(body).digest().bytes();
    let mut s = [0u8; 40];
    for (i, b) in d.iter().enumerate() {
        s[2 * i] = HEX[(b >> 4) as usize];
        s[2 * i + 1] = HEX[(b & 15) as usize];
    }
    s
}

/// A server's scripting state (`Server::scripts`): the script cache, the function
/// registry and the running script. In an Arc: each thread's Lua states remember the
/// server they last ran for by a Weak to it ([`bind`]).
#[derive(Default)]
pub struct Scripts {
    /// The script cache: sha -> body (shared by all threads; SCRIPT FLUSH empties it).
    cache: Mutex<hashbrown::HashMap<String, Bytes>>,
    /// Bumped by SCRIPT FLUSH: every thread drops its compiled scripts on its next run.
    flushes: AtomicU64,
    /// FUNCTION libraries (FUNCTION LOAD, FCALL).
    pub functions: Arc<function::Functions>,
    /// The running script (busy-reply-threshold, SCRIPT KILL).
    pub busy: busy::Busy,
}

impl Scripts {
    pub fn cache_get(&self, sha: &str) -> Option<Bytes> {
        self.cache.lock().get(&sha.to_ascii_lowercase()).cloned()
    }

    pub fn cache_put(&self, sha: String, body: Bytes) {
        self.cache.lock().insert(sha, body);
    }

    pub fn cache_flush(&self) {
        self.cache.lock().clear();
        self.flushes.fetch_add(1, Ordering::Relaxed);
    }

    /// INFO's used_memory_lua: the heap of the calling thread's EVAL Lua state (0 before
    /// its first script; each I/O thread has its own, this is the one INFO runs on). A
    /// state that still holds scripts compiled before a SCRIPT FLUSH drops them first, as
    /// Redis's flush resets its VM.
    pub fn eval_vm_memory(&self) -> usize {
        let gen = self.flushes.load(Ordering::Relaxed);
        ENGINE.with(|cell| {
            // Shared: INFO may run from a script on this thread (redis.call('info')).
            let Ok(slot) = cell.try_borrow() else {
                return 0;
            };
            let Some(e) = slot.as_ref() else {
                return 0;
            };
            let flushed = e
                .compiled
                .try_borrow_mut()
                .ok()
                .filter(|c| c.0.flushed_for(self, gen))
                .map(|mut c| c.1 = hashbrown::HashMap::new())
                .is_some();
            if flushed {
                if let Err(err) = e.lua.gc_collect() {
                    tracing::debug!(error = %err, "Lua collection after SCRIPT FLUSH");
                }
            }
            e.lua.used_memory()
        })
    }

    /// (scripts, bytes of their shas and bodies) in the cache: INFO's
    /// number_of_cached_scripts and used_memory_scripts_eval.
    pub fn cache_stats(&self) -> (usize, usize) {
        let c = self.cache.lock();
        (c.len(), c.iter().map(|(k, v)| k.len() + v.len()).sum())
    }
}

/// Makes `lua` (a thread's Lua state, shared by the servers of the process) run `s`'s
/// scripts: its busy hook acts on `s`'s state.
fn bind(lua: &Lua, s: &Arc<Scripts>) {
    let same = lua
        .try_app_data_ref::<Weak<Scripts>>()
        .ok()
        .flatten()
        .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(s)));
    if !same {
        // Not borrowed here (the check's borrow ended); a failure only leaves the hook
        // without a server to act on.
        let _ = lua.try_set_app_data(Arc::downgrade(s));
    }
}

/// The scripting state `lua` last ran for (see [`bind`]).
fn bound(lua: &Lua) -> Option<Arc<Scripts>> {
    lua.try_app_data_ref::<Weak<Scripts>>()
        .ok()
        .flatten()
        .and_then(|w| w.upgrade())
}

/// A per-thread cache valid for one server's scripts (or functions) at one generation: the
/// owner is held by a Weak, so its address is not reused while the cache names it.
pub(crate) struct Validity<T = Scripts> {
    owner: Weak<T>,
    gen: u64,
}

impl<T> Validity<T> {
    pub(crate) fn new() -> Self {
        Validity {
            owner: Weak::new(),
            gen: 0,
        }
    }

    /// Whether the cache was built for `s` at an older generation than `gen` (a flush
    /// since: the caller empties it). Leaves the record alone.
    pub(crate) fn flushed_for(&self, s: &T, gen: u64) -> bool {
        std::ptr::eq(self.owner.as_ptr(), s) && self.gen != gen
    }

    /// Whether the cache was built for `s` at `gen`; if not, it now is (the caller
    /// empties it).
    pub(crate) fn renew(&mut self, s: &Arc<T>, gen: u64) -> bool {
        if std::ptr::eq(self.owner.as_ptr(), Arc::as_ptr(s)) && self.gen == gen {
            return true;
        }
        self.owner = Arc::downgrade(s);
        self.gen = gen;
        false
    }
}

/// A worker thread's Lua state, its `redis` table and the xpcall error handler.
struct Engine {
    lua: Lua,
    /// The real globals (the script's environment is a read-only proxy of them).
    globals: Table,
    redis: Table,
    handler: Function,
    /// [`run_call`] as a Lua function.
    runner: Function,
    /// The running script's state, shared with the callbacks above.
    pub(crate) run: Rc<RunSlot>,
    /// Compiled scripts by sha, for one server's cache (cleared when another server's
    /// script runs here or SCRIPT FLUSH bumps its `flushes`).
    compiled: RefCell<(Validity, Compiled)>,
}

/// A thread's compiled scripts by sha, with their shebang flags.
type Compiled = hashbrown::HashMap<String, (Function, shebang::ScriptFlags)>;

/// Compiled scripts a thread keeps at most (beyond that it starts over).
const MAX_COMPILED: usize = 1000;

thread_local! {
    /// This thread's EVAL Lua state: a per-thread cache (Lua states are not Send), no
    /// contract between layers (what a run needs travels in its [`RunSlot`]).
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

/// What one script run shares with the callbacks of its Lua state (`redis.call`, the
/// error handler, `redis.setresp`): owned by the engine, captured by its callbacks.
#[derive(Default)]
pub(crate) struct RunSlot {
    /// The running script's context (type-erased `*mut Ctx`) and whether it's read-only;
    /// None between runs and while one of its calls is underway.
    current: std::cell::Cell<Option<(*mut (), bool)>>,
    /// The protocol the script asked for with `redis.setresp` (2 by default).
    pub(crate) resp: std::cell::Cell<u8>,
    /// `redis.set_repl` flags for the writes that follow (REPL_ALL, 3, by default): with
    /// REPL_NONE they reach neither replicas nor the AOF.
    pub(crate) repl: std::cell::Cell<u8>,
    /// A function without `allow-cross-slot-keys` in cluster mode: the one slot its
    /// commands may use (-1 until the first keyed one). None: any local slot (EVAL).
    pub(crate) slot_rule: std::cell::Cell<Option<i32>>,
    /// The last error `redis.call` raised: a script failing with exactly it is reported
    /// without the "ERR " prefix a plain Lua error gets (as Redis does).
    pub(crate) last_call_err: RefCell<Option<String>>,
    /// The keys the running script declared, when its caller tracks its reads (client-side
    /// caching): each read-only command the script calls makes the caller track them all,
    /// as Redis's trackingRememberKeys on the caller's command. Empty otherwise.
    tracked_keys: RefCell<Vec<Bytes>>,
    /// The Lua debugger's session (SCRIPT DEBUG SYNC) while the script it debugs runs.
    pub(crate) ldb: RefCell<Option<ldb::Session>>,
    /// A script without a shebang started past maxmemory and has not written yet: its
    /// deny-oom commands are refused (Redis's pre_command_oom_state, scriptVerifyOOM).
    oom: std::cell::Cell<bool>,
    /// The running script has called a write command (Redis's SCRIPT_WRITE_DIRTY): its
    /// later writes skip the server-state checks (min-replicas-to-write, MISCONF, read-only
    /// replica), since a script cannot be stopped half-way once it changed the dataset.
    wrote: std::cell::Cell<bool>,
    /// Runs since the last periodic collection step ([`GC_PERIOD`]).
    runs: std::cell::Cell<u32>,
    /// The last `redis.call` error was counted in INFO errorstats already (a refusal or
    /// the command's own failure): the script failing with it, or returning it, does not
    /// count it again (Redis's ignore_error_stats_update).
    last_err_counted: std::cell::Cell<bool>,
}

/// Every this many script runs the Lua collector takes a step of this many (kilobyte)
/// units, as Redis's LUA_GC_CYCLE_PERIOD: memory stays near the live set between full
/// cycles.
const GC_PERIOD: u32 = 50;

impl RunSlot {
    fn is_last_call_err(&self, m: &str) -> bool {
        self.last_call_err.borrow().as_deref() == Some(m)
    }
}

fn new_engine() -> mlua::Result<Engine> {
    let run: Rc<RunSlot> = Rc::default();
    let (lua, globals, redis) = sandbox::build(run.clone())?;
    busy::install_busy_hook(&lua);
    // The xpcall handler: the error's message and the user-script line it came from.
    let slot = run.clone();
    let handler = lua.create_function(move |lua, e: Value| {
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
            if src == "@user_script" || src == "@user_function" {
                line = l;
                break;
            }
        }
        let msg = match &e {
            Value::String(s) => {
                let s = String::from_utf8_lossy(&s.as_bytes()).into_owned();
                let from_call = slot.is_last_call_err(&s);
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
                let from_call = slot.is_last_call_err(&m);
                if from_call {
                    m
                } else {
                    format!("ERR {m}")
                }
            }
            Value::Nil => "ERR nil".to_string(),
            other => format!("ERR {other:?}"),
        };
        let counted = match &e {
            Value::String(s) => {
                slot.last_err_counted.get()
                    && slot.is_last_call_err(&String::from_utf8_lossy(&s.as_bytes()))
            }
            Value::Error(err) => {
                slot.last_err_counted.get() && slot.is_last_call_err(&innermost(err))
            }
            Value::Table(t) => t.raw_get::<bool>(COUNTED).unwrap_or(false),
            _ => false,
        };
        let t = lua.create_table()?;
        t.raw_set("msg", msg)?;
        t.raw_set("line", line)?;
        t.raw_set(COUNTED, counted)?;
        Ok(t)
    })?;
    // redis.call / redis.pcall are made once: they find the running script's context in
    // CURRENT. (Creating them per run in a Lua scope cost about a fifth of an EVALSHA.)
    // Each comes in two forms behind one C dispatcher (see `by_arg_count`): arguments as
    // the binding's values, or, past MAX_ARGS, packed in one table.
    fn raise(run: &RunSlot, m: String) -> mlua::Result<Value> {
        *run.last_call_err.borrow_mut() = Some(m.clone());
        Err(mlua::Error::RuntimeError(m))
    }
    fn as_table(lua: &Lua, run: &RunSlot, m: String) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        t.raw_set("err", m)?;
        if run.last_err_counted.get() {
            t.raw_set(COUNTED, true)?;
        }
        Ok(Value::Table(t))
    }
    fn no_script() -> mlua::Result<Value> {
        Err(mlua::Error::RuntimeError(NO_SCRIPT.into()))
    }
    let slot = run.clone();
    let call = lua.create_function(move |lua, args: MultiValue| {
        match with_current(&slot, |c, ro| call_values(lua, c, &slot, &args, ro)) {
            Some(r) => r?.or_else(|m| raise(&slot, m)),
            None => no_script(),
        }
    })?;
    let slot = run.clone();
    let call_many = lua.create_function(move |lua, args: Table| {
        match with_current(&slot, |c, ro| call_packed(lua, c, &slot, &args, ro)) {
            Some(r) => r?.or_else(|m| raise(&slot, m)),
            None => no_script(),
        }
    })?;
    let slot = run.clone();
    let pcall = lua.create_function(move |lua, args: MultiValue| {
        match with_current(&slot, |c, ro| call_values(lua, c, &slot, &args, ro)) {
            Some(r) => r?.or_else(|m| as_table(lua, &slot, m)),
            None => no_script(),
        }
    })?;
    let slot = run.clone();
    let pcall_many = lua.create_function(move |lua, args: Table| {
        match with_current(&slot, |c, ro| call_packed(lua, c, &slot, &args, ro)) {
            Some(r) => r?.or_else(|m| as_table(lua, &slot, m)),
            None => no_script(),
        }
    })?;
    redis.raw_set("call", by_arg_count(&lua, call, call_many)?)?;
    redis.raw_set("pcall", by_arg_count(&lua, pcall, pcall_many)?)?;
    // The debugger's functions: no-ops (false) outside a debugging session.
    let slot = run.clone();
    redis.raw_set(
        "breakpoint",
        lua.create_function(move |_, ()| Ok(ldb::breakpoint(&slot)))?,
    )?;
    let slot = run.clone();
    redis.raw_set(
        "debug",
        lua.create_function(move |_, args: MultiValue| {
            ldb::debug(&slot, &args);
            Ok(())
        })?,
    )?;
    // SAFETY: run_call follows the lua_CFunction protocol (see its doc).
    let runner = unsafe { lua.create_c_function(run_call)? };
    Ok(Engine {
        lua,
        globals,
        redis,
        handler,
        runner,
        run,
        compiled: RefCell::new((Validity::new(), hashbrown::HashMap::new())),
    })
}

/// Arguments a Rust function of the sandbox takes as the binding's values at most. Each
/// string, table or function argument takes a slot of the binding's reference stack,
/// which holds about 8,000 (beyond, mlua panics); Lua allows a call nearly 8,000.
pub(crate) const MAX_ARGS: std::ffi::c_int = 1000;

/// A function calling `few` with its arguments when there are at most [`MAX_ARGS`], else
/// `many` with them packed in one table (redis.call takes as many as Lua passes, as in
/// Redis: `redis.call('lpush', k, unpack(t))` with 7,999 values).
fn by_arg_count(lua: &Lua, few: Function, many: Function) -> mlua::Result<Function> {
    // SAFETY: `dispatch_by_count` follows the lua_CFunction protocol; the closure is
    // made inside mlua's protected call with its two upvalues on the stack.
    unsafe {
        lua.exec_raw::<Function>((few, many), |l| {
            mlua::ffi::lua_pushcclosure(l, dispatch_by_count, 2);
        })
    }
}

/// Upvalue 1 with the arguments (at most [`MAX_ARGS`]), else upvalue 2 with them in one
/// table.
///
/// # Safety
/// A lua_CFunction with two function upvalues; errors longjmp across it (nothing here
/// needs Drop).
unsafe extern "C-unwind" fn dispatch_by_count(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    let n = ffi::lua_gettop(l);
    // A C function has LUA_MINSTACK (20) free slots past its arguments: 3 are used here
    // (no lua_checkstack, which fails once the arguments fill Lua's 8,000 slots).
    if n <= MAX_ARGS {
        ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
        ffi::lua_insert(l, 1);
        ffi::lua_call(l, n, ffi::LUA_MULTRET);
        return ffi::lua_gettop(l);
    }
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(2));
    ffi::lua_createtable(l, n, 1);
    for i in 1..=n {
        ffi::lua_pushvalue(l, i);
        ffi::lua_rawseti_(l, -2, i);
    }
    // The count, as nils among the arguments leave holes.
    ffi::lua_pushinteger(l, ffi::lua_Integer::from(n));
    ffi::lua_setfield(l, -2, c"n".as_ptr());
    ffi::lua_call(l, 1, ffi::LUA_MULTRET);
    ffi::lua_gettop(l) - n
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
    let src = src.as_deref().unwrap_or(body);
    // Text only (issue 15): a body starting with the bytecode mark is parsed as text, as
    // Redis does, and fails on its first byte with Redis's error (see sandbox::load_text).
    let spaced;
    let src = if src.first() == Some(&0x1b) {
        spaced = [b" ", src].concat();
        spaced.as_slice()
    } else {
        src
    };
    lua.load(src)
        .set_name("@user_script")
        .set_mode(mlua::ChunkMode::Text)
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

/// Runs `f` on this thread's EVAL engine (made on first use). The engine is borrowed
/// shared for the run: INFO from the script reads its memory meanwhile.
fn with_engine<R>(f: impl FnOnce(&Engine) -> Result<R, CmdError>) -> Result<R, CmdError> {
    ENGINE.with(|cell| {
        if cell.try_borrow().is_ok_and(|s| s.is_none()) {
            let e = new_engine()
                .map_err(|e| CmdError::msg(format!("ERR Lua initialisation failed: {e}")))?;
            // None: nothing borrows the cell (a running script would hold its engine).
            if let Ok(mut slot) = cell.try_borrow_mut() {
                *slot = Some(e);
            }
        }
        let slot = cell
            .try_borrow()
            .map_err(|_| CmdError::msg("ERR Lua unavailable"))?;
        match slot.as_ref() {
            Some(e) => f(e),
            None => Err(CmdError::msg("ERR Lua unavailable")),
        }
    })
}

/// Runs one script with `ctx`'s locks held and writes its reply (or error) to `ctx.out`.
/// The thread's compiled copy of `sha` runs if there is one (without the shared cache's
/// lock); else `body` (EVAL) or the shared cache's body (EVALSHA; else NOSCRIPT) compiles.
pub fn run(
    ctx: &mut Ctx<'_>,
    body: Option<&[u8]>,
    sha: &str,
    keys: &[&[u8]],
    argv: &[&[u8]],
    read_only: bool,
) -> Result<(), CmdError> {
    let srv = ctx.srv;
    let scripts = &srv.scripts;
    with_engine(|e| {
        let (f, sflags) = {
            let mut c = e.compiled.borrow_mut();
            let gen = scripts.flushes.load(Ordering::Relaxed);
            if !c.0.renew(scripts, gen) || c.1.len() >= MAX_COMPILED {
                c.1 = hashbrown::HashMap::new();
            }
            match c.1.get(sha) {
                Some(f) => f.clone(),
                None => {
                    let f = match body {
                        // EVAL: a body this thread hasn't compiled; the shared cache (for
                        // EVALSHA and SCRIPT EXISTS anywhere) gets it once it compiles.
                        Some(b) => {
                            let f = compile(&e.lua, b)?;
                            if scripts.cache_get(sha).is_none() {
                                scripts.cache_put(sha.to_string(), Bytes::copy_from_slice(b));
                            }
                            f
                        }
                        None => {
                            let shared = scripts.cache_get(sha).ok_or_else(|| {
                                CmdError::msg("NOSCRIPT No matching script. Please use EVAL.")
                            })?;
                            compile(&e.lua, &shared)?
                        }
                    };
                    c.1.insert(sha.to_string(), f.clone());
                    f
                }
            }
        };
        // maxmemory, measured (and evicted for) once as the script starts; a script
        // without a shebang runs, but may not grow memory before its first write.
        let obeys = obeys_client(ctx);
        let oom = !obeys && crate::server::evict::ensure_memory(ctx.srv).is_err();
        if sflags.shebang {
            refuse_declared(ctx, &sflags, oom, read_only, obeys)?;
        } else if !obeys && stale_replica(ctx.srv) {
            // Redis's scriptPrepareForRun refuses a script without flags on a stale replica.
            return Err(CmdError::msg(MASTERDOWN));
        }
        e.run.oom.set(oom && !sflags.shebang);
        let read_only = read_only || sflags.no_writes;
        let call = Call {
            f: &f,
            keys,
            argv,
            as_globals: true,
        };
        // In cluster mode a script with a shebang keeps to one slot, its declared keys'
        // (else the first it touches), unless it allows cross-slot keys (Redis's
        // SCRIPT_ALLOW_CROSS_SLOT, set for scripts without a shebang).
        let rule = (sflags.shebang && !sflags.allow_cross_slot).then(|| {
            keys.first()
                .map_or(-1, |k| crate::slot::key_hash_slot(k) as i32)
        });
        e.run.slot_rule.set(rule);
        let r = call_core(e, ctx, call, read_only, Origin::Script(sha));
        e.run.slot_rule.set(None);
        r
    })
}

/// One run of a script body (KEYS and ARGV as globals) or of a library function (keys and
/// args as its two arguments).
pub(crate) struct Call<'a> {
    pub f: &'a Function,
    pub keys: &'a [&'a [u8]],
    pub argv: &'a [&'a [u8]],
    pub as_globals: bool,
}

/// What a failing script is called in its error ("<sha>, on @user_script" or
/// "<fn>, on @user_function"); formatted only when it fails.
#[derive(Clone, Copy)]
pub(crate) enum Origin<'a> {
    Script(&'a str),
    Function(&'a str),
}

impl std::fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Script(sha) => write!(f, "{sha}, on @user_script"),
            Origin::Function(name) => write!(f, "{name}, on @user_function"),
        }
    }
}

/// Pushes a Lua array of `v`'s strings (KEYS / ARGV).
///
/// # Safety
/// `l` must be a Lua state inside a protected call with 3 free stack slots: an allocation
/// failure longjmps out, so no value needing Drop may be live in the caller's frame.
unsafe fn push_array(l: *mut mlua::ffi::lua_State, v: &[&[u8]]) {
    use std::ffi::c_int;
    mlua::ffi::lua_createtable(l, c_int::try_from(v.len()).unwrap_or(c_int::MAX), 0);
    for (i, b) in v.iter().enumerate() {
        mlua::ffi::lua_pushlstring(l, b.as_ptr().cast(), b.len());
        mlua::ffi::lua_rawseti(l, -2, (i + 1) as mlua::ffi::lua_Integer);
    }
}

/// Runs `c` under `e`'s error handler and returns (ok, the result or the handler's
/// {msg, line} table), through [`run_call`].
fn invoke(e: &Engine, c: &Call<'_>) -> mlua::Result<(bool, Value)> {
    let p = mlua::LightUserData(std::ptr::from_ref(c).cast_mut().cast());
    e.runner.call((&e.handler, &e.globals, c.f, p))
}

/// The C function scripts run through: sets KEYS/ARGV (or pushes a function's two
/// arrays) and calls the script under the error handler, with the Lua C API. mlua's table,
/// string and call wrappers (a reference per string, a stack round trip per set, a
/// closure per protected call) cost about 2,500 instructions per EVALSHA, more than the
/// script run itself. Stack: 1 handler, 2 the real globals, 3 the function, 4 a light
/// userdata pointing at the [`Call`]; returns (ok, result).
///
/// # Safety
/// Called only by [`invoke`] (through mlua's protected call, so a Lua error raised here
/// is caught), with the `Call` alive for the length of the call. Lua errors longjmp
/// across this frame: it holds nothing that needs Drop.
unsafe extern "C-unwind" fn run_call(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    let c = &*(ffi::lua_touserdata(l, 4) as *const Call<'_>);
    ffi::lua_settop(l, 3);
    // A C function has LUA_MINSTACK (20) free slots: the arrays need at most 5.
    let nargs = if c.as_globals {
        ffi::lua_pushlstring(l, c"KEYS".as_ptr(), 4);
        push_array(l, c.keys);
        ffi::lua_rawset(l, 2);
        ffi::lua_pushlstring(l, c"ARGV".as_ptr(), 4);
        push_array(l, c.argv);
        ffi::lua_rawset(l, 2);
        0
    } else {
        push_array(l, c.keys);
        push_array(l, c.argv);
        2
    };
    let status = ffi::lua_pcall(l, nargs, 1, 1);
    // [handler, globals, result] -> [ok, result]
    ffi::lua_pushboolean(l, std::ffi::c_int::from(status == 0));
    ffi::lua_replace(l, 1);
    ffi::lua_remove(l, 2);
    2
}

fn lua_err(err: mlua::Error) -> CmdError {
    CmdError::msg(format!("ERR {err}"))
}

/// Calls `f` (no arguments) in `e`'s state with `ctx`'s locks held, `redis.call`/`pcall`
/// bound to `ctx`, and writes its reply or error. Shared by EVAL and FCALL; `origin` names
/// the script in errors ("<sha>, on @user_script" or "<fn>, on @user_function").
fn call_core(
    e: &Engine,
    ctx: &mut Ctx<'_>,
    call: Call<'_>,
    read_only: bool,
    origin: Origin<'_>,
) -> Result<(), CmdError> {
    {
        // SELECT inside a script changes the script's db only (Redis 7.0).
        let caller_db = ctx.cl.db;
        e.run.resp.set(2);
        e.run.repl.set(3);
        e.run.wrote.set(false);
        let was_exec = ctx.in_exec;
        let was_resp3 = ctx.out.resp3;
        let was_script = ctx.cl.in_script;
        ctx.in_exec = true;
        ctx.cl.in_script = true;
        // Published for busy-reply-threshold / SCRIPT KILL until the script returns.
        // FCALL names its origin "<fn>, on @user_function" (FUNCTION KILL applies to it).
        let kind = match origin {
            Origin::Function(_) => busy::Kind::Function,
            Origin::Script(_) => busy::Kind::Eval,
        };
        let srv = ctx.srv;
        let scripts = &srv.scripts;
        bind(&e.lua, scripts);
        let running = scripts.busy.start(
            kind,
            ctx.srv.config.read().typed.busy_reply_threshold,
            ctx.cl.from_master,
        );
        let tracks = crate::tracking::live(srv) && crate::tracking::tracks_reads(ctx.cl.tracking);
        if tracks {
            *e.run.tracked_keys.borrow_mut() = call
                .keys
                .iter()
                .map(|k| Bytes::copy_from_slice(k))
                .collect();
        }
        let current = CurrentScript::enter(&e.run, ctx, read_only);
        // Under the Lua debugger (SCRIPT DEBUG SYNC) its line hook replaces the busy one.
        let debugging = e.run.ldb.borrow().is_some();
        if debugging {
            match e.redis.raw_get::<Function>("call") {
                Ok(call_fn) => ldb::install_hook(&e.lua, e.run.clone(), call_fn),
                Err(err) => tracing::warn!(error = %err, "no redis.call for the Lua debugger"),
            }
        }
        let result = invoke(e, &call);
        e.run.oom.set(false);
        let runs = e.run.runs.get() + 1;
        e.run.runs.set(if runs >= GC_PERIOD { 0 } else { runs });
        if runs >= GC_PERIOD {
            if let Err(err) = e.lua.gc_step_kbytes(GC_PERIOD as std::ffi::c_int) {
                tracing::debug!(error = %err, "Lua collection step");
            }
        }
        if tracks {
            e.run.tracked_keys.borrow_mut().clear();
        }
        drop(current);
        // A killed script left its hook firing on every line (busy::Busy::hook).
        let killed = scripts.busy.kill_requested();
        drop(running);
        if killed || debugging {
            busy::install_busy_hook(&e.lua);
        }
        // The reply is in the client's protocol, whatever the script's redis.call used.
        ctx.out.resp3 = was_resp3;
        // An error a command already counted in errorstats (the script fails with it, or
        // returns redis.pcall's table of it) goes back as CmdError::Counted: EVAL's failed
        // call counts, the error not again.
        let mut counted: Option<String> = None;
        match &result {
            Ok((true, v)) => {
                // Lua values are copied into `buf`, where take_error reads.
                let at = ctx.out.buf.len();
                convert::write_value(ctx.out, v, e.run.resp.get() == 3);
                let marked =
                    matches!(v, Value::Table(t) if t.raw_get::<bool>(COUNTED).unwrap_or(false));
                if marked {
                    counted = take_error(ctx.out, at);
                }
            }
            Ok((false, v)) => {
                let (msg, line, was_counted) = match v {
                    Value::Table(t) => (
                        t.raw_get::<String>("msg").unwrap_or_default(),
                        t.raw_get::<i64>("line").unwrap_or(0),
                        t.raw_get::<bool>(COUNTED).unwrap_or(false),
                    ),
                    _ => ("ERR script failed".to_string(), 0, false),
                };
                let text = format!("{msg} script: {origin}:{line}.");
                if was_counted {
                    counted = Some(text);
                } else {
                    ctx.out.error(&text);
                }
            }
            Err(_) => {}
        }
        ctx.in_exec = was_exec;
        ctx.cl.in_script = was_script;
        ctx.cl.db = caller_db;
        ctx.ks.db = caller_db;
        ctx.out.resp3 = was_resp3;
        e.run.last_call_err.borrow_mut().take();
        e.run.last_err_counted.set(false);
        if !was_exec {
            crate::cmd::propagation::end_exec(ctx);
        }
        result.map_err(lua_err)?;
        match counted {
            Some(m) => Err(CmdError::Counted(m.into())),
            None => Ok(()),
        }
    }
}

/// Runs `f` (an EVAL of `body`) under the Lua debugger, as the client asked with SCRIPT
/// DEBUG SYNC: the session talks to the client over its socket while the script runs,
/// sends `<endsession>` when it ends, and the connection closes after the EVAL's reply
/// (Redis's evalGenericCommandWithDebugging). A client without a socket on this thread
/// (none has one but a connection's own) runs the script plainly.
pub fn run_debugged(
    ctx: &mut Ctx<'_>,
    body: &[u8],
    f: impl FnOnce(&mut Ctx<'_>) -> Result<(), CmdError>,
) -> Result<(), CmdError> {
    ctx.cl.lua_debug = false;
    let Some(fd) = crate::server::busy_io::socket_of(ctx.cl.id) else {
        return f(ctx);
    };
    tracing::warn!("Redis synchronous debugging eval session started");
    let threshold = ctx.srv.config.read().typed.busy_reply_threshold;
    let session = ldb::Session::new(fd, ctx.srv.clone(), ctx.cl.handle.clone(), body, threshold);
    with_engine(|e| {
        *e.run.ldb.borrow_mut() = Some(session);
        Ok(())
    })?;
    let r = f(ctx);
    let session = ENGINE.with(|c| {
        c.borrow()
            .as_ref()
            .and_then(|e| e.run.ldb.borrow_mut().take())
    });
    if let Some(s) = session {
        s.end();
    }
    ctx.cl.close_after_reply = true;
    r
}

/// Runs `f` on the debugging session when it logs redis.call traffic (it is stepping).
fn ldb_log(run: &RunSlot, f: impl FnOnce(&mut ldb::Session)) {
    if let Ok(mut g) = run.ldb.try_borrow_mut() {
        if let Some(s) = g.as_mut().filter(|s| s.logging()) {
            f(s);
        }
    }
}

/// The field marking an error table (or the error handler's result) whose error was
/// counted in errorstats already.
const COUNTED: &str = "ignore_error_stats_update";

/// Takes back the top-level error reply written at `at` (its text, without `-` and CRLF).
fn take_error(out: &mut crate::resp::Out, at: usize) -> Option<String> {
    let rest = out.buf.get(at..)?.strip_prefix(b"-")?;
    let text = rest.strip_suffix(b"\r\n")?;
    let text = String::from_utf8_lossy(text).into_owned();
    out.buf.truncate(at);
    Some(text)
}

/// Whether a script command is a write as Redis's getCommandFlags sees it before running
/// it: EVAL* of a body with a shebang without `no-writes`, FCALL* of a function without
/// `no-writes` (a script without a shebang keeps the command's own flags). The cluster
/// router redirects such a command away from a READONLY replica, as Redis does.
pub fn declares_writes(
    srv: &crate::server::Server,
    cmd: &crate::cmd::CommandSpec,
    args: &[&[u8]],
) -> bool {
    let body_writes =
        |b: &[u8]| matches!(shebang::parse(b), Ok((f, _)) if f.shebang && !f.no_writes);
    let Some(&a) = args.get(1) else {
        return false;
    };
    match cmd.name {
        "eval" | "eval_ro" => body_writes(a),
        "evalsha" | "evalsha_ro" => std::str::from_utf8(a)
            .ok()
            .and_then(|sha| srv.scripts.cache_get(sha))
            .is_some_and(|b| body_writes(&b)),
        "fcall" | "fcall_ro" => srv
            .scripts
            .functions
            .lookup(a)
            .is_some_and(|(_, info)| info.flags & function::NO_WRITES == 0),
        _ => false,
    }
}

/// A script command's write flag as its script declares it (Redis's evalGetCommandFlags /
/// fcallGetCommandFlags): Some(may write) for a body with a shebang or a known function,
/// None when nothing is declared (the command's own flags apply). CLIENT PAUSE WRITE holds
/// by it (wired to `cmd` as `UpperHooks::script_writes`).
pub fn declared_writes(
    srv: &crate::server::Server,
    cmd: &crate::cmd::CommandSpec,
    args: &[&[u8]],
) -> Option<bool> {
    let body = |b: &[u8]| match shebang::parse(b) {
        Ok((f, _)) if f.shebang => Some(!f.no_writes),
        _ => None,
    };
    let a = *args.get(1)?;
    match cmd.name {
        "eval" | "eval_ro" => body(a),
        "evalsha" | "evalsha_ro" => body(&srv.scripts.cache_get(std::str::from_utf8(a).ok()?)?),
        "fcall" | "fcall_ro" => srv
            .scripts
            .functions
            .lookup(a)
            .map(|(_, info)| info.flags & function::NO_WRITES == 0),
        _ => None,
    }
}

/// Our master's stream or the server's own client (AOF replay): never refused for
/// memory, a read-only or stale role (Redis's mustObeyClient).
fn obeys_client(ctx: &Ctx<'_>) -> bool {
    let cl = &*ctx.cl;
    cl.from_master
        || cl.internal
        || (cl.id != 0 && cl.id == ctx.srv.repl.master_client.load(Ordering::Relaxed))
}

const MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// What refuses an EVAL whose shebang declares its flags before it runs, in Redis's order:
/// processCommand sees it as a command with the script's flags (deny-oom and write unless
/// allow-oom / no-writes, stale only with allow-stale), then scriptPrepareForRun checks
/// no-cluster and a write script called through EVAL_RO.
fn refuse_declared(
    ctx: &Ctx<'_>,
    f: &shebang::ScriptFlags,
    oom: bool,
    ro_command: bool,
    obeys: bool,
) -> Result<(), CmdError> {
    let writes = !f.no_writes;
    if oom && writes && !f.allow_oom {
        return Err(CmdError::msg(OOM));
    }
    if writes {
        if let Some(e) = crate::persist::writes_denied(ctx.srv, ctx.cl) {
            return Err(CmdError::msg(e.to_string()));
        }
        if !obeys {
            if let Some(e) = crate::repl::too_few_replicas(ctx.srv) {
                return Err(CmdError::msg(e));
            }
            if ctx.srv.repl.is_replica() && ctx.srv.config.read().typed.replica_read_only {
                return Err(CmdError::msg(
                    "READONLY You can't write against a read only replica.",
                ));
            }
        }
    }
    if !f.allow_stale && !obeys && stale_replica(ctx.srv) {
        return Err(CmdError::msg(MASTERDOWN));
    }
    if f.no_cluster && ctx.srv.cluster.get().is_some() {
        return Err(CmdError::msg(
            "ERR Can not run script on cluster, 'no-cluster' flag is set.",
        ));
    }
    if writes && ro_command {
        return Err(CmdError::msg(
            "ERR Can not execute a script with write flag using *_ro command.",
        ));
    }
    Ok(())
}

/// A replica whose link with its master is down, configured not to serve stale data.
fn stale_replica(srv: &crate::server::Server) -> bool {
    let repl = &srv.repl;
    repl.is_replica()
        && !repl.link_up.load(std::sync::atomic::Ordering::Relaxed)
        && !srv.config.read().typed.replica_serve_stale_data
}

/// A subcommand Redis flags `noscript` of a container that dispatches its subcommands
/// itself (no subcommand specs to carry the flag): CLUSTER RESET.
fn noscript_sub(cmd: &crate::cmd::CommandSpec, argv: &[&[u8]]) -> bool {
    cmd.name == "cluster"
        && cmd.subcommands.is_empty()
        && argv
            .get(1)
            .is_some_and(|s| s.eq_ignore_ascii_case(b"reset"))
}

/// Where a write propagated to `t` goes under `redis.set_repl(repl)` (REPL_AOF 1,
/// REPL_REPLICA 2, both 3): the targets both allow, None for nowhere.
fn narrow(t: crate::propagate::Target, repl: u8) -> Option<crate::propagate::Target> {
    use crate::propagate::Target;
    let bits = match t {
        Target::All => 3,
        Target::Aof => 1,
        Target::Replicas => 2,
    } & repl;
    match bits {
        3 => Some(Target::All),
        1 => Some(Target::Aof),
        2 => Some(Target::Replicas),
        _ => None,
    }
}

/// A deny-oom command refused past maxmemory (Redis's shared.oomerr).
const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// What redis.call answers when no script runs on this thread (it can't be reached from a
/// script, only from Lua code kept past its run, e.g. a coroutine).
const NO_SCRIPT: &str = "ERR redis.call is only available while a script runs";

/// Publishes a script's context in its engine's [`RunSlot`] for the length of its run.
struct CurrentScript<'a>(&'a RunSlot);

impl<'a> CurrentScript<'a> {
    fn enter(run: &'a RunSlot, ctx: &mut Ctx<'_>, read_only: bool) -> Self {
        run.current
            .set(Some((ctx as *mut Ctx<'_> as *mut (), read_only)));
        CurrentScript(run)
    }
}

impl Drop for CurrentScript<'_> {
    fn drop(&mut self) {
        self.0.current.set(None);
    }
}

/// Runs `f` on the running script's context (None when there is none, or when a call of
/// it is already underway: redis.call can't nest, but the check keeps the `&mut` unique
/// whatever Lua does).
fn with_current<R>(run: &RunSlot, f: impl FnOnce(&mut Ctx<'_>, bool) -> R) -> Option<R> {
    let (p, read_only) = run.current.take()?;
    // SAFETY: `p` was made by CurrentScript::enter from the `&mut Ctx` call_core holds for
    // the whole xpcall, during which call_core itself doesn't touch it; `take` above
    // means no other &mut made from it is alive, and it's cleared (Drop) before call_core
    // uses its context again.
    let ctx = unsafe { &mut *(p as *mut Ctx<'_>) };
    let r = f(ctx, read_only);
    run.current.set(Some((p, read_only)));
    Some(r)
}

/// `redis.call` / `redis.pcall` body: the reply as a Lua value, or the error message.
/// One `redis.call` argument: a Lua string's bytes, or a number as Redis formats it.
enum ArgBuf<'a> {
    Lua(mlua::BorrowedBytes<'a>),
    Owned(Vec<u8>),
}

impl ArgBuf<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            ArgBuf::Lua(b) => b,
            ArgBuf::Owned(v) => v,
        }
    }
}

const BAD_ARG: &str = "ERR Lua redis lib command arguments must be strings or integers";

/// One `redis.call` argument: a string borrowed from Lua, a number as Redis formats it;
/// None for any other type.
fn arg_buf<'a>(lua: &Lua, a: &'a Value) -> mlua::Result<Option<ArgBuf<'a>>> {
    Ok(Some(match a {
        Value::String(s) => ArgBuf::Lua(s.as_bytes()),
        // Redis formats numeric arguments with "%.17g" (not Lua's "%.14g").
        Value::Number(n) if n.is_finite() => {
            ArgBuf::Owned(crate::resp::writer::fmt_g(*n, 17).into())
        }
        // Lua 5.1 numbers are doubles (mlua shows integral ones as Integer).
        Value::Integer(i) => ArgBuf::Owned(crate::resp::writer::fmt_g(*i as f64, 17).into()),
        Value::Number(_) => match lua.coerce_string(a.clone())? {
            Some(s) => ArgBuf::Owned(s.as_bytes().to_vec()),
            None => return Ok(None),
        },
        _ => return Ok(None),
    }))
}

/// `redis.call` with its arguments as the binding's values. Strings are borrowed from Lua
/// (alive in `args` for the whole call), numbers formatted: no copy per argument.
fn call_values(
    lua: &Lua,
    ctx: &mut Ctx<'_>,
    run: &RunSlot,
    args: &MultiValue,
    read_only: bool,
) -> mlua::Result<Result<Value, String>> {
    let mut bufs: smallvec::SmallVec<[ArgBuf<'_>; 8]> = smallvec::SmallVec::new();
    for a in args.iter() {
        match arg_buf(lua, a)? {
            Some(b) => bufs.push(b),
            None => {
                ldb_log(run, |s| s.log_call_error(BAD_ARG));
                run.last_err_counted.set(false);
                return Ok(Err(BAD_ARG.to_string()));
            }
        }
    }
    call_command(lua, ctx, run, &bufs, read_only)
}

/// `redis.call` with more than [`MAX_ARGS`] arguments, packed in `args`: each is copied
/// and its Lua reference dropped before the next is read.
fn call_packed(
    lua: &Lua,
    ctx: &mut Ctx<'_>,
    run: &RunSlot,
    args: &Table,
    read_only: bool,
) -> mlua::Result<Result<Value, String>> {
    let n: usize = args.raw_get("n")?;
    let mut bufs: Vec<ArgBuf<'_>> = Vec::with_capacity(n);
    for i in 1..=n {
        let v: Value = args.raw_get(i)?;
        match arg_buf(lua, &v)? {
            Some(b) => bufs.push(ArgBuf::Owned(b.bytes().to_vec())),
            None => {
                ldb_log(run, |s| s.log_call_error(BAD_ARG));
                run.last_err_counted.set(false);
                return Ok(Err(BAD_ARG.to_string()));
            }
        }
    }
    call_command(lua, ctx, run, &bufs, read_only)
}

fn call_command(
    lua: &Lua,
    ctx: &mut Ctx<'_>,
    run: &RunSlot,
    bufs: &[ArgBuf<'_>],
    read_only: bool,
) -> mlua::Result<Result<Value, String>> {
    let fail = |m: &str| -> mlua::Result<Result<Value, String>> {
        ldb_log(run, |s| s.log_call_error(m));
        run.last_err_counted.set(false);
        Ok(Err(m.to_string()))
    };
    if bufs.is_empty() {
        return fail("ERR Please specify at least one argument for this redis lib call");
    }
    let argv: smallvec::SmallVec<[&[u8]; 8]> = bufs.iter().map(|b| b.bytes()).collect();
    ldb_log(run, |s| s.log_command(&argv));
    // Refusals from here on count in errorstats (and as the command's rejected call), as
    // Redis's scriptCall does.
    let unknown = |ctx: &mut Ctx<'_>, m: &str| {
        crate::cmd::count_error(ctx.srv, ctx.cl, m.as_bytes());
        let r = fail(m);
        run.last_err_counted.set(true);
        r
    };
    let Some(cmd) = table().get(argv[0]) else {
        return unknown(ctx, "ERR Unknown Redis command called from script");
    };
    let cmd = match table().resolve(&argv) {
        Ok(c) => c,
        Err(_) if !cmd.subcommands.is_empty() => cmd,
        Err(e) => return unknown(ctx, &e.to_string()),
    };
    let fail = |ctx: &mut Ctx<'_>, m: &str| {
        crate::cmd::count_rejected(ctx.srv, ctx.cl, cmd, m.as_bytes());
        let r = fail(m);
        run.last_err_counted.set(true);
        r
    };
    if !cmd.arity_ok(argv.len()) {
        return fail(
            ctx,
            "ERR Wrong number of args calling Redis command from script",
        );
    }
    // DEBUG SET-DISABLE-DENY-SCRIPTS 1 (Redis's test suites) lets `noscript` commands run;
    // the ones that change the connection's own state (MULTI, WATCH...) stay refused.
    let deny = !ctx
        .srv
        .debug
        .disable_deny_scripts
        .load(std::sync::atomic::Ordering::Relaxed);
    if cmd.has(flags::CONN) || (deny && (cmd.has(flags::NOSCRIPT) || noscript_sub(cmd, &argv))) {
        return fail(ctx, "ERR This Redis command is not allowed from script");
    }
    // A replica whose link is down and must not serve stale data runs only stale-flagged
    // commands from an allow-stale script (Redis's scriptVerifyAllowStale).
    if !cmd.has(flags::STALE) && !ctx.cl.from_master && stale_replica(ctx.srv) {
        return fail(ctx, "ERR Can not execute the command on a stale replica");
    }
    // The caller's ACL permissions (Redis's scriptVerifyACL, before the write checks).
    if let Some(e) = crate::cmd::acl::check_script_call(ctx.srv, ctx.cl, cmd, &argv) {
        return fail(ctx, &e);
    }
    // May-replicate commands (PUBLISH, PFCOUNT) count as writes here, as in Redis: that is
    // what lets read-only scripts run during CLIENT PAUSE WRITE.
    if (cmd.has(flags::WRITE) || crate::cmd::may_replicate(cmd)) && read_only {
        return fail(
            ctx,
            "ERR Write commands are not allowed from read-only scripts.",
        );
    }
    if cmd.has(flags::WRITE) && !run.wrote.get() {
        if let Some(e) = crate::repl::deny(ctx.srv, ctx.cl, cmd) {
            return fail(ctx, e);
        }
        // MISCONF while the disk cannot persist (redis's scriptVerifyWriteCommandAllow).
        if let Some(e) = crate::persist::writes_denied(ctx.srv, ctx.cl) {
            return fail(ctx, &e.to_string());
        }
    }
    if run.oom.get() && cmd.has(flags::DENYOOM) {
        return fail(ctx, OOM);
    }
    // Set where Redis's scriptCall sets it: past the write and OOM checks, before the
    // cluster one, whether or not the command then succeeds.
    if cmd.has(flags::WRITE) {
        run.wrote.set(true);
    }
    if let Some(e) = cluster::check_local(ctx, cmd, &argv) {
        return fail(ctx, e);
    }
    if let Some(slot) = run
        .slot_rule
        .get()
        .filter(|_| ctx.srv.cluster.get().is_some())
    {
        let mut idx = Vec::new();
        cmd.key_indices(&argv, &mut idx);
        if let Some(&i) = idx.first() {
            let s = crate::slot::key_hash_slot(argv[i]) as i32;
            if slot != -1 && slot != s {
                return fail(
                    ctx,
                    "ERR Script attempted to access keys that do not hash to the same slot",
                );
            }
            run.slot_rule.set(Some(s));
        }
    }
    if cmd.has(flags::WRITE) {
        // From now on SCRIPT KILL answers UNKILLABLE (as Redis's SCRIPT_WRITE_DIRTY), and
        // maxmemory no longer stops the script half-way.
        ctx.srv.scripts.busy.note_write();
        run.oom.set(false);
    }
    // The reply is read back from `buf` below: written there whole, never shared.
    let at = ctx.out.buf.len();
    let shares = std::mem::replace(&mut ctx.out.shares, false);
    ctx.out.resp3 = run.resp.get() == 3;
    ctx.ks.db = ctx.cl.db;
    let propagated = ctx.ks.fx.exec_writes.len();
    crate::cmd::run_locked(ctx, cmd, &argv);
    // redis.set_repl: REPL_NONE keeps this write from replicas and the AOF, REPL_AOF and
    // REPL_REPLICA send it to one of them (intersected with where the command itself
    // goes: PUBLISH reaches replicas only).
    let repl = run.repl.get();
    if repl != 3 {
        let writes = &mut ctx.ks.fx.exec_writes;
        let tail = writes.split_off(propagated.min(writes.len()));
        writes.extend(
            tail.into_iter()
                .filter_map(|(db, c, t)| narrow(t, repl).map(|t| (db, c, t))),
        );
    }
    if cmd.has(flags::READONLY) && !cmd.has(flags::PUBSUB) {
        let keys = run.tracked_keys.borrow();
        if !keys.is_empty() {
            crate::tracking::remember(ctx.srv, ctx.cl.id, keys.iter().map(|k| &k[..]));
        }
    }
    // INFO commandstats counts commands scripts run, as EXEC does for queued ones.
    cmd.stats
        .live()
        .calls
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut pos = at;
    let parsed = convert::parse_reply(lua, &ctx.out.buf, &mut pos, true);
    ldb_log(run, |s| {
        s.log_reply(ctx.out.buf.get(at..).unwrap_or_default())
    });
    ctx.out.buf.truncate(at);
    ctx.out.shares = shares;
    match parsed? {
        Parsed::Val(v) => Ok(Ok(v)),
        Parsed::Err(m) => {
            // The command's failure was counted by run_locked.
            run.last_err_counted.set(true);
            Ok(Err(m))
        }
    }
}
