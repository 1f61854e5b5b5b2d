//! A skeletal OpenAPI v3 (`/openapi/v3`): for each group/version, the PATCH operation of each
//! resource with its group-version-kind and a `fieldValidation` query parameter. That is what
//! kubectl checks to decide the server validates fields itself (so it skips client-side schema
//! validation); with no strategic-merge-patch request body listed, kubectl computes strategic
//! merge patches from its compiled-in types. No schemas are served (`kubectl explain` fails).

use super::registry::Registry;
use serde_json::{json, Map, Value};

fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The `/openapi/v3` index.
pub fn index(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for (g, vs) in reg.groups() {
        for v in vs {
            let k = gv_key(&g, &v);
            let hash = reg.generation();
            paths.insert(
                k.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{k}?hash={hash:016X}")}),
            );
        }
    }
    json!({"paths": paths})
}

/// The document for one group/version (`/openapi/v3/apis/apps/v1`).
pub fn group_version(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    for t in reg
        .all()
        .filter(|t| t.group == group && t.version == version)
    {
        let base = format!("/{}", gv_key(group, version));
        let item = if t.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", t.plural)
        } else {
            format!("{base}/{}/{{name}}", t.plural)
        };
        let gvk = json!({"group": t.group, "version": t.version, "kind": t.kind});
        paths.insert(
            item,
            json!({"patch": {
                "operationId": format!("patch{}", t.kind),
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}
                ],
                "responses": {"200": {"description": "OK"}}
            }}),
        );
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kube-in-a-box)", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
