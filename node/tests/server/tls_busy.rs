//! A busy script and the TLS clients that share its I/O thread: Redis answers every client
//! from inside the script (processEventsWhileBlocked), TLS or not, so they get -BUSY and
//! SCRIPT KILL works from them. Compared with redis-server 7.0.15; tessera-node with one I/O
//! thread, so every connection shares the script's.

use std::time::Duration;

use tessera_testkit::tls::{Certs, TlsConn};
use tessera_testkit::*;

const LOOP: &str = "while true do end";

fn scenario(bin: &str, extra: &[&str]) -> Vec<String> {
    let certs = Certs::new();
    let tls_port = free_port();
    let srv = Launch::new(bin)
        .args(&["--save", "", "--appendonly", "no"])
        .args(&["--busy-reply-threshold", "200", "--tls-auth-clients", "yes"])
        .args(&certs.main.server_args(tls_port))
        .args(extra)
        .start();
    let mut out = Vec::new();
    let mut a = TlsConn::open(tls_port, &certs.main);
    let mut b = TlsConn::open(tls_port, &certs.main);
    out.push(format!("a before: {}", a.cmd("PING")));
    out.push(format!("b before: {}", b.cmd("SET k v")));
    let port = srv.port;
    let caller = std::thread::spawn(move || {
        let mut c = Raw::connect(port);
        c.cmd(&["EVAL", LOOP, "0"])
    });
    // Busy once a plaintext probe is refused (bounded poll, no timing assertion).
    wait_for(Duration::from_secs(60), "the server to answer BUSY", || {
        let mut p = Raw::connect(port);
        p.w.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        p.send(&encode(&[b"PING".as_slice()]));
        let mut l = String::new();
        matches!(std::io::BufRead::read_line(&mut p.r, &mut l), Ok(n) if n > 0 && l.starts_with("-BUSY"))
    });
    out.push(format!("a busy PING: {}", a.cmd("PING")));
    out.push(format!("a busy GET: {}", a.cmd("GET k")));
    let mut late = TlsConn::open(tls_port, &certs.main);
    out.push(format!("new busy PING: {}", late.cmd("PING")));
    out.push(format!("b busy SCRIPT KILL: {}", b.cmd("SCRIPT KILL")));
    eprintln!("{bin}: {out:?}");
    let killed = caller.join().expect("caller");
    out.push(format!("caller: {killed:?}"));
    out.push(format!("a after: {}", a.cmd("GET k")));
    out.push(format!("b after: {}", b.cmd("PING")));
    out
}

#[test]
fn tls_clients_of_a_busy_thread_get_busy_like_redis() {
    let redis = scenario(redis_bin(), &[]);
    let tessera = scenario(tessera_bin(), &["--worker-threads", "1"]);
    assert_eq!(tessera, redis);
    assert!(
        redis.iter().any(|l| l.starts_with("a busy PING: -BUSY")),
        "{redis:?}"
    );
}
