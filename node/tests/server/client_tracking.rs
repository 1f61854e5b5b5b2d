//! Client-side caching (CLIENT TRACKING & co), differential against redis-server 7.0.15:
//! each scenario runs on both servers over raw RESP connections and the byte transcripts
//! (replies and push messages, client ids normalized) must be equal. Pending pushes are
//! collected by sending PING and reading every value up to its +PONG: a push is queued
//! before the writer's reply, so it is read before the PONG on both servers.

use std::time::Duration;

use tessera_testkit::*;

fn start(bin: &str, extra: &[&str]) -> Server {
    Launch::new(bin)
        .args(&["--save", "", "--appendonly", "no"])
        .args(extra)
        .start()
}

/// One raw connection (the kit's) whose replies are kept as their exact bytes.
struct Conn {
    c: tessera_testkit::Conn,
    id: i64,
}

impl Conn {
    fn open(port: u16, resp3: bool) -> Conn {
        let c = tessera_testkit::Conn::connect(port);
        c.w.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut c = Conn { c, id: 0 };
        if resp3 {
            c.cmd(&["HELLO", "3"]);
        }
        let id = c.cmd(&["CLIENT", "ID"]);
        c.id = id
            .trim_start_matches(':')
            .trim()
            .parse()
            .expect("client id");
        c
    }

    fn send(&mut self, args: &[&str]) {
        self.c.send(args);
    }

    /// One complete RESP2/RESP3 value, as text.
    fn read(&mut self) -> String {
        String::from_utf8_lossy(&self.c.read_raw()).into_owned()
    }

    fn cmd(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.read()
    }

    /// Pending pushes, then the PONG (as one string).
    fn drain(&mut self) -> String {
        self.send(&["PING"]);
        let mut s = String::new();
        loop {
            let v = self.read();
            let done = v == "+PONG\r\n" || v.starts_with("*2\r\n$4\r\npong");
            s.push_str(&v);
            if done {
                return s;
            }
        }
    }
}

/// A transcript builder that replaces the scenario's client ids with names.
struct Log {
    lines: Vec<String>,
    ids: Vec<(i64, &'static str)>,
}

impl Log {
    fn new() -> Log {
        Log {
            lines: Vec::new(),
            ids: Vec::new(),
        }
    }
    fn name(&mut self, c: &Conn, n: &'static str) {
        self.ids.push((c.id, n));
    }
    fn add(&mut self, what: &str, v: String) {
        let mut v = format!("\n{v}");
        let mut what = format!(" {what} ");
        for (id, n) in &self.ids {
            v = v.replace(&format!("\n:{id}\r\n"), &format!("\n:<{n}>\r\n"));
            if v == format!("\nredir={id}") {
                v = format!("\nredir=<{n}>");
            }
            what = what.replace(&format!(" {id} "), &format!(" <{n}> "));
        }
        self.lines.push(format!("{what} -> {v:?}"));
    }
    fn cmd(&mut self, c: &mut Conn, args: &[&str]) {
        let v = c.cmd(args);
        self.add(&args.join(" "), v);
    }
    fn drain(&mut self, c: &mut Conn, who: &str) {
        let v = c.drain();
        self.add(&format!("drain {who}"), v);
    }
}

/// Runs `scenario` on redis-server and tessera-node and compares the transcripts.
fn differential(extra: &[&str], scenario: impl Fn(u16) -> Vec<String>) {
    let theirs = {
        let r = start(redis_bin(), extra);
        scenario(r.port)
    };
    let ours = {
        let t = start(tessera_bin(), extra);
        scenario(t.port)
    };
    if std::env::var_os("TRACKING_DUMP").is_some() {
        eprintln!("{}", theirs.join("\n"));
    }
    let diffs: Vec<String> = ours
        .iter()
        .zip(&theirs)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| format!("step {i}:\n  tessera: {a}\n  redis:   {b}"))
        .collect();
    assert!(
        diffs.is_empty(),
        "tessera vs redis-server:\n{}",
        diffs.join("\n")
    );
    assert_eq!(ours.len(), theirs.len(), "transcript lengths");
}

