//! Master side: the write-stream subscriber, SYNC/PSYNC (full and partial resync), the
//! per-replica connection loop, the replication cron (PING, good-replica count, cluster
//! offsets) and WAIT.
//!
//! A full resync takes an exact snapshot without stopping the world: a thread locks every
//! stripe (in order, like any command), registers the replica at the current stream offset
//! under the stream mutex, then copies and releases the stripes one by one. A write can only
//! touch a stripe after it was copied, and writers feed the stream with their stripes held,
//! so every write before the offset is in the snapshot and every write after it is in the
//! replica's buffer — nothing lost, nothing applied twice.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::backlog::encode;
use super::Shared;
use crate::cmd::eq_ic;
use crate::persist::snapshot::encode_locked;
use crate::propagate::{Write, WriteSubscriber};
use crate::resp::{recycle_view, Limits, Out, Parser};
use crate::server::unix::ClientStream;
use crate::server::{now_ms, ClientHandle, ClientState, Server};

/// What a connection said with REPLCONF before its PSYNC.
#[derive(Debug, Clone, Default)]
pub struct Handshake {
    pub listening_port: u16,
    pub ip: Option<String>,
    /// REPLCONF rdb-filter-only (redis-cli --functions-rdb): what the full sync's RDB leaves
    /// out, as Redis's SLAVE_REQ_RDB_EXCLUDE_DATA / _FUNCTIONS.
    pub rdb_filter: RdbFilter,
}

/// Parts of the dataset a full sync's RDB leaves out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RdbFilter {
    pub exclude_data: bool,
    pub exclude_functions: bool,
}

impl RdbFilter {
    /// REPLCONF rdb-filter-only's value, as Redis 7.0: the parts to include, separated by
    /// spaces; only `functions` exists (so "" leaves everything out). Err: the bad word.
    pub fn parse(v: &[u8]) -> Result<RdbFilter, String> {
        let mut f = RdbFilter {
            exclude_data: true,
            exclude_functions: true,
        };
        for w in v
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty())
        {
            if w.eq_ignore_ascii_case(b"functions") {
                f.exclude_functions = false;
            } else {
                return Err(String::from_utf8_lossy(w).into_owned());
            }
        }
        Ok(f)
    }
}

pub const STATE_WAIT_BGSAVE: u8 = 0;
pub const STATE_SEND_BULK: u8 = 1;
pub const STATE_ONLINE: u8 = 2;

/// A connected replica, as the stream feeder and INFO/ROLE/WAIT see it.
pub struct ReplicaInfo {
    pub id: u64,
    pub ip: String,
    pub port: AtomicU16,
    pub state: AtomicU8,
    pub ack_offset: AtomicU64,
    /// Unix ms of the last REPLCONF ACK (or of the sync start).
    pub last_ack_ms: AtomicU64,
    /// Offset of the next stream byte to send it (0: not fed yet, its full sync has not
    /// reached its snapshot). From there on, the replication buffer keeps every byte it
    /// still has to send (Redis's ref_repl_buf_node / ref_block_pos).
    next: AtomicU64,
    /// Its connection waits for stream bytes: the next feed wakes it.
    idle: AtomicBool,
    wake: tokio::sync::Notify,
    /// Its full sync was given up (the link ended): a sync snapshot leaves it out.
    gone: AtomicBool,
    /// Bytes for this replica only, outside the stream, written once it has the stream's
    /// bytes so far (the shutdown's failover request).
    aside: parking_lot::Mutex<Vec<Bytes>>,
    handle: Arc<ClientHandle>,
}

impl ReplicaInfo {
    /// Starts feeding it at stream offset `from` (call with the stream mutex held, so no
    /// byte falls between).
    fn start_at(&self, from: u64) {
        self.next.store(from, Ordering::Release);
    }

    /// The offset it reads the replication buffer from, while it is fed (a closed
    /// replica no longer holds the buffer back).
    pub fn reading_from(&self) -> Option<u64> {
        let n = self.next.load(Ordering::Acquire);
        (n != 0 && !self.handle.killed.load(Ordering::Relaxed)).then_some(n)
    }

