//! The pod worker: one task per pod (by uid) that sets up its address and volumes, runs its
//! containers, probes them, reports status, and tears everything down on deletion.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    HostIP, PersistentVolumeClaim, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::Api;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, instrument, warn};

use super::container::{now, CState, ContainerRt};
use super::env::{container_env, PodSources};
use super::probe::{named_ports, ProbeTarget};
use super::process::{spawn, Launch};
use super::volumes::{claims, mounts_for, prepare};
use super::Ctx;
use crate::kiab::error::KiabError;
use crate::kiab::expand::expand_vars;
use crate::kiab::images::resolve_argv;

/// How often config volumes are re-synced from their ConfigMaps/Secrets.
const VOLUME_REFRESH: Duration = Duration::from_secs(2);
/// Longest a pod may take to stop when the whole box stops.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

struct PodRt {
    ctx: Arc<Ctx>,
    pod: Pod,
    name: String,
    ns: String,
    ip: Ipv4Addr,
    dir: PathBuf,
    volumes: Option<HashMap<String, PathBuf>>,
    setup_error: Option<String>,
    last_refresh: Instant,
    containers: Vec<ContainerRt>,
    start_time: Time,
    conditions: BTreeMap<&'static str, (bool, Time)>,
    last_status: Option<serde_json::Value>,
}

/// Runs one pod until it is deleted (or the kubelet drops the channel and aborts us).
pub(super) async fn run_pod(ctx: Arc<Ctx>, mut rx: watch::Receiver<Option<Pod>>) {
    let Some(pod) = rx.borrow_and_update().clone() else {
        return;
    };
    let ip = match ctx.pool.allocate() {
        Ok(ip) => ip,
        Err(e) => {
            warn!(error = %e, "no address for pod");
            return;
        }
    };
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let dir = ctx
        .cfg
        .state_dir
        .join("pods")
        .join(format!("{ns}_{name}_{uid}"));
    info!(pod = %name, namespace = %ns, %ip, "pod admitted");
    let containers = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| ContainerRt::new(c.clone(), ctx.cfg.initial_backoff))
        .collect();
    let mut rt = PodRt {
        ctx: ctx.clone(),
        pod,
        name,
        ns,
        ip,
        dir,
        volumes: None,
        setup_error: None,
        last_refresh: Instant::now(),
        containers,
        start_time: now(),
        conditions: BTreeMap::new(),
        last_status: None,
    };
    loop {
        if ctx.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            let grace = rt.grace().min(SHUTDOWN_GRACE);
            rt.stop_all(grace).await;
            return;
        }
        let latest = rx.borrow_and_update().clone();
        match latest {
            None => {
                // Removed without graceful deletion (force delete): stop and forget.
                rt.stop_all(rt.grace()).await;
                return;
            }
            Some(p) if p.metadata.deletion_timestamp.is_some() => {
                rt.pod = p;
                rt.terminate().await;
                return;
            }
            Some(p) => rt.pod = p,
        }
        rt.step().await;
        rt.report().await;
        let tick = ctx.cfg.tick;
        tokio::select! {
            r = rx.changed() => {
                if r.is_err() {
                    // Kubelet is shutting down; it aborts this task after signalling.
                    tokio::time::sleep(tick).await;
                }
            }
            _ = tokio::time::sleep(tick) => {}
        }
    }
}

impl PodRt {
    fn grace(&self) -> Duration {
        let secs = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .or_else(|| {
                self.pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30)
            .max(0);
        Duration::from_secs(secs as u64)
    }

    fn restart_policy(&self) -> String {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into())
    }

