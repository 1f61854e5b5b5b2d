//! Each thread's function Lua state: loading a library's code (collecting what it passes
//! to `redis.register_function`) and calling a registered function through the EVAL
//! machinery ([`crate::script::call_core`]).

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use mlua::{Function, Lua, MultiValue, Table, Value};

use super::{valid_name, FuncInfo, Functions, Library, ALLOW_CROSS_SLOT, FLAG_NAMES};
use crate::cmd::{CmdError, Ctx};
use crate::script::{call_core, innermost, new_engine, Call, Engine, Origin, Validity};

/// The functions' environment. Gets the sandbox's real globals and the load-time API table;
/// returns the environment and a switch between load time (only a restricted `redis`) and
/// run time (the sandbox globals).
const ENV: &str = r#"
local real, api = ...
local rawget = rawget
local loading = false
local function ro() error('Attempt to modify a readonly table', 2) end
local lredis = setmetatable({}, {
  __index = function(_, k)
    local v = api[k]
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = ro,
})
local env = setmetatable({}, {
  __index = function(_, k)
    local v
    if loading then
      if k == 'redis' then v = lredis end
    else
      v = rawget(real, k)
    end
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = ro,
})
return env, function(b) loading = b end
"#;

/// How long a library's code may run at load time (Redis's LOAD_TIMEOUT_MS).
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// A library compiled on this thread: the registry's entry it came from, its callbacks.
type CompiledLib = (Arc<Library>, hashbrown::HashMap<String, Function>);

struct FnEngine {
    base: Engine,
    env: Table,
    set_loading: Function,
    /// The load-time `redis` table (`register_function` is set on it during a load).
    api: Table,
    /// `register_function` outside a load: a library may keep the load-time table and
    /// call it from a function, which Redis answers with an error of its own.
    outside_load: Function,
    /// Libraries compiled here, by name, valid for one server's registry generation.
    compiled: RefCell<(Validity<Functions>, hashbrown::HashMap<String, CompiledLib>)>,
    /// The server this state's heap is charged to (INFO used_memory_vm_functions), and how
    /// much was charged.
    charged: RefCell<(Weak<Functions>, usize)>,
}

thread_local! {
    /// This thread's function Lua state: a per-thread cache (Lua states are not Send; the
    /// registry it compiles from is the server's), no contract between layers.
    static FN_ENGINE: RefCell<Option<FnEngine>> = const { RefCell::new(None) };
}

impl FnEngine {
    /// Charges this state's heap to `fns` (moving it from the server it was charged to).
    fn report_memory(&self, fns: &Arc<Functions>) {
        let now = self.base.lua.used_memory();
        let mut c = self.charged.borrow_mut();
        let (owner, last) = &mut *c;
        if !std::ptr::eq(owner.as_ptr(), Arc::as_ptr(fns)) {
            if let Some(old) = owner.upgrade() {
                old.vm_bytes.fetch_sub(*last, Ordering::Relaxed);
            }
            *owner = Arc::downgrade(fns);
            *last = 0;
        }
        if now >= *last {
            fns.vm_bytes.fetch_add(now - *last, Ordering::Relaxed);
        } else {
            fns.vm_bytes.fetch_sub(*last - now, Ordering::Relaxed);
        }
        *last = now;
    }
}

fn new_fn_engine() -> mlua::Result<FnEngine> {
    let base = new_engine()?;
    let lua = &base.lua;
    let api = lua.create_table()?;
    for k in [
        "log",
        "LOG_DEBUG",
        "LOG_VERBOSE",
        "LOG_NOTICE",
        "LOG_WARNING",
        "REDIS_VERSION",
        "REDIS_VERSION_NUM",
    ] {
        api.raw_set(k, base.redis.raw_get::<Value>(k)?)?;
    }
    let (env, set_loading): (Table, Function) = lua
        .load(ENV)
        .set_name("=function_env")
        .call((base.globals.clone(), api.clone()))?;
    // SAFETY: `outside_load` follows the lua_CFunction protocol (see its doc).
    let outside_load = unsafe { lua.create_c_function(outside_load)? };
    api.raw_set("register_function", outside_load.clone())?;
    Ok(FnEngine {
        base,
        env,
        set_loading,
        api,
        outside_load,
        compiled: RefCell::new((Validity::new(), hashbrown::HashMap::new())),
        charged: RefCell::new((Weak::new(), 0)),
    })
}

fn with_fn_engine<R>(f: impl FnOnce(&FnEngine) -> Result<R, CmdError>) -> Result<R, CmdError> {
    FN_ENGINE.with(|cell| {
        if cell.borrow().is_none() {
            let e = new_fn_engine()
                .map_err(|e| CmdError::msg(format!("ERR Lua initialisation failed: {e}")))?;
            *cell.borrow_mut() = Some(e);
        }
        match cell.borrow().as_ref() {
            Some(e) => f(e),
            None => Err(CmdError::msg("ERR Lua unavailable")),
        }
    })
}