    /// Sends `data` to this replica alone, after the stream bytes fed so far; not part of
    /// the stream (its offset does not count it).
    pub fn send(&self, data: Bytes) {
        self.aside.lock().push(data);
        self.idle.store(false, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// Wakes its connection if it waits for stream bytes.
    pub fn wake(&self) {
        if self.idle.load(Ordering::Relaxed) && self.idle.swap(false, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }

    /// client-output-buffer-limit (replica class) against `used` bytes of its share of the
    /// replication buffer: over it, the replica is closed.
    pub fn check_limit(&self, used: u64, lim: crate::config::BufLimit, now: u64) {
        if self.handle.obuf_limit_reached(used, lim, now) {
            self.handle.close_for_obuf_limit();
        }
    }

    /// Closes the replica's connection.
    pub fn kill(&self) {
        self.handle.kill();
    }

    pub fn state_name(&self) -> &'static str {
        match self.state.load(Ordering::Relaxed) {
            STATE_WAIT_BGSAVE => "wait_bgsave",
            STATE_SEND_BULK => "send_bulk",
            _ => "online",
        }
    }

    /// Seconds since the last ACK.
    pub fn lag(&self) -> u64 {
        now_ms().saturating_sub(self.last_ack_ms.load(Ordering::Relaxed)) / 1000
    }
}

/// The write subscriber: every write, in execution order, into the stream.
struct Feeder(Weak<Server>);

impl WriteSubscriber for Feeder {
    fn is_replication(&self) -> bool {
        true
    }

    fn feed(&self, w: &Write<'_>) {
        // The master's own stream is appended raw by the replica link; a replica does not
        // invent writes of its own (writable-replica writes stay local, as in Redis).
        if w.from_master {
            return;
        }
        let Some(srv) = self.0.upgrade() else {
            return;
        };
        if srv.repl.is_replica() {
            return;
        }
        let (limit, size) = {
            let c = srv.config.read();
            (c.cobl[1], c.typed.repl_backlog_size as usize)
        };
        let mut sh = srv.repl.shared.lock();
        let Some(b) = sh.backlog.as_mut() else {
            return;
        };
        // CONFIG SET applies at the next block (Redis checks limits and trims only then).
        b.set_size(size);
        sh.replica_limit = limit;
        // The command is encoded straight into the replication buffer's tail block, once
        // for the backlog and every replica (Redis 7.0's shared replication buffer).
        if sh.last_db != Some(w.db) {
            let mut dbn = itoa::Buffer::new();
            sh.push_command(&[b"SELECT", dbn.format(w.db).as_bytes()]);
            sh.last_db = Some(w.db);
        }
        sh.push_command(w.args);
    }
}

/// Registers the feeder with the write propagator once.
pub fn ensure_subscribed(srv: &Arc<Server>) {
    if srv.repl.subscribed.swap(true, Ordering::AcqRel) {
        return;
    }
    srv.persist
        .prop
        .subscribe(Arc::new(Feeder(Arc::downgrade(srv))));
}

/// Closes every replica connection (they reconnect and resync).
pub fn disconnect_replicas(srv: &Server) {
    let v: Vec<_> = srv.repl.shared.lock().replicas.clone();
    for r in v {
        r.handle.kill();
    }
}

fn backlog_size(srv: &Server) -> usize {
    srv.config.read().typed.repl_backlog_size as usize
}

/// Replication cron (every 100 ms): PING replicas, count good replicas, keep the cluster's
/// view of our offset current, follow repl-backlog-size.
pub fn start_cron(srv: &Arc<Server>) {
    let weak = Arc::downgrade(srv);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_ping = now_ms();
        loop {
            tick.tick().await;
            let Some(srv) = weak.upgrade() else {
                return;
            };
            if srv.shutting_down.load(Ordering::Relaxed) {
                return;
            }
            let (period, max_lag, size, limit) = {
                let c = srv.config.read();
                (
                    c.typed.repl_ping_replica_period.max(1) * 1000,
                    c.typed.min_replicas_max_lag,
                    c.typed.repl_backlog_size as usize,
                    c.cobl[1],
                )
            };
            let now = now_ms();
            // Read before the stream's lock: the cluster state's lock is never taken inside it.
            let mf_paused =
                now.saturating_sub(last_ping) >= period && cluster_failover_paused(&srv);
            let offset = {
                let mut sh = srv.repl.shared.lock();
                if let Some(b) = sh.backlog.as_mut() {
                    b.set_size(size);
                }
                sh.replica_limit = limit;
                // Redis's serverCron trims ten times the usual share, so the memory a
                // slow replica held comes back soon after it left.
                sh.trim(10 * super::backlog::TRIM_PER_CALL);
                srv.repl
                    .good_replicas
                    .store(good_count(&sh, max_lag), Ordering::Relaxed);
                // The PING's clock runs whether or not replicas are there, as Redis's
                // `replication_cron_loops % repl-ping-replica-period`: a replica that
                // attaches gets its first PING at the next period mark, not at once (the
                // offset would move ahead of a replica waiting for its sync, and a SHUTDOWN
                // then waits for it: integration/replication's cached-master tests).
                if now.saturating_sub(last_ping) >= period {
                    last_ping = now;
                    if !srv.repl.is_replica()
                        && !sh.replicas.is_empty()
                        && !srv.repl.failover.active()
                        && !mf_paused
                    {
                        sh.push(encode(&[b"PING"]));
                    }
                }
                sh.offset
            };
            super::failover::tick(&srv);
            if let Some(node) = srv.cluster.get() {
                let replica = srv.repl.is_replica();
                let up = srv.repl.link_up.load(Ordering::Relaxed);
                let last_io = srv.repl.last_io_ms.load(Ordering::Relaxed);
                node.with_state(|st| {
                    st.me_mut().repl_offset = offset;
                    if replica && up && last_io > 0 {
                        st.repl_last_io = last_io;
                    }
                });
            }
        }
    });
}

