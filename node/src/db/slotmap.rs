//! One hash slot's keys: an open-addressing table of tagged pointers to nodes, each node
//! one allocation holding the key's entry and the key's bytes.
//!
//! Why pointers to nodes: each slot holds few keys (about 61 per slot at 1M keys), so
//! tables are often part empty; an empty inline bucket would cost a whole (key, entry)
//! pair, an empty pointer bucket costs 8 bytes.
//!
//! Why the key lives in its node (Valkey's embedded keys): a node is the 32-byte entry and
//! the key, so a key of up to 16 bytes makes a 48-byte node and one of 17 to 24 bytes a
//! 56-byte node (mimalloc's classes are 8 bytes apart there, see crate::alloc) instead of a
//! 64-byte one holding a 24-byte key buffer, and a long key costs no second allocation.
//! The key's length sits in the bucket, not the node: a length byte in the node put every
//! key whose length is a multiple of 8 (16-byte keys, say) one size class up.
//!
//! Why bucket counts are not only powers of two: growing by 2 left the mean slot at 1M keys
//! (61 keys) in 128 buckets; counts alternate 2^k and 1.5 × 2^k (96 buckets there), and a
//! key's home bucket is `tag × buckets / 2^16` (or from the full hash past 2^16 buckets).
//!
//! Why our own table rather than hashbrown's (which we used before): a lookup over a big
//! keyspace is a chain of cache misses (table header, bucket, node), and pipelined batches
//! hide them by prefetching one level for every key of the batch before the next level
//! (see [`super::Keyspace::prefetch`]). hashbrown doesn't expose where a key's bucket is,
//! so its control-byte and bucket misses could only be taken one key at a time. Here each
//! 8-byte bucket holds the node pointer, the key's length and 11 bits of its hash, so a probe
//! rarely touches a node that isn't the key's.
//!
//! Layout of a bucket: 0 is empty; otherwise the low 45 bits are the node's address shifted
//! right by 3 (nodes are 8-aligned and below 2^48), the next 8 bits the key's length (255:
//! the length is in the node) and the high 11 bits the low 11 bits of the key's hash (the
//! tag). Linear probing, at most 3/4 full (a table of up to 16 buckets, two cache lines: all
//! but one), deletion by backward shift (no tombstones, so a miss stops at the first empty
//! bucket).

use std::alloc::Layout;
use std::hash::BuildHasher;
use std::ptr::NonNull;
use std::sync::OnceLock;

use super::value::Entry;

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

/// Bits of a node's address (>> 3) in a bucket.
const PTR_BITS: u32 = 45;
const PTR_MASK: u64 = (1 << PTR_BITS) - 1;
/// Bits of the key's length in a bucket, above the address.
const LEN_SHIFT: u32 = PTR_BITS;
/// Bits of the tag in a bucket, above the length. 11 bits: a probe meets a bucket with a
/// foreign key's matching tag once in 2048 (then compares that node's key, a miss).
const TAG_BITS: u32 = 11;
const TAG_SHIFT: u32 = 64 - TAG_BITS;
/// Tables up to this many buckets (1500 keys in a slot, 25M keys in a node owning every
/// slot) find a bucket's home from its tag alone (growth and deletion then never read a
/// node); bigger ones hash the node's key again.
const TAG_SPAN: usize = 1 << TAG_BITS;
/// A slot's table starts at one bucket: most slots of a node with a few thousand keys hold
/// one key, and a table that may be full (see [`fits`]) needs no spare bucket for it.
const MIN_BUCKETS: usize = 1;

// ---- Nodes -------------------------------------------------------------------------------
//
// A node is one allocation: the `Entry` (32 bytes, 8-aligned), then the key's bytes; a key
// of 255 bytes or more has its length as 8 unaligned bytes in front of it (the bucket's
// length byte then says 0xFF).

const HEAD: usize = std::mem::size_of::<Entry>();
const LONG_KEY: u8 = 0xFF;
const _: () = assert!(HEAD == 32);

