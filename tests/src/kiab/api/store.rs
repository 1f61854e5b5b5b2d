//! The object store: every object as JSON, one global monotonic resourceVersion, and an event
//! history so watches can resume from a resourceVersion (or get 410 Gone once it was compacted).

use super::error::ApiError;
use super::registry::{GroupResource, Registry};
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use tokio::sync::broadcast;

/// How many events are kept for watch resumption before older ones are compacted away.
const HISTORY: usize = 50_000;
/// Broadcast buffer per watcher; a watcher that falls this far behind is closed and re-watches.
const CHANNEL: usize = 16_384;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as delivered to watchers.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub rv: u64,
    pub gr: GroupResource,
    pub namespace: String,
    pub kind: EventType,
    pub object: Arc<Value>,
    /// The object before a MODIFIED change, so selector watches can turn it into ADDED/DELETED.
    pub prev: Option<Arc<Value>>,
}

/// What a watch starts from: events to send first, the live feed, and the store's rv then.
pub struct WatchStart {
    pub backlog: Vec<Arc<StoredEvent>>,
    pub rx: broadcast::Receiver<Arc<StoredEvent>>,
    pub rv: u64,
}

type ObjKey = (GroupResource, String, String);

pub(crate) struct Inner {
    rv: u64,
    objects: BTreeMap<ObjKey, Value>,
    history: VecDeque<Arc<StoredEvent>>,
    /// Events with rv <= compacted are gone: watching from there answers 410.
    compacted: u64,
    registry: Registry,
    tx: broadcast::Sender<Arc<StoredEvent>>,
}

/// A cheap, cloneable handle on the shared store.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Mutex<Inner>>,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Reads `metadata.resourceVersion` as a number (0 when absent or malformed).
pub fn object_rv(obj: &Value) -> u64 {
    meta_str(obj, "resourceVersion").parse().unwrap_or(0)
}

impl Store {
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(CHANNEL);
        Store {
            inner: Arc::new(Mutex::new(Inner {
                rv: 0,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                compacted: 0,
                registry: Registry::new(),
                tx,
            })),
        }
    }

    /// Runs `f` atomically against the store; every put/remove in it is one event.
    pub fn transact<T>(
        &self,
        f: impl FnOnce(&mut Txn<'_>) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let mut guard = self.inner.lock();
        let mut txn = Txn { inner: &mut guard };
        f(&mut txn)
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.inner.lock().rv
    }

    pub fn registry(&self) -> Registry {
        self.inner.lock().registry.clone()
    }

    /// Reads one object.
    pub fn get(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<Value> {
        self.transact(|t| Ok(t.get(gr, ns, name).cloned()))
            .ok()
            .flatten()
    }

    /// Lists objects of a resource (all namespaces when `ns` is None) with the list's rv.
    pub fn list(&self, gr: &GroupResource, ns: Option<&str>) -> (Vec<Value>, u64) {
        let g = self.inner.lock();
        (list_in(&g, gr, ns), g.rv)
    }

    /// Drops the whole event history, so any earlier resourceVersion is "too old" (tests use
    /// this to provoke 410 Gone, as etcd compaction would).
    pub fn compact(&self) {
        let mut g = self.inner.lock();
        g.history.clear();
        g.compacted = g.rv;
    }

    /// Starts a watch of one resource: the backlog after `from` (or synthetic ADDED events for
    /// every current object when `from` is None) and a receiver for everything after it.
    pub fn watch(&self, gr: &GroupResource, from: Option<u64>) -> Result<WatchStart, ApiError> {
        let g = self.inner.lock();
        let rx = g.tx.subscribe();
        let backlog = match from {
            None => list_in(&g, gr, None)
                .into_iter()
                .map(|o| {
                    Arc::new(StoredEvent {
                        rv: object_rv(&o),
                        gr: gr.clone(),
                        namespace: meta_str(&o, "namespace").to_string(),
                        kind: EventType::Added,
                        object: Arc::new(o),
                        prev: None,
                    })
                })
                .collect(),
            Some(rv) if rv < g.compacted => {
                return Err(ApiError::gone(format!(
                    "too old resource version: {rv} ({})",
                    g.compacted + 1
                )))
            }
            Some(rv) => g
                .history
                .iter()
                .filter(|e| e.rv > rv && &e.gr == gr)
                .cloned()
                .collect(),
        };
        Ok(WatchStart {
            backlog,
            rx,
            rv: g.rv,
        })
    }

    /// Subscribes to every change (for in-process observers such as the garbage collector).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StoredEvent>> {
        self.inner.lock().tx.subscribe()
    }

    /// Every object of every resource (for snapshots and the garbage collector).
    pub fn dump(&self) -> Vec<(GroupResource, Value)> {
        let g = self.inner.lock();
        g.objects
            .iter()
            .map(|((gr, _, _), v)| (gr.clone(), v.clone()))
            .collect()
    }

    /// Loads a snapshot (objects keep their resourceVersions; the counter resumes after them).
    pub(crate) fn load(&self, rv: u64, objects: Vec<(GroupResource, Value)>) {
        let mut g = self.inner.lock();
        for (gr, o) in objects {
            let key = (
                gr,
                meta_str(&o, "namespace").to_string(),
                meta_str(&o, "name").to_string(),
            );
            g.objects.insert(key, o);
        }
        g.rv = g.rv.max(rv);
        g.compacted = g.rv;
    }
}

