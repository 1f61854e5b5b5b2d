//! A lock-free-to-read routing snapshot: who owns each slot, which slots are open, and the
//! few cluster facts `routing::route` consults.
//!
//! Every keyed command in cluster mode routes; locking the whole cluster state for that
//! serialises all clients behind the bus. The bus rebuilds this table (under the state lock,
//! so snapshots are published in state order) only when its inputs change, which a cheap
//! fingerprint detects, and readers take a shared read lock for a few loads. Slots being
//! migrated or imported are left to the slow path (the full state), since their answer
//! depends on key existence.

use std::hash::{Hash, Hasher};

use crate::msg::{Name, SLOTS};
use crate::routing::{key_hash_slot, preferred_endpoint, Route, RouteQuery};
use crate::state::ClusterState;

/// "No node": 0, so tables start zeroed (a calloc, cheap also in debug builds);
/// node `i` of `nodes` is stored as `i + 1`.
const NONE: u16 = 0;

/// Immutable routing facts, built from one state version.
#[derive(Debug, Clone)]
pub struct RouteTable {
    /// 1 + index into `nodes` of each slot's owner, or `NONE`.
    owner: Vec<u16>,
    /// Slots routing cannot decide without the keyspace (migrating from me, importing).
    open: Vec<u64>,
    /// (endpoint, port, plaintext port) of each owner, as MOVED names it (the plaintext
    /// one for plaintext clients of a TLS cluster).
    nodes: Vec<(String, u16, u16)>,
    /// tls-cluster: redirects of plaintext clients name plaintext ports.
    tls_cluster: bool,
    /// 1 + index of myself in `nodes`.
    me: u16,
    /// 1 + index of my master in `nodes` when I am a replica.
    my_master: u16,
    me_replica: bool,
    state_ok: bool,
    allow_reads_when_down: bool,
    allow_pubsubshard_when_down: bool,
    /// The state version this table was built from.
    fingerprint: u64,
}

impl Default for RouteTable {
    /// A table that sends everything to the slow path until the first build.
    fn default() -> Self {
        RouteTable {
            owner: vec![NONE; SLOTS],
            open: vec![u64::MAX; SLOTS / 64],
            nodes: Vec::new(),
            tls_cluster: false,
            me: NONE,
            my_master: NONE,
            me_replica: false,
            state_ok: false,
            allow_reads_when_down: false,
            allow_pubsubshard_when_down: false,
            fingerprint: 0,
        }
    }
}

/// A hash of everything the table depends on; O(nodes), no slot scan (slot changes bump
/// versions in the state).
pub fn fingerprint(st: &ClusterState) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        st.slots_version,
        st.importing.version(),
        st.migrating.version(),
        st.state_ok,
    )
        .hash(&mut h);
    let c = &st.config;
    (
        c.allow_reads_when_down,
        c.allow_pubsubshard_when_down,
        c.preferred_endpoint_type as u8,
        c.tls_cluster,
    )
        .hash(&mut h);
    st.myself.hash(&mut h);
    for n in st.nodes.values() {
        (
            &n.name,
            &n.ip,
            n.port,
            n.pport,
            &n.hostname,
            n.flags & 0x3,
            n.master,
        )
            .hash(&mut h);
    }
    // 0 is reserved for "never built".
    h.finish().max(1)
}

