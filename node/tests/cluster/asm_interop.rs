//! Atomic slot migration (issue 21) between valkey-server 9.1 and tessera-node, in every
//! direction: `CLUSTER MIGRATESLOTS` moves slots over Valkey's own protocol (SYNCSLOTS
//! ESTABLISH, the snapshot as commands, the live stream, the pause and the hand-off), with
//! a writer running. Every key ends on exactly one owner with its last
//! acknowledged value, and no write fails.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tessera_testkit::cluster::*;
use tessera_testkit::*;

/// The `field` of the first job GETSLOTMIGRATIONS lists (redis-cli's raw output is one
/// line per element: name, value, ...).
fn job_field(n: &Proc, field: &str) -> Option<String> {
    let out = n.cli(&["CLUSTER", "GETSLOTMIGRATIONS"]);
    let lines: Vec<&str> = out.lines().collect();
    lines
        .iter()
        .position(|l| *l == field)
        .and_then(|i| lines.get(i + 1))
        .map(|s| s.to_string())
}

/// Slot owner of `slot` as `n` sees it (a node id).
fn owner(n: &Proc, slot: u16) -> Option<String> {
    n.nodes().into_iter().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        let owns = f.get(8..)?.iter().any(|r| {
            let mut p = r.split('-');
            let a: Option<u16> = p.next().and_then(|x| x.parse().ok());
            let b: Option<u16> = p.next().and_then(|x| x.parse().ok()).or(a);
            matches!((a, b), (Some(a), Some(b)) if a <= slot && slot <= b)
        });
        owns.then(|| f[0].to_string())
    })
}

/// `source` (owning every slot) moves slots 0-8191 to `target` with CLUSTER MIGRATESLOTS
/// while a writer overwrites keys (SET and EVAL in turn): both ends report success, the slot table agrees, no
/// key is lost or stale and no write fails. Returns how long the move took.
fn migrate_under_writes(source_bin: &'static str, target_bin: &'static str) -> Duration {
    let source = Proc::cluster(source_bin, "127.0.0.1", 2000);
    let target = Proc::cluster(target_bin, "127.0.0.1", 2000);
    let (vid, tid) = (source.myid(), target.myid());
    let p = target.port.to_string();
    assert_eq!(
        source.cli(&["CLUSTER", "MEET", "127.0.0.1", &p]).trim(),
        "OK"
    );
    assert_eq!(
        source
            .cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"])
            .trim(),
        "OK"
    );
    wait_for(Duration::from_secs(20), "both see the slots", || {
        owner(&target, 0).as_deref() == Some(vid.as_str())
    });
    wait_state_ok(&[&source, &target]);

    // 3000 keys, then a writer that keeps overwriting 300 of them during the move.
    let mut c = source.client();
    for i in 0..3000 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(format!("v{i}"))
            .query(&mut c)
            .expect("SET");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let urls: Vec<String> = [&source, &target]
        .iter()
        .map(|n| format!("redis://{}/", n.addr()))
        .collect();
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut cc = redis::cluster::ClusterClient::new(urls)
                .and_then(|c| c.get_connection())
                .expect("cluster client");
            let mut last: HashMap<String, String> = HashMap::new();
            let mut failed = 0u64;
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let k = format!("k{}", n % 300);
                let v = format!("w{n}");
                // Every other write is a script (its effects travel as the script's commands).
                let mut cmd = if n.is_multiple_of(2) {
                    redis::cmd("SET")
                } else {
                    let mut c = redis::cmd("EVAL");
                    c.arg("return redis.call('SET', KEYS[1], ARGV[1])").arg(1);
                    c
                };
                match cmd.arg(&k).arg(&v).query::<redis::Value>(&mut cc) {
                    Ok(_) => {
                        last.insert(k, v);
                    }
                    Err(_) => failed += 1,
                }
                n += 1;
            }
            (last, failed, n)
        })
    };
    std::thread::sleep(Duration::from_millis(200));

    let started = std::time::Instant::now();
    assert_eq!(
        source
            .cli(&[
                "CLUSTER",
                "MIGRATESLOTS",
                "SLOTSRANGE",
                "0",
                "8191",
                "NODE",
                &tid
            ])
            .trim(),
        "OK"
    );
    wait_for(Duration::from_secs(30), "the migration to end", || {
        matches!(
            job_field(&source, "state").as_deref(),
            Some("success" | "failed" | "cancelled")
        )
    });
    let took = started.elapsed();
    assert_eq!(
        job_field(&source, "state").as_deref(),
        Some("success"),
        "source: {}",
        source.cli(&["CLUSTER", "GETSLOTMIGRATIONS"])
    );
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (last, failed, total) = writer.join().expect("writer");

    // The target's view of the job.
    assert_eq!(job_field(&target, "operation").as_deref(), Some("IMPORT"));
    assert_eq!(job_field(&target, "state").as_deref(), Some("success"));
    assert_eq!(job_field(&target, "slot_ranges").as_deref(), Some("0-8191"));
    assert_eq!(
        job_field(&target, "name"),
        job_field(&source, "name"),
        "one job name on both ends"
    );
    // Ownership, seen alike by both.
    wait_for(Duration::from_secs(10), "both see the new owner", || {
        [0u16, 4000, 8191]
            .iter()
            .all(|&s| owner(&source, s).as_deref() == Some(tid.as_str()))
            && owner(&source, 8192).as_deref() == Some(vid.as_str())
            && owner(&target, 0).as_deref() == Some(tid.as_str())
    });
    // Every key on exactly one node, with its last acknowledged value.
    let dbsize = |n: &Proc| -> u64 { n.cli(&["DBSIZE"]).trim().parse().unwrap_or(u64::MAX) };
    assert_eq!(dbsize(&source) + dbsize(&target), 3000);
    let mut cc = cluster_client([&source, &target])
        .get_connection()
        .expect("cluster client");
    let mut lost = 0;
    for i in 0..3000 {
        let k = format!("k{i}");
        let want = last.get(&k).cloned().unwrap_or_else(|| format!("v{i}"));
        let got: Option<String> = redis::cmd("GET").arg(&k).query(&mut cc).expect("GET");
        if got.as_deref() != Some(want.as_str()) {
            lost += 1;
        }
    }
    eprintln!("writes: {total}, failed: {failed}, lost: {lost}");
    assert_eq!(lost, 0, "keys lost or stale after the move");
    assert_eq!(failed, 0, "writes failed during the move");
    assert!(total > 0);
    took
}

