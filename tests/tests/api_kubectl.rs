//! The kiab API server driven by the real kubectl binaries on this machine (1.33 from the
//! workspace's .tools and the system's 1.32): apply, get, patch (merge/json/strategic), scale,
//! server-side apply, describe, delete, and get --watch.

use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;
use tessera_tests::kiab::api::testing::{kubectl_binaries, start, Kubectl};
use tokio::io::{AsyncBufReadExt, BufReader};

const MANIFEST: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, labels: {app: demo}}
data: {node.conf: "cluster-enabled yes\n"}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, labels: {app: demo}}
spec:
  replicas: 2
  serviceName: web
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec:
      containers:
      - name: redis
        image: redis:7.0
        env: [{name: A, value: "1"}]
        ports: [{containerPort: 6379, name: redis}]
"#;

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("kubectl printed invalid JSON ({e}): {s}"))
}

fn cm_yaml(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{k: v}}\n")
}

fn binaries() -> Vec<std::path::PathBuf> {
    let b = kubectl_binaries();
    assert!(!b.is_empty(), "no kubectl found (run `make deps`)");
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_get_patch_scale_describe_delete() {
    for bin in binaries() {
        let h = start().await;
        let k = Kubectl::new(bin.clone(), &h.kubeconfig()).expect("kubectl setup");
        let out = k.ok(&["version", "-o", "json"]).await;
        assert_eq!(json(&out)["serverVersion"]["minor"], "33", "{bin:?}");

        let out = k.ok_stdin(&["apply", "-f", "-"], MANIFEST).await;
        assert!(
            out.contains("configmap/cfg created") && out.contains("statefulset.apps/web created"),
            "{out}"
        );
        let out = k.ok_stdin(&["apply", "-f", "-"], MANIFEST).await;
        assert!(out.contains("statefulset.apps/web unchanged"), "{out}");
        // A changed manifest is applied as a strategic merge patch from the last-applied config.
        let out = k
            .ok_stdin(
                &["apply", "-f", "-"],
                &MANIFEST.replace("replicas: 2", "replicas: 3"),
            )
            .await;
        assert!(out.contains("statefulset.apps/web configured"), "{out}");

        let s = json(&k.ok(&["get", "sts", "web", "-o", "json"]).await);
        assert_eq!(
            (
                s["spec"]["replicas"].as_i64(),
                s["metadata"]["generation"].as_i64()
            ),
            (Some(3), Some(2))
        );
        assert_eq!(
            s["spec"]["podManagementPolicy"], "OrderedReady",
            "defaulted"
        );

        k.ok(&[
            "patch",
            "sts",
            "web",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"replicas":4}}"#,
        ])
        .await;
        k.ok(&[
            "patch",
            "sts",
            "web",
            "--type",
            "json",
            "-p",
            // serviceName would be refused (immutable, as in Kubernetes); minReadySeconds is not.
            r#"[{"op":"add","path":"/spec/minReadySeconds","value":5}]"#,
        ])
        .await;
        k.ok(&["patch", "sts", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"redis","env":[{"name":"B","value":"2"}]}]}}}}"#]).await;
        let s = json(&k.ok(&["get", "sts", "web", "-o", "json"]).await);
        assert_eq!(s["spec"]["replicas"], 4);
        assert_eq!(s["spec"]["minReadySeconds"], 5);
        let env = &s["spec"]["template"]["spec"]["containers"][0]["env"];
        assert_eq!(
            env.as_array().map(Vec::len),
            Some(2),
            "strategic merge keeps A and adds B: {env}"
        );

        k.ok(&["scale", "sts", "web", "--replicas", "1"]).await;
        let sc = json(
            &k.ok(&[
                "get",
                "--raw",
                "/apis/apps/v1/namespaces/default/statefulsets/web/scale",
            ])
            .await,
        );
        assert_eq!(
            (sc["kind"].as_str(), sc["spec"]["replicas"].as_i64()),
            (Some("Scale"), Some(1))
        );

        let table = k.ok(&["get", "sts,cm", "-l", "app=demo"]).await;
        assert!(
            table.contains("READY")
                && table.contains("statefulset.apps/web")
                && table.contains("configmap/cfg"),
            "{table}"
        );
        let d = k.ok(&["describe", "sts", "web"]).await;
        assert!(d.contains("Replicas:") && d.contains("redis:7.0"), "{d}");

        let bad = k
            .run(&[
                "patch",
                "sts",
                "web",
                "--type",
                "merge",
                "-p",
                r#"{"metadata":{"resourceVersion":"1"},"spec":{"replicas":5}}"#,
            ])
            .await;
        assert!(
            !bad.ok && bad.stderr.contains("the object has been modified"),
            "{bad:?}"
        );

        let out = k.ok(&["delete", "sts", "web"]).await;
        assert!(out.contains("deleted"), "{out}");
        let r = k.run(&["get", "sts", "web"]).await;
        assert!(!r.ok && r.stderr.contains("NotFound"), "{r:?}");
        h.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_conflicts_and_force() {
    for bin in binaries() {
        let h = start().await;
        let k = Kubectl::new(bin, &h.kubeconfig()).expect("kubectl setup");
        let out = k
            .ok_stdin(
                &[
                    "apply",
                    "--server-side",
                    "--field-manager",
                    "demo",
                    "-f",
                    "-",
                ],
                MANIFEST,
            )
            .await;
        assert!(out.contains("serverside-applied"), "{out}");
        k.ok(&["scale", "sts", "web", "--replicas", "5"]).await;
        let r = k
            .run_with(
                &[
                    "apply",
                    "--server-side",
                    "--field-manager",
                    "demo",
                    "-f",
                    "-",
                ],
                Some(MANIFEST),
                Duration::from_secs(60),
            )
            .await;
        assert!(
            !r.ok && r.stderr.contains("conflict") && r.stderr.contains(".spec.replicas"),
            "{r:?}"
        );
        k.ok_stdin(
            &[
                "apply",
                "--server-side",
                "--force-conflicts",
                "--field-manager",
                "demo",
                "-f",
                "-",
            ],
            MANIFEST,
        )
        .await;
        let s = json(
            &k.ok(&["get", "sts", "web", "-o", "json", "--show-managed-fields"])
                .await,
        );
        assert_eq!(s["spec"]["replicas"], 2);
        assert!(
            s["metadata"]["managedFields"]
                .as_array()
                .is_some_and(|m| m.iter().any(|e| e["manager"] == "demo")),
            "{s}"
        );
        h.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_streams_changes() {
    for bin in binaries() {
        let h = start().await;
        let k = Kubectl::new(bin, &h.kubeconfig()).expect("kubectl setup");
        k.ok_stdin(&["create", "-f", "-"], &cm_yaml("first")).await;
        let mut child = tokio::process::Command::new(&k.bin)
            .arg("--kubeconfig")
            .arg(k.kubeconfig_path())
            .args(["get", "configmaps", "--watch", "--output-watch-events"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn kubectl get -w");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = vec![];
        let waited = tokio::time::timeout(Duration::from_secs(60), async {
            let mut created = false;
            while let Ok(Some(l)) = lines.next_line().await {
                seen.push(l.clone());
                if l.contains("first") && !created {
                    created = true;
                    k.ok_stdin(&["create", "-f", "-"], &cm_yaml("second")).await;
                    k.ok(&["delete", "configmap", "second"]).await;
                }
                if l.contains("DELETED") && l.contains("second") {
                    return true;
                }
            }
            false
        })
        .await;
        let _ = child.kill().await;
        assert_eq!(waited.ok(), Some(true), "watch output: {seen:?}");
        assert!(
            seen.iter()
                .any(|l| l.contains("ADDED") && l.contains("second")),
            "{seen:?}"
        );
        // Server-side printing applies to watch events too: one header, the ConfigMap columns.
        assert!(
            seen.first()
                .is_some_and(|l| l.contains("EVENT") && l.contains("DATA")),
            "{seen:?}"
        );
        h.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_and_describe_show_kubelet_logs_and_operator_events() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, PostParams};
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    use kube::Resource;
    use std::sync::Arc;

    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("redis.log");
    std::fs::write(&log, "line 1\nline 2\nline 3\n").expect("write log");
    for bin in binaries() {
        let h = start().await;
        let lp = log.clone();
        h.set_log_source(Arc::new(move |ns: &str, pod: &str, c: &str| {
            (ns == "default" && pod == "p" && c == "redis").then(|| lp.clone())
        }));
        let client = tessera_tests::kiab::api::testing::kube_client(&h)
            .await
            .expect("client");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let p: Pod = serde_json::from_value(serde_json::json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "redis", "image": "redis:7.0"}]}}))
        .expect("pod");
        let p = pods
            .create(&PostParams::default(), &p)
            .await
            .expect("create pod");
        // The operator's kube-rs Recorder publishes events.k8s.io/v1 Events.
        let rec = Recorder::new(
            client,
            Reporter {
                controller: "tessera-operator".into(),
                instance: None,
            },
        );
        rec.publish(
            &Event {
                type_: EventType::Normal,
                reason: "Scaled".into(),
                note: Some("shards 3 -> 4".into()),
                action: "Scale".into(),
                secondary: None,
            },
            &p.object_ref(&()),
        )
        .await
        .expect("publish event");

        let k = Kubectl::new(bin, &h.kubeconfig()).expect("kubectl setup");
        assert_eq!(k.ok(&["logs", "p"]).await, "line 1\nline 2\nline 3\n");
        assert_eq!(
            k.ok(&["logs", "p", "-c", "redis", "--tail", "1"]).await,
            "line 3\n"
        );
        let d = k.ok(&["describe", "pod", "p"]).await;
        assert!(
            d.contains("Scaled") && d.contains("shards 3 -> 4"),
            "describe shows the event:\n{d}"
        );
        let ev = k.ok(&["get", "events"]).await;
        assert!(ev.contains("Scaled") && ev.contains("pod/p"), "{ev}");
        h.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_imperative_create_sends_protobuf_we_decode() {
    for bin in binaries() {
        let h = start().await;
        let k = Kubectl::new(bin, &h.kubeconfig()).expect("kubectl setup");
        k.ok(&["create", "namespace", "shop"]).await;
        k.ok(&[
            "create",
            "configmap",
            "conf",
            "-n",
            "shop",
            "--from-literal=a=1",
            "--from-literal=b=two",
        ])
        .await;
        k.ok(&[
            "create",
            "secret",
            "generic",
            "auth",
            "-n",
            "shop",
            "--from-literal=password=s3cret",
        ])
        .await;
        k.ok(&["label", "configmap", "conf", "-n", "shop", "tier=cache"])
            .await;
        let cm = json(
            &k.ok(&["get", "cm", "conf", "-n", "shop", "-o", "json"])
                .await,
        );
        assert_eq!(
            (cm["data"]["a"].as_str(), cm["data"]["b"].as_str()),
            (Some("1"), Some("two"))
        );
        assert_eq!(cm["metadata"]["labels"]["tier"], "cache");
        let pw = k
            .ok(&[
                "get",
                "secret",
                "auth",
                "-n",
                "shop",
                "-o",
                "jsonpath={.data.password}",
            ])
            .await;
        assert_eq!(pw, "czNjcmV0", "base64 of s3cret");
        // Deleting the namespace empties it, then removes it.
        k.ok(&["delete", "namespace", "shop", "--timeout", "30s"])
            .await;
        let r = k.run(&["get", "namespace", "shop"]).await;
        assert!(!r.ok && r.stderr.contains("NotFound"), "{r:?}");
        h.shutdown().await;
    }
}
