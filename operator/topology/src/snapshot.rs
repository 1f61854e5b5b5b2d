//! The observed state of every pod, and pure derived facts the planner and report share.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::nodes::NodeView;
use super::{PodEndpoint, SLOTS};

/// What one pod told us (or that it told us nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodState {
    pub endpoint: PodEndpoint,
    pub reachable: bool,
    pub error: Option<String>,
    /// The node's own line; `None` when unreachable.
    pub myself: Option<NodeView>,
    /// How this node sees every other node it knows.
    pub peers: Vec<NodeView>,
    pub migrating: BTreeMap<u16, String>,
    pub importing: BTreeMap<u16, String>,
    pub cluster_state: String,
    pub current_epoch: u64,
    pub known_nodes: u32,
    pub dbsize: u64,
    /// COUNTKEYSINSLOT results for the slots that needed counting (open or unassigned).
    pub keys_in_slot: BTreeMap<u16, u64>,
    /// INFO replication; `None` when unreachable or not read.
    #[serde(default)]
    pub replication: Option<ReplicationInfo>,
}

/// The fields of INFO replication that say whether a replica could take over its master.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicationInfo {
    /// `master` or `slave`.
    pub role: String,
    /// `up` once the replica finished a sync and streams from its master.
    pub master_link_status: Option<String>,
    pub master_sync_in_progress: bool,
    /// Seconds since the replica last heard from its master (-1 when never).
    pub master_last_io_seconds_ago: Option<i64>,
    pub slave_repl_offset: Option<u64>,
    pub master_repl_offset: Option<u64>,
    /// Where a replica's replication points (`master_host`/`master_port`).
    #[serde(default)]
    pub master_host: Option<String>,
    #[serde(default)]
    pub master_port: Option<u16>,
    /// Seconds the link has been down; `None` when up or never up since it was pointed.
    #[serde(default)]
    pub master_link_down_since_seconds: Option<u64>,
    /// A master's replicas as it lists them (`slaveN:ip=..,port=..,state=..,offset=..`).
    #[serde(default)]
    pub links: Vec<ReplicaLink>,
}

/// One `slaveN:` line of a master's INFO replication.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaLink {
    pub ip: String,
    pub port: u16,
    /// `online` once the replica streams; `wait_bgsave`/`send_bulk` while it syncs.
    pub state: String,
    /// The replication offset the replica acknowledged.
    pub offset: u64,
}

impl ReplicaLink {
    /// Parses the value of a `slaveN:` line; `None` when a field is missing or malformed.
    pub fn parse(v: &str) -> Option<Self> {
        let mut out = ReplicaLink::default();
        let (mut ip, mut port, mut offset) = (false, false, false);
        for kv in v.trim().split(',') {
            let (k, v) = kv.split_once('=')?;
            match k {
                "ip" => {
                    out.ip = v.to_string();
                    ip = true;
                }
                "port" => {
                    out.port = v.parse().ok()?;
                    port = true;
                }
                "state" => out.state = v.to_string(),
                "offset" => {
                    out.offset = v.parse().ok()?;
                    offset = true;
                }
                _ => {}
            }
        }
        (ip && port && offset).then_some(out)
    }
}

impl ReplicationInfo {
    /// Longest silence from the master we still call in sync: redis-server's default
    /// repl-timeout, after which the replica drops the link itself.
    pub const MAX_IO_SILENCE_SECS: i64 = 60;

    /// From the key/value pairs of an INFO replication reply.
    pub fn from_info(info: &BTreeMap<String, String>) -> Self {
        let get = |k: &str| info.get(k).map(|v| v.trim().to_string());
        let num = |k: &str| get(k).and_then(|v| v.parse::<i64>().ok());
        let offset = |k: &str| num(k).and_then(|v| u64::try_from(v).ok());
        Self {
            role: get("role").unwrap_or_default(),
            master_link_status: get("master_link_status"),
            master_sync_in_progress: num("master_sync_in_progress").is_some_and(|v| v != 0),
            master_last_io_seconds_ago: num("master_last_io_seconds_ago"),
            slave_repl_offset: offset("slave_repl_offset"),
            master_repl_offset: offset("master_repl_offset"),
            master_host: get("master_host").filter(|h| !h.is_empty()),
            master_port: num("master_port").and_then(|p| u16::try_from(p).ok()),
            master_link_down_since_seconds: offset("master_link_down_since_seconds"),
            links: (0..)
                .map_while(|i| info.get(&format!("slave{i}")))
                .filter_map(|v| ReplicaLink::parse(v))
                .collect(),
        }
    }

    /// Replication offset bytes the replica's may trail its master's and still count as in
    /// sync: the two are read a moment apart, and a replica acknowledges once a second.
    pub const MAX_IN_SYNC_LAG_BYTES: u64 = 1 << 20;

    /// True when this node is a replica whose first sync completed and whose link is up: the
    /// state in which redis-server lets a replica fail over. Byte lag is not part of it: under
    /// a steady write load it is never zero, and it does not block a failover.
    pub fn replica_in_sync(&self) -> bool {
        self.role == "slave"
            && self.master_link_status.as_deref() == Some("up")
            && !self.master_sync_in_progress
            && self
                .master_last_io_seconds_ago
                .is_some_and(|s| (0..=Self::MAX_IO_SILENCE_SECS).contains(&s))
    }
}

