//! Structural-schema handling for custom resources: pruning of unknown fields, defaulting and
//! validation against a CRD's openAPIV3Schema, with the real server's error wording.
//! Not modelled: `format`, `multipleOf` on floats beyond a simple check, `not`, CEL rules beyond
//! the shapes in `cel.rs`.

use super::error::{FieldError, FieldErrorKind};
use serde_json::{Map, Value};

fn child(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

fn preserves(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Drops fields the schema does not declare (unless preserve-unknown-fields), like the real
/// server's pruning. `top` skips apiVersion/kind/metadata, which are always kept.
/// Returns the dotted paths of the fields it removed.
pub fn prune(schema: &Value, v: &mut Value, top: bool) -> Vec<String> {
    let mut out = vec![];
    prune_at(schema, v, top, "", &mut out);
    out
}

fn prune_at(schema: &Value, v: &mut Value, top: bool, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let addl = schema.get("additionalProperties");
            let keep_all = preserves(schema);
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if top && (k == "apiVersion" || k == "kind" || k == "metadata") {
                    continue;
                }
                let sub = props.and_then(|p| p.get(&k)).or(match addl {
                    Some(a) if a.is_object() => Some(a),
                    _ => None,
                });
                match sub {
                    Some(s) => {
                        if let Some(x) = m.get_mut(&k) {
                            prune_at(s, x, false, &child(path, &k), out);
                        }
                    }
                    None if keep_all || addl.and_then(Value::as_bool) == Some(true) => {}
                    None => {
                        m.remove(&k);
                        out.push(child(path, &k));
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, it) in items.iter_mut().enumerate() {
                    prune_at(s, it, false, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// Applies `default`s for absent properties, recursively into present objects and arrays.
pub fn default(schema: &Value, v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, s) in props {
                    if !m.contains_key(k) {
                        if let Some(d) = s.get("default") {
                            m.insert(k.clone(), d.clone());
                        }
                    }
                    if let Some(x) = m.get_mut(k) {
                        default(s, x);
                    }
                }
            }
            if let Some(a) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                let declared = schema.get("properties").and_then(Value::as_object);
                for (k, x) in m.iter_mut() {
                    if declared.is_none_or(|d| !d.contains_key(k)) {
                        default(a, x);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for it in items {
                    default(s, it);
                }
            }
        }
        _ => {}
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn invalid(path: &str, v: &Value, detail: String) -> FieldError {
    FieldError {
        field: path.to_string(),
        kind: FieldErrorKind::Invalid,
        value: Some(v.clone()),
        detail,
    }
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// Renders a schema bound the way Go prints it (integers without a fraction).
fn render_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// Validates `v` against `schema`; `path` is the dotted field path used in messages.
pub fn validate(schema: &Value, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    validate_with_old(schema, v, None, path, errs)
}

/// `validate`, with the stored value for CEL transition rules (`oldSelf`) on updates.
pub fn validate_with_old(
    schema: &Value,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if v.is_null() {
        if schema.get("nullable").and_then(Value::as_bool) == Some(true) {
            return;
        }
        if let Some(t) = schema.get("type").and_then(Value::as_str) {
            errs.push(FieldError {
                field: path.into(),
                kind: FieldErrorKind::TypeInvalid,
                value: Some(Value::String("null".into())),
                detail: format!("{path} in body must be of type {t}: \"null\""),
            });
        }
        return;
    }
    let int_or_string = schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true);
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        let have = type_name(v);
        let ok = have == t
            || (t == "number" && have == "integer")
            || (int_or_string && (have == "integer" || have == "string"));
        if !ok {
            errs.push(FieldError {
                field: path.into(),
                kind: FieldErrorKind::TypeInvalid,
                value: Some(Value::String(have.into())),
                detail: format!("{path} in body must be of type {t}: \"{have}\""),
            });
            return;
        }
    } else if int_or_string && !matches!(type_name(v), "integer" | "string") {
        errs.push(invalid(
            path,
            v,
            format!("{path} in body must be of type integer or string"),
        ));
        return;
    }
    if let Some(en) = schema.get("enum").and_then(Value::as_array) {
        if !en.contains(v) {
            let sup: Vec<String> = en.iter().map(|e| e.to_string()).collect();
            errs.push(FieldError {
                field: path.into(),
                kind: FieldErrorKind::Unsupported,
                value: Some(v.clone()),
                detail: format!("supported values: {}", sup.join(", ")),
            });
        }
    }
    for sub in ["allOf"] {
        for s in schema
            .get(sub)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            validate_with_old(s, v, old, path, errs);
        }
    }
    for (key, need_one) in [("anyOf", false), ("oneOf", true)] {
        if let Some(alts) = schema.get(key).and_then(Value::as_array) {
            let passing = alts
                .iter()
                .filter(|s| {
                    let mut e = vec![];
                    validate(s, v, path, &mut e);
                    e.is_empty()
                })
                .count();
            if passing == 0 || (need_one && passing > 1) {
                errs.push(invalid(
                    path,
                    v,
                    format!(
                        "{path} in body must validate {} of the schemas in {key}",
                        if need_one {
                            "exactly one"
                        } else {
                            "at least one"
                        }
                    ),
                ));
            }
        }
    }
    match v {
        Value::Number(_) => number_checks(schema, v, path, errs),
        Value::String(s) => string_checks(schema, s, v, path, errs),
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
                if n < min {
                    errs.push(invalid(
                        path,
                        v,
                        format!("{path} in body should have at least {min} items"),
                    ));
                }
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
                if n > max {
                    errs.push(FieldError {
                        field: path.into(),
                        kind: FieldErrorKind::TypeInvalid,
                        value: Some(Value::from(n)),
                        detail: format!("must have at most {max} items"),
                    });
                }
            }
            if let Some(s) = schema.get("items") {
                for (i, it) in items.iter().enumerate() {
                    validate(s, it, &format!("{path}[{i}]"), errs);
                }
            }
        }
        Value::Object(m) => object_checks(schema, m, v, old, path, errs),
        _ => {}
    }
    super::cel::check(schema, v, old, path, errs);
}

fn number_checks(schema: &Value, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(x) = num(v) else { return };
    let excl = |k: &str| schema.get(k).and_then(Value::as_bool) == Some(true);
    if let Some(min) = schema.get("minimum").and_then(num) {
        if excl("exclusiveMinimum") && x <= min {
            errs.push(invalid(
                path,
                v,
                format!("{path} in body should be greater than {}", render_num(min)),
            ));
        } else if x < min {
            errs.push(invalid(
                path,
                v,
                format!(
                    "{path} in body should be greater than or equal to {}",
                    render_num(min)
                ),
            ));
        }
    }
    if let Some(max) = schema.get("maximum").and_then(num) {
        if excl("exclusiveMaximum") && x >= max {
            errs.push(invalid(
                path,
                v,
                format!("{path} in body should be less than {}", render_num(max)),
            ));
        } else if x > max {
            errs.push(invalid(
                path,
                v,
                format!(
                    "{path} in body should be less than or equal to {}",
                    render_num(max)
                ),
            ));
        }
    }
    if let Some(mo) = schema.get("multipleOf").and_then(num) {
        if mo != 0.0 && (x / mo).fract() != 0.0 {
            errs.push(invalid(
                path,
                v,
                format!("{path} in body should be a multiple of {}", render_num(mo)),
            ));
        }
    }
}

fn string_checks(schema: &Value, s: &str, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let n = s.chars().count() as u64;
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
        if n < min {
            errs.push(invalid(
                path,
                v,
                format!("{path} in body should be at least {min} chars long"),
            ));
        }
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        if n > max {
            errs.push(FieldError {
                field: path.into(),
                kind: FieldErrorKind::TypeInvalid,
                value: Some(v.clone()),
                detail: format!("may not be more than {max} bytes"),
            });
        }
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
        match regex::Regex::new(p) {
            Ok(re) if !re.is_match(s) => {
                errs.push(invalid(
                    path,
                    v,
                    format!("{path} in body should match '{p}'"),
                ));
            }
            _ => {}
        }
    }
}

