//! Persistence: RDB snapshots (SAVE, BGSAVE, save points, save on shutdown, load at start)
//! and the append-only file (see [`aof`]).
//!
//! Snapshots are written stripe by stripe: each stripe is locked just long enough to copy
//! its entries into the RDB value model, then the file is written with no lock held. So a
//! BGSAVE never stops the world; the price is that the snapshot is consistent per stripe
//! (per slot), not globally — the same guarantee a cluster gives across slots.

pub mod aof;
pub mod aof_base;
pub mod child;
pub mod commands;
pub mod debug;
use crate::propagate;
pub mod shutdown;
pub mod snapshot;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::server::{now_ms, Server};

/// Errors of saving or loading; `Display` is the line the node logs before exiting.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("Short read or OOM loading DB. Unrecoverable error, aborting now. ({path}: {source} at offset {offset})")]
    Rdb {
        path: String,
        offset: u64,
        source: tessera_rdb::RdbError,
    },
    #[error("FATAL: Data file was created with a Redis server configured to handle more than {0} databases. Exiting")]
    TooManyDbs(usize),
    #[error("Bad file format reading the append only file {path}: {reason} at offset {offset}")]
    AofCorrupt {
        path: String,
        offset: u64,
        reason: String,
    },
    #[error("Unexpected end of file reading the append only file {path} at offset {offset}; set aof-load-truncated yes to load what is valid")]
    AofTruncated { path: String, offset: u64 },
    #[error("{source}\n(in {path})")]
    AofManifest {
        path: String,
        source: tessera_rdb::aof::ManifestError,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A config name that would put files outside their directory.
    #[error("{0}")]
    BadName(&'static str),
    #[error("Background save already in progress")]
    InProgress,
}

/// Why write commands are refused: the disk cannot take them (redis's
/// `writeCommandsDeniedByDiskError`). `Display` is redis's MISCONF reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiskError {
    #[error("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.")]
    Rdb,
    #[error("MISCONF Errors writing to the AOF file: {}", aof::strerror(*.0))]
    Aof(i32),
}

/// Whether a write from `cl` must be refused now, and why: after a failed background save
/// (with stop-writes-on-bgsave-error and save points), or while the AOF cannot be written
/// or fsynced. The master's stream and the AOF replay are never refused (a replica applies
/// what its master sent; redis would rather panic, unless replica-ignore-disk-write-errors).
/// Two relaxed loads when the disk is fine.
pub fn writes_denied(srv: &Server, cl: &crate::server::ClientState) -> Option<DiskError> {
    let p = &srv.persist;
    let rdb_failed = !p.last_bgsave_ok.load(Ordering::Relaxed);
    let aof_errno = if p.aof.enabled() {
        p.aof.error_errno()
    } else {
        0
    };
    if !rdb_failed && aof_errno == 0 {
        return None;
    }
    let from_master =
        cl.from_master || (cl.id != 0 && cl.id == srv.repl.master_client.load(Ordering::Relaxed));
    if cl.internal || from_master {
        return None;
    }
    if rdb_failed
        && srv.config.read().typed.stop_writes_on_bgsave_error
        && !save_points(srv).is_empty()
    {
        return Some(DiskError::Rdb);
    }
    (aof_errno != 0).then_some(DiskError::Aof(aof_errno))
}

/// How a SHUTDOWN asked to treat the dataset.
pub const SHUTDOWN_DEFAULT: u8 = 0;
pub const SHUTDOWN_NOSAVE: u8 = 1;
pub const SHUTDOWN_SAVE: u8 = 2;

