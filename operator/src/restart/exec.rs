//! I/O of the rolling restart: delete one pod, or fail one shard over.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::Client;
use tracing::{info, instrument};

use super::{PodRef, RestartAction};
use tessera_topology::{EngineOptions, TopologyError};

/// Why a restart action failed (the next reconcile re-plans from what it observes).
#[derive(Debug, thiserror::Error)]
pub enum RestartError {
    #[error("deleting pod {0}: {1}")]
    Delete(String, kube::Error),
    #[error("failover: {0}")]
    Topology(#[from] TopologyError),
}

/// Runs one action; returns what was done, for the Event.
#[instrument(skip_all, fields(action = %action.describe()))]
pub async fn execute(
    client: &Client,
    ns: &str,
    action: &RestartAction,
    opts: &EngineOptions,
) -> Result<String, RestartError> {
    match action {
        RestartAction::DeleteReplica(p) | RestartAction::DeleteLoneMaster(p) => {
            delete_pod(client, ns, p).await?;
        }
        RestartAction::Failover {
            replica,
            host,
            port,
            ..
        } => {
            tessera_topology::execute::failover_to(&replica.name, host, *port, opts).await?;
        }
    }
    Ok(action.describe())
}

async fn delete_pod(client: &Client, ns: &str, p: &PodRef) -> Result<(), RestartError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: p.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    info!(pod = %p.name, "deleting pod for the rolling restart");
    match api.delete(&p.name, &dp).await {
        Ok(_) => Ok(()),
        // Already gone, or already replaced (uid precondition): nothing to do.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(RestartError::Delete(p.name.clone(), e)),
    }
}
