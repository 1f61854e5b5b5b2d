//! Prometheus metrics of the operator, served as text on /metrics.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tessera_topology::TopologyReport;

use crate::crd::{Phase, RedisClusterStatus};

/// Labels of per-cluster series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    pub namespace: String,
    pub name: String,
}

/// Labels of per-shard series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShardLabels {
    pub namespace: String,
    pub name: String,
    pub shard: String,
}

/// Labels of the phase gauge: one series per phase, 1 for the cluster's current one (as
/// kube-state-metrics shows a pod's phase).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub namespace: String,
    pub name: String,
    pub phase: String,
}

/// Labels of the failover counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailoverLabels {
    pub namespace: String,
    pub name: String,
    pub reason: FailoverReason,
}

/// Why the operator failed a shard over (the nodes' own failovers after a master died are
/// the nodes' to count, not the operator's).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum FailoverReason {
    /// The rolling restart moves the master to an in-sync replica before restarting its pod.
    RollingRestart,
    /// `replicasPerShard` dropped and the StatefulSet would remove the master's pod.
    Handover,
}

impl FailoverReason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            FailoverReason::RollingRestart => "rolling_restart",
            FailoverReason::Handover => "handover",
        }
    }
}

impl EncodeLabelValue for FailoverReason {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

/// Every phase, for the phase gauge.
const PHASES: [Phase; 7] = [
    Phase::Pending,
    Phase::Creating,
    Phase::Ready,
    Phase::Scaling,
    Phase::Rebalancing,
    Phase::Degraded,
    Phase::Failed,
];

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
    pub is_leader: Gauge,
    pub child_applies: Family<ResultLabels, Counter>,
    pub cluster: ClusterMetrics,
    /// The shards each cluster has series for, so shards that went away lose theirs.
    shards_seen: Mutex<HashMap<(String, String), BTreeSet<u32>>>,
}

/// Per-cluster and per-shard series, from the status each reconcile writes and from what
/// the operator did.
#[derive(Default)]
pub struct ClusterMetrics {
    pub shards_ready: Family<ClusterLabels, Gauge>,
    pub slots_assigned: Family<ClusterLabels, Gauge>,
    pub ready_nodes: Family<ClusterLabels, Gauge>,
    pub desired_nodes: Family<ClusterLabels, Gauge>,
    pub phase: Family<PhaseLabels, Gauge>,
    pub state_ok: Family<ClusterLabels, Gauge>,
    pub topology_stuck: Family<ClusterLabels, Gauge>,
    pub slots_moved: Family<ClusterLabels, Gauge>,
    pub slots_to_move: Family<ClusterLabels, Gauge>,
    pub pods_outdated: Family<ClusterLabels, Gauge>,
    pub slots_migrated: Family<ClusterLabels, Counter>,
    pub repairs: Family<ClusterLabels, Counter>,
    pub failovers: Family<FailoverLabels, Counter>,
    pub pods_restarted: Family<ClusterLabels, Counter>,
    pub shard_ready_pods: Family<ShardLabels, Gauge>,
    pub shard_desired_pods: Family<ShardLabels, Gauge>,
    pub shard_replicas: Family<ShardLabels, Gauge>,
    pub shard_replicas_in_sync: Family<ShardLabels, Gauge>,
    pub shard_replication_lag_bytes: Family<ShardLabels, Gauge>,
    pub shard_slots: Family<ShardLabels, Gauge>,
}

