//! Property tests: everything the writer and `dump_value` produce reads back identically,
//! across every encoding the writer chooses (int/LZF/raw strings, listpack and plain hashes and
//! zsets, intset and plain sets, multi-node quicklists).

mod common;

use bytes::Bytes;
use common::gen::{element, value};
use common::normalize;
use proptest::collection::vec;
use proptest::prelude::*;
use tessera_rdb::{
    dump_value, encode_entry, encode_string_entry, read_entries, restore_value, AuxInfo, RdbEvent,
    RdbReader, RdbValue, RdbWriter, ReplAux,
};

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn dump_restore_round_trip(v in value()) {
        let payload = dump_value(&v);
        let back = restore_value(&payload).expect("our own payload restores");
        prop_assert_eq!(normalize(&back), normalize(&v));
    }

    #[test]
    fn rdb_file_round_trip(
        entries in vec((element(), value(), proptest::option::of(0i64..i64::MAX / 2)), 1..8),
        db in 0u64..20,
    ) {
        let mut w = RdbWriter::new(Vec::new()).expect("header");
        w.standard_aux(&AuxInfo {
            repl: Some(ReplAux { stream_db: 0, repl_id: "a".repeat(40), repl_offset: 12345 }),
            ..AuxInfo::default()
        }).expect("aux");
        w.select_db(db, entries.len() as u64, 0).expect("select");
        for (k, v, e) in &entries {
            w.entry(k, v, *e).expect("entry");
        }
        let file = w.finish().expect("finish");
        let read = read_entries(&file[..]).expect("our own file reads");
        prop_assert_eq!(read.len(), entries.len());
        for (got, (k, v, e)) in read.iter().zip(&entries) {
            prop_assert_eq!(&got.key, k);
            prop_assert_eq!(got.db, db);
            prop_assert_eq!(got.expire_ms, *e);
            prop_assert_eq!(normalize(&got.value), normalize(v));
        }
    }

    /// A file assembled from pre-encoded chunks (a replication snapshot's way) is byte for
    /// byte the file the writer makes entry by entry, trailer included; string entries
    /// encoded without an `RdbValue` are the same bytes as with one.
    #[test]
    fn passthrough_chunks_make_the_same_file(
        entries in vec((element(), value(), proptest::option::of(0i64..i64::MAX / 2)), 0..12),
        split in 0usize..12,
    ) {
        let mut whole = RdbWriter::new(Vec::new()).expect("header");
        whole.select_db(0, entries.len() as u64, 0).expect("select");
        for (k, v, e) in &entries {
            whole.entry(k, v, *e).expect("entry");
        }
        let whole = whole.finish().expect("finish");

        let mut w = RdbWriter::new(Vec::new()).expect("header");
        w.select_db(0, entries.len() as u64, 0).expect("select");
        let mut file = w.take_output();
        let mut chunks = vec![Vec::new(), Vec::new()];
        for (i, (k, v, e)) in entries.iter().enumerate() {
            let out = &mut chunks[usize::from(i >= split)];
            match v {
                RdbValue::String(s) => encode_string_entry(out, k, s, *e),
                _ => encode_entry(out, k, v, *e),
            }
        }
        for c in &chunks {
            w.passthrough(c);
            file.extend_from_slice(c);
        }
        file.extend_from_slice(&w.finish().expect("finish"));
        prop_assert_eq!(file, whole);
    }
}

