//! The compatibility proof: our bus in one cluster with real redis-server 7.0 and
//! valkey-server 9.1 nodes (MEET, gossip, slot propagation, FAIL agreement both ways).

mod common;

use std::time::Duration;

use common::*;

const NT: u64 = 2000;

#[test]
fn mixed_cluster_forms_agrees_on_slots_and_detects_failures() {
    // Hostnames on our node and on valkey: ping extensions flow (valkey adds its shard id
    // and human node name once it sees we send extensions), and must all pass validation.
    let ours = TestNode::start_custom(NT, |c| {
        c.announce_hostname = Some("tessera-a.example".into());
    });
    let r1 = ServerProc::start(redis_bin(), NT);
    let r2 = ServerProc::start(redis_bin(), NT);
    let mut r3 = ServerProc::start(redis_bin(), NT);
    let v1 = ServerProc::start_args(
        valkey_bin(),
        NT,
        &[
            "--cluster-announce-hostname",
            "valkey-v1.example",
            "--cluster-announce-human-nodename",
            "valkey-v1",
        ],
    );

    // Our node MEETs r1; r1 MEETs the rest: everyone must learn everyone through gossip.
    assert_eq!(
        ours.cluster_str(&["MEET", "127.0.0.1", &r1.port.to_string()]),
        "OK"
    );
    for s in [&r2, &r3, &v1] {
        r1.cmd(&["CLUSTER", "MEET", "127.0.0.1", &s.port.to_string()])
            .expect("meet");
    }
    let ids = vec![ours.myid(), r1.myid(), r2.myid(), r3.myid(), v1.myid()];
    let servers = [&r1, &r2, &r3, &v1];
    let took = wait_for(
        Duration::from_secs(30),
        "every node to see every other connected",
        || {
            sees_all_connected(&ours.nodes(), &ids)
                && servers.iter().all(|s| sees_all_connected(&s.nodes(), &ids))
        },
    );
    println!("mixed cluster of 5 fully connected after {took:?}");

    // Slots assigned on each node (ours included) are seen identically everywhere.
    assert_eq!(ours.cluster_str(&["ADDSLOTSRANGE", "0", "3000"]), "OK");
    r1.cmd(&["CLUSTER", "ADDSLOTSRANGE", "3001", "6000"])
        .expect("addslots");
    r2.cmd(&["CLUSTER", "ADDSLOTSRANGE", "6001", "9000"])
        .expect("addslots");
    r3.cmd(&["CLUSTER", "ADDSLOTSRANGE", "9001", "12000"])
        .expect("addslots");
    v1.cmd(&["CLUSTER", "ADDSLOTSRANGE", "12001", "16383"])
        .expect("addslots");
    let took = wait_for(
        Duration::from_secs(30),
        "identical slot views with full coverage",
        || {
            let mine = slot_view(&ours.nodes());
            mine.get(&ids[0])
                .is_some_and(|s| s == &vec!["0-3000".to_string()])
                && mine
                    .get(&ids[4])
                    .is_some_and(|s| s == &vec!["12001-16383".to_string()])
                && servers.iter().all(|s| slot_view(&s.nodes()) == mine)
        },
    );
    println!("slot views agree after {took:?}");
    wait_for(Duration::from_secs(30), "valkey's hostname learned", || {
        ours.nodes().contains(",valkey-v1.example ")
    });
    let v1_id = ids[4].as_bytes().to_vec();
    wait_for(
        Duration::from_secs(30),
        "valkey's human node name and shard id extensions",
        || {
            ours.node().with_state(|st| {
                st.nodes.values().any(|n| {
                    n.name[..] == v1_id[..]
                        && n.human_nodename == "valkey-v1"
                        && n.shard_id != [b'0'; 40]
                })
            })
        },
    );
    assert_eq!(
        ours.node().stats().messages_rejected,
        0,
        "a stock node's message failed validation"
    );
    wait_for(
        Duration::from_secs(30),
        "cluster_state:ok everywhere",
        || {
            ours.cluster_str(&["INFO"]).contains("cluster_state:ok")
                && servers
                    .iter()
                    .all(|s| cmd_string(s.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok"))
        },
    );

    // A SIGKILLed redis-server is marked FAIL by us and by every survivor.
    let dead = ids[3].clone();
    r3.kill();
    let alive = [&r1, &r2, &v1];
    let took = wait_for(
        Duration::from_secs(60),
        "killed redis node marked fail everywhere",
        || {
            flags_of(&ours.nodes(), &dead).iter().any(|f| f == "fail")
                && alive
                    .iter()
                    .all(|s| flags_of(&s.nodes(), &dead).iter().any(|f| f == "fail"))
        },
    );
    println!("SIGKILLed redis node marked FAIL by all after {took:?}");
    assert!(
        ours.cluster_str(&["INFO"]).contains("cluster_state:fail"),
        "slots 9001-12000 are down"
    );

    // Our node stopped is marked FAIL by the stock nodes.
    let me = ids[0].clone();
    let mut ours = ours;
    ours.stop();
    let took = wait_for(
        Duration::from_secs(60),
        "our stopped node marked fail by redis and valkey",
        || {
            alive
                .iter()
                .all(|s| flags_of(&s.nodes(), &me).iter().any(|f| f == "fail"))
        },
    );
    println!("our node marked FAIL by redis/valkey after {took:?}");
    for s in alive {
        let log = s.log();
        // Our messages must not trip any "unknown"/"malformed" warning in the stock nodes.
        let bad: Vec<&str> = log
            .lines()
            .filter(|l| l.to_lowercase().contains("unknown") || l.contains("length"))
            .collect();
        assert!(bad.is_empty(), "server {} logged: {bad:?}", s.port);
    }
}
