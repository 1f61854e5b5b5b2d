//! Master/replica replication (the Redis 7.0 protocol: PSYNC, +FULLRESYNC, +CONTINUE,
//! REPLCONF ACK/GETACK, the replication backlog).
//!
//! - [`backlog`]: the ring of recent stream bytes addressed by offset (partial resync).
//! - [`master`]: the write stream subscriber, full resyncs (an RDB of the dataset at an exact
//!   stream offset) and the per-replica connection loop; WAIT.
//! - [`replica`]: the link to our master: handshake, loading the RDB, applying the stream.
//!
//! One [`Repl`] lives in the server. Its `shared` mutex orders every byte of the stream: the
//! write subscriber appends under it (called with the command's stripe locks held), so the
//! stream order is the execution order of every key.

pub mod backlog;
pub mod commands;
pub mod decoder;
pub mod failover;
pub mod load_feed;
pub mod master;
pub mod replica;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::cmd::{flags, CommandSpec};
use crate::server::{ClientState, Server};

pub use master::ReplicaInfo;

/// A 40-hex-digit replication id.
pub fn new_replid() -> String {
    (0..40)
        .map(|_| {
            let n: u8 = rand::random::<u8>() % 16;
            char::from_digit(n as u32, 16).unwrap_or('0')
        })
        .collect()
}

/// The replication history of this node and everything fed to replicas.
pub struct Shared {
    pub replid: String,
    /// The previous history we can still serve partial resyncs of (after a promotion).
    pub replid2: String,
    /// First offset NOT valid for `replid2` (-1: none).
    pub second_offset: i64,
    /// master_repl_offset: stream bytes produced (master) or processed (replica).
    pub offset: u64,
    /// The replication buffer: the backlog and every replica's output (see [`backlog`]).
    pub backlog: Option<backlog::Backlog>,
    /// Database of the last command fed (None: the next write starts with SELECT).
    pub last_db: Option<usize>,
    /// Connected replicas (master side).
    pub replicas: Vec<Arc<ReplicaInfo>>,
    /// client-output-buffer-limit for replicas, as last read from the config (the stream
    /// checks it when it adds a block).
    pub replica_limit: crate::config::BufLimit,
}

impl Shared {
    /// Stops serving `replid` and starts a new history at the current offset (a replica
    /// promoted to master): replicas of the old master can still PSYNC-continue from us.
    pub fn shift_replid(&mut self) {
        self.replid2 = std::mem::replace(&mut self.replid, new_replid());
        self.second_offset = self.offset as i64 + 1;
        self.last_db = None;
    }

    /// Appends stream bytes to the replication buffer (once, whatever the number of
    /// replicas) and wakes the replicas.
    pub fn push(&mut self, data: impl AsRef<[u8]>) {
        let data = data.as_ref();
        let Some(b) = self.backlog.as_mut() else {
            return;
        };
        let added = b.append(data);
        self.offset += data.len() as u64;
        self.fed(added);
    }

    /// Appends a command (RESP multibulk, encoded straight into the buffer).
    pub fn push_command(&mut self, args: &[&[u8]]) {
        let Some(b) = self.backlog.as_mut() else {
            return;
        };
        let (n, added) = b.append_command(args);
        self.offset += n as u64;
        self.fed(added);
    }

    /// After bytes were appended: when a block was added, the replicas' output limits are
    /// checked and the backlog trimmed (Redis does both only then); replicas waiting for
    /// bytes are woken.
    fn fed(&mut self, added: bool) {
        if added {
            self.check_replica_limits();
            self.trim(backlog::TRIM_PER_CALL);
        }
        for r in &self.replicas {
            r.wake();
        }
    }

    /// Closes the replicas over client-output-buffer-limit: their share of the buffer is
    /// from the block they are reading to its end. A hard limit under repl-backlog-size
    /// counts as repl-backlog-size, as in Redis: the replica shares the backlog's memory,
    /// and a partial resync it was granted must not get it cut at once.
    pub fn check_replica_limits(&self) {
        let Some(b) = self.backlog.as_ref() else {
            return;
        };
        let mut lim = self.replica_limit;
        if lim.hard > 0 && lim.hard < b.size() as u64 {
            lim.hard = b.size() as u64;
        }
        if lim.hard == 0 && lim.soft == 0 {
            return;
        }
        let now = crate::server::now_ms();
        for r in &self.replicas {
            if let Some(from) = r.reading_from() {
                r.check_limit(b.pending_memory(from) as u64, lim, now);
            }
        }
    }

