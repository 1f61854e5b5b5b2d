//! Server commands: DBSIZE FLUSHDB FLUSHALL SWAPDB TIME SHUTDOWN LASTSAVE MEMORY OBJECT
//! SLOWLOG DEBUG MONITOR.

use std::sync::atomic::Ordering;

use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx};

mod debug;
mod digest;
use crate::db::Value;
use crate::server::Server;

pub fn commands() -> Vec<CommandSpec> {
    let s = |name, arity, fl, keys, h| CommandSpec::new(name, arity, fl, keys, h);
    let none = (0, 0, 0);
    vec![
        s("dbsize", 1, "readonly fast global", none, dbsize).group("server"),
        s("flushdb", -1, "write lock_all", none, flushdb).group("server"),
        s("flushall", -1, "write lock_all", none, flushall).group("server"),
        s("swapdb", 3, "write fast lock_all", none, swapdb)
            .group("server")
            .since("4.0.0"),
        s("time", 1, "loading stale fast", none, time)
            .group("server")
            .since("2.6.0"),
        s("lastsave", 1, "loading stale fast", none, lastsave).group("server"),
        s(
            "shutdown",
            -1,
            "admin noscript loading stale no_multi allow_busy",
            none,
            shutdown,
        )
        .group("server"),
        s("monitor", 1, "admin noscript loading stale", none, monitor).group("server"),
        s(
            "debug",
            -2,
            "admin noscript loading stale protected",
            none,
            debug::debug,
        )
        .group("server"),
        CommandSpec::new("memory", -2, "", none, mem_help)
            .group("server")
            .since("4.0.0")
            .subs(vec![
                s("usage", -3, "readonly", (2, 2, 1), mem_usage),
                s("help", 2, "loading stale", none, mem_help),
                s("stats", 2, "loading stale", none, mem_stats),
                s("doctor", 2, "loading stale", none, mem_doctor),
                s("purge", 2, "", none, mem_purge),
                s("malloc-stats", 2, "", none, mem_malloc_stats),
            ]),
        CommandSpec::new("object", -2, "", none, obj_help)
            .group("generic")
            .since("2.2.3")
            .subs(vec![
                s("encoding", 3, "readonly", (2, 2, 1), obj_encoding),
                s("refcount", 3, "readonly", (2, 2, 1), obj_refcount),
                s("idletime", 3, "readonly", (2, 2, 1), obj_idletime),
                s("freq", 3, "readonly", (2, 2, 1), obj_freq),
                s("help", 2, "loading stale", none, obj_help),
            ]),
        CommandSpec::new("slowlog", -2, "", none, slow_help)
            .group("server")
            .since("2.2.12")
            .subs(vec![
                s("get", -2, "admin loading stale", none, slow_get),
                s("len", 2, "admin loading stale", none, slow_len),
                s("reset", 2, "admin loading stale", none, slow_reset),
                s("help", 2, "loading stale", none, slow_help),
            ]),
    ]
}

/// Keys in database `db` (visits every stripe).
pub fn db_keys(ctx: &mut Ctx<'_>, db: usize) -> (usize, usize) {
    let mut n = 0;
    let mut v = 0;
    let hidden = &ctx.srv.ks.hidden;
    ctx.ks.for_each_stripe(|i, st| {
        if let Some(d) = st.db(db) {
            let (dn, dv) = d.shown_lens(hidden.stripe_mask(i));
            n += dn;
            v += dv;
        }
    });
    (n, v)
}

/// [`db_keys`] outside a command: locks each stripe in turn (so never inside EXEC).
pub fn db_keys_locking(srv: &Server, db: usize) -> (usize, usize) {
    let (mut n, mut v) = (0, 0);
    for i in 0..crate::db::STRIPES {
        if let Some(d) = srv.ks.lock_stripe(i).db(db) {
            let (dn, dv) = d.shown_lens(srv.ks.hidden.stripe_mask(i));
            n += dn;
            v += dv;
        }
    }
    (n, v)
}

fn dbsize(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let db = ctx.ks.db;
    let (n, _) = db_keys(ctx, db);
    ctx.out.int(n as i64);
    Ok(())
}

