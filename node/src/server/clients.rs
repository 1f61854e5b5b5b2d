//! Connected clients: per-connection state, the shared handle other tasks see (CLIENT LIST,
//! KILL, pub/sub delivery) and the registry.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::Notify;

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

/// Redis's PROTO_REPLY_CHUNK_BYTES: a client's reply buffer to start with and at most.
pub const REPLY_CHUNK: usize = 16 * 1024;
/// Redis's PROTO_REPLY_MIN_BYTES: the smallest a reply buffer shrinks to.
pub const REPLY_MIN: usize = 1024;

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
    /// A duplicate of a replica link's socket: [`ClientHandle::kill`] shuts it down, so the
    /// replica sees the link close before the killing command's reply leaves (Redis frees
    /// the killed replica before its event loop reads again; its replica notices at once).
    hangup: Mutex<Option<std::os::fd::OwnedFd>>,
    /// Out-of-band messages (pub/sub, MONITOR), already encoded for the client's protocol.
    pub mailbox: super::mailbox::Mailbox,
    /// Bytes queued in `mailbox` and not yet written (output buffer accounting).
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
    /// Reply bytes in the connection's own output buffer not yet written (published while
    /// a write waits on a slow reader), counted in omem and in the output limits.
    pub out_pending: AtomicUsize,
    /// Reply buffer size and peak (CLIENT LIST rbs / rbp), as the connection's cron
    /// resizes them (Redis's clientsCronResizeOutputBuffer).
    pub rbs: AtomicUsize,
    pub rbp: AtomicUsize,
    /// The arguments of the request being parsed and the queued MULTI commands (CLIENT
    /// LIST argv-mem and multi-mem), published by the connection.
    pub argv_mem: AtomicUsize,
    pub multi_mem: AtomicUsize,
    /// Commands queued in the open MULTI (CLIENT LIST multi=), published with multi_mem.
    pub multi_count: AtomicUsize,
    /// Everything but the output waiting beyond the reply buffer (CLIENT LIST tot-mem
    /// without omem), published by the connection.
    pub conn_mem: AtomicUsize,
    /// This client's share of the clients' memory (maxmemory-clients).
    pub charge: super::client_evict::Charge,
    /// Connected over the unix socket (CLIENT LIST flag U), set once when admitted.
    pub unix_socket: AtomicBool,
    /// The ACL user this connection authenticated as, when not `default` (`crate::acl`).
    pub acl_user: Mutex<Option<Bytes>>,
    /// True while `acl_user` is set: the one load the command check costs otherwise.
    pub acl_restricted: AtomicBool,
    /// Bumped by each login ([`ClientHandle::set_acl_user`]): `ClientState::acl` is stale.
    pub acl_gen: AtomicU64,
}

/// What a queued message of `n` bytes holds in the allocator (its size class), the weight
/// it counts for in `ClientsMem::in_flight`.
fn flight_weight(n: usize) -> i64 {
    crate::alloc::real_size(n) as i64
}

impl ClientHandle {
    /// The connection's ACL user name (`default` unless AUTH named another).
    pub fn user_name(&self) -> String {
        self.acl_user
            .lock()
            .as_ref()
            .map(|u| String::from_utf8_lossy(u).into_owned())
            .unwrap_or_else(|| "default".to_string())
    }

    /// Records the user AUTH/HELLO logged in as (None = default).
    pub fn set_acl_user(&self, user: Option<Bytes>) {
        self.acl_restricted.store(user.is_some(), Ordering::Relaxed);
        *self.acl_user.lock() = user;
        self.acl_gen.fetch_add(1, Ordering::Release);
    }

    pub fn new(id: u64, addr: String, laddr: String) -> Arc<Self> {
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
            hangup: Mutex::new(None),
            kill: Notify::new(),
            mailbox: Default::default(),
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
            out_pending: AtomicUsize::new(0),
            rbs: AtomicUsize::new(REPLY_CHUNK),
            rbp: AtomicUsize::new(0),
            argv_mem: AtomicUsize::new(0),
            multi_mem: AtomicUsize::new(0),
            multi_count: AtomicUsize::new(0),
            conn_mem: AtomicUsize::new(0),
            charge: Default::default(),
            unix_socket: AtomicBool::new(false),
            acl_user: Mutex::new(None),
            acl_restricted: AtomicBool::new(false),
            acl_gen: AtomicU64::new(0),
        };
        Arc::new(h)
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

    /// Makes [`ClientHandle::kill`] shut the socket down at once (see `hangup`).
    pub fn close_on_kill(&self, fd: std::os::fd::OwnedFd) {
        *self.hangup.lock() = Some(fd);
    }

