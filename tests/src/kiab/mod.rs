//! kube-in-a-box: enough of Kubernetes, on one machine, to run the real `kubectl` and the real
//! tessera-operator against pods that are local node processes. A test and demo tool only;
//! see README.md in this directory for everything it does differently from Kubernetes.

pub mod addr;
pub mod api;
pub mod error;
pub mod expand;
pub mod harness;
pub mod images;
pub mod kubelet;
pub mod sts;
pub mod testkit;

pub use harness::{BoxConfig, KubeInABox};
