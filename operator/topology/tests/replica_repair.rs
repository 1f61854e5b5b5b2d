//! Issue 16 item "the operator repairs a replica whose replication link is down, on any node
//! image", and "replicasInSync compares offsets, not the link state alone": planner and report
//! from snapshot fixtures (CLUSTER NODES / INFO replication text of a 1 shard x 1 replica
//! cluster, master demo-0-0 at 127.0.0.1:20001, replica demo-0-1 at 127.0.0.1:20002).

mod support;

use std::collections::BTreeMap;

use support::replication::{info, pod};

use tessera_topology::plan::{plan_full, Planned, LINK_DOWN_GRACE_SECS};
use tessera_topology::report;
use tessera_topology::snapshot::{ReplicaLink, ReplicationInfo, Snapshot};
use tessera_topology::{Desired, Step, TopologyReport};

const MASTER_ID: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

const DESIRED: Desired = Desired {
    shards: 1,
    replicas_per_shard: 1,
    paused: false,
};

fn snap(master: BTreeMap<String, String>, replica: BTreeMap<String, String>) -> Snapshot {
    Snapshot {
        pods: vec![
            pod(0, "nodes-master.txt", Some(master)),
            pod(1, "nodes-replica.txt", Some(replica)),
        ],
        ..Default::default()
    }
}

fn pass(s: &Snapshot) -> (Planned, TopologyReport) {
    let planned = plan_full(&DESIRED, s);
    let r = report::build(&DESIRED, s, &planned);
    (planned, r)
}

/// The repair steps of a plan: (pod, master id, reason).
fn repairs(p: &Planned) -> Vec<(String, String, String)> {
    p.steps
        .iter()
        .filter_map(|s| match s {
            Step::RepairReplication {
                node,
                master_id,
                reason,
                ..
            } => Some((node.pod.clone(), master_id.clone(), reason.clone())),
            _ => None,
        })
        .collect()
}

/// The "every pod deleted at once" state: CLUSTER NODES lists demo-0-1 as the master's
/// replica, but its INFO says role:master and the master has no replica. The replica gets
/// CLUSTER REPLICATE again (an Event-worthy repair) and is not counted in sync.
#[test]
fn a_listed_replica_with_replication_off_is_repaired() {
    let s = snap(info("info-master-alone.txt"), info("info-replica-off.txt"));
    let (planned, r) = pass(&s);
    let rep = repairs(&planned);
    assert_eq!(rep.len(), 1, "{:#?}", planned.steps);
    assert_eq!(
        (rep[0].0.as_str(), rep[0].1.as_str()),
        ("demo-0-1", MASTER_ID)
    );
    assert!(rep[0].2.contains("role:master"), "{}", rep[0].2);
    assert!(planned.steps.iter().all(Step::is_repair));
    assert!(!r.converged);
    assert!(r.shards[0].replicas_in_sync().is_empty(), "{r:?}");
}

/// A replica still streaming from (or retrying) its master's OLD address is re-pointed.
#[test]
fn a_replica_pointed_at_an_old_address_is_repaired() {
    let mut replica = info("info-replica-link-lost.txt");
    replica.insert("master_host".into(), "127.0.0.9".into());
    replica.insert("master_link_down_since_seconds".into(), "1".into());
    let (planned, _) = pass(&snap(info("info-master-alone.txt"), replica));
    let rep = repairs(&planned);
    assert_eq!(rep.len(), 1, "{:#?}", planned.steps);
    assert!(
        rep[0].2.contains("127.0.0.9:20001") && rep[0].2.contains("127.0.0.1:20001"),
        "{}",
        rep[0].2
    );
}

