//! MIGRATE's connection cache against redis-server 7.0 (issue 18, Redis's unit/dump
//! "MIGRATE is caching connections" and "... released after some time"): one connection
//! per target reused by the next MIGRATE (SELECT sent once per database), replaced once when
//! the target closed it, and closed after 10 s unused (INFO migrate_cached_sockets).

use std::time::Duration;

use tessera_testkit::*;

fn info_field_of(c: &mut Conn, section: &str, field: &str) -> String {
    let text = match c.cmd(&["INFO", section]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO answered {other:?}"),
    };
    info_field(&text, field).unwrap_or_default()
}

fn cached(c: &mut Conn) -> String {
    info_field_of(c, "stats", "migrate_cached_sockets")
}

/// What a source and a target of the same server kind show along the scenario.
fn scenario(launch: fn() -> Launch) -> Vec<String> {
    let [src, dst] = [launch(), launch()].map(|l| l.args(&["--save", ""]).start());
    let mut s = src.resp();
    let mut d = dst.resp();
    let port = dst.port.to_string();
    let mut seen = vec![format!("before: {}", cached(&mut s))];
    for k in ["k1", "k2", "k3"] {
        s.cmd(&["SET", k, "v"]);
    }
    d.cmd(&["CONFIG", "RESETSTAT"]);
    seen.push(format!(
        "{:?}",
        s.cmd(&["MIGRATE", "127.0.0.1", &port, "k1", "9", "5000"])
    ));
    seen.push(format!("after one: {}", cached(&mut s)));
    seen.push(format!(
        "{:?}",
        s.cmd(&["MIGRATE", "127.0.0.1", &port, "k2", "9", "5000"])
    ));
    let conns = info_field_of(&mut d, "stats", "total_connections_received");
    let selects = info_field_of(&mut d, "commandstats", "cmdstat_select");
    seen.push(format!(
        "two migrations to db 9: {} connection(s) seen by the target (with ours), SELECT {}",
        conns,
        selects.split(',').next().unwrap_or("")
    ));
    // The target closes the cached connection: the next MIGRATE connects again.
    let list = match d.cmd(&["CLIENT", "LIST"]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("CLIENT LIST answered {other:?}"),
    };
    let id = list
        .lines()
        .find(|l| l.contains("cmd=restore"))
        .and_then(|l| l.split_whitespace().find_map(|f| f.strip_prefix("id=")))
        .unwrap_or_else(|| panic!("no MIGRATE connection in {list}"))
        .to_string();
    seen.push(format!("{:?}", d.cmd(&["CLIENT", "KILL", "ID", &id])));
    seen.push(format!(
        "{:?}",
        s.cmd(&["MIGRATE", "127.0.0.1", &port, "k3", "9", "5000"])
    ));
    d.cmd(&["SELECT", "9"]);
    seen.push(format!("{:?}", d.cmd(&["MGET", "k1", "k2", "k3"])));
    seen.push(format!("still cached: {}", cached(&mut s)));
    // Closed 10 s after its last use (the server's cron runs once a second).
    wait_until(
        "the cached MIGRATE connection to close",
        Duration::from_secs(20),
        || cached(&mut s) == "0",
    );
    seen.push(format!("after 10 s: {}", cached(&mut s)));
    seen
}

#[test]
fn migrate_caches_connections_like_redis() {
    let (r, t) = std::thread::scope(|sc| {
        let r = sc.spawn(|| scenario(Launch::redis));
        let t = sc.spawn(|| scenario(Launch::tessera));
        (
            r.join().expect("redis side"),
            t.join().expect("tessera side"),
        )
    });
    assert_eq!(r, t, "redis first, tessera second");
}