/// Whether a cluster manual failover holds writes paused here: the PING is then left out of
/// the stream (as Redis does), so the offset the paused master announces stays the one its
/// replica must reach.
fn cluster_failover_paused(srv: &Server) -> bool {
    srv.clients_paused()
        && srv
            .cluster
            .get()
            .is_some_and(|node| node.with_state(|st| st.mf.end != 0))
}

/// Online replicas whose last ACK is at most `max_lag` seconds old (min-replicas-to-write).
pub fn good_count(sh: &Shared, max_lag: u64) -> usize {
    sh.replicas
        .iter()
        .filter(|r| r.state.load(Ordering::Relaxed) == STATE_ONLINE && r.lag() <= max_lag)
        .count()
}

/// REPLCONF options of a connection (before its PSYNC).
pub fn note_handshake(srv: &Server, id: u64, f: impl FnOnce(&mut Handshake)) {
    let mut m = srv.repl.handshakes.lock();
    if m.len() > 10_000 {
        m.clear();
    }
    f(m.entry(id).or_default());
}

/// The replica's address when it announced none: its peer IP, or Redis's name for a unix
/// socket peer (anetFdToString's "/unixsocket").
fn peer_ip(h: &ClientHandle) -> String {
    if h.unix_socket.load(Ordering::Relaxed) {
        return "/unixsocket".into();
    }
    h.addr
        .parse::<std::net::SocketAddr>()
        .map(|a| a.ip().to_string())
        .unwrap_or_else(|_| h.addr.clone())
}

/// Tries a partial resync: on success the replica is registered, reading the replication
/// buffer from the offset it asked for; returns the replid to announce and how many bytes
/// it is behind.
fn try_continue(
    sh: &mut Shared,
    info: &Arc<ReplicaInfo>,
    replid: &[u8],
    offset: &[u8],
) -> Option<(String, u64)> {
    let off: u64 = std::str::from_utf8(offset).ok()?.parse().ok()?;
    let id = std::str::from_utf8(replid).ok()?;
    let ok_id = id.eq_ignore_ascii_case(&sh.replid)
        || (id.eq_ignore_ascii_case(&sh.replid2) && off as i64 <= sh.second_offset);
    if !ok_id || off == 0 || !sh.backlog.as_ref()?.holds(off) {
        return None;
    }
    info.ack_offset
        .store(off.saturating_sub(1), Ordering::Relaxed);
    info.start_at(off);
    sh.replicas.push(info.clone());
    Some((sh.replid.clone(), sh.offset + 1 - off))
}

