//! SLOWLOG entries against redis-server 7.0 (issue 18, Redis's unit/slowlog): what a
//! blocked command served later logs, what EXEC logs, and the arguments Redis redacts.

use std::time::Duration;

use tessera_testkit::*;

fn both() -> [Launch; 2] {
    [Launch::redis(), Launch::tessera()]
}

/// A reply as text: bulk strings as they read, arrays space-separated.
fn flat(r: &Reply) -> String {
    match r {
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        Reply::Array(v) => v.iter().map(flat).collect::<Vec<_>>().join(" "),
        other => format!("{other:?}"),
    }
}

/// The slow log, newest first, as (arguments, client name) per entry; `port` (which
/// differs between the two servers) shown as PORT.
fn entries(c: &mut Conn, port: u16) -> Vec<String> {
    let Reply::Array(v) = c.cmd(&["SLOWLOG", "GET", "-1"]) else {
        panic!("SLOWLOG GET answered something else")
    };
    v.into_iter()
        .map(|e| match e {
            Reply::Array(f) if f.len() == 6 => {
                format!("{} name={}", flat(&f[3]), flat(&f[5])).replace(&port.to_string(), "PORT")
            }
            other => panic!("slow log entry {other:?}"),
        })
        .collect()
}

fn blocked_clients(c: &mut Conn) -> String {
    let info = match c.cmd(&["INFO", "clients"]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO answered {other:?}"),
    };
    info_field(&info, "blocked_clients").unwrap_or_default()
}

/// A BLPOP served by a MULTI/EXEC is logged with its own arguments when it is served, after
/// the queued commands; EXEC itself is not logged.
#[test]
fn blocked_command_and_exec_log_like_redis() {
    let [r, t] = both().map(|l| l.args(&["--save", ""]).start());
    let mut got = Vec::new();
    for s in [&r, &t] {
        let mut c = s.resp();
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        let mut rd = s.resp();
        rd.cmd(&["CLIENT", "SETNAME", "waiter"]);
        rd.send(&["BLPOP", "l", "0"]);
        wait_until("BLPOP blocked", Duration::from_secs(10), || {
            blocked_clients(&mut c) == "1"
        });
        c.cmd(&["SLOWLOG", "RESET"]);
        c.cmd(&["MULTI"]);
        c.cmd(&["LPUSH", "l", "foo"]);
        c.cmd(&["SET", "k", "v"]);
        c.cmd(&["EXEC"]);
        let served = rd.read();
        // A plain push serves it too.
        rd.send(&["BRPOP", "l2", "0"]);
        wait_until("BRPOP blocked", Duration::from_secs(10), || {
            blocked_clients(&mut c) == "1"
        });
        c.cmd(&["RPUSH", "l2", "bar"]);
        let served2 = rd.read();
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
        let mut e = entries(&mut c, s.port);
        // INFO calls from the wait loop are not the point: leave them out.
        e.retain(|x| !x.starts_with("INFO "));
        got.push(format!(
            "{} / {}\n{}",
            flat(&served),
            flat(&served2),
            e.join("\n")
        ));
    }
    assert_eq!(got[0], got[1], "redis first, tessera second");
}

/// Passwords never reach the slow log: MIGRATE's AUTH / AUTH2, CONFIG SET of
/// masterauth / masteruser / requirepass, AUTH and HELLO ... AUTH.
#[test]
fn sensitive_arguments_are_redacted_like_redis() {
    let [r, t] = both().map(|l| l.args(&["--save", ""]).start());
    let mut got = Vec::new();
    for s in [&r, &t] {
        let mut c = s.resp();
        let port = s.port.to_string();
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        c.cmd(&["SLOWLOG", "RESET"]);
        c.cmd(&["MIGRATE", "127.0.0.1", &port, "key", "9", "5000"]);
        c.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "key",
            "9",
            "5000",
            "AUTH",
            "user",
        ]);
        c.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "key",
            "9",
            "5000",
            "AUTH2",
            "user",
            "password",
        ]);
        c.cmd(&["CONFIG", "SET", "masterauth", ""]);
        c.cmd(&["CONFIG", "SET", "masteruser", "u", "maxmemory-samples", "5"]);
        c.cmd(&["AUTH", "nopass"]);
        c.cmd(&["AUTH", "default", "nopass"]);
        c.cmd(&["HELLO", "2", "AUTH", "default", "wrong"]);
        c.cmd(&["CONFIG", "SET", "requirepass", "secret"]);
        c.cmd(&["AUTH", "secret"]);
        c.cmd(&["CONFIG", "SET", "requirepass", ""]);
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
        got.push(entries(&mut c, s.port).join("\n"));
    }
    assert_eq!(got[0], got[1], "redis first, tessera second");
}

/// A CONFIG SET of the slow log's threshold is judged by the threshold it set, as Redis's
/// call() reads it after the command ran: setting 0 logs the CONFIG SET itself, setting -1
/// does not. Sent as one write, so the commands after it usually run on the same read.
#[test]
fn config_set_of_the_threshold_logs_by_the_new_one_like_redis() {
    let [r, t] = both().map(|l| l.args(&["--save", ""]).start());
    let mut got = Vec::new();
    for s in [&r, &t] {
        let mut c = s.resp();
        c.cmd(&["SLOWLOG", "RESET"]);
        let pipeline: Vec<u8> = [
            &[&b"CONFIG"[..], b"SET", b"slowlog-log-slower-than", b"0"][..],
            &[b"SET", b"k", b"v"],
            &[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"-1"],
            &[b"SET", b"k", b"w"],
        ]
        .iter()
        .flat_map(|a| encode(a))
        .collect();
        c.raw_write(&pipeline);
        for _ in 0..4 {
            c.read();
        }
        let e = entries(&mut c, s.port);
        got.push(e.join("\n"));
    }
    assert_eq!(got[1], got[0], "tessera (left) against redis (right)");
    assert!(
        got[0].contains("CONFIG SET slowlog-log-slower-than 0"),
        "redis logs the CONFIG SET that lowered the threshold: {}",
        got[0]
    );
}