#[test]
fn aux_fields_and_streamed_output() {
    let mut w = RdbWriter::new(Vec::new()).expect("header");
    w.standard_aux(&AuxInfo {
        redis_ver: "7.0.15".into(),
        ctime: 1_700_000_000,
        used_mem: 123_456,
        aof_base: true,
        repl: Some(ReplAux {
            stream_db: 0,
            repl_id: "0123456789abcdef0123456789abcdef01234567".into(),
            repl_offset: 99,
        }),
    })
    .expect("aux");
    // Drain as a replication sender would, between writes: the checksum still covers all.
    let mut streamed = w.take_output();
    w.select_db(0, 1, 0).expect("select");
    w.entry(b"k", &RdbValue::String(Bytes::from_static(b"v")), None)
        .expect("entry");
    streamed.extend(w.take_output());
    streamed.extend(w.finish().expect("finish"));
    let events: Vec<RdbEvent> = RdbReader::new(&streamed[..])
        .expect("header")
        .collect::<Result<_, _>>()
        .expect("reads");
    let aux = |k: &str| {
        events.iter().find_map(|e| match e {
            RdbEvent::Aux { key, value } if key.as_ref() == k.as_bytes() => Some(value.clone()),
            _ => None,
        })
    };
    assert_eq!(aux("redis-bits").as_deref(), Some(&b"64"[..]));
    assert_eq!(aux("ctime").as_deref(), Some(&b"1700000000"[..]));
    assert_eq!(aux("used-mem").as_deref(), Some(&b"123456"[..]));
    assert_eq!(aux("aof-base").as_deref(), Some(&b"1"[..]));
    assert_eq!(aux("repl-offset").as_deref(), Some(&b"99"[..]));
    assert_eq!(aux("repl-stream-db").as_deref(), Some(&b"0"[..]));
    assert!(matches!(
        events.last(),
        Some(RdbEvent::End {
            checksum_verified: true
        })
    ));
}

#[test]
fn write_atomic_replaces_and_cleans_up_on_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dump.rdb");
    std::fs::write(&path, b"old contents").expect("seed");
    let err = tessera_rdb::write_atomic(&path, |_w| {
        Err(tessera_rdb::RdbError::Io(std::io::Error::other("boom")))
    });
    assert!(err.is_err());
    assert_eq!(std::fs::read(&path).expect("old file"), b"old contents");
    let leftovers = std::fs::read_dir(dir.path()).expect("ls").count();
    assert_eq!(leftovers, 1, "temp file removed after a failed save");
    let size = tessera_rdb::write_atomic(&path, |w| {
        w.select_db(0, 1, 0)?;
        w.entry(b"a", &RdbValue::String(Bytes::from_static(b"b")), None)
    })
    .expect("save");
    let data = std::fs::read(&path).expect("new file");
    assert_eq!(data.len() as u64, size);
    assert_eq!(read_entries(&data[..]).expect("reads").len(), 1);

    // An abandoned AtomicRdbFile leaves the committed file alone and removes its temp file.
    let mut f = tessera_rdb::AtomicRdbFile::create(&path).expect("create");
    f.writer().select_db(0, 0, 0).expect("select");
    let tmp = f.temp_path().to_path_buf();
    assert!(tmp.exists());
    drop(f);
    assert!(!tmp.exists());
    assert_eq!(std::fs::read(&path).expect("still there"), data);
    assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 1);
}

#[test]
fn idle_and_freq_metadata_round_trip() {
    let mut w = RdbWriter::new(Vec::new()).expect("header");
    w.select_db(0, 2, 1).expect("select");
    let v = RdbValue::String(Bytes::from_static(b"v"));
    let lru = tessera_rdb::EntryMeta {
        expire_ms: Some(1_900_000_000_000),
        idle_secs: Some(100_000),
        freq: None,
    };
    let lfu = tessera_rdb::EntryMeta {
        freq: Some(42),
        ..Default::default()
    };
    w.entry_with_meta(b"lru", &v, &lru).expect("entry");
    w.entry_with_meta(b"lfu", &v, &lfu).expect("entry");
    let file = w.finish().expect("finish");
    let got = read_entries(&file[..]).expect("reads");
    assert_eq!(
        (got[0].expire_ms, got[0].idle, got[0].freq),
        (Some(1_900_000_000_000), Some(100_000), None)
    );
    assert_eq!(
        (got[1].expire_ms, got[1].idle, got[1].freq),
        (None, None, Some(42))
    );
}
