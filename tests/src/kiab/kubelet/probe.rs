//! Probes: exec (on the host, with the container's env), tcpSocket and httpGet against the
//! pod's own address, and the threshold bookkeeping a kubelet does around them.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::kiab::expand::{expand_vars, MountRewriter};
use crate::kiab::images::resolve_argv;

/// What a probe needs to know about the container it checks.
#[derive(Debug, Clone)]
pub struct ProbeTarget {
    pub ip: Ipv4Addr,
    pub env: Vec<(String, String)>,
    pub ports: HashMap<String, u16>,
    pub rewriter: MountRewriter,
    pub cwd: PathBuf,
}

/// One probe's schedule and consecutive-result counters.
#[derive(Debug, Clone)]
pub struct ProbeTracker {
    pub probe: Probe,
    next_due: Instant,
    successes: i32,
    failures: i32,
    /// Last verdict after thresholds: Some(true) healthy, Some(false) failed.
    pub verdict: Option<bool>,
}

impl ProbeTracker {
    /// Schedules the first run `initialDelaySeconds` after the container started.
    pub fn new(probe: Probe, started: Instant) -> Self {
        let delay = probe.initial_delay_seconds.unwrap_or(0).max(0) as u64;
        Self {
            probe,
            next_due: started + Duration::from_secs(delay),
            successes: 0,
            failures: 0,
            verdict: None,
        }
    }

    pub fn due(&self, now: Instant) -> bool {
        now >= self.next_due
    }

    /// Records one result; returns the verdict if it changed.
    pub fn record(&mut self, ok: bool, now: Instant) -> Option<bool> {
        let period = self.probe.period_seconds.unwrap_or(10).max(1) as u64;
        self.next_due = now + Duration::from_secs(period);
        if ok {
            self.successes += 1;
            self.failures = 0;
        } else {
            self.failures += 1;
            self.successes = 0;
        }
        let success_threshold = self.probe.success_threshold.unwrap_or(1).max(1);
        let failure_threshold = self.probe.failure_threshold.unwrap_or(3).max(1);
        let new = if self.successes >= success_threshold {
            Some(true)
        } else if self.failures >= failure_threshold {
            Some(false)
        } else {
            self.verdict
        };
        let changed = new != self.verdict;
        self.verdict = new;
        changed.then_some(new).flatten()
    }

    /// Runs the probe once now and records it.
    pub async fn run(&mut self, target: &ProbeTarget) -> Option<bool> {
        let ok = run_probe(&self.probe, target).await.is_ok();
        self.record(ok, Instant::now())
    }
}

/// Executes one probe; Err carries why it failed.
pub async fn run_probe(probe: &Probe, target: &ProbeTarget) -> Result<(), String> {
    let timeout = Duration::from_secs(probe.timeout_seconds.unwrap_or(1).max(1) as u64);
    let fut = async {
        if let Some(exec) = &probe.exec {
            return exec_probe(exec.command.as_deref().unwrap_or(&[]), target).await;
        }
        if let Some(tcp) = &probe.tcp_socket {
            let port = resolve_port(&tcp.port, &target.ports)?;
            let host = tcp.host.clone().unwrap_or_else(|| target.ip.to_string());
            return tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .map(|_| ())
                .map_err(|e| format!("tcp {host}:{port}: {e}"));
        }
        if let Some(http) = &probe.http_get {
            let port = resolve_port(&http.port, &target.ports)?;
            let host = http.host.clone().unwrap_or_else(|| target.ip.to_string());
            let path = http.path.clone().unwrap_or_else(|| "/".into());
            return http_get(&host, port, &path).await;
        }
        // grpc probes are not modelled: treated as passing (documented in the README).
        Ok(())
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(format!("probe timed out after {timeout:?}")),
    }
}

fn resolve_port(port: &IntOrString, named: &HashMap<String, u16>) -> Result<u16, String> {
    match port {
        IntOrString::Int(p) => u16::try_from(*p).map_err(|_| format!("bad port {p}")),
        IntOrString::String(name) => named
            .get(name)
            .copied()
            .or_else(|| name.parse().ok())
            .ok_or_else(|| format!("no container port named {name:?}")),
    }
}

