//! Server-side apply and managedFields, simplified: each manager owns a set of field paths
//! (stored in the real `FieldsV1` format), an apply merges the applied config into the live
//! object, removes fields the same manager applied before and no longer does (unless someone
//! else owns them), and reports conflicts with other managers unless `force` is set. Lists are
//! keyed by the same merge keys as strategic merge patch for built-in kinds; in custom resources
//! every list is atomic (x-kubernetes-list-type markers are not read).

use super::error::ApiError;
use super::meta::{meta_mut, now_rfc3339};
use super::ops::Sub;
use super::patch::{is_set_list, merge_key};
use super::registry::ResourceType;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

type Path = Vec<String>;
type FieldSet = BTreeSet<Path>;

#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: String,
    fields: FieldSet,
}

fn sub_name(sub: Sub) -> &'static str {
    match sub {
        Sub::Main => "",
        Sub::Status => "status",
        Sub::Scale => "scale",
        Sub::Log => "log",
        Sub::Eviction => "eviction",
    }
}

/// Field paths set by `v` (an applied config or a whole object).
fn fieldset(v: &Value, rt: &ResourceType, sub: Sub) -> FieldSet {
    let mut out = FieldSet::new();
    let Some(m) = v.as_object() else { return out };
    for (k, val) in m {
        let include = match k.as_str() {
            "apiVersion" | "kind" => false,
            "status" => sub == Sub::Status || !rt.status,
            "metadata" => true,
            _ => sub != Sub::Status,
        };
        if !include {
            continue;
        }
        if k == "metadata" {
            if let Some(mm) = val.as_object() {
                for f in ["labels", "annotations", "finalizers", "ownerReferences"] {
                    if let Some(x) = mm.get(f) {
                        let mut p = vec!["f:metadata".to_string(), format!("f:{f}")];
                        collect(f, x, &mut p, &mut out, rt.custom);
                    }
                }
            }
            continue;
        }
        let mut p = vec![format!("f:{k}")];
        collect(k, val, &mut p, &mut out, rt.custom);
    }
    out
}

fn element_token(key: &str, el: &Value) -> String {
    let mut m = Map::new();
    m.insert(key.to_string(), el.get(key).cloned().unwrap_or(Value::Null));
    format!("k:{}", Value::Object(m))
}

fn collect(field: &str, v: &Value, path: &mut Path, out: &mut FieldSet, custom: bool) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                path.push(format!("f:{k}"));
                collect(k, x, path, out, custom);
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let key = if custom && field != "ownerReferences" {
                None
            } else {
                merge_key(field, items.first())
            };
            match key {
                Some(key) if items.iter().all(|i| i.get(key).is_some()) => {
                    for it in items {
                        path.push(element_token(key, it));
                        out.insert(path.clone());
                        if let Some(m) = it.as_object() {
                            for (k, x) in m {
                                path.push(format!("f:{k}"));
                                collect(k, x, path, out, custom);
                                path.pop();
                            }
                        }
                        path.pop();
                    }
                }
                _ if is_set_list(field) => {
                    for it in items {
                        path.push(format!("v:{it}"));
                        out.insert(path.clone());
                        path.pop();
                    }
                }
                _ => {
                    out.insert(path.clone());
                }
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

fn step<'a>(v: &'a Value, tok: &str) -> Option<&'a Value> {
    if let Some(f) = tok.strip_prefix("f:") {
        return v.get(f);
    }
    let arr = v.as_array()?;
    if let Some(k) = tok.strip_prefix("k:") {
        let keys: Map<String, Value> = serde_json::from_str(k).ok()?;
        return arr
            .iter()
            .find(|e| keys.iter().all(|(kk, kv)| e.get(kk) == Some(kv)));
    }
    if let Some(x) = tok.strip_prefix("v:") {
        let want: Value = serde_json::from_str(x).ok()?;
        return arr.iter().find(|e| **e == want);
    }
    None
}

fn get_at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, tok| step(cur, tok))
}

