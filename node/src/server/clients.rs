//! Connected clients: per-connection state, the shared handle other tasks see (CLIENT LIST,
//! KILL, pub/sub delivery) and the registry.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::{mpsc, Notify};

use super::{now_ms, Server};

/// How the client wants replies (CLIENT REPLY).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Skip the reply of the next command only.
    SkipNext,
    Skip,
}

/// What other tasks can see and do to a client.
pub const KIND_NORMAL: u8 = 0;
pub const KIND_REPLICA: u8 = 1;
pub const KIND_MASTER: u8 = 2;

pub struct ClientHandle {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    pub created: Instant,
    pub name: Mutex<Option<Bytes>>,
    pub db: AtomicUsize,
    /// Full name of the last command (a `&'static str` from the command table).
    pub last_cmd: Mutex<&'static str>,
    last_cmd_ptr: AtomicUsize,
    pub last_active_ms: AtomicU64,
    pub killed: AtomicBool,
    pub kill: Notify,
    /// Out-of-band messages (pub/sub, MONITOR), already encoded for the client's protocol.
    pub tx: mpsc::UnboundedSender<Bytes>,
    /// Bytes queued in `tx` and not yet written (output buffer accounting).
    pub queued: AtomicUsize,
    pub resp3: AtomicBool,
    pub subs: AtomicUsize,
    pub psubs: AtomicUsize,
    /// Shard channel subscriptions (SSUBSCRIBE); the sets live in `crate::pubsub::shard`.
    pub ssubs: AtomicUsize,
    pub in_multi: AtomicBool,
    pub no_evict: AtomicBool,
    pub monitor: AtomicBool,
    /// [`KIND_NORMAL`], [`KIND_REPLICA`] (a replica's link to us, after SYNC/PSYNC) or
    /// [`KIND_MASTER`] (our link to our master): CLIENT LIST flags S/M and TYPE filters.
    pub kind: AtomicU8,
    /// Output buffer over the soft limit since this unix ms (0 = not over).
    pub soft_since: AtomicU64,
    /// The query buffer's bytes held and its allocation's free room (CLIENT LIST qbuf and
    /// qbuf-free), published by the connection after each read and batch.
    pub qbuf: AtomicUsize,
    pub qbuf_free: AtomicUsize,
}

impl ClientHandle {
    pub fn new(
        id: u64,
        addr: String,
        laddr: String,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<Bytes>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let h = ClientHandle {
            id,
            addr,
            laddr,
            created: Instant::now(),
            name: Mutex::new(None),
            db: AtomicUsize::new(0),
            last_cmd: Mutex::new("NULL"),
            last_cmd_ptr: AtomicUsize::new(0),
            last_active_ms: AtomicU64::new(now_ms()),
            killed: AtomicBool::new(false),
            kill: Notify::new(),
            tx,
            queued: AtomicUsize::new(0),
            resp3: AtomicBool::new(false),
            subs: AtomicUsize::new(0),
            psubs: AtomicUsize::new(0),
            ssubs: AtomicUsize::new(0),
            in_multi: AtomicBool::new(false),
            no_evict: AtomicBool::new(false),
            monitor: AtomicBool::new(false),
            kind: AtomicU8::new(KIND_NORMAL),
            soft_since: AtomicU64::new(0),
            qbuf: AtomicUsize::new(0),
            qbuf_free: AtomicUsize::new(0),
        };
        (Arc::new(h), rx)
    }

    /// Records the last command; a pointer compare keeps the common case lock-free.
    #[inline]
    pub fn touch_cmd(&self, name: &'static str) {
        let p = name.as_ptr() as usize;
        if self.last_cmd_ptr.load(Ordering::Relaxed) != p {
            self.last_cmd_ptr.store(p, Ordering::Relaxed);
            *self.last_cmd.lock() = name;
        }
    }

