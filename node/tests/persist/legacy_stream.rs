//! unit/type/stream-cgroups "Loading from legacy (Redis <= v6.2.x, rdb_ver < 10)
//! persistence" (issue 18): a stream saved by Redis 5/6 (RDB type 15) carries no
//! entries-read per consumer group; Redis 7.0 estimates it when loading
//! (streamEstimateDistanceFromFirstEverEntry), so XINFO shows the groups' entries-read and
//! lag. The payload is the suite's (DUMPed from a v5 instance); compared with redis-server.

use tessera_testkit::*;

/// The suite's DUMP payload, in hex: a stream x (entries 5-0 and 6-0 left of 6 added,
/// 3-0 deleted, trimmed to 2), group g1 having read up to 5-0, g2 nothing.
const LEGACY_STREAM: &[&str] = &[
    "0f011000000000000000010000000000000000c3404a4057165700000023000201040101018464617461050001030100",
    "20010381610204200a0001400a0062600a0002400a0063600a4022018164200a4039200a0065600a0005400a0066200a",
    "00ff02060002026731050004000000000000000100000000000000003ef783437a010000010000000000000002000000",
    "00000000003ef783437a01000001000000000000000400000000000000003ef783437a01000001000000000000000500",
    "000000000000003ef783437a0100000101036331313ef783437a01000004000000000000000100000000000000000000",
    "000000000002000000000000000000000000000000040000000000000000000000000000000500000000000000000267",
    "320000000009003d52ef6867521dfa",
];

fn payload() -> Vec<u8> {
    let hex: String = LEGACY_STREAM.concat();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

fn text(r: &Reply) -> String {
    match r {
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        Reply::Simple(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// XINFO STREAM x FULL's group fields after RESTORE of the legacy payload.
fn groups_after_restore(s: &Server) -> Vec<Reply> {
    let mut c = s.resp();
    c.raw_write(&encode(&[b"RESTORE", b"x", b"0", &payload()]));
    assert_eq!(c.read(), Reply::Simple("OK".into()), "{}", s.bin());
    let full = c.cmd(&["XINFO", "STREAM", "x", "FULL"]);
    let Reply::Array(kv) = full else {
        panic!("XINFO STREAM FULL: {full:?}");
    };
    let mut out = Vec::new();
    for pair in kv.chunks(2) {
        let key = text(&pair[0]);
        if matches!(
            key.as_str(),
            "entries-added" | "max-deleted-entry-id" | "recorded-first-entry-id" | "length"
        ) {
            out.push(pair[0].clone());
            out.push(pair[1].clone());
        }
        if key == "groups" {
            let Reply::Array(groups) = &pair[1] else {
                panic!("groups: {:?}", pair[1]);
            };
            for g in groups {
                let Reply::Array(f) = g else {
                    panic!("group: {g:?}");
                };
                for gp in f.chunks(2) {
                    if matches!(
                        text(&gp[0]).as_str(),
                        "name" | "entries-read" | "lag" | "last-delivered-id"
                    ) {
                        out.push(gp[0].clone());
                        out.push(gp[1].clone());
                    }
                }
            }
        }
    }
    out
}

#[test]
fn legacy_stream_groups_get_entries_read_like_redis() {
    let r = groups_after_restore(&Server::redis(&["--save", ""]));
    let t = groups_after_restore(&Server::tessera(&["--save", ""]));
    assert_eq!(t, r, "tessera (left) vs redis (right)");
    assert!(r.contains(&Reply::Int(1)), "{r:?}");
}
