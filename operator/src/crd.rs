//! The `RedisCluster` custom resource (group `tessera.rs`, version `v1alpha1`).
//!
//! The schema carries everything the API server can check on `kubectl apply` (ranges, enums,
//! CEL rules); what it cannot check lives in [`crate::validate`] and surfaces as a condition.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, PodSecurityContext, ResourceRequirements, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of the CRD.
pub const GROUP: &str = "tessera.rs";
/// Served and stored version.
pub const VERSION: &str = "v1alpha1";
/// Number of hash slots in a Redis Cluster.
pub const CLUSTER_SLOTS: u32 = 16384;

/// Directives the operator writes itself (node.conf or container args). Users setting them
/// would break addressing, persistence or auth, so both the CEL rule and `validate` reject them.
pub const OPERATOR_OWNED_DIRECTIVES: &[&str] = &[
    "port",
    "bind",
    "cluster-enabled",
    "cluster-config-file",
    "cluster-node-timeout",
    "cluster-port",
    "cluster-announce-ip",
    "cluster-announce-port",
    "cluster-announce-bus-port",
    "cluster-announce-tls-port",
    "cluster-announce-hostname",
    "cluster-announce-human-nodename",
    "dir",
    "daemonize",
    "pidfile",
    "logfile",
    "include",
    "supervised",
    "unixsocket",
    "requirepass",
    "masterauth",
    "masteruser",
    "replicaof",
    "slaveof",
    "protected-mode",
];

/// Desired state of a Tessera Redis Cluster.
// clippy mistakes the repeated `type_ = ...` of several printcolumn(...) for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tessera.rs",
    version = "v1alpha1",
    kind = "RedisCluster",
    plural = "redisclusters",
    singular = "rediscluster",
    shortname = "rcl",
    category = "tessera",
    namespaced,
    status = "RedisClusterStatus",
    derive = "PartialEq",
    doc = "A Redis Cluster of `shards` masters with `replicasPerShard` replicas each, run by tessera-operator.",
    scale(
        spec_replicas_path = ".spec.shards",
        status_replicas_path = ".status.shards",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Shards", type_ = "integer", json_path = ".spec.shards"),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".spec.replicasPerShard"
    ),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.readyText"),
    printcolumn(name = "Slots", type_ = "integer", json_path = ".status.slotsAssigned"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Lag",
        type_ = "integer",
        json_path = ".status.replicationLagBytes",
        priority = 1,
        description = "Bytes the furthest replica of any shard trails its master"
    ),
    printcolumn(
        name = "Migrated",
        type_ = "string",
        json_path = ".status.progress.summary",
        priority = 1,
        description = "Slots moved / slots to move while resharding"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.storage) == has(oldSelf.storage) && (!has(self.storage) || (has(self.storage.storageClassName) == has(oldSelf.storage.storageClassName) && (!has(self.storage.storageClassName) || self.storage.storageClassName == oldSelf.storage.storageClassName)))",
        "message": "spec.storage is immutable but for size (grow only) and reclaimPolicy: it cannot be added or removed, nor its storageClassName changed"
    },
    {
        "rule": "!has(self.storage) || !has(oldSelf.storage) || !quantity(self.storage.size).isLessThan(quantity(oldSelf.storage.size))",
        "message": "spec.storage.size can only grow: a PersistentVolumeClaim cannot shrink"
    },
    {
        "rule": "has(self.tls) == has(oldSelf.tls)",
        "message": "spec.tls cannot be added or removed: nodes on TLS and nodes without could not talk to each other while pods restart (make a new cluster and move the data)"
    }
]))]
pub struct RedisClusterSpec {
    /// Number of shards (masters), each owning a share of the 16384 slots.
    #[serde(default = "default_shards")]
    #[schemars(range(min = 1, max = 1000))]
    pub shards: u32,
    /// Replicas per shard master.
    #[serde(default = "default_replicas_per_shard")]
    #[schemars(range(min = 0, max = 5))]
    pub replicas_per_shard: u32,
    /// Node image. Default `tessera/tessera-node:<operator version>`; `redis:*` and
    /// `valkey/valkey:*` images work too (the command is chosen from the image name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub image: Option<String>,
    /// Image pull policy of the node container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<PullPolicy>,
    /// Resources of the node container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Persistent storage per node; absent means an emptyDir (data lives as long as the pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageSpec>,
    /// Password from a Secret: the `default` user's (requirepass). Replicas log in to their
    /// masters as the operator's own user `tessera-operator`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSpec>,
    /// ACL users, created and kept on every node (masters and replicas) by ACL SETUSER; users
    /// removed from this list are deleted from the nodes (only users the operator created;
    /// see `status.users`). `default` may be declared with `rules` only (e.g. `off`): its
    /// password stays `spec.auth`'s. `tessera-operator` is reserved (the operator's own user).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub users: Vec<UserSpec>,
    /// After a user's password Secret changes, the old password keeps working for this many
    /// seconds once every node took the new one, so clients can move; then it is removed.
    #[serde(default = "default_user_password_overlap")]
    #[schemars(range(min = 0, max = 86400))]
    pub user_password_overlap_seconds: u32,
    /// Extra node directives (redis.conf names). Operator-owned ones are rejected.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "self.all(k, !(k in ['port','bind','cluster-enabled','cluster-config-file','cluster-node-timeout','cluster-port','cluster-announce-ip','cluster-announce-port','cluster-announce-bus-port','cluster-announce-tls-port','cluster-announce-hostname','cluster-announce-human-nodename','dir','daemonize','pidfile','logfile','include','supervised','unixsocket','requirepass','masterauth','masteruser','replicaof','slaveof','protected-mode']))",
            "message": "spec.config sets a directive the operator owns (port, bind, cluster-*, dir, daemonize, requirepass/masterauth (use spec.auth), cluster-node-timeout (use spec.nodeTimeoutMs), ...)"
        }
    ]))]
    pub config: BTreeMap<String, String>,
    /// cluster-node-timeout in milliseconds.
    #[serde(default = "default_node_timeout_ms")]
    #[schemars(range(min = 100, max = 600000))]
    pub node_timeout_ms: u32,
    /// Overrides for the node pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodOverrides>,
    /// The client Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ClientServiceSpec>,
    /// Stop topology changes (no MEET, slot moves, failovers); children are still applied.
    #[serde(default)]
    pub paused: bool,
    /// TLS for clients, replication and the cluster bus (the nodes serve no plaintext port).
    /// A changed certificate is reloaded live on every node. Cannot be added to or removed
    /// from an existing cluster (its nodes could not talk to each other meanwhile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
}

