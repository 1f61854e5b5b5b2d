//! Integration tests: the real tessera-node binary driven over loopback with raw RESP bytes,
//! the `redis` crate, redis-cli and redis-benchmark.

#[path = "../common/mod.rs"]
mod common;

mod blocking;
mod config;
mod keys;
mod protocol;
mod pubsub;
mod server;
mod strings;
mod tools;
mod transactions;
