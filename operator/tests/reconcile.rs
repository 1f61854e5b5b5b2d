//! Reconcile tests against an in-memory API: what the controller creates, patches and deletes
//! for create, pods coming up, scale out, scale in, spec changes, invalid specs and deletion.

mod support;

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::{json, Value};
use support::fake_api::FakeApi;
use tessera_operator::controller::{reconcile, Context, TopologyEngine};
use tessera_operator::crd::{Phase, RedisCluster};
use tessera_operator::metrics::Metrics;
use tessera_topology::{
    Desired, EngineOptions, PodEndpoint, ReplicaSync, ShardView, TopologyError, TopologyReport,
};

const NS: &str = "t";
const RC: &str = "/apis/tessera.rs/v1alpha1/namespaces/t/redisclusters";
const STS: &str = "/apis/apps/v1/namespaces/t/statefulsets";
const PDB: &str = "/apis/policy/v1/namespaces/t/poddisruptionbudgets";
const SVC: &str = "/api/v1/namespaces/t/services";
const CM: &str = "/api/v1/namespaces/t/configmaps";
const PODS: &str = "/api/v1/namespaces/t/pods";
const SECRETS: &str = "/api/v1/namespaces/t/secrets";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/t/events";

/// One recorded engine call: desired state, endpoints, password.
type EngineCall = (Desired, Vec<PodEndpoint>, Option<String>);

/// A topology engine that records its inputs and returns a scripted report.
#[derive(Default)]
struct FakeEngine {
    calls: Mutex<Vec<EngineCall>>,
    next: Mutex<Option<TopologyReport>>,
}

impl TopologyEngine for FakeEngine {
    fn reconcile<'a>(
        &'a self,
        desired: &'a Desired,
        pods: &'a [PodEndpoint],
        opts: &'a EngineOptions,
    ) -> BoxFuture<'a, Result<TopologyReport, TopologyError>> {
        self.calls
            .lock()
            .unwrap()
            .push((desired.clone(), pods.to_vec(), opts.password.clone()));
        let next = self.next.lock().unwrap().clone();
        Box::pin(async move { next.ok_or(TopologyError::NoneReachable) })
    }
}

/// The spec of a `shards` x `replicas` redis:7.0 cluster.
fn spec(shards: u32, replicas: u32) -> Value {
    json!({"shards": shards, "replicasPerShard": replicas, "image": "redis:7.0"})
}

/// A replica's link to its master, up and in sync.
fn in_sync(pod: &str) -> ReplicaSync {
    ReplicaSync {
        pod: pod.into(),
        in_sync: true,
        link_status: Some("up".into()),
        last_io_seconds_ago: Some(1),
        lag_bytes: Some(0),
        ..ReplicaSync::default()
    }
}

/// An even split of 16384 slots over `shards` shards, converged.
fn report(shards: u32, extra_empty: &[u32]) -> TopologyReport {
    let mut views = Vec::new();
    let per = 16384 / shards;
    for s in 0..shards {
        let start = s * per;
        let end = if s + 1 == shards {
            16383
        } else {
            start + per - 1
        };
        views.push(ShardView {
            shard: s,
            master_pod: Some(format!("demo-{s}-0")),
            master_id: Some(format!("{s:040}")),
            slot_ranges: vec![(start as u16, end as u16)],
            replicas: vec![format!("demo-{s}-1")],
            replica_sync: vec![in_sync(&format!("demo-{s}-1"))],
            master_agreed: true,
        });
    }
    for &s in extra_empty {
        views.push(ShardView {
            shard: s,
            master_pod: Some(format!("demo-{s}-0")),
            master_id: Some(format!("{s:040}")),
            slot_ranges: vec![],
            replicas: vec![],
            replica_sync: vec![],
            master_agreed: true,
        });
    }
    TopologyReport {
        converged: extra_empty.is_empty(),
        cluster_state: "ok".into(),
        slots_assigned: 16384,
        shards: views,
        progress: None,
        stuck: vec![],
        actions: vec![],
        failing_pods: vec![],
        repairs: vec![],
        handovers: vec![],
    }
}

struct Harness {
    api: FakeApi,
    engine: Arc<FakeEngine>,
    ctx: Arc<Context>,
}

impl Harness {
    fn new(spec: Value) -> Self {
        let api = FakeApi::new();
        api.insert(
            RC,
            json!({
                "apiVersion": "tessera.rs/v1alpha1", "kind": "RedisCluster",
                "metadata": {"name": "demo", "namespace": NS, "generation": 1},
                "spec": spec,
            }),
        );
        let engine = Arc::new(FakeEngine::default());
        let ctx = Arc::new(Context::new(
            api.client(),
            Arc::new(Metrics::new()),
            engine.clone(),
        ));
        Self { api, engine, ctx }
    }

    /// [`Harness::new`], reconciled once (children applied), with every pod running.
    async fn with_pods(spec: Value) -> Self {
        let h = Self::new(spec);
        h.reconcile().await;
        h.run_pods();
        h
    }

    /// A 1x0 cluster whose spec names the password Secret `pw`, which exists.
    fn with_password() -> Self {
        let h = Self::new(
            json!({"shards": 1, "replicasPerShard": 0, "image": "redis:7.0",
                   "auth": {"secretName": "pw"}}),
        );
        h.insert_password_secret();
        h
    }

    /// What the engine answers next (`None`: it reaches no node).
    fn engine_next(&self, report: Option<TopologyReport>) {
        *self.engine.next.lock().unwrap() = report;
    }

