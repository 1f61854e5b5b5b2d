//! Runaway scripts: `busy-reply-threshold` (alias `lua-time-limit`), `-BUSY` and
//! SCRIPT KILL / FUNCTION KILL, as Redis 7.0.
//!
//! A script runs inline on its connection's I/O thread with every stripe locked. Redis
//! services other clients from inside the Lua count hook (processEventsWhileBlocked); here
//! other clients run on other threads, so the hook only *publishes* the server's state
//! ([`Busy`], in `Server::scripts`): [`IDLE`] → [`RUNNING`] (a script started) → [`BUSY`]
//! (it ran past the threshold). The dispatcher reads that state with one relaxed load per
//! command ([`Busy::active`]); only when a script runs does it take the slow path
//! ([`Busy::gate`]): wait until the script ends or
//! goes busy (instead of sleeping on the stripe locks, where the busy state would go
//! unnoticed), then answer `-BUSY` to commands without `allow_busy`.
//!
//! A server's scripts run one at a time (EVAL and FCALL lock every stripe), so one record
//! of "the running script" per server is enough.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::thread::ThreadId;
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

/// What kind of script is running: the BUSY text and which KILL applies depends on it.
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
    /// The thread running it: its own nested dispatch must not wait for itself.
    thread: ThreadId,
    /// Sent by our master: never killable (Redis's rule).
    from_master: bool,
}

/// A server's busy-script state (in [`super::Scripts`]).
pub struct Busy {
    state: AtomicU8,
    /// The running script ran a write command (it can no longer be killed).
    wrote: AtomicBool,
    /// SCRIPT KILL / FUNCTION KILL was accepted: the hook raises the kill error.
    kill: AtomicBool,
    /// The script's hook is answering its thread's other connections
    /// (`crate::server::busy_io`): their commands are gated like any other client's.
    serving: AtomicBool,
    run: Mutex<Option<Run>>,
    /// Signalled on every state change, for clients waiting in [`Busy::gate`].
    changed: Condvar,
}

impl Default for Busy {
    fn default() -> Self {
        Busy {
            state: AtomicU8::new(IDLE),
            wrote: AtomicBool::new(false),
            kill: AtomicBool::new(false),
            serving: AtomicBool::new(false),
            run: Mutex::new(None),
            changed: Condvar::new(),
        }
    }
}

thread_local! {
    /// This thread's I/O worker index (usize::MAX: not a worker). A per-thread fact set
    /// once at thread start, not a contract: it only names the thread in [`Run`].
    static WORKER: Cell<usize> = const { Cell::new(usize::MAX) };
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

/// The `-BUSY` text for the running script's kind.
fn busy_text(kind: Kind) -> &'static str {
    match kind {
        Kind::Eval => BUSY_EVAL,
        Kind::Function => BUSY_FUNCTION,
    }
}

/// Marks a script running until the guard drops.
pub struct RunGuard<'a> {
    busy: Option<&'a Busy>,
}

impl Busy {
    /// Whether a script is running at all: the dispatcher's one relaxed load per command.
    #[inline]
    pub fn active(&self) -> bool {
        self.state.load(Ordering::Relaxed) != IDLE
    }

    /// Whether a script is past the threshold.
    pub fn is_busy(&self) -> bool {
        self.state.load(Ordering::Acquire) == BUSY
    }

    /// The worker thread stuck in a busy script, if any (the accept loop avoids it).
    pub fn busy_worker(&self) -> Option<usize> {
        if self.state.load(Ordering::Relaxed) != BUSY {
            return None;
        }
        self.run.lock().as_ref().map(|r| r.worker)
    }

