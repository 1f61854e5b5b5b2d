//! The replication buffer: one list of blocks holding the most recent bytes of the
//! replication stream, shared by the backlog and every replica's output, as Redis 7.0's
//! replBufBlock list (src/replication.c: feedReplicationBuffer,
//! incrementalTrimReplicationBacklog). A command is copied into the tail block once, however
//! many replicas there are; each replica reads the blocks at its own offset; the backlog is
//! the whole list, and it is trimmed from its head, whole blocks at a time, while it holds
//! more than repl-backlog-size and no replica still needs the first block. So a slow replica
//! makes the backlog outgrow its setting instead of holding a copy of its own, and a replica
//! that reconnects can continue from anything still held.
//!
//! Offsets follow Redis: `master_repl_offset` is the number of stream bytes produced so far;
//! the byte at offset `o` (1-based) is the `o`-th byte. A replica that has processed up to
//! `o` asks for `PSYNC <replid> o+1`.

use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

/// Smallest block (Redis's PROTO_REPLY_CHUNK_BYTES).
pub const BLOCK_MIN: usize = 16 * 1024;
/// Smallest backlog (CONFIG_REPL_BACKLOG_MIN_SIZE).
pub const BACKLOG_MIN: usize = 16 * 1024;
/// Blocks trimmed per call (REPL_BACKLOG_TRIM_BLOCKS_PER_CALL): freeing a slow replica's
/// hundreds of megabytes at once would stall the stream.
pub const TRIM_PER_CALL: usize = 64;

/// One block of the stream. Its bytes below `used` never change again, so readers use them
/// without a lock while the owner appends past them.
pub struct Block {
    /// Offset of the block's first byte (Redis's repl_offset).
    start: u64,
    ptr: NonNull<u8>,
    cap: usize,
    /// Bytes written; only grows, and only through [`Backlog`] (`&mut`).
    used: AtomicUsize,
}

// SAFETY: the block owns its allocation like a Vec<u8>; shared access reads only bytes
// below `used` (published with Release after they were written), and writes happen only
// past `used`, through the one `&mut Backlog` that holds the block as its tail.
unsafe impl Send for Block {}
unsafe impl Sync for Block {}

impl Block {
    fn new(start: u64, cap: usize) -> Block {
        let mut v = std::mem::ManuallyDrop::new(Vec::<u8>::with_capacity(cap));
        let cap = v.capacity();
        // A Vec's pointer is never null (dangling only for capacity 0, which cap ≥ 16 KB
        // excludes; then no byte is ever read or written).
        let ptr = NonNull::new(v.as_mut_ptr()).unwrap_or(NonNull::dangling());
        Block {
            start,
            ptr,
            cap,
            used: AtomicUsize::new(0),
        }
    }

    /// Offset of the block's first byte.
    pub fn start(&self) -> u64 {
        self.start
    }

    fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The block's bytes from index `from` to `to`, within what was written so far.
    pub fn bytes(&self, from: usize, to: usize) -> &[u8] {
        let to = to.min(self.used());
        let from = from.min(to);
        // SAFETY: bytes below `used` were initialised before `used` was published
        // (Release/Acquire) and are never written again; `from ≤ to ≤ used ≤ cap`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(from), to - from) }
    }

    /// Appends what fits; returns how much. Called only by [`Backlog::append`], which holds
    /// the buffer mutably, so there is one writer.
    fn fill(&self, data: &[u8]) -> usize {
        let used = self.used.load(Ordering::Relaxed);
        let n = (self.cap - used).min(data.len());
        // SAFETY: `used + n ≤ cap`; no reader looks at bytes at or past `used`, and the
        // only writer is this call.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(used), n);
        }
        self.used.store(used + n, Ordering::Release);
        n
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`cap` came from a Vec<u8> we did not drop; its length is
        // irrelevant for u8.
        unsafe { drop(Vec::from_raw_parts(self.ptr.as_ptr(), 0, self.cap)) };
    }
}

