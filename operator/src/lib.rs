//! tessera-operator: reconciles RedisCluster resources into StatefulSets and a live cluster.
//!
//! Pipeline per reconcile (see ../shared/design.md): [`validate`] (pure) → [`observe`] (every
//! API read, once, into a plain value) → pure [`steps`] ([`children`] builders, [`storage`],
//! [`auth`], [`tls`] and [`restart`] plans, [`status`]) whose actions the [`controller`] executes, the
//! [`topology`] engine reading the nodes itself. [`pods`] is the low layer they all share.

pub mod apply;
pub mod auth;
pub mod children;
pub mod controller;
pub mod crd;
pub mod leader;
pub mod metrics;
pub mod observe;
pub mod pods;
pub mod rbac;
pub mod restart;
pub mod server;
pub mod status;
pub mod steps;
pub mod storage;
pub mod tls;
pub mod users;
pub mod validate;

/// The topology engine is its own crate (no kube dependency); the operator and its tests use
/// `tessera_topology` directly, this path keeps `tessera_operator::topology::...` working.
pub use tessera_topology as topology;
