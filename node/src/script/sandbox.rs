//! The scripting sandbox Redis 7.0 gives a script: base/table/string/math libraries without
//! file or module access, a `redis` library, and read-only globals and library tables
//! (Redis patches Lua for read-only tables; plain Lua 5.1 gets proxies with `__newindex`).

use mlua::{Lua, LuaOptions, MultiValue, StdLib, Table, Value};

/// Lua-side helpers and the protection of the globals. Gets `lasterr` (the message of the
/// last failing `redis.call`) and the `real` globals table; returns the proxy environment.
const SEAL: &str = r#"
local lasterr, real = ...
-- pcall(redis.call, ...) sees the command's error message as a string, as in Redis 7.0
-- (a failing Rust callback raises an opaque userdata).
local rawpcall = pcall
local function fix(ok, ...)
  if not ok then
    local e = ...
    if type(e) == 'userdata' then
      -- A library's (cmsgpack, struct, cjson) error: its message, as a C library raises it.
      local m = string.match(tostring(e), '^runtime error: (.-)\nstack traceback:')
      e = m or lasterr() or tostring(e)
    end
    return false, e
  end
  return ok, ...
end
real.pcall = function(f, ...) return fix(rawpcall(f, ...)) end
local redis = real.redis
redis.error_reply = function(e)
  if type(e) ~= 'string' then return {err = 'ERR wrong number or type of arguments'} end
  if string.sub(e, 1, 1) == '-' then e = string.sub(e, 2) end
  if not string.find(e, ' ', 1, true) then e = 'ERR ' .. e end
  return {err = e}
end
redis.status_reply = function(s)
  if type(s) ~= 'string' then return {err = 'ERR wrong number or type of arguments'} end
  return {ok = s}
end
redis.replicate_commands = function() return true end
redis.set_repl = function() end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3

-- Read-only proxies -> the table each stands for.
local protected = setmetatable({}, {__mode = 'k'})
local function ro() error('Attempt to modify a readonly table', 2) end
local function protect(t)
  local p = setmetatable({}, {__index = t, __newindex = ro})
  protected[p] = t
  return p
end
for _, name in ipairs({'redis', 'string', 'table', 'math', 'cjson', 'bit', 'cmsgpack', 'struct'}) do
  real[name] = protect(real[name])
