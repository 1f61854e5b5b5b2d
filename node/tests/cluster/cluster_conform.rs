//! Issue 18, cluster differences: CLUSTER REPLICAS / SLAVES, the MIGRATING / IMPORTING
//! answers to multi-key commands, and what the bus carries (nofailover flag, announced
//! hostname). Each is checked against redis-server 7.0 doing the same in the same test.

use std::time::Duration;

use tessera_testkit::cluster::*;
use tessera_testkit::*;

/// A connection to a cluster node.
fn conn(n: &Proc) -> Conn {
    Conn::connect(n.port)
}

/// True once `n` lists every id in `ids` as connected, out of handshake.
fn knows_all(n: &Proc, ids: &[String]) -> bool {
    let lines = n.nodes();
    ids.iter().all(|id| {
        lines.iter().any(|l| {
            l.starts_with(id.as_str()) && l.contains(" connected") && !l.contains("handshake")
        })
    })
}

/// MEETs every node from the first and waits until all know each other.
fn join(nodes: &[&Proc]) {
    let ids: Vec<String> = nodes.iter().map(|n| n.myid()).collect();
    for n in &nodes[1..] {
        let p = n.port.to_string();
        assert_eq!(
            nodes[0].cli(&["CLUSTER", "MEET", "127.0.0.1", &p]).trim(),
            "OK"
        );
    }
    wait_for(
        Duration::from_secs(30),
        "every node knows every other",
        || nodes.iter().all(|n| knows_all(n, &ids)),
    );
}

/// Fields 0..4 of a CLUSTER NODES line (id, address, flags, master): what two nodes agree on.
fn stable_fields(line: &str) -> String {
    line.split(' ').take(4).collect::<Vec<_>>().join(" ")
}

/// CLUSTER REPLICAS / SLAVES replies of one node: the replica lines' stable fields, and the
/// error texts for a replica, an unknown node, a short id and wrong arities.
fn replicas_view(n: &Proc, master: &str, replica: &str) -> Vec<String> {
    let mut c = conn(n);
    let mut out = Vec::new();
    for sub in ["REPLICAS", "SLAVES"] {
        match c.cmd(&["CLUSTER", sub, master]) {
            Reply::Array(v) => {
                out.push(format!("{sub} {} lines", v.len()));
                for l in v {
                    match l {
                        Reply::Bulk(b) => {
                            let s = String::from_utf8_lossy(&b).into_owned();
                            assert!(!s.ends_with('\n'), "{sub} line ends with a newline: {s:?}");
                            out.push(stable_fields(&s));
                        }
                        other => out.push(format!("{other:?}")),
                    }
                }
            }
            other => out.push(format!("{other:?}")),
        }
        let unknown = "f".repeat(40);
        for args in [
            vec!["CLUSTER", sub, replica],
            vec!["CLUSTER", sub, &unknown],
            vec!["CLUSTER", sub, "abc"],
            vec!["CLUSTER", sub],
            vec!["CLUSTER", sub, master, "extra"],
        ] {
            out.push(format!("{:?}", c.cmd(&args)));
        }
    }
    out
}

/// CLUSTER REPLICAS (and SLAVES) answer as Redis 7.0: the replica's CLUSTER NODES line
/// (no newline) per replica, "Unknown node" / "not a master" errors, subcommand arity.
#[test]
fn cluster_replicas_like_redis() {
    // A tessera master with a redis-server replica, and a redis-server bystander: the
    // tessera node and the redis-server bystander answer about the same cluster.
    let t = Proc::cluster(tessera_bin(), "127.0.0.1", 3000);
    let r = Proc::cluster(redis_bin(), "127.0.0.1", 3000);
    let q = Proc::cluster(redis_bin(), "127.0.0.1", 3000);
    join(&[&t, &r, &q]);
    let (tid, qid) = (t.myid(), q.myid());
    assert_eq!(q.cli(&["CLUSTER", "REPLICATE", &tid]).trim(), "OK");
    wait_for(Duration::from_secs(30), "both see q as t's replica", || {
        [&t, &r].iter().all(|n| {
            n.nodes()
                .iter()
                .any(|l| l.starts_with(qid.as_str()) && l.contains(&format!("slave {tid}")))
        })
    });
    let want = replicas_view(&r, &tid, &qid);
    assert!(
        want.iter().any(|l| l.starts_with(qid.as_str())),
        "redis-server lists the replica: {want:?}"
    );
    assert_eq!(replicas_view(&t, &tid, &qid), want);
}

