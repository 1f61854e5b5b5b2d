//! CONFIG SET cluster-announce-port / -bus-port / -ip take effect at once, in CLUSTER NODES
//! and on the bus (unit/cluster/announced-endpoints), as Redis 7.0's
//! clusterUpdateMyselfAnnouncedPorts and clusterUpdateMyselfIp. Checked against redis-server
//! doing the same in the same test.

use std::time::Duration;

use tessera_testkit::cluster::*;
use tessera_testkit::*;

/// The address field of `n`'s own CLUSTER NODES line as seen by `by`, with `n`'s real
/// ports written P and C.
fn addr_of(n: &Proc, by: &Proc) -> String {
    let id = n.myid();
    let line = by
        .nodes()
        .into_iter()
        .find(|l| l.starts_with(&id))
        .unwrap_or_default();
    let addr = line.split(' ').nth(1).unwrap_or("").to_string();
    addr.replace(&format!("@{}", n.port + 10000), "@C")
        .replace(&format!(":{}@", n.port), ":P@")
}

fn set(n: &Proc, k: &str, v: &str) -> String {
    n.cli(&["CONFIG", "SET", k, v]).trim().to_string()
}

/// What two joined nodes of `bin` show while `a` changes what it announces.
fn announce_view(bin: &'static str) -> Vec<String> {
    let (a, b) = (
        Proc::cluster(bin, "127.0.0.1", 3000),
        Proc::cluster(bin, "127.0.0.1", 3000),
    );
    let p = b.port.to_string();
    assert_eq!(a.cli(&["CLUSTER", "MEET", "127.0.0.1", &p]).trim(), "OK");
    let wait_seen = |want: &str| {
        wait_for(Duration::from_secs(30), want, || addr_of(&a, &b) == want);
    };
    wait_seen("127.0.0.1:P@C");
    let mut out = vec![addr_of(&a, &a)];
    out.push(set(&a, "cluster-announce-port", "5555"));
    out.push(addr_of(&a, &a));
    wait_seen("127.0.0.1:5555@C");
    out.push(set(&a, "cluster-announce-port", "0"));
    out.push(addr_of(&a, &a));
    wait_seen("127.0.0.1:P@C");
    out.push(set(&a, "cluster-announce-bus-port", "5556"));
    out.push(addr_of(&a, &a));
    wait_seen("127.0.0.1:P@5556");
    out.push(set(&a, "cluster-announce-bus-port", "0"));
    out.push(addr_of(&a, &a));
    out.push(set(&a, "cluster-announce-ip", "10.1.2.3"));
    out.push(addr_of(&a, &a));
    // Emptied: the address is forgotten and learned again from the next peer's PING.
    out.push(set(&a, "cluster-announce-ip", ""));
    wait_for(Duration::from_secs(30), "a relearns its IP", || {
        addr_of(&a, &a) == "127.0.0.1:P@C"
    });
    out
}

#[test]
fn announced_ports_change_at_run_time_like_redis() {
    let want = announce_view(redis_bin());
    assert_eq!(announce_view(tessera_bin()), want);
}
