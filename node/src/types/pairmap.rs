//! `PairMap`: the hash type's big encoding. Like `IndexedMap` (dense entry vector for O(1)
//! random picks and the downward SCAN cursor, `hashbrown::HashTable` of dense indices for
//! lookups), but each field/value pair is ONE heap allocation: a LEB128 field length, the
//! field, then the value. Two boxes per pair cost two malloc headers and two 32-byte minimum
//! chunks (issue 2: 112 B per field vs redis's 86).
//!
//! Same scan semantics as `IndexedMap::scan`: removal swaps the last entry into the hole and
//! replacing a value keeps the entry's position, so a field present for the whole scan is
//! returned.

use hashbrown::HashTable;
use std::hash::BuildHasher;

type Hasher = hashbrown::DefaultHashBuilder;

#[derive(Clone, Default)]
pub struct PairMap {
    entries: Vec<Box<[u8]>>,
    table: HashTable<u32>,
    hasher: Hasher,
}

impl std::fmt::Debug for PairMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(
                self.iter()
                    .map(|(k, v)| (String::from_utf8_lossy(k), String::from_utf8_lossy(v))),
            )
            .finish()
    }
}

/// One allocation holding `field` and `value`.
fn pack(field: &[u8], value: &[u8]) -> Box<[u8]> {
    let mut out = Vec::with_capacity(field.len() + value.len() + 10);
    let mut n = field.len() as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(field);
    out.extend_from_slice(value);
    out.into_boxed_slice()
}

