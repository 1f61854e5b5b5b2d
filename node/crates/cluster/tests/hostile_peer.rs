//! The pure state machine against a hostile bus peer (issue 15): messages with fields that
//! would corrupt nodes.conf or CLUSTER NODES are dropped and counted, unidentified and idle
//! inbound links are closed and bounded, peer epochs at the limit do not overflow.

use tessera_cluster::msg::{self, Body, Ext, Gossip, Header, Message, MsgError, Name};
use tessera_cluster::nodes_conf;
use tessera_cluster::state::{ClusterState, Out, MAX_PENDING_INBOUND_LINKS};
use tessera_cluster::{commands, ClusterConfig};

const T0: u64 = 1_000_000;

fn config() -> ClusterConfig {
    ClusterConfig {
        enabled: true,
        port: 7000,
        node_timeout_ms: 5000,
        ..ClusterConfig::default()
    }
}

fn name(c: u8) -> Name {
    [c; 40]
}

fn ping(ty: u16, sender: Name, myip: &str, entries: Vec<Gossip>, exts: Vec<Ext>) -> Message {
    Message {
        header: Header {
            ty,
            port: 7001,
            cport: 17001,
            flags: msg::FLAG_MASTER,
            sender,
            myip: myip.into(),
            ..Default::default()
        },
        body: Body::Gossip { entries, exts },
    }
}

fn gossip(n: Name, ip: &str) -> Gossip {
    Gossip {
        name: n,
        ping_sent: 0,
        pong_received: 0,
        ip: ip.into(),
        port: 7002,
        cport: 17002,
        flags: msg::FLAG_MASTER,
        pport: 0,
    }
}

/// A node `e` that knows peers `b` and `f` (loaded from nodes.conf), and an inbound link.
fn with_peer() -> (ClusterState, u64) {
    let text = format!(
        "{} 127.0.0.1:7000@17000 myself,master - 0 0 0 connected\n\
         {} 127.0.0.1:7001@17001 master - 0 0 0 connected\n\
         {} 127.0.0.1:7003@17003 master - 0 0 0 connected\n\
         vars currentEpoch 0 lastVoteEpoch 0\n",
        "e".repeat(40),
        "b".repeat(40),
        "f".repeat(40)
    );
    let mut st = nodes_conf::parse(&text, "nodes.conf", config(), T0, 1).expect("parse");
    let link = st.link_accepted(T0);
    (st, link)
}

fn render_loads(st: &ClusterState) {
    let text = nodes_conf::render(st);
    nodes_conf::parse(&text, "nodes.conf", config(), T0, 2)
        .unwrap_or_else(|e| panic!("nodes.conf does not load again: {e}\n{text}"));
}

#[test]
fn validate_accepts_what_redis_sends_and_canonicalises_addresses() {
    let mut m = ping(
        msg::TYPE_PING,
        name(b'a'),
        "0:0::1",
        vec![gossip(name(b'c'), "10.0.0.2"), gossip(name(b'd'), "")],
        vec![
            Ext::Hostname(b"node-1.example".to_vec()),
            Ext::HumanNodename(b"node one".to_vec()),
            Ext::ShardId(name(b'f')),
            Ext::ForgottenNode {
                name: name(b'9'),
                ttl: 3,
            },
            Ext::Unknown {
                ty: 4,
                payload: vec![1, 2, 3, 4],
            },
        ],
    );
    assert_eq!(m.validate(), Ok(()));
    assert_eq!(m.header.myip, "::1");
}

#[test]
fn validate_rejects_each_bad_field() {
    let bad: Vec<(&str, Message)> = vec![
        (
            "sender ip",
            ping(
                msg::TYPE_PING,
                name(b'a'),
                "10.9.9.9\ngarbage",
                vec![],
                vec![],
            ),
        ),
        (
            "sender name",
            ping(msg::TYPE_MEET, name(b'A'), "", vec![], vec![]),
        ),
        (
            "gossip ip",
            ping(
                msg::TYPE_PING,
                name(b'a'),
                "",
                vec![gossip(name(b'c'), "a b")],
                vec![],
            ),
        ),
        (
            "gossip node name",
            ping(
                msg::TYPE_PING,
                name(b'a'),
                "",
                vec![gossip(name(b'\n'), "10.0.0.1")],
                vec![],
            ),
        ),
        (
            "hostname extension",
            ping(
                msg::TYPE_PING,
                name(b'a'),
                "",
                vec![],
                vec![Ext::Hostname(b"a:1@2".to_vec())],
            ),
        ),
        (
            "shard id extension",
            ping(
                msg::TYPE_PING,
                name(b'a'),
                "",
                vec![],
                vec![Ext::ShardId(name(b'z'))],
            ),
        ),
        (
            "human nodename extension",
            ping(
                msg::TYPE_PING,
                name(b'a'),
                "",
                vec![],
                vec![Ext::HumanNodename(b"a\r\nb".to_vec())],
            ),
        ),
        (
            "forgotten node extension",
            ping(
                msg::TYPE_PING,
                name(b'a'),
                "",
                vec![],
                vec![Ext::ForgottenNode {
                    name: name(b' '),
                    ttl: 1,
                }],
            ),
        ),
        (
            "node name",
            Message {
                header: Header {
                    ty: msg::TYPE_FAIL,
                    sender: name(b'a'),
                    ..Default::default()
                },
                body: Body::Fail { name: name(b'-') },
            },
        ),
    ];
    for (field, mut m) in bad {
        assert_eq!(m.validate(), Err(MsgError::BadField(field)));
    }
}

