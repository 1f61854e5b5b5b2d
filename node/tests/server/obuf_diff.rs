//! Output buffer limits and reply buffer sizing against redis-server 7.0 (issue 18,
//! unit/obuf-limits and unit/replybufsize): the same scenario on both servers, outcomes
//! compared.

use std::io::Read;
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

/// A field of the CLIENT LIST line of the client called `name`, if it is connected.
fn client_field(c: &mut Conn, name: &str, field: &str) -> Option<String> {
    let list = c.cmd(&["CLIENT", "LIST"]).into_r().s();
    let line = list
        .lines()
        .find(|l| l.split(' ').any(|kv| kv == format!("name={name}")))?;
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{field}=")))
        .map(str::to_string)
}

/// Reads what the server sends until it closes the connection (true) or stays silent for
/// `quiet` (false); returns the byte count too.
fn drain(c: &mut Conn, quiet: Duration) -> (usize, bool) {
    c.w.set_read_timeout(Some(quiet)).expect("timeout");
    let mut n = 0;
    let mut buf = [0u8; 65536];
    loop {
        match c.r.read(&mut buf) {
            Ok(0) => return (n, true),
            Ok(k) => n += k,
            Err(_) => return (n, false),
        }
    }
}

/// A pipeline whose replies pass the normal class's hard limit gets no reply at all and
/// the client is gone, as Redis (replies accumulate for the whole batch, the limit is
/// checked as they are added). Tessera flushed every 64 KiB and kept the client.
#[test]
fn pipeline_past_the_limit_gets_no_reply_like_redis() {
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 100000 0 0",
        ]);
        c.cmd(&["SET", "bigkey", &"x".repeat(10000)]);
        let mut p = Conn::connect(s.port);
        p.line("CLIENT SETNAME multicommands");
        let mut buf = String::new();
        for i in 0..15 {
            buf += &format!("set {i} {i}\r\nget {i}\r\ndel {i}\r\nget bigkey\r\n");
        }
        p.raw_write(buf.as_bytes());
        let got = drain(&mut p, Duration::from_secs(3));
        let listed = client_field(&mut c, "multicommands", "id").is_some();
        (got, listed, c.cmd(&["PING"]).into_r().s())
    });
    assert_eq!(outcomes[0], ((0, true), false, "PONG".to_string()));
    assert_eq!(outcomes[1], outcomes[0], "redis / tessera");
}

/// HRANDFIELD and SRANDMEMBER with a huge negative count stop once the reply passes the
/// limit: the client is closed, the server goes on (tessera built the whole reply first).
#[test]
fn huge_random_picks_stop_at_the_limit_like_redis() {
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1000000 0 0",
        ]);
        c.line("HSET myhash a b");
        c.line("SADD myset a");
        let mut res = Vec::new();
        for cmd in [
            "HRANDFIELD myhash -999999999",
            "HRANDFIELD myhash -999999999 WITHVALUES",
            "SRANDMEMBER myset -999999999",
        ] {
            let mut p = Conn::connect(s.port);
            let args: Vec<&str> = cmd.split(' ').collect();
            p.send(&args);
            let (_, closed) = drain(&mut p, Duration::from_secs(20));
            res.push((cmd, closed));
        }
        res.push((
            "PING",
            Conn::connect(s.port).cmd(&["PING"]).into_r().s() == "PONG",
        ));
        res
    });
    assert!(outcomes[0].iter().all(|(_, ok)| *ok), "{:?}", outcomes[0]);
    assert_eq!(outcomes[1], outcomes[0], "redis / tessera");
}

/// A subscriber over the pub/sub soft limit is closed once it stayed over it long enough,
/// also when nothing more is published (Redis's clients cron checks it); tessera only
/// checked when a message was queued.
#[test]
fn soft_limit_closes_an_idle_subscriber_like_redis() {
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 0 100000 1",
        ]);
        let mut sub = Conn::connect(s.port);
        sub.line("CLIENT SETNAME subscriber");
        sub.send(&["SUBSCRIBE", "foo"]);
        sub.read();
        // Fill its output until the server holds more than the soft limit for it.
        let msg = "x".repeat(1000);
        let start = Instant::now();
        let mut over = false;
        while !over && start.elapsed() < Duration::from_secs(30) {
            for _ in 0..100 {
                c.cmd(&["PUBLISH", "foo", &msg]);
            }
            // Gone already counts too: it was over for long enough.
            let omem = client_field(&mut c, "subscriber", "omem");
            over = omem.is_none_or(|m| m.parse::<u64>().unwrap_or(0) > 100000);
        }
        // No traffic any more: gone within soft-seconds (+ the cron's second granularity).
        let mut gone = false;
        let stop = Instant::now();
        while !gone && stop.elapsed() < Duration::from_secs(5) {
            gone = client_field(&mut c, "subscriber", "id").is_none();
            std::thread::sleep(Duration::from_millis(50));
        }
        (over, gone)
    });
    assert_eq!(outcomes[0], (true, true));
    assert_eq!(outcomes[1], outcomes[0], "redis / tessera");
}

