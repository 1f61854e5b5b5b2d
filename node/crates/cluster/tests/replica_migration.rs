//! Replica migration (Redis 7.0 clusterHandleSlaveMigration): when a master's only replica
//! fails, one replica of the master with the most replicas — the one with the smallest
//! name — becomes its replica after the orphan delay, leaving its own master the
//! cluster-migration-barrier it needs; with cluster-allow-replica-migration off nobody moves.

mod common;

use std::time::Duration;

use common::*;

const NT: u64 = 1000;

struct Five {
    a: TestNode,
    b: TestNode,
    a1: TestNode,
    a2: TestNode,
    b1: TestNode,
    ids: Vec<String>,
}

/// Masters a (slots 0-8191, replicas a1 a2) and b (8192-16383, replica b1).
fn five(allow: bool) -> Five {
    let start = || {
        TestNode::start_custom(NT, |c| {
            c.allow_replica_migration = allow;
            c.migration_barrier = 1;
        })
    };
    let (a, b, a1, a2, b1) = (start(), start(), start(), start(), start());
    for n in [&b, &a1, &a2, &b1] {
        assert_eq!(
            a.cluster_str(&["MEET", "127.0.0.1", &n.port.to_string()]),
            "OK"
        );
    }
    let ids: Vec<String> = [&a, &b, &a1, &a2, &b1].iter().map(|n| n.myid()).collect();
    wait_for(Duration::from_secs(30), "5 nodes connected", || {
        [&a, &b, &a1, &a2, &b1]
            .iter()
            .all(|n| sees_all_connected(&n.nodes(), &ids))
    });
    assert_eq!(a.cluster_str(&["ADDSLOTSRANGE", "0", "8191"]), "OK");
    assert_eq!(b.cluster_str(&["ADDSLOTSRANGE", "8192", "16383"]), "OK");
    wait_for(
        Duration::from_secs(30),
        "replicas see both masters' slots",
        || {
            [&a1, &a2, &b1].iter().all(|n| {
                let v = slot_view(&n.nodes());
                v.get(&ids[0])
                    .is_some_and(|s| s == &vec!["0-8191".to_string()])
                    && v.get(&ids[1])
                        .is_some_and(|s| s == &vec!["8192-16383".to_string()])
            })
        },
    );
    assert_eq!(a1.cluster_str(&["REPLICATE", &ids[0]]), "OK");
    assert_eq!(a2.cluster_str(&["REPLICATE", &ids[0]]), "OK");
    assert_eq!(b1.cluster_str(&["REPLICATE", &ids[1]]), "OK");
    wait_for(
        Duration::from_secs(30),
        "roles known everywhere, cluster ok",
        || {
            [&a, &b, &a1, &a2, &b1].iter().all(|n| {
                let v = parse_nodes(&n.nodes());
                v.get(&ids[2]).is_some_and(|x| x.master == ids[0])
                    && v.get(&ids[3]).is_some_and(|x| x.master == ids[0])
                    && v.get(&ids[4]).is_some_and(|x| x.master == ids[1])
                    && n.cluster_str(&["INFO"]).contains("cluster_state:ok")
            })
        },
    );
    Five {
        a,
        b,
        a1,
        a2,
        b1,
        ids,
    }
}

/// Masters of a1 and a2 as `node` sees them.
fn masters_of_a_replicas(node: &TestNode, ids: &[String]) -> (String, String) {
    let v = parse_nodes(&node.nodes());
    let m = |id: &String| v.get(id).map(|n| n.master.clone()).unwrap_or_default();
    (m(&ids[2]), m(&ids[3]))
}

#[test]
fn orphaned_master_gets_the_smallest_named_spare_replica() {
    let mut f = five(true);
    f.b1.stop();
    wait_for(Duration::from_secs(30), "b1 failed", || {
        flags_of(&f.a.nodes(), &f.ids[4])
            .iter()
            .any(|x| x == "fail")
    });
    // The replica of a with the smaller name moves to b; the other stays with a.
    let (mover, stayer) = if f.ids[2] < f.ids[3] { (2, 3) } else { (3, 2) };
    let took = wait_for(Duration::from_secs(60), "a replica migrated to b", || {
        [&f.a, &f.b, &f.a1, &f.a2].iter().all(|n| {
            let v = parse_nodes(&n.nodes());
            v.get(&f.ids[mover]).is_some_and(|x| x.master == f.ids[1])
                && v.get(&f.ids[stayer]).is_some_and(|x| x.master == f.ids[0])
        })
    });
    eprintln!("migrated {took:?} after b1 was marked failed");
    // Still exactly one replica each (a now at the barrier): nothing else moves.
    let (m1, m2) = masters_of_a_replicas(&f.a, &f.ids);
    assert_ne!(m1, m2, "a1 and a2 follow different masters");
}

#[test]
fn no_migration_when_disallowed() {
    let mut f = five(false);
    f.b1.stop();
    wait_for(Duration::from_secs(30), "b1 failed", || {
        flags_of(&f.a.nodes(), &f.ids[4])
            .iter()
            .any(|x| x == "fail")
    });
    // Past the 5 s orphan delay with margin: both replicas still follow a.
    std::thread::sleep(Duration::from_millis(7000));
    for n in [&f.a, &f.a1, &f.a2] {
        let (m1, m2) = masters_of_a_replicas(n, &f.ids);
        assert_eq!(
            (m1.as_str(), m2.as_str()),
            (f.ids[0].as_str(), f.ids[0].as_str())
        );
    }
}
