//! Cluster mode: embeds `tessera_cluster` (bus, state, CLUSTER commands) into the server.
//!
//! [`start`] builds the [`ClusterConfig`] from redis.conf directives and starts the bus;
//! [`route`] is the dispatcher's redirection hook; [`host::KeyspaceHost`] lets the cluster
//! half count, list and delete the keys of a slot and deliver bus messages to subscribers.

pub mod asm;
pub mod commands;
pub mod debug;
pub mod host;
pub mod reply;
pub mod route;

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use tessera_cluster::{ClusterConfig, ClusterNode, EndpointType};

use crate::config::{Config, PreferredEndpoint};
use crate::server::Server;

pub use route::route;

/// Per-client cluster flags (ASKING is one-shot, READONLY sticks until READWRITE).
#[derive(Debug, Default, Clone, Copy)]
pub struct ClientFlags {
    pub asking: bool,
    pub readonly: bool,
}

/// The running cluster node of a server started with `cluster-enabled yes`.
#[inline]
pub fn node(srv: &Server) -> Option<&ClusterNode> {
    srv.cluster.get()
}

/// True in cluster mode.
#[inline]
pub fn enabled(srv: &Server) -> bool {
    srv.cluster.get().is_some()
}

/// Applies a CONFIG SET of `cluster-*` directives to the cluster state before a command
/// reads it (the cron would take up to 100 ms): one snapshot load and compare when
/// nothing changed.
#[inline]
pub fn sync_config(srv: &Server, node: &ClusterNode) {
    let token = &**srv.config.read() as *const Config as usize as u64;
    node.refresh_config_now(token);
}

/// After CONFIG SET (the `config_set` hook): a cluster node applies its cluster-* settings
/// now rather than at the next cron tick, so the next bus message carries them.
pub fn config_set(srv: &Server) {
    if let Some(node) = srv.cluster.get() {
        sync_config(srv, node);
    }
}

/// What a metrics scrape shows of the cluster (see the node's `metrics` module).
#[derive(Debug, Clone, Default)]
pub struct MetricsView {
    /// CLUSTER INFO's text.
    pub info: String,
    /// This node's slot ranges (inclusive) with the keys each holds.
    pub ranges: Vec<(u16, u16, usize)>,
    /// Slots this node is migrating away / importing.
    pub migrating: usize,
    pub importing: usize,
    /// Times this node took over its master's slots.
    pub failovers: u64,
}

/// The cluster's figures for /metrics; None without cluster mode. The keys are counted
/// after the cluster state's lock is let go, one stripe lock at a time.
pub fn metrics_view(srv: &Server) -> Option<MetricsView> {
    let node = srv.cluster.get()?;
    sync_config(srv, node);
    let (info, ranges, migrating, importing, failovers) = node.with_state(|st| {
        let me = st.myself;
        let mut ranges: Vec<(u16, u16)> = Vec::new();
        for (slot, owner) in st.slots.iter().enumerate() {
            if *owner != Some(me) {
                continue;
            }
            let slot = slot as u16;
            match ranges.last_mut() {
                Some((_, end)) if *end + 1 == slot => *end = slot,
                _ => ranges.push((slot, slot)),
            }
        }
        (
            tessera_cluster::commands::info(st),
            ranges,
            st.migrating.iter().count(),
            st.importing.iter().count(),
            st.stats.failovers,
        )
    });
    let counts = host::slot_key_counts(srv);
    let ranges = ranges
        .into_iter()
        .map(|(a, b)| {
            let keys = (a..=b).map(|s| counts[usize::from(s)]).sum();
            (a, b, keys)
        })
        .collect();
    Some(MetricsView {
        info,
        ranges,
        migrating,
        importing,
        failovers,
    })
}

/// True when nodes.conf names this node a replica. Redis reads nodes.conf before the
/// dataset, and a replica keeps the keys of its RDB that expired meanwhile (its master's
/// DELs remove them); a file that cannot be read is reported by [`start`], not here.
pub fn starts_as_replica(c: &Config) -> bool {
    if !c.typed.cluster_enabled {
        return false;
    }
    let cfg = config_from(c, c.typed.port);
    let path = cfg.config_file.clone();
    matches!(
        tessera_cluster::nodes_conf::load(&path, cfg, 0, 0),
        Ok(Some(st)) if st.me().is_replica()
    )
}

