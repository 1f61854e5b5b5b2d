//! tessera-operator: reconciles RedisCluster resources into StatefulSets and a live cluster.
//!
//! Pipeline per reconcile (see ../shared/design.md): observe → [`validate`] → [`children`]
//! (pure builders) → server-side apply → [`topology`] step → [`status`] (pure).

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
pub mod topology;
pub mod validate;
