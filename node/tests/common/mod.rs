//! Test harness: starts the real `tessera-node` binary on a free loopback port and kills it
//! on drop; a raw RESP client for byte-exact checks; helpers for the `redis` crate.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::Duration;

pub mod proc;

use proc::{Launch, Ports};

/// Ports 11000-12999 belong to tessera-node's integration tests.
pub const PORTS: Ports = Ports {
    lo: 11000,
    hi: 12999,
    bus: false,
};

/// A free port in our range.
pub fn free_port() -> u16 {
    PORTS.free("127.0.0.1")
}

pub fn bin() -> &'static str {
    proc::TESSERA
}

/// A running tessera-node; killed (and reaped) on drop. Fields are public so a test can
/// wrap a node it started its own way (from a config file).
pub struct Node {
    pub child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl Node {
    pub fn start() -> Node {
        Node::start_with(&[])
    }

    /// Starts with extra `--directive value` arguments, in a fresh temp dir as cwd.
    pub fn start_with(extra: &[&str]) -> Node {
        let dir = tempfile::tempdir().expect("tempdir");
        let (child, port) = Launch::new(bin(), PORTS)
            .args(&["--save", ""])
            .args(extra)
            .cwd()
            .spawn_ready("127.0.0.1", dir.path());
        Node { child, port, dir }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Connection {
        let c = redis::Client::open(self.url()).expect("client");
        let con = c.get_connection().expect("connect");
        con.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        con
    }

    pub fn raw(&self) -> Raw {
        Raw::connect(self.port)
    }

    /// Runs redis-cli with args; returns stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("redis-cli")
            .arg("-p")
            .arg(self.port.to_string())
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits (bounded) for the process to exit by itself.
    pub fn wait_exit(&mut self, secs: u64) -> Option<std::process::ExitStatus> {
        proc::wait_exit(&mut self.child, Duration::from_secs(secs))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        proc::kill(&mut self.child);
    }
}

/// A parsed reply, rendered compactly for assertions.
#[derive(Debug, Clone, PartialEq)]
pub enum R {
    Simple(String),
    Err(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Arr(Vec<R>),
    /// RESP3 aggregate with its type byte (% ~ >) flattened to elements.
    Agg(u8, Vec<R>),
    Other(u8, String),
}

impl R {
    pub fn s(&self) -> String {
        match self {
            R::Simple(s) => s.clone(),
            R::Err(s) => s.clone(),
            R::Int(i) => i.to_string(),
            R::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            R::Nil => "(nil)".into(),
            R::Arr(v) | R::Agg(_, v) => {
                format!(
                    "[{}]",
                    v.iter().map(|x| x.s()).collect::<Vec<_>>().join(",")
                )
            }
            R::Other(_, s) => s.clone(),
        }
    }
}

/// Raw RESP client over TCP.
pub struct Raw {
    pub r: BufReader<TcpStream>,
    pub w: TcpStream,
}

pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        Raw {
            r: BufReader::new(s.try_clone().expect("clone")),
            w: s,
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).expect("write");
    }

    /// Sends a command and reads one reply.
    pub fn cmd(&mut self, args: &[&str]) -> R {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.send(&encode(&a));
        self.read()
    }

    pub fn read_line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).expect("read line");
        l.trim_end_matches("\r\n").to_string()
    }

    pub fn read(&mut self) -> R {
        let l = self.read_line();
        if l.is_empty() {
            return R::Other(0, String::new());
        }
        let (t, rest) = (l.as_bytes()[0], &l[1..]);
        match t {
            b'+' => R::Simple(rest.into()),
            b'-' => R::Err(rest.into()),
            b':' => R::Int(rest.parse().expect("int")),
            b'_' => R::Nil,
            b'$' | b'=' | b'!' => {
                let n: i64 = rest.parse().expect("len");
                if n < 0 {
                    return R::Nil;
                }
                let mut buf = vec![0u8; n as usize + 2];
                self.r.read_exact(&mut buf).expect("bulk");
                buf.truncate(n as usize);
                R::Bulk(buf)
            }
            b'*' => {
                let n: i64 = rest.parse().expect("len");
                if n < 0 {
                    return R::Nil;
                }
                R::Arr((0..n).map(|_| self.read()).collect())
            }
            b'%' | b'~' | b'>' | b'|' => {
                let n: usize = rest.parse().expect("len");
                let n = if t == b'%' || t == b'|' { n * 2 } else { n };
                R::Agg(t, (0..n).map(|_| self.read()).collect())
            }
            other => R::Other(other, rest.into()),
        }
    }

    /// True when the server closed the connection (reads EOF within the timeout).
    pub fn closed(&mut self) -> bool {
        let _ = self.w.set_read_timeout(Some(Duration::from_secs(10)));
        let mut buf = [0u8; 1024];
        loop {
            match self.r.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    }
}
