//! A connection whose reply was still held for the end of its I/O thread's tick when a
//! script started on that thread (the reply goes out from the script's hook): its next
//! request during the busy script must be answered -BUSY, as redis-server answers it.
//! unit/scripting's "Timedout script does not cause a false dead client" hung on this:
//! the test client's PING and the script arrive in the same tick.
//!
//! The server's only I/O thread is held in DEBUG SLEEP while the PING and the EVAL
//! arrive, so both are read in the same tick; both orders are tried (which task the
//! runtime runs first is its choice).

use std::time::Duration;

use tessera_testkit::*;

const LOOP: &str = "while true do end";

fn start(redis: bool) -> Server {
    let base = [
        "--save",
        "",
        "--appendonly",
        "no",
        "--busy-reply-threshold",
        "10",
        "--enable-debug-command",
        "yes",
    ];
    if redis {
        Launch::new(redis_bin()).args(&base).start()
    } else {
        Launch::new(tessera_bin())
            .args(&base)
            .args(&["--worker-threads", "1"])
            .start()
    }
}

fn conn(port: u16, secs: u64) -> Raw {
    let r = Raw::connect(port);
    r.w.set_read_timeout(Some(Duration::from_secs(secs)))
        .expect("timeout");
    r
}

/// One reply line, or "<no reply>" when none came within the read timeout.
fn line(c: &mut Raw) -> String {
    let mut l = String::new();
    match std::io::BufRead::read_line(&mut c.r, &mut l) {
        Ok(0) | Err(_) => "<no reply>".into(),
        Ok(_) => l.trim_end().to_string(),
    }
}

fn send(c: &mut Raw, args: &[&str]) {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    c.send(&encode(&a));
}

/// What the pinging client sees, for each order of arrival of its PING and the EVAL.
fn scenario(redis: bool) -> Vec<String> {
    let srv = start(redis);
    let port = srv.port;
    let mut seen = Vec::new();
    for round in 0..6 {
        let ping_first = round % 2 == 0;
        let mut a = conn(port, 5);
        let mut b = conn(port, 60);
        let mut sleeper = conn(port, 30);
        assert_eq!(a.cmd(&["PING"]), R::Simple("PONG".into()));
        assert_eq!(b.cmd(&["PING"]), R::Simple("PONG".into()));
        send(&mut sleeper, &["DEBUG", "SLEEP", "0.4"]);
        std::thread::sleep(Duration::from_millis(100));
        if ping_first {
            send(&mut a, &["PING"]);
            std::thread::sleep(Duration::from_millis(20));
            send(&mut b, &["EVAL", LOOP, "0"]);
        } else {
            send(&mut b, &["EVAL", LOOP, "0"]);
            std::thread::sleep(Duration::from_millis(20));
            send(&mut a, &["PING"]);
        }
        assert_eq!(line(&mut sleeper), "+OK");
        // PONG before the script, or BUSY when the script ran first.
        let first = line(&mut a);
        // The script is past the threshold by now.
        std::thread::sleep(Duration::from_millis(100));
        send(&mut a, &["PING"]);
        let second = line(&mut a);
        seen.push(format!("round {round}: second PING: {second}"));
        if !first.starts_with("+PONG") && !first.starts_with("-BUSY") {
            seen.push(format!("round {round}: first PING: {first}"));
        }
        let mut killer = conn(port, 30);
        assert_eq!(killer.cmd(&["SCRIPT", "KILL"]), R::Simple("OK".into()));
        assert!(line(&mut b).contains("killed"), "round {round}");
        seen.push(format!(
            "round {round}: after: {}",
            line_of(a.cmd(&["PING"]))
        ));
    }
    seen
}

fn line_of(r: R) -> String {
    format!("{r:?}")
}

#[test]
fn reply_held_when_the_script_starts_then_busy_like_redis() {
    let want = scenario(true);
    let got = scenario(false);
    assert_eq!(got, want);
}
