//! The cluster state machine: node table, slot table, epochs, cluster health.
//!
//! Pure: time is passed in (milliseconds since the Unix epoch) and every network effect is
//! queued in `out` for the bus to perform. Message handling lives in `process`, timers and
//! gossip construction in `cron`.

use std::collections::{BTreeMap, HashMap};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::config::ClusterConfig;
use crate::msg::{self, Message, Name, SLOTS};

pub use crate::msg::{
    FLAG_FAIL, FLAG_HANDSHAKE, FLAG_MASTER, FLAG_MEET, FLAG_MIGRATE_TO, FLAG_MYSELF, FLAG_NOADDR,
    FLAG_NOFAILOVER, FLAG_PFAIL, FLAG_SLAVE,
};

/// Identifies one TCP link of the bus.
pub type LinkId = u64;

/// How long a forgotten node stays blacklisted.
pub const BLACKLIST_TTL_MS: u64 = 60_000;
/// A master waits this long after start before declaring the cluster OK.
pub const WRITABLE_DELAY_MS: u64 = 2000;
/// Most inbound links not yet bound to a known node (a peer's first PING binds its link at
/// once; anyone can connect): past it the oldest such link is closed.
pub const MAX_PENDING_INBOUND_LINKS: usize = 128;
/// Rejected bus messages are logged at most once per this many ms (with a count).
const REJECT_LOG_INTERVAL_MS: u64 = 1000;

/// A failure report: which master said the node is failing, and when.
#[derive(Clone, Debug)]
pub struct FailReport {
    pub from: Name,
    pub time: u64,
}

/// One known node (including myself).
#[derive(Clone, Debug)]
pub struct Node {
    pub name: Name,
    pub flags: u16,
    pub ip: String,
    pub port: u16,
    pub pport: u16,
    pub cport: u16,
    pub hostname: String,
    pub human_nodename: String,
    pub shard_id: Name,
    pub master: Option<Name>,
    pub ctime: u64,
    pub ping_sent: u64,
    pub pong_received: u64,
    pub data_received: u64,
    pub fail_time: u64,
    pub voted_time: u64,
    pub config_epoch: u64,
    pub repl_offset: u64,
    pub numslots: usize,
    /// Outbound link (ours), pending or established.
    pub link: Option<LinkId>,
    pub link_connected: bool,
    pub inbound_link: Option<LinkId>,
    pub fail_reports: Vec<FailReport>,
    /// Gossip-round marker to avoid duplicates in one PING.
    pub last_in_ping_gossip: u64,
    /// Header flags as the node last sent them (bits >= 10 tell Valkey capabilities).
    pub wire_flags: u16,
    /// The slots this node owns, as the wire bitmap (kept in step by add_slot/del_slot so
    /// building and comparing headers never scans the slot table).
    pub slot_bits: Box<msg::SlotBitmap>,
    /// Since when (ms) this master has had no working replica though it should (replica
    /// migration waits for it to stay orphaned a while); 0 = not orphaned.
    pub orphaned_time: u64,
}

impl Node {
    pub fn new(name: Name, flags: u16, now: u64) -> Node {
        Node {
            name,
            flags,
            ip: String::new(),
            port: 0,
            pport: 0,
            cport: 0,
            hostname: String::new(),
            human_nodename: String::new(),
            shard_id: [b'0'; 40],
            master: None,
            ctime: now,
            ping_sent: 0,
            pong_received: 0,
            data_received: 0,
            fail_time: 0,
            voted_time: 0,
            config_epoch: 0,
            repl_offset: 0,
            numslots: 0,
            link: None,
            link_connected: false,
            inbound_link: None,
            fail_reports: Vec::new(),
            last_in_ping_gossip: 0,
            wire_flags: 0,
            slot_bits: Box::new([0; msg::SLOTS_BYTES]),
            orphaned_time: 0,
        }
    }
    pub fn is_master(&self) -> bool {
        self.flags & FLAG_MASTER != 0
    }
    pub fn is_replica(&self) -> bool {
        self.flags & FLAG_SLAVE != 0
    }
    /// The port a client is told to use: with `pp` (a plaintext client of a TLS
    /// cluster) the node's plaintext port when it announced one.
    pub fn client_port(&self, pp: bool) -> u16 {
        if pp && self.pport != 0 {
            self.pport
        } else {
            self.port
        }
    }

