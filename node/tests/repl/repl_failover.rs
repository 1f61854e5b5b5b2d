//! CLUSTER FAILOVER (manual, coordinated) while a client keeps writing to the master: the
//! master pauses writes, announces its final offset, the replica catches up and takes over,
//! and every write the old master acknowledged is on the new one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tessera_testkit::repl::*;

fn myid(p: &Proc) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut p.conn())
        .expect("cluster myid")
}

#[test]
fn manual_failover_under_write_load_keeps_every_acknowledged_write() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().expect("tmp")).collect();
    let cl = ["--cluster-enabled", "yes", "--cluster-node-timeout", "3000"];
    let master = Proc::node(dirs[0].path(), &cl);
    let replica = Proc::node(dirs[1].path(), &cl);
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query(&mut master.conn())
        .expect("addslotsrange");
    let _: () = redis::cmd("CLUSTER")
        .arg("MEET")
        .arg("127.0.0.1")
        .arg(replica.port)
        .query(&mut master.conn())
        .expect("meet");
    let mid = myid(&master);
    wait_for(Duration::from_secs(30), "replica knows the master", || {
        let s: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut replica.conn())
            .unwrap_or_default();
        s.contains(&mid)
    });
    let _: () = redis::cmd("CLUSTER")
        .arg("REPLICATE")
        .arg(&mid)
        .query(&mut replica.conn())
        .expect("replicate");
    wait_link_up(&replica);
    for p in [&master, &replica] {
        wait_for(Duration::from_secs(30), "cluster_state:ok", || {
            let s: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query(&mut p.conn())
                .unwrap_or_default();
            s.contains("cluster_state:ok")
        });
    }

    // A writer on the master until it is told to stop or the master stops accepting
    // writes (MOVED once it is a replica): `acked` holds every acknowledged key.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let mut c = master.conn();
        std::thread::spawn(move || {
            let mut acked = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let k = format!("w:{i}");
                match redis::cmd("SET").arg(&k).arg(i).query::<()>(&mut c) {
                    Ok(()) => acked.push(k),
                    Err(_) => break,
                }
                i += 1;
            }
            acked
        })
    };
    wait_for(Duration::from_secs(30), "writes flowing", || {
        let n: i64 = redis::cmd("DBSIZE").query(&mut master.conn()).unwrap_or(0);
        n >= 500
    });
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .query(&mut replica.conn())
        .expect("cluster failover");
    wait_for(Duration::from_secs(60), "replica promoted", || {
        replica.info("replication", "role").as_deref() == Some("master")
    });
    stop.store(true, Ordering::Relaxed);
    let acked = writer.join().expect("writer");
    assert!(acked.len() >= 500, "writer acknowledged {}", acked.len());
    let mut c = replica.conn();
    let mut missing = Vec::new();
    for k in &acked {
        let n: i64 = redis::cmd("EXISTS").arg(k).query(&mut c).expect("exists");
        if n != 1 {
            missing.push(k.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged writes missing on the new master: {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(10)]
    );
    // The old master follows the new one.
    wait_for(Duration::from_secs(30), "old master is a replica", || {
        master.info("replication", "role").as_deref() == Some("slave")
    });
    eprintln!(
        "{} acknowledged writes, all on the promoted replica",
        acked.len()
    );
}
