//! During async loading (repl-diskless-load swapdb, a full resync with the replica's own
//! history) REPLICAOF and CONFIG SET appendonly answer -LOADING, as Redis 7.0's
//! no-async-loading command flag and DENY_LOADING_CONFIG (integration/replication "Blocked
//! commands and configs during async-loading"). Compared with redis-server.

use std::time::{Duration, Instant};

use tessera_testkit::*;

use crate::{info_of, start};

/// Keys written while the replica is down: ~20 s of stream at rdb-key-save-delay 10 ms.
const KEYS: i64 = 2000;

fn num(c: &mut Conn, section: &str, field: &str) -> i64 {
    info_of(c, section, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

fn first_word(r: Reply) -> String {
    R::from(r)
        .s()
        .split(' ')
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn who(tessera: bool) -> &'static str {
    if tessera {
        "tessera-node"
    } else {
        "redis-server"
    }
}

fn denied_once(tessera: bool) -> Option<Vec<String>> {
    let master = start(
        tessera,
        &[
            "--save",
            "",
            "--repl-backlog-size",
            "16384",
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
        ],
    );
    let mport = master.port.to_string();
    let mut replica = start(
        tessera,
        &[
            "--save",
            "",
            "--repl-diskless-load",
            "swapdb",
            "--loading-process-events-interval-bytes",
            "1024",
            "--replicaof",
            "127.0.0.1",
            &mport,
        ],
    );
    let mut m = master.resp();
    let mut r = replica.resp();
    m.cmd(&["SET", "k", "1"]);
    wait_until("replicated", Duration::from_secs(20), || {
        r.cmd(&["GET", "k"]) == Reply::Bulk(b"1".to_vec())
    });
    r.cmd(&["SAVE"]);
    replica.kill();
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000"]);
    let value = "A".repeat(1024);
    for j in 0..KEYS {
        m.cmd(&["SET", &j.to_string(), &value]);
    }
    replica.restart();
    let mut r = replica.resp();
    // redis-server may answer nothing during the whole load (see below): a load that was
    // over before INFO showed it is a missed sample, not a failure.
    let t0 = Instant::now();
    while num(&mut r, "persistence", "async_loading") != 1 {
        let loaded = r.cmd(&["DBSIZE"]).as_int().unwrap_or(0) > KEYS;
        if loaded || t0.elapsed() > Duration::from_secs(60) {
            println!("{}: no async load seen (loaded: {loaded})", who(tessera));
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // A -LOADING reply can only come from the load. Any other reply counts only if the
    // load was still on after it: redis-server serves clients during the load only now and
    // then (between chunks of the stream), so a command read during the load may run once
    // it is over; such a sample says nothing and is taken again.
    let config = first_word(r.cmd(&["CONFIG", "SET", "appendonly", "no"]));
    if config != "LOADING" && num(&mut r, "persistence", "async_loading") != 1 {
        println!(
            "{}: the load ended before CONFIG SET was answered ({config})",
            who(tessera)
        );
        return None;
    }
    // A refused REPLICAOF leaves the load running; one that went through ended it.
    let replicaof = first_word(r.cmd(&["REPLICAOF", "NO", "ONE"]));
    if replicaof != "LOADING" && num(&mut r, "persistence", "async_loading") != 1 {
        println!(
            "{}: the load ended before REPLICAOF was answered ({replicaof})",
            who(tessera)
        );
        return None;
    }
    let seen = vec![
        format!("config set appendonly: {config}"),
        format!("replicaof no one: {replicaof}"),
    ];
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    Some(seen)
}

/// A sample taken while the replica was still async loading (eight tries: redis-server
/// misses the window now and then, more often on a loaded machine).
fn denied(tessera: bool) -> Vec<String> {
    (0..8)
        .find_map(|_| denied_once(tessera))
        .expect("the async load ended before the commands ran, eight times")
}

#[test]
fn replicaof_and_appendonly_are_refused_during_async_loading_like_redis() {
    let theirs = denied(false);
    let ours = denied(true);
    assert_eq!(ours, theirs);
}