end
-- A script's globals: reads fall through to `real` (a table __index, so a found global
-- costs no function call), whose own __index raises Redis's error for a missing one;
-- writes are refused. getmetatable(_G) shows a look-alike that doesn't lead to `real`.
local function missing(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
setmetatable(real, {__index = missing})
local env = setmetatable({}, {
  __index = real,
  __newindex = ro,
  __metatable = {__index = missing, __newindex = ro},
})
protected[env] = real
real._G = env
local rawset0 = rawset
real.rawset = function(t, k, v)
  if protected[t] then error('Attempt to modify a readonly table', 0) end
  return rawset0(t, k, v)
end
local setmetatable0 = setmetatable
real.setmetatable = function(t, mt)
  if protected[t] then error('Attempt to modify a readonly table', 0) end
  return setmetatable0(t, mt)
end
-- pairs, next and rawget see through the proxies (Redis's read-only tables are real
-- tables): C functions set up by `build`, which finds the proxies here.
return env, protected
"#;

/// A Lua state with the sandbox: returns it with the real globals table (KEYS/ARGV and
/// `xpcall` live there), the real `redis` table (call/pcall are set on it per run).
pub fn build(lasterr: impl Fn() -> Option<String> + 'static) -> mlua::Result<(Lua, Table, Table)> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH,
        LuaOptions::default(),
    )?;
    let g = lua.globals();
    for name in [
        "dofile", "loadfile", "print", "setfenv", "getfenv", "newproxy",
    ] {
        g.raw_set(name, Value::Nil)?;
    }
    let redis = lua.create_table()?;
    redis.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(mlua::Error::RuntimeError(
                    "wrong number of arguments".into(),
                ));
            }
            let s = lua
                .coerce_string(args[0].clone())?
                .map(|s| s.as_bytes().to_vec())
                .unwrap_or_default();
            Ok(super::sha1_hex(&s))
        })?,
    )?;
    redis.raw_set("acl_check_cmd", lua.create_function(acl_check_cmd)?)?;
    for (i, n) in ["LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"]
        .iter()
        .enumerate()
    {
        redis.raw_set(*n, i as i64)?;
    }
    redis.raw_set("log", lua.create_function(log)?)?;
    redis.raw_set(
        "setresp",
        lua.create_function(|_, args: MultiValue| {
            let n = match args.front() {
                Some(Value::Integer(n)) if args.len() == 1 => *n as f64,
                Some(Value::Number(n)) if args.len() == 1 => *n,
                _ => {
                    return Err(mlua::Error::RuntimeError(
                        "redis.setresp() requires one argument.".into(),
                    ))
                }
            };
            if n == 2.0 || n == 3.0 {
                super::convert::SCRIPT_RESP.with(|r| r.set(n as u8));
                Ok(())
            } else {
                Err(mlua::Error::RuntimeError(
                    "RESP version must be 2 or 3.".into(),
                ))
            }
        })?,
    )?;
    redis.raw_set("REDIS_VERSION", crate::REDIS_VERSION)?;
    redis.raw_set("REDIS_VERSION_NUM", version_num(crate::REDIS_VERSION))?;
    g.raw_set("redis", redis.clone())?;
    g.raw_set("cjson", super::cjson::library(&lua)?)?;
    g.raw_set("bit", super::bit::library(&lua)?)?;
    g.raw_set("cmsgpack", super::cmsgpack::library(&lua)?)?;
    g.raw_set("struct", super::structlib::library(&lua)?)?;
    let lasterr = lua.create_function(move |_, ()| Ok(lasterr()))?;
    let (env, protected): (Table, Table) = lua
        .load(SEAL)
        .set_name("=redis")
        .call((lasterr, g.clone()))?;
    lua.set_named_registry_value(&PROTECTED.to_string_lossy(), protected)?;
    // SAFETY: the three follow the lua_CFunction protocol (see `see_through_next`).
    let next = unsafe { lua.create_c_function(see_through_next)? };
    lua.set_named_registry_value(&NEXT.to_string_lossy(), &next)?;
    g.raw_set("next", next)?;
    g.raw_set("pairs", unsafe {
        lua.create_c_function(see_through_pairs)?
    })?;
    g.raw_set("rawget", unsafe {
        lua.create_c_function(see_through_rawget)?
    })?;
    lua.set_globals(env)?;
    Ok((lua, g, redis))
}

/// "7.0.15" -> 0x07000f, as `redis.REDIS_VERSION_NUM`.
fn version_num(v: &str) -> i64 {
    v.split('.')
        .take(3)
        .map(|p| p.parse::<i64>().unwrap_or(0))
        .fold(0, |acc, p| (acc << 8) | (p & 0xff))
}

/// Registry keys: the proxy -> table map of the read-only tables, and [`see_through_next`].
const PROTECTED: &std::ffi::CStr = c"tessera.protected";
const NEXT: &std::ffi::CStr = c"tessera.next";

/// Replaces the table at stack index 1 by the one it stands for, when it is a read-only
/// proxy.
///
/// # Safety
/// `l` is in a C function with index 1 a table and 2 free stack slots.
unsafe fn unproxy(l: *mut mlua::ffi::lua_State) {
    use mlua::ffi;
    ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, PROTECTED.as_ptr());
    ffi::lua_pushvalue(l, 1);
    ffi::lua_rawget(l, -2);
    if ffi::lua_type(l, -1) == ffi::LUA_TTABLE {
        ffi::lua_replace(l, 1);
        ffi::lua_pop(l, 1);
    } else {
        ffi::lua_pop(l, 2);
    }
}

