//! A master restarted from its dump.rdb drops the keys whose TTL passed while it was down
//! and, as Redis 7.0 (RDBFLAGS_FEED_REPL), feeds their DELs into its restored history: its
//! offset grows by those bytes, and a replica continuing from the RDB's offset deletes the
//! keys too (partial resync); when the DELs overflow the backlog the replica resyncs fully
//! (Redis's integration/psync2-master-restart "with expire" / "too many key expired").
//! Compared with redis-server.

use std::time::Duration;

use tessera_testkit::*;

use crate::repl_conform::replica_of;
use crate::{info_of, start};

fn num(c: &mut Conn, section: &str, field: &str) -> i64 {
    info_of(c, section, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

fn restart_with_expired(tessera: bool, keys: usize, backlog: &str) -> Vec<String> {
    let mut master = start(
        tessera,
        &[
            "--save",
            "3600 1",
            "--repl-ping-replica-period",
            "3600",
            "--repl-timeout",
            "3600",
            "--repl-backlog-size",
            backlog,
            "--enable-debug-command",
            "yes",
        ],
    );
    let replica = start(tessera, &["--save", "", "--repl-timeout", "3600"]);
    let (mut m, mut r) = replica_of(&master, &replica);
    m.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    m.cmd(&["SET", "kept", "v"]);
    for j in 0..keys {
        m.cmd(&["SELECT", &(j % 16).to_string()]);
        m.cmd(&["SET", &j.to_string(), "somevalue", "PX", "10"]);
    }
    std::thread::sleep(Duration::from_millis(50));
    wait_until("offsets match", Duration::from_secs(20), || {
        let mo = num(&mut m, "replication", "master_repl_offset");
        mo > 0 && mo == num(&mut r, "replication", "master_repl_offset")
    });
    let at = num(&mut m, "replication", "master_repl_offset");
    r.cmd(&["CONFIG", "RESETSTAT"]);
    m.send(&["SHUTDOWN", "NOW"]);
    let exited = master.wait_exit(Duration::from_secs(20)).is_some();
    let port = master.port;
    master.restart_at(port);
    let mut m = master.resp();
    wait_until("link up again", Duration::from_secs(30), || {
        info_of(&mut r, "replication", "master_link_status").as_deref() == Some("up")
            && num(&mut m, "replication", "connected_slaves") == 1
    });
    let now = num(&mut m, "replication", "master_repl_offset");
    wait_until("replica caught up", Duration::from_secs(20), || {
        num(&mut r, "replication", "master_repl_offset") == now
    });
    let histlen = num(&mut m, "replication", "repl_backlog_histlen");
    let first = num(&mut m, "replication", "repl_backlog_first_byte_offset");
    let second = num(&mut m, "replication", "second_repl_offset");
    let mut replica_keys = 0;
    for db in 0..16 {
        r.cmd(&["SELECT", &db.to_string()]);
        replica_keys += r.cmd(&["DBSIZE"]).as_int().unwrap_or(-1000);
    }
    vec![
        format!("exited: {exited}"),
        format!(
            "expired at load: {}",
            num(&mut m, "persistence", "rdb_last_load_keys_expired")
        ),
        format!("offset grew: {}", now > at),
        format!("offset grew by the backlog: {}", now == at + histlen),
        format!("backlog holds the restored offset: {}", first <= second),
        format!(
            "master partial {} full {}",
            num(&mut m, "stats", "sync_partial_ok"),
            num(&mut m, "stats", "sync_full")
        ),
        format!(
            "replica partial {} full {}",
            num(&mut r, "stats", "sync_partial_ok"),
            num(&mut r, "stats", "sync_full")
        ),
        format!("replica keys: {replica_keys}"),
    ]
}

#[test]
fn restarted_master_propagates_keys_expired_at_load_like_redis() {
    let theirs = restart_with_expired(false, 300, "1mb");
    let ours = restart_with_expired(true, 300, "1mb");
    assert_eq!(ours, theirs);
}

#[test]
fn restarted_master_with_too_many_expired_keys_resyncs_fully_like_redis() {
    let theirs = restart_with_expired(false, 2048, "16384");
    let ours = restart_with_expired(true, 2048, "16384");
    assert_eq!(ours, theirs);
}
