//! Key eviction against redis-server 7.0 (issue 18, Redis's unit/maxmemory, unit/pubsub
//! and unit/tracking): when eviction runs, how much it evicts, and what it leaves alone.

use std::time::Duration;

use tessera_testkit::*;

fn both() -> [Server; 2] {
    [Launch::redis(), Launch::tessera()].map(|l| l.args(&["--save", ""]).start())
}

/// CONFIG SET maxmemory below the used memory evicts right after the command, without
/// waiting for the next one (Redis's updateMaxmemory starts its eviction time event):
/// unit/pubsub "Keyspace notifications: evicted events" reads the event with no command
/// in between, and hung on tessera-node.
#[test]
fn config_set_maxmemory_evicts_at_once_like_redis() {
    let got = both().map(|s| {
        let mut c = s.resp();
        let mut sub = s.resp();
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
        let mut seen = vec![format!("{:?}", sub.cmd(&["PSUBSCRIBE", "*"]))];
        c.cmd(&["SET", "foo", "bar"]);
        seen.push(format!("{:?}", c.cmd(&["CONFIG", "SET", "maxmemory", "1"])));
        // No command on either connection until the event came (5 s at most).
        sub.w
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        seen.push(format!("{:?}", sub.read()));
        c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        seen.push(format!("{:?}", c.cmd(&["DBSIZE"])));
        seen.join("\n")
    });
    assert_eq!(got[0], got[1], "redis first, tessera second");
}

/// An eviction inside EXEC (CONFIG SET maxmemory queued) happens once the transaction is
/// over: the queued INCRs see the key (unit/maxmemory "propagation with eviction in
/// MULTI").
#[test]
fn config_set_maxmemory_in_multi_evicts_after_exec_like_redis() {
    let got = both().map(|s| {
        let mut c = s.resp();
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
        c.cmd(&["MULTI"]);
        c.cmd(&["INCR", "x"]);
        c.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
        c.cmd(&["INCR", "x"]);
        let exec = format!("{:?}", c.cmd(&["EXEC"]));
        let mut probe = s.resp();
        wait_until("x evicted", Duration::from_secs(10), || {
            probe.cmd(&["DBSIZE"]) == Reply::Int(0)
        });
        c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        exec
    });
    assert_eq!(got[0], got[1], "redis first, tessera second");
}

/// Small integers are shared objects (OBJECT REFCOUNT 2147483647) except under an LRU or
/// LFU policy with a maxmemory, where each key needs its own access time (unit/maxmemory
/// "With maxmemory and LRU policy integers are not shared").
#[test]
fn shared_integers_follow_the_policy_like_redis() {
    let got = both().map(|s| {
        let mut c = s.resp();
        let mut seen = Vec::new();
        c.cmd(&["SET", "z", "1"]);
        seen.push(c.cmd(&["OBJECT", "REFCOUNT", "z"]));
        c.cmd(&["CONFIG", "SET", "maxmemory", "1073741824"]);
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
        c.cmd(&["SET", "r", "1"]);
        seen.push(c.cmd(&["OBJECT", "REFCOUNT", "r"]));
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
        c.cmd(&["SET", "a", "1"]);
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"]);
        c.cmd(&["SET", "b", "1"]);
        seen.push(c.cmd(&["OBJECT", "REFCOUNT", "a"]));
        seen.push(c.cmd(&["OBJECT", "REFCOUNT", "b"]));
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]);
        c.cmd(&["SET", "f", "2"]);
        seen.push(c.cmd(&["OBJECT", "REFCOUNT", "f"]));
        c.cmd(&["SET", "big", "10000"]);
        seen.push(c.cmd(&["OBJECT", "REFCOUNT", "big"]));
        c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        c.cmd(&["SET", "n", "3"]);
        seen.push(c.cmd(&["OBJECT", "REFCOUNT", "n"]));
        seen
    });
    assert_eq!(got[0], got[1], "redis first, tessera second");
}