#[test]
fn default_mode_resp3_push_to_reader_and_self() {
    differential(&[], |port| {
        let mut log = Log::new();
        let mut a = Conn::open(port, true);
        let mut b = Conn::open(port, false);
        log.cmd(&mut a, &["CLIENT", "TRACKING", "ON"]);
        log.cmd(&mut b, &["SET", "k", "1"]);
        log.cmd(&mut a, &["GET", "k"]);
        log.cmd(&mut a, &["MGET", "k2", "k3"]);
        log.cmd(&mut b, &["SET", "k", "2"]);
        log.drain(&mut a, "a");
        // Forgotten after one invalidation.
        log.cmd(&mut b, &["SET", "k", "3"]);
        log.drain(&mut a, "a");
        log.cmd(&mut b, &["MSET", "k2", "x", "k3", "y"]);
        log.drain(&mut a, "a");
        // The reader writing its own key: reply first, then the push.
        log.cmd(&mut a, &["GET", "k"]);
        log.cmd(&mut a, &["SET", "k", "4"]);
        log.drain(&mut a, "a");
        // A write in MULTI/EXEC and a script's write.
        log.cmd(&mut a, &["GET", "k"]);
        log.cmd(&mut a, &["HGETALL", "h"]);
        log.cmd(&mut b, &["MULTI"]);
        log.cmd(&mut b, &["SET", "k", "5"]);
        log.cmd(&mut b, &["EXEC"]);
        log.drain(&mut a, "a");
        log.cmd(
            &mut b,
            &["EVAL", "redis.call('HSET', KEYS[1], 'f', 'v')", "1", "h"],
        );
        log.drain(&mut a, "a");
        // OFF: nothing more is remembered.
        // A script's reads are remembered for the caller.
        log.cmd(
            &mut a,
            &["EVAL", "return redis.call('GET', KEYS[1])", "1", "s"],
        );
        log.cmd(&mut b, &["SET", "s", "1"]);
        log.drain(&mut a, "a");
        log.cmd(&mut a, &["CLIENT", "TRACKING", "OFF"]);
        log.cmd(&mut a, &["GET", "k"]);
        log.cmd(&mut b, &["SET", "k", "6"]);
        log.drain(&mut a, "a");
        // RESET stops tracking.
        log.cmd(&mut a, &["CLIENT", "TRACKING", "ON"]);
        log.cmd(&mut a, &["GET", "k"]);
        log.cmd(&mut a, &["RESET"]);
        log.cmd(&mut a, &["CLIENT", "TRACKINGINFO"]);
        log.cmd(&mut b, &["SET", "k", "7"]);
        log.drain(&mut a, "a");
        log.lines
    });
}

#[test]
fn optin_optout_caching_and_noloop() {
    differential(&[], |port| {
        let mut log = Log::new();
        let mut a = Conn::open(port, true);
        let mut b = Conn::open(port, false);
        log.cmd(&mut a, &["CLIENT", "TRACKING", "ON", "OPTIN"]);
        log.cmd(&mut a, &["CLIENT", "TRACKINGINFO"]);
        log.cmd(&mut a, &["GET", "x"]);
        log.cmd(&mut a, &["CLIENT", "CACHING", "YES"]);
        log.cmd(&mut a, &["CLIENT", "TRACKINGINFO"]);
        log.cmd(&mut a, &["GET", "y"]);
        log.cmd(&mut a, &["CLIENT", "TRACKINGINFO"]);
        log.cmd(&mut a, &["GET", "z"]);
        log.cmd(&mut b, &["MSET", "x", "1", "y", "2", "z", "3"]);
        log.drain(&mut a, "a");
        log.cmd(&mut a, &["CLIENT", "CACHING", "NO"]);
        log.cmd(&mut a, &["CLIENT", "TRACKING", "ON", "OPTOUT"]);
        log.cmd(&mut a, &["CLIENT", "TRACKING", "OFF"]);
        log.cmd(&mut a, &["CLIENT", "TRACKING", "ON", "OPTOUT", "NOLOOP"]);
        log.cmd(&mut a, &["CLIENT", "CACHING", "YES"]);
        log.cmd(&mut a, &["CLIENT", "CACHING", "NO"]);
        log.cmd(&mut a, &["CLIENT", "TRACKINGINFO"]);
        log.cmd(&mut a, &["GET", "x"]);
        log.cmd(&mut a, &["GET", "y"]);
        log.cmd(&mut a, &["GET", "z"]);
        // NOLOOP: a's own write of z sends a nothing.
        log.cmd(&mut a, &["SET", "z", "9"]);
        log.cmd(&mut b, &["MSET", "x", "1", "y", "2", "z", "3"]);
        log.drain(&mut a, "a");
        log.lines
    });
}

