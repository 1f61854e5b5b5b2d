//! CONFIG REWRITE writes the master a node replicates at run time (`replicaof host port`)
//! and drops it after REPLICAOF NO ONE, as Redis's rewriteConfigReplicaOfOption, so a
//! replica restarted from its rewritten file replicates again and continues partially
//! (integration/psync2 "Partial resync after restart using RDB aux fields").
//! Compared with redis-server.

use tessera_testkit::*;

use crate::repl_conform::replica_of;
use crate::start;

fn replicaof_lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("replicaof") || l.starts_with("slaveof"))
        .map(str::to_string)
        .collect()
}

fn rewrite(tessera: bool) -> Vec<String> {
    let master = start(tessera, &["--save", ""]);
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let path = dir.path().join("node.conf");
    std::fs::write(&path, format!("port {port}\nbind 127.0.0.1\nsave \"\"\n")).expect("conf");
    let conf = path.display().to_string();
    let launch = if tessera {
        Launch::tessera()
    } else {
        Launch::redis()
    };
    let replica = launch
        .verbatim()
        .dir(dir.path())
        .cwd()
        .args(&[conf.as_str()])
        .start_at(port);
    let (_m, mut r) = replica_of(&master, &replica);
    let mut seen = Vec::new();
    seen.push(R::from(r.cmd(&["CONFIG", "REWRITE"])).s());
    seen.push(format!("{:?}", replicaof_lines(&path)).replace(&master.port.to_string(), "PORT"));
    seen.push(R::from(r.cmd(&["REPLICAOF", "NO", "ONE"])).s());
    seen.push(R::from(r.cmd(&["CONFIG", "REWRITE"])).s());
    seen.push(format!("{:?}", replicaof_lines(&path)));
    seen
}

#[test]
fn config_rewrite_records_the_master_like_redis() {
    let theirs = rewrite(false);
    let ours = rewrite(true);
    assert_eq!(ours, theirs);
}
