//! Defaulting for built-in kinds: the handful of fields kubectl output and the kube-in-a-box
//! controllers expect the server to fill in (a real server defaults far more).

use super::registry::ResourceType;
use serde_json::{json, Value};

fn default_field(obj: &mut Value, key: &str, v: Value) {
    if let Some(m) = obj.as_object_mut() {
        m.entry(key.to_string()).or_insert(v);
    }
}

fn containers_mut(spec: &mut Value) -> Vec<&mut Value> {
    let mut out = vec![];
    let Some(m) = spec.as_object_mut() else {
        return out;
    };
    for (k, v) in m.iter_mut() {
        if k == "containers" || k == "initContainers" {
            if let Some(a) = v.as_array_mut() {
                out.extend(a.iter_mut());
            }
        }
    }
    out
}

/// Fills pod spec defaults (used for Pods and StatefulSet templates).
fn pod_spec(spec: &mut Value) {
    default_field(spec, "restartPolicy", json!("Always"));
    default_field(spec, "terminationGracePeriodSeconds", json!(30));
    default_field(spec, "dnsPolicy", json!("ClusterFirst"));
    default_field(spec, "schedulerName", json!("default-scheduler"));
    default_field(spec, "securityContext", json!({}));
    for c in containers_mut(spec) {
        default_field(c, "imagePullPolicy", json!("IfNotPresent"));
        default_field(c, "terminationMessagePath", json!("/dev/termination-log"));
        default_field(c, "terminationMessagePolicy", json!("File"));
        default_field(c, "resources", json!({}));
        if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports {
                default_field(p, "protocol", json!("TCP"));
            }
        }
    }
}

/// Base64 as JSON carries bytes (via k8s-openapi's ByteString, already a dependency).
pub fn base64(raw: &[u8]) -> Value {
    serde_json::to_value(k8s_openapi::ByteString(raw.to_vec())).unwrap_or(Value::Null)
}

/// Defaults `obj` of type `rt`; `old` is the stored object on updates.
pub fn apply(rt: &ResourceType, obj: &mut Value, old: Option<&Value>) {
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Namespace") => {
            if old.is_none() {
                obj["status"] = json!({"phase": "Active"});
            }
            if let Some(m) = obj.pointer_mut("/metadata").and_then(Value::as_object_mut) {
                let name = m.get("name").cloned().unwrap_or(Value::Null);
                let labels = m.entry("labels").or_insert_with(|| json!({}));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("kubernetes.io/metadata.name".into(), name);
                }
            }
        }
        ("", "Pod") => {
            if let Some(spec) = obj.get_mut("spec") {
                pod_spec(spec);
            }
            if old.is_none() {
                let status = obj
                    .as_object_mut()
                    .map(|m| m.entry("status").or_insert_with(|| json!({})));
                if let Some(s) = status {
                    default_field(s, "phase", json!("Pending"));
                    default_field(s, "qosClass", json!("BestEffort"));
                }
            }
        }
        ("apps", "StatefulSet") => {
            if let Some(spec) = obj.get_mut("spec") {
                default_field(spec, "replicas", json!(1));
                default_field(spec, "podManagementPolicy", json!("OrderedReady"));
                default_field(spec, "revisionHistoryLimit", json!(10));
                default_field(
                    spec,
                    "updateStrategy",
                    json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
                );
                default_field(
                    spec,
                    "persistentVolumeClaimRetentionPolicy",
                    json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
                );
                if let Some(ps) = spec.pointer_mut("/template/spec") {
                    pod_spec(ps);
                }
            }
        }
        ("", "Service") => {
            let old_ip = old.and_then(|o| o.pointer("/spec/clusterIP")).cloned();
            if let Some(spec) = obj.get_mut("spec") {
                default_field(spec, "type", json!("ClusterIP"));
                default_field(spec, "sessionAffinity", json!("None"));
                if let Some(ip) = old_ip {
                    default_field(spec, "clusterIP", ip);
                }
                if spec.get("clusterIP").is_none() {
                    // No service proxy exists here: a placeholder address from TEST-NET-1
                    // that nothing listens on; clients use pod IPs.
                    let n = rand::random::<u8>().max(1);
                    spec["clusterIP"] = json!(format!("192.0.2.{n}"));
                }
                let ip = spec["clusterIP"].clone();
                default_field(spec, "clusterIPs", json!([ip]));
                if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports {
                        default_field(p, "protocol", json!("TCP"));
                        if let Some(port) = p.get("port").cloned() {
                            default_field(p, "targetPort", port);
                        }
                    }
                }
            }
        }
        // No provisioner: a claim is bound at once to a volume that the kubelet makes as a
        // directory.
        ("", "PersistentVolumeClaim") if old.is_none() => {
            let cap = obj
                .pointer("/spec/resources/requests/storage")
                .cloned()
                .unwrap_or(json!("1Gi"));
            let modes = obj
                .pointer("/spec/accessModes")
                .cloned()
                .unwrap_or(json!(["ReadWriteOnce"]));
            obj["status"] =
                json!({"phase": "Bound", "capacity": {"storage": cap}, "accessModes": modes});
            if let Some(spec) = obj.get_mut("spec") {
                default_field(spec, "volumeMode", json!("Filesystem"));
                let vn = format!("pv-{}", super::meta::name_suffix());
                default_field(spec, "volumeName", json!(vn));
            }
        }
        // stringData is write-only: merged into data, as the real server does.
        ("", "Secret") => {
            let sd = obj.as_object_mut().and_then(|m| m.remove("stringData"));
            if let Some(Value::Object(sd)) = sd {
                let data = obj
                    .as_object_mut()
                    .map(|m| m.entry("data").or_insert_with(|| json!({})));
                if let Some(Value::Object(d)) = data {
                    for (k, v) in sd {
                        d.insert(k, base64(v.as_str().unwrap_or("").as_bytes()));
                    }
                }
            }
            default_field(obj, "type", json!("Opaque"));
        }
        _ => {}
    }
}
