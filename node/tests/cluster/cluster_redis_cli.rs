//! tessera-node clusters formed and driven by the real redis-cli: create, check, -c routing,
//! the `redis` crate's cluster client, byte-exact redirection errors, reshard/rebalance.

use std::time::Duration;

use redis::Commands;
use tessera_testkit::cluster::*;
use tessera_testkit::*;

/// `n` tessera nodes joined by `redis-cli --cluster create` (`replicas` per master), all
/// reporting cluster_state:ok.
fn created(n: usize, replicas: u32) -> Vec<Proc> {
    let nodes = cluster_nodes(tessera_bin(), n, 5000);
    let refs: Vec<&Proc> = nodes.iter().collect();
    let (ok, out) = cluster_create(&refs, replicas);
    assert!(ok && out.contains("[OK] All 16384 slots covered."), "{out}");
    wait_state_ok(&refs);
    nodes
}

fn three_masters() -> Vec<Proc> {
    let nodes = created(3, 0);
    wait_for(Duration::from_secs(30), "redis-cli --cluster check", || {
        cluster_check(&nodes[0]).0
    });
    nodes
}

/// The node serving `key` (answers locally instead of redirecting).
fn owner_of<'a>(nodes: &'a [Proc], key: &str) -> &'a Proc {
    let slot = nodes[0]
        .cli(&["CLUSTER", "KEYSLOT", key])
        .trim()
        .to_string();
    nodes
        .iter()
        .find(|n| {
            n.cli(&["CLUSTER", "COUNTKEYSINSLOT", &slot]).trim() != "" && {
                let l = raw_line(&n.addr(), &[b"TYPE", key.as_bytes()]);
                !l.starts_with("-MOVED")
            }
        })
        .expect("an owner")
}

#[test]
fn create_check_cli_and_cluster_client() {
    let nodes = three_masters();
    // redis-cli -c writes through one node and reads through another.
    for i in 0..30 {
        let k = format!("cli:{i}");
        let p = nodes[i % 3].port.to_string();
        let o = cli_out(&["-c", "-p", &p], &["SET", &k, &format!("v{i}")]);
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "OK");
    }
    for i in 0..30 {
        let k = format!("cli:{i}");
        let p = nodes[(i + 1) % 3].port.to_string();
        let o = cli_out(&["-c", "-p", &p], &["GET", &k]);
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), format!("v{i}"));
    }
    // The redis crate's cluster client.
    let client = cluster_client(&nodes);
    let mut con = client.get_connection().expect("cluster connection");
    for i in 0..300 {
        let _: () = con.set(format!("k{i}"), i).expect("set");
    }
    for i in 0..300 {
        let v: i64 = con.get(format!("k{i}")).expect("get");
        assert_eq!(v, i);
    }
    let total: i64 = nodes
        .iter()
        .map(|n| n.cli(&["DBSIZE"]).trim().parse::<i64>().unwrap_or(0))
        .sum();
    assert_eq!(total, 330);
    // Every node holds some keys: the slots really are spread.
    for n in &nodes {
        assert!(n.cli(&["DBSIZE"]).trim().parse::<i64>().unwrap_or(0) > 0);
    }
    assert!(nodes[0]
        .cli(&["INFO", "cluster"])
        .contains("cluster_enabled:1"));
    // PUBLISH on one node reaches a subscriber on another through the bus.
    let mut sub = nodes[2].client();
    sub.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut ps = sub.as_pubsub();
    ps.subscribe("news").expect("subscribe");
    let n = nodes[0].cli(&["PUBLISH", "news", "hello"]);
    assert_eq!(n.trim(), "0", "no local subscriber on the publishing node");
    let msg = ps.get_message().expect("message over the bus");
    assert_eq!(msg.get_channel_name(), "news");
    let payload: String = msg.get_payload().expect("payload");
    assert_eq!(payload, "hello");
}