    /// Asks the connection to close.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        if let Some(fd) = self.hangup.lock().as_ref() {
            use std::os::fd::AsRawFd;
            // SAFETY: shutdown(2) on a descriptor this handle owns; the connection's own
            // descriptor (the same socket) sees the close and ends.
            unsafe {
                libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR);
            }
        }
        self.kill.notify_one();
        // An empty message wakes an idle connection loop, which then sees `killed`: that
        // loop waits on its mailbox anyway, so it needs no `Notified` registration per
        // read (two lock round trips on every request batch).
        let _ = self.mailbox.send(Bytes::new());
    }

    /// Queues an out-of-band message; kills the client when the pub/sub output buffer limit
    /// is exceeded (client-output-buffer-limit pubsub).
    pub fn send(&self, msg: Bytes, limit: crate::config::BufLimit) -> bool {
        let n = msg.len();
        let q = self.queued.fetch_add(n, Ordering::Relaxed) + n;
        let used = q.saturating_add(self.out_pending.load(Ordering::Relaxed));
        if self.obuf_limit_reached(used as u64, limit, now_ms()) {
            self.close_for_obuf_limit();
            return false;
        }
        self.recharge();
        self.enqueue_counted(msg)
    }

    /// Queues `msg` with no output limit check (MONITOR's feed, as Redis's).
    pub fn enqueue(&self, msg: Bytes) -> bool {
        self.queued.fetch_add(msg.len(), Ordering::Relaxed);
        self.enqueue_counted(msg)
    }

    /// Sends a message already added to `queued`.
    fn enqueue_counted(&self, msg: Bytes) -> bool {
        let n = msg.len();
        self.charge.in_flight(flight_weight(n));
        if self.mailbox.send(msg).is_err() {
            // The connection is gone and drained its queue already: undo our share.
            self.dequeued(n);
            return false;
        }
        true
    }

    /// Takes `n` bytes off the out-of-band queue's count (the connection moved them to its
    /// output buffer, or dropped them at its end).
    pub fn dequeued(&self, n: usize) {
        let w = self.taken(n);
        self.charge.in_flight(-w);
    }

    /// Like [`Self::dequeued`], but the message stays in flight until the connection has
    /// written it: returns the weight the connection takes off `charge.in_flight` then.
    pub fn taken(&self, n: usize) -> i64 {
        self.queued.fetch_sub(n, Ordering::Relaxed);
        flight_weight(n)
    }

    /// CLIENT LIST tot-mem: what the connection published (with the reply buffer) plus
    /// the output waiting beyond the reply buffer.
    pub fn tot_mem(&self) -> usize {
        let in_rb = self
            .out_pending
            .load(Ordering::Relaxed)
            .min(self.rbs.load(Ordering::Relaxed));
        self.conn_mem
            .load(Ordering::Relaxed)
            .saturating_add(self.omem().saturating_sub(in_rb))
    }

    /// Brings this client's share of the clients' memory up to date.
    pub fn recharge(&self) {
        self.charge.set(self.tot_mem());
    }

    /// Bytes of replies waiting for this client beyond its reply buffer: the out-of-band
    /// queue plus what the connection could not write yet (CLIENT LIST omem).
    pub fn omem(&self) -> usize {
        self.queued
            .load(Ordering::Relaxed)
            .saturating_add(self.out_pending.load(Ordering::Relaxed))
    }

    /// Redis's checkClientOutputBufferLimits: over the hard limit, or over the soft limit
    /// continuously for more than its seconds (the time it went over is kept in
    /// `soft_since`; dropping below the soft limit clears it).
    pub fn obuf_limit_reached(&self, used: u64, limit: crate::config::BufLimit, now: u64) -> bool {
        if limit.hard > 0 && used >= limit.hard {
            return true;
        }
        if limit.soft > 0 && used >= limit.soft {
            let since = self.soft_since.load(Ordering::Relaxed);
            if since == 0 {
                self.soft_since.store(now.max(1), Ordering::Relaxed);
                return false;
            }
            // Redis compares its whole-second clock: over for more than soft_secs.
            return (now / 1000).saturating_sub(since / 1000) > limit.soft_secs;
        }
        self.soft_since.store(0, Ordering::Relaxed);
        false
    }

    /// Closes the client for its output buffer, with Redis's log line.
    pub fn close_for_obuf_limit(&self) {
        if !self.killed.load(Ordering::Relaxed) {
            tracing::warn!(
                "Client id={} addr={} scheduled to be closed ASAP for overcoming of output buffer limits.",
                self.id,
                self.addr
            );
        }
        self.kill();
    }

    /// The output limit class of this client (client-output-buffer-limit): 0 normal,
    /// 1 replica, 2 pubsub. Our link to our master counts as normal, as in Redis.
    pub fn obuf_class(&self) -> usize {
        match self.kind.load(Ordering::Relaxed) {
            KIND_REPLICA => 1,
            KIND_MASTER => 0,
            _ if self.pubsub_count() > 0 => 2,
            _ => 0,
        }
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
        if self.unix_socket.load(Ordering::Relaxed) {
            flags.push('U');
        }
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
        // Output as Redis splits it: the reply buffer (obl), then 16 KiB list nodes.
        let rbs = self.rbs.load(Ordering::Relaxed);
        let pending = self.out_pending.load(Ordering::Relaxed);
        let obl = if obl > 0 { obl } else { pending.min(rbs) };
        let omem = self.omem().saturating_sub(pending.min(rbs));
        format!(
            "id={} addr={} laddr={} fd=8 name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events=r cmd={} user={} redir={} resp={}",
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
            if self.in_multi.load(Ordering::Relaxed) {
                self.multi_count.load(Ordering::Relaxed) as i64
            } else {
                -1
            },
            self.qbuf.load(Ordering::Relaxed),
            self.qbuf_free.load(Ordering::Relaxed),
            self.argv_mem.load(Ordering::Relaxed),
            self.multi_mem.load(Ordering::Relaxed),
            rbs,
            self.rbp.load(Ordering::Relaxed),
            obl,
            omem.div_ceil(REPLY_CHUNK),
            omem,
            self.tot_mem(),
            self.last_cmd.lock(),
            self.user_name(),
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
    /// The connection is TLS: with tls-cluster, CLUSTER replies and redirects give other
    /// clients the nodes' plaintext ports instead.
    pub tls: bool,
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
    /// SCRIPT DEBUG SYNC: the client's next EVAL runs under the Lua debugger
    /// (`crate::script::run_debugged`).
    pub lua_debug: bool,
    /// This is the replica link applying its master's stream: not re-fed to the write
    /// subscribers, not refused as a write on a read-only replica, expired keys still seen.
    pub from_master: bool,
    /// This is the import link of an atomic slot migration (`cluster::asm`): it writes
    /// slots this node does not own yet, so it is never redirected.
    pub slot_import: bool,
    /// Work the last command left for its connection (SYNC, WAIT), taken by the connection
    /// after the command returns.
    pub pending: Option<Pending>,
    /// The AOF watermark after this client's latest write: with `appendfsync always` its
    /// replies leave once the fsynced watermark reached it (`persist::aof::before_reply`).
    pub aof_mark: u64,
    /// The hard output limit of this client's class in bytes (0: none), set by the
    /// connection before each command: a command that writes a reply in a long loop stops
    /// once its reply passes it ([`ClientState::reply_overflow`]), as Redis's do once the
    /// client is marked CLOSE_ASAP; the connection then closes without answering.
    pub reply_limit: usize,
    /// This connection's copy of its ACL user (`crate::cmd::acl_check`).
    pub acl: super::auth::AclView,
    /// How many BCAST prefixes this client tracks (`crate::tracking`), counted in its
    /// memory for maxmemory-clients.
    pub tracking_prefixes: usize,
    /// The running request's read buffer, when it was sized to a big argument and holds
    /// nothing else: a handler may store that argument as a slice of it, with no copy
    /// (`Ctx::string_value`). Set by the connection around the command.
    pub req_buf: Option<Bytes>,
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
    /// CLUSTER SYNCSLOTS ESTABLISH: the connection becomes the import link of the atomic
    /// slot migration named (`cluster::asm::import`).
    SlotImport { job: tessera_cluster::asm::JobName },
}

impl ClientState {
    pub fn new(handle: Arc<ClientHandle>, authenticated: bool) -> Self {
        ClientState {
            id: handle.id,
            internal: false,
            db: 0,
            handle,
            authenticated,
            tls: false,
            multi: None,
            save_after_command: false,
            multi_error: false,
            watched: Vec::new(),
            watch_dirty: Arc::new(AtomicBool::new(false)),
            subs: HashSet::new(),
            psubs: HashSet::new(),
            close_after_reply: false,
            lua_debug: false,
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
            slot_import: false,
            pending: None,
            aof_mark: 0,
            reply_limit: 0,
            acl: Default::default(),
            tracking_prefixes: 0,
            req_buf: None,
        }
    }

    /// A state used to run a blocked client's command on its behalf.
    pub fn detached(id: u64, db: usize) -> Self {
        let h = ClientHandle::new(id, String::new(), String::new());
        let mut s = ClientState::new(h, true);
        s.db = db;
        s.internal = true;
        s
    }

    /// Whether a reply `out_len` bytes long passed the client's hard output limit: the
    /// client will be closed, so a command building a huge reply may stop.
    pub fn reply_overflow(&self, out_len: usize) -> bool {
        self.reply_limit > 0 && out_len >= self.reply_limit
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
    /// The clients' memory (maxmemory-clients) and evictions.
    pub mem: Arc<super::client_evict::ClientsMem>,
    /// Reply buffers shrunk and grown by the connections' cron (INFO reply_buffer_*).
    pub reply_buffer_shrinks: AtomicU64,
    pub reply_buffer_expands: AtomicU64,
    /// The biggest buffers the clients cron saw lately (INFO client_recent_max_*).
    recent: Mutex<RecentPeaks>,
}

/// Redis's CLIENTS_PEAK_MEM_USAGE_SLOTS: one slot per second, so "recent" spans the last
/// seven to eight seconds.
const PEAK_SLOTS: u64 = 8;

/// The biggest input (query buffer + arguments) and output buffer seen in each of the
/// last [`PEAK_SLOTS`] seconds (Redis's ClientsPeakMemInput / ClientsPeakMemOutput).
#[derive(Default)]
struct RecentPeaks {
    input: [usize; PEAK_SLOTS as usize],
    output: [usize; PEAK_SLOTS as usize],
}

impl RecentPeaks {
    /// The slot of unix second `secs` and the next one (the oldest, cleared for reuse).
    fn slots(secs: u64) -> (usize, usize) {
        let cur = secs % PEAK_SLOTS;
        (cur as usize, ((cur + 1) % PEAK_SLOTS) as usize)
    }
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
        if let Some(h) = self.map.lock().remove(&id) {
            h.charge.retire();
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

    /// One clients-cron pass of Redis's clientsCronTrackExpansiveClients: starts the slot
    /// of unix second `secs` afresh when it is reused (Redis clears the next slot).
    fn recent_clear_next(&self, secs: u64) {
        let (_, next) = RecentPeaks::slots(secs);
        let p = &mut *self.recent.lock();
        if let (Some(i), Some(o)) = (p.input.get_mut(next), p.output.get_mut(next)) {
            *i = 0;
            *o = 0;
        }
    }

    /// Records one client's buffers in the slot of unix second `secs`.
    fn recent_note(&self, secs: u64, c: &ClientHandle) {
        let input = c
            .qbuf
            .load(Ordering::Relaxed)
            .saturating_add(c.qbuf_free.load(Ordering::Relaxed))
            .saturating_add(c.argv_mem.load(Ordering::Relaxed));
        let output = c.omem();
        let (cur, _) = RecentPeaks::slots(secs);
        let mut p = self.recent.lock();
        if let Some(i) = p.input.get_mut(cur) {
            *i = (*i).max(input);
        }
        if let Some(o) = p.output.get_mut(cur) {
            *o = (*o).max(output);
        }
    }

    /// INFO client_recent_max_input_buffer and client_recent_max_output_buffer: the
    /// biggest seen over the recent slots (Redis's getExpansiveClientsInfo).
    pub fn recent_max_buffers(&self) -> (usize, usize) {
        let p = self.recent.lock();
        (
            p.input.iter().copied().max().unwrap_or(0),
            p.output.iter().copied().max().unwrap_or(0),
        )
    }
}

/// Redis's clients cron, every 100 ms: closes clients over their soft output limit for
/// too long although no new output came (a subscriber nobody publishes to any more),
/// applies maxmemory-clients (also after CONFIG SET maxmemory), and every 500 ms closes
/// clients idle longer than `timeout` seconds (not pub/sub or blocked ones) and enforces
/// tracking-table-max-keys. Nothing runs while DEBUG PAUSE-CRON holds the cron, except
/// the idle timeout.
pub async fn timeout_loop(srv: Arc<Server>) {
    let mut tick: u64 = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        tick = tick.wrapping_add(1);
        let paused = srv.debug.pause_cron.load(Ordering::Relaxed);
        if !paused {
            let (cobl, limit) = {
                let c = srv.config.read();
                (c.cobl, super::client_evict::limit_bytes(&c.typed))
            };
            let now = now_ms();
            let secs = now / 1000;
            srv.clients.recent_clear_next(secs);
            for c in srv.clients.all() {
                srv.clients.recent_note(secs, &c);
                if c.soft_since.load(Ordering::Relaxed) == 0 || c.killed.load(Ordering::Relaxed) {
                    continue;
                }
                let class = c.obuf_class();
                // Replica links keep their own limits (crate::repl).
                if class != 1 && c.obuf_limit_reached(c.omem() as u64, cobl[class], now) {
                    c.close_for_obuf_limit();
                }
            }
            srv.clients.mem.set_limit(limit);
            super::client_evict::evict(&srv);
        }
        if !tick.is_multiple_of(5) {
            continue;
        }
        // Also Redis's cron's tracking-table-max-keys check (not while DEBUG PAUSE-CRON).
        if !paused {
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
        let h = ClientHandle::new(1, String::new(), String::new());
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
