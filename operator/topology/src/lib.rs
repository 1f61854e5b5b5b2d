//! Topology engine: observe → plan (pure) → execute.
//!
//! Turns "N shards with R replicas each, on these pods" into a running, balanced Redis Cluster
//! and keeps it there, by talking RESP to the nodes. It works against any Redis Cluster node
//! (tessera-node, redis-server 7.0, valkey-server 9.1). Every step is idempotent, so an engine
//! killed at any instant and restarted resumes from what it observes.
//!
//! Its own crate with no Kubernetes dependency (issue 17): the operator hands it pod endpoints
//! and passwords; `tessera-operator converge` ([`cli`]) runs it against bare addresses.

mod atomic;
pub mod cli;
pub mod conn;
pub mod execute;
mod migrate;
pub mod nodes;
pub mod observe;
pub mod plan;
pub mod report;
pub mod shrink;
pub mod snapshot;
pub mod tls;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use plan::{plan, Step};
pub use snapshot::Snapshot;

/// Number of hash slots in a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// One pod (node process) the engine manages; shard/ordinal come from the StatefulSet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodEndpoint {
    pub pod: String,
    pub shard: u32,
    pub ordinal: u32,
    pub host: String,
    pub port: u16,
}

/// What the user asked for. Pods of shards `>= shards` are drained of their slots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Desired {
    pub shards: u32,
    pub replicas_per_shard: u32,
    /// Observe and report only; change nothing.
    pub paused: bool,
}

/// An ACL user name and password (`AUTH <user> <password>`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminLogin {
    pub user: String,
    pub password: String,
}

/// The password stays out of logs.
impl std::fmt::Debug for AdminLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminLogin")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Knobs of the engine; the defaults suit a real cluster and the tests alike.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineOptions {
    /// The operator's own ACL user, tried before `password` (the default user's): nodes
    /// started by this operator hold it, so `default` may be turned off.
    #[serde(default)]
    pub admin: Option<AdminLogin>,
    pub password: Option<String>,
    /// Passwords (None = no AUTH) tried in turn when `password` is refused: while the operator
    /// rolls out a password change, some nodes still run the previous one.
    pub fallback_passwords: Vec<Option<String>>,
    /// TCP connect timeout per node.
    pub connect_timeout: Duration,
    /// Reply timeout for observation and small commands.
    pub command_timeout: Duration,
    /// Timeout passed to MIGRATE (and the reply timeout of the migration connections).
    pub migrate_timeout: Duration,
    /// Keys per GETKEYSINSLOT / MIGRATE batch.
    pub migrate_batch: usize,
    /// Slots migrated concurrently (across all source/target pairs).
    pub migrate_parallel: usize,
    /// A pass stops starting new work after this long, so one reconcile stays bounded.
    pub pass_budget: Duration,
    /// At most this many unassigned slots get their keys counted per node per pass.
    pub max_count_slots: usize,
    /// Nodes serve clients on TLS only (spec.tls): the CA and the operator's certificate.
    #[serde(skip)]
    pub tls: Option<tls::TlsClient>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            admin: None,
            password: None,
            fallback_passwords: Vec::new(),
            connect_timeout: Duration::from_secs(2),
            command_timeout: Duration::from_secs(5),
            migrate_timeout: Duration::from_secs(60),
            migrate_batch: 1000,
            migrate_parallel: 16,
            pass_budget: Duration::from_secs(20),
            max_count_slots: 4096,
            tls: None,
        }
    }
}

/// Result of one pass, turned into status, conditions and Events by the controller.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyReport {
    pub converged: bool,
    /// "ok" | "fail" | "unknown"
    pub cluster_state: String,
    pub slots_assigned: u32,
    pub shards: Vec<ShardView>,
    pub progress: Option<Progress>,
    /// Human reasons why the engine cannot make progress right now.
    pub stuck: Vec<String>,
    /// What this pass did, one line per action.
    pub actions: Vec<String>,
    /// Pods whose node some reachable pod flags PFAIL or FAIL (the rolling restart waits
    /// while this is not empty).
    #[serde(default)]
    pub failing_pods: Vec<String>,
    /// Repairs done this pass (a node reset, a replication link re-pointed), also in
    /// `actions`: each gets an Event of its own.
    #[serde(default)]
    pub repairs: Vec<String>,
    /// Shards failed over this pass because `replicasPerShard` dropped and the StatefulSet
    /// would remove their master's pod (also in `actions`): an Event each.
    #[serde(default)]
    pub handovers: Vec<String>,
}

