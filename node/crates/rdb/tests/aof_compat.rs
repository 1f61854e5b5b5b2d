//! The AOF format parts against redis-server 7.0's multi-part AOF: its manifest, its RDB
//! preamble base and incremental RESP files read here; a truncated tail is reported at the
//! same offset redis-server truncates to with aof-load-truncated.

mod common;

use std::io::BufReader;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use tessera_rdb::aof::{
    has_rdb_preamble, AofCommandReader, AofFileKind, AofManifest, AofReadError,
};
use tessera_rdb::{RdbEvent, RdbReader, RdbValue};

fn info_field(con: &mut redis::Connection, field: &str) -> String {
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query(con)
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_default()
}

fn wait_for(mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "condition not met within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Replays one AOF file: (base entries from an RDB preamble, commands).
fn read_aof_file(path: &Path) -> (Vec<tessera_rdb::RdbEntry>, Vec<Vec<Bytes>>) {
    let data = std::fs::read(path).expect("read aof file");
    let mut entries = Vec::new();
    let mut reader = BufReader::new(&data[..]);
    let mut offset = 0;
    if has_rdb_preamble(&data) {
        let mut rdb = RdbReader::new(reader).expect("preamble header");
        while let Some(ev) = rdb.next_event().expect("preamble") {
            if let RdbEvent::Entry(e) = ev {
                entries.push(e);
            }
        }
        offset = rdb.position();
        reader = rdb.into_inner();
    }
    let cmds = AofCommandReader::with_offset(reader, offset)
        .collect::<Result<Vec<_>, _>>()
        .expect("aof commands");
    (entries, cmds)
}

#[test]
fn redis_multipart_aof_reads_and_truncation_matches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        "yes",
        "--aof-load-truncated",
        "yes",
    ];
    let bin = Path::new(redis_server());
    let server = RedisServer::start_args(bin, dir.path(), "dump.rdb", &extra);
    let mut con = server.connection();
    redis::cmd("SET")
        .arg("a")
        .arg("1")
        .query::<()>(&mut con)
        .expect("SET");
    redis::cmd("BGREWRITEAOF")
        .query::<()>(&mut con)
        .expect("BGREWRITEAOF");
    let aof_dir = dir.path().join("appendonlydir");
    let manifest_path = aof_dir.join("appendonly.aof.manifest");
    wait_for(|| {
        info_field(&mut con, "aof_rewrite_in_progress") == "0"
            && std::fs::read_to_string(&manifest_path)
                .ok()
                .and_then(|t| AofManifest::parse(&t).ok())
                .and_then(|m| m.base.map(|b| b.seq))
                == Some(2)
    });
    redis::cmd("SET")
        .arg("b")
        .arg("two")
        .query::<()>(&mut con)
        .expect("SET");
    redis::cmd("RPUSH")
        .arg("l")
        .arg(&["x", "y z"])
        .query::<()>(&mut con)
        .expect("RPUSH");

    let text = std::fs::read_to_string(&manifest_path).expect("manifest");
    let manifest = AofManifest::parse(&text).expect("parse manifest");
    assert_eq!(manifest.to_string(), text, "we write what redis writes");
    let base = manifest.base.clone().expect("base");
    assert_eq!(base.kind, AofFileKind::Base);
    assert!(base.name.ends_with(".base.rdb"), "{}", base.name);
    let files: Vec<_> = manifest.load_order().cloned().collect();
    let mut entries = Vec::new();
    let mut cmds = Vec::new();
    for f in &files {
        let (e, c) = read_aof_file(&aof_dir.join(&f.name));
        entries.extend(e);
        cmds.extend(c);
    }
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].key, bs("a"));
    assert_eq!(entries[0].value, RdbValue::String(bs("1")));
    let names: Vec<Vec<u8>> = cmds.iter().map(|c| c[0].to_ascii_lowercase()).collect();
    assert_eq!(
        names,
        vec![b"select".to_vec(), b"set".to_vec(), b"rpush".to_vec()]
    );
    assert_eq!(cmds[2][3], bs("y z"));
    drop(con);
    drop(server);

    // Cut the last incremental file inside its last command.
    let incr = aof_dir.join(&manifest.incr.last().expect("incr file").name);
    let data = std::fs::read(&incr).expect("incr");
    let cut = data.len() - 5;
    std::fs::write(&incr, &data[..cut]).expect("truncate");
    let mut reader = AofCommandReader::new(&data[..cut]);
    let valid_up_to = loop {
        match reader.next_command() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("truncation not detected"),
            Err(AofReadError::Truncated { valid_up_to }) => break valid_up_to,
            Err(e) => panic!("unexpected {e}"),
        }
    };
    // redis-server with aof-load-truncated yes truncates to the same offset and loads the rest.
    let server = RedisServer::start_args(bin, dir.path(), "dump.rdb", &extra);
    let mut con = server.connection();
    let b: Option<String> = redis::cmd("GET").arg("b").query(&mut con).expect("GET");
    assert_eq!(b.as_deref(), Some("two"));
    let l: i64 = redis::cmd("EXISTS")
        .arg("l")
        .query(&mut con)
        .expect("EXISTS");
    assert_eq!(l, 0);
    assert_eq!(
        std::fs::metadata(&incr).expect("incr").len(),
        valid_up_to,
        "redis truncated elsewhere; log:\n{}",
        server.log()
    );
}