/// A link down with the right address is left to reconnect by itself for the grace period,
/// and while a sync runs; past the grace it is re-pointed.
#[test]
fn a_link_down_past_the_grace_period_is_repaired_not_before() {
    let master = info("info-master-alone.txt");
    let mut replica = info("info-replica-link-lost.txt");
    replica.insert(
        "master_link_down_since_seconds".into(),
        (LINK_DOWN_GRACE_SECS - 1).to_string(),
    );
    let (planned, r) = pass(&snap(master.clone(), replica.clone()));
    assert!(repairs(&planned).is_empty(), "{:#?}", planned.steps);
    assert!(!r.converged);

    replica.insert(
        "master_link_down_since_seconds".into(),
        LINK_DOWN_GRACE_SECS.to_string(),
    );
    let (planned, _) = pass(&snap(master.clone(), replica.clone()));
    assert_eq!(repairs(&planned).len(), 1, "{:#?}", planned.steps);

    replica.insert("master_sync_in_progress".into(), "1".into());
    let (planned, _) = pass(&snap(master.clone(), replica.clone()));
    assert!(repairs(&planned).is_empty(), "a sync is running");

    // Never linked since pointed (-1): no time to judge by; the address is right.
    replica.insert("master_sync_in_progress".into(), "0".into());
    replica.insert("master_link_down_since_seconds".into(), "-1".into());
    let (planned, _) = pass(&snap(master, replica));
    assert!(repairs(&planned).is_empty(), "{:#?}", planned.steps);
}

/// No repair while the master is suspected (a failover may be under way), nor for a healthy
/// replica.
#[test]
fn no_repair_for_a_suspected_master_or_a_healthy_replica() {
    let mut s = snap(info("info-master-alone.txt"), info("info-replica-off.txt"));
    s.pods[1].peers[0].pfail = true;
    let (planned, _) = pass(&s);
    assert!(repairs(&planned).is_empty(), "{:#?}", planned.steps);

    let (planned, r) = pass(&snap(info("info-master.txt"), info("info-replica-up.txt")));
    assert!(planned.steps.is_empty(), "{:#?}", planned.steps);
    assert!(r.converged, "{r:?}");
}

/// In sync needs the master to list the replica online, and the offsets to agree within
/// MAX_IN_SYNC_LAG_BYTES; the lag is reported in bytes.
#[test]
fn in_sync_compares_offsets_and_the_masters_replica_list() {
    // Link up, but the master lists no replica.
    let (_, r) = pass(&snap(
        info("info-master-alone.txt"),
        info("info-replica-up.txt"),
    ));
    assert!(r.shards[0].replicas_in_sync().is_empty(), "{r:?}");
    assert!(!r.converged);

    // Link up and listed, but far behind.
    let mut master = info("info-master.txt");
    let far = 1190 + ReplicationInfo::MAX_IN_SYNC_LAG_BYTES + 1;
    master.insert("master_repl_offset".into(), far.to_string());
    let (_, r) = pass(&snap(master.clone(), info("info-replica-up.txt")));
    let v = &r.shards[0];
    assert!(v.replicas_in_sync().is_empty(), "{r:?}");
    assert_eq!(
        v.replica_sync[0].lag_bytes,
        Some(ReplicationInfo::MAX_IN_SYNC_LAG_BYTES + 1)
    );
    assert!(!r.converged);

    // Within the bound: in sync.
    master.insert("master_repl_offset".into(), (far - 1).to_string());
    let (_, r) = pass(&snap(master, info("info-replica-up.txt")));
    assert_eq!(r.shards[0].replicas_in_sync(), vec!["demo-0-1".to_string()]);
}

/// A master line names its replica by address when it can; a line with no pod's address (a
/// replica connecting from another source address) vouches for one unmatched replica only.
#[test]
fn master_replica_lines_match_by_address_then_by_count() {
    let master = info("info-master.txt");
    let m = ReplicationInfo::from_info(&master);
    assert_eq!(
        m.links,
        vec![ReplicaLink {
            ip: "127.0.0.1".into(),
            port: 20002,
            state: "online".into(),
            offset: 1190,
        }]
    );
    // The one line is for another address: still vouches for the one replica.
    let mut other = master.clone();
    other.insert(
        "slave0".into(),
        "ip=10.9.9.9,port=6379,state=online,offset=1190,lag=0".into(),
    );
    let (_, r) = pass(&snap(other.clone(), info("info-replica-up.txt")));
    assert_eq!(r.shards[0].replicas_in_sync(), vec!["demo-0-1".to_string()]);
    // ...but not while it is still being sent the RDB.
    other.insert(
        "slave0".into(),
        "ip=10.9.9.9,port=6379,state=send_bulk,offset=0,lag=0".into(),
    );
    let (_, r) = pass(&snap(other, info("info-replica-up.txt")));
    assert!(r.shards[0].replicas_in_sync().is_empty(), "{r:?}");
}
