//! FAILOVER (Redis 7.0's coordinated failover of a standalone master to one of its replicas):
//! the master pauses client writes, waits until the chosen replica (or any replica) has
//! acknowledged every byte of the stream, then turns itself into that replica's replica and
//! sends `PSYNC <replid> <offset> FAILOVER`, which makes the replica a master before it
//! answers the PSYNC (a partial resync, so neither side loads anything). TIMEOUT bounds the
//! wait (FORCE: fail over anyway at the timeout); FAILOVER ABORT, a timeout without FORCE
//! or a target refusing the PSYNC gives it up and writes resume.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::cmd::{arg_i64, eq_ic, CmdError, CmdResult, Ctx};
use crate::server::{now_ms, Server};

/// Where a failover stands (INFO master_failover_state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    #[default]
    None,
    /// Writes are paused; waiting for the target to acknowledge the whole stream.
    WaitForSync,
    /// We are the target's replica now, our PSYNC FAILOVER not yet answered.
    InProgress,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::None => "no-failover",
            Phase::WaitForSync => "waiting-for-sync",
            Phase::InProgress => "failover-in-progress",
        }
    }
}

/// The failover under way, if any.
#[derive(Default)]
pub struct Failover {
    pub phase: Phase,
    /// The replica to hand over to (found at the start, or the first one in sync).
    target: Option<(String, u16)>,
    /// Unix ms the wait ends at (0: no TIMEOUT).
    end_ms: u64,
    force: bool,
}

/// The state, kept in [`crate::repl::Repl`].
#[derive(Default)]
pub struct FailoverCtl(Mutex<Failover>);

impl FailoverCtl {
    pub fn phase(&self) -> Phase {
        self.0.lock().phase
    }

    /// A failover is under way (the master sends no PING meanwhile: the stream must stay
    /// where the target acknowledged it).
    pub fn active(&self) -> bool {
        self.phase() != Phase::None
    }
}