/// `next` over what a read-only proxy stands for. C functions, like the builtins they
/// replace: argument errors are raised at the caller's line and name the function as the
/// script called it, and a tail call keeps the script's frame.
///
/// # Safety
/// Called by Lua as a lua_CFunction; errors longjmp across it (nothing here needs Drop).
unsafe extern "C-unwind" fn see_through_next(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::lua_settop(l, 2);
    unproxy(l);
    if ffi::lua_next(l, 1) != 0 {
        2
    } else {
        ffi::lua_pushnil(l);
        1
    }
}

/// `pairs`: (next, t, nil) with the see-through `next`, so the iteration state stays the
/// proxy (the script never holds the real table).
///
/// # Safety
/// As [`see_through_next`].
unsafe extern "C-unwind" fn see_through_pairs(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::lua_settop(l, 1);
    ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, NEXT.as_ptr());
    ffi::lua_pushvalue(l, 1);
    ffi::lua_pushnil(l);
    3
}

/// `rawget` through a read-only proxy.
///
/// # Safety
/// As [`see_through_next`].
unsafe extern "C-unwind" fn see_through_rawget(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::luaL_checkany(l, 2);
    ffi::lua_settop(l, 2);
    unproxy(l);
    ffi::lua_rawget(l, 1);
    1
}

/// `redis.acl_check_cmd(command, args...)`: whether the script's user may run the command.
/// Without ACL users every connection is the `default` user, allowed everything, so this is
/// true for any command (and subcommand) the server has, with Redis's errors otherwise.
fn acl_check_cmd(lua: &Lua, args: MultiValue) -> mlua::Result<bool> {
    let rt = |m: &str| Err(mlua::Error::RuntimeError(m.into()));
    if args.is_empty() {
        return rt("Please specify at least one argument for this redis lib call");
    }
    if !args
        .iter()
        .all(|a| matches!(a, Value::String(_) | Value::Integer(_) | Value::Number(_)))
    {
        return rt("Lua redis lib command arguments must be strings or integers");
    }
    // Only the name and, for a container command, the subcommand matter.
    let mut names = Vec::with_capacity(2);
    for a in args.iter().take(2) {
        match lua.coerce_string(a.clone())? {
            Some(s) => names.push(s.as_bytes().to_vec()),
            None => return rt("Lua redis lib command arguments must be strings or integers"),
        }
    }
    let view: Vec<&[u8]> = names.iter().map(|n| n.as_slice()).collect();
    match crate::cmd::table().resolve(&view) {
        Ok(_) => Ok(true),
        Err(_) => rt("Invalid command passed to redis.acl_check_cmd()"),
    }
}

/// `redis.log(level, message...)`: into the server's log (tracing), with Redis's checks.
fn log(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    if args.len() < 2 {
        return Err(mlua::Error::RuntimeError(
            "redis.log() requires two arguments or more.".into(),
        ));
    }
    let level = match &args[0] {
        Value::Integer(n) => *n as f64,
        Value::Number(n) => *n,
        _ => {
            return Err(mlua::Error::RuntimeError(
                "First argument must be a number.".into(),
            ))
        }
    };
    if !(0.0..=3.0).contains(&level) {
        return Err(mlua::Error::RuntimeError("Invalid debug level.".into()));
    }
    let mut msg = String::new();
    for (i, a) in args.iter().skip(1).enumerate() {
        if i > 0 {
            msg.push(' ');
        }
        if let Some(s) = lua.coerce_string(a.clone())? {
            msg.push_str(&String::from_utf8_lossy(&s.as_bytes()));
        }
    }
    match level as i64 {
        3 => tracing::warn!(target: "script", "{msg}"),
        2 => tracing::info!(target: "script", "{msg}"),
        _ => tracing::debug!(target: "script", "{msg}"),
    }
    Ok(())
}