/// FLUSHDB/FLUSHALL's mode: true for ASYNC (the data is freed on another thread), and
/// without an argument when lazyfree-lazy-user-flush is set.
fn flush_mode(ctx: &Ctx<'_>, args: &[&[u8]]) -> Result<bool, CmdError> {
    match args.get(1) {
        None => Ok(ctx.srv.config.read().typed.lazyfree_lazy_user_flush),
        Some(a) if args.len() == 2 && eq_ic(a, "async") => Ok(true),
        Some(a) if args.len() == 2 && eq_ic(a, "sync") => Ok(false),
        Some(_) => Err(CmdError::Syntax),
    }
}

/// Empties `db` (None: all) in every stripe; the command holds every stripe (`lock_all`).
/// With `lazy` the detached data is dropped on a thread of its own, after the locks are
/// released, as Redis's lazyfree does.
fn flush_db(ctx: &mut Ctx<'_>, db: Option<usize>, lazy: bool) {
    super::transaction::touch_flushed(ctx, db);
    ctx.srv
        .ks
        .flushes
        .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    let mut garbage = Vec::new();
    // Keys removed: redis's count of changes (propagated even when 0).
    let mut removed = 0;
    ctx.ks.for_each_stripe(|_, st| {
        for (i, d) in st.dbs.iter_mut().enumerate() {
            if db.is_none_or(|x| x == i) {
                if let Some(d) = d.take() {
                    removed += d.len();
                    if lazy {
                        garbage.push(d);
                    }
                }
            }
        }
    });
    if !garbage.is_empty() {
        // Every key counts as one object (Redis's emptyDbAsync).
        ctx.srv
            .stats
            .lazyfree
            .free_all(Box::new(garbage), removed as u64);
    }
    // Every tracked key is gone: tracking clients get a flush (null) invalidation.
    crate::tracking::on_flush(ctx.srv);
    ctx.count_changes(removed);
    if !lazy && removed > 0 {
        // The freed memory goes back now, before a refill allocates (see `purge_loop`).
        ctx.srv.purge_now.notify_waiters();
    }
}

fn flushdb(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let lazy = flush_mode(ctx, args)?;
    let db = ctx.ks.db;
    flush_db(ctx, Some(db), lazy);
    ctx.out.ok();
    Ok(())
}

fn flushall(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let lazy = flush_mode(ctx, args)?;
    flush_db(ctx, None, lazy);
    // With save points, Redis saves the empty dataset right away: `execute` does it once
    // the keyspace is let go (UpperHooks::save_after_flushall).
    ctx.cl.save_after_command = true;
    ctx.out.ok();
    Ok(())
}

fn swapdb(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let a = arg_i64(args[1]).map_err(|_| CmdError::msg("ERR invalid first DB index"))?;
    let b = arg_i64(args[2]).map_err(|_| CmdError::msg("ERR invalid second DB index"))?;
    let n = ctx.srv.ks.databases() as i64;
    if a < 0 || a >= n || b < 0 || b >= n {
        return Err(CmdError::msg("ERR DB index is out of range"));
    }
    if a != b {
        super::transaction::touch_swapped(ctx, a as usize, b as usize);
        // Atomic: every stripe is held while swapping.
        let mut all = if ctx.ks.locks.all {
            None
        } else {
            Some(ctx.srv.ks.lock_all())
        };
        let locks = match all.as_mut() {
            Some(l) => l,
            None => &mut ctx.ks.locks,
        };
        locks.for_each(|_, g| g.dbs.swap(a as usize, b as usize));
        drop(all);
        // As redis: clients blocked in either database look again, after this command.
        // A list or zset now there serves them; an XREADGROUP whose stream (or group)
        // left gets -UNBLOCKED / -NOGROUP.
        let (a, b) = (a as usize, b as usize);
        for (db, key) in ctx.srv.blocking.waiting_keys(&[a, b]) {
            crate::blocking::recheck_group_readers(ctx.srv, db, &key);
            ctx.ks.ready.push((db, key));
        }
    }
    ctx.out.ok();
    Ok(())
}

fn time(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    ctx.out.array(2);
    ctx.out.bulk_int(now.as_secs() as i64);
    ctx.out.bulk_int(now.subsec_micros() as i64);
    Ok(())
}

fn lastsave(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.out
        .int(ctx.srv.last_save.load(Ordering::Relaxed) as i64);
    Ok(())
}

