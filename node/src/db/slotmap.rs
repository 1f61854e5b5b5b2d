//! One hash slot's keys: an open-addressing table of tagged pointers to boxed (key, entry)
//! nodes.
//!
//! Why boxed nodes: each slot holds few keys (about 61 per slot at 1M keys), so
//! power-of-two growth often leaves tables half empty; an empty inline bucket would cost a
//! whole (key, entry) pair, an empty pointer bucket costs 8 bytes. This keeps memory per key
//! below redis-server's.
//!
//! Why our own table rather than hashbrown's (which we used before): a lookup over a big
//! keyspace is a chain of cache misses (table header, bucket, node), and pipelined batches
//! hide them by prefetching one level for every key of the batch before the next level
//! (see [`super::Keyspace::prefetch`]). hashbrown doesn't expose where a key's bucket is,
//! so its control-byte and bucket misses could only be taken one key at a time. Here the
//! bucket address is `buckets + (hash & mask)`, and each 8-byte bucket holds both the
//! node pointer and 16 bits of the key's hash, so a probe rarely touches a node that isn't
//! the key's.
//!
//! Layout of a bucket: 0 is empty; otherwise the low 48 bits are the node's address and
//! the high 16 bits the low 16 bits of the key's hash. Linear probing, at most 3/4 full,
//! deletion by backward shift (no tombstones, so a miss stops at the first empty bucket).

use std::hash::BuildHasher;
use std::ptr::NonNull;
use std::sync::OnceLock;

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

const PTR_BITS: u32 = 48;
const PTR_MASK: u64 = (1 << PTR_BITS) - 1;
/// Tables up to this many buckets find a bucket's home from its tag alone (growth and
/// deletion then never read a node); bigger ones hash the node's key again.
const TAG_SPAN: usize = 1 << 16;
const MIN_BUCKETS: usize = 2;

#[inline(always)]
fn tag_of(h: u64) -> u64 {
    h & 0xFFFF
}

#[inline(always)]
fn node_of(b: u64) -> *mut Node {
    (b & PTR_MASK) as *mut Node
}

#[inline(always)]
fn tag_in(b: u64) -> u64 {
    b >> PTR_BITS
}

/// Packs a node pointer with its tag. User-space addresses on x86-64 and aarch64 Linux
/// stay below 2^48 (the kernel hands out higher ones only to an mmap that asks for them),
/// so the high 16 bits are free.
fn pack(node: Box<Node>, h: u64) -> u64 {
    let p = Box::into_raw(node) as u64;
    assert!(
        p & !PTR_MASK == 0,
        "heap address {p:#x} does not fit in 48 bits; tessera-node needs a 48-bit address space"
    );
    p | (tag_of(h) << PTR_BITS)
}

/// 16 bytes, so a stripe's 16 maps of one database (with their TTL counts) fit a 384-byte
/// block rather than a 512-byte one: that block is a fixed cost of every stripe that holds
/// a key, about 40 bytes per key at 10000 keys.
pub struct SlotMap {
    /// The buckets: `cap` of them, allocated as a `Box<[u64]>` (dangling when `cap` is 0).
    ptr: NonNull<u64>,
    /// Power-of-two number of buckets (or none before the first insert).
    cap: u32,
    len: u32,
}

impl Default for SlotMap {
    fn default() -> Self {
        SlotMap {
            ptr: NonNull::dangling(),
            cap: 0,
            len: 0,
        }
    }
}

// SAFETY: a SlotMap owns its nodes exactly like a Vec<Box<Node>> would (every non-empty
// bucket is a pointer from Box::into_raw, freed once, in remove, retain or drop), and only
// hands out references tied to &self / &mut self.
unsafe impl Send for SlotMap {}
// SAFETY: as above; &SlotMap only gives shared access to the nodes.
unsafe impl Sync for SlotMap {}

impl SlotMap {
    /// The buckets.
    #[inline(always)]
    fn b(&self) -> &[u64] {
        // SAFETY: ptr and cap describe the live allocation from `set_buckets` (or a dangling,
        // aligned pointer with cap 0, a valid empty slice).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.cap as usize) }
    }

