//! API errors rendered as Kubernetes `Status` objects, because kubectl and kube-rs both parse
//! `reason`/`code`/`message` out of them to decide what to do (retry on 409, re-list on 410...).

use serde_json::{json, Value};

/// An error answered to a client as a `Status` object with an HTTP code.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `details` of the Status (name, group, kind, causes).
    pub details: Option<Value>,
}

/// Names an object in messages the way the real server does: `statefulsets.apps "x"`.
pub fn qualified(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, name: &str, group: &str, kind: &str) -> Self {
        self.details = Some(json!({"name": name, "group": group, "kind": kind}));
        self
    }

    pub fn not_found(resource: &str, group: &str, name: &str) -> Self {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(resource, group)),
        )
        .with_details(name, group, resource)
    }

    pub fn already_exists(resource: &str, group: &str, name: &str) -> Self {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(resource, group)),
        )
        .with_details(name, group, resource)
    }

    pub fn conflict(resource: &str, group: &str, name: &str) -> Self {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                qualified(resource, group)
            ),
        )
        .with_details(name, group, resource)
    }

    /// 422 with one cause per field error, message shaped like the real server's.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: &[FieldError]) -> Self {
        let gk = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let list: Vec<String> = causes.iter().map(FieldError::to_string).collect();
        let joined = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        let mut e = ApiError::new(
            422,
            "Invalid",
            format!("{gk} \"{name}\" is invalid: {joined}"),
        );
        e.details = Some(json!({
            "name": name, "group": group, "kind": kind,
            "causes": causes.iter().map(|c| json!({
                "reason": c.kind.reason(), "message": c.detail_message(), "field": c.field
            })).collect::<Vec<_>>()
        }));
        e
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        ApiError::new(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media(message: impl Into<String>) -> Self {
        ApiError::new(415, "UnsupportedMediaType", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(500, "InternalError", message)
    }

    /// The `Status` object body.
    pub fn to_status(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }
}

/// The kinds of field error the validator reports (a subset of apimachinery's field.ErrorType).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldErrorKind {
    Invalid,
    Required,
    Unsupported,
    TypeInvalid,
    Forbidden,
}

impl FieldErrorKind {
    fn reason(&self) -> &'static str {
        match self {
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Unsupported => "FieldValueNotSupported",
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
        }
    }
}

/// One field error: `spec.shards: Invalid value: 0: <detail>`.
#[derive(Debug, Clone)]
pub struct FieldError {
    pub field: String,
    pub kind: FieldErrorKind,
    pub value: Option<Value>,
    pub detail: String,
}

impl FieldError {
    fn detail_message(&self) -> String {
        match (&self.kind, &self.value) {
            (FieldErrorKind::Invalid, Some(v)) | (FieldErrorKind::TypeInvalid, Some(v)) => {
                format!("Invalid value: {}: {}", render_value(v), self.detail)
            }
            (FieldErrorKind::Unsupported, Some(v)) => {
                format!("Unsupported value: {}: {}", render_value(v), self.detail)
            }
            (FieldErrorKind::Required, _) => format!("Required value: {}", self.detail)
                .trim_end_matches(": ")
                .to_string(),
            (FieldErrorKind::Forbidden, _) => format!("Forbidden: {}", self.detail),
            (_, None) => format!("Invalid value: {}", self.detail),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.detail_message())
    }
}

/// Values print as the real server prints them: strings quoted, numbers bare, objects as "object".
fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{s}\""),
        Value::Object(_) => "\"object\"".to_string(),
        Value::Array(_) => "\"array\"".to_string(),
        other => other.to_string(),
    }
}
