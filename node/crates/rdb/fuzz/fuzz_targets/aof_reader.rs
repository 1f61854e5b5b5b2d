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
            let text = m.to_string();
            // Quoting can push a line past the 1024-byte limit Redis also enforces.
            if text.lines().all(|l| l.len() <= 1024) {
                let again = AofManifest::parse(&text).expect("written manifest parses");
                assert_eq!(again, m);
            }
        }
    }
});
