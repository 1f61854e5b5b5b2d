//! maxmemory eviction against redis-server 7.0 (issue 18, Redis's unit/maxmemory "is the
//! memory limit honoured?"): with 100 KB of headroom, writing as many keys again as filled
//! it must evict its way under the limit, never answer OOM, on both servers.

use tessera_testkit::*;

fn used_memory(c: &mut Conn) -> u64 {
    let info = match c.cmd(&["INFO", "memory"]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO answered {other:?}"),
    };
    info_field(&info, "used_memory")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no used_memory in {info}"))
}

/// INFO stats as text.
fn stats(c: &mut Conn) -> String {
    match c.cmd(&["INFO", "stats"]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO answered {other:?}"),
    }
}

/// Redis's test, deterministic keys instead of random ones: what went wrong, if anything.
fn honoured(c: &mut Conn, policy: &str) -> String {
    c.cmd(&["FLUSHALL"]);
    let limit = used_memory(c) + 100 * 1024;
    c.cmd(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    c.cmd(&["CONFIG", "SET", "maxmemory-policy", policy]);
    let mut n = 0u64;
    loop {
        let r = c.cmd(&["SETEX", &format!("key:{n}"), "10000", "x"]);
        if let Reply::Error(e) = r {
            return format!("{policy}: filling answered {e}");
        }
        n += 1;
        if used_memory(c) + 4096 > limit {
            break;
        }
        if n > 100_000 {
            return format!("{policy}: 100000 keys never reached the limit");
        }
    }
    let mut out = format!("{policy}: ok");
    for j in 0..n {
        if let Reply::Error(e) = c.cmd(&["SETEX", &format!("more:{j}"), "10000", "x"]) {
            out = format!("{policy}: write {j} of {n} answered {e}");
            break;
        }
    }
    if used_memory(c) >= limit + 4096 {
        out.push_str(" (and over the limit)");
    }
    c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
    out
}

#[test]
fn eviction_keeps_under_the_limit_like_redis() {
    const POLICIES: [&str; 7] = [
        "allkeys-random",
        "allkeys-lru",
        "allkeys-lfu",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ];
    let [r, t] = [Launch::redis(), Launch::tessera()].map(|l| l.args(&["--save", ""]).start());
    let got = [&r, &t].map(|s| {
        let mut c = s.resp();
        let mut out = POLICIES.map(|p| honoured(&mut c, p)).join("\n");
        // unit/maxmemory's client-eviction tests read it (tessera-node evicts no clients).
        let stats = stats(&mut c);
        out.push_str(&format!(
            "\nevicted_clients:{:?}",
            info_field(&stats, "evicted_clients")
        ));
        out
    });
    assert_eq!(got[0], got[1], "redis first, tessera second");
}

/// Every command evicts, not only the ones that may grow memory: lowering maxmemory then
/// only reading (DBSIZE) still empties the keyspace down to the limit (unit/maxmemory
/// "propagation with eviction"), and the reads are answered.
#[test]
fn reads_evict_too_like_redis() {
    let [r, t] = [Launch::redis(), Launch::tessera()].map(|l| l.args(&["--save", ""]).start());
    let got = [&r, &t].map(|s| {
        let mut c = s.resp();
        for k in ["asdf1", "asdf2", "asdf3"] {
            c.cmd(&["SET", k, "1"]);
        }
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
        c.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(format!("{:?}", c.cmd(&["DBSIZE"])));
        }
        seen.push(format!("{:?}", c.cmd(&["GET", "asdf1"])));
        c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        let stats = stats(&mut c);
        seen.push(format!(
            "evicted_keys:{:?}",
            info_field(&stats, "evicted_keys")
        ));
        seen.join(" ")
    });
    assert_eq!(got[0], got[1], "redis first, tessera second");
}

/// unit/maxmemory "client tracking don't cause eviction feedback loop": RESP3 clients
/// track 300 keys with long names; lowering maxmemory 40 KB below used memory evicts a few
/// dozen keys, and the invalidations those evictions send (one per tracking client, each
/// as big as a key's name) must not make eviction go on until the database is empty.
/// Thirty clients and 2 KB names make the messages sixty times what a key frees.
#[test]
fn tracking_invalidations_do_not_feed_eviction_like_redis() {
    let [r, t] = [Launch::redis(), Launch::tessera()].map(|l| l.args(&["--save", ""]).start());
    let got = [&r, &t].map(|s| {
        let mut c = s.resp();
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
        c.cmd(&["CONFIG", "SET", "maxmemory-eviction-tenacity", "100"]);
        let mut trackers: Vec<Conn> = (0..30).map(|_| s.resp()).collect();
        for t in trackers.iter_mut() {
            t.cmd(&["HELLO", "3"]);
            assert_eq!(
                t.cmd(&["CLIENT", "TRACKING", "on"]),
                Reply::Simple("OK".into())
            );
        }
        let pad = "x".repeat(2000);
        for j in 0..300 {
            let key = format!("{j}{pad}");
            c.cmd(&["SET", &key, "x"]);
            for t in trackers.iter_mut() {
                t.cmd(&["GET", &key]);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let limit = used_memory(&mut c) - 40_000;
        c.cmd(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
        let mut seen = Vec::new();
        for _ in 0..3 {
            let stats = stats(&mut c);
            let evicted: u64 = info_field(&stats, "evicted_keys")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let keys = match c.cmd(&["DBSIZE"]) {
                Reply::Int(n) => n,
                other => panic!("DBSIZE answered {other:?}"),
            };
            seen.push((evicted, keys));
        }
        seen
    });
    for (name, seen) in [("redis-server", &got[0]), ("tessera-node", &got[1])] {
        assert!(
            seen.iter().all(|&(e, k)| e > 0 && k >= 200),
            "{name}: (evicted, keys) after each command {seen:?}; redis-server {:?}",
            got[0]
        );
    }
}

/// unit/maxmemory "Don't rehash if used memory exceeds maxmemory after rehash" sets
/// maxmemory 10 KiB above the used_memory a full INFO just reported and expects the next
/// writes to evict nothing. So a client's first big reply (INFO's, several KB, after only
/// `+OK`s) must not grow its reply buffer's allocation after INFO read the figure. A
/// buffer that grew reply by reply did: used_memory rose 12 KB.
#[test]
fn a_first_big_reply_does_not_move_used_memory_like_redis() {
    let [r, t] = [Launch::redis(), Launch::tessera()].map(|l| l.args(&["--save", ""]).start());
    for (name, s) in [("redis-server", &r), ("tessera-node", &t)] {
        let mut c = s.resp();
        for j in 0..10 {
            c.cmd(&["SET", &format!("k{j}"), "v"]);
        }
        let info = match c.cmd(&["INFO"]) {
            Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
            other => panic!("{name}: INFO answered {other:?}"),
        };
        assert!(info.len() > 3000, "{name}: INFO is {} bytes", info.len());
        let before: u64 = info_field(&info, "used_memory")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name}: no used_memory in {info}"));
        let after = used_memory(&mut c);
        assert!(
            after < before + 4096,
            "{name}: used_memory {before} in INFO, {after} right after"
        );
    }
}
