//! The scripting sandbox Redis 7.0 gives a script: base/table/string/math libraries without
//! file or module access, a `redis` library, and read-only globals and library tables
//! (Redis patches Lua for read-only tables; plain Lua 5.1 gets proxies with `__newindex`).
//!
//! Hardening as Redis 7.0.15 with its 2025 security fixes (issue 15): every library table,
//! `coroutine` included, is a read-only proxy, and so is every metatable a script can reach
//! (the string metatable, the globals'); chunks load as text only (`loadstring`, `load`,
//! EVAL, FUNCTION LOAD: bytecode is unverified and reads and writes memory); `unpack`
//! counts its range in 64 bits (CVE-2025-46817). `string.dump` stays, as in Redis: what it
//! makes can no longer be loaded.

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
    elseif type(e) == 'table' then
      -- Redis 7.0's pcall answers an error table's `err` field.
      local m = e.err
      if type(m) == 'string' or type(m) == 'number' then e = m end
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
for _, name in ipairs({'redis', 'string', 'table', 'math', 'cjson', 'bit', 'cmsgpack', 'struct', 'coroutine'}) do
  real[name] = protect(real[name])
end
-- The string metatable is shared by every script: method calls go through the read-only
-- `string`, and getmetatable('') shows a read-only view of it (CVE-2025-46818). Redis
-- 7.0.15 answers the same: the table is there, every write fails.
local smt = getmetatable('')
smt.__index = real.string
smt.__metatable = protect(smt)
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
  __metatable = protect({__index = missing, __newindex = ro}),
})
protected[env] = real
real._G = env
-- pairs, next and rawget see through the proxies (Redis's read-only tables are real
-- tables), rawset and setmetatable refuse them: C functions set up by `build`, which
-- finds the proxies here.
return env, protected
"#;

/// A Lua state with the sandbox: returns it with the real globals table (KEYS/ARGV and
/// `xpcall` live there), the real `redis` table (call/pcall are set on it per run).
/// `run`: the engine's run state (`redis.setresp` sets its protocol; the last
/// `redis.call` error is read from it).
pub(crate) fn build(run: std::rc::Rc<super::RunSlot>) -> mlua::Result<(Lua, Table, Table)> {
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
    let slot = run.clone();
    redis.raw_set(
        "acl_check_cmd",
        lua.create_function(move |lua, args: MultiValue| acl_check_cmd(lua, &slot, args))?,
    )?;
    for (i, n) in ["LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"]
        .iter()
        .enumerate()
    {
        redis.raw_set(*n, i as i64)?;
    }
    redis.raw_set("log", lua.create_function(log)?)?;
    let resp_slot = run.clone();
    redis.raw_set(
        "setresp",
        lua.create_function(move |_, args: MultiValue| {
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
                resp_slot.resp.set(n as u8);
                Ok(())
            } else {
                Err(mlua::Error::RuntimeError(
                    "RESP version must be 2 or 3.".into(),
                ))
            }
        })?,
    )?;
    let repl_slot = run.clone();
    redis.raw_set(
        "set_repl",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                // Redis 7.0's text.
                return Err(mlua::Error::RuntimeError(
                    "redis.set_repl() requires two arguments.".into(),
                ));
            }
            // lua_tonumber, then C's cast to int: a non-number is 0 (REPL_NONE).
            let n = args
                .front()
                .and_then(|v| lua.coerce_number(v.clone()).ok().flatten())
                .unwrap_or(0.0);
            let flags = n as i64;
            if flags & !3 != 0 {
                return Err(mlua::Error::RuntimeError(
                    "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."
                        .into(),
                ));
            }
            repl_slot.repl.set(flags as u8);
            Ok(())
        })?,
    )?;
    redis.raw_set("REDIS_VERSION", crate::REDIS_VERSION)?;
    redis.raw_set("REDIS_VERSION_NUM", version_num(crate::REDIS_VERSION))?;
    g.raw_set("redis", redis.clone())?;
    g.raw_set("cjson", super::cjson::library(&lua)?)?;
    g.raw_set("bit", super::bit::library(&lua)?)?;
    g.raw_set("cmsgpack", super::cmsgpack::library(&lua)?)?;
    g.raw_set("struct", super::structlib::library(&lua)?)?;
    // SAFETY: follows the lua_CFunction protocol (see `stacked_pcall`). Set before SEAL,
    // which wraps it as the scripts' `pcall`.
    g.raw_set("pcall", unsafe { lua.create_c_function(stacked_pcall)? })?;
    let lasterr = lua.create_function(move |_, ()| Ok(run.last_call_err.borrow().clone()))?;
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
    // SAFETY: these follow the lua_CFunction protocol (see their docs).
    g.raw_set("getmetatable", unsafe {
        lua.create_c_function(guarded_getmetatable)?
    })?;
    g.raw_set("loadstring", unsafe {
        lua.create_c_function(text_loadstring)?
    })?;
    g.raw_set("load", unsafe { lua.create_c_function(text_load)? })?;
    g.raw_set("unpack", unsafe { lua.create_c_function(checked_unpack)? })?;
    g.raw_set("rawset", unsafe { lua.create_c_function(guarded_rawset)? })?;
    g.raw_set("setmetatable", unsafe {
        lua.create_c_function(guarded_setmetatable)?
    })?;
    // The names chunks compile under stay interned: the parser's copy of its chunk name is
    // then never a fresh, unanchored string the collector could free mid-parse (the
    // CVE-2025-49844 class; the vendored Lua 5.1 parser does not anchor it).
    for name in ["@user_script", "@user_function", "=(load)"] {
        lua.set_named_registry_value(&format!("tessera.chunkname.{name}"), name)?;
    }
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

