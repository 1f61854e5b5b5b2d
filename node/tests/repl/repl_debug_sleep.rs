//! DEBUG SLEEP on a replica holds its replication link too, as Redis's sleep blocks its one
//! event loop: a write the master makes during the sleep is not applied when the same EXEC
//! kills the link right after the sleep (runtest-cluster 05-slave-selection pauses a replica
//! this way so that the other replica is the better candidate). Compared with redis-server.

use std::time::Duration;

use tessera_testkit::*;

use crate::start;

/// The replica's value of `k` read by `MULTI; DEBUG SLEEP 1; CLIENT KILL TYPE master; GET k;
/// EXEC` while the master wrote `k` during the sleep. The GET is inside the transaction: read
/// after EXEC, it raced the replica's reconnection, whose partial resync brings the write
/// (redis-server's reconnect is overdue after a sleep; it won once on a loaded CI machine).
fn value_after_sleep(tessera: bool) -> String {
    let master = start(false, &["--save", ""]);
    let replica = start(tessera, &["--save", "", "--enable-debug-command", "yes"]);
    let mut r = replica.resp();
    r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_until("replica linked", Duration::from_secs(20), || {
        info_field(&replica.cli(&["INFO", "replication"]), "master_link_status").as_deref()
            == Some("up")
    });
    let mut m = master.resp();
    m.cmd(&["SET", "k", "before"]);
    wait_until("first write replicated", Duration::from_secs(10), || {
        replica.cli(&["GET", "k"]).trim() == "before"
    });
    r.cmd(&["MULTI"]);
    r.cmd(&["DEBUG", "SLEEP", "1"]);
    r.cmd(&["CLIENT", "KILL", "TYPE", "master"]);
    r.cmd(&["GET", "k"]);
    r.send(&["EXEC"]);
    std::thread::sleep(Duration::from_millis(300));
    m.cmd(&["SET", "k", "during"]);
    match r.read() {
        Reply::Array(mut replies) if replies.len() == 3 => R::from(replies.remove(2)).s(),
        other => panic!("EXEC: {other:?}"),
    }
}

#[test]
fn debug_sleep_holds_the_replication_link_like_redis() {
    let want = value_after_sleep(false);
    assert_eq!(want, "before", "redis-server's replica missed the write");
    assert_eq!(
        value_after_sleep(true),
        want,
        "tessera (left) vs redis-server"
    );
}
