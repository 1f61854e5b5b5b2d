//! Replica side: the link to our master. Handshake (AUTH, PING, REPLCONF, PSYNC), full
//! resync (RDB as `$<len>` or the `$EOF:<mark>` form, loaded in place of the dataset) or
//! partial resync (+CONTINUE), then the command stream: applied in order, counted into the
//! offset, kept in our own backlog byte for byte (so our replicas, and the replicas of our
//! old master after a promotion, can continue from us), acknowledged every second and on
//! REPLCONF GETACK. Reconnects with back-off, trying a partial resync first.
//!
//! The master is untrusted (REPLICAOF can name any host): its bytes are decoded by the
//! bounded, I/O-free [`Decoder`], the RDB is streamed to a temp file in the node's dir as
//! Redis does (never reserved from its declared length), and any malformed reply drops the
//! link with a logged error; [`run`] then retries.

use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::server::unix::ClientStream;
use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::backlog::encode;
use super::decoder::{quote, DecodeError, Decoder, Event, RdbLen, StreamLimits};
use crate::cmd::{self, eq_ic, Outcome};
use crate::resp::{recycle_view, Out};
use crate::server::{now_ms, ClientHandle, ClientState, Server};

/// Why a link attempt ended.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("timeout talking to master")]
    Timeout,
    #[error("master replied: {0}")]
    Master(String),
    #[error("protocol error from master: {0}")]
    Proto(String),
    #[error("protocol error from master: {0}")]
    Decode(#[from] DecodeError),
    #[error("writing the RDB from master to {path}: {source}")]
    TempFile {
        path: String,
        source: std::io::Error,
    },
    #[error("loading the RDB from master failed: {0}")]
    Load(String),
    #[error("link closed by CLIENT KILL")]
    Killed,
    /// tls-replication is on and the TLS settings make no client configuration.
    #[error("TLS for the master link: {0}")]
    Tls(#[from] crate::server::tls::TlsError),
    #[error("replication target changed")]
    Stale,
}

/// Keeps the link to `host:port` up until REPLICAOF changes the target (generation `gen`).
pub async fn run(srv: Arc<Server>, host: String, port: u16, gen: u64) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if srv.repl.generation.load(Ordering::Acquire) != gen
            || srv.shutting_down.load(Ordering::Relaxed)
        {
            return;
        }
        let started = now_ms();
        let r = session(&srv, &host, port, gen).await;
        let in_handshake = srv.repl.handshake.swap(false, Ordering::AcqRel);
        // The session marked the link down (LinkDownFirst) before its socket closed.
        let was_up = srv.repl.link_down_since.load(Ordering::Relaxed) >= started;
        srv.repl.sync_in_progress.store(false, Ordering::Release);
        if was_up {
            backoff = Duration::from_millis(100);
        }
        match r {
            Err(LinkError::Stale) => return,
            // Redis's words for a master silent during the handshake (no PSYNC answer,
            // not even its keep-alive newlines, within repl-timeout).
            Err(LinkError::Timeout) if in_handshake => {
                tracing::warn!(%host, port, "Timeout connecting to the MASTER...")
            }
            Err(e) => tracing::warn!(%host, port, error = %e, "MASTER link ended"),
            Ok(()) => {}
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

/// Marks the link down when the session ends, declared after the socket so it drops
/// first: a master that sees the link close and asks at once finds it down, as with Redis,
/// which updates the state in the same step as it closes the socket.
struct LinkDownFirst<'a>(&'a Server);

impl Drop for LinkDownFirst<'_> {
    fn drop(&mut self) {
        if self.0.repl.link_up.swap(false, Ordering::AcqRel) {
            self.0
                .repl
                .link_down_since
                .store(now_ms(), Ordering::Relaxed);
        }
    }
}

/// Removes the link's client entry when the session ends.
struct Registered<'a>(&'a Server, u64);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.clients.remove(self.1);
        let _ = self.0.repl.master_client.compare_exchange(
            self.1,
            0,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }
}

