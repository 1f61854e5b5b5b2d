//! The dispatcher's side of write propagation: what a successful write feeds to replicas
//! and the AOF (`crate::propagate`), decided from the command's context: its rewrite
//! (`Ctx::propagate_as`), whether it runs inside EXEC or a script (collected, then fed as
//! one block by [`end_exec`]) and the stripes it holds locked.

use bytes::Bytes;

use super::Ctx;
use crate::propagate::Target;
use crate::resp::arg_view;

/// Feeds a successful write command to the subscribers (called by the dispatcher).
/// Commands that changed nothing (a blocking command that blocked, a DEL of missing keys...)
/// never get here: `run_locked` decides.
/// `rewrite`: what the handler asked to propagate instead (`Ctx::propagate_as`): none for
/// an empty list, several as MULTI ... EXEC (Redis 7.0's also-propagate).
pub fn propagate(ctx: &mut Ctx<'_>, args: &[&[u8]], rewrite: Option<Vec<Vec<Bytes>>>) {
    let db = ctx.ks.db;
    if ctx.in_exec {
        // Inside EXEC: collected, then fed as one MULTI ... EXEC block by `end_exec`.
        let cmds = rewrite.unwrap_or_else(|| vec![crate::resp::owned_args(args)]);
        ctx.ks
            .fx
            .exec_writes
            .extend(cmds.into_iter().map(|c| (db, c, Target::All)));
        return;
    }
    match rewrite {
        None => feed(ctx, &[(db, args, Target::All)]),
        Some(cmds) => {
            if cmds.is_empty() {
                return;
            }
            let views: Vec<Vec<&[u8]>> = cmds.iter().map(|c| arg_view(c)).collect();
            let list: Vec<(usize, &[&[u8]], Target)> =
                views.iter().map(|v| (db, &v[..], Target::All)).collect();
            feed(ctx, &list);
        }
    }
}

/// Feeds `args` to replicas only, whether or not the command is a write: PUBLISH and
/// SPUBLISH outside cluster mode (Redis's `forceCommandPropagation(c, PROPAGATE_REPL)`).
/// Inside EXEC or a script it joins the block's other writes.
pub fn to_replicas(ctx: &mut Ctx<'_>, args: &[&[u8]]) {
    if !ctx.srv.persist.prop.active() {
        return;
    }
    let db = ctx.ks.db;
    if ctx.in_exec {
        ctx.ks
            .fx
            .exec_writes
            .push((db, crate::resp::owned_args(args), Target::Replicas));
        return;
    }
    feed(ctx, &[(db, args, Target::Replicas)]);
}

/// End of an EXEC or a script (its locks still held): feeds its writes, wrapped in
/// MULTI/EXEC when there are several, so a crash never replays half a transaction.
pub fn end_exec(ctx: &mut Ctx<'_>) {
    let cmds = std::mem::take(&mut ctx.ks.fx.exec_writes);
    if cmds.is_empty() {
        return;
    }
    let views: Vec<(usize, Vec<&[u8]>, Target)> = cmds
        .iter()
        .map(|(db, c, t)| (*db, arg_view(c), *t))
        .collect();
    let list: Vec<(usize, &[&[u8]], Target)> =
        views.iter().map(|(db, v, t)| (*db, &v[..], *t)).collect();
    feed(ctx, &list);
}

/// Feeds `cmds` with the stripes the command holds, then marks the client's AOF watermark
/// (appendfsync always waits for it before the reply).
fn feed(ctx: &mut Ctx<'_>, cmds: &[(usize, &[&[u8]], Target)]) {
    let stripes = held_stripes(ctx);
    ctx.srv
        .persist
        .prop
        .feed(cmds, &stripes, ctx.cl.from_master);
    ctx.cl.aof_mark = ctx.srv.persist.aof.written_mark();
}

fn held_stripes(ctx: &Ctx<'_>) -> smallvec::SmallVec<[u16; 4]> {
    if ctx.ks.locks.all {
        smallvec::SmallVec::new()
    } else {
        ctx.ks.locks.guards.iter().map(|(i, _)| *i).collect()
    }
}
