//! The `cluster-*` directives of redis.conf, filled by the node's config loader.

use std::path::PathBuf;

/// `cluster-preferred-endpoint-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EndpointType {
    #[default]
    Ip,
    Hostname,
    UnknownEndpoint,
}

/// Cluster configuration (names follow redis.conf; defaults are Redis 7.0's).
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    pub enabled: bool,
    pub config_file: PathBuf,
    pub node_timeout_ms: u64,
    /// Client port of this node (`port`).
    pub port: u16,
    /// `cluster-port`; 0 means port + 10000.
    pub cluster_port: u16,
    /// Address to bind the bus listener to.
    pub bind: String,
    pub announce_ip: Option<String>,
    pub announce_port: Option<u16>,
    pub announce_bus_port: Option<u16>,
    pub announce_hostname: Option<String>,
    pub preferred_endpoint_type: EndpointType,
    pub require_full_coverage: bool,
    pub allow_reads_when_down: bool,
    pub allow_pubsubshard_when_down: bool,
    pub replica_validity_factor: u64,
    pub allow_replica_migration: bool,
    pub migration_barrier: u64,
    pub replica_no_failover: bool,
    pub repl_ping_replica_period_s: u64,
    /// `cluster-link-sendbuf-limit` in bytes; 0 means no limit.
    pub link_sendbuf_limit: u64,
    /// `tls-port` (0: none).
    pub tls_port: u16,
    /// `tls-cluster`: the bus speaks TLS, and the port a node announces is its TLS port
    /// (its plaintext port goes in the header's pport), as in Redis 7.0.
    pub tls_cluster: bool,
    /// `cluster-announce-tls-port`.
    pub announce_tls_port: Option<u16>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            enabled: false,
            config_file: PathBuf::from("nodes.conf"),
            node_timeout_ms: 15000,
            port: 6379,
            cluster_port: 0,
            bind: "127.0.0.1".into(),
            announce_ip: None,
            announce_port: None,
            announce_bus_port: None,
            announce_hostname: None,
            preferred_endpoint_type: EndpointType::Ip,
            require_full_coverage: true,
            allow_reads_when_down: false,
            allow_pubsubshard_when_down: true,
            replica_validity_factor: 10,
            allow_replica_migration: true,
            migration_barrier: 1,
            replica_no_failover: false,
            repl_ping_replica_period_s: 10,
            link_sendbuf_limit: 0,
            tls_port: 0,
            tls_cluster: false,
            announce_tls_port: None,
        }
    }
}

impl ClusterConfig {
    /// Takes the directives CONFIG SET may change at run time from `live`.
    pub fn apply_runtime(&mut self, live: &ClusterConfig) {
        self.node_timeout_ms = live.node_timeout_ms;
        self.require_full_coverage = live.require_full_coverage;
        self.allow_reads_when_down = live.allow_reads_when_down;
        self.allow_pubsubshard_when_down = live.allow_pubsubshard_when_down;
        self.replica_validity_factor = live.replica_validity_factor;
        self.allow_replica_migration = live.allow_replica_migration;
        self.migration_barrier = live.migration_barrier;
        self.replica_no_failover = live.replica_no_failover;
        self.link_sendbuf_limit = live.link_sendbuf_limit;
        self.announce_hostname = live.announce_hostname.clone();
        self.preferred_endpoint_type = live.preferred_endpoint_type;
        self.announce_port = live.announce_port;
        self.announce_bus_port = live.announce_bus_port;
        self.tls_port = live.tls_port;
        self.tls_cluster = live.tls_cluster;
        self.announce_tls_port = live.announce_tls_port;
        // Peers drop messages whose address is not an IP literal: such a value is not taken.
        if live
            .announce_ip
            .as_deref()
            .is_none_or(crate::validate::is_addr)
        {
            self.announce_ip.clone_from(&live.announce_ip);
        }
    }

    /// The port the bus listens on: `cluster-port`, else the client port nodes are known
    /// by (the TLS one with tls-cluster) plus 10000, as Redis 7.0.
    pub fn bus_port(&self) -> u16 {
        if self.cluster_port != 0 {
            self.cluster_port
        } else if self.tls_cluster {
            self.tls_port.wrapping_add(10000)
        } else {
            self.port.wrapping_add(10000)
        }
    }
    /// Client port announced to peers: the TLS one when the bus is on TLS.
    pub fn announced_port(&self) -> u16 {
        self.announced_ports().0
    }

    /// The plaintext client port announced in the header's pport when the bus is on TLS
    /// (0 otherwise): CLUSTER SLOTS, NODES and redirects show it to plaintext clients.
    pub fn announced_pport(&self) -> u16 {
        self.announced_ports().1
    }

    /// (port, pport) as Redis 7.0's deriveAnnouncedPorts: with tls-cluster and
    /// cluster-announce-tls-port, that and cluster-announce-port (0 when unset: no plaintext
    /// port is announced then); else cluster-announce-port replaces the port (the pport
    /// stays the plaintext port).
    fn announced_ports(&self) -> (u16, u16) {
        let set = |p: Option<u16>| p.filter(|p| *p != 0);
        let port = if self.tls_cluster {
            self.tls_port
        } else {
            self.port
        };
        let pport = if self.tls_cluster { self.port } else { 0 };
        match (
            self.tls_cluster,
            set(self.announce_tls_port),
            set(self.announce_port),
        ) {
            (true, Some(tls), plain) => (tls, plain.unwrap_or(0)),
            (_, _, Some(plain)) => (plain, pport),
            _ => (port, pport),
        }
    }

    /// Bus port announced to peers.
    pub fn announced_bus_port(&self) -> u16 {
        self.announce_bus_port
            .filter(|p| *p != 0)
            .unwrap_or_else(|| self.bus_port())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The announced (port, pport, bus port) for each combination Redis 7.0's
    /// deriveAnnouncedPorts distinguishes.
    #[test]
    fn announced_ports_follow_redis() {
        let c = |tls: bool, a_tls: Option<u16>, a_port: Option<u16>| ClusterConfig {
            port: 6379,
            tls_port: 6380,
            tls_cluster: tls,
            announce_tls_port: a_tls,
            announce_port: a_port,
            ..ClusterConfig::default()
        };
        let ports = |c: ClusterConfig| (c.announced_port(), c.announced_pport(), c.bus_port());
        assert_eq!(ports(c(false, None, None)), (6379, 0, 16379));
        assert_eq!(ports(c(false, Some(7000), Some(7001))), (7001, 0, 16379));
        assert_eq!(ports(c(true, None, None)), (6380, 6379, 16380));
        assert_eq!(ports(c(true, None, Some(7001))), (7001, 6379, 16380));
        assert_eq!(ports(c(true, Some(7000), None)), (7000, 0, 16380));
        assert_eq!(ports(c(true, Some(7000), Some(7001))), (7000, 7001, 16380));
    }
}