/// The master socket and the decoder of what it sends.
struct Conn {
    /// Plain TCP, or TLS over it with `tls-replication yes`.
    sock: ClientStream,
    dec: Decoder,
    timeout: Duration,
}

/// The master's answer to PSYNC.
enum Psync {
    Full {
        replid: String,
        offset: u64,
    },
    Continue(Option<String>),
    /// An error reply (escaped for the log).
    Refused(String),
}

impl Conn {
    async fn fill(&mut self) -> Result<(), LinkError> {
        let n = tokio::time::timeout(self.timeout, self.sock.read_buf(self.dec.read_space()))
            .await
            .map_err(|_| LinkError::Timeout)??;
        if n == 0 {
            return Err(LinkError::Proto("connection closed".into()));
        }
        Ok(())
    }

    /// The reply to a handshake command as its line: `+text` or `-text` (escaped).
    async fn reply(&mut self) -> Result<String, LinkError> {
        loop {
            let mut none = Vec::new();
            match self.dec.next(&mut none)? {
                Some(Event::Reply { ok, text }) => {
                    return Ok(format!(
                        "{}{}",
                        if ok { '+' } else { '-' },
                        quote(text.as_bytes())
                    ))
                }
                Some(ev) => return Err(unexpected(&ev)),
                None => {}
            }
            self.fill().await?;
        }
    }

    async fn psync_reply(&mut self) -> Result<Psync, LinkError> {
        loop {
            let mut none = Vec::new();
            match self.dec.next(&mut none)? {
                Some(Event::FullResync { replid, offset }) => {
                    return Ok(Psync::Full {
                        replid: replid.to_string(),
                        offset,
                    })
                }
                Some(Event::Continue { replid }) => {
                    return Ok(Psync::Continue(replid.map(str::to_string)))
                }
                Some(Event::Reply { ok: false, text }) => {
                    return Ok(Psync::Refused(format!("-{}", quote(text.as_bytes()))))
                }
                Some(ev) => return Err(unexpected(&ev)),
                None => {}
            }
            self.fill().await?;
        }
    }

    async fn send(&mut self, args: &[&[u8]]) -> Result<(), LinkError> {
        self.sock.write_all(&encode(args)).await?;
        Ok(())
    }

    async fn cmd(&mut self, args: &[&[u8]]) -> Result<String, LinkError> {
        self.send(args).await?;
        self.reply().await
    }
}

/// An event the decoder produced in a phase that does not expect it (it cannot: each
/// phase yields its own events), reported rather than trusted.
fn unexpected(ev: &Event<'_>) -> LinkError {
    LinkError::Proto(format!(
        "unexpected {}",
        quote(format!("{ev:?}").as_bytes())
    ))
}

