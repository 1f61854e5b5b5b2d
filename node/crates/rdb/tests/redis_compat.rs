//! Compatibility with the real redis-server 7.0 and redis-check-rdb, in both directions.

mod common;

use std::collections::HashMap;
use std::process::Command;

use bytes::Bytes;
use common::*;
use tessera_rdb::{
    dump_value, restore_value, restore_value_with_max_version, write_atomic, AuxInfo, RdbEvent,
    RdbReader, RdbValue, RestoreError,
};

const FUNCTION_LIB: &str =
    "#!lua name=tesslib\nredis.register_function('tessfn', function(keys, args) return 1 end)";

/// Reads every event of an RDB file, failing the test on any error.
fn read_file(path: &std::path::Path) -> Vec<RdbEvent> {
    let f = std::fs::File::open(path).expect("open rdb");
    let r = RdbReader::new(std::io::BufReader::new(f)).expect("rdb header");
    r.collect::<Result<Vec<_>, _>>().expect("rdb body")
}

#[test]
fn redis_saved_rdb_loads_completely() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = RedisServer::start(dir.path(), "dump.rdb");
    let mut con = server.connection();
    let exp = now_ms() + 3_600_000;
    let data = sample_dataset(exp);
    for (k, v, e) in &data {
        populate(&mut con, k, v, *e);
    }
    redis::cmd("PFADD")
        .arg("hll")
        .arg(&["a", "b", "c", "d"])
        .query::<()>(&mut con)
        .expect("PFADD");
    redis::cmd("SET")
        .arg("exp:seconds")
        .arg("x")
        .arg("EX")
        .arg(5000)
        .query::<()>(&mut con)
        .expect("SET EX");
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(FUNCTION_LIB)
        .query::<()>(&mut con)
        .expect("FUNCTION LOAD");
    // What the server holds, per key (its own normalisation of scores etc. included).
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut con).expect("KEYS");
    keys.sort();
    let mut expected: HashMap<Vec<u8>, (RdbValue, i64)> = HashMap::new();
    for k in &keys {
        let v = fetch_value(&mut con, k).expect("key exists");
        expected.insert(k.clone(), (normalize(&v), pexpiretime(&mut con, k)));
    }
    // Our dataset went in unchanged.
    for (k, v, _) in &data {
        assert_eq!(expected[k.as_ref()].0, normalize(v), "server copy of {k:?}");
    }
    redis::cmd("SELECT")
        .arg(3)
        .query::<()>(&mut con)
        .expect("SELECT");
    redis::cmd("RPUSH")
        .arg("db3:list")
        .arg(&["x", "y"])
        .query::<()>(&mut con)
        .expect("RPUSH");
    redis::cmd("SAVE").query::<()>(&mut con).expect("SAVE");

    let events = read_file(&dir.path().join("dump.rdb"));
    let aux: HashMap<Bytes, Bytes> = events
        .iter()
        .filter_map(|e| match e {
            RdbEvent::Aux { key, value } => Some((key.clone(), value.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(aux.get(&bs("redis-ver")), Some(&bs("7.0.15")));
    assert_eq!(aux.get(&bs("redis-bits")), Some(&bs("64")));
    assert!(aux.contains_key(&bs("ctime")) && aux.contains_key(&bs("used-mem")));
    assert!(events.iter().any(
        |e| matches!(e, RdbEvent::Function(code) if code.as_ref() == FUNCTION_LIB.as_bytes())
    ));
    assert!(matches!(
        events.last(),
        Some(RdbEvent::End {
            checksum_verified: true
        })
    ));
    let mut seen = 0;
    for e in &events {
        let RdbEvent::Entry(entry) = e else { continue };
        if entry.db == 3 {
            assert_eq!(entry.key, bs("db3:list"));
            assert_eq!(entry.value, RdbValue::List(vec![bs("x"), bs("y")]));
            continue;
        }
        assert_eq!(entry.db, 0);
        let (want, want_exp) = &expected[entry.key.as_ref()];
        assert_eq!(&normalize(&entry.value), want, "key {:?}", entry.key);
        assert_eq!(
            entry.expire_ms.unwrap_or(-1),
            *want_exp,
            "expiry of {:?}",
            entry.key
        );
        seen += 1;
    }
    assert_eq!(seen, keys.len());
}

#[test]
fn our_rdb_passes_check_rdb_and_loads_into_redis() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ours.rdb");
    let exp = now_ms() + 7_200_000;
    let data = sample_dataset(exp);
    let n_exp = data.iter().filter(|d| d.2.is_some()).count() as u64;
    write_atomic(&path, |w| {
        w.standard_aux(&AuxInfo::default())?;
        w.function(FUNCTION_LIB.as_bytes())?;
        w.select_db(0, data.len() as u64, n_exp)?;
        for (k, v, e) in &data {
            w.entry(k, v, *e)?;
        }
        w.select_db(5, 1, 0)?;
        w.entry(b"db5:key", &RdbValue::String(bs("five")), None)
    })
    .expect("write rdb");

    let out = Command::new(redis_check_rdb())
        .arg(&path)
        .output()
        .expect("run redis-check-rdb");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "redis-check-rdb failed:\n{text}");
    assert!(text.contains("RDB looks OK"), "{text}");

    let server = RedisServer::start(dir.path(), "ours.rdb");
    let mut con = server.connection();
    let dbsize: usize = redis::cmd("DBSIZE").query(&mut con).expect("DBSIZE");
    assert_eq!(dbsize, data.len(), "log:\n{}", server.log());
    for (k, v, e) in &data {
        let got = fetch_value(&mut con, k).unwrap_or_else(|| panic!("missing {k:?}"));
        assert_eq!(normalize(&got), normalize(v), "key {k:?}");
        assert_eq!(pexpiretime(&mut con, k), e.unwrap_or(-1), "expiry of {k:?}");
    }
    // Compact encodings survive the load as the same encodings Redis would have chosen.
    for (k, enc) in [
        ("hash:small", "listpack"),
        ("hash:medium", "listpack"),
        ("hash:many", "hashtable"),
        ("hash:bigvalue", "hashtable"),
        ("zset:small", "listpack"),
        ("zset:big", "skiplist"),
        ("set:intset", "intset"),
        ("set:strings", "hashtable"),
        ("list:big", "quicklist"),
        ("str:int16", "int"),
    ] {
        let got: String = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(k)
            .query(&mut con)
            .expect("OBJECT ENCODING");
        assert_eq!(got, enc, "encoding of {k}");
    }
    let libs: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query(&mut con)
        .expect("FUNCTION LIST");
    assert_eq!(libs.len(), 1);
    redis::cmd("SELECT")
        .arg(5)
        .query::<()>(&mut con)
        .expect("SELECT");
    let v: String = redis::cmd("GET")
        .arg("db5:key")
        .query(&mut con)
        .expect("GET");
    assert_eq!(v, "five");
}

#[test]
fn dump_and_restore_both_ways() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = RedisServer::start(dir.path(), "none.rdb");
    let mut con = server.connection();
    let data = sample_dataset(now_ms() + 3_600_000);
    for (k, v, _) in &data {
        populate(&mut con, k, v, None);
        // Redis → us.
        let payload: Vec<u8> = redis::cmd("DUMP")
            .arg(k.as_ref())
            .query(&mut con)
            .expect("DUMP");
        let got = restore_value(&payload).unwrap_or_else(|e| panic!("restore {k:?}: {e}"));
        assert_eq!(normalize(&got), normalize(v), "DUMP of {k:?}");
        // Us → Redis (with deep sanitisation on).
        let ours = dump_value(v);
        let copy = [b"copy:".as_ref(), k.as_ref()].concat();
        redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(&ours)
            .query::<()>(&mut con)
            .unwrap_or_else(|e| panic!("RESTORE {k:?}: {e}"));
        let back = fetch_value(&mut con, &copy).expect("restored key");
        assert_eq!(normalize(&back), normalize(v), "RESTORE of {k:?}");
    }

    // For compact encodings too small for LZF, our payload is byte-identical to Redis's DUMP
    // (larger blobs are LZF-compressed, where the two compressors pick different matches).
    for k in [
        "str:small",
        "str:int8",
        "str:int16",
        "str:int32",
        "str:int64",
        "list:small",
        "list:ints",
        "hash:small",
    ] {
        let (_, v, _) = data.iter().find(|d| d.0 == k).expect("dataset key");
        let theirs: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut con).expect("DUMP");
        assert_eq!(dump_value(v), theirs, "DUMP bytes of {k}");
    }

    // A flipped byte is refused by both sides with the same message.
    let mut bad = dump_value(&RdbValue::String(bs("hello world")));
    bad[3] ^= 0x40;
    let ours = restore_value(&bad).expect_err("bad checksum");
    assert!(matches!(ours, RestoreError::VersionOrChecksum));
    let theirs = redis::cmd("RESTORE")
        .arg("bad")
        .arg(0)
        .arg(&bad)
        .query::<()>(&mut con)
        .expect_err("redis refuses");
    assert!(theirs
        .to_string()
        .contains("DUMP payload version or checksum are wrong"));
    assert_eq!(
        ours.to_string(),
        "ERR DUMP payload version or checksum are wrong"
    );

    // A version-11 payload with a valid checksum: refused by 7.0 and by default here.
    let mut v11 = dump_value(&RdbValue::List(vec![bs("a")]));
    let n = v11.len();
    v11[n - 10] = 11;
    let crc = tessera_rdb::crc64(&v11[..n - 8]);
    v11[n - 8..].copy_from_slice(&crc.to_le_bytes());
    assert!(matches!(
        restore_value(&v11),
        Err(RestoreError::VersionOrChecksum)
    ));
    assert!(restore_value_with_max_version(&v11, 11).is_ok());
    let theirs = redis::cmd("RESTORE")
        .arg("v11")
        .arg(0)
        .arg(&v11)
        .query::<()>(&mut con)
        .expect_err("redis refuses v11");
    assert!(theirs
        .to_string()
        .contains("DUMP payload version or checksum are wrong"));
}

