//! Set value: intset (sorted i64s), a packed small form, or hashtable, converting past
//! `set-max-intset-entries` like Redis. Redis 7.0 has no set listpack: the packed form is
//! ours (memory), reported as "hashtable" like 7.0 would (see `types::SET_PACK_ENTRIES`).

use super::indexed::IndexedMap;
use super::intset::IntSet;
use super::pack::Pack;
use super::{parse_i64_strict, Limits};
use rand::Rng;

#[derive(Clone, Debug)]
pub enum SetValue {
    /// All members are canonical integers, kept sorted.
    IntSet(IntSet),
    /// Few, short members, packed in insertion order.
    ListPack(Pack),
    /// Boxed so the enum stays small while the value is compact.
    HashTable(Box<IndexedMap<()>>),
}

impl Default for SetValue {
    fn default() -> Self {
        SetValue::IntSet(IntSet::default())
    }
}

impl SetValue {
    /// Builds a set (RDB load, RESTORE, *STORE) in the encoding Redis would pick.
    pub fn from_members<M: AsRef<[u8]>>(
        members: impl IntoIterator<Item = M>,
        lim: &Limits,
    ) -> Self {
        let mut it = members.into_iter().peekable();
        let mut s = match it.peek() {
            Some(m) => SetValue::new_for(m.as_ref(), lim),
            None => SetValue::default(),
        };
        for m in it {
            s.insert(m.as_ref(), lim);
        }
        s
    }

    /// An empty set in the encoding Redis picks for a first member `first`.
    pub fn new_for(first: &[u8], lim: &Limits) -> Self {
        if parse_i64_strict(first).is_some() && lim.set_max_intset_entries > 0 {
            SetValue::IntSet(IntSet::default())
        } else if lim.set_max_listpack_entries > 0 && first.len() <= lim.set_max_listpack_value {
            SetValue::ListPack(Pack::new())
        } else {
            SetValue::HashTable(Box::default())
        }
    }

    /// Redis 7.0's OBJECT ENCODING name (the packed small form is a hashtable in 7.0).
    pub fn encoding(&self) -> &'static str {
        match self {
            SetValue::IntSet(_) => "intset",
            SetValue::ListPack(_) => "hashtable",
            SetValue::HashTable(_) => "hashtable",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            SetValue::IntSet(v) => v.len(),
            SetValue::ListPack(p) => p.len(),
            SetValue::HashTable(h) => h.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match self {
            SetValue::IntSet(v) => parse_i64_strict(m).is_some_and(|i| v.binary_search(&i).is_ok()),
            SetValue::ListPack(p) => p.iter().any(|e| e == m),
            SetValue::HashTable(h) => h.contains(m),
        }
    }

    fn make_hashtable(&mut self) {
        let mut h = IndexedMap::with_capacity(self.len() + 1);
        for m in self.members() {
            h.insert(&m, ());
        }
        *self = SetValue::HashTable(Box::new(h));
    }

    fn make_listpack(&mut self) {
        let mut p = Pack::new();
        for m in self.members() {
            p.push_back(&m);
        }
        *self = SetValue::ListPack(p);
    }

    /// Adds a member; true if it was new.
    pub fn insert(&mut self, m: &[u8], lim: &Limits) -> bool {
        match self {
            SetValue::IntSet(v) => {
                if let Some(i) = parse_i64_strict(m) {
                    match v.binary_search(&i) {
                        Ok(_) => return false,
                        Err(pos) => {
                            if v.len() < lim.set_max_intset_entries {
                                v.insert(pos, i);
                                return true;
                            }
                            self.make_hashtable();
                        }
                    }
                } else if v.len() < lim.set_max_listpack_entries
                    && m.len() <= lim.set_max_listpack_value
                {
                    self.make_listpack();
                } else {
                    self.make_hashtable();
                }
                self.insert(m, lim)
            }
            SetValue::ListPack(p) => {
                if p.iter().any(|e| e == m) {
                    return false;
                }
                if p.len() < lim.set_max_listpack_entries && m.len() <= lim.set_max_listpack_value {
                    p.push_back(m);
                    return true;
                }
                self.make_hashtable();
                self.insert(m, lim)
            }
            SetValue::HashTable(h) => h.insert(m, ()).is_none(),
        }
    }

