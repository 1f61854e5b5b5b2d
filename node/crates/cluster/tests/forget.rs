//! CLUSTER FORGET: the node is dropped and stays out for the blacklist period even though
//! other nodes keep gossiping about it; redis-server forgets our node the same way.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn forgotten_nodes_stay_forgotten_while_peers_gossip_about_them() {
    let ours = TestNode::start(2000);
    let r1 = ServerProc::start(redis_bin(), 2000);
    let r2 = ServerProc::start(redis_bin(), 2000);
    for p in [r1.port, r2.port] {
        assert_eq!(
            ours.cluster_str(&["MEET", "127.0.0.1", &p.to_string()]),
            "OK"
        );
    }
    let ids = vec![ours.myid(), r1.myid(), r2.myid()];
    wait_for(Duration::from_secs(30), "3 nodes connected", || {
        sees_all_connected(&ours.nodes(), &ids) && sees_all_connected(&r1.nodes(), &ids)
    });
    assert_eq!(ours.cluster_str(&["FORGET", &ids[2]]), "OK");
    assert!(!ours.nodes().contains(&ids[2]));
    // r1 still knows r2 and gossips about it several times a second; we must not re-add it.
    for _ in 0..30 {
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !ours.nodes().contains(&ids[2]),
            "forgotten node came back through gossip"
        );
    }
    assert_eq!(
        ours.cluster_str(&["FORGET", &ids[2]]),
        format!("ERR ERR Unknown node {}", ids[2])
    );
    // Redis forgets us in the same way.
    r1.cmd(&["CLUSTER", "FORGET", &ids[0]]).expect("forget");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!r1.nodes().contains(&ids[0]), "redis re-added our node");
}
