//! Structured corruption of stream listpack nodes: elements (not bytes) are replaced, removed
//! and inserted, so the listpacks stay well-formed and the stream decoder's own checks are
//! what runs. Whatever it accepts must re-encode to the same stream.

use bytes::Bytes;
use proptest::prelude::*;

use super::encode::{build_nodes, write_meta, write_nodes, write_stream};
use super::read_stream;
use crate::containers::listpack_entries;
use crate::encode::ListpackBuilder;
use crate::error::RdbError;
use crate::source::Source;
use crate::value::{RdbStream, RdbStreamConsumer, RdbStreamGroup, StreamId};

/// splitmix64, to build inputs from one proptest seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Small integers (plausible flags, counts and deltas) or short strings.
    fn element(&mut self) -> Bytes {
        match self.below(4) {
            0 | 1 => Bytes::from((self.below(12) as i64 - 2).to_string()),
            2 => Bytes::from((self.next() as i64).to_string()),
            _ => Bytes::from(format!("f{}", self.below(4))),
        }
    }
}

fn sample_stream(r: &mut Rng) -> RdbStream {
    let n = 1 + r.below(250);
    let mut id = StreamId { ms: 100, seq: 0 };
    let entries: Vec<_> = (0..n)
        .map(|_| {
            id.seq += 1 + r.below(2);
            if r.below(3) == 0 {
                id.ms += 1;
                id.seq = 0;
            }
            let nf = if r.below(4) == 0 { 1 + r.below(3) } else { 2 };
            let fields = (0..nf)
                .map(|i| (Bytes::from(format!("f{i}")), r.element()))
                .collect();
            (id, fields)
        })
        .collect();
    let pel: Vec<(StreamId, u64, u64)> = entries.iter().take(3).map(|e| (e.0, 7, 1)).collect();
    RdbStream {
        last_id: id,
        first_id: entries[0].0,
        max_deleted_id: StreamId::default(),
        entries_added: n,
        groups: vec![RdbStreamGroup {
            name: Bytes::from_static(b"g"),
            last_id: id,
            entries_read: -1,
            consumers: vec![RdbStreamConsumer {
                name: Bytes::from_static(b"c"),
                seen_time: 9,
                active_time: None,
                pending: pel.iter().map(|p| p.0).collect(),
            }],
            pel,
        }],
        entries,
    }
}

fn decode(body: &[u8]) -> Result<RdbStream, RdbError> {
    let mut src = Source::new(body);
    let s = read_stream(&mut src, crate::types::TYPE_STREAM_LISTPACKS_2)?;
    if src.position() != body.len() as u64 {
        return Err(RdbError::TrailingData);
    }
    Ok(s)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn element_level_corruption(seed in any::<u64>(), edits in 1usize..4) {
        let mut r = Rng(seed);
        let s = sample_stream(&mut r);
        let mut nodes = build_nodes(&s.entries);
        for _ in 0..edits {
            let k = r.below(nodes.len() as u64) as usize;
            let mut items = listpack_entries(&nodes[k].1).expect("our listpack");
            let at = r.below(items.len() as u64 + 1) as usize;
            match r.below(4) {
                0 if at < items.len() => items[at] = r.element(),
                1 if at < items.len() => {
                    items.remove(at);
                }
                2 => items.insert(at, r.element()),
                _ => nodes[k].0.seq = nodes[k].0.seq.wrapping_add(r.below(3)).wrapping_sub(1),
            }
            let mut lp = ListpackBuilder::new();
            for it in &items {
                lp.push(it);
            }
            nodes[k].1 = lp.finish();
        }
        let mut body = Vec::new();
        write_nodes(&mut body, &nodes);
        write_meta(&mut body, &s);
        if let Ok(got) = decode(&body) {
            // Accepted: a consistent stream, which our encoder writes and reads back as is.
            let mut again = Vec::new();
            write_stream(&mut again, &got);
            prop_assert_eq!(decode(&again).expect("re-encoded stream"), got);
        }
    }
}

#[test]
fn uncorrupted_nodes_decode() {
    let mut r = Rng(7);
    let s = sample_stream(&mut r);
    let mut body = Vec::new();
    write_stream(&mut body, &s);
    assert_eq!(decode(&body).expect("valid"), s);
}
