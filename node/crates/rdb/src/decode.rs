//! Decoding one RDB value of a given type from a [`Source`].

use std::io::Read;

use bytes::Bytes;

use crate::containers::{intset_members, listpack_entries, ziplist_entries, zipmap_pairs};
use crate::error::{RdbError, Result};
use crate::source::{parse_f64, Source};
use crate::types::*;
use crate::value::RdbValue;

/// Reserve at most this many elements up front for a count taken from the file.
const MAX_PREALLOC_ITEMS: usize = 1024;

fn cap(n: usize) -> usize {
    n.min(MAX_PREALLOC_ITEMS)
}

/// Reads the value of type `ty` (the type byte is already consumed).
pub(crate) fn read_value<R: Read>(src: &mut Source<R>, ty: u8) -> Result<RdbValue> {
    match ty {
        TYPE_STRING => Ok(RdbValue::String(src.string()?)),
        TYPE_LIST | TYPE_SET => {
            let n = src.len_usize()?;
            let mut v = Vec::with_capacity(cap(n));
            for _ in 0..n {
                v.push(src.string()?);
            }
            Ok(if ty == TYPE_LIST {
                RdbValue::List(v)
            } else {
                RdbValue::Set(v)
            })
        }
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = src.len_usize()?;
            let mut v = Vec::with_capacity(cap(n));
            for _ in 0..n {
                let member = src.string()?;
                let score = if ty == TYPE_ZSET_2 {
                    src.binary_double()?
                } else {
                    src.text_double()?
                };
                if score.is_nan() {
                    return Err(RdbError::corrupt("zset", "NaN score"));
                }
                v.push((member, score));
            }
            Ok(RdbValue::ZSet(v))
        }
        TYPE_HASH => {
            let n = src.len_usize()?;
            let mut v = Vec::with_capacity(cap(n));
            for _ in 0..n {
                let f = src.string()?;
                let val = src.string()?;
                v.push((f, val));
            }
            Ok(RdbValue::Hash(v))
        }
        TYPE_HASH_ZIPMAP => Ok(RdbValue::Hash(zipmap_pairs(&src.string()?)?)),
        TYPE_LIST_ZIPLIST => Ok(RdbValue::List(ziplist_entries(&src.string()?)?)),
        TYPE_SET_INTSET => Ok(RdbValue::Set(intset_members(&src.string()?)?)),
        TYPE_SET_LISTPACK => Ok(RdbValue::Set(listpack_entries(&src.string()?)?)),
        TYPE_ZSET_ZIPLIST => zset_from_flat(ziplist_entries(&src.string()?)?),
        TYPE_ZSET_LISTPACK => zset_from_flat(listpack_entries(&src.string()?)?),
        TYPE_HASH_ZIPLIST => hash_from_flat(ziplist_entries(&src.string()?)?),
        TYPE_HASH_LISTPACK => hash_from_flat(listpack_entries(&src.string()?)?),
        TYPE_LIST_QUICKLIST => {
            let nodes = src.len_usize()?;
            let mut v = Vec::new();
            for _ in 0..nodes {
                v.extend(ziplist_entries(&src.string()?)?);
            }
            Ok(RdbValue::List(v))
        }
        TYPE_LIST_QUICKLIST_2 => {
            let nodes = src.len_usize()?;
            let mut v = Vec::new();
            for _ in 0..nodes {
                let container = src.len()?;
                let blob = src.string()?;
                match container {
                    QUICKLIST_NODE_PLAIN => v.push(blob),
                    QUICKLIST_NODE_PACKED => v.extend(listpack_entries(&blob)?),
                    c => {
                        return Err(RdbError::corrupt(
                            "quicklist",
                            format!("unknown node container {c}"),
                        ))
                    }
                }
            }
            Ok(RdbValue::List(v))
        }
        TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 | TYPE_STREAM_LISTPACKS_3 => Ok(
            RdbValue::Stream(Box::new(crate::stream::read_stream(src, ty)?)),
        ),
        TYPE_MODULE_PRE_GA | TYPE_MODULE_2 => {
            let id = src.len()?;
            Err(RdbError::UnsupportedModule(module_name(id)))
        }
        other => match type_name(other) {
            Some(name) => Err(RdbError::UnsupportedType { code: other, name }),
            None => Err(RdbError::UnknownType(other)),
        },
    }
}

fn zset_from_flat(flat: Vec<Bytes>) -> Result<RdbValue> {
    if flat.len() % 2 != 0 {
        return Err(RdbError::corrupt("zset", "odd number of elements"));
    }
    let mut v = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(m), Some(s)) = (it.next(), it.next()) {
        let score = parse_f64(&s)
            .filter(|x| !x.is_nan())
            .ok_or_else(|| RdbError::corrupt("zset", "bad score"))?;
        v.push((m, score));
    }
    Ok(RdbValue::ZSet(v))
}

fn hash_from_flat(flat: Vec<Bytes>) -> Result<RdbValue> {
    if flat.len() % 2 != 0 {
        return Err(RdbError::corrupt("hash", "odd number of elements"));
    }
    let mut v = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(f), Some(val)) = (it.next(), it.next()) {
        v.push((f, val));
    }
    Ok(RdbValue::Hash(v))
}

/// The 9-character module type name packed into the upper 54 bits of a module id.
pub(crate) fn module_name(id: u64) -> String {
    const CSET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut id = id >> 10;
    let mut name = [0u8; 9];
    for slot in name.iter_mut().rev() {
        *slot = CSET[(id & 63) as usize];
        id >>= 6;
    }
    String::from_utf8_lossy(&name).into_owned()
}

/// Skips the serialized body of a module value or module aux record (its opcode stream), the
/// way redis-check-rdb does when the module itself is not loaded.
pub(crate) fn skip_module_body<R: Read>(src: &mut Source<R>) -> Result<()> {
    const OP_EOF: u64 = 0;
    const OP_SINT: u64 = 1;
    const OP_UINT: u64 = 2;
    const OP_FLOAT: u64 = 3;
    const OP_DOUBLE: u64 = 4;
    const OP_STRING: u64 = 5;
    loop {
        match src.len()? {
            OP_EOF => return Ok(()),
            OP_SINT | OP_UINT => {
                src.len()?;
            }
            OP_FLOAT => {
                src.array::<4>()?;
            }
            OP_DOUBLE => {
                src.array::<8>()?;
            }
            OP_STRING => {
                src.string()?;
            }
            op => {
                return Err(RdbError::corrupt(
                    "module data",
                    format!("unknown module opcode {op}"),
                ))
            }
        }
    }
}