async fn session(srv: &Arc<Server>, host: &str, port: u16, gen: u64) -> Result<(), LinkError> {
    let (timeout, auth, user, announce_ip, announce_port, limits, dir) = {
        let c = srv.config.read();
        (
            Duration::from_secs(c.typed.repl_timeout.max(1)),
            c.typed.masterauth.clone(),
            c.typed.masteruser.clone(),
            c.typed.replica_announce_ip.clone(),
            c.typed.replica_announce_port,
            StreamLimits::new(
                c.typed.proto_max_bulk_len,
                c.typed.client_query_buffer_limit,
            ),
            c.typed.dir.clone(),
        )
    };
    let source = srv.config.read().typed.bind_source_addr.clone();
    let sock = tokio::time::timeout(
        timeout,
        crate::server::listen::connect_from(host, port, &source),
    )
    .await
    .map_err(|_| LinkError::Timeout)??;
    let _ = sock.set_nodelay(true);
    srv.repl.handshake.store(true, Ordering::Release);
    tracing::info!(host, port, "MASTER <-> REPLICA sync started");
    let peer = sock.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let laddr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    // tls-replication: the link speaks TLS from its first byte (the master's TLS port).
    let tls = {
        let c = srv.config.read();
        if c.typed.tls_replication {
            Some(crate::server::tls::client_config(&c)?)
        } else {
            None
        }
    };
    let sock = match tls {
        Some(cfg) => ClientStream::Tls(std::sync::Arc::new(
            crate::server::tls::TlsStream::connect(sock, cfg, host)?,
        )),
        None => ClientStream::Tcp(sock),
    };
    let id = srv.clients.next_id();
    let handle = ClientHandle::new(id, peer, laddr);
    *handle.name.lock() = None;
    handle
        .kind
        .store(crate::server::clients::KIND_MASTER, Ordering::Relaxed);
    srv.clients.add(handle.clone());
    let _reg = Registered(srv, id);
    let mut c = Conn {
        sock,
        dec: Decoder::new(limits),
        timeout,
    };
    let _down_first = LinkDownFirst(srv);
    let stale = || srv.repl.generation.load(Ordering::Acquire) != gen;

    // Handshake, in Redis's order: PING before AUTH, so an authentication or permission
    // error is an answer too (the master may want AUTH first, or `masteruser` may lack
    // +ping); any other error ends the attempt.
    let r = c.cmd(&[b"PING"]).await?;
    let ping_ok = ["+", "-NOAUTH", "-NOPERM", "-ERR operation not permitted"];
    if !ping_ok.iter().any(|p| r.starts_with(p)) {
        return Err(LinkError::Master(format!(
            "Error reply to PING from master: '{r}'"
        )));
    }
    if !auth.is_empty() {
        let r = if user.is_empty() {
            c.cmd(&[b"AUTH", auth.as_bytes()]).await?
        } else {
            c.cmd(&[b"AUTH", user.as_bytes(), auth.as_bytes()]).await?
        };
        if r.starts_with('-') {
            return Err(LinkError::Master(format!("Unable to AUTH to MASTER: {r}")));
        }
    }
    // As Redis: the announced port, else the TLS port when replication is over TLS (the
    // master's INFO lists the port its replicas serve on), else the plain one.
    let tls_port = {
        let c = &srv.config.read().typed;
        if c.tls_replication {
            c.tls_port
        } else {
            0
        }
    };
    let my_port = if announce_port > 0 {
        announce_port.to_string()
    } else if tls_port > 0 {
        tls_port.to_string()
    } else {
        srv.port().to_string()
    };
    let r = c
        .cmd(&[b"REPLCONF", b"listening-port", my_port.as_bytes()])
        .await?;
    if r.starts_with('-') {
        tracing::info!(reply = %r, "(Non critical) Master does not understand REPLCONF listening-port");
    }
    if !announce_ip.is_empty() {
        let _ = c
            .cmd(&[b"REPLCONF", b"ip-address", announce_ip.as_bytes()])
            .await?;
    }
    let _ = c
        .cmd(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])
        .await?;
    let (replid, offset, fresh) = {
        let sh = srv.repl.shared.lock();
        (
            sh.replid.clone(),
            sh.offset,
            sh.offset == 0 && sh.backlog.is_none(),
        )
    };
    let next = (offset + 1).to_string();
    if fresh {
        c.send(&[b"PSYNC", b"?", b"-1"]).await?;
    } else {
        let failing_over = srv.repl.failover.phase() == super::failover::Phase::InProgress;
        let mut args: Vec<&[u8]> = vec![b"PSYNC", replid.as_bytes(), next.as_bytes()];
        if failing_over {
            args.push(b"FAILOVER");
        }
        c.send(&args).await?;
    }
    c.dec.expect_psync();
    let r = c.psync_reply().await?;
    srv.repl.handshake.store(false, Ordering::Release);
    if stale() {
        return Err(LinkError::Stale);
    }
    // The answer to a PSYNC FAILOVER ends the failover either way.
    match &r {
        Psync::Refused(_) if srv.repl.failover.phase() == super::failover::Phase::InProgress => {
            super::failover::abort(srv, "Failover target rejected psync request");
            return Err(LinkError::Stale);
        }
        Psync::Refused(_) => {}
        _ => super::failover::psync_answered(srv),
    }
    // Refused for good (not -NOMASTERLINK or -LOADING, which pass): Redis retries with
    // SYNC (a master whose ACL refuses PSYNC may allow SYNC), whose answer is the payload.
    let r = match r {
        Psync::Refused(e) if !e.starts_with("-NOMASTERLINK") && !e.starts_with("-LOADING") => {
            tracing::warn!(reply = %e, "Unexpected reply to PSYNC from master");
            tracing::info!("Retrying with SYNC...");
            c.send(&[b"SYNC"]).await?;
            c.dec.expect_payload();
            Psync::Full {
                replid: crate::repl::new_replid(),
                offset: 0,
            }
        }
        r => r,
    };
    match r {
        Psync::Full {
            replid: id,
            offset: off,
        } => {
            tracing::info!(replid = %id, offset = off, "Full resync from master");
            srv.repl.sync_in_progress.store(true, Ordering::Release);
            // repl-diskless-load swapdb with the same history (Redis's async loading): the
            // old data is a past point of the data set that arrives, so it stays served
            // until the new one is in; an aborted transfer leaves it as it was.
            let swapdb = srv.config.read().typed.repl_diskless_load == "swapdb"
                && id.eq_ignore_ascii_case(&srv.repl.shared.lock().replid);
            let _async = swapdb.then(|| AsyncLoading::start(srv));
            // Under swapdb with another history Redis is loading (not async) from the first
            // byte of the payload; the old data stays until the new one is in.
            let other_history = !swapdb && srv.config.read().typed.repl_diskless_load == "swapdb";
            let _loading = other_history.then(|| LoadingTransfer::start(srv));
            let rdb = receive_rdb(&mut c, &dir).await?;
            if stale() {
                return Err(LinkError::Stale);
            }
            load(srv, rdb, id, off, gen).await?;
            srv.repl.sync_in_progress.store(false, Ordering::Release);
        }
        Psync::Continue(new) => {
            let new = new.unwrap_or_default();
            let _apply = srv.repl.apply_lock.lock();
            if stale() {
                return Err(LinkError::Stale);
            }
            let mut sh = srv.repl.shared.lock();
            if !new.is_empty() && !new.eq_ignore_ascii_case(&sh.replid) {
                sh.replid2 = std::mem::replace(&mut sh.replid, new.to_string());
                sh.second_offset = sh.offset as i64 + 1;
                drop(sh);
                // Our replicas follow the new history: they reconnect and continue.
                super::master::disconnect_replicas(srv);
                sh = srv.repl.shared.lock();
            }
            let size = srv.config.read().typed.repl_backlog_size as usize;
            sh.ensure_backlog(size);
            tracing::info!(replid = %sh.replid, offset = sh.offset, "Successful partial resynchronization with master.");
        }
        Psync::Refused(r) => return Err(LinkError::Master(r)),
    }
    let off = srv.repl.shared.lock().offset;
    c.send(&[b"REPLCONF", b"ACK", off.to_string().as_bytes()])
        .await?;
    srv.repl.last_io_ms.store(now_ms(), Ordering::Relaxed);
    {
        let _apply = srv.repl.apply_lock.lock();
        if stale() {
            return Err(LinkError::Stale);
        }
        srv.repl.master_client.store(id, Ordering::Release);
        srv.repl.link_up.store(true, Ordering::Release);
    }
    tracing::info!("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization or finished the full one; link up");
    stream(srv, &mut c, &handle, gen).await
}

