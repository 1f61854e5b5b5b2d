//! A GET/SET mix over a big keyspace with a Zipf-like popularity, as caches see it: a few
//! keys take most requests. redis-benchmark draws keys uniformly (`-r`), which spreads the
//! load over every key and so measures neither the hot keys' contention nor a realistic
//! cache hit pattern.
//!
//! `conns` connections, each sending `pipeline` commands and then reading as many replies,
//! for `seconds`. Keys are `key:<i>` for i in 0..keys; popularity rank r (1 = hottest) maps
//! to i = (r × a large odd constant) mod keys, so hot keys are scattered over hash slots.
//! Replies are checked for type only (a `-` error counts as an error, not a request served).

use std::fmt;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_distr::Distribution;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What the mix is told.
#[derive(Debug, Clone)]
pub struct Config {
    pub addr: String,
    pub conns: u32,
    pub keys: u64,
    /// Share of GETs (the rest are SETs), 0..=1.
    pub get_ratio: f64,
    /// Zipf exponent (0: uniform; about 1: a typical cache).
    pub zipf: f64,
    pub value_size: usize,
    pub pipeline: u32,
    pub seconds: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum MixError {
    #[error("bad configuration: {0}")]
    Config(String),
    #[error("connecting to {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("a connection failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("a reply could not be parsed: {0}")]
    Protocol(String),
    #[error("a load task ended abnormally: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// What the mix did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub requests: u64,
    pub errors: u64,
    pub elapsed: Duration,
    /// Latency of every batch (a pipeline's round trip), sorted.
    pub latencies: Vec<Duration>,
}

impl Report {
    pub fn rps(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Batch latency below which a fraction `q` of batches finished.
    pub fn quantile(&self, q: f64) -> Duration {
        crate::quantile(&self.latencies, q)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        write!(
            f,
            "mix: requests={} errors={} rps={:.0} latency_ms p50={:.3} p99={:.3} p999={:.3} max={:.3}",
            self.requests,
            self.errors,
            self.rps(),
            ms(self.quantile(0.5)),
            ms(self.quantile(0.99)),
            ms(self.quantile(0.999)),
            ms(self.quantile(1.0)),
        )
    }
}

/// Maps a popularity rank (1-based) to a key index, scattering neighbours.
fn key_index(rank: u64, keys: u64) -> u64 {
    // An odd multiplier is a bijection modulo any power of two, and close enough to one
    // modulo other sizes for a benchmark (a few indexes repeat, none is hot by accident).
    rank.wrapping_mul(0x9E37_79B9_7F4A_7C15) % keys
}

/// Appends one RESP command.
pub(crate) fn push_cmd(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Length of the first complete reply in `buf` and whether it is an error; None until it
/// is complete. Only simple, error, integer and bulk replies are accepted: what GET, SET
/// and the other one-reply commands of the mix and of [`crate::pipe`] answer with.
pub(crate) fn reply_len(buf: &[u8]) -> Result<Option<(usize, bool)>, MixError> {
    let Some(first) = buf.first() else {
        return Ok(None);
    };
    let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    match first {
        b'+' | b':' => Ok(Some((eol + 2, false))),
        b'-' => Ok(Some((eol + 2, true))),
        b'$' => {
            let n: i64 = std::str::from_utf8(&buf[1..eol])
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| MixError::Protocol(String::from_utf8_lossy(&buf[..eol]).into()))?;
            if n < 0 {
                return Ok(Some((eol + 2, false)));
            }
            let total = eol + 2 + n as usize + 2;
            Ok((buf.len() >= total).then_some((total, false)))
        }
        _ => Err(MixError::Protocol(
            String::from_utf8_lossy(&buf[..eol.min(64)]).into(),
        )),
    }
}

/// Reads `n` replies; returns how many were not errors, and the error replies' text.
async fn read_replies(
    sock: &mut TcpStream,
    inbuf: &mut Vec<u8>,
    chunk: &mut [u8],
    mut n: u32,
) -> Result<(u64, Vec<String>), MixError> {
    let (mut ok, mut bad) = (0u64, Vec::new());
    while n > 0 {
        if let Some((len, err)) = reply_len(inbuf)? {
            if err {
                bad.push(
                    String::from_utf8_lossy(&inbuf[..len])
                        .trim_end()
                        .to_string(),
                );
            } else {
                ok += 1;
            }
            inbuf.drain(..len);
            n -= 1;
            continue;
        }
        let r = sock.read(chunk).await?;
        if r == 0 {
            return Err(MixError::Protocol(
                "the server closed the connection".into(),
            ));
        }
        inbuf.extend_from_slice(&chunk[..r]);
    }
    Ok((ok, bad))
}

/// One connection's loop until `deadline`.
async fn conn_loop(
    cfg: Config,
    seed: u64,
    deadline: Instant,
) -> Result<(u64, u64, Vec<Duration>), MixError> {
    let mut sock = TcpStream::connect(&cfg.addr)
        .await
        .map_err(|e| MixError::Connect(cfg.addr.clone(), e))?;
    sock.set_nodelay(true)?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let zipf = if cfg.zipf > 0.0 {
        Some(
            rand_distr::Zipf::new(cfg.keys as f64, cfg.zipf)
                .map_err(|e| MixError::Config(e.to_string()))?,
        )
    } else {
        None
    };
    let value = vec![b'x'; cfg.value_size];
    let (mut served, mut errors) = (0u64, 0u64);
    let mut lat = Vec::new();
    let mut out = Vec::with_capacity(4096);
    let mut inbuf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    while Instant::now() < deadline {
        out.clear();
        for _ in 0..cfg.pipeline {
            let idx = match &zipf {
                Some(z) => key_index(z.sample(&mut rng) as u64, cfg.keys),
                None => rng.random_range(0..cfg.keys),
            };
            let key = format!("key:{idx}");
            if rng.random::<f64>() < cfg.get_ratio {
                push_cmd(&mut out, &[b"GET", key.as_bytes()]);
            } else {
                push_cmd(&mut out, &[b"SET", key.as_bytes(), &value]);
            }
        }
        let t0 = Instant::now();
        sock.write_all(&out).await?;
        let (ok, bad) = read_replies(&mut sock, &mut inbuf, &mut chunk, cfg.pipeline).await?;
        served += ok;
        errors += bad.len() as u64;
        lat.push(t0.elapsed());
    }
    Ok((served, errors, lat))
}

/// Runs the mix and reports.
pub async fn run(cfg: Config) -> Result<Report, MixError> {
    if cfg.conns == 0 || cfg.pipeline == 0 || cfg.keys == 0 {
        return Err(MixError::Config(
            "conns, pipeline and keys must be above 0".into(),
        ));
    }
    if !(0.0..=1.0).contains(&cfg.get_ratio) {
        return Err(MixError::Config("get-ratio must be within 0..=1".into()));
    }
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(cfg.seconds);
    let mut tasks = Vec::new();
    let mut seeder = rand::rngs::SmallRng::seed_from_u64(0x7e55e7a);
    for _ in 0..cfg.conns {
        let seed = seeder.random();
        tasks.push(tokio::spawn(conn_loop(cfg.clone(), seed, deadline)));
    }
    let mut report = Report::default();
    for t in tasks {
        let (served, errors, lat) = t.await??;
        report.requests += served;
        report.errors += errors;
        report.latencies.extend(lat);
    }
    report.elapsed = start.elapsed();
    report.latencies.sort_unstable();
    Ok(report)
}

/// Loads every key (`SET key:<i> <value>`) with deep pipelines over a few connections.
pub async fn preload(addr: &str, keys: u64, value_size: usize) -> Result<(), MixError> {
    const CONNS: u64 = 4;
    const BATCH: u32 = 1000;
    let value = vec![b'x'; value_size];
    let mut tasks = Vec::new();
    for c in 0..CONNS {
        let addr = addr.to_string();
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            let mut sock = TcpStream::connect(&addr)
                .await
                .map_err(|e| MixError::Connect(addr.clone(), e))?;
            let mut out = Vec::new();
            let mut inbuf = Vec::new();
            let mut chunk = vec![0u8; 64 * 1024];
            let mut i = c;
            while i < keys {
                out.clear();
                let mut n = 0;
                while n < BATCH && i < keys {
                    push_cmd(&mut out, &[b"SET", format!("key:{i}").as_bytes(), &value]);
                    i += CONNS;
                    n += 1;
                }
                sock.write_all(&out).await?;
                let (_, bad) = read_replies(&mut sock, &mut inbuf, &mut chunk, n).await?;
                if let Some(e) = bad.into_iter().next() {
                    return Err(MixError::Protocol(e));
                }
            }
            Ok::<_, MixError>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_framed() {
        assert_eq!(reply_len(b"+OK\r\n").unwrap(), Some((5, false)));
        assert_eq!(reply_len(b"-ERR x\r\n+OK").unwrap(), Some((8, true)));
        assert_eq!(reply_len(b"$-1\r\n").unwrap(), Some((5, false)));
        assert_eq!(reply_len(b"$3\r\nab").unwrap(), None);
        assert_eq!(reply_len(b"$3\r\nabc\r\n").unwrap(), Some((9, false)));
        assert_eq!(reply_len(b"$3").unwrap(), None);
        assert!(reply_len(b"*1\r\n").is_err());
    }

    #[test]
    fn hot_ranks_scatter() {
        let idx: Vec<u64> = (1..=5).map(|r| key_index(r, 1_000_000)).collect();
        assert!(
            idx.windows(2).all(|w| w[0].abs_diff(w[1]) > 1000),
            "{idx:?}"
        );
        assert!(idx.iter().all(|&i| i < 1_000_000));
    }
}
