//! Helpers for tests that drive the API server with the real kubectl: locating kubectl
//! binaries, writing a kubeconfig, running commands with a timeout.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// kubectl binaries present on this machine: the workspace's 1.33 and the system one.
pub fn kubectl_binaries() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = vec![];
    for p in [
        root.join(".tools/bin/kubectl"),
        PathBuf::from("/usr/bin/kubectl"),
    ] {
        if p.is_file() {
            out.push(p);
        }
    }
    out
}

/// Output of one kubectl run.
#[derive(Debug)]
pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// A kubectl bound to one kubeconfig and its own discovery cache.
pub struct Kubectl {
    pub bin: PathBuf,
    dir: tempfile::TempDir,
}

impl Kubectl {
    /// Writes the kubeconfig for `kubeconfig_yaml` into a fresh temp dir.
    pub fn new(bin: PathBuf, kubeconfig_yaml: &str) -> std::io::Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("config"), kubeconfig_yaml)?;
        Ok(Kubectl { bin, dir })
    }

    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    /// A scratch file in this kubectl's temp dir.
    pub fn write_file(&self, name: &str, contents: &str) -> std::io::Result<PathBuf> {
        let p = self.dir.path().join(name);
        std::fs::write(&p, contents)?;
        Ok(p)
    }

    /// Runs kubectl with `args` (and optional stdin), killing it after `timeout`.
    pub async fn run_with(&self, args: &[&str], stdin: Option<&str>, timeout: Duration) -> Run {
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(self.kubeconfig_path())
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .env("HOME", self.dir.path())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return Run {
                    ok: false,
                    stdout: String::new(),
                    stderr: format!("spawn: {e}"),
                }
            }
        };
        if let (Some(input), Some(mut si)) = (stdin, child.stdin.take()) {
            let _ = si.write_all(input.as_bytes()).await;
        }
        match tokio::time::timeout(timeout, child.wait_with_output()).await {
            Ok(Ok(o)) => Run {
                ok: o.status.success(),
                stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            },
            Ok(Err(e)) => Run {
                ok: false,
                stdout: String::new(),
                stderr: format!("wait: {e}"),
            },
            Err(_) => Run {
                ok: false,
                stdout: String::new(),
                stderr: "timed out".into(),
            },
        }
    }

    /// Runs with a 60 s timeout and no stdin.
    pub async fn run(&self, args: &[&str]) -> Run {
        self.run_with(args, None, Duration::from_secs(60)).await
    }

    /// Runs and returns stdout, panicking with both streams on failure (tests only).
    pub async fn ok(&self, args: &[&str]) -> String {
        let r = self.run(args).await;
        assert!(
            r.ok,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            r.stdout, r.stderr
        );
        r.stdout
    }

    /// `ok` with a manifest on stdin.
    pub async fn ok_stdin(&self, args: &[&str], stdin: &str) -> String {
        let r = self
            .run_with(args, Some(stdin), Duration::from_secs(60))
            .await;
        assert!(
            r.ok,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            r.stdout, r.stderr
        );
        r.stdout
    }
}

/// A kube-rs client for a running server, built from its kubeconfig as the operator does.
pub async fn kube_client(h: &super::ApiServerHandle) -> Result<kube::Client, kube::Error> {
    kube_client_with(h, true).await
}

/// `kube_client`, choosing whether kube-rs retries 429/503/504 (it does by default, with a
/// back-off that can reach minutes: tests that expect a 429 turn it off).
pub async fn kube_client_with(
    h: &super::ApiServerHandle,
    retry: bool,
) -> Result<kube::Client, kube::Error> {
    let kc = kube::config::Kubeconfig::from_yaml(&h.kubeconfig())
        .map_err(kube::Error::InferKubeconfig)?;
    let mut cfg =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(kube::Error::InferKubeconfig)?;
    cfg.default_retry = retry;
    kube::Client::try_from(cfg)
}

/// Starts a server on a free loopback port with no persistence.
pub async fn start() -> super::ApiServerHandle {
    match super::serve(([127, 0, 0, 1], 0).into(), None).await {
        Ok(h) => h,
        Err(e) => panic!("starting the kiab api server: {e}"),
    }
}

/// Polls `f` every 50 ms until it returns Some, for at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A CRD shaped like tessera's RedisCluster (own fixture: the operator's generated CRD may not
/// exist yet), with defaults, bounds, an enum, a pattern, preserve-unknown-fields, status and
/// scale subresources and printer columns.
pub const FIXTURE_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: redisclusters.tessera.rs
spec:
  group: tessera.rs
  scope: Namespaced
  names:
    kind: RedisCluster
    plural: redisclusters
    singular: rediscluster
    shortNames: [rcl]
    categories: [all]
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.shards
        statusReplicasPath: .status.shards
        labelSelectorPath: .status.selector
    additionalPrinterColumns:
    - {name: Shards, type: integer, jsonPath: .spec.shards}
    - {name: Phase, type: string, jsonPath: .status.phase}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            properties:
              shards: {type: integer, minimum: 1, maximum: 1000, default: 3}
              replicasPerShard: {type: integer, minimum: 0, maximum: 5, default: 1}
              image: {type: string, minLength: 1}
              pullPolicy: {type: string, enum: [Always, IfNotPresent, Never]}
              storageClass: {type: string, pattern: '^[a-z0-9.-]+$'}
              config:
                type: object
                additionalProperties: {type: string}
                x-kubernetes-validations:
                - rule: "self.all(k, !(k in ['port', 'bind']))"
                  message: "spec.config sets a directive the operator owns"
              extra:
                type: object
                x-kubernetes-preserve-unknown-fields: true
            x-kubernetes-validations:
            - rule: "has(self.image) == has(oldSelf.image)"
              message: "spec.image cannot be added or removed"
          status:
            type: object
            properties:
              phase: {type: string}
              shards: {type: integer}
              selector: {type: string}
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
"#;
