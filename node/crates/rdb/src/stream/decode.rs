//! Reads stream values (RDB types 15, 19 and 21) into [`RdbStream`].
//!
//! The checks follow what redis-server's deep sanitisation refuses (listpack shape, entry
//! counts, ascending IDs, consumer PEL entries that exist in the group PEL exactly once), so a
//! stream this reader returns is one Redis itself would accept.

use std::collections::HashSet;
use std::io::Read;

use bytes::Bytes;

use super::encode::{FLAG_DELETED, FLAG_SAMEFIELDS};
use crate::containers::listpack_entries;
use crate::error::{RdbError, Result};
use crate::source::Source;
use crate::types::{TYPE_STREAM_LISTPACKS, TYPE_STREAM_LISTPACKS_3};
use crate::value::{RdbStream, RdbStreamConsumer, RdbStreamGroup, StreamId};

/// Reserve at most this many elements up front for a count taken from the input.
const MAX_PREALLOC: usize = 1024;

fn corrupt(detail: impl Into<String>) -> RdbError {
    RdbError::corrupt("Stream listpack", detail)
}

/// Reads the body of a stream of type `ty` (15, 19 or 21).
pub(crate) fn read_stream<R: Read>(src: &mut Source<R>, ty: u8) -> Result<RdbStream> {
    let nodes = src.len()?;
    let mut entries: Vec<(StreamId, Vec<(Bytes, Bytes)>)> = Vec::new();
    let mut prev_master: Option<StreamId> = None;
    for _ in 0..nodes {
        let key = src.string()?;
        let master = id_from_raw(&key).ok_or_else(|| corrupt("node key is not 16 bytes"))?;
        if prev_master.is_some_and(|p| p >= master) {
            return Err(corrupt("node keys not ascending"));
        }
        prev_master = Some(master);
        let lp = src.string()?;
        read_node(master, &lp, &mut entries)?;
    }
    let length = src.len()?;
    if length != entries.len() as u64 {
        return Err(corrupt(format!(
            "length {length} but {} live entries",
            entries.len()
        )));
    }
    let last_id = read_id(src)?;
    if entries.last().is_some_and(|(id, _)| *id > last_id) {
        return Err(corrupt("an entry is above the last ID"));
    }
    let (first_id, max_deleted_id, entries_added) = if ty == TYPE_STREAM_LISTPACKS {
        let first = entries.first().map(|e| e.0).unwrap_or_default();
        (first, StreamId::default(), length)
    } else {
        (read_id(src)?, read_id(src)?, src.len()?)
    };
    let ngroups = src.len()?;
    let mut groups: Vec<RdbStreamGroup> = Vec::new();
    let mut names = HashSet::new();
    for _ in 0..ngroups {
        let mut g = read_group(src, ty)?;
        if ty == TYPE_STREAM_LISTPACKS {
            // Redis <= 6.2 saved no entries-read: Redis 7.0 estimates it on load.
            g.entries_read = estimate_entries_read(
                entries_added,
                length,
                last_id,
                first_id,
                max_deleted_id,
                g.last_id,
            );
        }
        if !names.insert(g.name.clone()) {
            return Err(corrupt("duplicate consumer group name"));
        }
        groups.push(g);
    }
    Ok(RdbStream {
        entries,
        last_id,
        first_id,
        max_deleted_id,
        entries_added,
        groups,
    })
}

/// A group's entries-read from its last-delivered ID, where no counter was saved (Redis
/// 7.0's streamEstimateDistanceFromFirstEverEntry): exact at the stream's ends, an estimate
/// before its first entry when nothing was deleted inside it, else -1 (unknown).
fn estimate_entries_read(
    entries_added: u64,
    length: u64,
    last_id: StreamId,
    first_id: StreamId,
    max_deleted: StreamId,
    id: StreamId,
) -> i64 {
    let added = i64::try_from(entries_added).unwrap_or(i64::MAX);
    if entries_added == 0 {
        return 0;
    }
    if length == 0 && id <= last_id {
        return added;
    }
    if id == last_id {
        return added;
    }
    if id > last_id {
        return -1;
    }
    let zero = StreamId::default();
    if max_deleted == zero || max_deleted < first_id {
        let base = added.saturating_sub(i64::try_from(length).unwrap_or(i64::MAX));
        if id < first_id {
            return base;
        }
        if id == first_id {
            return base.saturating_add(1);
        }
    }
    -1
}

/// A 16-byte big-endian ID (rax keys, raw PEL IDs).
fn id_from_raw(b: &[u8]) -> Option<StreamId> {
    let ms = u64::from_be_bytes(b.get(..8)?.try_into().ok()?);
    let seq = u64::from_be_bytes(b.get(8..16)?.try_into().ok()?);
    (b.len() == 16).then_some(StreamId { ms, seq })
}

fn read_id<R: Read>(src: &mut Source<R>) -> Result<StreamId> {
    Ok(StreamId {
        ms: src.len()?,
        seq: src.len()?,
    })
}

fn read_raw_id<R: Read>(src: &mut Source<R>) -> Result<StreamId> {
    let b: [u8; 16] = src.array()?;
    id_from_raw(&b).ok_or_else(|| corrupt("bad raw ID"))
}

