//! Busy scripts against transactions and pcall, compared with redis-server 7.0 (issue 18:
//! unit/multi's "MULTI and script timeout" family, unit/scripting's "killed by SCRIPT KILL
//! even when use pcall"). tessera-node runs with one I/O thread (every connection shares
//! the script's thread: answered from the script's hook) and with two.
//!
//! No timed assertions: "busy" and "killed" are detected by polling; every read has a
//! deadline, so a server that does not answer fails the test instead of hanging it.

use std::time::Duration;

use tessera_testkit::*;

#[derive(Clone, Copy, Debug)]
enum Target {
    Redis,
    Tessera { workers: u32 },
}

fn start(t: Target) -> Server {
    start_with(t, &[])
}

fn start_with(t: Target, extra: &[&str]) -> Server {
    let base = [
        "--save",
        "",
        "--appendonly",
        "no",
        "--busy-reply-threshold",
        "100",
    ];
    match t {
        Target::Redis => Launch::new(redis_bin()).args(&base).args(extra).start(),
        Target::Tessera { workers } => Launch::new(tessera_bin())
            .args(&base)
            .args(extra)
            .args(&["--worker-threads", &workers.to_string()])
            .start(),
    }
}

/// A connection whose reads fail after `secs` instead of hanging.
fn conn(port: u16, secs: u64) -> Raw {
    let r = Raw::connect(port);
    r.w.set_read_timeout(Some(Duration::from_secs(secs)))
        .expect("timeout");
    r
}

/// Polls PING on fresh connections until one answers BUSY. A probe that gets no answer
/// within 2 s (tessera: it reached the script's thread in the same tick as the script, and
/// its task cannot run until the script ends) is dropped and the next one goes elsewhere.
/// The scenarios' own connections are only used once busy is seen, so they are parked.
fn wait_busy(port: u16) {
    wait_for(Duration::from_secs(60), "the script to go busy", || {
        let mut c = conn(port, 2);
        let a = encode(&[b"PING"]);
        c.send(&a);
        let mut l = String::new();
        matches!(std::io::BufRead::read_line(&mut c.r, &mut l), Ok(n) if n > 0 && l.starts_with("-BUSY "))
    });
}

/// Polls PING on fresh connections until one answers PONG (the killed script ended).
fn wait_free(port: u16) {
    wait_for(Duration::from_secs(60), "the script to end", || {
        let mut c = conn(port, 2);
        c.send(&encode(&[b"PING"]));
        let mut l = String::new();
        matches!(std::io::BufRead::read_line(&mut c.r, &mut l), Ok(n) if n > 0 && l.starts_with("+PONG"))
    });
}

const LOOP: &str = "while true do end";

/// One of unit/multi's four busy-script transaction tests: `variant` says when MULTI,
/// the queued commands and EXEC arrive relative to the busy script and its kill.
fn tx_scenario(t: Target, variant: &str) -> Vec<String> {
    let srv = start(t);
    let port = srv.port;
    // All three open before the script: with one tessera I/O thread they share its thread.
    let mut r = conn(port, 30);
    let mut rd1 = conn(port, 60);
    let mut r2 = conn(port, 30);
    let mut log = Vec::new();
    let mut note = |what: &str, x: R| log.push(format!("{what}: {}", x.s()));
    note("set", r.cmd(&["SET", "xx", "1"]));
    let eval = |rd1: &mut Raw, _: &mut Raw| {
        rd1.send(&encode(&[b"EVAL", LOOP.as_bytes(), b"0"]));
        wait_busy(port);
    };
    let kill = |r: &mut Raw| {
        let k = r.cmd(&["SCRIPT", "KILL"]);
        wait_free(port);
        k
    };
    match variant {
        // MULTI arrives while busy.
        "multi" => {
            eval(&mut rd1, &mut r);
            note("multi", r2.cmd(&["MULTI"]));
            note("incr", r2.cmd(&["INCR", "xx"]));
            note("kill", kill(&mut r));
            note("incr", r2.cmd(&["INCR", "xx"]));
            note("exec", r2.cmd(&["EXEC"]));
        }
        // EXEC arrives while busy.
        "exec" => {
            note("multi", r2.cmd(&["MULTI"]));
            note("incr", r2.cmd(&["INCR", "xx"]));
            eval(&mut rd1, &mut r);
            note("incr", r2.cmd(&["INCR", "xx"]));
            note("exec", r2.cmd(&["EXEC"]));
            note("kill", kill(&mut r));
        }
        // A queued command arrives while busy, EXEC after the kill.
        "body" => {
            note("multi", r2.cmd(&["MULTI"]));
            note("incr", r2.cmd(&["INCR", "xx"]));
            eval(&mut rd1, &mut r);
            note("incr", r2.cmd(&["INCR", "xx"]));
            note("kill", kill(&mut r));
            note("exec", r2.cmd(&["EXEC"]));
        }
        // Only EXEC arrives while busy.
        "justexec" => {
            note("multi", r2.cmd(&["MULTI"]));
            note("incr", r2.cmd(&["INCR", "xx"]));
            eval(&mut rd1, &mut r);
            note("exec", r2.cmd(&["EXEC"]));
            note("kill", kill(&mut r));
        }
        // DISCARD while busy, after MULTI and a refused command while busy.
        "discard" => {
            eval(&mut rd1, &mut r);
            note("multi", r2.cmd(&["MULTI"]));
            note("incr", r2.cmd(&["INCR", "xx"]));
            note("discard", r2.cmd(&["DISCARD"]));
            note("exec", r2.cmd(&["EXEC"]));
            note("kill", kill(&mut r));
        }
        other => panic!("unknown variant {other}"),
    }
    note("get", r.cmd(&["GET", "xx"]));
    // Out of MULTI whatever happened.
    note("ping", r2.cmd(&["PING", "asdf"]));
    note("script", rd1.read());
    log
}

