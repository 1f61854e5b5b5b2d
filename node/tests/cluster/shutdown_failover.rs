//! A master that gets SIGTERM (issue 16): Redis 7.0's shutdown-timeout wait (writes paused
//! until the replicas acknowledged the final offset) and valkey 9's shutdown failover
//! (`shutdown-on-sigterm failover`: the in-sync replica is told to take over at once, with
//! `CLUSTER FAILOVER FORCE REPLICAID <id>` on its replication link).
//!
//! Cluster scenario: 3 masters with a replica each, cluster-node-timeout 5000, a writer on
//! shard 0 throughout; SIGTERM shard 0's master. With the failover its replica is master
//! well before a failure could even be detected (node-timeout), the old master exits 0
//! within shutdown-timeout, and every acknowledged write is on the new master.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_testkit::cluster::*;
use tessera_testkit::*;

const NODE_TIMEOUT_MS: u64 = 5000;
const SHUTDOWN_TIMEOUT_S: u64 = 5;

fn log_of(p: &Proc) -> String {
    p.log_path()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .unwrap_or_default()
}

fn info_field(p: &Proc, field: &str) -> String {
    tessera_testkit::info_field(&p.cli(&["INFO", "replication"]), field).unwrap_or_default()
}

/// A hash tag whose slot is in `lo..=hi`.
fn tag_in(p: &Proc, lo: u16, hi: u16) -> String {
    (0..10_000)
        .map(|i| format!("t{i}"))
        .find(|t| {
            p.cli(&["CLUSTER", "KEYSLOT", t])
                .trim()
                .parse::<u16>()
                .is_ok_and(|s| (lo..=hi).contains(&s))
        })
        .expect("a tag in range")
}

/// Result of the writer thread: acknowledged keys (value = key), failed attempts.
struct Written {
    acked: Vec<String>,
    failed: u64,
}

