//! tessera master + tessera replica: full sync under load, the command stream, partial
//! resync after a killed link, WAIT, ROLE, INFO replication, read-only replica, promotion.

use std::time::Duration;

use tessera_testkit::repl::*;
use tessera_testkit::*;

fn client_id_of_replica(master: &Proc) -> i64 {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut master.conn())
        .expect("client list");
    let line = list
        .lines()
        .find(|l| l.contains("cmd=psync") || l.contains("cmd=sync"))
        .unwrap_or_else(|| panic!("no replica connection in CLIENT LIST:\n{list}"));
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("id="))
        .and_then(|v| v.parse().ok())
        .expect("id field")
}

/// `args` fails with an error that contains `why`.
fn refused(c: &mut redis::Connection, args: &[&str], why: &str) {
    let err = redis::cmd(args[0])
        .arg(&args[1..])
        .query::<redis::Value>(c)
        .expect_err(why);
    assert!(err.to_string().contains(why), "{args:?}: {err}");
}

#[test]
fn tessera_master_tessera_replica() {
    let (dm, dr) = two_dirs();
    let master = Proc::node(dm.path(), &[]);
    let replica = Proc::node(dr.path(), &[]);
    // Data present before the sync travels in the RDB; the rest in the stream.
    sync_under_load(&master, &replica);
    assert_eq!(stat(&master, "sync_full"), "1");

    // ROLE and INFO on both sides.
    let mut mc = master.conn();
    let role: redis::Value = redis::cmd("ROLE").query(&mut mc).expect("role");
    let redis::Value::Array(parts) = role else {
        panic!("ROLE: {role:?}")
    };
    assert_eq!(parts[0], redis::Value::BulkString(b"master".to_vec()));
    let redis::Value::Array(reps) = &parts[2] else {
        panic!("ROLE replicas: {parts:?}")
    };
    assert_eq!(reps.len(), 1);
    assert_eq!(
        master.info("replication", "connected_slaves").as_deref(),
        Some("1")
    );
    let slave0 = master.info("replication", "slave0").expect("slave0");
    assert!(
        slave0.contains(&format!("port={}", replica.port)) && slave0.contains("state=online"),
        "{slave0}"
    );
    assert_eq!(
        replica.info("replication", "role").as_deref(),
        Some("slave")
    );
    assert_eq!(
        replica.info("replication", "master_port"),
        Some(master.port.to_string())
    );
    assert_eq!(
        replica.info("replication", "master_replid"),
        master.info("replication", "master_replid")
    );
    let rrole: Vec<redis::Value> = redis::cmd("ROLE").query(&mut replica.conn()).expect("role");
    assert_eq!(rrole[0], redis::Value::BulkString(b"slave".to_vec()));
    assert_eq!(rrole[3], redis::Value::BulkString(b"connected".to_vec()));

    // A replica is read-only for normal clients.
    let mut rc = replica.conn();
    refused(
        &mut rc,
        &["SET", "k", "v"],
        "You can't write against a read only replica",
    );

    // WAIT counts the replica once it acknowledged the write.
    assert_eq!(set_and_wait(&mut mc, "waited"), 1);
    let v: Option<String> = redis::cmd("GET").arg("waited").query(&mut rc).expect("get");
    assert_eq!(v.as_deref(), Some("1"));

    // A killed link comes back with a partial resync, not a full one; the stream goes on
    // in the database it had selected (a +CONTINUE does not repeat the SELECT).
    let _: () = redis::cmd("SELECT").arg(5).query(&mut mc).expect("select");
    let _: () = redis::cmd("SET")
        .arg("db5:pre")
        .arg(1)
        .query(&mut mc)
        .expect("set");
    wait_caught_up(&master, &replica);
    let id = client_id_of_replica(&master);
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query(&mut mc)
        .expect("client kill");
    let _: () = redis::cmd("SET")
        .arg("db5:post")
        .arg(1)
        .query(&mut mc)
        .expect("set");
    let _: () = redis::cmd("SELECT").arg(0).query(&mut mc).expect("select");
    resumes_partially(&master, &replica);

    // Promotion keeps the data; the old history becomes replid2.
    let old_id = master.info("replication", "master_replid").expect("replid");
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut rc)
        .expect("replicaof no one");
    assert_eq!(
        replica.info("replication", "role").as_deref(),
        Some("master")
    );
    assert_eq!(replica.info("replication", "master_replid2"), Some(old_id));
    assert_same_data(&master, &replica, 16);
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut rc)
        .expect("write after promotion");
}