    /// Graceful deletion: SIGTERM, grace period, SIGKILL, then remove the object.
    #[instrument(skip(self), fields(pod = %self.name, ns = %self.ns))]
    async fn terminate(&mut self) {
        let grace = self.grace();
        info!(pod = %self.name, ?grace, "terminating pod");
        self.stop_all(grace).await;
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: self.pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        for attempt in 0..20 {
            match api.delete(&self.name, &dp).await {
                Ok(_) => return,
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => return,
                Err(e) => {
                    debug!(pod = %self.name, attempt, error = %e, "final pod delete failed");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
    }

    async fn stop_all(&mut self, grace: Duration) {
        let stops = self.containers.iter_mut().filter_map(|c| {
            let name = c.spec.name.clone();
            c.process.take().map(|mut p| async move {
                let code = p.stop(grace).await;
                debug!(container = %name, code, "container stopped");
            })
        });
        futures::future::join_all(stops).await;
    }

    /// One pass: set up volumes, start/reap containers, run due probes.
    async fn step(&mut self) {
        if self.volumes.is_none() || self.last_refresh.elapsed() >= VOLUME_REFRESH {
            self.last_refresh = Instant::now();
            match self.setup_volumes().await {
                Ok(v) => {
                    self.volumes = Some(v);
                    self.setup_error = None;
                }
                Err(e) => {
                    if self.volumes.is_none() {
                        self.setup_error = Some(e.to_string());
                        for c in &mut self.containers {
                            c.state = CState::Waiting {
                                reason: "ContainerCreating".into(),
                                message: Some(e.to_string()),
                            };
                        }
                    }
                    return;
                }
            }
        }
        let policy = self.restart_policy();
        let (ib, mb) = (self.ctx.cfg.initial_backoff, self.ctx.cfg.max_backoff);
        for i in 0..self.containers.len() {
            // Reap.
            let exited = self.containers[i]
                .process
                .as_mut()
                .and_then(|p| p.try_exit());
            if let Some(code) = exited {
                info!(pod = %self.name, container = %self.containers[i].spec.name, code, "container exited");
                self.containers[i].on_exited(code, None, &policy, ib, mb);
            }
            // Start when due.
            let due = self.containers[i]
                .next_start
                .is_some_and(|t| Instant::now() >= t);
            if self.containers[i].process.is_none() && due {
                if let Err(e) = self.start_container(i).await {
                    warn!(pod = %self.name, error = %e, "container start failed");
                    let reason = match e {
                        KiabError::Image(_) => "ErrImagePull",
                        _ => "CreateContainerConfigError",
                    };
                    self.containers[i].on_start_failed(reason, e.to_string(), mb);
                }
            }
            self.probe(i, &policy).await;
        }
    }

    async fn setup_volumes(&self) -> Result<HashMap<String, PathBuf>, KiabError> {
        let sources = PodSources::fetch(&self.ctx.client, &self.pod).await?;
        let pvc_api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.ctx.client.clone(), &self.ns);
        let mut existing = HashMap::new();
        for c in claims(&self.pod) {
            if let Some(pvc) = pvc_api.get_opt(&c).await? {
                existing.insert(c, pvc.metadata.uid.unwrap_or_default());
            }
        }
        prepare(
            &self.pod,
            &sources,
            &self.dir,
            &self.ctx.cfg.state_dir,
            &existing,
        )
    }

    #[instrument(skip(self), fields(pod = %self.name, ns = %self.ns, ip = %self.ip))]
    async fn start_container(&mut self, i: usize) -> Result<(), KiabError> {
        let volumes = self.volumes.clone().unwrap_or_default();
        let spec = self.containers[i].spec.clone();
        let sources = PodSources::fetch(&self.ctx.client, &self.pod).await?;
        let rewriter = mounts_for(&spec, &volumes)?;
        let ip = self.ip.to_string();
        let cenv = container_env(&self.pod, &spec, &ip, &sources, &rewriter)?;
        let vars: HashMap<String, String> = cenv.iter().cloned().collect();
        let expand = |v: &Option<Vec<String>>| -> Vec<String> {
            v.iter()
                .flatten()
                .map(|a| rewriter.rewrite(&expand_vars(a, &vars)))
                .collect()
        };
        let command = expand(&spec.command);
        let args = expand(&spec.args);
        let image = spec.image.clone().unwrap_or_default();
        let (program, args) = resolve_argv(&image, &command, &args)?;
        let mut env = vec![
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
            ),
            ("HOME".to_string(), self.dir.to_string_lossy().into_owned()),
            ("HOSTNAME".to_string(), self.name.clone()),
        ];
        env.retain(|(k, _)| !vars.contains_key(k));
        env.extend(cenv);
        let cwd = spec
            .working_dir
            .as_ref()
            .map(|w| PathBuf::from(rewriter.rewrite(w)))
            .filter(|p| p.is_dir())
            .unwrap_or_else(|| self.dir.clone());
        std::fs::create_dir_all(&cwd).map_err(|e| KiabError::io(&cwd, e))?;
        let launch = Launch {
            program,
            args,
            env: env.clone(),
            cwd: cwd.clone(),
            log_file: self.dir.join("logs").join(format!("{}.log", spec.name)),
        };
        info!(pod = %self.name, container = %spec.name, program = %launch.program.display(), args = ?launch.args, "starting container");
        let process = spawn(&launch, &self.ctx.table)?;
        let target = ProbeTarget {
            ip: self.ip,
            env,
            ports: named_ports(&spec),
            rewriter,
            cwd,
        };
        self.containers[i].on_started(process, target);
        Ok(())
    }

    /// Runs due probes of container `i` and acts on verdicts.
    async fn probe(&mut self, i: usize, policy: &str) {
        let c = &mut self.containers[i];
        let Some(target) = c.target.clone() else {
            return;
        };
        if c.process.is_none() {
            return;
        }
        let now_i = Instant::now();
        let mut kill_reason = None;
        if !c.started {
            if let Some(t) = c.startup.as_mut().filter(|t| t.due(now_i)) {
                t.run(&target).await;
                match t.verdict {
                    Some(true) => {
                        c.started = true;
                        c.ready = c.readiness.is_none();
                    }
                    Some(false) => kill_reason = Some("startup probe failed"),
                    None => {}
                }
            }
        } else {
            if let Some(t) = c.liveness.as_mut().filter(|t| t.due(now_i)) {
                t.run(&target).await;
                if t.verdict == Some(false) {
                    kill_reason = Some("liveness probe failed");
                }
            }
            if let Some(t) = c.readiness.as_mut().filter(|t| t.due(now_i)) {
                t.run(&target).await;
                c.ready = t.verdict == Some(true);
            }
        }
        if let Some(reason) = kill_reason {
            warn!(pod = %self.name, container = %c.spec.name, reason, "killing container");
            let grace = self.grace();
            let c = &mut self.containers[i];
            if let Some(mut p) = c.process.take() {
                let code = p.stop(grace).await;
                let (ib, mb) = (self.ctx.cfg.initial_backoff, self.ctx.cfg.max_backoff);
                // Kubernetes restarts a container whose liveness failed even under OnFailure.
                let policy = if policy == "Never" { "Never" } else { "Always" };
                c.on_exited(code, Some("Error"), policy, ib, mb);
            }
        }
    }

    fn condition(&mut self, kind: &'static str, value: bool) -> PodCondition {
        let entry = self.conditions.entry(kind).or_insert((value, now()));
        if entry.0 != value {
            *entry = (value, now());
        }
        PodCondition {
            type_: kind.to_string(),
            status: if value { "True" } else { "False" }.to_string(),
            last_transition_time: Some(entry.1.clone()),
            ..Default::default()
        }
    }

    fn build_status(&mut self) -> PodStatus {
        let any_running = self.containers.iter().any(ContainerRt::is_running);
        let all_done = !self.containers.is_empty()
            && self.containers.iter().all(|c| {
                !c.is_running()
                    && c.next_start.is_none()
                    && matches!(c.state, CState::Terminated { .. })
            });
        let ever_started = self.containers.iter().any(|c| c.started_instant.is_some());
        let phase = if all_done {
            let ok = self
                .containers
                .iter()
                .all(|c| matches!(c.state, CState::Terminated { exit_code: 0, .. }));
            if ok {
                "Succeeded"
            } else {
                "Failed"
            }
        } else if any_running || ever_started {
            "Running"
        } else {
            "Pending"
        };
        let ready = !self.containers.is_empty() && self.containers.iter().all(|c| c.ready);
        let initialized = self.volumes.is_some();
        let conditions = vec![
            self.condition("PodScheduled", true),
            self.condition("Initialized", initialized),
            self.condition("ContainersReady", ready),
            self.condition("Ready", ready),
        ];
        let ip = self.ip.to_string();
        PodStatus {
            phase: Some(phase.to_string()),
            conditions: Some(conditions),
            host_ip: Some("127.0.0.1".into()),
            host_ips: Some(vec![HostIP {
                ip: "127.0.0.1".into(),
            }]),
            pod_ip: Some(ip.clone()),
            pod_ips: Some(vec![PodIP { ip }]),
            start_time: Some(self.start_time.clone()),
            container_statuses: Some(self.containers.iter().map(ContainerRt::status).collect()),
            message: self.setup_error.clone(),
            qos_class: Some("BestEffort".into()),
            ..Default::default()
        }
    }

    /// Patches status when it changed since the last successful report.
    async fn report(&mut self) {
        let status = self.build_status();
        let Ok(value) = serde_json::to_value(&status) else {
            return;
        };
        if self.last_status.as_ref() == Some(&value) {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let patch = serde_json::json!({ "status": value });
        match api
            .patch_status(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => self.last_status = Some(value),
            Err(e) => debug!(pod = %self.name, error = %e, "status patch failed; will retry"),
        }
    }
}
