//! Replication: tessera-node as master and replica of itself, redis-server and
//! valkey-server; full and partial resyncs, failover, repointing, replicas in a cluster.

mod repl_basic;
mod repl_bench;
mod repl_cluster;
mod repl_conform;
mod repl_failover;
mod repl_failover_cmd;
mod repl_interop;
mod repl_lifecycle;
mod repl_repoint;
mod repl_shutdown;

use tessera_testkit::{info_field, Conn, Reply, Server};

/// A server of either program with `args` (the conformance tests run both the same way).
fn start(tessera: bool, args: &[&str]) -> Server {
    if tessera {
        Server::tessera(args)
    } else {
        Server::redis(args)
    }
}

/// One INFO field over an open connection.
fn info_of(c: &mut Conn, section: &str, field: &str) -> Option<String> {
    match c.cmd(&["INFO", section]) {
        Reply::Bulk(b) => info_field(&String::from_utf8_lossy(&b), field),
        _ => None,
    }
}