/// Replies of one node in the middle of migrating slot `{k}` to `dst` (and of `dst`
/// importing it): MSET/MGET/DEL with all, some and none of the keys present, on the
/// migrating node and, with ASKING, on the importing one. ASK and MOVED targets are masked.
fn migration_view(src: &Proc, dst: &Proc) -> Vec<String> {
    let (sid, did) = (src.myid(), dst.myid());
    assert_eq!(
        src.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]).trim(),
        "OK"
    );
    join(&[src, dst]);
    wait_state_ok(&[src, dst]);
    let slot = src.cli(&["CLUSTER", "KEYSLOT", "{k}"]).trim().to_string();
    let mut a = conn(src);
    let mut b = conn(dst);
    let mut out = Vec::new();
    let mut push = |r: Reply| {
        let s = match r {
            Reply::Error(e) if e.starts_with("ASK ") || e.starts_with("MOVED ") => {
                let f: Vec<&str> = e.split(' ').collect();
                format!("{} {} <target>", f[0], f.get(1).unwrap_or(&""))
            }
            r => format!("{r:?}"),
        };
        out.push(s);
    };
    push(a.cmd(&["SET", "{k}a", "1"]));
    push(b.cmd(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &sid]));
    push(a.cmd(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &did]));
    // Migrating node: all present runs; some present is TRYAGAIN; none present is ASK.
    push(a.cmd(&["MSET", "{k}a", "2"]));
    push(a.cmd(&["MSET", "{k}a", "3", "{k}b", "4"]));
    push(a.cmd(&["MGET", "{k}a", "{k}b"]));
    push(a.cmd(&["EXISTS", "{k}a", "{k}b"]));
    push(a.cmd(&["MSET", "{k}c", "5", "{k}d", "6"]));
    push(a.cmd(&["GET", "{k}b"]));
    push(a.cmd(&["GET", "{k}a"]));
    // Importing node with ASKING: one present and one missing key is TRYAGAIN.
    push(b.cmd(&["ASKING"]));
    push(b.cmd(&["SET", "{k}x", "1"]));
    push(b.cmd(&["ASKING"]));
    push(b.cmd(&["MSET", "{k}x", "2", "{k}y", "3"]));
    push(b.cmd(&["ASKING"]));
    push(b.cmd(&["MGET", "{k}x", "{k}y"]));
    push(b.cmd(&["ASKING"]));
    push(b.cmd(&["MSET", "{k}x", "4", "{k}x", "5"]));
    push(b.cmd(&["ASKING"]));
    push(b.cmd(&["MGET", "{k}z", "{k}w"]));
    push(b.cmd(&["MGET", "{k}x"]));
    out
}

/// `view` of two fresh cluster-mode nodes of `bin` (stopped when it returns).
fn on_two_nodes<T>(bin: &'static str, view: impl Fn(&Proc, &Proc) -> T) -> T {
    let (a, b) = (
        Proc::cluster(bin, "127.0.0.1", 3000),
        Proc::cluster(bin, "127.0.0.1", 3000),
    );
    view(&a, &b)
}

/// On a MIGRATING slot a multi-key command with some keys present answers TRYAGAIN (all
/// missing: ASK; all present: runs); on the IMPORTING side with ASKING the same as Redis.
#[test]
fn migrating_multikey_answers_like_redis() {
    let want = on_two_nodes(redis_bin(), migration_view);
    assert_eq!(on_two_nodes(tessera_bin(), migration_view), want);
}

/// One node's view of the others: per node id, its flags (without `myself`) and the
/// hostname after the address, sorted by id.
fn flags_view(n: &Proc) -> Vec<String> {
    let mut v: Vec<String> = n
        .nodes()
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let host = f[1].split_once(',').map(|(_, h)| h).unwrap_or("");
            let flags: Vec<&str> = f[2].split(',').filter(|f| *f != "myself").collect();
            format!("{} {} host={host}", f[0], flags.join(","))
        })
        .collect();
    v.sort();
    v
}

