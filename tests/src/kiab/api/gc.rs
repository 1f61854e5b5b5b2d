//! The garbage collector and namespace controller: deletes dependents whose owners are gone
//! (background propagation), drives foreground and orphan deletion, and empties terminating
//! namespaces. One sweep over the whole store after changes (the store is small).

use super::meta::{finalizers, meta_str, set_finalizers};
use super::ops::{self, DeleteOpts, Sub, WriteOpts};
use super::registry::GroupResource;
use super::store::{EventType, Store, StoredEvent, Txn};
use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;
use tracing::{debug, warn};

fn owner_uids(o: &Value) -> Vec<String> {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid").and_then(Value::as_str).map(String::from))
        .collect()
}

fn uid(o: &Value) -> &str {
    meta_str(o, "uid").unwrap_or("")
}

/// Whether a change can give the collector work: something deleted, marked for deletion, or
/// created with owners (whose owner may already be gone). Status updates never do, and they are
/// most of the traffic, so sweeps (which walk the whole store) run only after relevant changes.
fn relevant(ev: &StoredEvent) -> bool {
    match ev.kind {
        EventType::Deleted => true,
        _ => {
            meta_str(&ev.object, "deletionTimestamp").is_some()
                || (ev.kind == EventType::Added && !owner_uids(&ev.object).is_empty())
        }
    }
}

/// Runs sweeps until shutdown.
pub(crate) async fn run(store: Store, mut shutdown: watch::Receiver<bool>) {
    let mut rx = store.subscribe();
    let mut periodic = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(ev) if relevant(&ev) => {}
                Ok(_) => continue,
                // Missed events: sweep to be safe.
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            },
            _ = periodic.tick() => {}
            _ = shutdown.changed() => return,
        }
        // Let a burst of writes settle into one sweep.
        tokio::time::sleep(Duration::from_millis(20)).await;
        while rx.try_recv().is_ok() {}
        if let Err(e) = store.transact(|t| {
            sweep(t);
            Ok(())
        }) {
            warn!(error = %e, "garbage collector sweep failed");
        }
    }
}

fn delete(t: &mut Txn<'_>, gr: &GroupResource, o: Value) {
    let Some(rt) = t.registry().by_resource(gr).cloned() else {
        return;
    };
    debug!(kind = %rt.kind, name = meta_str(&o, "name").unwrap_or(""), "gc delete");
    if let Err(e) = ops::delete_in(t, &rt, o, &DeleteOpts::default()) {
        warn!(error = %e, "gc delete failed");
    }
}

fn rewrite(t: &mut Txn<'_>, gr: &GroupResource, old: &Value, new: Value) {
    let Some(rt) = t.registry().by_resource(gr).cloned() else {
        return;
    };
    let opts = WriteOpts {
        field_manager: Some("generic-garbage-collector".into()),
        ..WriteOpts::default()
    };
    if let Err(e) = ops::finish_update(t, &rt, old, new, Sub::Main, &opts) {
        warn!(error = %e, "gc update failed");
    }
}

/// One pass of garbage collection.
pub(crate) fn sweep(t: &mut Txn<'_>) {
    let all = t.all();
    let uids: HashSet<&str> = all.iter().map(|(_, o)| uid(o)).collect();
    // Dependents whose every owner is gone.
    for (gr, o) in &all {
        let owners = owner_uids(o);
        if !owners.is_empty()
            && owners.iter().all(|u| !uids.contains(u.as_str()))
            && meta_str(o, "deletionTimestamp").is_none()
        {
            delete(t, gr, o.clone());
        }
    }
    // Owners being deleted in the foreground or orphaning.
    for (gr, o) in &all {
        if meta_str(o, "deletionTimestamp").is_none() {
            continue;
        }
        let fins = finalizers(o);
        let my = uid(o);
        let dependents: Vec<&(GroupResource, Value)> = all
            .iter()
            .filter(|(_, d)| owner_uids(d).iter().any(|u| u == my))
            .collect();
        if fins.iter().any(|f| f == "orphan") {
            for (dgr, d) in &dependents {
                let Some(cur) = t
                    .get(
                        dgr,
                        meta_str(d, "namespace").unwrap_or(""),
                        meta_str(d, "name").unwrap_or(""),
                    )
                    .cloned()
                else {
                    continue;
                };
                let mut n = cur.clone();
                if let Some(refs) = n
                    .pointer_mut("/metadata/ownerReferences")
                    .and_then(Value::as_array_mut)
                {
                    refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(my));
                }
                rewrite(t, dgr, &cur, n);
            }
            drop_finalizer(t, gr, o, "orphan");
        } else if fins.iter().any(|f| f == "foregroundDeletion") {
            if dependents.is_empty() {
                drop_finalizer(t, gr, o, "foregroundDeletion");
            } else {
                for (dgr, d) in dependents {
                    if meta_str(d, "deletionTimestamp").is_none() {
                        delete(t, dgr, d.clone());
                    }
                }
            }
        }
    }
    // Terminating namespaces: delete their contents, then the namespace.
    let ns_gr = GroupResource::new("", "namespaces");
    for (gr, o) in &all {
        if gr != &ns_gr || meta_str(o, "deletionTimestamp").is_none() {
            continue;
        }
        let ns = meta_str(o, "name").unwrap_or("").to_string();
        let mut remaining = 0;
        for (cgr, c) in t.all() {
            if meta_str(&c, "namespace") != Some(ns.as_str()) {
                continue;
            }
            remaining += 1;
            if meta_str(&c, "deletionTimestamp").is_none() {
                delete(t, &cgr, c);
            }
        }
        if remaining == 0 && finalizers(o).is_empty() {
            t.remove(&ns_gr, "", &ns);
        }
    }
}

fn drop_finalizer(t: &mut Txn<'_>, gr: &GroupResource, o: &Value, f: &str) {
    let Some(cur) = t
        .get(
            gr,
            meta_str(o, "namespace").unwrap_or(""),
            meta_str(o, "name").unwrap_or(""),
        )
        .cloned()
    else {
        return;
    };
    let mut n = cur.clone();
    set_finalizers(
        &mut n,
        finalizers(&cur).into_iter().filter(|x| x != f).collect(),
    );
    rewrite(t, gr, &cur, n);
}
