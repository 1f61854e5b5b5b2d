//! Request routing: discovery paths and the resource URL grammar
//! `/api/v1/[namespaces/{ns}/]{resource}[/{name}[/{subresource}]]` (and `/apis/{group}/{version}/...`).

use super::error::ApiError;
use super::http::{
    error_response, json_response, parse_body, read_body, text_response, Body, Query,
};
use super::ops::{self, DeleteOpts, PatchType, Propagation, Sub, WriteOpts};
use super::registry::ResourceType;
use super::selectors::{FieldSelector, LabelSelector};
use super::store::Store;
use super::{discovery, openapi, table, watch};
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{json, Value};
use std::net::SocketAddr;
use tokio::sync::watch as tokio_watch;
use tracing::debug;

/// Shared state of the HTTP server.
#[derive(Clone)]
pub(crate) struct State {
    pub store: Store,
    pub addr: SocketAddr,
    pub shutdown: tokio_watch::Receiver<bool>,
    pub logs: std::sync::Arc<parking_lot::RwLock<Option<super::logs::LogSource>>>,
}

/// A parsed resource URL.
struct Target {
    rt: ResourceType,
    ns: String,
    name: Option<String>,
    sub: Sub,
}

fn wants_table(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"))
}

/// Entry point for every request.
pub(crate) async fn handle(state: State, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let resp = match route(&state, req).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    };
    debug!(%method, %path, status = resp.status().as_u16(), "request");
    resp
}

async fn route(state: &State, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| s.replace("%3A", ":").replace("%3a", ":"))
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let reg = state.store.registry();
    let get = req.method() == Method::GET;
    match segs.as_slice() {
        ["version"] if get => return Ok(json_response(200, &discovery::version())),
        ["healthz"] | ["readyz"] | ["livez"] => return Ok(text_response(200, "ok")),
        ["api"] if get => {
            return Ok(json_response(
                200,
                &discovery::core_versions(&state.addr.to_string()),
            ))
        }
        ["apis"] if get => return Ok(json_response(200, &discovery::group_list(&reg))),
        ["api", v] if get => {
            return discovery::resource_list(&reg, "", v)
                .map(|d| json_response(200, &d))
                .ok_or_else(|| not_found_path(&path))
        }
        ["apis", g] if get => {
            return discovery::group(&reg, g)
                .map(|d| json_response(200, &d))
                .ok_or_else(|| not_found_path(&path))
        }
        ["apis", g, v] if get => {
            return discovery::resource_list(&reg, g, v)
                .map(|d| json_response(200, &d))
                .ok_or_else(|| not_found_path(&path))
        }
        ["openapi", "v3"] if get => return Ok(json_response(200, &openapi::index(&reg))),
        ["openapi", "v3", "api", v] if get => {
            return openapi::group_version(&reg, "", v)
                .map(|d| json_response(200, &d))
                .ok_or_else(|| not_found_path(&path))
        }
        ["openapi", "v3", "apis", g, v] if get => {
            return openapi::group_version(&reg, g, v)
                .map(|d| json_response(200, &d))
                .ok_or_else(|| not_found_path(&path))
        }
        _ => {}
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_found_path(&path)),
    };
    let target = parse_target(&reg, group, version, rest).ok_or_else(|| not_found_path(&path))?;
    let query = Query::parse(req.uri().query());
    serve_resource(state, req, target, query).await
}

fn not_found_path(path: &str) -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        format!("the server could not find the requested resource ({path})"),
    )
}