/// (id, hostname) of every node in CLUSTER SHARDS, sorted.
fn shards_hostnames(n: &Proc) -> Vec<String> {
    let Reply::Array(shards) = conn(n).cmd(&["CLUSTER", "SHARDS"]) else {
        panic!("CLUSTER SHARDS is not an array");
    };
    let field = |m: &[Reply], name: &str| -> Option<String> {
        m.chunks(2)
            .find(|kv| kv[0] == Reply::Bulk(name.as_bytes().to_vec()))
            .map(|kv| match &kv[1] {
                Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            })
    };
    let mut out = Vec::new();
    for s in shards {
        let Reply::Array(s) = s else { panic!("shard") };
        let Some(Reply::Array(nodes)) = s
            .chunks(2)
            .find(|kv| kv[0] == Reply::Bulk(b"nodes".to_vec()))
            .map(|kv| kv[1].clone())
        else {
            panic!("shard without nodes");
        };
        for node in nodes {
            let Reply::Array(m) = node else {
                panic!("node")
            };
            out.push(format!(
                "{} hostname={}",
                field(&m, "id").unwrap_or_default(),
                field(&m, "hostname").unwrap_or_default()
            ));
        }
    }
    out.sort();
    out
}

/// The endpoints CLUSTER SLOTS gives for each range (preferred endpoint type hostname).
fn slots_endpoints(n: &Proc) -> Reply {
    let Reply::Array(ranges) = conn(n).cmd(&["CLUSTER", "SLOTS"]) else {
        panic!("CLUSTER SLOTS is not an array");
    };
    let v = ranges
        .into_iter()
        .map(|r| match r {
            Reply::Array(e) => Reply::Array(
                e.into_iter()
                    .map(|x| match x {
                        // [endpoint, port, id, {extra}]: keep endpoint, id and extras.
                        Reply::Array(node) => Reply::Array(
                            node.into_iter()
                                .enumerate()
                                .filter(|(i, _)| *i != 1)
                                .map(|(_, y)| y)
                                .collect(),
                        ),
                        other => other,
                    })
                    .collect(),
            ),
            other => other,
        })
        .collect();
    Reply::Array(v).normalized(true)
}