fn list_in(g: &Inner, gr: &GroupResource, ns: Option<&str>) -> Vec<Value> {
    let start = (gr.clone(), ns.unwrap_or("").to_string(), String::new());
    g.objects
        .range(start..)
        .take_while(|((g2, n2, _), _)| g2 == gr && ns.is_none_or(|ns| ns == n2))
        .map(|(_, v)| v.clone())
        .collect()
}

/// A transaction over the locked store.
pub struct Txn<'a> {
    inner: &'a mut Inner,
}

impl Txn<'_> {
    pub fn get(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<&Value> {
        self.inner
            .objects
            .get(&(gr.clone(), ns.to_string(), name.to_string()))
    }

    pub fn list(&self, gr: &GroupResource, ns: Option<&str>) -> Vec<Value> {
        list_in(self.inner, gr, ns)
    }

    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// Every stored object with its group/resource.
    pub fn all(&self) -> Vec<(GroupResource, Value)> {
        self.inner
            .objects
            .iter()
            .map(|((gr, _, _), v)| (gr.clone(), v.clone()))
            .collect()
    }

    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.inner.registry
    }

    pub fn resource_version(&self) -> u64 {
        self.inner.rv
    }

    /// Stores `obj` (its namespace/name from metadata) with a fresh resourceVersion and emits
    /// ADDED or MODIFIED. Returns the stored object.
    pub fn put(&mut self, gr: &GroupResource, mut obj: Value) -> Value {
        self.inner.rv += 1;
        let rv = self.inner.rv;
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let ns = meta_str(&obj, "namespace").to_string();
        let key = (gr.clone(), ns.clone(), meta_str(&obj, "name").to_string());
        let prev = self.inner.objects.insert(key, obj.clone());
        let kind = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.emit(StoredEvent {
            rv,
            gr: gr.clone(),
            namespace: ns,
            kind,
            object: Arc::new(obj.clone()),
            prev: prev.map(Arc::new),
        });
        obj
    }

    /// Removes an object, emitting DELETED with a fresh resourceVersion.
    pub fn remove(&mut self, gr: &GroupResource, ns: &str, name: &str) -> Option<Value> {
        let key = (gr.clone(), ns.to_string(), name.to_string());
        let mut obj = self.inner.objects.remove(&key)?;
        self.inner.rv += 1;
        let rv = self.inner.rv;
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        self.emit(StoredEvent {
            rv,
            gr: gr.clone(),
            namespace: ns.to_string(),
            kind: EventType::Deleted,
            object: Arc::new(obj.clone()),
            prev: None,
        });
        Some(obj)
    }

    fn emit(&mut self, ev: StoredEvent) {
        let ev = Arc::new(ev);
        self.inner.history.push_back(ev.clone());
        while self.inner.history.len() > HISTORY {
            if let Some(old) = self.inner.history.pop_front() {
                self.inner.compacted = old.rv;
            }
        }
        // No receivers is fine: nobody is watching.
        let _ = self.inner.tx.send(ev);
    }
}
