//! A small in-memory Kubernetes API behind a `tower::Service`, for reconcile tests.
//!
//! Why not tower-test's mock: it makes a test script every request in order, so any harmless
//! reordering in the controller breaks tests. Why not kube-fake-client: it targets kube 4.
//! This fake stores objects by collection path and name, and answers the calls the operator
//! makes: GET (item, list with label selectors), POST, PUT (with resourceVersion conflicts),
//! PATCH (server-side apply, JSON merge patch on /status) and DELETE. Every request is recorded.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use kube::client::Body;
use serde_json::{json, Value};

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
    pub body: Option<Value>,
}

#[derive(Default)]
struct State {
    objects: BTreeMap<(String, String), Value>,
    calls: Vec<Call>,
    rv: u64,
}

/// The fake API server; clone freely (shared state).
#[derive(Clone, Default)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
}

/// A parsed request path.
struct Target {
    /// e.g. `/apis/apps/v1/namespaces/t/statefulsets`
    collection: String,
    name: Option<String>,
    sub: Option<String>,
}

fn parse_path(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let prefix_len = match *segs.first()? {
        "api" => 2,
        "apis" => 3,
        _ => return None,
    };
    let mut i = prefix_len;
    if segs.get(i) == Some(&"namespaces") && segs.len() > i + 2 {
        i += 2;
    }
    let collection = format!("/{}", segs[..=i].join("/"));
    Some(Target {
        collection,
        name: segs.get(i + 1).map(|s| s.to_string()),
        sub: segs.get(i + 2).map(|s| s.to_string()),
    })
}

/// `/apis/g/v/namespaces/ns/things` → `/apis/g/v/things` (for all-namespace lists).
fn strip_namespace(collection: &str) -> String {
    let segs: Vec<&str> = collection.split('/').collect();
    match segs.iter().position(|s| *s == "namespaces") {
        Some(i) if segs.len() > i + 2 => [&segs[..i], &segs[i + 2..]].concat().join("/"),
        _ => collection.to_string(),
    }
}

fn status_json(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

fn selector_matches(obj: &Value, selector: &str) -> bool {
    let labels = obj
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or(json!({}));
    selector
        .split(',')
        .filter(|s| !s.is_empty())
        .all(|term| match term.split_once('=') {
            Some((k, v)) => labels.get(k).and_then(Value::as_str) == Some(v),
            None => labels.get(term).is_some(),
        })
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| {
            v.replace("%3D", "=")
                .replace("%2C", ",")
                .replace("%2F", "/")
        })
    })
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

impl FakeApi {
    pub fn new() -> Self {
        Self::default()
    }

    /// A kube client talking to this fake.
    pub fn client(&self) -> kube::Client {
        let me = self.clone();
        let svc = tower::service_fn(move |req: Request<Body>| {
            let me = me.clone();
            async move { Ok::<_, Infallible>(me.handle(req).await) }
        });
        kube::Client::new(svc, "default")
    }

    /// Puts an object straight into the store (as a test fixture), returning what is stored.
    pub fn insert(&self, collection: &str, mut obj: Value) -> Value {
        let mut st = self.state.lock().unwrap();
        st.rv += 1;
        let rv = st.rv.to_string();
        let name = obj["metadata"]["name"].as_str().unwrap().to_string();
        obj["metadata"]["resourceVersion"] = json!(rv);
        if obj["metadata"].get("uid").is_none() {
            obj["metadata"]["uid"] = json!(format!("uid-{name}-{rv}"));
        }
        st.objects
            .insert((collection.to_string(), name), obj.clone());
        obj
    }

    pub fn get(&self, collection: &str, name: &str) -> Option<Value> {
        let st = self.state.lock().unwrap();
        st.objects
            .get(&(collection.to_string(), name.to_string()))
            .cloned()
    }

    /// Deletes an object straight from the store.
    pub fn remove(&self, collection: &str, name: &str) {
        let mut st = self.state.lock().unwrap();
        st.objects
            .remove(&(collection.to_string(), name.to_string()));
    }

    /// Names stored under a collection.
    pub fn names(&self, collection: &str) -> Vec<String> {
        let st = self.state.lock().unwrap();
        st.objects
            .keys()
            .filter(|(c, _)| c == collection)
            .map(|(_, n)| n.clone())
            .collect()
    }

