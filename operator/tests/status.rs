//! StatusInput → status, from YAML fixtures in tests/fixtures/status/: each names the spec, the
//! StatefulSets and pods seen (shorthand), validation problems, the topology outcome, an
//! optional previous status, and what the status must say.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;
use serde_json::json;
use tessera_operator::crd::{RedisClusterSpec, RedisClusterStatus};
use tessera_operator::status::{compute, StatusInput, TopologyOutcome};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    spec: RedisClusterSpec,
    #[serde(default)]
    previous: Option<RedisClusterStatus>,
    stateful_sets: Vec<StsShort>,
    pods: Vec<PodShort>,
    #[serde(default)]
    problems: Vec<String>,
    topology: TopologyOutcome,
    expect: Expect,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StsShort {
    shard: u32,
    replicas: i32,
    #[serde(default)]
    config_hash: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodShort {
    shard: u32,
    ordinal: u32,
    ready: bool,
    #[serde(default)]
    config_hash: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Expect {
    phase: String,
    ready_nodes: Option<u32>,
    desired_nodes: Option<u32>,
    slots_assigned: Option<u32>,
    shards: Option<u32>,
    cluster_state: Option<String>,
    reason: Option<String>,
    progressing_reason: Option<String>,
    conditions: BTreeMap<String, String>,
    shard_slots: Option<BTreeMap<String, Vec<String>>>,
    progress: Option<(u32, u32)>,
    /// Moves still to do: (from shard, to shard, slots).
    progress_moves: Option<Vec<(u32, u32, u32)>>,
    /// true: status has no progress (none, or cleared once done).
    no_progress: Option<bool>,
    stale_config_pods: Option<BTreeMap<String, Vec<String>>>,
    replicas_in_sync: Option<BTreeMap<String, Vec<String>>>,
    /// shard -> the largest replica lag in bytes (null: unknown).
    replication_lag_bytes: Option<BTreeMap<String, Option<u64>>>,
    message_contains: Option<String>,
}

fn annotations(hash: &Option<String>) -> serde_json::Value {
    match hash {
        Some(h) => json!({"tessera.rs/config-hash": h}),
        None => json!({}),
    }
}

fn sts(s: &StsShort) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": format!("demo-{}", s.shard),
                     "labels": {"tessera.rs/cluster": "demo", "tessera.rs/shard": s.shard.to_string()}},
        "spec": {"replicas": s.replicas, "selector": {}, "serviceName": "demo-nodes",
                 "template": {"metadata": {"annotations": annotations(&s.config_hash)}}}
    }))
    .unwrap()
}

fn pod(p: &PodShort) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("demo-{}-{}", p.shard, p.ordinal),
                     "annotations": annotations(&p.config_hash),
                     "labels": {"tessera.rs/cluster": "demo", "tessera.rs/shard": p.shard.to_string()}},
        "status": {"podIP": format!("10.0.{}.{}", p.shard, p.ordinal),
                   "conditions": [{"type": "Ready", "status": if p.ready { "True" } else { "False" }}]}
    }))
    .unwrap()
}

/// YAML → JSON value → Case (serde_yaml 0.9 wants YAML tags for enums; JSON maps are nicer).
fn parse(text: &str) -> Result<Case, String> {
    let v: serde_json::Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    serde_json::from_value(v).map_err(|e| e.to_string())
}

