//! redis-benchmark's default commands (`-t set,get,...`, no `-r`), pipelined, from a client
//! that spends little CPU per request: each connection sends one prebuilt batch and counts
//! the replies by their framing, with no reply objects and no per-request latency record.
//!
//! On a small machine the client and the server share the cores. redis-benchmark's one
//! thread needs about 600 ns per request at -P 16, which is as much as a server needs, so at
//! -P 16 it measures itself as much as the server: with it the fastest server can be at most
//! as fast as the client. This client leaves the server the CPU it can use, so the servers'
//! own capacity is what differs between them.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::mix::{push_cmd, reply_len, MixError};

/// One of redis-benchmark's tests, with the arguments it sends (its 3-byte value; keys
/// keep the literal `__rand_int__`, as redis-benchmark sends them without `-r`). Named on
/// the command line as redis-benchmark's `-t` names them (set, get, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Test {
    Set,
    Get,
    Incr,
    Lpush,
    Lpop,
    Sadd,
    Hset,
    Zadd,
    Mset,
}

impl Test {
    /// The command's arguments.
    pub fn args(self) -> Vec<&'static [u8]> {
        const KEY: &[u8] = b"key:__rand_int__";
        const VAL: &[u8] = b"xxx";
        const ELEM: &[u8] = b"element:__rand_int__";
        match self {
            Test::Set => vec![b"SET", KEY, VAL],
            Test::Get => vec![b"GET", KEY],
            Test::Incr => vec![b"INCR", b"counter:__rand_int__"],
            Test::Lpush => vec![b"LPUSH", b"mylist", VAL],
            Test::Lpop => vec![b"LPOP", b"mylist"],
            Test::Sadd => vec![b"SADD", b"myset", ELEM],
            Test::Hset => vec![b"HSET", b"myhash", ELEM, VAL],
            Test::Zadd => vec![b"ZADD", b"myzset", b"0", ELEM],
            Test::Mset => {
                let mut a: Vec<&'static [u8]> = vec![b"MSET"];
                for _ in 0..10 {
                    a.extend([KEY, VAL]);
                }
                a
            }
        }
    }
}

/// What the run is told.
#[derive(Debug, Clone)]
pub struct Config {
    pub addr: String,
    pub test: Test,
    pub conns: u32,
    pub pipeline: u32,
    /// Requests in all, shared by the connections.
    pub requests: u64,
}

/// What the run did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub requests: u64,
    pub errors: u64,
    pub elapsed: Duration,
}

impl Report {
    pub fn rps(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pipe: requests={} errors={} rps={:.0}",
            self.requests,
            self.errors,
            self.rps()
        )
    }
}

/// Counts `n` replies from `sock`; returns how many were errors. Replies are framed in
/// place and the buffer is compacted once per read, not once per reply.
async fn count_replies(sock: &mut TcpStream, inbuf: &mut Vec<u8>, n: u64) -> Result<u64, MixError> {
    let (mut got, mut errors, mut pos) = (0u64, 0u64, 0usize);
    loop {
        while got < n {
            match reply_len(&inbuf[pos..])? {
                Some((len, err)) => {
                    pos += len;
                    got += 1;
                    errors += u64::from(err);
                }
                None => break,
            }
        }
        inbuf.drain(..pos);
        if got == n {
            return Ok(errors);
        }
        pos = 0;
        if inbuf.capacity() - inbuf.len() < 16 * 1024 {
            inbuf.reserve(16 * 1024);
        }
        if sock.read_buf(inbuf).await? == 0 {
            return Err(MixError::Protocol(
                "the server closed the connection".into(),
            ));
        }
    }
}

/// One connection: takes batches of up to `pipeline` requests from `left` until none are
/// left; returns (requests answered, error replies).
async fn conn_loop(
    mut sock: TcpStream,
    cfg: Config,
    left: Arc<AtomicU64>,
) -> Result<(u64, u64), MixError> {
    let mut one = Vec::new();
    push_cmd(&mut one, &cfg.test.args());
    let batch: Vec<u8> = one.repeat(cfg.pipeline as usize);
    let mut inbuf = Vec::with_capacity(64 * 1024);
    let (mut done, mut errors) = (0u64, 0u64);
    let p = u64::from(cfg.pipeline);
    // Claims the next batch: up to `p` of the requests left.
    while let Ok(left_before) = left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
        (l > 0).then(|| l - l.min(p))
    }) {
        let n = left_before.min(p);
        sock.write_all(&batch[..one.len() * n as usize]).await?;
        errors += count_replies(&mut sock, &mut inbuf, n).await?;
        done += n;
    }
    Ok((done, errors))
}

/// Runs the test and reports. Connections are opened before the clock starts.
pub async fn run(cfg: Config) -> Result<Report, MixError> {
    if cfg.conns == 0 || cfg.pipeline == 0 || cfg.requests == 0 {
        return Err(MixError::Config(
            "conns, pipeline and requests must be above 0".into(),
        ));
    }
    let mut socks = Vec::new();
    for _ in 0..cfg.conns {
        let sock = TcpStream::connect(&cfg.addr)
            .await
            .map_err(|e| MixError::Connect(cfg.addr.clone(), e))?;
        sock.set_nodelay(true)?;
        socks.push(sock);
    }
    let left = Arc::new(AtomicU64::new(cfg.requests));
    let start = Instant::now();
    let tasks: Vec<_> = socks
        .into_iter()
        .map(|sock| tokio::spawn(conn_loop(sock, cfg.clone(), left.clone())))
        .collect();
    let mut report = Report::default();
    for t in tasks {
        let (done, errors) = t.await??;
        report.requests += done;
        report.errors += errors;
    }
    report.elapsed = start.elapsed();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_send_what_redis_benchmark_sends() {
        let mut out = Vec::new();
        push_cmd(&mut out, &Test::Zadd.args());
        assert_eq!(
            out,
            b"*4\r\n$4\r\nZADD\r\n$6\r\nmyzset\r\n$1\r\n0\r\n$20\r\nelement:__rand_int__\r\n"
        );
        assert_eq!(Test::Mset.args().len(), 21);
        use clap::ValueEnum;
        assert_eq!(Test::from_str("LPUSH", true), Ok(Test::Lpush));
        assert!(Test::from_str("lrange", true).is_err());
    }

    /// Replies split anywhere across reads are counted once each; error replies are
    /// counted as errors; a reply of the next batch stays in the buffer.
    #[tokio::test]
    async fn replies_split_across_reads_are_counted() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            for part in [&b"$3\r\nab"[..], b"c\r\n-ERR x", b"\r\n:1\r", b"\n+OK\r\n"] {
                s.write_all(part).await.unwrap();
                s.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        let mut sock = TcpStream::connect(addr).await.unwrap();
        let mut inbuf = Vec::new();
        assert_eq!(count_replies(&mut sock, &mut inbuf, 3).await.unwrap(), 1);
        server.await.unwrap();
        assert_eq!(count_replies(&mut sock, &mut inbuf, 1).await.unwrap(), 0);
        assert!(inbuf.is_empty());
        assert!(count_replies(&mut sock, &mut inbuf, 1).await.is_err());
    }
}
