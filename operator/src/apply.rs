//! Deciding whether a child needs a server-side apply at all (pure).
//!
//! Every reconcile builds every child; applying all of them each time is one write per
//! object per reconcile for nothing. An apply is skipped exactly when both hold:
//!
//! 1. the live object carries `tessera.rs/applied-hash` equal to the hash of what we would
//!    apply now — so the desired object did not change since our last apply (this also
//!    catches fields we stopped setting, which the live object still has); and
//! 2. every field we set has the same value on the live object (desired ⊆ live) — so nobody
//!    changed or removed one of our fields since (drift). Fields others added and defaults
//!    the API server filled in are not ours and do not count.
//!
//! A value the API server rewrites into another spelling (a Quantity "0.5" stored as
//! "500m") fails check 2, so that object is simply re-applied every time: never wrong, only
//! not skipped.

use kube::Resource;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Annotation with the hash of the object as the operator last applied it.
pub const ANNOTATION_APPLIED_HASH: &str = "tessera.rs/applied-hash";

/// Hash of the object we apply (before the annotation is added).
pub fn desired_hash<K: Serialize>(obj: &K) -> String {
    let bytes = serde_json::to_vec(obj).unwrap_or_default();
    Sha256::digest(&bytes)
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The object to apply: `obj` with its hash annotation.
pub fn stamped<K: Resource + Serialize + Clone>(obj: &K) -> K {
    let hash = desired_hash(obj);
    let mut out = obj.clone();
    out.meta_mut()
        .annotations
        .get_or_insert_with(Default::default)
        .insert(ANNOTATION_APPLIED_HASH.to_string(), hash);
    out
}

/// True when `live` already is what applying `stamped` would make it (see the module doc).
pub fn up_to_date<K: Resource + Serialize>(stamped: &K, live: Option<&K>) -> bool {
    let Some(live) = live else { return false };
    let hash = |k: &K| {
        k.meta()
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_APPLIED_HASH))
            .cloned()
    };
    if hash(stamped).is_none() || hash(stamped) != hash(live) {
        return false;
    }
    match (serde_json::to_value(stamped), serde_json::to_value(live)) {
        (Ok(want), Ok(have)) => is_subset(&want, &have),
        _ => false,
    }
}

/// `want` ⊆ `have`: every field of `want` is in `have` with the same value; lists must have
/// the same length with each element a subset (list order is part of what we set).
pub fn is_subset(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w.iter().all(|(k, wv)| match h.get(k) {
            Some(hv) => is_subset(wv, hv),
            None => wv.is_null(),
        }),
        (Value::Array(w), Value::Array(h)) => {
            w.len() == h.len() && w.iter().zip(h).all(|(a, b)| is_subset(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (w, h) => w == h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn cm(data: &str) -> ConfigMap {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "labels": {"a": "1"}},
            "data": {"node.conf": data},
        }))
        .expect("cm")
    }

    #[test]
    fn skip_only_when_hash_and_fields_match() {
        let want = stamped(&cm("x"));
        assert!(!up_to_date(&want, None), "absent: apply");
        // What the API server returns: our fields plus its own.
        let mut live = serde_json::to_value(&want).expect("json");
        live["metadata"]["uid"] = json!("u1");
        live["metadata"]["resourceVersion"] = json!("7");
        live["metadata"]["labels"]["added-by-someone"] = json!("y");
        let live: ConfigMap = serde_json::from_value(live).expect("live");
        assert!(up_to_date(&want, Some(&live)));

        // Desired changed: the hash differs.
        assert!(!up_to_date(&stamped(&cm("y")), Some(&live)));
        // Drift: someone edited a field we own (hash annotation untouched).
        let mut drifted = live.clone();
        drifted
            .data
            .as_mut()
            .expect("data")
            .insert("node.conf".into(), "edited".into());
        assert!(!up_to_date(&want, Some(&drifted)));
        // Drift: someone removed one of our labels.
        let mut unlabelled = live.clone();
        unlabelled
            .metadata
            .labels
            .as_mut()
            .expect("labels")
            .remove("a");
        assert!(!up_to_date(&want, Some(&unlabelled)));
        // Someone dropped our annotation: apply.
        let mut bare = live;
        bare.metadata.annotations = None;
        assert!(!up_to_date(&want, Some(&bare)));
    }

    #[test]
    fn subset_rules() {
        assert!(is_subset(&json!({"a": 1}), &json!({"a": 1.0, "b": 2})));
        assert!(!is_subset(&json!({"a": [1, 2]}), &json!({"a": [1, 2, 3]})));
        assert!(is_subset(
            &json!({"a": [{"x": 1}]}),
            &json!({"a": [{"x": 1, "y": 2}]})
        ));
        assert!(is_subset(&json!({"a": null}), &json!({})));
        assert!(!is_subset(&json!({"a": "1"}), &json!({"a": 1})));
    }
}
