//! Streams through our own encoder and decoder: random streams round trip through RDB files
//! and DUMP payloads, and corrupted stream payloads are typed errors, never panics.

mod common;

use bytes::Bytes;
use common::gen::{stream, stream_from_seed, Rng};
use proptest::prelude::*;
use tessera_rdb::{
    crc64, dump_value, read_entries, restore_value, RdbStream, RdbValue, RdbWriter, RestoreError,
    StreamId,
};

fn file_with(v: &RdbValue) -> Vec<u8> {
    let mut w = RdbWriter::new(Vec::new()).expect("writer");
    w.select_db(0, 1, 0).expect("select");
    w.entry(b"s", v, None).expect("entry");
    w.finish().expect("finish")
}

/// Re-seals a DUMP payload after an edit so the CRC does not hide the decoder.
fn reseal(mut body: Vec<u8>) -> Vec<u8> {
    body.extend_from_slice(&10u16.to_le_bytes());
    let crc = crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

fn body_of(payload: &[u8]) -> Vec<u8> {
    payload[..payload.len() - 10].to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_streams_round_trip(s in stream(400)) {
        let v = RdbValue::Stream(Box::new(s));
        let payload = dump_value(&v);
        prop_assert_eq!(payload[0], 19);
        prop_assert_eq!(restore_value(&payload).expect("our payload"), v.clone());
        let entries = read_entries(&file_with(&v)[..]).expect("our file");
        prop_assert_eq!(&entries[0].value, &v);
    }

    /// Random byte flips, insertions and truncations inside the value (CRC fixed up so the
    /// decoder sees them): always Ok or a typed error.
    #[test]
    fn corrupted_stream_payloads_never_panic(seed in any::<u64>(), edits in 1usize..6) {
        let v = RdbValue::Stream(Box::new(stream_from_seed(seed, 60)));
        let mut body = body_of(&dump_value(&v));
        let mut r = Rng::new(seed ^ 0x5eed);
        for _ in 0..edits {
            let at = 1 + r.below(body.len() as u64 - 1) as usize;
            match r.below(4) {
                0 => body[at] ^= 1 << r.below(8),
                1 => body[at] = r.next() as u8,
                2 => body.insert(at, r.next() as u8),
                _ => body.truncate(at.max(2)),
            }
        }
        match restore_value(&reseal(body)) {
            // Whatever is accepted is consistent: it re-encodes and decodes to itself.
            Ok(v @ RdbValue::Stream(_)) => {
                prop_assert_eq!(restore_value(&dump_value(&v)).expect("re-encoded"), v);
            }
            Err(RestoreError::BadData(_)) => {}
            other => prop_assert!(false, "unexpected {:?}", other),
        }
    }
}

fn sample() -> RdbStream {
    let id = |ms, seq| StreamId { ms, seq };
    let b = |s: &str| Bytes::from(s.to_string());
    RdbStream {
        entries: vec![
            (id(5, 0), vec![(b("a"), b("1")), (b("b"), b("x"))]),
            (id(5, 1), vec![(b("a"), b("2")), (b("b"), b("y"))]),
            (id(6, 0), vec![(b("c"), b("-7"))]),
        ],
        last_id: id(6, 0),
        first_id: id(5, 0),
        max_deleted_id: id(0, 0),
        entries_added: 3,
        groups: vec![tessera_rdb::RdbStreamGroup {
            name: b("g"),
            last_id: id(5, 1),
            entries_read: 2,
            pel: vec![
                (id(5, 0), 1_700_000_000_000, 1),
                (id(5, 1), 1_700_000_000_001, 3),
            ],
            consumers: vec![tessera_rdb::RdbStreamConsumer {
                name: b("alice"),
                seen_time: 1_700_000_000_002,
                active_time: None,
                pending: vec![id(5, 0), id(5, 1)],
            }],
        }],
    }
}

/// Finds `needle` in `hay` (for targeted edits of a known payload).
fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len())
        .position(|w| w == needle)
        .expect("needle in payload")
}