/// Where the nodes' certificate comes from, and whether clients must present one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.secretName) != has(self.issuerRef)",
        "message": "spec.tls needs exactly one of secretName and issuerRef"
    }
]))]
pub struct TlsSpec {
    /// A Secret with `tls.crt`, `tls.key` and `ca.crt` (what cert-manager writes). The
    /// certificate is the nodes' server and client certificate (bus, replication), so it
    /// needs both the server auth and client auth usages, or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: Option<String>,
    /// A cert-manager issuer: the operator makes a Certificate `<cluster>-tls` for every
    /// pod's DNS names and IPs, written by cert-manager to the Secret `<cluster>-tls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer_ref: Option<IssuerRef>,
    /// `tls-auth-clients`: whether clients must present a certificate signed by the CA.
    #[serde(default)]
    pub auth_clients: TlsAuthClients,
}

/// A cert-manager issuer reference.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssuerRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// `Issuer` (in the cluster's namespace) or `ClusterIssuer`.
    #[serde(default = "default_issuer_kind")]
    #[schemars(length(min = 1))]
    pub kind: String,
    #[serde(default = "default_issuer_group")]
    #[schemars(length(min = 1))]
    pub group: String,
}

fn default_issuer_kind() -> String {
    "Issuer".into()
}
fn default_issuer_group() -> String {
    "cert-manager.io".into()
}

/// Redis's `tls-auth-clients` values; `yes` is Redis's default.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TlsAuthClients {
    #[default]
    Yes,
    No,
    Optional,
}

impl TlsAuthClients {
    pub fn as_str(self) -> &'static str {
        match self {
            TlsAuthClients::Yes => "yes",
            TlsAuthClients::No => "no",
            TlsAuthClients::Optional => "optional",
        }
    }
}

fn default_user_password_overlap() -> u32 {
    60
}
fn default_shards() -> u32 {
    3
}
fn default_replicas_per_shard() -> u32 {
    1
}
fn default_node_timeout_ms() -> u32 {
    15000
}