/// Writes `{tag}:i` through a cluster client until `stop`; a failed write is counted (and
/// retried as a new key after a short pause), never dropped silently.
fn writer(
    urls: Vec<String>,
    tag: String,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Written> {
    std::thread::spawn(move || {
        let client = redis::cluster::ClusterClientBuilder::new(urls)
            .connection_timeout(Duration::from_millis(500))
            .response_timeout(Duration::from_millis(1000))
            .build()
            .expect("cluster client");
        let mut conn = None;
        let mut w = Written {
            acked: Vec::new(),
            failed: 0,
        };
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            if conn.is_none() {
                conn = client.get_connection().ok();
            }
            let Some(c) = conn.as_mut() else {
                w.failed += 1;
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            let k = format!("{{{tag}}}:{i}");
            i += 1;
            match redis::cmd("SET").arg(&k).arg(&k).query::<()>(c) {
                Ok(()) => w.acked.push(k),
                Err(_) => {
                    w.failed += 1;
                    conn = None;
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        w
    })
}

/// Every key in `keys` holds its own name on `p`.
fn missing_on(p: &Proc, keys: &[String]) -> Vec<String> {
    let mut c = p.client();
    let mut missing = Vec::new();
    for chunk in keys.chunks(500) {
        let vals: Vec<Option<String>> = redis::cmd("MGET")
            .arg(chunk)
            .query(&mut c)
            .expect("mget on the new master");
        for (k, v) in chunk.iter().zip(vals) {
            if v.as_deref() != Some(k.as_str()) {
                missing.push(k.clone());
            }
        }
    }
    missing
}

/// 3 masters (tessera-node) with one replica each; shard 0's replica runs `replica_bin`.
/// Returns [m0, m1, m2, r0, r1, r2].
fn cluster_3x1(replica_bin: &'static str) -> Vec<Proc> {
    let mut nodes: Vec<Proc> = (0..3)
        .map(|_| Proc::cluster(tessera_bin(), "127.0.0.1", NODE_TIMEOUT_MS))
        .collect();
    nodes.push(Proc::cluster(replica_bin, "127.0.0.1", NODE_TIMEOUT_MS));
    for _ in 0..2 {
        nodes.push(Proc::cluster(tessera_bin(), "127.0.0.1", NODE_TIMEOUT_MS));
    }
    for (n, (a, b)) in nodes
        .iter()
        .zip([("0", "5460"), ("5461", "10922"), ("10923", "16383")])
    {
        assert_eq!(n.cli(&["CLUSTER", "ADDSLOTSRANGE", a, b]).trim(), "OK");
    }
    // Distinct config epochs before the nodes meet, as redis-cli --cluster create gives:
    // left at 0, they collide and are bumped one by one while the shard is handed over,
    // and a bump equal to the election's epoch makes valkey restart its election, which
    // the voters then refuse for 2 x node-timeout (seen in CI: 20 s).
    for (epoch, n) in nodes.iter().enumerate() {
        let epoch = (epoch + 1).to_string();
        assert_eq!(n.cli(&["CLUSTER", "SET-CONFIG-EPOCH", &epoch]).trim(), "OK");
    }
    let seed = nodes[0].port.to_string();
    for n in &nodes[1..] {
        assert_eq!(n.cli(&["CLUSTER", "MEET", "127.0.0.1", &seed]).trim(), "OK");
    }
    let ids: Vec<String> = nodes.iter().map(|n| n.myid()).collect();
    for i in 0..3 {
        let (r, mid) = (&nodes[3 + i], &ids[i]);
        wait_for(Duration::from_secs(30), "replica knows its master", || {
            r.nodes().iter().any(|l| l.starts_with(mid.as_str()))
        });
        assert_eq!(r.cli(&["CLUSTER", "REPLICATE", mid]).trim(), "OK");
    }
    for r in &nodes[3..] {
        wait_for(Duration::from_secs(30), "replication link up", || {
            info_field(r, "master_link_status") == "up"
        });
    }
    wait_state_ok(&nodes.iter().collect::<Vec<_>>());
    nodes
}

/// How shard 0's master is told to stop.
#[derive(Clone, Copy, PartialEq)]
enum Stop {
    Sigterm,
    /// SHUTDOWN FAILOVER (valkey 9), no directive.
    ShutdownFailover,
}

/// SIGTERM shard 0's master while a writer runs; `failover` turns on
/// `shutdown-on-sigterm failover`. Returns how long the replica took to be master.
fn sigterm_master(replica_bin: &'static str, failover: bool) -> Duration {
    stop_master(replica_bin, failover, Stop::Sigterm)
}

fn stop_master(replica_bin: &'static str, failover: bool, how: Stop) -> Duration {
    let mut nodes = cluster_3x1(replica_bin);
    let m0 = &nodes[0];
    assert_eq!(
        m0.cli(&[
            "CONFIG",
            "SET",
            "shutdown-timeout",
            &SHUTDOWN_TIMEOUT_S.to_string()
        ])
        .trim(),
        "OK"
    );
    if failover && how == Stop::Sigterm {
        assert_eq!(
            m0.cli(&["CONFIG", "SET", "shutdown-on-sigterm", "failover"])
                .trim(),
            "OK"
        );
        assert_eq!(
            m0.cli(&["CONFIG", "GET", "shutdown-on-sigterm"])
                .lines()
                .nth(1)
                .unwrap_or_default(),
            "failover"
        );
    }
    let tag = tag_in(m0, 0, 5460);
    let urls: Vec<String> = nodes
        .iter()
        .map(|n| format!("redis://{}/", n.addr()))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer(urls, tag, stop.clone());
    wait_for(Duration::from_secs(20), "the writer is writing", || {
        m0.cli(&["DBSIZE"]).trim().parse::<u64>().unwrap_or(0) > 200
    });

    let t0 = Instant::now();
    match how {
        Stop::Sigterm => nodes[0].signal("TERM"),
        // The connection closes without a reply once the node exits.
        Stop::ShutdownFailover => {
            let m0 = nodes[0].addr();
            std::thread::spawn(move || {
                let _ = cli_out(&["-u", &format!("redis://{m0}")], &["SHUTDOWN", "FAILOVER"]);
            });
        }
    }
    // When the old master exits and when its replica is master, whichever comes first.
    let (mut exit, mut took) = (None, None);
    while (exit.is_none() || took.is_none()) && t0.elapsed() < Duration::from_secs(40) {
        if exit.is_none() {
            if let Ok(Some(st)) = nodes[0].child.try_wait() {
                exit = Some((t0.elapsed(), st));
            }
        }
        if took.is_none() && info_field(&nodes[3], "role") == "master" {
            took = Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (exited, status) = exit.expect("the old master exited");
    let took = took.expect("shard 0's replica became master");
    // Let the writer go on against the new master for a moment.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let written = w.join().expect("writer");
    let old_log = log_of(&nodes[0]);
    println!(
        "replica {} master after {took:?}; old master exited after {exited:?} ({status}); \
         writes acknowledged {}, failed {}",
        if replica_bin == tessera_bin() {
            "(tessera)"
        } else {
            "(valkey)"
        },
        written.acked.len(),
        written.failed
    );
    assert!(
        status.success(),
        "old master exit status {status}\n{old_log}"
    );
    // shutdown-timeout, then at most 3 s for the takeover (persist::shutdown::TAKEOVER_WAIT).
    assert!(
        exited < Duration::from_secs(SHUTDOWN_TIMEOUT_S + 3),
        "the old master took {exited:?} to exit"
    );
    assert!(
        old_log.contains("replicas are in sync when shutting down"),
        "no replica wait in the old master's log:\n{old_log}"
    );
    let r0 = &nodes[3];
    let missing = missing_on(r0, &written.acked);
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged writes missing on the new master, e.g. {:?}",
        missing.len(),
        written.acked.len(),
        &missing[..missing.len().min(5)]
    );
    if failover {
        assert!(
            old_log.contains("Perform auto failover to replica"),
            "no handover in the old master's log:\n{old_log}"
        );
        // The replica (valkey's own log line too) took valkey's request.
        let r_log = log_of(r0);
        assert!(
            r_log.contains("Forced failover primary request accepted"),
            "the replica did not take the request:\n{r_log}"
        );
        // Without the handover nothing can happen before node-timeout (failure detection)
        // plus the election delay.
        if took >= Duration::from_millis(NODE_TIMEOUT_MS) {
            // What the voters said (their 'Failover auth' lines) and the replica's election.
            let votes: Vec<String> = nodes[1..3]
                .iter()
                .flat_map(|n| {
                    log_of(n)
                        .lines()
                        .filter(|l| l.contains("Failover auth"))
                        .map(|l| format!("{}: {l}", n.addr()))
                        .collect::<Vec<_>>()
                })
                .collect();
            panic!(
                "replica became master only after {took:?}\nvoters:\n{}\nreplica log:\n{r_log}",
                votes.join("\n")
            );
        }
    } else {
        assert!(
            !old_log.contains("Perform auto failover"),
            "a handover without the directive:\n{old_log}"
        );
    }
    // The cluster is whole again without the old master.
    nodes.remove(0);
    wait_for(Duration::from_secs(30), "cluster_state:ok", || {
        nodes
            .iter()
            .all(|n| n.cluster_info("cluster_state") == "ok")
    });
    took
}

#[test]
fn sigterm_with_failover_hands_the_shard_to_its_replica() {
    sigterm_master(tessera_bin(), true);
}

#[test]
fn sigterm_with_failover_hands_the_shard_to_a_valkey_replica() {
    sigterm_master(valkey_bin(), true);
}

#[test]
fn shutdown_failover_command_hands_the_shard_over() {
    stop_master(tessera_bin(), true, Stop::ShutdownFailover);
}

#[test]
fn sigterm_without_failover_waits_for_the_replica_only() {
    sigterm_master(tessera_bin(), false);
}

/// Redis 7.0's wait on a standalone master whose replica cannot acknowledge (stopped):
/// writes stay paused and the master exits 0 once shutdown-timeout has passed, listing the
/// lagging replica; SHUTDOWN NOW does not wait.
#[test]
fn shutdown_timeout_bounds_the_wait_for_a_stopped_replica() {
    let mut m = Proc::standalone(tessera_bin());
    let r = Proc::standalone(tessera_bin());
    let port = m.port.to_string();
    assert_eq!(r.cli(&["REPLICAOF", "127.0.0.1", &port]).trim(), "OK");
    wait_for(Duration::from_secs(20), "link up", || {
        info_field(&r, "master_link_status") == "up"
    });
    assert_eq!(
        m.cli(&["CONFIG", "SET", "shutdown-timeout", "2"]).trim(),
        "OK"
    );
    r.signal("STOP");
    // A write the stopped replica cannot acknowledge.
    assert_eq!(m.cli(&["SET", "k", "v"]).trim(), "OK");
    let mut c = m.client();
    c.set_read_timeout(Some(Duration::from_millis(500))).ok();
    let t0 = Instant::now();
    m.signal("TERM");
    // While the master waits its writes are paused (a SET gets no answer in time).
    std::thread::sleep(Duration::from_millis(300));
    let paused = redis::cmd("SET")
        .arg("late")
        .arg("1")
        .query::<()>(&mut c)
        .is_err();
    let status = m.wait_exit(Duration::from_secs(10)).expect("master exits");
    let took = t0.elapsed();
    r.signal("CONT");
    let log = log_of(&m);
    assert!(status.success(), "exit status {status}\n{log}");
    assert!(paused, "a write was acknowledged during the shutdown wait");
    assert!(
        took >= Duration::from_secs(2),
        "did not wait: {took:?}\n{log}"
    );
    assert!(
        log.contains("Waiting for replicas before shutting down."),
        "{log}"
    );
    assert!(
        log.contains("0 of 1 replicas are in sync when shutting down."),
        "{log}"
    );
    assert!(log.contains("Lagging replica"), "{log}");

    // SHUTDOWN NOW: no wait.
    let mut m2 = Proc::standalone(tessera_bin());
    let port = m2.port.to_string();
    assert_eq!(r.cli(&["REPLICAOF", "127.0.0.1", &port]).trim(), "OK");
    wait_for(Duration::from_secs(20), "link up", || {
        info_field(&r, "master_link_status") == "up"
    });
    r.signal("STOP");
    let _ = m2.cli(&["SHUTDOWN", "NOW"]);
    let status = m2.wait_exit(Duration::from_secs(1));
    r.signal("CONT");
    assert!(status.is_some_and(|s| s.success()), "SHUTDOWN NOW waited");
    assert!(!log_of(&m2).contains("Waiting for replicas"));
    // SHUTDOWN FAILOVER is cluster-only (valkey's error).
    let m3 = Proc::standalone(tessera_bin());
    assert_eq!(
        m3.cli(&["SHUTDOWN", "FAILOVER"]).trim(),
        "ERR SHUTDOWN FAILOVER is only supported in cluster mode."
    );
}
