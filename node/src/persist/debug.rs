//! The DEBUG subcommands that belong to the persistence and replication layer, handed down
//! to `cmd`'s DEBUG as [`crate::cmd::UpperHooks::debug_upper`]: RELOAD [MERGE] [NOFLUSH]
//! [NOSAVE] and LOADAOF, which Redis 7.0's suites use to check that a dataset survives a
//! save and load (debug.c), CHANGE-REPL-ID and REPLICATE.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::cmd::{eq_ic, CmdError, CmdResult, Ctx};
use crate::db::LockSet;
use crate::server::Server;

/// DEBUG `args[1]` when it is one of this layer's subcommands, else None (`cmd` goes on).
pub fn debug_upper(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Option<CmdResult> {
    let sub = args.get(1)?;
    if eq_ic(sub, "reload") {
        Some(reload(ctx, args))
    } else if eq_ic(sub, "loadaof") {
        Some(loadaof(ctx))
    } else if eq_ic(sub, "change-repl-id") && args.len() == 2 {
        Some(change_repl_id(ctx))
    } else if eq_ic(sub, "replicate") && args.len() >= 3 {
        Some(replicate(ctx, args.get(2..).unwrap_or_default()))
    } else {
        None
    }
}

/// Runs `f` with none of the command's stripes held (a save and a load lock stripes one by
/// one; inside EXEC the command holds some or all of them), then takes the same ones back.
fn unlocked<R>(ctx: &mut Ctx<'_>, f: impl FnOnce(&Arc<Server>) -> R) -> R {
    let srv = ctx.srv;
    let all = ctx.ks.locks.all;
    let held: Vec<u16> = ctx.ks.locks.guards.iter().map(|(i, _)| *i).collect();
    ctx.ks.locks = LockSet::empty();
    let r = f(srv);
    ctx.ks.locks = if all {
        srv.ks.lock_all()
    } else {
        // Ascending, as every locker takes them.
        let mut l = LockSet::empty();
        for i in held {
            l.add(&srv.ks, i as usize);
        }
        l
    };
    r
}

/// Marks a load running (other clients are answered -LOADING, as during Redis's rdbLoad)
/// until dropped, however the load ends.
struct Loading<'a>(&'a Server);

impl<'a> Loading<'a> {
    fn start(srv: &'a Server) -> Self {
        srv.persist.loading.store(true, Ordering::Relaxed);
        // After `loading`, before the flush: see Persist::load_epoch.
        srv.persist.load_epoch.fetch_add(1, Ordering::SeqCst);
        Loading(srv)
    }
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        self.0.persist.loading.store(false, Ordering::Relaxed);
    }
}

