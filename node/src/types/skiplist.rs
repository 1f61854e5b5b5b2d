//! Order-statistics skiplist (Redis's zskiplist: levels with spans) over (score, member),
//! stored in an index arena so there is no unsafe code. Gives O(log N) insert, delete, rank,
//! select-by-rank and bound search.

const MAX_LEVEL: usize = 32;
const NIL: u32 = u32::MAX;
const HEAD: u32 = 0;

#[derive(Clone, Copy, Debug)]
struct Level {
    forward: u32,
    span: u32,
}

#[derive(Clone, Debug)]
struct Node {
    member: Box<[u8]>,
    score: f64,
    backward: u32,
    levels: Vec<Level>,
}

/// Sorted by score, then member bytes.
#[derive(Clone, Debug)]
pub struct SkipList {
    nodes: Vec<Node>,
    free: Vec<u32>,
    tail: u32,
    len: usize,
    level: usize,
    rng: u64,
}

impl Default for SkipList {
    fn default() -> Self {
        Self::new()
    }
}

/// Total order on (score, member) used by the list.
#[inline]
fn less(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> bool {
    s1 < s2 || (s1 == s2 && m1 < m2)
}

impl SkipList {
    pub fn new() -> Self {
        let head = Node {
            member: Box::new([]),
            score: 0.0,
            backward: NIL,
            levels: vec![
                Level {
                    forward: NIL,
                    span: 0
                };
                MAX_LEVEL
            ],
        };
        SkipList {
            nodes: vec![head],
            free: Vec::new(),
            tail: NIL,
            len: 0,
            level: 1,
            rng: 0x9E37_79B9_7F4A_7C15 ^ (rand::random::<u64>() | 1),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Level with P(level > k) = 0.25^k, as in Redis.
    fn random_level(&mut self) -> usize {
        // xorshift64*: only the level distribution matters here.
        let mut lvl = 1;
        loop {
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
            if (r >> 40) & 3 != 0 || lvl >= MAX_LEVEL {
                return lvl;
            }
            lvl += 1;
        }
    }

    #[inline]
    fn fwd(&self, x: u32, i: usize) -> u32 {
        self.nodes[x as usize].levels[i].forward
    }

    /// Inserts a new (score, member); the caller guarantees the member is absent.
    pub fn insert(&mut self, score: f64, member: &[u8]) {
        let mut update = [HEAD; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        let mut x = HEAD;
        for i in (0..self.level).rev() {
            rank[i] = if i == self.level - 1 { 0 } else { rank[i + 1] };
            loop {
                let f = self.fwd(x, i);
                if f == NIL {
                    break;
                }
                let n = &self.nodes[f as usize];
                if !less(n.score, &n.member, score, member) {
                    break;
                }
                rank[i] += self.nodes[x as usize].levels[i].span;
                x = f;
            }
            update[i] = x;
        }
        let lvl = self.random_level();
        if lvl > self.level {
            for i in self.level..lvl {
                rank[i] = 0;
                update[i] = HEAD;
                self.nodes[HEAD as usize].levels[i].span = self.len as u32;
            }
            self.level = lvl;
        }
        let node = Node {
            member: member.into(),
            score,
            backward: if update[0] == HEAD { NIL } else { update[0] },
            levels: vec![
                Level {
                    forward: NIL,
                    span: 0
                };
                lvl
            ],
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        for i in 0..lvl {
            let u = update[i] as usize;
            let ul = self.nodes[u].levels[i];
            self.nodes[id as usize].levels[i] = Level {
                forward: ul.forward,
                span: ul.span - (rank[0] - rank[i]),
            };
            self.nodes[u].levels[i] = Level {
                forward: id,
                span: (rank[0] - rank[i]) + 1,
            };
        }
        for (i, &u) in update.iter().enumerate().take(self.level).skip(lvl) {
            self.nodes[u as usize].levels[i].span += 1;
        }
        let f0 = self.fwd(id, 0);
        if f0 != NIL {
            self.nodes[f0 as usize].backward = id;
        } else {
            self.tail = id;
        }
        self.len += 1;
    }

    /// Removes (score, member); false if absent.
    pub fn remove(&mut self, score: f64, member: &[u8]) -> bool {
        let mut update = [HEAD; MAX_LEVEL];
        let mut x = HEAD;
        for i in (0..self.level).rev() {
            loop {
                let f = self.fwd(x, i);
                if f == NIL {
                    break;
                }
                let n = &self.nodes[f as usize];
                if !less(n.score, &n.member, score, member) {
                    break;
                }
                x = f;
            }
            update[i] = x;
        }
        let x = self.fwd(x, 0);
        if x == NIL {
            return false;
        }
        let n = &self.nodes[x as usize];
        if n.score != score || &*n.member != member {
            return false;
        }
        for (i, &u) in update.iter().enumerate().take(self.level) {
            let u = u as usize;
            if self.nodes[u].levels[i].forward == x {
                let xl = self.nodes[x as usize].levels[i];
                self.nodes[u].levels[i].span += xl.span;
                self.nodes[u].levels[i].span -= 1;
                self.nodes[u].levels[i].forward = xl.forward;
            } else {
                self.nodes[u].levels[i].span -= 1;
            }
        }
        let f0 = self.fwd(x, 0);
        let back = self.nodes[x as usize].backward;
        if f0 != NIL {
            self.nodes[f0 as usize].backward = back;
        } else {
            self.tail = back;
        }
        while self.level > 1 && self.fwd(HEAD, self.level - 1) == NIL {
            self.level -= 1;
        }
        self.len -= 1;
        let node = &mut self.nodes[x as usize];
        node.member = Box::new([]);
        node.levels = Vec::new();
        self.free.push(x);
        if self.len == 0 {
            self.nodes.truncate(1);
            self.free.clear();
        }
        true
    }

    /// Number of leading elements for which `pred(score, member)` holds. `pred` must be true
    /// on a prefix of the order (monotone), e.g. "score < min".
    pub fn count_while(&self, mut pred: impl FnMut(f64, &[u8]) -> bool) -> usize {
        let mut x = HEAD;
        let mut rank = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let f = self.fwd(x, i);
                if f == NIL {
                    break;
                }
                let n = &self.nodes[f as usize];
                if !pred(n.score, &n.member) {
                    break;
                }
                rank += self.nodes[x as usize].levels[i].span as usize;
                x = f;
            }
        }
        rank
    }

    /// 0-based rank of an existing (score, member).
    pub fn rank(&self, score: f64, member: &[u8]) -> usize {
        self.count_while(|s, m| less(s, m, score, member))
    }

    /// Node id at 0-based `rank`.
    fn node_at(&self, rank: usize) -> Option<u32> {
        if rank >= self.len {
            return None;
        }
        let target = rank + 1;
        let mut x = HEAD;
        let mut traversed = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let f = self.fwd(x, i);
                let span = self.nodes[x as usize].levels[i].span as usize;
                if f == NIL || traversed + span > target {
                    break;
                }
                traversed += span;
                x = f;
            }
            if traversed == target {
                return Some(x);
            }
        }
        None
    }

    /// Element at 0-based rank.
    pub fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        let n = &self.nodes[self.node_at(rank)? as usize];
        Some((&n.member, n.score))
    }

    /// Iterates from 0-based rank `start` forward (or backward when `rev`).
    pub fn iter_from(&self, start: usize, rev: bool) -> SkipIter<'_> {
        SkipIter {
            list: self,
            cur: self.node_at(start).unwrap_or(NIL),
            rev,
        }
    }

    pub fn iter(&self) -> SkipIter<'_> {
        SkipIter {
            list: self,
            cur: self.fwd(HEAD, 0),
            rev: false,
        }
    }

    pub fn last(&self) -> Option<(&[u8], f64)> {
        (self.tail != NIL).then(|| {
            let n = &self.nodes[self.tail as usize];
            (&*n.member, n.score)
        })
    }

    /// Approximate heap bytes.
    pub fn heap_size(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self
                .nodes
                .iter()
                .map(|n| n.member.len() + n.levels.capacity() * 8)
                .sum::<usize>()
    }
}

