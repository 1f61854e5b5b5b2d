//! Hostile input: repl (issue 15). Any client can point a node at a master of its choosing
//! with REPLICAOF. A fake master on a loopback listener answers the replica's handshake and
//! then sends what each case scripts: the replica must drop the link with a logged error
//! and retry later, never reserve memory from a declared length, never panic or abort.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use tessera_testkit::*;

const ID: &str = "3b2f6c5a1e0d9f8a7b6c5d4e3f2a1b0c9d8e7f6a";
/// An RDB with no keys (RDB version 9, checksum disabled).
const EMPTY_RDB: &[u8] = b"REDIS0009\xff\0\0\0\0\0\0\0\0";
/// How long the replica may take to notice a bad reply and hang up (it never waits for
/// repl-timeout, which the tests leave at its 60 s default).
const DROP_WITHIN: Duration = Duration::from_secs(15);
/// The brief's bound on the replica's resident memory.
const RSS_LIMIT_KB: u64 = 200 * 1024;

/// A replica (with a log file) pointed at a fake master listening on loopback.
struct Setup {
    node: Server,
    master: TcpListener,
}

fn setup() -> Setup {
    setup_with(&[])
}

fn setup_with(extra: &[&str]) -> Setup {
    let master = TcpListener::bind("127.0.0.1:0").expect("bind fake master");
    let port = master.local_addr().expect("addr").port();
    let node = Launch::new(tessera_bin())
        .args(&["--save", ""])
        .args(extra)
        .logfile()
        .start();
    let mut c = Raw::connect(node.port);
    let r = c.cmd(&["REPLICAOF", "127.0.0.1", &port.to_string()]);
    assert_eq!(r, R::Simple("OK".into()));
    Setup { node, master }
}

/// The replica's next connection to the fake master (bounded wait).
fn accept(l: &TcpListener) -> TcpStream {
    l.set_nonblocking(true).expect("nonblocking");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).expect("blocking");
                s.set_read_timeout(Some(Duration::from_secs(10)))
                    .expect("timeout");
                s.set_write_timeout(Some(Duration::from_secs(10)))
                    .expect("timeout");
                return s;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("the replica did not connect to the fake master: {e}"),
        }
    }
}

/// Reads one RESP multibulk command from the replica; None when it hung up.
fn read_command(r: &mut BufReader<TcpStream>) -> Option<Vec<String>> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let n: usize = line.trim().strip_prefix('*')?.parse().ok()?;
    let mut args = Vec::new();
    for _ in 0..n {
        line.clear();
        r.read_line(&mut line).ok()?;
        let len: usize = line.trim().strip_prefix('$')?.parse().ok()?;
        let mut buf = vec![0u8; len + 2];
        r.read_exact(&mut buf).ok()?;
        buf.truncate(len);
        args.push(String::from_utf8_lossy(&buf).into_owned());
    }
    Some(args)
}

/// Accepts the replica and answers its handshake: `ping` to PING, +OK to REPLCONF, then
/// `psync` to PSYNC. Returns the connection (also when the replica hung up early).
fn handshake(l: &TcpListener, ping: &[u8], psync: &[u8]) -> TcpStream {
    let mut s = accept(l);
    let mut r = BufReader::new(s.try_clone().expect("clone"));
    while let Some(cmd) = read_command(&mut r) {
        let name = cmd
            .first()
            .map(|c| c.to_ascii_uppercase())
            .unwrap_or_default();
        let reply: &[u8] = match name.as_str() {
            "PING" => ping,
            "PSYNC" => psync,
            _ => b"+OK\r\n",
        };
        if s.write_all(reply).is_err() || name == "PSYNC" {
            break;
        }
    }
    s
}

/// Sends bytes, ignoring a hang-up (the replica is expected to drop the link).
fn send(s: &mut TcpStream, b: &[u8]) {
    let _ = s.write_all(b);
}