    /// Trims the backlog (at most `max_blocks` blocks) up to the first byte a replica
    /// still has to send.
    pub fn trim(&mut self, max_blocks: usize) {
        let pinned = self.replicas.iter().filter_map(|r| r.reading_from()).min();
        if let Some(b) = self.backlog.as_mut() {
            b.trim(pinned, max_blocks);
        }
    }

    /// Creates the backlog at the current offset if there is none.
    pub fn ensure_backlog(&mut self, size: usize) {
        if self.backlog.is_none() {
            self.backlog = Some(backlog::Backlog::new(size, self.offset));
            self.last_db = None;
        }
    }

    /// Starts a new, empty buffer at `offset` (a full sync from our master): our own
    /// replicas are closed first, since what they were reading is gone.
    pub fn reset_backlog(&mut self, size: usize, offset: u64) {
        for r in &self.replicas {
            r.kill();
        }
        self.offset = offset;
        self.backlog = Some(backlog::Backlog::new(size, offset));
        self.last_db = None;
    }
}

/// Where a replica's master is, and the task serving the link.
pub struct MasterTarget {
    pub host: String,
    pub port: u16,
    pub task: Option<tokio::task::AbortHandle>,
}

/// Replication state of the server.
pub struct Repl {
    pub shared: Mutex<Shared>,
    /// Some when this node is a replica.
    pub master: Mutex<Option<MasterTarget>>,
    /// Fast check of `master.is_some()`.
    pub is_replica: AtomicBool,
    /// The main runtime (the process's first thread), where the link to our master runs
    /// whichever thread ran REPLICAOF: a script busy on an I/O thread does not stall it, and
    /// a SIGSTOP, which the kernel hands to that thread first, stops the link before it
    /// reads another byte (with the link on an I/O thread, it went on until the main thread
    /// got a CPU to start the group stop: Redis's unit/wait saw a stopped replica ACK).
    pub rt: std::sync::OnceLock<tokio::runtime::Handle>,
    pub link_up: AtomicBool,
    pub sync_in_progress: AtomicBool,
    /// Master side: the sync group still taking replicas (see [`master::SyncGroup`]).
    pub sync_group: Mutex<Option<Arc<master::SyncGroup>>>,
    /// Master side: sync snapshots being made (INFO rdb_bgsave_in_progress, as Redis's
    /// diskless BGSAVE child).
    pub sync_snapshots: AtomicUsize,
    /// Between the link's TCP connect and the master's answer to PSYNC (ROLE's
    /// "handshake" state).
    pub handshake: AtomicBool,
    /// INFO async_loading: a full resync under repl-diskless-load swapdb with our own
    /// history, during which the old data is still served (see `replica`).
    pub async_loading: AtomicBool,
    /// Unix ms of the last byte from our master.
    pub last_io_ms: AtomicU64,
    /// Bytes of the master's stream read but not applied yet (a command held by CLIENT
    /// PAUSE and what follows it): INFO's slave_read_repl_offset is the offset plus these.
    pub unapplied: AtomicU64,
    /// Unix ms the link went down (0: never up).
    pub link_down_since: AtomicU64,
    /// Bumped on every REPLICAOF: a link task of an older generation stops.
    pub generation: AtomicU64,
    /// Client id of the link to our master (its commands bypass the read-only check).
    pub master_client: AtomicU64,
    pub subscribed: AtomicBool,
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    /// Replicas whose last ACK is within min-replicas-max-lag (kept by the cron).
    pub good_replicas: AtomicUsize,
    /// Woken on every replica ACK (WAIT).
    pub ack: tokio::sync::Notify,
    /// REPLCONF listening-port / ip-address / capa of connections before their PSYNC.
    pub handshakes: Mutex<HashMap<u64, master::Handshake>>,
    /// Held while one command of our master's stream is applied and counted, and while
    /// REPLICAOF changes the target: a promotion falls between two commands, never inside.
    /// Reentrant: a command of the stream that saves (FLUSHALL with save points) takes it
    /// again for the save, on the same thread.
    pub apply_lock: parking_lot::ReentrantMutex<()>,
    /// The database our master's stream had selected (kept across a partial resync, which
    /// does not repeat the SELECT).
    pub master_db: AtomicUsize,
    /// Replication history read from dump.rdb at start (its repl-id / repl-offset /
    /// repl-stream-db aux fields), adopted by the first REPLICAOF so a restarted replica
    /// continues with a partial resync, as Redis 7.0 does.
    pub restored: Mutex<Option<tessera_rdb::ReplAux>>,
    /// The DELs of keys the start-up load dropped as expired, the restored history's
    /// first bytes (see [`load_feed`]).
    pub load_feed: load_feed::LoadFeed,
    /// The dirty counter when replication started (after the load): see
    /// [`Repl::adopt_restored_as_master`].
    dirty_at_start: AtomicU64,
    /// An ongoing SHUTDOWN's wait for replicas (persist::shutdown).
    pub shutdown: crate::persist::shutdown::ShutdownCtl,
    /// FAILOVER's state (see [`failover`]).
    pub failover: failover::FailoverCtl,
}

