//! `Pack`: a listpack-like sequence of byte strings kept in one allocation.
//!
//! Small hashes, sets, sorted sets and list nodes use it so that a collection of a few dozen
//! short elements costs one heap block instead of one per element (memory per key is
//! benchmarked against redis-server). Each entry is `len (LEB128) | bytes | len (reversed
//! LEB128)`, so the sequence can be walked from either end like Redis's listpack.

use super::thin::ThinBuf;

/// A packed sequence of byte strings. Offsets handed out by the cursor methods point at the
/// start of an entry and stay valid until the pack is mutated. The entry count leads the
/// buffer (absent when empty): 2 bytes below 65535 entries, else `FF FF` and 4 bytes, so a
/// small pack pays 2 bytes for it (like a listpack's) and a count is never walked for. This
/// keeps `Pack` at one thin pointer (8 bytes) so small collections can sit unboxed in
/// `db::Value` with one heap block each.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Pack {
    buf: ThinBuf,
}

/// Bytes of the in-buffer header (entry count) below `BIG_COUNT` entries.
const HDR: usize = 2;
/// The short count's value that says a 4-byte count follows.
const BIG_COUNT: u16 = u16::MAX;
/// Bytes of the header from `BIG_COUNT` entries on.
const BIG_HDR: usize = 6;

/// The header for `n` entries.
fn count_header(n: usize) -> ([u8; BIG_HDR], usize) {
    let mut h = [0u8; BIG_HDR];
    match u16::try_from(n) {
        Ok(c) if c != BIG_COUNT => {
            h[..HDR].copy_from_slice(&c.to_le_bytes());
            (h, HDR)
        }
        _ => {
            h[..HDR].copy_from_slice(&BIG_COUNT.to_le_bytes());
            // Entries are at least 2 bytes and a pack is below 4 GiB (ThinBuf), so < 2^31.
            h[HDR..].copy_from_slice(&(n as u32).to_le_bytes());
            (h, BIG_HDR)
        }
    }
}

/// Below this size a pack grows to the exact size it needs, like a listpack (small values
/// dominate memory per key); above it, amortised doubling keeps big list nodes cheap to grow.
const EXACT_GROWTH: usize = 512;

impl std::fmt::Debug for Pack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

fn varint_len(mut n: usize) -> usize {
    let mut l = 1;
    while n >= 0x80 {
        n >>= 7;
        l += 1;
    }
    l
}

/// Writes the LEB128 length header of an `n`-byte payload into `hdr`; returns its size.
fn put_varint(hdr: &mut [u8; 10], mut n: usize) -> usize {
    let mut h = 0;
    while n >= 0x80 {
        hdr[h] = (n as u8) | 0x80;
        n >>= 7;
        h += 1;
    }
    hdr[h] = n as u8;
    h + 1
}

/// Encodes one entry (header, payload, trailer) into `out`.
fn encode_entry(out: &mut ThinBuf, data: &[u8]) {
    let mut hdr = [0u8; 10];
    let h = put_varint(&mut hdr, data.len());
    let mut rev = hdr;
    rev[..h].reverse();
    out.extend_from_slices(&[&hdr[..h], data, &rev[..h]]);
}

/// Total encoded size of an entry with a payload of `n` bytes.
pub fn entry_size(n: usize) -> usize {
    n + 2 * varint_len(n)
}