    pub fn in_handshake(&self) -> bool {
        self.flags & FLAG_HANDSHAKE != 0
    }
    pub fn failed(&self) -> bool {
        self.flags & FLAG_FAIL != 0
    }
    pub fn timed_out(&self) -> bool {
        self.flags & FLAG_PFAIL != 0
    }
    pub fn name_str(&self) -> &str {
        name_str(&self.name)
    }
}

/// The name as text (names we create or accept are ASCII hex).
pub fn name_str(n: &Name) -> &str {
    std::str::from_utf8(n).unwrap_or("????????????????????????????????????????")
}

/// Parses a 40-character node name.
pub fn parse_name(s: &[u8]) -> Option<Name> {
    if s.len() != 40 {
        return None;
    }
    let mut n = [0u8; 40];
    n.copy_from_slice(s);
    Some(n)
}

/// State of one link, as the state machine sees it.
#[derive(Clone, Debug)]
pub struct LinkInfo {
    /// The node this link belongs to (outbound: always; inbound: once bound).
    pub node: Option<Name>,
    pub inbound: bool,
    pub ctime: u64,
    /// When (ms) the last valid message arrived on it; 0 = none yet.
    pub last_rx: u64,
    /// Bytes queued for sending and not yet written to the socket (kept by the bus; shown
    /// by CLUSTER LINKS, checked against cluster-link-sendbuf-limit).
    pub send_queued: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// What the bus must do on behalf of the state machine.
#[derive(Debug)]
pub enum Out {
    /// Open an outbound TCP connection for `link` to ip:cport.
    Connect {
        link: LinkId,
        ip: String,
        cport: u16,
    },
    /// Send a message on a link.
    Send { link: LinkId, msg: Message },
    /// Close a link.
    Close { link: LinkId },
    /// Deliver a PUBLISH/SPUBLISH from the bus to local subscribers.
    Publish {
        channel: Vec<u8>,
        message: Vec<u8>,
        shard: bool,
    },
    /// Our replication master changed (None: we are a master now).
    SetMaster { ip: Option<(String, u16)> },
    /// Delete keys of a slot we lost while holding keys.
    DeleteSlotKeys { slot: u16 },
    /// Empty the keyspace (CLUSTER RESET of a replica).
    FlushAll,
    /// Pause client writes until this time (ms; 0 = resume), for a manual failover.
    PauseWrites { until: u64 },
}

/// Importing or migrating slots: read by index, written through [`OpenSlots::set`] so
/// every change bumps a version (the routing table rebuilds on change).
#[derive(Clone, Debug)]
pub struct OpenSlots {
    v: Vec<Option<Name>>,
    /// The slots set in `v`, so walking them never scans 16384 entries.
    open: std::collections::BTreeSet<u16>,
    version: u64,
}

impl Default for OpenSlots {
    fn default() -> Self {
        OpenSlots {
            v: vec![None; SLOTS],
            open: Default::default(),
            version: 0,
        }
    }
}

impl std::ops::Index<usize> for OpenSlots {
    type Output = Option<Name>;
    fn index(&self, slot: usize) -> &Option<Name> {
        &self.v[slot]
    }
}

impl OpenSlots {
    pub fn set(&mut self, slot: usize, node: Option<Name>) {
        if self.v[slot] != node {
            if node.is_some() {
                self.open.insert(slot as u16);
            } else {
                self.open.remove(&(slot as u16));
            }
            self.v[slot] = node;
            self.version += 1;
        }
    }
    /// (slot, node) of every set entry, by slot.
    pub fn iter(&self) -> impl Iterator<Item = (usize, Name)> + '_ {
        self.open
            .iter()
            .filter_map(|&s| self.v[s as usize].map(|n| (s as usize, n)))
    }
    pub fn get(&self, slot: usize) -> Option<&Option<Name>> {
        self.v.get(slot)
    }
    /// Closes every open slot (from the index: no 16384-entry scan).
    pub fn clear(&mut self) {
        let open: Vec<u16> = self.open.iter().copied().collect();
        for s in open {
            self.set(s as usize, None);
        }
    }
    /// Closes every slot open towards `node`.
    pub fn clear_node(&mut self, node: &Name) {
        let open: Vec<u16> = self
            .iter()
            .filter(|(_, n)| n == node)
            .map(|(s, _)| s as u16)
            .collect();
        for s in open {
            self.set(s as usize, None);
        }
    }
    pub fn version(&self) -> u64 {
        self.version
    }
}

