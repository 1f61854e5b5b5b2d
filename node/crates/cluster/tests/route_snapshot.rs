//! The routing snapshot (`ClusterNode::route_fast`) never answers from a state older than
//! the last change: a change marks it stale, and the next command that routes rebuilds it.

mod common;

use std::time::Duration;

use common::*;
use tessera_cluster::routing::{key_hash_slot, Route, RouteQuery};
use tessera_cluster::ClusterNode;

fn query(key: &[u8]) -> RouteQuery<'_> {
    RouteQuery {
        keys: vec![key],
        ..Default::default()
    }
}

/// What the node's dispatcher does: snapshot, rebuild if stale, full state for open slots.
fn route(node: &ClusterNode, key: &[u8], exists: bool) -> Route {
    let q = query(key);
    if let Some(r) = node.route_fast(&q) {
        return r;
    }
    if node.refresh_route_table() {
        if let Some(r) = node.route_fast(&q) {
            return r;
        }
    }
    node.route_slow(&q, |_| exists)
}

fn state_ok(t: &TestNode) -> bool {
    t.cluster_str(&["INFO"]).contains("cluster_state:ok")
}

#[test]
fn snapshot_is_rebuilt_after_every_change_and_only_when_needed() {
    let a = TestNode::start(5000);
    let me = a.myid();
    let key = b"somekey";
    let slot = key_hash_slot(key).to_string();
    assert_eq!(a.cluster_str(&["ADDSLOTSRANGE", "0", "16383"]), "OK");
    wait_for(Duration::from_secs(30), "cluster_state:ok", || state_ok(&a));
    // Whatever the snapshot held before, the routed answer follows the state.
    assert!(matches!(route(a.node(), key, false), Route::Local { .. }));
    // Fresh now: answered without the state.
    assert!(matches!(
        a.node().route_fast(&query(key)),
        Some(Route::Local { .. })
    ));
    // A SETSLOT NODE that changes nothing keeps the snapshot.
    assert_eq!(a.cluster_str(&["SETSLOT", &slot, "NODE", &me]), "OK");
    assert!(matches!(
        a.node().route_fast(&query(key)),
        Some(Route::Local { .. })
    ));
    assert!(!a.node().refresh_route_table(), "nothing to rebuild");
}

#[test]
fn slot_moves_and_open_slots_reroute_at_once() {
    let a = TestNode::start(5000);
    let b = TestNode::start(5000);
    let (ida, idb) = (a.myid(), b.myid());
    assert_eq!(
        a.cluster_str(&["MEET", "127.0.0.1", &b.port.to_string()]),
        "OK"
    );
    wait_for(Duration::from_secs(30), "a knows b", || {
        sees_all_connected(&a.nodes(), &[ida.clone(), idb.clone()])
    });
    assert_eq!(a.cluster_str(&["ADDSLOTSRANGE", "0", "16383"]), "OK");
    wait_for(Duration::from_secs(30), "cluster_state:ok", || state_ok(&a));
    let key = b"somekey";
    let slot = key_hash_slot(key).to_string();
    assert!(matches!(route(a.node(), key, false), Route::Local { .. }));

    // Given away: the snapshot must not say Local any more, not even once.
    assert_eq!(a.cluster_str(&["SETSLOT", &slot, "NODE", &idb]), "OK");
    assert!(!matches!(
        a.node().route_fast(&query(key)),
        Some(Route::Local { .. })
    ));
    match route(a.node(), key, false) {
        Route::Moved { port, .. } => assert_eq!(port, b.port),
        r => panic!("expected MOVED to b, got {r:?}"),
    }

    // Taken back, then migrating: keyspace-dependent, so the full state answers.
    assert_eq!(a.cluster_str(&["SETSLOT", &slot, "NODE", &ida]), "OK");
    assert!(matches!(route(a.node(), key, false), Route::Local { .. }));
    assert_eq!(a.cluster_str(&["SETSLOT", &slot, "MIGRATING", &idb]), "OK");
    assert_eq!(a.node().route_fast(&query(key)).map(|_| ()), None);
    assert!(matches!(route(a.node(), key, true), Route::Local { .. }));
    match route(a.node(), key, false) {
        Route::Ask { port, .. } => assert_eq!(port, b.port),
        r => panic!("expected ASK to b, got {r:?}"),
    }
    assert_eq!(a.cluster_str(&["SETSLOT", &slot, "STABLE"]), "OK");
    assert!(matches!(route(a.node(), key, false), Route::Local { .. }));
}