/// Bytes of the in-node length field for a key of `len` bytes.
#[inline(always)]
fn len_bytes(len: usize) -> usize {
    if len < LONG_KEY as usize {
        0
    } else {
        8
    }
}

/// The allocation of a node for a key of `key_len` bytes.
#[inline]
fn node_layout(key_len: usize) -> Layout {
    let size = HEAD + len_bytes(key_len) + key_len;
    match Layout::from_size_align(size, std::mem::align_of::<Entry>()) {
        Ok(l) => l,
        // Only a key near isize::MAX bytes, which no request can carry.
        Err(_) => std::process::abort(),
    }
}

/// Bytes the allocator really takes for the node of a `key_len`-byte key (MEMORY USAGE).
pub fn node_bytes(key_len: usize) -> usize {
    crate::alloc::counted(node_layout(key_len)) as usize
}

/// Allocates a node holding `entry` and `key`.
fn new_node(key: &[u8], entry: Entry) -> *mut u8 {
    let layout = node_layout(key.len());
    // SAFETY: the layout has a non-zero size (at least HEAD).
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: p is a fresh allocation of HEAD + len_bytes + key.len() bytes aligned for
    // Entry; each write below stays inside it and the key doesn't overlap it.
    unsafe {
        std::ptr::write(p as *mut Entry, entry);
        let kp = p.add(HEAD);
        let off = len_bytes(key.len());
        if off != 0 {
            std::ptr::write_unaligned(kp as *mut u64, key.len() as u64);
        }
        std::ptr::copy_nonoverlapping(key.as_ptr(), kp.add(off), key.len());
    }
    p
}

/// The key of a live bucket's node.
///
/// # Safety
/// `b` is a non-empty bucket of a table, whose node is live; the slice lives as long as
/// the node does.
#[inline(always)]
unsafe fn node_key<'a>(b: u64) -> &'a [u8] {
    let kp = node_of(b).add(HEAD);
    match len_in(b) {
        LONG_KEY => {
            let len = std::ptr::read_unaligned(kp as *const u64) as usize;
            std::slice::from_raw_parts(kp.add(8), len)
        }
        len => std::slice::from_raw_parts(kp, len as usize),
    }
}

/// Frees a bucket's node and hands back its entry.
///
/// # Safety
/// `b` is a non-empty bucket whose node is live, and neither is used again.
unsafe fn take_node(b: u64) -> Entry {
    let p = node_of(b);
    let layout = node_layout(node_key(b).len());
    let e = std::ptr::read(p as *const Entry);
    std::alloc::dealloc(p, layout);
    e
}

#[inline(always)]
fn tag_of(h: u64) -> u64 {
    h & ((1 << TAG_BITS) - 1)
}

#[inline(always)]
fn node_of(b: u64) -> *mut u8 {
    ((b & PTR_MASK) << 3) as *mut u8
}

#[inline(always)]
fn tag_in(b: u64) -> u64 {
    b >> TAG_SHIFT
}

/// The key's length as the bucket holds it (`LONG_KEY`: in the node).
#[inline(always)]
fn len_in(b: u64) -> u8 {
    (b >> LEN_SHIFT) as u8
}

/// Packs a node pointer with its key's length and tag. User-space addresses on x86-64 and
/// aarch64 Linux stay below 2^48 (the kernel hands out higher ones only to an mmap that
/// asks for them), and nodes are 8-aligned, so 45 bits hold the address.
fn pack(node: *mut u8, key_len: usize, h: u64) -> u64 {
    let p = node as u64;
    assert!(
        p >> 48 == 0 && p & 7 == 0,
        "heap address {p:#x} does not fit in 48 bits; tessera-node needs a 48-bit address space"
    );
    let len = key_len.min(LONG_KEY as usize) as u64;
    (p >> 3) | (len << LEN_SHIFT) | (tag_of(h) << TAG_SHIFT)
}

