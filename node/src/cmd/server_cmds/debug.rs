//! DEBUG: the subcommands Redis's own test suites drive (debug.c in Redis 7.0), with their
//! real effect where the data model has one. RELOAD and LOADAOF belong to the persistence
//! layer above this one and come down as [`crate::cmd::UpperHooks`].

use std::time::Duration;

use super::digest;
use crate::cmd::{arg_i64, eq_ic, CmdError, CmdResult, Ctx};
use crate::db::Value;

pub(super) fn debug(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if eq_ic(args[1], "sleep") && args.len() == 3 {
        let secs = crate::cmd::arg_f64(args[2])?;
        // Blocks this worker thread like Redis blocks its event loop (tests rely on it).
        std::thread::sleep(Duration::from_secs_f64(secs.clamp(0.0, 3600.0)));
        ctx.out.ok();
    } else if eq_ic(args[1], "set-active-expire") && args.len() == 3 {
        ctx.out.ok();
    } else if eq_ic(args[1], "populate") && (3..=5).contains(&args.len()) {
        return debug_populate(ctx, args);
    } else if eq_ic(args[1], "object") && args.len() == 3 {
        return debug_object(ctx, args[2]);
    } else if eq_ic(args[1], "drop-cluster-packet-filter") && args.len() == 3 {
        // Redis drops incoming bus messages of this type (-1: none). tessera-node has no
        // such filter: -1, what the cluster suite's init sets, is the only state it has.
        if arg_i64(args[2])? != -1 {
            return Err(CmdError::msg(
                "ERR DEBUG DROP-CLUSTER-PACKET-FILTER: tessera-node drops no bus messages (only -1 is supported)",
            ));
        }
        ctx.out.ok();
    } else if eq_ic(args[1], "digest") && args.len() == 2 {
        return digest::digest(ctx);
    } else if eq_ic(args[1], "digest-value") && args.len() >= 2 {
        return digest::digest_value(ctx, &args[2..]);
    } else if eq_ic(args[1], "help") {
        return crate::cmd::help_lines(
            ctx,
            &[
                "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DIGEST",
                "    Output a hex signature representing the current DB content.",
                "DROP-CLUSTER-PACKET-FILTER <packet-type>",
                "    Drop all packets that match the filtered type. Set to -1 allow all packets (tessera-node: only -1).",
                "DIGEST-VALUE <key> [<key> ...]",
                "    Output a hex signature of the values of all the specified keys.",
                "OBJECT <key>",
                "    Show low level info about the ZIPLIST encoding of <key>.",
                "POPULATE <count> [<prefix>] [<size>]",
                "    Create <count> string keys named key:<num>. If <prefix> is specified then",
                "    it is used instead of the 'key' prefix. These are not propagated to",
                "    replicas. Cluster slots are not respected so keys not belonging to the",
                "    current node can be created in cluster mode.",
                "SET-ACTIVE-EXPIRE <0|1>",
                "    Setting it to 0 disables expiry of volatile keys in the background (accepted; tessera-node keeps expiring).",
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals allowed.",
                "HELP",
                "    Prints this help.",
            ],
        );
    } else {
        return Err(CmdError::msg(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(args[1])
        )));
    }
    Ok(())
}

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
    let Some(e) = g.get(db, slot, key).filter(|e| live(e, now)) else {
        return Err(CmdError::msg("ERR no such key"));
    };
    let serialized = tessera_rdb::dump_value(&crate::db::rdb::to_rdb(&e.value))
        .len()
        .saturating_sub(11);
    let clock = ctx.srv.access_clock(now);
    let idle = clock.wrapping_sub(e.access()) & crate::db::value::ACCESS_MASK;
    let refcount = match e.value {
        Value::Int(i) if (0..10000).contains(&i) => i32::MAX as i64,
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
