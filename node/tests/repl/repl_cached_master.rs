//! A replica told to follow another master keeps its own replicas and its history until a
//! full sync's payload is in (integration/replication "Don't disconnect with replicas
//! before loading transferred RDB when full sync", "Discard cache master before loading
//! transferred RDB when full sync"): a sync from a master that dies mid-payload changes
//! nothing, and going back to the first master continues partially, the sub-replica never
//! reconnecting. The middle node is compared (tessera-node vs redis-server); the others
//! are redis-server.

use std::time::Duration;

use tessera_testkit::*;

use crate::{info_of, start};

fn num(c: &mut Conn, section: &str, field: &str) -> i64 {
    info_of(c, section, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

fn text(c: &mut Conn, section: &str, field: &str) -> String {
    info_of(c, section, field).unwrap_or_default()
}

fn synced(c: &mut Conn) -> bool {
    text(c, "replication", "master_link_status") == "up"
        && num(c, "replication", "master_sync_in_progress") == 0
}

fn chain(tessera: bool) -> Vec<String> {
    let master1 = Server::redis(&["--save", ""]);
    // shutdown-timeout 0: its SHUTDOWN must not wait for the replica (it waits while a
    // replica's ACK is behind, and its cron's PING every 10 s puts the offset ahead or not
    // by the clock), so the payload is cut short every time.
    let master2 = Server::redis(&[
        "--save",
        "",
        "--enable-debug-command",
        "yes",
        "--shutdown-timeout",
        "0",
    ]);
    let sub = Server::redis(&["--save", ""]);
    let mid = start(tessera, &["--save", ""]);
    let (mut m1, mut m2, mut s, mut r) = (master1.resp(), master2.resp(), sub.resp(), mid.resp());
    m1.cmd(&["SET", "a", "b"]);
    m2.cmd(&["DEBUG", "POPULATE", "10", "master2", "10"]);
    // A second per key: master2's payload never completes.
    m2.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]);
    r.cmd(&["REPLICAOF", "127.0.0.1", &master1.port.to_string()]);
    wait_until("mid synced", Duration::from_secs(20), || synced(&mut r));
    s.cmd(&["REPLICAOF", "127.0.0.1", &mid.port.to_string()]);
    wait_until("sub synced", Duration::from_secs(20), || synced(&mut s));
    r.cmd(&["REPLICAOF", "127.0.0.1", &master2.port.to_string()]);
    wait_until("master2 syncing mid", Duration::from_secs(20), || {
        num(&mut m2, "persistence", "rdb_bgsave_in_progress") == 1
            && text(&mut m2, "replication", "slave0").contains("wait_bgsave")
    });
    let _ = m2.cmd(&["SHUTDOWN", "NOSAVE"]);
    drop(master2);
    let replid = |c: &mut Conn| text(c, "replication", "master_replid");
    let mut out = vec![format!(
        "replid kept along the chain: {}",
        replid(&mut r) == replid(&mut m1) && replid(&mut s) == replid(&mut m1)
    )];
    let (full, partial) = (
        num(&mut m1, "stats", "sync_full"),
        num(&mut m1, "stats", "sync_partial_ok"),
    );
    r.cmd(&["REPLICAOF", "127.0.0.1", &master1.port.to_string()]);
    wait_until("mid back with master1", Duration::from_secs(20), || {
        synced(&mut r)
    });
    m1.cmd(&["SET", "c", "d"]);
    wait_until("sub has the new write", Duration::from_secs(20), || {
        R::from(s.cmd(&["GET", "c"])).s() == "d"
    });
    out.push(format!(
        "master1: full syncs +{}, partial +{}",
        num(&mut m1, "stats", "sync_full") - full,
        num(&mut m1, "stats", "sync_partial_ok") - partial
    ));
    out.push(format!(
        "replid kept along the chain: {}",
        replid(&mut r) == replid(&mut m1) && replid(&mut s) == replid(&mut m1)
    ));
    // The sub-replica never had to reconnect to mid.
    out.push(format!(
        "mid served: sync_full {} sync_partial_ok {}",
        num(&mut r, "stats", "sync_full"),
        num(&mut r, "stats", "sync_partial_ok")
    ));
    eprintln!(
        "{} in the middle: {out:?}",
        if tessera { "tessera" } else { "redis" }
    );
    out
}

#[test]
fn replicas_kept_until_a_full_sync_payload_is_in_like_redis() {
    let theirs = chain(false);
    let ours = chain(true);
    assert_eq!(ours, theirs);
}

