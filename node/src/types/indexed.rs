//! `IndexedMap`: a hash map from byte-string keys that also keeps its entries in a dense
//! vector, giving O(1) uniform random picks (SPOP, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER) and
//! a SCAN cursor that never misses an element present for the whole scan.
//!
//! Hand-rolled on `hashbrown::HashTable` instead of pulling `indexmap`: we need the exact
//! swap-remove + downward-cursor scan semantics below and nothing else.

use hashbrown::HashTable;
use std::hash::BuildHasher;

use super::thin::ThinBuf;

type Hasher = hashbrown::DefaultHashBuilder;

#[derive(Clone, Default)]
pub struct IndexedMap<V> {
    /// Keys as `ThinBuf`s: one word each (a `Box<[u8]>` is two), no allocation up to 7
    /// bytes, and a one-byte length up to 254 (a big set's member costs valkey's or less).
    entries: Vec<(ThinBuf, V)>,
    table: HashTable<u32>,
    hasher: Hasher,
}

impl<V: std::fmt::Debug> std::fmt::Debug for IndexedMap<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(
                self.entries
                    .iter()
                    .map(|(k, v)| (String::from_utf8_lossy(k), v)),
            )
            .finish()
    }
}

impl<V> IndexedMap<V> {
    pub fn new() -> Self {
        Self {
            entries: Vec::new(),
            table: HashTable::new(),
            hasher: Hasher::default(),
        }
    }

    pub fn with_capacity(n: usize) -> Self {
        Self {
            entries: Vec::with_capacity(n),
            table: HashTable::with_capacity(n),
            hasher: Hasher::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn hash(&self, k: &[u8]) -> u64 {
        self.hasher.hash_one(k)
    }

    fn find(&self, k: &[u8]) -> Option<usize> {
        let h = self.hash(k);
        self.table
            .find(h, |&i| &*self.entries[i as usize].0 == k)
            .map(|&i| i as usize)
    }

    pub fn get(&self, k: &[u8]) -> Option<&V> {
        self.find(k).map(|i| &self.entries[i].1)
    }

    pub fn get_mut(&mut self, k: &[u8]) -> Option<&mut V> {
        self.find(k).map(|i| &mut self.entries[i].1)
    }

    pub fn contains(&self, k: &[u8]) -> bool {
        self.find(k).is_some()
    }

    /// Inserts or replaces; returns the previous value.
    pub fn insert(&mut self, k: &[u8], v: V) -> Option<V> {
        if let Some(i) = self.find(k) {
            return Some(std::mem::replace(&mut self.entries[i].1, v));
        }
        let h = self.hash(k);
        let idx = self.entries.len() as u32;
        self.entries.push((ThinBuf::from_slice(k), v));
        let entries = &self.entries;
        let hasher = &self.hasher;
        self.table
            .insert_unique(h, idx, |&i| hasher.hash_one(&*entries[i as usize].0));
        None
    }

    /// Removes a key; the last entry moves into its slot (see the scan note in `scan`).
    pub fn remove(&mut self, k: &[u8]) -> Option<V> {
        let h = self.hash(k);
        let entries = &self.entries;
        let slot = self
            .table
            .find_entry(h, |&i| &*entries[i as usize].0 == k)
            .ok()?;
        let (idx, _) = slot.remove();
        Some(self.remove_index_inner(idx as usize))
    }

    /// Removes the entry at a dense index (random pops).
    pub fn remove_index(&mut self, idx: usize) -> Option<(ThinBuf, V)> {
        if idx >= self.entries.len() {
            return None;
        }
        let h = self.hash(&self.entries[idx].0);
        if let Ok(e) = self.table.find_entry(h, |&i| i as usize == idx) {
            e.remove();
        }
        let last = self.entries.len() - 1;
        if idx != last {
            self.retarget(last, idx);
        }
        Some(self.entries.swap_remove(idx))
    }

    fn remove_index_inner(&mut self, idx: usize) -> V {
        let last = self.entries.len() - 1;
        if idx != last {
            self.retarget(last, idx);
        }
        self.entries.swap_remove(idx).1
    }

    /// Points the table slot that refers to `from` at `to`.
    fn retarget(&mut self, from: usize, to: usize) {
        let h = self.hash(&self.entries[from].0);
        if let Some(slot) = self.table.find_mut(h, |&i| i as usize == from) {
            *slot = to as u32;
        }
    }

    pub fn get_index(&self, idx: usize) -> Option<(&[u8], &V)> {
        self.entries.get(idx).map(|(k, v)| (&**k, v))
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], &V)> + ExactSizeIterator {
        self.entries.iter().map(|(k, v)| (&**k, v))
    }

    /// SCAN step. Entries are visited from the highest dense index down; cursor 0 starts a
    /// scan and a returned 0 ends it. A swap-remove only ever moves the *last* entry, and
    /// appends land above the cursor, so an entry present for the whole scan is never moved
    /// from the unvisited region to the visited one: it is always returned.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], &V)) -> u64 {
        let mut pos = if cursor == 0 {
            self.entries.len()
        } else {
            (cursor as usize).min(self.entries.len())
        };
        let mut n = 0;
        while pos > 0 && n < count.max(1) {
            pos -= 1;
            let (k, v) = &self.entries[pos];
            f(k, v);
            n += 1;
        }
        pos as u64
    }

    /// Approximate heap bytes held.
    pub fn heap_size(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<(ThinBuf, V)>()
            + self
                .entries
                .iter()
                .map(|(k, _)| k.heap_size())
                .sum::<usize>()
            + self.table.capacity() * 5
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((0u8..3, 0u16..40, any::<u32>()), 0..300)) {
            let mut m = IndexedMap::new();
            let mut r = BTreeMap::new();
            for (op, k, v) in ops {
                let key = k.to_string().into_bytes();
                match op {
                    0 => prop_assert_eq!(m.insert(&key, v), r.insert(key.clone(), v)),
                    1 => prop_assert_eq!(m.remove(&key), r.remove(&key)),
                    _ => if !m.is_empty() {
                        let i = v as usize % m.len();
                        let (kk, vv) = m.remove_index(i).unwrap();
                        prop_assert_eq!(r.remove(&kk[..]), Some(vv));
                    },
                }
                prop_assert_eq!(m.len(), r.len());
                for (k, v) in &r { prop_assert_eq!(m.get(k), Some(v)); }
            }
        }

        #[test]
        fn scan_returns_stable_members(n in 1usize..200, ops in proptest::collection::vec((any::<bool>(), 0u16..400), 0..200)) {
            let mut m = IndexedMap::new();
            for i in 0..n { m.insert(format!("s{i}").as_bytes(), ()); }
            // Members named s* are never removed; x* come and go during the scan.
            let mut seen = BTreeSet::new();
            let mut cursor = 0;
            let mut ops = ops.into_iter();
            loop {
                cursor = m.scan(cursor, 3, |k, _| { seen.insert(k.to_vec()); });
                for (add, k) in ops.by_ref().take(3) {
                    let key = format!("x{k}");
                    if add { m.insert(key.as_bytes(), ()); } else { m.remove(key.as_bytes()); }
                }
                if cursor == 0 { break; }
            }
            for i in 0..n { let k = format!("s{i}"); prop_assert!(seen.contains(k.as_bytes()), "missing {}", k); }
        }
    }
}
