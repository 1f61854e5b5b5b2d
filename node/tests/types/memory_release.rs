//! Freed memory goes back to the OS: after FLUSHALL (sync and async) of tens of MB, an idle
//! node's RSS falls back near where it started, as redis-server's does (jemalloc's decay);
//! MEMORY PURGE answers OK; used_memory_peak keeps the high-water mark until CONFIG
//! RESETSTAT.

use std::time::{Duration, Instant};
use tessera_testkit::diff::*;

fn memory_field(c: &mut Conn, field: &str) -> u64 {
    let Reply::Bulk(b) = c.cmd(&["INFO", "memory"]) else {
        panic!("INFO memory");
    };
    String::from_utf8_lossy(&b)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_owned))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field}"))
}

fn rss(c: &mut Conn) -> u64 {
    memory_field(c, "used_memory_rss")
}

fn load(c: &mut Conn, n: usize) {
    let mut bytes = Vec::new();
    let value = "v".repeat(100);
    for i in 0..n {
        let key = format!("key:{i}");
        bytes.extend(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
                key.len(),
                value.len()
            )
            .as_bytes(),
        );
    }
    let replies = c.pipeline(bytes, n);
    assert!(replies.iter().all(|r| *r == Reply::Simple("OK".into())));
}

/// Polls RSS until it is below `limit` (the purge runs once a second); panics after 30 s.
fn wait_rss_below(c: &mut Conn, limit: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = rss(c);
        if now < limit {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: RSS still {now} bytes, expected below {limit}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn flushed_memory_returns_to_the_os() {
    let t = tessera_with(&["--save", "", "--appendonly", "no"]);
    let mut c = Conn::connect(t.port);
    let base = rss(&mut c);
    for flush in [&["FLUSHALL"][..], &["FLUSHALL", "ASYNC"][..]] {
        load(&mut c, 200_000);
        let full = rss(&mut c);
        assert!(
            full > base + 30_000_000,
            "200k keys of 100 bytes: RSS {full}, started at {base}"
        );
        let used_full = memory_field(&mut c, "used_memory");
        assert_eq!(c.cmd(flush), Reply::Simple("OK".into()));
        wait_rss_below(&mut c, base + (full - base) / 3, flush.join(" ").as_str());
        let peak = memory_field(&mut c, "used_memory_peak");
        assert!(
            peak >= used_full,
            "peak {peak} < {used_full} before the flush"
        );
    }
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), Reply::Simple("OK".into()));
    let peak = memory_field(&mut c, "used_memory_peak");
    assert!(
        peak < 20_000_000,
        "peak {peak} after RESETSTAT on an empty node"
    );
    assert_eq!(c.cmd(&["MEMORY", "PURGE"]), Reply::Simple("OK".into()));
}