#[test]
fn bcast_prefixes_and_redirect_to_resp2_subscriber() {
    differential(&[], |port| {
        let mut log = Log::new();
        let mut sub = Conn::open(port, false);
        let mut a = Conn::open(port, false);
        let mut b = Conn::open(port, true);
        let mut w = Conn::open(port, false);
        log.name(&sub, "sub");
        log.cmd(&mut sub, &["SUBSCRIBE", "__redis__:invalidate"]);
        let redir = sub.id.to_string();
        log.cmd(
            &mut a,
            &[
                "CLIENT", "TRACKING", "ON", "REDIRECT", &redir, "BCAST", "PREFIX", "user:",
                "PREFIX", "obj:",
            ],
        );
        log.cmd(&mut a, &["CLIENT", "TRACKINGINFO"]);
        log.cmd(&mut a, &["CLIENT", "GETREDIR"]);
        log.cmd(&mut b, &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"]);
        log.cmd(&mut b, &["CLIENT", "TRACKINGINFO"]);
        log.cmd(
            &mut w,
            &[
                "MSET", "user:1", "a", "other", "b", "obj:9", "c", "user:0", "d",
            ],
        );
        log.drain(&mut sub, "sub");
        log.drain(&mut b, "b");
        // NOLOOP in BCAST: b's own writes don't come back to b.
        log.cmd(&mut b, &["SET", "user:2", "x"]);
        log.drain(&mut sub, "sub");
        log.drain(&mut b, "b");
        log.cmd(&mut w, &["DEL", "nothing:here"]);
        log.drain(&mut sub, "sub");
        log.drain(&mut b, "b");
        // Default mode redirected to the subscriber.
        log.cmd(&mut a, &["CLIENT", "TRACKING", "OFF"]);
        log.cmd(&mut a, &["CLIENT", "TRACKING", "ON", "REDIRECT", &redir]);
        log.cmd(&mut a, &["GET", "plain"]);
        log.cmd(&mut w, &["SET", "plain", "1"]);
        log.drain(&mut sub, "sub");
        // FLUSHALL: a null invalidation to every tracking client.
        log.cmd(&mut w, &["FLUSHALL"]);
        log.drain(&mut sub, "sub");
        log.drain(&mut b, "b");
        log.lines
    });
}

#[test]
fn argument_errors_and_info_shapes() {
    differential(&[], |port| {
        let mut log = Log::new();
        let mut a = Conn::open(port, false);
        let mut c3 = Conn::open(port, true);
        for args in [
            &["CLIENT", "TRACKING"][..],
            &["CLIENT", "TRACKING", "MAYBE"],
            &["CLIENT", "TRACKING", "ON", "PREFIX", "a"],
            &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"],
            &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"],
            &["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"],
            &["CLIENT", "TRACKING", "ON", "REDIRECT", "abc"],
            &[
                "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab", "PREFIX", "a",
            ],
            &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX"],
            &["CLIENT", "TRACKING", "ON", "NOPE"],
            &["CLIENT", "CACHING", "YES"],
            &["CLIENT", "CACHING"],
            &["CLIENT", "GETREDIR"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "TRACKING", "ON"],
            &["CLIENT", "GETREDIR"],
            &["CLIENT", "CACHING", "YES"],
            &["CLIENT", "CACHING", "NO"],
            &["CLIENT", "CACHING", "MAYBE"],
            &["CLIENT", "TRACKING", "ON", "BCAST"],
            &["CLIENT", "TRACKING", "ON", "OPTIN"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "TRACKING", "OFF"],
            &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p"],
            &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "pq"],
            &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "q"],
            &["CLIENT", "TRACKING", "ON"],
            &["CLIENT", "TRACKINGINFO"],
        ] {
            log.cmd(&mut a, args);
        }
        log.cmd(&mut c3, &["CLIENT", "TRACKINGINFO"]);
        log.cmd(
            &mut c3,
            &[
                "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "b", "PREFIX", "a",
            ],
        );
        // Two REDIRECTs (the first to an existing client: ids of the harness's own
        // short-lived connections may or may not still exist).
        log.name(&c3, "c3");
        let own = c3.id.to_string();
        log.cmd(
            &mut c3,
            &[
                "CLIENT", "TRACKING", "ON", "REDIRECT", &own, "REDIRECT", &own,
            ],
        );
        log.cmd(&mut c3, &["CLIENT", "TRACKINGINFO"]);
        log.cmd(&mut c3, &["CLIENT", "HELP"]);
        // CLIENT INFO flags and redir (t, B).
        let info = c3.cmd(&["CLIENT", "INFO"]);
        let field = |s: &str, f: &str| {
            s.split_whitespace()
                .find(|w| w.starts_with(f))
                .unwrap_or("")
                .to_string()
        };
        log.add("client info flags", field(&info, "flags="));
        log.add("client info redir", field(&info, "redir="));
        let info = a.cmd(&["CLIENT", "INFO"]);
        log.add("client info flags (a)", field(&info, "flags="));
        log.add("client info redir (a)", field(&info, "redir="));
        let info = a.cmd(&["INFO", "clients"]);
        log.add("tracking_clients", field(&info, "tracking_clients:"));
        log.lines
    });
}

