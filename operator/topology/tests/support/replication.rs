//! Pod states built from the replication fixtures (real CLUSTER NODES / INFO replication
//! text of a 1 shard x 1 replica cluster: demo-0-0 at 127.0.0.1:20001, demo-0-1 at :20002).

use std::collections::BTreeMap;
use std::path::PathBuf;

use tessera_topology::nodes::parse_info;
use tessera_topology::snapshot::{PodState, ReplicationInfo};
use tessera_topology::PodEndpoint;

use super::observed::observed_at;

/// A file of tests/fixtures/replication.
pub fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/replication")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The INFO fields of a fixture.
pub fn info(name: &str) -> BTreeMap<String, String> {
    parse_info(&fixture(name))
}

/// Pod `demo-0-<ordinal>` as observed: its CLUSTER NODES fixture and, when given, its INFO.
pub fn pod(ordinal: u32, nodes: &str, info: Option<BTreeMap<String, String>>) -> PodState {
    let endpoint = PodEndpoint {
        pod: format!("demo-0-{ordinal}"),
        shard: 0,
        ordinal,
        host: "127.0.0.1".into(),
        port: 20001 + ordinal as u16,
    };
    PodState {
        current_epoch: 1,
        known_nodes: 2,
        replication: info.map(|i| ReplicationInfo::from_info(&i)),
        ..observed_at(endpoint, &fixture(nodes))
    }
}
