//! Corrupt and truncated inputs: errors, never panics, and no allocation driven by lying
//! length fields.

mod common;

use common::raw;
use common::*;
use proptest::prelude::*;
use tessera_rdb::types::*;
use tessera_rdb::{
    dump_value, restore_value, RdbError, RdbReader, RdbValue, RdbWriter, RestoreError,
};

/// Reads a whole stream; Ok only if it reached a verified (or disabled) end.
fn read_all(data: &[u8]) -> Result<usize, RdbError> {
    let mut n = 0;
    for ev in RdbReader::new(data)? {
        ev?;
        n += 1;
    }
    Ok(n)
}

fn our_file() -> Vec<u8> {
    let data = sample_dataset(4_000_000_000_000);
    let mut w = RdbWriter::new(Vec::new()).expect("header");
    w.standard_aux(&tessera_rdb::AuxInfo::default())
        .expect("aux");
    w.select_db(0, data.len() as u64, 2).expect("select");
    for (k, v, e) in &data {
        w.entry(k, v, *e).expect("entry");
    }
    w.finish().expect("finish")
}

#[test]
fn every_prefix_of_a_redis_written_file_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = RedisServer::start(dir.path(), "dump.rdb");
    let mut con = server.connection();
    for (k, v, e) in sample_dataset(now_ms() + 3_600_000) {
        // The compact keys keep the file small enough to try every prefix.
        if v.len() <= 20 {
            populate(&mut con, &k, &v, e);
        }
    }
    redis::cmd("SAVE").query::<()>(&mut con).expect("SAVE");
    let file = std::fs::read(dir.path().join("dump.rdb")).expect("dump.rdb");
    assert!(read_all(&file).expect("full file reads") > 10);
    for cut in 0..file.len() {
        assert!(
            read_all(&file[..cut]).is_err(),
            "prefix of {cut} bytes accepted"
        );
    }
}

