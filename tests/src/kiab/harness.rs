//! `KubeInABox`: the API server, the StatefulSet controller and the process kubelet in one
//! value, for tests (in-process) and for the `kube-in-a-box` binary. Dropping it kills every
//! pod process it started.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde::Deserialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

use super::api::{self, ApiServerHandle};
use super::error::KiabError;
use super::kubelet::{self, process::ProcessTable, KubeletConfig};
use super::sts;

/// How to start a box.
#[derive(Debug, Clone)]
pub struct BoxConfig {
    /// Holds `kubeconfig`, `api/` (the store, when `persist`), `pods/` and `pvc/`.
    pub state_dir: PathBuf,
    /// API server address; port 0 picks a free port.
    pub api_addr: SocketAddr,
    /// First pod address (each box in one test binary should use its own range).
    pub ip_base: Ipv4Addr,
    /// Keep the API objects in `state_dir/api` across restarts.
    pub persist: bool,
    /// Controller and kubelet poll period.
    pub tick: Duration,
}

impl BoxConfig {
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        Self {
            state_dir: state_dir.into(),
            api_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            ip_base: Ipv4Addr::new(127, 0, 1, 1),
            persist: false,
            tick: Duration::from_millis(200),
        }
    }
}

/// A running kube-in-a-box.
pub struct KubeInABox {
    api: Option<ApiServerHandle>,
    client: Client,
    kubeconfig: PathBuf,
    state_dir: PathBuf,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    table: Arc<ProcessTable>,
}

impl KubeInABox {
    /// Starts the API server, the StatefulSet controller and the kubelet; writes
    /// `state_dir/kubeconfig`.
    pub async fn start(cfg: BoxConfig) -> Result<Self, KiabError> {
        std::fs::create_dir_all(&cfg.state_dir).map_err(|e| KiabError::io(&cfg.state_dir, e))?;
        let api_dir = cfg.persist.then(|| cfg.state_dir.join("api"));
        if let Some(d) = &api_dir {
            std::fs::create_dir_all(d).map_err(|e| KiabError::io(d, e))?;
        }
        let handle = api::serve(cfg.api_addr, api_dir)
            .await
            .map_err(|e| KiabError::Other(format!("api server: {e}")))?;
        let kubeconfig = cfg.state_dir.join("kubeconfig");
        std::fs::write(&kubeconfig, handle.kubeconfig())
            .map_err(|e| KiabError::io(&kubeconfig, e))?;
        let logs_root = cfg.state_dir.clone();
        handle.set_log_source(Arc::new(move |ns: &str, pod: &str, container: &str| {
            pod_log(&logs_root, ns, pod, container)
        }));
        let client = client_for(handle.addr())?;
        let (tx, rx) = watch::channel(false);
        let table = ProcessTable::new();
        let mut kcfg = KubeletConfig::new(cfg.state_dir.clone(), cfg.ip_base);
        kcfg.tick = cfg.tick;
        let tasks = vec![
            tokio::spawn(sts::run(client.clone(), cfg.tick, rx.clone())),
            tokio::spawn(kubelet::run(client.clone(), kcfg, table.clone(), rx)),
        ];
        info!(api = %handle.url(), state_dir = %cfg.state_dir.display(), "kube-in-a-box up");
        Ok(Self {
            api: Some(handle),
            client,
            kubeconfig,
            state_dir: cfg.state_dir,
            shutdown: tx,
            tasks,
            table,
        })
    }

    /// A kube client for the box's API.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// `state_dir/kubeconfig`, for kubectl and the operator (`KUBECONFIG=...`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// `http://127.0.0.1:PORT`.
    pub fn api_url(&self) -> String {
        self.api.as_ref().map(|a| a.url()).unwrap_or_default()
    }

    /// Number of live pod process groups.
    pub fn live_processes(&self) -> usize {
        self.table.len()
    }

    /// Log file of a pod's container (the newest pod with that name).
    pub fn pod_log(&self, namespace: &str, pod: &str, container: &str) -> Option<PathBuf> {
        pod_log(&self.state_dir, namespace, pod, container)
    }

    /// Server-side applies every CRD in the `*.yaml` files of `dir`.
    pub async fn apply_crds(&self, dir: &Path) -> Result<usize, KiabError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let mut n = 0;
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| KiabError::io(dir, e))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|e| KiabError::io(&f, e))?;
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let value = serde_json::Value::deserialize(doc)
                    .map_err(|e| KiabError::Spec(format!("{}: {e}", f.display())))?;
                if value.is_null()
                    || value.get("kind").and_then(|k| k.as_str())
                        != Some("CustomResourceDefinition")
                {
                    continue;
                }
                let crd: CustomResourceDefinition = serde_json::from_value(value)
                    .map_err(|e| KiabError::Spec(format!("{}: {e}", f.display())))?;
                let name = crd.metadata.name.clone().unwrap_or_default();
                api.patch(
                    &name,
                    &PatchParams::apply("kube-in-a-box").force(),
                    &Patch::Apply(&crd),
                )
                .await?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Stops the controllers and kubelet (pods get SIGTERM, then SIGKILL), then the API.
    pub async fn stop(mut self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
        }
        self.table.kill_all();
        if let Some(api) = self.api.take() {
            api.shutdown().await;
        }
    }
}

impl Drop for KubeInABox {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        self.table.kill_all();
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A kube client for a plain-HTTP API server on loopback.
pub fn client_for(addr: SocketAddr) -> Result<Client, KiabError> {
    let url = format!("http://{addr}")
        .parse()
        .map_err(|e| KiabError::Other(format!("api url: {e}")))?;
    let mut config = kube::Config::new(url);
    config.default_namespace = "default".into();
    config.read_timeout = Some(Duration::from_secs(30));
    Client::try_from(config).map_err(KiabError::Kube)
}

/// `state_dir/pods/<ns>_<pod>_<uid>/logs/<container>.log` of the newest pod with that name
/// (pod and namespace names are DNS labels, so `_` separates them unambiguously).
fn pod_log(state_dir: &Path, namespace: &str, pod: &str, container: &str) -> Option<PathBuf> {
    let prefix = format!("{namespace}_{pod}_");
    let dir = std::fs::read_dir(state_dir.join("pods")).ok()?;
    let newest = dir
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter_map(|e| {
            let modified = e.metadata().and_then(|m| m.modified()).ok()?;
            Some((modified, e.path()))
        })
        .max()?
        .1;
    let logs = newest.join("logs");
    if !container.is_empty() {
        return Some(logs.join(format!("{container}.log")));
    }
    // No container named: the only (or first) log file.
    let mut files: Vec<PathBuf> = std::fs::read_dir(&logs)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    files.into_iter().next()
}
