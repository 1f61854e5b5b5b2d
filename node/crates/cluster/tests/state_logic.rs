//! The pure state machine driven by hand-made messages and explicit time: failure-report
//! quorum, cluster health delays, epoch collisions, slot ownership by configEpoch, UPDATE.

use tessera_cluster::msg::{self, Body, Gossip, Header, Message, Name};
use tessera_cluster::state::{Node, Out, FLAG_FAIL, FLAG_MASTER, FLAG_PFAIL, FLAG_SLAVE};
use tessera_cluster::{commands, ClusterConfig, ClusterState, NullHost, Reply};

const B: Name = *b"ffffffffffffffffffffffffffffffffffffff0b";
const C: Name = *b"ffffffffffffffffffffffffffffffffffffff0c";
const NT: u64 = 1000;

fn base() -> ClusterState {
    let cfg = ClusterConfig {
        port: 7000,
        node_timeout_ms: NT,
        ..Default::default()
    };
    let mut st = ClusterState::new(cfg, 0, 42);
    for (name, port) in [(B, 7001), (C, 7002)] {
        let mut n = Node::new(name, FLAG_MASTER, 0);
        n.ip = "127.0.0.1".into();
        n.port = port;
        n.cport = port + 10000;
        st.nodes.insert(name, n);
    }
    st
}

fn assign(st: &mut ClusterState, owner: Name, range: std::ops::Range<usize>) {
    for s in range {
        st.del_slot(s);
        st.add_slot(owner, s);
    }
}

fn ping_from(
    st: &ClusterState,
    sender: Name,
    epoch: u64,
    slots: std::ops::Range<usize>,
    gossip: Vec<Gossip>,
) -> Message {
    let mut bitmap = Box::new([0u8; msg::SLOTS_BYTES]);
    for s in slots {
        msg::bitmap_set(&mut bitmap, s);
    }
    let n = &st.nodes[&sender];
    let header = Header {
        ty: msg::TYPE_PING,
        port: n.port,
        cport: n.cport,
        sender,
        config_epoch: epoch,
        current_epoch: epoch,
        slots: bitmap,
        flags: FLAG_MASTER,
        ..Default::default()
    };
    Message {
        header,
        body: Body::Gossip {
            entries: gossip,
            exts: vec![],
        },
    }
}

fn deliver(st: &mut ClusterState, m: Message, now: u64) {
    let l = st.link_accepted(now);
    st.process(l, m, "127.0.0.1", "127.0.0.1", now);
}

fn sent_types(st: &mut ClusterState) -> Vec<u16> {
    st.out
        .drain(..)
        .filter_map(|o| match o {
            Out::Send { msg, .. } => Some(msg.header.ty),
            _ => None,
        })
        .collect()
}

#[test]
fn pfail_becomes_fail_with_a_master_quorum_and_is_broadcast() {
    let mut st = base();
    let me = st.myself;
    assign(&mut st, me, 0..100);
    assign(&mut st, B, 100..200);
    assign(&mut st, C, 200..300);
    st.update_state(0);
    st.update_state(3000);
    assert_eq!(st.size, 3);
    // Links get dialed by the cron; C never answers its ping.
    st.cron(3000);
    st.nodes.get_mut(&C).expect("c").ping_sent = 3000;
    st.cron(3000 + NT + 1);
    assert!(
        st.nodes[&C].flags & FLAG_PFAIL != 0,
        "ping pending longer than NT: PFAIL"
    );
    st.out.clear();
    let g = Gossip {
        name: C,
        ip: "127.0.0.1".into(),
        port: 7002,
        cport: 17002,
        flags: FLAG_MASTER | FLAG_PFAIL,
        ..gossip0()
    };
    let m = ping_from(&st, B, st.nodes[&B].config_epoch, 100..200, vec![g]);
    deliver(&mut st, m, 4100);
    // Quorum 2 = B's report + myself (a master).
    assert!(st.nodes[&C].flags & FLAG_FAIL != 0, "FAIL by quorum");
    assert!(
        sent_types(&mut st).contains(&msg::TYPE_FAIL),
        "FAIL broadcast"
    );
    let r = commands::execute(
        &mut st,
        &NullHost,
        &[b"COUNT-FAILURE-REPORTS", &C],
        4100,
        false,
    );
    assert_eq!(r, Reply::Int(1));
    // Reports expire after 2·NT.
    let r = commands::execute(
        &mut st,
        &NullHost,
        &[b"COUNT-FAILURE-REPORTS", &C],
        4100 + 2 * NT + 1,
        false,
    );
    assert_eq!(r, Reply::Int(0));
}