/// Bytes of one block a reader took (see [`Backlog::read`]).
pub struct Chunk {
    pub block: Arc<Block>,
    pub from: usize,
    pub to: usize,
}

impl Chunk {
    pub fn bytes(&self) -> &[u8] {
        self.block.bytes(self.from, self.to)
    }
}

/// Memory a block costs beyond its bytes: its Arc and its slot in the list (Redis counts
/// the replBufBlock header and list node the same way).
pub fn block_overhead() -> usize {
    crate::alloc::real_size(std::mem::size_of::<Block>() + 16) as usize
        + std::mem::size_of::<Arc<Block>>()
}

/// The block list, with the backlog's view of it.
pub struct Backlog {
    blocks: VecDeque<Arc<Block>>,
    /// repl-backlog-size (at least [`BACKLOG_MIN`]).
    size: usize,
    /// Bytes held (every block is whole: the backlog starts at the first block).
    histlen: u64,
    /// Offset of the last byte appended (master_repl_offset).
    end: u64,
    /// Memory of the blocks (Redis's repl_buffer_mem: mem_total_replication_buffers).
    mem: usize,
}

/// A reader's offset is no longer held (the buffer was trimmed past it or replaced).
#[derive(Debug, thiserror::Error)]
#[error("replication buffer no longer holds offset {0}")]
pub struct NotHeld(pub u64);

impl Backlog {
    /// An empty backlog whose next byte will have offset `offset + 1`.
    pub fn new(size: usize, offset: u64) -> Self {
        Backlog {
            blocks: VecDeque::new(),
            size: size.max(BACKLOG_MIN),
            histlen: 0,
            end: offset,
            mem: 0,
        }
    }

    /// repl-backlog-size as applied.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Follows CONFIG SET repl-backlog-size; the trim that follows shrinks the history.
    pub fn set_size(&mut self, size: usize) {
        self.size = size.max(BACKLOG_MIN);
    }

    pub fn histlen(&self) -> usize {
        self.histlen as usize
    }

    /// Memory of all blocks (mem_total_replication_buffers).
    pub fn memory(&self) -> usize {
        self.mem
    }

    /// Offset of the first byte held (Redis's repl_backlog_first_byte_offset).
    pub fn first_byte_offset(&self) -> u64 {
        self.end + 1 - self.histlen
    }

    /// Whether a reader can start at offset `from` (PSYNC): a held byte, or one past the
    /// end (the replica is up to date).
    pub fn holds(&self, from: u64) -> bool {
        from >= self.first_byte_offset() && from <= self.end + 1
    }

    /// Appends stream bytes: into the tail block while it has room, then into new blocks
    /// of 16 KB up to repl-backlog-size/16 (Redis's sizes: small blocks would cost a
    /// header each, huge ones could not be trimmed while a reader needs a small part).
    /// True when a block was added (the caller then checks the replicas' limits and
    /// trims, as Redis does).
    pub fn append(&mut self, mut data: &[u8]) -> bool {
        let mut added = false;
        while !data.is_empty() {
            if let Some(t) = self.blocks.back() {
                let n = t.fill(data);
                if n > 0 {
                    data = &data[n..];
                    self.end += n as u64;
                    self.histlen += n as u64;
                    continue;
                }
            }
            let limit = (self.size / 16).max(BLOCK_MIN);
            let want = data.len().clamp(BLOCK_MIN, limit);
            // Take the allocator's rounding as room, as Redis takes zmalloc's usable size.
            let cap = crate::alloc::real_size(want) as usize;
            let b = Block::new(self.end + 1, cap);
            self.mem += b.cap + block_overhead();
            self.blocks.push_back(Arc::new(b));
            added = true;
        }
        added
    }

