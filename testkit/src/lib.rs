//! The one test kit for Tessera's process-level tests (issue 17, item 3).
//!
//! - [`ports`]: one port allocator for every test binary on the machine;
//! - [`bins`]: tessera-node, redis-server, redis-cli and valkey-server, found once;
//! - [`server`]: one process spawner ([`Server::tessera`], [`Server::redis`],
//!   [`Server::valkey`], or a [`Launch`] for more control), ready when PING answers, killed
//!   on drop, its log's tail printed when the test panics;
//! - [`resp`]: one RESP client, raw bytes in and out for byte-exact comparisons;
//! - [`process`]: the same guard for a program that is not a server (the operator binary);
//! - [`wait_until`] and [`info_field`].
//!
//! The family modules ([`dataset`], [`persist`], [`repl`], [`cluster`], [`pubsub`],
//! [`diff`]) are what several suites share on top of those.
//!
//! A missing reference binary is a failure with a clear message, never a silent pass.

pub mod bins;
pub mod cli;
pub mod cluster;
pub mod dataset;
pub mod diff;
pub mod guard;
pub mod node;
pub mod persist;
pub mod ports;
pub mod process;
pub mod pubsub;
pub mod repl;
pub mod resp;
pub mod server;
pub mod tls;
mod wait;

pub use bins::{redis_bin, redis_cli_bin, tessera_bin, valkey_bin, workspace_bin};
pub use cli::output_within;
pub use node::Node;
pub use ports::{free_port, free_port_on};
pub use process::Process;
pub use resp::{encode, Conn, Raw, Reply, R};
pub use server::{answers_ping, kill, log_tail, served_by, wait_exit, Exit, Launch, Server};
pub use wait::{info_field, wait_for, wait_until};