/// `loading` while a swapdb transfer arrives (the load that follows sets it too).
struct LoadingTransfer<'a>(&'a Server);

impl<'a> LoadingTransfer<'a> {
    fn start(srv: &'a Server) -> Self {
        srv.persist.loading.store(true, Ordering::Release);
        LoadingTransfer(srv)
    }
}

impl Drop for LoadingTransfer<'_> {
    fn drop(&mut self) {
        self.0.persist.loading.store(false, Ordering::Release);
    }
}

/// INFO async_loading while it lives.
struct AsyncLoading<'a>(&'a Server);

impl<'a> AsyncLoading<'a> {
    fn start(srv: &'a Server) -> Self {
        srv.repl.async_loading.store(true, Ordering::Release);
        AsyncLoading(srv)
    }
}

impl Drop for AsyncLoading<'_> {
    fn drop(&mut self) {
        self.0.repl.async_loading.store(false, Ordering::Release);
    }
}

/// The RDB from the master, on disk while it arrives (as Redis: `temp-<unixtime>.<pid>.rdb`
/// in the node's dir); once loaded it becomes dump.rdb (see [`TempRdb::keep_as_dump`]),
/// else it is removed when dropped.
struct TempRdb {
    path: PathBuf,
    file: std::fs::File,
    len: u64,
    /// Renamed to dump.rdb: nothing to remove.
    kept: bool,
}

