use std::time::Duration;

use tessera_testkit::{Node, R};

#[test]
fn info_sections_and_fields() {
    let n = Node::start();
    let mut c = n.raw();
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["SET", "b", "1", "EX", "100"]);
    let info = c.cmd(&["INFO"]).s();
    for f in [
        "# Server",
        "redis_version:7.0.15",
        "tcp_port:",
        "# Clients",
        "connected_clients:",
        "# Memory",
        "used_memory:",
        "maxmemory_policy:noeviction",
        "# Persistence",
        "# Stats",
        "total_commands_processed:",
        "# Replication",
        "role:master",
        "# CPU",
        "# Cluster",
        "cluster_enabled:0",
        "# Keyspace",
        "db0:keys=2,expires=1",
    ] {
        assert!(info.contains(f), "missing {f} in INFO");
    }
    let cs = c.cmd(&["INFO", "commandstats"]).s();
    assert!(cs.contains("cmdstat_set:calls=2"), "{cs}");
    assert!(!c.cmd(&["INFO", "server"]).s().contains("# Clients"));
}

#[test]
fn client_commands() {
    let n = Node::start();
    let mut c = n.raw();
    let id = match c.cmd(&["CLIENT", "ID"]) {
        R::Int(i) => i,
        other => panic!("{other:?}"),
    };
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), R::Nil);
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME", "worker"]),
        R::Simple("OK".into())
    );
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME", "a b"]),
        R::Err("ERR Client names cannot contain spaces, newlines or special characters.".into())
    );
    let list = c.cmd(&["CLIENT", "LIST"]).s();
    assert!(
        list.contains(&format!("id={id} ")) && list.contains("name=worker"),
        "{list}"
    );
    assert!(c.cmd(&["CLIENT", "INFO"]).s().contains("name=worker"));
    let mut victim = n.raw();
    let vid = match victim.cmd(&["CLIENT", "ID"]) {
        R::Int(i) => i,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        c.cmd(&["CLIENT", "KILL", "ID", &vid.to_string()]),
        R::Int(1)
    );
    assert!(victim.closed());
}

#[test]
fn client_reply_modes() {
    let n = Node::start();
    let mut c = n.raw();
    c.send(b"CLIENT REPLY OFF\r\nSET a 1\r\nCLIENT REPLY ON\r\n");
    assert_eq!(c.read(), R::Simple("OK".into()));
    c.send(b"CLIENT REPLY SKIP\r\nSET b 2\r\nGET a\r\n");
    assert_eq!(c.read(), R::Bulk(b"1".to_vec()));
}

#[test]
fn client_pause_delays_writes() {
    let n = Node::start();
    let mut c = n.raw();
    let mut w = n.raw();
    assert_eq!(
        c.cmd(&["CLIENT", "PAUSE", "300", "WRITE"]),
        R::Simple("OK".into())
    );
    let t = std::time::Instant::now();
    assert_eq!(w.cmd(&["GET", "x"]), R::Nil);
    assert_eq!(w.cmd(&["SET", "x", "1"]), R::Simple("OK".into()));
    assert!(t.elapsed() >= Duration::from_millis(250));
    assert_eq!(c.cmd(&["CLIENT", "UNPAUSE"]), R::Simple("OK".into()));
}

#[test]
fn command_introspection() {
    let n = Node::start();
    let mut c = n.raw();
    let count = match c.cmd(&["COMMAND", "COUNT"]) {
        R::Int(i) => i,
        other => panic!("{other:?}"),
    };
    assert!(count > 60);
    let info = c.cmd(&["COMMAND", "INFO", "get", "mset", "nosuch"]);
    let R::Arr(v) = info else { panic!() };
    assert_eq!(v.len(), 3);
    assert_eq!(v[2], R::Nil);
    let R::Arr(get) = &v[0] else { panic!() };
    assert_eq!(get.len(), 10);
    assert_eq!(get[0], R::Bulk(b"get".to_vec()));
    assert_eq!(get[1], R::Int(2));
    assert_eq!(
        (get[3].clone(), get[4].clone(), get[5].clone()),
        (R::Int(1), R::Int(1), R::Int(1))
    );
    let R::Arr(mset) = &v[1] else { panic!() };
    assert_eq!(
        (mset[3].clone(), mset[4].clone(), mset[5].clone()),
        (R::Int(1), R::Int(-1), R::Int(2))
    );
    assert!(mset[8].s().contains("begin_search"));
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"])
            .s(),
        "[a,b]"
    );
    // Redis 7.0's arity is -4 (the command and at least one argument)...
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "PING"]),
        R::Err("ERR wrong number of arguments for 'command|getkeys' command".into())
    );
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "PING", "x"]),
        R::Err("ERR The command has no key arguments".into())
    );
    assert!(c.cmd(&["COMMAND", "DOCS", "get"]).s().contains("string"));
    assert!(
        c.cmd(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "xx*"])
            .s()
            == "[]"
    );
    let R::Arr(all) = c.cmd(&["COMMAND"]) else {
        panic!()
    };
    assert_eq!(all.len() as i64, count);
}

