//! Redis 7.0 functions: the library registry (FUNCTION LOAD/DELETE/FLUSH/RESTORE) and
//! calling a registered function (FCALL / FCALL_RO).
//!
//! The registry (library sources and the functions they declared) is the server's
//! ([`Functions`]), shared by its threads. Each worker thread runs functions in its own Lua
//! state, separate from the EVAL one (as Redis keeps a separate function `lua_State`), and
//! compiles a library there the first time it calls one of its functions; every registry
//! change bumps the registry's generation, after which threads drop what they compiled. A library's code runs once per thread to collect the callbacks
//! it registers, in a restricted environment where only `redis.register_function`,
//! `redis.log` and the version fields exist (as Redis's load-time API).

mod lua;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;

use crate::cmd::{CmdError, Ctx};

/// Function flags, in the order FUNCTION LIST shows them.
pub const FLAG_NAMES: [&str; 5] = [
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];
pub const NO_WRITES: u8 = 1;
pub const ALLOW_OOM: u8 = 1 << 1;
pub const ALLOW_STALE: u8 = 1 << 2;
pub const NO_CLUSTER: u8 = 1 << 3;
pub const ALLOW_CROSS_SLOT: u8 = 1 << 4;

/// One function a library registered.
#[derive(Clone, Debug)]
pub struct FuncInfo {
    pub name: String,
    pub desc: Option<Bytes>,
    /// Bits indexing [`FLAG_NAMES`].
    pub flags: u8,
}

/// A loaded library: its name, full source (shebang included) and functions.
#[derive(Debug)]
pub struct Library {
    pub name: String,
    pub code: Bytes,
    pub funcs: Vec<FuncInfo>,
}

/// Libraries by name and the owner of every function name. Function names are
/// case-insensitive (FCALL, clashes), library names are not, as in Redis 7.0.
#[derive(Default, Clone)]
struct Registry {
    libs: BTreeMap<String, Arc<Library>>,
    /// Lower-cased function name -> its library and index there.
    funcs: hashbrown::HashMap<String, (Arc<Library>, usize)>,
}

impl Registry {
    fn remove(&mut self, name: &str) -> Option<Arc<Library>> {
        let lib = self.libs.remove(name)?;
        for f in &lib.funcs {
            self.funcs.remove(&f.name.to_ascii_lowercase());
        }
        Some(lib)
    }

    /// Adds `lib` (replacing a library of the same name when `replace`), with Redis's
    /// errors for an existing library and for a function another library owns.
    fn add(&mut self, lib: Arc<Library>, replace: bool) -> Result<(), CmdError> {
        if !replace && self.libs.contains_key(&lib.name) {
            return Err(CmdError::msg(format!(
                "ERR Library '{}' already exists",
                lib.name
            )));
        }
        for f in &lib.funcs {
            if let Some((owner, _)) = self.funcs.get(&f.name.to_ascii_lowercase()) {
                if owner.name != lib.name {
                    return Err(CmdError::msg(format!(
                        "ERR Function {} already exists",
                        f.name
                    )));
                }
            }
        }
        self.remove(&lib.name);
        for (i, f) in lib.funcs.iter().enumerate() {
            // Two names differing only in case inside one library: the last one is FCALL's
            // (Redis keeps one of them, which one depends on its hash seed).
            self.funcs
                .insert(f.name.to_ascii_lowercase(), (lib.clone(), i));
        }
        self.libs.insert(lib.name.clone(), lib);
        Ok(())
    }
}

/// A server's functions (`Server::scripts.functions`): the registry, its generation,
/// the running function and the memory of the function Lua states charged to it.
#[derive(Default)]
pub struct Functions {
    registry: RwLock<Registry>,
    /// Bumped on every registry change: threads then drop their compiled libraries.
    gen: AtomicU64,
    running: parking_lot::Mutex<Option<Running>>,
    /// Heap of the threads' function Lua states that last ran for this server (INFO
    /// used_memory_vm_functions).
    vm_bytes: AtomicUsize,
}

/// The library name and where the code after the shebang line starts, with Redis's
/// errors (`functionExtractLibMetaData`).
fn parse_meta(code: &[u8]) -> Result<(String, usize), CmdError> {
    if !code.starts_with(b"#!") {
        return Err(CmdError::msg("ERR Missing library metadata"));
    }
    let Some(nl) = memchr::memchr(b'\n', code) else {
        return Err(CmdError::msg("ERR Invalid library metadata"));
    };
    // Split as Redis's sdssplitargs: quoted values, unbalanced quotes are invalid.
    let Some(words) = crate::resp::parser::split_args(&code[..nl]) else {
        return Err(CmdError::msg("ERR Invalid library metadata"));
    };
    let words: Vec<String> = words
        .iter()
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    let mut parts = words.iter().map(String::as_str);
    let engine = parts.next().unwrap_or("#!").get(2..).unwrap_or("");
    let mut name: Option<String> = None;
    for p in parts {
        if p.len() >= 5 && p[..5].eq_ignore_ascii_case("name=") {
            if name.is_some() {
                return Err(CmdError::msg(
                    "ERR Invalid metadata value, name argument was given multiple times",
                ));
            }
            name = Some(p[5..].to_string());
            continue;
        }
        return Err(CmdError::msg(format!(
            "ERR Invalid metadata value given: {p}"
        )));
    }
    let Some(name) = name else {
        return Err(CmdError::msg("ERR Library name was not given"));
    };
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(CmdError::msg(format!("ERR Engine '{engine}' not found")));
    }
    if !valid_name(&name) {
        return Err(name_error());
    }
    Ok((name, nl))
}

