//! Reading the older encodings Redis still loads (ziplist, zipmap, quicklist v1, linked list,
//! text-double zsets, seconds expiry, IDLE/FREQ), checked against redis-server 7.0 loading the
//! very same bytes; plus v11 types, module aux skipping and typed errors for unsupported data.

mod common;

use common::raw;
use common::*;
use tessera_rdb::types::*;
use tessera_rdb::{RdbError, RdbEvent, RdbReader, RdbValue};

struct Legacy {
    file: Vec<u8>,
    expected: Vec<(&'static str, RdbValue, Option<i64>)>,
}

fn big_elem() -> Vec<u8> {
    vec![b'L'; 300]
}

/// A version-9 file with one key per legacy encoding.
fn legacy_file(expire_secs: i32) -> Legacy {
    let mut f = b"REDIS0009".to_vec();
    f.push(OPCODE_AUX);
    raw::string(&mut f, b"redis-ver");
    raw::string(&mut f, b"5.0.0");
    f.push(OPCODE_SELECTDB);
    raw::len(&mut f, 0);
    let mut expected = Vec::new();
    let big = big_elem();

    // Linked list (type 1).
    f.push(TYPE_LIST);
    raw::string(&mut f, b"ll");
    raw::len(&mut f, 2);
    raw::string(&mut f, b"one");
    raw::string(&mut f, b"two");
    expected.push(("ll", RdbValue::List(vec![bs("one"), bs("two")]), None));

    // Ziplist list (type 10) with every integer width and string length class.
    let items: Vec<&[u8]> = vec![
        b"0",
        b"12",
        b"13",
        b"-100",
        b"1000",
        b"-70000",
        b"100000000",
        b"-5000000000",
        b"str",
        &big,
    ];
    f.push(TYPE_LIST_ZIPLIST);
    raw::string(&mut f, b"zl");
    raw::string(&mut f, &raw::ziplist(&items));
    expected.push((
        "zl",
        RdbValue::List(
            items
                .iter()
                .map(|s| bytes::Bytes::copy_from_slice(s))
                .collect(),
        ),
        None,
    ));

    // Quicklist v1 (type 14): two ziplist nodes.
    f.push(TYPE_LIST_QUICKLIST);
    raw::string(&mut f, b"ql");
    raw::len(&mut f, 2);
    raw::string(&mut f, &raw::ziplist(&[b"a", b"b"]));
    raw::string(&mut f, &raw::ziplist(&[b"7", &big]));
    expected.push((
        "ql",
        RdbValue::List(vec![
            bs("a"),
            bs("b"),
            bs("7"),
            bytes::Bytes::from(big.clone()),
        ]),
        None,
    ));

    // Zipmap hash (type 9), with a seconds expiry before it.
    f.push(OPCODE_EXPIRETIME);
    f.extend_from_slice(&expire_secs.to_le_bytes());
    f.push(TYPE_HASH_ZIPMAP);
    raw::string(&mut f, b"zm");
    raw::string(&mut f, &raw::zipmap(&[(b"f1", b"v1"), (b"f2", b"22")]));
    expected.push((
        "zm",
        RdbValue::Hash(vec![(bs("f1"), bs("v1")), (bs("f2"), bs("22"))]),
        Some(i64::from(expire_secs) * 1000),
    ));

    // Ziplist hash (type 13) with an LRU idle time.
    f.push(OPCODE_IDLE);
    raw::len(&mut f, 77);
    f.push(TYPE_HASH_ZIPLIST);
    raw::string(&mut f, b"zh");
    raw::string(&mut f, &raw::ziplist(&[b"name", b"x", b"n", b"-3"]));
    expected.push((
        "zh",
        RdbValue::Hash(vec![(bs("name"), bs("x")), (bs("n"), bs("-3"))]),
        None,
    ));

    // Ziplist zset (type 12) with an LFU counter.
    f.push(OPCODE_FREQ);
    f.push(9);
    f.push(TYPE_ZSET_ZIPLIST);
    raw::string(&mut f, b"zz");
    raw::string(
        &mut f,
        &raw::ziplist(&[b"m1", b"-2", b"m2", b"1.5", b"m3", b"7"]),
    );
    expected.push((
        "zz",
        RdbValue::ZSet(vec![(bs("m1"), -2.0), (bs("m2"), 1.5), (bs("m3"), 7.0)]),
        None,
    ));

    // Old zset (type 3) with text doubles and the inf markers.
    f.push(TYPE_ZSET);
    raw::string(&mut f, b"z3");
    raw::len(&mut f, 3);
    raw::string(&mut f, b"lo");
    f.push(255);
    raw::string(&mut f, b"mid");
    f.extend_from_slice(b"\x043.25");
    raw::string(&mut f, b"hi");
    f.push(254);
    expected.push((
        "z3",
        RdbValue::ZSet(vec![
            (bs("lo"), f64::NEG_INFINITY),
            (bs("mid"), 3.25),
            (bs("hi"), f64::INFINITY),
        ]),
        None,
    ));

    // 16-bit intset (type 11).
    f.push(TYPE_SET_INTSET);
    raw::string(&mut f, b"is");
    raw::string(&mut f, &raw::intset16(&[-5, 3, 300]));
    expected.push((
        "is",
        RdbValue::Set(vec![bs("-5"), bs("3"), bs("300")]),
        None,
    ));

    // Quicklist 2 with a PLAIN node between packed ones.
    f.push(TYPE_LIST_QUICKLIST_2);
    raw::string(&mut f, b"q2");
    raw::len(&mut f, 2);
    raw::len(&mut f, 1);
    raw::string(&mut f, b"plain-node");
    raw::len(&mut f, 2);
    raw::string(&mut f, &tessera_rdb_listpack(&[b"p1"]));
    expected.push(("q2", RdbValue::List(vec![bs("plain-node"), bs("p1")]), None));

    f.push(OPCODE_EOF);
    Legacy {
        file: raw::seal(f),
        expected,
    }
}

fn tessera_rdb_listpack(items: &[&[u8]]) -> Vec<u8> {
    raw::listpack_short_strings(items)
}

#[test]
fn legacy_encodings_match_redis_server() {
    let expire_secs = (now_ms() / 1000 + 86_400) as i32;
    let legacy = legacy_file(expire_secs);

    // Our reader.
    let events: Vec<RdbEvent> = RdbReader::new(&legacy.file[..])
        .expect("header")
        .collect::<Result<_, _>>()
        .expect("legacy file reads");
    let entries: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            RdbEvent::Entry(x) => Some(x),
            _ => None,
        })
        .collect();
    assert_eq!(entries.len(), legacy.expected.len());
    for (e, (k, v, exp)) in entries.iter().zip(&legacy.expected) {
        assert_eq!(e.key, bs(k));
        assert_eq!(&e.value, v, "key {k}");
        assert_eq!(e.expire_ms, *exp, "expiry of {k}");
    }
    let zh = entries.iter().find(|e| e.key == bs("zh")).expect("zh");
    assert_eq!(zh.idle, Some(77));
    let zz = entries.iter().find(|e| e.key == bs("zz")).expect("zz");
    assert_eq!(zz.freq, Some(9));

    // The real server loads the same bytes into the same contents (so the fixtures are real).
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("legacy.rdb"), &legacy.file).expect("write");
    let server = RedisServer::start(dir.path(), "legacy.rdb");
    let mut con = server.connection();
    for (k, v, exp) in &legacy.expected {
        let got = fetch_value(&mut con, k.as_bytes())
            .unwrap_or_else(|| panic!("redis lacks {k}; log:\n{}", server.log()));
        assert_eq!(normalize(&got), normalize(v), "redis view of {k}");
        assert_eq!(pexpiretime(&mut con, k.as_bytes()), exp.unwrap_or(-1));
    }
}

