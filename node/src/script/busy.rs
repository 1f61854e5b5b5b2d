//! Runaway scripts: `busy-reply-threshold` (alias `lua-time-limit`), `-BUSY` and
//! SCRIPT KILL / FUNCTION KILL, as Redis 7.0.
//!
//! A script runs inline on its connection's I/O thread with every stripe locked. Redis
//! services other clients from inside the Lua count hook (processEventsWhileBlocked); here
//! other clients run on other threads, so the hook only *publishes* a global state:
//! [`IDLE`] → [`RUNNING`] (a script started) → [`BUSY`] (it ran past the threshold).
//! The dispatcher reads that state with one relaxed load per command ([`active`]); only
//! when a script runs does it take the slow path ([`gate`]): wait until the script ends or
//! goes busy (instead of sleeping on the stripe locks, where the busy state would go
//! unnoticed), then answer `-BUSY` to commands without `allow_busy`.
//!
//! Scripts run one at a time (EVAL and FCALL lock every stripe), so one global record of
//! "the running script" is enough.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::cmd::{flags, CmdError, CommandSpec, KeyPos};

/// No script runs.
const IDLE: u8 = 0;
/// A script runs, not yet past the threshold: other clients wait for it.
const RUNNING: u8 = 1;
/// A script ran past the threshold: other clients get `-BUSY`.
const BUSY: u8 = 2;

/// The hook fires every this many Lua VM instructions (Redis's value): cheap enough to be
/// invisible, often enough to notice the threshold within about a millisecond.
const HOOK_EVERY: u32 = 100_000;

static STATE: AtomicU8 = AtomicU8::new(IDLE);
/// The running script ran a write command (it can no longer be killed).
static WROTE: AtomicBool = AtomicBool::new(false);
/// SCRIPT KILL / FUNCTION KILL was accepted: the hook raises the kill error.
static KILL: AtomicBool = AtomicBool::new(false);

/// What kind of script is running: the BUSY text and which KILL applies depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Eval,
    Function,
}

/// The running script (None when idle).
struct Run {
    started: Instant,
    /// `busy-reply-threshold` (ms) from the config snapshot when the script started (no
    /// CONFIG SET can run while it does: CONFIG is not allowed while a script is busy).
    threshold_ms: u64,
    kind: Kind,
    /// The I/O thread (see [`set_worker`]) it runs on: new connections avoid it.
    worker: usize,
    /// Sent by our master: never killable (Redis's rule).
    from_master: bool,
}

static RUN: Mutex<Option<Run>> = Mutex::new(None);
/// Signalled on every state change, for clients waiting in [`gate`].
static CHANGED: Condvar = Condvar::new();

thread_local! {
    /// This thread's I/O worker index (usize::MAX: not a worker).
    static WORKER: Cell<usize> = const { Cell::new(usize::MAX) };
    /// This thread is running the script (its own nested dispatch must not wait for itself).
    static IN_SCRIPT: Cell<bool> = const { Cell::new(false) };
    /// The script's hook is answering this thread's other connections
    /// (`crate::server::busy_io`): their commands are gated like any other client's.
    static SERVING: Cell<bool> = const { Cell::new(false) };
}

pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
/// The message the killed script fails with (the engine prefixes "ERR " and the location).
pub const KILLED: &str = "Script killed by user with SCRIPT KILL...";
const UNKILLABLE_WROTE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
const UNKILLABLE_MASTER: &str = "UNKILLABLE The busy script was sent by a master instance in the context of replication and cannot be killed.";
const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";

/// Records this thread's I/O worker index (called once by each worker thread).
pub fn set_worker(i: usize) {
    WORKER.with(|w| w.set(i));
}

/// Whether a script is running at all: the dispatcher's one relaxed load per command.
#[inline]
pub fn active() -> bool {
    STATE.load(Ordering::Relaxed) != IDLE
}

/// Whether a script is past the threshold.
pub fn is_busy() -> bool {
    STATE.load(Ordering::Acquire) == BUSY
}

/// The worker thread stuck in a busy script, if any (the accept loop avoids it).
pub fn busy_worker() -> Option<usize> {
    if STATE.load(Ordering::Relaxed) != BUSY {
        return None;
    }
    RUN.lock().as_ref().map(|r| r.worker)
}

/// The `-BUSY` text for the running script's kind.
fn busy_text(kind: Kind) -> &'static str {
    match kind {
        Kind::Eval => BUSY_EVAL,
        Kind::Function => BUSY_FUNCTION,
    }
}

/// The `-BUSY` error for the running script, when one is past the threshold.
pub fn busy_error() -> Option<&'static str> {
    if !is_busy() {
        return None;
    }
    RUN.lock().as_ref().map(|r| busy_text(r.kind))
}

/// Slow path of the dispatcher, taken only while a script runs ([`active`]): waits while
/// the script is under the threshold (as Redis's single thread would), then returns the
/// `-BUSY` text if the script went busy and `cmd` lacks `allow_busy`.
pub fn gate(cmd: &CommandSpec) -> Option<&'static str> {
    if IN_SCRIPT.with(|s| s.get()) && !SERVING.with(|s| s.get()) {
        return None;
    }
    let mut run = RUN.lock();
    loop {
        match STATE.load(Ordering::Acquire) {
            IDLE => return None,
            // WATCH is allow_busy but reads its keys under their stripe locks, which the
            // script holds: it gets BUSY rather than stall its I/O thread until the end.
            BUSY if cmd.has(flags::ALLOW_BUSY) && matches!(cmd.keys, KeyPos::None) => return None,
            BUSY => return Some(run.as_ref().map_or(BUSY_EVAL, |r| busy_text(r.kind))),
            // Short slices: a state change is signalled, the timeout is only a safety net.
            _ => {
                CHANGED.wait_for(&mut run, Duration::from_millis(50));
            }
        }
    }
}

