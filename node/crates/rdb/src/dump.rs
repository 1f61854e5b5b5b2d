//! DUMP / RESTORE payloads: type byte + value + RDB version (u16 LE) + CRC64 (u64 LE).

use bytes::Bytes;

use crate::decode::read_value;
use crate::encode::{value_type, write_value_body};
use crate::error::RdbError;
use crate::source::Source;
use crate::value::RdbValue;
use crate::{crc64, RDB_VERSION};

/// Why a RESTORE payload was refused; `Display` is the exact error line the node answers.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("ERR DUMP payload version or checksum are wrong")]
    VersionOrChecksum,
    #[error("ERR Bad data format")]
    BadData(#[source] RdbError),
}

/// Serializes a value as Redis 7.0's DUMP does (RDB version 10).
pub fn dump_value(v: &RdbValue) -> Vec<u8> {
    let mut out = Vec::new();
    let ty = value_type(v);
    out.push(ty);
    write_value_body(&mut out, v, ty);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks a payload's footer: version ≤ `max_version` and a matching CRC64.
pub fn verify_payload(payload: &[u8], max_version: u16) -> Result<(), RestoreError> {
    verify_footer(payload, max_version, true)
}

/// [`verify_payload`], the CRC64 compared only with `check_crc` (Redis's DEBUG
/// SET-SKIP-CHECKSUM-VALIDATION 1 turns it off; the version is always checked).
pub fn verify_footer(
    payload: &[u8],
    max_version: u16,
    check_crc: bool,
) -> Result<(), RestoreError> {
    if payload.len() < 10 {
        return Err(RestoreError::VersionOrChecksum);
    }
    let n = payload.len();
    let version = u16::from_le_bytes([payload[n - 10], payload[n - 9]]);
    if version > max_version {
        return Err(RestoreError::VersionOrChecksum);
    }
    if !check_crc {
        return Ok(());
    }
    let mut stored = [0u8; 8];
    stored.copy_from_slice(&payload[n - 8..]);
    if crc64(&payload[..n - 8]) != u64::from_le_bytes(stored) {
        return Err(RestoreError::VersionOrChecksum);
    }
    Ok(())
}

/// Decodes a DUMP payload written by RDB version ≤ 10 (what Redis 7.0 accepts).
pub fn restore_value(payload: &[u8]) -> Result<RdbValue, RestoreError> {
    restore_value_with_max_version(payload, RDB_VERSION)
}

/// Decodes a DUMP payload, accepting RDB versions up to `max_version`.
pub fn restore_value_with_max_version(
    payload: &[u8],
    max_version: u16,
) -> Result<RdbValue, RestoreError> {
    restore_value_checked(payload, max_version, true)
}

/// Decodes a DUMP payload; the CRC64 is compared only with `check_crc` (see
/// [`verify_footer`]).
pub fn restore_value_checked(
    payload: &[u8],
    max_version: u16,
    check_crc: bool,
) -> Result<RdbValue, RestoreError> {
    verify_footer(payload, max_version, check_crc)?;
    let body = &payload[..payload.len() - 10];
    let mut src = Source::new(body);
    let ty = src.u8().map_err(RestoreError::BadData)?;
    let value = read_value(&mut src, ty).map_err(RestoreError::BadData)?;
    if src.position() != body.len() as u64 {
        return Err(RestoreError::BadData(RdbError::TrailingData));
    }
    Ok(value)
}

/// Convenience: the payload as `Bytes` (what the node keeps in replies).
pub fn dump_value_bytes(v: &RdbValue) -> Bytes {
    Bytes::from(dump_value(v))
}
