//! kube-in-a-box's Kubernetes API server emulator: plain HTTP on loopback, serving the subset of
//! the Kubernetes API that kubectl and kube-rs (the tessera operator) use. See
//! `tests/src/kiab/README.md` for what differs from a real API server.

mod cel;
mod crd;
mod defaults;
mod discovery;
pub mod error;
mod events;
mod gc;
mod http;
mod logs;
mod meta;
mod openapi;
pub mod ops;
mod patch;
mod pdb;
mod persist;
mod proto;
pub mod registry;
mod schema;
pub mod selectors;
mod server;
mod ssa;
pub mod store;
mod table;
pub mod testing;
mod watch;

pub use error::ApiError;
pub use logs::LogSource;
pub use registry::{GroupResource, ResourceType};
pub use store::Store;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch as tokio_watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("binding {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("loading state from {dir}: {source}")]
    Load {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// A running API server. Dropping it stops the server (without a final snapshot).
pub struct ApiServerHandle {
    addr: SocketAddr,
    store: Store,
    state_dir: Option<PathBuf>,
    shutdown: tokio_watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    logs: std::sync::Arc<parking_lot::RwLock<Option<LogSource>>>,
}

impl ApiServerHandle {
    /// The bound address (use it in a kubeconfig).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The in-process store (tests read and write it directly).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Installs the hook `kubectl logs` reads through: (namespace, pod, container) -> log file.
    pub fn set_log_source(&self, source: LogSource) {
        *self.logs.write() = Some(source);
    }

    /// A kubeconfig pointing at this server.
    pub fn kubeconfig(&self) -> String {
        kubeconfig(self.addr)
    }

    /// Stops accepting, ends every connection and watch, writes the final snapshot.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        if let Some(dir) = &self.state_dir {
            if let Err(e) = persist::save(&self.store, dir) {
                warn!(error = %e, "final snapshot failed");
            }
        }
    }
}

impl Drop for ApiServerHandle {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A kubeconfig (YAML) for an API server at `addr`, context `kiab`, namespace `default`.
pub fn kubeconfig(addr: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kiab\n  cluster:\n    server: http://{addr}\n\
         contexts:\n- name: kiab\n  context:\n    cluster: kiab\n    user: kiab\n    namespace: default\n\
         current-context: kiab\nusers:\n- name: kiab\n  user: {{}}\npreferences: {{}}\n"
    )
}

fn seed(store: &Store) {
    let rt = store.registry().get("", "v1", "namespaces").cloned();
    let Some(rt) = rt else { return };
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        if store
            .get(&GroupResource::new("", "namespaces"), "", ns)
            .is_none()
        {
            let _ = ops::create(
                store,
                &rt,
                "",
                json!({"metadata": {"name": ns}}),
                &ops::WriteOpts::default(),
            );
        }
    }
}

/// Starts the API server on `addr` (port 0 picks a free one). With `state_dir`, the store is
/// loaded from and periodically saved to `state_dir/store.json`.
pub async fn serve(
    addr: SocketAddr,
    state_dir: Option<PathBuf>,
) -> Result<ApiServerHandle, ServeError> {
    let store = Store::new();
    if let Some(dir) = &state_dir {
        persist::load(&store, dir).map_err(|source| ServeError::Load {
            dir: dir.clone(),
            source,
        })?;
    }
    seed(&store);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;
    let (tx, rx) = tokio_watch::channel(false);
    let logs = std::sync::Arc::new(parking_lot::RwLock::new(None));
    let state = server::State {
        store: store.clone(),
        addr,
        shutdown: rx.clone(),
        logs: logs.clone(),
    };
    let mut tasks = vec![tokio::spawn(accept_loop(listener, state))];
    tasks.push(tokio::spawn(gc::run(store.clone(), rx.clone())));
    tasks.push(tokio::spawn(pdb::run(store.clone(), rx.clone())));
    if let Some(dir) = state_dir.clone() {
        tasks.push(tokio::spawn(snapshot_loop(store.clone(), dir, rx.clone())));
    }
    info!(%addr, "kiab api server listening");
    Ok(ApiServerHandle {
        addr,
        store,
        state_dir,
        shutdown: tx,
        tasks,
        logs,
    })
}

async fn accept_loop(listener: TcpListener, state: server::State) {
    let mut shutdown = state.shutdown.clone();
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            _ = shutdown.changed() => return,
        };
        let (stream, _) = match conn {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let st = state.clone();
        let mut stop = state.shutdown.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let st = st.clone();
                async move { Ok::<_, std::convert::Infallible>(server::handle(st, req).await) }
            });
            let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                _ = conn => {}
                _ = stop.changed() => {}
            }
        });
    }
}

async fn snapshot_loop(store: Store, dir: PathBuf, mut shutdown: tokio_watch::Receiver<bool>) {
    let mut last = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
            _ = shutdown.changed() => return,
        }
        let rv = store.resource_version();
        if rv != last {
            match persist::save(&store, &dir) {
                Ok(()) => last = rv,
                Err(e) => warn!(error = %e, "snapshot failed"),
            }
        }
    }
}
