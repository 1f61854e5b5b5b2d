//! Write semantics on top of the store: create, update, patch, delete, with the rules kube-rs
//! and kubectl rely on (resourceVersion preconditions, generation, status/scale subresources,
//! finalizers, graceful pod deletion, no-op writes that change nothing).

use super::error::{ApiError, FieldError, FieldErrorKind};
use super::meta::{self, meta_mut, meta_str, new_uid, now_rfc3339};
use super::registry::{GroupResource, ResourceType};
use super::store::{Store, Txn};
use super::{crd, defaults, events, patch, ssa};
use serde_json::{json, Map, Value};
use tracing::debug;

/// Which endpoint of an object a request addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    Main,
    Status,
    Scale,
    /// `pods/{name}/log` (read only).
    Log,
    /// `pods/{name}/eviction` (create only).
    Eviction,
}

/// Options common to writes (`?dryRun=All&fieldManager=x&force=true`).
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
    /// `fieldValidation=Strict`: unknown fields of custom resources are an error, not pruned.
    pub strict: bool,
    /// Set by server-side apply, which records its own managedFields entry.
    pub(crate) applying: bool,
}

impl WriteOpts {
    fn manager(&self, default: &str) -> String {
        self.field_manager
            .clone()
            .unwrap_or_else(|| default.to_string())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

/// DeleteOptions, from the query and/or the request body.
#[derive(Debug, Clone)]
pub struct DeleteOpts {
    pub propagation: Propagation,
    pub grace_seconds: Option<i64>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub dry_run: bool,
}

impl Default for DeleteOpts {
    fn default() -> Self {
        DeleteOpts {
            propagation: Propagation::Background,
            grace_seconds: None,
            uid: None,
            resource_version: None,
            dry_run: false,
        }
    }
}

pub fn gr_of(rt: &ResourceType) -> GroupResource {
    GroupResource::new(&rt.group, &rt.plural)
}

fn has_generation(rt: &ResourceType) -> bool {
    rt.custom || rt.status
}

/// Everything but metadata and status: a change here bumps metadata.generation.
fn spec_part(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
        m.remove("apiVersion");
        m.remove("kind");
    }
    o
}

/// The object without fields that every write changes, to detect no-op writes.
fn comparable(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    o
}

/// Checks body identity fields against the URL.
fn check_body(rt: &ResourceType, ns: &str, body: &Value) -> Result<(), ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    if let Some(k) = body.get("kind").and_then(Value::as_str) {
        if k != rt.kind {
            return Err(ApiError::bad_request(format!(
                "the kind of the provided object ({k}) does not match the endpoint ({})",
                rt.kind
            )));
        }
    }
    if let Some(b) = meta_str(body, "namespace") {
        if rt.namespaced && !b.is_empty() && b != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    Ok(())
}

fn ns_gr() -> GroupResource {
    GroupResource::new("", "namespaces")
}

/// Creates an object (POST to a collection).
pub fn create(
    store: &Store,
    rt: &ResourceType,
    ns: &str,
    body: Value,
    opts: &WriteOpts,
) -> Result<Value, ApiError> {
    store.transact(|t| create_in(t, rt, ns, body, opts, None))
}

/// Create inside a transaction; `applied_by` set when server-side apply creates the object.
pub(crate) fn create_in(
    t: &mut Txn<'_>,
    rt: &ResourceType,
    ns: &str,
    mut body: Value,
    opts: &WriteOpts,
    applied_by: Option<(&str, &Value)>,
) -> Result<Value, ApiError> {
    check_body(rt, ns, &body)?;
    let gr = gr_of(rt);
    if rt.namespaced {
        let nsobj = t
            .get(&ns_gr(), "", ns)
            .ok_or_else(|| ApiError::not_found("namespaces", "", ns))?;
        if meta_str(nsobj, "deletionTimestamp").is_some() {
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!(
                    "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    super::error::qualified(&rt.plural, &rt.group),
                    meta_str(&body, "name").unwrap_or("")
                ),
            ));
        }
    }
    let mut name = meta_str(&body, "name").unwrap_or("").to_string();
    if name.is_empty() {
        if let Some(g) = meta_str(&body, "generateName") {
            name = format!("{g}{}", meta::name_suffix());
        }
    }
    if let Some(e) = meta::validate_name(&name) {
        return Err(ApiError::invalid(&rt.kind, &rt.group, &name, &[e]));
    }
    if t.get(&gr, ns, &name).is_some() {
        return Err(ApiError::already_exists(&rt.plural, &rt.group, &name));
    }
    body["apiVersion"] = Value::String(rt.api_version());
    body["kind"] = Value::String(rt.kind.clone());
    let m = meta_mut(&mut body);
    m.insert("name".into(), Value::String(name.clone()));
    if rt.namespaced {
        m.insert("namespace".into(), Value::String(ns.to_string()));
    } else {
        m.remove("namespace");
    }
    m.insert("uid".into(), Value::String(new_uid()));
    m.insert("creationTimestamp".into(), Value::String(now_rfc3339()));
    for f in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
        "selfLink",
    ] {
        m.remove(f);
    }
    if has_generation(rt) {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
    if rt.status && rt.kind != "Pod" {
        if let Some(o) = body.as_object_mut() {
            o.remove("status");
        }
    }
    defaults::apply(rt, &mut body, None);
    if rt.custom {
        crd::validate_custom(rt, &mut body, None, &name, opts.strict)?;
    }
    if rt.kind == "CustomResourceDefinition" {
        crd::prepare(t, &mut body)?;
    }
    match applied_by {
        Some((mgr, applied)) => ssa::set_apply_owner(&mut body, mgr, applied, rt),
        None => ssa::record_update(None, &mut body, &opts.manager("unknown"), rt, Sub::Main),
    }
    if opts.dry_run {
        return Ok(body);
    }
    if rt.kind == "CustomResourceDefinition" {
        crd::register(t, &body);
    }
    debug!(kind = %rt.kind, %ns, %name, "create");
    let stored = t.put(&gr, body);
    after_write(t, rt, &stored);
    Ok(stored)
}

