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
