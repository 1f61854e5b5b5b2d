//! DEBUG CLUSTERLINK KILL to|from|all <node-id> (unit/cluster/links "Broadcast message across
//! a cluster shard while a cluster link is down"): the link goes at once, so a PUBLISH
//! queued after it in the same transaction does not reach that node, and it is redialled.
//! Checked against redis-server 7.0 doing the same in the same test.

use std::time::Duration;

use tessera_testkit::cluster::*;
use tessera_testkit::*;

/// A cluster-mode node of `bin` that accepts DEBUG.
fn debug_node(bin: &'static str) -> Proc {
    let extra = [
        "--save",
        "",
        "--appendonly",
        "no",
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        "3000",
        "--enable-debug-command",
        "yes",
    ];
    Proc {
        srv: Launch::new(bin).args(&extra).logfile().start(),
    }
}

/// Number of entries of CLUSTER LINKS (one per direction per connected peer).
fn links(n: &Proc) -> usize {
    match Conn::connect(n.port).cmd(&["CLUSTER", "LINKS"]) {
        Reply::Array(v) => v.len(),
        other => panic!("CLUSTER LINKS: {other:?}"),
    }
}

/// Waits until `n` has both links with each of its `peers` peers.
fn links_complete(n: &Proc, peers: usize) {
    wait_for(
        Duration::from_secs(30),
        "every peer linked both ways",
        || links(n) == 2 * peers,
    );
}

/// A reply as text, bulk strings as UTF-8 (pushed messages read as `message ch world`).
fn show(r: &Reply) -> String {
    match r {
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        Reply::Array(v) => v.iter().map(show).collect::<Vec<_>>().join(" "),
        other => format!("{other:?}"),
    }
}

/// What a three-node cluster of `bin` answers and delivers around DEBUG CLUSTERLINK KILL.
fn clusterlink_view(bin: &'static str) -> Vec<String> {
    let (a, b, c) = (debug_node(bin), debug_node(bin), debug_node(bin));
    for n in [&b, &c] {
        let p = n.port.to_string();
        assert_eq!(a.cli(&["CLUSTER", "MEET", "127.0.0.1", &p]).trim(), "OK");
    }
    for n in [&a, &b, &c] {
        links_complete(n, 2);
    }
    let (bid, cid) = (b.myid(), c.myid());
    let mut out = Vec::new();
    let mut sb = Conn::connect(b.port);
    let mut sc = Conn::connect(c.port);
    out.push(show(&sb.cmd(&["SUBSCRIBE", "ch"])));
    out.push(show(&sc.cmd(&["SUBSCRIBE", "ch"])));
    let mut ca = Conn::connect(a.port);
    // The link to b goes before the PUBLISH of the same transaction runs: b misses hello.
    for cmd in [
        &["MULTI"][..],
        &["DEBUG", "CLUSTERLINK", "KILL", "TO", &bid],
        &["PUBLISH", "ch", "hello"],
        &["EXEC"],
    ] {
        out.push(format!("{:?}", ca.cmd(cmd)));
    }
    links_complete(&a, 2);
    out.push(format!("{:?}", ca.cmd(&["PUBLISH", "ch", "world"])));
    out.push(format!("b got {}", show(&sb.read())));
    out.push(format!("c got {}", show(&sc.read())));
    out.push(format!("c got {}", show(&sc.read())));
    // The other directions: each link is closed and comes back.
    for dir in ["FROM", "ALL", "to", "from", "all"] {
        out.push(format!(
            "{dir} {:?}",
            ca.cmd(&["DEBUG", "CLUSTERLINK", "KILL", dir, &cid])
        ));
        links_complete(&a, 2);
        links_complete(&c, 2);
    }
    let unknown = "f".repeat(40);
    for args in [
        &["DEBUG", "CLUSTERLINK", "KILL", "TO", &unknown][..],
        &["DEBUG", "CLUSTERLINK", "KILL", "TO", "abc"],
        &["DEBUG", "CLUSTERLINK", "KILL", "TO"],
        &["DEBUG", "CLUSTERLINK", "KILL", "TO", &cid, "x"],
        &["DEBUG", "CLUSTERLINK", "STOP", "TO", &cid],
    ] {
        out.push(format!("{:?}", ca.cmd(args)));
    }
    out
}

/// DEBUG CLUSTERLINK KILL answers and takes effect as on redis-server.
#[test]
fn debug_clusterlink_kill_like_redis() {
    let want = clusterlink_view(redis_bin());
    assert!(
        want.iter().any(|l| l == "b got message ch world"),
        "redis-server's b gets world only: {want:?}"
    );
    assert_eq!(clusterlink_view(tessera_bin()), want);
}

/// Outside cluster mode the subcommand is refused as Redis refuses it.
#[test]
fn debug_clusterlink_needs_cluster_mode_like_redis() {
    let view = |bin: &'static str| {
        let s = Launch::new(bin)
            .args(&["--save", "", "--enable-debug-command", "yes"])
            .start();
        let mut c = s.resp();
        let id = "a".repeat(40);
        format!("{:?}", c.cmd(&["DEBUG", "CLUSTERLINK", "KILL", "ALL", &id]))
    };
    assert_eq!(view(tessera_bin()), view(redis_bin()));
}