/// rbs of an idle client shrinks to 1 KiB once its reply peak is reset, and grows back to
/// 16 KiB while big replies fill it (DEBUG REPLYBUFFER PEAK-RESET-TIME); tessera always
/// showed 16384.
#[test]
fn reply_buffer_resizes_like_redis() {
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        c.line("DEBUG REPLYBUFFER PEAK-RESET-TIME 100");
        let mut tc = Conn::connect(s.port);
        tc.line("CLIENT SETNAME test_client");
        let rbs = |c: &mut Conn| -> u64 {
            client_field(c, "test_client", "rbs")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let mut shrunk = 0;
        for _ in 0..60 {
            shrunk = rbs(&mut c);
            if (1024..2046).contains(&shrunk) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        c.cmd(&["SET", "bigval", &"x".repeat(32768)]);
        c.line("DEBUG REPLYBUFFER PEAK-RESET-TIME never");
        let mut grown = 0;
        for _ in 0..40 {
            tc.line("GET bigval");
            grown = rbs(&mut c);
            if (16384..32768).contains(&grown) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        c.line("DEBUG REPLYBUFFER PEAK-RESET-TIME reset");
        (
            (1024..2046).contains(&shrunk),
            (16384..32768).contains(&grown),
        )
    });
    assert_eq!(outcomes[0], (true, true));
    assert_eq!(outcomes[1], outcomes[0], "redis / tessera");
}

/// Peak resident memory of a process in KiB (VmHWM of /proc/<pid>/status).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// ZRANDMEMBER with a huge negative count writes its picks as it makes them and stops once
/// the reply passes the output limit, as Redis (CLIENT_CLOSE_ASAP): the client is closed
/// and the server's memory never holds the whole answer. Tessera collected every pick
/// first (hundreds of MB for ten million picks).
#[test]
fn huge_zrandmember_stops_at_the_limit_like_redis() {
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1000000 0 0",
        ]);
        c.line("ZADD myzset 1 a");
        let before = peak_rss_kib(s.pid());
        let mut res = Vec::new();
        for cmd in [
            "ZRANDMEMBER myzset -10000000",
            "ZRANDMEMBER myzset -10000000 WITHSCORES",
        ] {
            let mut p = Conn::connect(s.port);
            let args: Vec<&str> = cmd.split(' ').collect();
            p.send(&args);
            let (_, closed) = drain(&mut p, Duration::from_secs(20));
            res.push((cmd, closed));
        }
        let grown_mib = peak_rss_kib(s.pid()).saturating_sub(before) / 1024;
        res.push(("peak rss grew under 100 MiB", grown_mib < 100));
        res.push((
            "PING",
            Conn::connect(s.port).cmd(&["PING"]).into_r().s() == "PONG",
        ));
        res
    });
    assert!(outcomes[0].iter().all(|(_, ok)| *ok), "{:?}", outcomes[0]);
    assert_eq!(outcomes[1], outcomes[0], "redis / tessera");
}

/// INFO clients' client_recent_max_input_buffer / client_recent_max_output_buffer.
fn recent_max(c: &mut Conn) -> (u64, u64) {
    let info = c.cmd(&["INFO", "clients"]).into_r().s();
    let f = |n: &str| {
        info_field(&info, n)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (
        f("client_recent_max_input_buffer"),
        f("client_recent_max_output_buffer"),
    )
}

/// Polls INFO clients until `ok` holds for the recent maxima (bounded), returning them.
fn wait_recent(c: &mut Conn, secs: u64, ok: impl Fn((u64, u64)) -> bool) -> (u64, u64) {
    let start = Instant::now();
    loop {
        let v = recent_max(c);
        if ok(v) || start.elapsed() > Duration::from_secs(secs) {
            return v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// INFO's client_recent_max_input_buffer / _output_buffer report the biggest query buffer
/// and output buffer the clients cron saw over the last seconds, and fall back once those
/// clients are gone, as Redis's clientsCronTrackExpansiveClients; tessera always said 0.
#[test]
fn recent_max_buffers_follow_the_clients_like_redis() {
    let outcomes = both().map(|s| {
        let mut c = Conn::connect(s.port);
        c.cmd(&["SET", "bigval", &"x".repeat(1_000_000)]);
        // 1 MB of a 2 MB argument waits in this client's query buffer.
        let mut input = Conn::connect(s.port);
        let mut req = b"*2\r\n$3\r\nSET\r\n$2000000\r\n".to_vec();
        req.resize(req.len() + 1_000_000, b'v');
        input.raw_write(&req);
        // Twenty 1 MB replies this client does not read.
        let mut output = Conn::connect(s.port);
        output.raw_write("GET bigval\r\n".repeat(20).as_bytes());
        let big = wait_recent(&mut c, 10, |(i, o)| i >= 1_000_000 && o >= 1_000_000);
        drop(input);
        drop(output);
        // The cron forgets a slot after a few seconds (Redis: 8 one-second slots).
        let small = wait_recent(&mut c, 20, |(i, o)| i < 100_000 && o < 100_000);
        (
            (big.0 >= 1_000_000, big.1 >= 1_000_000),
            (small.0 < 100_000, small.1 < 100_000),
        )
    });
    assert_eq!(outcomes[0], ((true, true), (true, true)));
    assert_eq!(outcomes[1], outcomes[0], "redis / tessera");
}
