//! Proptest strategies for values covering every encoding the writer picks.

use bytes::Bytes;
use proptest::collection::{hash_map, hash_set, vec};
use proptest::prelude::*;
use tessera_rdb::RdbValue;

/// Elements that hit every string encoding: small/large integers, short text, compressible
/// runs, binary noise, and occasionally long strings.
pub fn element() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        3 => any::<i64>().prop_map(|v| Bytes::from(v.to_string())),
        2 => (-5000i64..5000).prop_map(|v| Bytes::from(v.to_string())),
        3 => "[a-z0-9]{0,12}".prop_map(|s| Bytes::from(s.into_bytes())),
        1 => ("[a-c]{1,4}", 10usize..80).prop_map(|(s, n)| Bytes::from(s.repeat(n).into_bytes())),
        1 => vec(any::<u8>(), 0..200).prop_map(Bytes::from),
        1 => (any::<u8>(), 4000usize..9000).prop_map(|(b, n)| Bytes::from(vec![b; n])),
        1 => Just(Bytes::from_static(b"007")),
    ]
}

pub fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-1000i64..1000).prop_map(|v| v as f64),
        any::<f64>().prop_filter("no NaN", |x| !x.is_nan()),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(0.1),
    ]
}

pub fn value() -> impl Strategy<Value = RdbValue> {
    let small = 1usize..20;
    let large = 100usize..700;
    prop_oneof![
        element().prop_map(RdbValue::String),
        vec(element(), small.clone()).prop_map(RdbValue::List),
        vec(element(), large.clone()).prop_map(RdbValue::List),
        hash_set(element(), small.clone()).prop_map(|s| RdbValue::Set(s.into_iter().collect())),
        hash_set(
            any::<i64>().prop_map(|v| Bytes::from(v.to_string())),
            1usize..600
        )
        .prop_map(|s| RdbValue::Set(s.into_iter().collect())),
        hash_map(element(), element(), small.clone())
            .prop_map(|m| RdbValue::Hash(m.into_iter().collect())),
        hash_map(
            "[a-z]{1,8}".prop_map(|s| Bytes::from(s.into_bytes())),
            element(),
            large.clone()
        )
        .prop_map(|m| RdbValue::Hash(m.into_iter().collect())),
        hash_map(element(), score(), small).prop_map(|m| RdbValue::ZSet(m.into_iter().collect())),
        hash_map(
            "[a-z]{1,8}".prop_map(|s| Bytes::from(s.into_bytes())),
            score(),
            large
        )
        .prop_map(|m| RdbValue::ZSet(m.into_iter().collect())),
    ]
}