/// Builds the autoscaling/v1 Scale view of an object.
pub fn scale_of(rt: &ResourceType, obj: &Value) -> Result<Value, ApiError> {
    let sp = rt
        .scale
        .as_ref()
        .ok_or_else(|| ApiError::not_found(&format!("{}/scale", rt.plural), &rt.group, ""))?;
    let m = meta::meta(obj).cloned().unwrap_or_default();
    let mut scale_meta = Map::new();
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = m.get(f) {
            scale_meta.insert(f.into(), v.clone());
        }
    }
    let spec = meta::get_path(obj, &sp.spec_replicas)
        .cloned()
        .unwrap_or(json!(0));
    let status = meta::get_path(obj, &sp.status_replicas)
        .cloned()
        .unwrap_or(json!(0));
    let mut st = json!({"replicas": status});
    if let Some(sel) = sp
        .label_selector
        .as_ref()
        .and_then(|p| meta::get_path(obj, p))
    {
        st["selector"] = sel.clone();
    } else if let Some(ml) = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
    {
        let s: Vec<String> = ml
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect();
        st["selector"] = Value::String(s.join(","));
    }
    Ok(json!({
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": scale_meta, "spec": {"replicas": spec}, "status": st,
    }))
}

/// Applies a Scale object's spec.replicas to the object it scales.
fn unscale(rt: &ResourceType, old: &Value, scale: &Value) -> Result<Value, ApiError> {
    let sp = rt
        .scale
        .as_ref()
        .ok_or_else(|| ApiError::bad_request("no scale subresource"))?;
    let replicas = scale
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .ok_or_else(|| {
            ApiError::invalid(
                "Scale",
                "autoscaling",
                meta_str(old, "name").unwrap_or(""),
                &[FieldError {
                    field: "spec.replicas".into(),
                    kind: FieldErrorKind::Required,
                    value: None,
                    detail: String::new(),
                }],
            )
        })?;
    if replicas < 0 {
        return Err(ApiError::invalid(
            "Scale",
            "autoscaling",
            meta_str(old, "name").unwrap_or(""),
            &[FieldError {
                field: "spec.replicas".into(),
                kind: FieldErrorKind::Invalid,
                value: Some(json!(replicas)),
                detail: "must be greater than or equal to 0".into(),
            }],
        ));
    }
    let mut new = old.clone();
    meta::set_path(&mut new, &sp.spec_replicas, json!(replicas));
    Ok(new)
}

fn check_rv(rt: &ResourceType, old: &Value, body: &Value) -> Result<(), ApiError> {
    match meta_str(body, "resourceVersion") {
        Some(rv) if !rv.is_empty() && Some(rv) != meta_str(old, "resourceVersion") => Err(
            ApiError::conflict(&rt.plural, &rt.group, meta_str(old, "name").unwrap_or("")),
        ),
        _ => Ok(()),
    }
}