#[test]
fn expiry_of_a_tracked_key_invalidates() {
    differential(&[], |port| {
        let mut log = Log::new();
        let mut a = Conn::open(port, true);
        let mut w = Conn::open(port, false);
        log.cmd(&mut a, &["CLIENT", "TRACKING", "ON"]);
        log.cmd(&mut w, &["SET", "e", "v", "PX", "50"]);
        log.cmd(&mut a, &["GET", "e"]);
        // Gone either by the active cycle or by this lookup: one push either way.
        wait_for(Duration::from_secs(30), "key expired", || {
            w.cmd(&["EXISTS", "e"]) == ":0\r\n"
        });
        log.drain(&mut a, "a");
        log.lines
    });
}

#[test]
fn redirects_broken_redirect_and_batching() {
    differential(&[], |port| {
        let mut log = Log::new();
        let mut a = Conn::open(port, true);
        let mut r3 = Conn::open(port, true);
        let mut r2 = Conn::open(port, false);
        let mut w = Conn::open(port, false);
        log.name(&r3, "r3");
        log.name(&r2, "r2");
        // Redirect to a RESP3 client: a push there.
        let id3 = r3.id.to_string();
        log.cmd(&mut a, &["CLIENT", "TRACKING", "ON", "REDIRECT", &id3]);
        log.cmd(&mut a, &["MGET", "a1", "a2"]);
        log.cmd(&mut w, &["MULTI"]);
        log.cmd(&mut w, &["SET", "a1", "x"]);
        log.cmd(&mut w, &["SET", "a2", "x"]);
        log.cmd(&mut w, &["DEL", "a3"]);
        log.cmd(&mut w, &["EXEC"]);
        log.drain(&mut r3, "r3");
        log.drain(&mut a, "a");
        // Redirect to a RESP2 client that subscribed to nothing: nothing is sent.
        let id2 = r2.id.to_string();
        log.cmd(&mut a, &["CLIENT", "TRACKING", "ON", "REDIRECT", &id2]);
        log.cmd(&mut a, &["GET", "a1"]);
        log.cmd(&mut w, &["SET", "a1", "y"]);
        log.drain(&mut r2, "r2");
        // ... but any subscription makes it a pub/sub client that gets the message.
        log.cmd(&mut r2, &["SUBSCRIBE", "other"]);
        log.cmd(&mut a, &["GET", "a1"]);
        log.cmd(&mut w, &["SET", "a1", "z"]);
        log.drain(&mut r2, "r2");
        // The redirect target goes away: 'tracking-redir-broken' and the R flag.
        log.cmd(&mut a, &["GET", "a1"]);
        drop(r2);
        let a_id = a.id.to_string();
        wait_for(Duration::from_secs(30), "r2 gone", || {
            !w.cmd(&["CLIENT", "LIST"]).contains(&format!("id={id2} "))
        });
        log.cmd(&mut w, &["SET", "a1", "q"]);
        log.drain(&mut a, "a");
        log.cmd(&mut a, &["CLIENT", "TRACKINGINFO"]);
        let list = w.cmd(&["CLIENT", "LIST", "ID", &a_id]);
        let flags = list
            .split_whitespace()
            .find(|f| f.starts_with("flags="))
            .unwrap_or("")
            .to_string();
        log.add("client list flags", flags);
        log.cmd(&mut a, &["CLIENT", "TRACKING", "OFF"]);
        // BCAST: a MULTI's keys come as one message; FLUSHDB gives a null; SWAPDB.
        log.cmd(
            &mut a,
            &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "b:"],
        );
        log.cmd(&mut w, &["MULTI"]);
        log.cmd(&mut w, &["SET", "b:2", "x"]);
        log.cmd(&mut w, &["SET", "b:1", "x"]);
        log.cmd(&mut w, &["SET", "c:1", "x"]);
        log.cmd(&mut w, &["EXEC"]);
        log.drain(&mut a, "a");
        log.cmd(&mut w, &["FLUSHDB"]);
        log.drain(&mut a, "a");
        log.cmd(&mut w, &["SET", "b:9", "x"]);
        log.drain(&mut a, "a");
        log.cmd(&mut w, &["SWAPDB", "0", "1"]);
        log.drain(&mut a, "a");
        let stats = w.cmd(&["INFO", "stats"]);
        for f in [
            "tracking_total_keys",
            "tracking_total_items",
            "tracking_total_prefixes",
        ] {
            log.add(
                f,
                tessera_testkit::info_field(&stats, f).unwrap_or_default(),
            );
        }
        log.lines
    });
}

