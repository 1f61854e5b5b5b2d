//! The WATCH registry's state (each server its own). What WATCH, EXEC and the writes that
//! dirty a watch do with it is the transaction commands' (`crate::cmd::transaction`).

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

/// One client's watch on one key, with what Redis 7.0 remembers about it.
pub(crate) struct Watcher {
    pub(crate) id: u64,
    pub(crate) dirty: Arc<AtomicBool>,
    /// The key existed (and was not logically expired) at WATCH time.
    pub(crate) existed: bool,
    /// The key was logically expired at WATCH time (Redis's `wk->expired`): its later
    /// deletion is no change; only a write that leaves it existing is.
    pub(crate) expired: bool,
    /// Written since WATCH while `expired` (decided at EXEC by whether the key exists).
    pub(crate) pending: bool,
}

/// Watched keys → their watchers.
pub(crate) type WatchMap = hashbrown::HashMap<(usize, Bytes), Vec<Watcher>>;

#[derive(Default)]
pub struct Watches {
    pub(crate) map: Mutex<WatchMap>,
    pub(crate) count: AtomicUsize,
}