/// cluster-replica-no-failover and cluster-announce-hostname, set at run time on a
/// tessera-node replica and on a redis-server replica, reach every other node over the bus
/// both ways (the nofailover header flag, the hostname ping extension): CLUSTER NODES,
/// SHARDS and SLOTS (preferred endpoint type hostname) show the same on both masters.
#[test]
fn nofailover_and_hostname_propagate_like_redis() {
    let t = Proc::cluster(tessera_bin(), "127.0.0.1", 3000);
    let r = Proc::cluster(redis_bin(), "127.0.0.1", 3000);
    let tr = Proc::cluster(tessera_bin(), "127.0.0.1", 3000);
    let rr = Proc::cluster(redis_bin(), "127.0.0.1", 3000);
    assert_eq!(
        t.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]).trim(),
        "OK"
    );
    assert_eq!(
        r.cli(&["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]).trim(),
        "OK"
    );
    join(&[&t, &r, &tr, &rr]);
    // Each replica follows the master of the other implementation.
    assert_eq!(tr.cli(&["CLUSTER", "REPLICATE", &r.myid()]).trim(), "OK");
    assert_eq!(rr.cli(&["CLUSTER", "REPLICATE", &t.myid()]).trim(), "OK");
    for (n, host) in [(&tr, "tr.example.net"), (&rr, "rr.example.net")] {
        for (k, v) in [
            ("cluster-replica-no-failover", "yes"),
            ("cluster-announce-hostname", host),
        ] {
            assert_eq!(n.cli(&["CONFIG", "SET", k, v]).trim(), "OK");
        }
    }
    for n in [&t, &r] {
        assert_eq!(
            n.cli(&[
                "CONFIG",
                "SET",
                "cluster-preferred-endpoint-type",
                "hostname"
            ])
            .trim(),
            "OK"
        );
    }
    let (trid, rrid) = (tr.myid(), rr.myid());
    let settled = |n: &Proc| {
        let v = flags_view(n);
        [(&trid, "tr.example.net"), (&rrid, "rr.example.net")]
            .iter()
            .all(|(id, host)| {
                v.iter().any(|l| {
                    l.starts_with(id.as_str())
                        && l.contains("slave,nofailover ")
                        && l.ends_with(&format!("host={host}"))
                })
            })
    };
    wait_for(
        Duration::from_secs(30),
        "both masters see both replicas' nofailover flag and hostname",
        || settled(&r) && settled(&t),
    );
    wait_for(
        Duration::from_secs(30),
        "the same CLUSTER SHARDS hostnames",
        || shards_hostnames(&t) == shards_hostnames(&r),
    );
    assert!(shards_hostnames(&r)
        .iter()
        .any(|l| l == &format!("{trid} hostname=tr.example.net")));
    wait_for(
        Duration::from_secs(30),
        "the same CLUSTER SLOTS endpoints",
        || slots_endpoints(&t) == slots_endpoints(&r),
    );
    assert_eq!(flags_view(&t), flags_view(&r));
}

/// `r` with the node ids and ports of `names` replaced by their labels.
fn mask(r: Reply, names: &[(String, u16, &str)]) -> Reply {
    let text = |s: String| {
        let mut s = s;
        for (id, port, label) in names {
            s = s
                .replace(id.as_str(), label)
                .replace(&port.to_string(), &format!("<{label}port>"));
        }
        s
    };
    match r {
        Reply::Bulk(b) => Reply::Bulk(text(String::from_utf8_lossy(&b).into_owned()).into_bytes()),
        Reply::Error(e) => Reply::Error(text(e)),
        Reply::Int(i) if names.iter().any(|(_, p, _)| i64::from(*p) == i) => {
            Reply::Simple("<port>".into())
        }
        Reply::Array(v) => Reply::Array(v.into_iter().map(|x| mask(x, names)).collect()),
        other => other,
    }
}

/// Replies of node `a` (slots 0-8191; `b` has the rest) to CLUSTER SLOTS and a redirect,
/// right after each CONFIG SET of its hostname and preferred endpoint type.
fn endpoint_view(a: &Proc, b: &Proc) -> Vec<Reply> {
    assert_eq!(
        a.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]).trim(),
        "OK"
    );
    assert_eq!(
        b.cli(&["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]).trim(),
        "OK"
    );
    join(&[a, b]);
    wait_state_ok(&[a, b]);
    let names = [(a.myid(), a.port, "A"), (b.myid(), b.port, "B")];
    let mut c = conn(a);
    let mut out = Vec::new();
    // "foo" hashes to slot 12182, b's.
    for (k, v) in [
        ("cluster-announce-hostname", "me.com"),
        ("cluster-preferred-endpoint-type", "hostname"),
        ("cluster-preferred-endpoint-type", "unknown-endpoint"),
        ("cluster-announce-hostname", ""),
        ("cluster-preferred-endpoint-type", "ip"),
    ] {
        out.push(c.cmd(&["CONFIG", "SET", k, v]));
        out.push(mask(c.cmd(&["CLUSTER", "SLOTS"]), &names));
        out.push(mask(c.cmd(&["SET", "foo", "bar"]), &names));
    }
    out
}

/// A CONFIG SET of the hostname or preferred endpoint type shows at once in the node's own
/// CLUSTER SLOTS and redirects, and unknown-endpoint gives a null endpoint in CLUSTER SLOTS
/// and an empty one in MOVED, as redis-server.
#[test]
fn endpoint_config_applies_at_once_like_redis() {
    let want = on_two_nodes(redis_bin(), endpoint_view);
    assert_eq!(on_two_nodes(tessera_bin(), endpoint_view), want);
}

/// DBSIZE of a replica (`bin`) of a redis-server master, restarted after its master's keys
/// all expired: Redis 7.0 knows from nodes.conf that it is a replica before loading its
/// RDB, and a replica keeps expired keys (its master's DELs remove them).
fn replica_dbsize_after_restart(bin: &'static str) -> (i64, i64) {
    // The master's active expiry is switched off with DEBUG.
    let m = Proc {
        srv: Launch::new(redis_bin())
            .args(&[
                "--save",
                "",
                "--appendonly",
                "no",
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                "3000",
                "--enable-debug-command",
                "yes",
            ])
            .logfile()
            .start(),
    };
    let mut r = Proc::cluster(bin, "127.0.0.1", 3000);
    assert_eq!(
        m.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]).trim(),
        "OK"
    );
    join(&[&m, &r]);
    wait_state_ok(&[&m, &r]);
    assert_eq!(r.cli(&["CLUSTER", "REPLICATE", &m.myid()]).trim(), "OK");
    wait_for(Duration::from_secs(30), "the replica's link is up", || {
        info_field(&r.cli(&["INFO", "replication"]), "master_link_status").as_deref() == Some("up")
    });
    let mut mc = conn(&m);
    for i in 0..50 {
        let k = format!("{{t}}persistent:{i}");
        assert_eq!(mc.cmd(&["SET", &k, "v"]), Reply::Simple("OK".into()));
        let k = format!("{{t}}volatile:{i}");
        assert_eq!(
            mc.cmd(&["SET", &k, "v", "PX", "3000"]),
            Reply::Simple("OK".into())
        );
    }
    wait_for(Duration::from_secs(30), "the replica has every key", || {
        conn(&r).cmd(&["DBSIZE"]) == Reply::Int(100)
    });
    assert_eq!(conn(&r).cmd(&["SAVE"]), Reply::Simple("OK".into()));
    r.kill();
    // No DELs from the master while the replica is away.
    assert_eq!(
        mc.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
        Reply::Simple("OK".into())
    );
    std::thread::sleep(Duration::from_millis(3500));
    r.spawn();
    let after = conn(&r).cmd(&["DBSIZE"]).as_int().unwrap_or(-1);
    let role = r.cli(&["ROLE"]);
    assert!(role.starts_with("slave"), "restarted as a replica: {role}");
    (100, after)
}

