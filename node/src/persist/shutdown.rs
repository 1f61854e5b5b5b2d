//! What a master does between SHUTDOWN / SIGTERM and its exit, so that no acknowledged write
//! is lost:
//!
//! - Redis 7.0's `shutdown-timeout` (default 10 s): with replicas attached, client writes
//!   are paused and the node waits, at most that long, until every replica acknowledged the
//!   offset the writes stopped at. SHUTDOWN NOW (or `now` in shutdown-on-sigterm/sigint), or
//!   a timeout of 0, skips the wait.
//! - valkey 9's shutdown failover (`SHUTDOWN FAILOVER`, `failover` in
//!   shutdown-on-sigterm/sigint; off by default): a cluster master serving slots then tells
//!   the in-sync replica with the highest offset to take over at once, with the message
//!   valkey sends, `CLUSTER FAILOVER FORCE REPLICAID <id>` on that replica's replication
//!   link, so a valkey replica of ours takes over too. It waits (bounded) for the new master
//!   to claim the slots, so the cluster never waits for cluster-node-timeout.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::repl::backlog::encode;
use crate::repl::master::STATE_ONLINE;
use crate::server::Server;

/// How long a master that handed over waits for the replica to win its election (votes
/// from the other masters arrive within milliseconds; the election itself times out after
/// twice cluster-node-timeout, which a pod's grace period may not cover).
const TAKEOVER_WAIT: Duration = Duration::from_secs(3);

/// Runs before the server closes its clients and saves: the replica wait, then the
/// failover when asked for. Bounded by shutdown-timeout plus [`TAKEOVER_WAIT`].
pub async fn before_exit(srv: &Arc<Server>) {
    let p = &srv.persist;
    let now = p.shutdown_now.load(Ordering::Relaxed);
    let failover = p.shutdown_failover.load(Ordering::Relaxed);
    let timeout_s = srv.config.read().typed.shutdown_timeout_secs;
    let replicas = srv.repl.shared.lock().replicas.clone();
    if replicas.is_empty() {
        if failover && crate::cluster::enabled(srv) && !srv.repl.is_replica() {
            tracing::warn!("Unable to find a replica to perform the auto failover on shutdown.");
        }
        return;
    }
    let wait = !now && timeout_s > 0;
    if !wait && !failover {
        return;
    }
    let target = pause_writes(srv);
    if wait {
        tracing::warn!("Waiting for replicas before shutting down.");
        request_acks(srv);
        let deadline = Instant::now() + Duration::from_secs(timeout_s);
        loop {
            let notified = srv.repl.ack.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if in_sync(srv, target) == srv.repl.shared.lock().replicas.len()
                || Instant::now() >= deadline
            {
                break;
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        log_sync_state(srv, target);
    }
    if failover {
        hand_over(srv, target).await;
    }
}

/// Pauses client writes for good (the process is exiting) and returns the replication
/// offset they stopped at, once the writes already running have finished.
fn pause_writes(srv: &Server) -> u64 {
    srv.pause.write_only.store(true, Ordering::SeqCst);
    srv.pause.until.store(u64::MAX, Ordering::SeqCst);
    // Every write runs with its stripes locked and feeds the stream before unlocking.
    drop(srv.ks.lock_all());
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
fn in_sync(srv: &Server, target: u64) -> usize {
    crate::repl::master::acked(srv, target)
}

/// Redis 7.0's closing lines: how many replicas are in sync, and each lagging one.
fn log_sync_state(srv: &Server, target: u64) {
    let replicas = srv.repl.shared.lock().replicas.clone();
    let mut ok = 0;
    for r in &replicas {
        let ack = r.ack_offset.load(Ordering::Relaxed);
        if r.state.load(Ordering::Relaxed) == STATE_ONLINE && ack >= target {
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
