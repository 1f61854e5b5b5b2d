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

local protected = setmetatable({}, {__mode = 'k'})
local function ro() error('Attempt to modify a readonly table', 2) end
local function protect(t)
  local p = setmetatable({}, {__index = t, __newindex = ro})
  protected[p] = true
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
protected[env] = true
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
return env
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
    let env: Table = lua
        .load(SEAL)
        .set_name("=redis")
        .call((lasterr, g.clone()))?;
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
