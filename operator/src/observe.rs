//! The observe step of a reconcile (see `crate::controller`).
