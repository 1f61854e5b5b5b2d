//! Planner cases of issue 16, lowering and raising `replicasPerShard`, from observed
//! topologies: 2 shards of 3 pods (`rps-<shard>-<ordinal>`). A StatefulSet shrinks from its
//! highest ordinal, and roles float: when that pod is a shard's master, the plan fails the
//! shard over (coordinated) to an in-sync replica that stays, and the controller shrinks the
//! StatefulSet only once no removed pod is a master. Removed nodes are then forgotten; new
//! pods are met and attached as replicas.

mod support;

use support::observed::observed;
use tessera_topology::plan::plan_full;
use tessera_topology::report;
use tessera_topology::shrink::{shrink_blocked, Known};
use tessera_topology::snapshot::{PodState, ReplicationInfo, Snapshot};
use tessera_topology::{Desired, Step};

const OFFSET: u64 = 5000;

/// Node id of pod (shard, ordinal): 40 hex digits.
fn id(shard: u32, ord: u32) -> String {
    format!("{:x}{ord}{}", 10 + shard, "0".repeat(38))
}

fn host(shard: u32, ord: u32) -> String {
    format!("10.0.{shard}.{}", ord + 1)
}

/// The cluster: `roles[shard]` = ordinal of the shard's master; `pods[shard]` = ordinals
/// that run. Shard 0 owns 0-8191, shard 1 the rest.
struct Cluster {
    masters: [u32; 2],
    pods: [Vec<u32>; 2],
    /// Nodes every pod still knows though no pod runs them (removed by a shrink).
    gone: Vec<(u32, u32)>,
}

impl Cluster {
    fn line(&self, shard: u32, ord: u32, me: bool) -> String {
        let master = self.masters[shard as usize] == ord;
        let role = if master { "master" } else { "slave" };
        let flags = if me {
            format!("myself,{role}")
        } else {
            role.to_string()
        };
        let follows = if master {
            "-".to_string()
        } else {
            id(shard, self.masters[shard as usize])
        };
        let slots = match (master, shard) {
            (false, _) => "",
            (true, 0) => "0-8191",
            (true, _) => "8192-16383",
        };
        format!(
            "{} {}:6379@16379 {flags} {follows} 0 1700000000000 {} connected {slots}\n",
            id(shard, ord),
            host(shard, ord),
            shard + 1
        )
    }

    fn nodes_text(&self, shard: u32, ord: u32) -> String {
        let mut t = self.line(shard, ord, true);
        for s in 0..2u32 {
            let all = self.pods[s as usize]
                .iter()
                .copied()
                .chain(self.gone.iter().filter(|g| g.0 == s).map(|g| g.1));
            for o in all {
                if (s, o) != (shard, ord) {
                    t.push_str(&self.line(s, o, false));
                }
            }
        }
        t
    }

    /// Every running pod, replicas linked at `OFFSET` unless listed in `lagging`.
    fn snapshot(&self, lagging: &[(u32, u32)]) -> Snapshot {
        let mut pods = Vec::new();
        for s in 0..2u32 {
            for &o in &self.pods[s as usize] {
                let master = self.masters[s as usize] == o;
                let replication = if master {
                    ReplicationInfo {
                        role: "master".into(),
                        master_repl_offset: Some(OFFSET),
                        ..ReplicationInfo::default()
                    }
                } else {
                    let down = lagging.contains(&(s, o));
                    ReplicationInfo {
                        role: "slave".into(),
                        master_link_status: Some(if down { "down" } else { "up" }.into()),
                        master_sync_in_progress: false,
                        master_last_io_seconds_ago: Some(if down { -1 } else { 1 }),
                        slave_repl_offset: Some(if down { 0 } else { OFFSET }),
                        master_repl_offset: Some(OFFSET),
                        master_host: Some(host(s, self.masters[s as usize])),
                        master_port: Some(6379),
                        master_link_down_since_seconds: down.then_some(5),
                        links: Vec::new(),
                    }
                };
                pods.push(PodState {
                    cluster_state: "ok".into(),
                    current_epoch: 3,
                    dbsize: 100,
                    replication: Some(replication),
                    ..observed(&format!("rps-{s}-{o}"), s, o, &self.nodes_text(s, o))
                });
            }
        }
        Snapshot {
            pods,
            ..Default::default()
        }
    }
}

