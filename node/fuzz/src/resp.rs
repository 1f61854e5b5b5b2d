//! The RESP / inline request parser, fed in two chunks.

use bytes::{Buf, BytesMut};
use tessera_node::resp::{Limits, Parser};

/// Arbitrary bytes, split in two reads at a point the first byte chooses, must never panic,
/// and every parsed request must leave the buffer consistent.
pub fn request_parser(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let split = if rest.is_empty() {
        0
    } else {
        first as usize % rest.len()
    };
    let mut p = Parser::new();
    let mut buf = BytesMut::new();
    let lim = Limits {
        max_bulk: 1 << 20,
        authenticated: first & 1 == 0,
    };
    for chunk in [&rest[..split], &rest[split..]] {
        buf.extend_from_slice(chunk);
        loop {
            match p.parse(&buf, lim) {
                Ok(Some(len)) => {
                    // A request occupies at least one byte of the buffer, and its arguments
                    // (views of it, or inline words unquoted from it) fit inside.
                    assert!(len > 0 && len <= buf.len());
                    let mut args = Vec::new();
                    p.args(&buf, &mut args);
                    assert!(args.iter().map(|a| a.len()).sum::<usize>() <= len);
                    buf.advance(len);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
}