/// The dataset as an RDB at an exact stream offset (see the module doc); registers the
/// replica at that offset. Sends (replid, offset) as soon as they are known.
fn snapshot(
    srv: &Server,
    members: &[Arc<ReplicaInfo>],
    at: tokio::sync::oneshot::Sender<(String, u64)>,
    filter: RdbFilter,
    abandoned: &dyn Fn() -> bool,
) -> tessera_rdb::Result<RdbImage> {
    let ndb = srv.ks.databases();
    // On a replica, a command of our master's stream is applied and then counted under this
    // lock: the snapshot must not fall between the two.
    let apply = srv.repl.apply_lock.lock();
    let mut guards: Vec<_> = (0..crate::db::STRIPES)
        .map(|i| srv.ks.lock_stripe(i))
        .collect();
    let point = {
        let mut sh = srv.repl.shared.lock();
        sh.ensure_backlog(backlog_size(srv));
        // The replica's stream starts with a SELECT.
        sh.last_db = None;
        for info in members {
            info.ack_offset.store(sh.offset, Ordering::Relaxed);
            info.start_at(sh.offset + 1);
        }
        (sh.replid.clone(), sh.offset)
    };
    drop(apply);
    let _ = at.send(point);
    // FUNCTION LOAD/DELETE/FLUSH/RESTORE hold every stripe, so the libraries read while
    // this snapshot holds them all belong to the same point of the stream.
    let libraries = srv.scripts.functions.libraries();
    let delay = crate::persist::snapshot::KeySaveDelay::frozen(srv);
    // Each stripe is encoded while it is held and let go at once: copying the keys out
    // first held every stripe longer and cost a few hundred bytes per key at the peak.
    let mut per_db: Vec<DbPart> = (0..ndb)
        .map(|db| DbPart {
            db,
            ..DbPart::default()
        })
        .collect();
    if filter.exclude_data {
        guards.clear();
    }
    for g in guards.drain(..) {
        for part in per_db.iter_mut() {
            part.encode(&g);
        }
        drop(g);
    }
    let mut w = tessera_rdb::RdbWriter::new(Vec::new())?;
    w.standard_aux(&tessera_rdb::AuxInfo {
        used_mem: crate::alloc::used_memory(),
        ..Default::default()
    })?;
    // Function libraries come before the databases, as in dump.rdb.
    for lib in libraries.iter().filter(|_| !filter.exclude_functions) {
        w.function(&lib.code)?;
    }
    let mut image = RdbImage::default();
    for (db, part) in per_db.into_iter().enumerate() {
        if part.keys == 0 {
            continue;
        }
        // rdb-key-save-delay slows the payload as it slows Redis's child; a replica gone
        // meanwhile ends it.
        for _ in 0..part.keys {
            if delay.wait(abandoned) {
                return Err(tessera_rdb::RdbError::Io(std::io::Error::new(
                    std::io::ErrorKind::Interrupted,
                    "replica gone",
                )));
            }
        }
        w.select_db(db as u64, part.keys, part.volatile)?;
        image.push(w.take_output());
        for c in part.chunks {
            w.passthrough(&c);
            image.push(c);
        }
    }
    image.push(w.finish()?);
    Ok(image)
}

/// One database's share of a sync snapshot: its entries, encoded, in chunks of about
/// [`CHUNK`] bytes (one buffer of the whole would be copied at every doubling).
#[derive(Default)]
struct DbPart {
    db: usize,
    keys: u64,
    volatile: u64,
    chunks: Vec<Vec<u8>>,
}

/// The size a [`DbPart`] chunk grows to before the next one starts.
const CHUNK: usize = 1 << 20;

impl DbPart {
    fn encode(&mut self, g: &crate::db::Stripe) {
        // No chunk for a database with nothing here: 15 empty databases would otherwise
        // hold (and used_memory count) a chunk each while the snapshot runs.
        if g.db(self.db).is_none_or(|d| d.is_empty()) {
            return;
        }
        if self.chunks.last().is_none_or(|c| c.len() >= CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK + CHUNK / 4));
        }
        if let Some(c) = self.chunks.last_mut() {
            let (n, vol) = encode_locked(g, self.db, c);
            self.keys += n;
            self.volatile += vol;
        }
    }
}

/// A sync snapshot's RDB, as the chunks it was made in.
#[derive(Default)]
struct RdbImage {
    chunks: Vec<Vec<u8>>,
    len: usize,
}

impl RdbImage {
    fn push(&mut self, c: Vec<u8>) {
        self.len += c.len();
        self.chunks.push(c);
    }

    /// The RDB's size in bytes.
    fn len(&self) -> usize {
        self.len
    }
}

/// Marks the replica gone when `full_sync` returns, however: the sync snapshot leaves it
/// out, and stops waiting on rdb-key-save-delay once all its replicas are gone.
struct Abandon(Arc<ReplicaInfo>);

impl Drop for Abandon {
    fn drop(&mut self) {
        self.0.gone.store(true, Ordering::Relaxed);
    }
}

/// Where a group's sync snapshot is.
#[derive(Clone)]
enum Stage {
    Waiting,
    /// The snapshot's stream point; the RDB once made.
    Started {
        replid: String,
        offset: u64,
        rdb: Option<Arc<RdbImage>>,
    },
    Failed(String),
}

/// Replicas that share one diskless sync snapshot: a full sync waits up to
/// repl-diskless-sync-delay for more replicas (or until repl-diskless-sync-max-replicas
/// are waiting), as Redis 7.0's replicationCron starts its diskless BGSAVE.
pub struct SyncGroup {
    filter: RdbFilter,
    members: parking_lot::Mutex<Vec<Arc<ReplicaInfo>>>,
    stage: tokio::sync::watch::Sender<Stage>,
    joined: tokio::sync::Notify,
}

