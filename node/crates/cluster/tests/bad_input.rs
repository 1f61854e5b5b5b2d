//! A bus peer sending garbage is disconnected and the node keeps working.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use common::*;
use tessera_cluster::msg::*;

/// Sends `bytes`, optionally half-closes, and returns true if the node closed the link.
fn node_closes_after(bus_port: u16, bytes: &[u8], half_close: bool) -> bool {
    let mut s = TcpStream::connect(("127.0.0.1", bus_port)).expect("connect to bus");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(bytes).expect("write");
    if half_close {
        let _ = s.shutdown(Shutdown::Write);
    }
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            // A reply (e.g. PONG) is fine; keep reading until the close.
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

fn ping_bytes() -> Vec<u8> {
    let h = Header {
        ty: TYPE_PING,
        sender: *b"0123456789012345678901234567890123456789",
        ..Default::default()
    };
    encode(&Message {
        header: h,
        body: Body::Gossip {
            entries: vec![],
            exts: vec![],
        },
    })
}

#[test]
fn garbage_on_the_bus_drops_the_link_and_nothing_panics() {
    let ours = TestNode::start(2000);
    let bus = ours.port + 10000;

    let mut wrong_sig = ping_bytes();
    wrong_sig[..4].copy_from_slice(b"RCmX");
    assert!(node_closes_after(bus, &wrong_sig, false), "wrong signature");

    let mut short_totlen = ping_bytes();
    short_totlen[4..8].copy_from_slice(&100u32.to_be_bytes());
    assert!(
        node_closes_after(bus, &short_totlen, false),
        "totlen below header size"
    );

    let mut huge_totlen = ping_bytes();
    huge_totlen[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(
        node_closes_after(bus, &huge_totlen, false),
        "totlen above the limit"
    );

    let mut big_count = ping_bytes();
    big_count[14..16].copy_from_slice(&65535u16.to_be_bytes());
    assert!(
        node_closes_after(bus, &big_count, false),
        "count larger than the message"
    );

    let mut bad_ext = ping_bytes();
    bad_ext[2214..2216].copy_from_slice(&3u16.to_be_bytes());
    bad_ext[2253] |= MFLAG0_EXT_DATA;
    assert!(
        node_closes_after(bus, &bad_ext, false),
        "extensions that do not fit"
    );

    let truncated = &ping_bytes()[..1000];
    assert!(
        node_closes_after(bus, truncated, true),
        "truncated message then EOF"
    );

    // Deterministic pseudo-random garbage (xorshift), some of it starting with a valid prefix.
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for round in 0..20 {
        let mut junk = Vec::new();
        for _ in 0..(100 + round * 300) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            junk.push(x as u8);
        }
        if round % 2 == 1 {
            junk[..4].copy_from_slice(b"RCmb");
            junk[4..8].copy_from_slice(&(2256u32 + round as u32).to_be_bytes());
        }
        assert!(
            node_closes_after(bus, &junk, true),
            "random bytes round {round}"
        );
    }

    // All those links are gone from the state, and the node still works with a real peer.
    wait_for(Duration::from_secs(10), "bad links to be released", || {
        ours.node().with_state(|st| st.links.is_empty())
    });
    let r = ServerProc::start(redis_bin(), 2000);
    assert_eq!(
        ours.cluster_str(&["MEET", "127.0.0.1", &r.port.to_string()]),
        "OK"
    );
    let ids = vec![ours.myid(), r.myid()];
    wait_for(
        Duration::from_secs(30),
        "node still joins a real cluster",
        || sees_all_connected(&ours.nodes(), &ids) && sees_all_connected(&r.nodes(), &ids),
    );
}