fn gossip0() -> Gossip {
    Gossip {
        name: [b'0'; 40],
        ping_sent: 0,
        pong_received: 0,
        ip: String::new(),
        port: 0,
        cport: 0,
        flags: 0,
        pport: 0,
    }
}

#[test]
fn cluster_health_waits_for_start_and_rejoin_delays() {
    let mut st = base();
    let me = st.myself;
    assign(&mut st, me, 0..6000);
    assign(&mut st, B, 6000..12000);
    assign(&mut st, C, 12000..16384);
    st.update_state(0);
    assert!(!st.state_ok, "2 s start delay");
    st.update_state(1999);
    assert!(!st.state_ok);
    st.update_state(2001);
    assert!(st.state_ok);
    // Minority partition: B and C unreachable.
    for n in [B, C] {
        st.nodes.get_mut(&n).expect("node").flags |= FLAG_PFAIL;
    }
    st.update_state(5000);
    assert!(!st.state_ok, "minority");
    for n in [B, C] {
        st.nodes.get_mut(&n).expect("node").flags &= !FLAG_PFAIL;
    }
    st.update_state(5000 + 999);
    assert!(!st.state_ok, "rejoin delay = clamp(NT, 500, 5000)");
    st.update_state(5000 + 1001);
    assert!(st.state_ok);
    // Full coverage: a FAIL owner makes the cluster fail even with a majority.
    st.nodes.get_mut(&C).expect("c").flags |= FLAG_FAIL;
    st.update_state(9000);
    assert!(!st.state_ok);
    st.config.require_full_coverage = false;
    st.nodes.get_mut(&C).expect("c").flags &= !FLAG_FAIL;
    st.del_node_slots(&C);
    st.update_state(20000);
    assert!(
        st.state_ok,
        "uncovered slots are fine without full coverage"
    );
}

#[test]
fn config_epoch_collision_is_resolved_by_the_smaller_name() {
    let mut st = base();
    st.me_mut().config_epoch = 5;
    st.current_epoch = 5;
    st.nodes.get_mut(&B).expect("b").config_epoch = 5;
    let m = ping_from(&st, B, 5, 0..0, vec![]);
    deliver(&mut st, m, 100);
    // Our random name is smaller than "ffff...0b": we move to a new epoch.
    assert!(st.myself < B);
    assert_eq!(st.me().config_epoch, 6);
    assert_eq!(st.current_epoch, 6);
    // A collision with a node whose name is smaller than ours: we keep our epoch.
    let small: Name = [b'0'; 40];
    let mut n = Node::new(small, FLAG_MASTER, 0);
    n.config_epoch = 6;
    st.nodes.insert(small, n);
    let m = ping_from(&st, small, 6, 0..0, vec![]);
    deliver(&mut st, m, 200);
    assert_eq!(st.me().config_epoch, 6);
}

#[test]
fn slots_follow_the_higher_config_epoch_and_stale_claims_get_update() {
    let mut st = base();
    let me = st.myself;
    st.me_mut().config_epoch = 3;
    assign(&mut st, me, 0..20);
    assign(&mut st, C, 100..110);
    st.nodes.get_mut(&C).expect("c").config_epoch = 9;
    st.cron(0); // dial links so UPDATE has a link to go on
    st.out.clear();
    // B (epoch 2) claims slot 105, owned by C at epoch 9: B gets an UPDATE about C.
    let m = ping_from(&st, B, 2, 105..106, vec![]);
    deliver(&mut st, m, 10);
    assert_eq!(st.slots[105], Some(C));
    assert!(sent_types(&mut st).contains(&msg::TYPE_UPDATE));
    // B (epoch 7) claims slots 0..20, ours at epoch 3: they move; we lost all our slots, so we
    // become B's replica (cluster-allow-replica-migration yes).
    let m = ping_from(&st, B, 7, 0..20, vec![]);
    deliver(&mut st, m, 20);
    assert!((0..20).all(|s| st.slots[s] == Some(B)));
    assert_eq!(st.me().master, Some(B));
    assert!(st.me().is_replica());
}