/// Persistence state shared by commands, the cron and shutdown.
pub struct Persist {
    pub bgsave_in_progress: AtomicBool,
    /// BGSAVE SCHEDULE arrived while a save ran: start one when it ends.
    pub bgsave_scheduled: AtomicBool,
    pub last_bgsave_ok: AtomicBool,
    /// Duration of the last background save in seconds, -1 before the first.
    pub last_bgsave_time_sec: AtomicI64,
    pub current_save_started: AtomicU64,
    pub loading: AtomicBool,
    /// Bytes of RDB read so far by the running load (0 between loads): a command waits for
    /// a load that has not yet read loading-process-events-interval-bytes ([`wait_short_load`]).
    pub load_progress: AtomicU64,
    /// Bumped when a replica starts replacing its dataset with its master's RDB (before the
    /// flush). A command that passed the `loading` check just before and then ran across
    /// the flush sees it change, and answers -LOADING instead of a half-loaded result.
    pub load_epoch: AtomicU64,
    pub shutdown_mode: AtomicU8,
    /// SHUTDOWN NOW (or `now` in shutdown-on-sigterm/sigint): no wait for replicas.
    pub shutdown_now: AtomicBool,
    /// SHUTDOWN FAILOVER (or `failover` in shutdown-on-sigterm/sigint, valkey 9): a cluster
    /// master hands its slots to an in-sync replica before exiting ([`shutdown`]).
    pub shutdown_failover: AtomicBool,
    /// Unix seconds of the last save attempt that failed (save points retry after 5 s).
    pub last_failed_save: AtomicU64,
    /// Successful RDB saves since start (INFO rdb_saves).
    pub saves: AtomicU64,
    /// Keys the last RDB load kept, and skipped as expired (INFO rdb_last_load_keys_*).
    pub last_load_keys: AtomicU64,
    pub last_load_keys_expired: AtomicU64,
    pub aof: aof::AofState,
    /// Subscribers of the write stream (the AOF; replication later).
    pub prop: propagate::Propagator,
    /// The pid of the background save's child while it may be signalled, else 0.
    pub child_pid: AtomicI32,
    /// Children forked since start, and how long the last fork took (INFO stats).
    pub total_forks: AtomicU64,
    pub latest_fork_usec: AtomicU64,
    /// Keys the running save will write and has written (INFO current_save_keys_*).
    pub save_keys_total: AtomicU64,
    pub save_keys_processed: AtomicU64,
    /// The largest copy-on-write size seen of the running child, and the last child's
    /// (INFO current_cow_peak, rdb_last_cow_size).
    pub cow_peak: AtomicU64,
    pub last_cow: AtomicU64,
    /// Foreground saves take turns: they share the temp file name `temp-<pid>.rdb`.
    pub foreground_save: parking_lot::Mutex<()>,
    /// Set by a second SIGINT during the shutdown's save: the save stops at once.
    pub stop_save: AtomicBool,
}

impl Persist {
    /// A background save's child was forked.
    pub fn child_started(&self, pid: i32, fork_usec: u64) {
        self.total_forks.fetch_add(1, Ordering::Relaxed);
        self.latest_fork_usec.store(fork_usec, Ordering::Relaxed);
        self.cow_peak.store(0, Ordering::Relaxed);
        self.child_pid.store(pid, Ordering::Release);
    }

    /// Measures the child's copy-on-write size (`last`: as the save's final figure).
    pub fn note_cow(&self, pid: i32, last: bool) -> u64 {
        let cow = child::private_dirty(pid).unwrap_or(0);
        self.cow_peak.fetch_max(cow, Ordering::Relaxed);
        if last {
            self.last_cow.store(cow, Ordering::Relaxed);
        }
        cow
    }

    /// Ends the background save's child, as Redis's shutdown does (killRDBChild and
    /// rdbRemoveTempFile): the save thread then sees it gone and fails.
    pub fn kill_save_child(&self, dir: &std::path::Path) {
        let pid = self.child_pid.swap(0, Ordering::AcqRel);
        if pid <= 0 {
            return;
        }
        tracing::warn!("There is a child saving an .rdb. Killing it!");
        // SAFETY: the child is not reaped while child_pid holds it (snapshot::write_rdb_child
        // clears it first), so the pid is still our child's.
        unsafe { libc::kill(pid, libc::SIGUSR1) };
        let _ = std::fs::remove_file(dir.join(format!("temp-{pid}.rdb")));
    }
}

impl Default for Persist {
    fn default() -> Self {
        Persist {
            bgsave_in_progress: AtomicBool::new(false),
            bgsave_scheduled: AtomicBool::new(false),
            last_bgsave_ok: AtomicBool::new(true),
            last_bgsave_time_sec: AtomicI64::new(-1),
            current_save_started: AtomicU64::new(0),
            loading: AtomicBool::new(false),
            load_progress: AtomicU64::new(0),
            load_epoch: AtomicU64::new(0),
            shutdown_mode: AtomicU8::new(SHUTDOWN_DEFAULT),
            shutdown_now: AtomicBool::new(false),
            shutdown_failover: AtomicBool::new(false),
            last_failed_save: AtomicU64::new(0),
            saves: AtomicU64::new(0),
            last_load_keys: AtomicU64::new(0),
            last_load_keys_expired: AtomicU64::new(0),
            aof: aof::AofState::default(),
            prop: propagate::Propagator::default(),
            child_pid: AtomicI32::new(0),
            total_forks: AtomicU64::new(0),
            latest_fork_usec: AtomicU64::new(0),
            save_keys_total: AtomicU64::new(0),
            save_keys_processed: AtomicU64::new(0),
            cow_peak: AtomicU64::new(0),
            last_cow: AtomicU64::new(0),
            foreground_save: parking_lot::Mutex::new(()),
            stop_save: AtomicBool::new(false),
        }
    }
}

