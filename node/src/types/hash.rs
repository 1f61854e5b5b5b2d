//! Hash value: listpack (field/value pairs packed in one block) or hashtable, converting past
//! `hash-max-listpack-entries` / `hash-max-listpack-value` like Redis.

use super::pack::Pack;
use super::pairmap::PairMap;
use super::Limits;
use rand::Rng;

#[derive(Clone, Debug)]
pub enum HashValue {
    /// Alternating field, value entries.
    ListPack(Pack),
    /// Boxed so the enum stays small while the value is a listpack. One allocation per
    /// field/value pair (see `pairmap`).
    HashTable(Box<PairMap>),
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue::ListPack(Pack::new())
    }
}

impl HashValue {
    /// Builds a hash (RDB load, RESTORE) in the encoding its size calls for.
    pub fn from_pairs<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        pairs: impl IntoIterator<Item = (K, V)>,
        lim: &Limits,
    ) -> Self {
        let mut h = HashValue::default();
        for (k, v) in pairs {
            h.set(k.as_ref(), v.as_ref(), lim);
        }
        h
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            HashValue::ListPack(_) => "listpack",
            HashValue::HashTable(_) => "hashtable",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            HashValue::ListPack(p) => p.len() / 2,
            HashValue::HashTable(h) => h.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Offset of the field entry in a listpack.
    fn find_lp(p: &Pack, field: &[u8]) -> Option<usize> {
        let mut off = p.first();
        while let Some(o) = off {
            let (f, vo) = p.entry(o);
            if f == field {
                return Some(o);
            }
            off = p.next(vo);
        }
        None
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            HashValue::ListPack(p) => {
                let o = Self::find_lp(p, field)?;
                let vo = p.entry(o).1;
                Some(p.get_at(vo))
            }
            HashValue::HashTable(h) => h.get(field),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    fn make_hashtable(&mut self) {
        if let HashValue::ListPack(p) = self {
            let mut h = PairMap::with_capacity(p.len() / 2 + 1);
            let mut it = p.iter();
            while let (Some(f), Some(v)) = (it.next(), it.next()) {
                h.insert(f, v);
            }
            *self = HashValue::HashTable(Box::new(h));
        }
    }

    /// Sets a field; true if the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8], lim: &Limits) -> bool {
        if let HashValue::ListPack(p) = self {
            if field.len() > lim.hash_max_listpack_value
                || value.len() > lim.hash_max_listpack_value
            {
                self.make_hashtable();
            } else if let Some(o) = Self::find_lp(p, field) {
                let vo = p.entry(o).1;
                p.replace_at(vo, value);
                return false;
            } else if p.len() / 2 < lim.hash_max_listpack_entries {
                p.push_back(field);
                p.push_back(value);
                return true;
            } else {
                self.make_hashtable();
            }
        }
        match self {
            HashValue::HashTable(h) => h.insert(field, value),
            HashValue::ListPack(_) => false,
        }
    }

    /// Removes a field; true if present.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            HashValue::ListPack(p) => match Self::find_lp(p, field) {
                Some(o) => {
                    p.remove_at(o, 2);
                    true
                }
                None => false,
            },
            HashValue::HashTable(h) => h.remove(field),
        }
    }

    /// Visits field/value pairs in storage order.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[u8])) {
        match self {
            HashValue::ListPack(p) => {
                let mut it = p.iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    f(k, v);
                }
            }
            HashValue::HashTable(h) => h.iter().for_each(|(k, v)| f(k, v)),
        }
    }

    pub fn pairs(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(|k, v| out.push((k.to_vec(), v.to_vec())));
        out
    }

    /// Pair at a dense position (0..len).
    pub fn get_index(&self, i: usize) -> Option<(Vec<u8>, Vec<u8>)> {
        match self {
            HashValue::ListPack(p) => {
                let o = p.offset_of(i * 2)?;
                let (k, vo) = p.entry(o);
                Some((k.to_vec(), p.get_at(vo).to_vec()))
            }
            HashValue::HashTable(h) => h.get_index(i).map(|(k, v)| (k.to_vec(), v.to_vec())),
        }
    }

    pub fn random_pair(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        if self.is_empty() {
            return None;
        }
        self.get_index(rand::rng().random_range(0..self.len()))
    }

    /// HSCAN step: listpacks answer in one call with cursor 0, like Redis.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], &[u8])) -> u64 {
        match self {
            HashValue::HashTable(h) => h.scan(cursor, count, |k, v| f(k, v)),
            _ => {
                self.for_each(f);
                0
            }
        }
    }

    pub fn heap_size(&self) -> usize {
        match self {
            HashValue::ListPack(p) => p.heap_size(),
            HashValue::HashTable(h) => h.heap_size(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn converts_at_redis_thresholds() {
        let lim = Limits::default();
        let mut h = HashValue::default();
        // Redis 7.0's default hash-max-listpack-entries is 512.
        for i in 0..512 {
            h.set(format!("f{i}").as_bytes(), b"v", &lim);
        }
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f0", b"w", &lim);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"new", b"v", &lim);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.len(), 513);
        assert_eq!(h.get(b"f0"), Some(&b"w"[..]));
        let mut h = HashValue::default();
        h.set(b"a", &[b'x'; 64], &lim);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"b", &[b'x'; 65], &lim);
        assert_eq!(h.encoding(), "hashtable");
    }

    proptest! {
        #[test]
        fn behaves_like_btreemap(ops in proptest::collection::vec((any::<bool>(), 0u8..30, "[a-z]{0,4}"), 0..200)) {
            let lim = Limits { hash_max_listpack_entries: 10, hash_max_listpack_value: 3, ..Limits::default() };
            let mut h = HashValue::default();
            let mut r = BTreeMap::new();
            for (set, f, v) in ops {
                let f = format!("{f}").into_bytes();
                if set {
                    prop_assert_eq!(h.set(&f, v.as_bytes(), &lim), r.insert(f, v.into_bytes()).is_none());
                } else {
                    prop_assert_eq!(h.remove(&f), r.remove(&f).is_some());
                }
                let got: BTreeMap<_, _> = h.pairs().into_iter().collect();
                prop_assert_eq!(&got, &r);
            }
        }
    }
}
