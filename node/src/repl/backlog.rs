//! The replication backlog: a fixed-size ring of the most recent bytes of the replication
//! stream, addressed by absolute stream offsets, so a replica that lost its link can ask for
//! the bytes it missed (PSYNC → +CONTINUE) instead of a full resync.
//!
//! Offsets follow Redis: `master_repl_offset` is the number of stream bytes produced so far;
//! the byte at offset `o` (1-based) is the `o`-th byte. A replica that has processed up to
//! `o` asks for `PSYNC <replid> o+1`.

use bytes::{BufMut, Bytes, BytesMut};

/// A ring buffer of stream bytes ending at `end_offset`.
pub struct Backlog {
    buf: Vec<u8>,
    /// Next write position in `buf`.
    idx: usize,
    /// Valid bytes in the ring (≤ capacity).
    histlen: usize,
    /// Absolute offset of the last byte written (the master_repl_offset when it was written).
    end_offset: u64,
}

impl Backlog {
    /// An empty backlog whose next byte will have offset `offset + 1`.
    pub fn new(size: usize, offset: u64) -> Self {
        Backlog {
            buf: vec![0; size.max(16 * 1024)],
            idx: 0,
            histlen: 0,
            end_offset: offset,
        }
    }

    pub fn size(&self) -> usize {
        self.buf.len()
    }

    pub fn histlen(&self) -> usize {
        self.histlen
    }

    /// Offset of the first byte held (Redis's repl_backlog_first_byte_offset).
    pub fn first_byte_offset(&self) -> u64 {
        self.end_offset + 1 - self.histlen as u64
    }

    /// Appends stream bytes.
    pub fn append(&mut self, mut data: &[u8]) {
        self.end_offset += data.len() as u64;
        let cap = self.buf.len();
        if data.len() >= cap {
            data = &data[data.len() - cap..];
            self.buf.copy_from_slice(data);
            self.idx = 0;
            self.histlen = cap;
            return;
        }
        let first = (cap - self.idx).min(data.len());
        self.buf[self.idx..self.idx + first].copy_from_slice(&data[..first]);
        let rest = data.len() - first;
        self.buf[..rest].copy_from_slice(&data[first..]);
        self.idx = (self.idx + data.len()) % cap;
        self.histlen = (self.histlen + data.len()).min(cap);
    }

    /// The bytes from offset `from` (inclusive) to the end, if still held. `from` one past
    /// the end gives an empty buffer (the replica is up to date).
    pub fn since(&self, from: u64) -> Option<Vec<u8>> {
        if from < self.first_byte_offset() || from > self.end_offset + 1 {
            return None;
        }
        let n = (self.end_offset + 1 - from) as usize;
        let cap = self.buf.len();
        // Position of the first wanted byte: `n` bytes before the write index.
        let start = (self.idx + cap - n % cap) % cap;
        let mut out = Vec::with_capacity(n);
        if n == 0 {
            return Some(out);
        }
        if start + n <= cap {
            out.extend_from_slice(&self.buf[start..start + n]);
        } else {
            out.extend_from_slice(&self.buf[start..]);
            out.extend_from_slice(&self.buf[..n - (cap - start)]);
        }
        Some(out)
    }

    /// Changes the capacity, keeping the most recent bytes that fit.
    pub fn resize(&mut self, size: usize) {
        let size = size.max(16 * 1024);
        if size == self.buf.len() {
            return;
        }
        let keep = self.histlen.min(size);
        let from = self.end_offset + 1 - keep as u64;
        let data = self.since(from).unwrap_or_default();
        let end = self.end_offset;
        *self = Backlog::new(size, end - data.len() as u64);
        self.append(&data);
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
    fn ring_keeps_the_most_recent_bytes_by_offset() {
        let mut b = Backlog::new(16 * 1024, 100);
        assert_eq!(b.first_byte_offset(), 101);
        assert_eq!(b.since(101), Some(Vec::new()));
        assert_eq!(b.since(102), None);
        let data: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        for chunk in data.chunks(777) {
            b.append(chunk);
        }
        let end = 100 + data.len() as u64;
        assert_eq!(b.histlen(), 16 * 1024);
        assert_eq!(b.first_byte_offset(), end + 1 - 16 * 1024);
        let tail = b.since(end - 999).expect("held");
        assert_eq!(tail, &data[data.len() - 1000..]);
        assert!(b.since(b.first_byte_offset() - 1).is_none());
        let all = b.since(b.first_byte_offset()).expect("held");
        assert_eq!(all, &data[data.len() - 16 * 1024..]);
        b.resize(20 * 1024);
        assert_eq!(
            b.since(end - 999).expect("held"),
            &data[data.len() - 1000..]
        );
        b.append(b"xyz");
        assert_eq!(b.since(end + 1).expect("held"), b"xyz");
    }

    #[test]
    fn encodes_multibulk() {
        let v: [&[u8]; 2] = [b"SET", b"k"];
        assert_eq!(&encode(&v)[..], b"*2\r\n$3\r\nSET\r\n$1\r\nk\r\n");
    }
}