fn desired(replicas: u32) -> Desired {
    Desired {
        shards: 2,
        replicas_per_shard: replicas,
        paused: false,
    }
}

/// Shard 0's master is its highest ordinal (after an earlier failover); shard 1's is pod 0.
fn top_master() -> Cluster {
    Cluster {
        masters: [2, 0],
        pods: [vec![0, 1, 2], vec![0, 1, 2]],
        gone: Vec::new(),
    }
}

fn failovers(steps: &[Step]) -> Vec<(u32, String, String)> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Failover {
                shard,
                node,
                master,
                ..
            } => Some((*shard, node.pod.clone(), master.pod.clone())),
            _ => None,
        })
        .collect()
}

fn shrink_verdict(replicas: u32, snap: &Snapshot, shard: u32) -> Option<String> {
    let d = desired(replicas);
    let planned = plan_full(&d, snap);
    let r = report::build(&d, snap, &planned);
    shrink_blocked(Known::Report(&r), shard, replicas + 1)
}

/// The settled 2x2 cluster with shard 0 led by pod 2: nothing to do at replicasPerShard 2.
#[test]
fn settled_cluster_plans_nothing() {
    let snap = top_master().snapshot(&[]);
    let planned = plan_full(&desired(2), &snap);
    assert!(planned.steps.is_empty(), "{:#?}", planned.steps);
    assert!(planned.stuck.is_empty(), "{:?}", planned.stuck);
}

/// Lowering to 1: pod 2 of shard 0 is its master, so shard 0 fails over to its lowest
/// in-sync replica that stays, pod 0, and nothing else happens this pass. Shard 1 (led by
/// pod 0) needs nothing. The StatefulSet of shard 0 may not shrink yet; shard 1's may.
#[test]
fn removed_master_is_failed_over_to_a_replica_that_stays() {
    let snap = top_master().snapshot(&[]);
    let planned = plan_full(&desired(1), &snap);
    assert_eq!(
        failovers(&planned.steps),
        vec![(0, "rps-0-0".to_string(), "rps-0-2".to_string())],
        "{:#?}",
        planned.steps
    );
    assert_eq!(planned.steps.len(), 1, "{:#?}", planned.steps);
    assert!(planned.steps[0].describe().contains("CLUSTER FAILOVER"));
    assert!(shrink_verdict(1, &snap, 0).is_some_and(|w| w.contains("rps-0-2")));
    assert_eq!(shrink_verdict(1, &snap, 1), None);
}

/// Lowering to 0: only ordinal 0 stays, so it is the one that takes over.
#[test]
fn lowering_to_no_replica_fails_over_to_ordinal_zero() {
    let mut c = top_master();
    c.masters[0] = 1;
    let snap = c.snapshot(&[]);
    let planned = plan_full(&desired(0), &snap);
    assert_eq!(
        failovers(&planned.steps),
        vec![(0, "rps-0-0".to_string(), "rps-0-1".to_string())],
        "{:#?}",
        planned.steps
    );
    assert!(shrink_verdict(0, &snap, 0).is_some());
    assert_eq!(shrink_verdict(0, &snap, 1), None);
}

/// No replica that stays is in sync (pod 0's link is down, pod 1 trails): no failover (it
/// would lose writes or be refused); the plan says what it waits for and the StatefulSet
/// keeps its size. A lagging replica that goes anyway (pod 2 of shard 1) blocks nothing.
#[test]
fn no_in_sync_replica_that_stays_means_wait() {
    let snap = top_master().snapshot(&[(0, 0), (0, 1), (1, 2)]);
    let planned = plan_full(&desired(1), &snap);
    assert!(failovers(&planned.steps).is_empty(), "{:#?}", planned.steps);
    assert!(
        planned
            .stuck
            .iter()
            .any(|l| l.contains("rps-0-2") && l.contains("in-sync replica")),
        "{:?}",
        planned.stuck
    );
    assert!(shrink_verdict(1, &snap, 0).is_some());
    assert_eq!(shrink_verdict(1, &snap, 1), None);
}