impl Default for Repl {
    fn default() -> Self {
        Repl {
            shared: Mutex::new(Shared {
                replid: new_replid(),
                replid2: "0".repeat(40),
                second_offset: -1,
                offset: 0,
                backlog: None,
                last_db: None,
                replicas: Vec::new(),
                replica_limit: Default::default(),
            }),
            master: Mutex::new(None),
            is_replica: AtomicBool::new(false),
            rt: std::sync::OnceLock::new(),
            link_up: AtomicBool::new(false),
            sync_in_progress: AtomicBool::new(false),
            sync_group: Mutex::new(None),
            sync_snapshots: AtomicUsize::new(0),
            async_loading: AtomicBool::new(false),
            handshake: AtomicBool::new(false),
            last_io_ms: AtomicU64::new(0),
            unapplied: AtomicU64::new(0),
            link_down_since: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            master_client: AtomicU64::new(0),
            subscribed: AtomicBool::new(false),
            sync_full: AtomicU64::new(0),
            sync_partial_ok: AtomicU64::new(0),
            sync_partial_err: AtomicU64::new(0),
            good_replicas: AtomicUsize::new(0),
            ack: tokio::sync::Notify::new(),
            handshakes: Mutex::new(HashMap::new()),
            apply_lock: parking_lot::ReentrantMutex::new(()),
            master_db: AtomicUsize::new(0),
            restored: Mutex::new(None),
            load_feed: Default::default(),
            dirty_at_start: AtomicU64::new(0),
            shutdown: Default::default(),
            failover: Default::default(),
        }
    }
}

impl Repl {
    /// CONFIG RESETSTAT's share: the resync counters restart at 0 (Redis's
    /// resetServerStats).
    pub fn reset_stats(&self) {
        self.sync_full.store(0, Ordering::Relaxed);
        self.sync_partial_ok.store(0, Ordering::Relaxed);
        self.sync_partial_err.store(0, Ordering::Relaxed);
    }

    #[inline]
    pub fn is_replica(&self) -> bool {
        self.is_replica.load(Ordering::Relaxed)
    }

    /// What a foreground save records so that this replica, restarted from the file, can
    /// PSYNC from where its data ends: our master's replid, the offset applied so far and
    /// the stream's selected database. None for a master, during a full sync, or before the
    /// first sync. Call with `apply_lock` held, so that no stream command lands between the
    /// offset read here and the keys written after it.
    pub fn save_info(&self) -> Option<tessera_rdb::ReplAux> {
        if !self.is_replica() || self.sync_in_progress.load(Ordering::Acquire) {
            return None;
        }
        let sh = self.shared.lock();
        if sh.offset == 0 && sh.backlog.is_none() {
            return None;
        }
        Some(tessera_rdb::ReplAux {
            stream_db: self.master_db.load(Ordering::Relaxed) as u64,
            repl_id: sh.replid.clone(),
            repl_offset: sh.offset as i64,
        })
    }

    /// INFO memory's (mem_replication_backlog, mem_total_replication_buffers,
    /// mem_clients_slaves), as Redis 7.0's getMemoryOverheadData: the backlog and its
    /// replicas share one buffer; with replicas, what exceeds repl-backlog-size is counted
    /// as theirs.
    pub fn buffer_memory(&self) -> (u64, u64, u64) {
        let sh = self.shared.lock();
        let Some(b) = sh.backlog.as_ref() else {
            return (0, 0, 0);
        };
        let (total, size) = (b.memory() as u64, b.size() as u64);
        if !sh.replicas.is_empty() && total > size {
            (size, total, total - size)
        } else {
            (total, total, 0)
        }
    }