/// One shard as observed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardView {
    pub shard: u32,
    pub master_pod: Option<String>,
    pub master_id: Option<String>,
    pub slot_ranges: Vec<(u16, u16)>,
    /// Pod names of the replicas following this shard's master.
    pub replicas: Vec<String>,
    /// Replication state of each of `replicas`, same order. Only a replica in sync can fail
    /// over, so the engine does not report convergence before all of them are.
    #[serde(default)]
    pub replica_sync: Vec<ReplicaSync>,
    /// Every reachable pod sees `master_id` as a master that is not failing (after a manual
    /// failover, the new master is only trusted once this holds).
    #[serde(default)]
    pub master_agreed: bool,
}

impl ShardView {
    /// Replica pods whose link to the master is up after a completed sync.
    pub fn replicas_in_sync(&self) -> Vec<String> {
        self.replica_sync
            .iter()
            .filter(|r| r.in_sync)
            .map(|r| r.pod.clone())
            .collect()
    }
}

/// One replica's replication link, from its INFO replication (and its master's offset).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaSync {
    pub pod: String,
    /// Link up, no sync in progress, master heard from recently.
    pub in_sync: bool,
    /// `master_link_status` (`up`/`down`), `None` if INFO replication was not read.
    pub link_status: Option<String>,
    pub sync_in_progress: bool,
    pub last_io_seconds_ago: Option<i64>,
    /// Master's `master_repl_offset` minus the replica's `slave_repl_offset`, when both known.
    pub lag_bytes: Option<u64>,
}

/// Slot migration progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub slots_moved: u32,
    pub slots_to_move: u32,
}

/// Errors of the engine as a whole (a single node being unreachable is not an error).
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("unexpected reply: {0}")]
    Protocol(String),
    #[error("redis error on {node}: {source}")]
    Redis {
        node: String,
        #[source]
        source: redis::RedisError,
    },
    #[error("no pod is reachable")]
    NoneReachable,
    #[error("not converged after {0:?}: {1}")]
    Timeout(Duration, String),
}

impl TopologyError {
    /// The node refused our credentials (wrong password, or one is required).
    pub fn is_auth(&self) -> bool {
        match self {
            TopologyError::Redis { source, .. } => {
                source.kind() == redis::ErrorKind::AuthenticationFailed
                    || matches!(source.code(), Some("NOAUTH" | "WRONGPASS"))
            }
            _ => false,
        }
    }
}

/// One bounded pass: observe every endpoint, plan, execute a bounded number of steps, report.
#[tracing::instrument(skip_all, fields(shards = desired.shards, replicas = desired.replicas_per_shard))]
pub async fn reconcile(
    desired: &Desired,
    pods: &[PodEndpoint],
    opts: &EngineOptions,
) -> Result<TopologyReport, TopologyError> {
    if desired.shards == 0 || desired.shards > u32::from(SLOTS) {
        return Err(TopologyError::Invalid(format!(
            "shards must be 1..=16384, got {}",
            desired.shards
        )));
    }
    let snap = observe::observe(pods, opts).await;
    if snap.pods.iter().all(|p| !p.reachable) && !pods.is_empty() {
        return Err(TopologyError::NoneReachable);
    }
    let planned = plan::plan_full(desired, &snap);
    let mut report = report::build(desired, &snap, &planned);
    if desired.paused {
        report.stuck.push("paused: observing only".to_string());
        return Ok(report);
    }
    if planned.steps.is_empty() {
        return Ok(report);
    }
    let outcome = execute::execute(&planned.steps, &snap, opts).await;
    report.actions = outcome.actions;
    report.repairs = outcome.repairs;
    report.handovers = outcome.handovers;
    report.stuck.extend(outcome.errors);
    report.converged = false;
    if let Some(p) = report.progress.as_mut() {
        p.slots_moved = outcome.slots_moved;
    }
    Ok(report)
}
