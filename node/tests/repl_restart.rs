//! A replica restarted from its own dump.rdb continues with a partial resync (Redis 7.0's
//! repl-id / repl-offset / repl-stream-db aux fields), against a tessera and a redis master,
//! and from a file redis-server wrote; and it ends with exactly the master's data.

#[path = "repl_util.rs"]
mod repl_util;

use std::time::Duration;

use repl_util::*;

fn int_info(p: &Proc, field: &str) -> u64 {
    p.info("stats", field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("INFO stats {field} of {}", p.name))
}

/// SHUTDOWN SAVE and wait for the process to go.
fn shutdown_save(p: &mut Proc) {
    let _ = redis::cmd("SHUTDOWN").arg("SAVE").exec(&mut p.conn());
    assert!(
        p.wait_exit(Duration::from_secs(30)).is_some(),
        "{} did not exit after SHUTDOWN SAVE",
        p.name
    );
}

/// The replica `first` (started by the caller in `dir`, replicating `master`) is shut down
/// with a save while writes continue on the master; a replica restarted in `dir` by
/// `again` must get +CONTINUE (the master counts a partial sync, no new full sync) and end with the
/// master's data, the writes made while it was down included.
fn restart_continues(
    master: &Proc,
    mut first: Proc,
    dir: &std::path::Path,
    again: fn(&std::path::Path, &[&str]) -> Proc,
) {
    write_load(master, 0);
    wait_caught_up(master, &first);
    // The stream's selected database must survive the restart too: end on db 3.
    let mut m = master.conn();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut m).expect("select");
    let _: () = redis::cmd("SET")
        .arg("in-db-3")
        .arg("a")
        .query(&mut m)
        .expect("set");
    wait_caught_up(master, &first);
    shutdown_save(&mut first);
    drop(first);
    let full_before = int_info(master, "sync_full");
    let partial_before = int_info(master, "sync_partial_ok");

    // Writes while the replica is down land in the master's backlog; the last ones go to
    // the selected db 3 without a new SELECT in the stream.
    write_load(master, 1);
    let _: () = redis::cmd("SELECT").arg(3).query(&mut m).expect("select");
    for i in 0..50 {
        let _: () = redis::cmd("INCR")
            .arg(format!("down:{i}"))
            .query(&mut m)
            .expect("incr");
    }

    let port = master.port.to_string();
    let second = again(
        dir,
        &["--save", "3600 1", "--replicaof", "127.0.0.1", &port],
    );
    wait_link_up(&second);
    wait_caught_up(master, &second);
    assert_eq!(
        int_info(master, "sync_partial_ok"),
        partial_before + 1,
        "the restarted replica should continue with a partial resync"
    );
    assert_eq!(
        int_info(master, "sync_full"),
        full_before,
        "the restarted replica did a full resync"
    );
    assert_same_data(master, &second, 16);
}

#[test]
fn tessera_replica_restart_continues_from_tessera_master() {
    let (md, rd) = (tempdir(), tempdir());
    let master = Proc::node(md.path(), &["--save", ""]);
    let port = master.port.to_string();
    let first = Proc::node(
        rd.path(),
        &["--save", "3600 1", "--replicaof", "127.0.0.1", &port],
    );
    wait_link_up(&first);
    restart_continues(&master, first, rd.path(), Proc::node);
}

#[test]
fn tessera_replica_restart_continues_from_redis_master() {
    let (md, rd) = (tempdir(), tempdir());
    let master = Proc::redis(md.path(), &[]);
    let port = master.port.to_string();
    let first = Proc::node(
        rd.path(),
        &["--save", "3600 1", "--replicaof", "127.0.0.1", &port],
    );
    wait_link_up(&first);
    restart_continues(&master, first, rd.path(), Proc::node);
}

/// The file of a redis-server replica, restarted as a tessera replica: Redis's aux fields
/// are read the same way.
#[test]
fn tessera_continues_from_a_redis_replica_file() {
    let (md, rd) = (tempdir(), tempdir());
    let master = Proc::redis(md.path(), &[]);
    let port = master.port.to_string();
    // Proc::redis disables saving; the later --save wins.
    let first = Proc::redis(
        rd.path(),
        &["--save", "3600 1", "--replicaof", "127.0.0.1", &port],
    );
    wait_link_up(&first);
    restart_continues(&master, first, rd.path(), Proc::node);
}

/// Our replica's file, restarted as a redis-server replica: redis reads our aux fields and
/// continues too.
#[test]
fn redis_continues_from_a_tessera_replica_file() {
    let (md, rd) = (tempdir(), tempdir());
    let master = Proc::redis(md.path(), &[]);
    let port = master.port.to_string();
    let first = Proc::node(
        rd.path(),
        &["--save", "3600 1", "--replicaof", "127.0.0.1", &port],
    );
    wait_link_up(&first);
    restart_continues(&master, first, rd.path(), Proc::redis);
}

/// A master's file carries no replication position: a tessera node restarted from it as a
/// replica of someone else does a full resync and ends with that master's data only.
#[test]
fn master_file_gives_full_resync() {
    let (md, od) = (tempdir(), tempdir());
    let master = Proc::node(md.path(), &["--save", ""]);
    write_load(&master, 0);
    let mut other = Proc::node(od.path(), &["--save", "3600 1"]);
    let _: () = redis::cmd("SET")
        .arg("only-on-other")
        .arg("x")
        .query(&mut other.conn())
        .expect("set");
    shutdown_save(&mut other);
    drop(other);
    let full_before = int_info(&master, "sync_full");
    let port = master.port.to_string();
    let replica = Proc::node(od.path(), &["--replicaof", "127.0.0.1", &port]);
    wait_link_up(&replica);
    wait_caught_up(&master, &replica);
    assert_eq!(int_info(&master, "sync_full"), full_before + 1);
    assert_same_data(&master, &replica, 16);
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}
