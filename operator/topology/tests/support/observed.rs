//! Pod states the planner tests build from CLUSTER NODES text, one builder for all of them:
//! the parsed view (myself, peers, open slots, known-nodes count) of a reachable pod, every
//! other field default for the case to set with `..` (struct update).

use tessera_topology::nodes::parse_cluster_nodes;
use tessera_topology::snapshot::PodState;
use tessera_topology::PodEndpoint;

/// The port every pod of these cases listens on.
pub const PORT: u16 = 6379;

/// A reachable pod at `endpoint` whose CLUSTER NODES reply is `text`; cluster state "ok",
/// epoch 0, no keys and no INFO replication unless the caller sets them.
pub fn observed_at(endpoint: PodEndpoint, text: &str) -> PodState {
    let r = parse_cluster_nodes(text).expect("CLUSTER NODES");
    PodState {
        endpoint,
        reachable: true,
        error: None,
        known_nodes: r.others.len() as u32 + 1,
        myself: Some(r.myself),
        peers: r.others,
        migrating: r.migrating,
        importing: r.importing,
        cluster_state: "ok".into(),
        ..PodState::default()
    }
}

/// [`observed_at`] pod `name` (`shard`, `ordinal`) at the address its own line gives, on
/// [`PORT`].
pub fn observed(name: &str, shard: u32, ordinal: u32, text: &str) -> PodState {
    let p = observed_at(PodEndpoint::default(), text);
    let host = p
        .myself
        .as_ref()
        .map(|m| m.host.clone())
        .unwrap_or_default();
    PodState {
        endpoint: PodEndpoint {
            pod: name.to_string(),
            shard,
            ordinal,
            host,
            port: PORT,
        },
        ..p
    }
}