/// `getmetatable`: a value's `__metatable` field if it has one (the string metatable and
/// the globals' show read-only views), nil for a read-only proxy (as Redis, whose
/// read-only tables have none), else the metatable.
///
/// # Safety
/// As [`see_through_next`].
unsafe extern "C-unwind" fn guarded_getmetatable(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    ffi::luaL_checkany(l, 1);
    ffi::lua_settop(l, 1);
    if ffi::lua_getmetatable(l, 1) == 0 {
        ffi::lua_pushnil(l);
        return 1;
    }
    // [v, mt]
    ffi::lua_pushlstring(l, c"__metatable".as_ptr(), 11);
    ffi::lua_rawget(l, 2);
    if ffi::lua_type(l, -1) != ffi::LUA_TNIL {
        return 1;
    }
    ffi::lua_settop(l, 2);
    if ffi::lua_type(l, 1) == ffi::LUA_TTABLE {
        ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, PROTECTED.as_ptr());
        ffi::lua_pushvalue(l, 1);
        ffi::lua_rawget(l, -2);
        if ffi::lua_type(l, -1) != ffi::LUA_TNIL {
            ffi::lua_pushnil(l);
            return 1;
        }
        ffi::lua_settop(l, 2);
    }
    1
}

/// True when the table at index 1 is a read-only proxy.
///
/// # Safety
/// `l` is in a C function with index 1 a table and 2 free stack slots.
unsafe fn is_proxy(l: *mut mlua::ffi::lua_State) -> bool {
    use mlua::ffi;
    ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, PROTECTED.as_ptr());
    ffi::lua_pushvalue(l, 1);
    ffi::lua_rawget(l, -2);
    let found = ffi::lua_type(l, -1) != ffi::LUA_TNIL;
    ffi::lua_pop(l, 2);
    found
}

/// Raises Redis's read-only error (no position, as Redis's patched Lua raises it).
///
/// # Safety
/// As [`see_through_next`]; does not return.
unsafe fn readonly_error(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    ffi::lua_pushstring(l, c"Attempt to modify a readonly table".as_ptr());
    ffi::lua_error(l)
}

/// `rawset`, refusing the read-only proxies; Lua 5.1's checks and messages otherwise.
///
/// # Safety
/// As [`see_through_next`].
unsafe extern "C-unwind" fn guarded_rawset(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::luaL_checkany(l, 2);
    ffi::luaL_checkany(l, 3);
    ffi::lua_settop(l, 3);
    if is_proxy(l) {
        return readonly_error(l);
    }
    ffi::lua_rawset(l, 1);
    1
}

/// `setmetatable`, refusing the read-only proxies; Lua 5.1's checks and messages otherwise.
///
/// # Safety
/// As [`see_through_next`].
unsafe extern "C-unwind" fn guarded_setmetatable(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    let t = ffi::lua_type(l, 2);
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    if t != ffi::LUA_TNIL && t != ffi::LUA_TTABLE {
        return ffi::luaL_argerror(l, 2, c"nil or table expected".as_ptr());
    }
    ffi::lua_settop(l, 2);
    if is_proxy(l) {
        return readonly_error(l);
    }
    if ffi::luaL_getmetafield(l, 1, c"__metatable".as_ptr()) != 0 {
        return ffi::luaL_error(l, c"cannot change a protected metatable".as_ptr());
    }
    ffi::lua_setmetatable(l, 1);
    1
}

