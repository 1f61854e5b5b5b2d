//! One container's runtime state: its process, restart bookkeeping with back-off, probes,
//! and the ContainerStatus a kubelet reports for it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::time::Instant;

use super::probe::{ProbeTarget, ProbeTracker};
use super::process::Running;

pub fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// What the container is doing, in Kubernetes terms.
#[derive(Debug, Clone)]
pub enum CState {
    Waiting {
        reason: String,
        message: Option<String>,
    },
    Running {
        since: Time,
    },
    Terminated {
        exit_code: i32,
        reason: String,
        started: Option<Time>,
        finished: Time,
    },
}

impl CState {
    fn to_k8s(&self) -> ContainerState {
        match self {
            CState::Waiting { reason, message } => ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.clone()),
                    message: message.clone(),
                }),
                ..Default::default()
            },
            CState::Running { since } => ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(since.clone()),
                }),
                ..Default::default()
            },
            CState::Terminated {
                exit_code,
                reason,
                started,
                finished,
            } => ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: *exit_code,
                    reason: Some(reason.clone()),
                    started_at: started.clone(),
                    finished_at: Some(finished.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            },
        }
    }
}

/// Runtime of one container of a pod.
#[derive(Debug)]
pub struct ContainerRt {
    pub spec: Container,
    pub process: Option<Running>,
    pub state: CState,
    pub last_terminated: Option<CState>,
    pub restart_count: i32,
    /// When the next (re)start may happen; None = not scheduled (never start again).
    pub next_start: Option<Instant>,
    pub backoff: Duration,
    pub started_instant: Option<Instant>,
    /// Startup probe passed (or none).
    pub started: bool,
    pub ready: bool,
    pub startup: Option<ProbeTracker>,
    pub liveness: Option<ProbeTracker>,
    pub readiness: Option<ProbeTracker>,
    pub target: Option<ProbeTarget>,
}

impl ContainerRt {
    pub fn new(spec: Container, initial_backoff: Duration) -> Self {
        Self {
            spec,
            process: None,
            state: CState::Waiting {
                reason: "ContainerCreating".into(),
                message: None,
            },
            last_terminated: None,
            restart_count: 0,
            next_start: Some(Instant::now()),
            backoff: initial_backoff,
            started_instant: None,
            started: false,
            ready: false,
            startup: None,
            liveness: None,
            readiness: None,
            target: None,
        }
    }

    /// Records a freshly started process and arms its probes.
    pub fn on_started(&mut self, process: Running, target: ProbeTarget) {
        let at = Instant::now();
        if self.started_instant.is_some() || self.last_terminated.is_some() {
            self.restart_count += 1;
        }
        self.process = Some(process);
        self.state = CState::Running { since: now() };
        self.started_instant = Some(at);
        self.next_start = None;
        self.startup = self
            .spec
            .startup_probe
            .clone()
            .map(|p| ProbeTracker::new(p, at));
        self.liveness = self
            .spec
            .liveness_probe
            .clone()
            .map(|p| ProbeTracker::new(p, at));
        self.readiness = self
            .spec
            .readiness_probe
            .clone()
            .map(|p| ProbeTracker::new(p, at));
        self.started = self.startup.is_none();
        self.ready = self.started && self.readiness.is_none();
        self.target = Some(target);
    }

    /// Records an exit and schedules a restart if the policy wants one.
    pub fn on_exited(
        &mut self,
        exit_code: i32,
        reason: Option<&str>,
        restart_policy: &str,
        initial_backoff: Duration,
        max_backoff: Duration,
    ) {
        let started = match &self.state {
            CState::Running { since } => Some(since.clone()),
            _ => None,
        };
        let term = CState::Terminated {
            exit_code,
            reason: reason
                .map(str::to_string)
                .unwrap_or_else(|| if exit_code == 0 { "Completed" } else { "Error" }.into()),
            started,
            finished: now(),
        };
        self.process = None;
        self.ready = false;
        self.started = false;
        self.target = None;
        let restart = match restart_policy {
            "Never" => false,
            "OnFailure" => exit_code != 0,
            _ => true,
        };
        if !restart {
            self.state = term;
            self.next_start = None;
            return;
        }
        // A container that ran for a while starts over with a short back-off.
        let ran = self
            .started_instant
            .map(|s| s.elapsed())
            .unwrap_or_default();
        if ran > Duration::from_secs(60) {
            self.backoff = initial_backoff;
        }
        self.last_terminated = Some(term);
        self.state = CState::Waiting {
            reason: "CrashLoopBackOff".into(),
            message: Some(format!(
                "back-off {:?} restarting failed container {}",
                self.backoff, self.spec.name
            )),
        };
        self.next_start = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(max_backoff);
    }

    /// Start failed before a process existed (binary missing, secret missing...).
    pub fn on_start_failed(&mut self, reason: &str, message: String, max_backoff: Duration) {
        self.state = CState::Waiting {
            reason: reason.into(),
            message: Some(message),
        };
        self.next_start = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(max_backoff);
    }

    pub fn is_running(&self) -> bool {
        self.process.is_some()
    }

    pub fn status(&self) -> ContainerStatus {
        let pid = self.process.as_ref().map(|p| p.pid());
        ContainerStatus {
            name: self.spec.name.clone(),
            image: self.spec.image.clone().unwrap_or_default(),
            image_id: format!("kiab://{}", self.spec.image.clone().unwrap_or_default()),
            container_id: pid.map(|p| format!("kiab://{p}")),
            ready: self.ready,
            started: Some(self.started && self.is_running()),
            restart_count: self.restart_count,
            state: Some(self.state.to_k8s()),
            last_state: self.last_terminated.as_ref().map(CState::to_k8s),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_policy_is_honoured() {
        let c: Container = serde_json::from_value(serde_json::json!({"name": "c"})).expect("c");
        let ms = Duration::from_millis;
        let mut rt = ContainerRt::new(c.clone(), ms(100));
        rt.on_exited(1, None, "Always", ms(100), ms(300));
        assert!(rt.next_start.is_some());
        assert_eq!(rt.backoff, ms(200));
        rt.on_exited(1, None, "Always", ms(100), ms(300));
        assert_eq!(rt.backoff, ms(300));
        assert!(
            matches!(rt.state, CState::Waiting { ref reason, .. } if reason == "CrashLoopBackOff")
        );
        assert!(rt.status().last_state.is_some());

        let mut never = ContainerRt::new(c.clone(), ms(100));
        never.on_exited(0, None, "OnFailure", ms(100), ms(300));
        assert!(never.next_start.is_none());
        assert!(
            matches!(never.state, CState::Terminated { exit_code: 0, ref reason, .. } if reason == "Completed")
        );
        let mut never = ContainerRt::new(c, ms(100));
        never.on_exited(2, None, "Never", ms(100), ms(300));
        assert!(never.next_start.is_none());
    }
}
