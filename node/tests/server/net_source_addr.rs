//! bind-source-addr: a replica connects to its master from that address, against
//! redis-server 7.0 (issue 18, unit/networking 'CONFIG SET bind-source-addr').

use std::time::Duration;

use tessera_testkit::*;

/// The master's `slave0` line once the replica, set to connect from 127.0.0.2, is online.
fn replica_line(l: fn() -> Launch) -> String {
    let master = l().args(&["--save", ""]).start();
    let replica = l().args(&["--save", ""]).start();
    let mut m = master.resp();
    let mut r = replica.resp();
    m.cmd(&["CONFIG", "SET", "protected-mode", "no"]);
    r.cmd(&["CONFIG", "SET", "bind-source-addr", "127.0.0.2"]);
    r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    let mut line = String::new();
    wait_until("replica online", Duration::from_secs(20), || {
        let info = match m.cmd(&["INFO", "replication"]) {
            Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
            _ => String::new(),
        };
        line = info
            .lines()
            .find(|l| l.starts_with("slave0:"))
            .unwrap_or("")
            .to_string();
        line.contains("state=online")
    });
    line.split(',')
        .find(|f| f.starts_with("slave0:ip="))
        .unwrap_or("no ip")
        .to_string()
}

#[test]
fn replica_connects_from_bind_source_addr_like_redis() {
    let want = replica_line(Launch::redis);
    let got = replica_line(Launch::tessera);
    assert_eq!(got, want, "tessera (left) vs redis-server (right)");
}
