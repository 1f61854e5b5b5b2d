//! A replica connection (after SYNC / PSYNC) that sends a command which would get a reply
//! is disconnected with "Replica generated a reply to command '<name>', disconnecting it",
//! a keyspace command first logging "== CRITICAL == This master is sending an error to its
//! replica", as Redis 7.0.15 (integration/replication "replica do not write the reply to
//! the replication link"). Compared with redis-server.

use std::time::Duration;

use tessera_testkit::*;

use crate::start;

fn replied(tessera: bool, sync: &[&str], cmd: &[&str], name: &str) -> Vec<String> {
    let srv = start(tessera, &["--save", "", "--repl-diskless-sync-delay", "0"]);
    let mut rd = srv.resp();
    rd.send(sync);
    rd.send(cmd);
    let log = || std::fs::read_to_string(srv.output_path()).unwrap_or_default();
    let want = format!("Replica generated a reply to command '{name}', disconnecting it: ");
    wait_until("logged", Duration::from_secs(10), || log().contains(&want));
    let mut c = srv.resp();
    vec![
        R::from(c.cmd(&["PING"])).s(),
        format!(
            "critical {}",
            log().contains("== CRITICAL == This master is sending an error to its replica")
        ),
    ]
}

#[test]
fn replica_connection_generating_a_reply_is_dropped_like_redis() {
    let cases: [(&[&str], &[&str], &str); 3] = [
        (&["SYNC"], &["PING"], "ping"),
        (&["SYNC"], &["XINFO", "HELP"], "xinfo|help"),
        (&["PSYNC", "replicationid", "-1"], &["GET", "foo"], "get"),
    ];
    for (sync, cmd, name) in cases {
        let theirs = replied(false, sync, cmd, name);
        let ours = replied(true, sync, cmd, name);
        assert_eq!(ours, theirs, "{cmd:?}");
    }
}
