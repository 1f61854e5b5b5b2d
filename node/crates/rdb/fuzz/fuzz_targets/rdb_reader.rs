//! Any bytes as an RDB file: the reader must return events or an error, never panic. The
//! input is read twice, as given and with a valid header prepended, so mutations reach the
//! body quickly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_rdb::RdbReader;

fn drain(data: &[u8]) {
    if let Ok(r) = RdbReader::new(data) {
        for ev in r {
            if ev.is_err() {
                break;
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    drain(data);
    let mut with_header = b"REDIS0010".to_vec();
    with_header.extend_from_slice(data);
    drain(&with_header);
});
