//! Issue 16, valkey 9's shutdown failover in the state machine: the master's side picks
//! among its replicas, the replica's side takes `CLUSTER FAILOVER FORCE REPLICAID <id>` from
//! its master's stream (only when the id is its own).

use tessera_cluster::msg::{self, Name};
use tessera_cluster::state::{Node, FLAG_MASTER};
use tessera_cluster::{ClusterConfig, ClusterState};

const B: Name = *b"ffffffffffffffffffffffffffffffffffffff0b";
const C: Name = *b"ffffffffffffffffffffffffffffffffffffff0c";

fn config() -> ClusterConfig {
    ClusterConfig {
        port: 7000,
        node_timeout_ms: 5000,
        ..Default::default()
    }
}

/// Me, a replica of B (which owns every slot), and C, a master without slots.
fn replica_of_b() -> ClusterState {
    let mut st = ClusterState::new(config(), 0, 42);
    for (name, port) in [(B, 7001), (C, 7002)] {
        let mut n = Node::new(name, FLAG_MASTER, 0);
        n.ip = "127.0.0.1".into();
        n.port = port;
        st.nodes.insert(name, n);
    }
    for s in 0..msg::SLOTS {
        st.add_slot(B, s);
    }
    st.set_my_master(B);
    st.out.clear();
    st
}

#[test]
fn only_the_named_replica_starts_a_forced_election() {
    let mut st = replica_of_b();
    let other = b"eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee0e";
    let args: [&[u8]; 4] = [b"failover", b"force", b"replicaid", other];
    assert_eq!(st.failover_from_master(&args, 1000), Ok(()));
    assert_eq!(st.mf.end, 0, "another replica's request started a failover");
    assert!(!st.election.auth_sent);

    let me = st.myself;
    let args: [&[u8]; 4] = [b"FAILOVER", b"FORCE", b"REPLICAID", &me];
    assert_eq!(st.failover_from_master(&args, 1000), Ok(()));
    assert!(st.mf.can_start, "FORCE: no wait for the master's offset");
    assert!(st.election.auth_sent, "the election starts at once");
}

#[test]
fn malformed_requests_are_refused() {
    let mut st = replica_of_b();
    for args in [
        &[&b"failover"[..], b"replicaid"][..],
        &[b"failover", b"force", b"takeover"],
        &[b"failover", b"bogus"],
    ] {
        assert_eq!(
            st.failover_from_master(args, 1000),
            Err("ERR syntax error"),
            "{args:?}"
        );
    }
    assert_eq!(st.mf.end, 0);
}

#[test]
fn a_master_with_slots_lists_its_replicas_for_the_handover() {
    let mut st = ClusterState::new(config(), 0, 42);
    let me = st.myself;
    assert_eq!(st.shutdown_failover_replicas(), None, "no slots yet");
    st.add_slot(me, 0);
    for (name, port) in [(B, 7001), (C, 7002)] {
        let mut n = Node::new(name, tessera_cluster::state::FLAG_SLAVE, 0);
        n.ip = "127.0.0.1".into();
        n.port = port;
        n.master = Some(if name == B { me } else { B });
        st.nodes.insert(name, n);
    }
    let r = st
        .shutdown_failover_replicas()
        .expect("a master with slots");
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].name, r[0].port), (B, 7001));
    assert!(!st.shutdown_failover_done(&B));
    st.nodes.get_mut(&B).expect("B").flags = FLAG_MASTER;
    assert!(st.shutdown_failover_done(&B));
}