impl TempRdb {
    /// A file of our own: a name taken by an earlier sync still loading (a REPLICAOF in
    /// the same second) gets a numbered suffix instead of being truncated under it.
    fn create(dir: &Path) -> Result<Self, LinkError> {
        let base = format!("temp-{}.{}", now_ms() / 1000, std::process::id());
        let mut attempt = 0u32;
        loop {
            let name = match attempt {
                0 => format!("{base}.rdb"),
                n => format!("{base}.{n}.rdb"),
            };
            let path = dir.join(name);
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(file) => {
                    return Ok(TempRdb {
                        path,
                        file,
                        len: 0,
                        kept: false,
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => {
                    attempt += 1;
                }
                Err(e) => return Err(TempRdb::error(&path, e)),
            }
        }
    }

    fn error(path: &Path, source: std::io::Error) -> LinkError {
        LinkError::TempFile {
            path: path.display().to_string(),
            source,
        }
    }

    /// A loaded payload becomes the node's dump.rdb, as Redis renames its sync file
    /// (unless rdb-del-sync-files is set and nothing persists).
    fn keep_as_dump(&mut self, srv: &Server) {
        let (del, persists) = {
            let c = &srv.config.read().typed;
            (c.rdb_del_sync_files, !c.save.is_empty() || c.appendonly)
        };
        if del && !persists {
            return;
        }
        let to = crate::persist::rdb_path(srv);
        match std::fs::rename(&self.path, &to) {
            Ok(()) => self.kept = true,
            Err(e) => {
                tracing::warn!(from = %self.path.display(), to = %to.display(), error = %e, "keeping the RDB from master")
            }
        }
    }

    fn write(&mut self, data: &[u8]) -> Result<(), LinkError> {
        self.file
            .write_all(data)
            .map_err(|e| TempRdb::error(&self.path, e))?;
        self.len += data.len() as u64;
        Ok(())
    }
}

impl Drop for TempRdb {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "removing the temp RDB from master");
        }
    }
}

/// Receives the RDB payload after +FULLRESYNC into a temp file: memory stays at one read
/// buffer whatever length the master declares.
async fn receive_rdb(c: &mut Conn, dir: &Path) -> Result<TempRdb, LinkError> {
    let mut tmp: Option<TempRdb> = None;
    loop {
        loop {
            let mut none = Vec::new();
            match c.dec.next(&mut none)? {
                Some(Event::RdbStart(len)) if tmp.is_none() => {
                    match len {
                        RdbLen::Sized(n) => tracing::info!(
                            bytes = n,
                            "MASTER <-> REPLICA sync: receiving the RDB to disk"
                        ),
                        RdbLen::Eof => tracing::info!(
                            "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to disk"
                        ),
                    }
                    tmp = Some(TempRdb::create(dir)?);
                }
                Some(Event::RdbData(d)) => match tmp.as_mut() {
                    Some(t) => t.write(d)?,
                    None => return Err(LinkError::Proto("RDB bytes before its header".into())),
                },
                Some(Event::RdbEnd) => {
                    return tmp.ok_or_else(|| LinkError::Proto("RDB end before its header".into()))
                }
                Some(ev) => return Err(unexpected(&ev)),
                None => break,
            }
        }
        c.fill().await?;
    }
}