/// The path of dump.rdb from `dir` and `dbfilename`.
pub fn rdb_path(srv: &Server) -> PathBuf {
    let c = &srv.config.read().typed;
    c.dir.join(&c.dbfilename)
}

/// Whether clients get -LOADING from the first accept until the start is done: while a
/// dump.rdb is there to load, with appendonly (the AOF is loaded, or made, before any write
/// may reach it), and in cluster mode (until the cluster state is up, CLUSTER commands
/// would find none). A plain node with no file answers at once, as redis-server does.
pub fn holds_loading_at_start(srv: &Server) -> bool {
    let rdb = rdb_path(srv);
    let c = &srv.config.read().typed;
    c.appendonly || c.cluster_enabled || rdb.exists()
}

/// The `save` points as (seconds, changes).
pub fn save_points(srv: &Server) -> Vec<(u64, u64)> {
    srv.config.read().typed.save.clone()
}

/// Foreground save (SAVE, shutdown): writes dump.rdb and resets the change counter.
#[tracing::instrument(skip(srv))]
pub fn save(srv: &Server) -> Result<u64, PersistError> {
    let dirty = srv.stats.dirty.load(Ordering::Relaxed);
    let path = rdb_path(srv);
    let started = Instant::now();
    let stop = || srv.persist.stop_save.load(Ordering::Relaxed);
    let r = if srv.repl.is_replica() {
        // A replica's file records the stream offset its data reaches, so that after a
        // restart it can continue with a partial resync: the stream is held still while the
        // keys are written (a background save can't hold it that long and records none).
        let _apply = srv.repl.apply_lock.lock();
        snapshot::write_rdb(srv, &path, srv.repl.save_info(), &stop)
    } else {
        // A master's history only while its writes are stopped (the shutdown's save):
        // restarted, it lets its replicas continue (repl::Repl::master_save_info).
        snapshot::write_rdb(srv, &path, srv.repl.master_save_info(), &stop)
    };
    finish_save(srv, dirty, &r, started, false);
    r
}

/// FLUSHALL's save (Redis's flushAllDataAndResetRDB): with `save` points set, the emptied
/// dataset is saved at once, so dump.rdb is empty too and the change counter restarts at 0.
pub fn save_after_flushall(srv: &Server) {
    if save_points(srv).is_empty() {
        return;
    }
    if let Err(e) = save(srv) {
        tracing::warn!(error = %e, "the save after FLUSHALL failed");
    }
}

/// Starts a background save on its own thread.
pub fn bgsave(srv: &Arc<Server>) -> Result<(), PersistError> {
    if srv
        .persist
        .bgsave_in_progress
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Err(PersistError::InProgress);
    }
    srv.persist
        .current_save_started
        .store(now_ms() / 1000, Ordering::Relaxed);
    let path = rdb_path(srv);
    let dirty = srv.stats.dirty.load(Ordering::Relaxed);
    let child = snapshot::fork_save_child(srv, &path);
    let srv2 = srv.clone();
    let spawned = std::thread::Builder::new()
        .name("tessera-bgsave".into())
        .spawn(move || {
            let started = Instant::now();
            let r = snapshot::write_rdb_child(&srv2, &path, child);
            match &r {
                Ok(n) => tracing::info!(bytes = n, "Background saving terminated with success"),
                Err(e) => tracing::warn!(error = %e, "Background saving error"),
            }
            finish_save(&srv2, dirty, &r, started, true);
            srv2.persist
                .bgsave_in_progress
                .store(false, Ordering::Release);
        });
    if let Err(e) = spawned {
        // The closure, and the child in it, are gone: the child was killed and reaped.
        srv.persist.child_pid.store(0, Ordering::Release);
        srv.persist
            .bgsave_in_progress
            .store(false, Ordering::Release);
        return Err(PersistError::Io {
            path: "bgsave thread".into(),
            source: e,
        });
    }
    Ok(())
}

