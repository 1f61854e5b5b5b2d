//! Conversion between the node's values and `tessera_rdb::RdbValue` (RDB and AOF files, DUMP,
//! RESTORE, MIGRATE): the keyspace's own encoding, used by persist and by the commands.

use bytes::Bytes;
use tessera_rdb::RdbValue;

use crate::db::Value;
use crate::types::{HashValue, Limits, ListValue, SetValue, StreamValue, ZSetValue};

/// The RDB model of a value (copies the elements).
pub fn to_rdb(v: &Value) -> RdbValue {
    match v {
        Value::Str(s) => RdbValue::String(Bytes::copy_from_slice(s.as_slice())),
        Value::Buf(b) => RdbValue::String(Bytes::copy_from_slice(b)),
        Value::Int(i) => {
            let mut b = itoa::Buffer::new();
            RdbValue::String(Bytes::copy_from_slice(b.format(*i).as_bytes()))
        }
        Value::List(l) => RdbValue::List(l.iter().map(Bytes::copy_from_slice).collect()),
        Value::Set(s) => {
            let mut v = Vec::with_capacity(s.len());
            s.for_each(|m| v.push(Bytes::copy_from_slice(m)));
            RdbValue::Set(v)
        }
        Value::Hash(h) => {
            let mut v = Vec::with_capacity(h.len());
            h.for_each(|k, x| v.push((Bytes::copy_from_slice(k), Bytes::copy_from_slice(x))));
            RdbValue::Hash(v)
        }
        Value::ZSet(z) => {
            let mut v = Vec::with_capacity(z.len());
            z.for_each(|m, s| v.push((Bytes::copy_from_slice(m), s)));
            RdbValue::ZSet(v)
        }
        Value::Stream(s) => RdbValue::Stream(Box::new(s.to_rdb())),
    }
}

/// The node value for an RDB value, in the encoding `lim` calls for. None for an empty
/// collection (Redis refuses those as bad data).
pub fn from_rdb(v: RdbValue, lim: &Limits) -> Option<Value> {
    Some(match v {
        RdbValue::String(b) => Value::string(&b),
        RdbValue::List(items) if !items.is_empty() => {
            Value::List(ListValue::from_items(items, lim))
        }
        RdbValue::Set(m) if !m.is_empty() => Value::Set(SetValue::from_members(m, lim)),
        RdbValue::Hash(p) if !p.is_empty() => Value::Hash(HashValue::from_pairs(p, lim)),
        RdbValue::ZSet(p) if !p.is_empty() => Value::ZSet(ZSetValue::from_pairs(
            p.into_iter().map(|(m, s)| (m.to_vec(), s)),
            lim,
        )),
        // Redis keeps empty streams.
        RdbValue::Stream(s) => Value::Stream(Box::new(StreamValue::from_rdb(*s))),
        _ => return None,
    })
}