/// Replaces the dataset with the RDB and adopts the master's history at `offset`.
async fn load(
    srv: &Arc<Server>,
    mut rdb: TempRdb,
    replid: String,
    offset: u64,
    gen: u64,
) -> Result<(), LinkError> {
    // The payload is in: our own replicas cannot follow what replaces the dataset, so
    // they are closed now, before it is loaded (Redis's replicationAttachToNewMaster), and
    // resync from us once we are up again.
    super::master::disconnect_replicas(srv);
    let srv2 = srv.clone();
    let started = std::time::Instant::now();
    let n = tokio::task::spawn_blocking(move || {
        srv2.persist.loading.store(true, Ordering::Relaxed);
        // Ordered after `loading` (a command that sees the new epoch sees loading) and
        // before the flush (a command that saw a flushed stripe sees the new epoch).
        srv2.persist.load_epoch.fetch_add(1, Ordering::SeqCst);
        {
            let mut all = srv2.ks.lock_all();
            all.for_each(|_, g| {
                for d in g.dbs.iter_mut() {
                    *d = None;
                }
            });
        }
        srv2.watch.touch_db(None);
        // Like FLUSHALL: tracking clients drop their whole cache (a null invalidation).
        crate::tracking::on_flush(&srv2);
        // A replica keeps keys whose TTL passed: its master's DEL removes them.
        let r = rdb
            .file
            .rewind()
            .map_err(|e| TempRdb::error(&rdb.path, e).to_string())
            .and_then(|()| {
                crate::persist::snapshot::load_rdb_stream(
                    &srv2,
                    std::io::BufReader::with_capacity(64 * 1024, &rdb.file),
                    "master payload",
                    true,
                )
                .map_err(|e| e.to_string())
            });
        srv2.persist.loading.store(false, Ordering::Relaxed);
        tracing::debug!(bytes = rdb.len, "RDB from master loaded");
        let r = r.map(|(n, _, _)| n);
        if r.is_ok() {
            rdb.keep_as_dump(&srv2);
        }
        r
    })
    .await
    .map_err(|e| LinkError::Load(e.to_string()))?
    .map_err(LinkError::Load)?;
    tracing::info!(
        keys = n,
        secs = started.elapsed().as_secs_f64(),
        "MASTER <-> REPLICA sync: Finished with success"
    );
    let size = srv.config.read().typed.repl_backlog_size as usize;
    {
        let _apply = srv.repl.apply_lock.lock();
        if srv.repl.generation.load(Ordering::Acquire) != gen {
            return Err(LinkError::Stale);
        }
        let mut sh = srv.repl.shared.lock();
        sh.replid = replid;
        sh.replid2 = "0".repeat(40);
        sh.second_offset = -1;
        // Our own replicas hold the old dataset: they are closed and must resync.
        sh.reset_backlog(size, offset);
    }
    srv.repl.master_db.store(0, Ordering::Relaxed);
    // The AOF must describe the new dataset, not the one it replaced.
    if srv.persist.aof.enabled() {
        if let Err(e) = crate::persist::aof::bgrewrite(srv) {
            tracing::warn!(error = e, "AOF rewrite after the full sync not started");
        }
    }
    Ok(())
}

/// How long past a DEBUG SLEEP the replica link still waits (see [`stream`]).
const SLEEP_GRACE_MS: u64 = 50;