#[test]
fn inconsistent_streams_are_refused() {
    let good = body_of(&dump_value(&RdbValue::Stream(Box::new(sample()))));
    assert!(restore_value(&reseal(good.clone())).is_ok());
    let bad = |body: Vec<u8>| {
        let e = restore_value(&reseal(body)).expect_err("must be refused");
        assert!(matches!(e, RestoreError::BadData(_)), "{e:?}");
    };
    // Huge declared node count: fails on the missing data, without a huge allocation.
    let mut b = vec![19, 0x81];
    b.extend_from_slice(&(1u64 << 60).to_be_bytes());
    let e = restore_value(&reseal(b)).expect_err("must be refused");
    assert!(
        matches!(e, RestoreError::BadData(tessera_rdb::RdbError::Truncated)),
        "{e:?}"
    );
    // Huge declared group PEL size after a valid empty stream.
    // (nodes, length, last id, first id, max deleted id, entries added: all 0; one group "g"
    // at 0-0 with entries_read 0.)
    let mut b = vec![19, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, b'g', 0, 0, 0, 0x81];
    b.extend_from_slice(&u64::MAX.to_be_bytes());
    let e = restore_value(&reseal(b)).expect_err("must be refused");
    assert!(
        matches!(e, RestoreError::BadData(tessera_rdb::RdbError::Truncated)),
        "{e:?}"
    );
    // The consumer owns an ID that is not in the group PEL.
    let mut b = good.clone();
    let alice = find(&b, b"alice");
    let last_raw = alice + 5 + 8 + 1 + 16 + 15;
    b[last_raw] = 9; // 5-1 becomes 5-9
    bad(b);
    // Stream length does not match the live entries.
    let mut s = sample();
    s.entries.pop();
    let mut b = body_of(&dump_value(&RdbValue::Stream(Box::new(s))));
    let mut probe = sample();
    probe.entries.pop();
    // Length field follows the listpack; patch it through a re-encode with a wrong length by
    // swapping the 2-entry stream's length byte (2) for 3.
    let lp_end = b.len() - tail_len(&probe);
    assert_eq!(b[lp_end], 2);
    b[lp_end] = 3;
    bad(b);
}

/// Bytes after the nodes: everything from the length field on, for `s` (one group).
fn tail_len(s: &RdbStream) -> usize {
    let mut only_meta = s.clone();
    only_meta.entries.clear();
    let empty = body_of(&dump_value(&RdbValue::Stream(Box::new(only_meta))));
    // type byte + node count (0) precede the metadata in the empty encoding.
    empty.len() - 2
}

/// Type 15 (Redis 5/6: no first / max-deleted IDs, entries added or entries read) and type
/// 21 (Redis 7.2+: consumer active time), made from our type-19 encoding of a known stream.
#[test]
fn types_15_and_21_decode() {
    let s = sample();
    let body19 = body_of(&dump_value(&RdbValue::Stream(Box::new(s.clone()))));
    // length 3, last 6-0, first 5-0, max deleted 0-0, added 3, 1 group "g", last 5-1, read 2.
    let meta19: &[u8] = &[3, 6, 0, 5, 0, 0, 0, 3, 1, 1, b'g', 5, 1, 2];
    let at = find(&body19, meta19);

    let mut body15 = body19[..at].to_vec();
    body15[0] = 15;
    body15.extend_from_slice(&[3, 6, 0, 1, 1, b'g', 5, 1]);
    body15.extend_from_slice(&body19[at + meta19.len()..]);
    let mut want15 = s.clone();
    want15.entries_added = 3;
    want15.groups[0].entries_read = -1;
    assert_eq!(
        restore_value(&reseal(body15)).expect("type 15"),
        RdbValue::Stream(Box::new(want15))
    );

    let mut body21 = body19.clone();
    body21[0] = 21;
    let seen_end = find(&body21, b"alice") + 5 + 8;
    let active = 1_700_000_000_123u64.to_le_bytes();
    body21.splice(seen_end..seen_end, active);
    let mut want21 = s;
    want21.groups[0].consumers[0].active_time = Some(1_700_000_000_123);
    assert_eq!(
        restore_value(&reseal(body21)).expect("type 21"),
        RdbValue::Stream(Box::new(want21))
    );
}