    /// The replication buffer's part that maxmemory leaves out of its count (Redis's
    /// freeMemoryGetNotCountedMemory): what exceeds repl-backlog-size and the headers of
    /// the blocks it fills, replicas or not (a backlog still being trimmed after a slow
    /// replica left is theirs too), or a replica falling behind would make its master
    /// evict its data.
    pub fn not_counted_memory(&self) -> u64 {
        let sh = self.shared.lock();
        let Some(b) = sh.backlog.as_ref() else {
            return 0;
        };
        let counted = b.size() + (b.size() / backlog::BLOCK_MIN + 1) * backlog::block_overhead();
        b.memory().saturating_sub(counted) as u64
    }

    /// What the shutdown's final save of a master records (Redis 7.0 saves repl-id and
    /// repl-offset for a master too): the stream offset, valid only while client writes
    /// are stopped and drained, so that the restarted master lets its replicas continue.
    pub fn master_save_info(&self) -> Option<tessera_rdb::ReplAux> {
        if self.is_replica() || !self.shutdown.writes_stopped() {
            return None;
        }
        let sh = self.shared.lock();
        sh.backlog.as_ref()?;
        Some(tessera_rdb::ReplAux {
            stream_db: sh.last_db.unwrap_or(0) as u64,
            repl_id: sh.replid.clone(),
            repl_offset: sh.offset as i64,
        })
    }

    /// A master restarted from a file that recorded its history (see
    /// [`Repl::master_save_info`]) takes it as its second history at the first replica's
    /// PSYNC, with a fresh replid and a backlog at that offset, as Redis 7.0 does at load,
    /// so its replicas continue partially. The DELs of keys the load dropped as expired
    /// follow (`load_feed`: the offset grows by them, as in Redis). A write since the start
    /// (the dirty counter moved, `dirty`) makes the file's offset stale: it is dropped then.
    pub fn adopt_restored_as_master(&self, backlog_size: usize, dirty: u64) {
        if self.is_replica() {
            return;
        }
        let fed = self.load_feed.take();
        if dirty != self.dirty_at_start.load(Ordering::Relaxed) {
            self.restored.lock().take();
            return;
        }
        let Some(r) = self.restored.lock().take() else {
            return;
        };
        if r.repl_offset < 0 || r.repl_id.len() != 40 {
            return;
        }
        let mut sh = self.shared.lock();
        if sh.offset != 0 || sh.backlog.is_some() {
            return;
        }
        tracing::info!(
            replid2 = %r.repl_id,
            offset = r.repl_offset,
            expired_bytes = fed.total,
            "Restored the replication history of this master from the RDB file"
        );
        sh.replid2 = r.repl_id;
        sh.second_offset = r.repl_offset + 1;
        // The bytes of the expired keys' DELs that did not fit are skipped over.
        let kept = fed.tail.len() as u64;
        sh.offset = r.repl_offset as u64 + fed.total.saturating_sub(kept);
        sh.ensure_backlog(backlog_size);
        if !fed.tail.is_empty() {
            sh.push(Bytes::from(fed.tail));
            sh.last_db = fed.last_db;
        }
    }

    /// Adopts the history read from dump.rdb (see `restored`) if this node has none yet.
    /// Called once the node knows it is a replica; a master drops it.
    fn adopt_restored(&self, as_replica: bool) {
        let Some(r) = self.restored.lock().take() else {
            return;
        };
        if !as_replica || r.repl_offset <= 0 || r.repl_id.len() != 40 {
            return;
        }
        let mut sh = self.shared.lock();
        if sh.offset != 0 || sh.backlog.is_some() {
            return;
        }
        tracing::info!(
            replid = %r.repl_id,
            offset = r.repl_offset,
            "Restored the replication ID and offset from the RDB file: will try a partial resync"
        );
        sh.replid = r.repl_id;
        sh.offset = r.repl_offset as u64;
        self.master_db
            .store(r.stream_db as usize, Ordering::Relaxed);
    }
}

pub use crate::server::clients::Pending;

