//! Fuzzes the RESP request parser: arbitrary bytes, fed in two chunks, must never panic,
//! and every parsed request must leave the buffer consistent.
#![no_main]

use bytes::{Buf, BytesMut};
use libfuzzer_sys::fuzz_target;
use tessera_node::resp::{Limits, Parser};

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let split = data[0] as usize % data.len();
    let mut p = Parser::new();
    let mut buf = BytesMut::new();
    let lim = Limits {
        max_bulk: 1 << 20,
        authenticated: data[0] & 1 == 0,
    };
    for chunk in [&data[1..split.max(1)], &data[split.max(1)..]] {
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
});
