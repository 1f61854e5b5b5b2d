//! List value: a quicklist — a deque of packed nodes, each capped by `list-max-listpack-size`
//! (negative: a byte size class, -2 = 8 KiB; positive: an entry count). O(1) push/pop at both
//! ends, with one small heap block per few hundred short elements. A list that fits in one
//! node is just that node (`ListValue::One`, 16 bytes, unboxed in `db::Value`): one heap block
//! per small list, like the hashes and sets.

use super::pack::{entry_size, Pack};
use super::Limits;
use std::collections::VecDeque;

/// A list: one packed node while it fits in one, else the boxed multi-node quicklist.
#[derive(Clone, Debug)]
pub enum ListValue {
    One(Pack),
    Many(Box<Quick>),
}

/// The multi-node form. Becomes `One` again when it shrinks to a single node.
#[derive(Clone, Debug, Default)]
pub struct Quick {
    nodes: VecDeque<Pack>,
    len: usize,
}

/// Whether a node may take one more entry of `n` bytes under the fill setting.
fn fits(node: &Pack, n: usize, fill: i64) -> bool {
    if node.is_empty() {
        return true;
    }
    if fill >= 0 {
        node.len() < (fill.max(1) as usize)
    } else {
        node.bytes() + entry_size(n) <= byte_cap(fill)
    }
}

/// [`fits`] for the nodes of a quicklist: the node's buffer header counts too, so that a
/// full node's allocation is exactly the power-of-two cap. (A lone listpack keeps Redis's
/// exact bound: it decides when OBJECT ENCODING turns to quicklist.)
fn node_fits(node: &Pack, n: usize, fill: i64) -> bool {
    if node.is_empty() || fill >= 0 {
        return fits(node, n, fill);
    }
    node.bytes() + entry_size(n) + super::thin::HEAD <= byte_cap(fill)
}

/// Node byte cap for a negative list-max-listpack-size.
fn byte_cap(fill: i64) -> usize {
    match fill {
        -1 => 4096,
        -2 => 8192,
        -3 => 16384,
        -4 => 32768,
        _ => 65536,
    }
}

impl Default for ListValue {
    fn default() -> Self {
        ListValue::One(Pack::new())
    }
}

impl ListValue {
    /// Its nodes (Redis's quicklist length: what freeing it costs, see lazyfree).
    pub fn node_count(&self) -> usize {
        match self {
            ListValue::One(_) => 1,
            ListValue::Many(q) => q.nodes.len(),
        }
    }

    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a list from its elements, head first (RDB load, RESTORE).
    pub fn from_items<T: AsRef<[u8]>>(items: impl IntoIterator<Item = T>, lim: &Limits) -> Self {
        let mut l = ListValue::new();
        for v in items {
            l.push_back(v.as_ref(), lim);
        }
        l
    }

