//! The FAILOVER command (Redis 7.0's coordinated standalone failover, Redis's
//! integration/failover), compared with redis-server: the refusals, a failover to a named
//! replica that ends with a partial resync both ways, and FAILOVER ABORT while waiting for a
//! stopped replica.

use std::time::Duration;

use tessera_testkit::*;

use crate::{info_of, start};

fn role(c: &mut Conn) -> String {
    match c.cmd(&["ROLE"]) {
        Reply::Array(v) => match v.first() {
            Some(Reply::Bulk(b)) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        },
        other => format!("{other:?}"),
    }
}

fn wait_link_up(c: &mut Conn) {
    wait_until("link up", Duration::from_secs(20), || {
        info_of(c, "replication", "master_link_status").as_deref() == Some("up")
    });
}

fn failover_transcript(tessera: bool) -> Vec<String> {
    let n0 = start(tessera, &["--save", ""]);
    let n1 = start(tessera, &["--save", ""]);
    let n2 = start(tessera, &["--save", ""]);
    let (mut c0, mut c1, mut c2) = (n0.resp(), n1.resp(), n2.resp());
    let (p0, p1) = (n0.port.to_string(), n1.port.to_string());
    let mut seen = Vec::new();
    let mut say = |r: Reply| seen.push(format!("{r:?}"));
    say(c0.cmd(&["FAILOVER", "TO", "127.0.0.1", &p1]));
    c1.cmd(&["REPLICAOF", "127.0.0.1", &p0]);
    c2.cmd(&["REPLICAOF", "127.0.0.1", &p0]);
    wait_link_up(&mut c1);
    wait_link_up(&mut c2);
    for args in [
        vec!["FAILOVER", "TO", "invalidhost", p1.as_str()],
        vec!["FAILOVER", "TO", "127.0.0.1", "invalidport"],
        vec!["FAILOVER", "FORCE", "TIMEOUT", "100"],
        vec!["FAILOVER", "TO", "127.0.0.1", p1.as_str(), "FORCE"],
        vec!["FAILOVER", "TIMEOUT", "0"],
        vec!["FAILOVER", "ABORT"],
        vec!["FAILOVER", "ABORT", "TIMEOUT", "10"],
        vec!["FAILOVER", "BOGUS"],
    ] {
        say(c0.cmd(&args));
    }
    say(c1.cmd(&["FAILOVER", "TO", "127.0.0.1", &p1]));
    say(c0.cmd(&["SET", "k", "v"]));
    wait_until("replica 1 has k", Duration::from_secs(20), || {
        c1.cmd(&["GET", "k"]) == Reply::Bulk(b"v".to_vec())
    });
    // The failover to node 1: node 0 becomes its replica, by a partial resync.
    let partial_before = info_of(&mut c1, "stats", "sync_partial_ok");
    say(c0.cmd(&["FAILOVER", "TO", "127.0.0.1", &p1]));
    wait_until("failover done", Duration::from_secs(20), || {
        info_of(&mut c0, "replication", "master_failover_state").as_deref() == Some("no-failover")
    });
    wait_link_up(&mut c0);
    seen.push(format!("roles: {} {}", role(&mut c0), role(&mut c1)));
    seen.push(format!(
        "partial resyncs on node 1: {:?} -> {:?}, full: {:?}",
        partial_before,
        info_of(&mut c1, "stats", "sync_partial_ok"),
        info_of(&mut c1, "stats", "sync_full")
    ));
    seen.push(format!("{:?}", c0.cmd(&["GET", "k"])));
    seen.push(format!("{:?}", c0.cmd(&["SET", "k", "w"])));
    // FAILOVER ABORT while waiting for a stopped replica: writes resume.
    c0.cmd(&["REPLICAOF", "127.0.0.1", &p1]);
    c2.cmd(&["REPLICAOF", "127.0.0.1", &p1]);
    wait_link_up(&mut c2);
    n0.signal("STOP");
    seen.push(format!("{:?}", c1.cmd(&["SET", "k", "x"])));
    seen.push(format!(
        "{:?}",
        c1.cmd(&["FAILOVER", "TO", "127.0.0.1", &p0, "TIMEOUT", "60000"])
    ));
    seen.push(format!(
        "{:?}",
        info_of(&mut c1, "replication", "master_failover_state")
    ));
    seen.push(format!(
        "{:?}",
        c1.cmd(&["FAILOVER", "TO", "127.0.0.1", &p0])
    ));
    seen.push(format!("{:?}", c1.cmd(&["GET", "k"])));
    seen.push(format!("{:?}", c1.cmd(&["FAILOVER", "ABORT"])));
    seen.push(format!(
        "{:?}",
        info_of(&mut c1, "replication", "master_failover_state")
    ));
    n0.signal("CONT");
    seen.push(format!("{:?}", c1.cmd(&["SET", "k", "y"])));
    seen.push(format!("role after abort: {}", role(&mut c1)));
    seen
}

#[test]
fn failover_command_matches_redis() {
    let theirs = failover_transcript(false);
    let ours = failover_transcript(true);
    assert_eq!(ours, theirs);
}
