//! Pub/sub replies and CLIENT subcommands against redis-server 7.0 (issue 18): the same
//! requests on both servers, raw reply bytes compared (RESP2 and RESP3).

use std::time::Duration;

use tessera_testkit::*;

fn both() -> [Server; 2] {
    [Launch::redis(), Launch::tessera()].map(|l| l.args(&["--save", ""]).start())
}

/// Sends one command and reads its reply as raw bytes.
fn raw(c: &mut Conn, args: &[&str]) -> Vec<u8> {
    c.send(args);
    c.read_raw()
}

/// Lines "<args>: redis <bytes> / tessera <bytes>" for every request whose replies differ.
fn grid_diffs(rc: &mut Conn, tc: &mut Conn, grid: &[Vec<&str>]) -> Vec<String> {
    let mut diffs = Vec::new();
    for args in grid {
        let (want, got) = (raw(rc, args), raw(tc, args));
        if want != got {
            diffs.push(format!(
                "{args:?}: redis {:?} / tessera {:?}",
                String::from_utf8_lossy(&want),
                String::from_utf8_lossy(&got)
            ));
        }
    }
    diffs
}

/// Every PUBSUB subcommand (and its malformed forms) answers as Redis 7.0 in RESP2 and
/// RESP3: NUMSUB and SHARDNUMSUB are flat arrays in both (tessera answered a RESP3 map).
#[test]
fn pubsub_introspection_shapes_like_redis() {
    let servers = both();
    let mut diffs = Vec::new();
    for resp3 in [false, true] {
        let mut conns = servers.each_ref().map(|s| {
            let mut sub = Conn::with_proto(s.port, resp3);
            for args in [
                ["SUBSCRIBE", "x"],
                ["SSUBSCRIBE", "y"],
                ["PSUBSCRIBE", "p*"],
            ] {
                sub.send(&args);
                sub.read_raw();
            }
            (sub, Conn::with_proto(s.port, resp3))
        });
        let [(_, rc), (_, tc)] = &mut conns;
        let grid: Vec<Vec<&str>> = [
            "PUBSUB NUMSUB x z",
            "PUBSUB NUMSUB",
            "PUBSUB SHARDNUMSUB y z",
            "PUBSUB SHARDNUMSUB",
            "PUBSUB CHANNELS",
            "PUBSUB CHANNELS x*",
            "PUBSUB CHANNELS a b",
            "PUBSUB SHARDCHANNELS",
            "PUBSUB SHARDCHANNELS y",
            "PUBSUB SHARDCHANNELS a b",
            "PUBSUB NUMPAT",
            "PUBSUB NUMPAT x",
            "PUBSUB HELP",
            "PUBSUB HELP x",
            "PUBSUB FOO",
            "PUBSUB",
        ]
        .iter()
        .map(|l| l.split(' ').collect())
        .collect();
        for d in grid_diffs(rc, tc, &grid) {
            diffs.push(format!("resp3={resp3} {d}"));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// A session of pub/sub requests under CLIENT REPLY OFF / SKIP: what the client receives
/// up to the final ECHO, as raw replies.
fn reply_off_session(s: &Server, resp3: bool) -> Vec<String> {
    let mut c = Conn::with_proto(s.port, resp3);
    let mut p = Conn::connect(s.port);
    c.w.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let steps: &[&[&str]] = &[
        &["CLIENT", "REPLY", "OFF"],
        &["SUBSCRIBE", "channel"],
        &["PSUBSCRIBE", "ch*"],
        &["SSUBSCRIBE", "shard"],
        &["PING"],
        &["@PUBLISH", "channel", "hello"],
        &["@SPUBLISH", "shard", "hi"],
        &["UNSUBSCRIBE", "channel"],
        &["PUNSUBSCRIBE"],
        &["SUNSUBSCRIBE"],
        &["SET", "k", "v"],
        &["CLIENT", "REPLY", "ON"],
        &["CLIENT", "REPLY", "SKIP"],
        &["SUBSCRIBE", "a", "b"],
        // Named: a bare UNSUBSCRIBE's order is Redis's hash order.
        &["UNSUBSCRIBE", "b", "a"],
        &["CLIENT", "REPLY", "SKIP"],
        &["PSUBSCRIBE", "q*"],
        &["PUNSUBSCRIBE", "q*", "r*"],
        &["GET", "k"],
        &["CLIENT", "REPLY", "ON"],
        &["ECHO", "end-of-session"],
    ];
    let mut log = Vec::new();
    for step in steps {
        match step[0].strip_prefix('@') {
            // From the other connection: the publisher's count, then what `c` got.
            Some(cmd) => {
                // `c`'s requests so far have run once its subscriptions show.
                wait_until("subscribed", Duration::from_secs(10), || {
                    raw(&mut p, &["PUBSUB", "SHARDNUMSUB", "shard"])
                        == b"*2\r\n$5\r\nshard\r\n:1\r\n"
                });
                let mut args = vec![cmd];
                args.extend(&step[1..]);
                log.push(format!(
                    "publisher {:?}",
                    String::from_utf8_lossy(&raw(&mut p, &args))
                ));
            }
            None => c.send(step),
        }
    }
    // Everything `c` got, up to the final ECHO (bounded).
    for _ in 0..64 {
        let r = String::from_utf8_lossy(&c.read_raw()).into_owned();
        let done = r == "$14\r\nend-of-session\r\n";
        log.push(r);
        if done {
            break;
        }
    }
    log
}

/// Under CLIENT REPLY OFF or SKIP, Redis 7.0 still sends the (un)subscribe confirmations
/// and the messages (CLIENT_PUSHING), in RESP2 and RESP3; tessera dropped the
/// confirmations with the rest of the reply, so a client waiting for them hung.
#[test]
fn pubsub_under_client_reply_off_like_redis() {
    let [r, t] = both();
    for resp3 in [false, true] {
        let (want, got) = (reply_off_session(&r, resp3), reply_off_session(&t, resp3));
        assert_eq!(want, got, "resp3={resp3}");
    }
}

/// Malformed and edge CLIENT calls (every subcommand) answer Redis 7.0's replies and error
/// texts: CLIENT KILL ID -1 / 0 ("client-id should be greater than 0"), PAUSE's mode
/// error, PAUSE and UNBLOCK with extra arguments.
#[test]
fn client_subcommand_errors_like_redis() {
    let grid: Vec<Vec<String>> = [
        "CLIENT",
        "CLIENT FOO",
        "CLIENT HELP x",
        "CLIENT KILL",
        "CLIENT KILL 1.2.3.4:5",
        "CLIENT KILL nosuch",
        "CLIENT KILL ID",
        "CLIENT KILL ID 10 wrong_arg",
        "CLIENT KILL ID str",
        "CLIENT KILL ID -1",
        "CLIENT KILL ID 0",
        "CLIENT KILL ID 99999",
        "CLIENT KILL ID 1.5",
        "CLIENT KILL TYPE wrong_type",
        "CLIENT KILL TYPE normal",
        "CLIENT KILL TYPE master",
        "CLIENT KILL TYPE slave",
        "CLIENT KILL TYPE replica",
        "CLIENT KILL TYPE pubsub",
        "CLIENT KILL USER wrong_user",
        "CLIENT KILL SKIPME yes_or_no",
        "CLIENT KILL SKIPME yes",
        "CLIENT KILL ADDR 1.2.3.4:5",
        "CLIENT KILL LADDR 1.2.3.4:5",
        "CLIENT KILL MAXAGE 10",
        "CLIENT KILL MAXAGE x",
        "CLIENT KILL ID 5 ID 6",
        "CLIENT KILL FOO bar",
        "CLIENT KILL ID 10 SKIPME",
        "CLIENT LIST x",
        "CLIENT LIST TYPE",
        "CLIENT LIST TYPE foo",
        "CLIENT LIST TYPE normal x",
        "CLIENT LIST ID",
        "CLIENT LIST ID x",
        "CLIENT LIST ID -1",
        "CLIENT LIST ID 0",
        "CLIENT LIST ID 99999",
        "CLIENT LIST ID 1 x",
        "CLIENT INFO x",
        "CLIENT ID x",
        "CLIENT GETNAME x",
        "CLIENT SETNAME",
        "CLIENT SETNAME a b",
        "CLIENT SETNAME a\\x20b",
        "CLIENT SETNAME a\\nb",
        "CLIENT REPLY",
        "CLIENT REPLY foo",
        "CLIENT REPLY on x",
        "CLIENT PAUSE",
        "CLIENT PAUSE x",
        "CLIENT PAUSE -1",
        "CLIENT PAUSE 10 foo",
        "CLIENT PAUSE 10 WRITE x",
        "CLIENT UNPAUSE x",
        "CLIENT UNBLOCK",
        "CLIENT UNBLOCK x",
        "CLIENT UNBLOCK 1 foo",
        "CLIENT UNBLOCK 1 error x",
        "CLIENT UNBLOCK 99999",
        "CLIENT CACHING",
        "CLIENT CACHING yes",
        "CLIENT CACHING foo",
        "CLIENT TRACKING",
        "CLIENT TRACKING foo",
        "CLIENT TRACKING on foo",
        "CLIENT TRACKING on REDIRECT",
        "CLIENT TRACKING on REDIRECT x",
        "CLIENT TRACKING on REDIRECT 99999",
        "CLIENT TRACKING on PREFIX a",
        "CLIENT TRACKING on BCAST PREFIX",
        "CLIENT TRACKING off x",
        "CLIENT TRACKINGINFO x",
        "CLIENT GETREDIR x",
        "CLIENT NO-EVICT",
        "CLIENT NO-EVICT foo",
        "CLIENT NO-EVICT on x",
        "CLIENT NO-EVICT ON",
        "CLIENT NO-EVICT off",
    ]
    .iter()
    .map(|l| {
        l.split(' ')
            .map(|a| a.replace("\\x20", " ").replace("\\n", "\n"))
            .collect()
    })
    .collect();
    let grid: Vec<Vec<&str>> = grid
        .iter()
        .map(|v| v.iter().map(String::as_str).collect())
        .collect();
    let [r, t] = both();
    let (mut rc, mut tc) = (r.resp(), t.resp());
    let diffs = grid_diffs(&mut rc, &mut tc, &grid);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// `name=value` of one CLIENT LIST / INFO line.
fn field(line: &str, name: &str) -> Option<String> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")).map(String::from))
}

fn text(r: Reply) -> String {
    match r {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        r => panic!("not a bulk: {r:?}"),
    }
}

/// CLIENT INFO / LIST show the query buffer holding the running request as Redis does
/// (qbuf=26 for a lone CLIENT INFO, the whole pipeline when pipelined) and the output
/// buffer fields of a client with nothing pending (unit/introspection's CLIENT LIST/INFO).
#[test]
fn client_info_buffers_like_redis() {
    let [r, t] = both();
    let mut seen = Vec::new();
    for s in [&r, &t] {
        let mut c = s.resp();
        let mut v = Vec::new();
        let info = text(c.cmd(&["CLIENT", "INFO"]));
        let list = text(c.cmd(&["CLIENT", "LIST"]));
        let two = c.pipeline(
            [encode(&[b"CLIENT", b"INFO"]), encode(&[b"CLIENT", b"INFO"])].concat(),
            2,
        );
        let two: Vec<String> = two.into_iter().map(text).collect();
        for (i, line) in [&info, &list].into_iter().chain(&two).enumerate() {
            for f in ["qbuf", "multi-mem", "obl", "oll", "omem", "events"] {
                if i == 3 && f == "obl" {
                    continue; // checked below
                }
                v.push(format!("{f}={:?}", field(line, f)));
            }
        }
        // The second of the pipeline sees the first's reply waiting (its values, thus its
        // length, differ between the servers): obl is that reply's size on the wire.
        let first = two[0].len();
        let wire = format!("${first}\r\n").len() + first + 2;
        let obl = field(&two[1], "obl").and_then(|o| o.parse::<usize>().ok());
        v.push(format!(
            "obl of the 2nd = 1st reply's size: {}",
            obl == Some(wire)
        ));
        seen.push(v);
    }
    assert_eq!(seen[0], seen[1]);
}

/// A client inside MULTI shows in CLIENT LIST with multi=<commands queued> and cmd=<the
/// last one queued>, as Redis (tessera showed multi=0 and cmd=multi).
#[test]
fn client_list_during_multi_like_redis() {
    let [r, t] = both();
    let seen = [&r, &t].map(|s| {
        let mut c = s.resp();
        let mut admin = s.resp();
        c.cmd(&["CLIENT", "SETNAME", "queuer"]);
        let mut v = Vec::new();
        let look = |admin: &mut Conn, v: &mut Vec<String>| {
            let list = text(admin.cmd(&["CLIENT", "LIST"]));
            let line = list
                .lines()
                .find(|l| l.contains("name=queuer"))
                .unwrap_or_default()
                .to_string();
            for f in ["flags", "multi", "cmd"] {
                v.push(format!("{f}={:?}", field(&line, f)));
            }
        };
        c.cmd(&["MULTI"]);
        look(&mut admin, &mut v);
        c.cmd(&["SET", "k", "v"]);
        c.cmd(&["INCR", "n"]);
        look(&mut admin, &mut v);
        c.cmd(&["EXEC"]);
        look(&mut admin, &mut v);
        v
    });
    assert_eq!(seen[0], seen[1], "redis first, tessera second");
}

/// qbuf + qbuf-free of the client named `name`, as unit/querybuf reads it.
fn query_buffer(c: &mut Conn, name: &str) -> u64 {
    let list = text(c.cmd(&["CLIENT", "LIST"]));
    let line = list
        .lines()
        .find(|l| field(l, "name").as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no client {name} in {list}"));
    let n = |f| {
        field(line, f)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    n("qbuf") + n("qbuf-free")
}

/// unit/querybuf's checks: a fresh client's buffer is 16..32 KiB, freed after 2 s idle; a
/// buffer grown by a 400 kB request shrinks back toward its recent peak (not to 0) while
/// the client keeps sending small requests.
fn querybuf_behaviour(s: &Server) -> Vec<String> {
    let mut v = Vec::new();
    let mut r = s.resp();
    let mut c = s.resp();
    c.cmd(&["CLIENT", "SETNAME", "test_client"]);
    let orig = query_buffer(&mut r, "test_client");
    v.push(format!(
        "fresh in 16K..32K: {}",
        (16384..32768).contains(&orig)
    ));
    let start = std::time::Instant::now();
    let mut freed = false;
    while start.elapsed() < Duration::from_secs(6) {
        if query_buffer(&mut r, "test_client") == 0 {
            freed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    v.push(format!("idle freed: {freed}"));
    let mut c = s.resp();
    c.cmd(&["CLIENT", "SETNAME", "big_client"]);
    let big = "A".repeat(400_000);
    c.cmd(&["SET", "x", &big]);
    let orig = query_buffer(&mut r, "big_client");
    v.push(format!("grown over 32K: {}", orig > 32768));
    let small = "A".repeat(100);
    let start = std::time::Instant::now();
    let mut now = orig;
    while start.elapsed() < Duration::from_secs(3) {
        c.cmd(&["SET", "x", &small]);
        now = query_buffer(&mut r, "big_client");
        if now < orig {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    v.push(format!("shrunk, not to 0: {}", now > 0 && now < orig));
    v
}

#[test]
fn query_buffer_resizes_like_redis() {
    let [r, t] = both();
    let want = querybuf_behaviour(&r);
    assert!(want.iter().all(|l| l.ends_with("true")), "redis: {want:?}");
    assert_eq!(want, querybuf_behaviour(&t));
}

/// Lowering tracking-table-max-keys evicts tracked keys (each sent as an invalidation) on
/// the server's next cron, without waiting for another read (unit/tracking's "Tracking gets
/// notification on tracking table key eviction", which hung).
fn table_limit_invalidates(s: &Server) -> String {
    let mut redir = s.resp();
    let id = redir.cmd(&["CLIENT", "ID"]);
    let id = id.as_int().expect("id").to_string();
    assert_eq!(
        redir
            .cmd(&["SUBSCRIBE", "__redis__:invalidate"])
            .normalized(false),
        Reply::Array(vec![
            Reply::Bulk(b"subscribe".to_vec()),
            Reply::Bulk(b"__redis__:invalidate".to_vec()),
            Reply::Int(1)
        ])
    );
    let mut c = s.resp();
    c.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &id, "NOLOOP"]);
    c.cmd(&["MSET", "key1", "1", "key2", "2"]);
    c.cmd(&["MGET", "key1", "key2"]);
    c.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1"]);
    redir
        .w
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut got = redir.read();
    // ["message", "__redis__:invalidate", [key]]: which key is the server's pick.
    if let Reply::Array(v) = &mut got {
        if let Some(Reply::Array(keys)) = v.get_mut(2) {
            let one = keys.len() == 1
                && matches!(&keys[0], Reply::Bulk(k) if k == b"key1" || k == b"key2");
            *keys = vec![Reply::Simple(format!("one of key1/key2: {one}"))];
        }
    }
    format!("{got:?}")
}

#[test]
fn tracking_table_limit_evicts_like_redis() {
    let [r, t] = both();
    assert_eq!(table_limit_invalidates(&r), table_limit_invalidates(&t));
}

/// Redis evicts tracked keys past tracking-table-max-keys before each client command too
/// (cron paused here): the invalidation reaches the client ahead of that command's reply,
/// also for a command queued in MULTI (unit/tracking's "Regression test for #11715").
fn table_limit_before_command(s: &Server) -> Vec<String> {
    let mut r = s.resp();
    r.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "2"]);
    assert_eq!(
        r.cmd(&["DEBUG", "PAUSE-CRON", "1"]),
        Reply::Simple("OK".into())
    );
    let mut c = Conn::with_proto(s.port, true);
    c.cmd(&["CLIENT", "TRACKING", "on"]);
    c.cmd(&["MGET", "1{tag}", "2{tag}"]);
    c.cmd(&["MULTI"]);
    r.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1"]);
    c.send(&["PING"]);
    c.send(&["EXEC"]);
    let mut v: Vec<String> = (0..3)
        .map(|_| match c.read() {
            // Which of the two keys goes is the server's pick.
            Reply::Push(p) if p.len() == 2 => format!("push {:?} <key>", p[0]),
            r => format!("{r:?}"),
        })
        .collect();
    r.cmd(&["DEBUG", "PAUSE-CRON", "0"]);
    v.push(format!("{:?}", c.cmd(&["PING"])));
    v
}

#[test]
fn tracking_table_limit_before_command_like_redis() {
    let [r, t] = [Launch::redis(), Launch::tessera()].map(|l| {
        l.args(&["--save", "", "--enable-debug-command", "yes"])
            .start()
    });
    assert_eq!(
        table_limit_before_command(&r),
        table_limit_before_command(&t)
    );
}
