//! Hostile input: bus (issue 15).
//!
//! The test plays a bus peer: it writes forged RCmb frames (built with tessera-cluster's own
//! encoder, which does not validate) to a cluster-enabled node's bus port and checks that what
//! reaches CLUSTER NODES and nodes.conf stays well formed, that bad frames are dropped and
//! counted, and that silent, stalled and unidentified bus links are closed and bounded.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tessera_cluster::msg::{self, Body, Ext, Gossip, Header, Message, Name};

use tessera_testkit::*;

/// The node under test (as written in its nodes.conf).
const ME: &str = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee";
/// A peer the node knows from its nodes.conf, impersonated by the test (its name sorts
/// before ME, so equal config epochs never make the node bump its own).
const PEER: &str = "1111111111111111111111111111111111111111";
/// The INFO (cluster section) counter of frames dropped for a field that fails validation.
const REJECTED: &str = "cluster_bus_messages_rejected";

fn name(s: &str) -> Name {
    let mut n = [0u8; 40];
    assert_eq!(s.len(), 40, "test names are 40 bytes");
    n.copy_from_slice(s.as_bytes());
    n
}

fn launch(node_timeout: &str) -> Launch {
    Launch::new(tessera_bin())
        .args(&[
            "--save",
            "",
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            node_timeout,
        ])
        .cwd()
        .logfile()
}

/// A cluster node whose nodes.conf already knows PEER (at 127.0.0.1:1@1, where nothing
/// listens), so frames the test sends in PEER's name come from a known sender. The
/// directory is returned so it outlives restarts.
fn start_with_peer(node_timeout: &str) -> (Node, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("nodes.conf"),
        format!(
            "{ME} 127.0.0.1:0@0 myself,master - 0 0 0 connected\n\
             {PEER} 127.0.0.1:1@1 master - 0 0 0 connected\n\
             vars currentEpoch 0 lastVoteEpoch 0\n"
        ),
    )
    .expect("write nodes.conf");
    let srv = launch(node_timeout).dir(dir.path()).start();
    (Node { srv }, dir)
}

/// Kills the node and starts it again over the same directory (nodes.conf).
fn restart(node: &mut Node, _dir: &tempfile::TempDir) {
    node.restart();
}

fn cluster(node: &Node, sub: &str) -> String {
    let mut c = node.client();
    redis::cmd("CLUSTER")
        .arg(sub)
        .query::<String>(&mut c)
        .unwrap_or_else(|e| panic!("CLUSTER {sub}: {e}"))
}

fn rejected(node: &Node) -> u64 {
    let mut c = node.client();
    let info: String = redis::cmd("INFO")
        .arg("cluster")
        .query(&mut c)
        .expect("INFO cluster");
    info_field(&info, REJECTED)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A PING-family frame with gossip and extensions.
fn frame(
    ty: u16,
    sender: Name,
    myip: &str,
    port: u16,
    entries: Vec<Gossip>,
    exts: Vec<Ext>,
) -> Vec<u8> {
    msg::encode(&Message {
        header: Header {
            ty,
            port,
            cport: 1,
            flags: msg::FLAG_MASTER,
            sender,
            myip: myip.into(),
            ..Default::default()
        },
        body: Body::Gossip { entries, exts },
    })
}

/// A PING from PEER, as it is in nodes.conf (its address from the socket).
fn peer_ping(entries: Vec<Gossip>, exts: Vec<Ext>) -> Vec<u8> {
    frame(msg::TYPE_PING, name(PEER), "", 1, entries, exts)
}

fn gossip(n: Name, ip: &str, port: u16) -> Gossip {
    Gossip {
        name: n,
        ping_sent: 0,
        pong_received: 0,
        ip: ip.into(),
        port,
        cport: port,
        flags: msg::FLAG_MASTER,
        pport: 0,
    }
}

/// A connection to the node's bus port whose replies are read and dropped by a thread.
fn bus_link(node: &Node) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", node.port + 10000)).expect("connect bus");
    let mut r = s.try_clone().expect("clone");
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while matches!(r.read(&mut buf), Ok(n) if n > 0) {}
    });
    s
}

