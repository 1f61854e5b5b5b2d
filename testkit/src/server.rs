//! The one process spawner: tessera-node, redis-server or valkey-server on a free loopback
//! port ([`crate::ports`]) in a data directory, ready when PING answers, SIGKILLed and
//! reaped on drop. Its stdout/stderr go to a file the guard keeps; when the test panics,
//! the guard prints the tail of the server's log (its `--logfile`, else that output).

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::bins;
use crate::resp::{Conn, Raw};

/// How many times a start is retried on a fresh port (another process may win a port race).
const ATTEMPTS: usize = 5;
/// Lines of the server's log printed when a test panics.
const TAIL_LINES: usize = 30;
/// How long [`Server::stop`] lets a server shut down cleanly before SIGKILL.
pub const STOP_WITHIN: Duration = Duration::from_secs(15);

/// True when `ip:port` answers an inline PING with +PONG, or with -NOAUTH (a server with
/// requirepass serves too). -LOADING is not ready. Any I/O error is "not ready".
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

/// Whether the server answering on `ip:port` is process `pid` (INFO server's process_id):
/// a start that lost its port to another process must not be taken for ready. None when
/// it cannot tell (INFO refused, e.g. -NOAUTH, or no answer).
pub fn served_by(ip: &str, port: u16, pid: u32) -> Option<bool> {
    let addr = format!("{ip}:{port}").parse::<SocketAddr>().ok()?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n").ok()?;
    // Read without panicking: an error or a refusal is "cannot tell".
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < 64 * 1024 {
        let n = s.read(&mut buf).ok()?;
        if n == 0 || got.first() == Some(&b'-') {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some(at) = text.find("process_id:") {
            let rest = &text[at..];
            if rest.contains("\r\n") {
                return crate::info_field(rest, "process_id").map(|p| p == pid.to_string());
            }
        }
        if text.starts_with('-') || text.contains("\r\n\r\n") {
            return None;
        }
    }
    None
}

/// What to start: `BIN --port P --bind IP --dir DIR [--logfile DIR/log] ARGS...`, where
/// `{port}`, `{ip}` and `{dir}` in an argument become P, IP and DIR (so an argument follows
/// a restart on another address). A [`Launch::verbatim`] one runs `BIN ARGS...` alone.
#[derive(Clone, Debug)]
pub struct Launch {
    bin: String,
    ip: String,
    dir: Option<PathBuf>,
    args: Vec<String>,
    logfile: bool,
    cwd: bool,
    verbatim: bool,
    ready_within: Duration,
}

impl Launch {
    /// A launch of the program at `bin` (see [`crate::bins`] for the usual ones).
    pub fn new(bin: &str) -> Launch {
        Launch {
            bin: bin.to_string(),
            ip: "127.0.0.1".into(),
            dir: None,
            args: Vec::new(),
            logfile: false,
            cwd: false,
            verbatim: false,
            ready_within: Duration::from_secs(60),
        }
    }

    pub fn tessera() -> Launch {
        Launch::new(bins::tessera_bin())
    }

    pub fn redis() -> Launch {
        Launch::new(bins::redis_bin())
    }

    pub fn valkey() -> Launch {
        Launch::new(bins::valkey_bin())
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

    /// Adds nothing to the command line: the arguments alone say address, port and dir
    /// (with `{port}`, `{ip}`, `{dir}` filled in), for a config file that must come first or
    /// a command line taken as is from a pod spec.
    pub fn verbatim(mut self) -> Launch {
        self.verbatim = true;
        self
    }

    /// How long a start may take before it counts as failed (default 60 s).
    pub fn ready_within(mut self, d: Duration) -> Launch {
        self.ready_within = d;
        self
    }

    pub fn bin(&self) -> &str {
        &self.bin
    }

    /// The command line for `port` in `dir`, stdio discarded (callers that run a server
    /// their own way, e.g. expecting it to fail at start, override what they need).
    pub fn command(&self, ip: &str, port: u16, dir: &Path) -> Command {
        let mut cmd = Command::new(&self.bin);
        if !self.verbatim {
            cmd.args(["--port", &port.to_string(), "--bind", ip, "--dir"])
                .arg(dir);
            if self.logfile {
                cmd.arg("--logfile").arg(dir.join("log"));
            }
        }
        let dir_text = dir.display().to_string();
        cmd.args(self.args.iter().map(|a| {
            a.replace("{port}", &port.to_string())
                .replace("{ip}", ip)
                .replace("{dir}", &dir_text)
        }));
        if self.cwd {
            cmd.current_dir(dir);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    /// Runs the program over `dir` on a free port expecting it to stop by itself (a refused
    /// config, data or nodes.conf file), for at most `max`; killed if it still runs then.
    /// Its stdout and stderr go to a file (no pipe to fill), returned whole.
    pub fn run_to_exit(&self, dir: &Path, max: Duration) -> Exit {
        let out = tempfile::tempdir().expect("tempdir");
        let path = out.path().join("output.log");
        let f = std::fs::File::create(&path)
            .unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        let f2 = f.try_clone().expect("clone output file");
        let mut cmd = self.command(&self.ip, crate::ports::free_port_on(&self.ip), dir);
        cmd.stdout(f).stderr(f2);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.bin));
        let status = wait_exit(&mut child, max);
        kill(&mut child);
        Exit {
            status,
            output: std::fs::read_to_string(&path).unwrap_or_default(),
        }
    }

    /// The data directory: the one given, else a fresh temp dir the server will own.
    fn data_dir(&self) -> (PathBuf, Option<tempfile::TempDir>) {
        match &self.dir {
            Some(d) => (d.clone(), None),
            None => {
                let t = tempfile::tempdir().expect("tempdir");
                (t.path().to_path_buf(), Some(t))
            }
        }
    }

    /// Starts the server and waits until it serves; panics after a few tries.
    pub fn start(self) -> Server {
        let (dir, tmp) = self.data_dir();
        let out = tempfile::tempdir().expect("tempdir");
        let output = out.path().join("output.log");
        let ip = self.ip.clone();
        let (child, port) = self.spawn_ready_logged(&ip, &dir, Some(&output));
        Server {
            child,
            port,
            ip,
            dir,
            launch: self,
            output,
            _out: out,
            _tmp: tmp,
        }
    }

    /// Starts the server on exactly `port` of its ip (a restart that keeps its address) and
    /// waits until it serves; no retry elsewhere: a start that fails panics with its log.
    pub fn start_at(self, port: u16) -> Server {
        let (dir, tmp) = self.data_dir();
        let out = tempfile::tempdir().expect("tempdir");
        let output = out.path().join("output.log");
        let (child, ready) = self.spawn_at(&self.ip, port, &dir, Some(&output));
        let srv = Server {
            child,
            port,
            ip: self.ip.clone(),
            dir,
            launch: self,
            output,
            _out: out,
            _tmp: tmp,
        };
        if !ready {
            panic!(
                "{} did not start on {}\n{}",
                srv.bin(),
                srv.addr(),
                srv.log_tail(20)
            );
        }
        srv
    }

    /// Starts the server on a free port expecting either outcome (a config probe): the
    /// running server, or how it stopped (killed if it neither served nor stopped within
    /// `ready_within`) with everything it printed.
    pub fn start_or_exit(self) -> Result<Server, Exit> {
        let (dir, tmp) = self.data_dir();
        let out = tempfile::tempdir().expect("tempdir");
        let output = out.path().join("output.log");
        let port = crate::ports::free_port_on(&self.ip);
        let (mut child, ready) = self.spawn_at(&self.ip, port, &dir, Some(&output));
        if !ready {
            let status = wait_exit(&mut child, Duration::from_secs(5));
            kill(&mut child);
            return Err(Exit {
                status,
                output: std::fs::read_to_string(&output).unwrap_or_default(),
            });
        }
        Ok(Server {
            child,
            port,
            ip: self.ip.clone(),
            dir,
            launch: self,
            output,
            _out: out,
            _tmp: tmp,
        })
    }

    /// Starts the process on exactly `ip:port`, output appended to `output` (else discarded),
    /// and waits until it serves; false when it exited (e.g. lost a port race) or did not
    /// serve in time (the child is returned to be reaped or reported either way).
    fn spawn_at(&self, ip: &str, port: u16, dir: &Path, output: Option<&Path>) -> (Child, bool) {
        let mut cmd = self.command(ip, port, dir);
        if let Some(path) = output {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
            let f2 = f.try_clone().expect("clone output file");
            cmd.stdout(f).stderr(f2);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.bin));
        let deadline = Instant::now() + self.ready_within;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return (child, false);
            }
            if answers_ping(ip, port) && served_by(ip, port, child.id()) != Some(false) {
                return (child, true);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        (child, false)
    }

    /// Starts the process on a free port of `ip` in `dir` and waits until it serves: the
    /// bare child, output discarded, for callers that own their guard.
    pub fn spawn_ready(&self, ip: &str, dir: &Path) -> (Child, u16) {
        self.spawn_ready_logged(ip, dir, None)
    }

    fn spawn_ready_logged(&self, ip: &str, dir: &Path, output: Option<&Path>) -> (Child, u16) {
        for _ in 0..ATTEMPTS {
            let port = crate::ports::free_port_on(ip);
            let (mut child, ready) = self.spawn_at(ip, port, dir, output);
            if ready {
                return (child, port);
            }
            // Lost a port race with another process (or too slow): retry elsewhere.
            kill(&mut child);
        }
        let mut tail = String::new();
        if self.logfile {
            tail.push_str(&log_tail(&dir.join("log"), 20));
        }
        if let Some(path) = output {
            tail.push('\n');
            tail.push_str(&log_tail(path, 20));
        }
        panic!("{} did not start in {}\n{tail}", self.bin, dir.display());
    }
}

/// How a run that should fail at start ended ([`Launch::run_to_exit`]).
#[derive(Debug)]
pub struct Exit {
    /// None when it still ran after the wait (it was killed then).
    pub status: Option<ExitStatus>,
    /// Everything it printed, stdout and stderr interleaved.
    pub output: String,
}

impl Exit {
    /// It stopped by itself with a failure status.
    pub fn failed(&self) -> bool {
        self.status.is_some_and(|s| !s.success())
    }
}

/// A running server; killed and reaped on drop.
pub struct Server {
    pub child: Child,
    pub port: u16,
    /// The address [`Server::restart`] binds (set it to move the server).
    pub ip: String,
    pub dir: PathBuf,
    launch: Launch,
    /// Where the process's stdout and stderr go.
    output: PathBuf,
    _out: tempfile::TempDir,
    _tmp: Option<tempfile::TempDir>,
}

impl Server {
    /// tessera-node with exactly these arguments, in a fresh temp dir.
    pub fn tessera(args: &[&str]) -> Server {
        Launch::tessera().args(args).start()
    }

    /// redis-server with exactly these arguments, in a fresh temp dir.
    pub fn redis(args: &[&str]) -> Server {
        Launch::redis().args(args).start()
    }

    /// valkey-server with exactly these arguments, in a fresh temp dir.
    pub fn valkey(args: &[&str]) -> Server {
        Launch::valkey().args(args).start()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr())
    }

    pub fn bin(&self) -> &str {
        &self.launch.bin
    }

    /// The server's own log file, when it was started with [`Launch::logfile`].
    pub fn log_path(&self) -> Option<PathBuf> {
        self.launch.logfile.then(|| self.dir.join("log"))
    }

    /// The file holding the process's stdout and stderr (every start of this guard).
    pub fn output_path(&self) -> &Path {
        &self.output
    }

    /// A `redis` crate connection (5 s to connect, no read timeout).
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.addr()))
    }

    /// [`Server::conn`] with a 30 s read timeout (a hung server fails the test).
    pub fn client(&self) -> redis::Connection {
        let c = self.conn();
        c.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        c
    }

    /// A raw RESP connection reading [`crate::Reply`]s.
    pub fn resp(&self) -> Conn {
        Conn::try_connect_addr(&self.addr())
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.addr()))
    }

    /// A raw RESP connection reading [`crate::R`]s.
    pub fn raw(&self) -> Raw {
        Raw(self.resp())
    }

    /// redis-cli output (raw, no -c) for one command against this server.
    pub fn cli(&self, args: &[&str]) -> String {
        let o = crate::cli::cli_out(&["-h", &self.ip, "-p", &self.port.to_string()], args);
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// A field of `INFO section`, None when absent or the server does not answer.
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        let mut c = redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .ok()?;
        let s: String = redis::cmd("INFO").arg(section).query(&mut c).ok()?;
        crate::info_field(&s, field)
    }

    /// SIGKILL (no save, no goodbye), then reap. Harmless when already dead.
    pub fn kill(&mut self) {
        kill(&mut self.child);
    }

    /// Kills the process and starts it again on a fresh port of `self.ip`, same dir and
    /// arguments (so nodes.conf, RDB and AOF carry over).
    pub fn restart(&mut self) {
        self.kill();
        let (child, port) = self
            .launch
            .spawn_ready_logged(&self.ip, &self.dir, Some(&self.output));
        self.child = child;
        self.port = port;
    }

    /// Kills the process (if it still runs) and starts it again on exactly `port` of
    /// `self.ip`, same dir and arguments: a restart that keeps its port, e.g. a pod that
    /// comes back on a new address. No retry elsewhere: a start that fails panics with its log.
    pub fn restart_at(&mut self, port: u16) {
        self.kill();
        let (child, ready) = self
            .launch
            .spawn_at(&self.ip, port, &self.dir, Some(&self.output));
        self.child = child;
        self.port = port;
        if !ready {
            panic!(
                "{} did not start again on {}\n{}",
                self.bin(),
                self.addr(),
                self.log_tail(20)
            );
        }
    }

    /// Sends `sig` (a `kill` signal name: STOP, CONT, TERM...) to the process; panics when
    /// it cannot be delivered.
    pub fn signal(&self, sig: &str) {
        crate::process::send_signal(self.pid(), sig, self.bin());
    }

    /// A clean stop: SIGTERM (the server saves and flushes its AOF) every second, since
    /// Redis ignores it while it writes its first AOF, then SIGKILL after [`STOP_WITHIN`];
    /// reaped either way. Harmless when already stopped.
    pub fn stop(&mut self) {
        let deadline = Instant::now() + STOP_WITHIN;
        let mut next_term = Instant::now();
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            if Instant::now() >= next_term {
                let _ = Command::new("kill")
                    .args(["-TERM", &self.pid().to_string()])
                    .stdin(Stdio::null())
                    .status();
                next_term = Instant::now() + Duration::from_secs(1);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
    }

    /// Waits (bounded) for the process to exit by itself.
    pub fn wait_exit(&mut self, max: Duration) -> Option<ExitStatus> {
        wait_exit(&mut self.child, max)
    }

    /// The last lines of what the server logged (its log file, else its output).
    pub fn log_tail(&self, lines: usize) -> String {
        let mut s = String::new();
        if let Some(p) = self.log_path() {
            s.push_str(&log_tail(&p, lines));
            s.push('\n');
        }
        s.push_str(&log_tail(&self.output, lines));
        s
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "--- {} on {} (dir {}): last lines of its log ---\n{}\n---",
                self.launch.bin,
                self.addr(),
                self.dir.display(),
                self.log_tail(TAIL_LINES).trim()
            );
        }
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

