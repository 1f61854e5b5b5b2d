//! Load for the benchmarks that redis-benchmark cannot make:
//! - [`writer`] (`make bench-reshard`): a writer that goes through a cluster client, as an
//!   application does, and counts failed and lost writes (redis-benchmark drops errors into
//!   a counter and cannot read back what it wrote);
//! - [`mix`] (`make bench-node`): a GET/SET mix with Zipf-distributed keys (redis-benchmark
//!   draws keys uniformly), with per-batch latencies;
//! - [`pipe`] (`make bench-node`): redis-benchmark's default commands pipelined from a client
//!   that needs a fraction of redis-benchmark's CPU per request.

pub mod mix;
pub mod pipe;
pub mod writer;

use std::time::Duration;

/// The value below which a fraction `q` (0..=1) of the `sorted` latencies fall; zero for
/// none.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
    sorted[i]
}