/// Replaces an object (PUT).
pub fn update(
    store: &Store,
    rt: &ResourceType,
    ns: &str,
    name: &str,
    sub: Sub,
    body: Value,
    opts: &WriteOpts,
) -> Result<Value, ApiError> {
    store.transact(|t| {
        let old = t
            .get(&gr_of(rt), ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.plural, &rt.group, name))?;
        if sub != Sub::Scale {
            check_body(rt, ns, &body)?;
        }
        check_rv(rt, &old, &body)?;
        if let Some(n) = meta_str(&body, "name") {
            if n != name {
                return Err(ApiError::bad_request(
                    "the name of the object does not match the name on the URL",
                ));
            }
        }
        let new = match sub {
            Sub::Scale => unscale(rt, &old, &body)?,
            _ => body,
        };
        finish_update(t, rt, &old, new, sub, opts)
    })
}

/// The patch formats the server accepts, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

/// Patches an object (PATCH); server-side apply creates it when missing.
#[allow(clippy::too_many_arguments)]
pub fn patch_object(
    store: &Store,
    rt: &ResourceType,
    ns: &str,
    name: &str,
    sub: Sub,
    ptype: PatchType,
    body: Value,
    opts: &WriteOpts,
) -> Result<Value, ApiError> {
    store.transact(|t| {
        let old = t.get(&gr_of(rt), ns, name).cloned();
        if ptype == PatchType::Apply {
            let mgr = opts.field_manager.clone().ok_or_else(|| {
                ApiError::bad_request("PATCH, application/apply-patch+yaml requires fieldManager to be set")
            })?;
            if sub == Sub::Main {
                check_body(rt, ns, &body)?;
            }
            return match old {
                None if sub == Sub::Main => {
                    let mut b = body.clone();
                    meta_mut(&mut b).insert("name".into(), Value::String(name.to_string()));
                    create_in(t, rt, ns, b, opts, Some((&mgr, &body)))
                }
                None => Err(ApiError::not_found(&rt.plural, &rt.group, name)),
                Some(old) if sub == Sub::Scale => {
                    let merged = patch::merge_patch(&scale_of(rt, &old)?, &body);
                    let new = unscale(rt, &old, &merged)?;
                    let o = WriteOpts { field_manager: Some(mgr), ..opts.clone() };
                    finish_update(t, rt, &old, new, sub, &o)
                }
                Some(old) => {
                    let merged = ssa::apply(&old, &body, &mgr, opts.force, rt, sub)?;
                    let o = WriteOpts { field_manager: Some(mgr), applying: true, ..opts.clone() };
                    finish_update(t, rt, &old, merged, sub, &o)
                }
            };
        }
        let old = old.ok_or_else(|| ApiError::not_found(&rt.plural, &rt.group, name))?;
        let target = if sub == Sub::Scale { scale_of(rt, &old)? } else { old.clone() };
        let patched = match ptype {
            PatchType::Json => patch::json_patch(&target, &body)?,
            PatchType::Merge => patch::merge_patch(&target, &body),
            PatchType::Strategic => {
                if rt.custom {
                    return Err(ApiError::unsupported_media(
                        "strategic merge patch is not supported for custom resources; use merge or json patch",
                    ));
                }
                patch::strategic_merge(&target, &body)?
            }
            PatchType::Apply => unreachable!("handled above"),
        };
        check_rv(rt, &old, &patched)?;
        let new = if sub == Sub::Scale { unscale(rt, &old, &patched)? } else { patched };
        finish_update(t, rt, &old, new, sub, opts)
    })
}

fn is_graceful_pod(rt: &ResourceType, obj: &Value) -> bool {
    rt.group.is_empty()
        && rt.kind == "Pod"
        && obj
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty())
        && !matches!(
            obj.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded") | Some("Failed")
        )
}

