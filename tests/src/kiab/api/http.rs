//! HTTP plumbing: body type, JSON responses, query parsing, reading request bodies.

use super::error::ApiError;
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::Value;
use std::collections::HashMap;
use std::convert::Infallible;

pub type Body = BoxBody<Bytes, Infallible>;

/// Largest request body accepted (real servers allow 3 MiB objects).
const MAX_BODY: usize = 8 << 20;

pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed()
}

pub fn json_response(code: u16, v: &Value) -> Response<Body> {
    let body = serde_json::to_vec(v).unwrap_or_default();
    let mut r = Response::new(full(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

pub fn error_response(e: &ApiError) -> Response<Body> {
    json_response(e.code, &e.to_status())
}

pub fn text_response(code: u16, s: &'static str) -> Response<Body> {
    let mut r = Response::new(full(s));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    r
}

/// Query parameters (last value wins).
#[derive(Debug, Default, Clone)]
pub struct Query(pub HashMap<String, String>);

impl Query {
    pub fn parse(q: Option<&str>) -> Self {
        Query(
            form_urlencoded::parse(q.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }

    pub fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true") | Some("1"))
    }
}

/// Reads the whole request body.
pub async fn read_body(req: Request<Incoming>) -> Result<(http::request::Parts, Bytes), ApiError> {
    let (parts, body) = req.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    let bytes = limited
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(format!("reading request body: {e}")))?
        .to_bytes();
    Ok((parts, bytes))
}

/// Parses a JSON body, or YAML when `yaml` (server-side apply bodies may be either), or the
/// Kubernetes protobuf envelope for the kinds `proto` knows.
pub fn parse_body(bytes: &[u8], yaml: bool) -> Result<Value, ApiError> {
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    if bytes.starts_with(b"k8s\0") {
        return super::proto::decode(bytes);
    }
    match serde_json::from_slice(bytes) {
        Ok(v) => Ok(v),
        Err(e) if yaml => serde_yaml::from_slice::<Value>(bytes)
            .map_err(|y| ApiError::bad_request(format!("error decoding YAML: {y} (as JSON: {e})"))),
        Err(e) => Err(ApiError::bad_request(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml ({e})"
        ))),
    }
}
