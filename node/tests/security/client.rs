//! Hostile input: client (issue 15).
//!
//! Query-buffer exhaustion (client-query-buffer-limit, proto-max-bulk-len), admission
//! (maxclients and protected mode before a busy script's hook can serve a connection),
//! constant-time password checks and peer-controlled numbers (RESTORE, MIGRATE).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tessera_testkit::*;

/// A server (tessera-node or redis-server) with its own log file.
fn start(bin: &str, extra: &[&str]) -> Server {
    Launch::new(bin)
        .args(&["--save", ""])
        .args(extra)
        .logfile()
        .start()
}

fn connect(srv: &Server) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", srv.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    s.set_write_timeout(Some(Duration::from_secs(10)))
        .expect("write timeout");
    s
}

/// A `/proc/<pid>/status` field in kB (VmRSS, VmHWM).
fn status_kb(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} missing from /proc/{pid}/status"))
}

/// Writes `total` bytes of `pattern` repeated (in 64 KiB chunks) until done or the server
/// closes the connection. Returns the bytes written.
fn flood(s: &mut TcpStream, pattern: &[u8], total: usize) -> usize {
    let chunk: Vec<u8> = pattern
        .iter()
        .copied()
        .cycle()
        .take((64 * 1024 / pattern.len()) * pattern.len())
        .collect();
    let mut sent = 0;
    while sent < total {
        match s.write_all(&chunk) {
            Ok(()) => sent += chunk.len(),
            Err(_) => break,
        }
    }
    sent
}

/// Reads until the server closes the connection (EOF or reset): the bytes it sent, or
/// None if it is still open after 10 s.
fn drain_until_closed(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return Some(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {
                return Some(got)
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Some(got),
        }
    }
    None
}

fn ping(srv: &Server) -> Vec<u8> {
    let mut s = connect(srv);
    s.write_all(b"PING\r\n").expect("ping");
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).expect("pong");
    buf.to_vec()
}