fn finish_save(
    srv: &Server,
    dirty_before: u64,
    r: &Result<u64, PersistError>,
    started: Instant,
    background: bool,
) {
    let now = now_ms() / 1000;
    match r {
        Ok(_) => {
            // Writes that happened during the save stay counted (like Redis).
            // (The counter is sharded: a write landing between load and store may go uncounted.)
            let cur = srv.stats.dirty.load(Ordering::Relaxed);
            srv.stats
                .dirty
                .store(cur.saturating_sub(dirty_before), Ordering::Relaxed);
            srv.last_save.store(now, Ordering::Relaxed);
        }
        Err(_) => srv.persist.last_failed_save.store(now, Ordering::Relaxed),
    }
    // A failed SAVE leaves the status alone, a good one clears it (as redis's rdbSave).
    if background || r.is_ok() {
        srv.persist
            .last_bgsave_ok
            .store(r.is_ok(), Ordering::Relaxed);
    }
    if background {
        srv.persist
            .last_bgsave_time_sec
            .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
    }
}

/// Once a second: save points, scheduled BGSAVE, AOF fsync (everysec) and auto rewrite.
pub fn cron(srv: &Arc<Server>) {
    aof::cron(srv);
    let p = &srv.persist;
    // One background job at a time, as Redis's single child.
    if p.bgsave_in_progress.load(Ordering::Acquire)
        || p.loading.load(Ordering::Relaxed)
        || p.aof.rewrite_in_progress.load(Ordering::Acquire)
    {
        return;
    }
    if p.bgsave_scheduled.swap(false, Ordering::AcqRel) {
        let _ = bgsave(srv);
        return;
    }
    let dirty = srv.stats.dirty.load(Ordering::Relaxed);
    let now = now_ms() / 1000;
    let since = now.saturating_sub(srv.last_save.load(Ordering::Relaxed));
    // After a failed save, retry no sooner than 5 s later (like Redis's CONFIG_BGSAVE_RETRY_DELAY).
    if now.saturating_sub(p.last_failed_save.load(Ordering::Relaxed)) < 5 {
        return;
    }
    for (secs, changes) in save_points(srv) {
        if dirty >= changes && since >= secs {
            tracing::info!("{changes} changes in {secs} seconds. Saving...");
            if let Err(e) = bgsave(srv) {
                tracing::warn!(error = %e, "save point BGSAVE not started");
            }
            return;
        }
    }
}

/// Starts the once-a-second persistence cron and the AOF writer.
pub fn start(srv: &Arc<Server>) {
    aof::attach(srv);
    let srv = srv.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if srv.shutting_down.load(Ordering::Relaxed) {
                return;
            }
            cron(&srv);
        }
    });
}

