//! `GET .../pods/{name}/log` (kubectl logs [-f] [--tail N] [-c container]): the API server reads
//! the container's log file, which the kubelet reports through a [`LogSource`] hook (a real API
//! server proxies this to the kubelet instead).

use super::error::ApiError;
use super::http::{Body, Query};
use super::registry::GroupResource;
use super::store::Store;
use bytes::Bytes;
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::Response;
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Maps (namespace, pod, container) to that container's log file.
pub type LogSource = Arc<dyn Fn(&str, &str, &str) -> Option<PathBuf> + Send + Sync>;

/// Last `n` lines of `data`.
fn tail(data: &[u8], n: usize) -> &[u8] {
    let mut count = 0;
    let end = if data.ends_with(b"\n") {
        data.len() - 1
    } else {
        data.len()
    };
    for i in (0..end).rev() {
        if data[i] == b'\n' {
            count += 1;
            if count == n {
                return &data[i + 1..];
            }
        }
    }
    data
}

fn text(r: Response<Body>) -> Response<Body> {
    let mut r = r;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    r
}

/// Serves a pod's log.
pub(crate) fn serve(
    store: &Store,
    source: Option<LogSource>,
    ns: &str,
    pod: &str,
    q: &Query,
    shutdown: watch::Receiver<bool>,
) -> Result<Response<Body>, ApiError> {
    let gr = GroupResource::new("", "pods");
    let obj = store
        .get(&gr, ns, pod)
        .ok_or_else(|| ApiError::not_found("pods", "", pod))?;
    let containers: Vec<String> = obj
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str).map(String::from))
        .collect();
    let container = match q.get("container") {
        Some(c) if containers.iter().any(|x| x == c) => c.to_string(),
        Some(c) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {pod}"
            )))
        }
        None => containers
            .first()
            .cloned()
            .ok_or_else(|| ApiError::bad_request(format!("pod {pod} has no containers")))?,
    };
    let path = source.and_then(|s| s(ns, pod, &container)).ok_or_else(|| {
        ApiError::bad_request(format!(
            "container \"{container}\" in pod \"{pod}\" is waiting to start: no log available"
        ))
    })?;
    let mut data = std::fs::read(&path).unwrap_or_default();
    if let Some(n) = q.get("tailLines").and_then(|t| t.parse::<usize>().ok()) {
        data = tail(&data, n).to_vec();
    }
    if let Some(limit) = q.get("limitBytes").and_then(|t| t.parse::<usize>().ok()) {
        data.truncate(limit);
    }
    if !q.flag("follow") {
        return Ok(text(Response::new(super::http::full(data))));
    }
    let (mut tx, rx) = mpsc::channel::<Bytes>(16);
    let store = store.clone();
    let (ns, pod) = (ns.to_string(), pod.to_string());
    let uid = obj.pointer("/metadata/uid").cloned();
    let mut shutdown = shutdown;
    tokio::spawn(async move {
        let mut offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if tx.send(Bytes::from(data)).await.is_err() {
            return;
        }
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
                _ = shutdown.changed() => return,
            }
            let mut chunk = vec![];
            if let Ok(mut f) = std::fs::File::open(&path) {
                if f.seek(SeekFrom::Start(offset)).is_ok() {
                    let _ = f.read_to_end(&mut chunk);
                }
            }
            offset += chunk.len() as u64;
            if !chunk.is_empty() && tx.send(Bytes::from(chunk)).await.is_err() {
                return;
            }
            // The stream ends when the pod (this incarnation of it) is gone.
            let alive = store
                .get(&GroupResource::new("", "pods"), &ns, &pod)
                .is_some_and(|o| o.pointer("/metadata/uid") == uid.as_ref());
            if !alive {
                return;
            }
        }
    });
    let body = StreamBody::new(rx.map(|b| Ok::<_, std::convert::Infallible>(Frame::data(b))));
    Ok(text(Response::new(BodyExt::boxed(body))))
}

#[cfg(test)]
mod tests {
    #[test]
    fn tail_lines() {
        assert_eq!(super::tail(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(super::tail(b"a\nb\nc", 1), b"c");
        assert_eq!(super::tail(b"a\n", 5), b"a\n");
    }
}