/// Runs `f` (the dispatch of another connection's request, from the hook) with this
/// thread's script treated as another client's: the gate answers BUSY instead of letting
/// the request at the script's locks.
pub fn serving_others<R>(f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            SERVING.with(|s| s.set(false));
        }
    }
    SERVING.with(|s| s.set(true));
    let _reset = Reset;
    f()
}

/// Marks a script running until the guard drops.
pub struct RunGuard {
    armed: bool,
}

/// Marks the start of a script on this thread (EVAL family or FCALL).
pub fn start(kind: Kind, threshold_ms: u64) -> RunGuard {
    let mut run = RUN.lock();
    if run.is_some() {
        // Scripts never overlap (they lock every stripe); should one ever nest, the outer
        // run keeps the record.
        return RunGuard { armed: false };
    }
    *run = Some(Run {
        started: Instant::now(),
        threshold_ms,
        kind,
        worker: WORKER.with(|w| w.get()),
        from_master: crate::repl::from_master(),
    });
    WROTE.store(false, Ordering::Relaxed);
    KILL.store(false, Ordering::Relaxed);
    IN_SCRIPT.with(|s| s.set(true));
    STATE.store(RUNNING, Ordering::Release);
    RunGuard { armed: true }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut run = RUN.lock();
        if STATE.load(Ordering::Relaxed) == BUSY {
            if let Some(r) = run.as_ref() {
                tracing::warn!(
                    ms = r.started.elapsed().as_millis() as u64,
                    "Slow script finished"
                );
            }
        }
        *run = None;
        KILL.store(false, Ordering::Relaxed);
        IN_SCRIPT.with(|s| s.set(false));
        STATE.store(IDLE, Ordering::Release);
        CHANGED.notify_all();
    }
}

/// The running script ran a write command: from now on it cannot be killed.
#[inline]
pub fn note_write() {
    WROTE.store(true, Ordering::Relaxed);
}

/// SCRIPT KILL (`Kind::Eval`) / FUNCTION KILL (`Kind::Function`), with Redis's replies:
/// NOTBUSY, UNKILLABLE (sent by the master, or it wrote), BUSY (the other kind runs).
pub fn kill(kind: Kind) -> Result<(), CmdError> {
    let run = RUN.lock();
    let Some(r) = run
        .as_ref()
        .filter(|_| STATE.load(Ordering::Acquire) == BUSY)
    else {
        return Err(CmdError::msg(NOTBUSY));
    };
    if r.from_master {
        return Err(CmdError::msg(UNKILLABLE_MASTER));
    }
    if WROTE.load(Ordering::Relaxed) {
        return Err(CmdError::msg(UNKILLABLE_WROTE));
    }
    if r.kind != kind {
        return Err(CmdError::msg(busy_text(r.kind)));
    }
    KILL.store(true, Ordering::Relaxed);
    tracing::warn!("Lua script killed by user with SCRIPT KILL.");
    Ok(())
}

/// Installs the count hook on a script Lua state (every EVAL and FUNCTION state). The hook
/// publishes [`BUSY`] once the running script passes the threshold and raises
/// [`KILLED`] once a kill was accepted. The kill stays requested until the script ends,
/// so a `pcall` that catches it is interrupted again at the next hook.
pub fn install_busy_hook(lua: &mlua::Lua) {
    let triggers = mlua::HookTriggers::new().every_nth_instruction(HOOK_EVERY);
    if let Err(e) = lua.set_hook(triggers, |_, _| hook()) {
        tracing::warn!(error = %e, "cannot install the script time-limit hook");
    }
}

fn hook() -> mlua::Result<mlua::VmState> {
    match STATE.load(Ordering::Relaxed) {
        RUNNING => {
            let run = RUN.lock();
            let over = run.as_ref().and_then(|r| {
                (r.started.elapsed().as_millis() >= u128::from(r.threshold_ms))
                    .then_some((r.kind, r.threshold_ms))
            });
            if let Some((kind, threshold_ms)) = over {
                tracing::warn!(
                    threshold_ms,
                    ?kind,
                    "Slow script detected: still in execution; you can try killing it with SCRIPT KILL"
                );
                STATE.store(BUSY, Ordering::Release);
                CHANGED.notify_all();
            }
        }
        BUSY => {
            // Redis answers its other clients from here; our other threads answer theirs,
            // this thread's own connections are answered now (crate::server::busy_io).
            if !KILL.load(Ordering::Relaxed) && IN_SCRIPT.with(|s| s.get()) {
                crate::server::busy_io::serve_stuck_thread();
            }
            if KILL.load(Ordering::Relaxed) {
                return Err(mlua::Error::RuntimeError(KILLED.to_string()));
            }
        }
        _ => {}
    }
    Ok(mlua::VmState::Continue)
}