/// Library and function names: letters, digits and '_' (Redis's `functionsVerifyName`).
fn valid_name(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Redis 7.0 gives this text for bad function names too.
fn name_error() -> CmdError {
    CmdError::msg("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long")
}

/// Parses and runs a library's code on this thread's function state: the library, not yet
/// registered. `exists`: Redis's "already exists" check, made between reading the metadata
/// and compiling.
fn build(
    fns: &Arc<Functions>,
    code: Bytes,
    exists: impl Fn(&str) -> bool,
) -> Result<Library, CmdError> {
    let (name, nl) = parse_meta(&code)?;
    if exists(&name) {
        return Err(CmdError::msg(format!(
            "ERR Library '{name}' already exists"
        )));
    }
    let funcs = lua::compile_library(fns, &code[nl..])?;
    if funcs.is_empty() {
        return Err(CmdError::msg("ERR No functions registered"));
    }
    Ok(Library {
        name,
        code,
        funcs: funcs.into_iter().map(|(info, _)| info).collect(),
    })
}

/// How FUNCTION RESTORE treats existing libraries.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Policy {
    Flush,
    Append,
    Replace,
}

/// The function running now (FUNCTION STATS): name, the command as sent, start.
pub struct Running {
    pub name: String,
    pub command: Vec<Bytes>,
    pub started: std::time::Instant,
}

impl Functions {
    fn changed(&self) {
        self.gen.fetch_add(1, Ordering::Release);
    }

    /// Heap of the function Lua states charged to this server.
    pub fn vm_memory(&self) -> usize {
        self.vm_bytes.load(Ordering::Relaxed)
    }

    /// FUNCTION LOAD [REPLACE]: the library's name.
    pub fn load(self: &Arc<Self>, code: Bytes, replace: bool) -> Result<String, CmdError> {
        let lib = build(self, code, |n| {
            !replace && self.registry.read().libs.contains_key(n)
        })?;
        let name = lib.name.clone();
        self.registry.write().add(Arc::new(lib), replace)?;
        self.changed();
        Ok(name)
    }

    /// FUNCTION DELETE.
    pub fn delete(&self, name: &[u8]) -> Result<(), CmdError> {
        let name = String::from_utf8_lossy(name);
        match self.registry.write().remove(&name) {
            Some(_) => {
                self.changed();
                Ok(())
            }
            None => Err(CmdError::msg("ERR Library not found")),
        }
    }

    /// FUNCTION FLUSH.
    pub fn flush(&self) {
        *self.registry.write() = Registry::default();
        self.changed();
    }

    /// The libraries, by name.
    pub fn libraries(&self) -> Vec<Arc<Library>> {
        self.registry.read().libs.values().cloned().collect()
    }

    /// (libraries, functions) for FUNCTION STATS and INFO.
    pub fn counts(&self) -> (usize, usize) {
        let r = self.registry.read();
        let funcs = r.libs.values().map(|l| l.funcs.len()).sum();
        (r.libs.len(), funcs)
    }

    /// Bytes the registry holds (INFO used_memory_functions): sources, names, descriptions.
    pub fn memory(&self) -> usize {
        let r = self.registry.read();
        r.libs
            .values()
            .map(|l| {
                let funcs: usize = l
                    .funcs
                    .iter()
                    .map(|f| f.name.len() * 2 + f.desc.as_ref().map_or(0, |d| d.len()) + 64)
                    .sum();
                l.code.len() + l.name.len() + funcs + 96
            })
            .sum()
    }

    /// Installs `codes` (library sources) atomically under `policy`: all or none.
    pub fn install(self: &Arc<Self>, codes: Vec<Bytes>, policy: Policy) -> Result<(), CmdError> {
        let mut libs: Vec<Library> = Vec::with_capacity(codes.len());
        for code in codes {
            let lib = build(self, code, |n| libs.iter().any(|l| l.name == n))?;
            libs.push(lib);
        }
        self.install_libs(libs, policy)
    }

