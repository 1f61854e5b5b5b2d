//! Redis RDB and DUMP payload formats, and the pure format parts of Redis 7 AOF persistence.
//!
//! Self-contained on purpose: it has its own value model ([`RdbValue`]) and knows nothing of
//! the node's keyspace, so the node can use it for SAVE/BGSAVE/load, DUMP/RESTORE, replication
//! and AOF loading, and the fuzz targets can drive it alone.
//!
//! - [`RdbReader`]: streaming reader for RDB versions 1..=12 and Valkey 9's 80, every encoding Redis writes.
//! - [`RdbWriter`] / [`write_atomic`]: RDB version 10 writer with Redis 7.0's compact encodings.
//! - [`dump_value`] / [`restore_value`]: DUMP payloads.
//! - Streams ([`RdbStream`]): read from RDB types 15, 19 and 21, written as type 19 in the
//!   listpack node layout of Redis 7.0.
//! - [`aof`]: multi-part AOF manifest and a RESP command reader that tells truncation from
//!   corruption.
//!
//! ```
//! use bytes::Bytes;
//! use tessera_rdb::{dump_value, read_entries, restore_value, AuxInfo, RdbValue, RdbWriter};
//!
//! // SAVE: header, aux fields, one database, entries, EOF + CRC64.
//! let mut w = RdbWriter::new(Vec::new())?;
//! w.standard_aux(&AuxInfo::default())?;
//! w.select_db(0, 1, 1)?;
//! let value = RdbValue::List(vec![Bytes::from_static(b"a"), Bytes::from_static(b"42")]);
//! w.entry(b"mylist", &value, Some(4_102_444_800_000))?;
//! let file = w.finish()?;
//!
//! // Load (wrap files in a BufReader: the reader does many small reads).
//! let entries = read_entries(&file[..])?;
//! assert_eq!(entries[0].value, value);
//!
//! // DUMP / RESTORE.
//! let payload = dump_value(&value);
//! assert_eq!(restore_value(&payload).unwrap(), value);
//! # Ok::<(), tessera_rdb::RdbError>(())
//! ```
//!
//! Empty collections are never produced by Redis; a file holding one reads back as an empty
//! value, which a loader should skip (as redis-server does).

pub mod aof;
mod atomic;
mod containers;
mod decode;
mod dump;
mod encode;
mod error;
pub mod lzf;
mod reader;
mod source;
mod stream;
pub mod types;
mod value;
mod writer;

use crc::{Crc, CRC_64_REDIS};

pub use atomic::{write_atomic, AtomicRdbFile};
pub use dump::{
    dump_value, dump_value_bytes, restore_value, restore_value_checked,
    restore_value_with_max_version, verify_footer, verify_payload, RestoreError,
};
pub use error::{RdbError, Result};
pub use reader::{read_entries, RdbEntry, RdbEvent, RdbReader, DEFAULT_MAX_READ_VERSION};
pub use value::{RdbStream, RdbStreamConsumer, RdbStreamGroup, RdbValue, StreamId};
pub use writer::{
    encode_entry, encode_entry_with_meta, encode_string_entry, AuxInfo, EntryMeta, RdbWriter,
    ReplAux, RDB_VERSION,
};

/// CRC-64/Jones as Redis uses it (reflected, init 0, no xorout).
pub(crate) static CRC64: Crc<u64> = Crc::<u64>::new(&CRC_64_REDIS);

/// CRC-64/Jones of `data` (the RDB trailer and DUMP payload checksum).
pub fn crc64(data: &[u8]) -> u64 {
    CRC64.checksum(data)
}

#[cfg(test)]
mod tests {
    #[test]
    fn crc_check_value() {
        assert_eq!(super::crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
    }
}
