//! Redis 7 multi-part AOF: the manifest and the incremental (RESP) files.

use tessera_rdb::aof::{has_rdb_preamble, AofCommandReader, AofManifest, AofReadError};
use tessera_rdb::{RdbEvent, RdbReader};

/// `appendonly.aof.manifest`: parsing must not panic, and a manifest the node accepted must
/// read back the same after the node rewrote it (it rewrites it on every AOF rewrite).
pub fn aof_manifest(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(m) = AofManifest::parse(&text) else {
        return;
    };
    let _ = m.load_order().count();
    let written = m.to_string();
    let again = AofManifest::parse(&written)
        .unwrap_or_else(|e| panic!("the manifest the node wrote does not load: {e}\n{written}"));
    assert_eq!(again.base, m.base, "base changed by a rewrite:\n{written}");
    assert_eq!(again.incr, m.incr, "incr changed by a rewrite:\n{written}");
}

/// Most commands read from one file (bounds the time of one input).
const MAX_COMMANDS: usize = 100_000;

/// An AOF file (base or incremental): an optional RDB preamble, then RESP commands.
/// Offsets must only grow and never pass the end of the file; truncation points inside it.
pub fn aof_incr(data: &[u8]) {
    let mut rest = data;
    let mut offset = 0u64;
    if has_rdb_preamble(data) {
        let Ok(mut r) = RdbReader::new(data) else {
            return;
        };
        loop {
            match r.next_event() {
                Ok(Some(RdbEvent::End { .. })) => break,
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return,
            }
        }
        offset = r.position();
        rest = r.into_inner();
    }
    let len = data.len() as u64;
    let mut reader = AofCommandReader::with_offset(rest, offset);
    let mut last = offset;
    for _ in 0..MAX_COMMANDS {
        match reader.next_command() {
            Ok(Some(_args)) => {
                assert!(reader.offset() > last && reader.offset() <= len);
                last = reader.offset();
            }
            Ok(None) => break,
            Err(AofReadError::Truncated { valid_up_to }) => {
                assert!(valid_up_to >= offset && valid_up_to <= len);
                break;
            }
            Err(AofReadError::Corrupt { offset: at, .. }) => {
                assert!(at <= len);
                break;
            }
            Err(AofReadError::Io(e)) => panic!("i/o error reading a slice: {e}"),
        }
    }
}
