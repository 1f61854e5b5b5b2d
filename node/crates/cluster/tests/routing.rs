//! Routing decisions and their exact error strings, in Redis 7.0's order of checks.

use tessera_cluster::routing::{key_hash_slot, route, Route, RouteQuery};
use tessera_cluster::state::{Node, FLAG_MASTER, FLAG_SLAVE};
use tessera_cluster::{ClusterConfig, ClusterState};

const OTHER: [u8; 40] = *b"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// Myself owns the slot of "foo"'s tag group {a}; OTHER owns "bar" (5061); "zzz" unassigned.
fn cluster() -> ClusterState {
    let mut st = ClusterState::new(
        ClusterConfig {
            port: 7000,
            ..Default::default()
        },
        0,
        7,
    );
    let mut other = Node::new(OTHER, FLAG_MASTER, 0);
    other.ip = "10.0.0.2".into();
    other.port = 7001;
    other.hostname = "node-b.example".into();
    st.nodes.insert(OTHER, other);
    let me = st.myself;
    st.add_slot(me, key_hash_slot(b"{a}1") as usize);
    st.add_slot(OTHER, key_hash_slot(b"bar") as usize);
    st.state_ok = true;
    st
}

fn q<'a>(keys: &[&'a [u8]]) -> RouteQuery<'a> {
    RouteQuery {
        keys: keys.to_vec(),
        ..Default::default()
    }
}

fn none(_: &[u8]) -> bool {
    false
}

#[test]
fn basic_decisions_and_error_strings() {
    let mut st = cluster();
    let sa = key_hash_slot(b"{a}1");
    assert_eq!(route(&st, &q(&[]), none), Route::Local { slot: None });
    assert_eq!(
        route(&st, &q(&[b"{a}1", b"{a}2"]), none),
        Route::Local { slot: Some(sa) }
    );
    let moved = route(&st, &q(&[b"bar"]), none);
    assert_eq!(moved.error().as_deref(), Some("MOVED 5061 10.0.0.2:7001"));
    assert_eq!(
        route(&st, &q(&[b"zzz"]), none).error().as_deref(),
        Some("CLUSTERDOWN Hash slot not served")
    );
    assert_eq!(
        route(&st, &q(&[b"{a}1", b"bar"]), none).error().as_deref(),
        Some("CROSSSLOT Keys in request don't hash to the same slot")
    );
    // Unbound first key wins over cross-slot; cross-slot wins over cluster down.
    assert_eq!(route(&st, &q(&[b"zzz", b"bar"]), none), Route::DownUnbound);
    st.state_ok = false;
    assert_eq!(route(&st, &q(&[b"{a}1", b"bar"]), none), Route::CrossSlot);
    assert_eq!(
        route(&st, &q(&[b"{a}1"]), none).error().as_deref(),
        Some("CLUSTERDOWN The cluster is down")
    );
    st.config.allow_reads_when_down = true;
    assert_eq!(
        route(&st, &q(&[b"{a}1"]), none),
        Route::Local { slot: Some(sa) }
    );
    let mut w = q(&[b"{a}1"]);
    w.is_write = true;
    assert_eq!(
        route(&st, &w, none).error().as_deref(),
        Some("CLUSTERDOWN The cluster is down and only accepts read commands")
    );
    // Hostname endpoints.
    st.state_ok = true;
    st.config.preferred_endpoint_type = tessera_cluster::EndpointType::Hostname;
    assert_eq!(
        route(&st, &q(&[b"bar"]), none).error().as_deref(),
        Some("MOVED 5061 node-b.example:7001")
    );
    // unknown-endpoint: an empty endpoint, as redis-server 7.0 answers.
    st.config.preferred_endpoint_type = tessera_cluster::EndpointType::UnknownEndpoint;
    assert_eq!(
        route(&st, &q(&[b"bar"]), none).error().as_deref(),
        Some("MOVED 5061 :7001")
    );
}

#[test]
fn migrating_and_importing() {
    let mut st = cluster();
    let sa = key_hash_slot(b"{a}1") as usize;
    st.migrating.set(sa, Some(OTHER));
    let have_1 = |k: &[u8]| k == b"{a}1";
    // All keys here: served locally. A missing key: ASK to the target.
    assert_eq!(
        route(&st, &q(&[b"{a}1"]), have_1),
        Route::Local {
            slot: Some(sa as u16)
        }
    );
    assert_eq!(
        route(&st, &q(&[b"{a}2"]), have_1).error(),
        Some(format!("ASK {sa} 10.0.0.2:7001"))
    );
    let mut mig = q(&[b"{a}2"]);
    mig.is_migrate = true;
    assert_eq!(
        route(&st, &mig, have_1),
        Route::Local {
            slot: Some(sa as u16)
        }
    );

    // Importing side: slot owned by OTHER, we import it.
    let sb = key_hash_slot(b"bar") as usize;
    st.importing.set(sb, Some(OTHER));
    let has = |k: &[u8]| k == b"bar";
    assert!(
        matches!(route(&st, &q(&[b"bar"]), has), Route::Moved { .. }),
        "no ASKING: MOVED"
    );
    let mut asking = q(&[b"bar"]);
    asking.asking = true;
    assert_eq!(
        route(&st, &asking, has),
        Route::Local {
            slot: Some(sb as u16)
        }
    );
    // Two different keys, one missing, with ASKING: TRYAGAIN.
    let mut multi = q(&[b"bar", b"{bar}x"]);
    multi.asking = true;
    assert_eq!(
        route(&st, &multi, has).error().as_deref(),
        Some("TRYAGAIN Multiple keys request during rehashing of slot")
    );
}

#[test]
fn readonly_replica_serves_reads_of_its_master() {
    let mut st = cluster();
    // Make myself a replica of OTHER.
    let me = st.myself;
    st.del_node_slots(&me);
    let n = st.me_mut();
    n.flags = (n.flags & !FLAG_MASTER) | FLAG_SLAVE;
    n.master = Some(OTHER);
    let mut ro = q(&[b"bar"]);
    ro.readonly = true;
    assert_eq!(route(&st, &ro, none), Route::Local { slot: Some(5061) });
    ro.is_write = true;
    assert!(matches!(
        route(&st, &ro, none),
        Route::Moved { slot: 5061, .. }
    ));
    assert!(
        matches!(route(&st, &q(&[b"bar"]), none), Route::Moved { .. }),
        "READWRITE client: MOVED"
    );
}