impl Pack {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        match self.buf.get(..HDR) {
            Some(h) => match u16::from_le_bytes([h[0], h[1]]) {
                BIG_COUNT => match self.buf.get(HDR..BIG_HDR) {
                    Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize,
                    None => 0,
                },
                c => c as usize,
            },
            None => 0,
        }
    }

    /// Offset of the first entry (the header's size; `HDR` for an empty pack, where the
    /// header is made).
    #[inline]
    fn hdr(&self) -> usize {
        match self.buf.get(..HDR) {
            Some(h) if u16::from_le_bytes([h[0], h[1]]) == BIG_COUNT => BIG_HDR,
            _ => HDR,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Records the entry count, moving the entries when the header changes size (at 65535
    /// entries, so rarely).
    fn set_len(&mut self, n: usize) {
        if n == 0 {
            self.buf = ThinBuf::new();
            return;
        }
        let (h, size) = count_header(n);
        let old = self.hdr();
        if size == old {
            self.buf[..size].copy_from_slice(&h[..size]);
        } else {
            self.buf.replace_range(0..old, &h[..size]);
        }
    }

    /// Makes room for `extra` bytes (exactly while small) and creates the header if needed.
    fn grow(&mut self, extra: usize) {
        if self.buf.is_empty() {
            self.buf.reserve_exact(HDR + extra);
            self.buf.extend_from_slice(&[0; HDR]);
        } else if self.buf.len() + extra <= EXACT_GROWTH {
            self.buf.reserve_exact(extra);
        } else {
            // Grow so that the allocation (with ThinBuf's header) is a power of two: list
            // nodes are capped at 4..64 KiB with room for that header (see list.rs), so a
            // full node ends with no slack. Doubling from the odd exact-growth size
            // overshot: an 8 KiB node's last entries doubled it to 16 KiB (2x redis on
            // lists); and an allocation a few bytes over 8 KiB takes mimalloc's 10 KiB class.
            let need = self.buf.len() + extra;
            if need > self.buf.capacity() {
                let cap = (need + super::thin::HEAD).next_power_of_two() - super::thin::HEAD;
                self.buf.reserve_exact(cap - self.buf.len());
            }
        }
    }

    /// Bytes used by the encoded entries (the analogue of a listpack's byte size).
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Heap bytes held (for MEMORY USAGE / used_memory accounting).
    pub fn heap_size(&self) -> usize {
        self.buf.heap_size()
    }

    /// Offset of the first entry, if any.
    pub fn first(&self) -> Option<usize> {
        (!self.buf.is_empty()).then(|| self.hdr())
    }

    /// Offset of the last entry, if any.
    pub fn last(&self) -> Option<usize> {
        if self.buf.is_empty() {
            None
        } else {
            self.prev(self.buf.len())
        }
    }

    /// Payload and offset of the following entry for the entry at `off`.
    pub fn entry(&self, off: usize) -> (&[u8], usize) {
        let mut n = 0usize;
        let mut shift = 0;
        let mut p = off;
        loop {
            let b = self.buf[p];
            p += 1;
            n |= ((b & 0x7f) as usize) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        let data = &self.buf[p..p + n];
        (data, p + n + varint_len(n))
    }

    /// Payload of the entry at `off`.
    pub fn get_at(&self, off: usize) -> &[u8] {
        self.entry(off).0
    }

    /// Offset of the entry after the one at `off`, if any.
    pub fn next(&self, off: usize) -> Option<usize> {
        let (_, n) = self.entry(off);
        (n < self.buf.len()).then_some(n)
    }

    /// Offset of the entry that ends right before `end` (an entry offset or `bytes()`).
    pub fn prev(&self, end: usize) -> Option<usize> {
        if end <= self.hdr() {
            return None;
        }
        let mut n = 0usize;
        let mut shift = 0;
        let mut p = end;
        loop {
            p -= 1;
            let b = self.buf[p];
            n |= ((b & 0x7f) as usize) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        Some(end - entry_size(n))
    }

    /// Iterates payloads front to back.
    pub fn iter(&self) -> PackIter<'_> {
        PackIter {
            pack: self,
            front: self.hdr().min(self.buf.len()),
            back: self.buf.len(),
        }
    }

    pub fn push_back(&mut self, data: &[u8]) {
        let n = self.len();
        self.grow(entry_size(data.len()));
        encode_entry(&mut self.buf, data);
        self.set_len(n + 1);
    }

    pub fn push_front(&mut self, data: &[u8]) {
        self.insert_at(0, data);
    }

    /// Inserts an entry so that it starts at byte offset `off` (an entry offset or `bytes()`;
    /// 0 is the front).
    pub fn insert_at(&mut self, off: usize, data: &[u8]) {
        // Open a gap and encode in place: no temporary allocation on the LPUSH path.
        let mut hdr = [0u8; 10];
        let h = put_varint(&mut hdr, data.len());
        let total = 2 * h + data.len();
        let n = self.len();
        self.grow(total);
        let off = off.max(self.hdr());
        let old = self.buf.len();
        self.buf.resize(old + total);
        self.buf.copy_within(off..old, off + total);
        let d = off + h;
        self.buf[off..d].copy_from_slice(&hdr[..h]);
        self.buf[d..d + data.len()].copy_from_slice(data);
        let t = d + data.len();
        for i in 0..h {
            self.buf[t + i] = hdr[h - 1 - i];
        }
        self.set_len(n + 1);
    }

    /// Replaces the payload of the entry at `off`.
    pub fn replace_at(&mut self, off: usize, data: &[u8]) {
        let (_, end) = self.entry(off);
        // Same payload length, same header and trailer: overwrite the payload in place
        // (HSET of a same-sized value, the common overwrite), no re-encoding.
        if end - off == entry_size(data.len()) {
            let d = off + varint_len(data.len());
            self.buf[d..d + data.len()].copy_from_slice(data);
            return;
        }
        let mut enc = ThinBuf::with_capacity(entry_size(data.len()));
        encode_entry(&mut enc, data);
        let new_len = self.buf.len() - (end - off) + enc.len();
        if new_len > self.buf.len() {
            self.grow(new_len - self.buf.len());
        }
        self.buf.replace_range(off..end, &enc);
    }

    /// Removes `n` consecutive entries starting at `off`.
    pub fn remove_at(&mut self, off: usize, n: usize) {
        let mut end = off;
        let mut removed = 0;
        while removed < n && end < self.buf.len() {
            end = self.entry(end).1;
            removed += 1;
        }
        self.buf.replace_range(off..end, &[]);
        let left = self.len() - removed;
        self.set_len(left);
        if self.buf.capacity() > 64 && self.buf.capacity() > 2 * self.buf.len() {
            self.buf.shrink_to(self.buf.len() * 5 / 4);
        }
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        let off = self.first()?;
        let v = self.get_at(off).to_vec();
        self.remove_at(off, 1);
        Some(v)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let off = self.last()?;
        let v = self.get_at(off).to_vec();
        self.remove_at(off, 1);
        Some(v)
    }

    /// Offset of the entry with index `idx` (front = 0), walking from the nearer end.
    pub fn offset_of(&self, idx: usize) -> Option<usize> {
        if idx >= self.len() {
            return None;
        }
        if idx <= self.len() / 2 {
            let mut off = self.hdr();
            for _ in 0..idx {
                off = self.entry(off).1;
            }
            Some(off)
        } else {
            let mut off = self.buf.len();
            for _ in idx..self.len() {
                off = self.prev(off)?;
            }
            Some(off)
        }
    }

    /// Payload at index `idx`.
    pub fn get(&self, idx: usize) -> Option<&[u8]> {
        self.offset_of(idx).map(|o| self.get_at(o))
    }

    pub fn clear(&mut self) {
        self.buf = ThinBuf::new();
    }

    /// Moves the entries from index `at` onward into a new pack (used to split list nodes).
    pub fn split_off(&mut self, at: usize) -> Pack {
        match self.offset_of(at) {
            None => Pack::new(),
            Some(off) => {
                let moved = self.len() - at;
                let (h, size) = count_header(moved);
                let mut tail = ThinBuf::with_capacity(size + self.buf.len() - off);
                tail.extend_from_slices(&[&h[..size], &self.buf[off..]]);
                self.buf.truncate(off);
                self.set_len(at);
                Pack { buf: tail }
            }
        }
    }

    /// Appends all entries of `other`.
    pub fn append(&mut self, other: &Pack) {
        if other.is_empty() {
            return;
        }
        let n = self.len() + other.len();
        let from = other.hdr();
        self.grow(other.buf.len() - from);
        self.buf.extend_from_slice(&other.buf[from..]);
        self.set_len(n);
    }
}

/// Double-ended iterator over a pack's payloads.
pub struct PackIter<'a> {
    pack: &'a Pack,
    front: usize,
    back: usize,
}

impl<'a> Iterator for PackIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.front >= self.back {
            return None;
        }
        let (d, n) = self.pack.entry(self.front);
        self.front = n;
        Some(d)
    }
}