/// Runs a library's code (after its shebang line) on this thread: the functions it
/// registered, with Redis's compile and registration errors.
pub fn compile_library(
    fns: &Arc<Functions>,
    src: &[u8],
) -> Result<Vec<(FuncInfo, Function)>, CmdError> {
    with_fn_engine(|fe| {
        let r = fe.compile(src);
        fe.report_memory(fns);
        r
    })
}

impl FnEngine {
    fn compile(&self, src: &[u8]) -> Result<Vec<(FuncInfo, Function)>, CmdError> {
        let lua = &self.base.lua;
        let chunk = lua
            .load(src)
            .set_name("@user_function")
            .set_mode(mlua::ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                let m = match e {
                    mlua::Error::SyntaxError { message, .. } => message,
                    other => other.to_string(),
                };
                CmdError::msg(format!("ERR Error compiling function: {m}"))
            })?;
        let collected = RefCell::new(Vec::new());
        let fail = |e: mlua::Error| {
            let m = innermost(&e);
            // mlua appends the Lua traceback to errors raised by Lua code.
            let m = m.split("\nstack traceback:").next().unwrap_or_default();
            CmdError::msg(format!("ERR Error registering functions: ERR {m}"))
        };
        self.set_loading.call::<()>(true).map_err(fail)?;
        // Redis stops a library's load after 500 ms; the busy hook comes back afterwards.
        let deadline = std::time::Instant::now() + LOAD_TIMEOUT;
        let timeout = mlua::HookTriggers::new().every_nth_instruction(10_000);
        lua.set_hook(timeout, move |_, _| {
            if std::time::Instant::now() > deadline {
                Err(mlua::Error::RuntimeError("FUNCTION LOAD timeout".into()))
            } else {
                Ok(mlua::VmState::Continue)
            }
        })
        .map_err(fail)?;
        let r = lua.scope(|scope| {
            let rf = scope.create_function(|lua, args: MultiValue| {
                let f = register_args(lua, args)?;
                let mut c = collected.borrow_mut();
                if !valid_name(&f.0.name) {
                    return Err(mlua::Error::RuntimeError(
                        "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into(),
                    ));
                }
                if c
                    .iter()
                    .any(|(i, _): &(FuncInfo, Function)| i.name == f.0.name)
                {
                    return Err(mlua::Error::RuntimeError(
                        "Function already exists in the library".into(),
                    ));
                }
                c.push(f);
                Ok(())
            })?;
            self.api.raw_set("register_function", rf)?;
            let r = chunk.call::<()>(());
            self.api
                .raw_set("register_function", self.outside_load.clone())?;
            r
        });
        lua.remove_hook();
        crate::script::busy::install_busy_hook(lua);
        self.set_loading.call::<()>(false).map_err(fail)?;
        r.map_err(fail)?;
        Ok(collected.into_inner())
    }

    /// The callback of `name` in `lib`, compiling the library here if needed.
    fn function(
        &self,
        fns: &Arc<Functions>,
        lib: &Arc<Library>,
        name: &str,
    ) -> Result<Function, CmdError> {
        let mut c = self.compiled.borrow_mut();
        let gen = fns.gen.load(Ordering::Acquire);
        if !c.0.renew(fns, gen) {
            c.1 = hashbrown::HashMap::new();
        }
        let fresh = c.1.get(&lib.name).is_some_and(|(l, _)| Arc::ptr_eq(l, lib));
        if !fresh {
            let nl = memchr::memchr(b'\n', &lib.code).unwrap_or(lib.code.len());
            let funcs = self.compile(&lib.code[nl..])?;
            let map = funcs.into_iter().map(|(i, f)| (i.name, f)).collect();
            c.1.insert(lib.name.clone(), (lib.clone(), map));
        }
        c.1.get(&lib.name)
            .and_then(|(_, m)| m.get(name))
            .cloned()
            .ok_or_else(|| CmdError::msg("ERR Function not found"))
    }
}

/// `redis.register_function` called outside FUNCTION LOAD: raises Redis's error as a table
/// (reported as is, without the "ERR " and position a string error gets). A C function, so
/// that `return lib.register_function(...)` keeps the caller's frame (and its line) on the
/// stack, as Redis's C function does.
///
/// # Safety
/// A lua_CFunction: the error longjmps across it (nothing here needs Drop); it uses 3 of the
/// LUA_MINSTACK free slots.
unsafe extern "C-unwind" fn outside_load(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    ffi::lua_createtable(l, 0, 1);
    ffi::lua_pushstring(
        l,
        c"ERR redis.register_function can only be called on FUNCTION LOAD command".as_ptr(),
    );
    ffi::lua_setfield(l, -2, c"err".as_ptr());
    ffi::lua_error(l)
}