/// Gives a wrapper `struct $t { srv: Server, .. }` the [`Server`]'s fields and methods
/// (`port`, `child`, `kill`, `restart`...) through Deref.
#[macro_export]
macro_rules! deref_server {
    ($t:ty) => {
        impl std::ops::Deref for $t {
            type Target = $crate::Server;
            fn deref(&self) -> &$crate::Server {
                &self.srv
            }
        }

        impl std::ops::DerefMut for $t {
            fn deref_mut(&mut self) -> &mut $crate::Server {
                &mut self.srv
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive(pid: u32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn redis_starts_serves_and_dies_with_its_guard() {
        let s = Server::redis(&["--save", "", "--appendonly", "no"]);
        assert!(answers_ping(&s.ip, s.port));
        let mut c = s.resp();
        assert_eq!(c.cmd(&["SET", "k", "v"]), crate::Reply::Simple("OK".into()));
        let pid = s.pid();
        let dir = s.dir.clone();
        drop(s);
        assert!(!alive(pid), "the guard reaped the process");
        assert!(!dir.exists(), "the owned temp dir went with the guard");
    }

    #[test]
    fn served_by_tells_our_process_from_another() {
        let s = Server::redis(&["--save", ""]);
        assert_eq!(served_by(&s.ip, s.port, s.pid()), Some(true));
        assert_eq!(served_by(&s.ip, s.port, s.pid() + 1), Some(false));
        let auth = Server::redis(&["--save", "", "--requirepass", "pw"]);
        assert_eq!(served_by(&auth.ip, auth.port, auth.pid()), None);
    }

    #[test]
    fn a_refused_start_is_reported_with_its_output() {
        let dir = tempfile::tempdir().expect("tmp");
        let e = Launch::redis()
            .args(&["--maxmemory-policy", "sometimes"])
            .run_to_exit(dir.path(), Duration::from_secs(20));
        assert!(e.failed(), "{e:?}");
        assert!(e.output.contains("maxmemory-policy"), "{}", e.output);
        // A server that does not stop is killed after the wait and reported as running.
        let e = Launch::redis()
            .args(&["--save", ""])
            .run_to_exit(dir.path(), Duration::from_millis(500));
        assert!(e.status.is_none() && !e.failed(), "{e:?}");
    }

    #[test]
    fn start_at_takes_the_given_port() {
        let first = Server::redis(&["--save", ""]);
        let port = first.port;
        drop(first);
        let again = Launch::redis().args(&["--save", ""]).start_at(port);
        assert_eq!(again.port, port);
        assert_eq!(served_by(&again.ip, port, again.pid()), Some(true));
    }

    #[test]
    fn output_is_kept_and_restart_appends() {
        let mut s = Launch::redis().args(&["--save", ""]).start();
        let first = s.port;
        s.restart();
        assert!(answers_ping(&s.ip, s.port));
        let _ = first;
        let out = std::fs::read_to_string(s.output_path()).expect("output");
        assert!(
            out.matches("Ready to accept connections").count() >= 2,
            "both starts logged: {out}"
        );
    }

    #[test]
    fn verbatim_runs_the_arguments_alone_with_placeholders_filled() {
        let conf_dir = tempfile::tempdir().expect("tmp");
        let conf = conf_dir.path().join("node.conf");
        std::fs::write(&conf, "maxmemory-policy allkeys-lru\n").expect("write conf");
        // A config file is only read as the first argument: nothing may come before it.
        let s = Launch::redis()
            .verbatim()
            .args(&[conf.to_str().expect("utf8")])
            .args(&[
                "--port", "{port}", "--bind", "{ip}", "--dir", "{dir}", "--save", "",
            ])
            .start();
        let policy = s.cli(&["CONFIG", "GET", "maxmemory-policy"]);
        assert!(policy.contains("allkeys-lru"), "{policy}");
        let dir = s.cli(&["CONFIG", "GET", "dir"]);
        let want = s.dir.canonicalize().expect("dir");
        assert!(
            dir.contains(want.to_str().expect("utf8")),
            "{dir} vs {want:?}"
        );
    }

    #[test]
    fn stop_is_clean_and_restart_at_keeps_the_port_on_a_new_address() {
        let mut s = Launch::redis()
            .args(&["--save", "3600 1", "--appendonly", "no"])
            .start();
        assert_eq!(
            s.resp().cmd(&["SET", "k", "v"]),
            crate::Reply::Simple("OK".into())
        );
        s.stop();
        let status = s.child.try_wait().expect("reaped");
        assert!(
            status.is_some_and(|st| st.success()),
            "SIGTERM, not SIGKILL: {status:?}"
        );
        assert!(s.dir.join("dump.rdb").is_file(), "saved on the way out");
        let port = s.port;
        s.ip = "127.0.0.2".into();
        s.restart_at(port);
        assert_eq!((s.ip.as_str(), s.port), ("127.0.0.2", port));
        assert!(answers_ping("127.0.0.2", port));
        assert_eq!(s.cli(&["GET", "k"]).trim(), "v");
    }

    #[test]
    fn a_stopped_process_does_not_answer_until_continued() {
        let s = Server::redis(&["--save", ""]);
        s.signal("STOP");
        assert!(!answers_ping(&s.ip, s.port));
        s.signal("CONT");
        assert!(answers_ping(&s.ip, s.port));
    }

    #[test]
    fn a_server_that_cannot_start_fails_with_its_log() {
        let r = std::panic::catch_unwind(|| {
            Launch::redis()
                .args(&["--no-such-directive", "x"])
                .ready_within(Duration::from_secs(5))
                .start()
        });
        let err = r.err().expect("must not start");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("did not start"), "{msg}");
        assert!(
            msg.contains("no-such-directive"),
            "log tail included: {msg}"
        );
    }
}