impl<'a> DoubleEndedIterator for PackIter<'a> {
    fn next_back(&mut self) -> Option<&'a [u8]> {
        if self.front >= self.back {
            return None;
        }
        let off = self.pack.prev(self.back)?;
        self.back = off;
        Some(self.pack.get_at(off))
    }
}

impl<'a> IntoIterator for &'a Pack {
    type Item = &'a [u8];
    type IntoIter = PackIter<'a>;
    fn into_iter(self) -> PackIter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn growth_exact_when_small_amortised_when_big() {
        let mut p = Pack::new();
        for m in [&b"red"[..], b"green", b"blue"] {
            p.push_back(m);
        }
        // A 3-member pack has no slack: its block is the size class of its bytes and one
        // length byte (2 bytes of count, 18 of entries: 24 bytes).
        assert_eq!(p.bytes(), 2 + 18);
        assert_eq!(p.heap_size(), 24);
        let (mut grows, mut last) = (0, p.heap_size());
        for i in 0..4000 {
            p.push_front(format!("item-{i}").as_bytes());
            if p.heap_size() != last {
                grows += 1;
                last = p.heap_size();
            }
        }
        // Exact steps up to 512 bytes (~50), then doubling: no realloc per push on a big node.
        assert!(grows < 100, "{grows} reallocations for 4000 pushes");
        assert!(p.heap_size() < 2 * p.bytes() + 64);
    }

