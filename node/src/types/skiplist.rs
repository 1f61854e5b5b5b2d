//! Sorted-set big encoding: an order-statistics skiplist (Redis's zskiplist: levels with
//! spans) over (score, member) plus a member → node hash index, in one structure so each
//! member is stored once. O(log N) insert, delete, rank, select-by-rank and bound search;
//! O(1) score lookup, uniform random pick and SCAN step. No unsafe code.
//!
//! Memory (issue 2): nodes live in an arena `Vec<Node>` indexed by node id (freed slots are
//! reused). A node's member bytes and its levels above the first share one `ThinBuf` (one
//! word: no allocation up to 7 bytes, a one-byte length up to 254); level 0 is inline (its
//! span is always 1, so only the forward link is stored). An element costs one malloc chunk,
//! one 32-byte arena slot, one `u32` in the dense vector and one `u32` hash slot.
//!
//! The dense vector of node ids (each node knows its position) gives uniform random picks
//! and the SCAN cursor, with `IndexedMap`'s rules: removal swaps the last id into the hole,
//! a score update relinks the node in place (same id, same position), appends land above
//! the downward cursor, so an element present for the whole scan is returned. Node ids stay
//! put (except in the rare whole-set `compact`), so removal is one skiplist search and no
//! index re-pointing.

use hashbrown::HashTable;
use std::hash::BuildHasher;

use super::thin::ThinBuf;

const MAX_LEVEL: usize = 32;
const _: () = assert!(std::mem::size_of::<Node>() == 32);
/// No node (end of a level, or no backward link from the first node).
const NIL: u32 = u32::MAX;
/// The header, which lives outside the arena.
const HEAD: u32 = u32::MAX - 1;

type Hasher = hashbrown::DefaultHashBuilder;
/// Arena size below which freed slots are never compacted away.
const COMPACT_MIN: usize = 64;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Level {
    forward: u32,
    span: u32,
}

const EMPTY: Level = Level {
    forward: NIL,
    span: 0,
};

#[derive(Clone)]
struct Node {
    /// Member bytes, then levels 1.. as little-endian (forward, span) u32 pairs: a node's
    /// only heap allocation (3 in 4 nodes have height 1 and store just the member).
    data: ThinBuf,
    score: f64,
    mlen: u32,
    backward: u32,
    /// Level 0's forward link; its span is 1 whenever the link is not NIL (and unused then).
    forward0: u32,
    /// Position in the dense vector.
    pos: u32,
}

impl Node {
    fn new(member: &[u8], score: f64, height: usize) -> Self {
        let mut levels = [0u8; 8 * (MAX_LEVEL - 1)];
        for l in levels.chunks_exact_mut(8) {
            l[..4].copy_from_slice(&NIL.to_le_bytes());
        }
        let lv = &levels[..8 * (height - 1)];
        let mut data = ThinBuf::with_capacity(member.len() + lv.len());
        data.extend_from_slices(&[member, lv]);
        Node {
            data,
            score,
            mlen: member.len() as u32,
            backward: NIL,
            forward0: NIL,
            pos: 0,
        }
    }

    #[inline]
    fn member(&self) -> &[u8] {
        &self.data[..self.mlen as usize]
    }

    fn height(&self) -> usize {
        1 + (self.data.len() - self.mlen as usize) / 8
    }

