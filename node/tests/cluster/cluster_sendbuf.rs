//! cluster-link-sendbuf-limit (Redis 7.0): a peer that completes the handshake and then
//! never reads must not make the node's memory grow without bound. The node frees the link
//! once its unsent bytes pass the limit and counts it in CLUSTER INFO.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use redis::Commands;
use tessera_cluster::msg::{self, Body, Header, Message};
use tessera_testkit::cluster::*;
use tessera_testkit::*;

const FAKE: &[u8; 40] = b"fa4efa4efa4efa4efa4efa4efa4efa4efa4efa4e";

/// Reads one bus frame from `s`.
fn read_frame(s: &mut TcpStream) -> Message {
    let mut head = [0u8; 8];
    s.read_exact(&mut head).expect("frame prefix");
    let len = msg::frame_len(&head).expect("frame length");
    let mut buf = head.to_vec();
    buf.resize(len, 0);
    s.read_exact(&mut buf[8..]).expect("frame body");
    msg::decode(&buf).expect("decodes")
}

#[test]
fn a_peer_that_stops_reading_gets_its_link_freed() {
    let node = Proc::cluster(tessera_bin(), "127.0.0.1", 5000);
    assert_eq!(
        node.cli(&["CONFIG", "SET", "cluster-link-sendbuf-limit", "256kb"])
            .trim(),
        "OK"
    );
    assert!(node
        .cli(&["CONFIG", "GET", "cluster-link-sendbuf-limit"])
        .contains("262144"));
    assert_eq!(
        node.cluster_info("total_cluster_links_buffer_limit_exceeded"),
        "0"
    );
    // The fake peer: an ephemeral loopback port, no fixed port needed.
    let lst = TcpListener::bind("127.0.0.1:0").expect("bind fake bus");
    let fport = lst.local_addr().expect("addr").port();
    let meet = node.cli(&[
        "CLUSTER",
        "MEET",
        "127.0.0.1",
        &fport.to_string(),
        &fport.to_string(),
    ]);
    assert_eq!(meet.trim(), "OK");
    lst.set_nonblocking(false).ok();
    let (mut s, _) = lst.accept().expect("the node dials the fake peer");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let m = read_frame(&mut s);
    assert_eq!(m.header.ty, msg::TYPE_MEET);
    let pong = Message {
        header: Header {
            ty: msg::TYPE_PONG,
            port: fport,
            cport: fport,
            sender: *FAKE,
            myip: "127.0.0.1".into(),
            flags: msg::FLAG_MASTER,
            ..Header::default()
        },
        body: Body::Gossip {
            entries: Vec::new(),
            exts: Vec::new(),
        },
    };
    s.write_all(&msg::encode(&pong)).expect("send PONG");
    let fake = std::str::from_utf8(FAKE).expect("ascii");
    wait_for(Duration::from_secs(20), "the fake peer to be known", || {
        node.nodes()
            .iter()
            .any(|l| l.starts_with(fake) && !l.contains("handshake"))
    });
    // From now on the fake never reads: PUBLISH broadcasts pile up on its link.
    let mut con = node.client();
    let payload = vec![b'x'; 64 * 1024];
    let start = Instant::now();
    let mut sent = 0;
    while node.cluster_info("total_cluster_links_buffer_limit_exceeded") == "0" {
        assert!(
            sent < 2000 && start.elapsed() < Duration::from_secs(120),
            "link never freed after {sent} publishes"
        );
        for _ in 0..20 {
            let _: i64 = con.publish("flood", &payload[..]).expect("publish");
        }
        sent += 20;
    }
    // The freed link's queue is gone: no link to the fake holds more than the limit.
    let links = node.cli(&["CLUSTER", "LINKS"]);
    let lines: Vec<&str> = links.lines().map(str::trim).collect();
    for w in lines.windows(2) {
        if w[0] == "send-buffer-allocated" {
            let v: u64 = w[1].parse().expect("a number");
            assert!(v <= 262_144 + 2 * 70 * 1024, "{links}");
        }
    }
    drop(s);
}
