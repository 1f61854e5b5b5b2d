//! kube-in-a-box controllers without the operator: a StatefulSet of redis-server pods
//! (image redis:7.0 → redis-server from PATH) run by the StatefulSet controller and the
//! process kubelet, driven through the API with kube-rs and checked with a real redis client.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tessera_tests::kiab::api::testing::{kubectl_binaries, Kubectl};
use tessera_tests::kiab::testkit::{
    container_pid, is_ready, pod_ip, pods, restart_count, wait_for,
};
use tessera_tests::kiab::{BoxConfig, KubeInABox};

const WAIT: Duration = Duration::from_secs(90);

fn statefulset(name: &str, replicas: i32, policy: &str) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": policy,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{
                        "name": "redis",
                        "image": "redis:7.0",
                        "command": ["redis-server"],
                        "args": ["/etc/kv/redis.conf", "--bind", "$(POD_IP)", "--port", "6379", "--dir", "/data"],
                        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                        "ports": [{"name": "redis", "containerPort": 6379}],
                        "readinessProbe": {"exec": {"command": ["sh", "-c", "redis-cli -h \"$POD_IP\" -p 6379 ping | grep -q PONG"]},
                                           "periodSeconds": 1},
                        "livenessProbe": {"tcpSocket": {"port": "redis"}, "periodSeconds": 2, "failureThreshold": 5},
                        "volumeMounts": [
                            {"name": "conf", "mountPath": "/etc/kv"},
                            {"name": "data", "mountPath": "/data"}
                        ]
                    }],
                    "volumes": [{"name": "conf", "configMap": {"name": format!("{name}-conf")}}]
                }
            },
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
        }
    }))
    .expect("statefulset manifest")
}

async fn setup(client: &Client, name: &str, replicas: i32, policy: &str) {
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-conf")},
        "data": {"redis.conf": "save \"\"\nappendonly no\nprotected-mode no\n"}
    }))
    .expect("configmap");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create configmap");
    let sts: Api<StatefulSet> = Api::default_namespaced(client.clone());
    sts.create(&PostParams::default(), &statefulset(name, replicas, policy))
        .await
        .expect("create statefulset");
}

/// Waits until exactly `n` pods of `app` are Ready with IPs; returns them.
async fn ready_pods(client: &Client, app: &str, n: usize) -> Vec<Pod> {
    wait_for(&format!("{n} ready {app} pods"), WAIT, || async {
        let ps = pods(client, "default", &format!("app={app}")).await?;
        let ok = ps.len() == n
            && ps.iter().all(|p| {
                is_ready(p) && pod_ip(p).is_some() && p.metadata.deletion_timestamp.is_none()
            });
        if ok {
            Ok(ps)
        } else {
            Err(format!(
                "{:?}",
                ps.iter()
                    .map(|p| (p.metadata.name.clone(), pod_ip(p), is_ready(p)))
                    .collect::<Vec<_>>()
            ))
        }
    })
    .await
    .expect("pods ready")
}

async fn redis(ip: &str) -> redis::aio::MultiplexedConnection {
    let c = redis::Client::open(format!("redis://{ip}:6379/")).expect("redis url");
    c.get_multiplexed_async_connection()
        .await
        .expect("connect to pod")
}

