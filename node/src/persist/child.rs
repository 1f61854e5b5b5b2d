//! The child process of a background save, as Redis has one: BGSAVE and save points start a
//! child that writes `temp-<child pid>.rdb`, so that operators (and Redis's own test
//! suites) can see the save by pid and kill it, which fails the save as in Redis. Unlike
//! Redis's child, ours only writes: a server thread serializes the keyspace stripe by
//! stripe, as before, and streams the bytes through a pipe; the child copies them into the
//! file and fsyncs it, and the thread renames the file once the child exited cleanly.
//!
//! The child is this same executable started anew (`tessera-node --save-writer ...`,
//! through posix_spawn), not a fork() of the server: a fork would copy the page tables of
//! the whole keyspace (Redis's fork latency) and make every page the server writes during
//! the save a copy (Redis's copy-on-write memory, the classic reason a Redis pod is
//! OOM-killed while it saves). Our child shares nothing with the server but the pipe, so
//! its copy-on-write size is its own few pages.

use std::cell::Cell;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The command-line flag that makes `tessera-node` the writer child (see `main.rs`).
pub const WRITER_FLAG: &str = "--save-writer";

/// A running writer child. Dropping it before [`SaveChild::wait`] kills the child, reaps
/// it and removes its temp file.
pub struct SaveChild {
    pid: libc::pid_t,
    pipe: Option<File>,
    tmp: PathBuf,
    /// The exit status once reaped.
    status: Cell<Option<libc::c_int>>,
    fork_usec: u64,
    /// rdb-key-save-delay when the child started: Redis's child keeps the config it was
    /// forked with.
    delay: super::snapshot::KeySaveDelay,
}

impl SaveChild {
    /// Starts a child that writes what the pipe carries into `dir/<prefix><child pid><suffix>`.
    /// `delay`: the rdb-key-save-delay the save keeps while it runs.
    pub fn spawn(
        dir: &Path,
        prefix: &str,
        suffix: &str,
        delay: super::snapshot::KeySaveDelay,
    ) -> io::Result<SaveChild> {
        let mut head = dir.as_os_str().to_owned();
        head.push("/");
        head.push(prefix);
        let started = Instant::now();
        // /proc/self/exe: the server's own executable, even if its file was replaced since.
        // An absolute program and no pre-exec hooks: std uses posix_spawn (vfork-like), so
        // nothing of the server's memory is copied.
        let mut child = Command::new("/proc/self/exe")
            .arg(WRITER_FLAG)
            .arg(&head)
            .arg(suffix)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let fork_usec = started.elapsed().as_micros() as u64;
        let pipe = child.stdin.take().map(|s| File::from(OwnedFd::from(s)));
        let pid = child.id() as libc::pid_t;
        // Dropping std's handle neither kills nor reaps the child: `reap` waits for the pid.
        drop(child);
        let tmp = dir.join(format!("{prefix}{pid}{suffix}"));
        Ok(SaveChild {
            pid,
            pipe,
            tmp,
            status: Cell::new(None),
            fork_usec,
            delay,
        })
    }

