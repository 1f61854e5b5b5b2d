//! RDB loading as Redis 7.0 reports it (issue 18, Redis's integration/rdb): INFO's
//! persistence fields and rdb_last_load_keys_loaded / _expired, and the log lines of a file
//! with a bad checksum (the suite greps for "CRC error").

use std::time::Duration;

use tessera_testkit::*;

fn field_names(s: &Server) -> Vec<String> {
    let mut c = s.resp();
    let Reply::Bulk(b) = c.cmd(&["INFO", "persistence"]) else {
        panic!("INFO persistence is not a bulk string");
    };
    String::from_utf8_lossy(&b)
        .lines()
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
        .collect()
}

/// INFO persistence lists Redis 7.0's fields in its order, with the AOF on and off.
#[test]
fn info_persistence_fields_like_redis() {
    for aof in ["no", "yes"] {
        let [r, t] = [Launch::redis(), Launch::tessera()]
            .map(|l| l.args(&["--save", "", "--appendonly", aof]).start());
        assert_eq!(
            field_names(&t),
            field_names(&r),
            "appendonly {aof}: tessera vs redis"
        );
    }
}

/// A restart reports the keys the load kept and those it skipped as expired.
#[test]
fn load_counts_kept_and_expired_keys_like_redis() {
    let mut seen = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let mut s = l
            .args(&["--save", "", "--enable-debug-command", "yes"])
            .start();
        let mut c = s.resp();
        assert_eq!(
            c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
            Reply::Simple("OK".into())
        );
        for i in 0..20 {
            c.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        for i in 0..7 {
            c.cmd(&["SELECT", &(i % 3).to_string()]);
            c.cmd(&["SET", &format!("e{i}"), "v", "PX", "100"]);
        }
        std::thread::sleep(Duration::from_millis(300));
        c.cmd(&["SAVE"]);
        drop(c);
        s.restart();
        let get = |f: &str| s.info("persistence", f).unwrap_or_default();
        wait_until("loaded", Duration::from_secs(10), || get("loading") == "0");
        seen.push((
            get("rdb_last_load_keys_loaded"),
            get("rdb_last_load_keys_expired"),
        ));
    }
    assert_eq!(seen[1], seen[0], "tessera (left) vs redis (right)");
    assert_eq!(seen[0], ("20".to_string(), "7".to_string()));
}

/// A dump whose checksum is wrong stops both servers, logging Redis's checksum line and
/// "RDB CRC error".
#[test]
fn bad_checksum_is_logged_like_redis() {
    // One dump (redis-server's) for both, so that the checksums are the same.
    let src = Server::redis(&["--save", ""]);
    let mut c = src.resp();
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["SAVE"]);
    let mut dump = std::fs::read(src.dir.join("dump.rdb")).expect("dump.rdb");
    let at = dump.len() - 8;
    dump[at..].copy_from_slice(b"foobar00");
    let mut seen = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::write(d.path().join("dump.rdb"), &dump).expect("write dump");
        let exit = match l.dir(d.path()).args(&["--save", ""]).start_or_exit() {
            Ok(_) => panic!("a server started on a dump with a bad checksum"),
            Err(e) => e,
        };
        let checksum = exit
            .output
            .lines()
            .find_map(|l| l.find("Wrong RDB checksum").map(|i| l[i..].to_string()))
            .unwrap_or_default();
        let crc = exit
            .output
            .lines()
            .any(|l| l.contains("Internal error in RDB") && l.ends_with("-> RDB CRC error"));
        seen.push((exit.failed(), checksum, crc));
    }
    assert_eq!(seen[1], seen[0], "tessera (left) vs redis (right)");
    assert!(seen[0].2, "{seen:?}");
}

/// Starts a server over `dump`; (started, DBSIZE or -1, the lines that contain one of
/// `needles`, from the needle on, distinct).
fn over_dump(launch: Launch, dump: &[u8], needles: &[&str]) -> (bool, i64, Vec<String>) {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::write(d.path().join("dump.rdb"), dump).expect("write dump");
    let (started, size, output) = match launch
        .dir(d.path())
        .args(&["--save", ""])
        .ready_within(Duration::from_secs(20))
        .start_or_exit()
    {
        Ok(s) => {
            let n = match s.resp().cmd(&["DBSIZE"]) {
                Reply::Int(n) => n,
                _ => -2,
            };
            let out = std::fs::read_to_string(s.output_path()).unwrap_or_default();
            (true, n, out)
        }
        Err(e) => (false, -1, e.output),
    };
    let mut lines: Vec<String> = output
        .lines()
        .filter_map(|l| {
            needles
                .iter()
                .find_map(|n| l.find(n).map(|i| l[i..].to_string()))
        })
        .collect();
    lines.sort();
    lines.dedup();
    (started, size, lines)
}

/// Empty collections in an RDB are skipped and logged (Redis's "skipping empty key"), also
/// in a dump cut short, which stops the start (Redis's checker exits before its
/// "Terminating server after rdb file reading failure." line); corrupt data ends the start
/// with that line.
#[test]
fn empty_keys_and_short_dump_like_redis() {
    let mut dump = b"REDIS0009".to_vec();
    dump.extend_from_slice(&[0xFE, 0x00]);
    dump.extend_from_slice(&[0x02, 3, b's', b'e', b't', 0x00]);
    dump.extend_from_slice(&[0x04, 4, b'h', b'a', b's', b'h', 0x00]);
    dump.extend_from_slice(&[0x00, 1, b'k', 1, b'v']);
    let mut full = dump.clone();
    full.push(0xFF);
    full.extend_from_slice(&[0; 8]);
    let needles = [
        "skipping empty key",
        "empty keys skipped",
        "Terminating server after rdb file reading failure.",
    ];
    // A hash ziplist that is no ziplist (3 bytes): corrupt data, not a short file, so
    // Redis's checker runs and the server ends with its "Terminating server" line.
    let mut corrupt = b"REDIS0009".to_vec();
    corrupt.extend_from_slice(&[0xFE, 0x00]);
    corrupt.extend_from_slice(&[0x0D, 1, b'h', 3, b'a', b'b', b'c']);
    corrupt.push(0xFF);
    corrupt.extend_from_slice(&[0; 8]);
    for (what, bytes) in [
        ("empty keys", &full),
        ("cut short", &dump),
        ("corrupt ziplist", &corrupt),
    ] {
        let want = over_dump(Launch::redis(), bytes, &needles);
        let got = over_dump(Launch::tessera(), bytes, &needles);
        assert_eq!(got, want, "{what}: tessera (left) vs redis (right)");
    }
}
