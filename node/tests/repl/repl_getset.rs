//! GETSET reaches replicas and the AOF as SET, and SET ... GET without its GET, as Redis
//! 7.0 rewrites them (integration/replication "GETSET replication": the replica counts
//! three SET calls and no GETSET). Compared with redis-server.

use std::time::Duration;

use tessera_testkit::*;

use crate::repl_conform::aof_master_with_replica;
use crate::{aof_lines, info_of};

fn calls(stat: Option<String>) -> String {
    stat.and_then(|s| s.split(',').next().map(str::to_string))
        .unwrap_or_else(|| "absent".into())
}

fn getset(tessera: bool) -> Vec<String> {
    let (master, _replica, mut m, mut r) = aof_master_with_replica(tessera);
    r.cmd(&["CONFIG", "RESETSTAT"]);
    let mut seen = Vec::new();
    for c in [
        vec!["SET", "test", "foo"],
        vec!["GETSET", "test", "bar"],
        vec!["SET", "test", "vaz", "GET"],
    ] {
        seen.push(R::from(m.cmd(&c)).s());
    }
    wait_until("replicated", Duration::from_secs(20), || {
        r.cmd(&["GET", "test"]) == Reply::Bulk(b"vaz".to_vec())
    });
    seen.push(format!(
        "replica set {} getset {}",
        calls(info_of(&mut r, "commandstats", "cmdstat_set")),
        calls(info_of(&mut r, "commandstats", "cmdstat_getset"))
    ));
    seen.push(format!(
        "aof set {} getset {} get {}",
        aof_lines(&master, "set"),
        aof_lines(&master, "getset"),
        aof_lines(&master, "get")
    ));
    seen
}

#[test]
fn getset_propagates_as_set_like_redis() {
    let theirs = getset(false);
    let ours = getset(true);
    assert_eq!(ours, theirs);
}
