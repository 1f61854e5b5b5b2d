//! Prometheus metrics of the operator, served as text on /metrics.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Labels of per-cluster series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    pub namespace: String,
    pub name: String,
}

/// Labels of the reconcile counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

/// Labels of the reconcile-error counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub category: ErrorCategory,
}

/// What kind of failure a reconcile (or its topology step) met, so an alert can tell an API
/// outage from unreachable nodes from a bad spec.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum ErrorCategory {
    /// A Kubernetes API call failed (including one refused by RBAC).
    KubeApi,
    /// A node could not be reached (connect, timeout, dropped connection, none reachable).
    NodeUnreachable,
    /// A node answered, but the topology engine or a node command failed.
    Topology,
    /// The spec, or something it names (the password Secret), is not usable.
    Validation,
}

impl ErrorCategory {
    /// Every category, in label order (for tests and dashboards).
    pub const ALL: [ErrorCategory; 4] = [
        ErrorCategory::KubeApi,
        ErrorCategory::NodeUnreachable,
        ErrorCategory::Topology,
        ErrorCategory::Validation,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCategory::KubeApi => "kube_api",
            ErrorCategory::NodeUnreachable => "node_unreachable",
            ErrorCategory::Topology => "topology",
            ErrorCategory::Validation => "validation",
        }
    }
}

impl EncodeLabelValue for ErrorCategory {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

/// All metrics plus the registry that renders them.
pub struct Metrics {
    registry: Mutex<Registry>,
    pub reconciles: Family<ResultLabels, Counter>,
    pub errors: Family<ErrorLabels, Counter>,
    pub duration: Histogram,
    pub shards_ready: Family<ClusterLabels, Gauge>,
    pub slots_assigned: Family<ClusterLabels, Gauge>,
    pub ready_nodes: Family<ClusterLabels, Gauge>,
    pub is_leader: Gauge,
    pub child_applies: Family<ResultLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every metric under the `tessera_operator` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("tessera_operator");
        let reconciles = Family::<ResultLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let duration = Histogram::new(exponential_buckets(0.005, 2.0, 14));
        let shards_ready = Family::<ClusterLabels, Gauge>::default();
        let slots_assigned = Family::<ClusterLabels, Gauge>::default();
        let ready_nodes = Family::<ClusterLabels, Gauge>::default();
        let is_leader = Gauge::default();
        let child_applies = Family::<ResultLabels, Counter>::default();
        registry.register("reconciles", "Reconciles by result", reconciles.clone());
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, and topology steps that failed as a whole (the reconcile goes on and reports it in status), by category",
            errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Duration of one reconcile",
            duration.clone(),
        );
        registry.register(
            "cluster_shards_ready",
            "Shards with a master serving slots",
            shards_ready.clone(),
        );
        registry.register(
            "cluster_slots_assigned",
            "Hash slots served by a master",
            slots_assigned.clone(),
        );
        registry.register(
            "cluster_ready_nodes",
            "Node pods that are Ready",
            ready_nodes.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease",
            is_leader.clone(),
        );
        registry.register(
            "child_applies",
            "Server-side applies of child objects: applied, or skipped as already up to date",
            child_applies.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            reconciles,
            errors,
            duration,
            shards_ready,
            slots_assigned,
            ready_nodes,
            is_leader,
            child_applies,
        }
    }

    /// Records one child apply, done or skipped.
    pub fn child_apply(&self, applied: bool) {
        let result = if applied { "applied" } else { "skipped" };
        self.child_applies
            .get_or_create(&ResultLabels {
                result: result.into(),
            })
            .inc();
    }

    /// Records one reconcile: `None` when it succeeded, else the category of its error.
    pub fn reconciled(&self, error: Option<ErrorCategory>, took: Duration) {
        let result = if error.is_none() { "success" } else { "error" };
        self.reconciles
            .get_or_create(&ResultLabels {
                result: result.into(),
            })
            .inc();
        if let Some(category) = error {
            self.error(category);
        }
        self.duration.observe(took.as_secs_f64());
    }

    /// Counts one error of `category` (a failed reconcile, or a failed topology step within
    /// a reconcile that otherwise went on).
    pub fn error(&self, category: ErrorCategory) {
        self.errors.get_or_create(&ErrorLabels { category }).inc();
    }

    /// Sets the per-cluster gauges.
    pub fn set_cluster(&self, namespace: &str, name: &str, shards: u32, slots: u32, ready: u32) {
        let l = ClusterLabels {
            namespace: namespace.into(),
            name: name.into(),
        };
        self.shards_ready.get_or_create(&l).set(i64::from(shards));
        self.slots_assigned.get_or_create(&l).set(i64::from(slots));
        self.ready_nodes.get_or_create(&l).set(i64::from(ready));
    }

    /// Drops the series of a deleted cluster.
    pub fn forget_cluster(&self, namespace: &str, name: &str) {
        let l = ClusterLabels {
            namespace: namespace.into(),
            name: name.into(),
        };
        self.shards_ready.remove(&l);
        self.slots_assigned.remove(&l);
        self.ready_nodes.remove(&l);
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let registry = match self.registry.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            out.push_str("# encoding error\n");
        }
        out
    }
}
