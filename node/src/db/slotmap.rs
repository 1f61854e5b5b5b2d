//! One hash slot's keys: a hash table of pointers to boxed (key, entry) nodes.
//!
//! Why boxed nodes instead of an inline `HashMap<SBytes, Entry>`: each slot holds few keys
//! (about 61 per slot at 1M keys), so power-of-two table growth often leaves tables half
//! empty; an empty inline bucket costs a whole 64-byte (key, entry) pair, an empty pointer
//! bucket costs 8 bytes. This keeps memory per key below redis-server's.

use std::hash::BuildHasher;
use std::sync::OnceLock;

use hashbrown::HashTable;

use super::value::{Entry, SBytes};

pub struct Node {
    pub key: SBytes,
    pub entry: Entry,
}

fn hasher() -> &'static hashbrown::DefaultHashBuilder {
    static H: OnceLock<hashbrown::DefaultHashBuilder> = OnceLock::new();
    H.get_or_init(hashbrown::DefaultHashBuilder::default)
}

#[inline]
fn hash(k: &[u8]) -> u64 {
    hasher().hash_one(k)
}

/// Hints the CPU to bring the cache line at `p` into L1; a no-op where there's no stable
/// intrinsic. Never faults, whatever `p` is.
#[inline(always)]
pub fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint: it doesn't access memory architecturally and can't
    // fault, for any address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[derive(Default)]
pub struct SlotMap {
    t: HashTable<Box<Node>>,
}

impl SlotMap {
    #[inline]
    pub fn len(&self) -> usize {
        self.t.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.t.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.t.capacity()
    }

    #[inline]
    pub fn get(&self, k: &[u8]) -> Option<&Entry> {
        self.t
            .find(hash(k), |n| n.key.as_slice() == k)
            .map(|n| &n.entry)
    }

    #[inline]
    pub fn get_mut(&mut self, k: &[u8]) -> Option<&mut Entry> {
        self.t
            .find_mut(hash(k), |n| n.key.as_slice() == k)
            .map(|n| &mut n.entry)
    }

    /// Inserts a key the caller knows is absent.
    #[inline]
    pub fn insert_new(&mut self, key: SBytes, entry: Entry) {
        let h = hash(key.as_slice());
        self.t
            .insert_unique(h, Box::new(Node { key, entry }), |n| hash(n.key.as_slice()));
    }

    /// Starts loading the node of `k` (if present) into the cache without waiting for it:
    /// the probe reads this table's control bytes and bucket pointers, and each candidate
    /// node is only prefetched, never dereferenced, so the miss on it overlaps whatever
    /// the CPU does next (see [`super::Keyspace::prefetch`]).
    #[inline]
    pub fn prefetch(&self, k: &[u8]) {
        let _ = self.t.find(hash(k), |n| {
            prefetch_line(&**n as *const Node as *const u8);
            false
        });
    }

    pub fn remove(&mut self, k: &[u8]) -> Option<Entry> {
        match self.t.find_entry(hash(k), |n| n.key.as_slice() == k) {
            Ok(occ) => Some(occ.remove().0.entry),
            Err(_) => None,
        }
    }

    pub fn retain(&mut self, mut f: impl FnMut(&SBytes, &mut Entry) -> bool) {
        self.t.retain(|n| {
            let Node { key, entry } = &mut **n;
            f(key, entry)
        });
    }

    pub fn iter(&self) -> impl Iterator<Item = (&SBytes, &Entry)> {
        self.t.iter().map(|n| (&n.key, &n.entry))
    }
}

impl<'a> IntoIterator for &'a SlotMap {
    type Item = (&'a SBytes, &'a Entry);
    type IntoIter = Box<dyn Iterator<Item = (&'a SBytes, &'a Entry)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}