    /// Installs built libraries atomically under `policy`, with Redis's collision errors.
    fn install_libs(&self, libs: Vec<Library>, policy: Policy) -> Result<(), CmdError> {
        let mut reg = self.registry.write();
        let mut next = match policy {
            Policy::Flush => Registry::default(),
            _ => reg.clone(),
        };
        let mut fresh = Registry::default();
        for lib in libs {
            // Two of the payload's libraries may not share a function either.
            let lib = Arc::new(lib);
            fresh.add(lib.clone(), false)?;
            if policy == Policy::Append && next.libs.contains_key(&lib.name) {
                return Err(CmdError::msg(format!(
                    "ERR Library {} already exists",
                    lib.name
                )));
            }
            next.add(lib, true)?;
        }
        *reg = next;
        drop(reg);
        self.changed();
        Ok(())
    }

    /// The function `name` and its library, if registered.
    pub fn lookup(&self, name: &[u8]) -> Option<(Arc<Library>, FuncInfo)> {
        let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        let r = self.registry.read();
        let (lib, i) = r.funcs.get(&name)?;
        Some((lib.clone(), lib.funcs.get(*i)?.clone()))
    }

    /// Runs `f` with `running` published for FUNCTION STATS.
    fn publish<R>(&self, running: Running, f: impl FnOnce() -> R) -> R {
        *self.running.lock() = Some(running);
        let r = f();
        *self.running.lock() = None;
        r
    }

    /// (name, command, ms so far) of the function running now.
    pub fn running(&self) -> Option<(String, Vec<Bytes>, u128)> {
        self.running.lock().as_ref().map(|r| {
            (
                r.name.clone(),
                r.command.clone(),
                r.started.elapsed().as_millis(),
            )
        })
    }
}

/// FCALL / FCALL_RO (`cmd`: the command as sent): runs `name` with `ctx`'s locks held; the
/// reply or error goes to `ctx.out` (an error before the call is returned).
pub fn call(
    ctx: &mut Ctx<'_>,
    cmd: &[&[u8]],
    name: &[u8],
    keys: &[&[u8]],
    argv: &[&[u8]],
    ro_cmd: bool,
) -> Result<(), CmdError> {
    let fns = ctx.srv.scripts.functions.clone();
    let Some((lib, info)) = fns.lookup(name) else {
        return Err(CmdError::msg("ERR Function not found"));
    };
    if info.flags & NO_CLUSTER != 0 && ctx.srv.cluster.get().is_some() {
        return Err(CmdError::msg(
            "ERR Can not run script on cluster, 'no-cluster' flag is set.",
        ));
    }
    let no_writes = info.flags & NO_WRITES != 0;
    let repl = &ctx.srv.repl;
    let from_master = ctx.cl.from_master
        || (ctx.cl.id != 0 && ctx.cl.id == repl.master_client.load(Ordering::Relaxed));
    // FCALL's effective flags come from the function's (Redis's getCommandFlags): denyoom
    // unless no-writes or allow-oom, stale only with allow-stale; errors as the dispatcher's.
    let (max, read_only, serve_stale) = {
        let c = &ctx.srv.config.read().typed;
        (c.maxmemory, c.replica_read_only, c.replica_serve_stale_data)
    };
    if info.flags & (ALLOW_OOM | NO_WRITES) == 0
        && !from_master
        && max > 0
        && crate::alloc::used_memory() > max
    {
        return Err(CmdError::msg(
            "OOM command not allowed when used memory > 'maxmemory'.",
        ));
    }
    // FCALL (or FCALL_RO) of a function without no-writes is a write command: MISCONF
    // while the disk cannot persist.
    if !no_writes {
        if let Some(e) = crate::persist::writes_denied(ctx.srv, ctx.cl) {
            return Err(CmdError::msg(e.to_string()));
        }
        // min-replicas-to-write, as for any write command (NOREPLICAS).
        if let Some(e) = crate::repl::too_few_replicas(ctx.srv).filter(|_| !from_master) {
            return Err(CmdError::msg(e));
        }
    }
    if !no_writes && !from_master && repl.is_replica() && read_only {
        return Err(CmdError::msg(
            "READONLY You can't write against a read only replica.",
        ));
    }
    if info.flags & ALLOW_STALE == 0
        && !from_master
        && repl.is_replica()
        && !repl.link_up.load(Ordering::Relaxed)
        && !serve_stale
    {
        return Err(CmdError::msg(
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        ));
    }
    if !no_writes && ro_cmd {
        return Err(CmdError::msg(
            "ERR Can not execute a script with write flag using *_ro command.",
        ));
    }
    let running = Running {
        name: info.name.clone(),
        command: crate::cmd::owned_args(cmd),
        started: std::time::Instant::now(),
    };
    fns.publish(running, || {
        lua::run(ctx, &fns, &lib, &info, keys, argv, no_writes)
    })
}

