//! The cluster bus: nodes.conf, the message codec, and the state machine driven by messages.

use tessera_cluster::commands;
use tessera_cluster::msg::{self, Body, Ext, Gossip, Header, Message, Name, NAME_LEN};
use tessera_cluster::nodes_conf;
use tessera_cluster::state::{ClusterState, Out};
use tessera_cluster::{ClusterConfig, NullHost};

use crate::Input;

fn config() -> ClusterConfig {
    ClusterConfig {
        enabled: true,
        port: 7000,
        ..ClusterConfig::default()
    }
}

/// What a restart must survive: the nodes.conf the node writes for a state loads again, and
/// from then on reloading changes nothing (the first save may still carry run-time fields,
/// such as ping times, that a load resets).
fn check_saved(st: &ClusterState) {
    let reload = |text: &str| {
        nodes_conf::parse(text, "nodes.conf", config(), 1, 2)
            .unwrap_or_else(|e| panic!("the node's own nodes.conf does not load: {e}\n{text}"))
    };
    let first = nodes_conf::render(&reload(&nodes_conf::render(st)));
    let second = nodes_conf::render(&reload(&first));
    assert_eq!(second, first, "nodes.conf changed by a reload");
}

/// nodes.conf as the node loads it at startup (valid UTF-8 only: `load` refuses the rest).
/// What loads must write back a file that loads to the same state.
pub fn nodes_conf(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(st) = nodes_conf::parse(text, "nodes.conf", config(), 1, 1) else {
        return;
    };
    // Both views: a TLS client's and a plaintext one's (plaintext ports of a TLS bus).
    for pp in [false, true] {
        let _ = nodes_conf::nodes_text(&st, false, pp);
        let _ = commands::slots_reply(&st, pp);
    }
    let _ = commands::info(&st);
    let _ = commands::shards_reply(&st);
    check_saved(&st);
}

/// One bus frame as read off a link: the length check of its first 8 bytes, then decode.
/// A decoded message survives encode/decode, and a fresh node
/// that receives it on an inbound link must not panic.
pub fn bus_msg(data: &[u8]) {
    if msg::frame_len(data).is_err() {
        return;
    }
    let Ok(m) = msg::decode(data) else {
        return;
    };
    // Encoding normalises (e.g. the extension flag of a message without extensions); from
    // then on a round trip must change nothing.
    let once = msg::decode(&msg::encode(&m)).expect("an encoded message decodes");
    let twice = msg::decode(&msg::encode(&once)).expect("an encoded message decodes");
    assert!(
        once == twice,
        "encode/decode of a type {} message is not stable",
        m.header.ty
    );
    let mut st = ClusterState::new(config(), 1_000_000, 1);
    let link = st.link_accepted(1_000_000);
    st.process(link, m, "127.0.0.1", "127.0.0.1", 1_000_000);
    st.cron(1_000_100);
}

/// Names the fuzzed messages talk about: a few fixed peers (and, at run time, ourselves).
const PEERS: [Name; 4] = [
    [b'a'; NAME_LEN],
    [b'b'; NAME_LEN],
    [b'c'; NAME_LEN],
    [b'd'; NAME_LEN],
];

/// Addresses a hostile peer might announce (and a slot for arbitrary bytes).
const IPS: [&str; 8] = [
    "",
    "127.0.0.1",
    "127.0.0.2",
    "::1",
    "10.9.9.9\ngarbage",
    "a b:c@d",
    "255.255.255.255",
    "",
];

fn name(inp: &mut Input<'_>, myself: &Name) -> Name {
    match inp.u8() % 6 {
        4 => *myself,
        5 => [0u8; NAME_LEN],
        i => PEERS[i as usize],
    }
}

fn ip(inp: &mut Input<'_>) -> String {
    let i = inp.u8() as usize % (IPS.len() + 1);
    match IPS.get(i) {
        Some(s) => s.to_string(),
        None => String::from_utf8_lossy(inp.short())
            .chars()
            .take(45)
            .collect(),
    }
}