/// Drains `c` until `want` shows up (the replica applies its master's stream on its own
/// time); returns everything read.
fn wait_push(c: &mut Conn, want: &str) -> String {
    let mut all = String::new();
    wait_for(Duration::from_secs(30), want, || {
        all.push_str(&c.drain());
        all.contains(want)
    });
    all
}

/// A replica's tracking clients are invalidated by the writes of its master's stream.
#[test]
fn replica_stream_invalidates_replica_clients() {
    let m = start(tessera_bin(), &[]);
    let master = m.port.to_string();
    let r = start(tessera_bin(), &["--replicaof", "127.0.0.1", &master]);
    let mut w = Conn::open(m.port, false);
    let mut probe = Conn::open(r.port, false);
    wait_for(Duration::from_secs(30), "replica link up", || {
        info_field(&mut probe, "replication", "master_link_status") == "up"
    });
    let mut a = Conn::open(r.port, true);
    let mut b = Conn::open(r.port, true);
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "ON"]), "+OK\r\n");
    assert_eq!(
        b.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "r:"]),
        "+OK\r\n"
    );
    assert_eq!(a.cmd(&["GET", "rk"]), "_\r\n");
    assert_eq!(w.cmd(&["SET", "rk", "v"]), "+OK\r\n");
    let got = wait_push(&mut a, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\nrk\r\n");
    assert_eq!(got.matches("invalidate").count(), 1, "{got:?}");
    assert_eq!(w.cmd(&["SET", "r:1", "v"]), "+OK\r\n");
    wait_push(&mut b, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nr:1\r\n");
    // A full sync from another master empties the dataset: like FLUSHALL, a null
    // invalidation for every tracking client.
    let m2 = start(tessera_bin(), &[]);
    assert_eq!(a.cmd(&["GET", "rk"]), "$1\r\nv\r\n");
    let mut ctl = Conn::open(r.port, false);
    assert_eq!(
        ctl.cmd(&["REPLICAOF", "127.0.0.1", &m2.port.to_string()]),
        "+OK\r\n"
    );
    wait_push(&mut a, ">2\r\n$10\r\ninvalidate\r\n_\r\n");
    wait_push(&mut b, ">2\r\n$10\r\ninvalidate\r\n_\r\n");
}

/// Keys evicted by maxmemory are invalidated for their readers.
#[test]
fn eviction_invalidates_tracked_keys() {
    let t = start(tessera_bin(), &["--maxmemory-policy", "allkeys-random"]);
    let mut a = Conn::open(t.port, true);
    let mut w = Conn::open(t.port, false);
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "ON"]), "+OK\r\n");
    let big = "x".repeat(10_000);
    for k in 0..100 {
        w.cmd(&["SET", &format!("ev{k}"), &big]);
        a.cmd(&["GET", &format!("ev{k}")]);
    }
    let used: u64 = info_field(&mut w, "memory", "used_memory")
        .parse()
        .expect("used_memory");
    let limit = (used + 200_000).to_string();
    assert_eq!(w.cmd(&["CONFIG", "SET", "maxmemory", &limit]), "+OK\r\n");
    for k in 0..200 {
        w.cmd(&["SET", &format!("fill{k}"), &big]);
    }
    assert_ne!(info_field(&mut w, "stats", "evicted_keys"), "0");
    // Every invalidated key is one of the tracked keys and is gone now.
    let mut seen = 0;
    wait_for(Duration::from_secs(30), "an eviction push", || {
        let got = a.drain();
        for part in got.split(">2\r\n$10\r\ninvalidate\r\n*1\r\n").skip(1) {
            let key = part.lines().nth(1).unwrap_or("").to_string();
            assert!(key.starts_with("ev"), "{key:?} in {got:?}");
            assert_eq!(w.cmd(&["EXISTS", &key]), ":0\r\n", "{key}");
            seen += 1;
        }
        seen > 0
    });
}