fn read_group<R: Read>(src: &mut Source<R>, ty: u8) -> Result<RdbStreamGroup> {
    let name = src.string()?;
    let last_id = read_id(src)?;
    // Saved with rdbSaveLen from a signed value: -1 arrives as 2^64-1.
    let entries_read = if ty == TYPE_STREAM_LISTPACKS {
        -1
    } else {
        src.len()? as i64
    };
    let npel = src.len()?;
    let mut pel: Vec<(StreamId, u64, u64)> = Vec::with_capacity(cap(npel));
    for _ in 0..npel {
        let id = read_raw_id(src)?;
        let time = u64::from_le_bytes(src.array()?);
        let count = src.len()?;
        if pel.last().is_some_and(|p| p.0 >= id) {
            return Err(corrupt("group PEL not ascending"));
        }
        pel.push((id, time, count));
    }
    let mut owned = vec![false; pel.len()];
    let nconsumers = src.len()?;
    let mut consumers: Vec<RdbStreamConsumer> = Vec::with_capacity(cap(nconsumers));
    let mut names = HashSet::new();
    for _ in 0..nconsumers {
        let cname = src.string()?;
        if !names.insert(cname.clone()) {
            return Err(corrupt("Duplicate stream consumer detected"));
        }
        let seen_time = u64::from_le_bytes(src.array()?);
        let active_time = if ty == TYPE_STREAM_LISTPACKS_3 {
            Some(u64::from_le_bytes(src.array()?))
        } else {
            None
        };
        let n = src.len()?;
        let mut pending: Vec<StreamId> = Vec::with_capacity(cap(n));
        for _ in 0..n {
            let id = read_raw_id(src)?;
            let i = pel
                .binary_search_by(|p| p.0.cmp(&id))
                .map_err(|_| corrupt("consumer PEL entry not in the group PEL"))?;
            if std::mem::replace(&mut owned[i], true) {
                return Err(corrupt("PEL entry owned by two consumers"));
            }
            if pending.last().is_some_and(|p| *p >= id) {
                return Err(corrupt("consumer PEL not ascending"));
            }
            pending.push(id);
        }
        consumers.push(RdbStreamConsumer {
            name: cname,
            seen_time,
            active_time,
            pending,
        });
    }
    if owned.iter().any(|o| !o) {
        return Err(corrupt("group PEL entry without a consumer"));
    }
    Ok(RdbStreamGroup {
        name,
        last_id,
        entries_read,
        pel,
        consumers,
    })
}

fn cap(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX).min(MAX_PREALLOC)
}

/// Integer elements of a stream listpack (the reader renders them as decimal text).
struct Items {
    items: std::vec::IntoIter<Bytes>,
}

impl Items {
    fn next(&mut self) -> Result<Bytes> {
        self.items
            .next()
            .ok_or_else(|| corrupt("listpack node ends inside an entry"))
    }
    fn int(&mut self) -> Result<i64> {
        let b = self.next()?;
        std::str::from_utf8(&b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| corrupt("expected an integer in a listpack node"))
    }
    fn count(&mut self) -> Result<usize> {
        usize::try_from(self.int()?).map_err(|_| corrupt("negative count"))
    }
}

/// Decodes one listpack node with master ID `master`, appending its live entries.
fn read_node(
    master: StreamId,
    lp: &[u8],
    out: &mut Vec<(StreamId, Vec<(Bytes, Bytes)>)>,
) -> Result<()> {
    let all = listpack_entries(lp).map_err(|e| match e {
        RdbError::Corrupt { detail, .. } => RdbError::corrupt("Stream listpack", detail),
        other => other,
    })?;
    let total = all.len();
    if total == 0 {
        return Err(corrupt("empty listpack node"));
    }
    let mut it = Items {
        items: all.into_iter(),
    };
    let live = it.count()?;
    let deleted = it.count()?;
    let nmaster = it.count()?;
    if nmaster > total {
        return Err(corrupt("master field count exceeds the node"));
    }
    let mut master_fields = Vec::with_capacity(nmaster);
    for _ in 0..nmaster {
        master_fields.push(it.next()?);
    }
    if it.int()? != 0 {
        return Err(corrupt("master entry terminator is not 0"));
    }
    let (mut seen_live, mut seen_deleted) = (0usize, 0usize);
    let mut prev: Option<StreamId> = None;
    while it.items.len() > 0 {
        let flags = it.int()?;
        if flags & !(FLAG_DELETED | FLAG_SAMEFIELDS) != 0 {
            return Err(corrupt(format!("unknown entry flags {flags}")));
        }
        let id = StreamId {
            ms: master.ms.wrapping_add(it.int()? as u64),
            seq: master.seq.wrapping_add(it.int()? as u64),
        };
        if id < master || prev.is_some_and(|p| p >= id) {
            return Err(corrupt("entry IDs not ascending in a node"));
        }
        prev = Some(id);
        let same = flags & FLAG_SAMEFIELDS != 0;
        let n = if same { nmaster } else { it.count()? };
        if n > it.items.len() {
            return Err(corrupt("entry field count exceeds the node"));
        }
        let mut fields = Vec::with_capacity(n);
        if same {
            for f in &master_fields {
                fields.push((f.clone(), it.next()?));
            }
        } else {
            for _ in 0..n {
                let f = it.next()?;
                fields.push((f, it.next()?));
            }
        }
        let lp_count = it.count()?;
        let expect = if same { n + 3 } else { 2 * n + 4 };
        if lp_count != expect {
            return Err(corrupt("entry lp-count mismatch"));
        }
        if flags & FLAG_DELETED != 0 {
            seen_deleted += 1;
            continue;
        }
        seen_live += 1;
        if out.last().is_some_and(|(p, _)| *p >= id) {
            return Err(corrupt("entry IDs not ascending across nodes"));
        }
        out.push((id, fields));
    }
    if seen_live != live || seen_deleted != deleted {
        return Err(corrupt("node entry counts do not match its master entry"));
    }
    Ok(())
}