pub struct SkipIter<'a> {
    list: &'a SkipList,
    cur: u32,
    rev: bool,
}

impl<'a> Iterator for SkipIter<'a> {
    type Item = (&'a [u8], f64);
    fn next(&mut self) -> Option<Self::Item> {
        if self.cur == NIL {
            return None;
        }
        let n = &self.list.nodes[self.cur as usize];
        self.cur = if self.rev {
            n.backward
        } else {
            n.levels[0].forward
        };
        Some((&n.member, n.score))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(s: f64, m: &[u8]) -> (u64, Vec<u8>) {
        // Order-preserving map of finite/inf floats to u64 for a reference BTreeSet.
        let b = s.to_bits();
        let k = if s.is_sign_negative() {
            !b
        } else {
            b | (1 << 63)
        };
        (k, m.to_vec())
    }

    proptest! {
        #[test]
        fn matches_sorted_reference(ops in proptest::collection::vec((any::<bool>(), -5i32..5, 0u8..20), 0..400)) {
            let mut sl = SkipList::new();
            let mut r = std::collections::BTreeMap::new();
            for (ins, s, m) in ops {
                let s = s as f64 / 2.0;
                let m = vec![b'a' + m];
                let k = key(s, &m);
                if ins {
                    if let std::collections::btree_map::Entry::Vacant(e) = r.entry(k) {
                        e.insert(s);
                        sl.insert(s, &m);
                    }
                } else {
                    prop_assert_eq!(sl.remove(s, &m), r.remove(&k).is_some());
                }
                prop_assert_eq!(sl.len(), r.len());
            }
            let want: Vec<(Vec<u8>, f64)> = r.iter().map(|((_, m), s)| (m.clone(), *s)).collect();
            let got: Vec<(Vec<u8>, f64)> = sl.iter().map(|(m, s)| (m.to_vec(), s)).collect();
            prop_assert_eq!(&got, &want);
            for (i, (m, s)) in want.iter().enumerate() {
                prop_assert_eq!(sl.rank(*s, m), i);
                prop_assert_eq!(sl.get(i), Some((&m[..], *s)));
                let rev: Vec<_> = sl.iter_from(i, true).map(|(m, _)| m.to_vec()).collect();
                let wrev: Vec<_> = want[..=i].iter().rev().map(|(m, _)| m.clone()).collect();
                prop_assert_eq!(rev, wrev);
            }
            prop_assert_eq!(sl.get(want.len()), None);
            for t in -6..6 {
                let t = t as f64 / 2.0;
                prop_assert_eq!(sl.count_while(|s, _| s < t), want.iter().filter(|(_, s)| *s < t).count());
            }
        }
    }

    #[test]
    fn large_ranks_are_logarithmic_and_correct() {
        let mut sl = SkipList::new();
        for i in 0..100_000u32 {
            sl.insert((i % 1000) as f64, &i.to_be_bytes());
        }
        assert_eq!(sl.len(), 100_000);
        let (m, s) = sl.get(50_000).unwrap();
        assert_eq!(s, 500.0);
        assert_eq!(sl.rank(s, m), 50_000);
        for i in (0..100_000u32).step_by(2) {
            assert!(sl.remove((i % 1000) as f64, &i.to_be_bytes()));
        }
        assert_eq!(sl.len(), 50_000);
        assert_eq!(sl.iter().count(), 50_000);
    }
}
