//! Any bytes as an AOF file: commands, truncation or corruption, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_rdb::aof::{AofCommandReader, AofManifest};

fuzz_target!(|data: &[u8]| {
    for cmd in AofCommandReader::new(data) {
        if cmd.is_err() {
            break;
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(m) = AofManifest::parse(text) {
            let again = AofManifest::parse(&m.to_string()).expect("written manifest parses");
            assert_eq!(again, m);
        }
    }
});