    /// The Secret `pw` a spec's `auth.secretName` names, password "s3cr3t".
    fn insert_password_secret(&self) {
        self.api.insert(
            SECRETS,
            json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "pw", "namespace": NS}, "data": {"password": "czNjcjN0"}}),
        );
    }

    fn rc(&self) -> RedisCluster {
        serde_json::from_value(self.api.get(RC, "demo").unwrap()).unwrap()
    }

    async fn reconcile(&self) -> RedisCluster {
        reconcile(Arc::new(self.rc()), self.ctx.clone())
            .await
            .expect("reconcile");
        self.rc()
    }

    fn set_spec(&self, f: impl FnOnce(&mut Value)) {
        let mut obj = self.api.get(RC, "demo").unwrap();
        f(&mut obj["spec"]);
        let generation = obj["metadata"]["generation"].as_i64().unwrap() + 1;
        obj["metadata"]["generation"] = json!(generation);
        self.api.insert(RC, obj);
    }

    /// Pods for every StatefulSet currently stored, Ready with a loopback IP.
    fn run_pods(&self) {
        for sts_name in self.api.names(STS) {
            let sts = self.api.get(STS, &sts_name).unwrap();
            let replicas = sts["spec"]["replicas"].as_i64().unwrap();
            let labels = sts["spec"]["template"]["metadata"]["labels"].clone();
            let annotations = sts["spec"]["template"]["metadata"]["annotations"].clone();
            let shard: u32 = labels["tessera.rs/shard"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            for ord in 0..replicas {
                let name = format!("{sts_name}-{ord}");
                if self.api.get(PODS, &name).is_some() {
                    continue;
                }
                self.api.insert(
                    PODS,
                    json!({
                        "apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": name, "namespace": NS, "labels": labels,
                                     "annotations": annotations},
                        "spec": {"containers": [{"name": "node"}]},
                        "status": {"podIP": format!("127.0.{}.{}", shard + 1, ord + 1),
                                   "conditions": [{"type": "Ready", "status": "True"}],
                                   "containerStatuses": [{"name": "node", "image": "redis:7.0",
                                       "imageID": "", "ready": true, "restartCount": 0,
                                       "started": true}]}
                    }),
                );
            }
        }
    }

    /// Every stored Event object.
    fn event_objects(&self) -> Vec<Value> {
        self.api
            .names(EVENTS)
            .into_iter()
            .filter_map(|n| self.api.get(EVENTS, &n))
            .collect()
    }

    fn events(&self) -> Vec<(String, String)> {
        self.event_objects()
            .into_iter()
            .map(|e| {
                (
                    e["type"].as_str().unwrap_or("").to_string(),
                    e["reason"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }
}

fn condition<'a>(
    rc: &'a RedisCluster,
    t: &str,
) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    rc.status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == t)
        .unwrap()
}