/// FAILOVER [TO host port [FORCE]] [TIMEOUT ms] | FAILOVER ABORT.
pub fn command(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let srv = ctx.srv;
    if srv.cluster.get().is_some() {
        return Err(CmdError::msg("ERR FAILOVER not allowed in cluster mode."));
    }
    if args.len() == 2 && eq_ic(args[1], "abort") {
        if !srv.repl.failover.active() {
            return Err(CmdError::msg("ERR No failover in progress."));
        }
        abort(srv, "Failover manually aborted");
        ctx.out.ok();
        return Ok(());
    }
    let mut timeout_ms: i64 = 0;
    let mut force = false;
    let mut target: Option<(String, i64)> = None;
    let mut j = 1;
    while j < args.len() {
        let a = args[j];
        if eq_ic(a, "timeout") && j + 1 < args.len() && timeout_ms == 0 {
            timeout_ms = arg_i64(args[j + 1])?;
            if timeout_ms <= 0 {
                return Err(CmdError::msg("ERR FAILOVER timeout must be greater than 0"));
            }
            j += 2;
        } else if eq_ic(a, "to") && j + 2 < args.len() && target.is_none() {
            let port = arg_i64(args[j + 2])?;
            target = Some((String::from_utf8_lossy(args[j + 1]).into_owned(), port));
            j += 3;
        } else if eq_ic(a, "force") && !force {
            force = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if srv.repl.failover.active() {
        return Err(CmdError::msg("ERR FAILOVER already in progress."));
    }
    if srv.repl.is_replica() {
        return Err(CmdError::msg(
            "ERR FAILOVER is not valid when server is a replica.",
        ));
    }
    if srv.repl.shared.lock().replicas.is_empty() {
        return Err(CmdError::msg("ERR FAILOVER requires connected replicas."));
    }
    if force && (timeout_ms == 0 || target.is_none()) {
        return Err(CmdError::msg(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        ));
    }
    let target = match target {
        Some((host, port)) => {
            let found = srv
                .repl
                .shared
                .lock()
                .replicas
                .iter()
                .find(|r| {
                    r.ip.eq_ignore_ascii_case(&host)
                        && i64::from(r.port.load(Ordering::Relaxed)) == port
                })
                .map(|r| r.state.load(Ordering::Relaxed));
            match found {
                None => {
                    return Err(CmdError::msg(
                        "ERR FAILOVER target HOST and PORT is not a replica.",
                    ))
                }
                Some(s) if s != super::master::STATE_ONLINE => {
                    return Err(CmdError::msg("ERR FAILOVER target replica is not online."))
                }
                Some(_) => {}
            }
            tracing::info!("FAILOVER requested to {host}:{port}.");
            // Found among the replicas: its port fits in u16.
            u16::try_from(port).ok().map(|p| (host, p))
        }
        None => {
            tracing::info!("FAILOVER requested to any replica.");
            None
        }
    };
    {
        let mut f = srv.repl.failover.0.lock();
        *f = Failover {
            phase: Phase::WaitForSync,
            target,
            end_ms: if timeout_ms > 0 {
                now_ms().saturating_add(timeout_ms as u64)
            } else {
                0
            },
            force,
        };
    }
    // Client writes wait until the failover ends (then a replica refuses them).
    srv.pause.write_only.store(true, Ordering::SeqCst);
    srv.pause.until.store(u64::MAX, Ordering::SeqCst);
    ctx.out.ok();
    Ok(())
}

/// Ends the failover, resuming writes (Redis's clearFailoverState).
fn clear(srv: &Server) {
    *srv.repl.failover.0.lock() = Failover::default();
    srv.pause.lift();
    srv.pause.write_only.store(false, Ordering::SeqCst);
}

/// Gives the failover up; if we had become the target's replica, we are a master again.
pub fn abort(srv: &Arc<Server>, why: &str) {
    let phase = srv.repl.failover.phase();
    if phase == Phase::None {
        return;
    }
    tracing::warn!("FAILOVER aborted: {why}");
    if phase == Phase::InProgress {
        super::set_master(srv, None);
    }
    clear(srv);
}

/// Our PSYNC FAILOVER was answered (a resync of either kind): the failover is done.
pub fn psync_answered(srv: &Server) {
    if srv.repl.failover.phase() == Phase::InProgress {
        clear(srv);
    }
}

/// Called by the replication cron: the timeout, then whether the target caught up.
pub fn tick(srv: &Arc<Server>) {
    let (target, end_ms, force) = {
        let f = srv.repl.failover.0.lock();
        if f.phase != Phase::WaitForSync {
            return;
        }
        (f.target.clone(), f.end_ms, f.force)
    };
    if end_ms > 0 && now_ms() >= end_ms {
        if force {
            if let Some((host, port)) = target {
                tracing::info!("FAILOVER to {host}:{port} time out exceeded, failing over.");
                hand_over(srv, host, port);
                return;
            }
        }
        abort(srv, "Replica never caught up before timeout");
        return;
    }
    let caught_up = {
        let sh = srv.repl.shared.lock();
        let synced = |r: &super::ReplicaInfo| {
            r.state.load(Ordering::Relaxed) == super::master::STATE_ONLINE
                && r.ack_offset.load(Ordering::Relaxed) == sh.offset
        };
        match &target {
            Some((host, port)) => sh
                .replicas
                .iter()
                .find(|r| {
                    r.ip.eq_ignore_ascii_case(host) && r.port.load(Ordering::Relaxed) == *port
                })
                .filter(|r| synced(r))
                .map(|_| (host.clone(), *port)),
            None => sh
                .replicas
                .iter()
                .find(|r| synced(r))
                .map(|r| (r.ip.clone(), r.port.load(Ordering::Relaxed))),
        }
    };
    if let Some((host, port)) = caught_up {
        tracing::info!("Failover target {host}:{port} is synced, failing over.");
        hand_over(srv, host, port);
    }
}

/// We become the target's replica; the link's PSYNC carries FAILOVER (see `replica`).
fn hand_over(srv: &Arc<Server>, host: String, port: u16) {
    {
        let mut f = srv.repl.failover.0.lock();
        f.phase = Phase::InProgress;
        f.target = Some((host.clone(), port));
    }
    super::set_master(srv, Some((host, port)));
}

/// The target side: `PSYNC <replid> <offset> FAILOVER` from our master makes us a master
/// first when `replid` is ours (Redis's syncCommand). Err: the error reply.
pub fn on_psync_failover(srv: &Arc<Server>, replid: &[u8], from: &str) -> Result<(), &'static str> {
    let mine = srv.repl.shared.lock().replid.clone();
    if !replid.eq_ignore_ascii_case(mine.as_bytes()) {
        return Err("ERR PSYNC FAILOVER replid must match my replid.");
    }
    super::set_master(srv, None);
    tracing::info!("MASTER MODE enabled (failover request from '{from}')");
    Ok(())
}