/// Applies the master's stream until the link ends.
async fn stream(
    srv: &Arc<Server>,
    c: &mut Conn,
    handle: &Arc<ClientHandle>,
    gen: u64,
) -> Result<(), LinkError> {
    let mut cl = ClientState::new(handle.clone(), true);
    cl.from_master = true;
    // A partial resync continues in the database the stream had selected.
    cl.db = srv.repl.master_db.load(Ordering::Relaxed);
    let mut out = Out::new(false);
    // The argument view's allocation, reused by every command of the stream.
    let mut args: Vec<&'static [u8]> = Vec::with_capacity(8);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let _unapplied = UnappliedReset(srv);
    let mut held: Option<Held<'_>> = None;
    loop {
        // While a DEBUG SLEEP holds the node, nothing of the stream is applied (Redis's
        // sleep blocks its only event loop). The commands queued behind the sleep in the
        // same EXEC (a CLIENT KILL of this link, say) run a moment after it ends, before
        // the loop in Redis could read again: so the link waits a little past the end.
        let until = srv.debug.sleeping_until_ms.load(Ordering::Relaxed);
        if until != 0 && now_ms() < until + SLEEP_GRACE_MS {
            tokio::select! {
                biased;
                _ = handle.kill.notified() => return Err(LinkError::Killed),
                _ = tokio::time::sleep(Duration::from_millis(
                    (until + SLEEP_GRACE_MS).saturating_sub(now_ms()),
                )) => {}
            }
            continue;
        }
        // Bytes that arrived with the handshake replies are applied first.
        let (acks, retry) = apply(
            srv, gen, &mut cl, &mut out, &mut c.dec, &mut args, &mut held,
        )?;
        let unapplied = c.dec.buffered() + held.as_ref().map_or(0, |h| h.len);
        srv.repl
            .unapplied
            .store(unapplied as u64, Ordering::Relaxed);
        if let Some(ack) = acks {
            c.sock.write_all(&ack).await?;
        }
        let paused = async {
            match retry {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = handle.kill.notified() => return Err(LinkError::Killed),
            _ = paused => {}
            n = c.sock.read_buf(c.dec.read_space()) => {
                if n? == 0 {
                    return Err(LinkError::Proto("connection closed by master".into()));
                }
                srv.repl.last_io_ms.store(now_ms(), Ordering::Relaxed);
            }
            _ = tick.tick() => {
                if srv.repl.generation.load(Ordering::Acquire) != gen {
                    return Err(LinkError::Stale);
                }
                let idle = now_ms().saturating_sub(srv.repl.last_io_ms.load(Ordering::Relaxed));
                if idle > c.timeout.as_millis() as u64 {
                    return Err(LinkError::Timeout);
                }
                let off = srv.repl.shared.lock().offset;
                let ack = encode(&[b"REPLCONF", b"ACK", off.to_string().as_bytes()]);
                c.sock.write_all(&ack).await?;
            }
        }
    }
}

/// A command of the master's stream held by CLIENT PAUSE (Redis pauses its master client
/// like any other): it and the stream behind it wait, read but not applied, so the offset
/// does not grow; the link counts as a blocked client meanwhile.
struct Held<'s> {
    args: Vec<Bytes>,
    /// Its bytes in the stream.
    len: usize,
    _blocked: crate::blocking::HeldPause<'s>,
}

/// Clears INFO's unapplied stream bytes when the link ends.
struct UnappliedReset<'a>(&'a Server);

impl Drop for UnappliedReset<'_> {
    fn drop(&mut self) {
        self.0.repl.unapplied.store(0, Ordering::Relaxed);
    }
}

