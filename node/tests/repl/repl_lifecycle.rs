//! A replica's life beyond steady streaming, each checked against redis-server too where it
//! has the behaviour: restarted from its own dump.rdb it continues with a partial resync
//! (Redis 7.0's repl-id / repl-offset / repl-stream-db aux fields); while it loads its
//! master's RDB it answers -LOADING, never a half-loaded dataset; CLIENT LIST / KILL know
//! the replication links; and FLUSHALL stays atomic against writes on other threads, on the
//! master and in the stream.

use std::time::Duration;

use tessera_testkit::repl::*;

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
fn restart_continues(master: &Proc, mut first: Proc, dir: &std::path::Path, again: Start) {
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

type Start = fn(&std::path::Path, &[&str]) -> Proc;

/// A master of kind `master`, a saving replica of kind `first`, restarted as `again`.
fn restart_case(master: Start, first: Start, again: Start) {
    let (md, rd) = (tempdir(), tempdir());
    let master = master(md.path(), &["--save", ""]);
    let port = master.port.to_string();
    // Proc::redis disables saving; the later --save wins.
    let first = first(
        rd.path(),
        &["--save", "3600 1", "--replicaof", "127.0.0.1", &port],
    );
    wait_link_up(&first);
    restart_continues(&master, first, rd.path(), again);
}

#[test]
fn tessera_replica_restart_continues_from_tessera_master() {
    restart_case(Proc::node, Proc::node, Proc::node);
}

#[test]
fn tessera_replica_restart_continues_from_redis_master() {
    restart_case(Proc::redis, Proc::node, Proc::node);
}

/// The file of a redis-server replica, restarted as a tessera replica: Redis's aux fields
/// are read the same way.
#[test]
fn tessera_continues_from_a_redis_replica_file() {
    restart_case(Proc::redis, Proc::redis, Proc::node);
}

/// Our replica's file, restarted as a redis-server replica: redis reads our aux fields and
/// continues too.
#[test]
fn redis_continues_from_a_tessera_replica_file() {
    restart_case(Proc::redis, Proc::node, Proc::redis);
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

/// While a replica loads its master's RDB, a client sees the stale dataset, `-LOADING`, or
/// the full dataset: never a half-loaded one. The same checker runs against a redis-server
/// replica, which answers the same way.
fn reads_during_full_sync(replica_of: Start) {
    const KEYS: usize = 300_000;
    let (md, rd) = (tempdir(), tempdir());
    let master = Proc::node(md.path(), &["--save", ""]);
    let mut m = master.conn();
    for chunk in 0..KEYS / 1000 {
        let mut c = redis::cmd("MSET");
        for i in chunk * 1000..(chunk + 1) * 1000 {
            c.arg(format!("k:{i}")).arg(i);
        }
        let _: () = c.query(&mut m).expect("mset");
    }
    let replica = replica_of(rd.path(), &[]);
    let mut r = replica.conn();
    for i in 0..10 {
        let _: () = redis::cmd("SET")
            .arg(format!("stale:{i}"))
            .arg(i)
            .query(&mut r)
            .expect("set");
    }
    let port = replica.port;
    let reader = std::thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .expect("reader connection");
        let (mut loading, mut seen) = (0u64, Vec::new());
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while std::time::Instant::now() < deadline {
            match redis::cmd("DBSIZE").query::<i64>(&mut c) {
                Ok(n) => {
                    if seen.last() != Some(&n) {
                        seen.push(n);
                    }
                    if n == KEYS as i64 {
                        break;
                    }
                }
                Err(e) if e.code() == Some("LOADING") => loading += 1,
                Err(e) => panic!("DBSIZE during the sync: {e}"),
            }
        }
        (loading, seen)
    });
    // Let the reader see the stale dataset first.
    std::thread::sleep(Duration::from_millis(200));
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port)
        .query(&mut r)
        .expect("replicaof");
    let (loading, seen) = reader.join().expect("reader thread");
    eprintln!(
        "{}: DBSIZE values {seen:?}, {loading} LOADING replies",
        replica.name
    );
    assert_eq!(
        seen.last(),
        Some(&(KEYS as i64)),
        "never saw the full dataset"
    );
    assert!(
        seen.iter().all(|&n| n == 10 || n == KEYS as i64),
        "{} showed a half-loaded dataset: DBSIZE went {seen:?}",
        replica.name
    );
}

#[test]
fn tessera_replica_answers_loading_during_full_sync() {
    reads_during_full_sync(Proc::node);
}

#[test]
fn redis_replica_answers_loading_during_full_sync() {
    reads_during_full_sync(Proc::redis);
}