    #[inline]
    fn level(&self, i: usize) -> Level {
        if i == 0 {
            return Level {
                forward: self.forward0,
                span: 1,
            };
        }
        let o = self.mlen as usize + 8 * (i - 1);
        let b = &self.data[o..o + 8];
        Level {
            forward: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            span: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    #[inline]
    fn set_level(&mut self, i: usize, l: Level) {
        if i == 0 {
            self.forward0 = l.forward;
            return;
        }
        let o = self.mlen as usize + 8 * (i - 1);
        self.data[o..o + 4].copy_from_slice(&l.forward.to_le_bytes());
        self.data[o + 4..o + 8].copy_from_slice(&l.span.to_le_bytes());
    }
}

/// Sorted by score, then member bytes; members are unique.
#[derive(Clone)]
pub struct SkipList {
    /// Arena indexed by node id; slots in `free` hold no element.
    nodes: Vec<Node>,
    free: Vec<u32>,
    /// Ids of the elements, each at its node's `pos`.
    dense: Vec<u32>,
    head: [Level; MAX_LEVEL],
    index: HashTable<u32>,
    hasher: Hasher,
    tail: u32,
    level: usize,
    rng: u64,
}

impl Default for SkipList {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for SkipList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(m, s)| (String::from_utf8_lossy(m), s)))
            .finish()
    }
}

