//! Decoding one RDB value of a given type from a [`Source`].

use std::collections::HashSet;
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
                no_dups(v.iter(), "Set")?;
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
            no_dups(v.iter().map(|p| &p.0), "Zset")?;
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
            no_dups(v.iter().map(|p| &p.0), "Hash")?;
            Ok(RdbValue::Hash(v))
        }
        TYPE_HASH_ZIPMAP => {
            let pairs = labelled(zipmap_pairs(&src.string()?), "Zipmap")?;
            // Redis's zipmapValidateIntegrity refuses a zipmap without entries.
            if pairs.is_empty() {
                return Err(RdbError::corrupt("Zipmap", "no entries"));
            }
            labelled(no_dups(pairs.iter().map(|p| &p.0), "Zipmap"), "Zipmap")?;
            Ok(RdbValue::Hash(pairs))
        }
        TYPE_LIST_ZIPLIST => Ok(RdbValue::List(labelled(
            ziplist_entries(&src.string()?),
            "Ziplist",
        )?)),
        TYPE_SET_INTSET => Ok(RdbValue::Set(labelled(
            intset_members(&src.string()?),
            "Intset",
        )?)),
        TYPE_SET_LISTPACK => {
            let m = labelled(listpack_entries(&src.string()?), "Set listpack")?;
            no_dups(m.iter(), "Set listpack")?;
            Ok(RdbValue::Set(m))
        }
        TYPE_ZSET_ZIPLIST => labelled(
            ziplist_entries(&src.string()?).and_then(|f| zset_from_flat(f, "Zset ziplist")),
            "Zset ziplist",
        ),
        TYPE_ZSET_LISTPACK => labelled(
            listpack_entries(&src.string()?).and_then(|f| zset_from_flat(f, "Zset listpack")),
            "Zset listpack",
        ),
        TYPE_HASH_ZIPLIST => labelled(
            ziplist_entries(&src.string()?).and_then(|f| hash_from_flat(f, "Hash ziplist")),
            "Hash ziplist",
        ),
        TYPE_HASH_LISTPACK => labelled(
            listpack_entries(&src.string()?).and_then(|f| hash_from_flat(f, "Hash listpack")),
            "Hash listpack",
        ),
        TYPE_LIST_QUICKLIST => {
            let nodes = src.len_usize()?;
            let mut v = Vec::new();
            for _ in 0..nodes {
                v.extend(labelled(
                    ziplist_entries(&src.string()?),
                    "Quicklist ziplist",
                )?);
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
                    // Redis refuses an empty node of either kind (rdbLoadObject).
                    _ if blob.is_empty() => {
                        return Err(RdbError::corrupt("Quicklist", "empty node"))
                    }
                    QUICKLIST_NODE_PLAIN => v.push(blob),
                    QUICKLIST_NODE_PACKED => {
                        v.extend(labelled(listpack_entries(&blob), "Quicklist listpack")?)
                    }
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

/// Redis refuses duplicate set members, hash fields and zset members in every encoding (a
/// plain set/hash/zset always, a compact one under deep sanitization; we always check).
fn no_dups<'a>(items: impl Iterator<Item = &'a Bytes>, what: &'static str) -> Result<()> {
    let mut seen = HashSet::new();
    for it in items {
        if !seen.insert(&it[..]) {
            return Err(RdbError::corrupt(what, "listpack with dup elements"));
        }
    }
    Ok(())
}

/// Names the container a corrupt-blob error came from (Redis's "<what> integrity check failed").
fn labelled<T>(r: Result<T>, what: &'static str) -> Result<T> {
    r.map_err(|e| match e {
        RdbError::Corrupt { detail, .. } => RdbError::Corrupt { what, detail },
        other => other,
    })
}

fn zset_from_flat(flat: Vec<Bytes>, what: &'static str) -> Result<RdbValue> {
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
    no_dups(v.iter().map(|p| &p.0), what)?;
    Ok(RdbValue::ZSet(v))
}

fn hash_from_flat(flat: Vec<Bytes>, what: &'static str) -> Result<RdbValue> {
    if flat.len() % 2 != 0 {
        return Err(RdbError::corrupt("hash", "odd number of elements"));
    }
    let mut v = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(f), Some(val)) = (it.next(), it.next()) {
        v.push((f, val));
    }
    no_dups(v.iter().map(|p| &p.0), what)?;
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