/// Whether the server's log contains `needle` within 5 s (logging may lag the close).
fn log_has(srv: &Server, needle: &str) -> bool {
    let path = srv.log_path().expect("log file");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if std::fs::read_to_string(&path).is_ok_and(|t| t.contains(needle)) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

const QBUF_LOG: &str = "Closing client that reached max query buffer length";

/// `*2147483647` followed by 40 MiB of empty arguments, with a 1 MB limit: the parsed
/// arguments of the partial request count against client-query-buffer-limit, so the
/// attacker is cut off after about a megabyte instead of making the node hold 40 MiB of
/// input and ~7 M argument spans (240 MB). redis-server 7.0.15 is not a model here: it
/// moves parsed arguments out of its query buffer and keeps such a client (its RSS grew
/// 66 MB for 10 MiB when measured); later Redis versions bound it with client eviction.
#[test]
fn huge_multibulk_of_empty_args_is_cut_off() {
    let srv = start(tessera_bin(), &["--client-query-buffer-limit", "1mb"]);
    let pid = srv.pid();
    let before = status_kb(pid, "VmHWM");
    let mut s = connect(&srv);
    s.write_all(b"*2147483647\r\n").expect("header");
    let sent = flood(&mut s, b"$0\r\n\r\n", 40 << 20);
    let reply = drain_until_closed(&mut s);
    let after = status_kb(pid, "VmHWM");
    assert_eq!(
        reply.as_deref(),
        Some(&b""[..]),
        "the attacker is closed without a reply (sent {sent} bytes)"
    );
    assert!(
        sent < 40 << 20,
        "the node took all 40 MiB instead of closing the connection"
    );
    assert!(
        after.saturating_sub(before) < 100 * 1024,
        "peak RSS grew from {before} kB to {after} kB"
    );
    assert_eq!(ping(&srv), b"+PONG\r\n");
    assert!(log_has(&srv, QBUF_LOG), "the close is logged");
}

/// What one server did with 8 clients each sending 24 MiB of a declared 512 MB bulk:
/// (closed, reply bytes) per client, and whether the log names the limit.
fn partial_big_bulks(srv: &Server) -> (Vec<(bool, Vec<u8>)>, bool) {
    let mut conns: Vec<TcpStream> = (0..8).map(|_| connect(srv)).collect();
    let header = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\n";
    let mut seen = Vec::new();
    for s in &mut conns {
        s.write_all(header).expect("header");
        flood(s, b"x", 24 << 20);
    }
    for s in &mut conns {
        let r = drain_until_closed(s);
        seen.push((r.is_some(), r.unwrap_or_default()));
    }
    (seen, log_has(srv, QBUF_LOG))
}

/// Eight clients each holding part of a 512 MB bulk with a 1 MB limit are each closed
/// once their buffered input passes the limit, silently and logged, as redis-server does;
/// the node's peak RSS stays far from the 192 MiB they sent.
#[test]
fn partial_huge_bulks_are_cut_off_like_redis() {
    let redis = start(redis_bin(), &["--client-query-buffer-limit", "1mb"]);
    let want = partial_big_bulks(&redis);
    drop(redis);
    let srv = start(tessera_bin(), &["--client-query-buffer-limit", "1mb"]);
    let before = status_kb(srv.pid(), "VmHWM");
    let got = partial_big_bulks(&srv);
    let after = status_kb(srv.pid(), "VmHWM");
    assert_eq!(got, want, "(closed, reply) per client and the log line");
    assert!(
        want.0.iter().all(|(closed, _)| *closed),
        "redis closes them"
    );
    assert!(
        after.saturating_sub(before) < 100 * 1024,
        "peak RSS grew from {before} kB to {after} kB"
    );
    assert_eq!(ping(&srv), b"+PONG\r\n");
}

/// A client blocked in BLPOP keeps reading: what it sends meanwhile counts against the
/// limit too (redis reads into the query buffer of a blocked client and checks it).
#[test]
fn blocked_client_input_is_limited_like_redis() {
    let run = |bin: &str| {
        let srv = start(bin, &["--client-query-buffer-limit", "1mb"]);
        let mut s = connect(&srv);
        s.write_all(&encode(&[b"BLPOP", b"nokey", b"0"]))
            .expect("blpop");
        std::thread::sleep(Duration::from_millis(200));
        // Complete pipelined requests, buffered behind the blocked one.
        let sent = flood(&mut s, &encode(&[b"SET", b"k", b"0123456789"]), 64 << 20);
        let r = drain_until_closed(&mut s);
        (sent < 64 << 20, r, log_has(&srv, QBUF_LOG), ping(&srv))
    };
    let want = run(redis_bin());
    assert!(want.0, "redis closes the blocked flooder: {want:?}");
    assert_eq!(run(tessera_bin()), want);
}

/// A bulk length above proto-max-bulk-len is refused when its header arrives, before any
/// of the body: the reply and the close match redis-server.
#[test]
fn bulk_length_over_proto_max_is_refused_before_the_body() {
    let run = |bin: &str| {
        let srv = start(bin, &["--proto-max-bulk-len", "1mb"]);
        let mut s = connect(&srv);
        s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048577\r\n")
            .expect("header");
        drain_until_closed(&mut s)
    };
    let want = run(redis_bin());
    assert_eq!(
        want.as_deref(),
        Some(&b"-ERR Protocol error: invalid bulk length\r\n"[..])
    );
    assert_eq!(run(tessera_bin()), want);
}

/// A script that loops until SCRIPT KILL.
const LOOP: &str = "while true do end";

/// Admission happens before a connection is visible to a busy script's hook: with the
/// I/O thread held in DEBUG SLEEP, the script's caller and a connection over maxclients
/// queue for it; the script then starts before the intruder's task ever runs. The intruder
/// (whose SHUTDOWN NOSAVE is already waiting in its socket) gets redis's
/// "max number of clients" error and its SHUTDOWN never runs, where the hook used to serve
/// it and stop the node.
#[test]
fn connection_over_maxclients_is_refused_before_a_busy_script_serves_it() {
    let mut srv = start(
        tessera_bin(),
        &[
            "--worker-threads",
            "1",
            "--maxclients",
            "2",
            "--busy-reply-threshold",
            "100",
            "--enable-debug-command",
            "yes",
        ],
    );
    let mut sleeper = connect(&srv);
    sleeper
        .write_all(&encode(&[b"DEBUG", b"SLEEP", b"1"]))
        .expect("debug sleep");
    std::thread::sleep(Duration::from_millis(200));
    let mut caller = connect(&srv);
    caller
        .write_all(&encode(&[b"EVAL", LOOP.as_bytes(), b"0"]))
        .expect("eval");
    std::thread::sleep(Duration::from_millis(100));
    let mut intruder = connect(&srv);
    intruder
        .write_all(&encode(&[b"SHUTDOWN", b"NOSAVE"]))
        .expect("shutdown");
    let mut line = [0u8; 64];
    let n = {
        let mut got = Vec::new();
        while !got.ends_with(b"\r\n") {
            match intruder.read(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&line[..n]),
            }
        }
        got
    };
    // Let the script pass the threshold: the hook would serve the intruder by now.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        srv.child.try_wait().ok().flatten().is_none(),
        "the node exited: the over-limit connection's SHUTDOWN ran"
    );
    assert_eq!(
        String::from_utf8_lossy(&n),
        "-ERR max number of clients reached\r\n"
    );
    // The sleeper (admitted, on the script's thread) is served by the hook: SCRIPT KILL.
    let mut ok = [0u8; 5];
    sleeper.read_exact(&mut ok).expect("DEBUG SLEEP's +OK");
    sleeper
        .write_all(&encode(&[b"SCRIPT", b"KILL"]))
        .expect("script kill");
    let mut reply = [0u8; 5];
    sleeper.read_exact(&mut reply).expect("SCRIPT KILL's reply");
    assert_eq!(&reply, b"+OK\r\n");
    let mut killed = [0u8; 1];
    caller.read_exact(&mut killed).expect("EVAL's reply");
    assert_eq!(&killed, b"-", "the script was killed");
    // A client that had just closed does not count at admission (the case 3872276 fixed):
    // its slot is free for the very next connection.
    drop(caller);
    let mut held = connect(&srv);
    held.write_all(b"PING\r\n").expect("ping");
    let mut pong = [0u8; 7];
    held.read_exact(&mut pong).expect("pong");
    assert_eq!(&pong, b"+PONG\r\n");
    let mut third = connect(&srv);
    third.write_all(b"PING\r\n").expect("ping");
    let mut b = [0u8; 36];
    third.read_exact(&mut b).expect("refusal");
    assert_eq!(&b, b"-ERR max number of clients reached\r\n");
}

