//! The replica side of the replication stream: what a (possibly fake) master sends.

use tessera_node::repl::decoder::{Decoder, Event, RdbLen, StreamLimits};

/// Most events decoded from one input (bounds its time).
const MAX_EVENTS: usize = 100_000;

/// Bytes from a master, as the replica's link decodes them: the replies to the handshake,
/// the PSYNC reply, the RDB payload, then the command stream. The first byte says how many
/// handshake replies come before PSYNC's and whether the limits are small; the second, the
/// size of the reads the bytes arrive in. The payload must be exactly what the header
/// declared, it is loaded as the replica loads it, and commands fit in their span.
pub fn repl_stream(data: &[u8]) {
    let [mode, chunk, rest @ ..] = data else {
        return;
    };
    let handshake_replies = usize::from(mode % 5);
    let limits = if mode & 0x80 != 0 {
        StreamLimits::new(64, 256)
    } else {
        StreamLimits::default()
    };
    let chunk = usize::from(*chunk).max(1);
    let mut dec = Decoder::new(limits);
    let mut replies = 0;
    let mut declared = None;
    let mut rdb = Vec::new();
    let mut events = 0;
    if handshake_replies == 0 {
        dec.expect_psync();
    }
    for piece in rest.chunks(chunk) {
        dec.feed(piece);
        loop {
            events += 1;
            if events > MAX_EVENTS {
                return;
            }
            let mut args = Vec::new();
            let ev = match dec.next(&mut args) {
                Ok(Some(ev)) => ev,
                Ok(None) => break,
                Err(e) => {
                    // A failed decoder stays failed.
                    let mut again = Vec::new();
                    assert_eq!(dec.next(&mut again).err(), Some(e));
                    return;
                }
            };
            match ev {
                Event::Reply { .. } => {
                    replies += 1;
                    if replies == handshake_replies {
                        dec.expect_psync();
                    }
                }
                Event::FullResync { replid, .. } => assert_eq!(replid.len(), 40),
                Event::Continue { replid } => {
                    assert!(replid.is_none_or(|r| r.len() == 40));
                }
                Event::RdbStart(len) => declared = Some(len),
                Event::RdbData(b) => {
                    assert!(!b.is_empty());
                    rdb.extend_from_slice(b);
                }
                Event::RdbEnd => {
                    if let Some(RdbLen::Sized(n)) = declared {
                        assert_eq!(rdb.len() as u64, n, "payload length differs from $<len>");
                    }
                    crate::rdb::rdb_file(&rdb);
                    rdb.clear();
                }
                Event::Command { len } => {
                    assert!(len > 0);
                    assert!(args.iter().map(|a| a.len()).sum::<usize>() <= len);
                }
            }
        }
    }
}
