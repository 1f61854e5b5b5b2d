//! Shared test support; each test binary uses a part of it.
#![allow(dead_code)]

pub mod fake_api;
