//! Streams (Redis 7.0 semantics): entries ordered by ID in blocks of packed entries
//! ([`Entries`]: a B-tree of byte blocks, like Redis's rax of listpacks; O(log n) seek by
//! ID), each entry's field/value pairs length-prefixed, plus the stream metadata and
//! consumer groups.

use std::collections::BTreeMap;

#[path = "stream_entries.rs"]
pub mod entries;
pub use entries::{Entries, NodeLimits, Trim};

use bytes::Bytes;
use tessera_rdb::{RdbStream, RdbStreamConsumer, RdbStreamGroup, StreamId};

/// One entry's field/value pairs: `[varint len, bytes]*`, field then value, in order.
pub type Packed = Box<[u8]>;

/// Packs field/value pairs into one block.
pub fn pack<'a>(pairs: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone) -> Packed {
    let n: usize = pairs.clone().map(|(f, v)| f.len() + v.len() + 10).sum();
    let mut out = Vec::with_capacity(n);
    for (f, v) in pairs {
        for x in [f, v] {
            put_varint(&mut out, x.len() as u64);
            out.extend_from_slice(x);
        }
    }
    out.into_boxed_slice()
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Iterates the items (field, value, field, value...) of a packed entry.
pub fn items(p: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        if pos >= p.len() {
            return None;
        }
        let (mut len, mut shift) = (0usize, 0u32);
        loop {
            let b = *p.get(pos)?;
            pos += 1;
            len |= ((b & 0x7f) as usize) << shift;
            shift += 7;
            if b < 0x80 {
                break;
            }
        }
        let s = p.get(pos..pos + len)?;
        pos += len;
        Some(s)
    })
}

/// Number of items (2 per field/value pair) in a packed entry.
pub fn item_count(p: &[u8]) -> usize {
    items(p).count()
}

/// A pending entry of a group: delivery time (unix ms), delivery count, owning consumer.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub delivery_time: u64,
    pub delivery_count: u64,
    pub owner: Bytes,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Consumer {
    pub seen_time: u64,
    pub active_time: Option<u64>,
    /// IDs this consumer owns (a subset of the group PEL).
    pub pending: std::collections::BTreeSet<StreamId>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub last_id: StreamId,
    /// -1 when unknown (Redis's SCG_INVALID_ENTRIES_READ).
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Pending>,
    /// Consumers by name, in name order (as Redis's rax).
    pub consumers: BTreeMap<Bytes, Consumer>,
}

/// A stream value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamValue {
    pub entries: Entries,
    pub last_id: StreamId,
    pub first_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    /// Groups by name, in name order.
    pub groups: BTreeMap<Bytes, Group>,
}

impl StreamValue {
    /// Redis's streamRangeHasTombstones(s, start, NULL).
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.entries.is_empty() || self.max_deleted_id == StreamId::default() {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id
    }

    /// Redis's streamEstimateDistanceFromFirstEverEntry.
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        if self.entries_added == 0 {
            return 0;
        }
        if self.entries.is_empty() && id <= self.last_id {
            return self.entries_added as i64;
        }
        if id == self.last_id {
            return self.entries_added as i64;
        } else if id > self.last_id {
            return -1;
        }
        let zero = StreamId::default();
        if self.max_deleted_id == zero || self.max_deleted_id < self.first_id {
            if id < self.first_id {
                // Counters come from RESTORE too (entries_added < length is loaded, as
                // by Redis): wrap as Redis's unsigned arithmetic does, never panic.
                return self.entries_added.wrapping_sub(self.len() as u64) as i64;
            } else if id == self.first_id {
                return self
                    .entries_added
                    .wrapping_sub(self.len() as u64)
                    .wrapping_add(1) as i64;
            }
        }
        -1
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Recomputes `first_id` after entries were removed (0-0 when empty, as Redis).
    pub fn refresh_first(&mut self) {
        self.first_id = self.entries.first_id().unwrap_or_default();
    }

    /// Appends an entry (the caller checked `id > last_id`).
    pub fn append(&mut self, id: StreamId, p: &[u8]) {
        self.append_limited(id, p, Default::default());
    }

    /// [`StreamValue::append`] with the config's node bounds (XADD).
    pub fn append_limited(&mut self, id: StreamId, p: &[u8], lim: NodeLimits) {
        if self.entries.is_empty() {
            self.first_id = id;
        }
        self.entries.push_limited(id, p, lim);
        self.last_id = id;
        // Wraps as Redis's uint64_t does (a restored counter may sit at the maximum).
        self.entries_added = self.entries_added.wrapping_add(1);
    }

    /// Deletes one entry; true if it existed.
    pub fn delete(&mut self, id: StreamId) -> bool {
        if !self.entries.remove(id) {
            return false;
        }
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        if id == self.first_id {
            self.refresh_first();
        }
        true
    }

