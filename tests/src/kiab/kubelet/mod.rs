//! The process kubelet: runs every Pod of the API as local processes (one pod worker task
//! per pod uid) and reports their status. It is the only "node" of the box, named `kiab`.

pub mod container;
pub mod env;
pub mod probe;
pub mod process;
pub mod volumes;
mod worker;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, info};

use self::process::ProcessTable;
use super::addr::AddressPool;

/// The node name reported for `spec.nodeName` field refs.
pub const NODE_NAME: &str = "kiab";

/// Kubelet settings.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Root of pod directories (`pods/`) and PVC directories (`pvc/`).
    pub state_dir: PathBuf,
    /// First pod address handed out (then upwards, never reused).
    pub ip_base: Ipv4Addr,
    /// Ports that must be free on an address before a pod gets it.
    pub probe_ports: Vec<u16>,
    /// Poll period of the pod list and of each pod worker.
    pub tick: Duration,
    /// Crash back-off: first delay, doubled per crash up to `max_backoff` (Kubernetes uses
    /// 10 s and 5 min; shorter here so tests and the demo recover quickly).
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl KubeletConfig {
    pub fn new(state_dir: PathBuf, ip_base: Ipv4Addr) -> Self {
        Self {
            state_dir,
            ip_base,
            probe_ports: vec![6379, 16379],
            tick: Duration::from_millis(200),
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(20),
        }
    }
}

/// Shared by the kubelet loop and its pod workers.
pub(crate) struct Ctx {
    pub client: Client,
    pub cfg: KubeletConfig,
    pub pool: AddressPool,
    pub table: Arc<ProcessTable>,
    /// Set when the box stops: workers stop their containers and exit without restarting them.
    pub stopping: std::sync::atomic::AtomicBool,
}

struct Worker {
    tx: watch::Sender<Option<Pod>>,
    handle: JoinHandle<()>,
}

/// Runs the kubelet until `shutdown` flips to true, then stops every pod process
/// (SIGTERM, a short grace, SIGKILL).
pub async fn run(
    client: Client,
    cfg: KubeletConfig,
    table: Arc<ProcessTable>,
    mut shutdown: watch::Receiver<bool>,
) {
    let pool = AddressPool::new(cfg.ip_base, cfg.probe_ports.clone());
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        cfg: cfg.clone(),
        pool,
        table: table.clone(),
        stopping: std::sync::atomic::AtomicBool::new(false),
    });
    let api: Api<Pod> = Api::all(client);
    let mut workers: HashMap<String, Worker> = HashMap::new();
    info!(state_dir = %cfg.state_dir.display(), ip_base = %cfg.ip_base, "kubelet started");
    loop {
        if *shutdown.borrow() {
            break;
        }
        match api.list(&ListParams::default()).await {
            Ok(list) => sync(&ctx, &mut workers, list.items).await,
            Err(e) => debug!(error = %e, "kubelet: pod list failed"),
        }
        tokio::select! {
            _ = shutdown.changed() => {}
            _ = tokio::time::sleep(cfg.tick) => {}
        }
    }
    info!(pods = workers.len(), "kubelet stopping");
    ctx.stopping
        .store(true, std::sync::atomic::Ordering::SeqCst);
    for w in workers.values() {
        // Wake each worker so it sees `stopping` now.
        w.tx.send_modify(|_| {});
    }
    for _ in 0..200 {
        if workers.values().all(|w| w.handle.is_finished()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (_, w) in workers.drain() {
        w.handle.abort();
        let _ = w.handle.await;
    }
    table.kill_all();
}

async fn sync(ctx: &Arc<Ctx>, workers: &mut HashMap<String, Worker>, pods: Vec<Pod>) {
    let mut seen = std::collections::HashSet::new();
    for pod in pods {
        let Some(uid) = pod.metadata.uid.clone() else {
            continue;
        };
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        if node.is_some_and(|n| n != NODE_NAME) {
            continue;
        }
        seen.insert(uid.clone());
        if node.is_none() && !workers.contains_key(&uid) {
            bind(ctx, &pod).await;
        }
        if let Some(w) = workers.get(&uid) {
            w.tx.send_replace(Some(pod));
            continue;
        }
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        if pod.metadata.deletion_timestamp.is_some() {
            // Nothing of ours runs for it (e.g. the box restarted): finish the deletion.
            if let Some(name) = pod.metadata.name.as_deref() {
                let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
                let napi: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
                let _ = napi
                    .delete(name, &DeleteParams::default().grace_period(0))
                    .await;
            }
            continue;
        }
        if finished {
            continue;
        }
        let (tx, rx) = watch::channel(Some(pod));
        let handle = tokio::spawn(worker::run_pod(ctx.clone(), rx));
        workers.insert(uid, Worker { tx, handle });
    }
    workers.retain(|uid, w| {
        if !seen.contains(uid) {
            // Gone from the API (force-deleted): the worker stops its processes and exits.
            w.tx.send_replace(None);
        }
        !w.handle.is_finished()
    });
}

/// Stands in for the scheduler: binds an unscheduled pod to this node (so the API treats its
/// deletion as graceful, like a scheduled pod's). Failure is harmless: the pod runs anyway.
async fn bind(ctx: &Ctx, pod: &Pod) {
    let (Some(name), ns) = (
        pod.metadata.name.as_deref(),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
    ) else {
        return;
    };
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let patch = serde_json::json!({"spec": {"nodeName": NODE_NAME}});
    if let Err(e) = api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        debug!(pod = name, error = %e, "binding to node failed");
    }
}
