//! Helpers shared by the kube-in-a-box suites and the demo: polling waits, the operator
//! process, pod lookups.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client};
use tokio::time::Instant;

use super::error::KiabError;
use super::images::workspace_root;
use super::kubelet::process::{spawn, Launch, ProcessTable, Running};

/// Polls `f` every 250 ms until it yields `Some`, or fails after `timeout` with the last
/// observation (`f` reports it through `last`).
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last = match f().await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "timed out after {timeout:?} waiting for {what}; last: {last}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Pods of a namespace matching a label selector, sorted by name.
pub async fn pods(client: &Client, ns: &str, selector: &str) -> Result<Vec<Pod>, String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut items = api
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| e.to_string())?
        .items;
    items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(items)
}

/// Pod IP, if assigned.
pub fn pod_ip(p: &Pod) -> Option<String> {
    p.status.as_ref().and_then(|s| s.pod_ip.clone())
}

/// Ready condition is True.
pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pid of a container's process (from the `kiab://PID` container ID).
pub fn container_pid(p: &Pod, container: &str) -> Option<i32> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == container)?
        .container_id
        .as_deref()?
        .strip_prefix("kiab://")?
        .parse()
        .ok()
}

/// Restart count of a container.
pub fn restart_count(p: &Pod, container: &str) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container))
        .map(|c| c.restart_count)
        .unwrap_or(0)
}

/// The built tessera-operator binary (debug preferred: `make test` builds it), or an error
/// that says how to build it.
pub fn operator_binary() -> Result<PathBuf, KiabError> {
    let root = workspace_root();
    ["debug", "release"]
        .iter()
        .map(|p| root.join("target").join(p).join("tessera-operator"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            KiabError::Other(format!(
                "tessera-operator is not built under {}/target/{{debug,release}}: run `cargo build -p tessera-operator` (make test does)",
                root.display()
            ))
        })
}

/// A running `tessera-operator run`, killed on drop.
pub struct OperatorProcess {
    proc_: Running,
    _table: std::sync::Arc<ProcessTable>,
    pub log: PathBuf,
}

impl OperatorProcess {
    /// Starts `tessera-operator run` against `kubeconfig`, logging to `log`.
    pub fn start(binary: &Path, kubeconfig: &Path, log: PathBuf) -> Result<Self, KiabError> {
        Self::start_with_args(binary, kubeconfig, log, &[])
    }

    /// [`OperatorProcess::start`] with `extra` arguments after `run`'s own: a test's setting
    /// (say `--tls-ca-window-seconds`) stays its own, where an environment variable would
    /// reach every operator the test binary starts meanwhile.
    pub fn start_with_args(
        binary: &Path,
        kubeconfig: &Path,
        log: PathBuf,
        extra: &[&str],
    ) -> Result<Self, KiabError> {
        let table = ProcessTable::new();
        let mut env: Vec<(String, String)> = std::env::vars()
            // The operator's own settings (TESSERA_*) pass too.
            .filter(|(k, _)| {
                k == "PATH" || k == "HOME" || k == "RUST_LOG" || k.starts_with("TESSERA_")
            })
            .collect();
        env.push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
        if !env.iter().any(|(k, _)| k == "RUST_LOG") {
            env.push(("RUST_LOG".into(), "info".into()));
        }
        let launch = Launch {
            program: binary.to_path_buf(),
            args: vec![
                "run".into(),
                "--metrics-addr".into(),
                "127.0.0.1:0".into(),
                "--log-format".into(),
                "text".into(),
            ]
            .into_iter()
            .chain(extra.iter().map(|a| a.to_string()))
            .collect(),
            env,
            cwd: log
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(std::env::temp_dir),
            log_file: log.clone(),
        };
        let proc_ = spawn(&launch, &table)?;
        Ok(Self {
            proc_,
            _table: table,
            log,
        })
    }

    /// `Some(code)` if the operator has exited.
    pub fn exited(&mut self) -> Option<i32> {
        self.proc_.try_exit()
    }

    /// Where its /metrics listens (it binds port 0 and logs the address), once it has.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        let text = std::fs::read_to_string(&self.log).ok()?;
        text.lines()
            .rev()
            .map(strip_ansi)
            .filter(|l| l.contains("metrics listening"))
            .filter_map(|l| {
                l.split("addr=")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .next()
    }

    /// The last `n` lines of its log (for failure messages).
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    pub async fn stop(mut self) {
        self.proc_.stop(Duration::from_secs(5)).await;
    }

    /// SIGKILL, no grace (a crashed or OOM-killed operator), then reaps it.
    pub async fn kill(mut self) {
        // SAFETY: kill(2) on the process group this handle spawned and has not reaped.
        unsafe {
            libc::kill(-self.proc_.pid(), libc::SIGKILL);
        }
        self.proc_.stop(Duration::ZERO).await;
    }
}

/// `line` without terminal colour sequences (ESC [ ... letter), which a text log may hold.
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
