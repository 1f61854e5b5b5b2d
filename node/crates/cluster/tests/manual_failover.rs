//! CLUSTER FAILOVER (coordinated through MFSTART, and TAKEOVER) between our master and our
//! replica, with redis-server masters voting.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

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

/// Tessera nodes a (slots 0-8191) and b (a's replica, as everyone sees), redis-server masters
/// r1 and r2 owning the other slots (voters), and the four node ids in that order.
fn a_with_replica_b() -> (TestNode, TestNode, ServerProc, ServerProc, Vec<String>) {
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
            && sees_all_connected(&r2.nodes(), &ids)
    });
    assert_eq!(a.cluster_str(&["ADDSLOTSRANGE", "0", "8191"]), "OK");
    r1.cmd(&["CLUSTER", "ADDSLOTSRANGE", "8192", "12000"])
        .expect("addslots");
    r2.cmd(&["CLUSTER", "ADDSLOTSRANGE", "12001", "16383"])
        .expect("addslots");
    // Every node must know every master's slots and config epoch before b is asked to fail
    // over. b counts only votes from masters it sees serving slots, so a vote from r1 or r2
    // that arrives before their ADDSLOTS reached b by gossip is dropped (with a quorum of 2
    // in a view of 2 or 3 masters the election then fails, never to be retried); and a
    // voter refuses b's claim if b's view of a's epoch predates a collision bump.
    let masters = [(0, "0-8191"), (2, "8192-12000"), (3, "12001-16383")];
    wait_for(
        Duration::from_secs(30),
        "every node sees the same masters",
        || {
            let views: Vec<_> = [a.nodes(), b.nodes(), r1.nodes(), r2.nodes()]
                .iter()
                .map(|t| parse_nodes(t))
                .collect();
            // Each master's epoch, if every view lists it as master of its slots with one
            // and the same epoch.
            let epochs: Option<BTreeSet<u64>> = masters
                .iter()
                .map(|&(m, slots)| {
                    let seen: BTreeSet<u64> = views
                        .iter()
                        .map(|v| {
                            v.get(&ids[m])
                                .filter(|n| {
                                    n.flags.iter().any(|f| f == "master") && n.slots == [slots]
                                })
                                .map(|n| n.epoch)
                        })
                        .collect::<Option<_>>()?;
                    (seen.len() == 1).then(|| seen.into_iter().next()).flatten()
                })
                .collect();
            // ... and the three epochs are distinct.
            epochs.is_some_and(|e| e.len() == masters.len())
        },
    );
    assert_eq!(b.cluster_str(&["REPLICATE", &ids[0]]), "OK");
    wait_for(
        Duration::from_secs(30),
        "everyone sees b as a's replica",
        || {
            [a.nodes(), r1.nodes(), r2.nodes()]
                .iter()
                .all(|t| is_replica_of(t, &ids[1], &ids[0]))
        },
    );
    (a, b, r1, r2, ids)
}

#[test]
fn manual_failover_and_takeover_swap_roles() {
    let (a, b, r1, r2, ids) = a_with_replica_b();
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

/// Three coordinated failovers back to back, each asked as soon as the asking node sees
/// itself as a replica (within 4 node timeouts of its last win). Each must hold an election
/// of its own under a new epoch and stick: a demoted master tells its peers at once, so its
/// new master does not ignore its MFSTART, and a node never reuses an earlier election's
/// votes (redis-server 7.0 does, and its claim under the old epoch is then undone).
#[test]
fn back_to_back_manual_failovers_each_win_their_own_election() {
    let (a, b, r1, r2, ids) = a_with_replica_b();
    let everywhere = |m: usize, r: usize| {
        [a.nodes(), b.nodes(), r1.nodes(), r2.nodes()]
            .iter()
            .all(|t| is_master_with(t, &ids[m], "0-8191") && is_replica_of(t, &ids[r], &ids[m]))
    };
    let epoch_of = |id: &str| -> u64 {
        parse_nodes(&r1.nodes())
            .get(id)
            .map(|n| n.epoch)
            .expect("node listed")
    };
    let nodes = [&a, &b];
    let mut last_epoch = epoch_of(&ids[0]);
    let mut first_ask = None;
    for (round, (new, old)) in [(1, 0), (0, 1), (1, 0)].into_iter().enumerate() {
        // As soon as the new master-to-be sees itself as a replica.
        wait_for(Duration::from_secs(30), "the replica sees its role", || {
            is_replica_of(&nodes[new].nodes(), &ids[new], &ids[old])
        });
        if round == 2 {
            // Voters refuse a vote about a master within 2 node timeouts of their last
            // one about it (round 0's, about a); b's round-0 election is still within
            // the 4 node timeouts during which a replica keeps an election's state.
            let since: Duration = first_ask.map(|t: Instant| t.elapsed()).unwrap_or_default();
            let wait = Duration::from_millis(2 * NT + 500);
            std::thread::sleep(wait.saturating_sub(since));
        }
        first_ask.get_or_insert_with(Instant::now);
        assert_eq!(nodes[new].cluster_str(&["FAILOVER"]), "OK");
        // Asked once: nothing here asks again, so an ignored MFSTART or a claim undone
        // never gets there.
        wait_or_show(
            Duration::from_secs(20),
            &format!("round {round}: node {new} master everywhere"),
            || everywhere(new, old),
            || {
                format!(
                    "a:\n{}\n{}\nb:\n{}\n{}\nr1:\n{}\nr1 log:\n{}\nr2 log:\n{}",
                    a.nodes(),
                    a.cluster_str(&["INFO"]),
                    b.nodes(),
                    b.cluster_str(&["INFO"]),
                    r1.nodes(),
                    r1.log(),
                    r2.log()
                )
            },
        );
        let epoch = epoch_of(&ids[new]);
        assert!(
            epoch > last_epoch,
            "round {round}: won under epoch {epoch}, not above {last_epoch}"
        );
        last_epoch = epoch;
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            everywhere(new, old),
            "round {round}: the new master did not stick"
        );
    }
}