impl PodState {
    /// The node id, when known.
    pub fn id(&self) -> Option<&str> {
        self.myself.as_ref().map(|m| m.id.as_str())
    }

    /// True when the node is a master (by its own account).
    pub fn is_master(&self) -> bool {
        self.myself.as_ref().is_some_and(|m| m.master)
    }

    /// The master this node replicates, by its own account.
    pub fn replica_of(&self) -> Option<&str> {
        self.myself.as_ref().and_then(|m| m.replica_of.as_deref())
    }

    /// Slots this node claims for itself.
    pub fn own_slot_count(&self) -> u32 {
        self.myself.as_ref().map_or(0, NodeView::slot_count)
    }

    /// How this node sees the node `id`.
    pub fn view_of(&self, id: &str) -> Option<&NodeView> {
        self.peers.iter().find(|p| p.id == id)
    }

    /// Whether this node has any open (migrating/importing) slot.
    pub fn has_open_slots(&self) -> bool {
        !self.migrating.is_empty() || !self.importing.is_empty()
    }
}

/// Every pod's observation, in the order of the endpoint list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub pods: Vec<PodState>,
    /// The largest `cluster-node-timeout` (ms) the reachable pods run with; `None` when none
    /// said (then Redis's default, [`Snapshot::DEFAULT_NODE_TIMEOUT_MS`], is assumed). The
    /// planner's failure bounds are multiples of it (see `plan/takeover.rs`).
    #[serde(default)]
    pub node_timeout_ms: Option<u64>,
}

/// A claim on a slot: which node, with which config epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub id: String,
    pub epoch: u64,
}

impl Snapshot {
    /// Redis's default `cluster-node-timeout`.
    pub const DEFAULT_NODE_TIMEOUT_MS: u64 = 15_000;

    /// The cluster's node timeout in ms, as observed or Redis's default.
    pub fn node_timeout_ms(&self) -> u64 {
        self.node_timeout_ms
            .unwrap_or(Self::DEFAULT_NODE_TIMEOUT_MS)
    }

    /// Index of the pod whose node id is `id`.
    pub fn pod_of(&self, id: &str) -> Option<usize> {
        self.pods.iter().position(|p| p.id() == Some(id))
    }

    /// Ids of every pod we could read.
    pub fn pod_ids(&self) -> BTreeSet<&str> {
        self.pods.iter().filter_map(PodState::id).collect()
    }

    /// Nodes some pod knows of that are not any pod's current node (removed or replaced).
    pub fn foreign_nodes(&self) -> BTreeMap<String, NodeView> {
        let ids = self.pod_ids();
        let mut out = BTreeMap::new();
        for p in self.pods.iter().filter(|p| p.reachable) {
            for v in &p.peers {
                if !ids.contains(v.id.as_str()) && !v.handshake {
                    out.entry(v.id.clone()).or_insert_with(|| v.clone());
                }
            }
        }
        out
    }

    /// Who owns each slot. A reachable node's claim on itself wins; for nodes we cannot read,
    /// the claims other nodes report are used. Conflicts resolve to the higher config epoch,
    /// as the cluster itself does.
    pub fn slot_owners(&self) -> Vec<Option<Claim>> {
        let mut owners: Vec<Option<Claim>> = vec![None; usize::from(SLOTS)];
        let self_ids = self.pod_ids();
        let mut put = |id: &str, epoch: u64, ranges: &[(u16, u16)]| {
            for (a, b) in ranges {
                for s in *a..=*b {
                    let slot = &mut owners[usize::from(s)];
                    let replace = match slot {
                        None => true,
                        Some(c) => epoch > c.epoch || (epoch == c.epoch && id > c.id.as_str()),
                    };
                    if replace {
                        *slot = Some(Claim {
                            id: id.to_string(),
                            epoch,
                        });
                    }
                }
            }
        };
        for p in self.pods.iter() {
            if let Some(m) = &p.myself {
                if m.master {
                    put(&m.id, m.config_epoch, &m.slots);
                }
            }
        }
        // Nodes we cannot read ourselves: take the freshest view any reachable pod has.
        let mut seen = BTreeSet::new();
        for p in self.pods.iter().filter(|p| p.reachable) {
            for v in &p.peers {
                if v.master && !self_ids.contains(v.id.as_str()) && seen.insert(v.id.clone()) {
                    let best = self
                        .pods
                        .iter()
                        .filter_map(|q| q.view_of(&v.id))
                        .max_by_key(|x| x.config_epoch)
                        .unwrap_or(v);
                    put(&best.id, best.config_epoch, &best.slots);
                }
            }
        }
        owners
    }

    /// Every slot that is open anywhere, with the nodes that have it open.
    pub fn open_slots(&self) -> BTreeMap<u16, Vec<usize>> {
        let mut out: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
        for (i, p) in self.pods.iter().enumerate() {
            for s in p.migrating.keys().chain(p.importing.keys()) {
                let v = out.entry(*s).or_default();
                if !v.contains(&i) {
                    v.push(i);
                }
            }
        }
        out
    }

    /// Keys pod `i` holds in `slot`, if we counted them.
    pub fn keys_in(&self, i: usize, slot: u16) -> Option<u64> {
        let p = &self.pods[i];
        if p.dbsize == 0 {
            return Some(0);
        }
        p.keys_in_slot.get(&slot).copied()
    }
}
