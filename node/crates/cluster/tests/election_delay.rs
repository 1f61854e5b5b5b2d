//! Issue 21, the replica's election delay in the state machine: a replica sure to be its
//! shard's best candidate asks for votes as soon as its master is FAIL, and tells the voters
//! of the FAIL first on each link; the others wait a delay scaled to the node timeout, ranked
//! by offset, then name, then by which failed master sorts first.

use tessera_cluster::failover::WIRE_FLAG_MY_MASTER_FAIL;
use tessera_cluster::msg::{self, Body, Name};
use tessera_cluster::state::{Node, Out, FLAG_FAIL, FLAG_MASTER, FLAG_SLAVE};
use tessera_cluster::{ClusterConfig, ClusterState};

const A: Name = *b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa0a";
const B: Name = *b"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb0b";
const C: Name = *b"cccccccccccccccccccccccccccccccccccccc0c";
const NT: u64 = 3000;
/// min(NT / 30, 500).
const DELAY: u64 = 100;
const NOW: u64 = 1_000_000;

/// Masters A, B and C own a third of the slots each; I replicate B with `offset`, and each
/// of `siblings` (name, offset) replicates B too. Every link is up.
fn cluster(offset: u64, siblings: &[(Name, u64)]) -> ClusterState {
    let config = ClusterConfig {
        port: 7000,
        node_timeout_ms: NT,
        ..Default::default()
    };
    let mut st = ClusterState::new(config, NOW, 7);
    for (i, name) in [A, B, C].into_iter().enumerate() {
        let mut n = Node::new(name, FLAG_MASTER, NOW);
        n.ip = "127.0.0.1".into();
        n.port = 7001 + i as u16;
        n.cport = 17001 + i as u16;
        st.nodes.insert(name, n);
    }
    for (i, (name, off)) in siblings.iter().enumerate() {
        let mut n = Node::new(*name, FLAG_SLAVE, NOW);
        n.ip = "127.0.0.1".into();
        n.port = 7010 + i as u16;
        n.cport = 17010 + i as u16;
        n.master = Some(B);
        n.repl_offset = *off;
        st.nodes.insert(*name, n);
    }
    for s in 0..msg::SLOTS {
        st.add_slot([A, B, C][s * 3 / msg::SLOTS], s);
    }
    st.set_my_master(B);
    st.me_mut().repl_offset = offset;
    st.cron(NOW);
    let links: Vec<_> = st
        .out
        .iter()
        .filter_map(|o| match o {
            Out::Connect { link, .. } => Some(*link),
            _ => None,
        })
        .collect();
    for l in links {
        st.link_connected(l, NOW);
    }
    st.out.clear();
    st
}

fn fail(st: &mut ClusterState, name: Name) {
    st.nodes.get_mut(&name).expect("known").flags |= FLAG_FAIL;
    st.nodes.get_mut(&name).expect("known").fail_time = NOW;
}

/// Message types sent on `to`'s link, in order.
fn sent_to(st: &ClusterState, to: Name) -> Vec<u16> {
    let link = st.nodes[&to].link.expect("linked");
    st.out
        .iter()
        .filter_map(|o| match o {
            Out::Send { link: l, msg } if *l == link => Some(msg.header.ty),
            _ => None,
        })
        .collect()
}

#[test]
fn a_lone_replica_asks_for_votes_at_once_and_sends_the_fail_first() {
    let mut st = cluster(500, &[]);
    fail(&mut st, B);
    st.handle_replica_failover(NOW);
    assert!(st.election.auth_sent, "no delay for the only replica");
    for voter in [A, C] {
        let types = sent_to(&st, voter);
        let fail_at = types.iter().position(|t| *t == msg::TYPE_FAIL);
        let req_at = types
            .iter()
            .position(|t| *t == msg::TYPE_FAILOVER_AUTH_REQUEST);
        assert!(
            matches!((fail_at, req_at), (Some(f), Some(r)) if f < r),
            "the voter hears FAIL before the request: {types:?}"
        );
    }
    let fail_body = st.out.iter().find_map(|o| match o {
        Out::Send { msg, .. } if msg.header.ty == msg::TYPE_FAIL => Some(msg.body.clone()),
        _ => None,
    });
    assert!(matches!(fail_body, Some(Body::Fail { name }) if name == B));
}