#[test]
fn redirection_errors_are_byte_exact() {
    let nodes = three_masters();
    let owner = owner_of(&nodes, "foo");
    let others: Vec<&Proc> = nodes.iter().filter(|n| n.port != owner.port).collect();
    let moved = format!("-MOVED 12182 127.0.0.1:{}\r\n", owner.port);
    for o in &others {
        assert_eq!(raw_line(&o.addr(), &[b"GET", b"foo"]), moved);
    }
    assert_eq!(raw_line(&owner.addr(), &[b"GET", b"foo"]), "$-1\r\n");
    assert_eq!(
        raw_line(&owner.addr(), &[b"MSET", b"a", b"1", b"b", b"2"]),
        "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    );
    assert_eq!(
        raw_line(&owner.addr(), &[b"SELECT", b"1"]),
        "-ERR SELECT is not allowed in cluster mode\r\n"
    );
    assert_eq!(raw_line(&owner.addr(), &[b"SELECT", b"0"]), "+OK\r\n");

    // MULTI/EXEC: a redirected queued command aborts EXEC; one slot works.
    let r = raw_lines(
        &owner.addr(),
        &[
            &[b"MULTI"],
            &[b"SET", b"{foo}a", b"1"],
            &[b"SET", b"{foo}b", b"2"],
            &[b"EXEC"],
        ],
    );
    assert_eq!(r, ["+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*2\r\n"]);
    // CLUSTER inside EXEC reads the keyspace through the locks EXEC holds (no self-deadlock).
    let r = raw_lines(
        &owner.addr(),
        &[
            &[b"MULTI"],
            &[b"SET", b"{foo}q", b"1"],
            &[b"CLUSTER", b"COUNTKEYSINSLOT", b"12182"],
            &[b"EXEC"],
        ],
    );
    assert_eq!(r[3], "*2\r\n");
    let bar_owner = owner_of(&nodes, "bar");
    let r = raw_lines(
        &owner.addr(),
        &[
            &[b"MULTI"],
            &[b"SET", b"{foo}c", b"1"],
            &[b"GET", b"bar"],
            &[b"EXEC"],
        ],
    );
    if bar_owner.port != owner.port {
        assert_eq!(
            r[2],
            format!("-MOVED 5061 127.0.0.1:{}\r\n", bar_owner.port)
        );
        assert_eq!(
            r[3],
            "-EXECABORT Transaction discarded because of previous errors.\r\n"
        );
    }

    // Open slot: MIGRATING on the owner, IMPORTING on a target.
    let dst = others[0];
    let (oid, did) = (owner.myid(), dst.myid());
    assert_eq!(
        owner
            .cli(&["CLUSTER", "SETSLOT", "12182", "MIGRATING", &did])
            .trim(),
        "OK"
    );
    assert_eq!(
        dst.cli(&["CLUSTER", "SETSLOT", "12182", "IMPORTING", &oid])
            .trim(),
        "OK"
    );
    let ask = format!("-ASK 12182 127.0.0.1:{}\r\n", dst.port);
    assert_eq!(raw_line(&owner.addr(), &[b"GET", b"foo"]), ask);
    // Existing keys are still served by the owner.
    assert_eq!(raw_line(&owner.addr(), &[b"GET", b"{foo}a"]), "$1\r\n");
    // The importing node redirects back unless ASKING, which lasts one command.
    let r = raw_lines(
        &dst.addr(),
        &[
            &[b"GET", b"foo"],
            &[b"ASKING"],
            &[b"GET", b"foo"],
            &[b"GET", b"foo"],
            &[b"ASKING"],
            &[b"MGET", b"foo", b"{foo}zz"],
        ],
    );
    assert_eq!(r[0], format!("-MOVED 12182 127.0.0.1:{}\r\n", owner.port));
    assert_eq!(r[1], "+OK\r\n");
    assert_eq!(r[2], "$-1\r\n");
    assert_eq!(r[3], format!("-MOVED 12182 127.0.0.1:{}\r\n", owner.port));
    assert_eq!(
        r[5],
        "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
    );
    for n in [owner, dst] {
        assert_eq!(
            n.cli(&["CLUSTER", "SETSLOT", "12182", "STABLE"]).trim(),
            "OK"
        );
    }

    // Unbound slot, then a cluster that is down.
    assert_eq!(owner.cli(&["CLUSTER", "DELSLOTS", "12182"]).trim(), "OK");
    assert_eq!(
        raw_line(&owner.addr(), &[b"GET", b"foo"]),
        "-CLUSTERDOWN Hash slot not served\r\n"
    );
    wait_for(Duration::from_secs(20), "cluster_state:fail", || {
        owner.cluster_info("cluster_state") == "fail"
    });
    assert_eq!(
        raw_line(&owner.addr(), &[b"GET", b"{foo}a"]),
        "-CLUSTERDOWN Hash slot not served\r\n"
    );
    assert_eq!(
        raw_line(&owner.addr(), &[b"GET", b"bar"]),
        "-CLUSTERDOWN The cluster is down\r\n"
    );
    assert_eq!(owner.cli(&["CLUSTER", "ADDSLOTS", "12182"]).trim(), "OK");
    wait_state_ok(&nodes.iter().collect::<Vec<_>>());
}

#[test]
fn reshard_and_rebalance_lose_no_key() {
    let nodes = three_masters();
    let client = cluster_client(&nodes);
    let mut con = client.get_connection().expect("cluster connection");
    const N: usize = 1000;
    for i in 0..N {
        let _: () = con
            .set(format!("key:{i}"), format!("val:{i}"))
            .expect("set");
    }
    let (from, to) = (nodes[0].myid(), nodes[1].myid());
    let before = nodes[1]
        .cli(&["DBSIZE"])
        .trim()
        .parse::<usize>()
        .unwrap_or(0);
    let o = cli_out(
        &[],
        &[
            "--cluster",
            "reshard",
            &nodes[0].addr(),
            "--cluster-from",
            &from,
            "--cluster-to",
            &to,
            "--cluster-slots",
            "300",
            "--cluster-yes",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let after = nodes[1]
        .cli(&["DBSIZE"])
        .trim()
        .parse::<usize>()
        .unwrap_or(0);
    assert!(after > before + 5, "keys moved: {before} -> {after}");
    wait_for(Duration::from_secs(30), "check after reshard", || {
        cluster_check(&nodes[2]).0
    });
    let check_all = |con: &mut redis::cluster::ClusterConnection| {
        for i in 0..N {
            let v: Option<String> = con.get(format!("key:{i}")).expect("get");
            assert_eq!(v.as_deref(), Some(format!("val:{i}").as_str()), "key:{i}");
        }
        let total: usize = nodes
            .iter()
            .map(|n| n.cli(&["DBSIZE"]).trim().parse::<usize>().unwrap_or(0))
            .sum();
        assert_eq!(total, N);
    };
    check_all(&mut con);
    let o = cli_out(&[], &["--cluster", "rebalance", &nodes[2].addr()]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success() && text.contains("Moving"), "{text}");
    wait_for(Duration::from_secs(30), "check after rebalance", || {
        cluster_check(&nodes[2]).0
    });
    let mut con = client.get_connection().expect("cluster connection");
    check_all(&mut con);
}

#[test]
fn six_nodes_with_replicas() {
    let nodes = created(6, 1);
    wait_for(Duration::from_secs(30), "check with replicas", || {
        let (ok, text) = cluster_check(&nodes[0]);
        ok && text.matches("slave").count() + text.matches("replica").count() >= 3
    });
    wait_for(
        Duration::from_secs(20),
        "every node to see 3 replicas",
        || {
            nodes
                .iter()
                .all(|n| n.nodes().iter().filter(|l| l.contains("slave")).count() == 3)
        },
    );
    // Three masters with slots, each replicated by one of the others.
    let lines = nodes[0].nodes();
    let masters: Vec<&String> = lines.iter().filter(|l| l.contains("master")).collect();
    assert_eq!(masters.len(), 3, "{lines:?}");
    for m in masters {
        let id = m.split(' ').next().unwrap_or_default();
        assert!(m.split(' ').count() > 8, "master without slots: {m}");
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains(&format!("slave {id}")))
                .count(),
            1
        );
    }
}