#[test]
fn valkey_source_moves_slots_to_a_tessera_target_under_writes() {
    let took = migrate_under_writes(valkey_bin(), tessera_bin());
    eprintln!("valkey -> tessera: {took:?}");
}

#[test]
fn tessera_source_moves_slots_to_a_tessera_target_under_writes() {
    let took = migrate_under_writes(tessera_bin(), tessera_bin());
    eprintln!("tessera -> tessera: {took:?}");
}

#[test]
fn tessera_source_moves_slots_to_a_valkey_target_under_writes() {
    let took = migrate_under_writes(tessera_bin(), valkey_bin());
    eprintln!("tessera -> valkey: {took:?}");
}

/// Held before the pause (valkey's DEBUG SLOTMIGRATION PREVENT-PAUSE), the target holds
/// the imported keys hidden: DBSIZE and KEYS leave them out, COUNTKEYSINSLOT counts them.
/// Cancelled on the source, the target's job fails as source's does (connection lost), its
/// keys are removed and the slots stay with the source.
/// `bin` in cluster mode with DEBUG enabled (the tests hold migrations with DEBUG
/// SLOTMIGRATION).
fn debug_proc(bin: &'static str) -> Proc {
    Proc {
        srv: Launch::new(bin)
            .args(&[
                "--save",
                "",
                "--appendonly",
                "no",
                "--cluster-enabled",
                "yes",
            ])
            .args(&[
                "--cluster-node-timeout",
                "2000",
                "--enable-debug-command",
                "yes",
            ])
            .logfile()
            .ip("127.0.0.1")
            .start(),
    }
}

