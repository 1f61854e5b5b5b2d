//! Decoding of the few Kubernetes protobuf request bodies kubectl's imperative commands send
//! (`kubectl create namespace|configmap|secret|serviceaccount` post
//! `application/vnd.kubernetes.protobuf`). Hand-rolled wire reading: the generated k8s protobuf
//! types would be a large dependency for four small messages. Other kinds answer 415.

use super::error::ApiError;
use serde_json::{json, Map, Value};

const MAGIC: &[u8] = b"k8s\0";

/// One protobuf field: number and payload.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*i)?;
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn fields(b: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i)?;
        let (num, wire) = (key >> 3, key & 7);
        match wire {
            0 => out.push((num, Field::Varint(varint(b, &mut i)?))),
            2 => {
                let len = usize::try_from(varint(b, &mut i)?).ok()?;
                let end = i.checked_add(len).filter(|e| *e <= b.len())?;
                out.push((num, Field::Bytes(&b[i..end])));
                i = end;
            }
            1 => i += 8,
            5 => i += 4,
            _ => return None,
        }
    }
    Some(out)
}

fn string(f: &Field<'_>) -> Option<String> {
    match f {
        Field::Bytes(b) => String::from_utf8(b.to_vec()).ok(),
        Field::Varint(_) => None,
    }
}

/// A map<string, string|bytes> entry; bytes values become base64 (as JSON carries them).
fn map_entry(f: &Field<'_>, bytes_value: bool) -> Option<(String, Value)> {
    let Field::Bytes(b) = f else { return None };
    let mut k = String::new();
    let mut v = Value::String(String::new());
    for (n, x) in fields(b)? {
        match n {
            1 => k = string(&x)?,
            2 if bytes_value => {
                let Field::Bytes(raw) = x else { return None };
                v = super::defaults::base64(raw);
            }
            2 => v = json!(string(&x)?),
            _ => {}
        }
    }
    Some((k, v))
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    let mut finalizers = vec![];
    for (n, f) in fields(b)? {
        match n {
            1 => {
                m.insert("name".into(), json!(string(&f)?));
            }
            2 => {
                m.insert("generateName".into(), json!(string(&f)?));
            }
            3 => {
                m.insert("namespace".into(), json!(string(&f)?));
            }
            11 => {
                let (k, v) = map_entry(&f, false)?;
                labels.insert(k, v);
            }
            12 => {
                let (k, v) = map_entry(&f, false)?;
                annotations.insert(k, v);
            }
            14 => finalizers.push(json!(string(&f)?)),
            _ => {}
        }
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Some(Value::Object(m))
}

fn unsupported(kind: &str) -> ApiError {
    ApiError::unsupported_media(format!(
        "kube-in-a-box decodes protobuf bodies only for Namespace, ConfigMap, Secret and \
         ServiceAccount (got {kind}); send JSON, e.g. `kubectl create -f manifest.yaml`"
    ))
}

/// Decodes a `application/vnd.kubernetes.protobuf` body into the JSON object it encodes.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let bad = || ApiError::bad_request("malformed protobuf body");
    let rest = body.strip_prefix(MAGIC).ok_or_else(bad)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(rest).ok_or_else(bad)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (tn, tf) in fields(tm).ok_or_else(bad)? {
                    match tn {
                        1 => api_version = string(&tf).ok_or_else(bad)?,
                        2 => kind = string(&tf).ok_or_else(bad)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(r)) => raw = r,
            _ => {}
        }
    }
    if api_version != "v1" {
        return Err(unsupported(&format!("{api_version} {kind}")));
    }
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    let mut data = Map::new();
    let mut string_data = Map::new();
    for (n, f) in fields(raw).ok_or_else(bad)? {
        match (kind.as_str(), n) {
            (_, 1) => {
                let Field::Bytes(b) = f else {
                    return Err(bad());
                };
                obj.insert("metadata".into(), object_meta(b).ok_or_else(bad)?);
            }
            ("ConfigMap", 2) => {
                let (k, v) = map_entry(&f, false).ok_or_else(bad)?;
                data.insert(k, v);
            }
            ("ConfigMap", 4) | ("Secret", 5) => {
                if let Field::Varint(v) = f {
                    obj.insert("immutable".into(), json!(v != 0));
                }
            }
            ("Secret", 2) => {
                let (k, v) = map_entry(&f, true).ok_or_else(bad)?;
                data.insert(k, v);
            }
            ("Secret", 3) => {
                obj.insert("type".into(), json!(string(&f).ok_or_else(bad)?));
            }
            ("Secret", 4) => {
                let (k, v) = map_entry(&f, false).ok_or_else(bad)?;
                string_data.insert(k, v);
            }
            ("Namespace" | "ServiceAccount", _) => {}
            ("ConfigMap" | "Secret", _) => {}
            _ => return Err(unsupported(&kind)),
        }
    }
    if !matches!(
        kind.as_str(),
        "Namespace" | "ConfigMap" | "Secret" | "ServiceAccount"
    ) {
        return Err(unsupported(&kind));
    }
    if !data.is_empty() {
        obj.insert("data".into(), Value::Object(data));
    }
    if !string_data.is_empty() {
        obj.insert("stringData".into(), Value::Object(string_data));
    }
    Ok(Value::Object(obj))
}
