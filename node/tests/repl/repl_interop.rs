//! Replication between tessera-node and the real programs: tessera master → redis-server /
//! valkey-server replica, redis-server master → tessera replica (RDB sent as `$<len>` and as
//! the diskless `$EOF:` form). After a write load the datasets are equal; a killed link comes
//! back with a partial resync (+CONTINUE), checked in the master's INFO stats.

use std::time::Duration;

use tessera_testkit::repl::*;

fn kill_type(p: &Proc, ty: &str) {
    let n: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg(ty)
        .query(&mut p.conn())
        .expect("client kill type");
    assert_eq!(n, 1, "CLIENT KILL TYPE {ty} on {}", p.name);
}

/// tessera master, `replica` from another program: full sync, stream, partial resync.
fn tessera_master_with(replica: Proc, master: Proc) {
    sync_under_load(&master, &replica);
    assert_eq!(stat(&master, "sync_full"), "1");
    // The replica cuts its link; it comes back with +CONTINUE.
    kill_type(&replica, "master");
    resumes_partially(&master, &replica);
}

#[test]
fn tessera_master_redis_replica() {
    let (dm, dr) = two_dirs();
    let master = Proc::node(dm.path(), &[]);
    let replica = Proc::redis(dr.path(), &[]);
    tessera_master_with(replica, master);
}

#[test]
fn tessera_master_valkey_replica() {
    let (dm, dr) = two_dirs();
    let master = Proc::node(dm.path(), &[]);
    let replica = Proc::valkey(dr.path(), &[]);
    tessera_master_with(replica, master);
}

/// redis-server master (`master_args` pick the RDB transfer form), tessera replica.
fn redis_master_tessera_replica(master_args: &[&str]) {
    let (dm, dr) = two_dirs();
    let master = Proc::redis(dm.path(), master_args);
    let replica = Proc::node(dr.path(), &[]);
    sync_under_load(&master, &replica);
    assert_eq!(stat(&master, "sync_full"), "1");
    // WAIT on the redis master counts our ACKs.
    let mut mc = master.conn();
    assert_eq!(
        set_and_wait(&mut mc, "acked"),
        1,
        "the tessera replica acknowledged the write"
    );
    // The master cuts the link; the replica comes back with +CONTINUE.
    kill_type(&master, "replica");
    resumes_partially(&master, &replica);
}

#[test]
fn redis_master_tessera_replica_disk_sync() {
    redis_master_tessera_replica(&["--repl-diskless-sync", "no"]);
}

#[test]
fn redis_master_tessera_replica_diskless_eof_form() {
    redis_master_tessera_replica(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
}

#[test]
fn valkey_master_tessera_replica() {
    let (dm, dr) = two_dirs();
    let master = Proc::valkey(dm.path(), &["--repl-diskless-sync-delay", "0"]);
    let replica = Proc::node(dr.path(), &[]);
    sync_under_load(&master, &replica);
}

/// A replica never expires keys by its own clock: a logically expired key reads as missing
/// but stays until the master's DEL (here: the master expires it lazily on access).
#[test]
fn replica_leaves_expiry_to_its_master() {
    let (dm, dr) = two_dirs();
    let master = Proc::redis(dm.path(), &["--enable-debug-command", "yes"]);
    let replica = Proc::node(dr.path(), &[]);
    let mut mc = master.conn();
    let _: () = redis::cmd("DEBUG")
        .arg("SET-ACTIVE-EXPIRE")
        .arg(0)
        .query(&mut mc)
        .expect("debug set-active-expire");
    replicate(&replica, &master);
    let _: () = redis::cmd("SET")
        .arg("short")
        .arg("v")
        .arg("PX")
        .arg(200)
        .query(&mut mc)
        .expect("set");
    wait_caught_up(&master, &replica);
    let mut rc = replica.conn();
    // Past the TTL on every clock.
    wait_for(Duration::from_secs(10), "the TTL to pass", || {
        let v: Option<String> = redis::cmd("GET").arg("short").query(&mut rc).expect("get");
        v.is_none()
    });
    std::thread::sleep(Duration::from_millis(300));
    let ks: String = redis::cmd("INFO")
        .arg("keyspace")
        .query(&mut rc)
        .expect("info");
    assert!(ks.contains("db0:keys=1,"), "the replica kept the key: {ks}");
    assert_eq!(replica.info("stats", "expired_keys").as_deref(), Some("0"));
    // The master expires it on access and its DEL reaches the replica.
    let v: Option<String> = redis::cmd("GET").arg("short").query(&mut mc).expect("get");
    assert!(v.is_none());
    wait_for(Duration::from_secs(30), "the master's DEL", || {
        let ks: String = redis::cmd("INFO")
            .arg("keyspace")
            .query(&mut rc)
            .unwrap_or_default();
        !ks.contains("db0:")
    });
}