/// The `cluster-*` directives as a [`ClusterConfig`]; nodes.conf is relative to `dir`.
pub fn config_from(c: &Config, port: u16) -> ClusterConfig {
    let c = &c.typed;
    let opt_str = |s: &String| Some(s.clone()).filter(|s| !s.is_empty());
    let opt_port = |p: u16| Some(p).filter(|p| *p != 0);
    let file = Path::new(&c.cluster_config_file);
    let config_file = if file.is_absolute() {
        file.to_path_buf()
    } else {
        c.dir.join(file)
    };
    ClusterConfig {
        enabled: c.cluster_enabled,
        config_file,
        node_timeout_ms: c.cluster_node_timeout,
        port,
        cluster_port: c.cluster_port,
        bind: bus_bind(&c.bind),
        announce_ip: opt_str(&c.cluster_announce_ip),
        announce_port: opt_port(c.cluster_announce_port),
        announce_bus_port: opt_port(c.cluster_announce_bus_port),
        announce_hostname: opt_str(&c.cluster_announce_hostname),
        preferred_endpoint_type: match c.cluster_preferred_endpoint_type {
            PreferredEndpoint::Hostname => EndpointType::Hostname,
            PreferredEndpoint::UnknownEndpoint => EndpointType::UnknownEndpoint,
            PreferredEndpoint::Ip => EndpointType::Ip,
        },
        require_full_coverage: c.cluster_require_full_coverage,
        allow_reads_when_down: c.cluster_allow_reads_when_down,
        allow_pubsubshard_when_down: c.cluster_allow_pubsubshard_when_down,
        replica_validity_factor: c.cluster_replica_validity_factor,
        allow_replica_migration: c.cluster_allow_replica_migration,
        migration_barrier: c.cluster_migration_barrier,
        replica_no_failover: c.cluster_replica_no_failover,
        repl_ping_replica_period_s: c.repl_ping_replica_period.max(1),
        link_sendbuf_limit: c.cluster_link_sendbuf_limit,
        tls_port: c.tls_port,
        tls_cluster: c.tls_cluster,
        announce_tls_port: opt_port(c.cluster_announce_tls_port),
    }
}

/// Copies the run-time settable `cluster-*` directives (after CONFIG SET) into `cfg`.
pub fn refresh_config(srv: &Server, cfg: &mut ClusterConfig) {
    let live = config_from(&srv.config.read(), cfg.port);
    cfg.apply_runtime(&live);
}

/// The bus listens on the first `bind` address (`*` or `-` prefixes as redis.conf).
fn bus_bind(bind: &str) -> String {
    match bind
        .split_whitespace()
        .next()
        .map(|w| w.trim_start_matches('-'))
    {
        None | Some("*") => "0.0.0.0".into(),
        Some("::*") => "::".into(),
        Some(a) => a.to_string(),
    }
}

/// Starts the cluster bus when `cluster-enabled yes`; called once the client port is bound.
/// The error text is what the node prints before exiting (e.g. a corrupt nodes.conf line).
pub async fn start(srv: &Arc<Server>) -> Result<(), String> {
    let cfg = {
        let c = srv.config.read();
        if !c.typed.cluster_enabled {
            return Ok(());
        }
        config_from(&c, srv.port())
    };
    let host = Arc::new(host::KeyspaceHost::new(srv));
    let node = ClusterNode::start(cfg, host)
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!(bus = %node.bus_addr(), "cluster bus listening");
    srv.cluster
        .set(node)
        .map_err(|_| "cluster already started".to_string())?;
    tokio::spawn(asm::cron(Arc::downgrade(srv)));
    Ok(())
}

/// `INFO cluster`. Redis 7.0 shows only `cluster_enabled`; in cluster mode two tessera
/// counters follow (names no Redis version uses): bus messages dropped for an invalid field,
/// and inbound bus links closed as unidentified, stalled or idle.
pub fn info_section(srv: &Server, s: &mut String) {
    let _ = write!(
        s,
        "# Cluster\r\ncluster_enabled:{}\r\n",
        u8::from(enabled(srv))
    );
    if let Some(n) = node(srv) {
        let st = n.stats();
        let _ = write!(
            s,
            "cluster_bus_messages_rejected:{}\r\ncluster_bus_links_timed_out:{}\r\n",
            st.messages_rejected, st.links_timed_out
        );
    }
}

/// Cluster-wide PUBLISH / SPUBLISH: sends the message on the bus (the caller delivered it
/// locally already).
pub fn broadcast_publish(srv: &Server, channel: &[u8], message: &[u8], shard: bool) {
    if let Some(n) = node(srv) {
        n.with_state(|st| st.publish(channel, message, shard));
    }
}
