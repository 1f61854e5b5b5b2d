//! Planner tests: which pod goes next, and every reason to wait.

use serde_json::json;

use super::*;
use tessera_topology::{ReplicaSync, ShardView};

pub(crate) const NEW: &str = "rev-new";
pub(crate) const OLD: &str = "rev-old";

pub(crate) fn spec(shards: u32, replicas: u32) -> RedisClusterSpec {
    serde_json::from_value(json!({"shards": shards, "replicasPerShard": replicas})).expect("spec")
}

pub(crate) fn sts(shard: u32) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": format!("demo-{shard}"), "generation": 2,
                     "labels": {"tessera.rs/shard": shard.to_string()}},
        "spec": {"replicas": 2, "selector": {}, "template": {}},
        "status": {"observedGeneration": 2, "replicas": 2, "updateRevision": NEW,
                   "currentRevision": OLD},
    }))
    .expect("sts")
}

pub(crate) fn pod(shard: u32, ordinal: u32, rev: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("demo-{shard}-{ordinal}"), "uid": format!("uid-{shard}-{ordinal}-{rev}"),
                     "labels": {"tessera.rs/shard": shard.to_string(), REVISION_LABEL: rev}},
        "status": {"podIP": format!("127.0.1.{}", shard * 10 + ordinal + 1),
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .expect("pod")
}

/// A converged report; shard `s`'s master is the pod at `masters[s]`.
pub(crate) fn report(masters: &[u32], replicas: u32) -> TopologyReport {
    let shards = masters
        .iter()
        .enumerate()
        .map(|(s, &m)| {
            let others: Vec<String> = (0..=replicas)
                .filter(|o| *o != m)
                .map(|o| format!("demo-{s}-{o}"))
                .collect();
            ShardView {
                shard: s as u32,
                master_pod: Some(format!("demo-{s}-{m}")),
                master_id: Some(format!("{s:040}")),
                slot_ranges: vec![(0, 1)],
                replica_sync: others
                    .iter()
                    .map(|p| ReplicaSync {
                        pod: p.clone(),
                        in_sync: true,
                        ..ReplicaSync::default()
                    })
                    .collect(),
                replicas: others,
                master_agreed: true,
            }
        })
        .collect();
    TopologyReport {
        converged: true,
        cluster_state: "ok".into(),
        slots_assigned: 16384,
        shards,
        ..TopologyReport::default()
    }
}

fn run(
    spec: &RedisClusterSpec,
    sets: &[StatefulSet],
    pods: &[Pod],
    report: &TopologyReport,
) -> RestartPlan {
    plan(&RestartInput {
        spec,
        stateful_sets: sets,
        pods,
        report: Some(report),
    })
}

fn deleted(next: &Next) -> &str {
    match next {
        Next::Act(RestartAction::DeleteReplica(p)) => &p.name,
        other => panic!("expected a replica delete, got {other:?}"),
    }
}

#[test]
fn nothing_stale_nothing_to_do() {
    let s = spec(2, 1);
    let sets = [sts(0), sts(1)];
    let pods: Vec<Pod> = (0..2)
        .flat_map(|sh| (0..2).map(move |o| pod(sh, o, NEW)))
        .collect();
    let p = run(&s, &sets, &pods, &report(&[0, 0], 1));
    assert_eq!(p.next, Next::Nothing);
    assert!(p.stale.is_empty());
    assert_eq!((p.updated, p.total), (4, 4));
}

#[test]
fn replicas_first_then_failover_then_old_master() {
    let s = spec(2, 1);
    let sets = [sts(0), sts(1)];
    let mut pods: Vec<Pod> = (0..2)
        .flat_map(|sh| (0..2).map(move |o| pod(sh, o, OLD)))
        .collect();
    let p = run(&s, &sets, &pods, &report(&[0, 0], 1));
    assert_eq!(p.stale.len(), 4);
    assert_eq!(deleted(&p.next), "demo-0-1", "shard 0's replica first");

    // The replica came back at the new revision: fail the master over to it.
    pods[1] = pod(0, 1, NEW);
    let p = run(&s, &sets, &pods, &report(&[0, 0], 1));
    match &p.next {
        Next::Act(RestartAction::Failover {
            shard,
            master_pod,
            replica,
            host,
            ..
        }) => {
            assert_eq!((*shard, master_pod.as_str()), (0, "demo-0-0"));
            assert_eq!(replica.name, "demo-0-1");
            assert_eq!(host, "127.0.1.2");
        }
        other => panic!("expected a failover, got {other:?}"),
    }

    // Failed over: the old master is now a stale replica.
    let p = run(&s, &sets, &pods, &report(&[1, 0], 1));
    assert_eq!(deleted(&p.next), "demo-0-0");
    match &p.next {
        Next::Act(RestartAction::DeleteReplica(r)) => {
            assert_eq!(r.uid.as_deref(), Some("uid-0-0-rev-old"))
        }
        _ => unreachable!(),
    }

    // Shard 0 done: shard 1 starts with its replica.
    pods[0] = pod(0, 0, NEW);
    let p = run(&s, &sets, &pods, &report(&[1, 0], 1));
    assert_eq!(deleted(&p.next), "demo-1-1");
    assert_eq!((p.updated, p.total), (2, 4));
}

