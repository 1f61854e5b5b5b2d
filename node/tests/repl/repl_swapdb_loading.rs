//! repl-diskless-load swapdb with another history (a replica with data of its own): the
//! replica is `loading:1` (not async) from the start of the transfer, as Redis parses the
//! payload as it arrives, and when the master dies mid-transfer it keeps its old data
//! (integration/replication "Diskless load swapdb (different replid): replica enter
//! loading" / "old database is exposed after replication fails"). Compared with redis-server.

use std::time::Duration;

use tessera_testkit::*;

use crate::{info_of, start};

fn field(c: &mut Conn, name: &str) -> String {
    info_of(c, "persistence", name).unwrap_or_default()
}

fn swapdb_other_history(tessera: bool) -> Vec<String> {
    let mut master = start(
        tessera,
        &[
            "--save",
            "",
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
            "--rdbcompression",
            "no",
        ],
    );
    let replica = start(
        tessera,
        &[
            "--save",
            "",
            "--repl-diskless-load",
            "swapdb",
            // Redis answers INFO during a load only between such chunks.
            "--loading-process-events-interval-bytes",
            "1024",
        ],
    );
    let mut m = master.resp();
    let value = "A".repeat(1024);
    for j in 0..300 {
        m.cmd(&["SET", &j.to_string(), &value]);
    }
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000"]);
    let mut r = replica.resp();
    r.cmd(&["SET", "mykey", "myvalue"]);
    r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_until("loading", Duration::from_secs(20), || {
        field(&mut r, "loading") == "1"
    });
    let mut seen = vec![format!("async_loading: {}", field(&mut r, "async_loading"))];
    master.kill();
    wait_until("loading over", Duration::from_secs(30), || {
        field(&mut r, "loading") == "0"
    });
    seen.push(format!("after: {}", R::from(r.cmd(&["GET", "mykey"])).s()));
    seen.push(format!("dbsize: {}", R::from(r.cmd(&["DBSIZE"])).s()));
    seen
}

#[test]
fn swapdb_replica_of_another_history_loads_from_the_start_like_redis() {
    let theirs = swapdb_other_history(false);
    let ours = swapdb_other_history(true);
    assert_eq!(ours, theirs);
}