/// The dispatcher's check before running a command: a read-only replica refuses writes
/// from normal clients; a replica with `replica-serve-stale-data no` refuses most commands
/// while its link is down; a master refuses writes without enough good replicas.
/// Commands flagged `no_async_loading` in Redis 7.0.15's command table.
const NO_ASYNC_LOADING: &[&str] = &[
    "bgrewriteaof",
    "bgsave",
    "save",
    "replicaof",
    "slaveof",
    "sync",
    "psync",
    "cluster|addslots",
    "cluster|addslotsrange",
    "cluster|bumpepoch",
    "cluster|delslots",
    "cluster|delslotsrange",
    "cluster|failover",
    "cluster|flushslots",
    "cluster|forget",
    "cluster|meet",
    "cluster|replicate",
    "cluster|saveconfig",
    "cluster|set-config-epoch",
    "cluster|setslot",
];

pub fn deny(srv: &Server, cl: &ClientState, cmd: &CommandSpec) -> Option<&'static str> {
    deny_with(srv, cl, cmd, &srv.config.read().typed)
}

/// [`deny`] under the settings snapshot the caller holds (a command's checks).
pub fn deny_with(
    srv: &Server,
    cl: &ClientState,
    cmd: &CommandSpec,
    c: &crate::config::Settings,
) -> Option<&'static str> {
    let repl = &srv.repl;
    // The master's stream, and the server's own clients (the AOF replay: DEBUG LOADAOF on
    // a read-only replica replays its writes, as Redis's fake AOF client does).
    if cl.from_master
        || cl.internal
        || cl.id == repl.master_client.load(Ordering::Relaxed) && cl.id != 0
    {
        return None;
    }
    // Redis 7.0's no-async-loading flag: commands that would restart or save the data
    // while a swapdb full sync is still loading beside the old data.
    if repl.async_loading.load(Ordering::Relaxed)
        && NO_ASYNC_LOADING.contains(&cmd.full_name.as_str())
    {
        return Some("LOADING Redis is loading the dataset in memory");
    }
    if repl.is_replica() {
        let (serve_stale, read_only) = (c.replica_serve_stale_data, c.replica_read_only);
        if !repl.link_up.load(Ordering::Relaxed) && !cmd.has(flags::STALE) && !serve_stale {
            return Some(
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            );
        }
        if cmd.has(flags::WRITE) && read_only {
            return Some("READONLY You can't write against a read only replica.");
        }
        return None;
    }
    if cmd.has(flags::WRITE) {
        return too_few_replicas_with(srv, c);
    }
    None
}

/// min-replicas-to-write: a master with fewer good replicas refuses writes. Also called
/// for scripts whose flags make them writes (FCALL of a function without no-writes, an
/// EVAL whose shebang lacks it), as Redis checks their effective flags.
pub fn too_few_replicas(srv: &Server) -> Option<&'static str> {
    too_few_replicas_with(srv, &srv.config.read().typed)
}

fn too_few_replicas_with(srv: &Server, c: &crate::config::Settings) -> Option<&'static str> {
    let repl = &srv.repl;
    if repl.is_replica() {
        return None;
    }
    let (min, max_lag) = (c.min_replicas_to_write as usize, c.min_replicas_max_lag);
    if min > 0 && repl.good_replicas.load(Ordering::Relaxed) < min {
        // The cron's count may predate a CONFIG SET of min-replicas-*: recount before
        // refusing (Redis refreshes the count when those change).
        let good = master::good_count(&repl.shared.lock(), max_lag);
        repl.good_replicas.store(good, Ordering::Relaxed);
        if good < min {
            return Some("NOREPLICAS Not enough good replicas to write.");
        }
    }
    None
}

/// Starts replication at boot: the subscriber, the cron, and `replicaof` from the config.
pub fn start(srv: &Arc<Server>) {
    if let Ok(h) = tokio::runtime::Handle::try_current() {
        let _ = srv.repl.rt.set(h);
    }
    srv.repl
        .dirty_at_start
        .store(srv.stats.dirty.load(Ordering::Relaxed), Ordering::Relaxed);
    master::start_cron(srv);
    let target = srv.config.read().typed.replicaof.clone();
    if target.is_some() {
        set_master(srv, target);
    }
}

/// A master turning into a replica releases its blocked clients with -UNBLOCKED (Redis's
/// disconnectAllBlockedClients): served later, they would pop what the new master's
/// stream pushes and the data sets would diverge.
fn release_blocked_clients(srv: &Server) {
    if !srv.blocking.has_waiters() {
        return;
    }
    for h in srv.clients.all() {
        crate::blocking::Blocking::unblock(srv, h.id, |resp3, _| {
            let mut o = crate::resp::Out::new(resp3);
            o.error("UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)");
            o.buf
        });
    }
}

