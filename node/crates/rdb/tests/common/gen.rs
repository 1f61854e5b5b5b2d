//! Proptest strategies for values covering every encoding the writer picks.

use bytes::Bytes;
use proptest::collection::{hash_map, hash_set, vec};
use proptest::prelude::*;
use tessera_rdb::{RdbStream, RdbStreamConsumer, RdbStreamGroup, RdbValue, StreamId};

/// Elements that hit every string encoding: small/large integers, short text, compressible
/// runs, binary noise, and occasionally long strings.
pub fn element() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        3 => any::<i64>().prop_map(|v| Bytes::from(v.to_string())),
        2 => (-5000i64..5000).prop_map(|v| Bytes::from(v.to_string())),
        3 => "[a-z0-9]{0,12}".prop_map(|s| Bytes::from(s.into_bytes())),
        1 => ("[a-c]{1,4}", 10usize..80).prop_map(|(s, n)| Bytes::from(s.repeat(n).into_bytes())),
        1 => vec(any::<u8>(), 0..200).prop_map(Bytes::from),
        1 => (any::<u8>(), 4000usize..9000).prop_map(|(b, n)| Bytes::from(vec![b; n])),
        1 => Just(Bytes::from_static(b"007")),
    ]
}

pub fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-1000i64..1000).prop_map(|v| v as f64),
        any::<f64>().prop_filter("no NaN", |x| !x.is_nan()),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(0.1),
    ]
}

pub fn value() -> impl Strategy<Value = RdbValue> {
    let small = 1usize..20;
    let large = 100usize..700;
    prop_oneof![
        element().prop_map(RdbValue::String),
        vec(element(), small.clone()).prop_map(RdbValue::List),
        vec(element(), large.clone()).prop_map(RdbValue::List),
        hash_set(element(), small.clone()).prop_map(|s| RdbValue::Set(s.into_iter().collect())),
        hash_set(
            any::<i64>().prop_map(|v| Bytes::from(v.to_string())),
            1usize..600
        )
        .prop_map(|s| RdbValue::Set(s.into_iter().collect())),
        hash_map(element(), element(), small.clone())
            .prop_map(|m| RdbValue::Hash(m.into_iter().collect())),
        hash_map(
            "[a-z]{1,8}".prop_map(|s| Bytes::from(s.into_bytes())),
            element(),
            large.clone()
        )
        .prop_map(|m| RdbValue::Hash(m.into_iter().collect())),
        hash_map(element(), score(), small).prop_map(|m| RdbValue::ZSet(m.into_iter().collect())),
        hash_map(
            "[a-z]{1,8}".prop_map(|s| Bytes::from(s.into_bytes())),
            score(),
            large
        )
        .prop_map(|m| RdbValue::ZSet(m.into_iter().collect())),
    ]
}

/// A small deterministic PRNG (splitmix64) for building structured streams from one seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    /// A stream field or value: integers of every listpack width, text, binary, sometimes long.
    pub fn element(&mut self) -> Bytes {
        match self.below(10) {
            0 => Bytes::from((self.next() as i64).to_string()),
            1 | 2 => Bytes::from((self.below(20000) as i64 - 10000).to_string()),
            3 => Bytes::new(),
            4 => Bytes::from(
                (0..self.below(64))
                    .map(|_| self.next() as u8)
                    .collect::<Vec<_>>(),
            ),
            5 if self.chance(10) => Bytes::from(vec![b'x'; 100 + self.below(5000) as usize]),
            _ => Bytes::from(format!("v{}", self.below(1000))),
        }
    }
}

/// A random but self-consistent stream (what Redis could hold): ascending entries, some with
/// the same fields as their neighbours (the same-fields encoding), metadata consistent with the
/// entries, groups whose PEL entries each belong to exactly one consumer. `active_time` is
/// None (type 19 does not store it).
pub fn stream_from_seed(seed: u64, max_entries: u64) -> RdbStream {
    let mut r = Rng::new(seed);
    let n = if r.chance(10) {
        0
    } else {
        r.below(max_entries + 1)
    };
    let mut id = StreamId {
        ms: 1 + r.below(1 << 42),
        seq: r.below(5),
    };
    let common_fields: Vec<Bytes> = (0..1 + r.below(3)).map(|_| r.element()).collect();
    let mut entries = Vec::new();
    for i in 0..n {
        if i > 0 {
            if r.chance(50) {
                id.seq += 1 + r.below(3);
            } else {
                id.ms += 1 + r.below(1000);
                id.seq = r.below(3);
            }
        }
        let fields: Vec<(Bytes, Bytes)> = if r.chance(70) {
            common_fields
                .iter()
                .map(|f| (f.clone(), r.element()))
                .collect()
        } else {
            (0..1 + r.below(4))
                .map(|_| (r.element(), r.element()))
                .collect()
        };
        entries.push((id, fields));
    }
    let last_id = if n > 0 && r.chance(60) {
        id
    } else {
        StreamId {
            ms: id.ms + r.below(100),
            seq: id.seq + 1 + r.below(100),
        }
    };
    let first_id = entries.first().map(|e| e.0).unwrap_or_default();
    let max_deleted_id = if r.chance(30) {
        StreamId::default()
    } else {
        StreamId {
            ms: r.below(last_id.ms + 1),
            seq: r.below(10),
        }
    };
    let entries_added = n + r.below(50);
    let mut groups = Vec::new();
    for g in 0..r.below(4) {
        let consumers_n = r.below(4);
        let mut pel_ids: Vec<StreamId> = entries
            .iter()
            .map(|e| e.0)
            .filter(|_| consumers_n > 0 && r.chance(20))
            .collect();
        if consumers_n > 0 && r.chance(30) {
            // Delivered entries deleted since: IDs no longer in the stream.
            pel_ids.push(StreamId {
                ms: r.below(last_id.ms + 1),
                seq: r.below(1000),
            });
            pel_ids.sort();
            pel_ids.dedup();
        }
        let pel: Vec<(StreamId, u64, u64)> = pel_ids
            .iter()
            .map(|id| (*id, 1_600_000_000_000 + r.below(1 << 40), 1 + r.below(20)))
            .collect();
        let mut consumers: Vec<RdbStreamConsumer> = (0..consumers_n)
            .map(|c| RdbStreamConsumer {
                name: Bytes::from(format!("consumer-{c}-{}", r.below(100))),
                seen_time: 1_600_000_000_000 + r.below(1 << 40),
                active_time: None,
                pending: Vec::new(),
            })
            .collect();
        for (id, _, _) in &pel {
            let c = r.below(consumers_n) as usize;
            consumers[c].pending.push(*id);
        }
        groups.push(RdbStreamGroup {
            name: Bytes::from(format!("group-{g}")),
            last_id: StreamId {
                ms: r.below(last_id.ms + 1),
                seq: r.below(10),
            },
            entries_read: if r.chance(30) {
                -1
            } else {
                r.below(entries_added + 1) as i64
            },
            pel,
            consumers,
        });
    }
    RdbStream {
        entries,
        last_id,
        first_id,
        max_deleted_id,
        entries_added,
        groups,
    }
}

/// Proptest strategy over [`stream_from_seed`].
pub fn stream(max_entries: u64) -> impl Strategy<Value = RdbStream> {
    any::<u64>().prop_map(move |seed| stream_from_seed(seed, max_entries))
}
