//! Sorted set value: listpack (member, score pairs packed and kept sorted) while small, else a
//! skiplist (ranks, ranges) with a member index (lookups, SCAN, random picks) that stores each
//! member once (see `skiplist`). Order: score, then member bytes.

use super::pack::Pack;
use super::skiplist::SkipList;
use super::{parse_f64, Limits};

#[derive(Clone, Debug)]
pub enum ZSetValue {
    /// Alternating member, score (8 bytes little-endian f64) entries, sorted.
    ListPack(Pack),
    /// Boxed so the enum stays small while the value is a listpack.
    SkipList(Box<SkipDict>),
}

/// The big encoding: ranks, ranges, lookups, random picks and SCAN from one structure.
pub type SkipDict = SkipList;

impl Default for ZSetValue {
    fn default() -> Self {
        ZSetValue::ListPack(Pack::new())
    }
}

/// A score interval end: `1.5`, `(1.5`, `-inf`, `+inf`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreBound {
    pub value: f64,
    pub exclusive: bool,
}

impl ScoreBound {
    /// Parses Redis's score bound syntax; None for a non-float (or NaN).
    pub fn parse(s: &[u8]) -> Option<Self> {
        match s.strip_prefix(b"(") {
            Some(rest) => parse_f64(rest).map(|value| ScoreBound {
                value,
                exclusive: true,
            }),
            None => parse_f64(s).map(|value| ScoreBound {
                value,
                exclusive: false,
            }),
        }
    }
}

/// A lex interval end: `-`, `+`, `[member`, `(member`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    Min,
    Max,
    Inclusive(Vec<u8>),
    Exclusive(Vec<u8>),
}

impl LexBound {
    /// Parses Redis's lex bound syntax; None when it is not one of the four forms.
    pub fn parse(s: &[u8]) -> Option<Self> {
        match s.first()? {
            b'-' if s.len() == 1 => Some(LexBound::Min),
            b'+' if s.len() == 1 => Some(LexBound::Max),
            b'[' => Some(LexBound::Inclusive(s[1..].to_vec())),
            b'(' => Some(LexBound::Exclusive(s[1..].to_vec())),
            _ => None,
        }
    }

    /// True when `m` lies below this bound used as a minimum.
    fn below_min(&self, m: &[u8]) -> bool {
        match self {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Inclusive(b) => m < &b[..],
            LexBound::Exclusive(b) => m <= &b[..],
        }
    }

    /// True when `m` lies within this bound used as a maximum.
    fn within_max(&self, m: &[u8]) -> bool {
        match self {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Inclusive(b) => m <= &b[..],
            LexBound::Exclusive(b) => m < &b[..],
        }
    }
}

/// Listpack score encoding: integral scores below 2^53 as 1-7 byte little-endian two's
/// complement (most scores are small integers: 1-2 bytes instead of 8), anything else
/// (fractions, infinities, -0) as the 8 raw bytes of the f64.
fn enc_score(s: f64) -> ([u8; 8], usize) {
    // -0 becomes 0 here, as in a Redis listpack (which stores "0"); skiplists keep -0.
    if s.fract() == 0.0 && s.abs() < 9_007_199_254_740_992.0 {
        let i = s as i64;
        let n = (1..8)
            .find(|n| {
                let sh = 64 - 8 * n;
                (i << sh) >> sh == i
            })
            .unwrap_or(7);
        (i.to_le_bytes(), n)
    } else {
        (s.to_le_bytes(), 8)
    }
}

fn dec_score(b: &[u8]) -> f64 {
    let mut a = [0u8; 8];
    if b.len() >= 8 {
        a.copy_from_slice(&b[..8]);
        return f64::from_le_bytes(a);
    }
    a[..b.len()].copy_from_slice(b);
    let sh = 64 - 8 * b.len() as u32;
    ((i64::from_le_bytes(a) << sh) >> sh) as f64
}

impl ZSetValue {
    /// An empty sorted set in the encoding Redis picks for a first member of length `first_len`.
    pub fn new_for(first_len: usize, lim: &Limits) -> Self {
        if lim.zset_max_listpack_entries == 0 || first_len > lim.zset_max_listpack_value {
            ZSetValue::SkipList(Box::default())
        } else {
            ZSetValue::default()
        }
    }

