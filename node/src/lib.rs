//! tessera-node: a Redis 7.0-compatible server and cluster node.
//!
//! Layout: [`resp`] (protocol), [`db`] (the striped, per-slot keyspace), [`cmd`] (command
//! table and one file per command family), [`blocking`] (clients blocked on keys),
//! [`pubsub`], [`config`] (redis.conf), [`server`] (listener, connections, expiry,
//! eviction), [`types`] (collection values).

pub mod alloc;
pub mod blocking;
pub mod cluster;
pub mod cmd;
pub mod config;
pub mod counter;
pub mod db;
pub mod latency;
pub mod notify;
pub mod persist;
pub mod pubsub;
pub mod repl;
pub mod resp;
pub mod script;
pub mod server;
pub mod slot;
pub mod tracking;
pub mod types;

/// The Redis version tessera-node reports (HELLO, INFO): clients gate features on it.
pub const REDIS_VERSION: &str = "7.0.15";

use std::sync::Arc;

/// Starts a server from a parsed config on the current tokio runtime; returns when it stops.
pub async fn run(config: config::Config) -> Result<(), server::ServerError> {
    cmd::set_renames(&config.renames);
    let srv = server::Server::new(config);
    server::run(srv).await
}

/// Builds the shared server state (used by tests that drive commands in-process).
pub fn new_server(config: config::Config) -> Arc<server::Server> {
    server::Server::new(config)
}