/// AUTH and HELLO AUTH compare passwords in constant time (digests, not a byte loop that
/// stops at the first difference); the answers stay redis's for right and wrong passwords
/// of equal, shorter and longer length, and empty ones.
#[test]
fn auth_answers_match_redis() {
    let tries: &[&[&str]] = &[
        &["AUTH", "s3cret"],
        &["AUTH", "s3creX"],
        &["AUTH", "S3cret"],
        &["AUTH", "s3c"],
        &["AUTH", "s3cret-and-more"],
        &["AUTH", ""],
        &["AUTH", "default", "s3cret"],
        &["AUTH", "default", "s3cre"],
        &["AUTH", "nobody", "s3cret"],
        &["HELLO", "2", "AUTH", "default", "s3cret"],
        &["HELLO", "2", "AUTH", "default", "s3creT"],
        &["HELLO", "2", "AUTH", "default", ""],
    ];
    let run = |bin: &str| {
        let srv = start(bin, &["--requirepass", "s3cret"]);
        tries
            .iter()
            .map(|args| {
                let mut c = Raw::connect(srv.port);
                let r = c.cmd(args);
                let after = c.cmd(&["PING"]);
                // HELLO's map names the server and its version: only its shape matters.
                let r = match r {
                    R::Arr(v) => format!("array of {}", v.len()),
                    other => other.s(),
                };
                format!("{args:?} -> {r} then {}", after.s())
            })
            .collect::<Vec<_>>()
    };
    let want = run(redis_bin());
    assert_eq!(run(tessera_bin()), want);
}

/// A reply rendered for comparison (RESP2), or the connection's fate.
fn show(c: &mut Raw, args: &[&[u8]]) -> String {
    c.send(&encode(args));
    c.read().s()
}

/// A DUMP payload of a two-entry stream with two groups, taken from redis-server, with its
/// metadata rewritten by `edit` (what an attacker controls in RESTORE).
fn crafted_stream(redis_port: u16, edit: impl Fn(&mut tessera_rdb::RdbStream)) -> Vec<u8> {
    let mut c = Raw::connect(redis_port);
    c.cmd(&["DEL", "src"]);
    c.cmd(&["XADD", "src", "1-1", "a", "1"]);
    c.cmd(&["XADD", "src", "2-1", "b", "2"]);
    c.cmd(&["XGROUP", "CREATE", "src", "g0", "0"]);
    c.cmd(&["XGROUP", "CREATE", "src", "gend", "$"]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g0",
        "alice",
        "COUNT",
        "1",
        "STREAMS",
        "src",
        ">",
    ]);
    let R::Bulk(payload) = c.cmd(&["DUMP", "src"]) else {
        panic!("DUMP");
    };
    let mut v = tessera_rdb::restore_value(&payload).expect("redis's payload");
    let tessera_rdb::RdbValue::Stream(s) = &mut v else {
        panic!("not a stream");
    };
    edit(s);
    tessera_rdb::dump_value(&v)
}