/// (field, value) of a packed entry. Entries are only built by `pack`, so the length prefix
/// is well formed; a malformed one would read as an empty field rather than panic.
#[inline]
fn unpack(e: &[u8]) -> (&[u8], &[u8]) {
    let mut len = 0usize;
    let mut shift = 0;
    let mut i = 0;
    while let Some(&b) = e.get(i) {
        len |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    let rest = e.get(i..).unwrap_or_default();
    rest.split_at(len.min(rest.len()))
}

#[inline]
fn field_of(e: &[u8]) -> &[u8] {
    unpack(e).0
}

impl PairMap {
    pub fn new() -> Self {
        Self::default()
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

    fn hash(&self, field: &[u8]) -> u64 {
        self.hasher.hash_one(field)
    }

    fn find(&self, field: &[u8]) -> Option<usize> {
        self.table
            .find(self.hash(field), |&i| {
                field_of(&self.entries[i as usize]) == field
            })
            .map(|&i| i as usize)
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.find(field).map(|i| unpack(&self.entries[i]).1)
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.find(field).is_some()
    }

    /// Sets a field; true if it is new. A replaced value keeps the entry's dense position.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        if let Some(i) = self.find(field) {
            self.entries[i] = pack(field, value);
            return false;
        }
        let h = self.hash(field);
        let idx = self.entries.len() as u32;
        self.entries.push(pack(field, value));
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.table
            .insert_unique(h, idx, |&i| hasher.hash_one(field_of(&entries[i as usize])));
        true
    }

    /// Removes a field; true if it was present. The last entry moves into its slot.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        let h = self.hash(field);
        let entries = &self.entries;
        let Ok(slot) = self
            .table
            .find_entry(h, |&i| field_of(&entries[i as usize]) == field)
        else {
            return false;
        };
        let (idx, _) = slot.remove();
        let idx = idx as usize;
        let last = self.entries.len() - 1;
        if idx != last {
            let h = self.hash(field_of(&self.entries[last]));
            if let Some(slot) = self.table.find_mut(h, |&i| i as usize == last) {
                *slot = idx as u32;
            }
        }
        self.entries.swap_remove(idx);
        // Give back the memory of a mostly deleted hash (redis shrinks its dict too); only
        // after capacity * 3/4 removals, so amortised O(1). Positions are unchanged.
        if self.entries.capacity() > 64 && self.entries.len() * 4 < self.entries.capacity() {
            self.entries.shrink_to_fit();
            let (entries, hasher) = (&self.entries, &self.hasher);
            self.table
                .shrink_to_fit(|&i| hasher.hash_one(field_of(&entries[i as usize])));
        }
        true
    }

    /// Pair at a dense position (0..len), for random picks.
    pub fn get_index(&self, idx: usize) -> Option<(&[u8], &[u8])> {
        self.entries.get(idx).map(|e| unpack(e))
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], &[u8])> + ExactSizeIterator {
        self.entries.iter().map(|e| unpack(e))
    }

    /// HSCAN step, with `IndexedMap::scan`'s downward cursor (see the module note).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], &[u8])) -> u64 {
        let mut pos = if cursor == 0 {
            self.entries.len()
        } else {
            (cursor as usize).min(self.entries.len())
        };
        let mut n = 0;
        while pos > 0 && n < count.max(1) {
            pos -= 1;
            let (k, v) = unpack(&self.entries[pos]);
            f(k, v);
            n += 1;
        }
        pos as u64
    }

    /// Approximate heap bytes held.
    pub fn heap_size(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Box<[u8]>>()
            + self.entries.iter().map(|e| e.len()).sum::<usize>()
            + self.table.capacity() * 5
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeSet, HashMap};

    #[test]
    fn long_fields_roundtrip() {
        for n in [0usize, 1, 127, 128, 300, 20_000] {
            let f = vec![b'f'; n];
            let e = pack(&f, b"value");
            assert_eq!(unpack(&e), (&f[..], &b"value"[..]));
        }
        // Short pairs take one byte of overhead: one 32-byte malloc chunk for a
        // 15-byte field and a 6-byte value.
        assert_eq!(pack(b"member:00000001", b"v99999").len(), 22);
    }

    #[test]
    fn mass_deletion_shrinks_and_keeps_scan() {
        let mut m = PairMap::new();
        for i in 0..1000 {
            m.insert(format!("s{i}").as_bytes(), b"v");
        }
        for i in 0..20_000 {
            m.insert(format!("x{i}").as_bytes(), b"v");
        }
        let full = m.heap_size();
        let mut seen = BTreeSet::new();
        let mut cursor = m.scan(0, 50, |k, _| {
            seen.insert(k.to_vec());
        });
        for i in 0..20_000 {
            assert!(m.remove(format!("x{}", (i * 7919) % 20_000).as_bytes()));
            if i % 500 == 0 && cursor != 0 {
                cursor = m.scan(cursor, 50, |k, _| {
                    seen.insert(k.to_vec());
                });
            }
        }
        while cursor != 0 {
            cursor = m.scan(cursor, 50, |k, _| {
                seen.insert(k.to_vec());
            });
        }
        for i in 0..1000 {
            assert!(
                seen.contains(format!("s{i}").as_bytes()),
                "scan missed s{i}"
            );
            assert_eq!(m.get(format!("s{i}").as_bytes()), Some(&b"v"[..]));
        }
        assert_eq!(m.len(), 1000);
        assert!(m.heap_size() * 5 < full, "{} vs {full}", m.heap_size());
    }

    proptest! {
        #[test]
        fn behaves_like_hashmap(ops in proptest::collection::vec((0u8..3, 0u16..60, proptest::collection::vec(any::<u8>(), 0..150)), 0..300)) {
            let mut m = PairMap::new();
            let mut r: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
            for (op, k, v) in ops {
                // Some fields longer than 127 bytes, to cross the length prefix's first byte.
                let key = if k % 7 == 0 { vec![k as u8; 130 + k as usize] } else { k.to_string().into_bytes() };
                match op {
                    0 => prop_assert_eq!(m.insert(&key, &v), r.insert(key.clone(), v).is_none()),
                    1 => prop_assert_eq!(m.remove(&key), r.remove(&key).is_some()),
                    _ => prop_assert_eq!(m.get(&key), r.get(&key).map(|v| &v[..])),
                }
                prop_assert_eq!(m.len(), r.len());
            }
            for (k, v) in &r { prop_assert_eq!(m.get(k), Some(&v[..])); }
            let dense: HashMap<Vec<u8>, Vec<u8>> = (0..m.len())
                .filter_map(|i| m.get_index(i))
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect();
            prop_assert_eq!(&dense, &r);
            prop_assert_eq!(m.iter().count(), r.len());
        }

        #[test]
        fn scan_returns_stable_fields(n in 1usize..200, ops in proptest::collection::vec((0u8..3, 0u16..400), 0..200)) {
            let mut m = PairMap::new();
            for i in 0..n { m.insert(format!("s{i}").as_bytes(), b"v"); }
            // Fields named s* are never removed (only rewritten); x* come and go.
            let mut seen = BTreeSet::new();
            let mut cursor = 0;
            let mut ops = ops.into_iter();
            loop {
                cursor = m.scan(cursor, 3, |k, _| { seen.insert(k.to_vec()); });
                for (op, k) in ops.by_ref().take(3) {
                    let key = format!("x{k}");
                    match op {
                        0 => { m.insert(key.as_bytes(), b"x"); }
                        1 => { m.remove(key.as_bytes()); }
                        _ => { m.insert(format!("s{}", k as usize % n).as_bytes(), b"longer value"); }
                    }
                }
                if cursor == 0 { break; }
            }
            for i in 0..n { let k = format!("s{i}"); prop_assert!(seen.contains(k.as_bytes()), "missing {}", k); }
        }
    }
}