    /// Appends `args` as a RESP multibulk, each argument copied once.
    pub fn append_command(&mut self, args: &[&[u8]]) -> (usize, bool) {
        let mut num = itoa::Buffer::new();
        let mut head = [0u8; 48];
        let mut n = 0;
        let put = |head: &mut [u8; 48], n: &mut usize, s: &[u8]| {
            head[*n..*n + s.len()].copy_from_slice(s);
            *n += s.len();
        };
        put(&mut head, &mut n, b"*");
        put(&mut head, &mut n, num.format(args.len()).as_bytes());
        put(&mut head, &mut n, b"\r\n");
        let mut total = 0;
        let mut added = false;
        for a in args {
            put(&mut head, &mut n, b"$");
            put(&mut head, &mut n, num.format(a.len()).as_bytes());
            put(&mut head, &mut n, b"\r\n");
            added |= self.append(&head[..n]);
            added |= self.append(a);
            total += n + a.len();
            n = 0;
            put(&mut head, &mut n, b"\r\n");
        }
        added |= self.append(&head[..n]);
        (total + n, added)
    }

    /// Index of the block holding offset `from` (the last block for one past the end).
    fn index_of(&self, from: u64) -> Option<usize> {
        if self.blocks.is_empty() || !self.holds(from) {
            return None;
        }
        Some(self.blocks.partition_point(|b| b.start <= from).max(1) - 1)
    }

    /// Collects the blocks holding the bytes from offset `from` on, at most about `max`
    /// bytes, as (block, range of the wanted bytes in it: the tail block may grow after
    /// this look); returns how many bytes. The blocks stay valid for the caller however
    /// the buffer is trimmed meanwhile.
    pub fn read(&self, from: u64, max: usize, out: &mut Vec<Chunk>) -> Result<usize, NotHeld> {
        if from == self.end + 1 {
            return Ok(0);
        }
        let mut i = self.index_of(from).ok_or(NotHeld(from))?;
        let mut pos = (from - self.blocks[i].start) as usize;
        let mut n = 0;
        while i < self.blocks.len() && n < max {
            let b = &self.blocks[i];
            let used = b.used();
            if used > pos {
                out.push(Chunk {
                    block: b.clone(),
                    from: pos,
                    to: used,
                });
                n += used - pos;
            }
            pos = 0;
            i += 1;
        }
        Ok(n)
    }

    /// Output buffer memory of a replica whose next byte is `from` (Redis's
    /// getClientOutputBufferMemoryUsage for a replica): from the block it is in to the
    /// end of the last block, with the blocks' overhead.
    pub fn pending_memory(&self, from: u64) -> usize {
        let (Some(i), Some(last)) = (self.index_of(from), self.blocks.back()) else {
            return 0;
        };
        let bytes = (last.start + last.cap as u64).saturating_sub(self.blocks[i].start);
        bytes as usize + (self.blocks.len() - i) * block_overhead()
    }

    /// Drops whole blocks from the head (at most `max_blocks`) while the history exceeds
    /// repl-backlog-size without the first block, and no reader still needs it (`pinned`:
    /// the lowest next offset of the replicas being fed). Never the last block.
    pub fn trim(&mut self, pinned: Option<u64>, max_blocks: usize) {
        let mut n = 0;
        while self.histlen > self.size as u64 && n < max_blocks && self.blocks.len() > 1 {
            let first = &self.blocks[0];
            let used = first.used() as u64;
            if pinned.is_some_and(|p| p < first.start + used) {
                break;
            }
            if self.histlen - used <= self.size as u64 {
                break;
            }
            self.histlen -= used;
            self.mem -= first.cap + block_overhead();
            self.blocks.pop_front();
            n += 1;
        }
    }

    /// The bytes from offset `from` (inclusive) to the end, if still held (tests, debugging).
    pub fn since(&self, from: u64) -> Option<Vec<u8>> {
        let mut parts = Vec::new();
        self.read(from, usize::MAX, &mut parts).ok()?;
        let mut out = Vec::new();
        for c in parts {
            out.extend_from_slice(c.bytes());
        }
        Some(out)
    }
}

