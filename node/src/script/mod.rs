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

    /// INFO's used_memory_lua, through the server's state (see [`eval_vm_memory`]).
    pub fn eval_vm_memory(&self) -> usize {
        eval_vm_memory()
    }

    /// (scripts, bytes of their shas and bodies) in the cache: INFO's
    /// number_of_cached_scripts and used_memory_scripts_eval.
    pub fn cache_stats(&self) -> (usize, usize) {
        let c = self.cache.lock();
        (c.len(), c.iter().map(|(k, v)| k.len() + v.len()).sum())
    }
}

/// Heap of the calling thread's EVAL Lua state (0 before its first script): INFO's
/// used_memory_lua. Each worker thread has its own state; this is the one INFO runs on.
pub fn eval_vm_memory() -> usize {
    ENGINE.with(|e| e.borrow().as_ref().map_or(0, |e| e.lua.used_memory()))
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
}

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
        let t = lua.create_table()?;
        t.raw_set("msg", msg)?;
        t.raw_set("line", line)?;
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
    fn as_table(lua: &Lua, m: String) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        t.raw_set("err", m)?;
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
            Some(r) => r?.or_else(|m| as_table(lua, m)),
            None => no_script(),
        }
    })?;
    let slot = run.clone();
    let pcall_many = lua.create_function(move |lua, args: Table| {
        match with_current(&slot, |c, ro| call_packed(lua, c, &slot, &args, ro)) {
            Some(r) => r?.or_else(|m| as_table(lua, m)),
            None => no_script(),
        }
    })?;
    redis.raw_set("call", by_arg_count(&lua, call, call_many)?)?;
    redis.raw_set("pcall", by_arg_count(&lua, pcall, pcall_many)?)?;
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
        // A script that declares writes (a shebang without no-writes) is refused up front
        // while the disk cannot persist: redis flags such an EVAL (or EVAL_RO) a write.
        if sflags.shebang && !sflags.no_writes {
            if let Some(e) = crate::persist::writes_denied(ctx.srv, ctx.cl) {
                return Err(CmdError::msg(e.to_string()));
            }
        }
        if sflags.no_cluster && ctx.srv.cluster.get().is_some() {
            return Err(CmdError::msg(
                "ERR Can not run script on cluster, 'no-cluster' flag is set.",
            ));
        }
        let read_only = read_only || sflags.no_writes;
        let call = Call {
            f: &f,
            keys,
            argv,
            as_globals: true,
        };
        call_core(e, ctx, call, read_only, Origin::Script(sha))
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
        let result = invoke(e, &call);
        if tracks {
            e.run.tracked_keys.borrow_mut().clear();
        }
        drop(current);
        // A killed script left its hook firing on every line (busy::Busy::hook).
        let killed = scripts.busy.kill_requested();
        drop(running);
        if killed {
            busy::install_busy_hook(&e.lua);
        }
        // The reply is in the client's protocol, whatever the script's redis.call used.
        ctx.out.resp3 = was_resp3;
        match &result {
            Ok((true, v)) => convert::write_value(ctx.out, v, e.run.resp.get() == 3),
            Ok((false, v)) => {
                let (msg, line) = match v {
                    Value::Table(t) => (
                        t.raw_get::<String>("msg").unwrap_or_default(),
                        t.raw_get::<i64>("line").unwrap_or(0),
                    ),
                    _ => ("ERR script failed".to_string(), 0),
                };
                ctx.out.error(&format!("{msg} script: {origin}:{line}."));
            }
            Err(_) => {}
        }
        ctx.in_exec = was_exec;
        ctx.cl.in_script = was_script;
        ctx.cl.db = caller_db;
        ctx.ks.db = caller_db;
        ctx.out.resp3 = was_resp3;
        e.run.last_call_err.borrow_mut().take();
        if !was_exec {
            crate::cmd::propagation::end_exec(ctx);
        }
        result.map(|_| ()).map_err(lua_err)
    }
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
            None => return Ok(Err(BAD_ARG.to_string())),
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
            None => return Ok(Err(BAD_ARG.to_string())),
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
    let fail = |m: &str| -> mlua::Result<Result<Value, String>> { Ok(Err(m.to_string())) };
    if bufs.is_empty() {
        return fail("ERR Please specify at least one argument for this redis lib call");
    }
    let argv: smallvec::SmallVec<[&[u8]; 8]> = bufs.iter().map(|b| b.bytes()).collect();
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
    // DEBUG SET-DISABLE-DENY-SCRIPTS 1 (Redis's test suites) lets `noscript` commands run;
    // the ones that change the connection's own state (MULTI, WATCH...) stay refused.
    let deny = !ctx
        .srv
        .debug
        .disable_deny_scripts
        .load(std::sync::atomic::Ordering::Relaxed);
    if cmd.has(flags::CONN) || (deny && (cmd.has(flags::NOSCRIPT) || noscript_sub(cmd, &argv))) {
        return fail("ERR This Redis command is not allowed from script");
    }
    // A replica whose link is down and must not serve stale data runs only stale-flagged
    // commands from an allow-stale script (Redis's scriptVerifyAllowStale).
    if !cmd.has(flags::STALE) && !ctx.cl.from_master && stale_replica(ctx.srv) {
        return fail("ERR Can not execute the command on a stale replica");
    }
    if cmd.has(flags::WRITE) && read_only {
        return fail("ERR Write commands are not allowed from read-only scripts.");
    }
    if cmd.has(flags::WRITE) {
        if let Some(e) = crate::repl::deny(ctx.srv, ctx.cl, cmd) {
            return fail(e);
        }
        // MISCONF while the disk cannot persist (redis's scriptVerifyWriteCommandAllow).
        if let Some(e) = crate::persist::writes_denied(ctx.srv, ctx.cl) {
            return fail(&e.to_string());
        }
    }
    if let Some(e) = cluster::check_local(ctx, cmd, &argv) {
        return fail(e);
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
                    "ERR Script attempted to access keys that do not hash to the same slot",
                );
            }
            run.slot_rule.set(Some(s));
        }
    }
    if cmd.has(flags::WRITE) {
        // From now on SCRIPT KILL answers UNKILLABLE (as Redis's SCRIPT_WRITE_DIRTY).
        ctx.srv.scripts.busy.note_write();
    }
    let at = ctx.out.len();
    ctx.out.resp3 = run.resp.get() == 3;
    ctx.ks.db = ctx.cl.db;
    let propagated = ctx.ks.fx.exec_writes.len();
    crate::cmd::run_locked(ctx, cmd, &argv);
    // redis.set_repl(redis.REPL_NONE): this write reaches neither replicas nor the AOF.
    // (REPL_AOF and REPL_REPLICA alone still feed both: the feed has no per-target path.)
    if run.repl.get() == 0 {
        ctx.ks.fx.exec_writes.truncate(propagated);
    }
    if cmd.has(flags::READONLY) && !cmd.has(flags::PUBSUB) {
        let keys = run.tracked_keys.borrow();
        if !keys.is_empty() {
            crate::tracking::remember(ctx.srv, ctx.cl.id, keys.iter().map(|k| &k[..]));
        }
    }
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
