//! Model tests of the sorted-set skiplist against a BTreeMap (member → score) reference.

use super::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// The reference order: score, then member.
fn sorted(r: &BTreeMap<Vec<u8>, f64>) -> Vec<(Vec<u8>, f64)> {
    let mut v: Vec<_> = r.iter().map(|(m, s)| (m.clone(), *s)).collect();
    v.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// Every structural invariant the list and its index must keep.
fn check(sl: &SkipList, r: &BTreeMap<Vec<u8>, f64>) -> Result<(), TestCaseError> {
    let want = sorted(r);
    prop_assert_eq!(sl.len(), want.len());
    let got: Vec<(Vec<u8>, f64)> = sl.iter().map(|(m, s)| (m.to_vec(), s)).collect();
    prop_assert_eq!(&got, &want);
    let back: Vec<(Vec<u8>, f64)> = sl
        .iter_from(want.len().saturating_sub(1), true)
        .map(|(m, s)| (m.to_vec(), s))
        .collect();
    let mut wrev = want.clone();
    wrev.reverse();
    prop_assert_eq!(&back, &wrev);
    prop_assert_eq!(
        sl.last().map(|(m, s)| (m.to_vec(), s)),
        want.last().cloned()
    );
    for (i, (m, s)) in want.iter().enumerate() {
        prop_assert_eq!(sl.rank(m), Some(i));
        prop_assert_eq!(sl.score(m), Some(*s));
        prop_assert_eq!(sl.get(i), Some((&m[..], *s)));
    }
    prop_assert_eq!(sl.get(want.len()), None);
    // The dense positions hold each element exactly once.
    let dense: BTreeMap<Vec<u8>, f64> = (0..sl.len())
        .filter_map(|i| sl.get_index(i))
        .map(|(m, s)| (m.to_vec(), s))
        .collect();
    prop_assert_eq!(&dense, r);
    prop_assert_eq!(sl.get_index(sl.len()), None);
    Ok(())
}

proptest! {
    #[test]
    fn matches_btreemap_model(ops in proptest::collection::vec((0u8..4, 0u8..40, -5i32..5), 0..400)) {
        let mut sl = SkipList::new();
        let mut r = BTreeMap::new();
        for (op, m, s) in ops {
            let m = format!("m{m:02}").into_bytes();
            let s = if s == -5 { f64::NEG_INFINITY } else { s as f64 / 2.0 };
            match op {
                0 | 1 => prop_assert_eq!(sl.insert(&m, s), r.insert(m.clone(), s).is_none()),
                2 => prop_assert_eq!(sl.remove(&m), r.remove(&m)),
                _ => prop_assert_eq!(sl.rank(&m), sorted(&r).iter().position(|(k, _)| *k == m)),
            }
            prop_assert_eq!(sl.len(), r.len());
        }
        check(&sl, &r)?;
        let want = sorted(&r);
        for t in -6..6 {
            let t = t as f64 / 2.0;
            prop_assert_eq!(sl.count_while(|s, _| s < t), want.iter().filter(|(_, s)| *s < t).count());
        }
        // Drain in model order, checking as it shrinks.
        for (m, s) in want {
            prop_assert_eq!(sl.remove(&m), Some(s));
            r.remove(&m);
            prop_assert_eq!(sl.len(), r.len());
        }
        check(&sl, &r)?;
        prop_assert!(sl.insert(b"again", 1.0));
        prop_assert_eq!(sl.get(0), Some((&b"again"[..], 1.0)));
    }

    #[test]
    fn scan_returns_stable_members(n in 1usize..200, ops in proptest::collection::vec((0u8..3, 0u16..400), 0..200)) {
        let mut sl = SkipList::new();
        for i in 0..n { sl.insert(format!("s{i}").as_bytes(), i as f64); }
        // Members named s* are never removed (only rescored); x* come and go.
        let mut seen = BTreeSet::new();
        let mut cursor = 0;
        let mut ops = ops.into_iter();
        loop {
            cursor = sl.scan(cursor, 3, |m, _| { seen.insert(m.to_vec()); });
            for (op, k) in ops.by_ref().take(3) {
                let key = format!("x{k}");
                match op {
                    0 => { sl.insert(key.as_bytes(), k as f64); }
                    1 => { sl.remove(key.as_bytes()); }
                    _ => { sl.insert(format!("s{}", k as usize % n).as_bytes(), -(k as f64)); }
                }
            }
            if cursor == 0 { break; }
        }
        for i in 0..n { let k = format!("s{i}"); prop_assert!(seen.contains(k.as_bytes()), "missing {}", k); }
    }
}

#[test]
fn large_ranks_are_correct_and_members_are_stored_once() {
    let mut sl = SkipList::new();
    for i in 0..100_000u32 {
        assert!(sl.insert(&i.to_be_bytes(), (i % 1000) as f64));
    }
    assert_eq!(sl.len(), 100_000);
    let (m, s) = sl.get(50_000).unwrap();
    assert_eq!(s, 500.0);
    assert_eq!(sl.rank(m), Some(50_000));
    for i in (0..100_000u32).step_by(2) {
        assert_eq!(sl.remove(&i.to_be_bytes()), Some((i % 1000) as f64));
    }
    assert_eq!(sl.len(), 50_000);
    assert_eq!(sl.iter().count(), 50_000);
    // Member bytes plus 8 per extra level: about 4 + 8/3 per element with P = 1/4.
    let data: usize = sl.nodes.iter().map(|n| n.data.len()).sum();
    assert!(data < 50_000 * 8, "{data}");
    assert_eq!(std::mem::size_of::<Node>(), 32);
}

#[test]
fn mass_deletion_compacts_and_keeps_order_ranks_and_scan() {
    let mut sl = SkipList::new();
    let mut r = BTreeMap::new();
    for i in 0..1000u32 {
        let m = format!("s{i}").into_bytes();
        sl.insert(&m, (i % 7) as f64);
        r.insert(m, (i % 7) as f64);
    }
    for i in 0..20_000u32 {
        sl.insert(format!("x{i}").as_bytes(), (i % 13) as f64);
    }
    let full = sl.heap_size();
    // A scan in progress while most elements go away (and compaction renumbers nodes).
    let mut seen = BTreeSet::new();
    let mut cursor = sl.scan(0, 50, |m, _| {
        seen.insert(m.to_vec());
    });
    for i in 0..20_000u32 {
        let m = format!("x{}", (i * 7919) % 20_000);
        assert_eq!(
            sl.remove(m.as_bytes()),
            Some((((i * 7919) % 20_000) % 13) as f64)
        );
        if i % 500 == 0 && cursor != 0 {
            cursor = sl.scan(cursor, 50, |m, _| {
                seen.insert(m.to_vec());
            });
        }
    }
    while cursor != 0 {
        cursor = sl.scan(cursor, 50, |m, _| {
            seen.insert(m.to_vec());
        });
    }
    for m in r.keys() {
        assert!(
            seen.contains(m),
            "scan missed {}",
            String::from_utf8_lossy(m)
        );
    }
    assert!(
        sl.nodes.len() < 4 * sl.len(),
        "not compacted: {}",
        sl.nodes.len()
    );
    assert!(sl.heap_size() * 5 < full, "{} vs {full}", sl.heap_size());
    check(&sl, &r).unwrap();
    // Still a working set after compaction: rescore, add, remove.
    for i in (0..1000u32).step_by(3) {
        let m = format!("s{i}").into_bytes();
        sl.insert(&m, -(i as f64));
        r.insert(m, -(i as f64));
    }
    for i in 0..100u32 {
        let m = format!("n{i}").into_bytes();
        sl.insert(&m, i as f64 / 4.0);
        r.insert(m.clone(), i as f64 / 4.0);
        if i % 2 == 0 {
            let m = format!("s{i}").into_bytes();
            assert_eq!(sl.remove(&m), r.remove(&m));
        }
    }
    check(&sl, &r).unwrap();
}