    /// Builds a set from distinct members in the encoding their size calls for (STORE forms).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (Vec<u8>, f64)>, lim: &Limits) -> Self {
        let mut z = ZSetValue::default();
        for (m, s) in pairs {
            z.insert(&m, s, lim);
        }
        z
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            ZSetValue::ListPack(_) => "listpack",
            ZSetValue::SkipList(_) => "skiplist",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ZSetValue::ListPack(p) => p.len() / 2,
            ZSetValue::SkipList(sd) => sd.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decoded (member, score) pairs of a listpack, in order.
    fn lp_entries(p: &Pack) -> Vec<(&[u8], f64)> {
        let mut out = Vec::with_capacity(p.len() / 2);
        let mut it = p.iter();
        while let (Some(m), Some(s)) = (it.next(), it.next()) {
            out.push((m, dec_score(s)));
        }
        out
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            ZSetValue::ListPack(p) => {
                let mut it = p.iter();
                while let (Some(m), Some(s)) = (it.next(), it.next()) {
                    if m == member {
                        return Some(dec_score(s));
                    }
                }
                None
            }
            ZSetValue::SkipList(sd) => sd.score(member),
        }
    }

    fn make_skiplist(&mut self) {
        if let ZSetValue::ListPack(p) = self {
            let mut list = SkipList::with_capacity(p.len() / 2 + 1);
            for (m, s) in Self::lp_entries(p) {
                list.insert(m, s);
            }
            *self = ZSetValue::SkipList(Box::new(list));
        }
    }

    /// Sets member's score (adding it if absent); true if the member is new.
    /// The caller rejects NaN.
    pub fn insert(&mut self, member: &[u8], score: f64, lim: &Limits) -> bool {
        if let ZSetValue::ListPack(p) = self {
            let existed = Self::lp_remove(p, member);
            if existed
                || (self.len() < lim.zset_max_listpack_entries
                    && member.len() <= lim.zset_max_listpack_value)
            {
                if let ZSetValue::ListPack(p) = self {
                    Self::lp_insert(p, member, score);
                }
                // An update of an oversized member can only happen after a config change.
                if member.len() > lim.zset_max_listpack_value {
                    self.make_skiplist();
                }
                return !existed;
            }
            self.make_skiplist();
        }
        match self {
            ZSetValue::SkipList(sd) => sd.insert(member, score),
            ZSetValue::ListPack(_) => false,
        }
    }

    fn lp_remove(p: &mut Pack, member: &[u8]) -> bool {
        let mut off = p.first();
        while let Some(o) = off {
            let (m, so) = p.entry(o);
            if m == member {
                p.remove_at(o, 2);
                return true;
            }
            off = p.next(so);
        }
        false
    }

    fn lp_insert(p: &mut Pack, member: &[u8], score: f64) {
        let mut off = p.first();
        while let Some(o) = off {
            let (m, so) = p.entry(o);
            let s = dec_score(p.get_at(so));
            if s > score || (s == score && m > member) {
                break;
            }
            off = p.next(so);
        }
        let at = off.unwrap_or(p.bytes());
        let (enc, n) = enc_score(score);
        p.insert_at(at, &enc[..n]);
        p.insert_at(at, member);
    }

    /// Removes a member; true if it was present.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            ZSetValue::ListPack(p) => Self::lp_remove(p, member),
            ZSetValue::SkipList(sd) => sd.remove(member).is_some(),
        }
    }

    /// Number of leading elements (ascending order) for which `pred` holds; `pred` must
    /// hold on a prefix.
    pub fn count_while(&self, mut pred: impl FnMut(f64, &[u8]) -> bool) -> usize {
        match self {
            ZSetValue::ListPack(p) => Self::lp_entries(p)
                .iter()
                .take_while(|(m, s)| pred(*s, m))
                .count(),
            ZSetValue::SkipList(sd) => sd.count_while(pred),
        }
    }

    /// 0-based rank of a member, ascending or (rev) descending.
    pub fn rank(&self, member: &[u8], rev: bool) -> Option<usize> {
        let r = match self {
            ZSetValue::ListPack(p) => Self::lp_entries(p).iter().position(|(m, _)| *m == member)?,
            ZSetValue::SkipList(sd) => sd.rank(member)?,
        };
        Some(if rev { self.len() - 1 - r } else { r })
    }

    /// Ascending index range `[start, end)` of scores within `min..max`.
    pub fn score_range(&self, min: ScoreBound, max: ScoreBound) -> (usize, usize) {
        let start = self.count_while(|s, _| {
            if min.exclusive {
                s <= min.value
            } else {
                s < min.value
            }
        });
        let end = self.count_while(|s, _| {
            if max.exclusive {
                s < max.value
            } else {
                s <= max.value
            }
        });
        (start, end.max(start))
    }

    /// Ascending index range `[start, end)` of members within `min..max` (equal scores).
    pub fn lex_range(&self, min: &LexBound, max: &LexBound) -> (usize, usize) {
        let start = self.count_while(|_, m| min.below_min(m));
        let end = self.count_while(|_, m| max.within_max(m));
        (start, end.max(start))
    }

    /// Elements with ascending indices in `[start, end)`, listed ascending, or descending
    /// from `end - 1` when `rev`.
    pub fn range(&self, start: usize, end: usize, rev: bool) -> Vec<(Vec<u8>, f64)> {
        let end = end.min(self.len());
        if start >= end {
            return Vec::new();
        }
        let n = end - start;
        match self {
            ZSetValue::ListPack(p) => {
                let e = Self::lp_entries(p);
                let slice = &e[start..end];
                if rev {
                    slice.iter().rev().map(|(m, s)| (m.to_vec(), *s)).collect()
                } else {
                    slice.iter().map(|(m, s)| (m.to_vec(), *s)).collect()
                }
            }
            ZSetValue::SkipList(sd) => {
                let first = if rev { end - 1 } else { start };
                sd.iter_from(first, rev)
                    .take(n)
                    .map(|(m, s)| (m.to_vec(), s))
                    .collect()
            }
        }
    }

    /// Element at an ascending index.
    pub fn get(&self, idx: usize) -> Option<(Vec<u8>, f64)> {
        self.range(idx, idx + 1, false).pop()
    }

    /// Removes elements with ascending indices in `[start, end)`; returns how many.
    pub fn remove_range(&mut self, start: usize, end: usize) -> usize {
        let victims = self.range(start, end, false);
        match self {
            ZSetValue::ListPack(p) => {
                if let Some(off) = p.offset_of(start * 2) {
                    p.remove_at(off, victims.len() * 2);
                }
            }
            ZSetValue::SkipList(sd) => {
                for (m, _) in &victims {
                    sd.remove(m);
                }
            }
        }
        victims.len()
    }

    /// Pops up to `count` lowest (or highest when `max`) elements, in pop order.
    pub fn pop(&mut self, count: usize, max: bool) -> Vec<(Vec<u8>, f64)> {
        let n = count.min(self.len());
        let len = self.len();
        let (start, end) = if max { (len - n, len) } else { (0, n) };
        let out = self.range(start, end, max);
        self.remove_range(start, end);
        out
    }

    /// Visits all (member, score) pairs in ascending order.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], f64)) {
        match self {
            ZSetValue::ListPack(p) => Self::lp_entries(p).into_iter().for_each(|(m, s)| f(m, s)),
            ZSetValue::SkipList(sd) => sd.iter().for_each(|(m, s)| f(m, s)),
        }
    }

    /// Pair at a dense position (0..len), for uniform random selection.
    pub fn get_index(&self, i: usize) -> Option<(Vec<u8>, f64)> {
        match self {
            ZSetValue::ListPack(_) => self.get(i),
            ZSetValue::SkipList(sd) => sd.get_index(i).map(|(m, s)| (m.to_vec(), s)),
        }
    }

    /// ZSCAN step: listpacks answer in one call with cursor 0, like Redis.
    pub fn scan(&self, cursor: u64, count: usize, f: impl FnMut(&[u8], f64)) -> u64 {
        match self {
            ZSetValue::SkipList(sd) => sd.scan(cursor, count, f),
            _ => {
                self.for_each(f);
                0
            }
        }
    }

    pub fn heap_size(&self) -> usize {
        match self {
            ZSetValue::ListPack(p) => p.heap_size(),
            ZSetValue::SkipList(sd) => sd.heap_size(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(pairs: &std::collections::BTreeMap<Vec<u8>, f64>) -> Vec<(Vec<u8>, f64)> {
        let mut v: Vec<_> = pairs.iter().map(|(m, s)| (m.clone(), *s)).collect();
        v.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    #[test]
    fn bounds_parse() {
        assert_eq!(
            ScoreBound::parse(b"(1.5"),
            Some(ScoreBound {
                value: 1.5,
                exclusive: true
            })
        );
        assert_eq!(
            ScoreBound::parse(b"-inf").map(|b| b.value),
            Some(f64::NEG_INFINITY)
        );
        assert_eq!(ScoreBound::parse(b"(nan"), None);
        assert_eq!(ScoreBound::parse(b"x"), None);
        assert_eq!(LexBound::parse(b"-"), Some(LexBound::Min));
        assert_eq!(
            LexBound::parse(b"[a"),
            Some(LexBound::Inclusive(b"a".to_vec()))
        );
        assert_eq!(LexBound::parse(b"a"), None);
        assert_eq!(LexBound::parse(b"--"), None);
    }

    #[test]
    fn compact_scores_roundtrip() {
        for s in [
            0.0,
            1.0,
            -1.0,
            127.0,
            128.0,
            -129.0,
            1.5,
            1e15,
            -9e15,
            2e53,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.1,
        ] {
            let (b, n) = enc_score(s);
            let d = dec_score(&b[..n]);
            assert_eq!(d.to_bits(), s.to_bits(), "{s}");
        }
        assert_eq!(enc_score(5.0).1, 1);
        assert_eq!(enc_score(-300.0).1, 2);
    }

    #[test]
    fn encoding_converts() {
        let lim = Limits::default();
        let mut z = ZSetValue::new_for(1, &lim);
        for i in 0..128 {
            z.insert(format!("m{i}").as_bytes(), i as f64, &lim);
        }
        assert_eq!(z.encoding(), "listpack");
        z.insert(b"x", 0.5, &lim);
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(z.rank(b"x", false), Some(1));
        let mut z = ZSetValue::new_for(1, &lim);
        z.insert(&[b'a'; 65], 1.0, &lim);
        assert_eq!(z.encoding(), "skiplist");
    }

    proptest! {
        #[test]
        fn matches_reference(small in any::<bool>(), ops in proptest::collection::vec((0u8..4, 0u8..30, -4i8..4), 0..200),
                             lo in -5i8..5, hi in -5i8..5, lex_lo in 0u8..30, lex_hi in 0u8..30) {
            let lim = if small { Limits { zset_max_listpack_entries: 8, ..Limits::default() } } else { Limits::default() };
            let mut z = ZSetValue::default();
            let mut r = std::collections::BTreeMap::new();
            for (op, m, s) in ops {
                let m = format!("{m:02}").into_bytes();
                let s = if s == -4 { f64::NEG_INFINITY } else { s as f64 };
                match op {
                    0 | 1 => prop_assert_eq!(z.insert(&m, s, &lim), r.insert(m, s).is_none()),
                    2 => prop_assert_eq!(z.remove(&m), r.remove(&m).is_some()),
                    _ => {
                        let got = z.pop(2, s > 0.0);
                        let mut want = reference(&r);
                        if s > 0.0 { want.reverse(); }
                        want.truncate(2);
                        for (m, _) in &want { r.remove(m); }
                        prop_assert_eq!(got, want);
                    }
                }
            }
            let want = reference(&r);
            prop_assert_eq!(z.len(), want.len());
            prop_assert_eq!(z.range(0, usize::MAX, false), want.clone());
            for (i, (m, s)) in want.iter().enumerate() {
                prop_assert_eq!(z.rank(m, false), Some(i));
                prop_assert_eq!(z.rank(m, true), Some(want.len() - 1 - i));
                prop_assert_eq!(z.score(m), Some(*s));
            }
            let min = ScoreBound { value: lo as f64, exclusive: lo % 2 == 0 };
            let max = ScoreBound { value: hi as f64, exclusive: hi % 2 == 0 };
            let inr = |s: f64| (if min.exclusive { s > min.value } else { s >= min.value })
                && (if max.exclusive { s < max.value } else { s <= max.value });
            let (a, b) = z.score_range(min, max);
            let sel: Vec<_> = want.iter().filter(|(_, s)| inr(*s)).cloned().collect();
            prop_assert_eq!(z.range(a, b, false), sel.clone());
            let mut rsel = sel; rsel.reverse();
            prop_assert_eq!(z.range(a, b, true), rsel);
            // Lex ranges over a set whose scores are all equal.
            let mut lz = ZSetValue::default();
            for (m, _) in &want { lz.insert(m, 0.0, &lim); }
            let lmin = LexBound::Inclusive(format!("{lex_lo:02}").into_bytes());
            let lmax = LexBound::Exclusive(format!("{lex_hi:02}").into_bytes());
            let (a, b) = lz.lex_range(&lmin, &lmax);
            let lsel: Vec<Vec<u8>> = want.iter().map(|(m, _)| m.clone())
                .filter(|m| m[..] >= *format!("{lex_lo:02}").as_bytes() && m[..] < *format!("{lex_hi:02}").as_bytes()).collect();
            let mut lsel_sorted = lsel; lsel_sorted.sort();
            prop_assert_eq!(lz.range(a, b, false).into_iter().map(|(m, _)| m).collect::<Vec<_>>(), lsel_sorted);
            let n = z.len();
            let removed = z.remove_range(n / 3, n / 2);
            prop_assert_eq!(removed, n / 2 - n / 3);
            prop_assert_eq!(z.len(), n - removed);
        }
    }
}