fn info_u64(c: &mut Conn, section: &str, field: &str) -> u64 {
    let text = match c.cmd(&["INFO", section]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO answered {other:?}"),
    };
    info_field(&text, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

/// A key evicted before a command runs is invalidated ahead of that command's reply on
/// the connection that tracks it (unit/tracking "Tracking invalidation message of eviction
/// keys should be before response"): tessera-node sent the reply first.
#[test]
fn eviction_invalidation_comes_before_the_reply_like_redis() {
    let got = both().map(|s| {
        let mut c = s.resp();
        c.cmd(&["HELLO", "3"]);
        c.cmd(&["CLIENT", "TRACKING", "on"]);
        let used = info_u64(&mut c, "memory", "used_memory")
            - info_u64(&mut c, "memory", "mem_not_counted_for_evict");
        c.cmd(&[
            "CONFIG",
            "SET",
            "maxmemory",
            &(used + 100 * 1024).to_string(),
        ]);
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]);
        c.cmd(&["SETEX", "volatile-key", "10000", "x"]);
        c.cmd(&["GET", "volatile-key"]);
        // About 200 KB: over the limit, evicted before the next command.
        c.cmd(&["SETBIT", "big-key", "1600000", "0"]);
        let seen = vec![c.cmd(&["GETBIT", "big-key", "0"]), c.read()];
        c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        seen
    });
    assert_eq!(got[0], got[1], "redis first, tessera second");
}

/// Eviction frees what the limit asks for, measured as the keys' own memory: the
/// invalidation messages it sends to tracking clients do not make it evict more (unit/
/// maxmemory "client tracking don't cause eviction feedback loop": 300 keys of 1 KB names
/// read by 10 tracking clients, maxmemory 40 KB under the used memory; Redis evicts 10 to
/// 50 keys, tessera-node emptied the database). Redis's test reads INFO at once; here the
/// connections are given time to write the invalidations out first (a
/// command that follows at once still evicts again while they wait).
#[test]
fn tracking_invalidations_do_not_feed_eviction_like_redis() {
    let got = both().map(|s| {
        let mut c = s.resp();
        c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
        c.cmd(&["CONFIG", "SET", "maxmemory-eviction-tenacity", "100"]);
        let mut clients: Vec<Conn> = (0..10)
            .map(|_| {
                let mut t = s.resp();
                t.cmd(&["HELLO", "3"]);
                t.cmd(&["CLIENT", "TRACKING", "on"]);
                t
            })
            .collect();
        for j in 0..300 {
            let key = format!("{j}{}", "x".repeat(1000));
            c.cmd(&["SET", &key, "x"]);
            for t in clients.iter_mut() {
                t.cmd(&["GET", &key]);
            }
        }
        std::thread::sleep(Duration::from_millis(1100));
        let used = info_u64(&mut c, "memory", "used_memory");
        c.cmd(&["CONFIG", "SET", "maxmemory", &(used - 40_000).to_string()]);
        // The invalidations are written out before the next command is read (Redis
        // writes them before it reads again; here their connections' tasks must run).
        std::thread::sleep(Duration::from_millis(500));
        let evicted = info_u64(&mut c, "stats", "evicted_keys");
        let dbsize = c.cmd(&["DBSIZE"]).as_int().unwrap_or(-1);
        // Each client got at least one invalidation.
        let pushed = clients
            .iter_mut()
            .all(|t| matches!(t.read(), Reply::Push(ref v) if v.len() == 2));
        c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        format!(
            "dbsize in 200..=300: {} ({dbsize}), evicted in 10..=50: {} ({evicted}), pushed: {pushed}",
            (200..=300).contains(&dbsize),
            (10..=50).contains(&evicted)
        )
    });
    let ranges = |s: &str| {
        s.split(", ")
            .map(|p| p.split(" (").next().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ranges(&got[0]),
        ranges(&got[1]),
        "redis first, tessera second:\n{}\n{}",
        got[0],
        got[1]
    );
}

/// While clients are paused the dataset stays still: no key is evicted, even when
/// CONFIG SET maxmemory puts the node far over its limit (Redis 7.0's performEvictions
/// returns at once during a pause); eviction resumes when the pause ends.
#[test]
fn no_eviction_while_paused_like_redis() {
    let got = both().map(|s| {
        let mut c = s.resp();
        let mut seen = Vec::new();
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
        let v = "v".repeat(1000);
        for i in 0..200 {
            c.cmd(&["SET", &format!("k{i}"), &v]);
        }
        seen.push(format!(
            "{:?}",
            c.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"])
        ));
        seen.push(format!("{:?}", c.cmd(&["CONFIG", "SET", "maxmemory", "1"])));
        std::thread::sleep(Duration::from_millis(300));
        seen.push(format!("{:?}", c.cmd(&["DBSIZE"])));
        seen.push(format!("{:?}", c.cmd(&["CLIENT", "UNPAUSE"])));
        let mut probe = s.resp();
        wait_until("eviction after the pause", Duration::from_secs(10), || {
            probe.cmd(&["DBSIZE"]) == Reply::Int(0)
        });
        c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        seen.join("\n")
    });
    assert_eq!(got[0], got[1], "redis first, tessera second");
}
