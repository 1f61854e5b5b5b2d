//! Property tests of the RCmb codec: round trips, and no panic / no over-allocation on
//! arbitrary or mutated input.

use proptest::prelude::*;
use tessera_cluster::msg::*;

fn name() -> impl Strategy<Value = Name> {
    proptest::collection::vec(proptest::sample::select(b"0123456789abcdef".to_vec()), 40)
        .prop_map(|v| v.try_into().expect("40 bytes"))
}

fn ip() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[0-9a-f:.]{1,45}"]
}

fn header(ty: u16) -> impl Strategy<Value = Header> {
    (
        (
            any::<u16>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            name(),
        ),
        (
            proptest::collection::vec(any::<u8>(), SLOTS_BYTES),
            prop_oneof![Just([0u8; 40]), name()],
            ip(),
        ),
        (
            any::<u16>(),
            any::<u16>(),
            any::<u16>(),
            0u8..2,
            any::<[u8; 3]>(),
        ),
    )
        .prop_map(
            move |(
                (port, ce, cfe, off, sender),
                (slots, slaveof, myip),
                (pport, cport, flags, state, mut mflags),
            )| {
                let mut s = Box::new([0u8; SLOTS_BYTES]);
                s.copy_from_slice(&slots);
                mflags[0] &= !MFLAG0_EXT_DATA;
                Header {
                    ty,
                    port,
                    current_epoch: ce,
                    config_epoch: cfe,
                    offset: off,
                    sender,
                    slots: s,
                    slaveof,
                    myip,
                    pport,
                    cport,
                    flags,
                    state,
                    mflags,
                }
            },
        )
}

fn gossip() -> impl Strategy<Value = Gossip> {
    (
        name(),
        any::<u32>(),
        any::<u32>(),
        ip(),
        any::<u16>(),
        any::<u16>(),
        any::<u16>(),
        any::<u16>(),
    )
        .prop_map(
            |(name, ping_sent, pong_received, ip, port, cport, flags, pport)| Gossip {
                name,
                ping_sent,
                pong_received,
                ip,
                port,
                cport,
                flags,
                pport,
            },
        )
}

fn ext() -> impl Strategy<Value = Ext> {
    prop_oneof![
        "[a-z0-9.-]{0,60}".prop_map(|s| Ext::Hostname(s.into_bytes())),
        "[a-z0-9 ]{0,30}".prop_map(|s| Ext::HumanNodename(s.into_bytes())),
        (name(), any::<u64>()).prop_map(|(name, ttl)| Ext::ForgottenNode { name, ttl }),
        name().prop_map(Ext::ShardId),
        (4u16..100, proptest::collection::vec(any::<u8>(), 0..4)).prop_map(|(ty, n)| {
            Ext::Unknown {
                ty,
                // Unknown payloads round-trip only when already 8-aligned.
                payload: n.iter().flat_map(|b| [*b; 8]).collect(),
            }
        }),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (
            prop_oneof![Just(TYPE_PING), Just(TYPE_PONG), Just(TYPE_MEET)],
            proptest::collection::vec(gossip(), 0..8),
            proptest::collection::vec(ext(), 0..5)
        )
            .prop_flat_map(|(ty, entries, exts)| header(ty).prop_map(move |h| {
                let mut h = h;
                if !exts.is_empty() {
                    h.mflags[0] |= MFLAG0_EXT_DATA;
                }
                Message {
                    header: h,
                    body: Body::Gossip {
                        entries: entries.clone(),
                        exts: exts.clone(),
                    },
                }
            })),
        (header(TYPE_FAIL), name()).prop_map(|(h, name)| Message {
            header: h,
            body: Body::Fail { name }
        }),
        (
            header(TYPE_UPDATE),
            any::<u64>(),
            name(),
            proptest::collection::vec(any::<u8>(), SLOTS_BYTES)
        )
            .prop_map(|(h, config_epoch, name, s)| {
                let mut slots = Box::new([0u8; SLOTS_BYTES]);
                slots.copy_from_slice(&s);
                Message {
                    header: h,
                    body: Body::Update {
                        config_epoch,
                        name,
                        slots,
                    },
                }
            }),
        (
            prop_oneof![Just(TYPE_PUBLISH), Just(TYPE_PUBLISHSHARD)],
            proptest::collection::vec(any::<u8>(), 0..50),
            proptest::collection::vec(any::<u8>(), 0..200)
        )
            .prop_flat_map(|(ty, channel, message)| header(ty).prop_map(move |h| {
                Message {
                    header: h,
                    body: Body::Publish {
                        channel: channel.clone(),
                        message: message.clone(),
                    },
                }
            })),
        prop_oneof![
            Just(TYPE_FAILOVER_AUTH_REQUEST),
            Just(TYPE_FAILOVER_AUTH_ACK),
            Just(TYPE_MFSTART)
        ]
        .prop_flat_map(|ty| header(ty).prop_map(|h| Message {
            header: h,
            body: Body::Empty
        })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn round_trip(m in message()) {
        let bytes = encode(&m);
        prop_assert_eq!(frame_len(&bytes).ok(), Some(bytes.len()));
        let back = decode(&bytes).expect("decodes");
        prop_assert_eq!(back, m);
    }

    #[test]
    fn truncation_is_an_error(m in message(), cut in 1usize..64) {
        let bytes = encode(&m);
        let n = bytes.len().saturating_sub(cut);
        prop_assert!(decode(&bytes[..n]).is_err());
    }

    #[test]
    fn mutated_input_never_panics(m in message(), edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..16)) {
        let mut bytes = encode(&m);
        for (at, v) in edits {
            let i = at % bytes.len();
            bytes[i] = v;
        }
        let _ = decode(&bytes);
        // A wrong count must be caught by the length check, not read past the end.
        if let Ok(Message { body: Body::Gossip { entries, .. }, .. }) = decode(&bytes) {
            prop_assert!(HEADER_LEN + entries.len() * GOSSIP_LEN <= bytes.len());
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
        let _ = frame_len(&bytes);
        let _ = decode(&bytes);
    }
}

#[test]
fn oversized_count_is_rejected() {
    let m = Message {
        header: Header {
            ty: TYPE_PING,
            ..Default::default()
        },
        body: Body::Gossip {
            entries: vec![],
            exts: vec![],
        },
    };
    let mut b = encode(&m);
    b[14..16].copy_from_slice(&60000u16.to_be_bytes());
    assert!(matches!(decode(&b), Err(MsgError::LengthMismatch { .. })));
}

#[test]
fn wrong_version_is_rejected() {
    let m = Message {
        header: Header {
            ty: TYPE_MFSTART,
            ..Default::default()
        },
        body: Body::Empty,
    };
    let mut b = encode(&m);
    b[8..10].copy_from_slice(&2u16.to_be_bytes());
    assert_eq!(decode(&b), Err(MsgError::BadVersion(2)));
}

#[test]
fn huge_totlen_is_refused_before_reading() {
    let mut b = b"RCmb".to_vec();
    b.extend_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(frame_len(&b), Err(MsgError::BadTotlen(_))));
}
