//! Automatic failover: our replica of a SIGKILLed redis-server master wins the election with
//! votes from our master and a redis master, and everyone sees it serve the slots.

mod common;

use std::time::Duration;

use common::*;

const NT: u64 = 2000;

#[test]
fn our_replica_takes_over_a_killed_redis_master() {
    let a = TestNode::start(NT);
    let b = TestNode::start(NT);
    let mut r1 = ServerProc::start(redis_bin(), NT);
    let r2 = ServerProc::start(redis_bin(), NT);
    for p in [b.port, r1.port, r2.port] {
        assert_eq!(a.cluster_str(&["MEET", "127.0.0.1", &p.to_string()]), "OK");
    }
    let ids = vec![a.myid(), b.myid(), r1.myid(), r2.myid()];
    wait_for(Duration::from_secs(30), "4 nodes connected", || {
        sees_all_connected(&a.nodes(), &ids)
            && sees_all_connected(&r1.nodes(), &ids)
            && sees_all_connected(&r2.nodes(), &ids)
    });
    assert_eq!(a.cluster_str(&["ADDSLOTSRANGE", "0", "8191"]), "OK");
    r1.cmd(&["CLUSTER", "ADDSLOTSRANGE", "8192", "12000"])
        .expect("addslots");
    r2.cmd(&["CLUSTER", "ADDSLOTSRANGE", "12001", "16383"])
        .expect("addslots");
    wait_for(Duration::from_secs(30), "b sees r1's slots", || {
        slot_view(&b.nodes())
            .get(&ids[2])
            .is_some_and(|s| s == &vec!["8192-12000".to_string()])
    });
    assert_eq!(b.cluster_str(&["REPLICATE", &ids[2]]), "OK");
    wait_for(
        Duration::from_secs(30),
        "cluster ok, b known as r1's replica",
        || {
            parse_nodes(&r2.nodes())
                .get(&ids[1])
                .is_some_and(|n| n.master == ids[2])
                && a.cluster_str(&["INFO"]).contains("cluster_state:ok")
                && cmd_string(r2.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
        },
    );
    wait_for(Duration::from_secs(30), "config epochs settled", || {
        config_settled(&[a.nodes(), b.nodes(), r1.nodes(), r2.nodes()])
    });
    let epoch_before = parse_nodes(&r2.nodes())[&ids[2]].epoch;

    r1.kill();
    let took = wait_or_show(
        Duration::from_secs(60),
        "b promoted with r1's slots everywhere",
        || {
            [a.nodes(), b.nodes(), r2.nodes()].iter().all(|t| {
                let v = parse_nodes(t);
                v.get(&ids[1]).is_some_and(|n| {
                    n.flags.contains(&"master".to_string())
                        && n.slots == vec!["8192-12000".to_string()]
                        && n.epoch > epoch_before
                })
            })
        },
        || {
            format!(
                "a:\n{}\nb:\n{}\nr2:\n{}\nr2 log:\n{}",
                a.nodes(),
                b.nodes(),
                r2.nodes(),
                r2.log()
            )
        },
    );
    println!("failover completed {took:?} after SIGKILL");
    wait_for(Duration::from_secs(30), "cluster_state ok again", || {
        a.cluster_str(&["INFO"]).contains("cluster_state:ok")
            && b.cluster_str(&["INFO"]).contains("cluster_state:ok")
            && cmd_string(r2.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
    });
    assert!(flags_of(&r2.nodes(), &ids[2]).iter().any(|f| f == "fail"));
}