impl RouteTable {
    /// Builds the table from the state.
    pub fn build(st: &ClusterState, fingerprint: u64) -> RouteTable {
        let mut index: Vec<(Name, u16)> = Vec::new();
        let mut nodes = Vec::new();
        let mut idx_of = |name: Name, nodes: &mut Vec<(String, u16, u16)>| -> u16 {
            if let Some((_, i)) = index.iter().find(|(n, _)| *n == name) {
                return *i;
            }
            let Some(n) = st.nodes.get(&name) else {
                return NONE;
            };
            let i = nodes.len() as u16 + 1;
            nodes.push((preferred_endpoint(st, n), n.port, n.pport));
            index.push((name, i));
            i
        };
        let mut owner = vec![NONE; SLOTS];
        let mut open = vec![0u64; SLOTS / 64];
        let mut mark = |s: usize| open[s / 64] |= 1 << (s % 64);
        if st.owners_known() {
            // From each owner's bitmap: no scan of the 16384-entry slot table.
            for n in st.nodes.values().filter(|n| n.numslots > 0) {
                let i = idx_of(n.name, &mut nodes);
                for (a, z) in crate::msg::bitmap_ranges(&n.slot_bits) {
                    owner[a..=z].fill(i);
                }
            }
        } else {
            let mut run: Option<(Name, u16)> = None;
            for (s, o) in st.slots.iter().enumerate() {
                let Some(o) = *o else { continue };
                let i = match run {
                    Some((n, i)) if n == o => i,
                    _ => {
                        let i = idx_of(o, &mut nodes);
                        run = Some((o, i));
                        i
                    }
                };
                owner[s] = i;
                // An owner missing from the node table goes the slow way.
                if i == NONE {
                    mark(s);
                }
            }
        }
        for (s, _) in st.importing.iter() {
            mark(s);
        }
        for (s, _) in st.migrating.iter() {
            if st.slots[s] == Some(st.myself) {
                mark(s);
            }
        }
        let me_node = st.me();
        let me = idx_of(st.myself, &mut nodes);
        let my_master = match me_node.master {
            Some(m) if me_node.is_replica() => idx_of(m, &mut nodes),
            _ => NONE,
        };
        RouteTable {
            owner,
            open,
            nodes,
            tls_cluster: st.config.tls_cluster,
            me,
            my_master,
            me_replica: me_node.is_replica(),
            state_ok: st.state_ok,
            allow_reads_when_down: st.config.allow_reads_when_down,
            allow_pubsubshard_when_down: st.config.allow_pubsubshard_when_down,
            fingerprint,
        }
    }

    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// True when `slot` is being migrated from or imported to this node.
    pub fn is_open(&self, slot: u16) -> bool {
        self.open[slot as usize / 64] & (1 << (slot % 64)) != 0
    }