    /// Redis 7.0 reports every list as a quicklist.
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }

    pub fn len(&self) -> usize {
        match self {
            ListValue::One(p) => p.len(),
            ListValue::Many(q) => q.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The multi-node form, converting a single node into it first.
    fn quick(&mut self) -> &mut Quick {
        if let ListValue::One(p) = self {
            let p = std::mem::take(p);
            let mut q = Quick {
                nodes: VecDeque::new(),
                len: p.len(),
            };
            if !p.is_empty() {
                q.reserve_node();
                q.nodes.push_back(p);
            }
            *self = ListValue::Many(Box::new(q));
        }
        match self {
            ListValue::Many(q) => q,
            ListValue::One(_) => unreachable!("converted above"),
        }
    }

    /// Back to a single node once at most one is left.
    fn settle(&mut self) {
        if let ListValue::Many(q) = self {
            if q.nodes.len() <= 1 {
                let p = q.nodes.pop_front().unwrap_or_default();
                *self = ListValue::One(p);
            }
        }
    }

    pub fn push_back(&mut self, v: &[u8], lim: &Limits) {
        match self {
            ListValue::One(p) if fits(p, v.len(), lim.list_max_listpack_size) => p.push_back(v),
            _ => self.quick().push_back(v, lim),
        }
    }

    pub fn push_front(&mut self, v: &[u8], lim: &Limits) {
        match self {
            ListValue::One(p) if fits(p, v.len(), lim.list_max_listpack_size) => p.push_front(v),
            _ => self.quick().push_front(v, lim),
        }
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        match self {
            ListValue::One(p) => p.pop_front(),
            ListValue::Many(q) => {
                let v = q.pop_front();
                self.settle();
                v
            }
        }
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        match self {
            ListValue::One(p) => p.pop_back(),
            ListValue::Many(q) => {
                let v = q.pop_back();
                self.settle();
                v
            }
        }
    }

    /// Element at a 0-based index from the head.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        match self {
            ListValue::One(p) => p.get(i),
            ListValue::Many(q) => q.get(i),
        }
    }

    /// Replaces element `i`; false when out of range.
    pub fn set(&mut self, i: usize, v: &[u8], lim: &Limits) -> bool {
        if let ListValue::One(p) = self {
            let Some(off) = p.offset_of(i) else {
                return false;
            };
            if fits_after_replace(p, p.get_at(off).len(), v.len(), lim.list_max_listpack_size) {
                p.replace_at(off, v);
                return true;
            }
        }
        let ok = self.quick().set(i, v, lim);
        self.settle();
        ok
    }

    /// Inserts `v` before element `i` (or at the tail when `i == len`).
    pub fn insert(&mut self, i: usize, v: &[u8], lim: &Limits) {
        if let ListValue::One(p) = self {
            if fits(p, v.len(), lim.list_max_listpack_size) {
                match p.offset_of(i) {
                    Some(off) => p.insert_at(off, v),
                    None => p.push_back(v),
                }
                return;
            }
        }
        self.quick().insert(i, v, lim);
        self.settle();
    }

    /// The nodes head to tail.
    fn nodes(&self) -> impl DoubleEndedIterator<Item = &Pack> {
        let (one, many) = match self {
            ListValue::One(p) => (Some(p), None),
            ListValue::Many(q) => (None, Some(&q.nodes)),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    /// Iterates head to tail.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> {
        self.nodes().flat_map(|n| n.iter())
    }

    /// Elements with indices in `[start, end]` (inclusive, already clamped by the caller).
    pub fn range(&self, start: usize, end: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.for_range(start, end, |e| out.push(e.to_vec()));
        out
    }

    /// Visits elements with indices in `[start, end]` without copying them (LRANGE).
    pub fn for_range(&self, start: usize, end: usize, mut f: impl FnMut(&[u8])) {
        let len = self.len();
        if start > end || start >= len {
            return;
        }
        let mut left = end.min(len - 1) - start + 1;
        let mut skip = start;
        for n in self.nodes() {
            if skip >= n.len() {
                skip -= n.len();
                continue;
            }
            for e in n.iter().skip(skip) {
                if left == 0 {
                    return;
                }
                f(e);
                left -= 1;
            }
            skip = 0;
        }
    }

    /// Keeps only indices `[start, end]` (inclusive); an empty range empties the list.
    pub fn trim(&mut self, start: usize, end: usize) {
        self.quick().trim(start, end);
        self.settle();
    }

    /// LREM: removes up to `|count|` elements equal to `v` from the head (count > 0), the
    /// tail (count < 0) or all (count == 0). Returns how many were removed.
    pub fn remove(&mut self, count: i64, v: &[u8]) -> usize {
        let n = self.quick().remove(count, v);
        self.settle();
        n
    }

    /// Heap bytes held (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        match self {
            ListValue::One(p) => p.heap_size(),
            ListValue::Many(q) => q.heap_size(),
        }
    }
}

/// Whether replacing an entry of `old` payload bytes by `new` keeps the node within its cap.
fn fits_after_replace(node: &Pack, old: usize, new: usize, fill: i64) -> bool {
    fill >= 0 || node.bytes() - entry_size(old) + entry_size(new) <= byte_cap(fill)
}

impl Quick {
    /// Few lists get here (one node is `ListValue::One`): room for two nodes, not VecDeque's
    /// default first capacity of four.
    fn reserve_node(&mut self) {
        if self.nodes.capacity() == 0 {
            self.nodes.reserve_exact(2);
        }
    }

    fn push_back(&mut self, v: &[u8], lim: &Limits) {
        match self.nodes.back_mut() {
            Some(n) if node_fits(n, v.len(), lim.list_max_listpack_size) => n.push_back(v),
            _ => {
                let mut n = Pack::new();
                n.push_back(v);
                self.reserve_node();
                self.nodes.push_back(n);
            }
        }
        self.len += 1;
    }

    fn push_front(&mut self, v: &[u8], lim: &Limits) {
        match self.nodes.front_mut() {
            Some(n) if node_fits(n, v.len(), lim.list_max_listpack_size) => n.push_front(v),
            _ => {
                let mut n = Pack::new();
                n.push_back(v);
                self.reserve_node();
                self.nodes.push_front(n);
            }
        }
        self.len += 1;
    }