/// The bucket count after `cap`: 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (2^k and 1.5 × 2^k).
#[inline]
fn next_cap(cap: usize) -> usize {
    if cap < 2 {
        cap + 1
    } else if cap.is_power_of_two() {
        cap + cap / 2
    } else {
        cap / 3 * 4
    }
}

/// Whether `n` keys may sit in `cap` buckets. A table of up to two cache lines (16
/// buckets) may be full: a probe there reads at most those two lines however long it runs
/// (a miss in a full table looks at every bucket's tag, never at more than one node in
/// 2048), and a keyspace of a few keys per slot (100,000 keys: about 6) then takes the
/// smallest table that holds its keys, where one spare bucket cost about 1.5 bytes per key
/// and a slot of one key twice the 8 bytes it needs. Bigger tables stay at most 3/4 full,
/// so probe runs stay short and a miss ends at an empty bucket.
#[inline(always)]
fn fits(n: usize, cap: usize) -> bool {
    if cap <= 16 {
        n <= cap
    } else {
        n * 4 <= cap * 3
    }
}

/// The smallest bucket count of the sequence holding at least `n` buckets.
fn cap_at_least(n: usize) -> usize {
    let mut c = MIN_BUCKETS;
    while c < n {
        c = next_cap(c);
    }
    c
}

/// The home bucket of hash `h` in a table of `cap` buckets: the tag scaled to `cap` for
/// tables up to 2^16 buckets (so the tag alone finds it), the next 32 bits above.
#[inline(always)]
fn home_of(h: u64, cap: usize) -> usize {
    if cap <= TAG_SPAN {
        ((tag_of(h) * cap as u64) >> TAG_BITS) as usize
    } else {
        ((((h >> 16) & 0xFFFF_FFFF) * cap as u64) >> 32) as usize
    }
}

/// The bucket after `i` in a table of `cap` buckets.
#[inline(always)]
fn step(i: usize, cap: usize) -> usize {
    if i + 1 == cap {
        0
    } else {
        i + 1
    }
}

/// 16 bytes, so a stripe's 16 maps of one database (with their TTL counts) fit a 384-byte
/// block rather than a 512-byte one: that block is a fixed cost of every stripe that holds
/// a key, about 40 bytes per key at 10000 keys.
pub struct SlotMap {
    /// The buckets: `cap` of them, allocated as a `Box<[u64]>` (dangling when `cap` is 0).
    ptr: NonNull<u64>,
    /// Number of buckets (a count of the `next_cap` sequence, or none before the first
    /// insert).
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
// bucket is a pointer from new_node, freed once, in remove, retain or drop), and only
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

