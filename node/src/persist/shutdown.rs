//! What a master does between SHUTDOWN / SIGTERM and its exit, so that no acknowledged write
//! is lost, as Redis 7.0's prepareForShutdown / finishShutdown:
//!
//! - `shutdown-timeout` (default 10 s): with replicas attached, client writes are paused
//!   and the node waits, at most that long, until every replica acknowledged the offset the
//!   writes stopped at (INFO shows `shutdown_in_milliseconds` meanwhile). SHUTDOWN NOW (or
//!   `now` in shutdown-on-sigterm/sigint), or a timeout of 0, skips the wait.
//! - SHUTDOWN blocks its caller until then (INFO blocked_clients counts it). SHUTDOWN ABORT
//!   during the wait, or a final save that fails without FORCE, gives the shutdown up: writes
//!   resume, every blocked SHUTDOWN answers "Errors trying to SHUTDOWN. Check logs." and the
//!   node keeps serving until the next SHUTDOWN or signal.
//! - valkey 9's shutdown failover (`SHUTDOWN FAILOVER`, `failover` in
//!   shutdown-on-sigterm/sigint; off by default): a cluster master serving slots then tells
//!   the in-sync replica with the highest offset to take over at once, with the message
//!   valkey sends, `CLUSTER FAILOVER FORCE REPLICAID <id>` on that replica's replication
//!   link, so a valkey replica of ours takes over too. It waits (bounded) for the new master
//!   to claim the slots, so the cluster never waits for cluster-node-timeout.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::repl::backlog::encode;
use crate::repl::master::STATE_ONLINE;
use crate::server::{now_ms, ClientHandle, Server};

/// How long a master that handed over waits for the replica to win its election (votes
/// from the other masters arrive within milliseconds; the election itself times out after
/// twice cluster-node-timeout, which a pod's grace period may not cover).
const TAKEOVER_WAIT: Duration = Duration::from_secs(3);

/// What Redis answers every SHUTDOWN blocked on a shutdown that was given up.
pub const GAVE_UP_REPLY: &str = "ERR Errors trying to SHUTDOWN. Check logs.";

/// An ongoing shutdown as SHUTDOWN, SHUTDOWN ABORT and INFO see it (Redis's shutdown_asap,
/// shutdown_mstime and the clients blocked on SHUTDOWN).
pub struct ShutdownCtl {
    /// A shutdown was asked for and is neither done nor given up.
    requested: AtomicBool,
    /// Unix ms the wait for replicas ends at (0: no wait under way).
    deadline_ms: AtomicU64,
    /// SHUTDOWN ABORT arrived during the wait.
    abort: AtomicBool,
    /// A SHUTDOWN with FORCE is under way: a failed save does not stop the exit.
    force: AtomicBool,
    /// Client writes are stopped and drained (the shutdown's pause): the stream offset
    /// matches the dataset, so the final save may record it.
    writes_stopped: AtomicBool,
    /// Wakes the wait for replicas (SHUTDOWN ABORT).
    wake: Notify,
    /// Bumped each time a shutdown is given up; blocked SHUTDOWN callers then answer.
    gave_up: watch::Sender<u64>,
}

impl Default for ShutdownCtl {
    fn default() -> Self {
        ShutdownCtl {
            requested: AtomicBool::new(false),
            deadline_ms: AtomicU64::new(0),
            abort: AtomicBool::new(false),
            force: AtomicBool::new(false),
            writes_stopped: AtomicBool::new(false),
            wake: Notify::new(),
            gave_up: watch::Sender::new(0),
        }
    }
}

impl ShutdownCtl {
    /// INFO's shutdown_in_milliseconds: Some while the node waits for its replicas.
    pub fn remaining_ms(&self) -> Option<u64> {
        match self.deadline_ms.load(Ordering::Relaxed) {
            0 => None,
            d => Some(d.saturating_sub(now_ms())),
        }
    }

    /// See `writes_stopped`.
    pub fn writes_stopped(&self) -> bool {
        self.writes_stopped.load(Ordering::SeqCst)
    }
}

/// SHUTDOWN (without ABORT): asks for the shutdown and blocks until the process exits or
/// the shutdown is given up (true: answer [`GAVE_UP_REPLY`]). False when the client was
/// killed meanwhile.
pub async fn block_caller(srv: &Server, handle: &ClientHandle, force: bool) -> bool {
    let ctl = &srv.repl.shutdown;
    let mut rx = ctl.gave_up.subscribe();
    let _held = srv.blocking.hold_other();
    if force {
        ctl.force.store(true, Ordering::Relaxed);
    }
    ctl.requested.store(true, Ordering::SeqCst);
    srv.shutdown.notify_one();
    tokio::select! {
        r = rx.changed() => r.is_ok(),
        _ = handle.kill.notified() => false,
    }
}

