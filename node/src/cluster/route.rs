//! The dispatcher's redirection hook: Redis 7.0 `processCommand` → `getNodeByQuery`.
//!
//! Keys come from the command table's key specs; for EXEC, from every queued command. The
//! decision itself (order of checks, error texts) is `tessera_cluster::routing::route`.
//! Key existence (needed only for slots being migrated or imported) is looked up before the
//! cluster state is locked, so no keyspace lock is ever taken under the cluster lock.

use std::sync::atomic::Ordering;

use tessera_cluster::routing::{Route, RouteQuery};

use crate::cmd::{flags, table, CommandSpec};
use crate::db::stripe_of;
use crate::server::{ClientState, Server};
use crate::slot::key_hash_slot;

/// Commands that carry the ASKING flag in Redis's table.
fn is_asking_cmd(name: &str) -> bool {
    name == "restore-asking"
}

fn is_pubsubshard(name: &str) -> bool {
    matches!(name, "spublish" | "ssubscribe" | "sunsubscribe")
}

/// Decides whether `cmd` may run here. Returns the error line to send (MOVED, ASK,
/// CROSSSLOT, TRYAGAIN, CLUSTERDOWN) or None. Also maintains the one-shot ASKING flag and,
/// on a redirect, flags the open transaction (or discards it for EXEC) as Redis does.
pub fn route(
    srv: &Server,
    cl: &mut ClientState,
    cmd: &CommandSpec,
    args: &[&[u8]],
) -> Option<String> {
    let node = srv.cluster.get()?;
    crate::cluster::sync_config(srv, node);
    let asking = cl.cluster.asking;
    let is_exec = cmd.name == "exec" && cmd.has(flags::CONN);
    // ASKING lasts for one command, or until the end of the transaction it was sent in.
    if cmd.name != "asking" && (is_exec || (cl.multi.is_none() && cmd.name != "multi")) {
        cl.cluster.asking = false;
    }
    if cl.db != 0 {
        return None;
    }
    // The key list reuses the connection's buffers: no allocation per routed command.
    let mut keys = crate::resp::recycle_view(std::mem::take(&mut cl.route_keys));
    let mut is_write = cmd.has(flags::WRITE);
    // A script declaring writes (shebang or function flags) is a write, as Redis's
    // getCommandFlags: redirected away from a READONLY replica.
    if !is_write && cl.cluster.readonly && cmd.has(flags::LOCK_ALL) {
        is_write = crate::script::declares_writes(srv, cmd, args);
    }
    if is_exec {
        let mut idx = Vec::new();
        let queue = cl.multi.as_ref()?;
        let t = table();
        for q in queue {
            let view = crate::cmd::arg_view(q);
            if let Ok(c) = t.resolve(&view) {
                is_write |= c.has(flags::WRITE);
                idx.clear();
                c.key_indices(&view, &mut idx);
                keys.extend(idx.iter().map(|&i| &q[i][..]));
            }
        }
    } else {
        match cmd.keys {
            crate::cmd::KeyPos::None => {}
            // Most commands: one key, first argument.
            crate::cmd::KeyPos::Range {
                first: 1, last: 1, ..
            } => keys.push(args[1]),
            _ => {
                cl.scratch_idx.clear();
                cmd.key_indices(args, &mut cl.scratch_idx);
                keys.extend(cl.scratch_idx.iter().map(|&i| args[i]));
            }
        }
    }
    if keys.is_empty() {
        cl.route_keys = crate::resp::recycle_view(keys);
        return None;
    }
    let q = RouteQuery {
        keys,
        asking: asking || is_asking_cmd(cmd.name),
        readonly: cl.cluster.readonly,
        is_write,
        is_pubsubshard: is_pubsubshard(cmd.name),
        is_migrate: cmd.name == "migrate",
        tls_client: cl.tls,
    };
    let r = route_query(node, &q, |k| key_exists(srv, k));
    cl.route_keys = crate::resp::recycle_view(q.keys);
    let err = r.error()?;
    if let Route::Local { .. } = r {
        return None;
    }
    if is_exec {
        cl.multi = None;
        cl.multi_error = false;
        cl.handle.in_multi.store(false, Ordering::Relaxed);
        srv.watch.unwatch(cl);
    } else if cl.multi.is_some() {
        cl.multi_error = true;
    }
    cmd.stats.live().rejected.fetch_add(1, Ordering::Relaxed);
    Some(err)
}

/// True if `key` exists (and has not expired) in db 0.
/// Routes `q`. The routing snapshot (no cluster lock) decides unless a slot is being
/// migrated or imported, where key existence matters: then `exists` is asked for every key
/// first (keyspace locks are never taken under the cluster lock) and the full state decides.
pub fn route_query(
    node: &tessera_cluster::ClusterNode,
    q: &RouteQuery<'_>,
    exists: impl FnMut(&[u8]) -> bool,
) -> Route {
    if let Some(r) = node.route_fast(q) {
        return r;
    }
    // A stale snapshot (the state changed since it was built) is rebuilt on demand.
    if node.refresh_route_table() {
        if let Some(r) = node.route_fast(q) {
            return r;
        }
    }
    let exists: Vec<bool> = q.keys.iter().copied().map(exists).collect();
    node.route_slow(q, |k| {
        q.keys
            .iter()
            .position(|x| *x == k)
            .map(|i| exists[i])
            .unwrap_or(false)
    })
}

fn key_exists(srv: &Server, key: &[u8]) -> bool {
    let slot = key_hash_slot(key);
    let st = srv.ks.lock_stripe(stripe_of(slot));
    let now = crate::server::now_ms();
    st.get(0, slot, key)
        .is_some_and(|e| e.expire_at() == crate::db::NO_EXPIRE || e.expire_at() > now)
}