fn shutdown(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    for a in &args[1..] {
        if !(eq_ic(a, "nosave")
            || eq_ic(a, "save")
            || eq_ic(a, "now")
            || eq_ic(a, "force")
            || eq_ic(a, "abort")
            || eq_ic(a, "failover"))
        {
            return Err(CmdError::Syntax);
        }
    }
    // valkey 9's FAILOVER modifier (persist::shutdown).
    if args[1..].iter().any(|a| eq_ic(a, "failover")) && !super::cluster_mode(ctx.srv) {
        return Err(CmdError::msg(
            "ERR SHUTDOWN FAILOVER is only supported in cluster mode.",
        ));
    }
    let has = |w: &str| args[1..].iter().any(|a| eq_ic(a, w));
    // Redis's illegal combinations: ABORT with anything, NOSAVE with SAVE.
    if (has("abort") && args.len() > 2) || (has("nosave") && has("save")) {
        return Err(CmdError::Syntax);
    }
    if has("abort") {
        // Answered by the shutdown's owner (persist::shutdown, via repl::run_pending).
        ctx.cl.pending = Some(crate::server::clients::Pending::Shutdown {
            abort: true,
            force: false,
        });
        return Ok(());
    }
    // persist's steps, handed down with the table (persist sits above this layer).
    let hooks = super::table().hooks;
    if let Some(e) = ctx.srv.scripts.busy.busy_error() {
        // A script past busy-reply-threshold: only NOSAVE may stop the server (Redis).
        if !args[1..].iter().any(|a| eq_ic(a, "nosave")) {
            return Err(CmdError::msg(e));
        }
        // The thread running the script may be the one that would finish the shutdown:
        // flush the AOF (the script's writes are not in it yet) and exit from here.
        tracing::warn!("User requested shutdown... (a script is busy)");
        if let Some(note) = hooks.shutdown_note_args {
            note(ctx.srv, args);
        }
        ctx.srv.listeners.stop_accepting();
        ctx.srv.shutting_down.store(true, Ordering::SeqCst);
        if let Some(flush_and_save) = hooks.shutdown_now {
            flush_and_save(ctx.srv);
        }
        // Closed before the exit, so none is accepted once this caller sees its end.
        ctx.srv.listeners.close();
        tracing::warn!("Redis is now ready to exit, bye bye...");
        std::process::exit(0);
    }
    tracing::warn!("User requested shutdown...");
    if let Some(note) = hooks.shutdown_note_args {
        note(ctx.srv, args);
    }
    // Like Redis, the caller blocks: a successful SHUTDOWN sends no reply (the process
    // exits), a shutdown given up answers an error (persist::shutdown).
    ctx.cl.pending = Some(crate::server::clients::Pending::Shutdown {
        abort: false,
        force: has("force"),
    });
    Ok(())
}

fn monitor(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.cl.handle.monitor.store(true, Ordering::Relaxed);
    ctx.srv.monitors.add(ctx.cl.handle.clone());
    ctx.out.ok();
    Ok(())
}

fn mem_help(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    super::help_lines(
        ctx,
        &[
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
            "HELP",
            "    Prints this help.",
        ],
    )
}

/// Bytes one key costs: its bucket, its node (entry + key) and its value's heap.
pub fn key_memory(key: &[u8], v: &Value) -> usize {
    // Table bucket (a tagged pointer) plus the node holding the entry and the key, as the
    // allocator rounds it.
    8 + crate::db::slotmap::node_bytes(key.len()) + v.mem_usage()
}

fn mem_usage(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() == 5 {
        if !eq_ic(args[3], "samples") {
            return Err(CmdError::Syntax);
        }
        arg_i64(args[4])?;
    } else if args.len() != 3 {
        return Err(CmdError::Syntax);
    }
    match ctx.ks.get_w(args[2]) {
        Some(v) => ctx.out.int(key_memory(args[2], v) as i64),
        None => ctx.out.null(),
    }
    Ok(())
}

fn mem_stats(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let used = crate::alloc::used_memory();
    ctx.out.map(3);
    ctx.out.bulk(b"peak.allocated");
    ctx.out.int(used as i64);
    ctx.out.bulk(b"total.allocated");
    ctx.out.int(used as i64);
    ctx.out.bulk(b"rss");
    ctx.out.int(crate::alloc::rss_bytes() as i64);
    Ok(())
}

fn mem_doctor(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.out.verbatim(b"Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.", "txt");
    Ok(())
}