/// A FUNCTION DUMP payload: a FUNCTION2 record per library, RDB version, CRC64.
pub fn dump(fns: &Functions) -> Result<Vec<u8>, CmdError> {
    let io = |e: tessera_rdb::RdbError| CmdError::msg(format!("ERR {e}"));
    let mut w = tessera_rdb::RdbWriter::new(Vec::new()).map_err(io)?;
    w.take_output();
    for lib in fns.libraries() {
        w.function(&lib.code).map_err(io)?;
    }
    let mut out = w.take_output();
    out.extend_from_slice(&tessera_rdb::RDB_VERSION.to_le_bytes());
    let crc = tessera_rdb::crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// The library sources in a FUNCTION DUMP payload (Redis's errors).
pub fn parse_dump(payload: &[u8]) -> Result<Vec<Bytes>, CmdError> {
    tessera_rdb::verify_payload(payload, tessera_rdb::RDB_VERSION)
        .map_err(|e| CmdError::msg(e.to_string()))?;
    let body = &payload[..payload.len() - 10];
    // Read as an RDB stream (header, the records, EOF, checksum 0 = not checked): the
    // rdb crate's reader decodes the records' strings, LZF-compressed ones included.
    let mut rdb = Vec::with_capacity(body.len() + 18);
    rdb.extend_from_slice(format!("REDIS{:04}", tessera_rdb::RDB_VERSION).as_bytes());
    let start = rdb.len();
    rdb.extend_from_slice(body);
    rdb.push(0xff);
    rdb.extend_from_slice(&[0u8; 8]);
    let mut rd = tessera_rdb::RdbReader::new(std::io::Cursor::new(rdb))
        .map_err(|e| CmdError::msg(format!("ERR {e}")))?;
    let mut codes = Vec::new();
    loop {
        let at_record = rd.position() as usize;
        let not_fn = || CmdError::msg("ERR given type is not a function");
        match rd.next_event() {
            Ok(Some(tessera_rdb::RdbEvent::Function(code))) => codes.push(code),
            Ok(Some(tessera_rdb::RdbEvent::End { .. })) | Ok(None)
                if at_record == start + body.len() =>
            {
                break
            }
            Ok(_) => return Err(not_fn()),
            Err(_) if at_record < start + body.len() => return Err(not_fn()),
            Err(e) => return Err(CmdError::msg(format!("ERR {e}"))),
        }
    }
    Ok(codes)
}

/// Installs the libraries read from an RDB file or a master's payload in place of the
/// current ones. Err names the library that failed and why.
pub fn load_from_rdb(fns: &Arc<Functions>, codes: Vec<Bytes>) -> Result<(), String> {
    load_from_rdb_with(fns, codes, Policy::Flush)
}

/// [`load_from_rdb`] with a policy for the libraries already loaded: Flush (the file's
/// replace them all), Append (one already loaded fails the load: DEBUG RELOAD NOFLUSH) or
/// Replace (the file's replace same-named ones, the others stay: NOFLUSH MERGE, Redis's
/// RDBFLAGS_ALLOW_DUP).
pub fn load_from_rdb_with(
    fns: &Arc<Functions>,
    codes: Vec<Bytes>,
    policy: Policy,
) -> Result<(), String> {
    if codes.is_empty() && (policy != Policy::Flush || fns.counts().0 == 0) {
        return Ok(());
    }
    let mut libs: Vec<Library> = Vec::with_capacity(codes.len());
    for code in codes {
        let name = parse_meta(&code).map_or_else(|_| "<unnamed>".to_string(), |(n, _)| n);
        let lib = build(fns, code, |n| libs.iter().any(|l| l.name == n))
            .map_err(|e| format!("Failed loading library {name}: {e}"))?;
        libs.push(lib);
    }
    fns.install_libs(libs, policy)
        .map_err(|e| format!("Failed loading libraries: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_errors() {
        let err = |c: &[u8]| parse_meta(c).err().map(|e| e.to_string());
        assert_eq!(
            err(b"return 1"),
            Some("ERR Missing library metadata".into())
        );
        assert_eq!(
            err(b"#!lua name=x"),
            Some("ERR Invalid library metadata".into())
        );
        assert_eq!(
            err(b"#!lua\n"),
            Some("ERR Library name was not given".into())
        );
        assert_eq!(
            err(b"#!lua name=x foo\n"),
            Some("ERR Invalid metadata value given: foo".into())
        );
        assert_eq!(
            err(b"#!py name=x\n"),
            Some("ERR Engine 'py' not found".into())
        );
        assert!(err(b"#!lua name=a-b\n").is_some_and(|e| e.contains("Library names")));
        assert_eq!(
            parse_meta(b"#!LUA  Name=lib_1 \nx").ok(),
            Some(("lib_1".into(), 18))
        );
    }
}
