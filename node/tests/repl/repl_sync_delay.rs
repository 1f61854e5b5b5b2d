//! repl-diskless-sync-delay and repl-diskless-sync-max-replicas on the master, as Redis 7.0:
//! a full sync waits up to the delay for more replicas (the replica shows `wait_bgsave` in
//! the master's INFO and its link stays down), starts at once when max-replicas are
//! waiting, and while the sync snapshot is made the master says rdb_bgsave_in_progress:1
//! and the replica's ROLE says `sync`. Replicas are redis-server in both runs; the masters
//! are compared (integration/replication relies on the delay to catch a replica between
//! two syncs).

use std::time::{Duration, Instant};

use tessera_testkit::*;

use crate::{info_of, start};

fn slave0_state(m: &mut Conn) -> String {
    info_of(m, "replication", "slave0")
        .and_then(|v| {
            v.split(',')
                .find_map(|kv| kv.strip_prefix("state=").map(str::to_owned))
        })
        .unwrap_or_else(|| "none".into())
}

fn link(r: &mut Conn) -> String {
    info_of(r, "replication", "master_link_status").unwrap_or_default()
}

fn role_state(r: &mut Conn) -> String {
    match r.cmd(&["ROLE"]) {
        Reply::Array(v) => v.get(3).map(|s| R::from(s.clone()).s()).unwrap_or_default(),
        other => format!("{other:?}"),
    }
}

fn delayed_sync(tessera: bool) -> Vec<String> {
    let master = start(
        tessera,
        &[
            "--save",
            "",
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "3",
        ],
    );
    let replica = Server::redis(&["--save", ""]);
    let mut m = master.resp();
    let mut r = replica.resp();
    let mut seen = Vec::new();
    let t0 = Instant::now();
    r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_until("replica registered", Duration::from_secs(10), || {
        slave0_state(&mut m) != "none"
    });
    seen.push(format!("waiting state {}", slave0_state(&mut m)));
    seen.push(format!(
        "bgsave while waiting {:?}",
        info_of(&mut m, "persistence", "rdb_bgsave_in_progress")
    ));
    seen.push(format!("link while waiting {}", link(&mut r)));
    wait_until("link up", Duration::from_secs(20), || link(&mut r) == "up");
    seen.push(format!(
        "waited the delay {}",
        t0.elapsed() >= Duration::from_secs(2)
    ));
    seen
}

fn max_replicas(tessera: bool) -> Vec<String> {
    let master = start(
        tessera,
        &[
            "--save",
            "",
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "60",
            "--repl-diskless-sync-max-replicas",
            "2",
        ],
    );
    let r1 = Server::redis(&["--save", ""]);
    let r2 = Server::redis(&["--save", ""]);
    let mut m = master.resp();
    m.cmd(&["SET", "k", "v"]);
    let (mut c1, mut c2) = (r1.resp(), r2.resp());
    c1.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    std::thread::sleep(Duration::from_millis(1500));
    let mut seen = vec![
        format!("one waits {}", slave0_state(&mut m)),
        format!("link of the first {}", link(&mut c1)),
    ];
    c2.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_until("both up", Duration::from_secs(20), || {
        link(&mut c1) == "up" && link(&mut c2) == "up"
    });
    seen.push(format!("both synced {:?}", c2.cmd(&["GET", "k"])));
    seen.push(format!(
        "full syncs {:?}",
        info_of(&mut m, "stats", "sync_full")
    ));
    seen
}

fn slow_snapshot(tessera: bool) -> Vec<String> {
    let master = start(
        tessera,
        &[
            "--save",
            "",
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
        ],
    );
    let replica = Server::redis(&["--save", ""]);
    let mut m = master.resp();
    for i in 0..30 {
        m.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    // 100 ms per key: the snapshot takes about 3 s.
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
    let mut r = replica.resp();
    r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_until("sync started", Duration::from_secs(10), || {
        role_state(&mut r) == "sync"
    });
    let mut seen = vec![
        format!(
            "bgsave {:?}",
            info_of(&mut m, "persistence", "rdb_bgsave_in_progress")
        ),
        format!("state {}", slave0_state(&mut m)),
    ];
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    wait_until("link up", Duration::from_secs(30), || link(&mut r) == "up");
    wait_until("bgsave over", Duration::from_secs(10), || {
        info_of(&mut m, "persistence", "rdb_bgsave_in_progress").as_deref() == Some("0")
    });
    seen.push(format!("state after {}", slave0_state(&mut m)));
    seen
}

#[test]
fn diskless_sync_delay_is_honoured_like_redis() {
    let theirs = delayed_sync(false);
    let ours = delayed_sync(true);
    assert_eq!(ours, theirs);
}

#[test]
fn diskless_sync_max_replicas_starts_early_like_redis() {
    let theirs = max_replicas(false);
    let ours = max_replicas(true);
    assert_eq!(ours, theirs);
}

#[test]
fn sync_snapshot_shows_as_bgsave_like_redis() {
    let theirs = slow_snapshot(false);
    let ours = slow_snapshot(true);
    assert_eq!(ours, theirs);
}