/// An appendonlydir we write (manifest, RDB-preamble base, RESP incr file) loads into
/// redis-server 7.0 with the expected contents.
#[test]
fn our_multipart_aof_loads_into_redis() {
    use tessera_rdb::aof::{encode_command, encode_timestamp_annotation, AofFileInfo};
    let dir = tempfile::tempdir().expect("tempdir");
    let aof_dir = dir.path().join("appendonlydir");
    std::fs::create_dir(&aof_dir).expect("mkdir");
    let prefix = "appendonly.aof";
    let base = AofManifest::base_name(prefix, 3, true);
    let incr = AofManifest::incr_name(prefix, 4);
    tessera_rdb::write_atomic(&aof_dir.join(&base), |w| {
        w.standard_aux(&tessera_rdb::AuxInfo {
            aof_base: true,
            ..Default::default()
        })?;
        w.select_db(0, 2, 0)?;
        w.entry(b"from-base", &RdbValue::String(bs("b")), None)?;
        w.entry(
            b"list",
            &RdbValue::List(vec![bs("1"), bs("2")]),
            Some(now_ms() + 3_600_000),
        )
    })
    .expect("base");
    let mut cmds = Vec::new();
    encode_command(&mut cmds, &["SELECT", "0"]);
    encode_timestamp_annotation(&mut cmds, 1_700_000_000);
    encode_command(&mut cmds, &["SET", "from-incr", "i"]);
    encode_command(&mut cmds, &["RPUSH", "list", "3"]);
    std::fs::write(aof_dir.join(&incr), &cmds).expect("incr");
    let manifest = AofManifest {
        base: Some(AofFileInfo {
            name: base,
            seq: 3,
            kind: AofFileKind::Base,
        }),
        incr: vec![AofFileInfo {
            name: incr,
            seq: 4,
            kind: AofFileKind::Incr,
        }],
        history: vec![],
    };
    std::fs::write(
        aof_dir.join(AofManifest::manifest_name(prefix)),
        manifest.to_string(),
    )
    .expect("manifest");

    let server = RedisServer::start_args(
        Path::new(redis_server()),
        dir.path(),
        "dump.rdb",
        &["--appendonly", "yes"],
    );
    let mut con = server.connection();
    let get = |con: &mut redis::Connection, k: &str| -> Option<String> {
        redis::cmd("GET").arg(k).query(con).expect("GET")
    };
    assert_eq!(
        get(&mut con, "from-base").as_deref(),
        Some("b"),
        "log:\n{}",
        server.log()
    );
    assert_eq!(get(&mut con, "from-incr").as_deref(), Some("i"));
    assert_eq!(
        fetch_value(&mut con, b"list"),
        Some(RdbValue::List(vec![bs("1"), bs("2"), bs("3")]))
    );
    assert!(pexpiretime(&mut con, b"list") > 0);
}
