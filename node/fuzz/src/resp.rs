//! The RESP / inline request parser, fed in two chunks.

use bytes::{Buf, BytesMut};
use tessera_node::resp::{Limits, Parser};

/// Arbitrary bytes, split in two reads at a point the first byte chooses, must never panic,
/// every parsed request must leave the buffer consistent, and the requests (and the error
/// that ends them, if any) must be the same as when all the bytes arrive in one read: the
/// parser resumes a line cut by a read on its general path, and reads a whole header line
/// on its one-pass path.
pub fn request_parser(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let split = if rest.is_empty() {
        0
    } else {
        first as usize % rest.len()
    };
    let lim = Limits {
        max_bulk: 1 << 20,
        authenticated: first & 1 == 0,
    };
    let in_two = parse_reads(&[&rest[..split], &rest[split..]], lim);
    let in_one = parse_reads(&[rest], lim);
    assert_eq!(in_two, in_one, "split at {split}");
}

/// What one connection's parser makes of `reads`, arriving in that order: each complete
/// request's arguments, then the protocol error that stopped it (None if none did).
type Parsed = (Vec<Vec<Vec<u8>>>, Option<String>);

fn parse_reads(reads: &[&[u8]], lim: Limits) -> Parsed {
    let mut p = Parser::new();
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    for chunk in reads {
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
                    requests.push(args.iter().map(|a| a.to_vec()).collect());
                    buf.advance(len);
                }
                Ok(None) => break,
                Err(e) => return (requests, Some(e.to_string())),
            }
        }
    }
    (requests, None)
}