#[test]
fn cached_slot_bitmaps_match_the_slot_table() {
    let mut st = base();
    let me = st.myself;
    let owners = [me, B, C];
    let mut x: u64 = 12345;
    for _ in 0..20000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let slot = (x % msg::SLOTS as u64) as usize;
        if x.is_multiple_of(3) {
            st.del_slot(slot);
        } else {
            st.del_slot(slot);
            st.add_slot(owners[(x % 7 % 3) as usize], slot);
        }
    }
    st.del_node_slots(&C);
    for o in owners {
        let bits = st.slot_bitmap(&o);
        for s in 0..msg::SLOTS {
            assert_eq!(
                msg::bitmap_get(&bits, s),
                st.slots[s] == Some(o),
                "slot {s}"
            );
        }
        assert_eq!(
            st.nodes[&o].numslots,
            st.slots.iter().filter(|x| **x == Some(o)).count()
        );
    }
}

/// Issue 21: a master of a cluster being formed knew no slot owner before its slots came:
/// that is no minority partition, so no rejoin delay (min(node timeout, 5 s)) holds it in
/// fail once the slots are served. The 2 s writable delay after start still applies.
#[test]
fn a_new_cluster_is_ok_without_the_rejoin_delay() {
    let cfg = ClusterConfig {
        port: 7000,
        node_timeout_ms: 15_000,
        ..Default::default()
    };
    // Epoch milliseconds, as the node's clock is.
    const T0: u64 = 1_700_000_000_000;
    let mut st = ClusterState::new(cfg, T0, 42);
    st.update_state(T0);
    st.update_state(T0 + 2_500);
    assert!(!st.state_ok, "no slots yet");
    let me = st.myself;
    assign(&mut st, me, 0..msg::SLOTS);
    st.update_state(T0 + 2_600);
    assert!(st.state_ok, "ok as soon as every slot is served");

    // A master that saw its cluster and lost the majority does wait.
    let mut st = base();
    st.update_state(0);
    let me = st.myself;
    assign(&mut st, me, 0..5000);
    assign(&mut st, B, 5000..10000);
    assign(&mut st, C, 10000..msg::SLOTS);
    st.update_state(3_000);
    assert!(st.state_ok);
    for n in [B, C] {
        st.nodes.get_mut(&n).expect("known").flags |= FLAG_PFAIL;
    }
    st.update_state(4_000);
    assert!(!st.state_ok, "minority");
    for n in [B, C] {
        st.nodes.get_mut(&n).expect("known").flags &= !FLAG_PFAIL;
    }
    st.update_state(4_100);
    assert!(!st.state_ok, "rejoin delay: min(NT, 5 s), at least 500 ms");
    st.update_state(4_000 + 1_001);
    assert!(st.state_ok);
}

