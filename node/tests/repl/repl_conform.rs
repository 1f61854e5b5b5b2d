//! Replication details of Redis's integration/replication-2 and -4, compared with
//! redis-server: min-replicas-* set at run time apply to the very next write, and a command
//! of the master's stream that fails on a (writable) replica is logged as Redis logs it.

use std::time::Duration;

use tessera_testkit::*;

fn start(tessera: bool) -> Server {
    if tessera {
        Server::tessera(&["--save", ""])
    } else {
        Server::redis(&["--save", ""])
    }
}

fn info_of(c: &mut Conn, section: &str, field: &str) -> Option<String> {
    match c.cmd(&["INFO", section]) {
        Reply::Bulk(b) => info_field(&String::from_utf8_lossy(&b), field),
        _ => None,
    }
}

fn replica_of(master: &Server, replica: &Server) -> (Conn, Conn) {
    let mut m = master.resp();
    let mut r = replica.resp();
    r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_until("link up", Duration::from_secs(20), || {
        info_of(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    wait_until("replica online", Duration::from_secs(20), || {
        info_of(&mut m, "replication", "slave0").is_some_and(|s| s.contains("state=online"))
    });
    (m, r)
}

/// A stopped replica's lag passes min-replicas-max-lag 2: writes are refused; raising the
/// bound to 10 lets the very next write through.
fn min_replicas(tessera: bool) -> Vec<String> {
    let master = start(tessera);
    let replica = start(tessera);
    let (mut m, _r) = replica_of(&master, &replica);
    let mut seen = Vec::new();
    seen.push(format!(
        "{:?}",
        m.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"])
    ));
    seen.push(format!(
        "{:?}",
        m.cmd(&["CONFIG", "SET", "min-replicas-max-lag", "2"])
    ));
    seen.push(format!("{:?}", m.cmd(&["SET", "foo", "1"])));
    replica.signal("STOP");
    wait_until("writes refused", Duration::from_secs(20), || {
        matches!(m.cmd(&["SET", "foo", "2"]), Reply::Error(_))
    });
    seen.push(format!("{:?}", m.cmd(&["SET", "foo", "3"])));
    seen.push(format!(
        "{:?}",
        m.cmd(&["CONFIG", "SET", "min-replicas-max-lag", "10"])
    ));
    seen.push(format!("{:?}", m.cmd(&["SET", "foo", "4"])));
    replica.signal("CONT");
    seen
}

#[test]
fn min_replicas_config_applies_to_the_next_write_like_redis() {
    let theirs = min_replicas(false);
    let ours = min_replicas(true);
    assert_eq!(ours, theirs);
}

/// A writable replica holds its own value of a key the master then INCRBYs: the replica
/// keeps its value and logs the failed command of the stream once.
fn divergence(tessera: bool) -> Vec<String> {
    let master = start(tessera);
    let replica = start(tessera);
    let (mut m, mut r) = replica_of(&master, &replica);
    let mut seen = Vec::new();
    seen.push(format!(
        "{:?}",
        r.cmd(&["CONFIG", "SET", "replica-read-only", "no"])
    ));
    seen.push(format!("{:?}", r.cmd(&["SET", "number2", "foo"])));
    seen.push(format!("{:?}", m.cmd(&["INCRBY", "number2", "1"])));
    seen.push(format!("{:?}", m.cmd(&["WAIT", "1", "2000"])));
    seen.push(format!("{:?}", r.cmd(&["GET", "number2"])));
    let log = std::fs::read_to_string(replica.output_path()).unwrap_or_default();
    let lines = |pat: &str| log.lines().filter(|l| l.contains(pat)).count();
    seen.push(format!(
        "log lines: incrby {} critical {}",
        lines("incrby"),
        lines("== CRITICAL ==")
    ));
    seen
}

#[test]
fn stream_errors_on_a_writable_replica_are_logged_like_redis() {
    let theirs = divergence(false);
    let ours = divergence(true);
    assert_eq!(ours, theirs);
}