/// Kubernetes image pull policy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    /// The string Kubernetes expects.
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// One PersistentVolumeClaim per node.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    /// Requested size, a Kubernetes quantity such as `10Gi`. It may grow (never shrink): the
    /// operator then patches every claim to the new size (expanded if the StorageClass allows
    /// volume expansion) and recreates the StatefulSets without deleting their pods.
    #[schemars(length(min = 1))]
    #[schemars(extend("x-kubernetes-validations" = [
        { "rule": "isQuantity(self)", "message": "spec.storage.size must be a quantity such as 10Gi" }
    ]))]
    pub size: String,
    /// StorageClass; absent means the cluster default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// What becomes of a node's claim once its pod is gone for good, as the StatefulSets'
    /// persistentVolumeClaimRetentionPolicy (whenScaled and whenDeleted). `Retain` (the
    /// Kubernetes default when absent): claims outlive a scale-in and the resource; a shard
    /// added back reuses them (the operator resets the old node identities on them).
    /// `Delete`: a drained shard's claims go with its StatefulSet, a removed replica's with
    /// its pod, and every claim with the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_policy: Option<ReclaimPolicy>,
}

/// Retention of a node's PersistentVolumeClaim (see [`StorageSpec::reclaim_policy`]).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ReclaimPolicy {
    Retain,
    Delete,
}

impl ReclaimPolicy {
    /// The string a StatefulSet's retention policy takes.
    pub fn as_str(self) -> &'static str {
        match self {
            ReclaimPolicy::Retain => "Retain",
            ReclaimPolicy::Delete => "Delete",
        }
    }
}

/// Where the node password lives.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthSpec {
    /// Secret in the same namespace.
    #[schemars(length(min = 1))]
    pub secret_name: String,
    /// Key inside the Secret.
    #[serde(default = "default_auth_key")]
    pub key: String,
}

fn default_auth_key() -> String {
    "password".to_string()
}

/// One ACL user of `spec.users`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserSpec {
    /// The user name (not `tessera-operator`; no spaces).
    #[schemars(length(min = 1, max = 128))]
    pub name: String,
    /// Where the user's password lives: required for every user but `default` (whose
    /// password is spec.auth's), and not allowed for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret: Option<SecretKeyRef>,
    /// ACL SETUSER rules without passwords, e.g. `~app:* +@read +@write -@dangerous`. The
    /// operator applies `reset on <rules>` and the password, so a node matches this exactly.
    #[serde(default)]
    pub rules: String,
}

/// A key of a Secret in the cluster's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    #[schemars(length(min = 1))]
    pub name: String,
    #[serde(default = "default_auth_key")]
    pub key: String,
}

/// Pod-level overrides, copied onto every node pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodOverrides {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Replaces the operator's default (preferred anti-affinity within a shard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Replaces the operator's default (non-root uid 999). Root is still refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,
}

/// Type of the client Service.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum ServiceType {
    #[default]
    ClusterIP,
    NodePort,
    LoadBalancer,
}

impl ServiceType {
    /// The string Kubernetes expects.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIP => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
        }
    }
}

/// The client Service.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientServiceSpec {
    #[serde(default, rename = "type")]
    pub type_: ServiceType,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Lifecycle phase shown in `kubectl get rcl`. Rebalancing covers topology work on a cluster
/// that serves all slots: slot moves, replicas syncing, and rolling restarts after a pod
/// template change (Progressing condition reason RollingRestart).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum Phase {
    #[default]
    Pending,
    Creating,
    Ready,
    Scaling,
    Rebalancing,
    Degraded,
    Failed,
}

impl Phase {
    /// Name as written in status.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Creating => "Creating",
            Phase::Ready => "Ready",
            Phase::Scaling => "Scaling",
            Phase::Rebalancing => "Rebalancing",
            Phase::Degraded => "Degraded",
            Phase::Failed => "Failed",
        }
    }
}

/// Observed state, written only by the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RedisClusterStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub phase: Phase,
    /// Shards that exist and have a master serving slots (the scale subresource's status count).
    #[serde(default)]
    pub shards: u32,
    /// Label selector of the node pods (for the scale subresource).
    #[serde(default)]
    pub selector: String,
    /// Pods that are Ready.
    #[serde(default)]
    pub ready_nodes: u32,
    /// Pods the spec asks for: shards × (1 + replicasPerShard).
    #[serde(default)]
    pub desired_nodes: u32,
    /// `readyNodes/desiredNodes`, for the printer column.
    #[serde(default)]
    pub ready_text: String,
    /// Slots served by a master, as seen by the topology engine (0 until it reports).
    #[serde(default)]
    pub slots_assigned: u32,
    /// cluster_state from CLUSTER INFO: ok, fail or unknown.
    #[serde(default)]
    pub cluster_state: String,
    /// The largest `replicationLagBytes` of the shards (for `kubectl get rcl -o wide`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_lag_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Per-shard view.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shard_statuses: Vec<ShardStatus>,
    /// Slot migration progress while resharding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<ReshardProgress>,
    /// The operator keeps a record (Secret `<name>-auth-active`) of the password the nodes
    /// run with: read back on each reconcile, until spec.auth is removed and every node
    /// dropped the password. Without it, a cluster's reconcile touches no Secret.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub password_recorded: bool,
    /// The ACL users the operator created on the nodes (its record: users not listed here are
    /// never deleted), with the SHA-256 of their passwords.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<UserStatus>,
    /// The certificate the nodes serve (spec.tls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsStatus>,
}