fn remove_at(v: &mut Value, path: &[String]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for tok in parent_path {
        let next = if let Some(f) = tok.strip_prefix("f:") {
            cur.get_mut(f)
        } else {
            let idx = step(cur, tok).and_then(|found| {
                cur.as_array()
                    .and_then(|a| a.iter().position(|e| std::ptr::eq(e, found)))
            });
            match idx {
                Some(i) => cur.get_mut(i),
                None => None,
            }
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(found) = step(cur, last) {
        let found = found as *const Value;
        if let Some(a) = cur.as_array_mut() {
            a.retain(|e| !std::ptr::eq(e, found));
        }
    }
}

fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for p in set {
        let mut cur = &mut root;
        for (i, tok) in p.iter().enumerate() {
            let child = cur
                .entry(tok.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(cm) = child else { break };
            cur = cm;
            if i == p.len() - 1 && !tok.starts_with("f:") {
                cur.insert(".".into(), json!({}));
            }
        }
    }
    Value::Object(root)
}

fn from_fields_v1(v: &Value, path: &mut Path, out: &mut FieldSet) {
    let Some(m) = v.as_object() else { return };
    for (k, child) in m {
        if k == "." {
            out.insert(path.clone());
            continue;
        }
        path.push(k.clone());
        match child.as_object() {
            Some(cm) if !cm.is_empty() => from_fields_v1(child, path, out),
            _ => {
                out.insert(path.clone());
            }
        }
        path.pop();
    }
}

fn read_entries(obj: &Value) -> Vec<Entry> {
    let Some(list) = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return vec![];
    };
    list.iter()
        .map(|e| {
            let s = |f: &str| e.get(f).and_then(Value::as_str).unwrap_or("").to_string();
            let mut fields = FieldSet::new();
            if let Some(f) = e.get("fieldsV1") {
                from_fields_v1(f, &mut vec![], &mut fields);
            }
            Entry {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: s("time"),
                subresource: s("subresource"),
                fields,
            }
        })
        .collect()
}

fn write_entries(obj: &mut Value, entries: Vec<Entry>) {
    let list: Vec<Value> = entries
        .into_iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
                "time": e.time, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    let m = meta_mut(obj);
    if list.is_empty() {
        m.remove("managedFields");
    } else {
        m.insert("managedFields".into(), Value::Array(list));
    }
}

fn entry_mut<'a>(
    entries: &'a mut Vec<Entry>,
    mgr: &str,
    op: &str,
    sub: Sub,
    rt: &ResourceType,
) -> &'a mut Entry {
    let sr = sub_name(sub);
    let pos = entries
        .iter()
        .position(|e| e.manager == mgr && e.operation == op && e.subresource == sr);
    let i = match pos {
        Some(i) => i,
        None => {
            entries.push(Entry {
                manager: mgr.into(),
                operation: op.into(),
                api_version: rt.api_version(),
                time: now_rfc3339(),
                subresource: sr.into(),
                fields: FieldSet::new(),
            });
            entries.len() - 1
        }
    };
    &mut entries[i]
}

fn render_path(p: &Path) -> String {
    p.iter()
        .map(|t| match t.strip_prefix("f:") {
            Some(f) => format!(".{f}"),
            None => format!("[{}]", &t[2..]),
        })
        .collect()
}

/// Merges an applied config into the live object (maps recursively, keyed lists by key).
fn merge_into(live: &mut Value, applied: &Value, custom: bool) {
    let (Some(lm), Some(am)) = (live.as_object_mut(), applied.as_object()) else {
        *live = applied.clone();
        return;
    };
    for (k, av) in am {
        match av {
            Value::Null => {
                lm.remove(k);
            }
            Value::Object(_) => match lm.get_mut(k) {
                Some(lv) if lv.is_object() => merge_into(lv, av, custom),
                _ => {
                    lm.insert(k.clone(), av.clone());
                }
            },
            Value::Array(items) => {
                let key = if custom && k != "ownerReferences" {
                    None
                } else {
                    merge_key(k, items.first())
                };
                let lv = lm.entry(k.clone()).or_insert_with(|| json!([]));
                match (key, lv.as_array_mut()) {
                    (Some(key), Some(la)) => {
                        for it in items {
                            match la.iter_mut().find(|e| e.get(key) == it.get(key)) {
                                Some(e) => merge_into(e, it, custom),
                                None => la.push(it.clone()),
                            }
                        }
                    }
                    (None, Some(la)) if is_set_list(k) => {
                        for it in items {
                            if !la.contains(it) {
                                la.push(it.clone());
                            }
                        }
                    }
                    _ => *lv = av.clone(),
                }
            }
            _ => {
                lm.insert(k.clone(), av.clone());
            }
        }
    }
}