/// Per-type message counters (CLUSTER INFO).
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub sent: [u64; 11],
    pub received: [u64; 11],
    /// Links freed for going over cluster-link-sendbuf-limit.
    pub links_buffer_limit_exceeded: u64,
    /// Times this node took over its master's slots (an election won, a manual failover or
    /// a takeover): what a metrics scrape shows as failovers.
    pub failovers: u64,
    /// Messages dropped because a field failed validation (INFO `cluster_bus_messages_rejected`,
    /// a tessera addition: CLUSTER INFO stays byte for byte Redis 7.0's).
    pub messages_rejected: u64,
    /// Inbound links closed for never identifying themselves, stalling or idling, or to keep
    /// the unidentified ones under [`MAX_PENDING_INBOUND_LINKS`] (INFO
    /// `cluster_bus_links_timed_out`, a tessera addition).
    pub links_timed_out: u64,
    /// Rejections not yet logged, and when the last log line was written.
    pub(crate) rejects_unlogged: u64,
    pub(crate) reject_logged_at: u64,
}

/// The whole cluster view of one node.
pub struct ClusterState {
    pub config: ClusterConfig,
    pub myself: Name,
    pub nodes: BTreeMap<Name, Node>,
    pub slots: Vec<Option<Name>>,
    /// Bumped by every change of `slots` (the routing table rebuilds on change).
    pub slots_version: u64,
    /// Slots with an owner (known or not); equals the sum of `numslots` unless some owner
    /// is missing from `nodes`.
    pub slots_assigned: usize,
    pub importing: OpenSlots,
    pub migrating: OpenSlots,
    /// Slot ranges (inclusive) this node, as the source of an atomic slot migration, has
    /// granted to a target (`FAILOVER-GRANTED`): the target's claim on them is taken
    /// whatever its config epoch, since it bumps its epoch without consensus.
    pub granted_exports: Vec<(Name, u16, u16)>,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    pub state_ok: bool,
    pub size: usize,
    pub links: HashMap<LinkId, LinkInfo>,
    pub blacklist: HashMap<Name, u64>,
    pub stats: Stats,
    pub stats_pfail_nodes: usize,
    pub out: Vec<Out>,
    /// Set when nodes.conf must be rewritten (CLUSTER_TODO_SAVE_CONFIG).
    pub todo_save: bool,
    /// Set when that rewrite must also be fsynced before anything else leaves this node:
    /// replies, votes (CLUSTER_TODO_FSYNC_CONFIG).
    pub todo_fsync: bool,
    /// Set by a command that changed nothing but must not reply before earlier changes
    /// (left to the cron's save) are on disk.
    pub todo_flush: bool,
    /// Sequence number of the latest change that needs saving (see `save::Saver`).
    pub(crate) dirty_seq: u64,
    /// The latest `dirty_seq` whose change asked for an fsync.
    pub(crate) fsync_seq: u64,
    pub todo_update_state: bool,
    pub(crate) next_link: LinkId,
    pub(crate) iteration: u64,
    pub(crate) pings_sent: u64,
    pub(crate) first_update_time: Option<u64>,
    pub(crate) among_minority_time: u64,
    pub(crate) rng: StdRng,
    /// Replica failover election in progress.
    pub election: crate::failover::Election,
    /// Manual failover in progress (CLUSTER FAILOVER).
    pub mf: crate::failover::ManualFailover,
    /// Last time (ms) a replica heard from its master; set by the replication side.
    pub repl_last_io: u64,
    /// Where the host's replication points as far as we know: what we last asked of it
    /// (`Out::SetMaster`), corrected each cron tick by what the host reports
    /// (`Host::replication_master`). The cron re-points a replica whose target is not its
    /// master's current address (see `replication.rs`).
    pub repl_target: Option<(String, u16)>,
    /// Earliest time (ms) the cron asks again for a re-point (a host that did not take the
    /// last one is not asked every tick).
    pub(crate) repl_repair_after: u64,
    /// Incoming messages of this type are counted and dropped (DEBUG
    /// DROP-CLUSTER-PACKET-FILTER, set by the bus from the host; -1: none).
    pub drop_packet_filter: i64,
    /// The host is loading a dataset (set by the cron): a replica then announces offset 0,
    /// as Redis's replicationGetSlaveOffset while its master link is being rebuilt.
    pub host_loading: bool,
}

