//! CONFIG RESETSTAT zeroes the replication counters (sync_full, sync_partial_ok,
//! sync_partial_err) as Redis's resetServerStats: psync2-master-restart reads a replica's
//! sync_partial_ok after a reset. Compared with redis-server.

use tessera_testkit::*;

use crate::repl_conform::replica_of;
use crate::{info_of, start};

fn counters(c: &mut Conn) -> String {
    ["sync_full", "sync_partial_ok", "sync_partial_err"]
        .iter()
        .map(|f| format!("{f}={:?}", info_of(c, "stats", f)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn resetstat(tessera: bool) -> Vec<String> {
    let master = start(tessera, &["--save", ""]);
    let replica = start(tessera, &["--save", ""]);
    let (mut m, _r) = replica_of(&master, &replica);
    let before = counters(&mut m);
    m.cmd(&["CONFIG", "RESETSTAT"]);
    vec![before, counters(&mut m)]
}

#[test]
fn resetstat_zeroes_sync_counters_like_redis() {
    let theirs = resetstat(false);
    let ours = resetstat(true);
    assert_eq!(ours, theirs);
}