fn object_checks(
    schema: &Value,
    m: &Map<String, Value>,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    for r in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !m.contains_key(r) {
            errs.push(FieldError {
                field: child(path, r),
                kind: FieldErrorKind::Required,
                value: None,
                detail: String::new(),
            });
        }
    }
    let n = m.len() as u64;
    if let Some(min) = schema.get("minProperties").and_then(Value::as_u64) {
        if n < min {
            errs.push(invalid(
                path,
                v,
                format!("{path} in body should have at least {min} properties"),
            ));
        }
    }
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64) {
        if n > max {
            errs.push(invalid(
                path,
                v,
                format!("{path} in body should have at most {max} properties"),
            ));
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    let addl = schema.get("additionalProperties").filter(|a| a.is_object());
    for (k, x) in m {
        if path.is_empty() && (k == "apiVersion" || k == "kind" || k == "metadata") {
            continue;
        }
        if let Some(s) = props.and_then(|p| p.get(k)).or(addl) {
            validate_with_old(s, x, old.and_then(|o| o.get(k)), &child(path, k), errs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["shards"],
        "properties": {
            "shards": {"type": "integer", "minimum": 1, "maximum": 100},
            "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
            "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }}}})
    }

    fn errors(v: &Value) -> Vec<String> {
        let mut e = vec![];
        validate(&schema(), v, "", &mut e);
        e.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn minimum_message_matches_real_server() {
        let e = errors(&json!({"spec": {"shards": 0}}));
        assert_eq!(e, vec!["spec.shards: Invalid value: 0: spec.shards in body should be greater than or equal to 1"]);
    }

    #[test]
    fn required_enum_type_pattern() {
        let e = errors(&json!({"spec": {"mode": "c", "name": "A1"}}));
        assert!(
            e.contains(&"spec.shards: Required value".to_string()),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|m| m.starts_with("spec.mode: Unsupported value: \"c\"")),
            "{e:?}"
        );
        assert!(
            e.iter().any(|m| m.contains("should match '^[a-z]+$'")),
            "{e:?}"
        );
        let e = errors(&json!({"spec": {"shards": "x"}}));
        assert_eq!(e, vec!["spec.shards: Invalid value: \"string\": spec.shards in body must be of type integer: \"string\""]);
    }

    #[test]
    fn prune_and_default() {
        let mut v = json!({"apiVersion": "x", "spec": {"shards": 1, "bogus": 1, "extra": {"k": 1}}, "junk": 2});
        prune(&schema(), &mut v, true);
        default(&schema(), &mut v);
        assert_eq!(
            v,
            json!({"apiVersion": "x", "spec": {"shards": 1, "mode": "a", "extra": {"k": 1}}})
        );
    }
}
