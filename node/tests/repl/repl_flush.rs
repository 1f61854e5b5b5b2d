//! FLUSHDB and FLUSHALL reach replicas and the AOF even when there was nothing to flush,
//! as Redis 7.0 forces their propagation (integration/replication "FLUSHDB / FLUSHALL
//! should replicate"). Compared with redis-server.

use std::time::Duration;

use tessera_testkit::*;

use crate::repl_conform::{aof_master_with_replica, replica_of};
use crate::{aof_lines, start};

fn flushes(tessera: bool) -> Vec<String> {
    let (master, _replica, mut m, mut r) = aof_master_with_replica(tessera);
    let mut seen = Vec::new();
    for c in [
        vec!["SET", "key", "value"],
        vec!["FLUSHDB"],
        vec!["FLUSHDB"],
        vec!["FLUSHDB", "ASYNC"],
        vec!["SET", "key", "value2"],
        vec!["FLUSHALL"],
        vec!["FLUSHALL"],
        vec!["FLUSHALL", "SYNC"],
        vec!["SET", "marker", "1"],
    ] {
        seen.push(R::from(m.cmd(&c)).s());
    }
    wait_until("replicated", Duration::from_secs(20), || {
        r.cmd(&["GET", "marker"]) == Reply::Bulk(b"1".to_vec())
    });
    seen.push(format!(
        "aof flushdb {} flushall {}",
        aof_lines(&master, "flushdb"),
        aof_lines(&master, "flushall")
    ));
    seen
}

#[test]
fn empty_flushes_propagate_like_redis() {
    let theirs = flushes(false);
    let ours = flushes(true);
    assert_eq!(ours, theirs);
}

/// A replica with save points applies its master's FLUSHALL and saves the emptied
/// dataset at once, as Redis's flushAllDataAndResetRDB does on a replica too, and keeps
/// applying the stream.
fn replica_flushall_saves(tessera: bool) -> Vec<String> {
    let master = start(tessera, &["--save", ""]);
    let replica = start(tessera, &["--save", "900 1"]);
    let (mut m, mut r) = replica_of(&master, &replica);
    let dump = replica.dir.join("dump.rdb");
    let before = dump.exists();
    for c in [
        vec!["SET", "key", "value"],
        vec!["FLUSHALL"],
        vec!["SET", "marker", "1"],
    ] {
        m.cmd(&c);
    }
    wait_until(
        "replica applied past FLUSHALL",
        Duration::from_secs(20),
        || r.cmd(&["GET", "marker"]) == Reply::Bulk(b"1".to_vec()),
    );
    vec![
        format!("dump before: {before}, after: {}", dump.exists()),
        format!("replica dbsize: {}", R::from(r.cmd(&["DBSIZE"])).s()),
    ]
}

#[test]
fn replica_saves_after_its_masters_flushall_like_redis() {
    let theirs = replica_flushall_saves(false);
    let ours = replica_flushall_saves(true);
    assert_eq!(ours, theirs);
}