    /// Removes a member; true if it was present.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            SetValue::IntSet(v) => match parse_i64_strict(m).map(|i| v.binary_search(&i)) {
                Some(Ok(pos)) => {
                    v.remove(pos);
                    true
                }
                _ => false,
            },
            SetValue::ListPack(p) => {
                let mut off = p.first();
                while let Some(o) = off {
                    if p.get_at(o) == m {
                        p.remove_at(o, 1);
                        return true;
                    }
                    off = p.next(o);
                }
                false
            }
            SetValue::HashTable(h) => h.remove(m).is_some(),
        }
    }

    /// Member at a dense position (0..len), for uniform random selection.
    pub fn get_index(&self, i: usize) -> Option<Vec<u8>> {
        match self {
            SetValue::IntSet(v) => v.get(i).map(|n| n.to_string().into_bytes()),
            SetValue::ListPack(p) => p.get(i).map(<[u8]>::to_vec),
            SetValue::HashTable(h) => h.get_index(i).map(|(k, _)| k.to_vec()),
        }
    }

    /// A uniformly random member.
    pub fn random_member(&self) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        let i = rand::rng().random_range(0..self.len());
        self.get_index(i)
    }

    /// Removes and returns a uniformly random member.
    pub fn pop_random(&mut self) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        let i = rand::rng().random_range(0..self.len());
        match self {
            SetValue::IntSet(v) => Some(v.remove(i).to_string().into_bytes()),
            SetValue::ListPack(p) => {
                let off = p.offset_of(i)?;
                let m = p.get_at(off).to_vec();
                p.remove_at(off, 1);
                Some(m)
            }
            SetValue::HashTable(h) => h.remove_index(i).map(|(k, _)| k.to_vec()),
        }
    }

    /// All members (intset in ascending order, others in storage order).
    pub fn members(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(|m| out.push(m.to_vec()));
        out
    }

    /// Visits every member without allocating for packed/hashed encodings.
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        match self {
            SetValue::IntSet(v) => {
                let mut b = itoa::Buffer::new();
                for n in v.iter() {
                    f(b.format(n).as_bytes());
                }
            }
            SetValue::ListPack(p) => p.iter().for_each(f),
            SetValue::HashTable(h) => h.iter().for_each(|(k, _)| f(k)),
        }
    }

    /// SSCAN step: small encodings return everything at once with cursor 0, like Redis.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8])) -> u64 {
        match self {
            SetValue::HashTable(h) => h.scan(cursor, count, |k, _| f(k)),
            _ => {
                self.for_each(f);
                0
            }
        }
    }

    /// Approximate heap bytes.
    pub fn heap_size(&self) -> usize {
        match self {
            SetValue::IntSet(v) => v.heap_size(),
            SetValue::ListPack(p) => p.heap_size(),
            SetValue::HashTable(h) => h.heap_size(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn small() -> Limits {
        Limits {
            set_max_intset_entries: 8,
            set_max_listpack_entries: 6,
            ..Limits::default()
        }
    }

    #[test]
    fn encodings_follow_redis_thresholds() {
        let lim = Limits::default();
        let mut s = SetValue::new_for(b"1", &lim);
        for i in 0..512 {
            s.insert(i.to_string().as_bytes(), &lim);
        }
        assert_eq!(s.encoding(), "intset");
        s.insert(b"512", &lim);
        assert_eq!(s.encoding(), "hashtable");
        let mut s = SetValue::new_for(b"a", &lim);
        for i in 0..128 {
            s.insert(format!("m{i}").as_bytes(), &lim);
        }
        assert!(matches!(s, SetValue::ListPack(_)));
        assert_eq!(s.encoding(), "hashtable");
        s.insert(b"x", &lim);
        assert!(matches!(s, SetValue::HashTable(_)));
        assert_eq!(s.encoding(), "hashtable");
        let mut s = SetValue::new_for(b"1", &lim);
        s.insert(b"1", &lim);
        s.insert(b"01", &lim);
        assert!(matches!(s, SetValue::ListPack(_)));
        assert!(s.contains(b"01") && s.contains(b"1") && !s.contains(b"+1"));
    }

    #[test]
    fn random_pick_is_fair() {
        let lim = Limits::default();
        for first in ["1", "a", "x".repeat(100).as_str()] {
            let mut s = SetValue::new_for(first.as_bytes(), &lim);
            for i in 0..10 {
                s.insert(format!("{}{i}", &first[..1]).as_bytes(), &lim);
            }
            let mut counts = std::collections::HashMap::new();
            for _ in 0..20000 {
                *counts.entry(s.random_member().unwrap()).or_insert(0) += 1;
            }
            assert_eq!(counts.len(), 10);
            // Expected 2000 each; 1400 is > 13 standard deviations away.
            assert!(counts.values().all(|&c| c > 1400), "{counts:?}");
        }
    }

    proptest! {
        #[test]
        fn behaves_like_btreeset(ops in proptest::collection::vec((0u8..3, prop_oneof![
            (0i64..20).prop_map(|i| i.to_string()),
            "[a-c]{1,2}",
        ]), 0..200)) {
            let lim = small();
            let mut s = SetValue::default();
            let mut r = BTreeSet::new();
            for (op, m) in ops {
                match op {
                    0 | 1 => prop_assert_eq!(s.insert(m.as_bytes(), &lim), r.insert(m.into_bytes())),
                    _ => prop_assert_eq!(s.remove(m.as_bytes()), r.remove(m.as_bytes())),
                }
                let got: BTreeSet<Vec<u8>> = s.members().into_iter().collect();
                prop_assert_eq!(&got, &r);
                prop_assert_eq!(s.len(), r.len());
            }
            while let Some(m) = s.pop_random() { prop_assert!(r.remove(&m)); }
            prop_assert!(r.is_empty());
        }
    }
}