    fn pop_front(&mut self) -> Option<Vec<u8>> {
        let n = self.nodes.front_mut()?;
        let v = n.pop_front();
        if n.is_empty() {
            self.nodes.pop_front();
        }
        self.len -= 1;
        v
    }

    fn pop_back(&mut self) -> Option<Vec<u8>> {
        let n = self.nodes.back_mut()?;
        let v = n.pop_back();
        if n.is_empty() {
            self.nodes.pop_back();
        }
        self.len -= 1;
        v
    }

    /// (node index, index inside node) of element `i`, walking from the nearer end.
    fn locate(&self, i: usize) -> Option<(usize, usize)> {
        if i >= self.len {
            return None;
        }
        if i < self.len / 2 {
            let mut rem = i;
            for (ni, n) in self.nodes.iter().enumerate() {
                if rem < n.len() {
                    return Some((ni, rem));
                }
                rem -= n.len();
            }
        } else {
            let mut rem = self.len - 1 - i;
            for (ni, n) in self.nodes.iter().enumerate().rev() {
                if rem < n.len() {
                    return Some((ni, n.len() - 1 - rem));
                }
                rem -= n.len();
            }
        }
        None
    }

    /// Element at a 0-based index from the head.
    fn get(&self, i: usize) -> Option<&[u8]> {
        let (ni, j) = self.locate(i)?;
        self.nodes[ni].get(j)
    }

    /// Replaces element `i`; false when out of range.
    fn set(&mut self, i: usize, v: &[u8], lim: &Limits) -> bool {
        let Some((ni, j)) = self.locate(i) else {
            return false;
        };
        let node = &mut self.nodes[ni];
        if let Some(off) = node.offset_of(j) {
            node.replace_at(off, v);
        }
        self.split_if_needed(ni, lim);
        true
    }

    /// Splits an overfull node in two (after an insert or replace in its middle).
    fn split_if_needed(&mut self, ni: usize, lim: &Limits) {
        let node = &mut self.nodes[ni];
        if node.len() < 2 {
            return;
        }
        let fill = lim.list_max_listpack_size;
        let over = if fill >= 0 {
            node.len() > fill.max(1) as usize
        } else {
            node.bytes() > byte_cap(fill)
        };
        if over {
            let half = node.len() / 2;
            let tail = node.split_off(half);
            self.nodes.insert(ni + 1, tail);
        }
    }

    /// Inserts `v` before element `i` (or at the tail when `i == len`).
    fn insert(&mut self, i: usize, v: &[u8], lim: &Limits) {
        if i == 0 {
            return self.push_front(v, lim);
        }
        if i >= self.len {
            return self.push_back(v, lim);
        }
        if let Some((ni, j)) = self.locate(i) {
            let node = &mut self.nodes[ni];
            if let Some(off) = node.offset_of(j) {
                node.insert_at(off, v);
                self.len += 1;
                self.split_if_needed(ni, lim);
            }
        }
    }

    /// Keeps only indices `[start, end]` (inclusive); an empty range empties the list.
    fn trim(&mut self, start: usize, end: usize) {
        if start > end || start >= self.len {
            self.nodes.clear();
            self.len = 0;
            return;
        }
        let end = end.min(self.len - 1);
        let mut drop_back = self.len - 1 - end;
        while drop_back > 0 {
            let Some(n) = self.nodes.back_mut() else {
                break;
            };
            if n.len() <= drop_back {
                drop_back -= n.len();
                self.len -= n.len();
                self.nodes.pop_back();
            } else {
                let keep = n.len() - drop_back;
                n.split_off(keep);
                self.len -= drop_back;
                drop_back = 0;
            }
        }
        let mut drop_front = start;
        while drop_front > 0 {
            let Some(n) = self.nodes.front_mut() else {
                break;
            };
            if n.len() <= drop_front {
                drop_front -= n.len();
                self.len -= n.len();
                self.nodes.pop_front();
            } else {
                *n = n.split_off(drop_front);
                self.len -= drop_front;
                drop_front = 0;
            }
        }
    }

