//! The controller with the real topology engine and real redis-server processes: a tiny
//! "kubelet" in this test starts each pod of the applied StatefulSets exactly as the pod spec
//! says (command, args with $(POD_IP), node.conf from the applied ConfigMap), on its own
//! loopback address, and marks it Ready once its TCP probe port answers. Reconciles then form
//! the cluster, the status turns Ready with all 16384 slots, and scale-in drains a shard
//! before its StatefulSet is deleted.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::fake_api::FakeApi;
use tessera_operator::controller::{reconcile, Context, RealEngine};
use tessera_operator::crd::{Phase, RedisCluster};
use tessera_operator::metrics::Metrics;
use tessera_testkit::{Launch, Server};

const NS: &str = "t";
const RC: &str = "/apis/tessera.rs/v1alpha1/namespaces/t/redisclusters";
const STS: &str = "/apis/apps/v1/namespaces/t/statefulsets";
const CM: &str = "/api/v1/namespaces/t/configmaps";
const PODS: &str = "/api/v1/namespaces/t/pods";
const SECRETS: &str = "/api/v1/namespaces/t/secrets";

/// Every pod listens on the port the pod spec says; pods differ by address.
const POD_PORT: u16 = 6379;

struct Kubelet {
    api: FakeApi,
    root: PathBuf,
    /// The pods' processes by pod name (the kit's guards: killed on drop).
    procs: Vec<(String, Server)>,
    next_ip: u8,
}

impl Kubelet {
    /// Starts a process for every pod of every stored StatefulSet that has none yet.
    async fn sync(&mut self) {
        let conf = self.api.get(CM, "demo-config").expect("configmap applied")["data"]["node.conf"]
            .as_str()
            .unwrap()
            .to_string();
        let etc = self.root.join("etc");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(etc.join("node.conf"), conf).unwrap();
        // The node-auth Secret's file (the operator's user), where `/etc/tessera-auth` maps.
        let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(
            self.api
                .get(SECRETS, "demo-node-auth")
                .expect("node-auth applied"),
        )
        .unwrap();
        let auth = self.root.join("etc-auth");
        std::fs::create_dir_all(&auth).unwrap();
        let file = &secret.data.unwrap()["auth.conf"].0;
        std::fs::write(auth.join("auth.conf"), file).unwrap();
        for sts_name in self.api.names(STS) {
            let sts = self.api.get(STS, &sts_name).unwrap();
            let replicas = sts["spec"]["replicas"].as_i64().unwrap();
            for ord in 0..replicas {
                let pod = format!("{sts_name}-{ord}");
                if self.api.get(PODS, &pod).is_some() {
                    continue;
                }
                self.start_pod(&sts, &pod, &etc).await;
            }
        }
    }

    async fn start_pod(&mut self, sts: &Value, pod: &str, etc: &Path) {
        // 127.0.190.x: this suite's block of pod addresses.
        let ip = tessera_testkit::ports::free_ip_for(POD_PORT, [127, 0, 190], &mut self.next_ip);
        let data = self.root.join(pod);
        std::fs::create_dir_all(&data).unwrap();
        let c = &sts["spec"]["template"]["spec"]["containers"][0];
        let cmd = c["command"][0].as_str().unwrap();
        assert_eq!(cmd, "redis-server");
        let args: Vec<String> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                a.as_str()
                    .unwrap()
                    .replace("$(POD_IP)", &ip)
                    .replace("/etc/tessera", etc.to_str().unwrap())
                    .replace("/data", data.to_str().unwrap())
            })
            .collect();
        // Exactly the pod's command line (the kit adds nothing), ready once it answers.
        let srv = Launch::redis()
            .verbatim()
            .ip(&ip)
            .dir(&data)
            .cwd()
            .args(&args)
            .ready_within(Duration::from_secs(30))
            .start_at(POD_PORT);
        self.procs.push((pod.to_string(), srv));
        let labels = sts["spec"]["template"]["metadata"]["labels"].clone();
        self.api.insert(
            PODS,
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": pod, "namespace": NS, "labels": labels},
                   "status": {"podIP": ip,
                              "conditions": [{"type": "Ready", "status": "True"}],
                              "containerStatuses": [{"name": "node", "image": "", "imageID": "",
                                                     "ready": true, "restartCount": 0,
                                                     "started": true}]}}),
        );
    }

    /// Removes pods whose StatefulSet is gone (what the real StatefulSet controller does).
    fn gc(&mut self) {
        let live = self.api.names(STS);
        for pod in self.api.names(PODS) {
            let owner = pod.rsplit_once('-').map(|(s, _)| s.to_string()).unwrap();
            if !live.contains(&owner) {
                self.api.remove(PODS, &pod);
                for (name, srv) in &mut self.procs {
                    if *name == pod {
                        srv.kill();
                    }
                }
            }
        }
    }
}