#[test]
fn invalid_messages_change_nothing_and_are_counted() {
    let (mut st, link) = with_peer();
    let before = nodes_conf::nodes_text(&st, false, false);
    let msgs = [
        ping(
            msg::TYPE_PING,
            name(b'b'),
            "10.9.9.9\ngarbage",
            vec![],
            vec![],
        ),
        ping(msg::TYPE_MEET, name(b'c'), "1.2.3.4 x", vec![], vec![]),
        ping(
            msg::TYPE_PING,
            name(b'b'),
            "",
            vec![gossip(name(b'c'), "10.9.9.9\ngarbage")],
            vec![],
        ),
        ping(
            msg::TYPE_PING,
            name(b'b'),
            "",
            vec![],
            vec![Ext::Hostname(b"bad host".to_vec())],
        ),
    ];
    let n = msgs.len() as u64;
    for m in msgs {
        st.process(link, m, "127.0.0.1", "127.0.0.1", T0 + 10);
    }
    assert_eq!(st.stats.messages_rejected, n);
    assert_eq!(nodes_conf::nodes_text(&st, false, false), before);
    assert_eq!(st.stats.received.iter().sum::<u64>(), 0);
    // The link saw no valid message: it stays unidentified.
    assert_eq!(st.links[&link].last_rx, 0);
    render_loads(&st);
}

#[test]
fn unidentified_inbound_links_are_closed_after_the_handshake_timeout() {
    let (mut st, silent) = with_peer();
    let stranger = st.link_accepted(T0);
    let bound = st.link_accepted(T0);
    st.process(
        stranger,
        ping(msg::TYPE_PING, name(b'7'), "", vec![], vec![]),
        "127.0.0.1",
        "127.0.0.1",
        T0 + 100,
    );
    st.process(
        bound,
        ping(msg::TYPE_PING, name(b'b'), "", vec![], vec![]),
        "127.0.0.1",
        "127.0.0.1",
        T0 + 100,
    );
    assert_eq!(st.links[&bound].node, Some(name(b'b')));
    st.out.clear();
    // Handshake timeout: max(node timeout, 1 s) = 5 s.
    st.cron(T0 + 5000);
    assert!(st.links.contains_key(&silent) && st.links.contains_key(&stranger));
    st.cron(T0 + 5001);
    assert!(!st.links.contains_key(&silent), "a silent link");
    assert!(
        !st.links.contains_key(&stranger),
        "a link that never named a known node"
    );
    assert!(st.links.contains_key(&bound));
    let closed: Vec<u64> = st
        .out
        .iter()
        .filter_map(|o| match o {
            Out::Close { link } => Some(*link),
            _ => None,
        })
        .collect();
    assert!(closed.contains(&silent) && closed.contains(&stranger));
    // A bound link idle for twice the handshake timeout goes too.
    st.cron(T0 + 100 + 10_000);
    assert!(st.links.contains_key(&bound));
    st.cron(T0 + 100 + 10_001);
    assert!(!st.links.contains_key(&bound), "an idle bound link");
    assert_eq!(
        st.nodes[&name(b'b')].inbound_link,
        None,
        "the node's inbound link is cleared"
    );
    assert_eq!(st.stats.links_timed_out, 3);
}

#[test]
fn unidentified_inbound_links_are_bounded_oldest_first() {
    let mut st = ClusterState::new(config(), T0, 1);
    let links: Vec<u64> = (0..MAX_PENDING_INBOUND_LINKS as u64)
        .map(|i| st.link_accepted(T0 + i))
        .collect();
    assert!(st.out.is_empty());
    let newest = st.link_accepted(T0 + 1000);
    assert!(!st.links.contains_key(&links[0]), "the oldest is closed");
    assert!(matches!(st.out[..], [Out::Close { link }] if link == links[0]));
    assert!(st.links.contains_key(&links[1]) && st.links.contains_key(&newest));
    let pending = st.links.values().filter(|l| l.node.is_none()).count();
    assert_eq!(pending, MAX_PENDING_INBOUND_LINKS);
}