/// Lists the replica (state wait_bgsave, no stream yet) and adds it to the forming sync
/// group, or starts one with its leader task.
fn join_group(
    srv: &Arc<Server>,
    info: &Arc<ReplicaInfo>,
    filter: RdbFilter,
) -> tokio::sync::watch::Receiver<Stage> {
    let mut slot = srv.repl.sync_group.lock();
    srv.repl.shared.lock().replicas.push(info.clone());
    // Replicas asking for a partial dataset (rdb-filter-only) get a snapshot of their own.
    let shared = filter == RdbFilter::default();
    if shared {
        if let Some(g) = slot.as_ref() {
            g.members.lock().push(info.clone());
            g.joined.notify_one();
            return g.stage.subscribe();
        }
    }
    let (tx, rx) = tokio::sync::watch::channel(Stage::Waiting);
    let g = Arc::new(SyncGroup {
        filter,
        members: parking_lot::Mutex::new(vec![info.clone()]),
        stage: tx,
        joined: tokio::sync::Notify::new(),
    });
    if shared {
        *slot = Some(g.clone());
    }
    drop(slot);
    tokio::spawn(lead_group(srv.clone(), g));
    rx
}

/// Waits for the delay (or enough replicas), closes the group to newcomers, then makes
/// one snapshot for all its replicas.
async fn lead_group(srv: Arc<Server>, g: Arc<SyncGroup>) {
    let started = tokio::time::Instant::now();
    loop {
        let (diskless, delay, max) = {
            let c = srv.config.read();
            (
                c.typed.repl_diskless_sync,
                c.typed.repl_diskless_sync_delay,
                c.typed.repl_diskless_sync_max_replicas,
            )
        };
        let waiting = g
            .members
            .lock()
            .iter()
            .filter(|m| !m.gone.load(Ordering::Relaxed))
            .count() as u64;
        if waiting == 0
            || !diskless
            || started.elapsed() >= Duration::from_secs(delay)
            || (max > 0 && waiting >= max)
        {
            break;
        }
        tokio::select! {
            _ = g.joined.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    {
        let mut slot = srv.repl.sync_group.lock();
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, &g)) {
            *slot = None;
        }
    }
    let members: Vec<_> = g
        .members
        .lock()
        .iter()
        .filter(|m| !m.gone.load(Ordering::Relaxed))
        .cloned()
        .collect();
    if members.is_empty() {
        let _ = g.stage.send(Stage::Failed("no replica left".into()));
        return;
    }
    let (at_tx, at_rx) = tokio::sync::oneshot::channel();
    let (srv2, members2, filter) = (srv.clone(), members.clone(), g.filter);
    srv.repl.sync_snapshots.fetch_add(1, Ordering::Relaxed);
    let job = tokio::task::spawn_blocking(move || {
        let all_gone = || members2.iter().all(|m| m.gone.load(Ordering::Relaxed));
        snapshot(&srv2, &members2, at_tx, filter, &all_gone)
    });
    if let Ok((replid, offset)) = at_rx.await {
        let _ = g.stage.send(Stage::Started {
            replid: replid.clone(),
            offset,
            rdb: None,
        });
        let done = match job.await {
            Ok(Ok(v)) => Stage::Started {
                replid,
                offset,
                rdb: Some(Arc::new(v)),
            },
            Ok(Err(e)) => Stage::Failed(e.to_string()),
            Err(e) => Stage::Failed(e.to_string()),
        };
        let _ = g.stage.send(done);
    } else {
        let _ = g.stage.send(Stage::Failed("snapshot thread failed".into()));
    }
    srv.repl.sync_snapshots.fetch_sub(1, Ordering::Relaxed);
}

/// A replica's link ended while its connection task cannot run (its I/O thread is in a
/// busy script): it leaves the replica list now and its connection is marked killed, so
/// the task closes it when it runs again.
pub fn link_lost(srv: &Server, id: u64) {
    let gone = {
        let sh = srv.repl.shared.lock();
        sh.replicas.iter().find(|r| r.id == id).cloned()
    };
    if let Some(r) = gone {
        tracing::info!(
            id,
            "Connection with replica lost (seen during a busy script)"
        );
        r.gone.store(true, Ordering::Relaxed);
        r.kill();
        unregister(srv, id);
    }
}

fn unregister(srv: &Server, id: u64) {
    let max_lag = srv.config.read().typed.min_replicas_max_lag;
    let mut sh = srv.repl.shared.lock();
    sh.replicas.retain(|r| r.id != id);
    // What it alone still needed goes (Redis's freeReplicaReferencedReplBuffer).
    sh.trim(super::backlog::TRIM_PER_CALL);
    // min-replicas-to-write sees it gone at once (Redis's refreshGoodSlavesCount when a
    // replica is freed), not at the next cron.
    srv.repl
        .good_replicas
        .store(good_count(&sh, max_lag), Ordering::Relaxed);
}

