//! A client blocked in BLPOP on a master that becomes a replica is released with
//! -UNBLOCKED, as Redis's disconnectAllBlockedClients, so the replica never pops what its
//! new master pushes (integration/replication "BLPOP followed by role change, issue
//! #2473"). Compared with redis-server.

use std::time::Duration;

use tessera_testkit::*;

use crate::{info_of, start};

fn role_change(tessera: bool) -> Vec<String> {
    let a = start(tessera, &["--save", ""]);
    let b = start(tessera, &["--save", ""]);
    let mut blocked = b.resp();
    blocked.send(&["BLPOP", "foo", "0"]);
    let mut cb = b.resp();
    wait_until("blocked", Duration::from_secs(10), || {
        info_of(&mut cb, "clients", "blocked_clients").as_deref() == Some("1")
    });
    let mut seen = vec![R::from(cb.cmd(&["REPLICAOF", "127.0.0.1", &a.port.to_string()])).s()];
    seen.push(format!(
        "blocked client got: {}",
        R::from(blocked.read()).s()
    ));
    wait_until("link up", Duration::from_secs(20), || {
        info_of(&mut cb, "replication", "master_link_status").as_deref() == Some("up")
    });
    let mut ca = a.resp();
    ca.cmd(&["RPUSH", "foo", "a", "b", "c"]);
    wait_until("replicated", Duration::from_secs(20), || {
        R::from(cb.cmd(&["LLEN", "foo"])).s() == "3"
    });
    seen.push(R::from(cb.cmd(&["LRANGE", "foo", "0", "-1"])).s());
    seen
}

#[test]
fn blocked_clients_are_released_when_a_master_becomes_a_replica_like_redis() {
    let theirs = role_change(false);
    let ours = role_change(true);
    assert_eq!(ours, theirs);
}