impl ClusterMetrics {
    fn register(&self, r: &mut Registry) {
        let c = |help: &str| help.to_string();
        r.register(
            "cluster_shards_ready",
            c("Shards with a master serving slots"),
            self.shards_ready.clone(),
        );
        r.register(
            "cluster_slots_assigned",
            c("Hash slots served by a master"),
            self.slots_assigned.clone(),
        );
        r.register(
            "cluster_ready_nodes",
            c("Node pods that are Ready"),
            self.ready_nodes.clone(),
        );
        r.register(
            "cluster_desired_nodes",
            c("Node pods the spec asks for: shards x (1 + replicasPerShard)"),
            self.desired_nodes.clone(),
        );
        r.register(
            "cluster_phase",
            c("1 for the cluster's current status.phase, 0 for the others"),
            self.phase.clone(),
        );
        r.register(
            "cluster_state_ok",
            c("1 while the nodes report cluster_state:ok"),
            self.state_ok.clone(),
        );
        r.register(
            "cluster_topology_stuck",
            c("1 while the topology engine cannot make progress (status reason TopologyStuck or TopologyError)"),
            self.topology_stuck.clone(),
        );
        r.register(
            "cluster_migration_slots_moved",
            c("Slots moved since the current resharding began (0 when none runs)"),
            self.slots_moved.clone(),
        );
        r.register(
            "cluster_migration_slots_to_move",
            c("Slots the current resharding moves in all (0 when none runs)"),
            self.slots_to_move.clone(),
        );
        r.register(
            "cluster_pods_outdated",
            c("Pods still running an older pod template: what the rolling restart has left to do"),
            self.pods_outdated.clone(),
        );
        r.register(
            "cluster_slots_migrated",
            c("Slots the operator moved between shards"),
            self.slots_migrated.clone(),
        );
        r.register(
            "cluster_repairs",
            c("Repairs the operator made (a node reset, a replication link re-pointed)"),
            self.repairs.clone(),
        );
        r.register(
            "cluster_failovers",
            c("Failovers the operator ordered, by reason"),
            self.failovers.clone(),
        );
        r.register(
            "cluster_pods_restarted",
            c("Pods the rolling restart deleted for their StatefulSet to recreate"),
            self.pods_restarted.clone(),
        );
        r.register(
            "shard_ready_pods",
            c("Ready pods of the shard"),
            self.shard_ready_pods.clone(),
        );
        r.register(
            "shard_desired_pods",
            c("Pods the shard should have"),
            self.shard_desired_pods.clone(),
        );
        r.register(
            "shard_replicas",
            c("Replicas following the shard's master"),
            self.shard_replicas.clone(),
        );
        r.register(
            "shard_replicas_in_sync",
            c("Replicas in sync with the shard's master (only these can fail over)"),
            self.shard_replicas_in_sync.clone(),
        );
        r.register(
            "shard_replication_lag_bytes",
            c("Bytes the shard's furthest replica trails its master (absent when unknown)"),
            self.shard_replication_lag_bytes.clone(),
        );
        r.register(
            "shard_slots",
            c("Hash slots the shard's master serves"),
            self.shard_slots.clone(),
        );
    }
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
        let is_leader = Gauge::default();
        let child_applies = Family::<ResultLabels, Counter>::default();
        let cluster = ClusterMetrics::default();
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
            "leader",
            "1 while this replica holds the leader Lease",
            is_leader.clone(),
        );
        registry.register(
            "child_applies",
            "Server-side applies of child objects: applied, or skipped as already up to date",
            child_applies.clone(),
        );
        cluster.register(&mut registry);
        Self {
            registry: Mutex::new(registry),
            reconciles,
            errors,
            duration,
            is_leader,
            child_applies,
            cluster,
            shards_seen: Mutex::new(HashMap::new()),
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

    /// Sets the per-cluster and per-shard gauges from the status a reconcile computed.
    pub fn observe_status(&self, namespace: &str, name: &str, st: &RedisClusterStatus) {
        let m = &self.cluster;
        let l = cluster_labels(namespace, name);
        m.shards_ready.get_or_create(&l).set(i64::from(st.shards));
        m.slots_assigned
            .get_or_create(&l)
            .set(i64::from(st.slots_assigned));
        m.ready_nodes
            .get_or_create(&l)
            .set(i64::from(st.ready_nodes));
        m.desired_nodes
            .get_or_create(&l)
            .set(i64::from(st.desired_nodes));
        for phase in PHASES {
            m.phase
                .get_or_create(&phase_labels(namespace, name, phase))
                .set(i64::from(phase == st.phase));
        }
        m.state_ok
            .get_or_create(&l)
            .set(i64::from(st.cluster_state == "ok"));
        let stuck = st.conditions.iter().any(|c| {
            c.type_ == "Ready" && matches!(c.reason.as_str(), "TopologyStuck" | "TopologyError")
        });
        m.topology_stuck.get_or_create(&l).set(i64::from(stuck));
        let (moved, to_move) = st
            .progress
            .as_ref()
            .map_or((0, 0), |p| (p.slots_moved, p.slots_to_move));
        m.slots_moved.get_or_create(&l).set(i64::from(moved));
        m.slots_to_move.get_or_create(&l).set(i64::from(to_move));
        let outdated: usize = st
            .shard_statuses
            .iter()
            .map(|s| s.stale_config_pods.len())
            .sum();
        m.pods_outdated.get_or_create(&l).set(gauge(outdated));
        // Counters exist from the first reconcile on, at 0: rate() and increase() of a
        // series that appears only with its first event miss that event.
        for counter in [&m.slots_migrated, &m.repairs, &m.pods_restarted] {
            counter.get_or_create(&l).inc_by(0);
        }
        for reason in [FailoverReason::RollingRestart, FailoverReason::Handover] {
            self.failed_over(namespace, name, reason, 0);
        }

        let now: BTreeSet<u32> = st.shard_statuses.iter().map(|s| s.shard).collect();
        for s in &st.shard_statuses {
            let sl = shard_labels(namespace, name, s.shard);
            m.shard_ready_pods
                .get_or_create(&sl)
                .set(i64::from(s.ready_pods));
            m.shard_desired_pods
                .get_or_create(&sl)
                .set(i64::from(s.desired_pods));
            m.shard_replicas
                .get_or_create(&sl)
                .set(gauge(s.replica_pods.len()));
            m.shard_replicas_in_sync
                .get_or_create(&sl)
                .set(gauge(s.replicas_in_sync.len()));
            match s.replication_lag_bytes {
                Some(lag) => {
                    m.shard_replication_lag_bytes
                        .get_or_create(&sl)
                        .set(i64::try_from(lag).unwrap_or(i64::MAX));
                }
                None => {
                    m.shard_replication_lag_bytes.remove(&sl);
                }
            }
            let slots: u32 = s.slot_ranges.iter().map(|r| range_len(r)).sum();
            m.shard_slots.get_or_create(&sl).set(i64::from(slots));
        }
        let gone: Vec<u32> = {
            let mut seen = lock(&self.shards_seen);
            let before = seen
                .insert((namespace.to_string(), name.to_string()), now.clone())
                .unwrap_or_default();
            before.difference(&now).copied().collect()
        };
        for shard in gone {
            self.forget_shard(namespace, name, shard);
        }
    }

    /// Counts what one topology pass did: slots moved, repairs, and shards handed over.
    pub fn topology_pass(&self, namespace: &str, name: &str, report: &TopologyReport) {
        let m = &self.cluster;
        let l = cluster_labels(namespace, name);
        if let Some(p) = &report.progress {
            m.slots_migrated
                .get_or_create(&l)
                .inc_by(u64::from(p.slots_moved));
        }
        m.repairs
            .get_or_create(&l)
            .inc_by(report.repairs.len() as u64);
        self.failed_over(
            namespace,
            name,
            FailoverReason::Handover,
            report.handovers.len(),
        );
    }

    /// Counts `n` failovers the operator ordered.
    pub fn failed_over(&self, namespace: &str, name: &str, reason: FailoverReason, n: usize) {
        let l = FailoverLabels {
            namespace: namespace.into(),
            name: name.into(),
            reason,
        };
        self.cluster.failovers.get_or_create(&l).inc_by(n as u64);
    }

    /// Counts one pod the rolling restart deleted.
    pub fn pod_restarted(&self, namespace: &str, name: &str) {
        self.cluster
            .pods_restarted
            .get_or_create(&cluster_labels(namespace, name))
            .inc();
    }

    fn forget_shard(&self, namespace: &str, name: &str, shard: u32) {
        let m = &self.cluster;
        let sl = shard_labels(namespace, name, shard);
        for family in [
            &m.shard_ready_pods,
            &m.shard_desired_pods,
            &m.shard_replicas,
            &m.shard_replicas_in_sync,
            &m.shard_replication_lag_bytes,
            &m.shard_slots,
        ] {
            family.remove(&sl);
        }
    }

    /// Drops every series of a deleted cluster.
    pub fn forget_cluster(&self, namespace: &str, name: &str) {
        let m = &self.cluster;
        let l = cluster_labels(namespace, name);
        for family in [
            &m.shards_ready,
            &m.slots_assigned,
            &m.ready_nodes,
            &m.desired_nodes,
            &m.state_ok,
            &m.topology_stuck,
            &m.slots_moved,
            &m.slots_to_move,
            &m.pods_outdated,
        ] {
            family.remove(&l);
        }
        for family in [&m.slots_migrated, &m.repairs, &m.pods_restarted] {
            family.remove(&l);
        }
        for phase in PHASES {
            m.phase.remove(&phase_labels(namespace, name, phase));
        }
        for reason in [FailoverReason::RollingRestart, FailoverReason::Handover] {
            m.failovers.remove(&FailoverLabels {
                namespace: namespace.into(),
                name: name.into(),
                reason,
            });
        }
        let shards = lock(&self.shards_seen)
            .remove(&(namespace.to_string(), name.to_string()))
            .unwrap_or_default();
        for shard in shards {
            self.forget_shard(namespace, name, shard);
        }
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let registry = lock(&self.registry);
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            out.push_str("# encoding error\n");
        }
        out
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn cluster_labels(namespace: &str, name: &str) -> ClusterLabels {
    ClusterLabels {
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn shard_labels(namespace: &str, name: &str, shard: u32) -> ShardLabels {
    ShardLabels {
        namespace: namespace.into(),
        name: name.into(),
        shard: shard.to_string(),
    }
}

fn phase_labels(namespace: &str, name: &str, phase: Phase) -> PhaseLabels {
    PhaseLabels {
        namespace: namespace.into(),
        name: name.into(),
        phase: phase.as_str().into(),
    }
}

/// Slots in a status range, `a-b` or `a` (0 for anything else: the status is ours, but a
/// metric is no reason to fail).
fn range_len(r: &str) -> u32 {
    let parse = |s: &str| s.trim().parse::<u32>().ok();
    match r.split_once('-') {
        Some((a, b)) => match (parse(a), parse(b)) {
            (Some(a), Some(b)) if b >= a => b - a + 1,
            _ => 0,
        },
        None => u32::from(parse(r).is_some()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{ReshardProgress, ShardStatus};

    fn shard(n: u32, ranges: &[&str], lag: Option<u64>) -> ShardStatus {
        ShardStatus {
            shard: n,
            ready_pods: 2,
            desired_pods: 2,
            slot_ranges: ranges.iter().map(|r| r.to_string()).collect(),
            replica_pods: vec![format!("c-{n}-1")],
            replicas_in_sync: if lag.is_some() {
                vec![format!("c-{n}-1")]
            } else {
                vec![]
            },
            replication_lag_bytes: lag,
            ..Default::default()
        }
    }

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn status_becomes_series_and_departed_shards_lose_theirs() {
        let m = Metrics::new();
        let mut st = RedisClusterStatus {
            phase: Phase::Rebalancing,
            cluster_state: "ok".into(),
            shards: 2,
            slots_assigned: 16384,
            shard_statuses: vec![
                shard(0, &["0-8191"], Some(42)),
                shard(1, &["8192-16382", "16383"], None),
            ],
            progress: Some(ReshardProgress {
                slots_moved: 10,
                slots_to_move: 40,
                ..Default::default()
            }),
            ..Default::default()
        };
        m.observe_status("ns", "c", &st);
        let text = m.render();
        let has = |p: &str, v: &str| {
            let l = line(&text, p).unwrap_or_else(|| panic!("no {p} in\n{text}"));
            assert!(l.ends_with(&format!(" {v}")), "{l}: want {v}");
        };
        has(
            r#"tessera_operator_shard_slots{namespace="ns",name="c",shard="0"}"#,
            "8192",
        );
        has(
            r#"tessera_operator_shard_slots{namespace="ns",name="c",shard="1"}"#,
            "8192",
        );
        has(
            r#"tessera_operator_shard_replication_lag_bytes{namespace="ns",name="c",shard="0"}"#,
            "42",
        );
        assert!(line(
            &text,
            r#"tessera_operator_shard_replication_lag_bytes{namespace="ns",name="c",shard="1"}"#
        )
        .is_none());
        has(
            r#"tessera_operator_cluster_phase{namespace="ns",name="c",phase="Rebalancing"}"#,
            "1",
        );
        has(
            r#"tessera_operator_cluster_phase{namespace="ns",name="c",phase="Ready"}"#,
            "0",
        );
        has(
            r#"tessera_operator_cluster_migration_slots_to_move{namespace="ns",name="c"}"#,
            "40",
        );
        has(
            r#"tessera_operator_cluster_state_ok{namespace="ns",name="c"}"#,
            "1",
        );

        st.shard_statuses.truncate(1);
        m.observe_status("ns", "c", &st);
        let text = m.render();
        assert!(!text.contains(r#"shard="1""#), "{text}");
        assert!(text.contains(r#"shard="0""#));

        m.forget_cluster("ns", "c");
        let text = m.render();
        assert!(!text.contains(r#"name="c""#), "{text}");
    }

    #[test]
    fn a_pass_counts_moves_repairs_and_handovers() {
        let m = Metrics::new();
        let report = TopologyReport {
            progress: Some(tessera_topology::Progress {
                slots_moved: 7,
                slots_to_move: 20,
            }),
            repairs: vec!["reset x".into()],
            handovers: vec!["shard 1".into(), "shard 2".into()],
            ..Default::default()
        };
        m.topology_pass("ns", "c", &report);
        m.topology_pass("ns", "c", &report);
        m.failed_over("ns", "c", FailoverReason::RollingRestart, 1);
        m.pod_restarted("ns", "c");
        let text = m.render();
        for (p, v) in [
            (
                r#"tessera_operator_cluster_slots_migrated_total{namespace="ns",name="c"}"#,
                "14",
            ),
            (
                r#"tessera_operator_cluster_repairs_total{namespace="ns",name="c"}"#,
                "2",
            ),
            (
                r#"tessera_operator_cluster_failovers_total{namespace="ns",name="c",reason="handover"}"#,
                "4",
            ),
            (
                r#"tessera_operator_cluster_failovers_total{namespace="ns",name="c",reason="rolling_restart"}"#,
                "1",
            ),
            (
                r#"tessera_operator_cluster_pods_restarted_total{namespace="ns",name="c"}"#,
                "1",
            ),
        ] {
            let l = line(&text, p).unwrap_or_else(|| panic!("no {p} in\n{text}"));
            assert!(l.ends_with(&format!(" {v}")), "{l}: want {v}");
        }
    }

    #[test]
    fn ranges_count_their_slots() {
        assert_eq!(range_len("0-5460"), 5461);
        assert_eq!(range_len("16383"), 1);
        assert_eq!(range_len("9-3"), 0);
        assert_eq!(range_len("x"), 0);
    }
}
