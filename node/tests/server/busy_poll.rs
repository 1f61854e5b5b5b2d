//! How an I/O thread schedules its connections. `busy-poll-usec` (server::spin): the thread
//! keeps polling between requests that come fast, never longer than the window past the
//! last one, and no request is lost or reordered while it does. Replies held for the end of
//! the event-loop tick (server::conn `Outbox`) go out while the thread polls, and once a
//! script that started in the same tick is busy.

use std::time::{Duration, Instant};
use tessera_testkit::*;

fn start(args: &[&str]) -> Server {
    Launch::new(tessera_bin())
        .args(&["--save", "", "--worker-threads", "1"])
        .args(args)
        .start()
}

/// The process's CPU time (user + system, all threads) from /proc.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc stat");
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks: u64 = f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime");
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

/// CPU the node spends over `span` while nobody sends it anything.
fn idle_cpu(srv: &Server, span: Duration) -> Duration {
    let c0 = cpu_time(srv.pid());
    std::thread::sleep(span);
    cpu_time(srv.pid()) - c0
}

/// Asserts the node spends under `max` of CPU over `span` with nobody sending anything.
fn assert_sleeps(srv: &Server, span: Duration, max: Duration, when: &str) {
    let used = idle_cpu(srv, span);
    assert!(
        used < max,
        "{when}: the node used {used:?} of CPU in {span:?}"
    );
}

/// Requests in quick succession from several connections (gaps of a few microseconds, far
/// inside the window): each connection INCRs its own counter and checks every reply is the
/// next number, so a request lost, doubled or answered out of order fails here.
fn fast_traffic(port: u16, tag: &str, conns: usize, per_conn: usize) {
    let threads: Vec<_> = (0..conns)
        .map(|c| {
            let key = format!("bp:{tag}:{c}");
            std::thread::spawn(move || {
                let mut r = Raw::connect(port);
                for i in 1..=per_conn {
                    assert_eq!(r.cmd(&["INCR", &key]), R::Int(i as i64), "conn {c}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("traffic thread");
    }
}

/// Polling is possible here: the node needs a CPU beside its one I/O thread.
fn can_poll() -> bool {
    std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2
}

#[test]
fn directive_reads_sets_and_refuses_bad_values() {
    let srv = start(&[]);
    let mut c = Raw::connect(srv.port);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "busy-poll-usec"]),
        R::Arr(vec![R::Bulk("busy-poll-usec".into()), R::Bulk("50".into())])
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "busy-poll-usec", "0"]).s(), "OK");
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "busy-poll-usec"]),
        R::Arr(vec![R::Bulk("busy-poll-usec".into()), R::Bulk("0".into())])
    );
    for bad in ["-1", "1000001", "fast", ""] {
        let r = c.cmd(&["CONFIG", "SET", "busy-poll-usec", bad]);
        assert!(
            matches!(&r, R::Err(e) if e.contains("busy-poll-usec")),
            "{bad:?}: {r:?}"
        );
    }
    // A bad value at startup stops the node, naming the directive.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Launch::tessera()
        .verbatim()
        .args(&["--port", "0", "--busy-poll-usec", "soon"])
        .run_to_exit(dir.path(), Duration::from_secs(60));
    assert!(out.failed(), "{out:?}");
    assert!(out.output.contains("busy-poll-usec"), "{}", out.output);
}

#[test]
fn polling_ends_a_window_after_the_last_request() {
    let srv = start(&[]);
    fast_traffic(srv.port, "t1", 8, 3000);
    // The default window is 50 us: a second later the node sleeps like any idle server
    // (a polling thread would show about a second of CPU here).
    assert_sleeps(
        &srv,
        Duration::from_secs(1),
        Duration::from_millis(150),
        "idle",
    );
}

#[test]
fn a_long_window_polls_then_stops() {
    // One second of window: right after the traffic the thread keeps polling (it would
    // sleep without the directive), and after the window it sleeps.
    let srv = start(&["--busy-poll-usec", "1000000"]);
    fast_traffic(srv.port, "t2", 4, 2000);
    let t0 = Instant::now();
    let polling = idle_cpu(&srv, Duration::from_millis(500));
    if can_poll() {
        // Half a second of polling on a machine that may be running other tests: at least
        // a fifth of it on the CPU.
        assert!(
            polling >= Duration::from_millis(100),
            "the I/O thread did not poll after the traffic: {polling:?} of CPU in 500 ms"
        );
    }
    std::thread::sleep(Duration::from_millis(1200).saturating_sub(t0.elapsed()));
    let (span, max) = (Duration::from_millis(700), Duration::from_millis(150));
    assert_sleeps(&srv, span, max, "past the window");
    // Turned off at run time: the same traffic leaves no polling behind.
    let mut c = Raw::connect(srv.port);
    assert_eq!(c.cmd(&["CONFIG", "SET", "busy-poll-usec", "0"]).s(), "OK");
    drop(c);
    fast_traffic(srv.port, "t3", 4, 2000);
    let (span, max) = (Duration::from_millis(500), Duration::from_millis(100));
    assert_sleeps(&srv, span, max, "polling off");
}