    /// The buckets of `h`'s probe run (from its home to the first empty bucket, or every
    /// bucket of a full table) whose tag
    /// matches `h`'s: the only places its key can be.
    #[inline]
    fn candidates(&self, h: u64) -> impl Iterator<Item = (usize, u64)> + '_ {
        let cap = self.capacity();
        let tag = tag_of(h);
        let home = home_of(h, cap);
        (0..cap)
            .map(move |k| {
                let i = home + k;
                if i >= cap {
                    i - cap
                } else {
                    i
                }
            })
            .map(move |i| (i, self.b()[i]))
            .take_while(|&(_, b)| b != 0)
            .filter(move |&(_, b)| tag_in(b) == tag)
    }

    /// The bucket index of `k`, if present.
    #[inline]
    fn find(&self, k: &[u8]) -> Option<usize> {
        self.find_hashed(k, hash(k))
    }

    /// [`Self::find`] with the key's hash already computed.
    #[inline]
    fn find_hashed(&self, k: &[u8], h: u64) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        self.candidates(h)
            // SAFETY: non-empty buckets hold live nodes owned by this table.
            .find(|&(_, b)| unsafe { node_key(b) == k })
            .map(|(i, _)| i)
    }

    #[inline]
    pub fn get(&self, k: &[u8]) -> Option<&Entry> {
        let i = self.find(k)?;
        // SAFETY: bucket i holds a live node owned by this table, which starts with its
        // Entry; the borrow is tied to &self.
        Some(unsafe { &*(node_of(self.b()[i]) as *const Entry) })
    }

    #[inline]
    pub fn get_mut(&mut self, k: &[u8]) -> Option<&mut Entry> {
        let i = self.find(k)?;
        // SAFETY: as in get; &mut self makes the access exclusive.
        Some(unsafe { &mut *(node_of(self.b()[i]) as *mut Entry) })
    }

    /// Inserts a key the caller knows is absent.
    #[inline]
    pub fn insert_new(&mut self, key: &[u8], entry: Entry) {
        self.insert_hashed(key, hash(key), entry);
    }

    /// Inserts or replaces, hashing the key once; hands back the entry replaced.
    #[inline]
    pub fn insert(&mut self, key: &[u8], entry: Entry) -> Option<Entry> {
        let h = hash(key);
        if let Some(i) = self.find_hashed(key, h) {
            // SAFETY: a live node owned by this table, which starts with its Entry;
            // &mut self makes the access exclusive.
            let slot = unsafe { &mut *(node_of(self.b()[i]) as *mut Entry) };
            return Some(std::mem::replace(slot, entry));
        }
        self.insert_hashed(key, h, entry);
        None
    }

    #[inline]
    fn insert_hashed(&mut self, key: &[u8], h: u64, entry: Entry) {
        if !fits(self.len as usize + 1, self.capacity()) {
            self.resize(next_cap(self.capacity()));
        }
        let packed = pack(new_node(key, entry), key.len(), h);
        self.place(packed, home_of(h, self.capacity()));
        self.len += 1;
    }

    /// Puts a packed bucket at the first empty bucket from `home` on (the caller made sure
    /// there is one: `fits` before growing).
    #[inline]
    fn place(&mut self, packed: u64, home: usize) {
        let cap = self.capacity();
        let mut i = home;
        while self.b()[i] != 0 {
            i = step(i, cap);
        }
        self.b_mut()[i] = packed;
    }

    /// The home bucket of a packed bucket in a table of `cap` buckets.
    #[inline]
    fn home(b: u64, cap: usize) -> usize {
        if cap <= TAG_SPAN {
            home_of(tag_in(b), cap)
        } else {
            // SAFETY: non-empty buckets hold live nodes owned by this table.
            home_of(hash(unsafe { node_key(b) }), cap)
        }
    }

    fn resize(&mut self, buckets: usize) {
        let old = self.set_buckets(vec![0u64; buckets].into_boxed_slice());
        for &b in old.iter().filter(|&&b| b != 0) {
            let home = Self::home(b, buckets);
            self.place(b, home);
        }
    }

    /// Stage 1 of a pipelined prefetch: the bucket line where the probe for `k` starts.
    #[inline]
    pub fn prefetch_bucket(&self, k: &[u8]) {
        if self.len != 0 {
            let i = home_of(hash(k), self.capacity());
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
        let cap = self.capacity();
        // SAFETY: bucket i holds a node from new_node, cleared below, so it's freed once.
        let entry = unsafe { take_node(self.b()[i]) };
        // Backward shift: pull later buckets of the probe run into the hole when the hole
        // lies between their home and where they sit, so no lookup ever needs a tombstone.
        let dist = |from: usize, to: usize| {
            if to >= from {
                to - from
            } else {
                to + cap - from
            }
        };
        let mut hole = i;
        let mut j = step(i, cap);
        // The run ends at an empty bucket; a full table (`fits` lets a small one be) has
        // none, and then every other bucket is looked at once.
        while j != i {
            let b = self.b()[j];
            if b == 0 {
                break;
            }
            let home = Self::home(b, cap);
            if dist(home, j) >= dist(hole, j) {
                self.b_mut()[hole] = b;
                hole = j;
            }
            j = step(j, cap);
        }
        self.b_mut()[hole] = 0;
        self.len -= 1;
        self.shrink_if_sparse();
        Some(entry)
    }

    /// Gives memory back after mass deletion: a table under 1/8 full shrinks to at most
    /// 1/4 full (so a grow, at 3/4, is far away), an empty one is freed.
    fn shrink_if_sparse(&mut self) {
        if self.len == 0 {
            drop(self.set_buckets(Box::default()));
        } else if self.capacity() > MIN_BUCKETS && (self.len as usize) * 8 < self.capacity() {
            let want = cap_at_least(self.len as usize * 4);
            if want < self.capacity() {
                self.resize(want);
            }
        }
    }

    pub fn retain(&mut self, mut f: impl FnMut(&[u8], &mut Entry) -> bool) {
        let mut removed = 0u32;
        for b in self.b_mut().iter_mut().filter(|b| **b != 0) {
            let p = node_of(*b);
            // SAFETY: a live node owned by this table; &mut self makes the access
            // exclusive, and the key and entry don't overlap.
            let keep = unsafe { f(node_key(*b), &mut *(p as *mut Entry)) };
            if !keep {
                // SAFETY: from new_node; the bucket is cleared, so it's freed once.
                drop(unsafe { take_node(*b) });
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

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.b().iter().filter(|&&b| b != 0).map(|&b| {
            let p = node_of(b);
            // SAFETY: a live node owned by this table; the borrows are tied to &self.
            unsafe { (node_key(b), &*(p as *const Entry)) }
        })
    }
}

impl Drop for SlotMap {
    fn drop(&mut self) {
        for &b in self.b().iter().filter(|&&b| b != 0) {
            // SAFETY: every non-empty bucket is a distinct node from new_node.
            drop(unsafe { take_node(b) });
        }
        drop(self.set_buckets(Box::default()));
    }
}

impl<'a> IntoIterator for &'a SlotMap {
    type Item = (&'a [u8], &'a Entry);
    type IntoIter = Box<dyn Iterator<Item = (&'a [u8], &'a Entry)> + 'a>;
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

    /// Operations on keys below `keys`: few distinct keys so inserts, removes and hits
    /// collide a lot.
    fn op(keys: u16) -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..keys, any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
            3 => (0..keys).prop_map(Op::Remove),
            2 => (0..keys).prop_map(Op::Get),
            1 => any::<u8>().prop_map(Op::Retain),
        ]
    }

    fn key(k: u16) -> Vec<u8> {
        format!("key:{k}").into_bytes()
    }

    fn check(m: &SlotMap, model: &HashMap<Vec<u8>, u64>) {
        assert_eq!(m.len(), model.len());
        let mut seen: Vec<(Vec<u8>, i64)> = m.iter().map(|(k, e)| (k.to_vec(), val(e))).collect();
        seen.sort();
        let mut want: Vec<(Vec<u8>, i64)> =
            model.iter().map(|(k, v)| (k.clone(), *v as i64)).collect();
        want.sort();
        assert_eq!(seen, want);
        for (k, v) in model {
            assert_eq!(m.get(k).map(val), Some(*v as i64));
        }
        assert!(fits(m.len(), m.capacity()) || m.capacity() == 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The table agrees with a HashMap after any sequence of inserts, removes and
        /// retains (which exercise growth, backward-shift deletion and shrinking).
        #[test]
        fn matches_a_hashmap(ops in proptest::collection::vec(op(600), 1..2000)) {
            run_against_model(ops, false)?;
        }

        /// The same with at most 20 keys: tables of up to 24 buckets, the small ones often
        /// full (no empty bucket ends a probe or a backward shift there).
        #[test]
        fn small_full_tables_match_a_hashmap(ops in proptest::collection::vec(op(20), 1..400)) {
            run_against_model(ops, true)?;
        }
    }

    /// Applies `ops` to a table and a HashMap; checks they agree at the end, or after every
    /// operation with `each`.
    fn run_against_model(ops: Vec<Op>, each: bool) -> Result<(), TestCaseError> {
        let mut m = SlotMap::default();
        let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
        for o in ops {
            match o {
                Op::Insert(k, v) => {
                    let k = key(k);
                    let old = if v % 2 == 0 {
                        m.insert(&k, entry(v)).map(|e| val(&e))
                    } else if let Some(e) = m.get_mut(&k) {
                        Some(val(&std::mem::replace(e, entry(v))))
                    } else {
                        m.insert_new(&k, entry(v));
                        None
                    };
                    prop_assert_eq!(old, model.insert(k, v).map(|v| v as i64));
                }
                Op::Remove(k) => {
                    let k = key(k);
                    prop_assert_eq!(
                        m.remove(&k).map(|e| val(&e)),
                        model.remove(&k).map(|v| v as i64)
                    );
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
            if each {
                check(&m, &model);
            }
        }
        check(&m, &model);
        Ok(())
    }

    /// A stripe's maps of one database are a fixed cost of every stripe holding a key
    /// (unit/memefficiency counts it): 16 bytes each, and only for slots in use.
    #[test]
    fn header_is_16_bytes() {
        assert_eq!(std::mem::size_of::<SlotMap>(), 16);
        assert!(crate::alloc::real_size(std::mem::size_of::<crate::db::DbSlots>()) <= 40);
    }

    /// Past 2^11 buckets a bucket's home comes from hashing the key again, not the tag.
    #[test]
    fn big_table_grows_and_deletes() {
        let mut m = SlotMap::default();
        let n = 120_000u64;
        for i in 0..n {
            m.insert_new(format!("k{i}").as_bytes(), entry(i));
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

    /// Keys of every length class round-trip: empty, one-byte lengths up to 254, and the
    /// long form from 255 bytes on; a key of up to 16 bytes makes a 48-byte node.
    #[test]
    fn keys_of_every_length() {
        let lens = [0usize, 1, 11, 15, 16, 200, 254, 255, 256, 1000, 70_000];
        let mut m = SlotMap::default();
        let keys: Vec<Vec<u8>> = lens
            .iter()
            .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
            .collect();
        for (i, k) in keys.iter().enumerate() {
            m.insert_new(k, entry(i as u64));
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(
                m.get(k).map(val),
                Some(i as i64),
                "key of {} bytes",
                k.len()
            );
        }
        let mut seen: Vec<usize> = m.iter().map(|(k, _)| k.len()).collect();
        seen.sort();
        assert_eq!(seen, lens);
        for (i, k) in keys.iter().enumerate().step_by(2) {
            assert_eq!(m.remove(k).map(|e| val(&e)), Some(i as i64));
        }
        m.retain(|k, _| k.len() != 15);
        let mut left: Vec<usize> = m.iter().map(|(k, _)| k.len()).collect();
        left.sort();
        assert_eq!(left, [1, 200, 255, 1000]);
        // mimalloc's 8-byte classes (.cargo/config.toml): a node is 32 bytes plus its key.
        assert_eq!(node_bytes(7), 40);
        assert_eq!(node_bytes(8), 40);
        assert_eq!(node_bytes(11), 48);
        assert_eq!(node_bytes(16), 48);
        assert_eq!(node_bytes(17), 56);
        assert_eq!(node_bytes(24), 56);
        assert_eq!(node_bytes(25), 64);
    }

    /// Bucket counts follow 1, 2, 3, 4, 6, 8, 12, ...: the mean slot at 1M keys (61 keys)
    /// sits in 96 buckets, and every count reached stays in the sequence.
    #[test]
    fn bucket_counts() {
        let seq: Vec<usize> = std::iter::successors(Some(MIN_BUCKETS), |&c| Some(next_cap(c)))
            .take(11)
            .collect();
        assert_eq!(seq, [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48]);
        let mut m = SlotMap::default();
        for i in 0..61u64 {
            m.insert_new(format!("key:{i}").as_bytes(), entry(i));
        }
        assert_eq!(m.capacity(), 96);
        for i in 0..55u64 {
            m.remove(format!("key:{i}").as_bytes());
        }
        // Shrunk at 11 keys (under 1/8 of 96) to 48 buckets, at most 1/4 full.
        assert_eq!(m.len(), 6);
        assert_eq!(m.capacity(), 48);
    }
}
