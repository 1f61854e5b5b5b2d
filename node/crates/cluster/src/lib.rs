//! Redis Cluster bus (RCmb v1), cluster state, nodes.conf and CLUSTER commands for tessera-node.
//!
//! The node embeds a [`ClusterNode`] (state + bus) and implements [`Host`] so the cluster
//! half can reach the keyspace and local pub/sub without depending on the node's internals.
//!
//! Integration, in the node:
//! - start: fill a [`ClusterConfig`] from the `cluster-*` directives, then
//!   `ClusterNode::start(config, host).await` (loads or creates nodes.conf, binds the bus port);
//! - `CLUSTER ...`: [`commands::cluster_command`] returns a [`Reply`] (Redis 7.0 bytes);
//! - every keyed command (or EXEC): build a [`RouteQuery`] from the command's keys and the
//!   connection's ASKING/READONLY flags, then `node.with_state(|st| routing::route(st, &q,
//!   key_exists))`; `Route::error()` is the exact error line. Call it before taking keyspace
//!   locks;
//! - PUBLISH / SPUBLISH: deliver locally, then `node.with_state(|st| st.publish(ch, msg, shard))`;
//!   messages from peers arrive through [`Host::publish_local`];
//! - replication: [`Host::set_replication_master`] says whom to replicate (again whenever the
//!   master's address changes, and from the cron while [`Host::replication_master`] reports
//!   another target, as at load from nodes.conf); the node keeps
//!   `st.me_mut().repl_offset` and `st.repl_last_io` current so elections rank replicas.

pub mod asm;
pub mod bus;
pub mod commands;
pub mod config;
mod cron;
pub mod failover;
pub mod msg;
pub mod nodes_conf;
mod process;
mod replication;
pub mod reply;
pub mod route_table;
pub mod routing;
mod save;
pub mod state;
pub mod validate;

pub use bus::{BusError, ClusterNode};
pub use config::{ClusterConfig, EndpointType};
pub use reply::Reply;
pub use routing::{key_hash_slot, Route, RouteQuery};
pub use save::SaveStats;
pub use state::ClusterState;

/// What the cluster half needs from the node's keyspace and pub/sub.
///
/// Never called with the cluster state locked (keyspace answers for CLUSTER commands are
/// gathered before locking, bus effects run after unlocking), so implementations may call
/// back into the [`ClusterNode`].
pub trait Host: Send + Sync + 'static {
    /// Number of keys in a hash slot.
    fn count_keys_in_slot(&self, slot: u16) -> usize;
    /// Up to `count` key names of a hash slot.
    fn keys_in_slot(&self, slot: u16, count: usize) -> Vec<Vec<u8>>;
    /// Deletes every key of a slot (a slot lost to a newer owner, FLUSHSLOTS); returns how many.
    fn delete_keys_in_slot(&self, slot: u16) -> usize;
    /// Number of keys in the whole keyspace (ADDSLOTS/MEET/RESET checks).
    fn db_size(&self) -> usize;
    /// Deletes every key (CLUSTER RESET on a replica).
    fn flush_all(&self) {}
    /// Delivers a message from the bus to local subscribers (SPUBLISH when `shard`).
    fn publish_local(&self, channel: &[u8], message: &[u8], shard: bool);
    /// Replication target changed; `None` means this node is a master now.
    fn set_replication_master(&self, _master: Option<(String, u16)>) {}
    /// Where replication points now: `Some(None)` not replicating, `Some(Some(addr))`
    /// following `addr`; `None` (the default) for a host that keeps no such state, the
    /// cron then trusts what it last asked. Polled by the cron every 100 ms outside the
    /// state lock, so a replica whose replication drifted from its master's address is
    /// re-pointed.
    fn replication_master(&self) -> Option<Option<(String, u16)>> {
        None
    }
    /// Pause client writes until `until_ms` (Unix ms; 0 resumes): a master in a manual
    /// failover. Returns, once the writes already running have finished, the replication
    /// offset they stopped at (None: the cluster state's `repl_offset` is current).
    fn pause_writes(&self, _until_ms: u64) -> Option<u64> {
        None
    }
    /// Fills in the run-time settable `cluster-*` directives (CONFIG SET); polled by the
    /// cron every 100 ms on a copy of the config, outside the state lock.
    fn refresh_config(&self, _config: &mut ClusterConfig) {}
    /// DEBUG DROP-CLUSTER-PACKET-FILTER: the type of incoming bus message to drop (-1:
    /// none). Read once per message received.
    fn drop_packet_filter(&self) -> i64 {
        -1
    }
    /// True while the node loads a dataset (a replica's full sync); polled by the cron.
    fn loading(&self) -> bool {
        false
    }
    /// The TLS settings of a new bus link when `tls-cluster` is on (asked at each link, so
    /// certificates CONFIG SET loads take effect for new links, as in Redis). An error
    /// (certificates that no longer load) fails the link: the bus never falls back to
    /// plaintext.
    fn bus_tls(&self) -> Result<Option<BusTls>, String> {
        Ok(None)
    }
}

/// What a TLS bus link is made with: the node's server side (accepted links, with its
/// tls-auth-clients rule) and its client side (links it makes, with tls-client-cert-file
/// when set).
#[derive(Clone)]
pub struct BusTls {
    pub server: std::sync::Arc<tokio_rustls::rustls::ServerConfig>,
    pub client: std::sync::Arc<tokio_rustls::rustls::ClientConfig>,
}

/// A [`Host`] with an empty keyspace that drops published messages: for tests and tools.
#[derive(Default, Debug)]
pub struct NullHost;

impl Host for NullHost {
    fn count_keys_in_slot(&self, _slot: u16) -> usize {
        0
    }
    fn keys_in_slot(&self, _slot: u16, _count: usize) -> Vec<Vec<u8>> {
        Vec::new()
    }
    fn delete_keys_in_slot(&self, _slot: u16) -> usize {
        0
    }
    fn db_size(&self) -> usize {
        0
    }
    fn publish_local(&self, _channel: &[u8], _message: &[u8], _shard: bool) {}
}