/// Stream metadata from RESTORE is the peer's: entries_added below the length, a
/// max_deleted_entry_id above the last ID, or counters near 2^64 must not make the node's
/// lag / entries-read arithmetic overflow (a panic, or a wrapped lie). Redis 7.0.15 loads
/// such payloads (its rdbLoad checks neither); the replies of RESTORE and of everything
/// that reads the counters are compared with redis-server's.
#[test]
fn restored_stream_counters_match_redis() {
    let redis = start(redis_bin(), &[]);
    let node = start(tessera_bin(), &[]);
    let max_id = tessera_rdb::StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "added 0",
            crafted_stream(redis.port, |s| s.entries_added = 0),
        ),
        (
            "added 1 < len 2",
            crafted_stream(redis.port, |s| s.entries_added = 1),
        ),
        (
            "added max",
            crafted_stream(redis.port, |s| s.entries_added = u64::MAX),
        ),
        (
            "max deleted above last",
            crafted_stream(redis.port, |s| {
                s.max_deleted_id = tessera_rdb::StreamId { ms: 99, seq: 0 }
            }),
        ),
        (
            "first id above last",
            crafted_stream(redis.port, |s| s.first_id = max_id),
        ),
        (
            "group read max",
            crafted_stream(redis.port, |s| {
                for g in &mut s.groups {
                    g.entries_read = i64::MAX;
                }
            }),
        ),
        (
            "group read min",
            crafted_stream(redis.port, |s| {
                for g in &mut s.groups {
                    g.entries_read = i64::MIN + 1;
                }
                s.entries_added = u64::MAX / 2;
            }),
        ),
    ];
    let run = |port: u16| {
        let mut c = Raw::connect(port);
        let mut seen = Vec::new();
        for (name, payload) in &cases {
            c.cmd(&["DEL", "s"]);
            let mut one = vec![name.to_string()];
            one.push(show(&mut c, &[b"RESTORE", b"s", b"0", payload]));
            one.push(show(&mut c, &[b"XINFO", b"GROUPS", b"s"]));
            one.push(show(&mut c, &[b"XINFO", b"STREAM", b"s"]).replace("\n", " "));
            one.push(
                show(&mut c, &[b"XADD", b"s", b"*", b"f", b"v"])
                    .len()
                    .to_string(),
            );
            one.push(show(&mut c, &[b"XINFO", b"GROUPS", b"s"]));
            one.push(show(&mut c, &[b"XDEL", b"s", b"1-1"]));
            one.push(show(&mut c, &[b"XINFO", b"GROUPS", b"s"]));
            one.push(show(&mut c, &[b"PING"]));
            seen.push(one);
        }
        seen
    };
    let want = run(redis.port);
    let got = run(node.port);
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w);
    }
}