    /// The rdb-key-save-delay the save keeps (read when the child started).
    pub fn key_save_delay(&self) -> super::snapshot::KeySaveDelay {
        self.delay
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// How long starting the child took (INFO latest_fork_usec).
    pub fn fork_usec(&self) -> u64 {
        self.fork_usec
    }

    /// The file the child writes.
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// The write end of the pipe to the child (once).
    pub fn take_pipe(&mut self) -> Option<File> {
        self.pipe.take()
    }

    /// True once the child ended (killed, or failed); it is not reaped here, so its pid
    /// cannot be reused while the server may still signal it.
    pub fn exited(&self) -> bool {
        if self.status.get().is_some() {
            return true;
        }
        // SAFETY: siginfo_t is plain data; waitid fills it in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pid of our own child and a valid siginfo_t.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                self.pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: reading the pid field of the siginfo_t waitid filled in.
        r == 0 && unsafe { info.si_pid() } == self.pid
    }

    /// Closes the pipe (the child sees the end of the stream), waits for the child and says
    /// how it ended.
    pub fn wait(&mut self) -> io::Result<()> {
        self.pipe = None;
        let st = self.reap();
        if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 {
            Ok(())
        } else if libc::WIFSIGNALED(st) {
            Err(io::Error::other(format!(
                "the save's child was terminated by signal {}",
                libc::WTERMSIG(st)
            )))
        } else {
            Err(io::Error::other(format!(
                "the save's child failed (exit code {})",
                libc::WEXITSTATUS(st)
            )))
        }
    }

    /// After a clean [`SaveChild::wait`]: renames the file over `target` and fsyncs the
    /// directory. Returns the file's size.
    pub fn commit(&self, target: &Path) -> io::Result<u64> {
        let size = std::fs::metadata(&self.tmp)?.len();
        std::fs::rename(&self.tmp, target)?;
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        File::open(dir)?.sync_all()?;
        Ok(size)
    }

    fn reap(&self) -> libc::c_int {
        if let Some(st) = self.status.get() {
            return st;
        }
        let mut st: libc::c_int = 0;
        loop {
            // SAFETY: waiting for our own child, with a valid status pointer.
            let r = unsafe { libc::waitpid(self.pid, &mut st, 0) };
            if r == self.pid {
                break;
            }
            if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                // Already reaped elsewhere (cannot happen in this server): call it failed.
                st = 1 << 8;
                break;
            }
        }
        self.status.set(Some(st));
        st
    }
}

impl Drop for SaveChild {
    fn drop(&mut self) {
        self.pipe = None;
        if self.status.get().is_none() {
            // SAFETY: signalling our own child, not reaped yet, so the pid is still ours.
            unsafe { libc::kill(self.pid, libc::SIGUSR1) };
            self.reap();
        }
        if self.tmp.exists() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The memory a child costs the machine: the pages it no longer shares with the server
/// (Private_Dirty of /proc/<pid>/smaps_rollup, what Redis's child reports as its
/// copy-on-write size). None when it cannot be read.
pub fn private_dirty(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Private_Dirty:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb.saturating_mul(1024))
}

/// The writer child's whole program (`tessera-node --save-writer <dir/prefix> <suffix>`):
/// copies its stdin into `<dir/prefix><own pid><suffix>`, fsyncs it and exits 0; any
/// failure exits 1 with a line on stderr (the server then fails the save).
pub fn writer_main(args: &[String]) -> i32 {
    let (Some(head), Some(tail)) = (args.first(), args.get(1)) else {
        eprintln!("usage: tessera-node {WRITER_FLAG} <dir/prefix> <suffix>");
        return 2;
    };
    let path = format!("{head}{}{tail}", std::process::id());
    let parent = std::os::unix::process::parent_id();
    match write_stream(&mut io::stdin().lock(), Path::new(&path)) {
        // The pipe also ends when the server dies (SIGKILL, the OOM killer): it was then
        // cut short, so the file goes rather than staying behind half written.
        Ok(()) if std::os::unix::process::parent_id() != parent => {
            let _ = std::fs::remove_file(&path);
            eprintln!("tessera-node save writer: the server died; {path} removed");
            1
        }
        Ok(()) => 0,
        Err(e) => {
            eprintln!("tessera-node save writer: {path}: {e}");
            1
        }
    }
}

/// Copies `input` to its end into a new file at `path` and fsyncs it.
fn write_stream(input: &mut impl io::Read, path: &Path) -> io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    io::copy(input, &mut f)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Starting the real child needs the tessera-node executable (a unit test's
    // /proc/self/exe is the test binary): node/tests/persist/save_child.rs covers it.
    #[test]
    fn the_writer_copies_its_input_into_the_file() {
        let dir = std::env::temp_dir().join(format!("tessera-child-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("temp-1.rdb");
        write_stream(&mut &b"hello child"[..], &path).expect("write");
        assert_eq!(std::fs::read(&path).expect("read"), b"hello child");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