/// Serves a connection that sent SYNC or PSYNC until the link ends.
#[tracing::instrument(skip_all, fields(id = cl.id))]
pub async fn serve_replica(
    srv: &Arc<Server>,
    sock: &mut ClientStream,
    cl: &mut ClientState,
    out: &mut Out,
    inbuf: &mut BytesMut,
    psync: Option<(Bytes, Bytes)>,
) -> std::io::Result<()> {
    let hs = srv
        .repl
        .handshakes
        .lock()
        .remove(&cl.id)
        .unwrap_or_default();
    // The link's own replies are read back as one buffer from here on.
    out.flatten();
    out.shares = false;
    if !out.buf.is_empty() {
        sock.write_all(&out.buf).await?;
        out.buf.clear();
    }
    if srv.repl.failover.active() {
        sock.write_all(b"-NOMASTERLINK Can't SYNC while failing over\r\n")
            .await?;
        return Ok(());
    }
    if srv.repl.is_replica() && !srv.repl.link_up.load(Ordering::Relaxed) {
        sock.write_all(b"-NOMASTERLINK Can't SYNC while not connected with my master\r\n")
            .await?;
        return Ok(());
    }
    ensure_subscribed(srv);
    cl.handle
        .kind
        .store(crate::server::clients::KIND_REPLICA, Ordering::Relaxed);
    if let Some(fd) = sock.plain_fd() {
        // SAFETY: `fd` is the open socket `sock` owns for the whole call; it is duplicated,
        // not taken.
        let dup = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned();
        if let Ok(dup) = dup {
            cl.handle.close_on_kill(dup);
        }
    }
    let info = Arc::new(ReplicaInfo {
        next: AtomicU64::new(0),
        idle: AtomicBool::new(false),
        wake: tokio::sync::Notify::new(),
        gone: AtomicBool::new(false),
        aside: Default::default(),
        id: cl.id,
        ip: hs.ip.clone().unwrap_or_else(|| peer_ip(&cl.handle)),
        port: AtomicU16::new(hs.listening_port),
        state: AtomicU8::new(STATE_WAIT_BGSAVE),
        ack_offset: AtomicU64::new(0),
        last_ack_ms: AtomicU64::new(now_ms()),
        handle: cl.handle.clone(),
    });
    cl.handle.soft_since.store(0, Ordering::Relaxed);
    let is_psync = psync.is_some();
    srv.repl
        .adopt_restored_as_master(backlog_size(srv), srv.stats.dirty.load(Ordering::Relaxed));
    let cont = psync.and_then(|(id, off)| {
        let mut sh = srv.repl.shared.lock();
        try_continue(&mut sh, &info, &id, &off)
    });
    let res = match cont {
        Some((replid, behind)) => {
            srv.repl.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
            tracing::info!(
                addr = %cl.handle.addr,
                bytes = behind,
                "Partial resynchronization request accepted"
            );
            info.state.store(STATE_ONLINE, Ordering::Relaxed);
            // The missing bytes follow from the replication buffer (see `stream`).
            sock.write_all(format!("+CONTINUE {replid}\r\n").as_bytes())
                .await
        }
        None => {
            if is_psync {
                srv.repl.sync_partial_err.fetch_add(1, Ordering::Relaxed);
            }
            srv.repl.sync_full.fetch_add(1, Ordering::Relaxed);
            full_sync(srv, sock, &info, is_psync, hs.rdb_filter).await
        }
    };
    if let Err(e) = res {
        unregister(srv, info.id);
        return Err(e);
    }
    let r = stream(srv, sock, cl, inbuf, &info).await;
    unregister(srv, info.id);
    tracing::info!(addr = %cl.handle.addr, "Connection with replica lost.");
    r
}

/// +FULLRESYNC, the RDB as `$<len>\r\n<bytes>` (newlines keep the link alive meanwhile).
async fn full_sync(
    srv: &Arc<Server>,
    sock: &mut ClientStream,
    info: &Arc<ReplicaInfo>,
    is_psync: bool,
    filter: RdbFilter,
) -> std::io::Result<()> {
    let started = std::time::Instant::now();
    let _abandon = Abandon(info.clone());
    let mut stage = join_group(srv, info, filter);
    let mut announced = false;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    // Newlines keep the link alive while the sync waits and while the snapshot is made,
    // as Redis writes them to replicas waiting for their BGSAVE.
    let rdb = loop {
        if info.handle.killed.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("replica killed"));
        }
        let now = stage.borrow_and_update().clone();
        match now {
            Stage::Waiting => {}
            Stage::Failed(e) => return Err(std::io::Error::other(e)),
            Stage::Started {
                replid,
                offset,
                rdb,
            } => {
                if !announced {
                    announced = true;
                    tracing::info!(
                        %replid,
                        offset,
                        "Starting BGSAVE for SYNC with target: replicas sockets"
                    );
                    if is_psync {
                        sock.write_all(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes())
                            .await?;
                    }
                }
                if let Some(rdb) = rdb {
                    break rdb;
                }
            }
        }
        tokio::select! {
            r = stage.changed() => {
                if r.is_err() {
                    return Err(std::io::Error::other("sync snapshot ended"));
                }
            }
            _ = tick.tick() => sock.write_all(b"\n").await?,
            _ = info.handle.kill.notified() => {
                return Err(std::io::Error::other("replica killed"));
            }
        }
    };
    info.state.store(STATE_SEND_BULK, Ordering::Relaxed);
    sock.write_all(format!("${}\r\n", rdb.len()).as_bytes())
        .await?;
    for c in &rdb.chunks {
        sock.write_all(c).await?;
    }
    srv.stats
        .net_output_bytes
        .fetch_add(rdb.len() as u64, Ordering::Relaxed);
    srv.stats
        .net_repl_output_bytes
        .fetch_add(rdb.len() as u64, Ordering::Relaxed);
    info.state.store(STATE_ONLINE, Ordering::Relaxed);
    info.last_ack_ms.store(now_ms(), Ordering::Relaxed);
    tracing::info!(
        bytes = rdb.len(),
        secs = started.elapsed().as_secs_f64(),
        "Synchronization with replica succeeded"
    );
    Ok(())
}