#[test]
fn waits_while_anything_is_unhealthy() {
    let s = spec(1, 1);
    let sets = [sts(0)];
    let pods = vec![pod(0, 0, OLD), pod(0, 1, OLD)];
    let wait = |p: RestartPlan, what: &str| match p.next {
        Next::Wait(why) => assert!(why.contains(what), "{why}"),
        other => panic!("expected a wait on {what}, got {other:?}"),
    };

    let mut r = report(&[0], 1);
    r.converged = false;
    r.stuck = vec!["waiting for 1 replicas to sync: demo-0-1".into()];
    wait(run(&s, &sets, &pods, &r), "sync");

    let mut r = report(&[0], 1);
    r.cluster_state = "fail".into();
    wait(run(&s, &sets, &pods, &r), "cluster_state");

    let mut r = report(&[0], 1);
    r.failing_pods = vec!["demo-0-1".into()];
    wait(run(&s, &sets, &pods, &r), "PFAIL");

    let mut r = report(&[0], 1);
    r.shards[0].master_agreed = false;
    wait(run(&s, &sets, &pods, &r), "sees");

    // A pod that is not Ready, or missing, or terminating.
    let mut unready = pods.clone();
    unready[1].status.as_mut().unwrap().conditions = None;
    wait(run(&s, &sets, &unready, &report(&[0], 1)), "not Ready");
    wait(
        run(&s, &sets, &pods[..1], &report(&[0], 1)),
        "pod 1 of shard 0",
    );
    let mut terminating = pods.clone();
    terminating[1].metadata.deletion_timestamp =
        serde_json::from_value(json!("2026-01-01T00:00:00Z")).ok();
    wait(
        run(&s, &sets, &terminating, &report(&[0], 1)),
        "terminating",
    );

    // The StatefulSet controller has not caught up with a new generation.
    let mut behind = sts(0);
    behind.metadata.generation = Some(3);
    let p = run(&s, &[behind], &pods, &report(&[0], 1));
    assert!(
        p.stale.is_empty(),
        "revision unknown: nothing is called stale"
    );
    wait(p, "not observed");

    // Paused: blocked, not waiting.
    let mut paused = spec(1, 1);
    paused.paused = true;
    assert!(matches!(
        run(&paused, &sets, &pods, &report(&[0], 1)).next,
        Next::Blocked(_)
    ));
}

#[test]
fn failover_only_to_an_in_sync_replica() {
    let s = spec(1, 2);
    let sets = [sts(0)];
    let pods = vec![pod(0, 0, OLD), pod(0, 1, NEW), pod(0, 2, NEW)];
    let mut r = report(&[0], 2);
    r.shards[0].replica_sync[0].in_sync = false;
    match run(&s, &sets, &pods, &r).next {
        Next::Act(RestartAction::Failover { replica, .. }) => assert_eq!(replica.name, "demo-0-2"),
        other => panic!("{other:?}"),
    }
    r.shards[0].replica_sync[1].in_sync = false;
    assert!(matches!(run(&s, &sets, &pods, &r).next, Next::Wait(_)));
}

#[test]
fn lone_master_needs_storage() {
    let mut s = spec(1, 0);
    let sets = [sts(0)];
    let pods = vec![pod(0, 0, OLD)];
    let r = report(&[0], 0);
    match run(&s, &sets, &pods, &r).next {
        Next::Blocked(why) => assert!(why.contains("persistent storage"), "{why}"),
        other => panic!("{other:?}"),
    }
    s.storage = serde_json::from_value(json!({"size": "1Gi"})).ok();
    match run(&s, &sets, &pods, &r).next {
        Next::Act(RestartAction::DeleteLoneMaster(p)) => assert_eq!(p.name, "demo-0-0"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rollout_view_spans_the_last_rejoin() {
    let s = spec(1, 1);
    let sets = [sts(0)];
    let pods = vec![pod(0, 0, NEW), pod(0, 1, NEW)];
    let p = run(&s, &sets, &pods, &report(&[1], 1));
    assert_eq!(p.next, Next::Nothing);
    assert!(rollout_view(&p, None, false).is_none());
    let previous: RedisClusterStatus = serde_json::from_value(json!({
        "phase": "Rebalancing", "shards": 1, "selector": "", "readyNodes": 1,
        "desiredNodes": 2, "readyText": "1/2", "slotsAssigned": 16384, "clusterState": "ok",
        "conditions": [{"type": "Progressing", "status": "True", "reason": REASON,
                        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }))
    .expect("status");
    assert!(rollout_view(&p, Some(&previous), false).is_some());
    assert!(rollout_view(&p, Some(&previous), true).is_none());
}
