//! LZF compression as used by Redis for RDB strings.
//!
//! Hand-rolled on purpose: the `lzf` crate on crates.io is marked deprecated by its author and
//! `lzf-sys` is an FFI binding that needs a C toolchain and `unsafe`. The format is tiny (literal
//! runs and back references), so a safe, bounds-checked implementation here is the smaller risk.

use crate::error::{RdbError, Result};

const HASH_LOG: u32 = 14;
const MAX_LIT: usize = 32;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

/// Decompresses `input` into exactly `expected_len` bytes; any inconsistency is an error.
pub fn decompress(input: &[u8], expected_len: usize) -> Result<Vec<u8>> {
    // Each input byte expands to at most ~88 output bytes, so capping the reservation by the
    // input size keeps a lying length field from allocating memory the data cannot fill.
    let mut out = Vec::with_capacity(expected_len.min(input.len().saturating_mul(90) + 16));
    let mut ip = 0usize;
    let bad = |d: &str| RdbError::corrupt("LZF string", d.to_string());
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            let lit = input
                .get(ip..ip + run)
                .ok_or_else(|| bad("literal past end"))?;
            if out.len() + run > expected_len {
                return Err(bad("output longer than declared"));
            }
            out.extend_from_slice(lit);
            ip += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(ip).ok_or_else(|| bad("length past end"))? as usize;
                ip += 1;
            }
            let low = *input.get(ip).ok_or_else(|| bad("offset past end"))? as usize;
            ip += 1;
            let back = ((ctrl & 0x1f) << 8) + low + 1;
            if back > out.len() {
                return Err(bad("back reference before start"));
            }
            let len = len + 2;
            if out.len() + len > expected_len {
                return Err(bad("output longer than declared"));
            }
            let start = out.len() - back;
            // Overlapping copies are legal (run-length style), so copy byte by byte.
            for i in 0..len {
                let b = out[start + i];
                out.push(b);
            }
        }
    }
    if out.len() != expected_len {
        return Err(bad("output shorter than declared"));
    }
    Ok(out)
}

fn hash3(b: &[u8], log: u32) -> usize {
    let v = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
    (v.wrapping_mul(2654435761) >> (32 - log)) as usize
}

/// Compresses `input`; returns `None` when the result would not be shorter than `max_len`.
pub fn compress(input: &[u8], max_len: usize) -> Option<Vec<u8>> {
    let n = input.len();
    let mut out: Vec<u8> = Vec::with_capacity(max_len.min(n + n / 16 + 64));
    // The hash table scales with the input (up to 2^HASH_LOG slots), so the many short
    // strings of a snapshot do not each pay for clearing a large table.
    let log = (usize::BITS - n.leading_zeros()).clamp(6, HASH_LOG);
    let mut table = vec![u32::MAX; 1 << log];
    if n >= u32::MAX as usize {
        return None;
    }
    let mut lit_start = 0usize; // start of the pending literal run
    let mut ip = 0usize;

    fn flush_literals(out: &mut Vec<u8>, lits: &[u8]) {
        for chunk in lits.chunks(MAX_LIT) {
            out.push((chunk.len() - 1) as u8);
            out.extend_from_slice(chunk);
        }
    }

    while ip + 2 < n {
        let h = hash3(&input[ip..], log);
        let cand = table[h] as usize;
        table[h] = ip as u32;
        if cand != u32::MAX as usize
            && ip - cand <= MAX_OFF
            && input[cand..cand + 3] == input[ip..ip + 3]
        {
            let max = (n - ip).min(MAX_REF);
            let mut len = 3;
            while len < max && input[cand + len] == input[ip + len] {
                len += 1;
            }
            flush_literals(&mut out, &input[lit_start..ip]);
            let off = ip - cand - 1;
            let l = len - 2;
            if l < 7 {
                out.push(((l << 5) | (off >> 8)) as u8);
            } else {
                out.push(((7 << 5) | (off >> 8)) as u8);
                out.push((l - 7) as u8);
            }
            out.push((off & 0xff) as u8);
            // Index the positions inside the match so later data can refer to them.
            let end = ip + len;
            ip += 1;
            while ip < end && ip + 2 < n {
                table[hash3(&input[ip..], log)] = ip as u32;
                ip += 1;
            }
            ip = end;
            lit_start = ip;
        } else {
            ip += 1;
        }
        if out.len() >= max_len {
            return None;
        }
    }
    flush_literals(&mut out, &input[lit_start..]);
    if out.len() >= max_len {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_repetitive() {
        let data: Vec<u8> = b"abcabcabcabcabcabcabcabc-hello-hello-hello"
            .iter()
            .cycle()
            .take(5000)
            .copied()
            .collect();
        let c = compress(&data, data.len()).expect("compressible");
        assert!(c.len() < data.len() / 4);
        assert_eq!(decompress(&c, data.len()).expect("valid"), data);
    }

    #[test]
    fn incompressible_is_refused() {
        let data: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(7919) >> 3) as u8)
            .collect();
        if let Some(c) = compress(&data, data.len()) {
            assert_eq!(decompress(&c, data.len()).expect("valid"), data);
        }
    }

    proptest::proptest! {
        #[test]
        fn round_trip_any(data in proptest::collection::vec(0u8..4, 0..20000)) {
            if let Some(c) = compress(&data, data.len()) {
                proptest::prop_assert!(c.len() < data.len());
                proptest::prop_assert_eq!(decompress(&c, data.len()).expect("valid"), data);
            }
        }
    }

    #[test]
    fn bad_back_reference_is_error() {
        assert!(decompress(&[0x20, 0x05], 3).is_err());
        assert!(decompress(&[0x05, b'a'], 6).is_err());
    }
}