/// Most stream bytes one write takes from the replication buffer.
const WRITE_BATCH: usize = 1 << 20;

/// Streams the replication buffer from the replica's offset and reads its REPLCONF ACKs
/// until the link ends.
async fn stream(
    srv: &Arc<Server>,
    sock: &mut ClientStream,
    cl: &mut ClientState,
    inbuf: &mut BytesMut,
    info: &Arc<ReplicaInfo>,
) -> std::io::Result<()> {
    let handle = cl.handle.clone();
    let mut parser = Parser::new();
    let mut check = tokio::time::interval(Duration::from_secs(1));
    let mut blocks = Vec::new();
    // Requests that arrived with the PSYNC (an early ACK).
    handle_input(srv, info, &mut parser, inbuf)?;
    loop {
        // Idle before looking, so that a feed after the look wakes us.
        info.idle.store(true, Ordering::SeqCst);
        let n = next_batch(srv, info, &mut blocks)?;
        if n > 0 {
            info.idle.store(false, Ordering::Relaxed);
            tokio::select! {
                r = write_blocks(sock, &blocks) => r?,
                _ = handle.kill.notified() => return Ok(()),
            }
            blocks.clear();
            info.next.fetch_add(n as u64, Ordering::AcqRel);
            srv.stats
                .net_output_bytes
                .fetch_add(n as u64, Ordering::Relaxed);
            srv.stats
                .net_repl_output_bytes
                .fetch_add(n as u64, Ordering::Relaxed);
            sent(srv, info);
            continue;
        }
        let aside = std::mem::take(&mut *info.aside.lock());
        for b in aside {
            sock.write_all(&b).await?;
        }
        tokio::select! {
            biased;
            _ = handle.kill.notified() => return Ok(()),
            _ = info.wake.notified() => {}
            n = sock.read_buf(inbuf) => {
                if n? == 0 {
                    return Ok(());
                }
                handle.last_active_ms.store(now_ms(), Ordering::Relaxed);
                handle_input(srv, info, &mut parser, inbuf)?;
            }
            _ = check.tick() => {
                let timeout = srv.config.read().typed.repl_timeout.max(1);
                if info.lag() > timeout {
                    tracing::warn!(id = info.id, "Disconnecting timedout replica (streaming sync)");
                    return Ok(());
                }
            }
        }
    }
}

/// The blocks holding the replica's next bytes (at most [`WRITE_BATCH`]); how many bytes.
/// A closed replica, or one the buffer no longer holds (replaced by a full sync from our
/// own master), ends its link.
fn next_batch(
    srv: &Server,
    info: &ReplicaInfo,
    blocks: &mut Vec<super::backlog::Chunk>,
) -> std::io::Result<usize> {
    let sh = srv.repl.shared.lock();
    if info.handle.killed.load(Ordering::Relaxed) {
        return Err(std::io::Error::other("replica closed"));
    }
    let from = info.next.load(Ordering::Acquire);
    let Some(b) = sh.backlog.as_ref() else {
        return Err(std::io::Error::other("no replication buffer"));
    };
    b.read(from, WRITE_BATCH, blocks)
        .map_err(std::io::Error::other)
}

/// After a write: the backlog may drop what no replica needs any more (Redis trims as a
/// replica moves to its next block), and CLIENT LIST shows the replica's share of the
/// buffer as its output memory.
fn sent(srv: &Server, info: &ReplicaInfo) {
    let mut sh = srv.repl.shared.lock();
    sh.trim(super::backlog::TRIM_PER_CALL);
    let pending = sh
        .backlog
        .as_ref()
        .map_or(0, |b| b.pending_memory(info.next.load(Ordering::Acquire)));
    info.handle.out_pending.store(pending, Ordering::Relaxed);
}

