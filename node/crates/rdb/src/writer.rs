//! RDB version 10 (Redis 7.0) writer, plus crash-safe file replacement.

use std::io::Write;

use crc::Digest;

use crate::encode::{value_type, write_len, write_string, write_value_body};
use crate::error::Result;
use crate::types::*;
use crate::value::RdbValue;
use crate::CRC64;

/// The RDB version we write (Redis 7.0).
pub const RDB_VERSION: u16 = 10;

/// Replication info saved in the aux fields, so a restarted replica can PSYNC.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplAux {
    pub stream_db: u64,
    pub repl_id: String,
    pub repl_offset: i64,
}

/// The aux fields Redis 7.0 writes at the top of every RDB file.
#[derive(Debug, Clone, PartialEq)]
pub struct AuxInfo {
    pub redis_ver: String,
    /// Unix time of the save, seconds.
    pub ctime: i64,
    pub used_mem: u64,
    /// True when the file is the base of an AOF (preamble).
    pub aof_base: bool,
    pub repl: Option<ReplAux>,
}

impl Default for AuxInfo {
    fn default() -> Self {
        let ctime = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        AuxInfo {
            redis_ver: "7.0.15".to_string(),
            ctime,
            used_mem: 0,
            aof_base: false,
            repl: None,
        }
    }
}

/// Writes an RDB stream to any `Write`, keeping the CRC64 trailer up to date.
///
/// For a replication full sync over a socket, use `RdbWriter<Vec<u8>>` and
/// [`RdbWriter::take_output`] between entries: the checksum lives in the writer, not the buffer.
pub struct RdbWriter<W: Write> {
    out: W,
    digest: Digest<'static, u64>,
    scratch: Vec<u8>,
}

impl<W: Write> RdbWriter<W> {
    /// Starts a file: writes the `REDIS0010` header.
    pub fn new(out: W) -> Result<Self> {
        let mut w = RdbWriter {
            out,
            digest: CRC64.digest(),
            scratch: Vec::with_capacity(4096),
        };
        w.scratch
            .extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes());
        w.flush_scratch()?;
        Ok(w)
    }

    fn flush_scratch(&mut self) -> Result<()> {
        self.digest.update(&self.scratch);
        self.out.write_all(&self.scratch)?;
        self.scratch.clear();
        Ok(())
    }

    /// One AUX field.
    pub fn aux(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.scratch.push(OPCODE_AUX);
        write_string(&mut self.scratch, key.as_bytes());
        write_string(&mut self.scratch, value);
        self.flush_scratch()
    }

    /// The standard Redis 7.0 aux fields, in Redis's order.
    pub fn standard_aux(&mut self, info: &AuxInfo) -> Result<()> {
        self.aux("redis-ver", info.redis_ver.as_bytes())?;
        self.aux("redis-bits", b"64")?;
        self.aux("ctime", info.ctime.to_string().as_bytes())?;
        self.aux("used-mem", info.used_mem.to_string().as_bytes())?;
        if let Some(r) = &info.repl {
            self.aux("repl-stream-db", r.stream_db.to_string().as_bytes())?;
            self.aux("repl-id", r.repl_id.as_bytes())?;
            self.aux("repl-offset", r.repl_offset.to_string().as_bytes())?;
        }
        self.aux("aof-base", if info.aof_base { b"1" } else { b"0" })
    }

    /// A function library's source (FUNCTION2), written before the databases.
    pub fn function(&mut self, code: &[u8]) -> Result<()> {
        self.scratch.push(OPCODE_FUNCTION2);
        write_string(&mut self.scratch, code);
        self.flush_scratch()
    }

    /// SELECTDB + RESIZEDB: starts database `db` holding `db_size` keys, `expires_size` of
    /// them with an expiry (the sizes are hints for the loader).
    pub fn select_db(&mut self, db: u64, db_size: u64, expires_size: u64) -> Result<()> {
        self.scratch.push(OPCODE_SELECTDB);
        write_len(&mut self.scratch, db);
        self.scratch.push(OPCODE_RESIZEDB);
        write_len(&mut self.scratch, db_size);
        write_len(&mut self.scratch, expires_size);
        self.flush_scratch()
    }

    /// One key: optional absolute expiry (Unix ms), type, key and value.
    pub fn entry(&mut self, key: &[u8], value: &RdbValue, expire_ms: Option<i64>) -> Result<()> {
        encode_entry(&mut self.scratch, key, value, expire_ms);
        self.flush_scratch()
    }

    /// One key with eviction metadata (what Redis writes under an LRU or LFU maxmemory policy).
    pub fn entry_with_meta(
        &mut self,
        key: &[u8],
        value: &RdbValue,
        meta: &EntryMeta,
    ) -> Result<()> {
        encode_entry_with_meta(&mut self.scratch, key, value, meta);
        self.flush_scratch()
    }

    /// Counts bytes of pre-encoded entries ([`encode_string_entry`], [`encode_entry`]) that
    /// the caller places in the stream itself at this point, after [`RdbWriter::take_output`]
    /// (a replication snapshot keeps its encoded chunks as they are instead of copying them
    /// through the writer).
    pub fn passthrough(&mut self, encoded: &[u8]) {
        self.digest.update(encoded);
    }

    /// Writes EOF and the CRC64 trailer, flushes, and gives back the sink.
    pub fn finish(mut self) -> Result<W> {
        self.scratch.push(OPCODE_EOF);
        self.flush_scratch()?;
        let crc = self.digest.clone().finalize();
        self.out.write_all(&crc.to_le_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// The sink, e.g. to check how much was written.
    pub fn get_ref(&self) -> &W {
        &self.out
    }
}

impl RdbWriter<Vec<u8>> {
    /// Takes the bytes produced so far (for streaming them to a replica in chunks).
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }
}