/// Keeps the config's `replicaof` the node's current master, so CONFIG REWRITE writes it
/// (or drops it) as Redis's rewriteConfigReplicaOfOption; not in cluster mode, where
/// nodes.conf says whom a node replicates. (The one way to change a special directive is
/// by its name.)
fn record_in_config(srv: &Server, target: &Option<(String, u16)>) {
    if srv.cluster.get().is_some() || srv.config.read().typed.replicaof == *target {
        return;
    }
    let args = match target {
        Some((host, port)) => vec![host.clone(), port.to_string()],
        None => vec!["no".to_string(), "one".to_string()],
    };
    if let Err(e) = srv.config.update(|c| c.set_directive("replicaof", &args)) {
        tracing::warn!(error = %e, "recording replicaof in the config");
    }
}

/// Makes this node a replica of `master`, or a master (`None`). Idempotent.
pub fn set_master(srv: &Arc<Server>, target: Option<(String, u16)>) {
    master::ensure_subscribed(srv);
    record_in_config(srv, &target);
    srv.repl.adopt_restored(target.is_some());
    let mut m = srv.repl.master.lock();
    match target {
        None => {
            let Some(old) = m.take() else {
                return;
            };
            if let Some(t) = old.task {
                t.abort();
            }
            let _apply = srv.repl.apply_lock.lock();
            srv.repl.generation.fetch_add(1, Ordering::AcqRel);
            srv.repl.is_replica.store(false, Ordering::Release);
            srv.repl.link_up.store(false, Ordering::Release);
            srv.repl.sync_in_progress.store(false, Ordering::Release);
            srv.repl.master_client.store(0, Ordering::Release);
            let mut sh = srv.repl.shared.lock();
            sh.shift_replid();
            // Our replicas learn the new replid by reconnecting (they continue partially).
            let subs = sh.replicas.clone();
            let size = srv.config.read().typed.repl_backlog_size as usize;
            sh.ensure_backlog(size);
            tracing::info!(
                replid = %sh.replid,
                replid2 = %sh.replid2,
                "MASTER MODE enabled (user request from 'id=0')"
            );
            drop(sh);
            for r in subs {
                r.kill();
            }
        }
        Some((host, port)) => {
            if m.as_ref().is_some_and(|t| t.host == host && t.port == port) {
                return;
            }
            if let Some(t) = m.take().and_then(|t| t.task) {
                t.abort();
            }
            let gen = {
                let _apply = srv.repl.apply_lock.lock();
                srv.repl.generation.fetch_add(1, Ordering::AcqRel) + 1
            };
            let was_master = !srv.repl.is_replica();
            srv.repl.is_replica.store(true, Ordering::Release);
            if was_master {
                release_blocked_clients(srv);
            }
            srv.repl.link_up.store(false, Ordering::Release);
            srv.repl
                .link_down_since
                .store(crate::server::now_ms(), Ordering::Relaxed);
            // Our own replicas stay: the new master may continue our history (a partial
            // resync), and they with it. A full sync closes them once its payload is in,
            // a partial one with a new replid at once (Redis's replicationSetMaster).
            let rt = srv.repl.rt.get().cloned();
            let task = rt
                .or_else(|| tokio::runtime::Handle::try_current().ok())
                .map(|h| {
                    h.spawn(replica::run(srv.clone(), host.clone(), port, gen))
                        .abort_handle()
                });
            tracing::info!(%host, port, "Connecting to MASTER");
            *m = Some(MasterTarget { host, port, task });
        }
    }
}