/// A cluster replica restarted from its RDB keeps the keys that expired meanwhile, as
/// redis-server does (runtest-cluster 14-consistency-check).
#[test]
fn restarted_replica_keeps_expired_keys_like_redis() {
    let want = replica_dbsize_after_restart(redis_bin());
    assert_eq!(want, (100, 100), "redis-server");
    assert_eq!(replica_dbsize_after_restart(tessera_bin()), want);
}

/// Two fresh nodes of `bin`: `b` drops MEET messages (DEBUG DROP-CLUSTER-PACKET-FILTER 2),
/// `a` meets it; then the filter is lifted and `a` meets it again. Returns the replies and
/// how many nodes each knows after each MEET has had time to complete (or to time out).
fn packet_filter_view(bin: &'static str) -> Vec<String> {
    let extra = [
        "--save",
        "",
        "--appendonly",
        "no",
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        "500",
        "--enable-debug-command",
        "yes",
    ];
    let a = Proc {
        srv: Launch::new(bin).args(&extra).logfile().start(),
    };
    let b = Proc {
        srv: Launch::new(bin).args(&extra).logfile().start(),
    };
    let mut out = Vec::new();
    let known = |n: &Proc| n.cluster_info("cluster_known_nodes");
    out.push(b.cli(&["DEBUG", "DROP-CLUSTER-PACKET-FILTER", "2"]));
    out.push(a.cli(&["CLUSTER", "MEET", "127.0.0.1", &b.port.to_string()]));
    // The handshake of a never-answered MEET times out after the node timeout (500 ms).
    std::thread::sleep(Duration::from_millis(3000));
    out.push(format!("known {} {}", known(&a), known(&b)));
    out.push(b.cli(&["DEBUG", "DROP-CLUSTER-PACKET-FILTER", "-1"]));
    out.push(a.cli(&["CLUSTER", "MEET", "127.0.0.1", &b.port.to_string()]));
    wait_for(Duration::from_secs(30), "the second MEET completes", || {
        known(&a) == "2" && known(&b) == "2"
    });
    out.push(format!("known {} {}", known(&a), known(&b)));
    out
}

/// DEBUG DROP-CLUSTER-PACKET-FILTER <type> drops incoming bus messages of that type (the
/// cluster suite's 27-endpoints stalls a MEET with it), as redis-server.
#[test]
fn drop_cluster_packet_filter_like_redis() {
    let want = packet_filter_view(redis_bin());
    assert_eq!(want[2], "known 1 1", "redis-server: {want:?}");
    assert_eq!(packet_filter_view(tessera_bin()), want);
}

