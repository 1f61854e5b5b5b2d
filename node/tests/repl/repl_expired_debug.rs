//! A replica applies its master's INCR to a key that is logically expired there: the key
//! stays (hidden from EXISTS) and DEBUG OBJECT still finds it, as Redis's debug object reads
//! the dict without expiring (integration/replication-4 "Replication of an expired key does
//! not delete the expired key"). Compared with redis-server.

use std::time::Duration;

use tessera_testkit::*;

use crate::repl_conform::replica_of;
use crate::{info_of, start};

fn debug_object(c: &mut Conn, key: &str) -> String {
    match c.cmd(&["DEBUG", "OBJECT", key]) {
        Reply::Simple(s) if s.starts_with("Value at:") => "found".into(),
        other => R::from(other).s(),
    }
}

fn expired_on_replica(tessera: bool) -> Vec<String> {
    let args = ["--save", "", "--enable-debug-command", "yes"];
    let master = start(tessera, &args);
    let replica = start(tessera, &args);
    let (mut m, mut r) = replica_of(&master, &replica);
    let synced = |m: &mut Conn, r: &mut Conn| {
        wait_until("offsets match", Duration::from_secs(20), || {
            let mo = info_of(m, "replication", "master_repl_offset");
            mo.is_some() && mo == info_of(r, "replication", "master_repl_offset")
        });
    };
    let mut seen = Vec::new();
    m.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    // Long enough that the sync wait below ends before the key expires on the master even
    // on a loaded machine (the INCR must find it there), short enough to wait out.
    m.cmd(&["SET", "k", "1", "PX", "1500"]);
    synced(&mut m, &mut r);
    replica.signal("STOP");
    seen.push(R::from(m.cmd(&["INCR", "k"])).s());
    std::thread::sleep(Duration::from_millis(1700));
    replica.signal("CONT");
    synced(&mut m, &mut r);
    seen.push(format!(
        "replica exists: {}",
        R::from(r.cmd(&["EXISTS", "k"])).s()
    ));
    seen.push(format!(
        "replica debug object: {}",
        debug_object(&mut r, "k")
    ));
    // The master's own logically expired key (active expiry off): found as well.
    m.cmd(&["SET", "k2", "v", "PX", "50"]);
    std::thread::sleep(Duration::from_millis(150));
    seen.push(format!(
        "master debug object: {}",
        debug_object(&mut m, "k2")
    ));
    seen.push(format!("master missing: {}", debug_object(&mut m, "nokey")));
    seen
}

#[test]
fn logically_expired_key_stays_on_the_replica_like_redis() {
    let theirs = expired_on_replica(false);
    let ours = expired_on_replica(true);
    assert_eq!(ours, theirs);
}