    /// `routing::route`'s answer when it does not depend on the keyspace; None sends the
    /// command to the slow path (its first key's slot is open).
    pub fn route(&self, q: &RouteQuery) -> Option<Route> {
        let mut slot: Option<u16> = None;
        for &k in &q.keys {
            let s = key_hash_slot(k);
            match slot {
                None => {
                    if self.owner[s as usize] == NONE {
                        return Some(Route::DownUnbound);
                    }
                    if self.is_open(s) {
                        return None;
                    }
                    slot = Some(s);
                }
                Some(first) if first != s => return Some(Route::CrossSlot),
                _ => {}
            }
        }
        let Some(slot) = slot else {
            return Some(Route::Local { slot: None });
        };
        if !self.state_ok {
            if q.is_pubsubshard {
                if !self.allow_pubsubshard_when_down {
                    return Some(Route::Down);
                }
            } else if !self.allow_reads_when_down {
                return Some(Route::Down);
            } else if q.is_write {
                return Some(Route::DownReadOnly);
            }
        }
        let owner = self.owner[slot as usize];
        if (q.readonly || q.is_pubsubshard)
            && !q.is_write
            && self.me_replica
            && self.my_master == owner
        {
            return Some(Route::Local { slot: Some(slot) });
        }
        if owner == self.me {
            return Some(Route::Local { slot: Some(slot) });
        }
        let (endpoint, port, pport) = self.nodes.get((owner as usize).checked_sub(1)?)?;
        let plain = self.tls_cluster && !q.tls_client && *pport != 0;
        Some(Route::Moved {
            slot,
            endpoint: endpoint.clone(),
            port: if plain { *pport } else { *port },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClusterConfig;
    use crate::routing;
    use crate::state::{Node, FLAG_MASTER, FLAG_SLAVE};
    use proptest::prelude::*;

    fn key(i: u8) -> Vec<u8> {
        format!("key:{i}").into_bytes()
    }

    /// A state with `owners` deciding each of 16 slot bands (0 = unassigned, 1 = me,
    /// 2..=4 = peers), some open slots and a role for myself.
    fn state(
        owners: &[u8],
        open: &[(u8, bool)],
        me_replica_of: Option<u8>,
        ok: bool,
        reads_down: bool,
        tls_cluster: bool,
    ) -> ClusterState {
        let cfg = ClusterConfig {
            allow_reads_when_down: reads_down,
            tls_cluster,
            ..ClusterConfig::default()
        };
        let mut st = ClusterState::new(cfg, 0, 7);
        let mut names = vec![st.myself];
        for i in 0..3u8 {
            let name = st.new_name();
            let mut n = Node::new(name, FLAG_MASTER, 0);
            n.ip = format!("127.0.0.{}", i + 2);
            n.port = 7000 + i as u16;
            // One node without a plaintext port: its TLS one is all there is.
            if tls_cluster && i > 0 {
                n.pport = 6000 + i as u16;
            }
            st.nodes.insert(name, n);
            names.push(name);
        }
        for (band, &o) in owners.iter().enumerate() {
            if o == 0 {
                continue;
            }
            let owner = names[(o - 1) as usize % names.len()];
            for s in band * 1024..(band + 1) * 1024 {
                st.add_slot(owner, s);
            }
        }
        for &(k, importing) in open {
            let s = key_hash_slot(&key(k)) as usize;
            if importing {
                st.importing.set(s, Some(names[1]));
            } else {
                st.migrating.set(s, Some(names[2]));
            }
        }
        if let Some(m) = me_replica_of {
            let m = names[1 + (m as usize % 3)];
            let me = st.me_mut();
            me.flags = (me.flags & !FLAG_MASTER) | FLAG_SLAVE;
            me.master = Some(m);
        }
        st.state_ok = ok;
        st
    }

    proptest! {
        /// Whenever the snapshot answers, it answers exactly as the full decision would.
        #[test]
        fn snapshot_matches_full_route(
            owners in proptest::collection::vec(0u8..5, 16),
            open in proptest::collection::vec((0u8..40, any::<bool>()), 0..4),
            replica in proptest::option::of(0u8..3),
            ok in any::<bool>(),
            reads_down in any::<bool>(),
            keys in proptest::collection::vec(0u8..40, 0..4),
            flags in (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
            tls in (any::<bool>(), any::<bool>()),
        ) {
            let st = state(&owners, &open, replica, ok, reads_down, tls.0);
            let t = RouteTable::build(&st, fingerprint(&st));
            let keys: Vec<Vec<u8>> = keys.into_iter().map(key).collect();
            let q = RouteQuery {
                keys: keys.iter().map(|k| &k[..]).collect(),
                asking: flags.0,
                readonly: flags.1,
                is_write: flags.2,
                is_pubsubshard: flags.3,
                is_migrate: false,
                tls_client: tls.1,
            };
            match t.route(&q) {
                Some(r) => {
                    prop_assert_eq!(&r, &routing::route(&st, &q, |_| true));
                    prop_assert_eq!(&r, &routing::route(&st, &q, |_| false));
                }
                None => {
                    let s = key_hash_slot(q.keys[0]) as usize;
                    prop_assert!(st.importing[s].is_some() || st.migrating[s].is_some());
                }
            }
        }
    }

    #[test]
    fn fingerprint_follows_slot_and_open_changes() {
        let mut st = state(&[1; 16], &[], None, true, false, false);
        let a = fingerprint(&st);
        st.migrating.set(5, Some(st.myself));
        let b = fingerprint(&st);
        assert_ne!(a, b);
        st.del_slot(5);
        assert_ne!(b, fingerprint(&st));
        let t = RouteTable::build(&st, fingerprint(&st));
        assert!(t.is_open(5) || t.owner[5] == NONE);
    }
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // the reference scan indexes on purpose
mod bitmap_tests {
    use crate::msg::{bitmap_ranges, bitmap_set, SLOTS, SLOTS_BYTES};
    use proptest::prelude::*;

    proptest! {
        /// Word-at-a-time ranges equal a slot-by-slot scan.
        #[test]
        fn bitmap_ranges_match_scan(runs in proptest::collection::vec((0usize..SLOTS, 0usize..200), 0..30)) {
            let mut b = Box::new([0u8; SLOTS_BYTES]);
            let mut set = vec![false; SLOTS];
            for (a, len) in runs {
                for s in a..(a + len).min(SLOTS) {
                    bitmap_set(&mut b, s);
                    set[s] = true;
                }
            }
            let mut want = Vec::new();
            let mut start = None;
            for s in 0..=SLOTS {
                match (s < SLOTS && set[s], start) {
                    (true, None) => start = Some(s),
                    (false, Some(a)) => {
                        want.push((a, s - 1));
                        start = None;
                    }
                    _ => {}
                }
            }
            prop_assert_eq!(bitmap_ranges(&b), want);
        }
    }
}