/// Redis's emptyData(-1): every database and the function libraries; WATCHers of the
/// keys are touched and tracking clients get a flush invalidation.
fn empty_dataset(srv: &Server) {
    {
        let mut all = srv.ks.lock_all();
        all.for_each(|_, g| {
            for d in g.dbs.iter_mut() {
                *d = None;
            }
        });
    }
    srv.watch.touch_db(None);
    crate::tracking::on_flush(srv);
    if let Err(e) = crate::script::function::load_from_rdb(&srv.scripts.functions, Vec::new()) {
        tracing::warn!(error = %e, "function libraries not cleared");
    }
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: save dump.rdb (unless NOSAVE), empty the
/// dataset (unless NOFLUSH) and load the file back. A key in both is the file's (MERGE;
/// Redis without MERGE would abort on it, this node takes the file's too). A function
/// library in both fails the load without MERGE; with it the file's replaces it.
fn reload(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (mut flush, mut save, mut merge) = (true, true, false);
    for opt in args.get(2..).unwrap_or_default() {
        if eq_ic(opt, "merge") {
            merge = true;
        } else if eq_ic(opt, "noflush") {
            flush = false;
        } else if eq_ic(opt, "nosave") {
            save = false;
        } else {
            return Err(CmdError::msg(
                "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            ));
        }
    }
    use crate::script::function::Policy;
    let fn_policy = match (flush, merge) {
        (true, _) => Policy::Flush,
        (false, true) => Policy::Replace,
        (false, false) => Policy::Append,
    };
    let r = unlocked(ctx, |srv| {
        if save {
            if let Err(e) = super::save(srv) {
                tracing::warn!(error = %e, "DEBUG RELOAD: the save failed");
                return Err(CmdError::msg("ERR"));
            }
            // INFO rdb_saves counts SAVE and BGSAVE (Redis's stat_rdb_saves), not this.
            srv.persist.saves.fetch_sub(1, Ordering::Relaxed);
        }
        let _loading = Loading::start(srv);
        if flush {
            empty_dataset(srv);
        }
        let path = super::rdb_path(srv);
        let loaded = std::fs::File::open(&path)
            .map_err(|e| super::PersistError::Io {
                path: path.display().to_string(),
                source: e,
            })
            .and_then(|f| {
                // A replica keeps keys past their TTL (its master's DEL removes them).
                super::snapshot::load_rdb_stream_with(
                    srv,
                    std::io::BufReader::with_capacity(1 << 20, f),
                    &path.display().to_string(),
                    srv.repl.is_replica(),
                    fn_policy,
                )
            });
        match loaded {
            Ok(_) => {
                tracing::warn!("DB reloaded by DEBUG RELOAD");
                Ok(())
            }
            Err(e) => {
                tracing::warn!(error = %e, "DEBUG RELOAD: the load failed");
                Err(CmdError::msg("ERR Error trying to load the RDB dump"))
            }
        }
    });
    r?;
    ctx.out.ok();
    Ok(())
}

/// DEBUG LOADAOF: what was appended reaches the disk, the dataset is emptied and the AOF's
/// files (base and incr, from the manifest) are replayed, as at start; nothing replayed is
/// fed back to the AOF or replicas, and the change counter ends at 0 (as Redis's
/// `server.dirty = 0`). With appendonly no the files the on-disk manifest names are
/// loaded (a BGREWRITEAOF made them); where there are none Redis exits, this node answers
/// an error (with the dataset emptied, as Redis's would be).
fn loadaof(ctx: &mut Ctx<'_>) -> CmdResult {
    let r = unlocked(ctx, |srv| {
        let _loading = Loading::start(srv);
        let subs = srv.persist.prop.detach_all();
        empty_dataset(srv);
        let r = super::aof::replay_current(srv);
        srv.persist.prop.reattach(subs);
        srv.stats.dirty.store(0, Ordering::Relaxed);
        r
    });
    match r {
        Ok(()) => {
            tracing::warn!("Append Only File loaded by DEBUG LOADAOF");
            ctx.out.ok();
            Ok(())
        }
        Err(e) => {
            tracing::error!(error = %e, "DEBUG LOADAOF: the AOF could not be loaded");
            Err(CmdError::msg(
                format!("ERR Error loading the AOF: {e}").replace(['\r', '\n'], " "),
            ))
        }
    }
}

/// DEBUG CHANGE-REPL-ID: a new replication id and no previous one (Redis's
/// changeReplicationId + clearReplicationId2).
fn change_repl_id(ctx: &mut Ctx<'_>) -> CmdResult {
    tracing::warn!("Changing replication IDs after receiving DEBUG change-repl-id");
    {
        let mut sh = ctx.srv.repl.shared.lock();
        sh.replid = crate::repl::new_replid();
        sh.replid2 = "0".repeat(40);
        sh.second_offset = -1;
    }
    ctx.out.ok();
    Ok(())
}

/// DEBUG REPLICATE args...: the command goes into the replication stream as it is, to the
/// replicas only (Redis's replicationFeedSlaves with the stream's current database: no
/// SELECT), so the suites can make a replica diverge. A replica feeds nothing.
fn replicate(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> CmdResult {
    let srv = ctx.srv;
    if !srv.repl.is_replica() {
        let mut sh = srv.repl.shared.lock();
        if sh.backlog.is_some() {
            let mut b = Vec::with_capacity(16 + argv.iter().map(|a| a.len() + 16).sum::<usize>());
            b.extend_from_slice(format!("*{}\r\n", argv.len()).as_bytes());
            for a in argv {
                b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                b.extend_from_slice(a);
                b.extend_from_slice(b"\r\n");
            }
            sh.push(bytes::Bytes::from(b));
        }
    }
    ctx.out.ok();
    Ok(())
}

/// key-load-delay (a test-only config): after each key a load reads, sleep that many
/// microseconds, as Redis's rdbLoad does (a negative value sleeps 1 us once in that many
/// keys, on average), so the suites can watch a load in progress. Read per key, and the
/// sleep is cut short once the config goes back to 0 (the suites do that to end a load).
pub fn key_load_delay(srv: &Server) {
    let first = srv.config.read().typed.key_load_delay;
    if first == 0 {
        return;
    }
    if first < 0 {
        if rand::random_range(0..first.unsigned_abs()) == 0 {
            std::thread::sleep(std::time::Duration::from_micros(1));
        }
        return;
    }
    let until = std::time::Instant::now() + std::time::Duration::from_micros(first as u64);
    loop {
        let now = std::time::Instant::now();
        if now >= until || srv.config.read().typed.key_load_delay <= 0 {
            return;
        }
        std::thread::sleep((until - now).min(std::time::Duration::from_millis(10)));
    }
}