#[test]
fn the_header_says_my_master_is_failing() {
    let mut st = cluster(500, &[]);
    assert_eq!(
        st.build_header(msg::TYPE_PING).flags & WIRE_FLAG_MY_MASTER_FAIL,
        0
    );
    fail(&mut st, B);
    assert_ne!(
        st.build_header(msg::TYPE_PING).flags & WIRE_FLAG_MY_MASTER_FAIL,
        0
    );
}

#[test]
fn a_sibling_ahead_in_offset_or_name_delays_the_election() {
    // Same offset, smaller name: the sibling ranks first.
    let sibling = *b"000000000000000000000000000000000000000e";
    let mut st = cluster(500, &[(sibling, 500)]);
    fail(&mut st, B);
    st.handle_replica_failover(NOW);
    assert!(!st.election.auth_sent);
    assert_eq!(st.election.rank, 1);
    let wait = st.election.auth_time - NOW;
    assert!(
        (DELAY + 2 * DELAY..2 * DELAY + 2 * DELAY).contains(&wait),
        "rank 1 waits the fixed delay, its jitter and 2 x delay: {wait}"
    );
    // The election goes once its time comes.
    st.handle_replica_failover(st.election.auth_time);
    assert!(st.election.auth_sent);
}

#[test]
fn the_best_replica_waits_until_every_sibling_sees_the_fail() {
    let sibling = *b"000000000000000000000000000000000000000e";
    let mut st = cluster(500, &[(sibling, 400)]);
    fail(&mut st, B);
    st.handle_replica_failover(NOW);
    assert!(
        !st.election.auth_sent,
        "the sibling's offset may still be stale"
    );
    let wait = st.election.auth_time - NOW;
    assert!((DELAY..2 * DELAY).contains(&wait), "{wait}");
    // The sibling's next pong carries the flag: its offset is final, ours is better.
    st.nodes.get_mut(&sibling).expect("known").wire_flags |= WIRE_FLAG_MY_MASTER_FAIL;
    st.handle_replica_failover(NOW + 1);
    assert!(
        st.election.auth_sent,
        "best ranked: the election starts at once"
    );
}

#[test]
fn a_replica_that_never_synced_waits_longer() {
    let mut st = cluster(0, &[]);
    fail(&mut st, B);
    st.handle_replica_failover(NOW);
    assert!(!st.election.auth_sent);
    let wait = st.election.auth_time - NOW;
    assert!((DELAY + 500..2 * DELAY + 500).contains(&wait), "{wait}");
}

#[test]
fn replicas_of_two_failed_masters_stagger_their_elections() {
    // A fails too and has a replica: A sorts before B, so B's replica waits one delay more.
    let a_replica = *b"000000000000000000000000000000000000000f";
    let mut st = cluster(500, &[]);
    let mut n = Node::new(a_replica, FLAG_SLAVE, NOW);
    n.master = Some(A);
    st.nodes.insert(a_replica, n);
    fail(&mut st, A);
    fail(&mut st, B);
    st.handle_replica_failover(NOW);
    assert!(!st.election.auth_sent);
    assert_eq!(st.election.failed_rank, 1);
    let wait = st.election.auth_time - NOW;
    assert!((2 * DELAY..3 * DELAY).contains(&wait), "{wait}");
}

#[test]
fn a_redis_sized_node_timeout_keeps_redis_delay() {
    // 15 s (Redis's default): the fixed delay stays 500 ms.
    let config = ClusterConfig {
        port: 7000,
        node_timeout_ms: 15_000,
        ..Default::default()
    };
    let mut st = ClusterState::new(config, NOW, 7);
    let mut b = Node::new(B, FLAG_MASTER, NOW);
    b.ip = "127.0.0.1".into();
    st.nodes.insert(B, b);
    st.add_slot(B, 0);
    st.set_my_master(B);
    st.me_mut().repl_offset = 0;
    fail(&mut st, B);
    st.handle_replica_failover(NOW);
    let wait = st.election.auth_time - NOW;
    assert!((500 + 500..1000 + 500).contains(&wait), "{wait}");
}
