//! Client eviction (maxmemory-clients, CLIENT NO-EVICT, INFO evicted_clients) against
//! redis-server 7.0 (issue 18, unit/client-eviction and the client eviction cases of
//! unit/maxmemory): the same scenario on both servers, outcomes compared.

use std::time::{Duration, Instant};

use tessera_testkit::*;

/// A reply as text ([`R::s`]).
trait IntoR {
    fn into_r(self) -> R;
}

impl IntoR for Reply {
    fn into_r(self) -> R {
        R::from(self)
    }
}

fn both() -> [Server; 2] {
    [Launch::redis(), Launch::tessera()].map(|l| {
        l.args(&["--save", "", "--enable-debug-command", "yes"])
            .start()
    })
}

/// The CLIENT LIST lines, as (name, tot-mem, qbuf).
fn clients(c: &mut Conn) -> Vec<(String, u64, u64)> {
    let list = c.cmd(&["CLIENT", "LIST"]).into_r().s();
    list.lines()
        .map(|l| {
            let f = |k: &str| {
                l.split(' ')
                    .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                    .unwrap_or("")
                    .to_string()
            };
            (
                f("name"),
                f("tot-mem").parse().unwrap_or(0),
                f("qbuf").parse().unwrap_or(0),
            )
        })
        .collect()
}

fn field(c: &mut Conn, name: &str) -> Option<(u64, u64)> {
    clients(c)
        .into_iter()
        .find(|(n, ..)| n == name)
        .map(|(_, t, q)| (t, q))
}

/// A client named `name` that sent `size` bytes of a request's argument (the request is
/// not complete: the bytes wait in its query buffer).
fn big_query(port: u16, name: &str, size: usize) -> Conn {
    let mut c = Conn::connect(port);
    c.line(&format!("CLIENT SETNAME {name}"));
    let mut req = format!("*2\r\n${size}\r\n").into_bytes();
    req.resize(req.len() + size, b'v');
    c.raw_write(&req);
    c
}

/// [`big_query`] for a client the server may evict while the request is still being
/// written: the server closes the connection before it read all of it (Redis evicts as
/// soon as the clients pass the limit), so the rest of the write may fail, which is not
/// an error here.
fn big_query_evicted(port: u16, name: &str, size: usize) -> Conn {
    let mut c = Conn::connect(port);
    c.line(&format!("CLIENT SETNAME {name}"));
    let mut req = format!("*2\r\n${size}\r\n").into_bytes();
    req.resize(req.len() + size, b'v');
    let _ = std::io::Write::write_all(&mut c.w, &req);
    c
}

fn wait_qbuf(c: &mut Conn, name: &str, size: u64) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        match field(c, name) {
            Some((_, q)) if q >= size => return,
            None => return,
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn evicted(c: &mut Conn) -> String {
    info_field(&c.cmd(&["INFO", "stats"]).into_r().s(), "evicted_clients").unwrap_or_default()
}

/// A client whose query buffer takes the clients past maxmemory-clients is evicted (and
/// counted); a CLIENT NO-EVICT one is not. Tessera had no client eviction.
#[test]
fn big_query_buffer_is_evicted_unless_no_evict_like_redis() {
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        c.line("CLIENT SETNAME control");
        c.line("CLIENT NO-EVICT on");
        c.line("CONFIG SET maxmemory-clients 3000000");
        let mut out = Vec::new();
        for (name, no_evict) in [("evictable", false), ("kept", true)] {
            let mut k = Conn::connect(s.port);
            k.line(&format!("CLIENT SETNAME {name}"));
            if no_evict {
                k.line("CLIENT NO-EVICT on");
            }
            let size = 3_000_001;
            let mut req = format!("*1\r\n${size}\r\n").into_bytes();
            req.resize(req.len() + size, b'v');
            // The server may close the connection while this is written.
            let _ = std::io::Write::write_all(&mut k.w, &req);
            wait_qbuf(&mut c, name, size as u64);
            std::thread::sleep(Duration::from_millis(300));
            let f = field(&mut c, name);
            out.push((name, f.map(|(t, _)| t > 3_000_000)));
        }
        out.push((
            "evicted_clients",
            evicted(&mut c).parse().ok().map(|n: u64| n == 1),
        ));
        out
    });
    assert_eq!(
        outcomes[0],
        vec![
            ("evictable", None),
            ("kept", Some(true)),
            ("evicted_clients", Some(true))
        ]
    );
    assert_eq!(outcomes[1], outcomes[0], "redis / tessera");
}