/// A v11 file: set listpack, module aux (skipped), checksum disabled.
#[test]
fn v11_set_listpack_module_aux_and_disabled_checksum() {
    let mut f = b"REDIS0011".to_vec();
    // Module aux for a module named "tessmodAA", encver 1: when_opcode=2 (UINT), when=2,
    // then a body of UINT 5, STRING "x", DOUBLE, FLOAT, EOF.
    let id = module_id("tessmodAA", 1);
    f.push(OPCODE_MODULE_AUX);
    f.push(0x81);
    f.extend_from_slice(&id.to_be_bytes());
    raw::len(&mut f, 2);
    raw::len(&mut f, 2);
    raw::len(&mut f, 2);
    raw::len(&mut f, 5);
    raw::len(&mut f, 5);
    raw::string(&mut f, b"x");
    raw::len(&mut f, 4);
    f.extend_from_slice(&1.5f64.to_le_bytes());
    raw::len(&mut f, 3);
    f.extend_from_slice(&1.5f32.to_le_bytes());
    raw::len(&mut f, 0);
    f.push(OPCODE_SELECTDB);
    raw::len(&mut f, 0);
    f.push(TYPE_SET_LISTPACK);
    raw::string(&mut f, b"sl");
    raw::string(&mut f, &raw::listpack_short_strings(&[b"a", b"b"]));
    f.push(OPCODE_EOF);
    f.extend_from_slice(&[0u8; 8]);

    let events: Vec<RdbEvent> = RdbReader::new(&f[..])
        .expect("header")
        .collect::<Result<_, _>>()
        .expect("reads");
    assert!(events.contains(&RdbEvent::ModuleAux {
        module: "tessmodAA".into()
    }));
    assert!(events.iter().any(|e| matches!(e,
        RdbEvent::Entry(x) if x.value == RdbValue::Set(vec![bs("a"), bs("b")]))));
    assert_eq!(
        events.last(),
        Some(&RdbEvent::End {
            checksum_verified: false
        })
    );
    // The same file is refused when the caller caps the version at 10.
    assert!(matches!(
        RdbReader::with_max_version(&f[..], 10),
        Err(RdbError::UnsupportedVersion(11))
    ));
}