/// Appends one RDB key entry (expiry opcode, type byte, key, value) to `out`.
///
/// This is the per-key unit of an RDB stream; the caller keeps the stream's checksum (or uses
/// [`RdbWriter`], which does).
pub fn encode_entry(out: &mut Vec<u8>, key: &[u8], value: &RdbValue, expire_ms: Option<i64>) {
    encode_entry_with_meta(
        out,
        key,
        value,
        &EntryMeta {
            expire_ms,
            ..EntryMeta::default()
        },
    );
}

/// Appends one string key entry to `out` without building an [`RdbValue`]: the same bytes
/// as [`encode_entry`] with `RdbValue::String(value)`.
pub fn encode_string_entry(out: &mut Vec<u8>, key: &[u8], value: &[u8], expire_ms: Option<i64>) {
    if let Some(ms) = expire_ms {
        out.push(OPCODE_EXPIRETIME_MS);
        out.extend_from_slice(&ms.to_le_bytes());
    }
    out.push(TYPE_STRING);
    write_string(out, key);
    write_string(out, value);
}

/// Per-key metadata written before the value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EntryMeta {
    /// Absolute expiry, Unix ms.
    pub expire_ms: Option<i64>,
    /// LRU idle time in seconds (IDLE opcode).
    pub idle_secs: Option<u64>,
    /// LFU logarithmic counter (FREQ opcode).
    pub freq: Option<u8>,
}

/// [`encode_entry`] with LRU/LFU metadata, in Redis's order: expiry, IDLE, FREQ, value.
pub fn encode_entry_with_meta(out: &mut Vec<u8>, key: &[u8], value: &RdbValue, meta: &EntryMeta) {
    if let Some(ms) = meta.expire_ms {
        out.push(OPCODE_EXPIRETIME_MS);
        out.extend_from_slice(&ms.to_le_bytes());
    }
    if let Some(idle) = meta.idle_secs {
        out.push(OPCODE_IDLE);
        write_len(out, idle);
    }
    if let Some(freq) = meta.freq {
        out.push(OPCODE_FREQ);
        out.push(freq);
    }
    let ty = value_type(value);
    out.push(ty);
    write_string(out, key);
    write_value_body(out, value, ty);
}