/// SHUTDOWN ABORT: false when no shutdown is under way ("No shutdown in progress.").
pub fn abort(srv: &Server) -> bool {
    let ctl = &srv.repl.shutdown;
    if !ctl.requested.load(Ordering::SeqCst) {
        return false;
    }
    ctl.abort.store(true, Ordering::SeqCst);
    ctl.wake.notify_one();
    true
}

/// Runs once the server was asked to stop (SHUTDOWN or a signal), before it closes its
/// clients: the wait for replicas, the failover when asked for, the final save. Returns
/// only when the process is to exit; a shutdown given up (SHUTDOWN ABORT, a failed save)
/// waits here for the next SHUTDOWN or signal while the node keeps serving.
pub async fn before_exit(srv: &Arc<Server>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    loop {
        let ctl = &srv.repl.shutdown;
        ctl.requested.store(true, Ordering::SeqCst);
        let outcome = if cron_may_run(srv).await {
            attempt(srv).await
        } else {
            Outcome::Aborted
        };
        match outcome {
            Outcome::Exit => return,
            Outcome::Failed => {
                tracing::warn!(
                    "Errors trying to shut down the server. Check the logs for more information."
                );
                give_up(srv);
            }
            Outcome::Aborted => {
                tracing::warn!("Shutdown manually aborted.");
                give_up(srv);
            }
        }
        // The next request: a SHUTDOWN (its flag; a stale wake-up of a SHUTDOWN answered
        // with the error is skipped) or a signal.
        loop {
            tokio::select! {
                _ = srv.shutdown.notified() => {
                    if ctl.requested.load(Ordering::SeqCst) {
                        break;
                    }
                }
                Some(()) = recv(&mut term) => {
                    tracing::warn!("Received SIGTERM scheduling shutdown...");
                    let flags = srv.config.read().typed.shutdown_on_sigterm.clone();
                    note_signal_flags(srv, &flags);
                    break;
                }
                Some(()) = recv(&mut int) => {
                    tracing::warn!("Received SIGINT scheduling shutdown...");
                    let flags = srv.config.read().typed.shutdown_on_sigint.clone();
                    note_signal_flags(srv, &flags);
                    break;
                }
            }
        }
    }
}

/// How one try ended.
enum Outcome {
    /// The process exits now.
    Exit,
    /// A step failed (the final save, the first AOF rewrite still running).
    Failed,
    /// SHUTDOWN ABORT.
    Aborted,
}