fn state_has(dir: &Path, rel: &str) -> bool {
    dir.join(rel).exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_pods_run_get_ips_keep_pvcs_and_restart() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cfg = BoxConfig::new(tmp.path());
    cfg.ip_base = "127.0.3.1".parse().expect("ip");
    let kiab = KubeInABox::start(cfg).await.expect("start box");
    let client = kiab.client();
    setup(&client, "kv", 2, "OrderedReady").await;

    // Pods run, get distinct IPs, become Ready; status follows.
    let ps = ready_pods(&client, "kv", 2).await;
    let names: Vec<_> = ps.iter().filter_map(|p| p.metadata.name.clone()).collect();
    assert_eq!(names, vec!["kv-0", "kv-1"]);
    let ip0 = pod_ip(&ps[0]).expect("ip");
    let ip1 = pod_ip(&ps[1]).expect("ip");
    assert_ne!(ip0, ip1);
    assert!(ip0.starts_with("127.0.3."), "{ip0}");
    let labels = ps[1].metadata.labels.clone().expect("labels");
    assert_eq!(labels["statefulset.kubernetes.io/pod-name"], "kv-1");
    assert_eq!(labels["apps.kubernetes.io/pod-index"], "1");
    let sts_api: Api<StatefulSet> = Api::default_namespaced(client.clone());
    wait_for("statefulset status", WAIT, || async {
        let s = sts_api.get("kv").await.map_err(|e| e.to_string())?;
        let st = s.status.clone().unwrap_or_default();
        if st.ready_replicas == Some(2)
            && st.replicas == 2
            && st.observed_generation == s.metadata.generation
        {
            Ok(())
        } else {
            Err(format!("{st:?}"))
        }
    })
    .await
    .expect("status");

    // The process runs from the PVC directory (mount path rewritten) and keeps data there.
    let mut c1 = redis(&ip1).await;
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query_async(&mut c1)
        .await
        .expect("config get");
    assert!(dir[1].ends_with("pvc/default/data-kv-1"), "{dir:?}");
    let _: () = redis::cmd("SET")
        .arg("survivor")
        .arg("yes")
        .query_async(&mut c1)
        .await
        .expect("set");
    let _: () = redis::cmd("SAVE").query_async(&mut c1).await.expect("save");
    drop(c1);

    // Deleting a pod recreates it with a new IP and the same PVC (the key comes back from dump.rdb).
    let pod_api: Api<Pod> = Api::default_namespaced(client.clone());
    let old_uid = ps[1].metadata.uid.clone();
    pod_api
        .delete("kv-1", &DeleteParams::default())
        .await
        .expect("delete pod");
    let ps = wait_for("kv-1 recreated", WAIT, || async {
        let ps = pods(&client, "default", "app=kv").await?;
        match ps
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some("kv-1"))
        {
            Some(p) if p.metadata.uid != old_uid && is_ready(p) => Ok(ps),
            _ => Err("not yet".into()),
        }
    })
    .await
    .expect("recreated");
    let new_ip1 = pod_ip(&ps[1]).expect("ip");
    assert_ne!(new_ip1, ip1, "a recreated pod gets a new address");
    let mut c1 = redis(&new_ip1).await;
    let v: Option<String> = redis::cmd("GET")
        .arg("survivor")
        .query_async(&mut c1)
        .await
        .expect("get");
    assert_eq!(v.as_deref(), Some("yes"), "PVC directory survived the pod");
    drop(c1);

    // A killed process is restarted in place (same pod, same IP, restartCount 1).
    let pid = container_pid(&ps[0], "redis").expect("pid of kv-0");
    // SAFETY: sending a signal to a process this test's box started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    wait_for("kv-0 restarted", WAIT, || async {
        let p = pod_api.get("kv-0").await.map_err(|e| e.to_string())?;
        if restart_count(&p, "redis") >= 1
            && is_ready(&p)
            && container_pid(&p, "redis") != Some(pid)
        {
            Ok(())
        } else {
            Err(format!("{:?}", p.status.map(|s| s.container_statuses)))
        }
    })
    .await
    .expect("restart");
    let _ = redis(&ip0).await;

    // Scale down deletes the highest ordinal; its PVC (object and directory) stays.
    sts_api
        .patch(
            "kv",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale");
    let left = ready_pods(&client, "kv", 1).await;
    assert_eq!(left[0].metadata.name.as_deref(), Some("kv-0"));
    let pvc_api: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
    assert!(pvc_api
        .get_opt("data-kv-1")
        .await
        .expect("get pvc")
        .is_some());
    assert!(state_has(tmp.path(), "pvc/default/data-kv-1/dump.rdb"));

    // Deleting the StatefulSet garbage-collects its pods, and their processes end.
    sts_api
        .delete("kv", &DeleteParams::default())
        .await
        .expect("delete sts");
    wait_for("no processes left", WAIT, || async {
        let ps = pods(&client, "default", "app=kv").await?;
        if ps.is_empty() && kiab.live_processes() == 0 {
            Ok(())
        } else {
            Err(format!(
                "{} pods, {} processes",
                ps.len(),
                kiab.live_processes()
            ))
        }
    })
    .await
    .expect("cleanup");
    kiab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_policy_starts_all_and_stop_kills_everything() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cfg = BoxConfig::new(tmp.path());
    cfg.ip_base = "127.0.4.1".parse().expect("ip");
    let kiab = KubeInABox::start(cfg).await.expect("start box");
    let client = kiab.client();
    setup(&client, "par", 3, "Parallel").await;
    let ps = ready_pods(&client, "par", 3).await;
    let pids: Vec<i32> = ps
        .iter()
        .filter_map(|p| container_pid(p, "redis"))
        .collect();
    assert_eq!(pids.len(), 3);
    assert_eq!(kiab.live_processes(), 3);
    // `kubectl logs` reads the container's log file through the API's log hook.
    if let Some(bin) = kubectl_binaries().into_iter().next() {
        let kubeconfig = std::fs::read_to_string(kiab.kubeconfig_path()).expect("kubeconfig");
        let kubectl = Kubectl::new(bin, &kubeconfig).expect("kubectl");
        let out = kubectl.ok(&["logs", "par-1", "-c", "redis"]).await;
        assert!(out.contains("Ready to accept connections"), "{out}");
    }
    kiab.stop().await;
    for pid in pids {
        let gone = wait_for("pod process gone", Duration::from_secs(20), || async move {
            // SAFETY: signal 0 only probes for existence.
            let alive = unsafe { libc::kill(pid, 0) } == 0;
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true);
            if !alive || zombie {
                Ok(())
            } else {
                Err(format!("{pid} alive"))
            }
        })
        .await;
        assert!(gone.is_ok(), "{gone:?}");
    }
}