/// The common tail of every update: carry system metadata, respect subresources, default,
/// validate, bump generation, skip no-ops, finish deletions whose finalizers are gone.
pub(crate) fn finish_update(
    t: &mut Txn<'_>,
    rt: &ResourceType,
    old: &Value,
    mut new: Value,
    sub: Sub,
    opts: &WriteOpts,
) -> Result<Value, ApiError> {
    let name = meta_str(old, "name").unwrap_or("").to_string();
    let ns = meta_str(old, "namespace").unwrap_or("").to_string();
    if !new.is_object() {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    }
    new["apiVersion"] = Value::String(rt.api_version());
    new["kind"] = Value::String(rt.kind.clone());
    match sub {
        Sub::Status => {
            // Only status changes through /status.
            let status = new.get("status").cloned();
            let mut keep = old.clone();
            match status {
                Some(s) => keep["status"] = s,
                None => {
                    if let Some(o) = keep.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
            if let Some(mf) = new.pointer("/metadata/managedFields").cloned() {
                meta_mut(&mut keep).insert("managedFields".into(), mf);
            }
            new = keep;
        }
        Sub::Main | Sub::Scale if rt.status => match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        },
        _ => {}
    }
    let old_meta = meta::meta(old).cloned().unwrap_or_default();
    let m = meta_mut(&mut new);
    if m.get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| n != name)
    {
        return Err(ApiError::bad_request("metadata.name is immutable"));
    }
    for f in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "generateName",
    ] {
        match old_meta.get(f) {
            Some(v) => m.insert(f.into(), v.clone()),
            None => m.remove(f),
        };
    }
    if old_meta.contains_key("deletionTimestamp") {
        let before: Vec<String> = meta::finalizers(old);
        let added: Vec<String> = meta::finalizers(&new)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            return Err(ApiError::invalid(&rt.kind, &rt.group, &name, &[FieldError {
                field: "metadata.finalizers".into(),
                kind: FieldErrorKind::Forbidden,
                value: None,
                detail: format!("no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"),
            }]));
        }
    }
    defaults::apply(rt, &mut new, Some(old));
    immutable_spec(rt, old, &new, &name)?;
    if rt.custom {
        crd::validate_custom(rt, &mut new, Some(old), &name, opts.strict)?;
    }
    if rt.kind == "CustomResourceDefinition" {
        crd::prepare(t, &mut new)?;
    }
    if has_generation(rt) && spec_part(&new) != spec_part(old) {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta_mut(&mut new).insert("generation".into(), json!(g + 1));
    }
    if !opts.applying {
        ssa::record_update(Some(old), &mut new, &opts.manager("unknown"), rt, sub);
    }
    if comparable(&new) == comparable(old) {
        return Ok(old.clone());
    }
    if opts.dry_run {
        return Ok(new);
    }
    let gr = gr_of(rt);
    if old_meta.contains_key("deletionTimestamp")
        && meta::finalizers(&new).is_empty()
        && !is_graceful_pod(rt, &new)
        && rt.kind != "Namespace"
    {
        let _ = t.put(&gr, new);
        return t
            .remove(&gr, &ns, &name)
            .ok_or_else(|| ApiError::internal("object vanished"));
    }
    if rt.kind == "CustomResourceDefinition" {
        crd::register(t, &new);
    }
    let stored = t.put(&gr, new);
    after_write(t, rt, &stored);
    Ok(stored)
}