impl ClusterState {
    /// A fresh node with a random name and no slots.
    pub fn new(config: ClusterConfig, now: u64, seed: u64) -> ClusterState {
        let mut rng = StdRng::seed_from_u64(seed);
        let myself = random_name(&mut rng);
        let mut st = ClusterState {
            config,
            myself,
            nodes: BTreeMap::new(),
            slots: vec![None; SLOTS],
            slots_version: 0,
            slots_assigned: 0,
            importing: OpenSlots::default(),
            migrating: OpenSlots::default(),
            granted_exports: Vec::new(),
            current_epoch: 0,
            last_vote_epoch: 0,
            state_ok: false,
            // Redis starts at 1 (clusterInit), visible in CLUSTER INFO before the first update.
            size: 1,
            links: HashMap::new(),
            blacklist: HashMap::new(),
            stats: Stats::default(),
            stats_pfail_nodes: 0,
            out: Vec::new(),
            todo_save: true,
            todo_fsync: false,
            todo_flush: false,
            dirty_seq: 0,
            fsync_seq: 0,
            todo_update_state: true,
            next_link: 1,
            iteration: 0,
            pings_sent: 0,
            first_update_time: None,
            among_minority_time: 0,
            rng,
            election: Default::default(),
            mf: Default::default(),
            repl_last_io: 0,
            repl_target: None,
            repl_repair_after: 0,
            drop_packet_filter: -1,
            host_loading: false,
        };
        let mut me = Node::new(myself, FLAG_MYSELF | FLAG_MASTER, now);
        st.fill_myself_addr(&mut me);
        me.shard_id = random_name(&mut st.rng);
        st.nodes.insert(myself, me);
        st
    }

    pub(crate) fn fill_myself_addr(&self, me: &mut Node) {
        me.port = self.config.announced_port();
        me.pport = self.config.announced_pport();
        me.cport = self.config.announced_bus_port();
        if let Some(ip) = &self.config.announce_ip {
            me.ip = ip.clone();
        }
        me.hostname = self.config.announce_hostname.clone().unwrap_or_default();
    }

    /// Takes the run-time settable directives from `live` (CONFIG SET) and brings myself in
    /// line with them. A changed cluster-announce-ip replaces our address, an emptied one
    /// clears it so that peers teach it again (clusterUpdateMyselfIp).
    pub fn apply_config(&mut self, live: &ClusterConfig) {
        let old_ip = self.config.announce_ip.clone();
        self.config.apply_runtime(live);
        if self.config.announce_ip != old_ip {
            let ip = self.config.announce_ip.clone().unwrap_or_default();
            self.me_mut().ip = ip;
            self.todo_save = true;
        }
        self.sync_myself_config();
    }

    /// Brings myself in line with the run-time settable config (clusterUpdateMyselfFlags,
    /// clusterUpdateMyselfHostname): the nofailover flag and the announced hostname, both
    /// carried to peers by the next PING/PONG (header flags, hostname extension).
    pub fn sync_myself_config(&mut self) {
        let nofailover = self.config.replica_no_failover;
        let hostname = self.config.announce_hostname.clone().unwrap_or_default();
        let (port, pport, cport) = (
            self.config.announced_port(),
            self.config.announced_pport(),
            self.config.announced_bus_port(),
        );
        let me = self.me_mut();
        // clusterUpdateMyselfAnnouncedPorts: shown and gossiped at once, saved with the next
        // change (a load takes them from the config again).
        me.port = port;
        me.pport = pport;
        me.cport = cport;
        let mut changed = false;
        if (me.flags & FLAG_NOFAILOVER != 0) != nofailover {
            me.flags ^= FLAG_NOFAILOVER;
            changed = true;
        }
        if me.hostname != hostname {
            me.hostname = hostname;
            changed = true;
        }
        if changed {
            self.todo_save = true;
            self.todo_update_state = true;
        }
    }

