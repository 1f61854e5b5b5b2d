//! tessera-node in one cluster with redis-server 7.0 and valkey-server 9.1 (the bus really
//! is compatible), FAIL agreement after SIGKILL, and a restart on a new address with the
//! same nodes.conf.

use std::time::{Duration, Instant};

use tessera_testkit::cluster::*;
use tessera_testkit::*;

/// True when `n` lists `ids` (other nodes) as connected and not failing.
fn sees_connected(n: &Proc, ids: &[String]) -> bool {
    let lines = n.nodes();
    ids.iter().all(|id| {
        lines.iter().any(|l| {
            l.starts_with(id.as_str())
                && l.contains(" connected")
                && !l.contains("fail")
                && !l.contains("handshake")
        })
    })
}

/// The slot ranges each node owns, as every node sees them: "id ranges" sorted.
fn slot_view(n: &Proc) -> Vec<String> {
    let mut v: Vec<String> = n
        .nodes()
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            format!(
                "{} {}",
                f[0],
                f.get(8..).map(|s| s.join(" ")).unwrap_or_default()
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn mixed_cluster_with_redis_and_valkey() {
    let nodes = [
        Proc::cluster(tessera_bin(), "127.0.0.1", 1500),
        Proc::cluster(tessera_bin(), "127.0.0.1", 1500),
        Proc::cluster(redis_bin(), "127.0.0.1", 1500),
        Proc::cluster(valkey_bin(), "127.0.0.1", 1500),
        Proc::cluster(redis_bin(), "127.0.0.1", 1500),
    ];
    let ids: Vec<String> = nodes.iter().map(|n| n.myid()).collect();
    // MEET sent by the tessera node and by redis-server.
    for (from, to) in [(0usize, 1usize), (0, 2), (2, 3), (2, 4)] {
        let p = nodes[to].port.to_string();
        assert_eq!(
            nodes[from]
                .cli(&["CLUSTER", "MEET", "127.0.0.1", &p])
                .trim(),
            "OK"
        );
    }
    let start = Instant::now();
    wait_for(Duration::from_secs(20), "everyone connected", || {
        nodes.iter().enumerate().all(|(i, n)| {
            let others: Vec<String> = ids
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, id)| id.clone())
                .collect();
            sees_connected(n, &others)
        })
    });
    let took = start.elapsed();
    assert!(took < Duration::from_secs(5), "full mesh took {took:?}");

    // Slots assigned on every kind of node are seen identically everywhere.
    let ranges = [
        ("0", "3000"),
        ("3001", "6000"),
        ("6001", "9000"),
        ("9001", "12000"),
        ("12001", "16383"),
    ];
    for (n, (a, b)) in nodes.iter().zip(ranges) {
        assert_eq!(n.cli(&["CLUSTER", "ADDSLOTSRANGE", a, b]).trim(), "OK");
    }
    wait_for(Duration::from_secs(20), "identical slot views", || {
        let v0 = slot_view(&nodes[0]);
        v0.iter()
            .filter(|l| l.split(' ').count() > 1 && !l.ends_with(' '))
            .count()
            == 5
            && nodes.iter().all(|n| slot_view(n) == v0)
    });
    wait_state_ok(&nodes.iter().collect::<Vec<_>>());
    // A client is redirected across implementations.
    for n in &nodes {
        let o = cli_out(&["-c", "-p", &n.port.to_string()], &["SET", "mixed", "1"]);
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "OK");
    }

    // SIGKILL redis-server, then a tessera node: every survivor marks each FAIL (3 of 5
    // masters stay up, still a majority for the failure reports).
    let mut nodes = nodes;
    for (victim, survivors) in [(2usize, vec![0usize, 1, 3, 4]), (1, vec![0, 3, 4])] {
        let dead = ids[victim].clone();
        nodes[victim].kill();
        wait_for(
            Duration::from_secs(30),
            "FAIL flag on every survivor",
            || {
                survivors.iter().all(|&i| {
                    nodes[i].nodes().iter().any(|l| {
                        l.starts_with(dead.as_str()) && l.contains("fail") && !l.contains("fail?")
                    })
                })
            },
        );
    }
}

#[test]
fn restart_on_new_address_keeps_identity() {
    // 127.0.0.2 is loopback on Linux (127.0.0.0/8 routes to lo).
    assert!(
        std::net::TcpListener::bind(("127.0.0.2", 0)).is_ok(),
        "127.0.0.2 is not bindable: this test needs the whole 127.0.0.0/8 on loopback"
    );
    let mut nodes = cluster_nodes(tessera_bin(), 3, 3000);
    let refs: Vec<&Proc> = nodes.iter().collect();
    let (ok, out) = cluster_create(&refs, 0);
    assert!(ok, "{out}");
    wait_state_ok(&refs);
    let id = nodes[2].myid();
    let epoch = nodes[2].cluster_info("cluster_my_epoch");
    let line = |n: &Proc| {
        n.nodes()
            .into_iter()
            .find(|l| l.starts_with(id.as_str()))
            .unwrap_or_default()
    };
    let slots_before: Vec<String> = line(&nodes[2])
        .split(' ')
        .skip(8)
        .map(|s| s.to_string())
        .collect();
    assert!(!slots_before.is_empty());
    // Stop it and start it again on 127.0.0.2 with the same dir (nodes.conf).
    nodes[2].kill();
    nodes[2].ip = "127.0.0.2".into();
    nodes[2].spawn();
    assert_eq!(nodes[2].myid(), id);
    assert_eq!(nodes[2].cluster_info("cluster_my_epoch"), epoch);
    let new_addr = format!(" 127.0.0.2:{}@{} ", nodes[2].port, nodes[2].port + 10000);
    // Peers learn the new address from its bus traffic. (Like Redis 7.0, the node itself
    // keeps the IP from nodes.conf in its own line until a MEET tells it otherwise.)
    wait_for(
        Duration::from_secs(30),
        "peers learn the new address",
        || {
            nodes[..2].iter().all(|n| {
                let l = line(n);
                l.contains(&new_addr) && l.contains(" connected") && !l.contains("fail")
            })
        },
    );
    let peer_ids = [nodes[0].myid(), nodes[1].myid()];
    wait_for(
        Duration::from_secs(30),
        "the restarted node reconnects",
        || sees_connected(&nodes[2], &peer_ids),
    );
    let slots_after: Vec<String> = line(&nodes[0])
        .split(' ')
        .skip(8)
        .map(|s| s.to_string())
        .collect();
    assert_eq!(slots_after, slots_before);
    wait_state_ok(&nodes.iter().collect::<Vec<_>>());
}