/// The signature byte that starts a precompiled chunk (LUA_SIGNATURE[0]).
const BYTECODE_MARK: u8 = 0x1b;

/// Compiles the string at `src` as text under `name` and leaves the function or the error
/// message on top; returns the status. A chunk starting with the bytecode mark is parsed
/// as text too, as Redis's patched parser does (it never undumps): Lua's lexer then fails
/// on the first byte with Redis's very error, "unexpected symbol near 'char(27)'". A
/// leading space makes that happen without changing the error's line or chunk name; text
/// mode ("t") refuses a binary chunk should one still get through.
///
/// # Safety
/// `l` is in a C function with `src` a string at an absolute index and 3 free slots.
unsafe fn load_text(
    l: *mut mlua::ffi::lua_State,
    src: std::ffi::c_int,
    name: *const std::ffi::c_char,
) -> std::ffi::c_int {
    use mlua::ffi;
    let mut len = 0usize;
    let s = ffi::lua_tolstring(l, src, &mut len);
    if len > 0 && *s as u8 == BYTECODE_MARK {
        ffi::lua_pushlstring(l, c" ".as_ptr(), 1);
        ffi::lua_pushvalue(l, src);
        ffi::lua_concat(l, 2);
        let mut n = 0usize;
        let spaced = ffi::lua_tolstring(l, -1, &mut n);
        let status = ffi::luaL_loadbufferx(l, spaced, n, name, c"t".as_ptr());
        ffi::lua_remove(l, -2);
        status
    } else {
        ffi::luaL_loadbufferx(l, s, len, name, c"t".as_ptr())
    }
}

/// Lua 5.1's `load_aux`: the function, or nil and the message.
///
/// # Safety
/// As [`load_text`], right after it.
unsafe fn load_result(l: *mut mlua::ffi::lua_State, status: std::ffi::c_int) -> std::ffi::c_int {
    use mlua::ffi;
    if status == 0 {
        1
    } else {
        ffi::lua_pushnil(l);
        ffi::lua_insert(l, -2);
        2
    }
}

/// `loadstring(s [, name])`, text only (see [`load_text`]); Lua 5.1's arguments and replies.
///
/// # Safety
/// As [`see_through_next`].
unsafe extern "C-unwind" fn text_loadstring(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    let mut len = 0usize;
    let s = ffi::luaL_checklstring(l, 1, &mut len);
    let name = ffi::luaL_optstring(l, 2, s);
    ffi::lua_settop(l, 2);
    // The name as a Lua string on the stack: the parser's copy is this (interned) one.
    ffi::lua_pushstring(l, name);
    let status = load_text(l, 1, name);
    load_result(l, status)
}

/// `load(reader [, name])`: the reader's pieces are collected first (a nil or empty piece
/// ends them), then compiled as text (see [`load_text`]). No script code runs while the
/// parser works (Lua 5.1 calls the reader from inside it, which let a reader run the
/// collector mid-parse: CVE-2025-49844). A failing reader or a piece that is not a string
/// gives nil and the message, as Lua 5.1's protected parser does.
///
/// # Safety
/// As [`see_through_next`].
unsafe extern "C-unwind" fn text_load(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    let name = ffi::luaL_optstring(l, 2, c"=(load)".as_ptr());
    ffi::luaL_checktype(l, 1, ffi::LUA_TFUNCTION);
    ffi::lua_settop(l, 2);
    ffi::lua_pushstring(l, name);
    let name = ffi::lua_tolstring(l, 3, std::ptr::null_mut());
    // Pieces from index 4 on, joined every 16 so the stack stays small.
    let mut pieces: std::ffi::c_int = 0;
    loop {
        ffi::luaL_checkstack(l, 3, c"too many nested functions".as_ptr());
        ffi::lua_pushvalue(l, 1);
        if ffi::lua_pcall(l, 0, 1, 0) != 0 {
            return load_result(l, 1);
        }
        if ffi::lua_type(l, -1) == ffi::LUA_TNIL {
            ffi::lua_pop(l, 1);
            break;
        }
        if ffi::lua_isstring(l, -1) == 0 {
            ffi::lua_pop(l, 1);
            ffi::lua_pushstring(l, c"reader function must return a string".as_ptr());
            return load_result(l, 1);
        }
        if ffi::lua_objlen(l, -1) == 0 {
            ffi::lua_pop(l, 1);
            break;
        }
        pieces += 1;
        if pieces == 16 {
            ffi::lua_concat(l, pieces);
            pieces = 1;
        }
    }
    match pieces {
        0 => {
            ffi::lua_pushlstring(l, c"".as_ptr(), 0);
        }
        1 => {}
        n => ffi::lua_concat(l, n),
    }
    let status = load_text(l, 4, name);
    load_result(l, status)
}

