//! Runaway scripts: busy-reply-threshold, -BUSY, SCRIPT KILL, UNKILLABLE and SHUTDOWN
//! NOSAVE while busy. Each scenario runs against redis-server 7.0 and tessera-node (with
//! one and with two I/O threads) and the transcripts are compared exactly; plus the
//! atomicity of a script under the threshold against concurrent readers.
//!
//! No timed assertions: "busy" is detected by polling until the server answers -BUSY, and
//! every wait is a generous bounded poll.

use std::time::Duration;

use tessera_testkit::*;

/// A script that never ends (and never writes).
const LOOP: &str = "while true do end";
/// A script that writes, then never ends.
const LOOP_WROTE: &str = "redis.call('set','x','1') while true do end";

#[derive(Clone, Copy, Debug)]
enum Target {
    Redis,
    Tessera { workers: u32 },
}

fn start(t: Target, extra: &[&str]) -> Server {
    let base = [
        "--save",
        "",
        "--appendonly",
        "no",
        "--busy-reply-threshold",
        "200",
    ];
    match t {
        Target::Redis => Launch::new(redis_bin()).args(&base).args(extra).start(),
        Target::Tessera { workers } => Launch::new(tessera_bin())
            .args(&base)
            .args(&["--worker-threads", &workers.to_string()])
            .args(extra)
            .start(),
    }
}

/// A raw connection whose reads give up after `secs` (None from [`try_cmd`] then).
fn conn(port: u16, secs: u64) -> Raw {
    let r = Raw::connect(port);
    r.w.set_read_timeout(Some(Duration::from_secs(secs)))
        .expect("timeout");
    r
}

/// Sends a command; the reply, or None if none came within the read timeout.
fn try_cmd(c: &mut Raw, args: &[&str]) -> Option<R> {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    c.send(&encode(&a));
    let mut l = String::new();
    match std::io::BufRead::read_line(&mut c.r, &mut l) {
        Ok(0) | Err(_) => None,
        Ok(_) => {
            // Only single-line replies are expected here.
            let l = l.trim_end_matches("\r\n");
            let (t, rest) = l.split_at(1);
            Some(match t {
                "+" => R::Simple(rest.into()),
                "-" => R::Err(rest.into()),
                ":" => R::Int(rest.parse().unwrap_or(i64::MIN)),
                _ => R::Other(t.as_bytes()[0], rest.into()),
            })
        }
    }
}

/// Starts `script` on its own connection and thread; the join handle yields its reply.
fn run_script(port: u16, script: &str) -> std::thread::JoinHandle<R> {
    let mut c = conn(port, 60);
    let script = script.to_string();
    std::thread::spawn(move || c.cmd(&["EVAL", &script, "0"]))
}

const BUSY_TEXT: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// Polls with fresh connections until the server answers PING with -BUSY. A probe that gets
/// no answer within 2 s landed on the thread running the script (tessera, accepted before
/// the threshold passed): it is dropped and the next probe goes elsewhere.
fn wait_busy(port: u16) {
    wait_for(Duration::from_secs(60), "the server to answer BUSY", || {
        let mut c = conn(port, 2);
        matches!(try_cmd(&mut c, &["PING"]), Some(R::Err(e)) if e == BUSY_TEXT)
    });
}