/// A command as a RESP multibulk (the form every Redis replica expects on the stream).
pub fn encode(args: &[&[u8]]) -> Bytes {
    let len: usize = args.iter().map(|a| a.len() + 16).sum::<usize>() + 16;
    let mut b = BytesMut::with_capacity(len);
    encode_into(&mut b, args);
    b.freeze()
}

/// Appends a RESP multibulk to `b`.
pub fn encode_into(b: &mut BytesMut, args: &[&[u8]]) {
    let mut num = itoa::Buffer::new();
    b.put_u8(b'*');
    b.put_slice(num.format(args.len()).as_bytes());
    b.put_slice(b"\r\n");
    for a in args {
        b.put_u8(b'$');
        b.put_slice(num.format(a.len()).as_bytes());
        b.put_slice(b"\r\n");
        b.put_slice(a);
        b.put_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_most_recent_bytes_by_offset() {
        let mut b = Backlog::new(16 * 1024, 100);
        assert_eq!(b.first_byte_offset(), 101);
        assert_eq!(b.since(101), Some(Vec::new()));
        assert_eq!(b.since(102), None);
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for chunk in data.chunks(777) {
            if b.append(chunk) {
                b.trim(None, TRIM_PER_CALL);
            }
        }
        let end = 100 + data.len() as u64;
        // Whole blocks: more than the setting, less than the setting plus a block.
        assert!(b.histlen() > 16 * 1024 && b.histlen() <= 32 * 1024);
        assert_eq!(b.first_byte_offset(), end + 1 - b.histlen() as u64);
        let tail = b.since(end - 999).expect("held");
        assert_eq!(tail, &data[data.len() - 1000..]);
        assert!(b.since(b.first_byte_offset() - 1).is_none());
        let all = b.since(b.first_byte_offset()).expect("held");
        assert_eq!(all, &data[data.len() - b.histlen()..]);
        b.append(b"xyz");
        assert_eq!(b.since(end + 1).expect("held"), b"xyz");
    }

    #[test]
    fn a_reader_pins_the_blocks_it_still_needs() {
        let mut b = Backlog::new(16 * 1024, 0);
        let data = vec![7u8; 200 * 1024];
        b.append(&data);
        b.trim(Some(1), usize::MAX);
        assert_eq!(b.histlen(), data.len());
        assert_eq!(b.first_byte_offset(), 1);
        // The reader's block and everything after it is its output buffer.
        assert!(b.pending_memory(1) >= data.len());
        b.trim(Some(100 * 1024), usize::MAX);
        assert!(b.first_byte_offset() <= 100 * 1024);
        assert!(b.first_byte_offset() > 80 * 1024);
        b.trim(None, 2);
        assert!(b.histlen() > 16 * 1024);
        b.trim(None, usize::MAX);
        assert!(b.histlen() <= 32 * 1024);
        let caught_up = b.pending_memory(data.len() as u64 + 1);
        assert!(caught_up <= BLOCK_MIN + block_overhead());
        assert_eq!(b.memory(), b.blocks.len() * (BLOCK_MIN + block_overhead()));
    }

    #[test]
    fn commands_are_encoded_in_place() {
        let mut b = Backlog::new(16 * 1024, 0);
        let v: [&[u8]; 3] = [b"SET", b"k", b"value"];
        let (n, added) = b.append_command(&v);
        assert!(added);
        assert_eq!(b.since(1).expect("held"), &encode(&v)[..]);
        assert_eq!(n, encode(&v).len());
    }

    #[test]
    fn encodes_multibulk() {
        let v: [&[u8]; 2] = [b"SET", b"k"];
        assert_eq!(&encode(&v)[..], b"*2\r\n$3\r\nSET\r\n$1\r\nk\r\n");
    }
}
