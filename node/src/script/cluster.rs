//! Cluster mode: a script may only touch keys this node serves (Redis 7.0 `scriptCall` →
//! `getNodeByQuery`): keys of other slots *on this node* are allowed, as in Redis.

use tessera_cluster::routing::{Route, RouteQuery};

use crate::cmd::{flags, CommandSpec, Ctx, KeyPos};

/// The error (Redis's text) if `cmd` would be redirected away from this node.
pub fn check_local(ctx: &mut Ctx<'_>, cmd: &CommandSpec, argv: &[&[u8]]) -> Option<&'static str> {
    let node = ctx.srv.cluster.get()?;
    if ctx.cl.db != 0 || matches!(cmd.keys, KeyPos::None) {
        return None;
    }
    let mut idx = Vec::new();
    cmd.key_indices(argv, &mut idx);
    if idx.is_empty() {
        return None;
    }
    let q = RouteQuery {
        keys: idx.iter().map(|&i| argv[i]).collect(),
        asking: ctx.cl.cluster.asking,
        readonly: ctx.cl.cluster.readonly,
        is_write: cmd.has(flags::WRITE),
        is_pubsubshard: false,
        is_migrate: false,
        tls_client: ctx.cl.tls,
    };
    // An open slot: existence decides. Every stripe is held by the script, so look through
    // its locks (never a new stripe lock: that would self-deadlock).
    let now = ctx.ks.now;
    let r = crate::cluster::route::route_query(node, &q, |k| {
        crate::cmd::transaction::peek(&mut ctx.ks, 0, k)
            .is_some_and(|at| at == crate::db::NO_EXPIRE || at > now)
    });
    match r {
        Route::Local { .. } => None,
        Route::DownReadOnly => Some(
            "ERR Script attempted to execute a write command while the cluster is down and readonly",
        ),
        Route::Down => Some("ERR Script attempted to execute a command while the cluster is down"),
        _ => Some("ERR Script attempted to access a non local key in a cluster node"),
    }
}
