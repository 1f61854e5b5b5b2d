//! The differential tests' helpers (types, scripting, sort, geo, HLL...): tessera-node and
//! the reference redis-server side by side, replies compared byte for byte, and scripts
//! of commands run on both.

use std::time::{Duration, Instant};

pub use crate::resp::{Conn, Reply};
pub use crate::server::Server;

pub fn tessera() -> Server {
    Server::tessera(&[])
}

/// tessera-node with extra command-line directives.
pub fn tessera_with(extra: &[&str]) -> Server {
    Server::tessera(extra)
}

/// The reference redis-server 7.0 (saving off). A missing redis-server fails the test
/// ([`crate::bins::redis_bin`]).
pub fn redis() -> Server {
    Server::redis(&["--save", "", "--appendonly", "no"])
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
/// scripts (a seed reproduces a failing script).
pub struct Rng(pub u64);

impl Rng {
    // Not an Iterator: the generator never ends and callers want the bare u64.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in [lo, hi].
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (self.next() >> 11) as f64 / (1u64 << 53) as f64 * (hi - lo)
    }

    /// Uniform in lo..=hi.
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// One of `v`.
    pub fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.below(v.len() as u64) as usize]
    }
}

/// Runs `script` (one command per line; a line starting with `~` has an unordered reply,
/// `#` starts a comment) on both servers in RESP2 and RESP3 and asserts identical replies.
pub fn diff_script(name: &str, script: &str) {
    let t = tessera();
    let r = redis();
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
