//! Small metadata helpers: timestamps, uids, name validation, JSON path access.

use super::error::{FieldError, FieldErrorKind};
use rand::Rng;
use serde_json::{Map, Value};

/// RFC 3339 with second precision, as `metav1.Time` serialises.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A random version-4 UUID string (uids need only be unique, not cryptographic).
pub fn new_uid() -> String {
    let b: [u8; 16] = rand::rng().random();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        u16::from_be_bytes([b[4], b[5]]),
        u16::from_be_bytes([b[6], b[7]]) & 0x0fff,
        (u16::from_be_bytes([b[8], b[9]]) & 0x3fff) | 0x8000,
        u64::from_be_bytes([0, 0, b[10], b[11], b[12], b[13], b[14], b[15]])
    )
}

/// The 5-character suffix `generateName` gets.
pub fn name_suffix() -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut r = rand::rng();
    (0..5)
        .map(|_| ALPHA[r.random_range(0..ALPHA.len())] as char)
        .collect()
}

/// Checks an object name is a DNS-1123 subdomain, as most kinds require.
pub fn validate_name(name: &str) -> Option<FieldError> {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if name.is_empty() {
        return Some(FieldError {
            field: "metadata.name".into(),
            kind: FieldErrorKind::Required,
            value: None,
            detail: "name or generateName is required".into(),
        });
    }
    if name.len() > 253
        || !name.chars().all(ok_char)
        || !alnum(name.chars().next())
        || !alnum(name.chars().last())
    {
        return Some(FieldError {
            field: "metadata.name".into(),
            kind: FieldErrorKind::Invalid,
            value: Some(Value::String(name.into())),
            detail: "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                     characters, '-' or '.', and must start and end with an alphanumeric character"
                .into(),
        });
    }
    None
}

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// `metadata`, created if missing (callers have already checked `obj` is an object).
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = Value::Object(Map::new());
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj)?.get(field)?.as_str()
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub fn set_finalizers(obj: &mut Value, f: Vec<String>) {
    let m = meta_mut(obj);
    if f.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert("finalizers".into(), Value::from(f));
    }
}

/// Reads a `.a.b.c` path (the form CRD scale subresources use).
pub fn get_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    for seg in path.trim_start_matches('.').split('.') {
        cur = cur.get(seg)?;
    }
    Some(cur)
}

/// Writes a `.a.b.c` path, creating intermediate objects.
pub fn set_path(obj: &mut Value, path: &str, v: Value) {
    let segs: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let mut cur = obj;
    for (i, seg) in segs.iter().enumerate() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(m) = cur else { return };
        if i == segs.len() - 1 {
            m.insert(seg.to_string(), v);
            return;
        }
        cur = m
            .entry(seg.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}