/// MEMORY PURGE: returns free allocator pages to the OS (Redis asks jemalloc to purge).
/// MEMORY MALLOC-STATS: the allocator's own report (mimalloc's, where Redis gives
/// jemalloc's).
fn mem_malloc_stats(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    unsafe extern "C" fn collect(msg: *const std::ffi::c_char, arg: *mut std::ffi::c_void) {
        // SAFETY: `arg` is the String passed below, alive for the whole print call, and
        // mimalloc hands a NUL-terminated message.
        let out = unsafe { &mut *(arg as *mut String) };
        if !msg.is_null() {
            out.push_str(&unsafe { std::ffi::CStr::from_ptr(msg) }.to_string_lossy());
        }
    }
    let mut out = String::from("___ Begin mimalloc statistics ___\n");
    // SAFETY: `collect` matches mimalloc's output callback and only appends to `out`.
    unsafe {
        libmimalloc_sys::mi_stats_print_out(
            Some(collect),
            &mut out as *mut String as *mut std::ffi::c_void,
        );
    }
    out.push_str("--- End mimalloc statistics ---\n");
    ctx.out.verbatim(out.as_bytes(), "txt");
    Ok(())
}

fn mem_purge(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    crate::alloc::purge(true);
    ctx.out.ok();
    Ok(())
}

fn obj_help(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    super::help_lines(
        ctx,
        &[
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "HELP",
            "    Prints this help.",
        ],
    )
}

fn obj_encoding(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let db = ctx.ks.db;
    match ctx.ks.lookup_in(db, args[2]) {
        Some(e) => ctx.out.bulk(e.value.encoding().as_bytes()),
        None => ctx.out.null(),
    }
    Ok(())
}

fn obj_refcount(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let db = ctx.ks.db;
    match ctx.ks.lookup_in(db, args[2]) {
        // Redis shares small integers (refcount INT_MAX); everything else has 1.
        Some(e) => match e.value {
            Value::Int(i)
                if (0..10000).contains(&i) && crate::server::evict::shares_integers(ctx.srv) =>
            {
                ctx.out.int(i32::MAX as i64)
            }
            _ => ctx.out.int(1),
        },
        None => ctx.out.null(),
    }
    Ok(())
}

fn obj_idletime(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if ctx.srv.lfu_enabled() {
        return Err(CmdError::msg("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    }
    let db = ctx.ks.db;
    let clock = ctx.srv.access_clock(ctx.ks.now);
    match ctx.ks.lookup_in(db, args[2]) {
        Some(e) => ctx
            .out
            .int((clock.wrapping_sub(e.access()) & crate::db::value::ACCESS_MASK) as i64),
        None => ctx.out.null(),
    }
    Ok(())
}

fn obj_freq(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if !ctx.srv.lfu_enabled() {
        return Err(CmdError::msg("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    }
    let db = ctx.ks.db;
    let now = ctx.ks.now;
    match ctx.ks.lookup_in(db, args[2]) {
        Some(e) => ctx
            .out
            .int(crate::server::evict::lfu_counter(e.access(), now) as i64),
        None => ctx.out.null(),
    }
    Ok(())
}

fn slow_help(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    super::help_lines(
        ctx,
        &[
            "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
            "HELP",
            "    Prints this help.",
        ],
    )
}

fn slow_get(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let count = match args.get(2) {
        Some(a) => {
            let n = arg_i64(a)
                .map_err(|_| CmdError::msg("ERR count should be greater than or equal to -1"))?;
            if n < -1 {
                return Err(CmdError::msg(
                    "ERR count should be greater than or equal to -1",
                ));
            }
            if n == -1 {
                usize::MAX
            } else {
                n as usize
            }
        }
        None => 10,
    };
    let l = ctx.srv.slowlog.entries.lock();
    let n = l.len().min(count);
    ctx.out.array(n);
    for e in l.iter().take(n) {
        ctx.out.array(6);
        ctx.out.int(e.id as i64);
        ctx.out.int(e.time as i64);
        ctx.out.int(e.usec as i64);
        ctx.out.bulks(e.args.iter());
        ctx.out.bulk(e.addr.as_bytes());
        ctx.out.bulk(e.name.as_bytes());
    }
    Ok(())
}

fn slow_len(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let n = ctx.srv.slowlog.entries.lock().len();
    ctx.out.int(n as i64);
    Ok(())
}

fn slow_reset(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.srv.slowlog.entries.lock().clear();
    ctx.out.ok();
    Ok(())
}