    pub fn me(&self) -> &Node {
        &self.nodes[&self.myself]
    }
    pub fn me_mut(&mut self) -> &mut Node {
        self.nodes
            .get_mut(&self.myself)
            .expect("myself is always in the node table")
    }
    pub fn node(&self, n: &Name) -> Option<&Node> {
        self.nodes.get(n)
    }
    pub fn new_name(&mut self) -> Name {
        random_name(&mut self.rng)
    }
    pub(crate) fn alloc_link(&mut self, node: Option<Name>, inbound: bool, now: u64) -> LinkId {
        let id = self.next_link;
        self.next_link += 1;
        self.links.insert(
            id,
            LinkInfo {
                node,
                inbound,
                ctime: now,
                last_rx: 0,
                send_queued: Default::default(),
            },
        );
        id
    }

    /// The master whose slots this node serves: myself or my master.
    pub fn my_master(&self) -> Option<Name> {
        if self.me().is_master() {
            Some(self.myself)
        } else {
            self.me().master
        }
    }

    /// The config epoch shown/sent for a node: a replica uses its master's.
    pub fn node_epoch(&self, n: &Node) -> u64 {
        if n.is_replica() {
            if let Some(m) = n.master.and_then(|m| self.nodes.get(&m)) {
                return m.config_epoch;
            }
        }
        n.config_epoch
    }

    // ----- slots -----

    pub fn add_slot(&mut self, owner: Name, slot: usize) -> bool {
        if self.slots[slot].is_some() {
            return false;
        }
        self.slots[slot] = Some(owner);
        self.slots_version += 1;
        self.slots_assigned += 1;
        if let Some(n) = self.nodes.get_mut(&owner) {
            n.numslots += 1;
            msg::bitmap_set(&mut n.slot_bits, slot);
        }
        true
    }
    pub fn del_slot(&mut self, slot: usize) -> bool {
        let Some(owner) = self.slots[slot].take() else {
            return false;
        };
        self.slots_version += 1;
        self.slots_assigned -= 1;
        if let Some(n) = self.nodes.get_mut(&owner) {
            n.numslots = n.numslots.saturating_sub(1);
            n.slot_bits[slot >> 3] &= !(1 << (slot & 7));
        }
        true
    }
    /// Removes every slot of a node; returns how many.
    pub fn del_node_slots(&mut self, owner: &Name) -> usize {
        let mut k = 0;
        if let Some(n) = self.nodes.get(owner) {
            // A known node's bitmap lists exactly the slots it owns.
            let bits = n.slot_bits.clone();
            msg::for_each_slot_in_diff(&bits, &[0; msg::SLOTS_BYTES], |s| {
                self.del_slot(s);
                k += 1;
            });
            return k;
        }
        for s in 0..SLOTS {
            if self.slots[s].as_ref() == Some(owner) {
                self.del_slot(s);
                k += 1;
            }
        }
        k
    }
    pub fn slot_bitmap(&self, owner: &Name) -> Box<msg::SlotBitmap> {
        if let Some(n) = self.nodes.get(owner) {
            return n.slot_bits.clone();
        }
        let mut b = Box::new([0u8; msg::SLOTS_BYTES]);
        for s in 0..SLOTS {
            if self.slots[s].as_ref() == Some(owner) {
                msg::bitmap_set(&mut b, s);
            }
        }
        b
    }
    /// True when every assigned slot's owner is in the node table (then the nodes'
    /// bitmaps and `numslots` describe the slot table exactly).
    pub fn owners_known(&self) -> bool {
        self.nodes.values().map(|n| n.numslots).sum::<usize>() == self.slots_assigned
    }

    /// Slot ranges of every owner in the node table (from the nodes' bitmaps).
    pub fn all_slot_ranges(&self) -> HashMap<Name, Vec<(usize, usize)>> {
        self.nodes
            .values()
            .filter(|n| n.numslots > 0)
            .map(|n| (n.name, msg::bitmap_ranges(&n.slot_bits)))
            .collect()
    }

    /// Slot ranges owned by a node, as (start, end) inclusive.
    pub fn slot_ranges(&self, owner: &Name) -> Vec<(usize, usize)> {
        match self.nodes.get(owner) {
            Some(n) if n.numslots == 0 => Vec::new(),
            Some(n) => msg::bitmap_ranges(&n.slot_bits),
            None => {
                let mut v = Vec::new();
                let mut start: Option<usize> = None;
                for s in 0..=SLOTS {
                    let mine = s < SLOTS && self.slots[s].as_ref() == Some(owner);
                    match (mine, start) {
                        (true, None) => start = Some(s),
                        (false, Some(a)) => {
                            v.push((a, s - 1));
                            start = None;
                        }
                        _ => {}
                    }
                }
                v
            }
        }
    }

