//! Watch streams: newline-delimited JSON `{"type": ..., "object": ...}` over a chunked
//! response, resuming from a resourceVersion, with bookmarks, selector transitions and the
//! streaming-list mode (`sendInitialEvents=true`).

use super::error::ApiError;
use super::http::{json_response, Body, Query};
use super::ops::gr_of;
use super::registry::ResourceType;
use super::server::{Filter, State};
use super::store::{EventType, StoredEvent};
use bytes::Bytes;
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::Response;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

/// How often an idle watch that asked for bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(5);

/// Renders one event's object: the object itself, or a one-row Table when kubectl asked for
/// server-side printing.
fn render(rt: &ResourceType, table: Option<&Query>, obj: &Value) -> Value {
    match table {
        Some(q) => super::table::table(
            rt,
            std::slice::from_ref(obj),
            super::store::object_rv(obj),
            q,
        ),
        None => super::server::as_version(rt, obj.clone()),
    }
}

fn line(kind: &str, obj: &Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": obj})).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

/// Translates a store event into what this watcher sees (None: not visible to it).
fn visible(ev: &StoredEvent, rt: &ResourceType, f: &Filter) -> Option<(&'static str, Arc<Value>)> {
    if ev.gr != gr_of(rt) {
        return None;
    }
    if let Some(ns) = &f.ns {
        if &ev.namespace != ns {
            return None;
        }
    }
    let now = f.matches(&ev.object);
    let before = ev.prev.as_ref().is_some_and(|p| f.matches(p));
    let kind = match (ev.kind, before, now) {
        (EventType::Added, _, true) => "ADDED",
        (EventType::Deleted, _, true) => "DELETED",
        (EventType::Modified, true, true) => "MODIFIED",
        (EventType::Modified, false, true) => "ADDED",
        (EventType::Modified, true, false) => "DELETED",
        _ => return None,
    };
    Some((kind, ev.object.clone()))
}

fn bookmark(rt: &ResourceType, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        &json!({"kind": rt.kind, "apiVersion": rt.api_version(), "metadata": meta}),
    )
}

/// Starts a watch response. Errors found before streaming (410 Gone for a compacted
/// resourceVersion) are sent as one ERROR event, as the real server does.
pub(crate) fn serve(
    state: &State,
    rt: ResourceType,
    filter: Filter,
    q: &Query,
    as_table: bool,
) -> Result<Response<Body>, ApiError> {
    let q_table = q.clone();
    let initial = q.flag("sendInitialEvents");
    let from = match q.get("resourceVersion") {
        None | Some("") | Some("0") => None,
        Some(_) if initial => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?,
        ),
    };
    let bookmarks = q.flag("allowWatchBookmarks");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let (mut tx, rx) = mpsc::channel::<Bytes>(256);
    let start = match state.store.watch(&gr_of(&rt), from) {
        Ok(s) => s,
        Err(e) => {
            let body = line("ERROR", &e.to_status());
            let mut r = json_response(200, &Value::Null);
            *r.body_mut() = super::http::full(body);
            return Ok(r);
        }
    };
    let store = state.store.clone();
    let mut shutdown = state.shutdown.clone();
    tokio::spawn(async move {
        let table = as_table.then_some(&q_table);
        let mut live = start.rx;
        for ev in &start.backlog {
            if let Some((k, o)) = visible(ev, &rt, &filter) {
                if tx.send(line(k, &render(&rt, table, &o))).await.is_err() {
                    return;
                }
            }
        }
        if initial && tx.send(bookmark(&rt, start.rv, true)).await.is_err() {
            return;
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(BOOKMARK_EVERY);
        tick.tick().await;
        loop {
            tokio::select! {
                ev = live.recv() => match ev {
                    Ok(ev) => {
                        if let Some((k, o)) = visible(&ev, &rt, &filter) {
                            if tx.send(line(k, &render(&rt, table, &o))).await.is_err() { return; }
                        }
                    }
                    // Too slow or store gone: end the stream; the client re-watches.
                    Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => return,
                },
                _ = tick.tick(), if bookmarks => {
                    // Every event up to `rv` is already queued in `live` (sends happen under the
                    // store lock), so deliver those first, then the bookmark.
                    let rv = store.resource_version();
                    loop {
                        match live.try_recv() {
                            Ok(ev) => if let Some((k, o)) = visible(&ev, &rt, &filter) {
                                if tx.send(line(k, &render(&rt, table, &o))).await.is_err() { return; }
                            },
                            Err(TryRecvError::Empty) => break,
                            Err(_) => return,
                        }
                    }
                    if tx.send(bookmark(&rt, rv, false)).await.is_err() { return; }
                }
                _ = &mut deadline => return,
                _ = shutdown.changed() => return,
            }
        }
    });
    let body = StreamBody::new(rx.map(|b| Ok::<_, std::convert::Infallible>(Frame::data(b))));
    let mut r = Response::new(BodyExt::boxed(body));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(r)
}
