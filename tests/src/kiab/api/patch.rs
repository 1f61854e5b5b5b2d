//! Patch formats: JSON patch (RFC 6902) and JSON merge patch (RFC 7386) through the json-patch
//! crate, and a strategic merge patch for the built-in kinds (hand-written: no crate models
//! Kubernetes' patchMergeKey metadata; we key lists by field name the way the Go structs do).

use super::error::ApiError;
use serde_json::{Map, Value};

pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let mut out = target.clone();
    json_patch::merge(&mut out, patch);
    out
}

pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, ApiError> {
    let p: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
    let mut out = target.clone();
    json_patch::patch(&mut out, &p).map_err(|e| {
        ApiError::new(
            422,
            "Invalid",
            format!("the server rejected our request due to an error in our request: {e}"),
        )
    })?;
    Ok(out)
}

/// The merge key of a list field, as the Kubernetes Go types declare `patchMergeKey`; None means
/// the list is replaced whole. `sample` is an element, to tell container ports from service ports.
pub fn merge_key(field: &str, sample: Option<&Value>) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "hostAliases" => Some(match field {
            "hostAliases" => "ip",
            _ => "name",
        }),
        "volumeMounts" | "volumeDevices" => Some("mountPath"),
        "ports" => {
            if sample.is_some_and(|s| s.get("containerPort").is_some()) {
                Some("containerPort")
            } else {
                Some("port")
            }
        }
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "containerStatuses" | "initContainerStatuses" => Some("name"),
        _ => None,
    }
}

/// Lists merged as sets of primitives.
pub fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

/// A strategic merge patch. Supports `$patch: replace|delete` on maps and list elements,
/// `$deleteFromPrimitiveList/<field>`, and ignores `$setElementOrder/` and `$retainKeys`.
pub fn strategic_merge(target: &Value, patch: &Value) -> Result<Value, ApiError> {
    let mut out = target.clone();
    smp_map(&mut out, patch)?;
    Ok(out)
}

fn smp_map(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let Some(pm) = patch.as_object() else {
        *target = patch.clone();
        return Ok(());
    };
    match pm.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut p = pm.clone();
            p.remove("$patch");
            *target = Value::Object(p);
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Object(Map::new());
            return Ok(());
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(tm) = target.as_object_mut() else {
        return Ok(());
    };
    for (k, v) in pm {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(cur)), Some(del)) = (tm.get_mut(field), v.as_array()) {
                cur.retain(|x| !del.contains(x));
            }
            continue;
        }
        match v {
            Value::Null => {
                tm.remove(k);
            }
            Value::Object(_) => {
                let slot = tm.entry(k.clone()).or_insert(Value::Null);
                smp_map(slot, v)?;
            }
            Value::Array(items) => {
                let key = merge_key(k, items.first());
                if let Some(key) = key {
                    let cur = tm.entry(k.clone()).or_insert_with(|| Value::Array(vec![]));
                    smp_list(cur, items, key)?;
                } else if is_set_list(k) {
                    let cur = tm.entry(k.clone()).or_insert_with(|| Value::Array(vec![]));
                    if let Some(a) = cur.as_array_mut() {
                        for it in items {
                            if !a.contains(it) {
                                a.push(it.clone());
                            }
                        }
                    }
                } else {
                    tm.insert(k.clone(), v.clone());
                }
            }
            _ => {
                tm.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(())
}

fn smp_list(target: &mut Value, items: &[Value], key: &str) -> Result<(), ApiError> {
    if !target.is_array() {
        *target = Value::Array(vec![]);
    }
    let Some(cur) = target.as_array_mut() else {
        return Ok(());
    };
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *cur = items
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .cloned()
            .collect();
        return Ok(());
    }
    for it in items {
        let Some(kv) = it.get(key) else {
            return Err(ApiError::bad_request(format!(
                "map: {it} does not contain declared merge key: {key}"
            )));
        };
        let pos = cur.iter().position(|c| c.get(key) == Some(kv));
        if it.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(p) = pos {
                cur.remove(p);
            }
            continue;
        }
        match pos {
            Some(p) => smp_map(&mut cur[p], it)?,
            None => {
                let mut fresh = Value::Object(Map::new());
                smp_map(&mut fresh, it)?;
                cur.push(fresh);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn smp_merges_containers_by_name_and_env_by_name() {
        let t = json!({"spec": {"containers": [
            {"name": "a", "image": "x", "env": [{"name": "A", "value": "1"}]},
            {"name": "b", "image": "y"}]}});
        let p = json!({"spec": {"containers": [
            {"name": "a", "env": [{"name": "B", "value": "2"}]},
            {"name": "b", "$patch": "delete"}]}});
        let out = strategic_merge(&t, &p).ok();
        assert_eq!(
            out,
            Some(json!({"spec": {"containers": [
                {"name": "a", "image": "x", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}))
        );
    }

    #[test]
    fn smp_replaces_plain_lists_and_deletes_null() {
        let t = json!({"spec": {"args": ["a", "b"], "x": 1}, "metadata": {"finalizers": ["f1"]}});
        let p = json!({"spec": {"args": ["c"], "x": null}, "metadata": {"finalizers": ["f2"]}});
        assert_eq!(
            strategic_merge(&t, &p).ok(),
            Some(json!({"spec": {"args": ["c"]}, "metadata": {"finalizers": ["f1", "f2"]}}))
        );
    }
}
