//! Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), which is what
//! `kubectl get` asks for: a few columns per built-in kind, additionalPrinterColumns for CRDs.

use super::http::Query;
use super::registry::ResourceType;
use serde_json::{json, Value};

/// Ages the way kubectl prints them (`45s`, `5m10s`, `3h`, `2d`).
fn age(ts: Option<&str>) -> String {
    let Some(t) = ts.and_then(|t| t.parse::<jiff::Timestamp>().ok()) else {
        return "<unknown>".into();
    };
    let s = (jiff::Timestamp::now().as_second() - t.as_second()).max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => format!("{m}m{}s", s % 60),
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ => format!("{d}d"),
    }
}

fn s(o: &Value, p: &str) -> String {
    match o.pointer(p) {
        Some(Value::String(x)) => x.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

fn n(o: &Value, p: &str) -> i64 {
    o.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

/// Evaluates the simple JSONPath forms printer columns use: `.a.b`, `.a[0].b`,
/// `.a[?(@.type=="Ready")].status`.
pub fn json_path(obj: &Value, path: &str) -> Option<Value> {
    let mut cur = obj.clone();
    let p = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut rest = p.trim_start_matches('.');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = r[end + 1..].trim_start_matches('.');
            if let Some(filter) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (k, v) = filter.split_once("==")?;
                let want = v.trim().trim_matches('"').trim_matches('\'');
                cur = cur
                    .as_array()?
                    .iter()
                    .find(|e| e.get(k.trim()).and_then(Value::as_str) == Some(want))?
                    .clone();
            } else {
                cur = cur.get(inner.parse::<usize>().ok()?)?.clone();
            }
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        cur = cur.get(&rest[..end])?.clone();
        rest = rest[end..].trim_start_matches('.');
    }
    Some(cur)
}

fn col(name: &str, ty: &str, priority: i64) -> Value {
    json!({"name": name, "type": ty, "format": if name == "Name" { "name" } else { "" },
           "description": "", "priority": priority})
}

/// Columns and cells for one kind.
fn columns(rt: &ResourceType) -> Vec<Value> {
    let mut c = vec![col("Name", "string", 0)];
    let extra: Vec<(&str, &str, i64)> = match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Pod") => vec![
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            ("Age", "string", 0),
            ("IP", "string", 1),
            ("Node", "string", 1),
        ],
        ("apps", "StatefulSet") => vec![
            ("Ready", "string", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
        ],
        ("", "Service") => vec![
            ("Type", "string", 0),
            ("Cluster-IP", "string", 0),
            ("External-IP", "string", 0),
            ("Port(s)", "string", 0),
            ("Age", "string", 0),
        ],
        ("", "PersistentVolumeClaim") => vec![
            ("Status", "string", 0),
            ("Volume", "string", 0),
            ("Capacity", "string", 0),
            ("Age", "string", 0),
        ],
        ("", "Namespace") => vec![("Status", "string", 0), ("Age", "string", 0)],
        ("", "ConfigMap") => vec![("Data", "integer", 0), ("Age", "string", 0)],
        ("", "Secret") => vec![
            ("Type", "string", 0),
            ("Data", "integer", 0),
            ("Age", "string", 0),
        ],
        ("", "Event") | ("events.k8s.io", "Event") => vec![
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Message", "string", 0),
        ],
        ("coordination.k8s.io", "Lease") => vec![("Holder", "string", 0), ("Age", "string", 0)],
        ("policy", "PodDisruptionBudget") => vec![
            ("Min Available", "string", 0),
            ("Max Unavailable", "string", 0),
            ("Allowed Disruptions", "integer", 0),
            ("Age", "string", 0),
        ],
        ("apiextensions.k8s.io", _) => vec![("Created At", "date", 0)],
        _ if rt.custom && !rt.printer_columns.is_empty() => {
            for pc in &rt.printer_columns {
                c.push(json!({
                    "name": pc.get("name").cloned().unwrap_or(json!("")),
                    "type": pc.get("type").cloned().unwrap_or(json!("string")),
                    "format": pc.get("format").cloned().unwrap_or(json!("")),
                    "description": pc.get("description").cloned().unwrap_or(json!("")),
                    "priority": pc.get("priority").cloned().unwrap_or(json!(0)),
                }));
            }
            return c;
        }
        _ => vec![("Age", "string", 0)],
    };
    c.extend(extra.into_iter().map(|(n, t, p)| col(n, t, p)));
    c
}

