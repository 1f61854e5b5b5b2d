//! One process spawner for the node's integration tests: picks a free loopback port in the
//! caller's range, starts tessera-node / redis-server / valkey-server in a data directory,
//! polls PING until it serves, and kills (and reaps) it on drop. The per-suite harnesses
//! (`repl_util.rs`, `persist_util.rs`, `pubsub_harness.rs`, `cluster_harness.rs`,
//! `common/mod.rs`) wrap [`Server`] with what is specific to them. Each suite keeps its own
//! port range so test binaries running in parallel do not collide.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const TESSERA: &str = env!("CARGO_BIN_EXE_tessera-node");
pub const REDIS: &str = "/usr/bin/redis-server";
pub const VALKEY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../.tools/bin/valkey-server");

/// How many times a start is retried on a fresh port (another test may win a port race).
const ATTEMPTS: usize = 5;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A suite's port range, `lo..=hi`; `bus` also requires the cluster bus port (+10000) free.
#[derive(Clone, Copy, Debug)]
pub struct Ports {
    pub lo: u16,
    pub hi: u16,
    pub bus: bool,
}

impl Ports {
    /// A port free on `ip` right now. The walk starts at an offset derived from the pid so
    /// test binaries running at once start apart; the stride (7) is coprime with every
    /// suite's span, so each port is visited once.
    pub fn free(&self, ip: &str) -> u16 {
        let span = u32::from(self.hi - self.lo) + 1;
        let base = std::process::id() % span;
        for _ in 0..span {
            let off = NEXT.fetch_add(7, Ordering::Relaxed);
            let p = self.lo + ((base + off % span) % span) as u16;
            let free = |p: u16| TcpListener::bind((ip, p)).is_ok();
            if free(p) && (!self.bus || free(p + 10000)) {
                return p;
            }
        }
        panic!("no free port in {}-{} on {ip}", self.lo, self.hi);
    }
}