/// Waits (at most 5 s) until the node either counted one more rejected frame or shows
/// `marker` in CLUSTER NODES; returns the counter and CLUSTER NODES then.
fn settle(node: &Node, before: u64, marker: &str) -> (u64, String) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let nodes = cluster(node, "NODES");
        let n = rejected(node);
        if n > before || nodes.contains(marker) || Instant::now() > deadline {
            return (n, nodes);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `bytes` and checks the node dropped the frame: counted, `marker` not shown.
fn assert_dropped(node: &Node, link: &mut TcpStream, bytes: &[u8], marker: &str, what: &str) {
    let before = rejected(node);
    link.write_all(bytes).expect("send frame");
    let (after, nodes) = settle(node, before, marker);
    assert!(
        !nodes.contains(marker),
        "{what}: {marker:?} reached CLUSTER NODES:\n{nodes}"
    );
    assert_eq!(
        after,
        before + 1,
        "{what}: the frame was not counted in {REJECTED}\n{nodes}"
    );
}

/// Sends `bytes` and waits until `marker` shows in CLUSTER NODES (the positive control:
/// the same kind of frame with valid fields is processed).
fn assert_accepted(node: &Node, link: &mut TcpStream, bytes: &[u8], marker: &str) {
    link.write_all(bytes).expect("send frame");
    wait_for(Duration::from_secs(5), marker, || {
        cluster(node, "NODES").contains(marker)
    });
}

#[test]
fn forged_ip_in_ping_is_dropped_and_nodes_conf_survives_restart() {
    let (mut node, l) = start_with_peer("5000");
    let mut link = bus_link(&node);
    for ip in ["10.9.9.9\ngarbage", "not-an-ip", "999.1.1.1", "10.0.0.1 x"] {
        let f = frame(msg::TYPE_PING, name(PEER), ip, 1, vec![], vec![]);
        assert_dropped(&node, &mut link, &f, ip, "PING myip");
    }
    // Same sender and field, valid: the address is taken (the frames above really were
    // PEER's and were dropped for their content only).
    let f = frame(msg::TYPE_PING, name(PEER), "127.0.0.2", 7, vec![], vec![]);
    assert_accepted(&node, &mut link, &f, "127.0.0.2:7@1");
    assert_eq!(cluster(&node, "SAVECONFIG"), "OK");
    drop(link);
    restart(&mut node, &l);
    assert_eq!(cluster(&node, "MYID"), ME);
    let nodes = cluster(&node, "NODES");
    assert!(
        nodes.contains(&format!("{PEER} 127.0.0.2:7@1 master")),
        "{nodes}"
    );
}

#[test]
fn forged_meet_is_dropped() {
    let (node, _l) = start_with_peer("5000");
    let mut link = bus_link(&node);
    let stranger = name("4444444444444444444444444444444444444444");
    let f = frame(
        msg::TYPE_MEET,
        stranger,
        "10.9.9.9\ngarbage",
        4141,
        vec![],
        vec![],
    );
    assert_dropped(&node, &mut link, &f, "garbage", "MEET myip");
    // A sender name that is not a node id (verifyClusterNodeId: 40 of [a-z0-9]).
    for bad in [
        "ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ",
        "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\n\n",
        "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz z",
    ] {
        let f = frame(msg::TYPE_MEET, name(bad), "", 4242, vec![], vec![]);
        assert_dropped(&node, &mut link, &f, ":4242@", "MEET sender name");
    }
    // Control: a valid MEET from the same socket starts a handshake.
    let f = frame(msg::TYPE_MEET, stranger, "", 4343, vec![], vec![]);
    assert_accepted(&node, &mut link, &f, "127.0.0.1:4343@1");
    // Handshake nodes are never saved, the rest must still load.
    assert_eq!(cluster(&node, "SAVECONFIG"), "OK");
}

#[test]
fn gossip_about_a_bad_third_node_is_dropped() {
    let (mut node, l) = start_with_peer("5000");
    let mut link = bus_link(&node);
    let third = name("2222222222222222222222222222222222222222");
    let f = peer_ping(vec![gossip(third, "10.9.9.9\ngarbage", 7001)], vec![]);
    assert_dropped(&node, &mut link, &f, "2222222222", "gossip ip");
    for bad in [
        "XYZWXYZWXYZWXYZWXYZWXYZWXYZWXYZWXYZWXYZW",
        "2222222222222222222222222222222222222 ,\n",
    ] {
        let f = peer_ping(vec![gossip(name(bad), "127.0.0.1", 7002)], vec![]);
        assert_dropped(&node, &mut link, &f, ":7002@", "gossip name");
    }
    // Control: a valid third node is learned from PEER's gossip.
    let good = name("3333333333333333333333333333333333333333");
    let f = peer_ping(vec![gossip(good, "127.0.0.1", 7003)], vec![]);
    assert_accepted(&node, &mut link, &f, "127.0.0.1:7003@7003");
    assert_eq!(cluster(&node, "SAVECONFIG"), "OK");
    drop(link);
    restart(&mut node, &l);
    let nodes = cluster(&node, "NODES");
    assert!(nodes.contains("3333333333333333333333333333333333333333 127.0.0.1:7003@7003"));
    assert!(!nodes.contains("2222222222"), "{nodes}");
}

#[test]
fn bad_ping_extensions_are_dropped() {
    let (mut node, l) = start_with_peer("5000");
    let mut link = bus_link(&node);
    // Each frame also carries a valid hostname: had the frame been processed, PEER would
    // show it.
    let bad: Vec<(&str, Ext)> = vec![
        (
            "hostname with a newline",
            Ext::Hostname(b"bad\nhost".to_vec()),
        ),
        ("hostname with a space", Ext::Hostname(b"bad host".to_vec())),
        (
            "hostname with @ and :",
            Ext::Hostname(b"evil@host:1".to_vec()),
        ),
        ("hostname with a comma", Ext::Hostname(b"a,b".to_vec())),
        (
            "shard id not hex",
            Ext::ShardId(name("not hex! not hex! not hex! not hex! not ")),
        ),
        ("shard id upper case", Ext::ShardId(name(&"A".repeat(40)))),
        (
            "human nodename with a newline",
            Ext::HumanNodename(b"one\ntwo".to_vec()),
        ),
        (
            "forgotten node name not an id",
            Ext::ForgottenNode {
                name: name(&"!".repeat(40)),
                ttl: 10,
            },
        ),
    ];
    for (i, (what, ext)) in bad.into_iter().enumerate() {
        let marker = format!("marker-{i}");
        let f = peer_ping(
            vec![],
            vec![Ext::Hostname(marker.clone().into_bytes()), ext],
        );
        assert_dropped(&node, &mut link, &f, &marker, what);
    }
    // Control: valid extensions are taken.
    let f = peer_ping(
        vec![],
        vec![
            Ext::Hostname(b"good-host.example".to_vec()),
            Ext::ShardId(name(&"ab".repeat(20))),
        ],
    );
    assert_accepted(&node, &mut link, &f, ",good-host.example ");
    assert_eq!(cluster(&node, "SAVECONFIG"), "OK");
    drop(link);
    restart(&mut node, &l);
    assert!(cluster(&node, "NODES").contains(",good-host.example "));
}

#[test]
fn cluster_meet_with_a_bad_address_is_refused() {
    let node = Node::start_with(&["--cluster-enabled", "yes"]);
    let mut c = node.client();
    for ip in ["10.9.9.9\ngarbage", "not-an-ip", "999.1.1.1"] {
        let err = redis::cmd("CLUSTER")
            .arg("MEET")
            .arg(ip)
            .arg(7000)
            .query::<String>(&mut c)
            .expect_err("MEET with a bad ip");
        // CR/LF in an error line become spaces (as redis's addReplyErrorFormat does).
        let shown = ip.replace('\n', " ");
        assert!(
            err.to_string()
                .contains(&format!("Invalid node address specified: {shown}:7000")),
            "{err}"
        );
    }
    assert!(!cluster(&node, "NODES").contains("garbage"));
}

#[test]
fn nodes_conf_with_a_bad_address_is_refused_at_load() {
    for (line, why) in [
        (
            format!("{PEER} not-an-ip:1@1 master - 0 0 0 connected"),
            "ip",
        ),
        (
            format!("{PEER} 127.0.0.1:1@1,bad@host master - 0 0 0 connected"),
            "hostname",
        ),
        (
            format!("{} 127.0.0.1:1@1 master - 0 0 0 connected", "X".repeat(40)),
            "name",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("nodes.conf"),
            format!(
                "{ME} 127.0.0.1:0@0 myself,master - 0 0 0 connected\n{line}\n\
                 vars currentEpoch 0 lastVoteEpoch 0\n"
            ),
        )
        .expect("write nodes.conf");
        let exit = launch("5000").run_to_exit(dir.path(), Duration::from_secs(20));
        let status = exit.status;
        let log = std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
        let err = exit.output;
        assert!(
            status.is_some_and(|s| !s.success()),
            "bad {why} in nodes.conf was loaded"
        );
        assert!(
            format!("{err}{log}").contains("nodes.conf:2"),
            "bad {why}: the error names no line: {err}{log}"
        );
    }
}

/// True once the peer closed `s` (EOF or reset); reads and drops whatever the node sends.
fn is_closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

fn raw_bus(node: &Node) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", node.port + 10000)).expect("connect bus");
    s.set_nonblocking(true).expect("nonblocking");
    s
}

