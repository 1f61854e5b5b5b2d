//! Report logic from snapshot fixtures (real CLUSTER NODES / INFO replication text of a
//! 1 shard × 1 replica cluster): converged only once every replica's link is up after its
//! first sync.

mod support;

use support::replication::fixture;

use tessera_topology::nodes::{parse_cluster_nodes, parse_info};
use tessera_topology::plan::plan_full;
use tessera_topology::report;
use tessera_topology::snapshot::{PodState, ReplicationInfo, Snapshot};
use tessera_topology::{Desired, TopologyReport};

/// Pod `demo-0-<ordinal>` from its CLUSTER NODES fixture and, when named, its INFO fixture.
fn pod(ordinal: u32, nodes: &str, info: Option<&str>) -> PodState {
    support::replication::pod(ordinal, nodes, info.map(support::replication::info))
}

/// The report of a pass over master + replica, the replica's INFO replication from `replica_info`.
fn report_with(replica_info: Option<&str>) -> TopologyReport {
    let snap = Snapshot {
        pods: vec![
            pod(0, "nodes-master.txt", Some("info-master.txt")),
            pod(1, "nodes-replica.txt", replica_info),
        ],
        ..Default::default()
    };
    let desired = Desired {
        shards: 1,
        replicas_per_shard: 1,
        paused: false,
    };
    let planned = plan_full(&desired, &snap);
    assert!(
        planned.steps.is_empty(),
        "nothing to do: {:?}",
        planned.steps
    );
    report::build(&desired, &snap, &planned)
}

#[test]
fn replica_link_up_is_converged() {
    let r = report_with(Some("info-replica-up.txt"));
    assert!(r.converged, "{r:?}");
    assert!(r.stuck.is_empty(), "{:?}", r.stuck);
    let v = &r.shards[0];
    assert_eq!(v.replicas, vec!["demo-0-1".to_string()]);
    assert_eq!(v.replicas_in_sync(), vec!["demo-0-1".to_string()]);
    let s = &v.replica_sync[0];
    assert_eq!(s.link_status.as_deref(), Some("up"));
    assert_eq!(s.last_io_seconds_ago, Some(1));
    assert_eq!(s.lag_bytes, Some(1204 - 1190));
}

#[test]
fn replica_link_down_is_not_converged() {
    let r = report_with(Some("info-replica-down.txt"));
    assert!(!r.converged, "{r:?}");
    assert_eq!(r.cluster_state, "ok");
    assert_eq!(r.slots_assigned, 16384);
    assert_eq!(
        r.stuck,
        vec!["waiting for 1 replicas to sync: demo-0-1".to_string()]
    );
    let v = &r.shards[0];
    assert_eq!(v.replicas, vec!["demo-0-1".to_string()]);
    assert!(v.replicas_in_sync().is_empty());
    assert_eq!(v.replica_sync[0].link_status.as_deref(), Some("down"));
}

#[test]
fn only_the_sync_line_counts_as_sync_wait() {
    assert!(report::is_sync_wait("waiting for 2 replicas to sync: a, b"));
    assert!(!report::is_sync_wait(
        "waiting for gossip: 3 pod pairs do not know each other yet"
    ));
    assert!(!report::is_sync_wait("pod demo-0-1 is unreachable"));
}

#[test]
fn replica_sync_in_progress_is_not_converged() {
    let r = report_with(Some("info-replica-syncing.txt"));
    assert!(!r.converged, "{r:?}");
    assert!(r.shards[0].replica_sync[0].sync_in_progress);
    assert!(r
        .stuck
        .iter()
        .any(|s| s.starts_with("waiting for 1 replicas")));
}

/// No INFO replication read (an older engine's snapshot, or the read failed): not in sync.
#[test]
fn replica_without_replication_info_is_not_converged() {
    let r = report_with(None);
    assert!(!r.converged, "{r:?}");
    assert_eq!(r.shards[0].replica_sync[0].link_status, None);
}

#[test]
fn silent_master_link_is_not_in_sync() {
    let mut info = parse_info(&fixture("info-replica-up.txt"));
    info.insert("master_last_io_seconds_ago".into(), "120".into());
    assert!(!ReplicationInfo::from_info(&info).replica_in_sync());
    info.insert("master_last_io_seconds_ago".into(), "3".into());
    assert!(ReplicationInfo::from_info(&info).replica_in_sync());
    // A master never counts as an in-sync replica.
    assert!(
        !ReplicationInfo::from_info(&parse_info(&fixture("info-master.txt"))).replica_in_sync()
    );
}

#[test]
fn an_unjoined_node_does_not_make_the_cluster_fail() {
    let desired = Desired {
        shards: 1,
        replicas_per_shard: 1,
        paused: false,
    };
    let master = pod(0, "nodes-master.txt", Some("info-master.txt"));
    // A pod just restarted on an empty volume: it knows only itself and says fail.
    let mut fresh = pod(1, "nodes-replica.txt", None);
    fresh.myself = parse_cluster_nodes(
        "0123456789abcdef0123456789abcdef01234567 127.0.0.1:20002@30002 myself,master - 0 0 0 connected\n",
    )
    .ok()
    .map(|r| r.myself);
    fresh.peers.clear();
    fresh.known_nodes = 1;
    fresh.cluster_state = "fail".into();
    let snap = Snapshot {
        pods: vec![master.clone(), fresh.clone()],
        ..Default::default()
    };
    let r = report::build(&desired, &snap, &plan_full(&desired, &snap));
    assert_eq!(r.cluster_state, "ok");
    assert!(!r.converged, "it still has to be met and replicated: {r:?}");

    // A joined node saying fail does count.
    fresh.known_nodes = 2;
    let snap = Snapshot {
        pods: vec![master, fresh],
        ..Default::default()
    };
    let r = report::build(&desired, &snap, &plan_full(&desired, &snap));
    assert_eq!(r.cluster_state, "fail");
}