fn module_id(name: &str, encver: u64) -> u64 {
    const CSET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut id = 0u64;
    for c in name.bytes() {
        let pos = CSET.iter().position(|x| *x == c).expect("charset") as u64;
        id = (id << 6) | pos;
    }
    (id << 10) | encver
}

fn one_key_file(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut f = b"REDIS0010".to_vec();
    f.push(ty);
    raw::string(&mut f, b"k");
    f.extend_from_slice(body);
    f.push(OPCODE_EOF);
    raw::seal(f)
}

#[test]
fn unsupported_types_are_typed_errors() {
    let first_error = |f: Vec<u8>| {
        RdbReader::new(&f[..])
            .expect("header")
            .find_map(|e| e.err())
            .expect("an error")
    };
    // Type 22: a hash with field expiry (Redis 7.4), which we do not model.
    let hfe = one_key_file(22, &[0, 0, 0]);
    assert!(matches!(
        first_error(hfe),
        RdbError::UnsupportedType {
            name: "hash with field expiry",
            ..
        }
    ));
    let mut body = vec![0x81];
    body.extend_from_slice(&module_id("ReJSON-RL", 3).to_be_bytes());
    let module = one_key_file(TYPE_MODULE_2, &body);
    match first_error(module) {
        RdbError::UnsupportedModule(name) => assert_eq!(name, "ReJSON-RL"),
        other => panic!("unexpected {other}"),
    }
    assert!(matches!(
        first_error(one_key_file(200, &[])),
        RdbError::UnknownType(200)
    ));
    let mut f = b"REDIS0010".to_vec();
    f.push(OPCODE_FUNCTION_PRE_GA);
    assert!(matches!(first_error(f), RdbError::UnsupportedType { .. }));
}
