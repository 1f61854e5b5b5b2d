//! CustomResourceDefinitions: checking them, filling their status, registering the kinds they
//! define, and validating custom objects against the schema.

use super::error::{ApiError, FieldError, FieldErrorKind};
use super::meta::{meta_mut, meta_str, now_rfc3339};
use super::registry::{GroupResource, ResourceType, ScalePaths};
use super::schema;
use super::store::Txn;
use serde_json::{json, Value};

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

fn bad(name: &str, field: &str, detail: &str) -> ApiError {
    ApiError::invalid(
        "CustomResourceDefinition",
        "apiextensions.k8s.io",
        name,
        &[FieldError {
            field: field.into(),
            kind: FieldErrorKind::Required,
            value: None,
            detail: detail.into(),
        }],
    )
}

/// Checks a CRD and fills its status (names accepted, established).
pub fn prepare(t: &Txn<'_>, crd: &mut Value) -> Result<(), ApiError> {
    let name = meta_str(crd, "name").unwrap_or("").to_string();
    let group = s(crd, "/spec/group").to_string();
    let plural = s(crd, "/spec/names/plural").to_string();
    let kind = s(crd, "/spec/names/kind").to_string();
    if group.is_empty() {
        return Err(bad(&name, "spec.group", ""));
    }
    if plural.is_empty() {
        return Err(bad(&name, "spec.names.plural", ""));
    }
    if kind.is_empty() {
        return Err(bad(&name, "spec.names.kind", ""));
    }
    if name != format!("{plural}.{group}") {
        return Err(ApiError::invalid(
            "CustomResourceDefinition",
            "apiextensions.k8s.io",
            &name,
            &[FieldError {
                field: "metadata.name".into(),
                kind: FieldErrorKind::Invalid,
                value: Some(Value::String(name.clone())),
                detail: "must be spec.names.plural+\".\"+spec.group".to_string(),
            }],
        ));
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        return Err(bad(
            &name,
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
    }
    // A built-in resource with the same group/plural cannot be redefined.
    if let Some(v) = versions.first() {
        let ver = v.get("name").and_then(Value::as_str).unwrap_or("");
        if t.registry()
            .get(&group, ver, &plural)
            .is_some_and(|r| !r.custom)
        {
            return Err(bad(
                &name,
                "spec.group",
                "conflicts with a built-in resource",
            ));
        }
    }
    let mut stored: Vec<Value> = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    if stored.is_empty() {
        stored = versions
            .iter()
            .filter_map(|v| v.get("name").cloned())
            .take(1)
            .collect();
    }
    let now = now_rfc3339();
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let mut accepted = names.clone();
    if accepted.get("singular").is_none() {
        accepted["singular"] = json!(kind.to_ascii_lowercase());
    }
    if accepted.get("listKind").is_none() {
        accepted["listKind"] = json!(format!("{kind}List"));
    }
    crd["status"] = json!({
        "acceptedNames": accepted,
        "storedVersions": stored,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
    });
    if let Some(spec) = crd.get_mut("spec") {
        if spec.get("scope").is_none() {
            spec["scope"] = json!("Namespaced");
        }
    }
    let _ = meta_mut(crd);
    Ok(())
}

/// Registers (or re-registers) every served version of a CRD.
pub fn register(t: &mut Txn<'_>, crd: &Value) {
    let group = s(crd, "/spec/group").to_string();
    let plural = s(crd, "/spec/names/plural").to_string();
    let kind = s(crd, "/spec/names/kind").to_string();
    let singular = match s(crd, "/spec/names/singular") {
        "" => kind.to_ascii_lowercase(),
        x => x.to_string(),
    };
    let namespaced = s(crd, "/spec/scope") != "Cluster";
    let strs = |p: &str| -> Vec<String> {
        crd.pointer(p)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let short_names = strs("/spec/names/shortNames");
    let categories = strs("/spec/names/categories");
    t.registry_mut().remove_custom(&group, &plural);
    for v in crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let version = v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let sub = v.get("subresources");
        let scale = sub.and_then(|x| x.get("scale")).map(|sc| ScalePaths {
            spec_replicas: s(sc, "/specReplicasPath").to_string(),
            status_replicas: s(sc, "/statusReplicasPath").to_string(),
            label_selector: sc
                .get("labelSelectorPath")
                .and_then(Value::as_str)
                .map(String::from),
        });
        t.registry_mut().insert(ResourceType {
            group: group.clone(),
            version,
            kind: kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            namespaced,
            short_names: short_names.clone(),
            categories: categories.clone(),
            status: sub.and_then(|x| x.get("status")).is_some(),
            scale,
            schema: v.pointer("/schema/openAPIV3Schema").cloned(),
            printer_columns: v
                .get("additionalPrinterColumns")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            custom: true,
        });
    }
}

/// Unregisters a CRD's kinds and deletes all their objects (as the real CRD finalizer does).
pub fn unregister(t: &mut Txn<'_>, crd: &Value) {
    let group = s(crd, "/spec/group").to_string();
    let plural = s(crd, "/spec/names/plural").to_string();
    let gr = GroupResource::new(&group, &plural);
    for o in t.list(&gr, None) {
        let ns = meta_str(&o, "namespace").unwrap_or("").to_string();
        let name = meta_str(&o, "name").unwrap_or("").to_string();
        t.remove(&gr, &ns, &name);
    }
    t.registry_mut().remove_custom(&group, &plural);
}

/// Prunes, defaults and validates a custom object against its version's schema.
pub fn validate_custom(
    rt: &ResourceType,
    obj: &mut Value,
    old: Option<&Value>,
    name: &str,
    strict: bool,
) -> Result<(), ApiError> {
    let Some(sch) = &rt.schema else { return Ok(()) };
    let pruned = schema::prune(sch, obj, true);
    if strict && !pruned.is_empty() {
        let list: Vec<String> = pruned
            .iter()
            .map(|p| format!("unknown field \"{p}\""))
            .collect();
        return Err(ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
            rt.kind,
            rt.version,
            rt.kind,
            list.join(", ")
        )));
    }
    schema::default(sch, obj);
    let mut errs = vec![];
    schema::validate_with_old(sch, obj, old, "", &mut errs);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&rt.kind, &rt.group, name, &errs))
    }
}
