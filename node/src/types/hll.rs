//! HyperLogLog in Redis's exact string representation, so values move between tessera-node
//! and redis-server (GET/SET, DUMP/RESTORE, replication) and count the same.
//!
//! Layout: a 16-byte header — `"HYLL"`, encoding (0 dense, 1 sparse), 3 unused bytes, 8 bytes
//! of cached cardinality (little-endian; top bit set = stale) — then either 16384 6-bit
//! registers packed LSB-first (dense) or run-length opcodes ZERO / XZERO / VAL (sparse).
//! Element hashing (MurmurHash64A, seed 0xadc83b19), the sparse update rules (which decide
//! the exact bytes) and the estimator (Ertl's improved estimator) follow Redis 7.0.

use thiserror::Error;

pub const REGISTERS: usize = 16384;
const P: u32 = 14;
const Q: u32 = 64 - P;
const HDR: usize = 16;
const BITS: usize = 6;
const REG_MAX: u8 = 63;
pub const DENSE_SIZE: usize = HDR + (REGISTERS * BITS).div_ceil(8);
const ENC_DENSE: u8 = 0;
const ENC_SPARSE: u8 = 1;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

#[derive(Debug, Error, PartialEq, Eq, Clone, Copy)]
pub enum HllError {
    /// The string is not an HLL at all (Redis answers with a WRONGTYPE error).
    #[error("WRONGTYPE Key is not a valid HyperLogLog string value.")]
    NotHll,
    /// Header is fine but the registers are corrupt.
    #[error("INVALIDOBJ Corrupted HLL object detected")]
    Corrupt,
}

/// MurmurHash64A as used by Redis (little-endian block reads).
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, &b) in rest.iter().enumerate().rev() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// Register index and run length ("pattern length") for an element.
pub fn pat_len(ele: &[u8]) -> (usize, u8) {
    let mut hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    hash >>= P;
    hash |= 1u64 << Q;
    (index, hash.trailing_zeros() as u8 + 1)
}

/// A new, empty HLL as PFADD creates it: sparse, one XZERO covering every register.
pub fn new_sparse() -> Vec<u8> {
    let mut v = Vec::with_capacity(HDR + 2);
    v.extend_from_slice(b"HYLL");
    v.extend_from_slice(&[ENC_SPARSE, 0, 0, 0]);
    v.extend_from_slice(&[0; 8]);
    let l = XZERO_MAX_LEN - 1;
    v.push((l >> 8) as u8 | 0x40);
    v.push((l & 0xff) as u8);
    v
}

/// Checks the header like Redis's `isHLLObjectOrReply`.
pub fn validate(v: &[u8]) -> Result<(), HllError> {
    if v.len() < HDR || &v[..4] != b"HYLL" || v[4] > ENC_SPARSE {
        return Err(HllError::NotHll);
    }
    if v[4] == ENC_DENSE && v.len() != DENSE_SIZE {
        return Err(HllError::NotHll);
    }
    Ok(())
}

pub fn is_dense(v: &[u8]) -> bool {
    v[4] == ENC_DENSE
}

/// Cached cardinality, if still valid.
pub fn cached_card(v: &[u8]) -> Option<u64> {
    if v[15] & 0x80 != 0 {
        return None;
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&v[8..16]);
    Some(u64::from_le_bytes(b))
}

pub fn set_cached_card(v: &mut [u8], card: u64) {
    v[8..16].copy_from_slice(&card.to_le_bytes());
}

pub fn invalidate_cache(v: &mut [u8]) {
    v[15] |= 0x80;
}

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let b0 = regs[byte] as u32;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u32;
    (((b0 >> fb) | (b1 << (8 - fb))) & REG_MAX as u32) as u8
}

fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let v = val as u32;
    regs[byte] &= !((REG_MAX as u32) << fb) as u8;
    regs[byte] |= (v << fb) as u8;
    if let Some(b1) = regs.get_mut(byte + 1) {
        *b1 &= !((REG_MAX as u32) >> (8 - fb)) as u8;
        *b1 |= (v >> (8 - fb)) as u8;
    }
}

/// One decoded sparse opcode.
#[derive(Clone, Copy)]
enum Op {
    Zero(usize),
    XZero(usize),
    Val(u8, usize),
}

fn decode(sp: &[u8], p: usize) -> Result<(Op, usize), HllError> {
    let b = sp[p];
    if b & 0xc0 == 0 {
        Ok((Op::Zero((b & 0x3f) as usize + 1), 1))
    } else if b & 0xc0 == 0x40 {
        let b2 = *sp.get(p + 1).ok_or(HllError::Corrupt)?;
        Ok((Op::XZero((((b & 0x3f) as usize) << 8 | b2 as usize) + 1), 2))
    } else {
        Ok((Op::Val(((b >> 2) & 0x1f) + 1, (b & 3) as usize + 1), 1))
    }
}

fn val_op(val: u8, len: usize) -> u8 {
    (((val - 1) << 2) | (len as u8 - 1)) | 0x80
}

