//! Replication in cluster mode: a 3-master/3-replica tessera cluster formed by
//! `redis-cli --cluster create --cluster-replicas 1`; every replica's link comes up and holds
//! its master's keys; a SIGKILLed master's replica is promoted and serves every key that was
//! acknowledged (WAIT) before the kill.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use redis::Commands;
use tessera_testkit::repl::*;

/// One CLUSTER NODES line: (id, port, is_master, master id).
fn nodes_of(p: &Proc) -> Vec<(String, u16, bool, String, bool)> {
    let s: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut p.conn())
        .expect("cluster nodes");
    s.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.len() < 8 {
                return None;
            }
            let port = w[1].split(['@', ':']).nth(1)?.parse().ok()?;
            let failed = w[2].contains("fail") && !w[2].contains("fail?");
            Some((
                w[0].to_string(),
                port,
                w[2].contains("master"),
                w[3].to_string(),
                failed,
            ))
        })
        .collect()
}

#[test]
fn cluster_replicas_sync_and_failover_keeps_acknowledged_writes() {
    let dirs: Vec<_> = (0..6).map(|_| tempfile::tempdir().expect("tmp")).collect();
    let mut procs: Vec<Proc> = dirs
        .iter()
        .map(|d| {
            Proc::node(
                d.path(),
                &["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"],
            )
        })
        .collect();
    let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
    args.extend(procs.iter().map(|p| format!("127.0.0.1:{}", p.port)));
    args.extend([
        "--cluster-replicas".into(),
        "1".into(),
        "--cluster-yes".into(),
    ]);
    let o = tessera_testkit::output_within(
        Command::new(tessera_testkit::redis_cli_bin()).args(&args),
        std::time::Duration::from_secs(60),
    );
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success() && text.contains("[OK] All 16384 slots covered."),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    wait_for(
        Duration::from_secs(60),
        "cluster_state:ok everywhere",
        || {
            procs
                .iter()
                .all(|p| p.info("cluster", "cluster_enabled").as_deref() == Some("1"))
                && procs.iter().all(|p| {
                    let s: String = redis::cmd("CLUSTER")
                        .arg("INFO")
                        .query(&mut p.conn())
                        .unwrap_or_default();
                    s.contains("cluster_state:ok")
                })
        },
    );
    // Three replicas, each with its link up.
    let replicas: Vec<usize> = (0..6)
        .filter(|&i| procs[i].info("replication", "role").as_deref() == Some("slave"))
        .collect();
    assert_eq!(replicas.len(), 3, "three replicas");
    for &i in &replicas {
        wait_link_up(&procs[i]);
    }

    let err = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(procs[0].port)
        .query::<()>(&mut procs[1].conn())
        .expect_err("REPLICAOF in cluster mode");
    assert!(
        err.to_string()
            .contains("REPLICAOF not allowed in cluster mode."),
        "{err}"
    );
    // Writes through the cluster client, then WAIT on every master.
    let urls: Vec<String> = procs
        .iter()
        .map(|p| format!("redis://127.0.0.1:{}/", p.port))
        .collect();
    let client = redis::cluster::ClusterClient::new(urls.clone()).expect("cluster client");
    let mut con = client.get_connection().expect("cluster connection");
    for i in 0..600 {
        let _: () = con.set(format!("key:{i}"), i).expect("set");
        let _: () = con.rpush(format!("list:{i}"), i).expect("rpush");
    }
    for (i, p) in procs.iter().enumerate() {
        if replicas.contains(&i) {
            continue;
        }
        let n: i64 = redis::cmd("WAIT")
            .arg(1)
            .arg(20000)
            .query(&mut p.conn())
            .expect("wait");
        assert_eq!(
            n, 1,
            "master on port {} has an acknowledging replica",
            p.port
        );
    }
    // Each replica holds exactly its master's keys.
    let by_id: HashMap<String, usize> = nodes_of(&procs[0])
        .into_iter()
        .filter_map(|(id, port, ..)| procs.iter().position(|p| p.port == port).map(|i| (id, i)))
        .collect();
    let view = nodes_of(&procs[0]);
    let master_of = |r: usize| -> usize {
        let (_, _, _, mid, _) = view
            .iter()
            .find(|n| n.1 == procs[r].port)
            .expect("replica in CLUSTER NODES");
        by_id[mid]
    };
    for &r in &replicas {
        let m = master_of(r);
        wait_caught_up(&procs[m], &procs[r]);
        assert_eq!(dbsizes(&procs[m], 1), dbsizes(&procs[r], 1));
        assert!(dbsizes(&procs[r], 1)[0] > 0);
    }

    // SIGKILL one master: its replica takes over with every acknowledged key.
    let victim_replica = replicas[0];
    let victim = master_of(victim_replica);
    let victim_keys = dbsizes(&procs[victim], 1)[0];
    procs[victim].kill9();
    wait_for(Duration::from_secs(90), "the replica promoted", || {
        procs[victim_replica].info("replication", "role").as_deref() == Some("master")
    });
    wait_for(
        Duration::from_secs(60),
        "cluster_state:ok after failover",
        || {
            procs.iter().enumerate().all(|(i, p)| {
                i == victim || {
                    let s: String = redis::cmd("CLUSTER")
                        .arg("INFO")
                        .query(&mut p.conn())
                        .unwrap_or_default();
                    s.contains("cluster_state:ok")
                }
            })
        },
    );
    assert_eq!(dbsizes(&procs[victim_replica], 1)[0], victim_keys);
    let alive: Vec<String> = urls
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != victim)
        .map(|(_, u)| u.clone())
        .collect();
    let client = redis::cluster::ClusterClient::new(alive).expect("cluster client");
    let mut con = client.get_connection().expect("cluster connection");
    for i in 0..600 {
        let v: i64 = con.get(format!("key:{i}")).expect("get after failover");
        assert_eq!(v, i);
        let l: Vec<i64> = con.lrange(format!("list:{i}"), 0, -1).expect("lrange");
        assert_eq!(l, vec![i]);
    }
    // The promoted node accepts writes.
    for i in 0..100 {
        let _: () = con
            .set(format!("after:{i}"), i)
            .expect("write after failover");
    }
}
