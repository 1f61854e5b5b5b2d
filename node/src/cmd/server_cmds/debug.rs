//! DEBUG: the subcommands Redis's own test suites drive (debug.c in Redis 7.0), with their
//! real effect where the data model has one. RELOAD and LOADAOF belong to the persistence
//! layer above this one and come down as [`crate::cmd::UpperHooks`].

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::digest;
use crate::cmd::{arg_i64, eq_ic, CmdError, CmdResult, Ctx};
use crate::db::Value;

pub(super) fn debug(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    // RELOAD, LOADAOF, CHANGE-REPL-ID: the layers above (persist, repl).
    if let Some(upper) = crate::cmd::table().hooks.debug_upper {
        if let Some(r) = upper(ctx, args) {
            return r;
        }
    }
    let sw = &ctx.srv.debug;
    let sub = args[1];
    let n = args.len();
    if eq_ic(sub, "sleep") && n == 3 {
        let secs = crate::cmd::arg_f64(args[2])?;
        let d = Duration::from_secs_f64(secs.clamp(0.0, 3600.0));
        // The replica link stands still too (see `sleeping_until_ms`).
        let until = crate::server::now_ms() + d.as_millis() as u64;
        sw.sleeping_until_ms.fetch_max(until, Relaxed);
        // Blocks this worker thread like Redis blocks its event loop (tests rely on it).
        std::thread::sleep(d);
        ctx.out.ok();
    } else if eq_ic(sub, "set-active-expire") && n == 3 {
        sw.active_expire.store(atoi(args[2]) != 0, Relaxed);
        ctx.out.ok();
    } else if eq_ic(sub, "set-skip-checksum-validation") && n == 3 {
        sw.skip_checksum_validation
            .store(atoi(args[2]) != 0, Relaxed);
        ctx.out.ok();
    } else if eq_ic(sub, "set-disable-deny-scripts") && n == 3 {
        sw.disable_deny_scripts.store(atoi(args[2]) != 0, Relaxed);
        ctx.out.ok();
    } else if eq_ic(sub, "pause-cron") && n == 3 {
        sw.pause_cron.store(atoi(args[2]) != 0, Relaxed);
        ctx.out.ok();
    } else if eq_ic(sub, "aof-flush-sleep") && n == 3 {
        sw.aof_flush_sleep_us
            .store(atoi(args[2]).max(0) as u64, Relaxed);
        ctx.out.ok();
    } else if eq_ic(sub, "quicklist-packed-threshold") && n == 3 {
        // Redis's quicklistisSetPackedThreshold: up to 4 GiB - 1 MiB, 0 = the default.
        let sz = std::str::from_utf8(args[2])
            .ok()
            .and_then(crate::config::parse_memory)
            .filter(|&sz| sz <= (1u64 << 32) - (1 << 20))
            .ok_or_else(|| {
                CmdError::msg(
                    "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                )
            })?;
        let sz = if sz == 0 {
            crate::server::debug_switches::PACKED_THRESHOLD_DEFAULT
        } else {
            sz
        };
        sw.quicklist_packed_threshold.store(sz, Relaxed);
        ctx.out.ok();
    } else if eq_ic(sub, "replybuffer") && n == 4 {
        if eq_ic(args[2], "peak-reset-time") {
            let ms = if eq_ic(args[3], "never") {
                -1
            } else if eq_ic(args[3], "reset") {
                5000
            } else {
                arg_i64(args[3])?
            };
            sw.reply_buffer_peak_reset_ms.store(ms, Relaxed);
        } else if eq_ic(args[2], "resizing") {
            sw.reply_buffer_resizing.store(atoi(args[3]) != 0, Relaxed);
        } else {
            return Err(unknown(sub));
        }
        ctx.out.ok();
    } else if eq_ic(sub, "segfault") && n == 2 {
        // A real SIGSEGV on this thread: the binary's crash handler (if installed) logs
        // Redis's bug report, then the process dies of the signal as Redis's does.
        tracing::warn!("DEBUG SEGFAULT: crashing the server with SIGSEGV");
        // SAFETY: raise(3) only sends a signal to the calling thread.
        unsafe {
            libc::raise(libc::SIGSEGV);
        }
        ctx.out.ok();
    } else if (eq_ic(sub, "panic") || eq_ic(sub, "assert")) && n == 2 {
        // Redis's _serverPanic / _serverAssert: the message, then abort() (SIGABRT, whose
        // handler writes the report), or exit(1) with use-exit-on-panic.
        tracing::error!("------------------------------------------------");
        if eq_ic(sub, "assert") {
            tracing::error!("=== ASSERTION FAILED ===");
            tracing::error!("==> debug.c:0 '1 == 2' is not true");
        } else {
            tracing::error!("!!! Software Failure. Press left mouse button to continue");
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            tracing::error!("Guru Meditation: DEBUG PANIC called at Unix time {now} #debug.c:0");
        }
        if ctx.srv.config.read().typed.use_exit_on_panic {
            std::process::exit(1);
        }
        std::process::abort();
    } else if eq_ic(sub, "log") && n == 3 {
        tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(args[2]));
        ctx.out.ok();
    } else if eq_ic(sub, "error") && n == 3 {
        // The argument is the whole error line (no ERR prefix added).
        ctx.out.error(&String::from_utf8_lossy(args[2]));
    } else if eq_ic(sub, "protocol") && n == 3 {
        return protocol(ctx, args[2]);
    } else if eq_ic(sub, "listpack") && n == 3 {
        encoding_probe(ctx, args[2], "listpack", "Listpack")?;
    } else if eq_ic(sub, "quicklist") && (n == 3 || n == 4) {
        encoding_probe(ctx, args[2], "quicklist", "Quicklist")?;
    } else if eq_ic(sub, "config-rewrite-force-all") && n == 2 {
        let mut c = crate::config::Config::clone(&ctx.srv.config.read());
        c.acl_users = crate::cmd::acl::config_user_lines(ctx.srv);
        c.rewrite_force_all()
            .map_err(|e| CmdError::msg(format!("ERR CONFIG-REWRITE-FORCE-ALL failed: {e}")))?;
        ctx.out.ok();
    } else if eq_ic(sub, "stringmatch-test") && n == 2 {
        // Redis fuzzes its glob matcher here; ours is covered by its own tests.
        ctx.out
            .simple("Apparently Redis did not crash: test passed");
    } else if eq_ic(sub, "populate") && (3..=5).contains(&n) {
        return debug_populate(ctx, args);
    } else if eq_ic(sub, "object") && n == 3 {
        return debug_object(ctx, args[2]);
    } else if eq_ic(sub, "drop-cluster-packet-filter") && n == 3 {
        // The cluster bus drops incoming messages of this type (-1: none).
        let ty = arg_i64(args[2])?;
        ctx.srv
            .debug
            .cluster_drop_packet_filter
            .store(ty, std::sync::atomic::Ordering::Relaxed);
        ctx.out.ok();
    } else if eq_ic(sub, "digest") && n == 2 {
        return digest::digest(ctx);
    } else if eq_ic(sub, "digest-value") && n >= 2 {
        return digest::digest_value(ctx, &args[2..]);
    } else if eq_ic(sub, "help") {
        return crate::cmd::help_lines(ctx, HELP);
    } else {
        return Err(unknown(sub));
    }
    Ok(())
}