fn run_case(path: &std::path::Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let case: Case = parse(&text).map_err(|e| format!("parse: {e}"))?;
    let stateful_sets: Vec<_> = case.stateful_sets.iter().map(sts).collect();
    let pods: Vec<_> = case.pods.iter().map(pod).collect();
    let st = compute(&StatusInput {
        name: "demo",
        generation: Some(7),
        spec: &case.spec,
        previous: case.previous.as_ref(),
        stateful_sets: &stateful_sets,
        pods: &pods,
        problems: &case.problems,
        topology: &case.topology,
        rollout: None,
        now: Timestamp::now(),
    });
    let e = &case.expect;
    let mut errs = Vec::new();
    let mut check = |what: &str, ok: bool, got: String| {
        if !ok {
            errs.push(format!("{what}: got {got}"));
        }
    };
    check(
        "phase",
        st.phase.as_str() == e.phase,
        st.phase.as_str().into(),
    );
    check(
        "observedGeneration",
        st.observed_generation == Some(7),
        format!("{:?}", st.observed_generation),
    );
    check(
        "selector",
        st.selector == "tessera.rs/cluster=demo",
        st.selector.clone(),
    );
    if let Some(v) = e.ready_nodes {
        check(
            "readyNodes",
            st.ready_nodes == v,
            st.ready_nodes.to_string(),
        );
    }
    if let Some(v) = e.desired_nodes {
        check(
            "desiredNodes",
            st.desired_nodes == v,
            st.desired_nodes.to_string(),
        );
    }
    if let Some(v) = e.slots_assigned {
        check(
            "slotsAssigned",
            st.slots_assigned == v,
            st.slots_assigned.to_string(),
        );
    }
    if let Some(v) = e.shards {
        check("shards", st.shards == v, st.shards.to_string());
    }
    if let Some(v) = &e.cluster_state {
        check(
            "clusterState",
            &st.cluster_state == v,
            st.cluster_state.clone(),
        );
    }
    for (t, want) in &e.conditions {
        let c = st.conditions.iter().find(|c| &c.type_ == t);
        check(
            &format!("condition {t}"),
            c.is_some_and(|c| &c.status == want),
            format!("{c:?}"),
        );
    }
    if let Some(r) = &e.reason {
        let ready = st
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.reason.clone());
        check(
            "Ready reason",
            ready.as_deref() == Some(r),
            format!("{ready:?}"),
        );
    }
    if let Some(r) = &e.progressing_reason {
        let p = st
            .conditions
            .iter()
            .find(|c| c.type_ == "Progressing")
            .map(|c| c.reason.clone());
        check(
            "Progressing reason",
            p.as_deref() == Some(r),
            format!("{p:?}"),
        );
    }
    if let Some(slots) = &e.shard_slots {
        for (shard, ranges) in slots {
            let s = st
                .shard_statuses
                .iter()
                .find(|s| s.shard.to_string() == *shard);
            check(
                &format!("shard {shard} slots"),
                s.is_some_and(|s| &s.slot_ranges == ranges),
                format!("{s:?}"),
            );
        }
    }
    if let Some((moved, total)) = e.progress {
        let p = st
            .progress
            .as_ref()
            .map(|p| (p.slots_moved, p.slots_to_move));
        check("progress", p == Some((moved, total)), format!("{p:?}"));
    }
    if let Some(want) = &e.progress_moves {
        let got: Option<Vec<(u32, u32, u32)>> = st.progress.as_ref().map(|p| {
            p.moves
                .iter()
                .map(|m| (m.from_shard, m.to_shard, m.slots))
                .collect()
        });
        check(
            "progress moves",
            got.as_ref() == Some(want),
            format!("{got:?}"),
        );
    }
    if e.no_progress == Some(true) {
        check(
            "no progress",
            st.progress.is_none(),
            format!("{:?}", st.progress),
        );
    }
    if let Some(stale) = &e.stale_config_pods {
        for (shard, pods) in stale {
            let s = st
                .shard_statuses
                .iter()
                .find(|s| s.shard.to_string() == *shard);
            check(
                &format!("shard {shard} stale pods"),
                s.is_some_and(|s| &s.stale_config_pods == pods),
                format!("{s:?}"),
            );
        }
    }
    if let Some(in_sync) = &e.replicas_in_sync {
        for (shard, pods) in in_sync {
            let s = st
                .shard_statuses
                .iter()
                .find(|s| s.shard.to_string() == *shard);
            check(
                &format!("shard {shard} replicas in sync"),
                s.is_some_and(|s| &s.replicas_in_sync == pods),
                format!("{s:?}"),
            );
        }
    }
    if let Some(lags) = &e.replication_lag_bytes {
        for (shard, lag) in lags {
            let s = st
                .shard_statuses
                .iter()
                .find(|s| s.shard.to_string() == *shard);
            check(
                &format!("shard {shard} replication lag"),
                s.is_some_and(|s| &s.replication_lag_bytes == lag),
                format!("{s:?}"),
            );
        }
    }
    if let Some(want) = &e.message_contains {
        let ready = st.conditions.iter().find(|c| c.type_ == "Ready");
        check(
            "Ready message",
            ready.is_some_and(|c| c.message.contains(want.as_str())),
            format!("{ready:?}"),
        );
    }
    // The invariant every case shares: Ready only with all slots served.
    let ready = st
        .conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    check(
        "Ready implies 16384 slots",
        !ready || st.slots_assigned == 16384,
        st.slots_assigned.to_string(),
    );
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("\n  "))
    }
}

#[test]
fn status_fixtures() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/status");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    assert!(paths.len() >= 8, "fixtures missing in {}", dir.display());
    let failures: Vec<String> = paths
        .iter()
        .filter_map(|p| {
            run_case(p)
                .err()
                .map(|e| format!("{}:\n  {e}", p.display()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// lastTransitionTime moves only when a condition's status flips.
#[test]
fn transition_time_only_changes_on_transition() {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/status/ready.yaml"),
    )
    .unwrap();
    let case: Case = parse(&text).unwrap();
    let stateful_sets: Vec<_> = case.stateful_sets.iter().map(sts).collect();
    let pods: Vec<_> = case.pods.iter().map(pod).collect();
    let observe =
        |previous: Option<&RedisClusterStatus>, topology: &TopologyOutcome, now: Timestamp| {
            compute(&StatusInput {
                name: "demo",
                generation: Some(1),
                spec: &case.spec,
                previous,
                stateful_sets: &stateful_sets,
                pods: &pods,
                problems: &[],
                topology,
                rollout: None,
                now,
            })
        };
    let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let t1: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
    let t2: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
    let first = observe(None, &case.topology, t0);
    let again = observe(Some(&first), &case.topology, t1);
    assert_eq!(
        first, again,
        "same observation, same status (no spurious patch)"
    );
    let err = TopologyOutcome::Error("boom".into());
    let broken = observe(Some(&again), &err, t2);
    let get = |s: &RedisClusterStatus, t: &str| {
        s.conditions.iter().find(|c| c.type_ == t).unwrap().clone()
    };
    assert_eq!(get(&broken, "Ready").status, "False");
    assert_eq!(get(&broken, "Ready").last_transition_time.0, t2);
    assert_eq!(get(&broken, "Degraded").last_transition_time.0, t2);
    assert_eq!(
        get(&broken, "Progressing").last_transition_time.0,
        t0,
        "Progressing stayed False"
    );
}
