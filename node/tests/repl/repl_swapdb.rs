//! repl-diskless-load swapdb: a replica that resyncs fully with the same history (its
//! master's replid, restored from its own dump.rdb) reports `async_loading:1` while the
//! payload arrives and keeps serving its old data; when the master dies mid-transfer it
//! keeps that data (Redis's cluster unit 17-diskless-load-swapdb, here without the
//! cluster). The master's sync payload honours rdb-key-save-delay, as Redis's does.
//! Compared with redis-server.

use std::time::Duration;

use tessera_testkit::*;

use crate::{info_of, start};

fn num(c: &mut Conn, section: &str, field: &str) -> i64 {
    info_of(c, section, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

fn swapdb_abort(tessera: bool) -> Vec<String> {
    let mut master = start(
        tessera,
        &[
            "--save",
            "",
            "--repl-backlog-size",
            "16384",
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
            "--rdbcompression",
            "no",
        ],
    );
    let mport = master.port.to_string();
    let mut replica = start(
        tessera,
        &[
            "--save",
            "",
            "--repl-diskless-load",
            "swapdb",
            // Redis answers INFO during a load only between such chunks.
            "--loading-process-events-interval-bytes",
            "1024",
            "--replicaof",
            "127.0.0.1",
            &mport,
        ],
    );
    let mut m = master.resp();
    let mut r = replica.resp();
    m.cmd(&["SET", "06S", "1"]);
    wait_until("replicated", Duration::from_secs(20), || {
        r.cmd(&["GET", "06S"]) == Reply::Bulk(b"1".to_vec())
    });
    let mut seen = vec![R::from(r.cmd(&["SAVE"])).s()];
    replica.kill();
    m.cmd(&["DEL", "06S"]);
    // A full resync: the backlog cannot hold what follows, and the payload is slow.
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000"]);
    let value = "A".repeat(1024);
    for j in 0..1000 {
        m.cmd(&["SET", &j.to_string(), &value]);
    }
    replica.restart();
    let mut r = replica.resp();
    wait_until("async loading", Duration::from_secs(20), || {
        num(&mut r, "persistence", "async_loading") == 1
    });
    seen.push(format!(
        "while loading: {}",
        R::from(r.cmd(&["GET", "06S"])).s()
    ));
    master.kill();
    wait_until("async loading over", Duration::from_secs(30), || {
        num(&mut r, "persistence", "async_loading") == 0
    });
    seen.push(format!("after: {}", R::from(r.cmd(&["GET", "06S"])).s()));
    seen.push(format!("dbsize: {}", R::from(r.cmd(&["DBSIZE"])).s()));
    seen
}

#[test]
fn swapdb_replica_keeps_its_data_when_the_sync_aborts_like_redis() {
    let theirs = swapdb_abort(false);
    let ours = swapdb_abort(true);
    assert_eq!(ours, theirs);
}