/// A redis-server master's CLUSTER SHARDS health of its replica (`bin`) while that replica
/// loads a full sync slowly (key-load-delay): Redis 7.0's replica announces offset 0 while
/// it loads, so its master shows it "loading" and CLUSTER SLOTS hides it
/// (runtest-cluster 22-replica-in-sync, 28-cluster-shards).
fn master_sees_replica_loading(bin: &'static str) -> bool {
    let m = Proc::cluster(redis_bin(), "127.0.0.1", 3000);
    let r = Proc::cluster(bin, "127.0.0.1", 3000);
    assert_eq!(
        m.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]).trim(),
        "OK"
    );
    join(&[&m, &r]);
    wait_state_ok(&[&m, &r]);
    let rid = r.myid();
    assert_eq!(r.cli(&["CLUSTER", "REPLICATE", &m.myid()]).trim(), "OK");
    let health = |want: &str| {
        let Reply::Array(shards) = conn(&m).cmd(&["CLUSTER", "SHARDS"]) else {
            return false;
        };
        format!("{shards:?}").contains(&format!(
            "Bulk({:?}), Bulk({:?})",
            b"health".to_vec(),
            want.as_bytes().to_vec()
        )) && format!("{shards:?}").contains(&format!("{:?}", rid.as_bytes().to_vec()))
    };
    wait_for(Duration::from_secs(30), "the replica is online", || {
        health("online") && !health("loading")
    });
    let mut mc = conn(&m);
    let value = "A".repeat(1024);
    for j in 0..100 {
        let k = format!("{{0}}{j}");
        assert_eq!(mc.cmd(&["SET", &k, &value]), Reply::Simple("OK".into()));
    }
    for (k, v) in [
        ("key-load-delay", "40000"),
        ("loading-process-events-interval-bytes", "1024"),
    ] {
        assert_eq!(r.cli(&["CONFIG", "SET", k, v]).trim(), "OK");
    }
    assert_eq!(
        m.cli(&["CONFIG", "SET", "repl-backlog-size", "16384"])
            .trim(),
        "OK"
    );
    // A full sync: the backlog cannot cover what the replica misses.
    assert_eq!(m.cli(&["CLIENT", "KILL", "TYPE", "replica"]).trim(), "1");
    for j in 0..100 {
        let k = format!("{{0}}{j}");
        assert_eq!(mc.cmd(&["SET", &k, &value]), Reply::Simple("OK".into()));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if health("loading") {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn loading_replica_is_shown_loading_like_redis() {
    assert!(master_sees_replica_loading(redis_bin()), "redis-server");
    assert!(master_sees_replica_loading(tessera_bin()), "tessera-node");
}

/// CONFIG SET cluster-announce-hostname validates as Redis 7.0 (isValidAnnouncedHostname):
/// 256 characters or more, or a character outside [A-Za-z0-9.-], is refused with its text.
#[test]
fn announce_hostname_validation_like_redis() {
    let replies = |s: &Server| {
        let mut c = Conn::connect(s.port);
        let long = "x".repeat(256);
        let fits = "x".repeat(255);
        [long.as_str(), fits.as_str(), "?.com", "abcXYZ-09.", ""]
            .iter()
            .map(|h| c.cmd(&["CONFIG", "SET", "cluster-announce-hostname", h]))
            .collect::<Vec<_>>()
    };
    let want = replies(&Server::redis(&["--save", ""]));
    assert_eq!(replies(&Server::tessera(&["--save", ""])), want);
}

/// LOADING replies to CLUSTER NODES (sent back to back, as the cluster suite's helpers do)
/// on a replica of `bin` while its master forces three full syncs.
fn cluster_nodes_loading_during_syncs(bin: &'static str) -> usize {
    let m = Proc::cluster(bin, "127.0.0.1", 3000);
    let r = Proc::cluster(bin, "127.0.0.1", 3000);
    assert_eq!(
        m.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]).trim(),
        "OK"
    );
    join(&[&m, &r]);
    wait_state_ok(&[&m, &r]);
    assert_eq!(r.cli(&["CLUSTER", "REPLICATE", &m.myid()]).trim(), "OK");
    let link_up = || {
        info_field(&r.cli(&["INFO", "replication"]), "master_link_status").as_deref() == Some("up")
    };
    wait_for(Duration::from_secs(30), "the replica's link is up", link_up);
    assert_eq!(
        m.cli(&["CONFIG", "SET", "repl-backlog-size", "16384"])
            .trim(),
        "OK"
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let port = r.port;
    let spam = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = Conn::connect(port);
            let mut loading = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Reply::Error(e) = c.cmd(&["CLUSTER", "NODES"]) {
                    assert!(e.starts_with("LOADING"), "{e}");
                    loading += 1;
                }
            }
            loading
        })
    };
    let mut mc = conn(&m);
    let value = "A".repeat(1024);
    for round in 0..3 {
        // More than the backlog holds: the replica must sync in full.
        for j in 0..40 {
            let k = format!("{{0}}{round}:{j}");
            assert_eq!(mc.cmd(&["SET", &k, &value]), Reply::Simple("OK".into()));
        }
        assert_eq!(m.cli(&["CLIENT", "KILL", "TYPE", "replica"]).trim(), "1");
        std::thread::sleep(Duration::from_millis(200));
        wait_for(Duration::from_secs(30), "the replica resynced", link_up);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spam.join().expect("spam thread")
}