/// Lowering maxmemory-clients evicts at once, the biggest clients first and only as many
/// as needed (sizes a factor of two apart, as Redis's buckets need).
#[test]
fn lowering_the_limit_evicts_biggest_first_like_redis() {
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        c.line("CLIENT SETNAME control");
        c.line("CLIENT NO-EVICT on");
        c.line("DEBUG REPLYBUFFER RESIZING 0");
        let sizes = [
            ("small", 128 * 1024),
            ("medium", 1 << 20),
            ("large", 3 << 20),
        ];
        let mut conns = Vec::new();
        for (name, size) in sizes {
            for j in 0..2 {
                let n = format!("{name}{j}");
                conns.push(big_query(s.port, &n, size));
                wait_qbuf(&mut c, &n, size as u64);
            }
        }
        let mut steps = Vec::new();
        for drop in ["large", "medium", "small"] {
            let list = clients(&mut c);
            let keep: u64 = list
                .iter()
                .filter(|(n, ..)| !n.starts_with(drop))
                .map(|(_, t, _)| t)
                .sum();
            c.line(&format!("CONFIG SET maxmemory-clients {keep}"));
            let mut left: Vec<String> = clients(&mut c)
                .into_iter()
                .map(|(n, ..)| n)
                .filter(|n| !n.is_empty())
                .collect();
            left.sort();
            steps.push(left);
        }
        c.line("DEBUG REPLYBUFFER RESIZING 1");
        steps
    });
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        outcomes[0],
        vec![
            names(&["control", "medium0", "medium1", "small0", "small1"]),
            names(&["control", "small0", "small1"]),
            names(&["control"]),
        ]
    );
    assert_eq!(outcomes[1], outcomes[0], "redis / tessera");
}

/// CLIENT LIST qbuf of a client sending a big argument counts the argument's bytes only:
/// Redis has moved the parsed header out of its query buffer (and sized the buffer for the
/// whole argument, which tot-mem shows). Tessera counted the header too.
#[test]
fn big_argument_in_flight_is_counted_like_redis() {
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        let _k = big_query(s.port, "inflight", 100_000);
        wait_qbuf(&mut c, "inflight", 100_000);
        field(&mut c, "inflight").map(|(t, q)| (q, t >= 100_000))
    });
    assert_eq!(outcomes[0], Some((100_000, true)));
    assert_eq!(outcomes[1], outcomes[0], "tessera / redis");
}

/// A client holding a 1 MB argument (still arriving, or complete with the request waiting
/// for its next argument) shows about 1 MB of tot-mem, every time: Redis sizes the buffer
/// to the argument and reads only what is left of it. Tessera asked for 16 KiB more room
/// when the argument's last bytes came after the buffer had its size, and doubled it (a
/// release build in about one try of three of unit/client-eviction's 'evict clients only
/// until below limit' and 'client evicted due to percentage of maxmemory'; the unit test
/// `conn::tests::big_argument_room_is_not_doubled` pins the read pattern).
#[test]
fn big_argument_buffer_is_sized_to_the_argument_like_redis() {
    const SIZE: usize = 1 << 20;
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        c.line("CLIENT SETNAME control");
        let mut held = Vec::new();
        let mut mems = Vec::new();
        for (i, tail) in ["", "\r\n"].iter().cycle().take(16).enumerate() {
            let name = format!("big{i}");
            let mut k = Conn::connect(s.port);
            k.line(&format!("CLIENT SETNAME {name}"));
            let mut req = format!("*2\r\n${SIZE}\r\n").into_bytes();
            req.resize(req.len() + SIZE, b'v');
            req.extend_from_slice(tail.as_bytes());
            k.raw_write(&req);
            held.push(k);
            let start = Instant::now();
            let mut tot = 0;
            while start.elapsed() < Duration::from_secs(10) {
                // All of it read: in the query buffer, or (complete) moved to the arguments.
                let (t, q) = field(&mut c, &name).unwrap_or((0, 1));
                tot = t;
                let read = if tail.is_empty() {
                    q >= SIZE as u64
                } else {
                    q == 0
                };
                if t >= SIZE as u64 && read {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            mems.push(tot);
        }
        // Each shape the same every time (the unit sets its limits from one client's
        // figure), and never less than the argument.
        let even = |shape: usize| {
            let m: Vec<u64> = mems.iter().copied().skip(shape).step_by(2).collect();
            let (lo, hi) = (m.iter().min().copied(), m.iter().max().copied());
            let (lo, hi) = (lo.unwrap_or(0), hi.unwrap_or(0));
            lo >= SIZE as u64 && hi as f64 / lo.max(1) as f64 <= 1.01
        };
        ((even(0), even(1)), mems.iter().max().copied().unwrap_or(0))
    });
    // Redis (jemalloc) shows 1.27 MB for the argument still arriving and 2.3 MB once it is
    // complete (argument plus a fresh buffer of its size); tessera 1.02 MB for both.
    let [(redis, redis_hi), (tessera, tessera_hi)] = outcomes;
    assert_eq!(redis, (true, true), "redis-server");
    assert_eq!(tessera, redis, "tessera / redis");
    assert!(
        tessera_hi <= redis_hi,
        "tessera holds {tessera_hi} B, redis {redis_hi} B"
    );
}

