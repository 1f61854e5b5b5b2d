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
        }
    }

    /// Number of elements (1 for a string).
    pub fn len(&self) -> usize {
        match self {
            RdbValue::String(_) => 1,
            RdbValue::List(v) | RdbValue::Set(v) => v.len(),
            RdbValue::Hash(v) => v.len(),
            RdbValue::ZSet(v) => v.len(),
        }
    }

    /// True for an empty collection (Redis never stores those; a writer may still be given one).
    pub fn is_empty(&self) -> bool {
        match self {
            RdbValue::String(_) => false,
            _ => self.len() == 0,
        }
    }
}