/// True when the replica closed the connection within [`DROP_WITHIN`] (whatever it sent
/// before, such as REPLCONF ACK, is discarded).
fn dropped(s: &mut TcpStream) -> bool {
    let deadline = Instant::now() + DROP_WITHIN;
    let mut buf = [0u8; 4096];
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

/// VmRSS of a process in KiB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

fn log(node: &Server) -> String {
    std::fs::read_to_string(node.log_path().expect("log path")).unwrap_or_default()
}

/// The replica survived: it runs, answers PING, reports the link down, stayed small, and
/// logged `error` (as the reason its master link ended). Then it retries: it connects to
/// the fake master again.
fn assert_survived(st: &mut Setup, error: &str) {
    assert!(
        st.node.child.try_wait().expect("try_wait").is_none(),
        "the replica exited; log:\n{}",
        log_tail(&st.node.log_path().expect("log"), 20)
    );
    let mut c = Raw::connect(st.node.port);
    assert_eq!(c.cmd(&["PING"]), R::Simple("PONG".into()));
    let info = c.cmd(&["INFO", "replication"]).s();
    assert_eq!(
        info_field(&info, "master_link_status").as_deref(),
        Some("down"),
        "{info}"
    );
    let rss = rss_kb(st.node.pid());
    assert!(rss < RSS_LIMIT_KB, "replica RSS {rss} kB");
    wait_for(Duration::from_secs(10), "the error in the log", || {
        let l = log(&st.node);
        l.lines()
            .any(|l| l.contains("MASTER link ended") && l.contains(error))
    });
    // It retries later, as Redis does.
    let s = accept(&st.master);
    drop(s);
}

/// Runs one case: the fake master answers PSYNC with `psync`, then sends `then`; the
/// replica must hang up and survive with `error` in its log.
fn case(ping: &[u8], psync: &[u8], then: &[u8], error: &str) {
    let mut st = setup();
    let mut s = handshake(&st.master, ping, psync);
    send(&mut s, then);
    assert!(dropped(&mut s), "the replica kept the link after: {error}");
    assert_survived(&mut st, error);
}

fn full(payload_header: &str) -> Vec<u8> {
    format!("+FULLRESYNC {ID} 0\r\n{payload_header}\r\n").into_bytes()
}

/// An empty RDB as a `$<len>` payload, after which the command stream starts.
fn synced() -> Vec<u8> {
    let mut v = full(&format!("${}", EMPTY_RDB.len()));
    v.extend_from_slice(EMPTY_RDB);
    v
}

/// Streams `total` bytes of payload in 1 MiB writes; false if the replica hung up.
fn stream_bytes(s: &mut TcpStream, total: usize) -> bool {
    let chunk = vec![b'x'; 1 << 20];
    let mut sent = 0;
    while sent < total {
        if s.write_all(&chunk).is_err() {
            return false;
        }
        sent += chunk.len();
    }
    true
}

/// Checks the bytes of a payload streamed so far are not held in memory: RSS grew by less
/// than half of them.
fn assert_streamed_not_buffered(st: &mut Setup, s: &mut TcpStream, before_kb: u64, mb: usize) {
    assert!(stream_bytes(s, mb << 20), "the replica hung up mid-payload");
    // Give the replica time to drain its socket.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        st.node.child.try_wait().ok().flatten().is_none(),
        "replica exited"
    );
    let grew = rss_kb(st.node.pid()).saturating_sub(before_kb);
    assert!(
        grew < (mb as u64 * 1024) / 2,
        "RSS grew by {grew} kB while {mb} MiB of payload arrived"
    );
    let mut c = Raw::connect(st.node.port);
    let info = c.cmd(&["INFO", "replication"]).s();
    assert_eq!(
        info_field(&info, "master_sync_in_progress").as_deref(),
        Some("1"),
        "{info}"
    );
}

/// No temp-*.rdb left in the replica's dir once the link is gone.
fn assert_no_temp_rdb(st: &Setup) {
    wait_for(Duration::from_secs(10), "temp RDB removed", || {
        std::fs::read_dir(&st.node.dir)
            .expect("read dir")
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("temp-"))
    });
}

#[test]
fn huge_declared_rdb_length_is_streamed_not_reserved() {
    let mut st = setup();
    let before = rss_kb(st.node.pid());
    let mut s = handshake(&st.master, b"+PONG\r\n", &full("$100000000000000"));
    send(&mut s, b"REDIS0009");
    assert_streamed_not_buffered(&mut st, &mut s, before, 64);
    drop(s); // a truncated payload: the link ends
    assert_survived(&mut st, "connection closed");
    assert_no_temp_rdb(&st);
}

#[test]
fn eof_payload_without_its_mark_is_streamed_not_buffered() {
    let mut st = setup();
    let before = rss_kb(st.node.pid());
    let mark = "e".repeat(40);
    let mut s = handshake(&st.master, b"+PONG\r\n", &full(&format!("$EOF:{mark}")));
    assert_streamed_not_buffered(&mut st, &mut s, before, 64);
    drop(s);
    assert_survived(&mut st, "connection closed");
    assert_no_temp_rdb(&st);
}

#[test]
fn eof_mark_of_wrong_length_drops_the_link() {
    for mark in ["", "short", &"m".repeat(41), &"m".repeat(100_000)] {
        case(
            b"+PONG\r\n",
            &full(&format!("$EOF:{mark}")),
            b"REDIS0009",
            if mark.len() > 65536 { "longer" } else { "mark" },
        );
    }
}