/// What the operator knows of the nodes' certificate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsStatus {
    /// The Secret the certificate is read from.
    pub secret_name: String,
    /// SHA-256 (hex) of the leaf certificate every running node served when last checked;
    /// it follows the Secret once every node reloaded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_fingerprint: Option<String>,
    /// SHA-256 (hex) of the Secret's ca.crt every running node reloaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_fingerprint: Option<String>,
    /// When a changed ca.crt was first seen: every node is reloaded again on each reconcile
    /// until the kubelet has surely refreshed every pod's mounted copy (about 2 minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_change_seen_at: Option<String>,
    /// Pods that do not serve the Secret's certificate yet (their mounted files not updated
    /// by the kubelet yet, or the reload failed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_pods: Vec<String>,
}

/// A user the operator created, as its record keeps it (password hashes only).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserStatus {
    pub name: String,
    /// SHA-256 (hex) of the password from the user's Secret.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub password_sha256: String,
    /// During a rotation: SHA-256 of the old password, still accepted by the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_password_sha256: Option<String>,
    /// During a rotation: when every node had taken the new password (RFC 3339); the old one
    /// is removed `userPasswordOverlapSeconds` later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap_since: Option<String>,
    /// Removed from spec.users: deleted from the nodes, then from this record.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub removing: bool,
}

/// One shard as observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShardStatus {
    pub shard: u32,
    pub stateful_set: String,
    pub ready_pods: u32,
    pub desired_pods: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_id: Option<String>,
    /// Inclusive slot ranges such as `0-5460`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slot_ranges: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replica_pods: Vec<String>,
    /// Replica pods whose first sync finished, whose link to the master is up, that the
    /// master lists as online replicas, and whose replication offset trails the master's by at
    /// most 1 MiB; only these can fail over. The cluster is not Ready until it equals
    /// `replicaPods`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas_in_sync: Vec<String>,
    /// Bytes the furthest replica trails the master's replication offset
    /// (`master_repl_offset` minus the replica's `slave_repl_offset`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_lag_bytes: Option<u64>,
    /// Pods still running an older pod template (node.conf, image, resources, auth...).
    /// The operator restarts them one at a time: replicas first, a master only after a
    /// CLUSTER FAILOVER to an in-sync replica (phase Rebalancing, reason RollingRestart).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale_config_pods: Vec<String>,
}

/// Resharding progress, from the pass that started moving slots until every shard holds its
/// share; then removed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReshardProgress {
    /// Slots moved since the resharding began.
    pub slots_moved: u32,
    /// Slots the resharding moves in all: moved plus still to move.
    pub slots_to_move: u32,
    /// `slotsMoved/slotsToMove`, for `kubectl get rcl -o wide`.
    #[serde(default)]
    pub summary: String,
    /// Moves still to do, source shard -> target shard, as the latest pass left them (slots
    /// moved by that pass are taken off the moves in plan order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<SlotMove>,
}

/// Slots still to go from one shard to another.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SlotMove {
    pub from_shard: u32,
    /// The source shard's master pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_pod: Option<String>,
    pub to_shard: u32,
    /// The target shard's master pod (none yet while the shard has no master).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_pod: Option<String>,
    pub slots: u32,
}

impl RedisClusterSpec {
    /// The image the nodes run.
    pub fn image_or_default(&self) -> String {
        self.image
            .clone()
            .unwrap_or_else(|| format!("tessera/tessera-node:{}", env!("CARGO_PKG_VERSION")))
    }

    /// Total pods the spec asks for.
    pub fn desired_nodes(&self) -> u32 {
        self.shards.saturating_mul(1 + self.replicas_per_shard)
    }
}

/// The CRD as YAML, exactly what `tessera-operator crd` prints and crds/ holds.
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    use kube::CustomResourceExt;
    serde_yaml::to_string(&RedisCluster::crd())
}
