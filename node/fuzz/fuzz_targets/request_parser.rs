//! Fuzzes the RESP request parser: arbitrary bytes, fed in two chunks, must never panic,
//! and every parsed request must leave the buffer consistent.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use tessera_node::resp::{Limits, Parser};

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let split = data[0] as usize % data.len();
    let mut p = Parser::new();
    let mut buf = BytesMut::new();
    let mut args = Vec::new();
    let lim = Limits {
        max_bulk: 1 << 20,
        authenticated: data[0] & 1 == 0,
    };
    for chunk in [&data[1..split.max(1)], &data[split.max(1)..]] {
        buf.extend_from_slice(chunk);
        loop {
            let before = buf.len();
            match p.parse(&mut buf, &mut args, lim) {
                Ok(true) => assert!(buf.len() < before || args.is_empty()),
                Ok(false) => break,
                Err(_) => return,
            }
        }
    }
});
