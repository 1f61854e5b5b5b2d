//! CLUSTER FAILOVER (coordinated through MFSTART, and TAKEOVER) between our master and our
//! replica, with redis-server masters voting.

mod common;

use std::time::Duration;

use common::*;

const NT: u64 = 2000;

fn is_master_with(text: &str, id: &str, slots: &str) -> bool {
    parse_nodes(text).get(id).is_some_and(|n| {
        n.flags.contains(&"master".to_string()) && n.slots == vec![slots.to_string()]
    })
}

fn is_replica_of(text: &str, id: &str, master: &str) -> bool {
    parse_nodes(text)
        .get(id)
        .is_some_and(|n| n.flags.contains(&"slave".to_string()) && n.master == master)
}

#[test]
fn manual_failover_and_takeover_swap_roles() {
    let a = TestNode::start(NT);
    let b = TestNode::start(NT);
    let r1 = ServerProc::start(redis_bin(), NT);
    let r2 = ServerProc::start(redis_bin(), NT);
    for p in [b.port, r1.port, r2.port] {
        assert_eq!(a.cluster_str(&["MEET", "127.0.0.1", &p.to_string()]), "OK");
    }
    let ids = vec![a.myid(), b.myid(), r1.myid(), r2.myid()];
    wait_for(Duration::from_secs(30), "4 nodes connected", || {
        sees_all_connected(&a.nodes(), &ids)
            && sees_all_connected(&b.nodes(), &ids)
            && sees_all_connected(&r1.nodes(), &ids)
    });
    assert_eq!(a.cluster_str(&["ADDSLOTSRANGE", "0", "8191"]), "OK");
    r1.cmd(&["CLUSTER", "ADDSLOTSRANGE", "8192", "12000"])
        .expect("addslots");
    r2.cmd(&["CLUSTER", "ADDSLOTSRANGE", "12001", "16383"])
        .expect("addslots");
    wait_for(Duration::from_secs(30), "b sees a's slots", || {
        is_master_with(&b.nodes(), &ids[0], "0-8191")
    });
    assert_eq!(b.cluster_str(&["REPLICATE", &ids[0]]), "OK");
    wait_for(
        Duration::from_secs(30),
        "everyone sees b as a's replica",
        || {
            is_replica_of(&a.nodes(), &ids[1], &ids[0])
                && is_replica_of(&r1.nodes(), &ids[1], &ids[0])
        },
    );
    assert_eq!(
        a.cluster_str(&["FAILOVER"]),
        "ERR ERR You should send CLUSTER FAILOVER to a replica"
    );

    // Coordinated failover: MFSTART, paused master, FORCEACK election.
    assert_eq!(b.cluster_str(&["FAILOVER"]), "OK");
    wait_for(
        Duration::from_secs(30),
        "b master, a its replica, everywhere",
        || {
            [a.nodes(), b.nodes(), r1.nodes(), r2.nodes()]
                .iter()
                .all(|t| is_master_with(t, &ids[1], "0-8191") && is_replica_of(t, &ids[0], &ids[1]))
        },
    );

    // TAKEOVER: no election, a takes the slots back with a bumped epoch.
    assert_eq!(a.cluster_str(&["FAILOVER", "TAKEOVER"]), "OK");
    wait_for(
        Duration::from_secs(30),
        "a master again, b its replica, everywhere",
        || {
            [a.nodes(), b.nodes(), r1.nodes(), r2.nodes()]
                .iter()
                .all(|t| is_master_with(t, &ids[0], "0-8191") && is_replica_of(t, &ids[1], &ids[0]))
        },
    );
    wait_for(Duration::from_secs(30), "cluster ok", || {
        a.cluster_str(&["INFO"]).contains("cluster_state:ok")
            && cmd_string(r1.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
    });
}
