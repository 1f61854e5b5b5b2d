//! Shared support of the engine's planner tests; each test binary uses a part of it.
#![allow(dead_code)]

pub mod observed;
pub mod replication;
