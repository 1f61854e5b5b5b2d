//! `IntSet`: sorted integers packed at the narrowest width that holds them all (2, 4 or 8
//! bytes), in one exactly-sized allocation, like Redis's intset. Five small integers cost 11
//! bytes instead of 40.

use super::thin::ThinBuf;

/// Layout: `[width][v0][v1]...` little-endian; empty = no allocation. A thin pointer (8
/// bytes) so a small set can sit unboxed in `db::Value`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct IntSet {
    buf: ThinBuf,
}

impl std::fmt::Debug for IntSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

fn width_for(v: i64) -> usize {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

impl IntSet {
    fn width(&self) -> usize {
        self.buf.first().map_or(2, |&w| w as usize)
    }

    pub fn len(&self) -> usize {
        match self.buf.len() {
            0 => 0,
            n => (n - 1) / self.width(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read(&self, i: usize) -> i64 {
        let w = self.width();
        let p = 1 + i * w;
        let b = &self.buf[p..p + w];
        match w {
            2 => i16::from_le_bytes([b[0], b[1]]) as i64,
            4 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
            _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        }
    }

    pub fn get(&self, i: usize) -> Option<i64> {
        (i < self.len()).then(|| self.read(i))
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = i64> + '_ {
        (0..self.len()).map(|i| self.read(i))
    }

    /// Like `slice::binary_search`.
    pub fn binary_search(&self, v: &i64) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.read(mid).cmp(v) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// Rebuilds the buffer from values (upgrading the width as needed).
    fn rebuild(&mut self, vals: impl ExactSizeIterator<Item = i64> + Clone) {
        let w = vals.clone().map(width_for).max().unwrap_or(2);
        let n = vals.len();
        if n == 0 {
            self.buf = ThinBuf::new();
            return;
        }
        let mut b = ThinBuf::with_capacity(1 + n * w);
        b.extend_from_slice(&[w as u8]);
        for v in vals {
            b.extend_from_slice(&v.to_le_bytes()[..w]);
        }
        self.buf = b;
    }

    /// Inserts `v` at sorted position `pos` (from `binary_search`).
    pub fn insert(&mut self, pos: usize, v: i64) {
        let w = self.width();
        if !self.buf.is_empty() && width_for(v) <= w {
            // Same width: grow exactly (realloc) and open a gap for the new value.
            let at = 1 + pos * w;
            self.buf.reserve_exact(w);
            self.buf.replace_range(at..at, &v.to_le_bytes()[..w]);
            return;
        }
        let old: Vec<i64> = self.iter().collect();
        let vals = old[..pos]
            .iter()
            .copied()
            .chain(std::iter::once(v))
            .chain(old[pos..].iter().copied());
        let all: Vec<i64> = vals.collect();
        self.rebuild(all.iter().copied());
    }

    /// Removes and returns the value at `pos`.
    pub fn remove(&mut self, pos: usize) -> i64 {
        let mut all: Vec<i64> = self.iter().collect();
        let v = all.remove(pos);
        self.rebuild(all.iter().copied());
        v
    }

    /// Heap bytes held, block header included.
    pub fn heap_size(&self) -> usize {
        self.buf.heap_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn behaves_like_sorted_vec(ops in proptest::collection::vec((any::<bool>(), prop_oneof![
            -50i64..50, any::<i16>().prop_map(i64::from), any::<i32>().prop_map(i64::from), any::<i64>()
        ]), 0..120)) {
            let mut s = IntSet::default();
            let mut r: Vec<i64> = Vec::new();
            for (ins, v) in ops {
                match (ins, r.binary_search(&v)) {
                    (true, Err(p)) => { prop_assert_eq!(s.binary_search(&v), Err(p)); s.insert(p, v); r.insert(p, v); }
                    (false, Ok(p)) => { prop_assert_eq!(s.binary_search(&v), Ok(p)); prop_assert_eq!(s.remove(p), r.remove(p)); }
                    (_, res) => prop_assert_eq!(s.binary_search(&v), res),
                }
                prop_assert_eq!(s.iter().collect::<Vec<_>>(), r.clone());
                prop_assert_eq!(s.len(), r.len());
            }
        }
    }

    #[test]
    fn narrow_when_small() {
        let mut s = IntSet::default();
        for (i, v) in [1i64, 2, 3, 4, 5].iter().enumerate() {
            s.insert(i, *v);
            // Up to three 16-bit values live inline in the ThinBuf word: no heap block.
            assert_eq!(s.heap_size() == 0, i < 3);
        }
        // One length byte, then the width byte and the values, in the block's size class.
        assert_eq!(s.heap_size(), 16);
        s.insert(5, 1 << 40);
        assert_eq!(s.heap_size(), 56);
        s.remove(0);
        assert_eq!(s.heap_size(), 48);
    }
}