/// Only pod 1 is in sync: it takes over, not the lagging pod 0.
#[test]
fn the_failover_target_is_in_sync() {
    let snap = top_master().snapshot(&[(0, 0)]);
    let planned = plan_full(&desired(1), &snap);
    assert_eq!(
        failovers(&planned.steps),
        vec![(0, "rps-0-1".to_string(), "rps-0-2".to_string())],
        "{:#?}",
        planned.steps
    );
}

/// After the failover pod 2 is a replica: nothing more to plan, and both StatefulSets may
/// shrink (a removed replica costs nothing).
#[test]
fn after_the_failover_the_shrink_may_go() {
    let mut c = top_master();
    c.masters[0] = 0;
    let snap = c.snapshot(&[]);
    let planned = plan_full(&desired(1), &snap);
    assert!(planned.steps.is_empty(), "{:#?}", planned.steps);
    assert_eq!(shrink_verdict(1, &snap, 0), None);
    assert_eq!(shrink_verdict(1, &snap, 1), None);
}

/// After the shrink: pods 2 are gone but every node still knows them. Both are forgotten
/// on every pod, and no failover is planned.
#[test]
fn removed_nodes_are_forgotten() {
    let c = Cluster {
        masters: [0, 0],
        pods: [vec![0, 1], vec![0, 1]],
        gone: vec![(0, 2), (1, 2)],
    };
    let snap = c.snapshot(&[]);
    let planned = plan_full(&desired(1), &snap);
    let mut forgotten: Vec<(String, usize)> = planned
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Forget { id, on } => Some((id.clone(), on.len())),
            _ => None,
        })
        .collect();
    forgotten.sort();
    assert_eq!(
        forgotten,
        vec![(id(0, 2), 4), (id(1, 2), 4)],
        "{:#?}",
        planned.steps
    );
    assert!(failovers(&planned.steps).is_empty());
}

/// Raising back to 2: the new pods 2 start empty, knowing nobody. They are met; once the
/// cluster knows them they become replicas of their shard's master.
#[test]
fn raised_replicas_are_met_then_attached() {
    let c = Cluster {
        masters: [0, 0],
        pods: [vec![0, 1], vec![0, 1]],
        gone: Vec::new(),
    };
    let mut snap = c.snapshot(&[]);
    for s in 0..2u32 {
        let fresh = format!("{:x}f{}", 10 + s, "0".repeat(38));
        let text = format!(
            "{fresh} {}:6379@16379 myself,master - 0 0 0 connected\n",
            host(s, 2)
        );
        snap.pods.push(PodState {
            cluster_state: "fail".into(),
            replication: Some(ReplicationInfo {
                role: "master".into(),
                master_repl_offset: Some(0),
                ..ReplicationInfo::default()
            }),
            ..observed(&format!("rps-{s}-2"), s, 2, &text)
        });
    }
    let planned = plan_full(&desired(2), &snap);
    let met: Vec<String> = planned
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Meet { target, .. } => Some(target.pod.clone()),
            _ => None,
        })
        .collect();
    assert!(
        met.contains(&"rps-0-2".to_string()) && met.contains(&"rps-1-2".to_string()),
        "{:#?}",
        planned.steps
    );
    assert!(failovers(&planned.steps).is_empty());

    // Known to everyone and knowing everyone: attached as replicas.
    let c = Cluster {
        masters: [0, 0],
        pods: [vec![0, 1, 2], vec![0, 1, 2]],
        gone: Vec::new(),
    };
    let mut snap = c.snapshot(&[]);
    for p in &mut snap.pods {
        if p.endpoint.ordinal == 2 {
            if let Some(m) = p.myself.as_mut() {
                m.master = true;
                m.replica_of = None;
            }
            p.replication = Some(ReplicationInfo {
                role: "master".into(),
                ..ReplicationInfo::default()
            });
        }
    }
    let planned = plan_full(&desired(2), &snap);
    let mut attached: Vec<(String, String)> = planned
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Replicate { node, master_id } => Some((node.pod.clone(), master_id.clone())),
            _ => None,
        })
        .collect();
    attached.sort();
    assert_eq!(
        attached,
        vec![
            ("rps-0-2".to_string(), id(0, 0)),
            ("rps-1-2".to_string(), id(1, 0))
        ],
        "{:#?}",
        planned.steps
    );
}