async fn exec_probe(command: &[String], target: &ProbeTarget) -> Result<(), String> {
    let vars: HashMap<String, String> = target.env.iter().cloned().collect();
    let cmd: Vec<String> = command
        .iter()
        .map(|a| target.rewriter.rewrite(&expand_vars(a, &vars)))
        .collect();
    let (program, args) = resolve_argv("", &cmd, &[]).map_err(|e| e.to_string())?;
    let status = tokio::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(target.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&target.cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status()
        .await
        .map_err(|e| format!("exec: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("exec probe exited with {status}"))
    }
}

/// A bare HTTP/1.0 GET (hand-rolled: a probe needs only the status line; a client crate
/// would add a dependency for nothing). 200..=399 is success, like the kubelet.
async fn http_get(host: &str, port: u16, path: &str) -> Result<(), String> {
    let mut s = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("http {host}:{port}: {e}"))?;
    let req = format!(
        "GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/kiab\r\n\r\n"
    );
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| format!("http write: {e}"))?;
    let mut buf = vec![0u8; 256];
    let mut n = 0;
    while n < 12 {
        let r = s
            .read(&mut buf[n..])
            .await
            .map_err(|e| format!("http read: {e}"))?;
        if r == 0 {
            break;
        }
        n += r;
    }
    let line = String::from_utf8_lossy(&buf[..n]);
    let code: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad HTTP status line {line:?}"))?;
    if (200..400).contains(&code) {
        Ok(())
    } else {
        Err(format!("HTTP {code}"))
    }
}

/// Named container ports, for probes that refer to a port by name.
pub fn named_ports(c: &Container) -> HashMap<String, u16> {
    c.ports
        .iter()
        .flatten()
        .filter_map(|p| {
            let name = p.name.clone()?;
            Some((name, u16::try_from(p.container_port).ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(json: serde_json::Value) -> Probe {
        serde_json::from_value(json).expect("probe")
    }

    #[test]
    fn thresholds() {
        let now = Instant::now();
        let mut t = ProbeTracker::new(
            probe(
                serde_json::json!({"successThreshold": 2, "failureThreshold": 2, "periodSeconds": 1}),
            ),
            now,
        );
        assert!(t.due(now));
        assert_eq!(t.record(true, now), None);
        assert!(!t.due(now));
        assert_eq!(t.record(true, now), Some(true));
        assert_eq!(t.record(false, now), None);
        assert_eq!(t.record(false, now), Some(false));
        assert_eq!(t.verdict, Some(false));
    }

    #[tokio::test]
    async fn tcp_http_and_exec_probes() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = l.local_addr().expect("addr").port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut b = [0u8; 512];
                let _ = s.read(&mut b).await;
                let _ = s.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await;
            }
        });
        let target = ProbeTarget {
            ip: Ipv4Addr::LOCALHOST,
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("WANT".into(), "yes".into()),
            ],
            ports: [("redis".to_string(), port)].into_iter().collect(),
            rewriter: MountRewriter::default(),
            cwd: std::env::temp_dir(),
        };
        let ok = |v| {
            let p = probe(v);
            let t = target.clone();
            async move { run_probe(&p, &t).await }
        };
        assert!(ok(serde_json::json!({"tcpSocket": {"port": "redis"}}))
            .await
            .is_ok());
        assert!(
            ok(serde_json::json!({"httpGet": {"port": port, "path": "/healthz"}}))
                .await
                .is_ok()
        );
        assert!(
            ok(serde_json::json!({"exec": {"command": ["sh", "-c", "test \"$WANT\" = yes"]}}))
                .await
                .is_ok()
        );
        assert!(
            ok(serde_json::json!({"exec": {"command": ["sh", "-c", "exit 3"]}}))
                .await
                .is_err()
        );
        assert!(ok(serde_json::json!({"tcpSocket": {"port": "nope"}}))
            .await
            .is_err());
    }
}