/// The master's PING to its replicas keeps the period's clock from its start, replicas or
/// not (Redis's `replication_cron_loops % repl-ping-replica-period`): a replica that
/// attaches 10.5 s after the start gets no PING until the 20 s mark, so the master's offset
/// stays where the sync put it. tessera-node pinged as soon as a replica attached once a
/// period had passed, which moved the offset ahead of a replica still waiting for its
/// payload, and made a SHUTDOWN wait for it (integration/replication's cached-master tests).
fn offset_after_late_attach(tessera: bool) -> (i64, i64) {
    let started = std::time::Instant::now();
    let m = start(
        tessera,
        &[
            "--save",
            "",
            "--repl-ping-replica-period",
            "10",
            "--repl-diskless-sync-delay",
            "0",
        ],
    );
    let r = start(tessera, &["--save", ""]);
    let (mut mc, mut rc) = (m.resp(), r.resp());
    std::thread::sleep(Duration::from_millis(10_500).saturating_sub(started.elapsed()));
    rc.cmd(&["REPLICAOF", "127.0.0.1", &m.port.to_string()]);
    wait_until("replica synced", Duration::from_secs(8), || synced(&mut rc));
    std::thread::sleep(Duration::from_millis(1200));
    let offset = num(&mut mc, "replication", "master_repl_offset");
    assert!(
        started.elapsed() < Duration::from_secs(19),
        "the machine was too slow to look before the 20 s PING ({:?})",
        started.elapsed()
    );
    (offset, num(&mut rc, "replication", "master_repl_offset"))
}

#[test]
fn first_ping_waits_for_the_period_mark_like_redis() {
    let (redis, tessera) = std::thread::scope(|s| {
        let r = s.spawn(|| offset_after_late_attach(false));
        let t = s.spawn(|| offset_after_late_attach(true));
        (
            r.join().expect("redis side"),
            t.join().expect("tessera side"),
        )
    });
    assert_eq!(
        tessera, redis,
        "(master offset, replica offset): tessera vs redis"
    );
}

/// SHUTDOWN of a master whose only replica still waits for its (slow) sync payload: the
/// replica acknowledged nothing and the master's offset has not moved, so Redis counts it
/// in sync (isReadyToShutdown compares offsets only) and exits at once, cutting the payload
/// short. tessera-node counted only online replicas, waited shutdown-timeout, and the
/// payload completed meanwhile (the middle replica then took the dying master's history).
fn shutdown_with_a_replica_waiting_for_its_payload(tessera: bool) -> String {
    let m = start(
        tessera,
        &[
            "--save",
            "",
            "--enable-debug-command",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
            "--repl-ping-replica-period",
            "60",
        ],
    );
    let r = start(tessera, &["--save", ""]);
    let (mut mc, mut rc) = (m.resp(), r.resp());
    mc.cmd(&["DEBUG", "POPULATE", "10", "key", "10"]);
    mc.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]);
    rc.cmd(&["REPLICAOF", "127.0.0.1", &m.port.to_string()]);
    wait_until(
        "the replica waits for its payload",
        Duration::from_secs(20),
        || {
            num(&mut mc, "persistence", "rdb_bgsave_in_progress") == 1
                && text(&mut mc, "replication", "slave0").contains("wait_bgsave")
        },
    );
    let started = std::time::Instant::now();
    let _ = mc.cmd(&["SHUTDOWN", "NOSAVE"]);
    let waited = started.elapsed() >= Duration::from_secs(5);
    // "N of M" from "N of M replicas are in sync when shutting down." (both logs).
    let in_sync = m
        .log_tail(30)
        .lines()
        .find_map(|l| {
            let (head, _) = l.split_once(" replicas are in sync")?;
            let words: Vec<&str> = head.split_whitespace().collect();
            Some(words[words.len().saturating_sub(3)..].join(" "))
        })
        .unwrap_or_default();
    format!("waited for the replica: {waited}; in sync: {in_sync}")
}

#[test]
fn shutdown_does_not_wait_for_a_replica_still_waiting_for_its_payload_like_redis() {
    let (redis, tessera) = std::thread::scope(|s| {
        let r = s.spawn(|| shutdown_with_a_replica_waiting_for_its_payload(false));
        let t = s.spawn(|| shutdown_with_a_replica_waiting_for_its_payload(true));
        (
            r.join().expect("redis side"),
            t.join().expect("tessera side"),
        )
    });
    assert_eq!(tessera, redis, "tessera vs redis");
}