/// CLIENT LIST shows the replication links as Redis does (flags S on the master's side, M
/// on the replica's), TYPE filters find them (with "slave" as an alias), and CLIENT KILL
/// TYPE master makes the replica reconnect and continue partially. Run on a redis-server
/// pair too: the assertions hold for both.
fn replication_clients(start: Start) {
    let (md, rd) = (tempdir(), tempdir());
    let master = start(md.path(), &["--save", ""]);
    let port = master.port.to_string();
    let replica = start(
        rd.path(),
        &["--save", "", "--replicaof", "127.0.0.1", &port],
    );
    wait_link_up(&replica);
    let list = |p: &Proc, ty: &str| -> Vec<String> {
        let s: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg(ty)
            .query(&mut p.conn())
            .expect("client list");
        s.lines().map(str::to_string).collect()
    };
    let flags = |line: &str| -> String {
        line.split(' ')
            .find_map(|f| f.strip_prefix("flags="))
            .unwrap_or_default()
            .to_string()
    };
    let on_master = list(&master, "replica");
    assert_eq!(on_master.len(), 1, "{}: {on_master:?}", master.name);
    assert_eq!(flags(&on_master[0]), "S", "{}", master.name);
    assert_eq!(list(&master, "slave"), on_master);
    assert!(list(&master, "master").is_empty());
    let on_replica = list(&replica, "master");
    assert_eq!(on_replica.len(), 1, "{}: {on_replica:?}", replica.name);
    assert_eq!(flags(&on_replica[0]), "M", "{}", replica.name);
    // Normal clients (this one) are not counted as replication links.
    assert!(list(&replica, "normal")
        .iter()
        .all(|l| flags(l) != "M" && flags(l) != "S"));

    let partial = int_info(&master, "sync_partial_ok");
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("master")
        .query(&mut replica.conn())
        .expect("client kill type master");
    assert_eq!(killed, 1);
    wait_for(
        Duration::from_secs(60),
        "partial resync after the kill",
        || {
            int_info(&master, "sync_partial_ok") == partial + 1
                && replica.info("replication", "master_link_status").as_deref() == Some("up")
        },
    );
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("slave")
        .query(&mut master.conn())
        .expect("client kill type slave");
    assert_eq!(killed, 1);
    let err = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("bogus")
        .query::<i64>(&mut master.conn())
        .expect_err("unknown type");
    assert_eq!(
        err.detail(),
        Some("Unknown client type 'bogus'"),
        "{}",
        master.name
    );
}

#[test]
fn tessera_replication_clients() {
    replication_clients(Proc::node);
}

#[test]
fn redis_replication_clients() {
    replication_clients(Proc::redis);
}

/// FLUSHALL is atomic against writes on other threads, on the master and in the stream its
/// replica applies: each writer's surviving keys are a suffix of what it wrote (a flush
/// that removed a later write removed every earlier one), and the replica ends equal to
/// the master. Stripe by stripe, a write could land in an already-flushed stripe while an
/// earlier one was still to be flushed, and reach the stream before the FLUSHALL.
#[test]
fn flushall_is_atomic_against_concurrent_writes() {
    const WRITERS: usize = 3;
    let (md, rd) = (tempdir(), tempdir());
    let master = Proc::node(md.path(), &["--save", "", "--worker-threads", "4"]);
    let port = master.port.to_string();
    let replica = Proc::node(
        rd.path(),
        &["--save", "", "--replicaof", "127.0.0.1", &port],
    );
    wait_link_up(&replica);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let stop = stop.clone();
            let port = master.port;
            std::thread::spawn(move || {
                let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                    .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
                    .expect("writer connection");
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _: () = redis::cmd("SET")
                        .arg(format!("w{w}:{n}"))
                        .arg(n)
                        .query(&mut c)
                        .expect("set");
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut m = master.conn();
    for _ in 0..300 {
        let _: () = redis::cmd("FLUSHALL").query(&mut m).expect("flushall");
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written: Vec<u64> = writers
        .into_iter()
        .map(|t| t.join().expect("writer thread"))
        .collect();
    for (w, &n) in written.iter().enumerate() {
        let mut alive = Vec::with_capacity(n as usize);
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            let mut c = redis::cmd("EXISTS");
            for i in chunk {
                c.arg(format!("w{w}:{i}"));
            }
            // EXISTS counts; ask key by key only where the chunk is mixed.
            let k: u64 = c.query(&mut m).expect("exists");
            if k == 0 || k == chunk.len() as u64 {
                alive.extend(std::iter::repeat_n(k != 0, chunk.len()));
            } else {
                for i in chunk {
                    let e: bool = redis::cmd("EXISTS")
                        .arg(format!("w{w}:{i}"))
                        .query(&mut m)
                        .expect("exists");
                    alive.push(e);
                }
            }
        }
        let first = alive.iter().position(|&a| a).unwrap_or(alive.len());
        let holes = alive[first..].iter().filter(|&&a| !a).count();
        assert_eq!(
            holes, 0,
            "writer {w}: {holes} of its keys after w{w}:{first} were flushed while that one survived"
        );
    }
    wait_caught_up(&master, &replica);
    assert_same_data(&master, &replica, 16);
}