    /// The `-BUSY` error for the running script, when one is past the threshold.
    pub fn busy_error(&self) -> Option<&'static str> {
        if !self.is_busy() {
            return None;
        }
        self.run.lock().as_ref().map(|r| busy_text(r.kind))
    }

    /// Slow path of the dispatcher, taken only while a script runs ([`Busy::active`]):
    /// waits while the script is under the threshold (as Redis's single thread would),
    /// then returns the `-BUSY` text if the script went busy and `cmd` lacks `allow_busy`.
    pub fn gate(&self, cmd: &CommandSpec) -> Option<&'static str> {
        let mut run = self.run.lock();
        let me = std::thread::current().id();
        if run.as_ref().is_some_and(|r| r.thread == me) && !self.serving.load(Ordering::Relaxed) {
            // The script's own redis.call.
            return None;
        }
        loop {
            match self.state.load(Ordering::Acquire) {
                IDLE => return None,
                // WATCH is allow_busy but reads its keys under their stripe locks, which the
                // script holds: it gets BUSY rather than stall its I/O thread until the end.
                BUSY if cmd.has(flags::ALLOW_BUSY) && matches!(cmd.keys, KeyPos::None) => {
                    return None
                }
                BUSY => return Some(run.as_ref().map_or(BUSY_EVAL, |r| busy_text(r.kind))),
                // Short slices: a state change is signalled, the timeout is only a safety net.
                _ => {
                    self.changed.wait_for(&mut run, Duration::from_millis(50));
                }
            }
        }
    }

    /// Runs `f` (the dispatch of another connection's request, from the hook) with this
    /// thread's script treated as another client's: the gate answers BUSY instead of
    /// letting the request at the script's locks.
    pub fn serving_others<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Reset<'a>(&'a AtomicBool);
        impl Drop for Reset<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Relaxed);
            }
        }
        self.serving.store(true, Ordering::Relaxed);
        let _reset = Reset(&self.serving);
        f()
    }

    /// Marks the start of a script on this thread (EVAL family or FCALL); `from_master`:
    /// sent by our master (then never killable).
    pub fn start(&self, kind: Kind, threshold_ms: u64, from_master: bool) -> RunGuard<'_> {
        let mut run = self.run.lock();
        if run.is_some() {
            // Scripts never overlap (they lock every stripe); should one ever nest, the
            // outer run keeps the record.
            return RunGuard { busy: None };
        }
        *run = Some(Run {
            started: Instant::now(),
            threshold_ms,
            kind,
            worker: WORKER.with(|w| w.get()),
            thread: std::thread::current().id(),
            from_master,
        });
        self.wrote.store(false, Ordering::Relaxed);
        self.kill.store(false, Ordering::Relaxed);
        self.state.store(RUNNING, Ordering::Release);
        RunGuard { busy: Some(self) }
    }

    /// The running script ran a write command: from now on it cannot be killed.
    #[inline]
    pub fn note_write(&self) {
        self.wrote.store(true, Ordering::Relaxed);
    }

    /// SCRIPT KILL (`Kind::Eval`) / FUNCTION KILL (`Kind::Function`), with Redis's replies:
    /// NOTBUSY, UNKILLABLE (sent by the master, or it wrote), BUSY (the other kind runs).
    pub fn kill(&self, kind: Kind) -> Result<(), CmdError> {
        let run = self.run.lock();
        let Some(r) = run
            .as_ref()
            .filter(|_| self.state.load(Ordering::Acquire) == BUSY)
        else {
            return Err(CmdError::msg(NOTBUSY));
        };
        if r.from_master {
            return Err(CmdError::msg(UNKILLABLE_MASTER));
        }
        if self.wrote.load(Ordering::Relaxed) {
            return Err(CmdError::msg(UNKILLABLE_WROTE));
        }
        if r.kind != kind {
            return Err(CmdError::msg(busy_text(r.kind)));
        }
        self.kill.store(true, Ordering::Relaxed);
        tracing::warn!("Lua script killed by user with SCRIPT KILL.");
        Ok(())
    }

    /// Whether SCRIPT KILL / FUNCTION KILL was accepted for the running script (its Lua
    /// state's hook then fires on every line: see [`Busy::hook`]).
    pub fn kill_requested(&self) -> bool {
        self.kill.load(Ordering::Relaxed)
    }

    /// The count hook's work for the script running on this thread (see
    /// [`install_busy_hook`]).
    fn hook(&self, lua: &mlua::Lua) -> mlua::Result<mlua::VmState> {
        match self.state.load(Ordering::Relaxed) {
            RUNNING => {
                let run = self.run.lock();
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
                    self.state.store(BUSY, Ordering::Release);
                    self.changed.notify_all();
                }
            }
            BUSY => {
                // Redis answers its other clients from here; our other threads answer
                // theirs, this thread's own connections are answered now
                // (crate::server::busy_io).
                let mine = {
                    let me = std::thread::current().id();
                    self.run.lock().as_ref().is_some_and(|r| r.thread == me)
                };
                if !self.kill.load(Ordering::Relaxed) && mine {
                    crate::server::busy_io::serve_stuck_thread();
                }
                if self.kill.load(Ordering::Relaxed) {
                    // From now on on every line, as Redis: a pcall that catches the error
                    // gets it again as soon as its caller runs a line, so a loop around
                    // pcall cannot keep the script alive. The engine puts the count hook
                    // back when the script has ended.
                    hook_every_line(lua);
                    return Err(mlua::Error::RuntimeError(KILLED.to_string()));
                }
            }
            _ => {}
        }
        Ok(mlua::VmState::Continue)
    }
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        let Some(b) = self.busy else {
            return;
        };
        let mut run = b.run.lock();
        if b.state.load(Ordering::Relaxed) == BUSY {
            if let Some(r) = run.as_ref() {
                tracing::warn!(
                    ms = r.started.elapsed().as_millis() as u64,
                    "Slow script finished"
                );
            }
        }
        *run = None;
        b.kill.store(false, Ordering::Relaxed);
        b.state.store(IDLE, Ordering::Release);
        b.changed.notify_all();
    }
}

