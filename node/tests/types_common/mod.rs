//! Shared harness for the collection-type tests: start tessera-node (and, for differential
//! tests, the real redis-server 7.0) on free loopback ports in 13000-14999, and talk raw RESP
//! to them so replies can be compared byte for byte.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server process killed (and reaped) on drop.
pub struct Server {
    pub port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn port_free(p: u16) -> bool {
    TcpListener::bind(("127.0.0.1", p)).is_ok()
}

/// A free port in our range; the pick is randomised so parallel tests rarely collide.
fn pick_port() -> u16 {
    let seed = std::process::id() as u64 ^ Instant::now().elapsed().as_nanos() as u64;
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    );
    for _ in 0..500 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let p = 13000 + (x % 2000) as u16;
        if port_free(p) {
            return p;
        }
    }
    panic!("no free port in 13000-14999");
}

fn wait_ready(port: u16, child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if answers_pong(port) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// One raw PING. Any I/O error is "not ready": a server that lost the port to another
/// test's process resets the connection as it exits, and the caller then retries on a new
/// port instead of panicking mid-read.
fn answers_pong(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).is_ok() && line == "+PONG\r\n"
}

fn start(bin: &str, extra: &[&str]) -> Server {
    for _ in 0..5 {
        let port = pick_port();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut args: Vec<String> = vec![
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--dir".into(),
            dir.path().display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut child = Command::new(bin)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {bin}: {e}"));
        if wait_ready(port, &mut child) {
            return Server {
                port,
                child,
                _dir: dir,
            };
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("{bin} did not start");
}

pub fn tessera() -> Server {
    start(env!("CARGO_BIN_EXE_tessera-node"), &[])
}

/// tessera-node with extra command-line directives.
pub fn tessera_with(extra: &[&str]) -> Server {
    start(env!("CARGO_BIN_EXE_tessera-node"), extra)
}

pub const REDIS: &str = "/usr/bin/redis-server";

/// The reference redis-server 7.0, or None (test skipped) when it is not installed.
pub fn redis() -> Option<Server> {
    if !std::path::Path::new(REDIS).exists() {
        eprintln!("redis-server not installed: skipping the differential part");
        return None;
    }
    Some(start(REDIS, &["--save", "", "--appendonly", "no"]))
}

/// A parsed RESP2/RESP3 reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    NullArray,
    Array(Vec<Reply>),
    Set(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Double(String),
    Bool(bool),
    Push(Vec<Reply>),
    Other(String),
}

impl Reply {
    /// Sorts unordered collections (sets, and arrays when `arrays`) recursively, so replies
    /// whose element order is unspecified (SMEMBERS, SUNION...) compare equal.
    pub fn normalized(&self, arrays: bool) -> Reply {
        let sort = |v: &Vec<Reply>| {
            let mut v: Vec<Reply> = v.iter().map(|r| r.normalized(arrays)).collect();
            v.sort_by_key(|a| format!("{a:?}"));
            v
        };
        match self {
            Reply::Set(v) => Reply::Set(sort(v)),
            Reply::Array(v) if arrays => Reply::Array(sort(v)),
            Reply::Map(kv) => {
                let mut kv: Vec<(Reply, Reply)> = kv
                    .iter()
                    .map(|(k, v)| (k.normalized(arrays), v.normalized(arrays)))
                    .collect();
                kv.sort_by_key(|a| format!("{a:?}"));
                Reply::Map(kv)
            }
            r => r.clone(),
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(i) => Some(*i),
            _ => None,
        }
    }
}

/// Polls INFO until `n` clients are blocked (generous deadline, no timing assertion).
pub fn wait_blocked(c: &mut Conn, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let Reply::Bulk(info) = c.cmd(&["INFO", "clients"]) else {
            panic!("info");
        };
        let info = String::from_utf8_lossy(&info).to_string();
        let cur = info
            .lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if cur == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never saw {n} blocked (saw {cur})"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `r` with what depends on the clock replaced by a marker, for comparing stream replies of
/// two servers: the time in PEL rows ([id, consumer, time, count] of XPENDING/XINFO FULL and
/// a consumer's [id, time, count]) and the value after any of `timed_keys` in a map (RESP3)
/// or flat key/value array (RESP2).
pub fn mask_times(r: &Reply, timed_keys: &[&str]) -> Reply {
    let masked = Reply::Simple("masked".into());
    let timed = |k: &Reply| {
        timed_keys
            .iter()
            .any(|n| matches!(k, Reply::Bulk(b) if b == n.as_bytes()))
    };
    match r {
        Reply::Array(v)
            if v.len() == 4
                && matches!(
                    (&v[0], &v[1], &v[2], &v[3]),
                    (Reply::Bulk(_), Reply::Bulk(_), Reply::Int(_), Reply::Int(_))
                ) =>
        {
            let mut v = v.clone();
            v[2] = masked;
            Reply::Array(v)
        }
        Reply::Array(v)
            if v.len() == 3
                && matches!(
                    (&v[0], &v[1], &v[2]),
                    (Reply::Bulk(_), Reply::Int(_), Reply::Int(_))
                ) =>
        {
            let mut v = v.clone();
            v[1] = masked;
            Reply::Array(v)
        }
        Reply::Array(v) => {
            let mut out: Vec<Reply> = Vec::with_capacity(v.len());
            for x in v {
                let after = out.last().is_some_and(timed) && matches!(x, Reply::Int(_));
                out.push(if after {
                    masked.clone()
                } else {
                    mask_times(x, timed_keys)
                });
            }
            Reply::Array(out)
        }
        Reply::Map(kv) => Reply::Map(
            kv.iter()
                .map(|(k, v)| {
                    let v = if timed(k) {
                        masked.clone()
                    } else {
                        mask_times(v, timed_keys)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        r => r.clone(),
    }
}

/// COMMAND INFO `name`'s entry from each of two servers (tessera, redis), for comparing
/// arity, flags, key range, categories and key specs field by field.
pub fn command_info_pair(a: &mut Conn, b: &mut Conn, name: &str) -> (Vec<Reply>, Vec<Reply>) {
    let entry = |c: &mut Conn| match c.cmd(&["COMMAND", "INFO", name]) {
        Reply::Array(mut v) if !v.is_empty() => match v.swap_remove(0) {
            Reply::Array(e) => e,
            other => panic!("{name}: not found ({other:?})"),
        },
        other => panic!("COMMAND INFO {name}: {other:?}"),
    };
    (entry(a), entry(b))
}

/// xorshift64*: a deterministic, dependency-free generator for the randomized differential
/// scripts (a seed reproduces a failing script). Test files add their own draws.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A raw RESP connection.
pub struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    pub fn try_connect(port: u16) -> std::io::Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Conn {
            r: BufReader::new(s.try_clone()?),
            w: s,
        })
    }

    pub fn connect(port: u16) -> Conn {
        Conn::try_connect(port).expect("connect")
    }

    /// Connects and switches to RESP3 when `resp3`.
    pub fn with_proto(port: u16, resp3: bool) -> Conn {
        let mut c = Conn::connect(port);
        if resp3 {
            let r = c.cmd(&["HELLO", "3"]);
            assert!(matches!(r, Reply::Map(_)), "HELLO 3 -> {r:?}");
        }
        c
    }

    pub fn send(&mut self, args: &[&str]) {
        let mut b = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            b.extend_from_slice(a.as_bytes());
            b.extend_from_slice(b"\r\n");
        }
        self.w.write_all(&b).expect("write");
    }

    /// Writes `bytes` (a pipeline of `n` requests) from another thread, so that neither
    /// side blocks on a full socket buffer, and reads the `n` replies.
    pub fn pipeline(&mut self, bytes: Vec<u8>, n: usize) -> Vec<Reply> {
        let mut w = self.w.try_clone().expect("clone");
        let writer = std::thread::spawn(move || w.write_all(&bytes));
        let replies = (0..n).map(|_| self.read()).collect();
        writer.join().expect("writer").expect("write");
        replies
    }

    /// Writes pre-encoded bytes (binary values, malformed input).
    pub fn raw_write(&mut self, b: &[u8]) {
        self.w.write_all(b).expect("write");
    }

    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        self.send(args);
        self.read()
    }

    /// Splits a command line on spaces (arguments in the scripts have no spaces).
    pub fn line(&mut self, line: &str) -> Reply {
        let args: Vec<&str> = line.split_whitespace().collect();
        self.cmd(&args)
    }

    fn read_line(&mut self) -> String {
        let mut s = String::new();
        self.r.read_line(&mut s).expect("read");
        assert!(s.ends_with("\r\n"), "bad line {s:?}");
        s.truncate(s.len() - 2);
        s
    }

    pub fn read(&mut self) -> Reply {
        let l = self.read_line();
        let (t, rest) = l.split_at(1);
        let n = || rest.parse::<i64>().expect("length");
        match t {
            "+" => Reply::Simple(rest.into()),
            "-" => Reply::Error(rest.into()),
            ":" => Reply::Int(n()),
            "$" | "=" => {
                if n() < 0 {
                    return Reply::Null;
                }
                let mut b = vec![0u8; n() as usize + 2];
                self.r.read_exact(&mut b).expect("bulk");
                b.truncate(b.len() - 2);
                Reply::Bulk(b)
            }
            "*" | "~" | ">" => {
                if n() < 0 {
                    return Reply::NullArray;
                }
                let v = (0..n()).map(|_| self.read()).collect();
                match t {
                    "*" => Reply::Array(v),
                    "~" => Reply::Set(v),
                    _ => Reply::Push(v),
                }
            }
            "%" => Reply::Map((0..n()).map(|_| (self.read(), self.read())).collect()),
            "_" => Reply::Null,
            "," => Reply::Double(rest.into()),
            "#" => Reply::Bool(rest == "t"),
            _ => Reply::Other(l.clone()),
        }
    }
}

/// Runs `script` (one command per line; a line starting with `~` has an unordered reply,
/// `#` starts a comment) on both servers in RESP2 and RESP3 and asserts identical replies.
pub fn diff_script(name: &str, script: &str) {
    let t = tessera();
    let Some(r) = redis() else { return };
    for resp3 in [false, true] {
        let mut a = Conn::with_proto(t.port, resp3);
        let mut b = Conn::with_proto(r.port, resp3);
        a.cmd(&["FLUSHALL"]);
        b.cmd(&["FLUSHALL"]);
        let mut n = 0;
        let mut failures = Vec::new();
        for raw in script.lines() {
            let raw = raw.trim();
            if raw.is_empty() || raw.starts_with('#') {
                continue;
            }
            let (unordered, line) = match raw.strip_prefix('~') {
                Some(l) => (true, l.trim()),
                None => (false, raw),
            };
            let (mut x, mut y) = (a.line(line), b.line(line));
            if unordered {
                x = x.normalized(true);
                y = y.normalized(true);
            }
            if x != y {
                failures.push(format!(
                    "{name} (RESP{}): `{line}`:\n  tessera: {x:?}\n  redis:   {y:?}",
                    if resp3 { 3 } else { 2 }
                ));
            }
            n += 1;
        }
        assert!(
            failures.is_empty(),
            "{} mismatches:\n{}",
            failures.len(),
            failures.join("\n")
        );
        eprintln!(
            "{name}: {n} commands identical (RESP{})",
            if resp3 { 3 } else { 2 }
        );
    }
}
