//! A cluster of our nodes plus one redis-server: epoch collision resolution, replica roles,
//! cluster-wide PUBLISH / SPUBLISH over the bus, slot moves decided by configEpoch, FAIL.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::*;

const NT: u64 = 2000;

#[test]
fn our_nodes_gossip_publish_move_slots_and_fail() {
    let hosts: Vec<Arc<RecordingHost>> =
        (0..4).map(|_| Arc::new(RecordingHost::default())).collect();
    let a = TestNode::start_with_host(NT, hosts[0].clone());
    let b = TestNode::start_with_host(NT, hosts[1].clone());
    let mut c = TestNode::start_with_host(NT, hosts[2].clone());
    let r = ServerProc::start(redis_bin(), NT);
    for p in [b.port, c.port, r.port] {
        assert_eq!(a.cluster_str(&["MEET", "127.0.0.1", &p.to_string()]), "OK");
    }
    let mut ids = vec![a.myid(), b.myid(), c.myid(), r.myid()];
    wait_for(Duration::from_secs(30), "4 nodes connected", || {
        [&a, &b, &c]
            .iter()
            .all(|n| sees_all_connected(&n.nodes(), &ids))
            && sees_all_connected(&r.nodes(), &ids)
    });

    // Every node started at configEpoch 0: collisions must resolve to distinct epochs.
    wait_for(Duration::from_secs(30), "distinct config epochs", || {
        let v = parse_nodes(&r.nodes());
        let epochs: BTreeSet<u64> = v.values().map(|n| n.epoch).collect();
        epochs.len() == 4
            && parse_nodes(&a.nodes())
                .values()
                .map(|n| n.epoch)
                .collect::<BTreeSet<_>>()
                == epochs
    });

    assert_eq!(a.cluster_str(&["ADDSLOTSRANGE", "0", "5460"]), "OK");
    assert_eq!(b.cluster_str(&["ADDSLOTSRANGE", "5461", "10922"]), "OK");
    assert_eq!(c.cluster_str(&["ADDSLOTSRANGE", "10923", "16383"]), "OK");
    wait_for(Duration::from_secs(30), "cluster_state ok on all", || {
        [&a, &b, &c]
            .iter()
            .all(|n| n.cluster_str(&["INFO"]).contains("cluster_state:ok"))
            && cmd_string(r.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
    });

    // A replica of A.
    let d = TestNode::start_with_host(NT, hosts[3].clone());
    assert_eq!(
        d.cluster_str(&["MEET", "127.0.0.1", &a.port.to_string()]),
        "OK"
    );
    ids.push(d.myid());
    wait_for(Duration::from_secs(30), "d joins", || {
        sees_all_connected(&d.nodes(), &ids)
    });
    assert_eq!(d.cluster_str(&["REPLICATE", &ids[0]]), "OK");
    wait_for(
        Duration::from_secs(30),
        "everyone sees d as a replica of a",
        || {
            let ok = |t: &str| {
                parse_nodes(t)
                    .get(&ids[4])
                    .is_some_and(|n| n.master == ids[0] && n.flags.contains(&"slave".to_string()))
            };
            ok(&a.nodes()) && ok(&b.nodes()) && ok(&r.nodes())
        },
    );
    let d_slots = cmd_string(r.port, &["CLUSTER", "SLOTS"]);
    // Redis 7.0 leaves replicas with replication offset 0 out of CLUSTER SLOTS; so do we.
    assert!(
        !d_slots.contains(&ids[4]),
        "redis lists a replica without offset: {d_slots}"
    );
    let ours_slots = format!("{:?}", a.cluster(&["SLOTS"]));
    assert!(
        !ours_slots.contains(&ids[4]),
        "we list a replica without offset: {ours_slots}"
    );

    // PUBLISH from our node reaches our peers and a redis subscriber; and back.
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", r.port)).expect("client");
    let mut sub_con = client.get_connection().expect("connection");
    sub_con
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut sub = sub_con.as_pubsub();
    sub.subscribe("news").expect("subscribe");
    a.node()
        .with_state(|st| st.publish(b"news", b"hello", false));
    let m = sub.get_message().expect("message published by our node");
    assert_eq!(m.get_payload::<String>().expect("payload"), "hello");
    wait_for(
        Duration::from_secs(10),
        "our peers deliver the PUBLISH",
        || (1..4).all(|i| hosts[i].got("news", "hello", false)),
    );
    // redis-server broadcasts over the links it has open: published again until its link
    // to each of our nodes is up and each got it (a loaded machine may still be connecting).
    wait_for(
        Duration::from_secs(20),
        "redis PUBLISH reaches all our nodes",
        || {
            if (0..4).all(|i| hosts[i].got("fromredis", "hi", false)) {
                return true;
            }
            r.cmd(&["PUBLISH", "fromredis", "hi"]).expect("publish");
            false
        },
    );
    a.node()
        .with_state(|st| st.publish(b"shardch", b"s1", true));
    wait_for(
        Duration::from_secs(10),
        "SPUBLISH reaches the shard's replica",
        || hosts[3].got("shardch", "s1", true),
    );
    assert!(
        !hosts[1].got("shardch", "s1", true),
        "SPUBLISH stays inside the shard"
    );

    // Slot 100 moves from a to b: b takes it and bumps its epoch; the higher epoch wins everywhere.
    assert_eq!(b.cluster_str(&["SETSLOT", "100", "NODE", &ids[1]]), "OK");
    assert!(
        b.cluster_str(&["BUMPEPOCH"]).starts_with("BUMPED")
            || b.cluster_str(&["BUMPEPOCH"]).starts_with("STILL")
    );
    wait_for(
        Duration::from_secs(30),
        "slot 100 owned by b everywhere",
        || {
            let want_a = vec!["0-99".to_string(), "101-5460".to_string()];
            [a.nodes(), c.nodes(), d.nodes(), r.nodes()]
                .iter()
                .all(|t| {
                    let v = slot_view(t);
                    v.get(&ids[0]) == Some(&want_a)
                        && v.get(&ids[1])
                            .is_some_and(|s| s.contains(&"100".to_string()))
                })
        },
    );

    // c stops: everyone marks it FAIL and the cluster goes down (its slots are unserved).
    c.stop();
    wait_for(Duration::from_secs(60), "c marked fail by all", || {
        [a.nodes(), b.nodes(), d.nodes(), r.nodes()]
            .iter()
            .all(|t| flags_of(t, &ids[2]).iter().any(|f| f == "fail"))
    });
    wait_for(Duration::from_secs(30), "cluster_state fail", || {
        a.cluster_str(&["INFO"]).contains("cluster_state:fail")
    });
    assert!(a.cluster_str(&["INFO"]).contains("cluster_slots_fail:5461"));
}