/// After a request of 100000 arguments, what the connection held for it (argument view,
/// query buffer) is given back, as Redis frees a command's argv and resizes its query
/// buffer: used_memory goes back near where it was (unit/lazyfree's UNLINK test). Tessera
/// kept the argument view's 1.6 MB for the life of the connection.
#[test]
fn many_argument_request_memory_is_given_back_like_redis() {
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        let used = |c: &mut Conn| -> u64 {
            info_field(&c.cmd(&["INFO", "memory"]).into_r().s(), "used_memory")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let orig = used(&mut c);
        let mut args = vec!["SADD".to_string(), "myset".to_string()];
        args.extend((0..100_000).map(|i| i.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        c.cmd(&refs);
        c.cmd(&["UNLINK", "myset"]);
        let start = Instant::now();
        let mut back = false;
        while !back && start.elapsed() < Duration::from_secs(5) {
            back = used(&mut c) < orig * 2;
            std::thread::sleep(Duration::from_millis(100));
        }
        back
    });
    assert!(outcomes[0]);
    assert_eq!(outcomes[1], outcomes[0], "tessera / redis");
}

/// Clients closed by their output limit are gone before eviction looks (their memory no
/// longer counts), and a big argument still arriving keeps its room: the client holding
/// it is not evicted (unit/client-eviction 'avoid client eviction when client is freed by
/// output buffer limit'). Tessera evicted it, then the control client.
#[test]
fn output_limit_closes_before_eviction_like_redis() {
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        c.line("CONFIG SET maxmemory-clients 10485760");
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 3145728 0 0",
        ]);
        c.line("SETRANGE k 4194304 v");
        let qbsize = 10485760 - 4194305;
        let _q = big_query(s.port, "qbuf-client", qbsize);
        wait_qbuf(&mut c, "qbuf-client", qbsize as u64);
        let mut readers: Vec<Conn> = (0..2).map(|_| Conn::connect(s.port)).collect();
        for r in &mut readers {
            r.send(&["GET", "k"]);
        }
        let closed: Vec<bool> = readers.iter_mut().map(|r| r.closed()).collect();
        (closed, field(&mut c, "qbuf-client").is_some())
    });
    assert_eq!(outcomes[0], (vec![true, true], true));
    assert_eq!(outcomes[1], outcomes[0], "tessera / redis");
}

/// An INFO stats counter as a number (0 when missing).
fn stat(c: &mut Conn, name: &str) -> u64 {
    info_field(&c.cmd(&["INFO", "stats"]).into_r().s(), name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Polls `name` until it is at least 1 (bounded).
fn wait_stat(c: &mut Conn, name: &str, poke: impl Fn(&mut Conn)) -> u64 {
    let start = Instant::now();
    loop {
        let v = stat(c, name);
        if v > 0 || start.elapsed() > Duration::from_secs(10) {
            return v;
        }
        poke(c);
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// CONFIG RESETSTAT zeroes evicted_clients and reply_buffer_shrinks / _expands as Redis's
/// resetServerStats does; tessera kept them.
#[test]
fn resetstat_zeroes_client_counters_like_redis() {
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        c.line("CLIENT SETNAME control");
        c.line("CLIENT NO-EVICT on");
        c.cmd(&["SET", "bigval", &"x".repeat(32768)]);
        c.line("DEBUG REPLYBUFFER PEAK-RESET-TIME 100");
        let shrinks = wait_stat(&mut c, "reply_buffer_shrinks", |_| {});
        let expands = wait_stat(&mut c, "reply_buffer_expands", |c| {
            c.line("GET bigval");
        });
        c.line("CONFIG SET maxmemory-clients 3000000");
        let _big = big_query_evicted(s.port, "evictable", 3_000_001);
        let evicted = wait_stat(&mut c, "evicted_clients", |_| {});
        // No more resizing, so nothing counts again after the reset.
        c.line("DEBUG REPLYBUFFER RESIZING 0");
        c.line("CONFIG RESETSTAT");
        let after: Vec<u64> = [
            "evicted_clients",
            "reply_buffer_shrinks",
            "reply_buffer_expands",
        ]
        .map(|n| stat(&mut c, n))
        .to_vec();
        c.line("DEBUG REPLYBUFFER RESIZING 1");
        c.line("DEBUG REPLYBUFFER PEAK-RESET-TIME reset");
        ((shrinks > 0, expands > 0, evicted > 0), after)
    });
    assert_eq!(outcomes[0], ((true, true, true), vec![0, 0, 0]));
    assert_eq!(outcomes[1], outcomes[0], "redis / tessera");
}

/// unit/maxmemory's client-eviction cases fill 5 MB under an 11 MB maxmemory and expect
/// clients (3 MB) to be evicted before any key: the room between the data and maxmemory
/// must be Redis's. It was not while the command table's statistics were allocated up
/// front (1.1 MB more used_memory than redis-server, and keys evicted now and then).
#[test]
fn used_memory_leaves_the_room_redis_leaves() {
    let used = both().map(|s| {
        let mut c = Conn::connect(s.port);
        for j in 0..50 {
            c.cmd(&["SETRANGE", &j.to_string(), "100000", "x"]);
        }
        let used: u64 = s
            .info("memory", "used_memory")
            .and_then(|v| v.parse().ok())
            .expect("used_memory");
        used
    });
    let [theirs, ours] = used;
    println!("used_memory with 50 x 100 KB: redis-server {theirs}, tessera-node {ours}");
    // A few percent for allocator size classes and thread caches.
    assert!(
        ours <= theirs + theirs / 20,
        "tessera-node uses {ours} bytes, redis-server {theirs}"
    );
}