#[tokio::test]
async fn create_applies_every_child_and_never_claims_ready() {
    let h = Harness::new(spec(3, 1));
    let rc = h.reconcile().await;

    let calls = h.api.calls();
    let applies: Vec<_> = calls
        .iter()
        .filter(|c| c.method == "PATCH" && c.content_type.starts_with("application/apply-patch"))
        .collect();
    assert_eq!(
        applies.len(),
        1 + 3 + 3 + 3,
        "node-auth secret + configmap + 2 services + 3 sts + 3 pdbs"
    );
    for c in &applies {
        assert!(
            c.query.contains("fieldManager=tessera-operator"),
            "{}",
            c.query
        );
        assert!(c.query.contains("force=true"), "{}", c.query);
        let owner = &c.body.as_ref().unwrap()["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "RedisCluster");
        assert_eq!(owner["controller"], true);
        assert_eq!(owner["uid"], h.rc().metadata.uid.unwrap().as_str());
    }
    let mut sts = h.api.names(STS);
    sts.sort();
    assert_eq!(sts, ["demo-0", "demo-1", "demo-2"]);
    assert_eq!(h.api.names(PDB).len(), 3);
    let mut svcs = h.api.names(SVC);
    svcs.sort();
    assert_eq!(svcs, ["demo", "demo-nodes"]);
    assert_eq!(h.api.names(CM), ["demo-config"]);
    for name in ["demo-0", "demo-1", "demo-2"] {
        assert_eq!(h.api.get(STS, name).unwrap()["spec"]["replicas"], 2);
    }

    // No pods yet: the engine is not called and the status says Creating, not Ready.
    assert!(h.engine.calls.lock().unwrap().is_empty());
    let st = rc.status.clone().unwrap();
    assert_eq!(st.phase, Phase::Creating);
    assert_eq!(st.observed_generation, Some(1));
    assert_eq!(st.slots_assigned, 0);
    assert_eq!(st.ready_text, "0/6");
    assert_eq!(condition(&rc, "Ready").status, "False");
    assert_eq!(condition(&rc, "Progressing").status, "True");
    assert!(h.events().contains(&("Normal".into(), "Creating".into())));
}

#[tokio::test]
async fn pods_up_engine_called_and_ready_only_with_all_slots() {
    let h = Harness::with_pods(spec(3, 1)).await;

    // The engine answers but the cluster is not yet covering all slots: not Ready.
    let mut partial = report(3, &[]);
    partial.slots_assigned = 10000;
    partial.converged = false;
    partial.cluster_state = "fail".into();
    h.engine_next(Some(partial));
    let rc = h.reconcile().await;
    {
        let calls = h.engine.calls.lock().unwrap();
        let (desired, eps, password) = calls.last().unwrap();
        assert_eq!(
            desired,
            &Desired {
                shards: 3,
                replicas_per_shard: 1,
                paused: false
            }
        );
        assert_eq!(eps.len(), 6);
        assert_eq!(eps[0].pod, "demo-0-0");
        assert_eq!(eps[0].host, "127.0.1.1");
        assert_eq!((eps[5].shard, eps[5].ordinal, eps[5].port), (2, 1, 6379));
        assert!(password.is_none());
    }
    assert_eq!(rc.status.as_ref().unwrap().phase, Phase::Creating);
    assert_eq!(condition(&rc, "Ready").status, "False");

    h.engine_next(Some(report(3, &[])));
    let rc = h.reconcile().await;
    let st = rc.status.clone().unwrap();
    assert_eq!(st.phase, Phase::Ready);
    assert_eq!(st.slots_assigned, 16384);
    assert_eq!(st.ready_nodes, 6);
    assert_eq!(st.shards, 3);
    assert_eq!(st.shard_statuses[0].slot_ranges, ["0-5460"]);
    assert_eq!(st.shard_statuses[2].master_pod.as_deref(), Some("demo-2-0"));
    let ready = condition(&rc, "Ready").clone();
    assert_eq!(ready.status, "True");
    assert!(h.events().contains(&("Normal".into(), "Ready".into())));

    // A quiet reconcile changes nothing: no status patch, transition time kept.
    h.api.take_calls();
    let rc = h.reconcile().await;
    assert!(!h.api.calls().iter().any(|c| c.path.ends_with("/status")));
    assert_eq!(
        condition(&rc, "Ready").last_transition_time,
        ready.last_transition_time
    );
}

#[tokio::test]
async fn scale_out_then_scale_in_deletes_only_drained_shards() {
    let h = Harness::with_pods(spec(3, 1)).await;
    h.engine_next(Some(report(3, &[])));
    h.reconcile().await;

    // Scale out to 4: a fourth StatefulSet, phase Scaling while the engine still sees 3.
    h.set_spec(|s| s["shards"] = json!(4));
    let rc = h.reconcile().await;
    assert!(h.api.get(STS, "demo-3").is_some());
    assert!(h.api.get(PDB, "demo-3").is_some());
    assert_eq!(rc.status.as_ref().unwrap().phase, Phase::Scaling);
    assert_eq!(rc.status.as_ref().unwrap().observed_generation, Some(2));
    h.run_pods();
    h.engine_next(Some(report(4, &[])));
    let rc = h.reconcile().await;
    assert_eq!(rc.status.as_ref().unwrap().phase, Phase::Ready);
    assert_eq!(h.engine.calls.lock().unwrap().last().unwrap().1.len(), 8);

    // Scale in to 2: shards 2 and 3 still hold slots, so nothing is deleted.
    h.set_spec(|s| s["shards"] = json!(2));
    h.engine_next(Some(report(4, &[])));
    h.api.take_calls();
    let rc = h.reconcile().await;
    assert!(!h.api.calls().iter().any(|c| c.method == "DELETE"));
    assert!(h.api.get(STS, "demo-3").is_some());
    assert_ne!(rc.status.as_ref().unwrap().phase, Phase::Ready);
    assert_eq!(h.engine.calls.lock().unwrap().last().unwrap().0.shards, 2);

    // Drained: shards 0 and 1 serve every slot, 2 and 3 are empty masters → deleted.
    h.engine_next(Some(report(2, &[2, 3])));
    h.api.take_calls();
    h.reconcile().await;
    let deletes: Vec<String> = h
        .api
        .calls()
        .iter()
        .filter(|c| c.method == "DELETE")
        .map(|c| c.path.clone())
        .collect();
    assert_eq!(deletes.len(), 4, "{deletes:?}");
    assert!(h.api.get(STS, "demo-2").is_none() && h.api.get(STS, "demo-3").is_none());
    assert!(h.api.get(PDB, "demo-2").is_none() && h.api.get(PDB, "demo-3").is_none());
    assert!(h.api.get(STS, "demo-1").is_some());
    assert!(h
        .events()
        .contains(&("Normal".into(), "ShardsRemoved".into())));
}

#[tokio::test]
async fn spec_change_repatches_children() {
    let h = Harness::with_pods(spec(2, 1)).await;
    let rc = h.reconcile().await;
    assert!(rc
        .status
        .unwrap()
        .shard_statuses
        .iter()
        .all(|s| s.stale_config_pods.is_empty()));
    let before = h.api.get(STS, "demo-0").unwrap();
    h.set_spec(|s| {
        s["replicasPerShard"] = json!(2);
        s["config"] = json!({"maxmemory-policy": "allkeys-lru"});
        s["service"] = json!({"type": "LoadBalancer"});
    });
    let rc = h.reconcile().await;
    // OnDelete: running pods keep the old node.conf and the status says which.
    assert_eq!(
        rc.status.unwrap().shard_statuses[0].stale_config_pods,
        ["demo-0-0", "demo-0-1"]
    );
    let after = h.api.get(STS, "demo-0").unwrap();
    assert_eq!(after["spec"]["replicas"], 3);
    let hash = "/spec/template/metadata/annotations/tessera.rs~1config-hash";
    assert_ne!(
        before.pointer(hash),
        after.pointer(hash),
        "config hash follows node.conf"
    );
    let conf = h.api.get(CM, "demo-config").unwrap()["data"]["node.conf"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(conf.contains("maxmemory-policy allkeys-lru\n"), "{conf}");
    assert_eq!(
        h.api.get(SVC, "demo").unwrap()["spec"]["type"],
        "LoadBalancer"
    );
    assert_eq!(
        h.api.get(PDB, "demo-1").unwrap()["spec"]["maxUnavailable"],
        1
    );
}

#[tokio::test]
async fn auth_password_reaches_the_engine() {
    let h = Harness::with_password();
    h.reconcile().await;
    // Not formed yet: the pods start with this password, recorded as the nodes' own (the
    // operator logs in with it while a later password change is rolled out).
    let active = h
        .api
        .get(SECRETS, "demo-auth-active")
        .expect("active secret");
    assert_eq!(active["data"]["password"], "czNjcjN0", "{active}");
    let sts = h.api.get(STS, "demo-0").unwrap();
    let args = sts["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    // The password reaches the node through an included config file, never its command
    // line (/proc/<pid>/cmdline is world-readable).
    assert!(
        args.contains("--include") && !args.contains("--requirepass") && !args.contains("PASSWORD"),
        "{args}"
    );
    let node_auth: k8s_openapi::api::core::v1::Secret = serde_json::from_value(
        h.api
            .get(SECRETS, "demo-node-auth")
            .expect("node-auth secret"),
    )
    .expect("a Secret");
    let conf = node_auth
        .data
        .as_ref()
        .and_then(|d| d.get("auth.conf"))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .unwrap_or_default();
    assert!(
        conf.contains("requirepass") && conf.contains("s3cr3t"),
        "{conf}"
    );
    h.run_pods();
    h.engine_next(Some(report(1, &[])));
    let rc = h.reconcile().await;
    assert_eq!(
        h.engine.calls.lock().unwrap()[0].2.as_deref(),
        Some("s3cr3t")
    );
    assert_eq!(rc.status.unwrap().phase, Phase::Ready);
}

#[tokio::test]
async fn invalid_spec_applies_nothing_and_reports() {
    let h = Harness::new(json!({"shards": 3, "config": {"port": "7000", "maxmemory": "lots"}}));
    let rc = h.reconcile().await;
    assert!(h.api.names(STS).is_empty());
    assert!(h.api.names(CM).is_empty());
    let st = rc.status.clone().unwrap();
    assert_eq!(st.phase, Phase::Failed);
    let degraded = condition(&rc, "Degraded");
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "InvalidSpec")
    );
    assert!(
        degraded.message.contains("spec.config.port"),
        "{}",
        degraded.message
    );
    assert!(
        degraded.message.contains("maxmemory"),
        "{}",
        degraded.message
    );
    assert!(h
        .events()
        .contains(&("Warning".into(), "InvalidSpec".into())));
}

#[tokio::test]
async fn deleted_resource_is_left_to_the_garbage_collector() {
    let h = Harness::new(json!({"shards": 1}));
    let mut obj = h.api.get(RC, "demo").unwrap();
    obj["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    h.api.insert(RC, obj);
    h.reconcile().await;
    assert!(h.api.calls().iter().all(|c| c.method == "GET"));
    assert!(h.api.names(STS).is_empty());
}

#[tokio::test]
async fn engine_failure_after_formation_is_degraded() {
    let h = Harness::with_pods(spec(1, 1)).await;
    h.engine_next(Some(report(1, &[])));
    assert_eq!(h.reconcile().await.status.unwrap().phase, Phase::Ready);
    h.engine_next(None); // engine now errors
    let rc = h.reconcile().await;
    let st = rc.status.clone().unwrap();
    assert_eq!(st.phase, Phase::Degraded);
    assert_eq!(st.cluster_state, "unknown");
    assert_eq!(condition(&rc, "Ready").status, "False");
    assert_eq!(condition(&rc, "Degraded").reason, "TopologyError");
    assert!(h.events().contains(&("Warning".into(), "Degraded".into())));
}

#[tokio::test]
async fn finished_progress_is_removed_from_status() {
    let h = Harness::with_pods(spec(2, 0)).await;
    h.engine_next(Some(report(2, &[])));
    h.reconcile().await;
    let mut moving = report(2, &[]);
    moving.converged = false;
    moving.progress = Some(tessera_topology::Progress {
        slots_moved: 10,
        slots_to_move: 100,
    });
    h.engine_next(Some(moving));
    let rc = h.reconcile().await;
    assert_eq!(rc.status.as_ref().unwrap().phase, Phase::Rebalancing);
    assert!(h.api.get(RC, "demo").unwrap()["status"]["progress"].is_object());
    h.engine_next(Some(report(2, &[])));
    let rc = h.reconcile().await;
    assert_eq!(rc.status.as_ref().unwrap().phase, Phase::Ready);
    let stored = h.api.get(RC, "demo").unwrap();
    assert!(
        stored["status"].get("progress").is_none(),
        "{}",
        stored["status"]
    );
}

#[tokio::test]
async fn changed_problems_of_an_invalid_spec_raise_a_new_event() {
    let h = Harness::new(json!({"shards": 1, "config": {"port": "7000"}}));
    h.reconcile().await;
    // A repeat of the same Event is a series count on the first.
    let occurrences = |h: &Harness| -> Vec<i64> {
        h.api
            .names(EVENTS)
            .into_iter()
            .filter_map(|n| h.api.get(EVENTS, &n))
            .filter(|e| e["reason"] == "InvalidSpec")
            .map(|e| e["series"]["count"].as_i64().unwrap_or(1))
            .collect()
    };
    assert_eq!(occurrences(&h), [1]);
    h.reconcile().await;
    assert_eq!(occurrences(&h), [1], "same problems: no new event");
    h.set_spec(|s| s["config"] = json!({"dir": "/tmp"}));
    let rc = h.reconcile().await;
    assert_eq!(rc.status.as_ref().unwrap().phase, Phase::Failed);
    // New problems are a new Event with their own message (a series count on the earlier
    // Event would show the earlier problems).
    assert_eq!(occurrences(&h), [1, 1], "new problems: a new event");
    assert!(
        event_notes(&h)
            .iter()
            .any(|(r, note, _)| r == "InvalidSpec" && note.contains("spec.config.dir")),
        "{:?}",
        event_notes(&h)
    );
}

/// Paths of the server-side applies recorded since the last `take_calls`.
fn applied_paths(h: &Harness) -> Vec<String> {
    let mut v: Vec<String> = h
        .api
        .calls()
        .iter()
        .filter(|c| c.method == "PATCH" && c.content_type.starts_with("application/apply-patch"))
        .map(|c| c.path.clone())
        .collect();
    v.sort();
    v
}

/// The value of `family{label="value"}` in the /metrics text (0 when absent).
fn metric(h: &Harness, family: &str, label: &str, value: &str) -> u64 {
    let text = h.ctx.metrics.render();
    let prefix = format!("{family}{{{label}=\"{value}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// `tessera_operator_child_applies_total{result="..."}` from /metrics text.
fn applies_metric(h: &Harness, result: &str) -> u64 {
    metric(h, "tessera_operator_child_applies_total", "result", result)
}

#[tokio::test]
async fn unchanged_children_are_not_reapplied_but_drift_and_changes_are() {
    let h = Harness::new(spec(2, 1));
    h.reconcile().await;
    // The node-auth Secret (the operator's user), the ConfigMap, 2 Services, 2 StatefulSets
    // and 2 PDBs.
    assert_eq!(applied_paths(&h).len(), 1 + 1 + 2 + 2 + 2);
    assert_eq!(applies_metric(&h, "applied"), 8);

    // Nothing changed: no PATCH at all, only reads (and no status write either).
    h.api.take_calls();
    h.reconcile().await;
    let calls = h.api.calls();
    assert!(
        calls.iter().all(|c| c.method == "GET"),
        "{:?}",
        calls
            .iter()
            .filter(|c| c.method != "GET")
            .map(|c| (&c.method, &c.path))
            .collect::<Vec<_>>()
    );
    assert_eq!(applies_metric(&h, "skipped"), 8);
    assert_eq!(applies_metric(&h, "applied"), 8);

    // Drift: someone edits a field the operator owns (its hash annotation left intact).
    let mut sts = h.api.get(STS, "demo-1").unwrap();
    sts["spec"]["replicas"] = json!(5);
    h.api.insert(STS, sts);
    h.api.take_calls();
    h.reconcile().await;
    assert_eq!(applied_paths(&h), [format!("{STS}/demo-1")]);
    assert_eq!(h.api.get(STS, "demo-1").unwrap()["spec"]["replicas"], 2);

    // Someone else's label on a Service is not drift.
    let mut svc = h.api.get(SVC, "demo").unwrap();
    svc["metadata"]["labels"]["team"] = json!("cache");
    h.api.insert(SVC, svc);
    h.api.take_calls();
    h.reconcile().await;
    assert!(applied_paths(&h).is_empty(), "{:?}", applied_paths(&h));

    // A spec change re-applies exactly the objects it changes: node.conf and the pod
    // templates carrying its hash.
    h.set_spec(|s| s["config"] = json!({"maxmemory-policy": "allkeys-lru"}));
    h.api.take_calls();
    h.reconcile().await;
    assert_eq!(
        applied_paths(&h),
        [
            format!("{CM}/demo-config"),
            format!("{STS}/demo-0"),
            format!("{STS}/demo-1"),
        ]
    );
}

#[tokio::test]
async fn stale_replica_is_deleted_then_the_restart_waits_for_it() {
    let h = Harness::with_pods(spec(1, 1)).await;
    // The StatefulSet controller saw a new template; both pods still run the old one.
    let mut sts = h.api.get(STS, "demo-0").unwrap();
    sts["metadata"]["generation"] = json!(2);
    sts["status"] = json!({"observedGeneration": 2, "replicas": 2,
                           "updateRevision": "demo-0-new", "currentRevision": "demo-0-old"});
    h.api.insert(STS, sts);
    for name in ["demo-0-0", "demo-0-1"] {
        let mut pod = h.api.get(PODS, name).unwrap();
        pod["metadata"]["labels"]["controller-revision-hash"] = json!("demo-0-old");
        h.api.insert(PODS, pod);
    }
    let replica_uid = h.api.get(PODS, "demo-0-1").unwrap()["metadata"]["uid"].clone();
    h.engine_next(Some(report(1, &[])));
    h.api.take_calls();
    let rc = h.reconcile().await;

    // The replica goes first (the master demo-0-0 is failed over later), by uid.
    let deletes: Vec<_> = h
        .api
        .calls()
        .into_iter()
        .filter(|c| c.method == "DELETE")
        .collect();
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].path, format!("{PODS}/demo-0-1"));
    let body = deletes[0].body.clone().unwrap_or_default();
    assert_eq!(body["preconditions"]["uid"], replica_uid, "{body}");
    let st = rc.status.clone().unwrap();
    assert_eq!(st.phase, Phase::Rebalancing);
    let progressing = condition(&rc, "Progressing");
    assert_eq!(progressing.reason, "RollingRestart");
    assert!(
        progressing
            .message
            .contains("restarting replica pod demo-0-1"),
        "{}",
        progressing.message
    );
    assert_eq!(
        st.shard_statuses[0].stale_config_pods,
        ["demo-0-0", "demo-0-1"]
    );
    assert!(h
        .events()
        .contains(&("Normal".into(), "RollingRestart".into())));

    // The pod is gone and not back: nothing else is touched, the phase says why.
    h.api.take_calls();
    let rc = h.reconcile().await;
    assert!(!h.api.calls().iter().any(|c| c.method == "DELETE"));
    assert_eq!(rc.status.as_ref().unwrap().phase, Phase::Rebalancing);
    let msg = condition(&rc, "Progressing").message.clone();
    assert!(
        msg.contains("waiting") && msg.contains("pod 1 of shard 0"),
        "{msg}"
    );

    // Paused: no restart even with everything healthy again.
    h.run_pods();
    let mut pod = h.api.get(PODS, "demo-0-1").unwrap();
    pod["metadata"]["labels"]["controller-revision-hash"] = json!("demo-0-new");
    h.api.insert(PODS, pod);
    h.set_spec(|s| s["paused"] = json!(true));
    h.api.take_calls();
    h.reconcile().await;
    assert!(!h.api.calls().iter().any(|c| c.method == "DELETE"));
}

/// Each repair the engine did (a node reset, a replication link re-pointed) gets an Event of
/// its own, besides the Topology summary.
#[tokio::test]
async fn each_repair_gets_its_own_event() {
    let h = Harness::with_pods(spec(3, 1)).await;
    let mut r = report(3, &[]);
    r.converged = false;
    r.repairs = vec![
        "reset demo-2-0 (CLUSTER RESET HARD): its node is unknown to the cluster".into(),
        "repair replication of demo-0-1 to its master demo-0-0: replication is off".into(),
    ];
    r.actions = r.repairs.clone();
    h.engine_next(Some(r));
    h.reconcile().await;
    let events = h.events();
    assert!(
        events.contains(&("Normal".into(), "NodeReset".into())),
        "{events:?}"
    );
    assert!(
        events.contains(&("Normal".into(), "ReplicationRepaired".into())),
        "{events:?}"
    );
    assert!(
        events.contains(&("Normal".into(), "Topology".into())),
        "{events:?}"
    );
}

/// Lowering replicasPerShard 2 -> 1 while shard 0's master is its highest ordinal: shard 0's
/// StatefulSet keeps its 3 pods (shrinking would kill the master) until the engine reports
/// another master; shard 1's, led by ordinal 0, shrinks at once. The engine's failover gets
/// an Event of its own.
#[tokio::test]
async fn lowering_replicas_waits_for_the_master_to_move_off_a_removed_pod() {
    let h = Harness::with_pods(spec(2, 2)).await;
    let mut r = report(2, &[]);
    r.shards[0].master_pod = Some("demo-0-2".into());
    h.engine_next(Some(r.clone()));
    h.reconcile().await;
    assert_eq!(h.api.get(STS, "demo-0").unwrap()["spec"]["replicas"], 3);

    h.set_spec(|s| s["replicasPerShard"] = json!(1));
    r.converged = false;
    r.handovers =
        vec!["fail shard 0 over from demo-0-2 to demo-0-0 (CLUSTER FAILOVER): lowered".into()];
    r.actions = r.handovers.clone();
    h.engine_next(Some(r.clone()));
    h.reconcile().await;
    assert_eq!(
        h.engine
            .calls
            .lock()
            .unwrap()
            .last()
            .unwrap()
            .0
            .replicas_per_shard,
        1
    );
    assert_eq!(h.api.get(STS, "demo-0").unwrap()["spec"]["replicas"], 3);
    assert_eq!(h.api.get(STS, "demo-1").unwrap()["spec"]["replicas"], 2);
    let events = h.events();
    assert!(
        events.contains(&("Normal".into(), "ScaleInFailover".into())),
        "{events:?}"
    );

    // The failover is done: shard 0 is led by ordinal 0, so its StatefulSet shrinks too.
    r.shards[0].master_pod = Some("demo-0-0".into());
    r.handovers.clear();
    r.actions.clear();
    h.engine_next(Some(r));
    h.reconcile().await;
    assert_eq!(h.api.get(STS, "demo-0").unwrap()["spec"]["replicas"], 2);
    assert_eq!(h.api.get(STS, "demo-1").unwrap()["spec"]["replicas"], 2);
}

/// `tessera_operator_reconcile_errors_total{category="..."}` from /metrics text.
fn errors_metric(h: &Harness, category: &str) -> u64 {
    metric(
        h,
        "tessera_operator_reconcile_errors_total",
        "category",
        category,
    )
}

/// Failures are counted by category: an engine that reaches no node is node_unreachable (the
/// reconcile itself goes on and says so in status), a password Secret that does not exist is
/// validation (the user's to fix), not kube_api.
#[tokio::test]
async fn reconcile_errors_are_counted_by_category() {
    let h = Harness::with_pods(spec(1, 0)).await;
    h.engine_next(None); // the engine reaches no node
    h.reconcile().await;
    assert_eq!(errors_metric(&h, "node_unreachable"), 1);
    assert_eq!(errors_metric(&h, "validation"), 0);

    let h = Harness::new(
        json!({"shards": 1, "replicasPerShard": 0, "image": "redis:7.0",
               "auth": {"secretName": "missing"}}),
    );
    let res = reconcile(Arc::new(h.rc()), h.ctx.clone()).await;
    assert!(
        res.is_err(),
        "a missing password Secret fails the reconcile"
    );
    assert_eq!(errors_metric(&h, "validation"), 1);
    assert_eq!(errors_metric(&h, "kube_api"), 0);
    let text = h.ctx.metrics.render();
    assert!(
        text.contains("tessera_operator_reconciles_total{result=\"error\"} 1"),
        "{text}"
    );
}

/// Secret calls of the recorded requests: (method, name or "" for a collection call).
fn secret_calls(h: &Harness) -> Vec<(String, String)> {
    h.api
        .calls()
        .iter()
        .filter_map(|c| {
            let rest = c.path.strip_prefix(SECRETS)?;
            Some((c.method.clone(), rest.trim_start_matches('/').to_string()))
        })
        .collect()
}

/// The operator never lists or watches Secrets (RBAC grants no such verb): the password Secret
/// and its own records are read by name, and a cluster without `spec.auth` touches only the
/// operator's own Secrets (its user's password, created once, and the node-auth file).
#[tokio::test]
async fn secrets_are_only_read_by_name_and_only_with_auth() {
    let h = Harness::with_pods(spec(1, 0)).await;
    h.engine_next(Some(report(1, &[])));
    h.reconcile().await;
    let calls = secret_calls(&h);
    assert!(
        calls
            .iter()
            .all(|(m, n)| (m == "GET" && n == "demo-operator-admin")
                || (m == "POST" && n.is_empty())
                || (m == "PATCH" && n == "demo-node-auth")),
        "no spec.auth: only the operator's own Secrets: {calls:?}"
    );
    assert_eq!(
        calls.iter().filter(|(m, _)| m == "POST").count(),
        1,
        "{calls:?}"
    );
    let admin = h.api.get(SECRETS, "demo-operator-admin").expect("created");
    h.api.take_calls();
    h.reconcile().await;
    assert_eq!(
        secret_calls(&h),
        vec![("GET".to_string(), "demo-operator-admin".to_string())],
        "then only read"
    );
    assert_eq!(
        h.api.get(SECRETS, "demo-operator-admin").unwrap()["data"],
        admin["data"],
        "never regenerated"
    );

    let h = Harness::with_password();
    h.reconcile().await;
    h.run_pods();
    h.engine_next(Some(report(1, &[])));
    assert_eq!(h.reconcile().await.status.unwrap().phase, Phase::Ready);
    let calls = secret_calls(&h);
    assert!(
        calls
            .iter()
            .all(|(m, name)| !name.is_empty() || m == "POST"),
        "a Secret collection was listed: {calls:?}"
    );
    let read: std::collections::BTreeSet<&str> = calls
        .iter()
        .filter(|(m, _)| m == "GET")
        .map(|(_, n)| n.as_str())
        .collect();
    assert_eq!(
        read,
        std::collections::BTreeSet::from(["pw", "demo-auth-active", "demo-operator-admin"]),
        "{calls:?}"
    );

    // spec.auth removed: the node config loses requirepass at once; the record of the
    // password the nodes run with stays (and is read) until every node dropped the password.
    // No node runs here, so that switch is simulated by deleting the record; from then on
    // only the operator's own password is read.
    h.set_spec(|s| {
        s.as_object_mut().unwrap().remove("auth");
    });
    h.reconcile().await;
    assert!(!node_auth_conf(&h).contains("requirepass"));
    assert!(h.api.get(SECRETS, "demo-auth-active").is_some());
    h.api.remove(SECRETS, "demo-auth-active");
    h.reconcile().await;
    h.api.take_calls();
    h.reconcile().await;
    assert_eq!(
        secret_calls(&h),
        vec![("GET".to_string(), "demo-operator-admin".to_string())],
        "auth gone: only the operator's own password read"
    );
}

/// The status is written as a JSON merge patch: a progress whose moves are all done must
/// remove the stored `moves`, not leave the last ones behind.
#[test]
fn status_patch_clears_emptied_progress_moves() {
    let st = tessera_operator::crd::RedisClusterStatus {
        progress: Some(tessera_operator::crd::ReshardProgress {
            slots_moved: 10,
            slots_to_move: 20,
            summary: "10/20".into(),
            moves: vec![],
        }),
        ..Default::default()
    };
    let patch = tessera_operator::controller::status_patch(&st);
    assert_eq!(patch["progress"]["slotsMoved"], 10);
    assert!(
        patch["progress"]
            .as_object()
            .is_some_and(|p| p.get("moves") == Some(&Value::Null)),
        "{patch}"
    );
}

/// A finished CA change leaves no `caChangeSeenAt` behind (a stale one would end the next
/// CA change's reload window at once), nor pods no longer pending.
#[test]
fn status_patch_clears_a_finished_tls_change() {
    let st = tessera_operator::crd::RedisClusterStatus {
        tls: Some(tessera_operator::crd::TlsStatus {
            secret_name: "s".into(),
            certificate_fingerprint: Some("leaf".into()),
            ca_fingerprint: Some("ca".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let patch = tessera_operator::controller::status_patch(&st);
    assert_eq!(patch["tls"]["caFingerprint"], "ca");
    assert_eq!(patch["tls"]["caChangeSeenAt"], Value::Null, "{patch}");
    assert!(
        patch["tls"]
            .as_object()
            .is_some_and(|t| t.get("caChangeSeenAt") == Some(&Value::Null)
                && t.get("pendingPods") == Some(&Value::Null)),
        "{patch}"
    );
}

/// Events as (reason, note, related object's name).
fn event_notes(h: &Harness) -> Vec<(String, String, String)> {
    h.event_objects()
        .into_iter()
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or("").to_string(),
                e["note"].as_str().unwrap_or("").to_string(),
                e["related"]["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// A repair of each pod is an Event of its own that names the pod (message and related
/// object): kube's Recorder folds an Event into an earlier one of the same reason and object
/// for minutes (keeping the earlier message), so without the pod as related object the second
/// reset would only bump the first one's count.
#[tokio::test]
async fn repairs_of_different_pods_are_separate_events_naming_them() {
    let h = Harness::with_pods(spec(3, 1)).await;
    let mut r = report(3, &[]);
    r.converged = false;
    r.repairs = vec![
        "reset demo-2-0 (CLUSTER RESET HARD): its node is unknown to the cluster".into(),
        "repair replication of demo-0-1 to its master demo-0-0: replication is off".into(),
    ];
    r.handovers =
        vec!["fail shard 1 over from demo-1-1 to demo-1-0 (CLUSTER FAILOVER): lowered".into()];
    h.engine_next(Some(r.clone()));
    h.reconcile().await;
    // The next pass repairs other pods, for the same reasons.
    r.repairs = vec![
        "reset demo-1-1 (CLUSTER RESET HARD): it belongs to another shard".into(),
        "repair replication of demo-2-1 to its master demo-2-0: link down".into(),
    ];
    r.handovers =
        vec!["fail shard 2 over from demo-2-1 to demo-2-0 (CLUSTER FAILOVER): lowered".into()];
    h.engine_next(Some(r));
    h.reconcile().await;
    let events = event_notes(&h);
    for (reason, pod, text) in [
        ("NodeReset", "demo-2-0", "reset demo-2-0"),
        ("NodeReset", "demo-1-1", "reset demo-1-1"),
        ("ReplicationRepaired", "demo-0-1", "of demo-0-1"),
        ("ReplicationRepaired", "demo-2-1", "of demo-2-1"),
        ("ScaleInFailover", "demo-1-1", "shard 1"),
        ("ScaleInFailover", "demo-2-1", "shard 2"),
    ] {
        assert!(
            events
                .iter()
                .any(|(r, note, rel)| r == reason && rel == pod && note.contains(text)),
            "no {reason} Event about {pod}: {events:#?}"
        );
    }
}

/// Each pod the rolling restart replaces is an Event of its own naming it (related object and
/// message), not a repeat of the first pod's Event.
#[tokio::test]
async fn each_restarted_pod_gets_its_own_event() {
    let h = Harness::with_pods(spec(1, 2)).await;
    let mut sts = h.api.get(STS, "demo-0").unwrap();
    sts["metadata"]["generation"] = json!(2);
    sts["status"] = json!({"observedGeneration": 2, "replicas": 3,
                           "updateRevision": "demo-0-new", "currentRevision": "demo-0-old"});
    h.api.insert(STS, sts);
    let set_revision = |name: &str, rev: &str| {
        let mut pod = h.api.get(PODS, name).unwrap();
        pod["metadata"]["labels"]["controller-revision-hash"] = json!(rev);
        h.api.insert(PODS, pod);
    };
    for name in ["demo-0-0", "demo-0-1", "demo-0-2"] {
        set_revision(name, "demo-0-old");
    }
    let mut r = report(1, &[]);
    r.shards[0].replicas = vec!["demo-0-1".into(), "demo-0-2".into()];
    r.shards[0].replica_sync = vec![in_sync("demo-0-1"), in_sync("demo-0-2")];
    h.engine_next(Some(r));
    h.reconcile().await;
    let deleted = |h: &Harness| -> Vec<String> {
        h.api
            .take_calls()
            .into_iter()
            .filter(|c| c.method == "DELETE" && c.path.starts_with(PODS))
            .map(|c| {
                c.path
                    .trim_start_matches(PODS)
                    .trim_start_matches('/')
                    .to_string()
            })
            .collect()
    };
    let first = deleted(&h);
    assert_eq!(first.len(), 1, "{first:?}");
    // The StatefulSet brings the pod back at the new revision; the next replica goes.
    h.api.remove(PODS, &first[0]);
    h.run_pods();
    set_revision(&first[0], "demo-0-new");
    h.reconcile().await;
    let second = deleted(&h);
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(first, second);
    let events = event_notes(&h);
    for pod in [&first[0], &second[0]] {
        assert!(
            events.iter().any(|(r, note, rel)| r == "RollingRestart"
                && rel == pod
                && note.contains(pod.as_str())),
            "no RollingRestart Event about {pod}: {events:#?}"
        );
    }
}

/// The pod an Event is about is the first one its message names, as a whole name; the
/// topology engine's step descriptions name the repaired pod first.
#[test]
fn events_name_the_first_pod_of_a_step() {
    use tessera_operator::steps::first_pod_named;
    use tessera_topology::plan::{NodeRef, Step};
    let node = |pod: &str| NodeRef {
        id: format!("{pod}-id"),
        pod: pod.into(),
        host: "127.0.0.1".into(),
        port: 6379,
    };
    let pods = ["demo-0-0", "demo-0-1", "demo-1-1", "demo-1-10"];
    let reset = Step::Reset {
        node: node("demo-1-10"),
        flush: true,
        reason: "its node is unknown to the cluster".into(),
    };
    assert_eq!(first_pod_named(&reset.describe(), &pods), Some("demo-1-10"));
    let repair = Step::RepairReplication {
        node: node("demo-0-1"),
        master_id: "x".into(),
        master_pod: "demo-0-0".into(),
        reason: "replication is off".into(),
    };
    assert_eq!(first_pod_named(&repair.describe(), &pods), Some("demo-0-1"));
    let failover = Step::Failover {
        shard: 1,
        node: node("demo-1-1"),
        master: node("demo-1-10"),
        reason: "lowered".into(),
    };
    assert_eq!(
        first_pod_named(&failover.describe(), &pods),
        Some("demo-1-10"),
        "the master that hands over"
    );
    assert_eq!(first_pod_named("nothing here", &pods), None);
    assert_eq!(first_pod_named("reset demo-1-1x", &pods), None);
}

/// spec.storage.size grown: the claims are patched (StorageResized) and the StatefulSet is
/// recreated with its pods left running (StorageExpanded), each Event naming the StatefulSet.
#[tokio::test]
async fn storage_growth_publishes_resized_and_expanded_events() {
    const PVC: &str = "/api/v1/namespaces/t/persistentvolumeclaims";
    let h = Harness::new(
        json!({"shards": 1, "replicasPerShard": 0, "image": "redis:7.0",
               "storage": {"size": "1Gi"}}),
    );
    h.reconcile().await;
    h.run_pods();
    let sts = h.api.get(STS, "demo-0").unwrap();
    let mut claim = sts["spec"]["volumeClaimTemplates"][0].clone();
    claim["apiVersion"] = json!("v1");
    claim["kind"] = json!("PersistentVolumeClaim");
    claim["metadata"]["name"] = json!("data-demo-0-0");
    claim["metadata"]["namespace"] = json!(NS);
    claim["metadata"]["labels"]["tessera.rs/cluster"] = json!("demo");
    h.api.insert(PVC, claim);
    h.engine_next(Some(report(1, &[])));
    h.reconcile().await;

    h.set_spec(|s| s["storage"]["size"] = json!("2Gi"));
    h.reconcile().await;
    assert_eq!(
        h.api.get(PVC, "data-demo-0-0").unwrap()["spec"]["resources"]["requests"]["storage"],
        "2Gi"
    );
    let events = event_notes(&h);
    for (reason, text) in [
        ("StorageResized", "demo-0: 1 claim(s) requested at 2Gi"),
        (
            "StorageExpanded",
            "demo-0: volume claim template 1Gi -> 2Gi",
        ),
    ] {
        assert!(
            events
                .iter()
                .any(|(r, note, _)| r == reason && note.contains(text)),
            "no {reason} Event: {events:#?}"
        );
    }
}

/// A status written before `passwordRecorded` existed: pods that mount `<cluster>-node-auth`
/// still tell that the nodes run with a password, so removing spec.auth reads the record (to
/// switch the nodes off it) instead of stranding them on a password the operator forgot.
#[tokio::test]
async fn removed_auth_reads_the_record_when_pods_mount_the_password() {
    let h = Harness::with_password();
    h.reconcile().await;
    h.run_pods();
    h.engine_next(Some(report(1, &[])));
    h.reconcile().await;
    let mut obj = h.api.get(RC, "demo").unwrap();
    obj["status"]
        .as_object_mut()
        .unwrap()
        .remove("passwordRecorded");
    h.api.insert(RC, obj);
    h.set_spec(|s| {
        s.as_object_mut().unwrap().remove("auth");
    });
    h.api.take_calls();
    h.reconcile().await;
    let calls = secret_calls(&h);
    assert!(
        calls.contains(&("GET".into(), "demo-auth-active".into())),
        "{calls:?}"
    );
    assert!(!node_auth_conf(&h).contains("requirepass"));
}

/// The node-auth Secret's config file, as applied.
fn node_auth_conf(h: &Harness) -> String {
    let secret: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(h.api.get(SECRETS, "demo-node-auth").expect("node-auth")).unwrap();
    String::from_utf8(secret.data.unwrap()["auth.conf"].0.clone()).unwrap()
}

/// An Event whose message changed is a new Event: kube's Recorder would fold it into the
/// earlier one of the same reason (keeping the earlier message) for minutes. A repeat of the
/// same message still only counts up the earlier Event.
#[tokio::test]
async fn a_changed_message_is_a_new_event_and_a_repeat_is_not() {
    let h = Harness::with_pods(spec(2, 0)).await;
    let mut r = report(2, &[]);
    r.converged = false;
    r.actions = vec!["meet demo-1-0 (127.0.2.1:6379) from demo-0-0".into()];
    h.engine_next(Some(r.clone()));
    h.reconcile().await;
    h.reconcile().await; // the same message again
    r.actions = vec!["migrated 10 slots (0-9) from demo-0-0 to demo-1-0".into()];
    h.engine_next(Some(r));
    h.reconcile().await;
    let topology: Vec<String> = event_notes(&h)
        .into_iter()
        .filter(|(r, _, _)| r == "Topology")
        .map(|(_, note, _)| note)
        .collect();
    assert_eq!(topology.len(), 2, "{topology:?}");
    assert!(topology.iter().any(|n| n.starts_with("meet demo-1-0")));
    assert!(topology.iter().any(|n| n.starts_with("migrated 10 slots")));
}

/// The GETs of the recorded calls since the last `take_calls`, checked to come once each and
/// before any write: the observe step reads everything a reconcile needs up front, and the
/// steps after it work on that (and on the answers to the operator's own writes).
fn assert_reads_once_up_front(h: &Harness, what: &str) -> Vec<String> {
    let calls = h.api.take_calls();
    let first_write = calls
        .iter()
        .position(|c| c.method != "GET")
        .unwrap_or(calls.len());
    let late: Vec<&str> = calls[first_write..]
        .iter()
        .filter(|c| c.method == "GET")
        .map(|c| c.path.as_str())
        .collect();
    assert!(late.is_empty(), "{what}: read after a write: {late:?}");
    let reads: Vec<String> = calls[..first_write]
        .iter()
        .map(|c| c.path.clone())
        .collect();
    let unique: std::collections::BTreeSet<&String> = reads.iter().collect();
    assert_eq!(unique.len(), reads.len(), "{what}: read twice: {reads:?}");
    reads
}

#[tokio::test]
async fn a_reconcile_reads_each_object_once_before_writing() {
    let h = Harness::new(
        json!({"shards": 2, "replicasPerShard": 1, "image": "redis:7.0",
                                "auth": {"secretName": "pw"}, "storage": {"size": "1Gi"}}),
    );
    h.insert_password_secret();
    h.api.take_calls();
    let rc = h.reconcile().await;
    let reads = assert_reads_once_up_front(&h, "create");
    for path in [STS, PODS, CM, SVC, PDB] {
        assert!(
            reads.iter().any(|r| r == path),
            "{path} not read: {reads:?}"
        );
    }
    assert!(
        reads.iter().any(|r| r.ends_with("/persistentvolumeclaims")),
        "{reads:?}"
    );
    assert!(reads.contains(&format!("{SECRETS}/pw")), "{reads:?}");
    // The StatefulSets just created are what status counts (from the apply's answer).
    assert_eq!(rc.status.unwrap().phase, Phase::Creating);

    h.run_pods();
    h.engine_next(Some(report(2, &[])));
    assert_eq!(h.reconcile().await.status.unwrap().phase, Phase::Ready);
    assert_reads_once_up_front(&h, "formed");

    // A changed template: the StatefulSets are applied, their pods are stale right away.
    h.set_spec(|s| s["config"] = json!({"maxmemory-policy": "allkeys-lru"}));
    let rc = h.reconcile().await;
    assert_reads_once_up_front(&h, "spec change");
    assert_eq!(
        rc.status.unwrap().shard_statuses[0].stale_config_pods,
        ["demo-0-0", "demo-0-1"]
    );

    // Scale out: a new shard's StatefulSet appears in status in the same reconcile.
    h.set_spec(|s| s["shards"] = json!(3));
    let rc = h.reconcile().await;
    assert_reads_once_up_front(&h, "scale out");
    assert_eq!(rc.status.unwrap().shard_statuses.len(), 3);

    // An invalid spec reads only what status needs: no child, claim or Secret.
    h.set_spec(|s| s["shards"] = json!(0));
    h.reconcile().await;
    let reads = assert_reads_once_up_front(&h, "invalid");
    assert_eq!(reads, [STS.to_string(), PODS.to_string()]);
}