/// Redis's addReplySubcommandSyntaxError for DEBUG.
fn unknown(sub: &[u8]) -> CmdError {
    CmdError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
        String::from_utf8_lossy(sub)
    ))
}

/// C's atoi, as Redis reads DEBUG's switches: leading blanks, a sign, digits; 0 if none.
fn atoi(b: &[u8]) -> i64 {
    let s = std::str::from_utf8(b).unwrap_or("").trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for c in digits.bytes().take_while(u8::is_ascii_digit) {
        v = v.saturating_mul(10).saturating_add(i64::from(c - b'0'));
    }
    if neg {
        -v
    } else {
        v
    }
}

/// DEBUG LISTPACK / QUICKLIST key: Redis prints the structure on its stdout; here the
/// same replies (no such key, wrong encoding, printed) without the dump.
fn encoding_probe(ctx: &mut Ctx<'_>, key: &[u8], enc: &str, name: &str) -> CmdResult {
    let db = ctx.cl.db;
    let now = crate::server::now_ms();
    let slot = crate::slot::key_hash_slot(key);
    let found = {
        let g = ctx.srv.ks.lock_stripe(crate::db::stripe_of(slot));
        g.get(db, slot, key)
            .filter(|e| live(e, now))
            .map(|e| e.value.encoding() == enc)
    };
    match found {
        None => Err(CmdError::msg("ERR no such key")),
        Some(false) => Err(CmdError::msg(format!("ERR Not a {enc} encoded object."))),
        Some(true) => {
            ctx.out
                .simple(&format!("{name} structure printed on stdout"));
            Ok(())
        }
    }
}