/// The first 8 bytes of a frame declaring `totlen`.
fn prefix(totlen: u32) -> Vec<u8> {
    let mut p = b"RCmb".to_vec();
    p.extend_from_slice(&totlen.to_be_bytes());
    p
}

/// A node that still serves clients and answers a valid PING on a new bus link.
fn assert_node_works(node: &Node) {
    let mut c = node.client();
    assert_eq!(redis::cmd("PING").query::<String>(&mut c).unwrap(), "PONG");
    let mut s = TcpStream::connect(("127.0.0.1", node.port + 10000)).expect("connect bus");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let stranger = name("6666666666666666666666666666666666666666");
    s.write_all(&frame(msg::TYPE_PING, stranger, "", 1, vec![], vec![]))
        .unwrap();
    let mut head = [0u8; 8];
    s.read_exact(&mut head).expect("a PONG on a fresh bus link");
    assert_eq!(&head[..4], b"RCmb");
}

#[test]
fn silent_stalled_and_unidentified_bus_links_are_closed() {
    // Handshake timeout = max(node timeout, 1 s) = 1 s.
    let node = Node::start_with(&["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"]);
    let mut silent = raw_bus(&node);
    let mut stalled = raw_bus(&node);
    let mut p = prefix(msg::HEADER_LEN as u32);
    p.extend_from_slice(&[0u8; 100]);
    stalled.write_all(&p).unwrap();
    // Valid PINGs from a node the server does not know, again and again: never identified.
    let mut stranger = raw_bus(&node);
    let ping = frame(
        msg::TYPE_PING,
        name("7777777777777777777777777777777777777777"),
        "",
        1,
        vec![],
        vec![],
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut open = [true; 3];
    while open.iter().any(|o| *o) && Instant::now() < deadline {
        if open[2] && stranger.write_all(&ping).is_err() {
            open[2] = false;
        }
        for (i, s) in [&mut silent, &mut stalled, &mut stranger]
            .into_iter()
            .enumerate()
        {
            if open[i] && is_closed(s) {
                open[i] = false;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        open, [false; 3],
        "bus links (silent, stalled, unidentified) still open after 15 s"
    );
    assert_node_works(&node);
}

#[test]
fn pending_bus_links_are_bounded() {
    // A long node timeout: only the bound can close these links during the test.
    let node = Node::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        "120000",
    ]);
    let cap = tessera_cluster::state::MAX_PENDING_INBOUND_LINKS;
    let extra = 40;
    let mut links: Vec<TcpStream> = (0..cap + extra).map(|_| raw_bus(&node)).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut closed = 0;
    while Instant::now() < deadline {
        closed = links.iter_mut().map(is_closed).filter(|c| *c).count();
        if closed >= extra {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        closed >= extra,
        "{} silent bus links open, {closed} closed",
        links.len()
    );
    assert_node_works(&node);
}

#[test]
fn oversized_first_frame_closes_the_link() {
    let node = Node::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        "120000",
    ]);
    for totlen in [
        msg::MAX_MSG_LEN as u32 + 1,
        msg::MAX_UNIDENTIFIED_MSG_LEN as u32 + 8,
    ] {
        let mut s = raw_bus(&node);
        let _ = s.write_all(&prefix(totlen));
        let _ = s.write_all(&[0u8; 4096]);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !is_closed(&mut s) {
            assert!(
                Instant::now() < deadline,
                "a first frame declaring {totlen} bytes is still being read"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert_node_works(&node);
}

#[test]
fn peer_epochs_at_the_limit_do_not_overflow() {
    let (node, _l) = start_with_peer("5000");
    // A peer may announce any currentEpoch; the next bump must not overflow it.
    let mut link = bus_link(&node);
    let mut m = msg::decode(&peer_ping(vec![], vec![])).unwrap();
    m.header.current_epoch = u64::MAX;
    link.write_all(&msg::encode(&m)).unwrap();
    wait_for(Duration::from_secs(5), "currentEpoch from the peer", || {
        info_field(&cluster(&node, "INFO"), "cluster_current_epoch")
            .is_some_and(|e| e == u64::MAX.to_string())
    });
    let mut c = node.client();
    let r: String = redis::cmd("CLUSTER")
        .arg("BUMPEPOCH")
        .query(&mut c)
        .unwrap();
    assert!(r.starts_with("BUMPED") || r.starts_with("STILL"), "{r}");
    assert_node_works(&node);
}