/// redis-cli's output for one command (errors print as their text when not on a tty).
fn cli(port: u16, args: &[&str]) -> String {
    let out = tessera_testkit::output_within(
        std::process::Command::new(tessera_testkit::redis_cli_bin())
            .arg("-p")
            .arg(port.to_string())
            .args(args),
        std::time::Duration::from_secs(60),
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A killable script: what another connection, a new connection and the caller see.
/// `existing`: also check a connection opened right after the caller's, and kill from it
/// (with two tessera I/O threads it lands on the other thread; with one it shares the
/// script's thread).
fn kill_scenario(t: Target, existing: bool) -> Vec<String> {
    let srv = start(t, &[]);
    let port = srv.port;
    let mut log = Vec::new();
    let mut c0 = conn(port, 30);
    assert_eq!(c0.cmd(&["SET", "k", "v"]), R::Simple("OK".into()));
    let caller = run_script(port, LOOP);
    let mut other = existing.then(|| conn(port, 30));
    if let Some(o) = other.as_mut() {
        // Each PING either runs before the script started (PONG) or waits for the
        // threshold and gets BUSY.
        wait_for(
            Duration::from_secs(60),
            "BUSY on an existing conn",
            || matches!(o.cmd(&["PING"]), R::Err(e) if e == BUSY_TEXT),
        );
    }
    wait_busy(port);
    if let Some(o) = other.as_mut() {
        for cmd in [&["GET", "k"][..], &["SET", "k", "w"], &["INFO", "server"]] {
            log.push(format!("existing {cmd:?}: {}", o.cmd(cmd).s()));
        }
        // A pipeline, an unknown command and a wrong arity: errors come in order, the
        // command-level ones before BUSY.
        o.send(b"GET k\r\nNOSUCH x\r\nGET\r\nPING\r\n*1\r\n$4\r\nPING\r\n");
        for i in 0..5 {
            log.push(format!("existing pipelined {i}: {}", o.read().s()));
        }
    }
    let mut c = conn(port, 30);
    for cmd in [
        &["PING"][..],
        &["GET", "k"],
        &["SET", "k", "w"],
        &["EVAL", "return 1", "0"],
        &["SCRIPT", "EXISTS", "x"],
        &["CONFIG", "GET", "maxmemory"],
        &["SHUTDOWN"],
        &["SHUTDOWN", "SAVE"],
        &["AUTH", "pw"],
        &["MULTI"],
        &["GET", "k"],
        &["DISCARD"],
    ] {
        log.push(format!("new {cmd:?}: {}", c.cmd(cmd).s()));
    }
    if matches!(t, Target::Tessera { .. }) {
        // Differs from redis (OK): WATCH would wait for the script's stripe locks.
        assert_eq!(c.cmd(&["WATCH", "k"]), R::Err(BUSY_TEXT.into()));
    }
    match other.as_mut() {
        // The kill from a connection that was open before the script (with one tessera
        // I/O thread it shares the script's thread: answered from the script's hook).
        Some(o) => log.push(format!(
            "existing SCRIPT KILL: {}",
            o.cmd(&["SCRIPT", "KILL"]).s()
        )),
        None => log.push(format!(
            "cli SCRIPT KILL: {}",
            cli(port, &["SCRIPT", "KILL"])
        )),
    }
    let r = caller.join().expect("caller thread");
    log.push(format!("caller: {}", r.s()));
    // Served normally again, keys intact, on every connection.
    for conn in [&mut c, &mut c0] {
        log.push(format!("after GET k: {}", conn.cmd(&["GET", "k"]).s()));
        log.push(format!("after PING: {}", conn.cmd(&["PING"]).s()));
    }
    if let Some(o) = other.as_mut() {
        log.push(format!("after existing: {}", o.cmd(&["GET", "k"]).s()));
    }
    log.push(format!(
        "after SCRIPT KILL: {}",
        c.cmd(&["SCRIPT", "KILL"]).s()
    ));
    log.push(format!(
        "after EVAL: {}",
        c.cmd(&["EVAL", "return redis.call('get','k')", "0"]).s()
    ));
    log
}

#[test]
fn busy_then_script_kill_matches_redis() {
    for existing in [false, true] {
        let want = kill_scenario(Target::Redis, existing);
        assert!(
            want.iter().any(|l| l.contains("Script killed by user")),
            "{want:#?}"
        );
        for workers in [1, 2] {
            let got = kill_scenario(Target::Tessera { workers }, existing);
            assert_eq!(got, want, "worker-threads {workers}, existing {existing}");
        }
    }
}

/// A script that wrote cannot be killed; SHUTDOWN without NOSAVE is refused; SHUTDOWN
/// NOSAVE (redis-cli, a new connection; or `existing`, a connection opened before the
/// script) stops the process.
fn unkillable_scenario(t: Target, existing: bool) -> Vec<String> {
    let mut srv = start(t, &[]);
    let port = srv.port;
    let mut log = Vec::new();
    let early = existing.then(|| {
        let mut c = conn(port, 30);
        assert_eq!(c.cmd(&["PING"]), R::Simple("PONG".into()));
        c
    });
    let caller = run_script(port, LOOP_WROTE);
    wait_busy(port);
    let mut c = early.unwrap_or_else(|| conn(port, 30));
    for cmd in [
        &["SCRIPT", "KILL"][..],
        &["GET", "x"],
        &["SHUTDOWN"],
        &["SHUTDOWN", "SAVE"],
    ] {
        log.push(format!("{cmd:?}: {}", c.cmd(cmd).s()));
    }
    if existing {
        // No reply: the connection closes as the process exits.
        log.push(format!(
            "existing SHUTDOWN NOSAVE: {:?}",
            try_cmd(&mut c, &["SHUTDOWN", "NOSAVE"])
        ));
    } else {
        log.push(format!(
            "cli SHUTDOWN NOSAVE: {:?}",
            cli(port, &["SHUTDOWN", "NOSAVE"])
        ));
    }
    // Once the shutdown's connection is closed the port refuses new ones (Redis closes its
    // listeners before it exits; unit/scripting "SHUTDOWN NOSAVE can kill a timedout
    // script anyway" connects right then).
    let refused = match std::net::TcpStream::connect(("127.0.0.1", port)) {
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionRefused,
        Ok(_) => false,
    };
    log.push(format!("new connection refused: {refused}"));
    let status = srv.wait_exit(Duration::from_secs(30));
    log.push(format!("exited: {}", status.is_some()));
    // The caller's connection closes without a reply.
    let r = caller.join().expect("caller thread");
    log.push(format!("caller: {}", r.s()));
    log
}

#[test]
fn unkillable_and_shutdown_nosave_match_redis() {
    for existing in [false, true] {
        let want = unkillable_scenario(Target::Redis, existing);
        assert!(want.iter().any(|l| l == "exited: true"), "{want:#?}");
        for workers in [1, 2] {
            let got = unkillable_scenario(Target::Tessera { workers }, existing);
            assert_eq!(got, want, "worker-threads {workers}, existing {existing}");
        }
    }
}

/// Connections that queue for the I/O thread together with the script's caller (the thread
/// is held in DEBUG SLEEP while they all connect) all get BUSY, then PONG after the kill.
/// It does not force the narrower window fixed in 564f53f (a connection picked up but not
/// yet run when the script starts): that ordering depends on the runtime's scheduling and
/// passed here with and without the fix.
#[test]
fn connections_racing_the_script_start_get_busy() {
    for _ in 0..3 {
        let srv = start(
            Target::Tessera { workers: 1 },
            &["--enable-debug-command", "yes"],
        );
        let port = srv.port;
        let mut sleeper = conn(port, 30);
        sleeper.send(&encode(&[b"DEBUG".as_slice(), b"SLEEP", b"1"]));
        std::thread::sleep(std::time::Duration::from_millis(200));
        let caller = run_script(port, LOOP);
        let mut racers: Vec<Raw> = (0..12).map(|_| conn(port, 30)).collect();
        assert_eq!(sleeper.read(), R::Simple("OK".into()));
        wait_busy(port);
        for (i, r) in racers.iter_mut().enumerate() {
            assert_eq!(
                try_cmd(r, &["PING"]),
                Some(R::Err(BUSY_TEXT.into())),
                "connection {i}"
            );
        }
        assert_eq!(cli(port, &["SCRIPT", "KILL"]), "OK");
        assert!(matches!(caller.join().expect("caller"), R::Err(e) if e.contains("Script killed")));
        for r in &mut racers {
            assert_eq!(r.cmd(&["PING"]), R::Simple("PONG".into()));
        }
    }
}

/// A connection opened before the script, on the script's own I/O thread (one thread):
/// QUIT is answered and closes it; HELLO is answered while busy (as Redis: allowed, its
/// name and protocol live in the connection's shared handle), CLIENT GETNAME is not.
#[test]
fn same_thread_quit_and_hello() {
    let srv = start(Target::Tessera { workers: 1 }, &[]);
    let port = srv.port;
    let mut q = conn(port, 30);
    let mut h = conn(port, 30);
    assert_eq!(q.cmd(&["PING"]), R::Simple("PONG".into()));
    assert_eq!(h.cmd(&["PING"]), R::Simple("PONG".into()));
    let caller = run_script(port, LOOP);
    wait_busy(port);
    assert_eq!(q.cmd(&["GET", "k"]), R::Err(BUSY_TEXT.into()));
    assert_eq!(q.cmd(&["QUIT"]), R::Simple("OK".into()));
    assert_eq!(try_cmd(&mut q, &["PING"]), None, "closed after QUIT");
    // CLIENT SETNAME / GETNAME are not allowed while busy; HELLO is.
    h.send(&encode(&[b"PING".as_slice()]));
    h.send(&encode(&[b"HELLO".as_slice(), b"2", b"SETNAME", b"late"]));
    h.send(&encode(&[b"CLIENT".as_slice(), b"GETNAME"]));
    assert_eq!(h.read(), R::Err(BUSY_TEXT.into()));
    assert!(matches!(h.read(), R::Arr(_)), "HELLO answered while busy");
    assert_eq!(h.read(), R::Err(BUSY_TEXT.into()));
    assert_eq!(cli(port, &["SCRIPT", "KILL"]), "OK");
    assert!(matches!(caller.join().expect("caller"), R::Err(e) if e.contains("Script killed")));
    assert_eq!(h.cmd(&["CLIENT", "GETNAME"]), R::Bulk(b"late".to_vec()));
}

/// busy-reply-threshold and lua-time-limit are one setting, as in redis.
fn config_scenario(t: Target) -> Vec<String> {
    let srv = start(t, &[]);
    let mut c = conn(srv.port, 30);
    let mut log = Vec::new();
    for cmd in [
        &["CONFIG", "SET", "lua-time-limit", "300"][..],
        &["CONFIG", "SET", "busy-reply-threshold", "400"],
        &["CONFIG", "SET", "lua-time-limit", "500"],
    ] {
        log.push(c.cmd(cmd).s());
        for name in ["lua-time-limit", "busy-reply-threshold"] {
            log.push(c.cmd(&["CONFIG", "GET", name]).s());
        }
    }
    log
}

#[test]
fn threshold_alias_matches_redis() {
    let want = config_scenario(Target::Redis);
    let got = config_scenario(Target::Tessera { workers: 1 });
    assert_eq!(got, want);
}

/// Under the threshold a script is atomic: readers on other connections (other I/O
/// threads with two workers) wait, then run; they never see a middle value.
#[test]
fn concurrent_reader_waits_for_script() {
    for workers in [1, 2] {
        let srv = start(
            Target::Tessera { workers },
            &["--busy-reply-threshold", "60000"],
        );
        let port = srv.port;
        let script = "for i=1,100000 do redis.call('incr','x') end return redis.call('get','x')";
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let url = format!("redis://127.0.0.1:{port}/");
                std::thread::spawn(move || {
                    let client = redis::Client::open(url).expect("client");
                    let mut con = client.get_connection().expect("connect");
                    let mut seen = Vec::new();
                    loop {
                        let v: Option<i64> =
                            redis::cmd("GET").arg("x").query(&mut con).expect("GET");
                        seen.push(v.unwrap_or(0));
                        if v == Some(100_000) {
                            return seen;
                        }
                    }
                })
            })
            .collect();
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .expect("client")
            .get_connection()
            .expect("connect");
        let r: i64 = redis::cmd("EVAL")
            .arg(script)
            .arg(0)
            .query(&mut c)
            .expect("EVAL");
        assert_eq!(r, 100_000);
        for h in readers {
            let seen = h.join().expect("reader");
            assert!(
                seen.iter().all(|&v| v == 0 || v == 100_000),
                "worker-threads {workers}: a reader saw a middle value: {:?}",
                seen.iter().find(|&&v| v != 0 && v != 100_000)
            );
        }
    }
}