/// DEBUG PROTOCOL type: one test value of each reply type (unit/protocol's RESP3 checks).
fn protocol(ctx: &mut Ctx<'_>, name: &[u8]) -> CmdResult {
    let o = &mut *ctx.out;
    if eq_ic(name, "string") {
        o.bulk(b"Hello World");
    } else if eq_ic(name, "integer") {
        o.int(12345);
    } else if eq_ic(name, "double") {
        // Redis's test value, not pi.
        #[allow(clippy::approx_constant)]
        o.double(3.141);
    } else if eq_ic(name, "bignum") {
        o.big_number("1234567999999999999999999999999999999");
    } else if eq_ic(name, "null") {
        o.null();
    } else if eq_ic(name, "array") || eq_ic(name, "set") {
        if eq_ic(name, "set") {
            o.set(3);
        } else {
            o.array(3);
        }
        for j in 0..3 {
            o.int(j);
        }
    } else if eq_ic(name, "map") {
        o.map(3);
        for j in 0..3 {
            o.int(j);
            o.boolean(j == 1);
        }
    } else if eq_ic(name, "attrib") {
        if o.resp3 {
            o.raw(b"|1\r\n");
            o.bulk(b"key-popularity");
            o.array(2);
            o.bulk(b"key:123");
            o.int(90);
        }
        // An attribute is not a reply: a real one follows.
        o.bulk(b"Some real reply following the attribute");
    } else if eq_ic(name, "push") {
        if !o.resp3 {
            return Err(CmdError::msg("ERR RESP2 is not supported by this command"));
        }
        o.push(2);
        o.bulk(b"server-cpu-usage");
        o.int(42);
        // A push is not the command's reply: a real one follows.
        o.bulk(b"Some real reply following the push reply");
    } else if eq_ic(name, "true") {
        o.boolean(true);
    } else if eq_ic(name, "false") {
        o.boolean(false);
    } else if eq_ic(name, "verbatim") {
        o.verbatim(b"This is a verbatim\nstring", "txt");
    } else {
        return Err(CmdError::msg("ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false"));
    }
    Ok(())
}

const HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "AOF-FLUSH-SLEEP <microsec>",
    "    Server will sleep before flushing the AOF, this is used for testing (recorded only).",
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE but writes all configuration options, including",
    "    keywords not listed in original configuration file or default values.",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "LOADAOF",
    "    Flush the AOF buffers on disk and reload the AOF in memory.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "DROP-CLUSTER-PACKET-FILTER <packet-type>",
    "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cluster slots are not respected so keys not belonging to the",
    "    current node can be created in cluster mode.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "RELOAD [option ...]",
    "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
    "    * MERGE: conflicting keys will be loaded from RDB.",
    "    * NOFLUSH: the existing database will not be removed before load.",
    "    * NOSAVE: the database will be loaded from an existing RDB file.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
    "    Enables or disables checksum checks for RESTORE's payload (RDB files: always checked).",
    "SEGFAULT",
    "    Crash the server with sigsegv.",
    "PANIC",
    "    Crash the server simulating a panic.",
    "ASSERT",
    "    Crash by assertion failed.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "STRINGMATCH-TEST",
    "    Run a fuzz tester against the stringmatchlen() function.",
    "LISTPACK <key>",
    "    Show low level info about the listpack encoding of <key>.",
    "QUICKLIST <key> [<0|1>]",
    "    Show low level info about the quicklist encoding of <key>.",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing (recorded only).",
    "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
    "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
    "REPLYBUFFER RESIZING <0|1>",
    "    Enable or disable the reply buffer resize cron job.",
    "CLUSTERLINK KILL <to|from|all> <node-id>",
    "    Kills the link based on the direction to/from (both) with the provided node.",
    "HELP",
    "    Prints this help.",
];

/// Not past its TTL (DEBUG reads the stripe directly, without lazy expiry).
pub(super) fn live(e: &crate::db::Entry, now: u64) -> bool {
    let at = e.expire_at();
    at == crate::db::value::NO_EXPIRE || at > now
}