fn push_zero_run(seq: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        let l = len - 1;
        seq.push((l >> 8) as u8 | 0x40);
        seq.push((l & 0xff) as u8);
    } else {
        seq.push((len - 1) as u8);
    }
}

/// Decodes sparse registers into `f(index, value)` for non-zero runs; checks the total.
fn walk_sparse(sp: &[u8], mut f: impl FnMut(usize, u8, usize)) -> Result<(), HllError> {
    let mut idx = 0usize;
    let mut p = 0;
    while p < sp.len() {
        let (op, n) = decode(sp, p)?;
        match op {
            Op::Zero(l) | Op::XZero(l) => idx += l,
            Op::Val(v, l) => {
                if idx + l > REGISTERS {
                    return Err(HllError::Corrupt);
                }
                f(idx, v, l);
                idx += l;
            }
        }
        p += n;
    }
    if idx != REGISTERS {
        return Err(HllError::Corrupt);
    }
    Ok(())
}

/// Converts a sparse HLL to dense in place, keeping the header (and its cached count).
pub fn to_dense(v: &mut Vec<u8>) -> Result<(), HllError> {
    if is_dense(v) {
        return Ok(());
    }
    let mut d = vec![0u8; DENSE_SIZE];
    d[..HDR].copy_from_slice(&v[..HDR]);
    d[4] = ENC_DENSE;
    walk_sparse(&v[HDR..], |idx, val, len| {
        for i in idx..idx + len {
            dense_set(&mut d[HDR..], i, val);
        }
    })?;
    *v = d;
    Ok(())
}

/// Sets register `index` to `count` if larger (Redis's hllSparseSet / hllDenseSet), keeping
/// the exact sparse bytes Redis would produce. Returns whether a register changed.
pub fn set_register(
    v: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max: usize,
) -> Result<bool, HllError> {
    if is_dense(v) {
        let regs = &mut v[HDR..];
        if count > dense_get(regs, index) {
            dense_set(regs, index, count);
            return Ok(true);
        }
        return Ok(false);
    }
    if count > VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    // Step 1: find the opcode covering `index`.
    let sp = &v[HDR..];
    let (mut p, mut first, mut prev) = (0usize, 0usize, None);
    let mut found = None;
    while p < sp.len() {
        let (op, n) = decode(sp, p)?;
        let span = match op {
            Op::Zero(l) | Op::XZero(l) | Op::Val(_, l) => l,
        };
        if index < first + span {
            found = Some((op, n, span));
            break;
        }
        prev = Some(p);
        p += n;
        first += span;
    }
    let Some((op, oplen, span)) = found else {
        return Err(HllError::Corrupt);
    };
    let at = HDR + p;
    // Step 2: the cheap in-place cases.
    match op {
        Op::Val(old, _) if old >= count => return Ok(false),
        Op::Val(_, 1) | Op::Zero(1) => {
            v[at] = val_op(count, 1);
        }
        _ => {
            // General case: split the run into up to three opcodes.
            let last = first + span - 1;
            let mut seq = Vec::with_capacity(5);
            match op {
                Op::Val(cur, _) => {
                    if index != first {
                        seq.push(val_op(cur, index - first));
                    }
                    seq.push(val_op(count, 1));
                    if index != last {
                        seq.push(val_op(cur, last - index));
                    }
                }
                _ => {
                    if index != first {
                        push_zero_run(&mut seq, index - first);
                    }
                    seq.push(val_op(count, 1));
                    if index != last {
                        push_zero_run(&mut seq, last - index);
                    }
                }
            }
            let delta = seq.len() as isize - oplen as isize;
            if delta > 0 && v.len() + delta as usize > sparse_max {
                return promote(v, index, count);
            }
            v.splice(at..at + oplen, seq);
        }
    }
    // Step 4: merge adjacent VAL opcodes with equal values, scanning up to 5 opcodes
    // from the one before the change.
    let mut p = HDR + prev.unwrap_or(0);
    let mut scan = 5;
    while p < v.len() && scan > 0 {
        scan -= 1;
        let b = v[p];
        if b & 0xc0 == 0x40 {
            p += 2;
            continue;
        } else if b & 0xc0 == 0 {
            p += 1;
            continue;
        }
        if p + 1 < v.len() && v[p + 1] & 0x80 != 0 {
            let (v1, l1) = (((b >> 2) & 0x1f) + 1, (b & 3) as usize + 1);
            let b2 = v[p + 1];
            let (v2, l2) = (((b2 >> 2) & 0x1f) + 1, (b2 & 3) as usize + 1);
            if v1 == v2 && l1 + l2 <= VAL_MAX_LEN {
                v[p + 1] = val_op(v1, l1 + l2);
                v.remove(p);
                continue;
            }
        }
        p += 1;
    }
    invalidate_cache(v);
    Ok(true)
}

fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, HllError> {
    to_dense(v)?;
    let regs = &mut v[HDR..];
    if count > dense_get(regs, index) {
        dense_set(regs, index, count);
    }
    Ok(true)
}

