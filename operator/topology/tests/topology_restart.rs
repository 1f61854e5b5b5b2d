//! Planner cases of issue 16's "every pod deleted at once" (3 shards x 1 replica, kept
//! volumes), from the CLUSTER NODES texts the restarted pods printed in a kube-in-a-box run
//! that took ~66 s to Ready instead of ~6 s.
//!
//! The pods come back one by one; the controller hands the engine only the pods that have an
//! IP. With shard 0's two pods up and the other four still without one, the engine saw the
//! other shards' replicas as nodes "no pod runs" and sent CLUSTER FORGET for them. A forgotten
//! node id is blacklisted for 60 s, and Redis 7's forgotten-node ping extension spreads the
//! FORGET to every node: when those pods came up seconds later with the same ids, the cluster
//! kept dropping them again until the blacklist expired ("waiting for gossip: 2 pod pairs do
//! not know each other yet" for a minute). A desired pod that is not observed yet may well be
//! the node in question, so nothing is forgotten until every desired pod is seen.

mod support;

use support::observed::observed;
use tessera_topology::plan::{plan_full, Planned};
use tessera_topology::snapshot::{PodState, Snapshot};
use tessera_topology::{Desired, Step};

/// Node ids of the run (shard 0 master/replica, shard 1, shard 2).
const M0: &str = "28fb4e06e72babcc2689cc098e200a0e3a17ef4e";
const R0: &str = "55516742b95aba527195a68cce2de0eda3003ab4";
const M1: &str = "7e33e53adb007bc1cc06cf13513522e5f679233d";
const R1: &str = "d399a8ac302428cd98492ccf02bbae29914e86fa";
const M2: &str = "5a0810ae6bc0dc5ce8d3948a82c4d7fb5cfcc716";
const R2: &str = "3e46b643631b22d919af9d9bc32f1336280164b7";

/// allpv-0-0 (new address 127.0.20.8) right after its restart and the engine's first MEET:
/// it knows its replica at its new address and the other shards at their old ones.
const NODES_0_0: &str = "\
28fb4e06e72babcc2689cc098e200a0e3a17ef4e 127.0.20.8:6379@16379 myself,master - 0 0 1 connected 0-5460
55516742b95aba527195a68cce2de0eda3003ab4 127.0.20.7:6379@16379 slave 28fb4e06e72babcc2689cc098e200a0e3a17ef4e 0 1796171475000 1 connected
7e33e53adb007bc1cc06cf13513522e5f679233d 127.0.20.4:6379@16379 master - 1796171474000 1796171474000 2 disconnected 5461-10921
d399a8ac302428cd98492ccf02bbae29914e86fa 127.0.20.5:6379@16379 slave 7e33e53adb007bc1cc06cf13513522e5f679233d 1796171474000 1796171474000 2 disconnected
5a0810ae6bc0dc5ce8d3948a82c4d7fb5cfcc716 127.0.20.6:6379@16379 master - 1796171474000 1796171474000 3 disconnected 10922-16383
3e46b643631b22d919af9d9bc32f1336280164b7 127.0.20.2:6379@16379 slave 5a0810ae6bc0dc5ce8d3948a82c4d7fb5cfcc716 1796171474000 1796171474000 3 disconnected
";

/// allpv-0-1 (new address 127.0.20.7), shard 0's replica, at the same instant.
const NODES_0_1: &str = "\
55516742b95aba527195a68cce2de0eda3003ab4 127.0.20.7:6379@16379 myself,slave 28fb4e06e72babcc2689cc098e200a0e3a17ef4e 0 0 1 connected
28fb4e06e72babcc2689cc098e200a0e3a17ef4e 127.0.20.8:6379@16379 master - 0 1796171475000 1 connected 0-5460
7e33e53adb007bc1cc06cf13513522e5f679233d 127.0.20.4:6379@16379 master - 1796171474000 1796171474000 2 disconnected 5461-10921
d399a8ac302428cd98492ccf02bbae29914e86fa 127.0.20.5:6379@16379 slave 7e33e53adb007bc1cc06cf13513522e5f679233d 1796171474000 1796171474000 2 disconnected
5a0810ae6bc0dc5ce8d3948a82c4d7fb5cfcc716 127.0.20.6:6379@16379 master - 1796171474000 1796171474000 3 disconnected 10922-16383
3e46b643631b22d919af9d9bc32f1336280164b7 127.0.20.2:6379@16379 slave 5a0810ae6bc0dc5ce8d3948a82c4d7fb5cfcc716 1796171474000 1796171474000 3 disconnected
";