/// Atomic slot migration, source side: a claim on our slots by a lower config epoch is
/// refused, unless we granted those slots to that sender (FAILOVER-GRANTED); then they move
/// at once and their keys are deleted here. Slots outside the grant still follow epochs.
#[test]
fn granted_slots_go_to_the_target_whatever_its_epoch() {
    let mut st = base();
    let me = st.myself;
    st.me_mut().config_epoch = 9;
    st.current_epoch = 9;
    assign(&mut st, me, 0..20);
    st.nodes.get_mut(&B).expect("b").config_epoch = 2;
    st.cron(0);
    st.out.clear();
    let m = ping_from(&st, B, 2, 10..13, vec![]);
    deliver(&mut st, m, 10);
    assert!((10..13).all(|s| st.slots[s] == Some(me)));
    st.out.clear();
    st.granted_exports.push((B, 10, 12));
    let m = ping_from(&st, B, 2, 10..14, vec![]);
    deliver(&mut st, m, 20);
    assert!((10..13).all(|s| st.slots[s] == Some(B)));
    assert_eq!(st.slots[13], Some(me));
    let deleted: Vec<u16> = st
        .out
        .iter()
        .filter_map(|o| match o {
            Out::DeleteSlotKeys { slot } => Some(*slot),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, vec![10, 11, 12]);
    assert!(st.me().is_master());
}

/// Atomic slot migration, target side: the granted slots are taken with a config epoch
/// bumped past every known one without a vote, saved with an fsync, and announced to every
/// connected peer at once.
#[test]
fn target_claims_granted_slots_with_a_bumped_epoch() {
    let mut st = base();
    let me = st.myself;
    assign(&mut st, B, 0..100);
    st.nodes.get_mut(&B).expect("b").config_epoch = 5;
    st.nodes.get_mut(&C).expect("c").config_epoch = 7;
    st.current_epoch = 7;
    st.cron(0);
    // Links are up once the peers answered.
    let m = ping_from(&st, B, 5, 0..100, vec![]);
    deliver(&mut st, m, 1);
    for n in st.nodes.values_mut() {
        if n.name != me {
            n.link_connected = n.link.is_some();
        }
    }
    st.out.clear();
    st.todo_fsync = false;
    let epoch = commands::claim_granted_slots(&mut st, &[(0, 9), (20, 20)], 30);
    assert_eq!(epoch, 8);
    assert_eq!(st.me().config_epoch, 8);
    assert!((0..10).chain(20..21).all(|s| st.slots[s] == Some(me)));
    assert_eq!(st.slots[10], Some(B));
    assert!(st.todo_fsync && st.todo_save);
    assert!(sent_types(&mut st).contains(&msg::TYPE_PONG));
}

/// A ping from `sender` saying it replicates `master`: as Redis does, a replica's header
/// carries its master's slots and config epoch.
fn replica_ping(
    st: &ClusterState,
    sender: Name,
    master: Name,
    epoch: u64,
    slots: std::ops::Range<usize>,
) -> Message {
    let mut m = ping_from(st, sender, epoch, slots, vec![]);
    m.header.flags = FLAG_SLAVE;
    m.header.slaveof = master;
    m
}

/// Myself a replica of B (slots 0-99, epoch 1); C a replica of B too.
fn replica_of_b() -> ClusterState {
    let mut st = base();
    st.nodes.get_mut(&B).expect("B").config_epoch = 1;
    assign(&mut st, B, 0..100);
    let c = st.nodes.get_mut(&C).expect("C");
    c.flags = FLAG_SLAVE;
    c.master = Some(B);
    st.set_my_master(B);
    st.out.clear();
    st
}

/// C took B's slots by a failover, and B's word of its demotion arrives before C's claim:
/// B's slots are unassigned by then, so the claim takes none from my master. The
/// sub-replica safeguard must still move me to C, or I replicate a replica for good.
#[test]
fn a_replica_that_hears_its_master_demoted_first_follows_the_new_master() {
    let mut st = replica_of_b();
    let m = replica_ping(&st, B, C, 2, 0..100);
    deliver(&mut st, m, 10);
    // C is still a replica in my view: not a master to follow yet.
    assert_eq!(st.me().master, Some(B));
    assert_eq!(st.slots[0], None);
    let m = ping_from(&st, C, 2, 0..100, vec![]);
    deliver(&mut st, m, 20);
    assert_eq!(st.slots[0], Some(C));
    assert_eq!(st.me().master, Some(C), "still a replica of the demoted B");
}

/// The usual order (claim first, then the demotion) moves me through the claim itself.
#[test]
fn a_replica_that_hears_the_claim_first_follows_the_new_master() {
    let mut st = replica_of_b();
    let m = ping_from(&st, C, 2, 0..100, vec![]);
    deliver(&mut st, m, 10);
    assert_eq!(st.me().master, Some(C));
    let m = replica_ping(&st, B, C, 2, 0..100);
    deliver(&mut st, m, 20);
    assert_eq!(st.me().master, Some(C));
}

/// My master, holding no slots, is made a replica of a master I already know with its
/// slots: no claim will differ from my view, so the demotion itself must move me.
#[test]
fn a_replica_of_an_empty_master_that_joins_another_follows_it() {
    let mut st = base();
    st.nodes.get_mut(&C).expect("C").config_epoch = 2;
    assign(&mut st, C, 0..100);
    st.set_my_master(B);
    let m = replica_ping(&st, B, C, 2, 0..100);
    deliver(&mut st, m, 10);
    assert_eq!(st.me().master, Some(C));
}

/// A master that says it replicates me (possible after a TAKEOVER) is left alone: following
/// it would make me my own master.
#[test]
fn no_loop_when_my_master_replicates_me() {
    let mut st = replica_of_b();
    let me = st.myself;
    let m = replica_ping(&st, B, me, 2, 0..100);
    deliver(&mut st, m, 10);
    assert_eq!(st.me().master, Some(B));
}
