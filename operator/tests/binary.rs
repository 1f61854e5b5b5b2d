//! The real `tessera-operator run` binary against the in-memory API served over loopback HTTP:
//! it takes the leader Lease, reconciles an existing RedisCluster into its children, serves
//! metrics, and on SIGTERM stops and releases the Lease.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use support::fake_api::FakeApi;
use tessera_operator::crd::Phase;
use tessera_testkit::Process;

const RC: &str = "/apis/tessera.rs/v1alpha1/namespaces/t/redisclusters";
const STS: &str = "/apis/apps/v1/namespaces/t/statefulsets";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/ops/leases";

async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
        return String::new();
    };
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut out = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out)).await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_reconciles_and_shuts_down_gracefully() {
    let api = FakeApi::new();
    api.insert(
        RC,
        json!({"apiVersion": "tessera.rs/v1alpha1", "kind": "RedisCluster",
               "metadata": {"name": "demo", "namespace": "t", "generation": 1},
               "spec": {"shards": 3, "replicasPerShard": 1, "image": "redis:7.0"}}),
    );
    let addr = api.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster: {{server: \"http://{addr}\"}}\n\
             users:\n- name: u\n  user: {{}}\ncontexts:\n- name: c\n  context: {{cluster: fake, user: u, namespace: default}}\n\
             current-context: c\n"
        ),
    )
    .unwrap();

    // The kit's guard: output to a log file, killed on drop, its tail shown on a panic.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tessera-operator"));
    cmd.args([
        "run",
        "--metrics-addr=127.0.0.1:0",
        "--lease-namespace=ops",
        "--requeue-seconds=1",
        "--log-format=json",
    ])
    .env("KUBECONFIG", &kubeconfig)
    .env("RUST_LOG", "info")
    .env_remove("POD_NAMESPACE")
    .env_remove("WATCH_NAMESPACES");
    let mut operator = Process::spawn(cmd);

    // JSON logs: find the metrics address.
    let mut metrics_addr = None;
    let deadline = Instant::now() + Duration::from_secs(90);
    while metrics_addr.is_none() && Instant::now() < deadline {
        metrics_addr = operator.log().lines().find_map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
            (v["fields"]["message"] == "metrics listening")
                .then(|| v["fields"]["addr"].as_str().map(String::from))
                .flatten()
        });
        if metrics_addr.is_none() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let metrics_addr =
        metrics_addr.unwrap_or_else(|| panic!("no metrics address in log:\n{}", operator.log()));

    wait_for("the lease", || {
        api.get(LEASES, "tessera-operator")
            .is_some_and(|l| l["spec"]["holderIdentity"].is_string())
    })
    .await;
    wait_for("three StatefulSets", || {
        (0..3).all(|i| api.get(STS, &format!("demo-{i}")).is_some())
    })
    .await;
    wait_for("status Creating", || {
        api.get(RC, "demo").is_some_and(|rc| {
            rc["status"]["phase"] == json!(Phase::Creating) && rc["status"]["readyText"] == "0/6"
        })
    })
    .await;
    let sts = api.get(STS, "demo-1").unwrap();
    assert_eq!(sts["spec"]["replicas"], 2);
    assert_eq!(
        sts["metadata"]["ownerReferences"][0]["kind"],
        "RedisCluster"
    );

    let mut body = String::new();
    wait_for_async_metrics(&metrics_addr, &mut body).await;
    assert!(http_get(&metrics_addr, "/healthz")
        .await
        .starts_with("HTTP/1.1 200"));
    assert!(body.contains("tessera_operator_leader 1"), "{body}");

    // Steady state (requeue every second, nothing changes): children are applied once, then
    // every reconcile skips all 10 (node-auth Secret, ConfigMap, 2 Services, 3 StatefulSets,
    // 3 PDBs).
    let count = |body: &str, result: &str| -> u64 {
        let prefix = format!("tessera_operator_child_applies_total{{result=\"{result}\"}} ");
        body.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    while count(&body, "skipped") < 30 {
        assert!(Instant::now() < deadline, "applies never skipped:\n{body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        body = http_get(&metrics_addr, "/metrics").await;
    }
    assert_eq!(count(&body, "applied"), 10, "{body}");
    eprintln!(
        "steady state: {} applies done, {} skipped",
        count(&body, "applied"),
        count(&body, "skipped")
    );

    // SIGTERM: the controller stops, the lease is released, exit 0.
    operator.signal("TERM");
    let deadline = Instant::now() + Duration::from_secs(60);
    let exit = loop {
        if let Some(s) = operator.try_wait() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "operator did not exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(exit.success(), "exit status {exit:?}");
    let lease = api.get(LEASES, "tessera-operator").unwrap();
    assert!(
        lease["spec"]["holderIdentity"].is_null(),
        "lease released: {lease}"
    );
}

async fn wait_for_async_metrics(addr: &str, body: &mut String) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        *body = http_get(addr, "/metrics").await;
        if body.contains("tessera_operator_reconciles_total{result=\"success\"}")
            && body
                .contains("tessera_operator_cluster_ready_nodes{namespace=\"t\",name=\"demo\"} 0")
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "metrics never showed a reconcile:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
