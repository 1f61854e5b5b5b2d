//! What a client's memory counts (maxmemory-clients, used_memory) against redis-server 7.0
//! (issue 18: unit/client-eviction, unit/maxmemory): the same scenario on both servers,
//! outcomes compared.

use tessera_testkit::*;

fn both() -> [Server; 2] {
    [Launch::redis(), Launch::tessera()].map(|l| {
        l.args(&["--save", "", "--enable-debug-command", "yes"])
            .start()
    })
}

/// Sends a command and reads its one-line reply: false once the server closed the
/// connection (the write or the read fails).
fn answered(c: &mut Conn, args: &[&str]) -> bool {
    use std::io::{BufRead, Write};
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    if c.w.write_all(&encode(&a)).is_err() {
        return false;
    }
    let mut line = String::new();
    match c.r.read_line(&mut line) {
        Ok(n) if n > 0 => {
            assert!(line.starts_with('+'), "{args:?} -> {line}");
            true
        }
        _ => false,
    }
}

/// A client adding CLIENT TRACKING BCAST prefixes one command at a time is evicted once
/// they take the clients past maxmemory-clients, after about as many prefixes as Redis
/// takes (unit/client-eviction 'client evicted due to client tracking prefixes'). Tessera
/// did not count prefixes: the client was never evicted, and checking each new prefix
/// against all of them made the unit's 200,000 commands run for hours.
#[test]
fn tracking_prefixes_count_for_client_eviction_like_redis() {
    const LIMIT: usize = 200_000;
    // Far more than either server needs (redis-server: about 4,400).
    const MAX: usize = 20_000;
    let counts = both().map(|s| {
        let mut c = Conn::connect(s.port);
        c.line("CLIENT NO-EVICT on");
        c.line(&format!("CONFIG SET maxmemory-clients {LIMIT}"));
        let mut t = Conn::connect(s.port);
        let mut n = 0;
        while n < MAX {
            let p = format!("{n:012}");
            if !answered(&mut t, &["CLIENT", "TRACKING", "on", "PREFIX", &p, "BCAST"]) {
                break;
            }
            n += 1;
        }
        n
    });
    let [redis, tessera] = counts;
    assert!(redis < MAX, "redis-server evicted the client after {redis}");
    assert!(
        tessera < MAX,
        "tessera evicted the client after {tessera} prefixes (redis-server: {redis})"
    );
    let (lo, hi) = (redis * 3 / 4, redis * 5 / 4);
    assert!(
        (lo..=hi).contains(&tessera),
        "tessera evicted after {tessera} prefixes, redis-server after {redis}"
    );
}

/// The CLIENT LIST field `field` of the client called `name`.
fn client_field(c: &mut Conn, name: &str, field: &str) -> Option<u64> {
    let list = R::from(c.cmd(&["CLIENT", "LIST"])).s();
    let line = list
        .lines()
        .find(|l| l.split(' ').any(|kv| kv == format!("name={name}")))?;
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{field}=")))
        .and_then(|v| v.parse().ok())
}

/// Once a 100 KB reply is written, the client holds about what an idle one does: Redis
/// frees the reply's blocks as they go out. Tessera kept the output buffer's grown
/// allocation (up to 1 MiB) and counted it, so 20 clients that had each read one such
/// reply were evicted as if they still held 200 KB each (unit/maxmemory 'eviction due to
/// output buffers of many MGET clients, client eviction: true').
#[test]
fn written_big_reply_is_given_back_like_redis() {
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        c.line("SETRANGE big 100000 x");
        let mut r = Conn::connect(s.port);
        r.line("CLIENT SETNAME reader");
        let idle = client_field(&mut c, "reader", "tot-mem").unwrap_or(0);
        let got = r.cmd(&["GET", "big"]);
        assert!(matches!(got, Reply::Bulk(ref v) if v.len() == 100_001));
        // The reply is read: it was written whole.
        let after = client_field(&mut c, "reader", "tot-mem").unwrap_or(u64::MAX);
        (idle > 0, after < idle + 32 * 1024)
    });
    assert_eq!(outcomes[0], (true, true));
    assert_eq!(outcomes[1], outcomes[0], "redis / tessera");
}