/// Redis runs a signal's shutdown (and the end of the wait for replicas) from serverCron:
/// while DEBUG PAUSE-CRON holds the cron, the shutdown waits, and SHUTDOWN ABORT can still
/// cancel it. False when it was aborted meanwhile.
async fn cron_may_run(srv: &Server) -> bool {
    let ctl = &srv.repl.shutdown;
    while srv.debug.pause_cron.load(Ordering::Relaxed) {
        if ctl.abort.load(Ordering::SeqCst) {
            return false;
        }
        tokio::select! {
            _ = ctl.wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
    }
    !ctl.abort.load(Ordering::SeqCst)
}

async fn recv(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

/// A signal's shutdown follows `shutdown-on-sigterm` / `shutdown-on-sigint` as SHUTDOWN
/// follows its arguments.
fn note_signal_flags(srv: &Server, flags: &str) {
    let words: Vec<&[u8]> = std::iter::once(&b"shutdown"[..])
        .chain(flags.split_whitespace().map(str::as_bytes))
        .collect();
    crate::persist::note_shutdown_args(srv, &words);
    if flags
        .split_whitespace()
        .any(|w| w.eq_ignore_ascii_case("force"))
    {
        srv.repl.shutdown.force.store(true, Ordering::Relaxed);
    }
}

/// One try: the wait for replicas, the failover when asked for, the final save.
async fn attempt(srv: &Arc<Server>) -> Outcome {
    let p = &srv.persist;
    let ctl = &srv.repl.shutdown;
    let now = p.shutdown_now.load(Ordering::Relaxed);
    let failover = p.shutdown_failover.load(Ordering::Relaxed);
    let timeout_s = srv.config.read().typed.shutdown_timeout_secs;
    let replicas = srv.repl.shared.lock().replicas.len();
    if replicas == 0 && failover && crate::cluster::enabled(srv) && !srv.repl.is_replica() {
        tracing::warn!("Unable to find a replica to perform the auto failover on shutdown.");
    }
    // Writes stop here for good unless the shutdown is given up.
    let target = pause_writes(srv);
    if replicas > 0 && !now && timeout_s > 0 && in_sync(srv, target) < replicas {
        tracing::warn!("Waiting for replicas before shutting down.");
        let deadline = Instant::now() + Duration::from_secs(timeout_s);
        ctl.deadline_ms
            .store(now_ms() + timeout_s.saturating_mul(1000), Ordering::Relaxed);
        request_acks(srv);
        loop {
            let notified = srv.repl.ack.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if ctl.abort.load(Ordering::SeqCst) {
                ctl.deadline_ms.store(0, Ordering::Relaxed);
                return Outcome::Aborted;
            }
            if in_sync(srv, target) >= srv.repl.shared.lock().replicas.len()
                || Instant::now() >= deadline
            {
                break;
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = ctl.wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        ctl.deadline_ms.store(0, Ordering::Relaxed);
    }
    if replicas > 0 {
        log_sync_state(srv, target);
    }
    if failover && replicas > 0 {
        hand_over(srv, target).await;
    }
    if final_save(srv).await {
        Outcome::Exit
    } else {
        Outcome::Failed
    }
}

/// finishShutdown's save: dump.rdb when save points are configured (or SHUTDOWN SAVE),
/// unless NOSAVE. A failed save stops the exit unless FORCE. On success the exit path's
/// own save is skipped (it would write the same file again). A running background save's
/// child is killed first, whatever the mode (Redis's killRDBChild). A second SIGINT during
/// the save removes its temp file and exits at once, as Redis's signal handler does.
async fn final_save(srv: &Arc<Server>) -> bool {
    use crate::persist::{SHUTDOWN_NOSAVE, SHUTDOWN_SAVE};
    let p = &srv.persist;
    let force = srv.repl.shutdown.force.load(Ordering::Relaxed);
    if crate::persist::aof::writing_initial(srv) {
        if !force {
            tracing::warn!("Writing initial AOF, can't exit.");
            return false;
        }
        tracing::warn!("Writing initial AOF. Exit anyway.");
    }
    let dir = srv.config.read().typed.dir.clone();
    p.kill_save_child(&dir);
    let mode = p.shutdown_mode.load(Ordering::Relaxed);
    let wanted = match mode {
        SHUTDOWN_NOSAVE => false,
        SHUTDOWN_SAVE => true,
        _ => !crate::persist::save_points(srv).is_empty(),
    };
    if !wanted {
        return true;
    }
    crate::persist::aof::flush_on_shutdown(srv);
    // A background save may be writing the same file; let it finish first.
    while p.bgsave_in_progress.load(Ordering::Acquire) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tracing::info!("Saving the final RDB snapshot before exiting.");
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
    let srv2 = srv.clone();
    let job = tokio::task::spawn_blocking(move || crate::persist::save(&srv2));
    let r = tokio::select! {
        r = job => r.unwrap_or_else(|e| Err(crate::persist::PersistError::Io {
            path: "the final save".into(),
            source: std::io::Error::other(e.to_string()),
        })),
        Some(()) = recv(&mut int) => {
            tracing::warn!("You insist... exiting now.");
            p.stop_save.store(true, Ordering::Relaxed);
            let _ = std::fs::remove_file(dir.join(format!("temp-{}.rdb", std::process::id())));
            std::process::exit(1);
        }
    };
    match r {
        Ok(_) => {
            tracing::info!("DB saved on disk");
            p.shutdown_mode.store(SHUTDOWN_NOSAVE, Ordering::Relaxed);
            true
        }
        Err(e) if force => {
            tracing::warn!(error = %e, "Error trying to save the DB. Exit anyway.");
            p.shutdown_mode.store(SHUTDOWN_NOSAVE, Ordering::Relaxed);
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "Error trying to save the DB, can't exit.");
            false
        }
    }
}

/// Redis's cancelShutdown: writes resume, the flags are forgotten, every blocked SHUTDOWN
/// answers the error.
fn give_up(srv: &Server) {
    let ctl = &srv.repl.shutdown;
    ctl.deadline_ms.store(0, Ordering::Relaxed);
    ctl.abort.store(false, Ordering::SeqCst);
    ctl.force.store(false, Ordering::Relaxed);
    ctl.requested.store(false, Ordering::SeqCst);
    let p = &srv.persist;
    p.shutdown_mode
        .store(crate::persist::SHUTDOWN_DEFAULT, Ordering::Relaxed);
    p.shutdown_now.store(false, Ordering::Relaxed);
    p.shutdown_failover.store(false, Ordering::Relaxed);
    ctl.writes_stopped.store(false, Ordering::SeqCst);
    srv.pause.lift();
    srv.pause.write_only.store(false, Ordering::SeqCst);
    ctl.gave_up.send_modify(|n| *n = n.wrapping_add(1));
}

/// Pauses client writes for good (the process is exiting) and returns the replication
/// offset they stopped at, once the writes already running have finished.
fn pause_writes(srv: &Server) -> u64 {
    srv.pause.write_only.store(true, Ordering::SeqCst);
    srv.pause.until.store(u64::MAX, Ordering::SeqCst);
    // Every write runs with its stripes locked and feeds the stream before unlocking.
    drop(srv.ks.lock_all());
    srv.repl
        .shutdown
        .writes_stopped
        .store(true, Ordering::SeqCst);
    srv.repl.shared.lock().offset
}

/// REPLCONF GETACK * into the stream: replicas answer at once instead of at their next
/// one-second ACK. Their answer covers the stream up to the GETACK, that is `target`.
fn request_acks(srv: &Server) {
    let mut sh = srv.repl.shared.lock();
    if !sh.replicas.is_empty() {
        sh.push(encode(&[b"REPLCONF", b"GETACK", b"*"]));
    }
}

/// Online replicas that acknowledged `target`.
/// Replicas whose acknowledged offset is the master's, whatever their state, as Redis's
/// isReadyToShutdown: a replica still waiting for its sync payload acknowledged nothing, so
/// it counts as in sync while the master's offset has not moved since it attached, and the
/// shutdown does not wait for (and so complete) its payload.
fn in_sync(srv: &Server, target: u64) -> usize {
    srv.repl
        .shared
        .lock()
        .replicas
        .iter()
        .filter(|r| r.ack_offset.load(Ordering::Relaxed) >= target)
        .count()
}

/// Redis 7.0's closing lines: how many replicas are in sync, and each lagging one.
fn log_sync_state(srv: &Server, target: u64) {
    let replicas = srv.repl.shared.lock().replicas.clone();
    let mut ok = 0;
    for r in &replicas {
        let ack = r.ack_offset.load(Ordering::Relaxed);
        if ack >= target {
            ok += 1;
        } else {
            tracing::warn!(
                "Lagging replica {}:{} reported offset {} behind master, lag={}, state={}.",
                r.ip,
                r.port.load(Ordering::Relaxed),
                target.saturating_sub(ack),
                r.lag(),
                r.state_name()
            );
        }
    }
    tracing::warn!(
        "{ok} of {} replicas are in sync when shutting down.",
        replicas.len()
    );
}

/// The failover: the in-sync replica with the highest offset that the cluster knows as ours
/// is told to take over; then wait (bounded) until it has.
async fn hand_over(srv: &Arc<Server>, target: u64) {
    let Some(node) = crate::cluster::node(srv) else {
        return;
    };
    let Some(known) = node.with_state(|st| st.shutdown_failover_replicas()) else {
        return;
    };
    let replicas = srv.repl.shared.lock().replicas.clone();
    let best = replicas
        .iter()
        .filter(|r| r.state.load(Ordering::Relaxed) == STATE_ONLINE)
        .filter(|r| r.ack_offset.load(Ordering::Relaxed) >= target)
        .filter_map(|r| {
            let port = r.port.load(Ordering::Relaxed);
            known
                .iter()
                .find(|k| k.port == port && k.ip == r.ip)
                .map(|k| (r, k))
        })
        .max_by_key(|(r, _)| r.ack_offset.load(Ordering::Relaxed));
    let Some((link, replica)) = best else {
        tracing::warn!("Unable to find a replica to perform the auto failover on shutdown.");
        return;
    };
    let id = tessera_cluster::state::name_str(&replica.name).to_string();
    tracing::warn!("Perform auto failover to replica {id} on shutdown.");
    // From here on nothing restarts: once the replica claims our slots the cluster makes
    // us its replica, and a sync from it must not replace the data we are about to save.
    srv.shutting_down.store(true, Ordering::SeqCst);
    // Straight onto that replica's link, outside the stream: nothing follows it.
    link.send(encode(&[
        b"CLUSTER",
        b"FAILOVER",
        b"FORCE",
        b"REPLICAID",
        id.as_bytes(),
    ]));
    let deadline = Instant::now() + TAKEOVER_WAIT;
    loop {
        if node.with_state(|st| st.shutdown_failover_done(&replica.name)) {
            tracing::warn!("Replica {id} took over the slots.");
            return;
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                "Replica {id} did not take over within {TAKEOVER_WAIT:?}; exiting anyway."
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