/// Random values of every type and size: our DUMP payloads RESTORE into redis-server (deep
/// sanitisation on) with identical contents, and redis-server's DUMP of them restores here.
#[test]
fn random_values_restore_into_redis_and_back() {
    use proptest::test_runner::{Config, TestRunner};
    let dir = tempfile::tempdir().expect("tempdir");
    let server = RedisServer::start(dir.path(), "none.rdb");
    let con = std::cell::RefCell::new(server.connection());
    let mut runner = TestRunner::new(Config {
        cases: 64,
        ..Config::default()
    });
    runner
        .run(&common::gen::value(), |v| {
            let mut con = con.borrow_mut();
            let con = &mut *con;
            redis::cmd("RESTORE")
                .arg("k")
                .arg(0)
                .arg(dump_value(&v))
                .arg("REPLACE")
                .query::<()>(con)
                .map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            let got = fetch_value(con, b"k").expect("restored");
            proptest::prop_assert_eq!(normalize(&got), normalize(&v));
            let theirs: Vec<u8> = redis::cmd("DUMP").arg("k").query(con).expect("DUMP");
            let back = restore_value(&theirs).expect("redis payload restores");
            proptest::prop_assert_eq!(normalize(&back), normalize(&v));
            Ok(())
        })
        .expect("all random values survive");
}