/// RESTORE's TTL, ABSTTL, IDLETIME and FREQ with negative, huge and boundary values:
/// replies as redis-server's, and the node keeps running (no overflow on the way).
#[test]
fn restore_numbers_match_redis() {
    let redis = start(redis_bin(), &[]);
    let mut r = Raw::connect(redis.port);
    r.cmd(&["SET", "src", "v"]);
    let R::Bulk(payload) = r.cmd(&["DUMP", "src"]) else {
        panic!("DUMP");
    };
    let max = i64::MAX.to_string();
    let min = i64::MIN.to_string();
    let tries: Vec<Vec<&str>> = vec![
        vec!["-1"],
        vec![&min],
        vec!["0", "IDLETIME", &max],
        vec!["0", "IDLETIME", "-1"],
        vec!["0", "IDLETIME", "9223372036854775"],
        vec!["0", "IDLETIME", "9223372036854776"],
        vec!["0", "FREQ", "256"],
        vec!["0", "FREQ", "-1"],
        vec!["0", "FREQ", &max],
        vec!["1000", "ABSTTL"],
        vec!["-5", "ABSTTL"],
        vec!["99999999999999", "IDLETIME", "5"],
    ];
    let run = |port: u16, policy: &str| {
        let mut c = Raw::connect(port);
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", policy]);
        tries
            .iter()
            .map(|t| {
                c.cmd(&["DEL", "k"]);
                let mut args: Vec<&[u8]> = vec![b"RESTORE", b"k"];
                args.push(t[0].as_bytes());
                args.push(&payload);
                args.extend(t[1..].iter().map(|a| a.as_bytes()));
                args.push(b"REPLACE");
                let reply = show(&mut c, &args);
                let exists = show(&mut c, &[b"EXISTS", b"k"]);
                format!(
                    "{t:?} -> {reply}, exists {exists}, then {}",
                    show(&mut c, &[b"PING"])
                )
            })
            .collect::<Vec<_>>()
    };
    for policy in ["noeviction", "allkeys-lfu"] {
        let want = run(redis.port, policy);
        let node = start(tessera_bin(), &[]);
        assert_eq!(run(node.port, policy), want, "{policy}");
    }
    // The idle time a key is restored with is what OBJECT IDLETIME reports, also when it
    // is longer than the node has been up; a huge one reads as very idle, as in redis
    // (~97 days there: half its LRU clock; half of ours is ~24 days).
    let node = start(tessera_bin(), &[]);
    for port in [redis.port, node.port] {
        let mut c = Raw::connect(port);
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
        let idle = |c: &mut Raw, secs: &str| {
            c.cmd(&["DEL", "k"]);
            let r = show(
                c,
                &[
                    b"RESTORE",
                    b"k",
                    b"0",
                    &payload,
                    b"IDLETIME",
                    secs.as_bytes(),
                ],
            );
            assert_eq!(r, "OK");
            match c.cmd(&["OBJECT", "IDLETIME", "k"]) {
                R::Int(n) => n,
                other => panic!("OBJECT IDLETIME: {other:?}"),
            }
        };
        let n = idle(&mut c, "100");
        assert!(
            (100..=102).contains(&n),
            "port {port}: IDLETIME 100 read back as {n}"
        );
        let n = idle(&mut c, &max);
        assert!(n >= 1_000_000, "port {port}: IDLETIME max read back as {n}");
    }
}

/// A client that closes just before the next one connects frees its maxclients slot for it,
/// as on redis-server (one event loop: the close is seen first), even when the two land on
/// different I/O threads and the closing one's thread has not run yet. And the limit still
/// holds: with the slot taken, the newcomer is refused, on both servers.
#[test]
fn a_slot_freed_just_before_a_connect_is_given_to_it_like_redis() {
    for bin in [redis_bin(), tessera_bin()] {
        let extra: &[&str] = if bin == tessera_bin() {
            &["--maxclients", "2", "--worker-threads", "2"]
        } else {
            &["--maxclients", "2"]
        };
        let srv = start(bin, extra);
        let mut held = connect(&srv);
        held.write_all(b"PING\r\n").expect("ping");
        let mut pong = [0u8; 7];
        held.read_exact(&mut pong).expect("pong");
        let mut refused = 0;
        for _ in 0..200 {
            let mut a = connect(&srv);
            a.write_all(b"PING\r\n").expect("ping");
            let mut r = [0u8; 7];
            a.read_exact(&mut r).expect("first client's reply");
            assert_eq!(&r, b"+PONG\r\n", "{bin}: a client under the limit");
            drop(a);
            let mut b = connect(&srv);
            b.write_all(b"PING\r\n").expect("ping");
            let mut r = [0u8; 7];
            b.read_exact(&mut r).expect("next client's reply");
            if &r != b"+PONG\r\n" {
                refused += 1;
            }
        }
        assert_eq!(
            refused, 0,
            "{bin}: refused after the previous client closed"
        );
        // Full: a third client is refused.
        let _b = {
            let mut b = connect(&srv);
            b.write_all(b"PING\r\n").expect("ping");
            let mut r = [0u8; 7];
            b.read_exact(&mut r).expect("pong");
            assert_eq!(&r, b"+PONG\r\n");
            b
        };
        let mut c = connect(&srv);
        let mut e = [0u8; 36];
        c.read_exact(&mut e).expect("refusal");
        assert_eq!(&e, b"-ERR max number of clients reached\r\n", "{bin}");
    }
}