#[test]
fn prefixes_of_a_large_file_are_errors() {
    let file = our_file();
    assert!(read_all(&file).is_ok());
    for cut in (0..file.len())
        .step_by(97)
        .chain(file.len() - 9..file.len())
    {
        assert!(
            read_all(&file[..cut]).is_err(),
            "prefix of {cut} bytes accepted"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// The CRC64 trailer catches every single-byte change.
    #[test]
    fn byte_flips_are_errors(pos in any::<prop::sample::Index>(), xor in 1u8..=255) {
        let mut file = our_file();
        let i = pos.index(file.len());
        file[i] ^= xor;
        prop_assert!(read_all(&file).is_err());
    }

    /// Without a checksum the decoders see the damage; they must still fail cleanly.
    #[test]
    fn flips_without_checksum_never_panic(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)
    ) {
        let mut file = our_file();
        let n = file.len();
        file[n - 8..].fill(0);
        for (pos, b) in flips {
            let i = pos.index(n - 8);
            file[i] = b;
        }
        let _ = read_all(&file);
    }

    /// Random bytes after a valid header, and random DUMP bodies with a valid footer.
    #[test]
    fn random_garbage_never_panics(ty in any::<u8>(), body in prop::collection::vec(any::<u8>(), 0..400)) {
        let mut file = b"REDIS0010".to_vec();
        file.push(ty);
        file.extend_from_slice(&body);
        let _ = read_all(&file);
        let mut payload = vec![ty];
        payload.extend_from_slice(&body);
        payload.extend_from_slice(&10u16.to_le_bytes());
        let crc = tessera_rdb::crc64(&payload);
        payload.extend_from_slice(&crc.to_le_bytes());
        match restore_value(&payload) {
            Ok(_) | Err(RestoreError::BadData(_)) => {}
            Err(e) => prop_assert!(false, "checksum was valid, got {e}"),
        }
    }

    /// Random blobs inside the compact container types (valid framing around them).
    #[test]
    fn random_container_blobs_never_panic(
        ty in prop::sample::select(vec![TYPE_HASH_ZIPMAP, TYPE_LIST_ZIPLIST, TYPE_SET_INTSET,
            TYPE_ZSET_ZIPLIST, TYPE_HASH_ZIPLIST, TYPE_HASH_LISTPACK, TYPE_ZSET_LISTPACK,
            TYPE_SET_LISTPACK]),
        blob in prop::collection::vec(any::<u8>(), 0..300),
        fix_header in any::<bool>(),
    ) {
        let mut blob = blob;
        if fix_header && blob.len() >= 6 {
            // Make the size field right so parsing goes past the header.
            let n = blob.len() as u32;
            blob[0..4].copy_from_slice(&n.to_le_bytes());
        }
        let mut payload = vec![ty];
        raw::string(&mut payload, &blob);
        payload.extend_from_slice(&10u16.to_le_bytes());
        let crc = tessera_rdb::crc64(&payload);
        payload.extend_from_slice(&crc.to_le_bytes());
        let _ = restore_value(&payload);
    }
}

#[test]
fn every_flip_of_a_dump_payload_is_refused() {
    let payload = dump_value(&RdbValue::Hash(vec![
        (bs("field"), bs("value")),
        (bs("n"), bs("1")),
    ]));
    for i in 0..payload.len() {
        let mut p = payload.clone();
        p[i] ^= 0x01;
        assert!(restore_value(&p).is_err(), "flip at {i} accepted");
    }
    for cut in 0..payload.len() {
        assert!(matches!(
            restore_value(&payload[..cut]),
            Err(RestoreError::VersionOrChecksum)
        ));
    }
}

/// Lengths far beyond the data are reported as truncation without allocating them.
#[test]
fn lying_lengths_do_not_allocate() {
    let huge = |f: &mut Vec<u8>| {
        f.push(0x81);
        f.extend_from_slice(&(1u64 << 60).to_be_bytes());
    };
    // A 2^60-byte key.
    let mut f = b"REDIS0010".to_vec();
    f.push(TYPE_STRING);
    huge(&mut f);
    f.extend_from_slice(b"abc");
    assert!(matches!(read_all(&f), Err(RdbError::Truncated)));
    // A list claiming 2^60 elements.
    let mut f = b"REDIS0010".to_vec();
    f.push(TYPE_LIST);
    raw::string(&mut f, b"k");
    huge(&mut f);
    raw::string(&mut f, b"only one");
    assert!(matches!(read_all(&f), Err(RdbError::Truncated)));
    // An LZF string claiming a 2^60-byte result from 3 input bytes.
    let mut f = b"REDIS0010".to_vec();
    f.push(TYPE_STRING);
    raw::string(&mut f, b"k");
    f.push(0xc3);
    raw::len(&mut f, 3);
    huge(&mut f);
    f.extend_from_slice(&[0x01, b'a', b'b']);
    assert!(read_all(&f).is_err());
    // A quicklist claiming 2^60 nodes.
    let mut f = b"REDIS0010".to_vec();
    f.push(TYPE_LIST_QUICKLIST_2);
    raw::string(&mut f, b"k");
    huge(&mut f);
    assert!(matches!(read_all(&f), Err(RdbError::Truncated)));
}

#[test]
fn bad_headers_and_checksums() {
    assert!(matches!(read_all(b"REDIX0010"), Err(RdbError::BadMagic)));
    assert!(matches!(read_all(b"REDIS00x0"), Err(RdbError::BadMagic)));
    assert!(matches!(
        read_all(b"REDIS0099\xff"),
        Err(RdbError::UnsupportedVersion(99))
    ));
    let mut file = our_file();
    let n = file.len();
    file[n - 1] ^= 0x80;
    assert!(matches!(read_all(&file), Err(RdbError::Checksum { .. })));
    file[n - 8..].fill(0);
    assert!(read_all(&file).is_ok(), "checksum 0 means disabled");
}