fn info_field(c: &mut Conn, section: &str, f: &str) -> String {
    let s = c.cmd(&["INFO", section]);
    tessera_testkit::info_field(&s, f).unwrap_or_default()
}

/// Readers on one I/O thread, writers on another; a tracking client that disconnects
/// leaves keys that are dropped once invalidated (no leak), and the table limit evicts.
#[test]
fn worker_threads_disconnect_and_table_limit() {
    let t = start(tessera_bin(), &["--worker-threads", "2"]);
    let mut readers: Vec<Conn> = (0..4).map(|_| Conn::open(t.port, true)).collect();
    let mut w = Conn::open(t.port, false);
    for (i, r) in readers.iter_mut().enumerate() {
        assert_eq!(r.cmd(&["CLIENT", "TRACKING", "ON"]), "+OK\r\n");
        for k in 0..10 {
            r.cmd(&["GET", &format!("k{i}:{k}")]);
        }
    }
    assert_eq!(info_field(&mut w, "clients", "tracking_clients"), "4");
    assert_eq!(info_field(&mut w, "stats", "tracking_total_keys"), "40");
    for i in 0..4 {
        for k in 0..10 {
            w.cmd(&["SET", &format!("k{i}:{k}"), "v"]);
        }
    }
    for (i, r) in readers.iter_mut().enumerate() {
        let got = r.drain();
        for k in 0..10 {
            let key = format!("k{i}:{k}");
            let push = format!(
                ">2\r\n$10\r\ninvalidate\r\n*1\r\n${}\r\n{key}\r\n",
                key.len()
            );
            assert!(got.contains(&push), "reader {i} missing {key}: {got:?}");
        }
    }
    assert_eq!(info_field(&mut w, "stats", "tracking_total_keys"), "0");
    // A reader disconnects with tracked keys; writes to them must not fail or leak.
    let mut gone = readers.pop().expect("reader");
    gone.cmd(&["GET", "orphan1"]);
    gone.cmd(&["GET", "orphan2"]);
    drop(gone);
    wait_for(Duration::from_secs(30), "client gone", || {
        info_field(&mut w, "clients", "tracking_clients") == "3"
    });
    assert_eq!(info_field(&mut w, "stats", "tracking_total_keys"), "2");
    w.cmd(&["SET", "orphan1", "x"]);
    w.cmd(&["SET", "orphan2", "y"]);
    assert_eq!(info_field(&mut w, "stats", "tracking_total_keys"), "0");
    assert_eq!(info_field(&mut w, "stats", "tracking_total_items"), "0");
    // tracking-table-max-keys: the oldest surplus keys are invalidated.
    assert_eq!(
        w.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "5"]),
        "+OK\r\n"
    );
    // The reader gets its own evicted keys' pushes, interleaved with its replies.
    let r = &mut readers[0];
    for k in 0..8 {
        r.send(&["GET", &format!("lim{k}")]);
    }
    let (mut nulls, mut pushes) = (0, 0);
    while nulls < 8 || pushes < 3 {
        let v = r.read();
        if v == "_\r\n" {
            nulls += 1;
        } else if v.starts_with(">2\r\n$10\r\ninvalidate\r\n*1\r\n$4\r\nlim") {
            pushes += 1;
        } else {
            panic!("unexpected {v:?}");
        }
    }
    assert_eq!((nulls, pushes), (8, 3));
    assert_eq!(info_field(&mut w, "stats", "tracking_total_keys"), "5");
}

