//! Lazy freeing against redis-server 7.0 (issue 18, Redis's unit/lazyfree): which deletions
//! free their value on a background thread (UNLINK, FLUSHALL/FLUSHDB ASYNC, the
//! lazyfree-lazy-user-* configs, values worth it: more than 64 allocations) and INFO
//! memory's `lazyfree_pending_objects` / `lazyfreed_objects`.

use std::time::Duration;

use tessera_testkit::*;

fn both() -> [Launch; 2] {
    [Launch::redis(), Launch::tessera()]
}

fn memory_field(c: &mut Conn, name: &str) -> Option<String> {
    let info = match c.cmd(&["INFO", "memory"]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO answered {other:?}"),
    };
    info_field(&info, name)
}

/// `lazyfreed_objects` once nothing is pending.
fn freed(c: &mut Conn) -> String {
    wait_until("lazyfree done", Duration::from_secs(20), || {
        memory_field(c, "lazyfree_pending_objects").as_deref() == Some("0")
    });
    memory_field(c, "lazyfreed_objects").unwrap_or_else(|| "(missing)".into())
}

fn fill(c: &mut Conn, cmd: &str, key: &str, n: usize, width: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let mut args: Vec<String> = vec![cmd.into(), key.into()];
        for i in chunk {
            if cmd == "ZADD" {
                args.push(i.to_string());
            }
            if cmd == "HSET" {
                args.push(format!("f{i}"));
            }
            args.push(format!("{i:0width$}"));
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = c.cmd(&a);
        assert!(!matches!(r, Reply::Error(_)), "{cmd}: {r:?}");
    }
}

/// Each step's `lazyfreed_objects` after it, on both servers.
#[test]
fn lazyfree_counters_match_redis() {
    let [r, t] = both().map(|l| l.args(&["--save", ""]).start());
    let mut got = Vec::new();
    for s in [&r, &t] {
        let mut c = s.resp();
        let mut seen = Vec::new();
        c.cmd(&["CONFIG", "RESETSTAT"]);
        seen.push(format!("start {}", freed(&mut c)));
        // Big values of each kind go to the background, small ones are freed at once.
        fill(&mut c, "SADD", "bigset", 1000, 1);
        fill(&mut c, "SADD", "smallset", 10, 1);
        fill(&mut c, "HSET", "bighash", 1000, 1);
        fill(&mut c, "ZADD", "bigzset", 1000, 1);
        fill(&mut c, "RPUSH", "biglist", 100, 5000);
        fill(&mut c, "RPUSH", "smalllist", 1000, 1);
        for k in [
            "bigset",
            "smallset",
            "bighash",
            "bigzset",
            "biglist",
            "smalllist",
        ] {
            c.cmd(&["UNLINK", k]);
            seen.push(format!("UNLINK {k} {}", freed(&mut c)));
        }
        // Streams: every macro node, and the groups with their PEL (unit/lazyfree; its
        // stream-node-max-entries 5 is left out: see findings, tessera-node keeps 100).
        for j in 0..1000 {
            c.cmd(&["XADD", "stream", "*", "foo", &j.to_string()]);
        }
        c.cmd(&["XGROUP", "CREATE", "stream", "mygroup", "0"]);
        c.cmd(&[
            "XREADGROUP",
            "GROUP",
            "mygroup",
            "Alice",
            "COUNT",
            "70",
            "STREAMS",
            "stream",
            ">",
        ]);
        c.cmd(&["UNLINK", "stream"]);
        seen.push(format!("UNLINK stream {}", freed(&mut c)));
        c.cmd(&["XADD", "s", "*", "a", "b"]);
        c.cmd(&["XGROUP", "CREATE", "s", "bla", "$"]);
        c.cmd(&["XGROUP", "DESTROY", "s", "bla"]);
        c.cmd(&["UNLINK", "s"]);
        seen.push(format!("UNLINK small stream {}", freed(&mut c)));
        // DEL is lazy with lazyfree-lazy-user-del.
        fill(&mut c, "SADD", "bigset", 1000, 1);
        c.cmd(&["DEL", "bigset"]);
        seen.push(format!("DEL {}", freed(&mut c)));
        c.cmd(&["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"]);
        fill(&mut c, "SADD", "bigset", 1000, 1);
        c.cmd(&["DEL", "bigset"]);
        seen.push(format!("DEL lazy-user-del {}", freed(&mut c)));
        c.cmd(&["CONFIG", "SET", "lazyfree-lazy-user-del", "no"]);
        // FLUSHALL / FLUSHDB ASYNC count every key; lazyfree-lazy-user-flush makes the
        // plain forms async.
        for i in 0..20 {
            c.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        c.cmd(&["SELECT", "1"]);
        c.cmd(&["SET", "other", "v"]);
        c.cmd(&["SELECT", "0"]);
        c.cmd(&["FLUSHALL", "ASYNC"]);
        seen.push(format!("FLUSHALL ASYNC {}", freed(&mut c)));
        for i in 0..5 {
            c.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        c.cmd(&["FLUSHDB"]);
        seen.push(format!("FLUSHDB {}", freed(&mut c)));
        c.cmd(&["CONFIG", "SET", "lazyfree-lazy-user-flush", "yes"]);
        for i in 0..5 {
            c.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        c.cmd(&["FLUSHDB"]);
        seen.push(format!("FLUSHDB lazy-user-flush {}", freed(&mut c)));
        c.cmd(&["FLUSHALL", "SYNC"]);
        seen.push(format!("FLUSHALL SYNC {}", freed(&mut c)));
        c.cmd(&["CONFIG", "RESETSTAT"]);
        seen.push(format!("RESETSTAT {}", freed(&mut c)));
        got.push(seen.join("\n"));
    }
    assert_eq!(got[0], got[1], "redis first, tessera second");
}
