//! CLUSTER (delegated to `tessera_cluster`), READONLY, READWRITE, ASKING.

use crate::cmd::{CmdError, CmdResult, CommandSpec, Ctx};

const DISABLED: &str = "ERR This instance has cluster support disabled";

pub fn commands() -> Vec<CommandSpec> {
    let g = "cluster";
    vec![
        CommandSpec::new("cluster", -2, "stale", (0, 0, 0), cluster)
            .group(g)
            .since("3.0.0")
            .summary("A container for Redis Cluster commands")
            .subs(subcommands()),
        CommandSpec::new("readonly", 1, "fast loading stale", (0, 0, 0), readonly)
            .group(g)
            .since("3.0.0"),
        CommandSpec::new("readwrite", 1, "fast loading stale", (0, 0, 0), readwrite)
            .group(g)
            .since("3.0.0"),
        CommandSpec::new("asking", 1, "fast", (0, 0, 0), asking)
            .group(g)
            .since("3.0.0"),
    ]
}

/// CLUSTER's subcommands with Redis 7.0's arity and flags (`no_async_loading` is shown by
/// COMMAND INFO from Redis's metadata), all run by [`cluster`]: listed by COMMAND, and
/// their arity and names checked before the cluster support is, as Redis's processCommand
/// does. MYSHARDID is Redis 7.2's.
fn subcommands() -> Vec<CommandSpec> {
    const SUBS: &[(&str, i32, &str)] = &[
        ("addslots", -3, "admin stale"),
        ("addslotsrange", -4, "admin stale"),
        ("bumpepoch", 2, "admin stale"),
        ("count-failure-reports", 3, "admin stale"),
        ("countkeysinslot", 3, "stale"),
        ("delslots", -3, "admin stale"),
        ("delslotsrange", -4, "admin stale"),
        ("failover", -2, "admin stale"),
        ("flushslots", 2, "admin stale"),
        ("forget", 3, "admin stale"),
        ("getkeysinslot", 4, "stale"),
        // Valkey 9's atomic slot migration, target side (cluster::asm).
        ("getslotmigrations", 2, "admin stale"),
        ("migrateslots", -4, "admin stale"),
        ("cancelslotmigrations", 2, "admin stale"),
        ("help", 2, "loading stale"),
        ("info", 2, "stale"),
        ("keyslot", 3, "stale"),
        ("links", 2, "stale"),
        ("meet", -4, "admin stale"),
        ("myid", 2, "stale"),
        ("myshardid", 2, "stale"),
        ("nodes", 2, "stale"),
        ("replicas", 3, "admin stale"),
        ("replicate", 3, "admin stale"),
        ("reset", -2, "admin noscript stale"),
        ("saveconfig", 2, "admin stale"),
        ("set-config-epoch", 3, "admin stale"),
        ("setslot", -4, "admin stale"),
        ("shards", 2, "stale"),
        ("slaves", 3, "admin stale"),
        ("slots", 2, "stale"),
        ("syncslots", -3, "admin stale"),
    ];
    SUBS.iter()
        .map(|&(name, arity, flags)| CommandSpec::new(name, arity, flags, (0, 0, 0), cluster))
        .collect()
}

/// CLUSTER subcommands that read no key: their answer cannot be half-loaded.
const KEYLESS: &[&str] = &[
    "nodes",
    "info",
    "slots",
    "shards",
    "myid",
    "myshardid",
    "links",
    "keyslot",
    "replicas",
    "slaves",
    "count-failure-reports",
    "help",
];

/// True for a CLUSTER subcommand that reads no key (NODES, INFO, SLOTS...): a replica's
/// load that started while it ran did not change its answer, so the dispatcher keeps it
/// instead of answering LOADING (in Redis the load cannot start mid-command; the cluster
/// suite asks a new replica for CLUSTER NODES right after CLUSTER REPLICATE).
pub fn reads_no_keys(name: &str, args: &[&[u8]]) -> bool {
    (name == "cluster" || name.starts_with("cluster|"))
        && args
            .get(1)
            .is_some_and(|s| KEYLESS.iter().any(|k| s.eq_ignore_ascii_case(k.as_bytes())))
}