/// A cluster client with connect and response timeouts: a dead node fails the test, never
/// hangs it.
fn cluster_client(seed_ip: &str) -> redis::cluster::ClusterClient {
    redis::cluster::ClusterClientBuilder::new(vec![format!("redis://{seed_ip}:6379")])
        .connection_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(30))
        .build()
        .expect("cluster client")
}

fn rc(api: &FakeApi) -> RedisCluster {
    serde_json::from_value(api.get(RC, "demo").unwrap()).unwrap()
}

async fn reconcile_until(
    api: &FakeApi,
    kubelet: &mut Kubelet,
    ctx: &Arc<Context>,
    what: &str,
    done: impl Fn(&RedisCluster) -> bool,
) -> RedisCluster {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        reconcile(Arc::new(rc(api)), ctx.clone())
            .await
            .expect("reconcile");
        kubelet.gc();
        kubelet.sync().await;
        let now = rc(api);
        if done(&now) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {:#?}",
            now.status
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn phase(rc: &RedisCluster) -> Option<Phase> {
    rc.status.as_ref().map(|s| s.phase)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forms_a_real_cluster_and_drains_before_deleting() {
    // Fails (naming `make deps`) when redis-server is missing: never skipped.
    tessera_testkit::redis_bin();
    let dir = tempfile::tempdir().unwrap();
    let api = FakeApi::new();
    api.insert(
        RC,
        json!({"apiVersion": "tessera.rs/v1alpha1", "kind": "RedisCluster",
               "metadata": {"name": "demo", "namespace": NS, "generation": 1},
               "spec": {"shards": 3, "replicasPerShard": 1, "image": "redis:7.0", "nodeTimeoutMs": 2000}}),
    );
    let ctx = Arc::new(Context::new(
        api.client(),
        Arc::new(Metrics::new()),
        Arc::new(RealEngine),
    ));
    let mut kubelet = Kubelet {
        api: api.clone(),
        root: dir.path().to_path_buf(),
        procs: Vec::new(),
        next_ip: 1,
    };

    let ready = reconcile_until(&api, &mut kubelet, &ctx, "Ready", |r| {
        phase(r) == Some(Phase::Ready)
    })
    .await;
    let st = ready.status.unwrap();
    assert_eq!(st.slots_assigned, 16384);
    assert_eq!(st.cluster_state, "ok");
    assert_eq!(st.ready_nodes, 6);
    assert_eq!(st.shards, 3);
    for s in &st.shard_statuses {
        assert!(s.master_pod.is_some(), "{s:?}");
        assert_eq!(s.replica_pods.len(), 1, "{s:?}");
        assert!(!s.slot_ranges.is_empty(), "{s:?}");
    }
    let ready_cond = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready_cond.status, "True");

    // Keys spread over every shard, then scale in to 2: shard 2 is drained first.
    let seed = st.shard_statuses[0].master_pod.clone().unwrap();
    let seed_ip = api.get(PODS, &seed).unwrap()["status"]["podIP"]
        .as_str()
        .unwrap()
        .to_string();
    let client = cluster_client(&seed_ip);
    let mut conn = client.get_async_connection().await.unwrap();
    for i in 0..300 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query_async(&mut conn)
            .await
            .unwrap();
    }

    // Scale out to 4 (as `kubectl scale rcl/demo --replicas=4` would set spec.shards).
    let mut obj = api.get(RC, "demo").unwrap();
    obj["spec"]["shards"] = json!(4);
    obj["metadata"]["generation"] = json!(2);
    api.insert(RC, obj);
    let grown = reconcile_until(&api, &mut kubelet, &ctx, "scale-out to 4 shards", |r| {
        phase(r) == Some(Phase::Ready) && r.status.as_ref().is_some_and(|s| s.shards == 4)
    })
    .await;
    let st = grown.status.unwrap();
    assert_eq!((st.ready_nodes, st.slots_assigned), (8, 16384));
    assert!(
        st.shard_statuses.iter().all(|s| !s.slot_ranges.is_empty()),
        "{:?}",
        st.shard_statuses
    );

    // Scale in to 2: shards 2 and 3 are drained before their StatefulSets go.
    let mut obj = api.get(RC, "demo").unwrap();
    obj["spec"]["shards"] = json!(2);
    obj["metadata"]["generation"] = json!(3);
    api.insert(RC, obj);
    let drained = reconcile_until(&api, &mut kubelet, &ctx, "scale-in to 2 shards", |r| {
        phase(r) == Some(Phase::Ready)
            && api.get(STS, "demo-2").is_none()
            && api.get(STS, "demo-3").is_none()
    })
    .await;
    let st = drained.status.unwrap();
    assert_eq!(st.shards, 2);
    assert_eq!(st.slots_assigned, 16384);
    assert_eq!(st.observed_generation, Some(3));
    assert!(
        st.shard_statuses.iter().all(|s| s.shard < 2),
        "{:?}",
        st.shard_statuses
    );

    // No key was lost.
    let client = cluster_client(&seed_ip);
    let mut conn = client.get_async_connection().await.unwrap();
    for i in 0..300 {
        let v: Option<i64> = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(v, Some(i), "k{i}");
    }
}
