//! `x-kubernetes-validations` (CEL) rules. Not evaluated yet: rules are accepted and ignored.
//! (Documented in the kube-in-a-box README.)

use super::error::FieldError;
use serde_json::Value;

/// Evaluates the CEL rules of `schema` against `v` (currently none are enforced).
pub fn check(_schema: &Value, _v: &Value, _path: &str, _errs: &mut [FieldError]) {}
