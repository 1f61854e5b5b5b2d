//! A guard for a program that is not a server but runs in the background of a test (the
//! operator binary): its stdout and stderr go to a log file (no pipe to fill or drain), it is
//! killed and reaped on drop, and the log's tail is printed when the test panics. Servers use
//! [`crate::Launch`]; one-shot tools use [`crate::output_within`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// How many lines of the log a panicking test shows.
const TAIL_LINES: usize = 40;

/// A running program; killed and reaped on drop.
pub struct Process {
    child: Child,
    program: String,
    log: PathBuf,
    _out: tempfile::TempDir,
}

impl Process {
    /// Spawns `cmd` with stdin closed and stdout and stderr appended to its log file; panics
    /// (naming the program) when it cannot start.
    pub fn spawn(mut cmd: Command) -> Process {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let out = tempfile::tempdir().expect("tempdir");
        let log = out.path().join("output.log");
        let f =
            std::fs::File::create(&log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let f2 = f.try_clone().expect("clone output file");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(f)
            .stderr(f2)
            .spawn()
            .unwrap_or_else(|e| panic!("start {program}: {e}"));
        Process {
            child,
            program,
            log,
            _out: out,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where its stdout and stderr go.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Everything it printed so far, stdout and stderr interleaved.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of its output.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::log_tail(&self.log, lines)
    }

    /// Its exit status if it has exited (not waiting).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits (bounded) for it to exit by itself; None if it still runs after `max`.
    pub fn wait_exit(&mut self, max: Duration) -> Option<ExitStatus> {
        crate::wait_exit(&mut self.child, max)
    }

    /// Sends `sig` (a name: TERM, INT, STOP, CONT...).
    pub fn signal(&self, sig: &str) {
        send_signal(self.pid(), sig, &self.program);
    }

    /// SIGKILL (no cleanup in the program, like an OOM kill), then reap.
    pub fn kill(&mut self) {
        crate::kill(&mut self.child);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "--- {} (pid {}): last lines of its output ---\n{}\n---",
                self.program,
                self.child.id(),
                self.log_tail(TAIL_LINES).trim()
            );
        }
    }
}

/// Sends `sig` (a `kill` signal name: TERM, INT, STOP, CONT...) to `pid`; panics naming
/// `what` when it cannot be delivered.
pub(crate) fn send_signal(pid: u32, sig: &str, what: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .stdin(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -{sig} {pid} ({what}) failed");
}

/// Sends `sig` (TERM, KILL, STOP...) to any process by pid, such as a server's save
/// child; panics when it cannot be delivered.
pub fn signal(pid: u32, sig: &str) {
    send_signal(pid, sig, "a process of the test");
}

/// The child processes of `pid` (forked or spawned by any of its threads), from
/// /proc/<pid>/task/*/children; empty when it has none or is gone.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_goes_to_the_log_and_the_exit_is_seen() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let mut p = Process::spawn(cmd);
        let status = p.wait_exit(Duration::from_secs(30)).expect("exits");
        assert_eq!(status.code(), Some(3));
        let log = p.log();
        assert!(log.contains("out\n") && log.contains("err\n"), "{log:?}");
    }

    #[test]
    fn a_signal_stops_it_and_drop_kills_it() {
        let mut cmd = Command::new("sleep");
        cmd.arg("600");
        let mut p = Process::spawn(cmd);
        assert!(p.try_wait().is_none());
        p.signal("TERM");
        assert!(p.wait_exit(Duration::from_secs(30)).is_some());
        let mut cmd = Command::new("sleep");
        cmd.arg("600");
        let p = Process::spawn(cmd);
        let pid = p.pid();
        drop(p);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "pid {pid} still there after drop"
        );
    }
}