#[test]
fn misc_server_commands() {
    let n = Node::start_with(&["--enable-debug-command", "local"]);
    let mut c = n.raw();
    let R::Arr(t) = c.cmd(&["TIME"]) else {
        panic!()
    };
    assert_eq!(t.len(), 2);
    c.cmd(&["SET", "k", "hello"]);
    assert!(matches!(c.cmd(&["MEMORY", "USAGE", "k"]), R::Int(x) if x > 0));
    assert_eq!(c.cmd(&["MEMORY", "USAGE", "none"]), R::Nil);
    assert_eq!(
        c.cmd(&["OBJECT", "ENCODING", "k"]),
        R::Bulk(b"embstr".to_vec())
    );
    assert_eq!(c.cmd(&["OBJECT", "REFCOUNT", "k"]), R::Int(1));
    assert!(matches!(c.cmd(&["OBJECT", "IDLETIME", "k"]), R::Int(x) if x >= 0));
    assert!(matches!(c.cmd(&["OBJECT", "FREQ", "k"]), R::Err(_)));
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    c.cmd(&["DEBUG", "SLEEP", "0.01"]);
    assert!(matches!(c.cmd(&["SLOWLOG", "LEN"]), R::Int(x) if x >= 1));
    assert!(c.cmd(&["SLOWLOG", "GET", "5"]).s().contains("DEBUG"));
    assert_eq!(c.cmd(&["SLOWLOG", "RESET"]), R::Simple("OK".into()));
    // MONITOR sees other clients' commands.
    let mut m = n.raw();
    assert_eq!(m.cmd(&["MONITOR"]), R::Simple("OK".into()));
    c.cmd(&["SET", "watched", "1"]);
    let line = m.read().s();
    assert!(line.contains("\"SET\" \"watched\" \"1\""), "{line}");
    assert_eq!(c.cmd(&["FLUSHALL", "ASYNC"]), R::Simple("OK".into()));
    assert_eq!(c.cmd(&["DBSIZE"]), R::Int(0));
}

#[test]
fn shutdown_command_stops_the_node() {
    let mut n = Node::start();
    let mut c = n.raw();
    c.send(b"SHUTDOWN NOSAVE\r\n");
    assert!(c.closed());
    let status = n.wait_exit(10).expect("node should exit");
    assert!(status.success());
}

#[test]
fn sigterm_stops_gracefully() {
    let mut n = Node::start();
    // SAFETY: plain kill(2) on our own child.
    unsafe {
        libc::kill(n.child.id() as i32, libc::SIGTERM);
    }
    let status = n.wait_exit(10).expect("node should exit on SIGTERM");
    assert!(status.success());
}

