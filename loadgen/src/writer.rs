//! A steady cluster writer: `tasks` loops that SET `<prefix>:<task>:<n>` = n at `rate` writes
//! per second in all, through one cluster connection, until told to stop. Then every
//! acknowledged write is read back.
//!
//! A write is *failed* when the client gives up on it (an error reply after its retries, or
//! no reply within the response timeout): the value may or may not have landed. A write is
//! *lost* when it was acknowledged and does not read back.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use redis::cluster::ClusterClient;
use redis::AsyncCommands;

/// How many failure messages are printed (to stderr) before the rest are only counted.
const SHOWN_FAILURES: usize = 5;
/// GETs in flight during the read-back.
const READBACK_CONCURRENCY: usize = 64;

/// What the writer is told.
#[derive(Debug, Clone)]
pub struct Config {
    pub nodes: Vec<String>,
    pub rate: u32,
    pub tasks: u32,
    pub prefix: String,
    pub retries: u32,
    pub password: Option<String>,
}

/// The writer's errors: only the ones that stop it before it starts or during the read-back;
/// a write that fails is counted, not returned.
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    #[error("bad configuration: {0}")]
    Config(String),
    #[error("connecting to the cluster: {0}")]
    Connect(redis::RedisError),
    #[error("reading back: {0}")]
    Readback(redis::RedisError),
    #[error("a writer task ended abnormally: {0}")]
    Task(tokio::task::JoinError),
}

/// What the writer did, with the latency of every write (acknowledged or failed).
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub acked: usize,
    pub failed: usize,
    pub lost: usize,
    /// Write latencies, sorted.
    pub latencies: Vec<Duration>,
}

impl Tally {
    /// The latency below which a fraction `q` (0..=1) of the writes finished.
    pub fn quantile(&self, q: f64) -> Duration {
        crate::quantile(&self.latencies, q)
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        write!(
            f,
            "writer: acked={} failed={} lost={} latency_ms p50={:.2} p99={:.2} max={:.2}",
            self.acked,
            self.failed,
            self.lost,
            ms(self.quantile(0.5)),
            ms(self.quantile(0.99)),
            ms(self.quantile(1.0)),
        )
    }
}

/// What one task did: the indexes it got acknowledged, its failures and latencies.
struct TaskResult {
    task: u32,
    acked: Vec<u64>,
    failed: usize,
    latencies: Vec<Duration>,
}

/// Runs the writer until `stop` resolves, then reads back and returns the tally.
pub async fn run(cfg: Config, stop: impl Future<Output = ()>) -> Result<Tally, WriterError> {
    if cfg.rate == 0 || cfg.tasks == 0 {
        return Err(WriterError::Config("rate and tasks must be above 0".into()));
    }
    let urls: Vec<String> = cfg.nodes.iter().map(|n| format!("redis://{n}")).collect();
    let mut builder = ClusterClient::builder(urls)
        .retries(cfg.retries)
        .connection_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(5));
    if let Some(p) = &cfg.password {
        builder = builder.password(p.clone());
    }
    let client = builder.build().map_err(WriterError::Connect)?;
    let conn = client
        .get_async_connection()
        .await
        .map_err(WriterError::Connect)?;

    let halt = Arc::new(AtomicBool::new(false));
    let period = Duration::from_secs_f64(f64::from(cfg.tasks) / f64::from(cfg.rate));
    let mut handles = Vec::new();
    for task in 0..cfg.tasks {
        let mut c = conn.clone();
        let halt = halt.clone();
        let prefix = cfg.prefix.clone();
        handles.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut out = TaskResult {
                task,
                acked: Vec::new(),
                failed: 0,
                latencies: Vec::new(),
            };
            let mut i: u64 = 0;
            while !halt.load(Ordering::Relaxed) {
                tick.tick().await;
                let t0 = Instant::now();
                let r: redis::RedisResult<()> = c.set(format!("{prefix}:{task}:{i}"), i).await;
                out.latencies.push(t0.elapsed());
                match r {
                    Ok(()) => out.acked.push(i),
                    Err(e) => {
                        if out.failed < SHOWN_FAILURES {
                            eprintln!("writer: SET {prefix}:{task}:{i} failed: {e}");
                        }
                        out.failed += 1;
                    }
                }
                i += 1;
            }
            out
        }));
    }
    stop.await;
    halt.store(true, Ordering::Relaxed);

    let mut tally = Tally::default();
    let mut acked = Vec::new();
    for h in handles {
        // A task only ends by seeing the flag; a join error is a panic in our own code.
        let r = h.await.map_err(WriterError::Task)?;
        tally.failed += r.failed;
        tally.latencies.extend(r.latencies);
        acked.extend(r.acked.into_iter().map(|i| (r.task, i)));
    }
    tally.latencies.sort_unstable();
    tally.acked = acked.len();

    let prefix = cfg.prefix.as_str();
    let checks = stream::iter(acked)
        .map(|(task, i)| {
            let mut c = conn.clone();
            async move {
                let key = format!("{prefix}:{task}:{i}");
                let v: Option<u64> = c.get(&key).await?;
                Ok::<_, redis::RedisError>((key, i, v))
            }
        })
        .buffer_unordered(READBACK_CONCURRENCY);
    futures::pin_mut!(checks);
    while let Some(r) = checks.next().await {
        let (key, want, got) = r.map_err(WriterError::Readback)?;
        if got != Some(want) {
            if tally.lost < SHOWN_FAILURES {
                eprintln!("writer: {key} acknowledged as {want}, reads back {got:?}");
            }
            tally.lost += 1;
        }
    }
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_a_sorted_sample() {
        let t = Tally {
            latencies: (1..=100).map(Duration::from_millis).collect(),
            ..Tally::default()
        };
        assert_eq!(t.quantile(0.0), Duration::from_millis(1));
        assert_eq!(t.quantile(0.5), Duration::from_millis(51));
        assert_eq!(t.quantile(1.0), Duration::from_millis(100));
        assert_eq!(Tally::default().quantile(0.99), Duration::ZERO);
    }
}
