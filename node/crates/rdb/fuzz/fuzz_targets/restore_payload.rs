//! Any bytes as a RESTORE payload, both raw and with a valid version + CRC64 footer appended
//! (so the value decoders, not just the checksum check, see the input).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_rdb::{crc64, dump_value, restore_value};

fuzz_target!(|data: &[u8]| {
    let _ = restore_value(data);
    let mut p = data.to_vec();
    p.extend_from_slice(&10u16.to_le_bytes());
    let crc = crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    if let Ok(v) = restore_value(&p) {
        // Whatever decodes must re-encode and decode again; after one pass (which may sort
        // and dedup sets/zsets) encoding is a fixpoint.
        let v2 = restore_value(&dump_value(&v)).expect("re-encoded payload restores");
        let v3 = restore_value(&dump_value(&v2)).expect("re-encoded payload restores");
        assert_eq!(v2, v3);
    }
});