    #[test]
    fn a_count_past_65534_takes_a_longer_header() {
        let mut p = Pack::new();
        for i in 0..70_000u32 {
            p.push_back(&i.to_le_bytes()[..(i % 3) as usize]);
        }
        assert_eq!(p.len(), 70_000);
        assert_eq!(p.iter().count(), 70_000);
        assert_eq!(p.get(69_999), Some(&69_999u32.to_le_bytes()[..0]));
        assert_eq!(p.get(1), Some(&1u32.to_le_bytes()[..1]));
        while p.len() > 65_534 {
            p.pop_front();
        }
        // Back to the 2-byte count: the entries moved down and still read the same.
        assert_eq!(p.len(), 65_534);
        assert_eq!(p.first(), Some(HDR));
        assert_eq!(p.iter().count(), 65_534);
        assert_eq!(p.iter().rev().count(), 65_534);
        p.push_front(b"x");
        assert_eq!(
            (p.len(), p.first(), p.get(0)),
            (65_535, Some(BIG_HDR), Some(&b"x"[..]))
        );
        let tail = p.split_off(10);
        assert_eq!(
            (p.len(), tail.len(), tail.iter().count()),
            (10, 65_525, 65_525)
        );
    }

    #[test]
    fn full_list_node_has_no_slack() {
        // A quicklist node filled up to the default 8 KiB node limit (list-max-listpack-size
        // -2), which counts the buffer's header (list.rs `node_fits`): the allocation is
        // exactly 8 KiB, not a few bytes over (which mimalloc serves from its 10 KiB class).
        let mut p = Pack::new();
        while p.bytes() + entry_size(3) + crate::types::thin::HEAD <= 8192 {
            p.push_front(b"xxx");
        }
        assert_eq!(p.heap_size(), 8192, "bytes held");
    }

    proptest! {
        #[test]
        fn pack_matches_vecdeque(ops in proptest::collection::vec((0u8..7, proptest::collection::vec(any::<u8>(), 0..300)), 0..60)) {
            let mut p = Pack::new();
            let mut m: std::collections::VecDeque<Vec<u8>> = Default::default();
            for (op, data) in ops {
                match op {
                    0 => { p.push_back(&data); m.push_back(data); }
                    1 => { p.push_front(&data); m.push_front(data); }
                    2 => { prop_assert_eq!(p.pop_front(), m.pop_front()); }
                    3 => { prop_assert_eq!(p.pop_back(), m.pop_back()); }
                    4 => if !m.is_empty() {
                        let i = data.len() % m.len();
                        let off = p.offset_of(i).unwrap();
                        p.replace_at(off, &data);
                        m[i] = data;
                    },
                    // A payload of the old one's length (overwritten in place).
                    5 => if !m.is_empty() {
                        let i = data.len() % m.len();
                        let mut same = data.clone();
                        same.resize(m[i].len(), b'#');
                        let off = p.offset_of(i).unwrap();
                        p.replace_at(off, &same);
                        m[i] = same;
                    },
                    _ => if !m.is_empty() {
                        let i = data.len() % m.len();
                        let mut tail = p.split_off(i);
                        let mut mt = m.split_off(i);
                        prop_assert_eq!(tail.len(), mt.len());
                        tail.push_back(b"x"); mt.push_back(b"x".to_vec());
                        p.append(&tail); m.append(&mut mt);
                    },
                }
                prop_assert_eq!(p.len(), m.len());
                let fwd: Vec<Vec<u8>> = p.iter().map(|s| s.to_vec()).collect();
                let want: Vec<Vec<u8>> = m.iter().cloned().collect();
                prop_assert_eq!(&fwd, &want);
                let rev: Vec<Vec<u8>> = p.iter().rev().map(|s| s.to_vec()).collect();
                let wrev: Vec<Vec<u8>> = m.iter().rev().cloned().collect();
                prop_assert_eq!(rev, wrev);
                for (i, w) in m.iter().enumerate() {
                    prop_assert_eq!(p.get(i), Some(&w[..]));
                }
            }
        }
    }
}