    // ----- nodes -----

    /// Removes a node: its slots, its links, the reports it filed, its replica relations.
    pub fn del_node(&mut self, name: &Name) {
        self.importing.clear_node(name);
        self.migrating.clear_node(name);
        for n in self.nodes.values_mut() {
            n.fail_reports.retain(|r| &r.from != name);
            if n.master.as_ref() == Some(name) {
                n.master = None;
            }
        }
        self.del_node_slots(name);
        if let Some(n) = self.nodes.remove(name) {
            for l in [n.link, n.inbound_link].into_iter().flatten() {
                self.links.remove(&l);
                self.out.push(Out::Close { link: l });
            }
        }
        self.todo_save = true;
        self.todo_update_state = true;
    }

    /// Renames a node (handshake node learning its real name).
    pub fn rename_node(&mut self, old: &Name, new: Name) {
        if let Some(mut n) = self.nodes.remove(old) {
            n.name = new;
            for l in [n.link, n.inbound_link].into_iter().flatten() {
                if let Some(li) = self.links.get_mut(&l) {
                    li.node = Some(new);
                }
            }
            self.nodes.insert(new, n);
        }
    }

    /// Closes the outbound link of a node (the cron will redial).
    pub fn free_link_of(&mut self, name: &Name) {
        if let Some(n) = self.nodes.get_mut(name) {
            if let Some(l) = n.link.take() {
                n.link_connected = false;
                self.links.remove(&l);
                self.out.push(Out::Close { link: l });
            }
        }
    }

    /// DEBUG CLUSTERLINK KILL: closes the outbound (`to`) and/or inbound (`from`) link of a
    /// node at once, as Redis's freeClusterLink, so a message queued next in the same command
    /// or transaction is not sent to it; the cron redials the outbound link, the peer its own.
    /// False when the node is unknown.
    pub fn kill_links(&mut self, name: &Name, to: bool, from: bool) -> bool {
        let Some(n) = self.nodes.get_mut(name) else {
            return false;
        };
        let mut gone = Vec::with_capacity(2);
        if to {
            if let Some(l) = n.link.take() {
                n.link_connected = false;
                gone.push(l);
            }
        }
        if from {
            gone.extend(n.inbound_link.take());
        }
        for l in gone {
            self.links.remove(&l);
            self.out.push(Out::Close { link: l });
        }
        true
    }

    pub fn blacklist_add(&mut self, name: Name, now: u64) {
        self.blacklist.retain(|_, exp| *exp > now);
        self.blacklist.insert(name, now + BLACKLIST_TTL_MS);
    }
    pub fn blacklisted(&self, name: &Name, now: u64) -> bool {
        self.blacklist.get(name).is_some_and(|exp| *exp > now)
    }

    /// Makes `name` a master (clearing replica state).
    pub fn set_node_as_master(&mut self, name: &Name) {
        let Some(n) = self.nodes.get_mut(name) else {
            return;
        };
        if n.is_master() {
            return;
        }
        // A replica that took over a master is supposed to have replicas too
        // (clusterSetNodeAsMaster sets MIGRATE_TO).
        if n.master.is_some() && n.flags & FLAG_MYSELF == 0 {
            n.flags |= FLAG_MIGRATE_TO;
        }
        n.flags &= !FLAG_SLAVE;
        n.flags |= FLAG_MASTER;
        n.master = None;
        self.todo_save = true;
        self.todo_update_state = true;
    }

    /// A master that gets a replica is one replica migration may refill later
    /// (clusterNodeAddSlave sets MIGRATE_TO).
    pub(crate) fn note_replica_added(&mut self, master: &Name) {
        if let Some(m) = self.nodes.get_mut(master) {
            m.flags |= FLAG_MIGRATE_TO;
        }
    }

    /// Replicas of a master, by name.
    pub fn replicas_of(&self, master: &Name) -> Vec<Name> {
        self.nodes
            .values()
            .filter(|n| n.master.as_ref() == Some(master))
            .map(|n| n.name)
            .collect()
    }