fn cluster(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Some(node) = crate::cluster::node(ctx.srv) else {
        return Err(CmdError::msg(DISABLED));
    };
    crate::cluster::sync_config(ctx.srv, node);
    let a: Vec<&[u8]> = args[1..].iter().map(|b| &b[..]).collect();
    let tls = ctx.cl.tls;
    let sub = a
        .first()
        .map(|s| s.to_ascii_lowercase())
        .unwrap_or_default();
    if sub == b"syncslots" {
        // From our master or the AOF: a tracking job; from a client: maybe the import link.
        let origin = if ctx.cl.from_master || ctx.cl.internal {
            tessera_cluster::asm::Origin::Replication
        } else {
            tessera_cluster::asm::Origin::Client
        };
        let (r, job) = crate::cluster::asm::syncslots(ctx.srv, node, &a[1..], origin);
        crate::cluster::reply::write(ctx.out, &r);
        if let Some(job) = job {
            ctx.cl.pending = Some(crate::server::clients::Pending::SlotImport { job });
        }
        return Ok(());
    }
    if sub == b"migrateslots" || sub == b"cancelslotmigrations" {
        let r = if sub == b"migrateslots" {
            crate::cluster::asm::migrateslots(ctx.srv, node, &a[1..])
        } else {
            crate::cluster::asm::cancelslotmigrations(ctx.srv, node)
        };
        crate::cluster::reply::write(ctx.out, &r);
        return Ok(());
    }
    if sub == b"setslot" {
        // The legacy method and atomic migrations exclude each other (Valkey 9).
        if let Some(e) = crate::cluster::asm::setslot_refusal(ctx.srv) {
            return Err(CmdError::msg(e));
        }
    }
    if sub == b"getslotmigrations" {
        let r = crate::cluster::asm::getslotmigrations(ctx.srv);
        crate::cluster::reply::write(ctx.out, &r);
        return Ok(());
    }
    let r = if ctx.cl.from_master
        && a.first()
            .is_some_and(|s| s.eq_ignore_ascii_case(b"failover"))
    {
        // Our master is shutting down and names the replica that takes over (valkey 9).
        let now = crate::server::now_ms();
        match node.with_state(|st| st.failover_from_master(&a, now)) {
            Ok(()) => tessera_cluster::Reply::Ok,
            Err(e) => tessera_cluster::Reply::err(e),
        }
    } else if ctx.in_exec {
        // Inside EXEC this thread may hold stripe locks already: read the keyspace through
        // the held locks instead of letting the cluster crate lock stripes again.
        let facts = ExecFacts::gather(ctx, &a);
        node.with_state(|st| {
            tessera_cluster::commands::execute(st, &facts, &a, crate::server::now_ms(), tls)
        })
    } else {
        tessera_cluster::commands::cluster_command(node, &a, tls)
    };
    crate::cluster::reply::write(ctx.out, &r);
    Ok(())
}

/// Keyspace answers for a CLUSTER command run inside EXEC, read through `ctx.ks`.
struct ExecFacts {
    db_size: usize,
    slot: Option<(u16, usize, Vec<Vec<u8>>)>,
}

impl ExecFacts {
    fn gather(ctx: &mut Ctx<'_>, a: &[&[u8]]) -> ExecFacts {
        let mut db_size = 0;
        ctx.ks.for_each_stripe(|_, st| {
            db_size += st.db(0).map(|d| d.len()).unwrap_or(0);
        });
        let slot = a
            .get(1)
            .and_then(|s| std::str::from_utf8(s).ok())
            .and_then(|s| s.parse::<u16>().ok())
            .filter(|s| (*s as usize) < crate::slot::SLOTS)
            .map(|s| {
                let st = ctx.ks.stripe(s);
                let (n, keys) = match st.map(0, s) {
                    Some(m) => (m.len(), m.iter().map(|(k, _)| k.to_vec()).collect()),
                    None => (0, Vec::new()),
                };
                (s, n, keys)
            });
        ExecFacts { db_size, slot }
    }
}

impl tessera_cluster::Host for ExecFacts {
    fn count_keys_in_slot(&self, slot: u16) -> usize {
        match &self.slot {
            Some((s, n, _)) if *s == slot => *n,
            _ => 0,
        }
    }
    fn keys_in_slot(&self, slot: u16, count: usize) -> Vec<Vec<u8>> {
        match &self.slot {
            Some((s, _, k)) if *s == slot => k.iter().take(count).cloned().collect(),
            _ => Vec::new(),
        }
    }
    fn delete_keys_in_slot(&self, _slot: u16) -> usize {
        0
    }
    fn db_size(&self) -> usize {
        self.db_size
    }
    fn publish_local(&self, _channel: &[u8], _message: &[u8], _shard: bool) {}
}

fn readonly(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    if !crate::cluster::enabled(ctx.srv) {
        return Err(CmdError::msg(DISABLED));
    }
    ctx.cl.cluster.readonly = true;
    ctx.out.ok();
    Ok(())
}

fn readwrite(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    if !crate::cluster::enabled(ctx.srv) {
        return Err(CmdError::msg(DISABLED));
    }
    ctx.cl.cluster.readonly = false;
    ctx.out.ok();
    Ok(())
}

fn asking(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    if !crate::cluster::enabled(ctx.srv) {
        return Err(CmdError::msg(DISABLED));
    }
    ctx.cl.cluster.asking = true;
    ctx.out.ok();
    Ok(())
}