/// Polls `f` every 50 ms until it holds; panics with `what` after `limit`.
pub fn wait_for(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        if start.elapsed() > limit {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of `field:value` in INFO-style text (INFO, CLUSTER INFO).
pub fn info_value(text: &str, field: &str) -> Option<String> {
    text.lines().find_map(|l| {
        l.strip_prefix(field)
            .and_then(|r| r.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    })
}

/// True when `ip:port` answers an inline PING with +PONG, or with -NOAUTH (a server with
/// requirepass serves too). -LOADING is not ready.
pub fn answers_ping(ip: &str, port: u16) -> bool {
    let Ok(addr) = format!("{ip}:{port}").parse::<SocketAddr>() else {
        return false;
    };
    let Ok(mut c) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 5];
    c.write_all(b"PING\r\n").is_ok()
        && c.read_exact(&mut buf).is_ok()
        && (&buf == b"+PONG" || &buf == b"-NOAU")
}

/// What to start: `BIN --port P --bind IP --dir DIR [--logfile DIR/log] ARGS...`, where
/// `{port}` in an argument becomes P.
#[derive(Clone, Debug)]
pub struct Launch {
    bin: String,
    ports: Ports,
    ip: String,
    dir: Option<PathBuf>,
    args: Vec<String>,
    logfile: bool,
    cwd: bool,
    ready_within: Duration,
}

impl Launch {
    pub fn new(bin: &str, ports: Ports) -> Launch {
        Launch {
            bin: bin.to_string(),
            ports,
            ip: "127.0.0.1".into(),
            dir: None,
            args: Vec::new(),
            logfile: false,
            cwd: false,
            ready_within: Duration::from_secs(60),
        }
    }

    pub fn ip(mut self, ip: &str) -> Launch {
        self.ip = ip.to_string();
        self
    }

    /// A data directory that outlives the process (restarts over the same data); without
    /// one, the server gets a fresh temp dir it owns.
    pub fn dir(mut self, dir: &Path) -> Launch {
        self.dir = Some(dir.to_path_buf());
        self
    }

    pub fn args<S: AsRef<str>>(mut self, args: &[S]) -> Launch {
        self.args
            .extend(args.iter().map(|a| a.as_ref().to_string()));
        self
    }

    /// Passes `--logfile DIR/log` (the server's own log, kept with its data).
    pub fn logfile(mut self) -> Launch {
        self.logfile = true;
        self
    }

    /// Runs the process with the data directory as its working directory.
    pub fn cwd(mut self) -> Launch {
        self.cwd = true;
        self
    }

    /// The command line for `port` in `dir`, stdio discarded.
    pub fn command(&self, ip: &str, port: u16, dir: &Path) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(["--port", &port.to_string(), "--bind", ip, "--dir"])
            .arg(dir);
        if self.logfile {
            cmd.arg("--logfile").arg(dir.join("log"));
        }
        cmd.args(
            self.args
                .iter()
                .map(|a| a.replace("{port}", &port.to_string())),
        );
        if self.cwd {
            cmd.current_dir(dir);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    /// Starts the server and waits until it serves; panics after [`ATTEMPTS`] tries.
    pub fn start(self) -> Server {
        let (dir, tmp) = match &self.dir {
            Some(d) => (d.clone(), None),
            None => {
                let t = tempfile::tempdir().expect("tempdir");
                (t.path().to_path_buf(), Some(t))
            }
        };
        let ip = self.ip.clone();
        let (child, port) = self.spawn_ready(&ip, &dir);
        Server {
            child,
            port,
            ip,
            dir,
            launch: self,
            _tmp: tmp,
        }
    }

    /// Starts the process on a free port of `ip` in `dir` and waits until it serves: the
    /// bare child for callers that own their guard (`common::Node`).
    pub fn spawn_ready(&self, ip: &str, dir: &Path) -> (Child, u16) {
        for _ in 0..ATTEMPTS {
            let port = self.ports.free(ip);
            let mut child = self
                .command(ip, port, dir)
                .spawn()
                .unwrap_or_else(|e| panic!("start {}: {e}", self.bin));
            let deadline = Instant::now() + self.ready_within;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // lost a port race with another test: retry elsewhere
                }
                if answers_ping(ip, port) {
                    return (child, port);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            kill(&mut child);
        }
        let log = if self.logfile {
            log_tail(&dir.join("log"), 20)
        } else {
            String::new()
        };
        panic!("{} did not start in {}\n{log}", self.bin, dir.display());
    }
}

/// Gives a harness's wrapper `struct $t { srv: Server, .. }` the [`Server`]'s fields and
/// methods (`port`, `child`, `kill`, `restart`...) through Deref.
#[allow(unused_macros)]
macro_rules! deref_server {
    ($t:ty) => {
        impl std::ops::Deref for $t {
            type Target = Server;
            fn deref(&self) -> &Server {
                &self.srv
            }
        }

        impl std::ops::DerefMut for $t {
            fn deref_mut(&mut self) -> &mut Server {
                &mut self.srv
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use deref_server;

/// A running server; killed and reaped on drop.
pub struct Server {
    pub child: Child,
    pub port: u16,
    /// The address [`Server::restart`] binds (set it to move the server).
    pub ip: String,
    pub dir: PathBuf,
    launch: Launch,
    _tmp: Option<tempfile::TempDir>,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    pub fn bin(&self) -> &str {
        &self.launch.bin
    }

    /// The server's own log file, when it was started with [`Launch::logfile`].
    pub fn log_path(&self) -> Option<PathBuf> {
        self.launch.logfile.then(|| self.dir.join("log"))
    }

    /// SIGKILL (no save, no goodbye), then reap. Harmless when already dead: a reaped
    /// child is never signalled again.
    pub fn kill(&mut self) {
        kill(&mut self.child);
    }

    /// Kills the process and starts it again on a fresh port of `self.ip`, same dir and
    /// arguments (so nodes.conf, RDB and AOF carry over).
    pub fn restart(&mut self) {
        self.kill();
        let (child, port) = self.launch.spawn_ready(&self.ip, &self.dir);
        self.child = child;
        self.port = port;
    }

    /// Waits (bounded) for the process to exit by itself.
    pub fn wait_exit(&mut self, max: Duration) -> Option<ExitStatus> {
        wait_exit(&mut self.child, max)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// SIGKILL, then reap. Harmless on a child already reaped (std never signals it again).
pub fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Waits (bounded) for `child` to exit by itself; None if it still runs after `max`.
pub fn wait_exit(child: &mut Child, max: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + max;
    while Instant::now() < deadline {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// The last `lines` lines of a log file ("" when unreadable), for failure messages.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