/// Total order on (score, member) used by the list.
#[inline]
fn less(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> bool {
    s1 < s2 || (s1 == s2 && m1 < m2)
}

impl SkipList {
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    pub fn with_capacity(n: usize) -> Self {
        SkipList {
            nodes: Vec::with_capacity(n),
            free: Vec::new(),
            dense: Vec::with_capacity(n),
            head: [EMPTY; MAX_LEVEL],
            index: HashTable::with_capacity(n),
            hasher: Hasher::default(),
            tail: NIL,
            level: 1,
            rng: 0x9E37_79B9_7F4A_7C15 ^ (rand::random::<u64>() | 1),
        }
    }

    pub fn len(&self) -> usize {
        self.dense.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dense.is_empty()
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
    fn lvl(&self, x: u32, i: usize) -> Level {
        if x == HEAD {
            self.head[i]
        } else {
            self.nodes[x as usize].level(i)
        }
    }

    #[inline]
    fn set_lvl(&mut self, x: u32, i: usize, l: Level) {
        if x == HEAD {
            self.head[i] = l;
        } else {
            self.nodes[x as usize].set_level(i, l);
        }
    }

    fn hash(&self, member: &[u8]) -> u64 {
        self.hasher.hash_one(member)
    }

    fn find(&self, member: &[u8]) -> Option<u32> {
        self.index
            .find(self.hash(member), |&i| {
                self.nodes[i as usize].member() == member
            })
            .copied()
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.find(member).map(|i| self.nodes[i as usize].score)
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.find(member).is_some()
    }

    /// Per level, the last node ordered before (score, member) and its 1-based rank.
    fn search(&self, score: f64, member: &[u8]) -> ([u32; MAX_LEVEL], [u32; MAX_LEVEL]) {
        let mut update = [HEAD; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        let mut x = HEAD;
        for i in (0..self.level).rev() {
            rank[i] = if i == self.level - 1 { 0 } else { rank[i + 1] };
            loop {
                let l = self.lvl(x, i);
                if l.forward == NIL {
                    break;
                }
                let n = &self.nodes[l.forward as usize];
                if !less(n.score, n.member(), score, member) {
                    break;
                }
                rank[i] += l.span;
                x = l.forward;
            }
            update[i] = x;
        }
        (update, rank)
    }

    /// Links node `id` (in the dense vector, not yet in the list) at its (score, member)
    /// position, using the height its data was allocated with.
    fn link(&mut self, id: u32) {
        let n = &self.nodes[id as usize];
        let height = n.height();
        let (mut update, mut rank) = self.search(n.score, n.member());
        // Every other element is linked.
        let linked = (self.dense.len() - 1) as u32;
        if height > self.level {
            for i in self.level..height {
                rank[i] = 0;
                update[i] = HEAD;
                self.head[i].span = linked;
            }
            self.level = height;
        }
        for i in 0..height {
            let ul = self.lvl(update[i], i);
            self.set_lvl(
                id,
                i,
                Level {
                    forward: ul.forward,
                    span: ul.span - (rank[0] - rank[i]),
                },
            );
            self.set_lvl(
                update[i],
                i,
                Level {
                    forward: id,
                    span: (rank[0] - rank[i]) + 1,
                },
            );
        }
        for (i, &u) in update.iter().enumerate().take(self.level).skip(height) {
            let mut l = self.lvl(u, i);
            l.span += 1;
            self.set_lvl(u, i, l);
        }
        self.nodes[id as usize].backward = if update[0] == HEAD { NIL } else { update[0] };
        let f0 = self.nodes[id as usize].forward0;
        if f0 != NIL {
            self.nodes[f0 as usize].backward = id;
        } else {
            self.tail = id;
        }
    }

    /// Takes linked node `id` out of the list; it stays in the arena, the dense vector and
    /// the index.
    fn unlink(&mut self, id: u32) {
        let n = &self.nodes[id as usize];
        let (update, _) = self.search(n.score, n.member());
        for (i, &u) in update.iter().enumerate().take(self.level) {
            let mut ul = self.lvl(u, i);
            if ul.forward == id {
                let xl = self.lvl(id, i);
                ul.span = ul.span + xl.span - 1;
                ul.forward = xl.forward;
            } else {
                ul.span -= 1;
            }
            self.set_lvl(u, i, ul);
        }
        let n = &self.nodes[id as usize];
        let (f0, back) = (n.forward0, n.backward);
        if f0 != NIL {
            self.nodes[f0 as usize].backward = back;
        } else {
            self.tail = back;
        }
        while self.level > 1 && self.head[self.level - 1].forward == NIL {
            self.level -= 1;
        }
    }

    /// Sets member's score, adding it if absent; true if the member is new. The caller
    /// rejects NaN. An update keeps the node's id (its SCAN position).
    pub fn insert(&mut self, member: &[u8], score: f64) -> bool {
        if let Some(id) = self.find(member) {
            if self.nodes[id as usize].score != score {
                self.unlink(id);
                self.nodes[id as usize].score = score;
                self.link(id);
            }
            return false;
        }
        let height = self.random_level();
        let mut node = Node::new(member, score, height);
        node.pos = self.dense.len() as u32;
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
        self.dense.push(id);
        let h = self.hash(member);
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        self.index
            .insert_unique(h, id, |&i| hasher.hash_one(nodes[i as usize].member()));
        self.link(id);
        true
    }

    /// Removes a member; its score if it was present.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let h = self.hash(member);
        let nodes = &self.nodes;
        let slot = self
            .index
            .find_entry(h, |&i| nodes[i as usize].member() == member)
            .ok()?;
        let (id, _) = slot.remove();
        self.unlink(id);
        let node = &mut self.nodes[id as usize];
        let (score, pos) = (node.score, node.pos as usize);
        // Dropping the member's allocation now; the slot waits in `free`.
        node.data = ThinBuf::new();
        self.dense.swap_remove(pos);
        if let Some(&moved) = self.dense.get(pos) {
            self.nodes[moved as usize].pos = pos as u32;
        }
        self.free.push(id);
        if self.dense.is_empty() {
            self.nodes.clear();
            self.free.clear();
            self.head = [EMPTY; MAX_LEVEL];
            self.level = 1;
            self.tail = NIL;
        }
        if self.nodes.len() > COMPACT_MIN && self.dense.len() * 4 < self.nodes.len() {
            self.compact();
        }
        Some(score)
    }

    /// Gives back the memory of a mostly deleted set (redis shrinks its dict too): renumbers
    /// nodes to their dense positions, dropping the free slots, and shrinks every vector and
    /// the index. O(N), and only after N * 3 removals since the last one, so O(1) amortised.
    /// Dense positions (random picks, SCAN) are unchanged.
    fn compact(&mut self) {
        let mut map = vec![NIL; self.nodes.len()];
        for (p, &id) in self.dense.iter().enumerate() {
            map[id as usize] = p as u32;
        }
        let remap = |x: u32| if x == NIL { NIL } else { map[x as usize] };
        let mut nodes = Vec::with_capacity(self.dense.len());
        for &id in &self.dense {
            let mut n = std::mem::replace(&mut self.nodes[id as usize], Node::new(&[], 0.0, 1));
            n.forward0 = remap(n.forward0);
            n.backward = remap(n.backward);
            for i in 1..n.height() {
                let mut l = n.level(i);
                l.forward = remap(l.forward);
                n.set_level(i, l);
            }
            n.pos = nodes.len() as u32;
            nodes.push(n);
        }
        for l in self.head.iter_mut() {
            l.forward = remap(l.forward);
        }
        self.tail = remap(self.tail);
        for slot in self.index.iter_mut() {
            *slot = map[*slot as usize];
        }
        self.nodes = nodes;
        self.dense = (0..self.nodes.len() as u32).collect();
        self.free = Vec::new();
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        self.index
            .shrink_to_fit(|&i| hasher.hash_one(nodes[i as usize].member()));
    }

    /// Number of leading elements for which `pred(score, member)` holds. `pred` must be true
    /// on a prefix of the order (monotone), e.g. "score < min".
    pub fn count_while(&self, mut pred: impl FnMut(f64, &[u8]) -> bool) -> usize {
        let mut x = HEAD;
        let mut rank = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let l = self.lvl(x, i);
                if l.forward == NIL {
                    break;
                }
                let n = &self.nodes[l.forward as usize];
                if !pred(n.score, n.member()) {
                    break;
                }
                rank += l.span as usize;
                x = l.forward;
            }
        }
        rank
    }

    /// 0-based rank of a member, None if absent.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        Some(self.count_while(|s, m| less(s, m, score, member)))
    }

    /// Node id at 0-based `rank`.
    fn node_at(&self, rank: usize) -> Option<u32> {
        if rank >= self.len() {
            return None;
        }
        let target = rank + 1;
        let mut x = HEAD;
        let mut traversed = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let l = self.lvl(x, i);
                if l.forward == NIL || traversed + l.span as usize > target {
                    break;
                }
                traversed += l.span as usize;
                x = l.forward;
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
        Some((n.member(), n.score))
    }

    /// Iterates from 0-based rank `start` forward (or backward when `rev`).
    pub fn iter_from(&self, start: usize, rev: bool) -> SkipIter<'_> {
        SkipIter {
            list: self,
            cur: self.node_at(start).unwrap_or(NIL),
            rev,
        }
    }

    /// All elements in order.
    pub fn iter(&self) -> SkipIter<'_> {
        SkipIter {
            list: self,
            cur: self.head[0].forward,
            rev: false,
        }
    }

    pub fn last(&self) -> Option<(&[u8], f64)> {
        (self.tail != NIL).then(|| {
            let n = &self.nodes[self.tail as usize];
            (n.member(), n.score)
        })
    }

    /// Element at a dense position (0..len) in no particular order, for random picks.
    pub fn get_index(&self, i: usize) -> Option<(&[u8], f64)> {
        let n = &self.nodes[*self.dense.get(i)? as usize];
        Some((n.member(), n.score))
    }

    /// SCAN step, with `IndexedMap::scan`'s downward cursor (see the module note).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], f64)) -> u64 {
        let mut pos = if cursor == 0 {
            self.dense.len()
        } else {
            (cursor as usize).min(self.dense.len())
        };
        let mut n = 0;
        while pos > 0 && n < count.max(1) {
            pos -= 1;
            let node = &self.nodes[self.dense[pos] as usize];
            f(node.member(), node.score);
            n += 1;
        }
        pos as u64
    }

    /// Approximate heap bytes.
    pub fn heap_size(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + (self.free.capacity() + self.dense.capacity()) * 4
            + self.nodes.iter().map(|n| n.data.heap_size()).sum::<usize>()
            + self.index.capacity() * 5
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
        self.cur = if self.rev { n.backward } else { n.forward0 };
        Some((n.member(), n.score))
    }
}

#[cfg(test)]
#[path = "skiplist_tests.rs"]
mod tests;
