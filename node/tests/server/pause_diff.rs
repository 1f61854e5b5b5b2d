//! CLIENT PAUSE against redis-server 7.0 (issue 18, Redis's unit/pause): which commands a
//! pause holds (writes, may-replicate commands such as PUBLISH and PFCOUNT, EXEC of queued
//! writes, scripts that may write), that a held client counts in INFO blocked_clients and
//! shows as blocked in CLIENT LIST, that a pause keeps the dataset still (no active or
//! lazy expiry), that it starts only once the transaction that set it is over, and that a
//! paused replica reads but does not apply its master's stream.

use std::time::{Duration, Instant};

use tessera_testkit::*;

fn both() -> [Launch; 2] {
    [Launch::redis(), Launch::tessera()]
}

/// One step of a scenario. Connection 0 is the control client; 1.. are "deferring"
/// clients that send without reading, as the TCL suite's `redis_deferring_client`.
#[derive(Clone, Copy)]
enum S<'a> {
    /// A command on the control client; its reply is recorded.
    C(&'a [&'a str]),
    /// Sends on deferring client `i` without reading.
    Send(usize, &'a [&'a str]),
    /// Reads deferring client `i`'s next reply and records it.
    Read(usize),
    /// Waits (bounded) until INFO blocked_clients is `n`, and records what it saw.
    Blocked(usize),
    /// Records an INFO field.
    Info(&'a str),
    /// Records a field of deferring client `i`'s CLIENT LIST line.
    ClientField(usize, &'a str),
    /// Lets time pass (keys with a millisecond TTL go past it).
    Sleep(u64),
}

/// Sends `args` and reads the reply, or says there was none within 10 s (a client the
/// server holds), rather than failing the whole run.
fn ask(c: &mut Conn, args: &[&str]) -> Result<Reply, String> {
    c.send(args);
    reply(c)
}

fn reply(c: &mut Conn) -> Result<Reply, String> {
    c.w.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    match std::io::BufRead::fill_buf(&mut c.r) {
        Ok([]) => Err("closed".into()),
        Ok(_) => Ok(c.read()),
        Err(e) => Err(format!("no reply ({e})")),
    }
}

fn info(c: &mut Conn, field: &str) -> String {
    match ask(c, &["INFO", "everything"]) {
        Ok(Reply::Bulk(b)) => info_field(&String::from_utf8_lossy(&b), field).unwrap_or_default(),
        other => format!("INFO answered {other:?}"),
    }
}

/// Runs `steps` on `srv` and returns the transcript (one line per recorded step). A client
/// that never gets its reply fails the read (the connection's read timeout), not the run.
fn run(srv: &Server, steps: &[S<'_>]) -> Vec<String> {
    let mut c = srv.resp();
    let mut defer: Vec<(Conn, String)> = Vec::new();
    let conn = |defer: &mut Vec<(Conn, String)>, i: usize| -> usize {
        while defer.len() < i {
            let mut d = srv.resp();
            let id = format!("{:?}", d.cmd(&["CLIENT", "ID"]));
            defer.push((d, id));
        }
        i - 1
    };
    let mut out = Vec::new();
    for s in steps {
        match *s {
            S::C(args) => {
                let r = ask(&mut c, args);
                if r.is_err() {
                    // Its reply may still come: a new control client keeps replies in step.
                    c = srv.resp();
                }
                out.push(format!("{args:?} -> {r:?}"));
            }
            S::Send(i, args) => {
                let k = conn(&mut defer, i);
                defer[k].0.send(args);
            }
            S::Read(i) => {
                let k = conn(&mut defer, i);
                out.push(format!("client {i} read {:?}", reply(&mut defer[k].0)));
            }
            S::Blocked(n) => {
                let deadline = Instant::now() + Duration::from_secs(5);
                let mut seen = info(&mut c, "blocked_clients");
                while seen != n.to_string() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                    seen = info(&mut c, "blocked_clients");
                }
                out.push(format!("blocked_clients:{seen}"));
            }
            S::Info(f) => out.push(format!("{f}:{}", info(&mut c, f))),
            S::ClientField(i, f) => {
                let k = conn(&mut defer, i);
                let id = defer[k].1.trim_start_matches("Int(").trim_end_matches(')');
                let line = match ask(&mut c, &["CLIENT", "LIST", "ID", id]) {
                    Ok(Reply::Bulk(b)) => String::from_utf8_lossy(&b).into_owned(),
                    other => format!("{other:?}"),
                };
                let v = line
                    .split_whitespace()
                    .find_map(|kv| kv.strip_prefix(f).and_then(|r| r.strip_prefix('=')))
                    .unwrap_or("<missing>")
                    .to_string();
                out.push(format!("client {i} {f}={v}"));
            }
            S::Sleep(ms) => std::thread::sleep(Duration::from_millis(ms)),
        }
    }
    // Whatever happened, leave no pause behind for the next scenario.
    let mut c = srv.resp();
    c.cmd(&["CLIENT", "UNPAUSE"]);
    c.cmd(&["FLUSHALL"]);
    out
}

/// Runs every scenario on both servers and returns the differences.
fn diffs(cases: &[(&str, &[S<'_>])]) -> Vec<String> {
    let [r, t] = both().map(|l| l.args(&["--save", ""]).start());
    let mut d = Vec::new();
    for (name, steps) in cases {
        let want = run(&r, steps);
        let got = run(&t, steps);
        if want != got {
            d.push(format!(
                "{name}:\n  redis   {}\n  tessera {}",
                want.join(" | "),
                got.join(" | ")
            ));
        }
    }
    d
}

const PAUSE_W: &[&str] = &["CLIENT", "PAUSE", "60000", "WRITE"];
const UNPAUSE: &[&str] = &["CLIENT", "UNPAUSE"];

/// unit/pause's "paused by RO" tests: the commands a WRITE pause holds, counted as
/// blocked, served when it ends.
#[test]
fn held_clients_count_as_blocked_like_redis() {
    use S::*;
    let cases: &[(&str, &[S])] = &[
        (
            "reads pass a WRITE pause",
            &[
                C(PAUSE_W),
                Send(1, &["GET", "FOO"]),
                Read(1),
                Send(1, &["PING"]),
                Read(1),
                Info("blocked_clients"),
                C(UNPAUSE),
            ],
        ),
        (
            "a write is held",
            &[
                C(PAUSE_W),
                Send(1, &["SET", "FOO", "BAR"]),
                Blocked(1),
                ClientField(1, "flags"),
                ClientField(1, "cmd"),
                C(UNPAUSE),
                Read(1),
                Blocked(0),
            ],
        ),
        (
            "PFCOUNT and PUBLISH (may-replicate) are held",
            &[
                C(&["PFADD", "pause-hll", "test"]),
                C(PAUSE_W),
                Send(1, &["PFCOUNT", "pause-hll"]),
                Blocked(1),
                Send(2, &["PUBLISH", "foo", "bar"]),
                Blocked(2),
                C(UNPAUSE),
                Read(1),
                Read(2),
            ],
        ),
        (
            "EXEC of a queued write is held",
            &[
                Send(1, &["MULTI"]),
                Read(1),
                Send(1, &["SET", "FOO", "BAR"]),
                Read(1),
                C(PAUSE_W),
                Send(1, &["EXEC"]),
                Blocked(1),
                C(UNPAUSE),
                Read(1),
            ],
        ),
        (
            "EXEC of reads passes",
            &[
                C(&["SET", "FOO", "BAR"]),
                C(PAUSE_W),
                Send(1, &["MULTI"]),
                Read(1),
                Send(1, &["GET", "FOO"]),
                Read(1),
                Send(1, &["EXEC"]),
                Read(1),
                Info("blocked_clients"),
                C(UNPAUSE),
            ],
        ),
        (
            "scripts without no-writes are held",
            &[
                C(PAUSE_W),
                Send(1, &["EVAL", "return 1", "0"]),
                Send(2, &["EVAL", "#!lua\nreturn 1", "0"]),
                Blocked(2),
                C(UNPAUSE),
                Read(1),
                Read(2),
            ],
        ),
        (
            "read-only scripts pass",
            &[
                C(&["SET", "x", "y"]),
                C(PAUSE_W),
                C(&["EVAL", "#!lua flags=no-writes\nreturn 'unique'", "0"]),
                C(&["EVAL_RO", "return redis.call('GeT', 'x')", "1", "x"]),
                Info("blocked_clients"),
                C(UNPAUSE),
            ],
        ),
        (
            "scripts that may write, queued in MULTI, are held",
            &[
                Send(1, &["MULTI"]),
                Read(1),
                Send(1, &["EVAL", "#!lua\nreturn 12", "0"]),
                Read(1),
                Send(2, &["MULTI"]),
                Read(2),
                Send(2, &["EVAL", "return 13", "0"]),
                Read(2),
                C(PAUSE_W),
                Send(1, &["EXEC"]),
                Send(2, &["EXEC"]),
                Blocked(2),
                C(UNPAUSE),
                Read(1),
                Read(2),
            ],
        ),
        (
            "three clients queued",
            &[
                C(PAUSE_W),
                Send(1, &["SET", "FOO", "BAR"]),
                Send(2, &["SET", "FOO", "BAR"]),
                Send(3, &["SET", "FOO", "BAR"]),
                Blocked(3),
                C(UNPAUSE),
                Read(1),
                Read(2),
                Read(3),
            ],
        ),
        (
            "a syntax error is answered at once",
            &[C(PAUSE_W), C(&["SET", "FOO"]), C(UNPAUSE)],
        ),
        (
            "a pause set inside MULTI starts after EXEC",
            &[
                C(&["MULTI"]),
                C(&["SET", "FOO1{t}", "BAR"]),
                C(PAUSE_W),
                C(&["SET", "FOO2{t}", "BAR"]),
                C(&["EXEC"]),
                Send(1, &["SET", "FOO3{t}", "BAR"]),
                Blocked(1),
                C(&["GET", "FOO1{t}"]),
                C(&["GET", "FOO2{t}"]),
                C(&["GET", "FOO3{t}"]),
                C(UNPAUSE),
                Read(1),
            ],
        ),
        (
            "a short pause ALL holds reads and CLIENT commands, then serves them",
            &[
                C(&["SET", "FOO", "BAR"]),
                C(&["CLIENT", "PAUSE", "300", "ALL"]),
                Send(1, &["GET", "FOO"]),
                C(&["CLIENT", "UNPAUSE"]),
                Read(1),
                Info("blocked_clients"),
            ],
        ),
    ];
    let d = diffs(cases);
    assert!(d.is_empty(), "{}", d.join("\n"));
}

/// CLIENT PAUSE over a pause in effect only extends it, as Redis's pauseClients; and a
/// timeout whose end overflows the clock pauses nothing.
#[test]
fn pause_only_extends_like_redis() {
    use S::*;
    let cases: &[(&str, &[S])] = &[
        (
            "a shorter pause does not shorten a longer one",
            &[
                C(PAUSE_W),
                C(&["CLIENT", "PAUSE", "10", "WRITE"]),
                Sleep(100),
                Send(1, &["SET", "FOO", "BAR"]),
                Blocked(1),
                C(UNPAUSE),
                Read(1),
            ],
        ),
        (
            "an overflowing timeout pauses nothing",
            &[
                C(&["CLIENT", "PAUSE", "9223372036854775807"]),
                C(&["PING"]),
                C(&["CLIENT", "PAUSE", "9223372036854775000", "WRITE"]),
                C(&["SET", "FOO", "BAR"]),
            ],
        ),
    ];
    let d = diffs(cases);
    assert!(d.is_empty(), "{}", d.join("\n"));
}

/// unit/pause "Test both active and passive expires are skipped during client pause": a
/// paused server answers as if the keys were gone but deletes nothing until the pause ends.
#[test]
fn pause_keeps_expired_keys_until_it_ends_like_redis() {
    use S::*;
    let cases: &[(&str, &[S])] = &[(
        "expiry during a pause",
        &[
            Info("expired_keys"),
            C(&["MULTI"]),
            C(&["SET", "foo{t}", "bar{t}", "PX", "10"]),
            C(&["SET", "bar{t}", "foo{t}", "PX", "10"]),
            C(PAUSE_W),
            C(&["EXEC"]),
            Sleep(300),
            C(&["GET", "foo{t}"]),
            C(&["GET", "bar{t}"]),
            C(&["DBSIZE"]),
            Info("expired_keys"),
            C(UNPAUSE),
            C(&["GET", "foo{t}"]),
            C(&["GET", "bar{t}"]),
            Info("expired_keys"),
        ],
    )];
    let d = diffs(cases);
    assert!(d.is_empty(), "{}", d.join("\n"));
}

/// unit/pause "may-replicate commands are rejected in RO scripts": PUBLISH from EVAL_RO or
/// a `no-writes` script is a write as far as read-only scripts go.
#[test]
fn read_only_scripts_refuse_publish_like_redis() {
    use S::*;
    let cases: &[(&str, &[S])] = &[(
        "PUBLISH from read-only scripts",
        &[
            C(&["EVAL_RO", "return redis.call('publish','ch','msg')", "0"]),
            C(&[
                "EVAL",
                "#!lua flags=no-writes\nreturn redis.call('publish','ch','msg')",
                "0",
            ]),
            C(&["EVAL", "return redis.call('publish','ch','msg')", "0"]),
        ],
    )];
    let d = diffs(cases);
    assert!(d.is_empty(), "{}", d.join("\n"));
}
/// unit/pause "Test when replica paused, offset would not grow" and "... would grow after
/// unpause": a paused replica keeps reading its master's stream (slave_read_repl_offset)
/// but applies none of its writes (slave_repl_offset) until the pause ends.
#[test]
fn paused_replica_reads_but_does_not_apply_like_redis() {
    let mut seen = Vec::new();
    for l in both() {
        let bin = l.bin().to_string();
        let master = Launch::new(&bin)
            .args(&["--save", "", "--repl-ping-replica-period", "3600"])
            .start();
        let replica = Launch::new(&bin).args(&["--save", ""]).start();
        let (mut m, mut r) = (master.resp(), replica.resp());
        let port = master
            .addr()
            .rsplit(':')
            .next()
            .unwrap_or_default()
            .to_string();
        r.cmd(&["REPLICAOF", "127.0.0.1", &port]);
        let up = |r: &mut Conn| info(r, "master_link_status") == "up";
        wait_until("the replica's link", Duration::from_secs(20), || up(&mut r));
        m.cmd(&["SET", "foo", "bar"]);
        let old = info(&mut m, "master_repl_offset");
        wait_until("the replica applies", Duration::from_secs(10), || {
            info(&mut r, "slave_repl_offset") == old
        });
        let mut t = vec![format!(
            "{:?}",
            r.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"])
        )];
        m.cmd(&["SET", "foo2", "bar2"]);
        let now = info(&mut m, "master_repl_offset");
        let deadline = Instant::now() + Duration::from_secs(5);
        while info(&mut r, "slave_read_repl_offset") != now && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        t.push(format!(
            "read at master offset: {}",
            info(&mut r, "slave_read_repl_offset") == now
        ));
        t.push(format!(
            "applied still old: {}",
            info(&mut r, "slave_repl_offset") == old
        ));
        t.push(format!("paused GET foo2: {:?}", r.cmd(&["GET", "foo2"])));
        t.push(format!("{:?}", r.cmd(&["CLIENT", "UNPAUSE"])));
        let deadline = Instant::now() + Duration::from_secs(5);
        while info(&mut r, "slave_repl_offset") != now && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        t.push(format!(
            "applied after unpause: {}",
            info(&mut r, "slave_repl_offset") == now
        ));
        t.push(format!("GET foo2: {:?}", r.cmd(&["GET", "foo2"])));
        seen.push(t.join(" | "));
    }
    assert_eq!(seen[0], seen[1], "redis, then tessera");
}
