//! Replicas whose replication is not running toward their master, whatever the node image.
//!
//! A node the cluster lists as a replica of M (its own CLUSTER NODES line) must stream from
//! M's current address. After every pod is rescheduled at once some nodes never re-point
//! (they report role:master, or keep M's old address), and a failover of M would then lose
//! writes. CLUSTER REPLICATE M again re-points replication at M's address as the node knows
//! it (idempotent: it is already M's replica in the cluster), so the engine repairs it.

use super::super::snapshot::Snapshot;
use super::{node_ref, Step};

/// How long a link to a reachable, healthy master may stay down before it is re-pointed
/// (replicas reconnect by themselves within a second or two, and a full sync has its own
/// `master_sync_in_progress`).
pub const LINK_DOWN_GRACE_SECS: u64 = 20;

/// RepairReplication steps for the pods in `reach` (each has a node).
pub(super) fn repairs(snap: &Snapshot, reach: &[usize]) -> Vec<Step> {
    let mut out = Vec::new();
    for &p in reach {
        let pp = &snap.pods[p];
        let (Some(mid), Some(r)) = (pp.replica_of(), pp.replication.as_ref()) else {
            continue;
        };
        let Some(m) = snap.pod_of(mid).filter(|&m| reach.contains(&m)) else {
            continue; // a master we cannot read: failover and Meet handle it
        };
        let mp = &snap.pods[m];
        if !mp.is_master() {
            continue;
        }
        // Only once the replica knows its master at its current address (else the Meet step
        // comes first) and nobody suspects the master (else a failover may be under way).
        let knows_right = pp.view_of(mid).is_some_and(|v| {
            !v.handshake && !v.failing() && v.host == mp.endpoint.host && v.port == mp.endpoint.port
        });
        let suspected = reach
            .iter()
            .any(|&i| snap.pods[i].view_of(mid).is_some_and(|v| v.failing()));
        if !knows_right || suspected {
            continue;
        }
        let (mh, mport) = (&mp.endpoint.host, mp.endpoint.port);
        let why = if r.role == "master" {
            Some("replication is off (role:master)".to_string())
        } else if r.role != "slave" {
            None
        } else if let (Some(h), Some(port)) = (r.master_host.as_deref(), r.master_port) {
            if h != mh || port != mport {
                Some(format!(
                    "it replicates {h}:{port}, not its master's address {mh}:{mport}"
                ))
            } else {
                link_down(r)
            }
        } else {
            link_down(r)
        };
        let (Some(why), Some(node)) = (why, node_ref(snap, p)) else {
            continue;
        };
        out.push(Step::RepairReplication {
            node,
            master_id: mid.to_string(),
            master_pod: mp.endpoint.pod.clone(),
            reason: why,
        });
    }
    out
}

fn link_down(r: &super::super::snapshot::ReplicationInfo) -> Option<String> {
    let down = r.master_link_status.as_deref() == Some("down") && !r.master_sync_in_progress;
    match r.master_link_down_since_seconds {
        Some(s) if down && s >= LINK_DOWN_GRACE_SECS => {
            Some(format!("master_link_status:down for {s}s"))
        }
        _ => None,
    }
}
