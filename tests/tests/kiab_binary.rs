//! The `kube-in-a-box` binary (up --detach / down) and scripts/demo.sh, run as a user would.
//! Pods use image redis:7.0 (→ Debian's redis-server, found on PATH).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::Api;
use serde_json::json;
use tessera_tests::kiab::harness::client_for;
use tessera_tests::kiab::images::workspace_root;
use tessera_tests::kiab::testkit::{container_pid, is_ready, operator_binary, wait_for};

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let exists = unsafe { libc::kill(pid, 0) } == 0;
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.contains(") Z "))
        .unwrap_or(true);
    exists && !zombie
}

fn kiab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kube-in-a-box"))
        .args(args)
        .output()
        .expect("run kube-in-a-box")
}

/// Stops the detached box even if the test fails.
struct Down<'a>(&'a Path);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = kiab(&["down", "--state-dir", &self.0.display().to_string()]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_detach_runs_pods_and_down_leaves_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("state");
    let d = dir.display().to_string();
    let out = kiab(&[
        "up",
        "--state-dir",
        &d,
        "--detach",
        "--ip-base",
        "127.0.5.1",
    ]);
    let _down = Down(&dir);
    assert!(
        out.status.success(),
        "up failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid: i32 = std::fs::read_to_string(dir.join("kiab.pid"))
        .expect("pidfile")
        .trim()
        .parse()
        .expect("pid");
    assert!(alive(pid));
    // A second `up` on the same directory is refused.
    assert!(!kiab(&["up", "--state-dir", &d, "--detach"])
        .status
        .success());

    // The kubeconfig works; CRDs were applied; a bare pod runs.
    let kubeconfig = std::fs::read_to_string(dir.join("kubeconfig")).expect("kubeconfig");
    let server = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: http://"))
        .expect("server line");
    let client = client_for(server.parse().expect("addr")).expect("client");
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    assert!(crds
        .get_opt("redisclusters.tessera.rs")
        .await
        .expect("get crd")
        .is_some());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "solo"},
        "spec": {"containers": [{
            "name": "redis", "image": "redis:7.0",
            "args": ["--bind", "$(POD_IP)", "--port", "6379", "--save", ""],
            "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "readinessProbe": {"tcpSocket": {"port": 6379}, "periodSeconds": 1}
        }]}
    }))
    .expect("pod");
    let pods: Api<Pod> = Api::default_namespaced(client);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    let redis_pid = wait_for("solo ready", Duration::from_secs(60), || async {
        let p = pods.get("solo").await.map_err(|e| e.to_string())?;
        match container_pid(&p, "redis") {
            Some(pid) if is_ready(&p) => Ok(pid),
            _ => Err(format!("{:?}", p.status)),
        }
    })
    .await
    .expect("pod ready");
    assert!(alive(redis_pid));

    let out = kiab(&["down", "--state-dir", &d]);
    assert!(out.status.success());
    let gone = wait_for("everything stopped", Duration::from_secs(30), || async {
        if alive(pid) || alive(redis_pid) {
            Err("still running".to_string())
        } else {
            Ok(())
        }
    })
    .await;
    assert!(gone.is_ok(), "{gone:?}");
    assert!(!dir.join("kiab.pid").exists());
}

/// scripts/demo.sh end to end, unattended (no TTY): exits 0 only if every phase passed, and
/// leaves nothing running. Needs the operator binary like the e2e suite.
#[test]
fn demo_script_runs_unattended_and_cleans_up() {
    operator_binary().unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    let out = Command::new("bash")
        .arg(workspace_root().join("scripts/demo.sh"))
        .env("CI", "true")
        .env("DEMO_DIR", &dir)
        .env("DEMO_IP_BASE", "127.0.6.1")
        .env("DEMO_KEYS", "300")
        .env(
            "DEMO_BIN_DIR",
            Path::new(env!("CARGO_BIN_EXE_kube-in-a-box"))
                .parent()
                .expect("bin dir"),
        )
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run demo.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("wait until rebalanced (4 shards)"),
        "{stdout}"
    );
    assert!(stdout.contains("300/300 keys read back"), "{stdout}");
    assert!(!dir.join("kiab.pid").exists() && !dir.join("operator.pid").exists());
}