    /// Redis's streamTrim (see [`Entries::trim`]); returns how many entries went.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> usize {
        let n = self.entries.trim(how, approx, limit);
        if n > 0 {
            self.refresh_first();
        }
        n
    }

    /// Heap bytes (MEMORY USAGE): the entry blocks, plus groups.
    pub fn heap_size(&self) -> usize {
        let mut n = std::mem::size_of::<Self>() + self.entries.heap_size();
        for (name, g) in &self.groups {
            n += name.len() + 64 + g.pel.len() * 80;
            for c in g.consumers.keys() {
                n += c.len() + 64;
            }
        }
        n
    }

    /// The RDB model (copies).
    pub fn to_rdb(&self) -> RdbStream {
        let entries = self
            .entries
            .iter()
            .map(|(id, p)| {
                let mut v = Vec::new();
                let mut it = items(p);
                while let (Some(f), Some(x)) = (it.next(), it.next()) {
                    v.push((Bytes::copy_from_slice(f), Bytes::copy_from_slice(x)));
                }
                (id, v)
            })
            .collect();
        let groups = self
            .groups
            .iter()
            .map(|(name, g)| RdbStreamGroup {
                name: name.clone(),
                last_id: g.last_id,
                entries_read: g.entries_read,
                pel: g
                    .pel
                    .iter()
                    .map(|(id, p)| (*id, p.delivery_time, p.delivery_count))
                    .collect(),
                consumers: g
                    .consumers
                    .iter()
                    .map(|(cn, c)| RdbStreamConsumer {
                        name: cn.clone(),
                        seen_time: c.seen_time,
                        active_time: c.active_time,
                        pending: c.pending.iter().copied().collect(),
                    })
                    .collect(),
            })
            .collect();
        RdbStream {
            entries,
            last_id: self.last_id,
            first_id: self.first_id,
            max_deleted_id: self.max_deleted_id,
            entries_added: self.entries_added,
            groups,
        }
    }

    /// From the RDB model. PEL entries whose owner is missing are dropped (the rdb crate
    /// rejects such files already; this only guards the invariant).
    pub fn from_rdb(s: RdbStream) -> Self {
        let mut list = s.entries;
        // Redis writes them in ID order; a file that doesn't is put in order (a later
        // duplicate ID is dropped) since blocks only take appends.
        if !list.windows(2).all(|w| w[0].0 < w[1].0) {
            list.sort_by_key(|e| e.0);
            list.dedup_by_key(|e| e.0);
        }
        let mut entries = Entries::default();
        for (id, pairs) in list {
            entries.push(id, &pack(pairs.iter().map(|(f, v)| (&f[..], &v[..]))));
        }
        let mut groups = BTreeMap::new();
        for g in s.groups {
            let mut owner = BTreeMap::new();
            let mut consumers = BTreeMap::new();
            for c in g.consumers {
                for id in &c.pending {
                    owner.insert(*id, c.name.clone());
                }
                consumers.insert(
                    c.name,
                    Consumer {
                        seen_time: c.seen_time,
                        active_time: c.active_time,
                        pending: c.pending.into_iter().collect(),
                    },
                );
            }
            let pel = g
                .pel
                .into_iter()
                .filter_map(|(id, t, n)| {
                    owner.get(&id).map(|o| {
                        (
                            id,
                            Pending {
                                delivery_time: t,
                                delivery_count: n,
                                owner: o.clone(),
                            },
                        )
                    })
                })
                .collect();
            groups.insert(
                g.name,
                Group {
                    last_id: g.last_id,
                    entries_read: g.entries_read,
                    pel,
                    consumers,
                },
            );
        }
        StreamValue {
            entries,
            last_id: s.last_id,
            first_id: s.first_id,
            max_deleted_id: s.max_deleted_id,
            entries_added: s.entries_added,
            groups,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_roundtrip() {
        let big = vec![b'x'; 300];
        let pairs: Vec<(&[u8], &[u8])> = vec![(b"a", b"1"), (b"", &big), (b"f", b"")];
        let p = pack(pairs.iter().copied());
        let got: Vec<&[u8]> = items(&p).collect();
        assert_eq!(got, vec![&b"a"[..], b"1", b"", &big[..], b"f", b""]);
    }

    #[test]
    fn rdb_roundtrip() {
        let mut s = StreamValue::default();
        for i in 1..=5u64 {
            s.append(
                StreamId { ms: i, seq: 0 },
                &pack([(&b"k"[..], &b"v"[..])].into_iter()),
            );
        }
        s.delete(StreamId { ms: 1, seq: 0 });
        assert_eq!(s.first_id, StreamId { ms: 2, seq: 0 });
        let r = s.to_rdb();
        assert_eq!(StreamValue::from_rdb(r.clone()).to_rdb(), r);
    }
}