    /// Asks the connection to close.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.kill.notify_one();
        // An empty message wakes an idle connection loop, which then sees `killed`: that
        // loop waits on this channel anyway, so it needs no `Notified` registration per
        // read (two lock round trips on every request batch).
        let _ = self.tx.send(Bytes::new());
    }

    /// Queues an out-of-band message; kills the client when the pub/sub output buffer limit
    /// is exceeded (client-output-buffer-limit pubsub).
    pub fn send(&self, msg: Bytes, limit: crate::config::BufLimit) -> bool {
        let q = self.queued.fetch_add(msg.len(), Ordering::Relaxed) + msg.len();
        if limit.hard > 0 && q as u64 > limit.hard {
            tracing::info!(
                id = self.id,
                "client closed for overcoming of output buffer limits"
            );
            self.kill();
            return false;
        }
        if limit.soft > 0 && q as u64 > limit.soft {
            let now = now_ms();
            let since = self.soft_since.load(Ordering::Relaxed);
            if since == 0 {
                self.soft_since.store(now, Ordering::Relaxed);
            } else if now.saturating_sub(since) >= limit.soft_secs.saturating_mul(1000) {
                self.kill();
                return false;
            }
        } else {
            self.soft_since.store(0, Ordering::Relaxed);
        }
        self.tx.send(msg).is_ok()
    }

    /// Channel, pattern and shard channel subscriptions together.
    pub fn pubsub_count(&self) -> usize {
        self.subs.load(Ordering::Relaxed)
            + self.psubs.load(Ordering::Relaxed)
            + self.ssubs.load(Ordering::Relaxed)
    }

    /// Redis's client class for CLIENT LIST / CLIENT KILL TYPE: master, replica (Redis
    /// also accepts "slave"), pubsub or normal.
    pub fn client_type(&self) -> &'static str {
        match self.kind.load(Ordering::Relaxed) {
            KIND_MASTER => "master",
            KIND_REPLICA => "replica",
            _ if self.pubsub_count() > 0 => "pubsub",
            _ => "normal",
        }
    }

    /// CLIENT LIST / CLIENT INFO line.
    pub fn info_line(&self, srv: &Server) -> String {
        self.info_line_with(srv, 0)
    }

    /// The line with `obl`, the reply bytes waiting in the output buffer: known only to
    /// the connection itself (CLIENT LIST / INFO about the client running them).
    pub fn info_line_with(&self, srv: &Server, obl: usize) -> String {
        let now = now_ms();
        let mut flags = String::new();
        match self.kind.load(Ordering::Relaxed) {
            KIND_REPLICA => flags.push('S'),
            KIND_MASTER => flags.push('M'),
            _ => {}
        }
        if self.pubsub_count() > 0 {
            flags.push('P');
        }
        if self.in_multi.load(Ordering::Relaxed) {
            flags.push('x');
        }
        if self.monitor.load(Ordering::Relaxed) {
            flags.push('O');
        }
        if srv.blocking.is_blocked(self.id) {
            flags.push('b');
        }
        let redir = crate::tracking::list_info(srv, self.id, &mut flags);
        if self.no_evict.load(Ordering::Relaxed) {
            flags.push('e');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let name = self
            .name
            .lock()
            .as_ref()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        let idle = now.saturating_sub(self.last_active_ms.load(Ordering::Relaxed)) / 1000;
        format!(
            "id={} addr={} laddr={} fd=8 name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs=16384 rbp=16384 obl={} oll=0 omem={} tot-mem=0 events=r cmd={} user=default redir={} resp={}",
            self.id,
            self.addr,
            self.laddr,
            name,
            self.created.elapsed().as_secs(),
            idle,
            flags,
            self.db.load(Ordering::Relaxed),
            self.subs.load(Ordering::Relaxed),
            self.psubs.load(Ordering::Relaxed),
            self.ssubs.load(Ordering::Relaxed),
            if self.in_multi.load(Ordering::Relaxed) { 0 } else { -1 },
            self.qbuf.load(Ordering::Relaxed),
            self.qbuf_free.load(Ordering::Relaxed),
            obl,
            self.queued.load(Ordering::Relaxed),
            self.last_cmd.lock(),
            redir,
            if self.resp3.load(Ordering::Relaxed) { 3 } else { 2 },
        )
    }
}