/// Runs what a command left pending (see [`Pending`]). Returns false when the connection
/// must end (it was a replica link).
pub async fn run_pending(
    srv: &Arc<Server>,
    sock: &mut crate::server::unix::ClientStream,
    cl: &mut ClientState,
    out: &mut crate::resp::Out,
    inbuf: &mut bytes::BytesMut,
    p: Pending,
) -> std::io::Result<bool> {
    use tokio::io::AsyncWriteExt;
    match p {
        Pending::Sync { psync } => {
            crate::persist::aof::before_reply(srv, cl.aof_mark).await;
            master::serve_replica(srv, sock, cl, out, inbuf, psync).await?;
            Ok(false)
        }
        Pending::Wait {
            numreplicas,
            timeout_ms,
            offset,
        } => {
            out.flatten();
            if !out.buf.is_empty() {
                crate::persist::aof::before_reply(srv, cl.aof_mark).await;
                sock.write_all(&out.buf).await?;
                out.buf.clear();
            }
            let n = master::wait(srv, &cl.handle, numreplicas, timeout_ms, offset).await;
            out.int(n as i64);
            cl.now_ms = 0;
            Ok(true)
        }
        Pending::SlotImport { job } => {
            crate::persist::aof::before_reply(srv, cl.aof_mark).await;
            crate::cluster::asm::import::serve(srv, sock, cl, out, inbuf, job).await?;
            Ok(false)
        }
        Pending::Shutdown { abort, force } => {
            if abort {
                if crate::persist::shutdown::abort(srv) {
                    out.ok();
                } else {
                    out.error("ERR No shutdown in progress.");
                }
                return Ok(true);
            }
            out.flatten();
            if !out.buf.is_empty() {
                crate::persist::aof::before_reply(srv, cl.aof_mark).await;
                sock.write_all(&out.buf).await?;
                out.buf.clear();
            }
            if !crate::persist::shutdown::block_caller(srv, &cl.handle, force).await {
                return Ok(false);
            }
            out.error(crate::persist::shutdown::GAVE_UP_REPLY);
            Ok(true)
        }
    }
}

/// The `# Replication` section of INFO (Redis 7.0 field names).
pub fn info(srv: &Server) -> String {
    use std::fmt::Write;
    let r = &srv.repl;
    let master = r.master.lock().as_ref().map(|m| (m.host.clone(), m.port));
    let sh = r.shared.lock();
    let mut s = String::from("# Replication\r\n");
    let now = crate::server::now_ms();
    match &master {
        Some((host, port)) => {
            let up = r.link_up.load(Ordering::Relaxed);
            let c = srv.config.read();
            let _ = write!(
                s,
                "role:slave\r\nmaster_host:{host}\r\nmaster_port:{port}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\n",
                if up { "up" } else { "down" },
                if up {
                    (now.saturating_sub(r.last_io_ms.load(Ordering::Relaxed)) / 1000) as i64
                } else {
                    -1
                },
                r.sync_in_progress.load(Ordering::Relaxed) as u8,
                sh.offset
                    .saturating_add(r.unapplied.load(Ordering::Relaxed)),
                sh.offset,
            );
            if !up {
                let since = r.link_down_since.load(Ordering::Relaxed);
                let _ = write!(
                    s,
                    "master_link_down_since_seconds:{}\r\n",
                    if since == 0 {
                        -1
                    } else {
                        (now.saturating_sub(since) / 1000) as i64
                    }
                );
            }
            let _ = write!(
                s,
                "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:1\r\n",
                c.typed.replica_priority, c.typed.replica_read_only as u8,
            );
        }
        None => s.push_str("role:master\r\n"),
    }
    let _ = write!(s, "connected_slaves:{}\r\n", sh.replicas.len());
    if master.is_none() {
        let min = srv.config.read().typed.min_replicas_to_write;
        if min > 0 {
            let _ = write!(
                s,
                "min_slaves_good_slaves:{}\r\n",
                r.good_replicas.load(Ordering::Relaxed)
            );
        }
    }
    for (i, x) in sh.replicas.iter().enumerate() {
        let _ = write!(
            s,
            "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
            x.ip,
            x.port.load(Ordering::Relaxed),
            x.state_name(),
            x.ack_offset.load(Ordering::Relaxed),
            x.lag()
        );
    }
    let (active, size, first, hist) = match &sh.backlog {
        Some(b) => (1, b.size(), b.first_byte_offset(), b.histlen()),
        None => (0, srv.config.read().typed.repl_backlog_size as usize, 0, 0),
    };
    let _ = write!(
        s,
        "master_failover_state:{}\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{active}\r\nrepl_backlog_size:{size}\r\nrepl_backlog_first_byte_offset:{first}\r\nrepl_backlog_histlen:{hist}\r\n",
        r.failover.phase().name(),
        sh.replid,
        sh.replid2,
        sh.offset,
        sh.second_offset,
    );
    s
}

/// The replication counters of INFO stats.
pub fn info_stats(srv: &Server) -> String {
    let r = &srv.repl;
    format!(
        "sync_full:{}\r\nsync_partial_ok:{}\r\nsync_partial_err:{}\r\n",
        r.sync_full.load(Ordering::Relaxed),
        r.sync_partial_ok.load(Ordering::Relaxed),
        r.sync_partial_err.load(Ordering::Relaxed),
    )
}
