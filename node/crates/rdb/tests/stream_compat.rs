//! Streams against the real programs: redis-server 7.0 (RDB type 19) and valkey-server 9.1
//! (type 21) files and DUMP payloads decode to what the server reports (XINFO STREAM FULL,
//! XRANGE), and our type-19 files and payloads pass redis-check-rdb and load / RESTORE into
//! redis-server with identical XRANGE, XINFO STREAM FULL and XPENDING.

mod common;

use std::path::Path;
use std::process::Command;

use common::xinfo::{fetch_stream, xpending};
use common::*;
use tessera_rdb::{
    dump_value, restore_value, restore_value_with_max_version, write_atomic, AuxInfo, RdbEvent,
    RdbReader, RdbStream, RdbValue,
};

fn cmd(con: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")))
}

/// IDs returned by an XREADGROUP / XCLAIM reply (for acking and claiming some of them).
fn ids_of(reply: &redis::Value) -> Vec<String> {
    fn walk(v: &redis::Value, out: &mut Vec<String>) {
        if let redis::Value::Array(a) = v {
            if let [redis::Value::BulkString(id), redis::Value::Array(_)] = a.as_slice() {
                if id.contains(&b'-') {
                    out.push(String::from_utf8_lossy(id).into_owned());
                    return;
                }
            }
            for x in a {
                walk(x, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(reply, &mut out);
    out
}

/// The keys the workload creates.
const KEYS: [&str; 7] = [
    "s:big",
    "s:bigvals",
    "s:empty",
    "s:trimmed",
    "s:auto",
    "s:binary",
    "s:plain",
];

/// Streams never deleted from, whose listpack nodes we lay out as redis does.
const UNDELETED: [&str; 4] = ["s:plain", "s:bigvals", "s:auto", "s:binary"];

/// XINFO STREAM's radix-tree-keys: the number of listpack nodes.
fn node_count(con: &mut redis::Connection, key: &str) -> i64 {
    let info: Vec<redis::Value> = redis::cmd("XINFO")
        .arg("STREAM")
        .arg(key)
        .query(con)
        .expect("XINFO STREAM");
    assert_eq!(
        info[2],
        redis::Value::BulkString(b"radix-tree-keys".to_vec())
    );
    match info[3] {
        redis::Value::Int(n) => n,
        ref other => panic!("radix-tree-keys {other:?}"),
    }
}

/// Builds streams covering every part of the format with ordinary commands: many nodes,
/// same-fields and own-fields entries, deletions (flagged entries, a deleted first entry,
/// PEL entries of deleted IDs), trimming, large values (byte-split nodes), an empty stream
/// with a group, groups with PELs made by XREADGROUP, XACK and XCLAIM.
fn workload(con: &mut redis::Connection) {
    for i in 0..600u64 {
        let id = format!("{}-{}", 1_000 + i / 3, i % 3);
        let n = i.to_string();
        let score = (i as i64 * 7919 - 2_000_000).to_string();
        let name = format!("user{i}");
        let mut args = vec!["XADD", "s:big", &id];
        match i % 50 {
            7 | 14 | 21 => args.extend(["other", "x"]),
            49 => args.extend(["a", "-5000", "b", "9223372036854775807", "c", "3.25"]),
            _ => args.extend(["name", &name, "n", &n, "score", &score]),
        }
        cmd(con, &args);
    }
    cmd(con, &["XGROUP", "CREATE", "s:big", "g1", "0"]);
    cmd(con, &["XGROUP", "CREATE", "s:big", "g2", "$"]);
    cmd(con, &["XGROUP", "CREATECONSUMER", "s:big", "g2", "dave"]);
    cmd(
        con,
        &[
            "XGROUP",
            "CREATE",
            "s:big",
            "g3",
            "1050-0",
            "ENTRIESREAD",
            "10",
        ],
    );
    let alice = cmd(
        con,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "alice",
            "COUNT",
            "40",
            "STREAMS",
            "s:big",
            ">",
        ],
    );
    let bob = cmd(
        con,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "bob",
            "COUNT",
            "25",
            "STREAMS",
            "s:big",
            ">",
        ],
    );
    cmd(
        con,
        &[
            "XREADGROUP",
            "GROUP",
            "g3",
            "erin",
            "COUNT",
            "5",
            "STREAMS",
            "s:big",
            ">",
        ],
    );
    let alice = ids_of(&alice);
    let bob = ids_of(&bob);
    assert_eq!((alice.len(), bob.len()), (40, 25));
    for id in alice.iter().step_by(3) {
        cmd(con, &["XACK", "s:big", "g1", id]);
    }
    // Deliver again (delivery count 2) and move to another consumer.
    let mut claim = vec!["XCLAIM", "s:big", "g1", "carol", "0"];
    claim.extend(bob.iter().take(6).map(String::as_str));
    cmd(con, &claim);
    // Deletions: the first entry, every 5th, and some delivered ones still in the PEL.
    for i in (0..600u64).filter(|i| i % 5 == 0 || *i == 1 || *i == 41) {
        let id = format!("{}-{}", 1_000 + i / 3, i % 3);
        cmd(con, &["XDEL", "s:big", &id]);
    }

    let big = "v".repeat(1000);
    let huge = "w".repeat(5000);
    for i in 0..30 {
        let val = if i == 17 { &huge } else { &big };
        cmd(
            con,
            &[
                "XADD",
                "s:bigvals",
                &format!("{}-0", i + 1),
                "f",
                val,
                "i",
                &i.to_string(),
            ],
        );
    }

    cmd(con, &["XADD", "s:empty", "5-5", "k", "v"]);
    cmd(con, &["XGROUP", "CREATE", "s:empty", "g", "0"]);
    cmd(
        con,
        &["XREADGROUP", "GROUP", "g", "zed", "STREAMS", "s:empty", ">"],
    );
    cmd(con, &["XDEL", "s:empty", "5-5"]);

    for i in 0..300 {
        cmd(
            con,
            &[
                "XADD",
                "s:trimmed",
                &format!("{}-1", i + 1),
                "k",
                &i.to_string(),
            ],
        );
    }
    cmd(con, &["XTRIM", "s:trimmed", "MAXLEN", "120"]);

    for i in 0..20 {
        cmd(con, &["XADD", "s:auto", "*", "i", &i.to_string()]);
    }
    cmd(con, &["XGROUP", "CREATE", "s:auto", "workers", "0"]);
    cmd(
        con,
        &[
            "XREADGROUP",
            "GROUP",
            "workers",
            "w1",
            "COUNT",
            "7",
            "STREAMS",
            "s:auto",
            ">",
        ],
    );

    let mut c = redis::cmd("XADD");
    c.arg("s:binary")
        .arg("1-1")
        .arg(&b"\x00\xff\r\n"[..])
        .arg(&b""[..]);
    c.arg(&b""[..]).arg(&[0u8, 1, 2, 200][..]);
    c.query::<()>(con).expect("XADD binary");

    for i in 0..250 {
        cmd(
            con,
            &[
                "XADD",
                "s:plain",
                &format!("{}-0", i + 1),
                "a",
                &i.to_string(),
                "b",
                "x",
            ],
        );
    }
}

/// Every workload stream as the server reports it.
fn models(con: &mut redis::Connection) -> Vec<(&'static str, RdbStream)> {
    KEYS.iter()
        .map(|k| (*k, fetch_stream(con, k.as_bytes())))
        .collect()
}

/// The streams of an RDB file, by key.
fn streams_in_file(path: &Path) -> Vec<(String, RdbStream)> {
    let f = std::fs::File::open(path).expect("rdb file");
    let mut out = Vec::new();
    for ev in RdbReader::new(std::io::BufReader::new(f)).expect("header") {
        if let RdbEvent::Entry(e) = ev.expect("rdb event") {
            match e.value {
                RdbValue::Stream(s) => out.push((String::from_utf8_lossy(&e.key).into_owned(), *s)),
                other => panic!("unexpected {}", other.type_name()),
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A listpack node: raw master ID (rax key) and the listpack.
type Node = (Vec<u8>, Vec<u8>);

/// A stream DUMP payload with its (master ID, listpack) nodes decompressed, and the metadata
/// and groups after them: a minimal reader of RDB lengths and strings, independent of the
/// crate's decoder.
fn stream_nodes(payload: &[u8]) -> (Vec<Node>, Vec<u8>) {
    let mut p = 1;
    let len = |p: &mut usize| -> (u64, bool) {
        let b = payload[*p];
        *p += 1;
        match b >> 6 {
            0 => (u64::from(b & 0x3f), false),
            1 => {
                *p += 1;
                (
                    (u64::from(b & 0x3f) << 8) | u64::from(payload[*p - 1]),
                    false,
                )
            }
            2 => {
                assert_eq!(b, 0x80, "32-bit length");
                *p += 4;
                let mut a = [0u8; 4];
                a.copy_from_slice(&payload[*p - 4..*p]);
                (u64::from(u32::from_be_bytes(a)), false)
            }
            _ => {
                assert_eq!(b, 0xc3, "only LZF strings expected");
                (0, true)
            }
        }
    };
    let string = |p: &mut usize| -> Vec<u8> {
        match len(p) {
            (n, false) => {
                *p += n as usize;
                payload[*p - n as usize..*p].to_vec()
            }
            (_, true) => {
                let clen = len(p).0 as usize;
                let ulen = len(p).0 as usize;
                *p += clen;
                tessera_rdb::lzf::decompress(&payload[*p - clen..*p], ulen).expect("lzf")
            }
        }
    };
    let n = len(&mut p).0;
    let nodes = (0..n).map(|_| (string(&mut p), string(&mut p))).collect();
    (nodes, payload[p..payload.len() - 10].to_vec())
}

fn check_rdb(path: &Path) {
    let out = Command::new(redis_check_rdb())
        .arg(path)
        .output()
        .expect("run redis-check-rdb");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "redis-check-rdb failed:\n{text}");
    assert!(text.contains("RDB looks OK"), "{text}");
}

fn write_streams(path: &Path, streams: &[(&str, RdbStream)]) {
    write_atomic(path, |w| {
        w.standard_aux(&AuxInfo::default())?;
        w.select_db(0, streams.len() as u64, 0)?;
        for (k, s) in streams {
            w.entry(k.as_bytes(), &RdbValue::Stream(Box::new(s.clone())), None)?;
        }
        Ok(())
    })
    .expect("write rdb");
}

#[test]
fn redis_streams_both_ways() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = RedisServer::start(dir.path(), "dump.rdb");
    let mut con = server.connection();
    workload(&mut con);
    let want = models(&mut con);
    assert!(want[0].1.entries.len() > 400 && want[0].1.groups.len() == 3);
    let nodes: Vec<i64> = UNDELETED.iter().map(|k| node_count(&mut con, k)).collect();
    assert_eq!(nodes[0], 3, "250 entries: nodes of 100, 100, 50");
    let pending: Vec<_> = want
        .iter()
        .map(|(k, s)| xpending(&mut con, k.as_bytes(), s))
        .collect();

    // Redis → us: dump.rdb (type 19) and DUMP payloads.
    cmd(&mut con, &["SAVE"]);
    let mut sorted = want.clone();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let got = streams_in_file(&dir.path().join("dump.rdb"));
    assert_eq!(got.len(), sorted.len());
    for ((gk, g), (wk, w)) in got.iter().zip(&sorted) {
        assert_eq!(gk, wk);
        assert_eq!(g, w, "stream {wk} from redis's dump.rdb");
    }
    for (k, w) in &want {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(*k).query(&mut con).expect("DUMP");
        assert_eq!(payload[0], 19, "redis 7.0 DUMPs streams as type 19");
        let v = restore_value(&payload).unwrap_or_else(|e| panic!("restore {k}: {e}"));
        assert_eq!(v, RdbValue::Stream(Box::new(w.clone())), "DUMP of {k}");
        if UNDELETED.contains(k) {
            // Never deleted from: our listpack nodes, metadata and groups are byte for byte
            // redis's (only LZF compression may pick other matches).
            let theirs = stream_nodes(&payload);
            assert_eq!(stream_nodes(&dump_value(&v)), theirs, "payload of {k}");
        }

        // Us → Redis: our payload RESTOREs (deep sanitisation on) to the same stream.
        let copy = format!("copy:{k}");
        redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(dump_value(&v))
            .query::<()>(&mut con)
            .unwrap_or_else(|e| panic!("RESTORE {k}: {e}"));
        assert_eq!(
            &fetch_stream(&mut con, copy.as_bytes()),
            w,
            "RESTORE of {k}"
        );
    }
    drop(server);

    // Us → Redis: our file passes redis-check-rdb and loads with identical contents.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ours.rdb");
    write_streams(&path, &want);
    check_rdb(&path);
    let server = RedisServer::start(dir.path(), "ours.rdb");
    let mut con = server.connection();
    for ((k, w), p) in want.iter().zip(&pending) {
        assert_eq!(
            &fetch_stream(&mut con, k.as_bytes()),
            w,
            "{k} loaded from our file"
        );
        assert_eq!(&xpending(&mut con, k.as_bytes(), w), p, "XPENDING of {k}");
    }
    // Nodes are split the way redis splits them (same number of listpack nodes).
    let ours: Vec<i64> = UNDELETED.iter().map(|k| node_count(&mut con, k)).collect();
    assert_eq!(ours, nodes, "listpack nodes of {UNDELETED:?}");
}

/// Random streams with groups: our payload RESTOREs into redis-server with the same XINFO
/// STREAM FULL / XRANGE, and redis's DUMP of it decodes back to the model.
#[test]
fn random_streams_restore_into_redis_and_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = RedisServer::start(dir.path(), "none.rdb");
    let mut con = server.connection();
    for seed in 0..40u64 {
        let s = common::gen::stream_from_seed(seed.wrapping_mul(0x9e37_79b9), 300);
        let v = RdbValue::Stream(Box::new(s.clone()));
        redis::cmd("RESTORE")
            .arg("k")
            .arg(0)
            .arg(dump_value(&v))
            .arg("REPLACE")
            .query::<()>(&mut con)
            .unwrap_or_else(|e| panic!("RESTORE seed {seed}: {e}\n{s:?}"));
        assert_eq!(fetch_stream(&mut con, b"k"), s, "seed {seed}");
        let theirs: Vec<u8> = redis::cmd("DUMP").arg("k").query(&mut con).expect("DUMP");
        assert_eq!(
            restore_value(&theirs).expect("redis payload"),
            v,
            "seed {seed}"
        );
    }
}

#[test]
fn valkey_streams_both_ways() {
    let Some(bin) = valkey_server() else {
        eprintln!("valkey-server not found (set VALKEY_SERVER); skipping");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let server = RedisServer::start_with(&bin, dir.path(), "dump.rdb");
    let mut con = server.connection();
    workload(&mut con);
    let mut want = models(&mut con);
    assert!(want[0].1.groups[0].consumers[0].active_time.is_some());
    for (k, w) in &want {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(*k).query(&mut con).expect("DUMP");
        assert_eq!(payload[0], 21, "valkey DUMPs streams as type 21");
        let v = restore_value_with_max_version(&payload, 80).expect("valkey payload");
        assert_eq!(
            v,
            RdbValue::Stream(Box::new(w.clone())),
            "valkey DUMP of {k}"
        );
    }
    cmd(&mut con, &["SAVE"]);
    let mut sorted = want.clone();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let got = streams_in_file(&dir.path().join("dump.rdb"));
    for ((gk, g), (wk, w)) in got.iter().zip(&sorted) {
        assert_eq!(gk, wk);
        assert_eq!(g, w, "stream {wk} from valkey's dump.rdb");
    }
    assert_eq!(got.len(), sorted.len());
    drop(server);

    // Our type-19 file (no active times) loads into valkey.
    for (_, s) in &mut want {
        for g in &mut s.groups {
            for c in &mut g.consumers {
                c.active_time = None;
            }
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    write_streams(&dir.path().join("ours.rdb"), &want);
    let server = RedisServer::start_with(&bin, dir.path(), "ours.rdb");
    let mut con = server.connection();
    for (k, w) in &want {
        let mut got = fetch_stream(&mut con, k.as_bytes());
        for g in &mut got.groups {
            for c in &mut g.consumers {
                c.active_time = None;
            }
        }
        assert_eq!(&got, w, "{k} loaded into valkey from our file");
    }
}

/// redis-server with rdbcompression off writes the listpacks raw: they decode the same.
#[test]
fn redis_stream_file_without_compression() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = RedisServer::start_args(
        Path::new(redis_server()),
        dir.path(),
        "dump.rdb",
        &["--rdbcompression", "no"],
    );
    let mut con = server.connection();
    workload(&mut con);
    let mut want = models(&mut con);
    cmd(&mut con, &["SAVE"]);
    want.sort_by(|a, b| a.0.cmp(b.0));
    let got = streams_in_file(&dir.path().join("dump.rdb"));
    assert_eq!(got.len(), want.len());
    for ((gk, g), (wk, w)) in got.iter().zip(&want) {
        assert_eq!(gk, wk);
        assert_eq!(g, w, "stream {wk} from an uncompressed dump.rdb");
    }
}
