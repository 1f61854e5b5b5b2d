//! nodes.conf saving with group commit, off the state lock.
//!
//! Redis 7.0 marks config changes (CLUSTER_TODO_SAVE_CONFIG, + _FSYNC_CONFIG for epochs and
//! votes) and saves once in `clusterBeforeSleep`, before any reply of that event-loop turn
//! is written. Here every change gets a sequence number under the state lock; after
//! unlocking, the thread that made it calls [`Saver::save_upto`], which returns once a save
//! that *started after* the change has finished. Whoever holds the save mutex renders the
//! newest state and writes it, so one write (and one fsync) covers every change made before
//! it began, and concurrent callers find their change already on disk.

use std::path::PathBuf;

use parking_lot::Mutex;
use tracing::error;

use crate::nodes_conf;
use crate::state::ClusterState;

/// Counters for tests and CLUSTER INFO-style introspection.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SaveStats {
    /// Files written.
    pub writes: u64,
    /// Of those, writes that were fsynced.
    pub fsyncs: u64,
}

#[derive(Default)]
struct Saved {
    /// Every change with `dirty_seq <= seq` is in the file.
    seq: u64,
    stats: SaveStats,
}

/// Serialises nodes.conf writes and remembers what is already on disk.
#[derive(Default)]
pub(crate) struct Saver {
    saved: Mutex<Saved>,
}

/// What `take_dirty` found under the state lock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pending {
    pub seq: u64,
    /// The change must be fsynced before anything else leaves this node.
    pub fsync: bool,
}

/// Turns the state's `todo_save`/`todo_fsync` flags into a sequence number (state locked).
pub(crate) fn take_dirty(st: &mut ClusterState) -> Option<Pending> {
    let flush = std::mem::take(&mut st.todo_flush);
    if !st.todo_save && !st.todo_fsync {
        // Nothing new: a flush waits for what is already numbered (free if on disk).
        return (flush && st.dirty_seq > 0).then_some(Pending {
            seq: st.dirty_seq,
            fsync: false,
        });
    }
    st.dirty_seq += 1;
    let fsync = st.todo_fsync;
    if fsync {
        st.fsync_seq = st.dirty_seq;
    }
    st.todo_save = false;
    st.todo_fsync = false;
    Some(Pending {
        seq: st.dirty_seq,
        fsync,
    })
}

impl Saver {
    /// Returns once every change up to `seq` is written (fsynced if any of them asked).
    /// `render` is called with the state locked and returns (content, newest seq, newest
    /// fsync seq, path).
    pub(crate) fn save_upto(&self, seq: u64, render: impl FnOnce() -> (String, u64, u64, PathBuf)) {
        let mut saved = self.saved.lock();
        if saved.seq >= seq {
            return;
        }
        let (content, newest, fsync_seq, path) = render();
        let fsync = fsync_seq > saved.seq;
        if let Err(e) = nodes_conf::write_file(&path, &content, fsync) {
            error!(error = %e, "cannot save cluster config");
        }
        saved.stats.writes += 1;
        if fsync {
            saved.stats.fsyncs += 1;
        }
        saved.seq = newest;
    }

    pub(crate) fn stats(&self) -> SaveStats {
        self.saved.lock().stats
    }
}

/// Renders nodes.conf for [`Saver::save_upto`] (state locked by the caller).
pub(crate) fn render(st: &ClusterState) -> (String, u64, u64, PathBuf) {
    (
        nodes_conf::render(st),
        st.dirty_seq,
        st.fsync_seq,
        st.config.config_file.clone(),
    )
}