    #[inline(always)]
    fn b_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `b`; &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap as usize) }
    }

    /// Installs `new` as the buckets and hands back the old ones (to rehash or free).
    fn set_buckets(&mut self, new: Box<[u64]>) -> Box<[u64]> {
        // 2^32 buckets would be 32 GB for one slot's table alone: never reached; if it
        // were, stopping beats freeing the allocation with a wrong size.
        let Ok(cap) = u32::try_from(new.len()) else {
            std::process::abort()
        };
        let raw = Box::into_raw(new) as *mut u64;
        // SAFETY: ptr and cap are the allocation installed by the previous call (or the
        // empty dangling slice), rebuilt exactly as it was boxed; it's owned only here.
        let old = unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.ptr.as_ptr(),
                self.cap as usize,
            ))
        };
        self.ptr = NonNull::new(raw).unwrap_or(NonNull::dangling());
        self.cap = cap;
        old
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Buckets allocated (0 before the first insert or after the table was freed).
    pub fn capacity(&self) -> usize {
        self.cap as usize
    }

    /// The buckets of `h`'s probe run (from its home to the first empty bucket) whose tag
    /// matches `h`'s: the only places its key can be.
    #[inline]
    fn candidates(&self, h: u64) -> impl Iterator<Item = (usize, u64)> + '_ {
        let mask = self.capacity().wrapping_sub(1);
        let tag = tag_of(h);
        let home = h as usize;
        (0..self.capacity())
            .map(move |k| (home + k) & mask)
            .map(move |i| (i, self.b()[i]))
            .take_while(|&(_, b)| b != 0)
            .filter(move |&(_, b)| tag_in(b) == tag)
    }

    /// The bucket index of `k`, if present.
    #[inline]
    fn find(&self, k: &[u8]) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        self.candidates(hash(k))
            // SAFETY: non-empty buckets hold live nodes owned by this table.
            .find(|&(_, b)| unsafe { (*node_of(b)).key.as_slice() == k })
            .map(|(i, _)| i)
    }

    #[inline]
    pub fn get(&self, k: &[u8]) -> Option<&Entry> {
        let i = self.find(k)?;
        // SAFETY: bucket i holds a live node owned by this table; the borrow is tied to &self.
        Some(unsafe { &(*node_of(self.b()[i])).entry })
    }

    #[inline]
    pub fn get_mut(&mut self, k: &[u8]) -> Option<&mut Entry> {
        let i = self.find(k)?;
        // SAFETY: as in get; &mut self makes the access exclusive.
        Some(unsafe { &mut (*node_of(self.b()[i])).entry })
    }

    /// Inserts a key the caller knows is absent.
    #[inline]
    pub fn insert_new(&mut self, key: SBytes, entry: Entry) {
        if (self.len as usize + 1) * 4 > self.capacity() * 3 {
            self.resize((self.capacity() * 2).max(MIN_BUCKETS));
        }
        let h = hash(key.as_slice());
        let packed = pack(Box::new(Node { key, entry }), h);
        self.place(packed, h as usize);
        self.len += 1;
    }

    /// Puts a packed bucket at the first empty bucket from `home` on.
    #[inline]
    fn place(&mut self, packed: u64, home: usize) {
        let mask = self.capacity() - 1;
        let mut i = home & mask;
        while self.b()[i] != 0 {
            i = (i + 1) & mask;
        }
        self.b_mut()[i] = packed;
    }

    /// The home bucket of a packed bucket in a table of `mask + 1` buckets.
    #[inline]
    fn home(b: u64, mask: usize) -> usize {
        if mask < TAG_SPAN {
            tag_in(b) as usize & mask
        } else {
            // SAFETY: non-empty buckets hold live nodes owned by this table.
            hash(unsafe { (*node_of(b)).key.as_slice() }) as usize & mask
        }
    }

    fn resize(&mut self, buckets: usize) {
        let old = self.set_buckets(vec![0u64; buckets].into_boxed_slice());
        let mask = buckets - 1;
        for &b in old.iter().filter(|&&b| b != 0) {
            let home = Self::home(b, mask);
            self.place(b, home);
        }
    }

    /// Stage 1 of a pipelined prefetch: the bucket line where the probe for `k` starts.
    #[inline]
    pub fn prefetch_bucket(&self, k: &[u8]) {
        if self.len != 0 {
            let i = hash(k) as usize & (self.capacity() - 1);
            prefetch_line(&self.b()[i] as *const u64 as *const u8);
        }
    }

    /// Stage 2: walks the probe (its bucket line now cached) and prefetches the nodes whose
    /// tag matches, without dereferencing them, so the miss on the node overlaps whatever
    /// the CPU does next.
    #[inline]
    pub fn prefetch(&self, k: &[u8]) {
        if self.len != 0 {
            for (_, b) in self.candidates(hash(k)) {
                prefetch_line(node_of(b) as *const u8);
            }
        }
    }

    pub fn remove(&mut self, k: &[u8]) -> Option<Entry> {
        let i = self.find(k)?;
        let mask = self.capacity() - 1;
        // SAFETY: bucket i came from Box::into_raw and is cleared below, so it's freed once.
        let node = unsafe { Box::from_raw(node_of(self.b()[i])) };
        // Backward shift: pull later buckets of the probe run into the hole when the hole
        // lies between their home and where they sit, so no lookup ever needs a tombstone.
        let mut hole = i;
        let mut j = (i + 1) & mask;
        loop {
            let b = self.b()[j];
            if b == 0 {
                break;
            }
            let home = Self::home(b, mask);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.b_mut()[hole] = b;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.b_mut()[hole] = 0;
        self.len -= 1;
        self.shrink_if_sparse();
        Some(node.entry)
    }

    /// Gives memory back after mass deletion: a table under 1/8 full halves down to at most
    /// 1/4 full (so a grow, at 3/4, is far away), an empty one is freed.
    fn shrink_if_sparse(&mut self) {
        if self.len == 0 {
            drop(self.set_buckets(Box::default()));
        } else if self.capacity() > MIN_BUCKETS && (self.len as usize) * 8 < self.capacity() {
            let want = (self.len as usize * 4).next_power_of_two().max(MIN_BUCKETS);
            if want < self.capacity() {
                self.resize(want);
            }
        }
    }

    pub fn retain(&mut self, mut f: impl FnMut(&SBytes, &mut Entry) -> bool) {
        let mut removed = 0u32;
        for b in self.b_mut().iter_mut().filter(|b| **b != 0) {
            // SAFETY: a live node owned by this table; &mut self makes the access exclusive.
            let n = unsafe { &mut *node_of(*b) };
            if !f(&n.key, &mut n.entry) {
                // SAFETY: from Box::into_raw; the bucket is cleared, so it's freed once.
                drop(unsafe { Box::from_raw(node_of(*b)) });
                *b = 0;
                removed += 1;
            }
        }
        self.len -= removed;
        if removed > 0 {
            // Clearing buckets in place broke probe runs: rebuild, then shrink if sparse.
            if self.len == 0 {
                drop(self.set_buckets(Box::default()));
            } else {
                self.resize(self.capacity());
                self.shrink_if_sparse();
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&SBytes, &Entry)> {
        self.b().iter().filter(|&&b| b != 0).map(|&b| {
            // SAFETY: a live node owned by this table; the borrow is tied to &self.
            let n = unsafe { &*node_of(b) };
            (&n.key, &n.entry)
        })
    }
}

impl Drop for SlotMap {
    fn drop(&mut self) {
        for &b in self.b().iter().filter(|&&b| b != 0) {
            // SAFETY: every non-empty bucket is a distinct pointer from Box::into_raw.
            drop(unsafe { Box::from_raw(node_of(b)) });
        }
        drop(self.set_buckets(Box::default()));
    }
}

impl<'a> IntoIterator for &'a SlotMap {
    type Item = (&'a SBytes, &'a Entry);
    type IntoIter = Box<dyn Iterator<Item = (&'a SBytes, &'a Entry)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::value::Value;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn entry(v: u64) -> Entry {
        Entry::new(Value::Int(v as i64))
    }

    fn val(e: &Entry) -> i64 {
        match &e.value {
            Value::Int(i) => *i,
            _ => panic!("not an int"),
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16, u64),
        Remove(u16),
        Get(u16),
        Retain(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few distinct keys so inserts, removes and hits collide a lot.
        prop_oneof![
            4 => (0u16..600, any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
            3 => (0u16..600).prop_map(Op::Remove),
            2 => (0u16..600).prop_map(Op::Get),
            1 => any::<u8>().prop_map(Op::Retain),
        ]
    }

    fn key(k: u16) -> Vec<u8> {
        format!("key:{k}").into_bytes()
    }

    fn check(m: &SlotMap, model: &HashMap<Vec<u8>, u64>) {
        assert_eq!(m.len(), model.len());
        let mut seen: Vec<(Vec<u8>, i64)> = m
            .iter()
            .map(|(k, e)| (k.as_slice().to_vec(), val(e)))
            .collect();
        seen.sort();
        let mut want: Vec<(Vec<u8>, i64)> =
            model.iter().map(|(k, v)| (k.clone(), *v as i64)).collect();
        want.sort();
        assert_eq!(seen, want);
        for (k, v) in model {
            assert_eq!(m.get(k).map(val), Some(*v as i64));
        }
        assert!(m.len() * 4 <= m.capacity() * 3 || m.capacity() == 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The table agrees with a HashMap after any sequence of inserts, removes and
        /// retains (which exercise growth, backward-shift deletion and shrinking).
        #[test]
        fn matches_a_hashmap(ops in proptest::collection::vec(op(), 1..2000)) {
            let mut m = SlotMap::default();
            let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
            for o in ops {
                match o {
                    Op::Insert(k, v) => {
                        let k = key(k);
                        if let Some(e) = m.get_mut(&k) {
                            *e = entry(v);
                        } else {
                            m.insert_new(SBytes::new(&k), entry(v));
                        }
                        model.insert(k, v);
                    }
                    Op::Remove(k) => {
                        let k = key(k);
                        prop_assert_eq!(m.remove(&k).map(|e| val(&e)), model.remove(&k).map(|v| v as i64));
                    }
                    Op::Get(k) => {
                        let k = key(k);
                        prop_assert_eq!(m.get(&k).map(val), model.get(&k).map(|v| *v as i64));
                    }
                    Op::Retain(r) => {
                        m.retain(|_, e| !(val(e) as u64).wrapping_add(r as u64).is_multiple_of(3));
                        model.retain(|_, v| !v.wrapping_add(r as u64).is_multiple_of(3));
                    }
                }
            }
            check(&m, &model);
        }
    }

    /// A stripe's maps of one database are a fixed cost of every stripe holding a key
    /// (unit/memefficiency counts it): 16 bytes each keeps that block at 384 bytes.
    #[test]
    fn header_is_16_bytes() {
        assert_eq!(std::mem::size_of::<SlotMap>(), 16);
        assert!(crate::alloc::real_size(std::mem::size_of::<crate::db::DbSlots>()) <= 384);
    }

    /// Past 2^16 buckets a bucket's home comes from hashing the key again, not the tag.
    #[test]
    fn big_table_grows_and_deletes() {
        let mut m = SlotMap::default();
        let n = 120_000u64;
        for i in 0..n {
            m.insert_new(SBytes::new(format!("k{i}").as_bytes()), entry(i));
        }
        assert!(m.capacity() > TAG_SPAN);
        for i in (0..n).step_by(2) {
            assert_eq!(
                m.remove(format!("k{i}").as_bytes()).map(|e| val(&e)),
                Some(i as i64)
            );
        }
        for i in 0..n {
            let want = (i % 2 == 1).then_some(i as i64);
            assert_eq!(m.get(format!("k{i}").as_bytes()).map(val), want);
        }
        m.retain(|_, e| val(e) % 4 != 1);
        assert_eq!(m.len(), (n / 4) as usize);
        for i in 0..n {
            let want = (i % 4 == 3).then_some(i as i64);
            assert_eq!(m.get(format!("k{i}").as_bytes()).map(val), want);
        }
        m.retain(|_, _| false);
        assert_eq!(m.len(), 0);
        assert_eq!(m.capacity(), 0);
    }
}
