//! I/O of the rolling restart: delete one pod, or fail one shard over.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::Client;
use tracing::{info, instrument, warn};

use super::{PodRef, RestartAction};
use tessera_topology::conn::{cluster, connect};
use tessera_topology::nodes::parse_cluster_nodes;
use tessera_topology::{EngineOptions, TopologyError};

/// How long one reconcile waits for a manual failover to show (redis-server gives up on a
/// manual failover after 5 s, so a retry after this never overlaps the previous attempt).
const FAILOVER_WAIT: Duration = Duration::from_secs(15);

/// Why a restart action failed (the next reconcile re-plans from what it observes).
#[derive(Debug, thiserror::Error)]
pub enum RestartError {
    #[error("deleting pod {0}: {1}")]
    Delete(String, kube::Error),
    #[error("failover: {0}")]
    Topology(#[from] TopologyError),
    #[error("{0} did not become master within {1:?}")]
    FailoverTimeout(String, Duration),
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
            failover(&replica.name, host, *port, opts).await?;
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

/// CLUSTER FAILOVER (the coordinated kind: the master pauses its clients until the replica
/// has its whole replication stream), then wait until the replica calls itself master.
async fn failover(
    pod: &str,
    host: &str,
    port: u16,
    opts: &EngineOptions,
) -> Result<(), RestartError> {
    let mut conn = connect(host, port, opts, opts.command_timeout).await?;
    let is_master = |text: &str| parse_cluster_nodes(text).map(|n| n.myself.master);
    if is_master(&conn.text(&cluster("NODES")).await?)? {
        return Ok(());
    }
    conn.run::<()>(&cluster("FAILOVER")).await?;
    info!(pod, "CLUSTER FAILOVER sent");
    let start = Instant::now();
    while start.elapsed() < FAILOVER_WAIT {
        tokio::time::sleep(Duration::from_millis(200)).await;
        match conn.text(&cluster("NODES")).await {
            Ok(text) if is_master(&text)? => return Ok(()),
            Ok(_) => {}
            Err(e) => warn!(pod, error = %e, "reading CLUSTER NODES after FAILOVER"),
        }
    }
    Err(RestartError::FailoverTimeout(
        pod.to_string(),
        FAILOVER_WAIT,
    ))
}
