//! RDB files, DUMP payloads and the HyperLogLog strings they may carry.

use tessera_node::db::rdb::{from_rdb, to_rdb};
use tessera_node::types::{hll as hllmod, Limits};
use tessera_rdb::{crc64, dump_value, restore_value, restore_value_with_max_version, RdbEvent};
use tessera_rdb::{RdbReader, RdbValue};

/// Encoding thresholds small enough that fuzz-sized values cross every encoding boundary.
fn tiny_limits() -> Limits {
    Limits {
        hash_max_listpack_entries: 2,
        hash_max_listpack_value: 4,
        set_max_intset_entries: 2,
        set_max_listpack_entries: 2,
        set_max_listpack_value: 4,
        zset_max_listpack_entries: 2,
        zset_max_listpack_value: 4,
        list_max_listpack_size: 2,
        hll_sparse_max_bytes: 30,
    }
}

/// What the node does with a value it loaded (RESTORE, RDB load, replication): convert it
/// to its own encoding. Whatever it accepted it must be able to DUMP and RESTORE again, to
/// the same value (the node's DUMP of it is the reference, not the fuzzed input).
fn exercise(v: RdbValue, limits: &[Limits]) {
    if let RdbValue::String(s) = &v {
        hll(s);
    }
    for lim in limits {
        let Some(node_value) = from_rdb(v.clone(), lim) else {
            continue;
        };
        let first = to_rdb(&node_value);
        let payload = dump_value(&first);
        let back = restore_value(&payload).expect("the node's own DUMP payload restores");
        let again = from_rdb(back, lim).expect("the node's own DUMP payload converts");
        let second = to_rdb(&again);
        if !same(&first, &second) {
            let show = |v: &RdbValue| format!("{v:?}").chars().take(500).collect::<String>();
            panic!(
                "DUMP/RESTORE changed a value: {} became {}",
                show(&first),
                show(&second)
            );
        }
    }
}

/// Equality of two values as a client sees them: set members and hash fields in any order
/// (a set can change encoding, and with it its order), NaN scores equal to each other, and
/// streams apart from what RDB 10 cannot hold.
fn same(a: &RdbValue, b: &RdbValue) -> bool {
    match (a, b) {
        (RdbValue::Set(x), RdbValue::Set(y)) => {
            let (mut x, mut y) = (x.clone(), y.clone());
            x.sort();
            y.sort();
            x == y
        }
        (RdbValue::Hash(x), RdbValue::Hash(y)) => {
            let (mut x, mut y) = (x.clone(), y.clone());
            x.sort();
            y.sort();
            x == y
        }
        (RdbValue::ZSet(x), RdbValue::ZSet(y)) => {
            x.len() == y.len()
                && x.iter().zip(y).all(|((m1, s1), (m2, s2))| {
                    m1 == m2 && (s1 == s2 || (s1.is_nan() && s2.is_nan()))
                })
        }
        // A consumer's active-time exists only in RDB type 21 (redis 7.2); the node dumps
        // streams as type 19 (RDB 10), which has no place for it, as redis 7.0.
        (RdbValue::Stream(x), RdbValue::Stream(y)) => {
            let strip = |s: &tessera_rdb::RdbStream| {
                let mut s = s.clone();
                for g in &mut s.groups {
                    for c in &mut g.consumers {
                        c.active_time = None;
                    }
                }
                s
            };
            strip(x) == strip(y)
        }
        _ => a == b,
    }
}

/// A DUMP payload (RESTORE's argument, MIGRATE's payload). The input is checked as given
/// (footer: version and CRC64), then again with its footer recomputed so that mutations
/// reach the value decoder instead of stopping at the checksum.
pub fn rdb_payload(data: &[u8]) {
    if let Ok(v) = restore_value(data) {
        exercise(v, &[Limits::default(), tiny_limits()]);
        return;
    }
    if data.len() < 10 {
        return;
    }
    let mut fixed = data[..data.len() - 8].to_vec();
    let crc = crc64(&fixed);
    fixed.extend_from_slice(&crc.to_le_bytes());
    // Any version: the decoder must cope with what newer versions may contain.
    if let Ok(v) = restore_value_with_max_version(&fixed, u16::MAX) {
        exercise(v, &[Limits::default(), tiny_limits()]);
    }
}

/// Most events read from one file: a fuzz input is small, this only bounds the time.
const MAX_EVENTS: usize = 10_000;

/// A whole RDB file (load at startup, DEBUG RELOAD, a full resync's payload). The CRC64
/// trailer is only checked at the end, so mutated files are read as far as they go.
pub fn rdb_file(data: &[u8]) {
    for max_version in [10, tessera_rdb::DEFAULT_MAX_READ_VERSION] {
        let Ok(mut r) = RdbReader::with_max_version(data, max_version) else {
            return;
        };
        for _ in 0..MAX_EVENTS {
            match r.next_event() {
                Ok(Some(RdbEvent::Entry(e))) => {
                    if max_version == 10 {
                        exercise(e.value, &[Limits::default()]);
                    }
                }
                Ok(Some(RdbEvent::End { .. })) | Ok(None) | Err(_) => break,
                Ok(Some(_)) => {}
            }
        }
        assert!(r.position() <= data.len() as u64);
    }
}

/// A string value used as a HyperLogLog (PFCOUNT, PFADD, PFMERGE, PFDEBUG on a key that
/// RESTORE, SET or SETRANGE filled with arbitrary bytes).
pub fn hll(data: &[u8]) {
    if hllmod::validate(data).is_err() {
        return;
    }
    let _ = hllmod::count(data);
    let mut max = vec![0u8; hllmod::REGISTERS];
    let _ = hllmod::merge_into(&mut max, data);
    let _ = hllmod::count_raw(&max);
    if !hllmod::is_dense(data) {
        let _ = hllmod::decode_sparse(data);
    }
    let mut v = data.to_vec();
    for ele in [&b"a"[..], b"foo", b"bar", b"\x00\xff"] {
        if hllmod::add(&mut v, ele, 3000).is_err() {
            return;
        }
    }
    let _ = hllmod::count(&v);
    let mut d = data.to_vec();
    if hllmod::to_dense(&mut d).is_ok() {
        let _ = hllmod::count(&d);
    }
}