fn pod(shard: u32, ordinal: u32, text: &str) -> PodState {
    PodState {
        cluster_state: "fail".into(),
        current_epoch: 3,
        dbsize: 100,
        ..observed(&format!("allpv-{shard}-{ordinal}"), shard, ordinal, text)
    }
}

const DESIRED: Desired = Desired {
    shards: 3,
    replicas_per_shard: 1,
    paused: false,
};

/// The plan says it waits, with a reason containing `why`.
fn assert_stuck_on(planned: &Planned, why: &str) {
    assert!(
        planned.stuck.iter().any(|s| s.contains(why)),
        "{:?}",
        planned.stuck
    );
}

/// Shard 0's pods are up; shards 1 and 2 have no pod with an IP yet. Their replicas' node ids
/// (slotless, so the old plan counted them as nodes no pod runs) must not be forgotten, and
/// the plan says why it waits.
#[test]
fn nodes_of_desired_pods_without_an_ip_yet_are_not_forgotten() {
    let snap = Snapshot {
        pods: vec![pod(0, 0, NODES_0_0), pod(0, 1, NODES_0_1)],
        ..Default::default()
    };
    let planned = plan_full(&DESIRED, &snap);
    let forgets: Vec<&String> = planned
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Forget { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    assert!(
        forgets.is_empty(),
        "forgot {forgets:?}: {:#?}",
        planned.steps
    );
    assert!(
        !planned
            .steps
            .iter()
            .any(|s| matches!(s, Step::Reset { .. })),
        "{:#?}",
        planned.steps
    );
    assert_stuck_on(&planned, "shard 1 has 0 of 2 pods");
}

/// Five of six pods observed, the missing one shard 2's replica: its id is still not
/// forgotten, but the pods that are there are met at their new addresses meanwhile.
#[test]
fn one_missing_replica_pod_keeps_its_node_and_the_rest_heals() {
    let others = [
        (M0, "127.0.20.8", "-", "0-5460", 1),
        (R0, "127.0.20.7", M0, "", 1),
        (M1, "127.0.20.11", "-", "5461-10921", 2),
        (R1, "127.0.20.10", M1, "", 2),
        (M2, "127.0.20.12", "-", "10922-16383", 3),
        // Shard 2's replica, not restarted yet: its old address.
        (R2, "127.0.20.2", M2, "", 3),
    ];
    let text = |me: &str| {
        let mut t = String::new();
        for (id, ip, master, slots, epoch) in others {
            let role = if master == "-" { "master" } else { "slave" };
            let flags = if id == me {
                format!("myself,{role}")
            } else {
                role.to_string()
            };
            let link = if id == R2 {
                "disconnected"
            } else {
                "connected"
            };
            let line = format!(
                "{id} {ip}:6379@16379 {flags} {master} 0 1796171475000 {epoch} {link} {slots}"
            );
            if id == me {
                t.insert_str(0, &format!("{}\n", line.trim_end()));
            } else {
                t.push_str(&format!("{}\n", line.trim_end()));
            }
        }
        t
    };
    let snap = Snapshot {
        pods: vec![
            pod(0, 0, &text(M0)),
            pod(0, 1, &text(R0)),
            pod(1, 0, &text(M1)),
            pod(1, 1, &text(R1)),
            pod(2, 0, &text(M2)),
        ],
        ..Default::default()
    };
    let planned = plan_full(&DESIRED, &snap);
    assert!(
        !planned
            .steps
            .iter()
            .any(|s| matches!(s, Step::Forget { id, .. } if id == R2)),
        "{:#?}",
        planned.steps
    );
    assert_stuck_on(&planned, "shard 2 has 1 of 2 pods");
}