#[test]
fn replies_go_out_while_the_thread_polls() {
    // A one-second window: once requests come fast the thread polls instead of parking,
    // and the replies it holds for the end of the tick must go out from the polling loop.
    // Left for the runtime's next park, each waited for some timer of the thread to end
    // the poll: 150 round trips took 12 s instead of 1 (debug build).
    let srv = start(&["--busy-poll-usec", "1000000"]);
    let mut c = Raw::connect(srv.port);
    let t0 = Instant::now();
    // Polling starts after a few dozen short gaps (the gap average starts idle).
    for i in 1..=150 {
        assert_eq!(c.cmd(&["INCR", "bp:t5"]), R::Int(i));
    }
    let took = t0.elapsed();
    assert!(
        !can_poll() || took < Duration::from_secs(6),
        "150 round trips took {took:?} while the thread polled"
    );
    // The thread did poll (else this proved nothing): the window is still running.
    if can_poll() {
        let polling = idle_cpu(&srv, Duration::from_millis(300));
        assert!(
            polling >= Duration::from_millis(50),
            "the I/O thread did not poll: {polling:?} of CPU in 300 ms"
        );
    }
}

#[test]
fn as_many_io_threads_as_cpus_never_poll() {
    // Every CPU has an I/O thread: polling would take the CPU the clients and the node's
    // other threads need, so it stays off whatever the window.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let srv = Launch::new(tessera_bin())
        .args(&["--save", "", "--busy-poll-usec", "1000000"])
        .args(&["--worker-threads", &cpus.to_string()])
        .start();
    fast_traffic(srv.port, "t4", 4, 2000);
    let (span, max) = (Duration::from_millis(500), Duration::from_millis(100));
    assert_sleeps(&srv, span, max, "no CPU to spare");
}

#[test]
fn replies_held_for_the_tick_go_out_before_a_busy_script() {
    use std::io::{Read, Write};
    // One I/O thread: the two connections share its ticks. Sent back to back, both
    // requests are usually read in the same tick, the PING first; its reply must not wait
    // for the end of the script that runs right after it: Redis sends it once the script
    // is past busy-reply-threshold (100 ms here), and so must the node.
    let srv = start(&["--busy-reply-threshold", "100"]);
    let mut admin = Raw::connect(srv.port);
    let mut pongs = 0;
    for round in 0..10 {
        let mut a = std::net::TcpStream::connect(("127.0.0.1", srv.port)).expect("connect");
        let mut b = std::net::TcpStream::connect(("127.0.0.1", srv.port)).expect("connect");
        a.set_read_timeout(Some(Duration::from_secs(3)))
            .expect("timeout");
        a.write_all(b"*1\r\n$4\r\nPING\r\n").expect("send PING");
        b.write_all(b"*3\r\n$4\r\nEVAL\r\n$17\r\nwhile true do end\r\n$1\r\n0\r\n")
            .expect("send EVAL");
        let mut got = [0u8; 7];
        let read = a.read_exact(&mut got);
        // End the script (SCRIPT KILL answers NOTBUSY until it is past the threshold).
        let mut killed = false;
        for _ in 0..100 {
            let r = admin.cmd(&["SCRIPT", "KILL"]);
            if r.s() == "OK" {
                killed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(killed, "round {round}: the script could not be killed");
        read.unwrap_or_else(|e| panic!("round {round}: no PING reply during the script: {e}"));
        // On a loaded machine the PING can reach the node after the script started; then
        // BUSY is the answer (as from Redis), and it too must come during the script.
        match &got {
            b"+PONG\r\n" => pongs += 1,
            b"-BUSY R" => {
                let mut rest = String::new();
                std::io::BufRead::read_line(&mut std::io::BufReader::new(&mut a), &mut rest)
                    .expect("rest of the BUSY error");
            }
            other => panic!("round {round}: {:?}", String::from_utf8_lossy(other)),
        }
        let mut err = String::new();
        let mut br = std::io::BufReader::new(b);
        std::io::BufRead::read_line(&mut br, &mut err).expect("EVAL reply");
        assert!(
            err.starts_with("-ERR Script killed"),
            "round {round}: {err}"
        );
    }
    // The held-reply path is the point: most rounds read both requests in one tick.
    assert!(
        pongs > 0,
        "no round read the PING before the script started"
    );
}