/// Per-connection state (owned by the connection task; commands get `&mut`).
pub struct ClientState {
    pub id: u64,
    /// A client of the server's own (AOF replay, served blocked commands), not a
    /// connection: the dispatcher's gates meant for users (-LOADING) don't apply.
    pub internal: bool,
    pub db: usize,
    pub handle: Arc<ClientHandle>,
    pub authenticated: bool,
    /// Queued commands while in MULTI.
    pub multi: Option<Vec<Vec<Bytes>>>,
    /// A FLUSHALL ran: save once the request (EXEC, script) has let go of the keyspace.
    pub save_after_command: bool,
    /// A command failed to queue: EXEC must abort.
    pub multi_error: bool,
    pub watched: Vec<(usize, Bytes)>,
    /// Set by another client touching a watched key.
    pub watch_dirty: Arc<AtomicBool>,
    pub subs: HashSet<Bytes>,
    pub psubs: HashSet<Bytes>,
    pub close_after_reply: bool,
    pub reply_mode: ReplyMode,
    /// Pushes written while CLIENT REPLY OFF|SKIP drops the command's reply (pub/sub
    /// confirmations: Redis's CLIENT_PUSHING), sent after the dropped reply.
    pub kept_pushes: BytesMut,
    pub scratch_idx: Vec<usize>,
    pub scratch_slots: Vec<u16>,
    /// The cluster router's key list (crate::cluster::route), kept for its allocation.
    pub route_keys: Vec<&'static [u8]>,
    /// Unix ms taken once per read batch (0 = take a fresh one): a pipeline of 16 commands
    /// shouldn't read the clock 16 times for expiry decisions.
    pub now_ms: u64,
    /// ASKING / READONLY (cluster mode).
    pub cluster: crate::cluster::ClientFlags,
    /// CLIENT TRACKING flags (`crate::tracking::ON` ...), read on every command.
    pub tracking: u8,
    /// A script this client called is running the command (Redis's CLIENT_SCRIPT, seen
    /// by the handlers whose answer differs from a script: XREAD's BLOCK).
    pub in_script: bool,
    /// This is the replica link applying its master's stream: not re-fed to the write
    /// subscribers, not refused as a write on a read-only replica, expired keys still seen.
    pub from_master: bool,
    /// Work the last command left for its connection (SYNC, WAIT), taken by the connection
    /// after the command returns.
    pub pending: Option<Pending>,
    /// The AOF watermark after this client's latest write: with `appendfsync always` its
    /// replies leave once the fsynced watermark reached it (`persist::aof::before_reply`).
    pub aof_mark: u64,
}

/// Something a command needs its connection to do asynchronously (`crate::repl`).
pub enum Pending {
    /// SYNC / PSYNC: the connection becomes a replica link. `psync` is (replid, offset).
    Sync { psync: Option<(Bytes, Bytes)> },
    /// WAIT: reply with the number of replicas that acknowledged `offset`.
    Wait {
        numreplicas: usize,
        timeout_ms: u64,
        offset: u64,
    },
    /// SHUTDOWN: block until the exit or until the shutdown is given up (persist::shutdown);
    /// with `abort`, SHUTDOWN ABORT.
    Shutdown { abort: bool, force: bool },
}

impl ClientState {
    pub fn new(handle: Arc<ClientHandle>, authenticated: bool) -> Self {
        ClientState {
            id: handle.id,
            internal: false,
            db: 0,
            handle,
            authenticated,
            multi: None,
            save_after_command: false,
            multi_error: false,
            watched: Vec::new(),
            watch_dirty: Arc::new(AtomicBool::new(false)),
            subs: HashSet::new(),
            psubs: HashSet::new(),
            close_after_reply: false,
            reply_mode: ReplyMode::On,
            kept_pushes: BytesMut::new(),
            scratch_idx: Vec::new(),
            scratch_slots: Vec::new(),
            route_keys: Vec::new(),
            now_ms: 0,
            cluster: Default::default(),
            tracking: 0,
            in_script: false,
            from_master: false,
            pending: None,
            aof_mark: 0,
        }
    }