/// DEBUG POPULATE count [prefix] [size]: `prefix:N` = `value:N` (cut or zero-padded to
/// `size`) for N below count, keys that exist left alone; not propagated (as in Redis).
fn debug_populate(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    // Redis's getPositiveLongFromObjectOrReply: one message for "not a number" and "< 0".
    let positive = |a: &[u8]| -> Result<usize, CmdError> {
        arg_i64(a)
            .ok()
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| CmdError::msg("ERR value is out of range, must be positive"))
    };
    let count = positive(args[2])?;
    let prefix: &[u8] = args.get(3).copied().unwrap_or(b"key");
    let size = args.get(4).map(|a| positive(a)).transpose()?;
    let db = ctx.cl.db;
    let now = crate::server::now_ms();
    let mut key = Vec::with_capacity(prefix.len() + 21);
    for j in 0..count {
        let mut n = itoa::Buffer::new();
        key.clear();
        key.extend_from_slice(prefix);
        key.push(b':');
        key.extend_from_slice(n.format(j).as_bytes());
        let mut val = format!("value:{j}").into_bytes();
        if let Some(s) = size {
            val.resize(s, 0);
        }
        let slot = crate::slot::key_hash_slot(&key);
        let mut g = ctx.srv.ks.lock_stripe(crate::db::stripe_of(slot));
        if g.get(db, slot, &key).is_some_and(|e| live(e, now)) {
            continue;
        }
        let mut e = crate::db::Entry::new(Value::string(&val));
        e.set_access(ctx.srv.new_access(now));
        g.insert(db, slot, &key, e);
    }
    ctx.out.ok();
    Ok(())
}

/// DEBUG OBJECT key: Redis's one-line summary. `serializedlength` is the value's RDB
/// encoding, as DUMP writes it; for lists, the quicklist figures are those of Redis's
/// layout (8 KiB listpacks) estimated from the elements.
fn debug_object(ctx: &mut Ctx<'_>, key: &[u8]) -> CmdResult {
    let db = ctx.cl.db;
    let now = crate::server::now_ms();
    let slot = crate::slot::key_hash_slot(key);
    let g = ctx.srv.ks.lock_stripe(crate::db::stripe_of(slot));
    // Found whether or not its TTL passed: Redis reads the dict without expiring, so a
    // replica shows a key its master has not deleted yet.
    let Some(e) = g.get(db, slot, key) else {
        return Err(CmdError::msg("ERR no such key"));
    };
    let serialized = tessera_rdb::dump_value(&crate::db::rdb::to_rdb(&e.value))
        .len()
        .saturating_sub(11);
    let clock = ctx.srv.access_clock(now);
    let idle = clock.wrapping_sub(e.access()) & crate::db::value::ACCESS_MASK;
    let refcount = match e.value {
        Value::Int(i)
            if (0..10000).contains(&i) && crate::server::evict::shares_integers(ctx.srv) =>
        {
            i32::MAX as i64
        }
        _ => 1,
    };
    let mut s = format!(
        "Value at:{:p} refcount:{refcount} encoding:{} serializedlength:{serialized} lru:{} lru_seconds_idle:{idle}",
        e as *const crate::db::Entry,
        e.value.encoding(),
        e.access()
    );
    if let Value::List(l) = &e.value {
        // Listpack bytes: per element its encoding byte(s), data and back-length; each
        // node adds 6 header bytes and 1 end byte.
        let entries: usize = l
            .iter()
            .map(|x| {
                let hdr = if x.len() < 64 {
                    1
                } else if x.len() < 4096 {
                    2
                } else {
                    5
                };
                let entry = hdr + x.len();
                entry + if entry < 128 { 1 } else { 2 }
            })
            .sum::<usize>();
        let c = ctx.srv.config.read();
        let max = c.typed.list_max_listpack_size;
        let compressed = c.typed.list_compress_depth > 0;
        drop(c);
        // A negative size caps a node's bytes (-1: 4 KiB ... -5: 64 KiB), a positive one
        // its entries.
        let nodes = if max < 0 {
            entries.div_ceil((4096usize << ((-max).clamp(1, 5) - 1)) - 7)
        } else {
            l.len().div_ceil(max.max(1) as usize)
        }
        .max(1);
        let bytes = entries + 7 * nodes;
        s.push_str(&format!(
            " ql_nodes:{nodes} ql_avg_node:{:.2} ql_listpack_max:{max} ql_compressed:{} ql_uncompressed_size:{bytes}",
            l.len() as f64 / nodes as f64,
            compressed as u8
        ));
    }
    drop(g);
    ctx.out.simple(&s);
    Ok(())
}
