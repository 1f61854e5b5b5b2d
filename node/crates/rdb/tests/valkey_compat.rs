//! Interoperability with valkey-server 9.1 (RDB version 80, "VALKEY080" magic): its dump.rdb
//! and DUMP payloads read here, and our version-10 files and payloads load there.

mod common;

use common::*;
use tessera_rdb::{
    dump_value, restore_value, restore_value_with_max_version, write_atomic, AuxInfo, RdbEvent,
    RdbReader, RestoreError,
};

#[test]
fn valkey_files_and_payloads_both_ways() {
    let Some(bin) = valkey_server() else {
        eprintln!("valkey-server not found (set VALKEY_SERVER); skipping");
        return;
    };
    let exp = now_ms() + 3_600_000;
    let data = sample_dataset(exp);

    // Valkey → us: dump.rdb and DUMP payloads.
    let dir = tempfile::tempdir().expect("tempdir");
    let server = RedisServer::start_with(&bin, dir.path(), "dump.rdb");
    let mut con = server.connection();
    for (k, v, e) in &data {
        populate(&mut con, k, v, *e);
        let payload: Vec<u8> = redis::cmd("DUMP")
            .arg(k.as_ref())
            .query(&mut con)
            .expect("DUMP");
        assert!(matches!(
            restore_value(&payload),
            Err(RestoreError::VersionOrChecksum)
        ));
        let got = restore_value_with_max_version(&payload, 80).expect("valkey payload");
        assert_eq!(normalize(&got), normalize(v), "DUMP of {k:?}");
    }
    redis::cmd("SAVE").query::<()>(&mut con).expect("SAVE");
    let f = std::fs::File::open(dir.path().join("dump.rdb")).expect("dump.rdb");
    let reader = RdbReader::new(std::io::BufReader::new(f)).expect("valkey header");
    assert_eq!(reader.version(), 80);
    let mut seen = 0;
    for ev in reader {
        if let RdbEvent::Entry(e) = ev.expect("valkey rdb event") {
            let (_, v, exp) = data.iter().find(|d| d.0 == e.key).expect("known key");
            assert_eq!(normalize(&e.value), normalize(v), "key {:?}", e.key);
            assert_eq!(e.expire_ms, *exp);
            seen += 1;
        }
    }
    assert_eq!(seen, data.len());
    drop(server);

    // Us → Valkey: a version-10 file and our payloads.
    let dir = tempfile::tempdir().expect("tempdir");
    write_atomic(&dir.path().join("ours.rdb"), |w| {
        w.standard_aux(&AuxInfo::default())?;
        w.select_db(0, data.len() as u64, 2)?;
        for (k, v, e) in &data {
            w.entry(k, v, *e)?;
        }
        Ok(())
    })
    .expect("write");
    let server = RedisServer::start_with(&bin, dir.path(), "ours.rdb");
    let mut con = server.connection();
    for (k, v, e) in &data {
        let got = fetch_value(&mut con, k).unwrap_or_else(|| panic!("valkey lacks {k:?}"));
        assert_eq!(normalize(&got), normalize(v), "valkey view of {k:?}");
        assert_eq!(pexpiretime(&mut con, k), e.unwrap_or(-1));
        let copy = [b"copy:".as_ref(), k.as_ref()].concat();
        redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(dump_value(v))
            .query::<()>(&mut con)
            .expect("valkey RESTORE of our payload");
        let back = fetch_value(&mut con, &copy).expect("restored");
        assert_eq!(normalize(&back), normalize(v));
    }
}