    /// A state used to run a blocked client's command on its behalf.
    pub fn detached(id: u64, db: usize) -> Self {
        let (h, _rx) = ClientHandle::new(id, String::new(), String::new());
        let mut s = ClientState::new(h, true);
        s.db = db;
        s.internal = true;
        s
    }

    /// Whether CLIENT REPLY OFF|SKIP drops the reply of the command running now.
    pub fn replies_dropped(&self) -> bool {
        matches!(self.reply_mode, ReplyMode::Off | ReplyMode::Skip)
    }

    /// RESP2 subscribed clients may only run (P)SUBSCRIBE & co.
    pub fn in_pubsub_context(&self) -> bool {
        !self.subs.is_empty()
            || !self.psubs.is_empty()
            || self.handle.ssubs.load(Ordering::Relaxed) > 0
    }
}

/// All connected clients.
#[derive(Default)]
pub struct ClientRegistry {
    map: Mutex<BTreeMap<u64, Arc<ClientHandle>>>,
    next_id: AtomicU64,
    pub count: AtomicUsize,
}

impl ClientRegistry {
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn add(&self, h: Arc<ClientHandle>) {
        self.map.lock().insert(h.id, h);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds a connection unless `max` clients are already registered (maxclients): the
    /// check and the insertion are one step, so I/O threads admitting at once can't both
    /// take the last slot.
    pub fn try_add(&self, h: Arc<ClientHandle>, max: usize) -> bool {
        let mut map = self.map.lock();
        if map.len() >= max {
            return false;
        }
        map.insert(h.id, h);
        self.count.fetch_add(1, Ordering::Relaxed);
        true
    }

    pub fn remove(&self, id: u64) {
        if self.map.lock().remove(&id).is_some() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientHandle>> {
        self.map.lock().get(&id).cloned()
    }

    pub fn all(&self) -> Vec<Arc<ClientHandle>> {
        self.map.lock().values().cloned().collect()
    }

    pub fn kill_all(&self) {
        for c in self.all() {
            c.kill();
        }
    }
}

/// Every 500 ms: closes clients idle longer than `timeout` seconds (not pub/sub or blocked
/// ones) and enforces tracking-table-max-keys (both parts of Redis's cron).
pub async fn timeout_loop(srv: Arc<Server>) {
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        // Also Redis's cron's tracking-table-max-keys check (not while DEBUG PAUSE-CRON).
        if !srv.debug.pause_cron.load(Ordering::Relaxed) {
            crate::tracking::enforce_limit(&srv);
        }
        let t = srv.config.read().typed.timeout_secs;
        if t == 0 {
            continue;
        }
        let now = now_ms();
        for c in srv.clients.all() {
            let idle = now.saturating_sub(c.last_active_ms.load(Ordering::Relaxed));
            let pubsub = c.pubsub_count() > 0;
            if idle > t * 1000 && !pubsub && !srv.blocking.is_blocked(c.id) {
                tracing::debug!(id = c.id, "closing idle client");
                c.kill();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wall clock stepping back (NTP, a VM restore) must not underflow the time a
    /// client has been over its soft output limit: no panic, no spurious kill.
    #[test]
    fn soft_limit_survives_a_clock_step_back() {
        let (h, _rx) = ClientHandle::new(1, String::new(), String::new());
        let limit = crate::config::BufLimit {
            hard: 0,
            soft: 1,
            soft_secs: 60,
        };
        // Over the soft limit since "an hour from now": the clock went back an hour.
        h.soft_since.store(now_ms() + 3_600_000, Ordering::Relaxed);
        assert!(h.send(Bytes::from_static(b"hello"), limit));
        assert!(!h.killed.load(Ordering::Relaxed));
    }
}