/// PFADD of one element; true if a register changed.
pub fn add(v: &mut Vec<u8>, ele: &[u8], sparse_max: usize) -> Result<bool, HllError> {
    let (index, count) = pat_len(ele);
    set_register(v, index, count, sparse_max)
}

/// Folds an HLL's registers into `max` (one byte per register), as PFCOUNT/PFMERGE do.
pub fn merge_into(max: &mut [u8], v: &[u8]) -> Result<(), HllError> {
    if is_dense(v) {
        let regs = &v[HDR..];
        for (i, m) in max.iter_mut().enumerate().take(REGISTERS) {
            *m = (*m).max(dense_get(regs, i));
        }
        Ok(())
    } else {
        walk_sparse(&v[HDR..], |idx, val, len| {
            for m in &mut max[idx..idx + len] {
                *m = (*m).max(val);
            }
        })
    }
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let zp = z;
        z += x * y;
        y += y;
        if zp == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let zp = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if zp == z {
            return z / 3.0;
        }
    }
}

/// Ertl's estimator over a register-value histogram (Redis's `hllCount`).
fn estimate(histo: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histo[(Q + 1) as usize] as f64) / m);
    for j in (1..=Q as usize).rev() {
        z += histo[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histo[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// Cardinality of one HLL string, ignoring its cache.
pub fn count(v: &[u8]) -> Result<u64, HllError> {
    let mut histo = [0u32; 64];
    if is_dense(v) {
        let regs = &v[HDR..];
        for i in 0..REGISTERS {
            histo[dense_get(regs, i) as usize] += 1;
        }
    } else {
        let mut nonzero = 0;
        walk_sparse(&v[HDR..], |_, val, len| {
            histo[val as usize] += len as u32;
            nonzero += len;
        })?;
        histo[0] = (REGISTERS - nonzero) as u32;
    }
    Ok(estimate(&histo))
}

/// PFDEBUG DECODE: the sparse opcodes as text (`z:len`, `Z:len` for XZERO, `v:val,len`).
pub fn decode_sparse(v: &[u8]) -> Result<String, HllError> {
    let sp = &v[HDR..];
    let mut out = Vec::new();
    let mut p = 0;
    while p < sp.len() {
        let (op, n) = decode(sp, p)?;
        out.push(match op {
            Op::Zero(l) => format!("z:{l}"),
            Op::XZero(l) => format!("Z:{l}"),
            Op::Val(val, l) => format!("v:{val},{l}"),
        });
        p += n;
    }
    Ok(out.join(" "))
}

/// Cardinality of raw one-byte-per-register arrays (multi-key PFCOUNT).
pub fn count_raw(max: &[u8]) -> u64 {
    let mut histo = [0u32; 64];
    for &r in max {
        histo[(r & 63) as usize] += 1;
    }
    estimate(&histo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_known_values() {
        // Hash of the empty input with seed 0 is determined by the finaliser alone.
        assert_eq!(murmur64a(b"", 0), 0);
        let a = murmur64a(b"hello", 0xadc83b19);
        assert_ne!(a, murmur64a(b"hellp", 0xadc83b19));
        assert_eq!(a, murmur64a(b"hello", 0xadc83b19));
    }

    #[test]
    fn empty_counts_zero_and_roundtrips_dense() {
        let mut v = new_sparse();
        assert_eq!(v.len(), 18);
        assert_eq!(count(&v), Ok(0));
        to_dense(&mut v).unwrap();
        assert_eq!(v.len(), DENSE_SIZE);
        assert_eq!(count(&v), Ok(0));
        validate(&v).unwrap();
    }

    #[test]
    fn sparse_and_dense_agree_and_error_is_small() {
        let mut sparse = new_sparse();
        let mut dense = new_sparse();
        to_dense(&mut dense).unwrap();
        let mut max = vec![0u8; REGISTERS];
        for i in 0..100_000u32 {
            let e = format!("element:{i}");
            let a = add(&mut sparse, e.as_bytes(), 3000).unwrap();
            let b = add(&mut dense, e.as_bytes(), 3000).unwrap();
            assert_eq!(a, b);
            if i == 200 {
                assert!(!is_dense(&sparse));
                assert_eq!(count(&sparse), count(&dense));
            }
        }
        assert!(is_dense(&sparse));
        assert_eq!(sparse[HDR..], dense[HDR..]);
        merge_into(&mut max, &sparse).unwrap();
        let c = count(&sparse).unwrap();
        assert_eq!(count_raw(&max), c);
        let err = (c as f64 - 100_000.0).abs() / 100_000.0;
        assert!(err < 0.0081 * 3.0, "estimate {c}");
    }

    #[test]
    fn corrupt_sparse_is_detected() {
        let mut v = new_sparse();
        v.push(0x00); // one register too many
        assert_eq!(count(&v), Err(HllError::Corrupt));
        assert_eq!(validate(b"HYLL"), Err(HllError::NotHll));
        let mut d = new_sparse();
        d[4] = 0;
        assert_eq!(validate(&d), Err(HllError::NotHll));
    }
}
