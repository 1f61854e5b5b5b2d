//! Property tests of the pure planner against a model cluster: from random starting states
//! (fresh, formed, unbalanced, open slots, holes, replaced and removed nodes) repeated
//! plan + apply converges within a bounded number of rounds to full coverage, balanced slots
//! and the right replicas, never loses a key, never demotes or forgets a slot holder, and a
//! converged cluster yields an empty plan.
//!
//! "Balanced": with S shards, q = 16384 / S, every shard master owns q or q+1 slots and no
//! other node owns any.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use tessera_topology::nodes::{to_ranges, NodeView};
use tessera_topology::snapshot::{PodState, Snapshot};
use tessera_topology::{plan, Desired, PodEndpoint, Step, SLOTS};

#[derive(Debug, Clone)]
struct MNode {
    id: String,
    pod: Option<usize>,
    alive: bool,
    replica_of: Option<String>,
    slots: BTreeSet<u16>,
    keys: BTreeMap<u16, u64>,
    migrating: BTreeMap<u16, String>,
    importing: BTreeMap<u16, String>,
    knows: BTreeSet<String>,
    epoch: u64,
}

impl MNode {
    fn new(id: String, pod: Option<usize>) -> Self {
        MNode {
            id,
            pod,
            alive: true,
            replica_of: None,
            slots: BTreeSet::new(),
            keys: BTreeMap::new(),
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
            knows: BTreeSet::new(),
            epoch: 0,
        }
    }
}

#[derive(Debug, Clone)]
struct Model {
    pods: Vec<PodEndpoint>,
    nodes: Vec<MNode>,
    next_id: u32,
}

impl Model {
    fn id(&mut self) -> String {
        self.next_id += 1;
        format!("{:040x}", self.next_id)
    }

    fn idx(&self, id: &str) -> usize {
        self.nodes
            .iter()
            .position(|n| n.id == id)
            .expect("known id")
    }

    fn total_keys(&self) -> u64 {
        self.nodes
            .iter()
            .filter(|n| n.replica_of.is_none())
            .flat_map(|n| n.keys.values())
            .sum()
    }