/// Applies every complete command the decoder holds, unless a pause holds one (`held`,
/// retried first on the next call). Returns REPLCONF ACK replies to send (GETACK) and, when
/// a command is held, when to retry it.
fn apply<'s>(
    srv: &'s Arc<Server>,
    gen: u64,
    cl: &mut ClientState,
    out: &mut Out,
    dec: &mut Decoder,
    store: &mut Vec<&'static [u8]>,
    held: &mut Option<Held<'s>>,
) -> Result<(Option<Vec<u8>>, Option<std::time::Instant>), LinkError> {
    let mut acks: Option<Vec<u8>> = None;
    if let Some(h) = held.take() {
        let _apply = srv.repl.apply_lock.lock();
        if srv.repl.generation.load(Ordering::Acquire) != gen {
            return Err(LinkError::Stale);
        }
        let retry = execute(srv, cl, out, &crate::resp::arg_view(&h.args));
        if retry.is_some() {
            *held = Some(h);
            return Ok((acks, retry));
        }
        srv.repl
            .shared
            .lock()
            .push_command(&crate::resp::arg_view(&h.args));
    }
    loop {
        // The arguments borrow the decoder's buffer until the command is applied and
        // logged; the next call drops its bytes.
        let mut args = recycle_view(std::mem::take(store));
        let n = match dec.next(&mut args)? {
            Some(Event::Command { len }) => len,
            None => {
                *store = recycle_view(args);
                return Ok((acks, None));
            }
            Some(ev) => return Err(unexpected(&ev)),
        };
        // One command at a time against REPLICAOF: after a promotion nothing more of the
        // old master's stream is applied or counted.
        let _apply = srv.repl.apply_lock.lock();
        if srv.repl.generation.load(Ordering::Acquire) != gen {
            return Err(LinkError::Stale);
        }
        if args.is_empty() {
            *store = recycle_view(args);
            srv.repl.shared.lock().push(Bytes::from(vec![b'\n'; n]));
            continue;
        }
        if args.len() >= 2 && eq_ic(args[0], "replconf") && eq_ic(args[1], "getack") {
            // The ACK covers the stream up to (not including) this GETACK, as Redis.
            let off = srv.repl.shared.lock().offset;
            let ack = encode(&[b"REPLCONF", b"ACK", off.to_string().as_bytes()]);
            acks.get_or_insert_with(Vec::new).extend_from_slice(&ack);
        } else if !(args.len() == 1 && eq_ic(args[0], "ping")) {
            if let Some(until) = execute(srv, cl, out, &args) {
                *held = Some(Held {
                    args: crate::resp::owned_args(&args),
                    len: n,
                    _blocked: srv.blocking.hold_paused(cl.id),
                });
                *store = recycle_view(args);
                return Ok((acks, Some(until)));
            }
        }
        // Our backlog and offset hold the stream byte for byte (the master sends the
        // canonical multibulk form, which is what is encoded here).
        let mut sh = srv.repl.shared.lock();
        let before = sh.offset;
        sh.push_command(&args);
        let encoded = sh.offset - before;
        drop(sh);
        *store = recycle_view(args);
        if encoded != n as u64 {
            tracing::debug!(read = n, encoded, "non-canonical command from master");
        }
    }
}

/// Runs one command of the master's stream; its reply is dropped (a master gets none).
/// Returns when to retry it if a CLIENT PAUSE holds it (nothing ran).
fn execute(
    srv: &Arc<Server>,
    cl: &mut ClientState,
    out: &mut Out,
    args: &[&[u8]],
) -> Option<std::time::Instant> {
    match cmd::execute(srv, cl, out, args) {
        Outcome::Paused(until) => {
            cl.now_ms = 0;
            return Some(until);
        }
        Outcome::Blocked(w) => {
            srv.blocking.cancel(w.id);
        }
        _ => {}
    }
    cl.now_ms = 0;
    log_error_to_master(&out.buf, args);
    out.buf.clear();
    srv.repl.master_db.store(cl.db, Ordering::Relaxed);
    // SYNC/WAIT have no meaning on the master's link: never leave them to a client.
    cl.pending = None;
    None
}

/// A command of our master's stream that failed here (data divergence: a writable
/// replica's own key, a command we do not know): Redis 7.0 logs it as its afterErrorReply
/// does, so the divergence shows in the log.
fn log_error_to_master(reply: &[u8], args: &[&[u8]]) {
    let Some(msg) = reply.strip_prefix(b"-") else {
        return;
    };
    let end = msg
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(msg.len());
    let text = String::from_utf8_lossy(&msg[..end]);
    let name = if text.starts_with("ERR unknown command") {
        "<unknown>".to_string()
    } else {
        args.first()
            .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
            .unwrap_or_default()
    };
    tracing::warn!(
        "== CRITICAL == This replica is sending an error to its master: '{text}' after processing the command '{name}'"
    );
}