/// The operator's default image (`tessera/tessera-node:<version>`) runs the workspace's built
/// tessera-node (standalone here: no cluster mode needed), with no command in the pod spec.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tessera_node_image_runs_the_built_binary() {
    if let Err(e) = tessera_tests::kiab::images::NodeProgram::TesseraNode.locate() {
        panic!("{e}");
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cfg = BoxConfig::new(tmp.path());
    cfg.ip_base = "127.0.9.1".parse().expect("ip");
    let kiab = KubeInABox::start(cfg).await.expect("start box");
    let client = kiab.client();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "tn", "labels": {"app": "tn"}},
        "spec": {"containers": [{
            "name": "node",
            "image": "tessera/tessera-node:0.1.0",
            "args": ["--bind", "$(POD_IP)", "--port", "6379", "--dir", "/data"],
            "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "readinessProbe": {"tcpSocket": {"port": 6379}, "periodSeconds": 1},
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]
        }],
        "volumes": [{"name": "data", "emptyDir": {}}]}
    }))
    .expect("pod");
    let pods_api: Api<Pod> = Api::default_namespaced(client.clone());
    pods_api
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    let ps = ready_pods(&client, "tn", 1).await;
    let ip = pod_ip(&ps[0]).expect("ip");
    let mut c = redis(&ip).await;
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query_async(&mut c)
        .await
        .expect("set");
    let v: String = redis::cmd("GET")
        .arg("k")
        .query_async(&mut c)
        .await
        .expect("get");
    assert_eq!(v, "v");
    kiab.stop().await;
}

/// RollingUpdate: a template change replaces pods from the highest ordinal down (each gets a
/// new address and the new revision label) until the status reports the update revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_replaces_pods_and_advances_revision() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cfg = BoxConfig::new(tmp.path());
    cfg.ip_base = "127.0.2.1".parse().expect("ip");
    let kiab = KubeInABox::start(cfg).await.expect("start box");
    let client = kiab.client();
    setup(&client, "ru", 2, "OrderedReady").await;
    let before = ready_pods(&client, "ru", 2).await;
    let sts_api: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let rev0 = sts_api
        .get("ru")
        .await
        .expect("sts")
        .status
        .and_then(|s| s.update_revision);
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"kiab/rollout": "2"}}}}});
    sts_api
        .patch("ru", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch template");
    let status = wait_for("rollout done", WAIT, || async {
        let s = sts_api.get("ru").await.map_err(|e| e.to_string())?;
        let st = s.status.clone().unwrap_or_default();
        let done = st.update_revision != rev0
            && st.current_revision == st.update_revision
            && st.updated_replicas == Some(2)
            && st.ready_replicas == Some(2);
        if done {
            Ok(st)
        } else {
            Err(format!("{st:?}"))
        }
    })
    .await
    .expect("rollout");
    let after = ready_pods(&client, "ru", 2).await;
    for (b, a) in before.iter().zip(&after) {
        assert_ne!(b.metadata.uid, a.metadata.uid, "pod replaced");
        assert_ne!(pod_ip(b), pod_ip(a), "replacement has a new address");
        let labels = a.metadata.labels.clone().expect("labels");
        assert_eq!(
            labels.get("controller-revision-hash"),
            status.update_revision.as_ref()
        );
    }
    kiab.stop().await;
}