fn rt_err<T>(m: &str) -> mlua::Result<T> {
    Err(mlua::Error::RuntimeError(m.to_string()))
}

/// A name argument: a string, or a number as Lua's `lua_isstring` accepts it.
fn name_of(lua: &Lua, v: &Value) -> mlua::Result<Option<String>> {
    match v {
        Value::String(s) => Ok(Some(String::from_utf8_lossy(&s.as_bytes()).into_owned())),
        Value::Integer(_) | Value::Number(_) => Ok(lua
            .coerce_string(v.clone())?
            .map(|s| String::from_utf8_lossy(&s.as_bytes()).into_owned())),
        _ => Ok(None),
    }
}

/// `redis.register_function(name, callback)` or `redis.register_function{function_name=,
/// callback=, flags=, description=}`, with Redis 7.0's argument errors.
fn register_args(lua: &Lua, args: MultiValue) -> mlua::Result<(FuncInfo, Function)> {
    match args.len() {
        1 => {
            let Some(Value::Table(t)) = args.front() else {
                return rt_err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
            };
            named_args(lua, t)
        }
        2 => {
            let Some(name) = name_of(lua, &args[0])? else {
                return rt_err("first argument to redis.register_function must be a string");
            };
            let Value::Function(f) = &args[1] else {
                return rt_err("second argument to redis.register_function must be a function");
            };
            let info = FuncInfo {
                name,
                desc: None,
                flags: 0,
            };
            Ok((info, f.clone()))
        }
        _ => rt_err("wrong number of arguments to redis.register_function"),
    }
}

fn named_args(lua: &Lua, t: &Table) -> mlua::Result<(FuncInfo, Function)> {
    let (mut name, mut desc, mut cb, mut flags) = (None, None, None, 0u8);
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair?;
        let Value::String(k) = k else {
            return rt_err("named argument key given to redis.register_function is not a string");
        };
        match &k.as_bytes()[..] {
            b"function_name" => {
                match name_of(lua, &v)? {
                    Some(n) => name = Some(n),
                    None => return rt_err(
                        "function_name argument given to redis.register_function must be a string",
                    ),
                }
            }
            b"description" => match lua.coerce_string(v.clone())? {
                Some(s) if matches!(v, Value::String(_) | Value::Integer(_) | Value::Number(_)) => {
                    desc = Some(Bytes::copy_from_slice(&s.as_bytes()))
                }
                _ => {
                    return rt_err(
                        "description argument given to redis.register_function must be a string",
                    )
                }
            },
            b"callback" => match v {
                Value::Function(f) => cb = Some(f),
                _ => {
                    return rt_err(
                        "callback argument given to redis.register_function must be a function",
                    )
                }
            },
            b"flags" => {
                let Value::Table(ft) = v else {
                    return rt_err("flags argument to redis.register_function must be a table representing function flags");
                };
                for fv in ft.sequence_values::<Value>() {
                    let bit = match fv? {
                        Value::String(s) => FLAG_NAMES
                            .iter()
                            .position(|n| n.as_bytes() == &s.as_bytes()[..]),
                        _ => None,
                    };
                    match bit {
                        Some(b) => flags |= 1 << b,
                        None => return rt_err("unknown flag given"),
                    }
                }
            }
            _ => return rt_err("unknown argument given to redis.register_function"),
        }
    }
    let Some(name) = name else {
        return rt_err("redis.register_function must get a function name argument");
    };
    let Some(cb) = cb else {
        return rt_err("redis.register_function must get a callback argument");
    };
    Ok((FuncInfo { name, desc, flags }, cb))
}

/// Calls `info` (a function of `lib`) with `ctx`'s locks held (FCALL's core).
pub fn run(
    ctx: &mut Ctx<'_>,
    fns: &Arc<Functions>,
    lib: &Arc<Library>,
    info: &FuncInfo,
    keys: &[&[u8]],
    argv: &[&[u8]],
    read_only: bool,
) -> Result<(), CmdError> {
    with_fn_engine(|fe| {
        let f = fe.function(fns, lib, &info.name)?;
        // Without allow-cross-slot-keys a function keeps to the slot of its keys.
        let rule = (info.flags & ALLOW_CROSS_SLOT == 0).then(|| {
            keys.first()
                .map_or(-1, |k| crate::slot::key_hash_slot(k) as i32)
        });
        fe.base.run.slot_rule.set(rule);
        let call = Call {
            f: &f,
            keys,
            argv,
            as_globals: false,
        };
        let r = call_core(&fe.base, ctx, call, read_only, Origin::Function(&info.name));
        fe.base.run.slot_rule.set(None);
        fe.report_memory(fns);
        r
    })
}