/// Real files with LFU / LRU metadata, compression off and checksum off.
#[test]
fn redis_files_with_eviction_metadata_and_no_checksum() {
    for (policy, lfu) in [("allkeys-lfu", true), ("allkeys-lru", false)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let extra = [
            "--maxmemory-policy",
            policy,
            "--rdbchecksum",
            "no",
            "--rdbcompression",
            "no",
        ];
        let server = RedisServer::start_args(
            std::path::Path::new(redis_server()),
            dir.path(),
            "dump.rdb",
            &extra,
        );
        let mut con = server.connection();
        let long = "y".repeat(500);
        populate(&mut con, b"long", &RdbValue::String(bs(&long)), None);
        populate(
            &mut con,
            b"h",
            &RdbValue::Hash(vec![(bs("a"), bs("1"))]),
            None,
        );
        redis::cmd("SAVE").query::<()>(&mut con).expect("SAVE");
        let events = read_file(&dir.path().join("dump.rdb"));
        assert!(matches!(
            events.last(),
            Some(RdbEvent::End {
                checksum_verified: false
            })
        ));
        let entries: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                RdbEvent::Entry(x) => Some(x),
                _ => None,
            })
            .collect();
        assert_eq!(entries.len(), 2);
        for e in entries {
            assert_eq!(e.freq.is_some(), lfu, "{policy}: freq of {:?}", e.key);
            assert_eq!(e.idle.is_some(), !lfu, "{policy}: idle of {:?}", e.key);
            if e.key == bs("long") {
                assert_eq!(e.value, RdbValue::String(bs(&long)));
            }
        }
    }
}