/// Longest a command waits for a load that is still short of
/// loading-process-events-interval-bytes before it is answered -LOADING anyway.
/// Redis's clients would wait for the whole of such a load; the bound only keeps a stalled
/// load from holding an I/O thread for good. Generous: a short load in a debug build on a
/// busy machine took more than 2 s.
const SHORT_LOAD_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Called by the dispatcher before answering -LOADING. Redis loads inside its event loop
/// and serves clients (with -LOADING) only each time loading-process-events-interval-bytes
/// more of the RDB are read: during a shorter load a client's command just waits, and runs
/// on the loaded data (Redis's cluster harness asks a fresh replica for CLUSTER NODES right
/// after CLUSTER REPLICATE). So wait while a load runs and has read less than that, bounded
/// by [`SHORT_LOAD_WAIT`]. True when no load runs any more.
pub fn wait_short_load(srv: &Server) -> bool {
    let interval = srv
        .config
        .read()
        .typed
        .loading_process_events_interval_bytes;
    let deadline = Instant::now() + SHORT_LOAD_WAIT;
    while srv.persist.loading.load(Ordering::Acquire) {
        if srv.persist.load_progress.load(Ordering::Relaxed) >= interval
            || Instant::now() >= deadline
        {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    true
}

/// Loads the dataset at start: the AOF when `appendonly yes` and it exists, else dump.rdb.
/// The loading flag stays up: the caller lowers it once the node is whole (in cluster mode,
/// once the cluster has started), so no client sees "cluster support disabled" in between.
pub fn load_at_start(srv: &Arc<Server>) -> Result<(), PersistError> {
    ignore_sigxfsz();
    let started = Instant::now();
    // A replica (replicaof, or a replica in nodes.conf) keeps expired keys, as Redis's
    // rdbLoad does when not iAmMaster().
    let replica = {
        let c = srv.config.read();
        c.typed.replicaof.is_some() || crate::cluster::starts_as_replica(&c)
    };
    let r = if srv.config.read().typed.appendonly {
        aof::load_and_open(srv)
    } else {
        let path = rdb_path(srv);
        if !path.exists() {
            Ok(())
        } else if replica {
            load_rdb_keeping_expired(srv, &path).map(|n| {
                tracing::info!(keys = n, "DB loaded from disk");
            })
        } else {
            snapshot::load_rdb(srv, &path).map(|n| {
                tracing::info!(keys = n, "DB loaded from disk");
            })
        }
    };
    // Replayed commands are not changes since the last save.
    srv.stats.dirty.store(0, Ordering::Relaxed);
    if r.is_ok() {
        tracing::info!(
            secs = started.elapsed().as_secs_f64(),
            "Done loading persisted data"
        );
    }
    r
}

/// [`snapshot::load_rdb`] for a replica: keys whose TTL passed are loaded too.
fn load_rdb_keeping_expired(srv: &Server, path: &std::path::Path) -> Result<u64, PersistError> {
    let f = std::fs::File::open(path).map_err(|e| PersistError::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    let (n, _, repl) = snapshot::load_rdb_stream(
        srv,
        std::io::BufReader::with_capacity(1 << 20, f),
        &path.display().to_string(),
        true,
    )?;
    *srv.repl.restored.lock() = repl;
    Ok(n)
}

/// Past a file-size limit (RLIMIT_FSIZE) a write raises SIGXFSZ, which kills the process.
/// redis saves in a forked child, so only the child dies there; this node saves and appends
/// in its own threads, so it ignores the signal and handles the write's EFBIG like any
/// other write error (a failed save, MISCONF for AOF writes).
fn ignore_sigxfsz() {
    // SAFETY: installs the SIG_IGN disposition, no handler code runs; called at start.
    let prev = unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    if prev == libc::SIG_ERR {
        tracing::warn!("could not ignore SIGXFSZ: a file-size limit would end the process");
    }
}

/// Records SHUTDOWN's NOSAVE / SAVE argument for [`on_shutdown`], and its NOW / FAILOVER
/// modifiers for [`shutdown::before_exit`].
pub fn note_shutdown_args(srv: &Server, args: &[&[u8]]) {
    let words = args.get(1..).unwrap_or_default();
    let has = |w: &[u8]| words.iter().any(|a| a.eq_ignore_ascii_case(w));
    let mode = if has(b"nosave") {
        SHUTDOWN_NOSAVE
    } else if has(b"save") {
        SHUTDOWN_SAVE
    } else {
        SHUTDOWN_DEFAULT
    };
    let p = &srv.persist;
    p.shutdown_mode.store(mode, Ordering::Relaxed);
    p.shutdown_now.store(has(b"now"), Ordering::Relaxed);
    p.shutdown_failover
        .store(has(b"failover"), Ordering::Relaxed);
}

/// At shutdown: flush and fsync the AOF, then save dump.rdb if save points are configured
/// (or SHUTDOWN SAVE), unless SHUTDOWN NOSAVE.
pub fn on_shutdown(srv: &Server) {
    aof::flush_on_shutdown(srv);
    let mode = srv.persist.shutdown_mode.load(Ordering::Relaxed);
    let wanted = match mode {
        SHUTDOWN_NOSAVE => false,
        SHUTDOWN_SAVE => true,
        _ => !save_points(srv).is_empty(),
    };
    srv.persist.kill_save_child(&srv.config.read().typed.dir);
    if !wanted {
        return;
    }
    // A background save may be writing the same file; let it finish first.
    while srv.persist.bgsave_in_progress.load(Ordering::Acquire) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    tracing::info!("Saving the final RDB snapshot before exiting.");
    match save(srv) {
        Ok(_) => tracing::info!("DB saved on disk"),
        Err(e) => tracing::error!(error = %e, "Error trying to save the DB"),
    }
}

/// The `# Persistence` section of INFO: Redis 7.0's fields in its order (no fork here, so
/// the copy-on-write figures are 0; the aof_* tail only with appendonly yes, as Redis).
pub fn info(srv: &Server) -> String {
    let p = &srv.persist;
    // A replica's sync snapshot counts as Redis's diskless BGSAVE.
    let bg = p.bgsave_in_progress.load(Ordering::Relaxed)
        || srv.repl.sync_snapshots.load(Ordering::Relaxed) > 0;
    let now = now_ms() / 1000;
    let cur = if bg {
        now.saturating_sub(p.current_save_started.load(Ordering::Relaxed)) as i64
    } else {
        -1
    };
    let ok = |b: bool| if b { "ok" } else { "err" };
    let a = &p.aof;
    let n = |v: u64| v.to_string();
    // The running child's figures, measured now (Redis's child reports them each second).
    let child = p.child_pid.load(Ordering::Acquire);
    let cow = if child > 0 {
        p.note_cow(child, false)
    } else {
        0
    };
    let saving = bg || a.rewrite_in_progress.load(Ordering::Relaxed);
    let (done, total) = if saving {
        (
            p.save_keys_processed.load(Ordering::Relaxed),
            p.save_keys_total.load(Ordering::Relaxed),
        )
    } else {
        (0, 0)
    };
    let perc = if total > 0 {
        done as f64 * 100.0 / total as f64
    } else {
        0.0
    };
    let mut f: Vec<(&str, String)> = vec![
        ("loading", n(p.loading.load(Ordering::Relaxed) as u64)),
        (
            "async_loading",
            n(srv.repl.async_loading.load(Ordering::Relaxed) as u64),
        ),
        (
            "current_cow_peak",
            n(if child > 0 {
                p.cow_peak.load(Ordering::Relaxed)
            } else {
                0
            }),
        ),
        ("current_cow_size", n(cow)),
        ("current_cow_size_age", n(0)),
        ("current_fork_perc", format!("{perc:.2}")),
        ("current_save_keys_processed", n(done)),
        ("current_save_keys_total", n(total)),
        (
            "rdb_changes_since_last_save",
            n(srv.stats.dirty.load(Ordering::Relaxed)),
        ),
        ("rdb_bgsave_in_progress", n(bg as u64)),
        (
            "rdb_last_save_time",
            n(srv.last_save.load(Ordering::Relaxed)),
        ),
        (
            "rdb_last_bgsave_status",
            ok(p.last_bgsave_ok.load(Ordering::Relaxed)).into(),
        ),
        (
            "rdb_last_bgsave_time_sec",
            p.last_bgsave_time_sec.load(Ordering::Relaxed).to_string(),
        ),
        ("rdb_current_bgsave_time_sec", cur.to_string()),
        ("rdb_saves", n(p.saves.load(Ordering::Relaxed))),
        ("rdb_last_cow_size", n(p.last_cow.load(Ordering::Relaxed))),
        (
            "rdb_last_load_keys_expired",
            n(p.last_load_keys_expired.load(Ordering::Relaxed)),
        ),
        (
            "rdb_last_load_keys_loaded",
            n(p.last_load_keys.load(Ordering::Relaxed)),
        ),
        ("aof_enabled", n(a.enabled() as u64)),
        (
            "aof_rewrite_in_progress",
            n(a.rewrite_in_progress.load(Ordering::Relaxed) as u64),
        ),
        (
            "aof_rewrite_scheduled",
            n(a.rewrite_scheduled.load(Ordering::Relaxed) as u64),
        ),
        (
            "aof_last_rewrite_time_sec",
            a.last_rewrite_time_sec.load(Ordering::Relaxed).to_string(),
        ),
        (
            "aof_current_rewrite_time_sec",
            a.current_rewrite_secs().to_string(),
        ),
        (
            "aof_last_bgrewrite_status",
            ok(a.last_rewrite_ok.load(Ordering::Relaxed)).into(),
        ),
        ("aof_rewrites", n(a.rewrites.load(Ordering::Relaxed))),
        (
            "aof_rewrites_consecutive_failures",
            n(a.consecutive_failures.load(Ordering::Relaxed)),
        ),
        ("aof_last_write_status", ok(a.last_write_ok()).into()),
        ("aof_last_cow_size", n(0)),
        ("module_fork_in_progress", n(0)),
        ("module_fork_last_cow_size", n(0)),
    ];
    if srv.config.read().typed.appendonly {
        f.extend([
            (
                "aof_current_size",
                n(a.current_size.load(Ordering::Relaxed)),
            ),
            ("aof_base_size", n(a.base_size.load(Ordering::Relaxed))),
            (
                "aof_pending_rewrite",
                n(a.rewrite_scheduled.load(Ordering::Relaxed) as u64),
            ),
            ("aof_buffer_length", n(0)),
            ("aof_pending_bio_fsync", n(0)),
            ("aof_delayed_fsync", n(0)),
        ]);
    }
    let mut out = String::from("# Persistence\r\n");
    for (k, v) in f {
        out.push_str(k);
        out.push(':');
        out.push_str(&v);
        out.push_str("\r\n");
    }
    out
}