fn parse_target(
    reg: &super::registry::Registry,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Option<Target> {
    let lookup = |plural: &str| reg.get(group, version, plural).cloned();
    let sub_of = |s: &str| match s {
        "status" => Some(Sub::Status),
        "scale" => Some(Sub::Scale),
        "log" if group.is_empty() && version == "v1" && rest.get(2) == Some(&"pods") => {
            Some(Sub::Log)
        }
        "eviction" if group.is_empty() && version == "v1" && rest.get(2) == Some(&"pods") => {
            Some(Sub::Eviction)
        }
        _ => None,
    };
    // Namespaced form first: namespaces/{ns}/{resource}...
    if let ["namespaces", ns, plural, tail @ ..] = rest {
        if let Some(rt) = lookup(plural).filter(|r| r.namespaced) {
            let (name, sub) = match tail {
                [] => (None, Sub::Main),
                [n] => (Some(n.to_string()), Sub::Main),
                [n, s] => (Some(n.to_string()), sub_of(s)?),
                _ => return None,
            };
            return Some(Target {
                rt,
                ns: ns.to_string(),
                name,
                sub,
            });
        }
    }
    let (plural, tail) = rest.split_first()?;
    let rt = lookup(plural)?;
    let (name, sub) = match tail {
        [] => (None, Sub::Main),
        [n] => (Some(n.to_string()), Sub::Main),
        [n, "finalize"] if rt.kind == "Namespace" => (Some(n.to_string()), Sub::Main),
        [n, s] => (Some(n.to_string()), sub_of(s)?),
        _ => return None,
    };
    if rt.namespaced && name.is_some() {
        return None;
    }
    Some(Target {
        rt,
        ns: String::new(),
        name,
        sub,
    })
}

fn write_opts(q: &Query) -> WriteOpts {
    WriteOpts {
        dry_run: q.get("dryRun") == Some("All"),
        field_manager: q.get("fieldManager").map(String::from),
        force: q.flag("force"),
        strict: q.get("fieldValidation") == Some("Strict"),
        ..WriteOpts::default()
    }
}

fn delete_opts(q: &Query, body: &Value) -> Result<DeleteOpts, ApiError> {
    let pol = q.get("propagationPolicy").map(String::from).or_else(|| {
        body.get("propagationPolicy")
            .and_then(Value::as_str)
            .map(String::from)
    });
    let propagation = match pol.as_deref() {
        None | Some("Background") => Propagation::Background,
        Some("Foreground") => Propagation::Foreground,
        Some("Orphan") => Propagation::Orphan,
        Some(p) => {
            return Err(ApiError::bad_request(format!(
                "invalid propagationPolicy {p:?}"
            )))
        }
    };
    let propagation = if body.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
        Propagation::Orphan
    } else {
        propagation
    };
    let grace = q
        .get("gracePeriodSeconds")
        .and_then(|g| g.parse().ok())
        .or_else(|| body.get("gracePeriodSeconds").and_then(Value::as_i64));
    let dry = q.get("dryRun") == Some("All")
        || body
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "All"));
    Ok(DeleteOpts {
        propagation,
        grace_seconds: grace,
        uid: body
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(String::from),
        resource_version: body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(String::from),
        dry_run: dry,
    })
}

/// Serves an object as the requested version: objects of all versions of a resource share one
/// store, and only `apiVersion` changes between them (a CRD's `conversion: None` strategy).
pub(crate) fn as_version(rt: &ResourceType, mut obj: Value) -> Value {
    if obj.get("apiVersion").and_then(Value::as_str) != Some(rt.api_version().as_str()) {
        obj["apiVersion"] = Value::String(rt.api_version());
    }
    obj
}