fn cells(rt: &ResourceType, o: &Value) -> Vec<Value> {
    let name = json!(s(o, "/metadata/name"));
    let created = o
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str);
    let a = json!(age(created));
    let mut out = vec![name];
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Pod") => {
            let total = o
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let sts = o
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array);
            let ready = sts.map_or(0, |a| {
                a.iter()
                    .filter(|c| c.get("ready") == Some(&json!(true)))
                    .count()
            });
            let restarts: i64 = sts.map_or(0, |a| a.iter().map(|c| n(c, "/restartCount")).sum());
            // As kubectl's pod printer: a waiting/terminated reason beats the phase.
            let mut status = s(o, "/status/phase");
            for c in sts.into_iter().flatten() {
                let reason = c
                    .pointer("/state/waiting/reason")
                    .or_else(|| c.pointer("/state/terminated/reason"))
                    .and_then(Value::as_str);
                if let Some(r) = reason.filter(|r| !r.is_empty()) {
                    status = r.to_string();
                }
            }
            if o.pointer("/metadata/deletionTimestamp").is_some() {
                status = "Terminating".into();
            }
            out.extend([
                json!(format!("{ready}/{total}")),
                json!(status),
                json!(restarts.to_string()),
                a,
                json!(s(o, "/status/podIP")),
                json!(s(o, "/spec/nodeName")),
            ]);
        }
        ("apps", "StatefulSet") => {
            let cs: Vec<&Value> = o
                .pointer("/spec/template/spec/containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .collect();
            let names: Vec<String> = cs.iter().map(|c| s(c, "/name")).collect();
            let images: Vec<String> = cs.iter().map(|c| s(c, "/image")).collect();
            out.extend([
                json!(format!(
                    "{}/{}",
                    n(o, "/status/readyReplicas"),
                    n(o, "/spec/replicas")
                )),
                a,
                json!(names.join(",")),
                json!(images.join(",")),
            ]);
        }
        ("", "Service") => {
            let ports: Vec<String> = o
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| format!("{}/{}", s(p, "/port"), s(p, "/protocol")))
                .collect();
            out.extend([
                json!(s(o, "/spec/type")),
                json!(s(o, "/spec/clusterIP")),
                json!("<none>"),
                json!(if ports.is_empty() {
                    "<none>".into()
                } else {
                    ports.join(",")
                }),
                a,
            ]);
        }
        ("", "PersistentVolumeClaim") => out.extend([
            json!(s(o, "/status/phase")),
            json!(s(o, "/spec/volumeName")),
            json!(s(o, "/status/capacity/storage")),
            a,
        ]),
        ("", "Namespace") => out.extend([json!(s(o, "/status/phase")), a]),
        ("", "ConfigMap") => out.extend([
            json!(o
                .get("data")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len())),
            a,
        ]),
        ("", "Secret") => out.extend([
            json!(s(o, "/type")),
            json!(o
                .get("data")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len())),
            a,
        ]),
        ("", "Event") | ("events.k8s.io", "Event") => {
            let last = [
                "/lastTimestamp",
                "/eventTime",
                "/deprecatedLastTimestamp",
                "/metadata/creationTimestamp",
            ]
            .iter()
            .find_map(|p| o.pointer(p).and_then(Value::as_str));
            let (ik, iname) = if o.get("regarding").is_some() {
                (s(o, "/regarding/kind"), s(o, "/regarding/name"))
            } else {
                (s(o, "/involvedObject/kind"), s(o, "/involvedObject/name"))
            };
            let msg = if o.get("note").is_some() {
                s(o, "/note")
            } else {
                s(o, "/message")
            };
            out = vec![
                json!(age(last)),
                json!(s(o, "/type")),
                json!(s(o, "/reason")),
                json!(format!("{}/{}", ik.to_ascii_lowercase(), iname)),
                json!(msg),
            ];
            out.insert(0, json!(s(o, "/metadata/name")));
        }
        ("coordination.k8s.io", "Lease") => out.extend([json!(s(o, "/spec/holderIdentity")), a]),
        ("policy", "PodDisruptionBudget") => {
            let or_none = |p: &str| {
                let v = s(o, p);
                if v.is_empty() {
                    "N/A".to_string()
                } else {
                    v
                }
            };
            out.extend([
                json!(or_none("/spec/minAvailable")),
                json!(or_none("/spec/maxUnavailable")),
                json!(n(o, "/status/disruptionsAllowed")),
                a,
            ]);
        }
        ("apiextensions.k8s.io", _) => out.push(json!(created.unwrap_or(""))),
        _ if rt.custom && !rt.printer_columns.is_empty() => {
            for pc in &rt.printer_columns {
                let p = pc.get("jsonPath").and_then(Value::as_str).unwrap_or("");
                let v = json_path(o, p).unwrap_or(Value::Null);
                let ty = pc.get("type").and_then(Value::as_str).unwrap_or("string");
                out.push(if ty == "date" {
                    json!(age(v.as_str()))
                } else {
                    v
                });
            }
        }
        _ => out.push(a),
    }
    out
}

/// A meta.k8s.io/v1 Table for `items`.
pub fn table(rt: &ResourceType, items: &[Value], rv: u64, q: &Query) -> Value {
    let full = q.get("includeObject") == Some("Object");
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let object = if full {
                o.clone()
            } else {
                json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                       "metadata": o.get("metadata").cloned().unwrap_or(json!({}))})
            };
            json!({"cells": cells(rt, o), "object": object})
        })
        .collect();
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv.to_string()},
        "columnDefinitions": columns(rt), "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kiab::api::registry::Registry;

    #[test]
    fn json_path_forms_printer_columns_use() {
        let o = json!({"status": {"conditions": [{"type": "A", "status": "x"}, {"type": "Ready", "status": "True"}]},
                       "spec": {"list": [{"n": 1}, {"n": 2}]}});
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(json!("True"))
        );
        assert_eq!(json_path(&o, ".spec.list[1].n"), Some(json!(2)));
        assert_eq!(json_path(&o, ".spec.missing"), None);
    }

    #[test]
    fn pod_status_column_prefers_container_reasons() {
        let reg = Registry::new();
        let rt = reg.get("", "v1", "pods").expect("pods");
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "c", "ready": false, "restartCount": 4,
                       "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let c = cells(rt, &pod);
        assert_eq!(
            &c[..4],
            &[
                json!("p"),
                json!("0/1"),
                json!("CrashLoopBackOff"),
                json!("4")
            ]
        );
    }
}
