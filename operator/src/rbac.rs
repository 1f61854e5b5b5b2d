//! The API permissions the operator's code uses, kept next to the calls (controller.rs,
//! leader.rs, events). The Helm chart's RBAC must grant exactly these; a test renders the chart
//! and compares.

/// Where a permission is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// In every watched namespace (ClusterRole when watching all, else a Role per namespace).
    Watched,
    /// Only in the operator's own namespace (the leader Lease).
    OperatorNamespace,
}

/// One permission: API group ("" = core), resource, verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    pub group: &'static str,
    pub resource: &'static str,
    pub verbs: &'static [&'static str],
    pub scope: Scope,
}

const fn p(
    group: &'static str,
    resource: &'static str,
    verbs: &'static [&'static str],
    scope: Scope,
) -> Permission {
    Permission {
        group,
        resource,
        verbs,
        scope,
    }
}

/// Everything the operator calls. Server-side apply of an object that does not exist yet is
/// authorized as both `patch` and `create`, hence both on every applied kind.
pub const REQUIRED: &[Permission] = &[
    // Controller watch + status patch.
    p(
        "tessera.rs",
        "redisclusters",
        &["get", "list", "watch"],
        Scope::Watched,
    ),
    p(
        "tessera.rs",
        "redisclusters/status",
        &["patch"],
        Scope::Watched,
    ),
    // Children carry blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement
    // admission plugin only allows to those who may update the owner's finalizers.
    p(
        "tessera.rs",
        "redisclusters/finalizers",
        &["update"],
        Scope::Watched,
    ),
    // Applied children; StatefulSets and PDBs of drained shards are deleted on scale-in.
    p(
        "apps",
        "statefulsets",
        &["list", "watch", "create", "patch", "delete"],
        Scope::Watched,
    ),
    p(
        "policy",
        "poddisruptionbudgets",
        &["list", "watch", "create", "patch", "delete"],
        Scope::Watched,
    ),
    p(
        "",
        "services",
        &["list", "watch", "create", "patch"],
        Scope::Watched,
    ),
    p(
        "",
        "configmaps",
        &["list", "watch", "create", "patch"],
        Scope::Watched,
    ),
    // spec.storage.size grown: list the cluster's claims, patch each to the new request
    // (crate::storage).
    p(
        "",
        "persistentvolumeclaims",
        &["list", "patch"],
        Scope::Watched,
    ),
    // Observed pods (IPs, readiness) feed the topology engine.
    // delete: the rolling restart replaces pods one at a time (OnDelete StatefulSets).
    p("", "pods", &["list", "watch", "delete"], Scope::Watched),
    // Secrets are never listed or watched: that would expose every Secret in the namespace.
    // get, by name: spec.auth's Secret (the node password; a change is noticed by polling its
    // resourceVersion, crate::auth::secret_changes) and the operator's own record of the
    // password the nodes run with (`<cluster>-auth-active`), only for clusters with spec.auth
    // (or a record left to clear), and the operator's own user's password
    // (`<cluster>-operator-admin`) for every cluster. The chart's `rbac.secretNames` restricts
    // this rule with resourceNames.
    p("", "secrets", &["get"], Scope::Watched),
    // create/patch/delete: only the operator's own Secrets, `<cluster>-auth-active`,
    // `<cluster>-operator-admin` and `<cluster>-node-auth` (children::auth). RBAC cannot restrict them by name (`create` has
    // no name at authorization time, and the names follow the user's cluster names):
    // `watchNamespaces` is how an admin confines them (chart README, Permissions).
    p(
        "",
        "secrets",
        &["create", "patch", "delete"],
        Scope::Watched,
    ),
    // spec.tls.issuerRef: the cert-manager Certificate `<cluster>-tls` (crate::tls), applied.
    p(
        "cert-manager.io",
        "certificates",
        &["create", "patch"],
        Scope::Watched,
    ),
    // kube::runtime::events::Recorder creates, then patches a series.
    p(
        "events.k8s.io",
        "events",
        &["create", "patch"],
        Scope::Watched,
    ),
    // Leader election.
    p(
        "coordination.k8s.io",
        "leases",
        &["get", "create", "update"],
        Scope::OperatorNamespace,
    ),
];