/// Filters for list and watch requests.
pub(crate) struct Filter {
    pub ns: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    fn from_query(q: &Query, ns: &str) -> Result<Self, ApiError> {
        Ok(Filter {
            ns: (!ns.is_empty()).then(|| ns.to_string()),
            labels: LabelSelector::parse(q.get("labelSelector").unwrap_or(""))?,
            fields: FieldSelector::parse(q.get("fieldSelector").unwrap_or(""))?,
        })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

async fn serve_resource(
    state: &State,
    req: Request<Incoming>,
    t: Target,
    q: Query,
) -> Result<Response<Body>, ApiError> {
    let store = &state.store;
    let rt = &t.rt;
    let gr = ops::gr_of(rt);
    let table = wants_table(&req);
    let method = req.method().clone();
    let ctype = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    if rt.namespaced && t.name.is_some() && t.ns.is_empty() {
        return Err(ApiError::bad_request("a namespace is required"));
    }
    if t.sub == Sub::Log {
        return match (method, &t.name) {
            (Method::GET, Some(name)) => {
                let source = state.logs.read().clone();
                super::logs::serve(store, source, &t.ns, name, &q, state.shutdown.clone())
            }
            (m, _) => Err(ApiError::method_not_allowed(format!(
                "method {m} not allowed on pods/log"
            ))),
        };
    }
    if t.sub == Sub::Eviction {
        return match (method, &t.name) {
            (Method::POST, Some(name)) => {
                let (_, bytes) = read_body(req).await?;
                let body = parse_body(&bytes, false)?;
                Ok(json_response(
                    201,
                    &super::pdb::evict(store, &t.ns, name, &body)?,
                ))
            }
            (m, _) => Err(ApiError::method_not_allowed(format!(
                "method {m} not allowed on pods/eviction"
            ))),
        };
    }
    match (method, &t.name) {
        (Method::GET, None) => {
            let filter = Filter::from_query(&q, &t.ns)?;
            if q.flag("watch") {
                return watch::serve(state, rt.clone(), filter, &q, table);
            }
            let (items, rv) = store.list(&gr, filter.ns.as_deref());
            let items: Vec<Value> = items
                .into_iter()
                .filter(|o| filter.matches(o))
                .map(|o| as_version(rt, o))
                .collect();
            if table {
                return Ok(json_response(200, &table::table(rt, &items, rv, &q)));
            }
            Ok(json_response(
                200,
                &json!({
                    "apiVersion": rt.api_version(), "kind": format!("{}List", rt.kind),
                    "metadata": {"resourceVersion": rv.to_string()}, "items": items,
                }),
            ))
        }
        (Method::GET, Some(name)) => {
            let obj = store
                .get(&gr, &t.ns, name)
                .map(|o| as_version(rt, o))
                .ok_or_else(|| ApiError::not_found(&rt.plural, &rt.group, name))?;
            match t.sub {
                Sub::Scale => Ok(json_response(200, &ops::scale_of(rt, &obj)?)),
                _ if table => {
                    let rv = store.resource_version();
                    Ok(json_response(200, &table::table(rt, &[obj], rv, &q)))
                }
                _ => Ok(json_response(200, &obj)),
            }
        }
        (Method::POST, None) => {
            let (_, bytes) = read_body(req).await?;
            let body = parse_body(&bytes, false)?;
            let obj = ops::create(store, rt, &t.ns, body, &write_opts(&q))?;
            Ok(json_response(201, &obj))
        }
        (Method::PUT, Some(name)) => {
            let (_, bytes) = read_body(req).await?;
            let body = parse_body(&bytes, false)?;
            let obj = ops::update(store, rt, &t.ns, name, t.sub, body, &write_opts(&q))?;
            Ok(json_response(
                200,
                &if t.sub == Sub::Scale {
                    ops::scale_of(rt, &obj)?
                } else {
                    obj
                },
            ))
        }
        (Method::PATCH, Some(name)) => {
            let ptype = match ctype.as_str() {
                "application/json-patch+json" => PatchType::Json,
                "application/merge-patch+json" => PatchType::Merge,
                "application/strategic-merge-patch+json" => PatchType::Strategic,
                "application/apply-patch+yaml" | "application/apply-patch+cbor" => PatchType::Apply,
                other => {
                    return Err(ApiError::unsupported_media(format!(
                        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json ({other})"
                    )))
                }
            };
            let (_, bytes) = read_body(req).await?;
            let body = parse_body(&bytes, ptype == PatchType::Apply)?;
            let existed = store.get(&gr, &t.ns, name).is_some();
            let obj =
                ops::patch_object(store, rt, &t.ns, name, t.sub, ptype, body, &write_opts(&q))?;
            let code = if existed { 200 } else { 201 };
            Ok(json_response(
                code,
                &if t.sub == Sub::Scale {
                    ops::scale_of(rt, &obj)?
                } else {
                    obj
                },
            ))
        }
        (Method::DELETE, Some(name)) => {
            let (_, bytes) = read_body(req).await?;
            let body = parse_body(&bytes, false)?;
            let obj = ops::delete(store, rt, &t.ns, name, &delete_opts(&q, &body)?)?;
            Ok(json_response(200, &obj))
        }
        (Method::DELETE, None) => {
            let (_, bytes) = read_body(req).await?;
            let body = parse_body(&bytes, false)?;
            let opts = delete_opts(&q, &body)?;
            let filter = Filter::from_query(&q, &t.ns)?;
            let (items, _) = store.list(&gr, filter.ns.as_deref());
            let mut out = vec![];
            for o in items.into_iter().filter(|o| filter.matches(o)) {
                let ns = o
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let name = o
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match ops::delete(store, rt, ns, name, &opts) {
                    Ok(d) => out.push(d),
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(json_response(
                200,
                &json!({
                    "apiVersion": rt.api_version(), "kind": format!("{}List", rt.kind),
                    "metadata": {"resourceVersion": store.resource_version().to_string()}, "items": out,
                }),
            ))
        }
        (m, _) => Err(ApiError::method_not_allowed(format!(
            "method {m} not allowed here"
        ))),
    }
}