    /// LREM: removes up to `|count|` elements equal to `v` from the head (count > 0), the
    /// tail (count < 0) or all (count == 0). Returns how many were removed.
    fn remove(&mut self, count: i64, v: &[u8]) -> usize {
        let limit = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs() as usize
        };
        let mut removed = 0;
        let order: Vec<usize> = if count < 0 {
            (0..self.nodes.len()).rev().collect()
        } else {
            (0..self.nodes.len()).collect()
        };
        for ni in order {
            if removed >= limit {
                break;
            }
            let node = &mut self.nodes[ni];
            let mut offs = Vec::new();
            let mut off = node.first();
            while let Some(o) = off {
                if node.get_at(o) == v {
                    offs.push(o);
                }
                off = node.next(o);
            }
            if count < 0 {
                offs.reverse();
            }
            offs.truncate(limit - removed);
            // Remove from the highest offset down so earlier offsets stay valid.
            offs.sort_unstable_by(|a, b| b.cmp(a));
            for o in &offs {
                node.remove_at(*o, 1);
            }
            removed += offs.len();
        }
        self.len -= removed;
        self.nodes.retain(|n| !n.is_empty());
        removed
    }

    fn heap_size(&self) -> usize {
        std::mem::size_of::<Quick>()
            + self.nodes.capacity() * std::mem::size_of::<Pack>()
            + self.nodes.iter().map(Pack::heap_size).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_list_has_one_node_slot() {
        let lim = Limits::default();
        let mut l = ListValue::new();
        for v in ["a", "b", "c"] {
            l.push_back(v.as_bytes(), &lim);
        }
        l.push_front(b"z", &lim);
        assert!(matches!(l, ListValue::One(_)));
        assert_eq!(std::mem::size_of::<ListValue>(), 16);
        let mut big = ListValue::from_items((0..5000).map(|i| format!("item-{i}")), &lim);
        assert!(matches!(&big, ListValue::Many(q) if q.nodes.len() > 1) && big.len() == 5000);
        big.trim(10, 12);
        assert!(matches!(big, ListValue::One(_)) && big.len() == 3);
        assert_eq!(big.get(0), Some(&b"item-10"[..]));
    }
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn matches_vecdeque(fill in prop_oneof![Just(-2i64), Just(3i64), Just(-1i64)],
                            ops in proptest::collection::vec((0u8..9, 0usize..50, "[ab]{0,3}|[a-z]{500,900}"), 0..150)) {
            let lim = Limits { list_max_listpack_size: fill, ..Limits::default() };
            let mut l = ListValue::new();
            let mut r: VecDeque<Vec<u8>> = VecDeque::new();
            for (op, i, v) in ops {
                let v = v.into_bytes();
                match op {
                    0 => { l.push_back(&v, &lim); r.push_back(v); }
                    1 => { l.push_front(&v, &lim); r.push_front(v); }
                    2 => prop_assert_eq!(l.pop_front(), r.pop_front()),
                    3 => prop_assert_eq!(l.pop_back(), r.pop_back()),
                    4 => { let i = i.min(r.len()); l.insert(i, &v, &lim); r.insert(i, v); }
                    5 => { let ok = i < r.len(); prop_assert_eq!(l.set(i, &v, &lim), ok); if ok { r[i] = v; } }
                    6 => {
                        let c = i as i64 % 5 - 2;
                        let want = {
                            let lim = if c == 0 { usize::MAX } else { c.unsigned_abs() as usize };
                            let mut idx: Vec<usize> = (0..r.len()).filter(|&k| r[k] == v).collect();
                            if c < 0 { idx.reverse(); }
                            idx.truncate(lim);
                            idx.sort_unstable_by(|a, b| b.cmp(a));
                            for k in &idx { r.remove(*k); }
                            idx.len()
                        };
                        prop_assert_eq!(l.remove(c, &v), want);
                    }
                    7 => {
                        let (s, e) = (i % 7, i % 13);
                        l.trim(s, e);
                        if s > e || s >= r.len() { r.clear(); } else {
                            let e = e.min(r.len() - 1);
                            r = r.iter().skip(s).take(e - s + 1).cloned().collect();
                        }
                    }
                    _ => {
                        let (s, e) = (i % 5, i);
                        let want: Vec<Vec<u8>> = if s > e || s >= r.len() { vec![] } else { r.iter().skip(s).take(e.min(r.len() - 1) - s + 1).cloned().collect() };
                        prop_assert_eq!(l.range(s, e.min(r.len().saturating_sub(1))), want);
                    }
                }
                prop_assert_eq!(l.len(), r.len());
                prop_assert!(l.iter().eq(r.iter().map(|v| &v[..])));
                for (k, v) in r.iter().enumerate() { prop_assert_eq!(l.get(k), Some(&v[..])); }
            }
        }
    }
}
