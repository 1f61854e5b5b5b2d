//! SHUTDOWN with replicas and a failing final save, compared with redis-server 7.0
//! (Redis's integration/shutdown and unit/shutdown): the caller blocks while the master
//! waits for a lagging replica (INFO blocked_clients, shutdown_in_milliseconds), SHUTDOWN
//! ABORT gives the shutdown up and every blocked SHUTDOWN answers an error, a save that
//! fails keeps the server running; the replication buffers show in INFO memory.

use std::time::Duration;

use tessera_testkit::*;

use crate::{info_of, start};

/// Master and replica of the same program; the replica is stopped (SIGSTOP) while two
/// clients block on SHUTDOWN, then SHUTDOWN ABORT. Returns what the clients saw.
fn abort_while_waiting(tessera: bool) -> Vec<String> {
    let master = start(tessera, &["--save", ""]);
    let replica = start(tessera, &["--save", ""]);
    let mut m = master.resp();
    let mut r = replica.resp();
    let mut seen = Vec::new();
    r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_until("link up", Duration::from_secs(20), || {
        info_of(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    m.cmd(&["SET", "k", "1"]);
    wait_until("k replicated", Duration::from_secs(20), || {
        r.cmd(&["GET", "k"]) == Reply::Bulk(b"1".to_vec())
    });
    // The replication buffer figures of INFO memory.
    for f in [
        "mem_replication_backlog",
        "mem_total_replication_buffers",
        "mem_clients_slaves",
    ] {
        seen.push(format!(
            "{f} present: {}",
            info_of(&mut m, "memory", f).is_some()
        ));
    }
    replica.signal("STOP");
    seen.push(format!("{:?}", m.cmd(&["INCR", "k"])));
    let mut a = master.resp();
    let mut b = master.resp();
    a.send(&["SHUTDOWN"]);
    b.send(&["SHUTDOWN"]);
    wait_until("two blocked SHUTDOWNs", Duration::from_secs(10), || {
        info_of(&mut m, "clients", "blocked_clients").as_deref() == Some("2")
    });
    seen.push(format!(
        "connected_clients: {:?}",
        info_of(&mut m, "clients", "connected_clients")
    ));
    let left =
        info_of(&mut m, "server", "shutdown_in_milliseconds").and_then(|v| v.parse::<u64>().ok());
    seen.push(format!("waiting: {}", left.is_some_and(|ms| ms > 0)));
    seen.push(format!("{:?}", m.cmd(&["SHUTDOWN", "ABORT"])));
    seen.push(format!("{:?}", a.read()));
    seen.push(format!("{:?}", b.read()));
    replica.signal("CONT");
    // Still serving, writes resumed, nothing left to abort.
    seen.push(format!("{:?}", m.cmd(&["SET", "x", "1"])));
    seen.push(format!(
        "blocked after: {:?}",
        info_of(&mut m, "clients", "blocked_clients")
    ));
    seen.push(format!(
        "shutdown_in_milliseconds after: {:?}",
        info_of(&mut m, "server", "shutdown_in_milliseconds")
    ));
    seen.push(format!("{:?}", m.cmd(&["SHUTDOWN", "ABORT"])));
    seen.push(format!("{:?}", m.cmd(&["SHUTDOWN", "ABORT", "NOSAVE"])));
    seen.push(format!("{:?}", m.cmd(&["SHUTDOWN", "SAVE", "NOSAVE"])));
    seen
}

#[test]
fn shutdown_abort_while_waiting_for_a_replica_like_redis() {
    let theirs = abort_while_waiting(false);
    let ours = abort_while_waiting(true);
    assert_eq!(ours, theirs);
}

/// A final save that cannot be written (dump.rdb is a directory): SHUTDOWN answers the
/// error and the server goes on; SHUTDOWN NOSAVE then exits.
fn failed_save(tessera: bool) -> Vec<String> {
    let mut srv = start(tessera, &["--save", "900 1"]);
    let mut c = srv.resp();
    let mut seen = vec![format!("{:?}", c.cmd(&["SET", "k", "v"]))];
    std::fs::create_dir_all(srv.dir.join("dump.rdb")).expect("dump.rdb dir");
    seen.push(format!("{:?}", c.cmd(&["SHUTDOWN"])));
    seen.push(format!("{:?}", c.cmd(&["PING"])));
    seen.push(format!("{:?}", c.cmd(&["SHUTDOWN", "NOSAVE"])));
    seen.push(format!(
        "exited: {}",
        srv.wait_exit(Duration::from_secs(10)).is_some()
    ));
    seen
}

#[test]
fn failed_final_save_keeps_the_server_like_redis() {
    let theirs = failed_save(false);
    let ours = failed_save(true);
    assert_eq!(ours, theirs);
}

/// The AOF just turned on and its first rewrite still running (slowed by
/// rdb-key-save-delay): SHUTDOWN refuses to exit ("Writing initial AOF, can't exit."),
/// SHUTDOWN NOSAVE FORCE exits anyway.
fn initial_aof(tessera: bool) -> Vec<String> {
    let mut srv = start(tessera, &["--save", ""]);
    let mut c = srv.resp();
    let mut seen = Vec::new();
    for i in 0..5 {
        seen.push(format!("{:?}", c.cmd(&["SET", &format!("k{i}"), "v"])));
    }
    seen.push(format!(
        "{:?}",
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"])
    ));
    seen.push(format!(
        "{:?}",
        c.cmd(&["CONFIG", "SET", "appendonly", "yes"])
    ));
    seen.push(format!("{:?}", c.cmd(&["SHUTDOWN"])));
    seen.push(format!("{:?}", c.cmd(&["PING"])));
    c.send(&["SHUTDOWN", "NOSAVE", "FORCE"]);
    seen.push(format!(
        "exited: {}",
        srv.wait_exit(Duration::from_secs(10)).is_some()
    ));
    seen
}

#[test]
fn initial_aof_rewrite_stops_shutdown_like_redis() {
    let theirs = initial_aof(false);
    let ours = initial_aof(true);
    assert_eq!(ours, theirs);
}

/// A SIGTERM while DEBUG PAUSE-CRON holds the cron (where Redis runs a signal's shutdown)
/// waits; SHUTDOWN ABORT cancels it and the server goes on.
fn abort_paused_sigterm(tessera: bool) -> Vec<String> {
    let srv = start(tessera, &["--save", "", "--enable-debug-command", "yes"]);
    let mut c = srv.resp();
    let mut seen = vec![format!("{:?}", c.cmd(&["DEBUG", "PAUSE-CRON", "1"]))];
    srv.signal("TERM");
    std::thread::sleep(Duration::from_millis(200));
    seen.push(format!("{:?}", c.cmd(&["SHUTDOWN", "ABORT"])));
    seen.push(format!("{:?}", c.cmd(&["DEBUG", "PAUSE-CRON", "0"])));
    std::thread::sleep(Duration::from_millis(300));
    seen.push(format!("{:?}", c.cmd(&["PING"])));
    seen.push(format!("{:?}", c.cmd(&["SHUTDOWN", "ABORT"])));
    let log = std::fs::read_to_string(srv.output_path()).unwrap_or_default();
    seen.push(format!(
        "aborted in the log: {}",
        log.contains("Shutdown manually aborted")
    ));
    seen
}

#[test]
fn shutdown_abort_cancels_a_sigterm_while_the_cron_is_paused_like_redis() {
    let theirs = abort_paused_sigterm(false);
    let ours = abort_paused_sigterm(true);
    assert_eq!(ours, theirs);
}