#[test]
fn maxmemory_policies() {
    let n = Node::start();
    let mut c = n.raw();
    let val = "v".repeat(1000);
    let mut p = String::new();
    for i in 0..2000 {
        p.push_str(&format!("SET key:{i} {val}\r\n"));
    }
    c.send(p.as_bytes());
    for _ in 0..2000 {
        c.read();
    }
    let used = |c: &mut tessera_testkit::Raw| -> u64 {
        c.cmd(&["INFO", "memory"])
            .s()
            .lines()
            .find_map(|l| {
                l.strip_prefix("used_memory:")
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(0)
    };
    let now = used(&mut c);
    assert!(
        now > 2_000_000,
        "used_memory {now} must count 2 MB of values"
    );
    let limit = now - 500_000;
    c.cmd(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    assert_eq!(
        c.cmd(&["SET", "new", "x"]),
        R::Err("OOM command not allowed when used memory > 'maxmemory'.".into())
    );
    assert_eq!(c.cmd(&["GET", "key:1"]), R::Bulk(val.as_bytes().to_vec()));
    assert_eq!(c.cmd(&["DEL", "key:1"]), R::Int(1));
    for policy in ["allkeys-lru", "allkeys-lfu", "allkeys-random"] {
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", policy]);
        let before = match c.cmd(&["DBSIZE"]) {
            R::Int(i) => i,
            _ => 0,
        };
        assert_eq!(
            c.cmd(&["SET", &format!("new-{policy}"), &val]),
            R::Simple("OK".into())
        );
        let after = match c.cmd(&["DBSIZE"]) {
            R::Int(i) => i,
            _ => 0,
        };
        // DBSIZE itself evicts down to the limit first (every command does, as in Redis),
        // so the SET may find room without evicting: at most one key more.
        assert!(
            after <= before + 1,
            "{policy}: eviction should make room ({before} -> {after})"
        );
        assert!(used(&mut c) <= limit + 10_000);
    }
    // The policy first: with the lower limit in place, the next command (even this CONFIG
    // SET) evicts under the policy then in force, as in Redis.
    c.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"]);
    c.cmd(&["CONFIG", "SET", "maxmemory", &(limit - 300_000).to_string()]);
    // No volatile keys: nothing to evict.
    assert!(matches!(c.cmd(&["SET", "x", &val]), R::Err(e) if e.starts_with("OOM")));
    let evicted = c.cmd(&["INFO", "stats"]).s();
    assert!(!evicted.contains("evicted_keys:0\r"), "{evicted}");
}

#[test]
fn volatile_policies_evict_only_keys_with_ttl() {
    let n = Node::start();
    let mut c = n.raw();
    let val = "v".repeat(1000);
    let mut p = String::new();
    for i in 0..1000 {
        p.push_str(&format!("SET keep:{i} {val}\r\n"));
        p.push_str(&format!("SET vol:{i} {val} EX 1000\r\n"));
    }
    c.send(p.as_bytes());
    for _ in 0..2000 {
        c.read();
    }
    let used: u64 = c
        .cmd(&["INFO", "memory"])
        .s()
        .lines()
        .find_map(|l| {
            l.strip_prefix("used_memory:")
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0);
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", policy]);
        c.cmd(&["CONFIG", "SET", "maxmemory", &(used - 200_000).to_string()]);
        assert_eq!(
            c.cmd(&["SET", &format!("w-{policy}"), "x"]),
            R::Simple("OK".into())
        );
        c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
    }
    let R::Arr(keep) = c.cmd(&["KEYS", "keep:*"]) else {
        panic!()
    };
    assert_eq!(
        keep.len(),
        1000,
        "keys without TTL must never be evicted by volatile-*"
    );
    let R::Arr(vol) = c.cmd(&["KEYS", "vol:*"]) else {
        panic!()
    };
    assert!(
        vol.len() < 1000,
        "some volatile keys must have been evicted"
    );
}

/// `disable-thp yes` (the default) turns transparent huge pages off for the process, as
/// Redis does: mimalloc asks for them on its arenas, and zeroing 2 MiB at each first touch
/// made a storm of new connections five times slower. `no` leaves the kernel's setting.
#[test]
fn disable_thp_follows_the_directive() {
    fn thp_enabled(pid: u32) -> String {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_else(|e| panic!("reading /proc/{pid}/status: {e}"));
        status
            .lines()
            .find_map(|l| l.strip_prefix("THP_enabled:"))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no THP_enabled line in /proc/{pid}/status (Linux < 5.0?)"))
    }
    let default = tessera_testkit::Server::tessera(&["--save", ""]);
    assert_eq!(
        thp_enabled(default.pid()),
        "0",
        "disable-thp's default (yes)"
    );
    // Off from the allocator's first region on, not from when the config is read: pages
    // faulted in as huge ones before that stay huge (6 MB of an idle node's 15 MB RSS).
    let smaps =
        std::fs::read_to_string(format!("/proc/{}/smaps", default.pid())).expect("reading smaps");
    let huge_kb: u64 = smaps
        .lines()
        .filter_map(|l| l.strip_prefix("AnonHugePages:"))
        .filter_map(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .sum();
    assert_eq!(
        huge_kb, 0,
        "huge pages in an idle node with disable-thp yes"
    );
    let kept = tessera_testkit::Server::tessera(&["--save", "", "--disable-thp", "no"]);
    assert_eq!(thp_enabled(kept.pid()), "1", "disable-thp no");
}