    /// All recorded calls; `take_calls` also clears them.
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    pub fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut self.state.lock().unwrap().calls)
    }

    async fn handle(&self, req: Request<Body>) -> Response<Full<Bytes>> {
        let (parts, body) = req.into_parts();
        let bytes = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => Bytes::new(),
        };
        self.handle_parts(&parts.method, &parts.uri, &parts.headers, bytes)
            .await
    }

    /// Serves this fake over plain HTTP on loopback (for the real binary); returns the address.
    pub async fn serve(&self) -> std::net::SocketAddr {
        let me = self.clone();
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let me = me.clone();
            async move {
                let (parts, body) = req.into_parts();
                let bytes = axum::body::to_bytes(body, 64 << 20)
                    .await
                    .unwrap_or_default();
                me.handle_parts(&parts.method, &parts.uri, &parts.headers, bytes)
                    .await
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        addr
    }

    async fn handle_parts(
        &self,
        method: &http::Method,
        uri: &http::Uri,
        headers: &http::HeaderMap,
        bytes: Bytes,
    ) -> Response<Full<Bytes>> {
        let method = method.to_string();
        let path = uri.path().to_string();
        let query = uri.query().unwrap_or("").to_string();
        let content_type = headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if method == "GET" && (query.contains("watch=true") || query.contains("watch=1")) {
            // No events are streamed: hold the watch briefly and end it, so clients re-watch
            // without spinning; the controller's requeue timer drives convergence.
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            return Response::builder()
                .status(StatusCode::OK)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::new()))
                .unwrap();
        }
        let body: Option<Value> = if bytes.is_empty() {
            None
        } else {
            serde_json::from_slice(&bytes).ok()
        };
        let (code, value) = self.dispatch(&method, &path, &query, &content_type, body.clone());
        self.state.lock().unwrap().calls.push(Call {
            method,
            path,
            query,
            content_type,
            body,
        });
        Response::builder()
            .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(value.to_string())))
            .unwrap()
    }

    fn dispatch(
        &self,
        method: &str,
        path: &str,
        query: &str,
        content_type: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let Some(t) = parse_path(path) else {
            return (404, status_json(404, "NotFound", "unknown path"));
        };
        let mut st = self.state.lock().unwrap();
        st.rv += 1;
        let rv = st.rv.to_string();
        let key = (t.collection.clone(), t.name.clone().unwrap_or_default());
        match (method, t.name.as_deref(), t.sub.as_deref()) {
            ("GET", None, _) => {
                let sel = query_param(query, "labelSelector").unwrap_or_default();
                let items: Vec<Value> = st
                    .objects
                    .iter()
                    .filter(|((c, _), o)| {
                        (*c == t.collection || strip_namespace(c) == t.collection)
                            && selector_matches(o, &sel)
                    })
                    .map(|(_, o)| o.clone())
                    .collect();
                (
                    200,
                    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": rv}, "items": items}),
                )
            }
            ("GET", Some(name), _) => match st.objects.get(&key) {
                Some(o) => (200, o.clone()),
                None => (
                    404,
                    status_json(404, "NotFound", &format!("{name} not found")),
                ),
            },
            ("POST", None, _) => {
                let mut obj = body.unwrap_or(json!({}));
                let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
                let key = (t.collection.clone(), name.clone());
                if st.objects.contains_key(&key) {
                    return (
                        409,
                        status_json(409, "AlreadyExists", &format!("{name} exists")),
                    );
                }
                obj["metadata"]["resourceVersion"] = json!(rv);
                obj["metadata"]["uid"] = json!(format!("uid-{name}-{rv}"));
                st.objects.insert(key, obj.clone());
                (201, obj)
            }
            ("PUT", Some(name), None) => {
                let mut obj = body.unwrap_or(json!({}));
                let Some(old) = st.objects.get(&key) else {
                    return (
                        404,
                        status_json(404, "NotFound", &format!("{name} not found")),
                    );
                };
                let sent_rv = obj.pointer("/metadata/resourceVersion").cloned();
                if sent_rv.is_some() && sent_rv != old.pointer("/metadata/resourceVersion").cloned()
                {
                    return (
                        409,
                        status_json(409, "Conflict", "the object has been modified"),
                    );
                }
                obj["metadata"]["resourceVersion"] = json!(rv);
                obj["metadata"]["uid"] = old["metadata"]["uid"].clone();
                st.objects.insert(key, obj.clone());
                (200, obj)
            }
            ("PATCH", Some(name), sub) => {
                let patch = body.unwrap_or(json!({}));
                if content_type.starts_with("application/apply-patch") && sub.is_none() {
                    let mut obj = patch;
                    if let Some(old) = st.objects.get(&key) {
                        obj["metadata"]["uid"] = old["metadata"]["uid"].clone();
                        if let Some(s) = old.get("status") {
                            obj["status"] = s.clone();
                        }
                    } else {
                        obj["metadata"]["uid"] = json!(format!("uid-{name}-{rv}"));
                    }
                    obj["metadata"]["resourceVersion"] = json!(rv);
                    st.objects.insert(key, obj.clone());
                    return (200, obj);
                }
                let Some(old) = st.objects.get_mut(&key) else {
                    return (
                        404,
                        status_json(404, "NotFound", &format!("{name} not found")),
                    );
                };
                if sub == Some("status") {
                    let mut status = old.get("status").cloned().unwrap_or(json!({}));
                    merge(&mut status, &patch["status"]);
                    old["status"] = status;
                } else {
                    merge(old, &patch);
                }
                old["metadata"]["resourceVersion"] = json!(rv);
                (200, old.clone())
            }
            ("DELETE", Some(name), None) => match st.objects.remove(&key) {
                Some(o) => (200, o),
                None => (
                    404,
                    status_json(404, "NotFound", &format!("{name} not found")),
                ),
            },
            _ => (405, status_json(405, "MethodNotAllowed", "unsupported")),
        }
    }
}
