//! events.k8s.io/v1 Events are mirrored into core/v1 Events (same namespace and name), so that
//! `kubectl get events` and `kubectl describe` show what the operator's kube-rs Recorder
//! publishes. (A real server stores one Event and converts between the two versions; here the
//! mirror is one-way: writes to the core/v1 copy are not reflected back.)

use super::registry::GroupResource;
use super::store::Txn;
use serde_json::{json, Map, Value};

fn core_gr() -> GroupResource {
    GroupResource::new("", "events")
}

/// Converts an events.k8s.io/v1 Event to core/v1.
fn to_core(ev: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    let mut meta = ev.get("metadata").cloned().unwrap_or(json!({}));
    if let Some(m) = meta.as_object_mut() {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    out.insert("metadata".into(), meta);
    let copy = |out: &mut Map<String, Value>, from: &str, to: &str| {
        if let Some(v) = ev.get(from).filter(|v| !v.is_null()) {
            out.insert(to.into(), v.clone());
        }
    };
    copy(&mut out, "regarding", "involvedObject");
    copy(&mut out, "related", "related");
    copy(&mut out, "note", "message");
    copy(&mut out, "reason", "reason");
    copy(&mut out, "type", "type");
    copy(&mut out, "action", "action");
    copy(&mut out, "eventTime", "eventTime");
    copy(&mut out, "reportingController", "reportingComponent");
    copy(&mut out, "reportingInstance", "reportingInstance");
    copy(&mut out, "deprecatedSource", "source");
    copy(&mut out, "deprecatedFirstTimestamp", "firstTimestamp");
    copy(&mut out, "deprecatedLastTimestamp", "lastTimestamp");
    copy(&mut out, "deprecatedCount", "count");
    let created = ev.pointer("/metadata/creationTimestamp").cloned();
    let event_time = ev.get("eventTime").and_then(Value::as_str).map(|t| {
        // MicroTime -> Time: drop the fraction.
        let base = t.split('.').next().unwrap_or(t).trim_end_matches('Z');
        json!(format!("{base}Z"))
    });
    let first = event_time.clone().or(created);
    if !out.contains_key("firstTimestamp") {
        if let Some(f) = first.clone() {
            out.insert("firstTimestamp".into(), f);
        }
    }
    if let Some(series) = ev.get("series").filter(|s| s.is_object()) {
        if let Some(c) = series.get("count") {
            out.insert("count".into(), c.clone());
        }
        if let Some(t) = series.get("lastObservedTime").and_then(Value::as_str) {
            let base = t.split('.').next().unwrap_or(t).trim_end_matches('Z');
            out.insert("lastTimestamp".into(), json!(format!("{base}Z")));
        }
    }
    if !out.contains_key("lastTimestamp") {
        if let Some(f) = first {
            out.insert("lastTimestamp".into(), f);
        }
    }
    out.entry("count").or_insert(json!(1));
    if !out.contains_key("source") {
        if let Some(c) = ev.get("reportingController") {
            out.insert("source".into(), json!({"component": c}));
        }
    }
    Value::Object(out)
}

/// Writes (or refreshes) the core/v1 copy of an events.k8s.io/v1 Event.
pub(crate) fn mirror(t: &mut Txn<'_>, ev: &Value) {
    let core = to_core(ev);
    let ns = ev
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = ev
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let unchanged = t.get(&core_gr(), ns, name).is_some_and(|cur| {
        let mut c = cur.clone();
        if let Some(m) = c.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        c == core
    });
    if !unchanged {
        t.put(&core_gr(), core);
    }
}

/// Removes the core/v1 copy.
pub(crate) fn unmirror(t: &mut Txn<'_>, ev: &Value) {
    let ns = ev
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = ev
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    t.remove(&core_gr(), ns, name);
}
