//! Replication: tessera-node as master and replica of itself, redis-server and
//! valkey-server; full and partial resyncs, failover, repointing, replicas in a cluster.

mod repl_async_loading_deny;
mod repl_basic;
mod repl_bench;
mod repl_big_command;
mod repl_buffer_share;
mod repl_cached_master;
mod repl_cluster;
mod repl_conform;
mod repl_debug_sleep;
mod repl_expired_debug;
mod repl_failover;
mod repl_failover_cmd;
mod repl_flush;
mod repl_getset;
mod repl_handshake;
mod repl_interop;
mod repl_lifecycle;
mod repl_noreplicas;
mod repl_psync_offset;
mod repl_publish;
mod repl_replica_reply;
mod repl_repoint;
mod repl_resetstat;
mod repl_restart_expired;
mod repl_rewrite;
mod repl_role_unblock;
mod repl_shared_buffer;
mod repl_shutdown;
mod repl_swapdb;
mod repl_swapdb_loading;
mod repl_sync_delay;

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

/// Lines of a server's AOF increment files equal to `word` (any case): what it fed the AOF.
fn aof_lines(srv: &Server, word: &str) -> usize {
    let dir = srv.dir.join("appendonlydir");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.expect("dir entry").path();
        if p.to_string_lossy().ends_with(".incr.aof") {
            let text = std::fs::read(&p).unwrap_or_default();
            n += String::from_utf8_lossy(&text)
                .lines()
                .filter(|l| l.eq_ignore_ascii_case(word))
                .count();
        }
    }
    n
}