/// Server-side apply of `applied` by `mgr` onto `live`; returns the new object with updated
/// managedFields, or 409 listing the conflicts.
pub fn apply(
    live: &Value,
    applied: &Value,
    mgr: &str,
    force: bool,
    rt: &ResourceType,
    sub: Sub,
) -> Result<Value, ApiError> {
    let mut entries = read_entries(live);
    let new_set = fieldset(applied, rt, sub);
    let sr = sub_name(sub);
    let mut conflicts = vec![];
    for e in entries.iter_mut() {
        if e.manager == mgr && e.operation == "Apply" && e.subresource == sr {
            continue;
        }
        let clash: Vec<Path> = e
            .fields
            .intersection(&new_set)
            .filter(|p| get_at(live, p) != get_at(applied, p))
            .cloned()
            .collect();
        for p in clash {
            if force {
                e.fields.remove(&p);
            } else {
                conflicts.push(format!(
                    "conflict with \"{}\"{}: {}",
                    e.manager,
                    if e.operation == "Update" {
                        format!(" using {}", e.api_version)
                    } else {
                        String::new()
                    },
                    render_path(&p)
                ));
            }
        }
    }
    if !conflicts.is_empty() {
        let n = conflicts.len();
        return Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "Apply failed with {n} conflict{}: {}",
                if n == 1 { "" } else { "s" },
                conflicts.join("\n")
            ),
        ));
    }
    let mut merged = live.clone();
    merge_into(&mut merged, applied, rt.custom);
    let prev = entry_mut(&mut entries, mgr, "Apply", sub, rt)
        .fields
        .clone();
    for p in prev.difference(&new_set) {
        let owned_elsewhere = entries.iter().any(|e| {
            !(e.manager == mgr && e.operation == "Apply" && e.subresource == sr)
                && e.fields.iter().any(|q| q.starts_with(p))
        });
        if !owned_elsewhere {
            remove_at(&mut merged, p);
        }
    }
    let e = entry_mut(&mut entries, mgr, "Apply", sub, rt);
    if e.fields != new_set {
        e.time = now_rfc3339();
    }
    e.fields = new_set;
    write_entries(&mut merged, entries);
    Ok(merged)
}

/// managedFields for an object created by an apply.
pub fn set_apply_owner(obj: &mut Value, mgr: &str, applied: &Value, rt: &ResourceType) {
    let mut entries = vec![];
    entry_mut(&mut entries, mgr, "Apply", Sub::Main, rt).fields = fieldset(applied, rt, Sub::Main);
    write_entries(obj, entries);
}

/// Records an Update-operation manager as owner of the fields this write changed.
pub fn record_update(old: Option<&Value>, new: &mut Value, mgr: &str, rt: &ResourceType, sub: Sub) {
    let mut entries = old.map(read_entries).unwrap_or_default();
    let now_set = fieldset(new, rt, sub);
    let changed: FieldSet = now_set
        .iter()
        .filter(|p| old.is_none_or(|o| get_at(o, p) != get_at(new, p)))
        .cloned()
        .collect();
    let removed: FieldSet = old
        .map(|o| fieldset(o, rt, sub))
        .unwrap_or_default()
        .difference(&now_set)
        .cloned()
        .collect();
    if changed.is_empty() && removed.is_empty() {
        write_entries(new, entries);
        return;
    }
    let sr = sub_name(sub);
    for e in entries.iter_mut() {
        if e.manager == mgr && e.operation == "Update" && e.subresource == sr {
            continue;
        }
        e.fields
            .retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    let e = entry_mut(&mut entries, mgr, "Update", sub, rt);
    e.fields.extend(changed);
    e.fields.retain(|p| !removed.contains(p));
    e.time = now_rfc3339();
    write_entries(new, entries);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kiab::api::registry::Registry;

    fn sts() -> ResourceType {
        Registry::new()
            .get("apps", "v1", "statefulsets")
            .cloned()
            .expect("statefulsets registered")
    }

    #[test]
    fn apply_removes_dropped_fields_and_detects_conflicts() {
        let rt = sts();
        let live = json!({"metadata": {"name": "x"}, "spec": {"replicas": 1}});
        let a1 = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"replicas": 3}});
        let o1 = apply(&live, &a1, "op", false, &rt, Sub::Main).expect("apply 1");
        assert_eq!(o1.pointer("/metadata/labels/b"), Some(&json!("2")));
        let a2 = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 3}});
        let o2 = apply(&o1, &a2, "op", false, &rt, Sub::Main).expect("apply 2");
        assert_eq!(o2.pointer("/metadata/labels/b"), None);
        // Another manager changes replicas with an update, then op re-applies without force.
        let mut o3 = o2.clone();
        o3["spec"]["replicas"] = json!(5);
        record_update(Some(&o2), &mut o3, "kubectl", &rt, Sub::Main);
        let err = apply(&o3, &a2, "op", false, &rt, Sub::Main).expect_err("conflict");
        assert!(
            err.message
                .contains("conflict with \"kubectl\" using apps/v1: .spec.replicas"),
            "{}",
            err.message
        );
        let o4 = apply(&o3, &a2, "op", true, &rt, Sub::Main).expect("forced");
        assert_eq!(o4.pointer("/spec/replicas"), Some(&json!(3)));
    }

    #[test]
    fn fields_v1_round_trip() {
        let rt = sts();
        let v =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let set = fieldset(&v, &rt, Sub::Main);
        let mut back = FieldSet::new();
        from_fields_v1(&to_fields_v1(&set), &mut vec![], &mut back);
        assert_eq!(set, back);
    }
}