#[test]
fn transactions_against_a_busy_script_match_redis() {
    for variant in ["multi", "exec", "body", "justexec", "discard"] {
        let want = tx_scenario(Target::Redis, variant);
        for workers in [1, 2] {
            let got = tx_scenario(Target::Tessera { workers }, variant);
            assert_eq!(got, want, "{variant}, worker-threads {workers}");
        }
    }
}

/// A busy script whose loop runs inside pcall: SCRIPT KILL (FUNCTION KILL) still ends it.
fn pcall_kill_scenario(t: Target, function: bool) -> Vec<String> {
    let srv = start(t);
    let port = srv.port;
    let mut r = conn(port, 30);
    let mut rd = conn(port, 60);
    let body = "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end";
    let mut log = Vec::new();
    if function {
        let lib = format!(
            "#!lua name=test\nredis.register_function('test', function(KEYS, ARGV)\n {body} \nend)"
        );
        log.push(r.cmd(&["FUNCTION", "LOAD", &lib]).s());
        rd.send(&encode(&[b"FCALL", b"test", b"0"]));
    } else {
        rd.send(&encode(&[b"EVAL", body.as_bytes(), b"0"]));
    }
    wait_busy(port);
    let kill: &[&str] = if function {
        &["FUNCTION", "KILL"]
    } else {
        &["SCRIPT", "KILL"]
    };
    log.push(r.cmd(kill).s());
    wait_free(port);
    log.push(rd.read().s());
    log.push(rd.cmd(&["PING"]).s());
    log
}

#[test]
fn script_looping_in_pcall_is_killed_as_redis() {
    for function in [false, true] {
        let want = pcall_kill_scenario(Target::Redis, function);
        assert!(
            want.iter().any(|l| l.contains("killed by user")),
            "{want:?}"
        );
        for workers in [1, 2] {
            let got = pcall_kill_scenario(Target::Tessera { workers }, function);
            assert_eq!(got, want, "function {function}, worker-threads {workers}");
        }
    }
}

/// unit/scripting's "Timedout scripts and unblocked command": a busy script waits (through
/// CLIENT LIST, allowed by DEBUG SET-DISABLE-DENY-SCRIPTS) until another connection, open
/// before it, names itself with HELLO (allowed while busy); a client blocked on the
/// script's key is served after the script, with its last push.
fn hello_scenario(t: Target) -> Vec<String> {
    let srv = start_with(t, &["--enable-debug-command", "yes"]);
    let port = srv.port;
    let mut r = conn(port, 30);
    let mut rd = conn(port, 60);
    let mut rd2 = conn(port, 60);
    let mut r3 = conn(port, 30);
    let mut log = Vec::new();
    rd2.send(&encode(&[b"BLPOP", b"x", b"0"]));
    wait_for(Duration::from_secs(60), "the BLPOP to block", || {
        r.cmd(&["INFO", "clients"])
            .s()
            .contains("blocked_clients:1")
    });
    log.push(r.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]).s());
    let script = "local clients
        redis.call('lpush',KEYS[1],'y');
        while true do
            clients = redis.call('client','list')
            if string.find(clients, 'abortscript') ~= nil then break end
        end
        redis.call('lpush',KEYS[1],'z');
        return clients";
    rd.send(&encode(&[b"EVAL", script.as_bytes(), b"1", b"x"]));
    wait_busy(port);
    let hello = r3.cmd(&["HELLO", "2", "SETNAME", "abortscript"]);
    log.push(format!("hello answered: {}", matches!(hello, R::Arr(_))));
    log.push(format!("blpop: {}", rd2.read().s()));
    log.push(format!(
        "script saw the name: {}",
        rd.read().s().contains("name=abortscript")
    ));
    log.push(r3.cmd(&["CLIENT", "GETNAME"]).s());
    log
}

#[test]
fn hello_from_the_busy_thread_ends_a_waiting_script_as_redis() {
    let want = hello_scenario(Target::Redis);
    for workers in [1, 2] {
        let got = hello_scenario(Target::Tessera { workers });
        assert_eq!(got, want, "worker-threads {workers}");
    }
}
