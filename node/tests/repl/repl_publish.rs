//! PUBLISH and SPUBLISH reach replicas but not the AOF (Redis 7.0's publishCommand:
//! `forceCommandPropagation(c, PROPAGATE_REPL)` outside cluster mode), also from inside
//! MULTI/EXEC and scripts, where the transaction's other writes still reach the AOF
//! (Redis's unit/multi "MULTI propagation of PUBLISH"). Compared with redis-server.

use std::time::Duration;

use tessera_testkit::*;

use crate::aof_lines;
use crate::repl_conform::aof_master_with_replica;

/// The messages a subscribed connection got before the reply to a PING sent now.
fn drain(c: &mut Conn) -> Vec<String> {
    c.send(&["PING"]);
    let mut got = Vec::new();
    for _ in 0..100 {
        let text = R::from(c.read()).s();
        if text.starts_with("[pong,") {
            return got;
        }
        got.push(text);
    }
    panic!("no PING reply after 100 messages: {got:?}");
}

fn publish_propagation(tessera: bool) -> Vec<String> {
    let (master, replica, mut m, mut r) = aof_master_with_replica(tessera);
    let mut sub = replica.resp();
    sub.cmd(&["SUBSCRIBE", "bla"]);
    let mut ssub = replica.resp();
    ssub.cmd(&["SSUBSCRIBE", "sbla"]);
    let mut seen = Vec::new();
    for c in [
        vec!["MULTI"],
        vec!["PUBLISH", "bla", "one"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["SET", "k", "v"],
        vec!["PUBLISH", "bla", "two"],
        vec!["EXEC"],
        vec!["PUBLISH", "bla", "three"],
        vec!["EVAL", "return redis.call('publish', 'bla', 'four')", "0"],
        vec!["SPUBLISH", "sbla", "five"],
        vec!["SET", "marker", "1"],
    ] {
        seen.push(R::from(m.cmd(&c)).s());
    }
    wait_until("marker replicated", Duration::from_secs(20), || {
        r.cmd(&["GET", "marker"]) == Reply::Bulk(b"1".to_vec())
    });
    seen.push(format!("replica got: {:?}", drain(&mut sub)));
    seen.push(format!("replica got (shard): {:?}", drain(&mut ssub)));
    seen.push(format!(
        "aof: publish {} spublish {} multi {} set {}",
        aof_lines(&master, "publish"),
        aof_lines(&master, "spublish"),
        aof_lines(&master, "multi"),
        aof_lines(&master, "set"),
    ));
    seen
}

#[test]
fn publish_reaches_replicas_not_the_aof_like_redis() {
    let theirs = publish_propagation(false);
    let ours = publish_propagation(true);
    assert_eq!(ours, theirs);
}