/// Lua 5.1's `pcall` with room made for its status flag. The stock one pushes the flag
/// after a multiple-results call has filled the frame to its top (pcall nested until the C
/// stack overflows): a push past the frame's top, one slot past what the call reserved
/// (an assertion in checked builds). Redis runs the stock one; the room costs one check.
///
/// # Safety
/// Called by Lua as a lua_CFunction.
unsafe extern "C-unwind" fn stacked_pcall(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    ffi::luaL_checkany(l, 1);
    let status = ffi::lua_pcall(l, ffi::lua_gettop(l) - 1, ffi::LUA_MULTRET, 0);
    if ffi::lua_checkstack(l, 1) == 0 {
        return ffi::luaL_error(l, c"stack overflow (pcall results)".as_ptr());
    }
    ffi::lua_pushboolean(l, std::ffi::c_int::from(status == 0));
    ffi::lua_insert(l, 1);
    ffi::lua_gettop(l)
}

/// `unpack(t [, i [, j]])` with the element count in 64 bits: Lua 5.1 computes it as
/// `j - i + 1` in an int, which overflows for ranges such as (0, 2^31-1) and then pushes
/// past the stack (CVE-2025-46817). Redis's fixed reply: "too many results to unpack".
///
/// # Safety
/// As [`see_through_next`].
unsafe extern "C-unwind" fn checked_unpack(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    use std::ffi::c_int;
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    // luaL_optint / luaL_checkint: an int, truncated as C's cast does.
    let i = ffi::luaL_optinteger(l, 2, 1) as c_int;
    let e = if ffi::lua_isnoneornil(l, 3) != 0 {
        c_int::try_from(ffi::lua_objlen(l, 1)).unwrap_or(c_int::MAX)
    } else {
        ffi::luaL_checkinteger(l, 3) as c_int
    };
    if i > e {
        return 0;
    }
    let n = i64::from(e) - i64::from(i) + 1;
    let fits = c_int::try_from(n).ok().filter(|&n| n < c_int::MAX);
    let Some(n) = fits.filter(|&n| ffi::lua_checkstack(l, n) != 0) else {
        return ffi::luaL_error(l, c"too many results to unpack".as_ptr());
    };
    // Every k lies in [i, e], so it is an int.
    for k in i64::from(i)..=i64::from(e) {
        ffi::lua_rawgeti_(l, 1, k as c_int);
    }
    n
}

/// `redis.acl_check_cmd(command, args...)`: whether the running script's caller may run
/// the command with these arguments (Redis's luaRedisAclCheckCmdPermissionsCommand: the
/// user's rules, no ACL LOG entry), with Redis's errors for bad arguments or an unknown
/// command.
fn acl_check_cmd(lua: &Lua, run: &super::RunSlot, args: MultiValue) -> mlua::Result<bool> {
    let rt = |m: &str| Err(mlua::Error::RuntimeError(m.into()));
    if args.is_empty() {
        return rt("Please specify at least one argument for this redis lib call");
    }
    let mut argv: Vec<Vec<u8>> = Vec::with_capacity(args.len());
    for a in args.iter() {
        match super::arg_buf(lua, a)? {
            Some(b) => argv.push(b.bytes().to_vec()),
            None => return rt("Lua redis lib command arguments must be strings or integers"),
        }
    }
    let view: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
    // Only the name and, for a container command, the subcommand name the command.
    let names = view.get(..2).unwrap_or(&view);
    let Ok(cmd) = crate::cmd::table().resolve(names) else {
        return rt("Invalid command passed to redis.acl_check_cmd()");
    };
    match super::with_current(run, |ctx, _| {
        crate::cmd::acl::may_run(ctx.srv, ctx.cl, cmd, &view)
    }) {
        Some(ok) => Ok(ok),
        None => rt("redis.acl_check_cmd can only be called inside a script invocation"),
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
