//! Writes a stream as RDB type 19 (RDB_TYPE_STREAM_LISTPACKS_2), laid out the way Redis 7.0's
//! t_stream.c builds its rax of listpacks, so redis-server 7.0 loads it as its own.

use bytes::Bytes;

use crate::encode::{write_len, write_string, ListpackBuilder};
use crate::value::{RdbStream, StreamId};

/// stream-node-max-entries default: live + deleted entries per listpack node.
const NODE_MAX_ENTRIES: usize = 100;
/// stream-node-max-bytes default.
const NODE_MAX_BYTES: usize = 4096;
/// STREAM_ITEM_FLAG_SAMEFIELDS: the entry's fields equal the master entry's (values only).
pub(crate) const FLAG_SAMEFIELDS: i64 = 2;
/// STREAM_ITEM_FLAG_DELETED.
pub(crate) const FLAG_DELETED: i64 = 1;

/// The 16-byte big-endian form Redis uses for rax keys and raw PEL IDs.
pub(crate) fn id_bytes(id: StreamId) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&id.ms.to_be_bytes());
    b[8..].copy_from_slice(&id.seq.to_be_bytes());
    b
}

type Entry = (StreamId, Vec<(Bytes, Bytes)>);

/// One listpack node being filled: its master ID and fields, and the listpack so far.
struct Node<'a> {
    master: StreamId,
    master_fields: &'a [(Bytes, Bytes)],
    lp: ListpackBuilder,
    count: usize,
}

impl<'a> Node<'a> {
    /// Starts a node whose master entry is `first`'s ID and field names (as streamAppendItem
    /// does when it opens a new node).
    fn new(first: &'a Entry) -> Self {
        Node {
            master: first.0,
            master_fields: &first.1,
            lp: ListpackBuilder::new(),
            count: 0,
        }
    }

    fn same_fields(&self, fields: &[(Bytes, Bytes)]) -> bool {
        fields.len() == self.master_fields.len()
            && fields
                .iter()
                .zip(self.master_fields)
                .all(|(a, b)| a.0 == b.0)
    }

    fn push(&mut self, (id, fields): &Entry) {
        let same = self.same_fields(fields);
        let lp = &mut self.lp;
        lp.push_int(if same { FLAG_SAMEFIELDS } else { 0 });
        // Deltas wrap like Redis's uint64 subtraction stored as int64.
        lp.push_int(id.ms.wrapping_sub(self.master.ms) as i64);
        lp.push_int(id.seq.wrapping_sub(self.master.seq) as i64);
        let n = fields.len() as i64;
        if same {
            for (_, v) in fields {
                lp.push(v);
            }
            lp.push_int(n + 3);
        } else {
            lp.push_int(n);
            for (f, v) in fields {
                lp.push(f);
                lp.push(v);
            }
            lp.push_int(2 * n + 4);
        }
        self.count += 1;
    }

    /// The master entry: count, deleted, number of fields, the field names, 0.
    fn head(&self) -> ListpackBuilder {
        let mut head = ListpackBuilder::new();
        head.push_int(self.count as i64);
        head.push_int(0);
        head.push_int(self.master_fields.len() as i64);
        for (f, _) in self.master_fields {
            head.push(f);
        }
        head.push_int(0);
        head
    }

    /// Bytes of the listpack holding only the master entry.
    fn head_size(&self) -> usize {
        self.head().size()
    }

    /// The finished listpack: the master entry, then the entries.
    fn finish(self) -> Vec<u8> {
        let mut head = self.head();
        head.append(self.lp);
        head.finish()
    }
}

/// Splits the entries into listpack nodes (streamAppendItem's rule: a new node when the
/// listpack would reach stream-node-max-bytes or already holds stream-node-max-entries).
pub(crate) fn build_nodes(entries: &[Entry]) -> Vec<(StreamId, Vec<u8>)> {
    let mut nodes = Vec::new();
    let mut cur: Option<(Node<'_>, usize)> = None;
    for e in entries {
        let elelen: usize = e.1.iter().map(|(f, v)| f.len() + v.len()).sum();
        if let Some((node, bytes)) = &cur {
            if bytes + elelen >= NODE_MAX_BYTES || node.count >= NODE_MAX_ENTRIES {
                if let Some((node, _)) = cur.take() {
                    nodes.push((node.master, node.finish()));
                }
            }
        }
        let (node, bytes) = cur.get_or_insert_with(|| {
            let n = Node::new(e);
            let head = n.head_size();
            (n, head)
        });
        let before = node.lp.size();
        node.push(e);
        *bytes += node.lp.size() - before;
    }
    if let Some((node, _)) = cur {
        nodes.push((node.master, node.finish()));
    }
    nodes
}

/// Appends the type-19 body of `s`.
pub(crate) fn write_stream(out: &mut Vec<u8>, s: &RdbStream) {
    write_nodes(out, &build_nodes(&s.entries));
    write_meta(out, s);
}

/// The rax of listpacks: node count, then each node's master ID and listpack.
pub(crate) fn write_nodes(out: &mut Vec<u8>, nodes: &[(StreamId, Vec<u8>)]) {
    write_len(out, nodes.len() as u64);
    for (master, lp) in nodes {
        write_string(out, &id_bytes(*master));
        write_string(out, lp);
    }
}

/// Everything after the nodes: length, IDs, counters and consumer groups.
pub(crate) fn write_meta(out: &mut Vec<u8>, s: &RdbStream) {
    write_len(out, s.entries.len() as u64);
    write_id(out, s.last_id);
    write_id(out, s.first_id);
    write_id(out, s.max_deleted_id);
    write_len(out, s.entries_added);
    write_len(out, s.groups.len() as u64);
    for g in &s.groups {
        write_string(out, &g.name);
        write_id(out, g.last_id);
        // Redis saves the signed entries_read with rdbSaveLen (so -1 is 2^64-1).
        write_len(out, g.entries_read as u64);
        write_len(out, g.pel.len() as u64);
        for (id, time, count) in &g.pel {
            out.extend_from_slice(&id_bytes(*id));
            out.extend_from_slice(&time.to_le_bytes());
            write_len(out, *count);
        }
        write_len(out, g.consumers.len() as u64);
        for c in &g.consumers {
            write_string(out, &c.name);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            write_len(out, c.pending.len() as u64);
            for id in &c.pending {
                out.extend_from_slice(&id_bytes(*id));
            }
        }
    }
}

fn write_id(out: &mut Vec<u8>, id: StreamId) {
    write_len(out, id.ms);
    write_len(out, id.seq);
}