/// A message built field by field from the input, so that the fuzzer reaches the state
/// machine's branches without having to find 2 KB valid frames.
fn message(inp: &mut Input<'_>, myself: &Name) -> Message {
    let ty = u16::from(inp.u8() % 11);
    let mut slots = Box::new([0u8; msg::SLOTS_BYTES]);
    let first = inp.u16() as usize % msg::SLOTS;
    let count = inp.u8() as usize * 64;
    for s in first..(first + count).min(msg::SLOTS) {
        msg::bitmap_set(&mut slots, s);
    }
    let header = Header {
        ty,
        port: 7000 + u16::from(inp.u8() % 4),
        current_epoch: u64::from(inp.u8() % 8),
        config_epoch: u64::from(inp.u8() % 8),
        offset: u64::from(inp.u8()),
        sender: name(inp, myself),
        slots,
        slaveof: name(inp, myself),
        myip: ip(inp),
        pport: 0,
        cport: 17000 + u16::from(inp.u8() % 4),
        flags: inp.u16() & 0x3ff,
        state: inp.u8() & 1,
        mflags: [inp.u8() & 7, 0, 0],
    };
    let body = match ty {
        msg::TYPE_PING | msg::TYPE_PONG | msg::TYPE_MEET => {
            let mut entries = Vec::new();
            for _ in 0..inp.u8() % 4 {
                entries.push(Gossip {
                    name: name(inp, myself),
                    ping_sent: u32::from(inp.u8()),
                    pong_received: u32::from(inp.u8()),
                    ip: ip(inp),
                    port: 7000 + u16::from(inp.u8() % 4),
                    cport: 17000 + u16::from(inp.u8() % 4),
                    flags: inp.u16() & 0x3ff,
                    pport: 0,
                });
            }
            let mut exts = Vec::new();
            for _ in 0..inp.u8() % 3 {
                exts.push(match inp.u8() % 5 {
                    0 => Ext::Hostname(inp.short().to_vec()),
                    1 => Ext::HumanNodename(inp.short().to_vec()),
                    2 => Ext::ForgottenNode {
                        name: name(inp, myself),
                        ttl: u64::from(inp.u8()),
                    },
                    3 => Ext::ShardId(name(inp, myself)),
                    _ => Ext::Unknown {
                        ty: inp.u16(),
                        payload: inp.short().to_vec(),
                    },
                });
            }
            Body::Gossip { entries, exts }
        }
        msg::TYPE_FAIL => Body::Fail {
            name: name(inp, myself),
        },
        msg::TYPE_UPDATE => Body::Update {
            config_epoch: u64::from(inp.u8() % 8),
            name: name(inp, myself),
            slots: Box::new(*header.slots),
        },
        msg::TYPE_PUBLISH | msg::TYPE_PUBLISHSHARD => Body::Publish {
            channel: inp.short().to_vec(),
            message: inp.short().to_vec(),
        },
        msg::TYPE_MODULE => Body::Raw(inp.short().to_vec()),
        _ => Body::Empty,
    };
    Message { header, body }
}

/// A CLUSTER subcommand with arguments chosen by the input.
fn command(inp: &mut Input<'_>, myself: &Name) -> Vec<Vec<u8>> {
    let peer = name(inp, myself).to_vec();
    let slot = (inp.u16() % 16384).to_string().into_bytes();
    let word = |s: &str| s.as_bytes().to_vec();
    match inp.u8() % 16 {
        0 => vec![word("nodes")],
        1 => vec![word("info")],
        2 => vec![word("slots")],
        3 => vec![word("shards")],
        4 => vec![word("links")],
        5 => vec![word("meet"), ip(inp).into_bytes(), word("7001")],
        6 => vec![word("addslots"), slot],
        7 => vec![word("delslots"), slot],
        8 => vec![word("setslot"), slot, word("node"), peer],
        9 => vec![word("setslot"), slot, word("migrating"), peer],
        10 => vec![word("setslot"), slot, word("importing"), peer],
        11 => vec![word("forget"), peer],
        12 => vec![word("replicate"), peer],
        13 => vec![word("count-failure-reports"), peer],
        14 => vec![
            word("failover"),
            word(if inp.u8() & 1 == 0 {
                "force"
            } else {
                "takeover"
            }),
        ],
        _ => vec![word(if inp.u8() & 1 == 0 {
            "reset"
        } else {
            "bumpepoch"
        })],
    }
}

/// Most operations one input drives (bounds its time).
const MAX_OPS: usize = 200;

/// The state machine of one node, driven through its links by a sequence of operations the
/// input chooses: messages (built field by field, or raw frames), cron ticks, links opening
/// and closing, CLUSTER commands. Nothing may panic, and the nodes.conf it would save must
/// load again (a peer must not be able to stop the node from restarting).
pub fn bus_state(data: &[u8]) {
    let mut inp = Input::new(data);
    let mut now = 1_000_000u64;
    let mut st = ClusterState::new(config(), now, u64::from(inp.u8()));
    let myself = st.myself;
    let mut links = vec![st.link_accepted(now)];
    for _ in 0..MAX_OPS {
        if inp.is_empty() {
            break;
        }
        let link = links[inp.u8() as usize % links.len()];
        match inp.u8() % 10 {
            0..=3 => {
                let m = message(&mut inp, &myself);
                st.process(link, m, "127.0.0.1", "127.0.0.1", now);
            }
            4 => {
                let len = inp.u16() as usize;
                if let Ok(m) = msg::decode(inp.bytes(len)) {
                    st.process(link, m, "127.0.0.1", "127.0.0.1", now);
                }
            }
            5 => {
                now += u64::from(inp.u8()) * 100;
                st.cron(now);
            }
            6 => links.push(st.link_accepted(now)),
            7 => {
                if inp.u8() & 1 == 0 {
                    st.link_connected(link, now);
                } else {
                    st.link_closed(link, now);
                }
            }
            _ => {
                let args = command(&mut inp, &myself);
                let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                // A TLS client or a plaintext one, as the input has it.
                let tls_client = args.len().is_multiple_of(2);
                let _ = commands::execute(&mut st, &NullHost, &args, now, tls_client);
            }
        }
        // The bus side: outbound links it would dial become links we can drive.
        for o in std::mem::take(&mut st.out) {
            if let Out::Connect { link, .. } = o {
                links.push(link);
            }
        }
        st.update_state(now);
    }
    let _ = nodes_conf::nodes_text(&st, false, true);
    let _ = commands::info(&st);
    check_saved(&st);
}