/// A replica's full sync never answers LOADING to CLUSTER NODES (which reads no keys), as
/// redis-server: runtest-cluster's cluster creation asks every node for CLUSTER NODES right
/// after CLUSTER REPLICATE.
#[test]
fn cluster_nodes_not_loading_during_sync_like_redis() {
    assert_eq!(
        cluster_nodes_loading_during_syncs(redis_bin()),
        0,
        "redis-server"
    );
    assert_eq!(
        cluster_nodes_loading_during_syncs(tessera_bin()),
        0,
        "tessera-node"
    );
}

/// As the cluster suite's create_cluster: each of `n` fresh nodes of `bin` is made a replica
/// of one master and asked CLUSTER NODES right after, for 300 ms; the LOADING replies.
fn cluster_nodes_loading_after_replicate(bin: &'static str, n: usize) -> usize {
    let nodes: Vec<Proc> = (0..=n)
        .map(|_| Proc::cluster(bin, "127.0.0.1", 3000))
        .collect();
    assert_eq!(
        nodes[0]
            .cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"])
            .trim(),
        "OK"
    );
    let refs: Vec<&Proc> = nodes.iter().collect();
    join(&refs);
    wait_state_ok(&refs);
    let mid = nodes[0].myid();
    let mut loading = 0;
    for x in &nodes[1..] {
        let mut c = conn(x);
        assert_eq!(
            c.cmd(&["CLUSTER", "REPLICATE", &mid]),
            Reply::Simple("OK".into())
        );
        let until = std::time::Instant::now() + Duration::from_millis(300);
        while std::time::Instant::now() < until {
            if let Reply::Error(e) = c.cmd(&["CLUSTER", "NODES"]) {
                assert!(e.starts_with("LOADING"), "{e}");
                loading += 1;
            }
        }
    }
    loading
}

#[test]
fn cluster_nodes_after_replicate_not_loading_like_redis() {
    assert_eq!(
        cluster_nodes_loading_after_replicate(redis_bin(), 5),
        0,
        "redis-server"
    );
    // Our replica loads on a thread of its own and is LOADING for the moment its (empty)
    // sync takes; Redis loads in its only thread and is never seen so. On a loaded machine
    // (this binary's tests run in parallel) that moment can be caught: up to three tries.
    let seen: Vec<usize> = (0..3)
        .map(|_| cluster_nodes_loading_after_replicate(tessera_bin(), 5))
        .take_while(|n| *n > 0)
        .collect();
    assert!(
        seen.len() < 3,
        "tessera-node: LOADING replies in every try: {seen:?}"
    );
}

/// A hostname set by CONFIG SET goes out with the node's very next bus message, as Redis's
/// config apply makes it: a node that meets it right after sees the hostname as soon as it
/// sees the node (Redis's 27-endpoints "prefer hostname only show hostname for new nodes"
/// reads CLUSTER SLOTS the moment the new nodes appear). Before, the cluster state took the
/// setting at its next 100 ms tick, and a handshake done sooner carried no hostname.
#[test]
fn announced_hostname_travels_with_the_first_pong() {
    for round in 0..5 {
        let a = Proc::cluster(tessera_bin(), "127.0.0.1", 3000);
        let b = Proc::cluster(tessera_bin(), "127.0.0.1", 3000);
        let a_id = a.myid();
        let set = a.cli(&[
            "CONFIG",
            "SET",
            "cluster-announce-hostname",
            "a.example.net",
        ]);
        assert_eq!(set.trim(), "OK");
        let meet = b.cli(&["CLUSTER", "MEET", "127.0.0.1", &a.port.to_string()]);
        assert_eq!(meet.trim(), "OK");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let first = loop {
            if let Some(l) = b.nodes().into_iter().find(|l| l.starts_with(&a_id)) {
                break l;
            }
            assert!(std::time::Instant::now() < deadline, "b never learned a");
            std::thread::sleep(Duration::from_millis(2));
        };
        assert!(
            first.contains(",a.example.net "),
            "round {round}: b's first line for a has no hostname: {first}"
        );
    }
}