#[test]
fn replica_of_a_replica_and_switching_masters_continue() {
    // A -> B -> C (a replica of a replica). B is promoted, A becomes B's replica: both C
    // and A continue partially (psync2: B serves A's old history as its replid2).
    let (da, db) = two_dirs();
    // No TTLs and no PINGs: A must produce nothing between B's catch-up and its promotion
    // (anything more would rightly make B refuse the partial resync).
    let a = Proc::node(da.path(), &["--repl-ping-replica-period", "100000"]);
    let b = Proc::node(db.path(), &["--repl-ping-replica-period", "100000"]);
    let mut ac = a.conn();
    for db in [0, 3, 9] {
        let _: () = redis::cmd("SELECT").arg(db).query(&mut ac).expect("select");
        for i in 0..200 {
            let _: () = redis::cmd("SET")
                .arg(format!("k{i}"))
                .arg(i)
                .query(&mut ac)
                .expect("set");
            let _: () = redis::cmd("RPUSH")
                .arg(format!("l{i}"))
                .arg(i)
                .query(&mut ac)
                .expect("rpush");
        }
    }
    let dc = tempfile::tempdir().expect("tmp");
    let c = Proc::node(dc.path(), &["--repl-ping-replica-period", "100000"]);
    replicate(&b, &a);
    replicate(&c, &b);
    for i in 0..100 {
        let _: () = redis::cmd("INCR")
            .arg(format!("c{i}"))
            .query(&mut ac)
            .expect("incr");
    }
    wait_caught_up(&a, &b);
    wait_caught_up(&b, &c);
    assert_same_data(&a, &c, 16);
    assert_eq!(b.info("stats", "sync_full").as_deref(), Some("1"));
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut b.conn())
        .expect("promote");
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("promotion")
        .query(&mut b.conn())
        .expect("set");
    replicate(&a, &b);
    wait_link_up(&c);
    wait_caught_up(&b, &a);
    wait_caught_up(&b, &c);
    wait_for(Duration::from_secs(30), "A and C continued", || {
        b.info("stats", "sync_partial_ok").as_deref() == Some("2")
    });
    wait_caught_up(&b, &c);
    assert_eq!(b.info("stats", "sync_full").as_deref(), Some("1"));
    assert_eq!(
        c.info("replication", "master_replid"),
        b.info("replication", "master_replid")
    );
    assert_same_data(&b, &a, 16);
    assert_same_data(&b, &c, 16);
}

/// A replica that stops reading is cut once its buffer passes the replica-class
/// client-output-buffer-limit.
#[test]
fn replica_over_output_buffer_limit_is_dropped() {
    use std::io::Write;
    let dm = tempfile::tempdir().expect("tmp");
    let master = Proc::node(
        dm.path(),
        &["--client-output-buffer-limit", "replica 1mb 0 0"],
    );
    let mut fake = std::net::TcpStream::connect(("127.0.0.1", master.port)).expect("connect");
    fake.write_all(b"PSYNC ? -1\r\n").expect("psync");
    wait_for(Duration::from_secs(30), "the replica registered", || {
        master.info("replication", "connected_slaves").as_deref() == Some("1")
    });
    // Far more than the socket buffers and the limit hold; the fake replica never reads.
    let mut mc = master.conn();
    let big = "x".repeat(100_000);
    for i in 0..400 {
        let _: () = redis::cmd("SET")
            .arg(format!("big:{i}"))
            .arg(&big)
            .query(&mut mc)
            .expect("set");
        if master.info("replication", "connected_slaves").as_deref() == Some("0") {
            break;
        }
    }
    wait_for(Duration::from_secs(30), "the replica dropped", || {
        master.info("replication", "connected_slaves").as_deref() == Some("0")
    });
    drop(fake);
}

/// min-replicas-to-write refuses writes without enough good replicas; a replica with
/// replica-serve-stale-data no refuses reads while its link is down.
#[test]
fn min_replicas_and_stale_data() {
    let (dm, dr) = two_dirs();
    let master = Proc::node(dm.path(), &[]);
    let replica = Proc::node(dr.path(), &[]);
    let mut mc = master.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("min-replicas-to-write")
        .arg(1)
        .query(&mut mc)
        .expect("config set");
    refused(
        &mut mc,
        &["SET", "k", "v"],
        "Not enough good replicas to write",
    );
    replicate(&replica, &master);
    wait_for(Duration::from_secs(30), "a good replica", || {
        redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query::<()>(&mut mc)
            .is_ok()
    });
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("min-replicas-to-write")
        .query(&mut mc)
        .expect("config get");
    assert_eq!(
        v,
        vec!["min-replicas-to-write".to_string(), "1".to_string()]
    );

    // Stale data: point the replica at a port nobody listens on.
    let mut rc = replica.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("replica-serve-stale-data")
        .arg("no")
        .query(&mut rc)
        .expect("config set");
    let dead = free_port();
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(dead)
        .query(&mut rc)
        .expect("replicaof");
    refused(&mut rc, &["GET", "k"], "Link with MASTER is down");
    assert_eq!(
        replica.info("replication", "master_link_status").as_deref(),
        Some("down")
    );
}

/// `redis-cli --rdb` fetches a snapshot over SYNC; redis-check-rdb accepts it.
#[test]
fn redis_cli_rdb_over_sync() {
    let dm = tempfile::tempdir().expect("tmp");
    let master = Proc::node(dm.path(), &[]);
    write_load(&master, 0);
    let file = dm.path().join("fetched.rdb");
    let o = tessera_testkit::output_within(
        std::process::Command::new(tessera_testkit::redis_cli_bin())
            .args(["-p", &master.port.to_string(), "--rdb"])
            .arg(&file),
        std::time::Duration::from_secs(60),
    );
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let chk = tessera_testkit::output_within(
        std::process::Command::new(tessera_testkit::bins::tool("redis-check-rdb")).arg(&file),
        std::time::Duration::from_secs(60),
    );
    let text = String::from_utf8_lossy(&chk.stdout);
    assert!(
        chk.status.success() && text.contains("RDB looks OK!"),
        "{text}"
    );
    // The load's keys (about 2000 outlive their TTLs) are all in it.
    let keys: usize = text
        .lines()
        .find_map(|l| l.strip_suffix(" keys read"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(keys >= 1500, "{keys} keys read\n{text}");
}