    // ----- failure reports -----

    pub(crate) fn add_failure_report(&mut self, failing: &Name, from: Name, now: u64) -> bool {
        let Some(n) = self.nodes.get_mut(failing) else {
            return false;
        };
        if let Some(r) = n.fail_reports.iter_mut().find(|r| r.from == from) {
            r.time = now;
            return false;
        }
        n.fail_reports.push(FailReport { from, time: now });
        true
    }
    pub(crate) fn del_failure_report(&mut self, failing: &Name, from: &Name) -> bool {
        let Some(n) = self.nodes.get_mut(failing) else {
            return false;
        };
        let before = n.fail_reports.len();
        n.fail_reports.retain(|r| &r.from != from);
        before != n.fail_reports.len()
    }
    /// Valid (younger than 2·NT) failure reports for a node, expiring old ones.
    pub fn failure_reports(&mut self, name: &Name, now: u64) -> usize {
        let validity = self.config.node_timeout_ms.saturating_mul(2);
        let Some(n) = self.nodes.get_mut(name) else {
            return 0;
        };
        n.fail_reports
            .retain(|r| now.saturating_sub(r.time) <= validity);
        n.fail_reports.len()
    }

    // ----- cluster health -----

    /// Recomputes OK/FAIL (clusterUpdateState).
    pub fn update_state(&mut self, now: u64) {
        self.todo_update_state = false;
        let first = *self.first_update_time.get_or_insert(now);
        if self.me().is_master() && !self.state_ok && now.saturating_sub(first) < WRITABLE_DELAY_MS
        {
            return;
        }
        let mut new_ok = true;
        if self.config.require_full_coverage {
            // Every slot owned by a known, non-failed node (from numslots: no slot scan).
            let served: usize = self
                .nodes
                .values()
                .filter(|n| !n.failed())
                .map(|n| n.numslots)
                .sum();
            if served != SLOTS {
                new_ok = false;
            }
        }
        let mut size = 0;
        let mut reachable = 0;
        for n in self.nodes.values() {
            if n.is_master() && n.numslots > 0 {
                size += 1;
                if n.flags & (FLAG_FAIL | FLAG_PFAIL) == 0 {
                    reachable += 1;
                }
            }
        }
        self.size = size;
        if reachable < size / 2 + 1 {
            new_ok = false;
            // The rejoin delay below keeps a master that was cut off from taking writes
            // before the cluster could fail it over. A node that knows no slot owner at all
            // (a cluster being formed) was cut off from nothing: counting it as a minority
            // kept a new cluster's masters failing for min(node timeout, 5 s) after their
            // slots were assigned.
            if size > 0 {
                self.among_minority_time = now;
            }
        }
        if new_ok != self.state_ok {
            let rejoin = self.config.node_timeout_ms.clamp(500, 5000);
            if new_ok
                && self.me().is_master()
                && now.saturating_sub(self.among_minority_time) < rejoin
            {
                return;
            }
            self.state_ok = new_ok;
        }
    }

    /// Counts a message dropped for an invalid field; logs at most once a second (a hostile
    /// peer must not flood the log), with how many were dropped since the last line.
    pub(crate) fn note_rejected(&mut self, peer_ip: &str, err: &msg::MsgError, now: u64) {
        self.stats.messages_rejected += 1;
        self.stats.rejects_unlogged += 1;
        if now.saturating_sub(self.stats.reject_logged_at) >= REJECT_LOG_INTERVAL_MS {
            tracing::warn!(
                peer = peer_ip,
                error = %err,
                dropped = self.stats.rejects_unlogged,
                "dropped cluster bus message(s) with an invalid field"
            );
            self.stats.rejects_unlogged = 0;
            self.stats.reject_logged_at = now;
        }
    }

    /// Counts a message we sent.
    pub(crate) fn count_sent(&mut self, ty: u16) {
        if let Some(c) = self.stats.sent.get_mut(ty as usize) {
            *c += 1;
        }
    }
}

/// A random 40-character lowercase hex name.
pub fn random_name(rng: &mut StdRng) -> Name {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut n = [0u8; 40];
    for c in n.iter_mut() {
        *c = HEX[rng.random_range(0..16)];
    }
    n
}