    fn owner(&self, slot: u16) -> Option<usize> {
        let owners: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].slots.contains(&slot))
            .collect();
        assert!(owners.len() <= 1, "slot {slot} owned twice");
        owners.first().copied()
    }

    fn view(&self, i: usize, myself: bool) -> NodeView {
        let n = &self.nodes[i];
        let (host, port) = match n.pod {
            Some(p) => (self.pods[p].host.clone(), self.pods[p].port),
            None => ("10.9.9.9".to_string(), 7000),
        };
        NodeView {
            id: n.id.clone(),
            host,
            port,
            cport: port + 10000,
            myself,
            master: n.replica_of.is_none(),
            replica_of: n.replica_of.clone(),
            fail: !n.alive,
            config_epoch: n.epoch,
            connected: n.alive,
            slots: to_ranges(n.slots.iter().copied()),
            ..NodeView::default()
        }
    }

    /// The nodes do their own job: gossip spreads knowledge of live nodes; a replica of a dead
    /// slot-holding master takes over (with the data it replicated).
    fn nodes_act(&mut self) {
        for i in 0..self.nodes.len() {
            let dead_master = !self.nodes[i].alive && !self.nodes[i].slots.is_empty();
            if !dead_master {
                continue;
            }
            let id = self.nodes[i].id.clone();
            if let Some(r) = (0..self.nodes.len())
                .find(|&r| self.nodes[r].alive && self.nodes[r].replica_of.as_deref() == Some(&id))
            {
                let slots = std::mem::take(&mut self.nodes[i].slots);
                let keys = std::mem::take(&mut self.nodes[i].keys);
                self.nodes[r].replica_of = None;
                self.nodes[r].slots = slots;
                self.nodes[r].keys = keys;
                self.nodes[r].epoch = 100 + i as u64;
                for k in 0..self.nodes.len() {
                    if self.nodes[k].replica_of.as_deref() == Some(&id) && k != r {
                        let rid = self.nodes[r].id.clone();
                        self.nodes[k].replica_of = Some(rid);
                    }
                }
            }
        }
        loop {
            let mut changed = false;
            for a in 0..self.nodes.len() {
                if !self.nodes[a].alive {
                    continue;
                }
                let known: Vec<String> = self.nodes[a].knows.iter().cloned().collect();
                for b in known {
                    let bi = self.idx(&b);
                    if !self.nodes[bi].alive {
                        continue;
                    }
                    let aid = self.nodes[a].id.clone();
                    changed |= self.nodes[bi].knows.insert(aid);
                    let theirs: Vec<String> = self.nodes[bi]
                        .knows
                        .iter()
                        .filter(|k| self.nodes[self.idx(k)].alive)
                        .cloned()
                        .collect();
                    for k in theirs {
                        if k != self.nodes[a].id {
                            changed |= self.nodes[a].knows.insert(k);
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
    }

    fn snapshot(&self) -> Snapshot {
        let covered = self
            .nodes
            .iter()
            .filter(|n| n.alive)
            .map(|n| n.slots.len())
            .sum::<usize>()
            == usize::from(SLOTS);
        let pods = self
            .pods
            .iter()
            .enumerate()
            .map(|(p, ep)| {
                let Some(i) = self.nodes.iter().position(|n| n.pod == Some(p) && n.alive) else {
                    return PodState {
                        endpoint: ep.clone(),
                        cluster_state: "unknown".into(),
                        ..PodState::default()
                    };
                };
                let n = &self.nodes[i];
                let keys: BTreeMap<u16, u64> = if n.replica_of.is_none() {
                    n.keys
                        .iter()
                        .filter(|(_, c)| **c > 0)
                        .map(|(s, c)| (*s, *c))
                        .collect()
                } else {
                    BTreeMap::new()
                };
                PodState {
                    endpoint: ep.clone(),
                    reachable: true,
                    error: None,
                    myself: Some(self.view(i, true)),
                    peers: n
                        .knows
                        .iter()
                        .map(|k| self.view(self.idx(k), false))
                        .collect(),
                    migrating: n.migrating.clone(),
                    importing: n.importing.clone(),
                    cluster_state: if covered { "ok" } else { "fail" }.into(),
                    current_epoch: 0,
                    known_nodes: n.knows.len() as u32 + 1,
                    dbsize: keys.values().sum(),
                    keys_in_slot: keys,
                    replication: None, // the planner does not read it
                }
            })
            .collect();
        Snapshot {
            pods,
            ..Default::default()
        }
    }

    fn pod_node(&self, pod: &str) -> usize {
        let p = self.pods.iter().position(|e| e.pod == pod).expect("pod");
        self.nodes
            .iter()
            .position(|n| n.pod == Some(p) && n.alive)
            .expect("live node of pod")
    }

    fn move_keys(&mut self, slot: u16, from: usize, to: usize) {
        let k = self.nodes[from].keys.remove(&slot).unwrap_or(0);
        *self.nodes[to].keys.entry(slot).or_default() += k;
    }

    fn apply(&mut self, step: &Step) {
        match step {
            Step::RepairReplication { .. } => {
                panic!("the model reports no INFO replication: nothing to repair")
            }
            Step::Failover { .. } => {
                panic!("the model reports no INFO replication: no replica to fail over to")
            }
            Step::Takeover { .. } => {
                panic!("the model reports no INFO replication: no replica to take over")
            }
            Step::Reset { node, flush, .. } => {
                let i = self.pod_node(&node.pod);
                assert!(self.nodes[i].slots.is_empty(), "reset a slot holder");
                let keys: u64 = self.nodes[i].keys.values().sum();
                if self.nodes[i].replica_of.is_none() {
                    assert!(*flush || keys == 0, "reset a master with keys, no flush");
                }
                // CLUSTER RESET HARD: a new node id on the same pod, knowing nobody.
                let id = self.id();
                let pod = self.nodes[i].pod;
                self.nodes[i].pod = None;
                self.nodes[i].alive = false;
                self.nodes.push(MNode::new(id, pod));
            }
            Step::SetConfigEpoch { node, epoch } => {
                let i = self.pod_node(&node.pod);
                assert!(
                    self.nodes[i].knows.is_empty(),
                    "SET-CONFIG-EPOCH after MEET"
                );
                self.nodes[i].epoch = *epoch;
            }
            Step::AssignSlots { node, ranges } | Step::AssignUnassigned { node, ranges } => {
                let i = self.pod_node(&node.pod);
                assert!(self.nodes[i].replica_of.is_none(), "ADDSLOTS on a replica");
                for (a, b) in ranges {
                    for s in *a..=*b {
                        assert!(self.owner(s).is_none(), "slot {s} assigned twice");
                        self.nodes[i].slots.insert(s);
                    }
                }
            }
            Step::Meet { node, target, .. } => {
                let a = self.pod_node(&node.pod);
                let b = self.pod_node(&target.pod);
                let (ida, idb) = (self.nodes[a].id.clone(), self.nodes[b].id.clone());
                self.nodes[a].knows.insert(idb);
                self.nodes[b].knows.insert(ida);
            }
            Step::Forget { id, on } => {
                let f = self.idx(id);
                assert!(self.nodes[f].slots.is_empty(), "forgot a slot holder");
                for n in on {
                    let i = self.pod_node(&n.pod);
                    assert_ne!(self.nodes[i].replica_of.as_deref(), Some(id.as_str()));
                    self.nodes[i].knows.remove(id);
                }
            }
            Step::Replicate { node, master_id } => {
                let i = self.pod_node(&node.pod);
                assert!(
                    self.nodes[i].slots.is_empty(),
                    "made a slot holder a replica"
                );
                assert_eq!(
                    self.nodes[i].keys.values().sum::<u64>(),
                    0,
                    "replica with keys"
                );
                self.nodes[i].replica_of = Some(master_id.clone());
                self.nodes[i].keys.clear();
            }
            Step::FixOpenSlot {
                slot,
                owner,
                sources,
                open_on,
                ..
            } => {
                let o = self.pod_node(&owner.pod);
                for s in sources {
                    let si = self.pod_node(&s.pod);
                    self.move_keys(*slot, si, o);
                }
                if let Some(prev) = self.owner(*slot).filter(|&p| p != o) {
                    assert_eq!(
                        self.nodes[prev].keys.get(slot).copied().unwrap_or(0),
                        0,
                        "slot {slot} reassigned while its owner holds keys"
                    );
                    self.nodes[prev].slots.remove(slot);
                }
                self.nodes[o].slots.insert(*slot);
                for n in open_on {
                    let i = self.pod_node(&n.pod);
                    self.nodes[i].migrating.remove(slot);
                    self.nodes[i].importing.remove(slot);
                }
            }
            Step::MigrateSlots { from, to, slots } => {
                let f = self.pod_node(&from.pod);
                let t = self.pod_node(&to.pod);
                assert!(self.nodes[t].replica_of.is_none(), "migrating to a replica");
                for s in slots {
                    assert_eq!(self.owner(*s), Some(f), "slot {s} not owned by source");
                    self.move_keys(*s, f, t);
                    self.nodes[f].slots.remove(s);
                    self.nodes[t].slots.insert(*s);
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Scenario {
    cur: u32,
    want: u32,
    replicas: u32,
    formed: bool,
    uneven: u16,
    open_slot: bool,
    hole: bool,
    replaced: u8,
    removed: bool,
    key_seed: u64,
    /// Pods of shards past `cur` come back on kept volumes (scale in, then out): 1 = as
    /// masters knowing the cluster, 2 = as replicas of shard 0's master.
    rejoin: u8,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        1u32..=4,
        1u32..=5,
        0u32..=2,
        any::<bool>(),
        0u16..2000,
        any::<bool>(),
        any::<bool>(),
        0u8..3,
        any::<bool>(),
        1u64..7,
        0u8..3,
    )
        .prop_map(
            |(
                cur,
                want,
                replicas,
                formed,
                uneven,
                open_slot,
                hole,
                replaced,
                removed,
                key_seed,
                rejoin,
            )| {
                Scenario {
                    cur,
                    want,
                    replicas,
                    formed,
                    uneven,
                    open_slot,
                    hole,
                    replaced,
                    removed,
                    key_seed,
                    rejoin,
                }
            },
        )
}

fn build(sc: &Scenario) -> Model {
    let group = sc.replicas + 1;
    let shards = sc.cur.max(sc.want);
    let mut m = Model {
        pods: Vec::new(),
        nodes: Vec::new(),
        next_id: 0,
    };
    for s in 0..shards {
        for o in 0..group {
            let p = m.pods.len();
            m.pods.push(PodEndpoint {
                pod: format!("p{s}-{o}"),
                shard: s,
                ordinal: o,
                host: format!("10.0.{s}.{o}"),
                port: 6379,
            });
            let id = m.id();
            m.nodes.push(MNode::new(id, Some(p)));
        }
    }
    if !sc.formed {
        return m;
    }
    // A formed cluster of `cur` shards (possibly unevenly split), with keys.
    let cur = sc.cur as usize;
    let g = group as usize;
    let mut bounds: Vec<u32> = (0..=cur).map(|k| 16384 * k as u32 / cur as u32).collect();
    if cur > 1 {
        bounds[1] = bounds[1].saturating_sub(u32::from(sc.uneven)).max(1);
    }
    let ids: Vec<String> = m.nodes.iter().take(cur * g).map(|n| n.id.clone()).collect();
    for k in 0..cur {
        let mi = k * g;
        m.nodes[mi].epoch = k as u64 + 1;
        for s in bounds[k]..bounds[k + 1] {
            let s = s as u16;
            m.nodes[mi].slots.insert(s);
            let keys = (u64::from(s) * sc.key_seed) % 3;
            if keys > 0 {
                m.nodes[mi].keys.insert(s, keys);
            }
        }
        for r in 1..g {
            m.nodes[mi + r].replica_of = Some(ids[mi].clone());
        }
    }
    for i in 0..cur * g {
        m.nodes[i].knows = ids.iter().filter(|x| **x != ids[i]).cloned().collect();
    }
    if sc.hole {
        let last = (cur - 1) * g;
        for s in 16300..16384u16 {
            if !m.nodes[last].keys.contains_key(&s) {
                m.nodes[last].slots.remove(&s);
            }
        }
    }
    if sc.open_slot && cur > 1 {
        // Slot 0 half moved from shard 0 to shard 1's master.
        let (a, b) = (0usize, g);
        m.nodes[a].keys.insert(0, 5);
        m.nodes[b].keys.insert(0, 3);
        let (ida, idb) = (m.nodes[a].id.clone(), m.nodes[b].id.clone());
        m.nodes[a].migrating.insert(0, idb);
        m.nodes[b].importing.insert(0, ida);
    }
    if sc.rejoin > 0 && shards > sc.cur {
        // Old nodes of the shards about to be added, back from kept volumes.
        let first = cur * g;
        for i in first..m.nodes.len() {
            m.nodes[i].knows = ids.iter().cloned().collect();
            if sc.rejoin == 2 {
                m.nodes[i].replica_of = Some(ids[0].clone());
                let me = m.nodes[i].id.clone();
                for k in 0..cur * g {
                    m.nodes[k].knows.insert(me.clone());
                }
            }
        }
    }
    if sc.removed {
        // A node removed earlier (no slots), dead, still known to everyone.
        let id = m.id();
        let mut n = MNode::new(id.clone(), None);
        n.alive = false;
        m.nodes.push(n);
        for i in 0..cur * g {
            m.nodes[i].knows.insert(id.clone());
        }
    }
    if (sc.replaced == 1 || sc.replaced == 2) && g > 1 {
        // Pod p0-1 (a replica) or p0-0 (the master) replaced: old node dead, new empty node.
        let victim = if sc.replaced == 1 { 1 } else { 0 };
        m.nodes[victim].alive = false;
        m.nodes[victim].pod = None;
        let id = m.id();
        m.nodes.push(MNode::new(id, Some(victim)));
    }
    m
}

fn check_converged(m: &Model, want: u32) {
    let q = u32::from(SLOTS) / want;
    for s in 0..want {
        let members: Vec<usize> = (0..m.nodes.len())
            .filter(|&i| m.nodes[i].alive && m.nodes[i].pod.is_some_and(|p| m.pods[p].shard == s))
            .collect();
        let masters: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| !m.nodes[i].slots.is_empty())
            .collect();
        assert_eq!(masters.len(), 1, "shard {s} needs exactly one slot holder");
        let n = m.nodes[masters[0]].slots.len() as u32;
        assert!(
            n == q || n == q + 1,
            "shard {s} owns {n} slots, want {q} or {}",
            q + 1
        );
        for &r in &members {
            if r != masters[0] {
                assert_eq!(
                    m.nodes[r].replica_of.as_deref(),
                    Some(m.nodes[masters[0]].id.as_str())
                );
            }
        }
    }
    for n in m.nodes.iter().filter(|n| n.alive) {
        if n.pod.is_some_and(|p| m.pods[p].shard >= want) {
            assert!(n.slots.is_empty(), "a drained node still owns slots");
        }
        assert!(n.migrating.is_empty() && n.importing.is_empty());
        for k in &n.knows {
            assert!(m.nodes[m.idx(k)].alive, "a dead node is still known");
        }
    }
    assert!((0..SLOTS).all(|s| m.owner(s).is_some()), "coverage");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn plan_converges(sc in scenario()) {
        let mut m = build(&sc);
        let desired = Desired { shards: sc.want, replicas_per_shard: sc.replicas, paused: false };
        let keys0 = m.total_keys();
        let mut rounds = 0;
        loop {
            m.nodes_act();
            let steps = plan(&desired, &m.snapshot());
            if steps.is_empty() {
                break;
            }
            rounds += 1;
            prop_assert!(rounds <= 12, "no convergence after 12 rounds; last plan: {steps:#?}");
            for s in &steps {
                m.apply(s);
                prop_assert_eq!(m.total_keys(), keys0, "keys lost by {:?}", s);
            }
        }
        // Removed nodes and dead replaced nodes leave the model once nobody knows them.
        check_converged(&m, sc.want);
        // Converged: the plan stays empty.
        m.nodes_act();
        prop_assert!(plan(&desired, &m.snapshot()).is_empty());
    }
}