/// The `redis` crate's RESP3 client (as client-side caching libraries use it) receives the
/// invalidation as a push of kind `invalidate`, on both servers.
#[test]
fn redis_crate_resp3_client_gets_invalidate_push() {
    for bin in [redis_bin(), tessera_bin()] {
        let s = start(bin, &[]);
        let url = format!("redis://127.0.0.1:{}/?protocol=resp3", s.port);
        let client = redis::Client::open(url).expect("client");
        let mut reader = client.get_connection().expect("connect");
        let (tx, rx) = std::sync::mpsc::channel();
        reader.set_push_sender(tx);
        let mut writer = client.get_connection().expect("connect");
        let _: () = redis::cmd("CLIENT")
            .arg("TRACKING")
            .arg("ON")
            .query(&mut reader)
            .expect("tracking on");
        let _: Option<String> = redis::cmd("GET")
            .arg("cached")
            .query(&mut reader)
            .expect("get");
        let _: () = redis::cmd("SET")
            .arg("cached")
            .arg("v")
            .query(&mut writer)
            .expect("set");
        let _: String = redis::cmd("PING").query(&mut reader).expect("ping");
        let push = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("{bin}: no push: {e}"));
        assert_eq!(push.kind, redis::PushKind::Invalidate, "{bin}");
        assert_eq!(
            push.data,
            vec![redis::Value::Array(vec![redis::Value::BulkString(
                b"cached".to_vec()
            )])],
            "{bin}"
        );
    }
}
