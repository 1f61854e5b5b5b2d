//! Container processes: spawning in their own process group with a parent-death signal, and
//! the table of live groups that lets the box kill everything it started, even on panic.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::process::{Child, Command};

use crate::kiab::error::KiabError;

/// Every process group a box has started and not yet reaped. Dropping the last handle kills
/// them all, so a panicking test leaves nothing behind.
#[derive(Debug, Default)]
pub struct ProcessTable {
    groups: Mutex<HashSet<i32>>,
}

impl ProcessTable {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn add(&self, pgid: i32) {
        self.groups.lock().insert(pgid);
    }

    fn remove(&self, pgid: i32) {
        self.groups.lock().remove(&pgid);
    }

    /// Number of live process groups.
    pub fn len(&self) -> usize {
        self.groups.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sends `sig` to every group.
    pub fn signal_all(&self, sig: i32) {
        for pgid in self.groups.lock().iter() {
            signal_group(*pgid, sig);
        }
    }

    /// SIGKILLs every group (synchronous: usable from Drop).
    pub fn kill_all(&self) {
        let groups: Vec<i32> = self.groups.lock().drain().collect();
        for pgid in groups {
            signal_group(pgid, libc::SIGKILL);
        }
    }
}

impl Drop for ProcessTable {
    fn drop(&mut self) {
        self.kill_all();
    }
}

fn signal_group(pgid: i32, sig: i32) {
    if pgid > 1 {
        // SAFETY: killpg only sends a signal; a stale group id at worst yields ESRCH.
        unsafe {
            libc::killpg(pgid, sig);
        }
    }
}

/// What to run for one container.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub log_file: PathBuf,
}

/// A running container process; its process group is registered in the table until reaped.
#[derive(Debug)]
pub struct Running {
    child: Child,
    pgid: i32,
    table: Arc<ProcessTable>,
    reaped: bool,
}

impl Drop for Running {
    /// A container dropped unreaped (its worker was aborted) must not outlive it.
    fn drop(&mut self) {
        if !self.reaped {
            signal_group(self.pgid, libc::SIGKILL);
            self.table.remove(self.pgid);
        }
    }
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.pgid
    }

    /// `Some(exit code)` once the process has exited (128+signal when killed by a signal).
    pub fn try_exit(&mut self) -> Option<i32> {
        match self.child.try_wait() {
            Ok(Some(status)) => {
                use std::os::unix::process::ExitStatusExt;
                let code = status
                    .code()
                    .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
                // Kill stragglers the container left in its group (e.g. a fork) and forget it.
                signal_group(self.pgid, libc::SIGKILL);
                self.table.remove(self.pgid);
                self.reaped = true;
                Some(code)
            }
            Ok(None) => None,
            Err(_) => Some(-1),
        }
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL; returns the exit code.
    pub async fn stop(&mut self, grace: Duration) -> i32 {
        signal_group(self.pgid, libc::SIGTERM);
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            if let Some(code) = self.try_exit() {
                return code;
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        signal_group(self.pgid, libc::SIGKILL);
        let code = match self.child.wait().await {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                status
                    .code()
                    .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
            }
            Err(_) => -1,
        };
        self.table.remove(self.pgid);
        self.reaped = true;
        code
    }
}

/// Starts a container process in a new process group, stdout+stderr appended to its log,
/// with PR_SET_PDEATHSIG so it dies with the box even if the box is SIGKILLed.
pub fn spawn(launch: &Launch, table: &Arc<ProcessTable>) -> Result<Running, KiabError> {
    let log = open_log(&launch.log_file)?;
    let log2 = log
        .try_clone()
        .map_err(|e| KiabError::io(&launch.log_file, e))?;
    let mut cmd = Command::new(&launch.program);
    cmd.args(&launch.args)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&launch.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2))
        .process_group(0)
        .kill_on_drop(false);
    // SAFETY: the closure runs between fork and exec and only calls async-signal-safe prctl.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| KiabError::io(&launch.program, e))?;
    let pgid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| KiabError::Other("spawned process has no pid".into()))?;
    table.add(pgid);
    Ok(Running {
        child,
        pgid,
        table: table.clone(),
        reaped: false,
    })
}

fn open_log(path: &Path) -> Result<std::fs::File, KiabError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| KiabError::io(dir, e))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| KiabError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stop_escalates_and_table_kills_on_drop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let table = ProcessTable::new();
        // A process that ignores SIGTERM: stop() must escalate to SIGKILL.
        let launch = Launch {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "trap '' TERM; echo up; sleep 30".into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: dir.path().to_path_buf(),
            log_file: dir.path().join("logs/c.log"),
        };
        let mut r = spawn(&launch, &table).expect("spawn");
        assert_eq!(table.len(), 1);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let code = r.stop(Duration::from_millis(300)).await;
        assert_eq!(code, 128 + libc::SIGKILL);
        assert!(table.is_empty());
        let log = std::fs::read_to_string(dir.path().join("logs/c.log")).expect("log");
        assert!(log.contains("up"));

        // kill_all (what the box's Drop does) kills what is still running...
        let r2 = spawn(&launch, &table).expect("spawn");
        assert!(wait_gone(r2.pid(), || table.kill_all()).await);
        drop(r2);
        // ...and so does dropping an unreaped container (an aborted pod worker).
        let r3 = spawn(&launch, &table).expect("spawn");
        let pid = r3.pid();
        assert!(wait_gone(pid, move || drop(r3)).await);
        assert!(table.is_empty());
    }

    async fn wait_gone(pid: i32, kill: impl FnOnce()) -> bool {
        tokio::time::sleep(Duration::from_millis(100)).await;
        kill();
        let mut gone = false;
        for _ in 0..100 {
            // SAFETY: signal 0 only checks existence.
            let alive = unsafe { libc::kill(pid, 0) } == 0;
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true);
            if !alive || zombie {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        gone
    }
}