#[test]
fn never_ending_reply_line_drops_the_link() {
    let endless = vec![b'+'; 200 * 1024];
    // To PING, to PSYNC, and as the payload header.
    case(&endless, b"", b"", "longer than");
    let mut psync = b"+FULLRESYNC ".to_vec();
    psync.extend_from_slice(&endless);
    case(b"+PONG\r\n", &psync, b"", "longer than");
    let mut header = full("");
    header.truncate(header.len() - 2);
    header.push(b'$');
    header.extend_from_slice(&endless);
    case(b"+PONG\r\n", &header, b"", "longer than");
}

#[test]
fn truncated_rdb_then_close_drops_the_link() {
    let mut st = setup();
    let mut s = handshake(&st.master, b"+PONG\r\n", &full("$1000"));
    send(&mut s, b"REDIS0009");
    std::thread::sleep(Duration::from_millis(200));
    drop(s);
    assert_survived(&mut st, "connection closed");
    assert_no_temp_rdb(&st);
}

#[test]
fn garbage_rdb_drops_the_link() {
    let garbage = b"this is not an RDB file at all";
    let mut payload = full(&format!("${}", garbage.len()));
    payload.extend_from_slice(garbage);
    case(b"+PONG\r\n", &payload, b"", "loading the RDB");
}

#[test]
fn malformed_handshake_replies_drop_the_link() {
    // A PING reply that is not a status or an error.
    case(b"hello\r\n", b"", b"", "malformed reply");
    case(b":1\r\n", b"", b"", "malformed reply");
    // +FULLRESYNC without an offset, with a bad id, with a negative offset.
    case(
        b"+PONG\r\n",
        format!("+FULLRESYNC {ID}\r\n").as_bytes(),
        b"",
        "FULLRESYNC",
    );
    case(b"+PONG\r\n", b"+FULLRESYNC abc 5\r\n", b"", "FULLRESYNC");
    case(
        b"+PONG\r\n",
        format!("+FULLRESYNC {ID} -3\r\n").as_bytes(),
        b"",
        "FULLRESYNC",
    );
    // +CONTINUE with a bad id, an unknown status, a bad payload header.
    case(b"+PONG\r\n", b"+CONTINUE not-an-id\r\n", b"", "CONTINUE");
    case(b"+PONG\r\n", b"+WHATEVER\r\n", b"", "PSYNC");
    case(b"+PONG\r\n", &full("$-1"), b"", "payload header");
    case(b"+PONG\r\n", &full("*3"), b"", "payload header");
}

#[test]
fn huge_multibulk_count_after_sync_drops_the_link() {
    let mut then = b"*2147483647\r\n".to_vec();
    for _ in 0..1000 {
        then.extend_from_slice(b"$0\r\n\r\n");
    }
    case(b"+PONG\r\n", &synced(), &then, "multibulk length");
}

#[test]
fn huge_bulk_length_after_sync_drops_the_link() {
    case(
        b"+PONG\r\n",
        &synced(),
        b"*2\r\n$3\r\nSET\r\n$100000000000000\r\nabc",
        "bulk length",
    );
    // Just above the configured proto-max-bulk-len (512 MiB by default).
    let just_above = format!("*2\r\n$3\r\nGET\r\n${}\r\nabc", (512u64 << 20) + 1);
    case(
        b"+PONG\r\n",
        &synced(),
        just_above.as_bytes(),
        "bulk length",
    );
}

#[test]
fn bad_command_stream_drops_the_link() {
    // Inline protocol from a master is a desync (Redis closes the link).
    case(b"+PONG\r\n", &synced(), b"SET a b\r\n", "inline");
    case(b"+PONG\r\n", &synced(), b"*1\r\n:1\r\n", "expected '$'");
    case(b"+PONG\r\n", b"+CONTINUE\r\n", b"*x\r\n", "multibulk");
}

#[test]
fn one_command_of_the_stream_is_bounded() {
    // One command may hold client-query-buffer-limit + proto-max-bulk-len (2 MiB here): a
    // count that fits it, then more elements than fit, drops the link once 2 MiB arrived
    // instead of buffering whatever the master sends.
    let mut st = setup_with(&[
        "--client-query-buffer-limit",
        "1mb",
        "--proto-max-bulk-len",
        "1mb",
    ]);
    let before = rss_kb(st.node.pid());
    let mut s = handshake(&st.master, b"+PONG\r\n", &synced());
    send(&mut s, b"*300000\r\n");
    let element = b"$10\r\n0123456789\r\n".repeat(1000);
    // 299,000 of the 300,000 elements (5 MiB): the command never completes.
    for _ in 0..299 {
        if s.write_all(&element).is_err() {
            break;
        }
    }
    assert!(dropped(&mut s), "the replica kept buffering one command");
    let grew = rss_kb(st.node.pid()).saturating_sub(before);
    assert!(grew < 64 * 1024, "RSS grew by {grew} kB");
    assert_survived(&mut st, "over the bound");
}