/// valkey-server (with DEBUG enabled) owning slots 1-16383, a tessera-node master with
/// slot 0
/// and, with `with_replica`, a tessera-node replica of it; the cluster is ok.
fn debug_pair(with_replica: bool) -> (Proc, Proc, Option<Proc>) {
    let valkey = debug_proc(valkey_bin());
    let tessera = Proc::cluster(tessera_bin(), "127.0.0.1", 2000);
    let replica = with_replica.then(|| Proc::cluster(tessera_bin(), "127.0.0.1", 2000));
    let (vid, tid) = (valkey.myid(), tessera.myid());
    for n in std::iter::once(&tessera).chain(replica.as_ref()) {
        let p = n.port.to_string();
        assert_eq!(
            valkey.cli(&["CLUSTER", "MEET", "127.0.0.1", &p]).trim(),
            "OK"
        );
    }
    assert_eq!(
        valkey
            .cli(&["CLUSTER", "ADDSLOTSRANGE", "1", "16383"])
            .trim(),
        "OK"
    );
    // The target owns slot 0, so its replica can take over and it turns replica then.
    assert_eq!(tessera.cli(&["CLUSTER", "ADDSLOTS", "0"]).trim(), "OK");
    wait_for(
        Duration::from_secs(20),
        "all see the slots and the target",
        || {
            owner(&tessera, 1).as_deref() == Some(vid.as_str())
                && owner(&valkey, 0).as_deref() == Some(tid.as_str())
                && replica
                    .iter()
                    .all(|r| r.nodes().iter().any(|l| l.starts_with(tid.as_str())))
        },
    );
    if let Some(r) = &replica {
        assert_eq!(r.cli(&["CLUSTER", "REPLICATE", &tid]).trim(), "OK");
        wait_for(Duration::from_secs(20), "the replica's link", || {
            info_field(&r.cli(&["INFO", "replication"]), "master_link_status").as_deref()
                == Some("up")
        });
    }
    let all: Vec<&Proc> = [&valkey, &tessera]
        .into_iter()
        .chain(replica.as_ref())
        .collect();
    wait_state_ok(&all);
    (valkey, tessera, replica)
}

