//! Load for the benchmarks that redis-benchmark cannot make:
//! - [`writer`] (`make bench-reshard`): a writer that goes through a cluster client, as an
//!   application does, and counts failed and lost writes (redis-benchmark drops errors into
//!   a counter and cannot read back what it wrote);
//! - [`mix`] (`make bench-node`): a GET/SET mix with Zipf-distributed keys (redis-benchmark
//!   draws keys uniformly), with per-batch latencies.

pub mod mix;
pub mod writer;
