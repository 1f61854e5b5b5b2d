//! Issue 16: the state machine keeps a replica's replication pointed at its master's
//! current address: at load from nodes.conf, when gossip moves a failing master, and from
//! the cron whenever the host reports another target.

use tessera_cluster::msg::{self, Body, Gossip, Header, Message, Name};
use tessera_cluster::state::{Node, Out, FLAG_MASTER, FLAG_PFAIL};
use tessera_cluster::{nodes_conf, ClusterConfig, ClusterState};

const ME: Name = *b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa0a";
const B: Name = *b"ffffffffffffffffffffffffffffffffffffff0b";
const C: Name = *b"ffffffffffffffffffffffffffffffffffffff0c";
const NT: u64 = 1000;

fn config() -> ClusterConfig {
    ClusterConfig {
        port: 7000,
        node_timeout_ms: NT,
        ..Default::default()
    }
}

/// Me, a replica of B (which owns every slot), and C, a master without slots; the host has
/// been told to replicate B already.
fn replica_of_b() -> ClusterState {
    let mut st = ClusterState::new(config(), 0, 42);
    for (name, port) in [(B, 7001), (C, 7002)] {
        let mut n = Node::new(name, FLAG_MASTER, 0);
        n.ip = "127.0.0.1".into();
        n.port = port;
        n.cport = port + 10000;
        st.nodes.insert(name, n);
    }
    for s in 0..msg::SLOTS {
        st.add_slot(B, s);
    }
    st.set_my_master(B);
    assert_eq!(set_masters(&mut st), vec![Some(("127.0.0.1".into(), 7001))]);
    st
}

/// The `SetMaster` effects queued (and drains the queue).
fn set_masters(st: &mut ClusterState) -> Vec<Option<(String, u16)>> {
    st.out
        .drain(..)
        .filter_map(|o| match o {
            Out::SetMaster { ip } => Some(ip),
            _ => None,
        })
        .collect()
}

fn ping_from_c(st: &ClusterState, gossip: Vec<Gossip>) -> Message {
    let n = &st.nodes[&C];
    Message {
        header: Header {
            ty: msg::TYPE_PING,
            port: n.port,
            cport: n.cport,
            sender: C,
            flags: FLAG_MASTER,
            slots: Box::new([0u8; msg::SLOTS_BYTES]),
            ..Default::default()
        },
        body: Body::Gossip {
            entries: gossip,
            exts: vec![],
        },
    }
}

#[test]
fn a_replica_loaded_from_nodes_conf_replicates_at_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("nodes.conf");
    let me = String::from_utf8_lossy(&ME).into_owned();
    let b = String::from_utf8_lossy(&B).into_owned();
    std::fs::write(
        &path,
        format!(
            "{b} 10.0.0.9:7001@17001 master - 0 0 1 connected 0-16383\n\
             {me} 10.0.0.8:7000@17000 myself,slave {b} 0 0 1 connected\n\
             vars currentEpoch 1 lastVoteEpoch 0\n"
        ),
    )
    .expect("write nodes.conf");
    let mut st = nodes_conf::load(&path, config(), 1_000, 7)
        .expect("load")
        .expect("a nodes.conf");
    assert!(st.me().is_replica());
    st.cron(1_000);
    assert_eq!(
        set_masters(&mut st),
        vec![Some(("10.0.0.9".into(), 7001))],
        "the address nodes.conf knows, before any peer answered"
    );
    st.cron(1_100);
    assert!(set_masters(&mut st).is_empty(), "asked once");
}

#[test]
fn gossip_that_moves_my_failing_master_repoints_replication() {
    let mut st = replica_of_b();
    st.nodes.get_mut(&B).expect("B").flags |= FLAG_PFAIL;
    let g = Gossip {
        name: B,
        ip: "127.0.0.2".into(),
        port: 7101,
        cport: 17101,
        flags: FLAG_MASTER,
        ping_sent: 0,
        pong_received: 0,
        pport: 0,
    };
    let m = ping_from_c(&st, vec![g]);
    let l = st.link_accepted(10);
    st.process(l, m, "127.0.0.1", "127.0.0.1", 10);
    assert_eq!(st.nodes[&B].ip, "127.0.0.2");
    assert_eq!(set_masters(&mut st), vec![Some(("127.0.0.2".into(), 7101))]);
    st.note_replication_target(Some(("127.0.0.2".into(), 7101)));
    st.cron(20);
    assert!(set_masters(&mut st).is_empty());
}

#[test]
fn the_cron_repoints_a_host_that_replicates_elsewhere() {
    let mut st = replica_of_b();
    // In step: nothing to do.
    st.note_replication_target(Some(("127.0.0.1".into(), 7001)));
    st.cron(100);
    assert!(set_masters(&mut st).is_empty());
    // Not replicating at all (a restart, a host that lost the target).
    st.note_replication_target(None);
    st.cron(200);
    assert_eq!(set_masters(&mut st), vec![Some(("127.0.0.1".into(), 7001))]);
    // Replicating a stale address: asked again, but not on every tick.
    st.note_replication_target(Some(("127.0.0.1".into(), 6999)));
    st.cron(300);
    assert!(
        set_masters(&mut st).is_empty(),
        "within a second of the last ask"
    );
    st.note_replication_target(Some(("127.0.0.1".into(), 6999)));
    st.cron(1_300);
    assert_eq!(set_masters(&mut st), vec![Some(("127.0.0.1".into(), 7001))]);
}

#[test]
fn a_master_or_an_addressless_master_is_left_alone() {
    let mut st = ClusterState::new(config(), 0, 42);
    st.note_replication_target(None);
    st.cron(100);
    assert!(set_masters(&mut st).is_empty(), "a master");

    let mut st = replica_of_b();
    let b = st.nodes.get_mut(&B).expect("B");
    b.ip.clear();
    st.note_replication_target(None);
    st.cron(100);
    assert!(set_masters(&mut st).is_empty(), "no address to replicate");
}