/// Installs the count hook on a script Lua state (every EVAL and FUNCTION state). The hook
/// acts on the state of the server whose script the Lua state runs ([`super::bind`]):
/// publishes [`BUSY`] once the running script passes the threshold and raises [`KILLED`]
/// once a kill was accepted. The kill stays requested until the script ends, so a `pcall`
/// that catches it is interrupted again at the next hook.
pub fn install_busy_hook(lua: &mlua::Lua) {
    set_hook(
        lua,
        mlua::HookTriggers::new().every_nth_instruction(HOOK_EVERY),
    );
}

/// Makes the installed hook fire on every line too. Only the mask of the running thread's
/// hook changes (mlua's `set_hook` would swap the callback from inside it).
fn hook_every_line(lua: &mlua::Lua) {
    use mlua::ffi;
    // SAFETY: the closure runs in mlua's protected call on the current thread's state and
    // only reads and sets that state's hook (no allocation, no error).
    let r = unsafe {
        lua.exec_raw::<()>((), |l| {
            let count = ffi::lua_gethookcount(l);
            ffi::lua_sethook(
                l,
                ffi::lua_gethook(l),
                ffi::lua_gethookmask(l) | ffi::LUA_MASKLINE,
                count,
            );
        })
    };
    if let Err(e) = r {
        tracing::warn!(error = %e, "cannot make the killed script's hook fire on every line");
    }
}

/// The busy hook on `triggers`.
fn set_hook(lua: &mlua::Lua, triggers: mlua::HookTriggers) {
    let hook = |lua: &mlua::Lua, _: &mlua::Debug| match super::bound(lua) {
        Some(s) => s.busy.hook(lua),
        None => Ok(mlua::VmState::Continue),
    };
    if let Err(e) = lua.set_hook(triggers, hook) {
        tracing::warn!(error = %e, "cannot install the script time-limit hook");
    }
}