#[test]
fn peer_epochs_at_the_limit_saturate() {
    let (mut st, link) = with_peer();
    let mut m = ping(msg::TYPE_PING, name(b'b'), "", vec![], vec![]);
    m.header.current_epoch = u64::MAX;
    st.process(link, m, "127.0.0.1", "127.0.0.1", T0 + 1);
    assert_eq!(st.current_epoch, u64::MAX);
    // BUMPEPOCH and a configEpoch collision (with `f`, named above us) both add one.
    let (bumped, e) = commands::bump_epoch(&mut st);
    assert!(bumped);
    assert_eq!(e, u64::MAX);
    let mut m = ping(msg::TYPE_PING, name(b'f'), "", vec![], vec![]);
    m.header.current_epoch = u64::MAX;
    m.header.config_epoch = u64::MAX;
    let l2 = st.link_accepted(T0);
    st.process(l2, m, "127.0.0.1", "127.0.0.1", T0 + 2);
    assert_eq!(st.current_epoch, u64::MAX);
    render_loads(&st);
}

#[test]
fn nodes_conf_refuses_lines_a_peer_could_not_have_taught() {
    let me = format!(
        "{} 127.0.0.1:7000@17000 myself,master - 0 0 0 connected",
        "e".repeat(40)
    );
    let b = "b".repeat(40);
    for (line, reason) in [
        (
            format!("{b} 10.9.9.9x:7001@17001 master - 0 0 0 connected"),
            "bad ip address",
        ),
        (
            format!("{b} 127.0.0.1:7001@17001,a_b master - 0 0 0 connected"),
            "bad hostname",
        ),
        (
            format!(
                "{} 127.0.0.1:7001@17001 master - 0 0 0 connected",
                "B".repeat(40)
            ),
            "bad node name",
        ),
        (
            format!(
                "{b} 127.0.0.1:7001@17001 slave {} 0 0 0 connected",
                "!".repeat(40)
            ),
            "bad master name",
        ),
    ] {
        let text = format!("{me}\n{line}\nvars currentEpoch 0 lastVoteEpoch 0\n");
        let err = nodes_conf::parse(&text, "nodes.conf", config(), T0, 1)
            .err()
            .unwrap_or_else(|| panic!("loaded: {line}"));
        let shown = err.to_string();
        assert!(shown.starts_with("nodes.conf:2: "), "{shown}");
        assert!(shown.contains(reason), "{shown}");
    }
    // A node without an address (noaddr) and an IPv6 one still load.
    let text = format!(
        "{me}\n{b} :0@0 master,noaddr - 0 0 0 connected\n{} ::1:7002@17002 master - 0 0 0 connected\n",
        "c".repeat(40)
    );
    assert!(nodes_conf::parse(&text, "nodes.conf", config(), T0, 1).is_ok());
}

#[test]
fn cluster_meet_with_a_huge_port_is_an_error() {
    let mut st = ClusterState::new(config(), T0, 1);
    for args in [
        &[&b"meet"[..], b"127.0.0.1", b"9223372036854775807"][..],
        &[b"meet", b"127.0.0.1", b"7000", b"9223372036854775807"],
        &[b"meet", b"10.9.9.9\ngarbage", b"7000"],
    ] {
        let r = commands::execute(&mut st, &tessera_cluster::NullHost, args, T0, false);
        assert!(
            matches!(&r, tessera_cluster::Reply::Error(e) if e.contains("Invalid")),
            "{args:?}: {r:?}"
        );
    }
    assert_eq!(st.nodes.len(), 1);
}

#[test]
fn an_unidentified_link_that_leaves_replies_unread_is_closed() {
    let mut st = ClusterState::new(config(), T0, 1);
    let reader = st.link_accepted(T0);
    let hoarder = st.link_accepted(T0);
    st.links[&hoarder].send_queued.store(
        msg::MAX_UNIDENTIFIED_MSG_LEN as u64 + 1,
        std::sync::atomic::Ordering::Relaxed,
    );
    st.cron(T0 + 100);
    assert!(!st.links.contains_key(&hoarder));
    assert!(st.links.contains_key(&reader));
    assert!(matches!(st.out[..], [Out::Close { link }] if link == hoarder));
}