/// The real server's update validation of the spec fields that cannot change: a StatefulSet's
/// spec but for replicas, ordinals, template, updateStrategy,
/// persistentVolumeClaimRetentionPolicy and minReadySeconds; a PersistentVolumeClaim's spec but
/// for resources.requests, whose storage cannot go below the current one.
fn immutable_spec(rt: &ResourceType, old: &Value, new: &Value, name: &str) -> Result<(), ApiError> {
    let strip = |v: &Value, keep: &[&str]| -> Value {
        let mut spec = v.get("spec").cloned().unwrap_or(Value::Null);
        if let Some(o) = spec.as_object_mut() {
            for k in keep {
                o.remove(*k);
            }
        }
        spec
    };
    let forbidden = |field: &str, detail: &str| {
        Err(ApiError::invalid(
            &rt.kind,
            &rt.group,
            name,
            &[FieldError {
                field: field.into(),
                kind: FieldErrorKind::Forbidden,
                value: None,
                detail: detail.into(),
            }],
        ))
    };
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("apps", "StatefulSet") => {
            let mutable = [
                "replicas",
                "ordinals",
                "template",
                "updateStrategy",
                "persistentVolumeClaimRetentionPolicy",
                "minReadySeconds",
            ];
            if strip(old, &mutable) != strip(new, &mutable) {
                return forbidden("spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden");
            }
        }
        ("", "PersistentVolumeClaim") => {
            let requests = |v: &Value| {
                let mut spec = v.get("spec").cloned().unwrap_or(Value::Null);
                if let Some(r) = spec
                    .pointer_mut("/resources")
                    .and_then(Value::as_object_mut)
                {
                    r.remove("requests");
                }
                if let Some(o) = spec.as_object_mut() {
                    o.remove("volumeAttributesClassName");
                }
                spec
            };
            if requests(old) != requests(new) {
                return forbidden("spec", "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims");
            }
            let storage = |v: &Value| {
                v.pointer("/spec/resources/requests/storage")
                    .and_then(Value::as_str)
                    .and_then(super::cel::quantity)
            };
            if let (Some(before), Some(after)) = (storage(old), storage(new)) {
                if after < before {
                    return forbidden(
                        "spec.resources.requests.storage",
                        "field can not be less than previous value",
                    );
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Side effects of a stored write.
fn after_write(t: &mut Txn<'_>, rt: &ResourceType, stored: &Value) {
    if rt.group == "events.k8s.io" {
        events::mirror(t, stored);
    }
}

/// Deletes an object (DELETE), honouring preconditions, finalizers and propagation.
pub fn delete(
    store: &Store,
    rt: &ResourceType,
    ns: &str,
    name: &str,
    opts: &DeleteOpts,
) -> Result<Value, ApiError> {
    store.transact(|t| {
        let old = t
            .get(&gr_of(rt), ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.plural, &rt.group, name))?;
        if let Some(uid) = &opts.uid {
            if meta_str(&old, "uid") != Some(uid.as_str()) {
                return Err(ApiError::new(409, "Conflict", format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta_str(&old, "uid").unwrap_or("")
                )));
            }
        }
        if let Some(rv) = &opts.resource_version {
            if meta_str(&old, "resourceVersion") != Some(rv.as_str()) {
                return Err(ApiError::new(409, "Conflict", format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta_str(&old, "resourceVersion").unwrap_or("")
                )));
            }
        }
        delete_in(t, rt, old, opts)
    })
}

/// Delete inside a transaction (also used by the garbage collector).
pub(crate) fn delete_in(
    t: &mut Txn<'_>,
    rt: &ResourceType,
    old: Value,
    opts: &DeleteOpts,
) -> Result<Value, ApiError> {
    let gr = gr_of(rt);
    let name = meta_str(&old, "name").unwrap_or("").to_string();
    let ns = meta_str(&old, "namespace").unwrap_or("").to_string();
    let mut obj = old.clone();
    let mut fins = meta::finalizers(&obj);
    let marker = match opts.propagation {
        Propagation::Foreground => Some("foregroundDeletion"),
        Propagation::Orphan => Some("orphan"),
        Propagation::Background => None,
    };
    if let Some(mk) = marker {
        if !fins.iter().any(|f| f == mk) && meta_str(&obj, "deletionTimestamp").is_none() {
            fins.push(mk.to_string());
        }
    }
    let graceful = is_graceful_pod(rt, &obj) && opts.grace_seconds != Some(0);
    let namespace = rt.kind == "Namespace" && rt.group.is_empty();
    if fins.is_empty() && !graceful && !namespace {
        if opts.dry_run {
            return Ok(obj);
        }
        if rt.kind == "CustomResourceDefinition" {
            crd::unregister(t, &obj);
        }
        if rt.group == "events.k8s.io" {
            events::unmirror(t, &obj);
        }
        return t
            .remove(&gr, &ns, &name)
            .ok_or_else(|| ApiError::internal("object vanished"));
    }
    meta::set_finalizers(&mut obj, fins);
    let m = meta_mut(&mut obj);
    if !m.contains_key("deletionTimestamp") {
        m.insert("deletionTimestamp".into(), Value::String(now_rfc3339()));
        let grace = if graceful {
            opts.grace_seconds.unwrap_or_else(|| {
                old.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(30)
            })
        } else {
            0
        };
        m.insert("deletionGracePeriodSeconds".into(), json!(grace));
    } else if let (true, Some(g)) = (graceful, opts.grace_seconds) {
        let cur = m
            .get("deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(i64::MAX);
        if g < cur {
            m.insert("deletionGracePeriodSeconds".into(), json!(g));
        }
    }
    if namespace {
        obj["status"] = json!({"phase": "Terminating"});
    }
    if opts.dry_run || comparable(&obj) == comparable(&old) {
        return Ok(obj);
    }
    Ok(t.put(&gr, obj))
}
