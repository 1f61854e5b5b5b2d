//! Test and demo harnesses: kube-in-a-box (a Kubernetes API emulator, a StatefulSet
//! controller and a process kubelet) and the helpers the end-to-end suites share.

pub mod kiab;
