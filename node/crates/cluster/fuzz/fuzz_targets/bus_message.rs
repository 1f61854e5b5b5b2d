//! Fuzzes the cluster-bus message parser: `cargo +nightly fuzz run bus_message`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_cluster::msg::{decode, encode, frame_len};

fuzz_target!(|data: &[u8]| {
    // The framing check must agree with the full decoder about the length.
    if let Ok(totlen) = frame_len(data) {
        if data.len() >= totlen {
            if let Ok(m) = decode(&data[..totlen]) {
                // Whatever we accept we can re-encode, and that encoding decodes again.
                let again = encode(&m);
                assert!(decode(&again).is_ok());
            }
        }
    }
    let _ = decode(data);
});
