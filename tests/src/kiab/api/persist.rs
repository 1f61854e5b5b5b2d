//! Optional JSON snapshot of the store in `state_dir/store.json`, so a demo's state can be
//! inspected after the fact and reloaded by the next start.

use super::crd;
use super::registry::GroupResource;
use super::store::Store;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use tracing::warn;

fn file(dir: &Path) -> PathBuf {
    dir.join("store.json")
}

/// Writes the snapshot (atomically: temp file then rename).
pub fn save(store: &Store, dir: &Path) -> std::io::Result<()> {
    let rv = store.resource_version();
    let objects: Vec<Value> = store
        .dump()
        .into_iter()
        .map(|(gr, o)| json!({"group": gr.group, "resource": gr.resource, "object": o}))
        .collect();
    let body = serde_json::to_vec_pretty(&json!({"resourceVersion": rv, "objects": objects}))
        .map_err(std::io::Error::other)?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join("store.json.tmp");
    std::fs::write(&tmp, body)?;
    std::fs::rename(tmp, file(dir))
}

/// Loads a snapshot if one exists; CRDs in it re-register their kinds.
pub fn load(store: &Store, dir: &Path) -> std::io::Result<bool> {
    let bytes = match std::fs::read(file(dir)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let v: Value = serde_json::from_slice(&bytes).map_err(std::io::Error::other)?;
    let rv = v
        .get("resourceVersion")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let mut objs = vec![];
    for e in v
        .get("objects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (Some(g), Some(r), Some(o)) = (
            e.get("group").and_then(Value::as_str),
            e.get("resource").and_then(Value::as_str),
            e.get("object"),
        ) else {
            warn!("skipping malformed snapshot entry");
            continue;
        };
        objs.push((GroupResource::new(g, r), o.clone()));
    }
    let crds: Vec<Value> = objs
        .iter()
        .filter(|(gr, _)| gr.resource == "customresourcedefinitions")
        .map(|(_, o)| o.clone())
        .collect();
    store.load(rv, objs);
    let _ = store.transact(|t| {
        for c in &crds {
            crd::register(t, c);
        }
        Ok(())
    });
    Ok(true)
}
