//! The value model: what one key holds, independent of the node's in-memory encodings.

use bytes::Bytes;

/// A key's value as stored in RDB files and DUMP payloads.
///
/// HyperLogLogs are Redis strings, so they are [`RdbValue::String`]. Collections keep the order
/// in which they were read (lists: element order; zsets: as stored, ascending score).
#[derive(Debug, Clone, PartialEq)]
pub enum RdbValue {
    String(Bytes),
    List(Vec<Bytes>),
    Set(Vec<Bytes>),
    Hash(Vec<(Bytes, Bytes)>),
    ZSet(Vec<(Bytes, f64)>),
    Stream(Box<RdbStream>),
}

impl RdbValue {
    /// The name `TYPE` answers for this value.
    pub fn type_name(&self) -> &'static str {
        match self {
            RdbValue::String(_) => "string",
            RdbValue::List(_) => "list",
            RdbValue::Set(_) => "set",
            RdbValue::Hash(_) => "hash",
            RdbValue::ZSet(_) => "zset",
            RdbValue::Stream(_) => "stream",
        }
    }

    /// Number of elements (1 for a string).
    pub fn len(&self) -> usize {
        match self {
            RdbValue::String(_) => 1,
            RdbValue::List(v) | RdbValue::Set(v) => v.len(),
            RdbValue::Hash(v) => v.len(),
            RdbValue::ZSet(v) => v.len(),
            RdbValue::Stream(s) => s.entries.len(),
        }
    }

    /// True for an empty collection (Redis never stores those; a writer may still be given one).
    pub fn is_empty(&self) -> bool {
        match self {
            // Redis keeps empty streams (XDEL / XTRIM leave the key and its groups).
            RdbValue::String(_) | RdbValue::Stream(_) => false,
            _ => self.len() == 0,
        }
    }
}

/// A stream entry ID (`<ms>-<seq>`), ordered as Redis orders them (ms, then seq).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

/// Redis's text form of an ID, `<ms>-<seq>`.
impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// A stream as RDB types 15/19/21 and DUMP payloads hold it (field names as in Redis's
/// rdbSaveObject / rdbLoadObject for OBJ_STREAM).
///
/// The reader only returns consistent streams (entries strictly ascending, every group PEL
/// entry owned by exactly one consumer); the writer expects the same of what it is given.
#[derive(Debug, Clone, PartialEq)]
pub struct RdbStream {
    /// Live entries, ascending ID, each with its field/value pairs in order.
    pub entries: Vec<(StreamId, Vec<(Bytes, Bytes)>)>,
    pub last_id: StreamId,
    /// RDB 19/21 only (type 15 loads: first entry's ID or 0-0, max_deleted 0-0, entries_added = entries.len()).
    pub first_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    pub groups: Vec<RdbStreamGroup>,
}

/// A consumer group of a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct RdbStreamGroup {
    pub name: Bytes,
    pub last_id: StreamId,
    /// Redis's cg->entries_read; -1 (SCG_INVALID_ENTRIES_READ) when unknown. Type 15: -1.
    pub entries_read: i64,
    /// The group's pending entries list: (id, delivery time in unix ms, delivery count), ascending id.
    pub pel: Vec<(StreamId, u64, u64)>,
    pub consumers: Vec<RdbStreamConsumer>,
}

/// A consumer of a group.
#[derive(Debug, Clone, PartialEq)]
pub struct RdbStreamConsumer {
    pub name: Bytes,
    /// seen-time in unix ms.
    pub seen_time: u64,
    /// active-time in unix ms: only RDB type 21 stores it (None when loaded from 15/19;
    /// the writer of type 19 drops it).
    pub active_time: Option<u64>,
    /// IDs of the group PEL entries this consumer owns, ascending.
    pub pending: Vec<StreamId>,
}
