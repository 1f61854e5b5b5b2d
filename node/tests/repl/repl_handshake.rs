//! The replica side of the handshake against a redis-server master that delays its
//! diskless sync (repl-diskless-sync-delay): ROLE says "handshake" while the PSYNC answer
//! is awaited, and a master that then goes silent (DEBUG SLEEP) past repl-timeout is
//! logged "Timeout connecting to the MASTER..." (integration/replication "Slave enters
//! handshake", "Slave is able to detect timeout during handshake"). Compared with
//! redis-server as the replica.

use std::time::Duration;

use tessera_testkit::*;

use crate::start;

fn handshake(tessera: bool) -> Vec<String> {
    let master = Server::redis(&[
        "--save",
        "",
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "1000",
        "--enable-debug-command",
        "yes",
    ]);
    let replica = start(tessera, &["--save", "", "--repl-timeout", "3"]);
    let mut r = replica.resp();
    let role_state = |r: &mut Conn| match r.cmd(&["ROLE"]) {
        Reply::Array(v) => v.get(3).map(|s| R::from(s.clone()).s()).unwrap_or_default(),
        other => format!("{other:?}"),
    };
    r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_until("handshake", Duration::from_secs(20), || {
        role_state(&mut r) == "handshake"
    });
    let mut m = master.resp();
    m.send(&["DEBUG", "SLEEP", "6"]);
    let log = || std::fs::read_to_string(replica.output_path()).unwrap_or_default();
    wait_until("timeout logged", Duration::from_secs(20), || {
        log().contains("Timeout connecting to the MASTER")
    });
    vec!["handshake seen".into(), "timeout logged".into()]
}

#[test]
fn replica_handshake_state_and_timeout_like_redis() {
    let theirs = handshake(false);
    let ours = handshake(true);
    assert_eq!(ours, theirs);
}
