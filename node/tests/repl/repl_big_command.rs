//! A replica sent one big command (a 32 MB SET) does not keep the room it read it into:
//! its used_memory comes back near its master's, as Redis trims its master client's query
//! buffer (unit/pendingquerybuf). Compared with redis-server.

use std::time::Duration;

use tessera_testkit::*;

use crate::repl_conform::replica_of;
use crate::{info_of, start};

fn used(c: &mut Conn) -> i64 {
    info_of(c, "memory", "used_memory")
        .and_then(|v| v.parse().ok())
        .expect("used_memory")
}

/// How far (MB) the replica's used_memory stays above its master's, at best, within 5 s.
fn excess_after_big_set(tessera: bool) -> i64 {
    let master = start(tessera, &["--save", ""]);
    let replica = start(tessera, &["--save", ""]);
    let (mut m, mut r) = replica_of(&master, &replica);
    let value = "x".repeat(32 * 1024 * 1024);
    assert_eq!(m.cmd(&["SET", "key", &value]), Reply::Simple("OK".into()));
    wait_until("replicated", Duration::from_secs(30), || {
        r.cmd(&["STRLEN", "key"]) == Reply::Int(32 * 1024 * 1024)
    });
    let mut best = i64::MAX;
    for _ in 0..50 {
        best = best.min(used(&mut r) - used(&mut m));
        if best <= 10 * 1024 * 1024 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    best / (1024 * 1024)
}

#[test]
fn replica_gives_back_a_big_commands_buffer_like_redis() {
    let theirs = excess_after_big_set(false);
    assert!(theirs <= 10, "redis-server's replica: {theirs} MB over");
    let ours = excess_after_big_set(true);
    assert!(
        ours <= 10,
        "tessera-node's replica kept {ours} MB more than its master (redis-server: {theirs} MB)"
    );
}