/// Writes the chunks' bytes, several blocks per system call.
async fn write_blocks(
    sock: &mut ClientStream,
    chunks: &[super::backlog::Chunk],
) -> std::io::Result<()> {
    let mut i = 0;
    let mut skip = 0;
    while i < chunks.len() {
        let slices: Vec<std::io::IoSlice<'_>> = chunks[i..]
            .iter()
            .take(64)
            .enumerate()
            .map(|(j, c)| std::io::IoSlice::new(&c.bytes()[if j == 0 { skip } else { 0 }..]))
            .collect();
        let mut n = sock.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        // Advance past what was written.
        while n > 0 && i < chunks.len() {
            let left = chunks[i].bytes().len() - skip;
            if n >= left {
                n -= left;
                i += 1;
                skip = 0;
            } else {
                skip += n;
                n = 0;
            }
        }
    }
    Ok(())
}

fn handle_input(
    srv: &Server,
    info: &ReplicaInfo,
    parser: &mut Parser,
    inbuf: &mut BytesMut,
) -> std::io::Result<()> {
    let mut args = Vec::new();
    loop {
        let lim = Limits {
            max_bulk: 1 << 20,
            authenticated: true,
        };
        let len = match parser.parse(inbuf, lim) {
            Ok(None) => return Ok(()),
            Ok(Some(len)) => len,
            Err(e) => return Err(std::io::Error::other(e.to_string())),
        };
        parser.args(inbuf, &mut args);
        let ack = args.len() >= 2
            && eq_ic(args[0], "replconf")
            && (eq_ic(args[1], "ack") || eq_ic(args[1], "getack"));
        if !ack && !args.is_empty() {
            refuse_reply(info, &args);
            return Err(std::io::Error::other("replica generated a reply"));
        }
        if args.len() >= 3 && eq_ic(args[0], "replconf") && eq_ic(args[1], "ack") {
            if let Some(off) = std::str::from_utf8(args[2])
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
            {
                info.ack_offset.fetch_max(off, Ordering::Relaxed);
                info.last_ack_ms.store(now_ms(), Ordering::Relaxed);
                srv.repl.ack.notify_waiters();
            }
        }
        args = recycle_view(args);
        inbuf.advance(len);
    }
}

/// A replica sent a command that would be answered (only REPLCONF ACK/GETACK are not):
/// Redis 7.0 logs it and drops the link rather than write a reply into the stream.
fn refuse_reply(info: &ReplicaInfo, args: &[&[u8]]) {
    use crate::cmd::flags;
    let spec = crate::cmd::table().resolve(args).ok();
    let name = spec.map_or_else(
        || String::from_utf8_lossy(args[0]).to_ascii_lowercase(),
        |c| c.full_name.clone(),
    );
    if spec.is_some_and(|c| c.has(flags::WRITE) || c.has(flags::READONLY)) {
        tracing::warn!(
            "== CRITICAL == This master is sending an error to its replica: 'Replica can't interact with the keyspace' after processing the command '{name}'"
        );
    }
    tracing::warn!(
        "Replica generated a reply to command '{name}', disconnecting it: id={} addr={}",
        info.id,
        info.handle.addr
    );
}

/// Replicas that acknowledged `offset`.
pub fn acked(srv: &Server, offset: u64) -> usize {
    srv.repl
        .shared
        .lock()
        .replicas
        .iter()
        .filter(|r| {
            r.state.load(Ordering::Relaxed) == STATE_ONLINE
                && r.ack_offset.load(Ordering::Relaxed) >= offset
        })
        .count()
}

/// WAIT: asks replicas for an ACK, then waits until `numreplicas` acknowledged `offset`,
/// the timeout (0: forever) passes, or the client is killed.
pub async fn wait(
    srv: &Arc<Server>,
    handle: &ClientHandle,
    numreplicas: usize,
    timeout_ms: u64,
    offset: u64,
) -> usize {
    let n = acked(srv, offset);
    if n >= numreplicas {
        return n;
    }
    {
        let mut sh = srv.repl.shared.lock();
        if !sh.replicas.is_empty() {
            sh.push(encode(&[b"REPLCONF", b"GETACK", b"*"]));
        }
    }
    let deadline =
        (timeout_ms > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(timeout_ms));
    loop {
        let notified = srv.repl.ack.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let n = acked(srv, offset);
        if n >= numreplicas {
            return n;
        }
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            return n;
        }
        let until =
            deadline.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = tokio::time::sleep_until(until) => {}
            _ = handle.kill.notified() => return acked(srv, offset),
        }
    }
}
