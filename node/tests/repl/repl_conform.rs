//! Replication details of Redis's integration/replication-2 and -4, compared with
//! redis-server: min-replicas-* set at run time apply to the very next write, and a command
//! of the master's stream that fails on a (writable) replica is logged as Redis logs it.

use std::time::Duration;

use tessera_testkit::*;

use crate::{info_of, start};

pub(crate) fn replica_of(master: &Server, replica: &Server) -> (Conn, Conn) {
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

/// A master that writes every command to its AOF at once (appendfsync always), with a
/// replica attached and in sync: for tests that compare what replicas and the AOF get.
pub(crate) fn aof_master_with_replica(tessera: bool) -> (Server, Server, Conn, Conn) {
    let master = start(
        tessera,
        &[
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ],
    );
    let replica = start(tessera, &["--save", ""]);
    let (m, r) = replica_of(&master, &replica);
    (master, replica, m, r)
}

/// A stopped replica's lag passes min-replicas-max-lag 2: writes are refused; raising the
/// bound to 10 lets the very next write through.
fn min_replicas(tessera: bool) -> Vec<String> {
    let master = start(tessera, &["--save", ""]);
    let replica = start(tessera, &["--save", ""]);
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
    let master = start(tessera, &["--save", ""]);
    let replica = start(tessera, &["--save", ""]);
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

/// A master stopped with SHUTDOWN NOW (its final save records its replication history)
/// and started again on the same port: its replica continues with a partial resync, the
/// old history becoming the master's second one (Redis's psync2-master-restart).
fn master_restart(tessera: bool) -> Vec<String> {
    let args = [
        "--save",
        "3600 1",
        "--repl-ping-replica-period",
        "3600",
        "--repl-timeout",
        "3600",
    ];
    let mut master = if tessera {
        Server::tessera(&args)
    } else {
        Server::redis(&args)
    };
    let replica = start(tessera, &["--save", ""]);
    let (mut m, mut r) = replica_of(&master, &replica);
    for i in 0..100 {
        m.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    let off = |c: &mut Conn| info_of(c, "replication", "master_repl_offset");
    wait_until("offsets match", Duration::from_secs(20), || {
        let mo = off(&mut m);
        mo.is_some() && mo == off(&mut r)
    });
    let replid = info_of(&mut m, "replication", "master_replid");
    let at: u64 = off(&mut m).and_then(|v| v.parse().ok()).unwrap_or(0);
    r.cmd(&["CONFIG", "RESETSTAT"]);
    m.send(&["SHUTDOWN", "NOW"]);
    let exited = master.wait_exit(Duration::from_secs(20)).is_some();
    let port = master.port;
    master.restart_at(port);
    let mut m = master.resp();
    wait_until("link up again", Duration::from_secs(30), || {
        info_of(&mut r, "replication", "master_link_status").as_deref() == Some("up")
            && info_of(&mut m, "replication", "connected_slaves").as_deref() == Some("1")
    });
    vec![
        format!("exited: {exited}"),
        format!(
            "new replid: {}",
            info_of(&mut m, "replication", "master_replid") != replid
        ),
        format!(
            "replid2 is the old one: {}",
            info_of(&mut m, "replication", "master_replid2") == replid
        ),
        format!(
            "offset kept: {}",
            info_of(&mut m, "replication", "master_repl_offset") == Some(at.to_string())
        ),
        format!(
            "second offset: {}",
            info_of(&mut m, "replication", "second_repl_offset") == Some((at + 1).to_string())
        ),
        format!(
            "replica partial: {:?} full: {:?}",
            info_of(&mut r, "stats", "sync_partial_ok"),
            info_of(&mut r, "stats", "sync_full")
        ),
        format!(
            "master partial: {:?} full: {:?}",
            info_of(&mut m, "stats", "sync_partial_ok"),
            info_of(&mut m, "stats", "sync_full")
        ),
        format!("{:?}", m.cmd(&["DBSIZE"])),
    ]
}

#[test]
fn restarted_master_lets_its_replica_continue_like_redis() {
    let theirs = master_restart(false);
    let ours = master_restart(true);
    assert_eq!(ours, theirs);
}