#[test]
fn cancelled_import_is_rolled_back_on_the_tessera_target() {
    let (valkey, tessera, replica) = debug_pair(true);
    let replica = replica.expect("replica");
    let (vid, tid) = (valkey.myid(), tessera.myid());
    // 100 keys in slot 16383 ({6ZJ} hashes there) and one elsewhere.
    let mut c = valkey.client();
    for i in 0..100 {
        let _: () = redis::cmd("SET")
            .arg(format!("{{6ZJ}}{i}"))
            .arg("v")
            .query(&mut c)
            .expect("SET");
    }
    let _: () = redis::cmd("SET")
        .arg("other")
        .arg("v")
        .query(&mut c)
        .expect("SET");
    assert_eq!(
        valkey
            .cli(&["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "1"])
            .trim(),
        "OK"
    );
    assert_eq!(
        valkey
            .cli(&[
                "CLUSTER",
                "MIGRATESLOTS",
                "SLOTSRANGE",
                "16383",
                "16383",
                "NODE",
                &tid
            ])
            .trim(),
        "OK"
    );
    wait_for(
        Duration::from_secs(20),
        "the target to wait for the pause",
        || job_field(&tessera, "state").as_deref() == Some("waiting-for-paused"),
    );
    assert_eq!(
        tessera.cli(&["CLUSTER", "COUNTKEYSINSLOT", "16383"]).trim(),
        "100"
    );
    assert_eq!(tessera.cli(&["DBSIZE"]).trim(), "0");
    assert_eq!(tessera.cli(&["KEYS", "*"]).trim(), "");
    // Legacy SETSLOT is refused on both ends while the job runs, alike.
    assert_eq!(
        tessera
            .cli(&["CLUSTER", "SETSLOT", "16383", "STABLE"])
            .trim(),
        "ERR Slot import in progress."
    );
    assert_eq!(
        valkey
            .cli(&["CLUSTER", "SETSLOT", "16383", "STABLE"])
            .trim(),
        "ERR Slot export in progress."
    );
    assert_eq!(
        valkey.cli(&["CLUSTER", "CANCELSLOTMIGRATIONS"]).trim(),
        "OK"
    );
    wait_for(Duration::from_secs(10), "the target's job to fail", || {
        job_field(&tessera, "state").as_deref() == Some("failed")
    });
    assert_eq!(job_field(&valkey, "state").as_deref(), Some("cancelled"));
    assert!(job_field(&tessera, "message")
        .unwrap_or_default()
        .starts_with("Connection lost to source"));
    assert_eq!(
        tessera.cli(&["CLUSTER", "COUNTKEYSINSLOT", "16383"]).trim(),
        "0"
    );
    assert_eq!(tessera.cli(&["DBSIZE"]).trim(), "0");
    assert_eq!(valkey.cli(&["DBSIZE"]).trim(), "101");
    assert_eq!(owner(&tessera, 16383).as_deref(), Some(vid.as_str()));
    // The rollback reached the replica: keys deleted, job failed.
    wait_for(Duration::from_secs(10), "the replica's rollback", || {
        job_field(&replica, "state").as_deref() == Some("failed")
            && replica.cli(&["CLUSTER", "COUNTKEYSINSLOT", "16383"]).trim() == "0"
    });
}

/// FLUSHALL on the target during an import fails it with Valkey's "Data was flushed";
/// the source sees the link drop.
#[test]
fn flush_on_the_tessera_target_fails_the_import() {
    let (valkey, tessera, _) = debug_pair(false);
    let tid = tessera.myid();
    let mut c = valkey.client();
    for i in 0..10 {
        let _: () = redis::cmd("SET")
            .arg(format!("{{6ZJ}}{i}"))
            .arg("v")
            .query(&mut c)
            .expect("SET");
    }
    valkey.cli(&["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "1"]);
    valkey.cli(&[
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        "16383",
        "16383",
        "NODE",
        &tid,
    ]);
    wait_for(
        Duration::from_secs(20),
        "the target to wait for the pause",
        || job_field(&tessera, "state").as_deref() == Some("waiting-for-paused"),
    );
    assert_eq!(tessera.cli(&["FLUSHALL"]).trim(), "OK");
    wait_for(Duration::from_secs(10), "both ends to fail", || {
        job_field(&tessera, "state").as_deref() == Some("failed")
            && job_field(&valkey, "state").as_deref() == Some("failed")
    });
    assert_eq!(
        job_field(&tessera, "message").as_deref(),
        Some("Data was flushed")
    );
    assert!(job_field(&valkey, "message")
        .unwrap_or_default()
        .starts_with("Connection lost to target"));
    assert_eq!(valkey.cli(&["DBSIZE"]).trim(), "10");
}

/// The command interface, tessera-node against valkey-server 9.1: the same bad
/// MIGRATESLOTS / SYNCSLOTS / CANCELSLOTMIGRATIONS calls get the same replies (node ids
/// replaced by placeholders), in a 2-node cluster of each where the first owns every slot.
#[test]
fn command_errors_match_valkey() {
    let run = |bin: &'static str| -> Vec<String> {
        let a = Proc::cluster(bin, "127.0.0.1", 2000);
        let b = Proc::cluster(bin, "127.0.0.1", 2000);
        let (aid, bid) = (a.myid(), b.myid());
        let p = b.port.to_string();
        a.cli(&["CLUSTER", "MEET", "127.0.0.1", &p]);
        a.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
        wait_for(Duration::from_secs(20), "b sees a's slots", || {
            owner(&b, 0).as_deref() == Some(aid.as_str())
        });
        let unknown = "0123456789012345678901234567890123456789";
        let name = "abcdefabcdefabcdefabcdefabcdefabcdefabcd";
        let cases: Vec<(&Proc, Vec<&str>)> = vec![
            (&a, vec!["CLUSTER", "MIGRATESLOTS", "SLOTSRANGE"]),
            (&a, vec!["CLUSTER", "MIGRATESLOTS", "NODE", &bid]),
            (
                &a,
                vec![
                    "CLUSTER",
                    "MIGRATESLOTS",
                    "SLOTSRANGE",
                    "a",
                    "0",
                    "NODE",
                    &bid,
                ],
            ),
            (
                &a,
                vec![
                    "CLUSTER",
                    "MIGRATESLOTS",
                    "SLOTSRANGE",
                    "0",
                    "16384",
                    "NODE",
                    &bid,
                ],
            ),
            (
                &a,
                vec![
                    "CLUSTER",
                    "MIGRATESLOTS",
                    "SLOTSRANGE",
                    "0",
                    "x",
                    "NODE",
                    &bid,
                ],
            ),
            (
                &a,
                vec![
                    "CLUSTER",
                    "MIGRATESLOTS",
                    "SLOTSRANGE",
                    "10",
                    "5",
                    "NODE",
                    &bid,
                ],
            ),
            (
                &a,
                vec![
                    "CLUSTER",
                    "MIGRATESLOTS",
                    "SLOTSRANGE",
                    "0",
                    "10",
                    "5",
                    "20",
                    "NODE",
                    &bid,
                ],
            ),
            (&a, vec!["CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", "0", "10"]),
            (
                &a,
                vec!["CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", "0", "10", "NODE"],
            ),
            (
                &a,
                vec![
                    "CLUSTER",
                    "MIGRATESLOTS",
                    "SLOTSRANGE",
                    "0",
                    "10",
                    "NODE",
                    "abc",
                ],
            ),
            (
                &a,
                vec![
                    "CLUSTER",
                    "MIGRATESLOTS",
                    "SLOTSRANGE",
                    "0",
                    "10",
                    "NODE",
                    unknown,
                ],
            ),
            (
                &a,
                vec![
                    "CLUSTER",
                    "MIGRATESLOTS",
                    "SLOTSRANGE",
                    "0",
                    "10",
                    "NODE",
                    &aid,
                ],
            ),
            (
                &a,
                vec![
                    "CLUSTER",
                    "MIGRATESLOTS",
                    "SLOTSRANGE",
                    "0",
                    "10",
                    "NODE",
                    &bid,
                    "SLOTSRANGE",
                    "5",
                    "6",
                    "NODE",
                    &bid,
                ],
            ),
            (
                &b,
                vec![
                    "CLUSTER",
                    "MIGRATESLOTS",
                    "SLOTSRANGE",
                    "0",
                    "10",
                    "NODE",
                    &aid,
                ],
            ),
            (&a, vec!["CLUSTER", "CANCELSLOTMIGRATIONS"]),
            (&a, vec!["CLUSTER", "CANCELSLOTMIGRATIONS", "x"]),
            (&a, vec!["CLUSTER", "GETSLOTMIGRATIONS"]),
            (&a, vec!["CLUSTER", "SYNCSLOTS", "ACK"]),
            (&a, vec!["CLUSTER", "SYNCSLOTS", "PAUSED"]),
            (&a, vec!["CLUSTER", "SYNCSLOTS", "FOO"]),
            (
                &a,
                vec![
                    "CLUSTER",
                    "SYNCSLOTS",
                    "FINISH",
                    "STATE",
                    "SUCCESS",
                    "NAME",
                    name,
                ],
            ),
            (
                &b,
                vec![
                    "CLUSTER",
                    "SYNCSLOTS",
                    "ESTABLISH",
                    "SOURCE",
                    &aid,
                    "NAME",
                    name,
                ],
            ),
            (
                &b,
                vec![
                    "CLUSTER",
                    "SYNCSLOTS",
                    "ESTABLISH",
                    "SOURCE",
                    unknown,
                    "NAME",
                    name,
                    "SLOTSRANGE",
                    "0",
                    "1",
                ],
            ),
            (
                &b,
                vec![
                    "CLUSTER",
                    "SYNCSLOTS",
                    "ESTABLISH",
                    "SOURCE",
                    &bid,
                    "NAME",
                    name,
                    "SLOTSRANGE",
                    "0",
                    "1",
                ],
            ),
            (
                &b,
                vec![
                    "CLUSTER",
                    "SYNCSLOTS",
                    "ESTABLISH",
                    "SOURCE",
                    &aid,
                    "NAME",
                    "short",
                    "SLOTSRANGE",
                    "0",
                    "1",
                ],
            ),
            (
                &b,
                vec![
                    "CLUSTER",
                    "SYNCSLOTS",
                    "ESTABLISH",
                    "SOURCE",
                    &aid,
                    "NAME",
                    name,
                    "SLOTSRANGE",
                    "0",
                    "1",
                    "X",
                    "Y",
                ],
            ),
        ];
        cases
            .iter()
            .map(|(n, args)| {
                n.cli(args)
                    .trim()
                    .replace(aid.as_str(), "<A>")
                    .replace(bid.as_str(), "<B>")
            })
            .collect()
    };
    let valkey = run(valkey_bin());
    let tessera = run(tessera_bin());
    for (i, (t, v)) in tessera.iter().zip(&valkey).enumerate() {
        assert_eq!(t, v, "case {i}: tessera (left) vs valkey (right)");
    }
    assert_eq!(tessera.len(), valkey.len());
}

/// The target's replica takes over (CLUSTER FAILOVER TAKEOVER) during an import: the new primary
/// fails the import with Valkey's "A failover occurred during slot import" and removes the
/// keys on the whole shard; valkey's export fails; the slot stays with valkey.
#[test]
fn target_failover_during_import_rolls_back() {
    let (valkey, tessera, replica) = debug_pair(true);
    let replica = replica.expect("replica");
    let vid = valkey.myid();
    let tid = tessera.myid();
    let mut c = valkey.client();
    for i in 0..50 {
        let _: () = redis::cmd("SET")
            .arg(format!("{{6ZJ}}{i}"))
            .arg("v")
            .query(&mut c)
            .expect("SET");
    }
    valkey.cli(&["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "1"]);
    valkey.cli(&[
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        "16383",
        "16383",
        "NODE",
        &tid,
    ]);
    wait_for(
        Duration::from_secs(20),
        "the replica to hold the import",
        || replica.cli(&["CLUSTER", "COUNTKEYSINSLOT", "16383"]).trim() == "50",
    );
    // TAKEOVER: a replica of a master with no slots gets no votes (Redis's rule), and this
    // target owns none yet.
    assert_eq!(
        replica.cli(&["CLUSTER", "FAILOVER", "TAKEOVER"]).trim(),
        "OK"
    );
    wait_for(
        Duration::from_secs(20),
        "the new primary's rollback",
        || {
            job_field(&replica, "state").as_deref() == Some("failed")
                && replica.cli(&["CLUSTER", "COUNTKEYSINSLOT", "16383"]).trim() == "0"
        },
    );
    assert_eq!(
        job_field(&replica, "message").as_deref(),
        Some("A failover occurred during slot import")
    );
    wait_for(Duration::from_secs(20), "the old primary follows", || {
        job_field(&tessera, "state").as_deref() == Some("failed")
            && tessera.cli(&["CLUSTER", "COUNTKEYSINSLOT", "16383"]).trim() == "0"
    });
    wait_for(Duration::from_secs(20), "valkey's export to fail", || {
        job_field(&valkey, "state").as_deref() == Some("failed")
    });
    assert_eq!(valkey.cli(&["DBSIZE"]).trim(), "50");
    assert_eq!(owner(&replica, 16383).as_deref(), Some(vid.as_str()));
}

/// A stalled target (SIGSTOP) while the source keeps writing to the moving slot: the
/// export's buffer reaches client-output-buffer-limit replica and the link is closed, as
/// Valkey bounds its export client; the target rolls back once it runs again.
#[test]
fn export_buffer_is_bounded_by_the_replica_output_limit() {
    let (source, target) = (debug_proc(tessera_bin()), debug_proc(tessera_bin()));
    let (sid, tid) = (source.myid(), target.myid());
    let p = target.port.to_string();
    assert_eq!(
        source.cli(&["CLUSTER", "MEET", "127.0.0.1", &p]).trim(),
        "OK"
    );
    assert_eq!(
        source
            .cli(&["CLUSTER", "ADDSLOTSRANGE", "1", "16383"])
            .trim(),
        "OK"
    );
    assert_eq!(target.cli(&["CLUSTER", "ADDSLOTS", "0"]).trim(), "OK");
    wait_for(Duration::from_secs(20), "both see the slots", || {
        owner(&target, 1).as_deref() == Some(sid.as_str())
            && owner(&source, 0).as_deref() == Some(tid.as_str())
    });
    wait_state_ok(&[&source, &target]);
    source.cli(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "replica 64kb 0 0",
    ]);
    source.cli(&["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "1"]);
    source.cli(&["SET", "{6ZJ}k", "v"]);
    source.cli(&[
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        "16383",
        "16383",
        "NODE",
        &tid,
    ]);
    wait_for(Duration::from_secs(20), "the export to stream", || {
        job_field(&source, "state").as_deref() == Some("waiting-to-pause")
    });
    process::signal(target.pid(), "STOP");
    // 16 MB: more than the loopback socket buffers take before the writes stall.
    let big = "x".repeat(64 * 1024);
    let mut c = source.client();
    for i in 0..256 {
        let _: () = redis::cmd("SET")
            .arg(format!("{{6ZJ}}{i}"))
            .arg(&big)
            .query(&mut c)
            .expect("SET");
    }
    wait_for(Duration::from_secs(20), "the export to fail", || {
        job_field(&source, "state").as_deref() == Some("failed")
    });
    assert!(job_field(&source, "message")
        .unwrap_or_default()
        .starts_with("Connection lost to target"));
    process::signal(target.pid(), "CONT");
    wait_for(Duration::from_secs(20), "the target's rollback", || {
        job_field(&target, "state").as_deref() == Some("failed")
            && target.cli(&["CLUSTER", "COUNTKEYSINSLOT", "16383"]).trim() == "0"
    });
    assert_eq!(
        source.cli(&["CLUSTER", "COUNTKEYSINSLOT", "16383"]).trim(),
        "257"
    );
}

/// The source's replica takes over (CLUSTER FAILOVER) while tessera-node exports to
/// tessera-node, held before the pause: the demoted source's export fails ("Slots are no
/// longer owned by myself", or the link drops first), the target rolls back, and every key
/// is on the new source only.
#[test]
fn source_failover_during_export_leaves_keys_on_one_owner() {
    let (source, replica, target) = (
        debug_proc(tessera_bin()),
        debug_proc(tessera_bin()),
        debug_proc(tessera_bin()),
    );
    let (sid, tid) = (source.myid(), target.myid());
    for n in [&replica, &target] {
        let p = n.port.to_string();
        assert_eq!(
            source.cli(&["CLUSTER", "MEET", "127.0.0.1", &p]).trim(),
            "OK"
        );
    }
    assert_eq!(
        source
            .cli(&["CLUSTER", "ADDSLOTSRANGE", "1", "16383"])
            .trim(),
        "OK"
    );
    assert_eq!(target.cli(&["CLUSTER", "ADDSLOTS", "0"]).trim(), "OK");
    wait_for(Duration::from_secs(20), "all see the slots", || {
        [&source, &replica, &target].iter().all(|n| {
            owner(n, 1).as_deref() == Some(sid.as_str())
                && owner(n, 0).as_deref() == Some(tid.as_str())
        })
    });
    assert_eq!(replica.cli(&["CLUSTER", "REPLICATE", &sid]).trim(), "OK");
    wait_for(Duration::from_secs(20), "the replica's link", || {
        info_field(&replica.cli(&["INFO", "replication"]), "master_link_status").as_deref()
            == Some("up")
    });
    wait_state_ok(&[&source, &replica, &target]);
    let mut c = source.client();
    for i in 0..50 {
        let _: () = redis::cmd("SET")
            .arg(format!("{{6ZJ}}{i}"))
            .arg("v")
            .query(&mut c)
            .expect("SET");
    }
    assert_eq!(
        source
            .cli(&["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "1"])
            .trim(),
        "OK"
    );
    assert_eq!(
        source
            .cli(&[
                "CLUSTER",
                "MIGRATESLOTS",
                "SLOTSRANGE",
                "16383",
                "16383",
                "NODE",
                &tid
            ])
            .trim(),
        "OK"
    );
    wait_for(
        Duration::from_secs(20),
        "the source to wait to pause",
        || {
            job_field(&source, "state").as_deref() == Some("waiting-to-pause")
                && job_field(&target, "state").as_deref() == Some("waiting-for-paused")
        },
    );
    assert_eq!(
        target.cli(&["CLUSTER", "COUNTKEYSINSLOT", "16383"]).trim(),
        "50"
    );
    assert_eq!(replica.cli(&["CLUSTER", "FAILOVER"]).trim(), "OK");
    wait_for(Duration::from_secs(20), "both ends to fail", || {
        job_field(&source, "state").as_deref() == Some("failed")
            && job_field(&target, "state").as_deref() == Some("failed")
    });
    // Whichever end sees the new owner first: the source ("no longer owned"), or the target,
    // which then drops the link (Valkey's test accepts both).
    let msg = job_field(&source, "message").unwrap_or_default();
    assert!(
        msg == "Slots are no longer owned by myself"
            || msg.starts_with("Connection lost to target"),
        "{msg}"
    );
    wait_for(Duration::from_secs(10), "the target's rollback", || {
        target.cli(&["CLUSTER", "COUNTKEYSINSLOT", "16383"]).trim() == "0"
    });
    let rid = replica.myid();
    wait_for(
        Duration::from_secs(20),
        "the target to see the new source",
        || owner(&target, 16383).as_deref() == Some(rid.as_str()),
    );
    assert_eq!(
        replica.cli(&["CLUSTER", "COUNTKEYSINSLOT", "16383"]).trim(),
        "50"
    );
    assert_eq!(target.cli(&["DBSIZE"]).trim(), "0");
}

/// Valkey's two slot-migration directives, on both servers in one run: the same CONFIG
/// SET / GET replies (values, memory units, -1, range and parse errors), and
/// `cluster-slot-migration-log-max-len 0` empties the job list at the next cron on the
/// source and on the target.
#[test]
fn migration_directives_match_valkey() {
    let run = |bin: &'static str| -> Vec<String> {
        let a = Proc::cluster(bin, "127.0.0.1", 2000);
        let b = Proc::cluster(bin, "127.0.0.1", 2000);
        let (aid, bid) = (a.myid(), b.myid());
        let mut out = Vec::new();
        let log = "cluster-slot-migration-log-max-len";
        let bytes = "slot-migration-max-failover-repl-bytes";
        for args in [
            vec!["CONFIG", "GET", log],
            vec!["CONFIG", "GET", bytes],
            vec!["CONFIG", "SET", bytes, "-1"],
            vec!["CONFIG", "GET", bytes],
            vec!["CONFIG", "SET", bytes, "1mb"],
            vec!["CONFIG", "GET", bytes],
            vec!["CONFIG", "SET", bytes, "-2"],
            vec!["CONFIG", "SET", bytes, "abc"],
            vec!["CONFIG", "SET", bytes, "0"],
            vec!["CONFIG", "SET", log, "-1"],
            vec!["CONFIG", "SET", log, "x"],
            vec!["CONFIG", "SET", log, "7"],
            vec!["CONFIG", "GET", log],
        ] {
            out.push(format!("{args:?} -> {}", a.cli(&args).trim()));
        }

        let p = b.port.to_string();
        a.cli(&["CLUSTER", "MEET", "127.0.0.1", &p]);
        a.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
        wait_for(Duration::from_secs(20), "b sees a's slots", || {
            owner(&b, 0).as_deref() == Some(aid.as_str())
        });
        wait_state_ok(&[&a, &b]);
        let r = a.cli(&[
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            "0",
            "99",
            "NODE",
            &bid,
        ]);
        assert_eq!(r.trim(), "OK", "{bin}");
        wait_for(Duration::from_secs(30), "the job to succeed", || {
            job_field(&a, "state").as_deref() == Some("success")
                && job_field(&b, "state").as_deref() == Some("success")
        });
        for n in [&a, &b] {
            assert_eq!(n.cli(&["CONFIG", "SET", log, "0"]).trim(), "OK");
        }
        wait_for(Duration::from_secs(10), "the logs to empty", || {
            [&a, &b]
                .iter()
                .all(|n| n.cli(&["CLUSTER", "GETSLOTMIGRATIONS"]).trim().is_empty())
        });
        out
    };
    let (v, t) = (run(valkey_bin()), run(tessera_bin()));
    assert_eq!(t, v, "tessera (left) and valkey (right) differ");
}
