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

use std::sync::atomic::{AtomicU16, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::backlog::{encode, encode_into};
use super::Shared;
use crate::cmd::eq_ic;
use crate::persist::snapshot::{copy_locked, Copied};
use crate::propagate::{Write, WriteSubscriber};
use crate::resp::{recycle_view, Limits, Out, Parser};
use crate::server::{now_ms, ClientHandle, ClientState, Server};

/// What a connection said with REPLCONF before its PSYNC.
#[derive(Debug, Clone, Default)]
pub struct Handshake {
    pub listening_port: u16,
    pub ip: Option<String>,
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
    tx: mpsc::UnboundedSender<Bytes>,
    queued: AtomicUsize,
    soft_since: AtomicU64,
    limit: crate::config::BufLimit,
    handle: Arc<ClientHandle>,
}

impl ReplicaInfo {
    /// Queues stream bytes; a replica over client-output-buffer-limit (replica class) is cut.
    pub fn send(&self, data: Bytes) {
        let q = self.queued.fetch_add(data.len(), Ordering::Relaxed) + data.len();
        let lim = self.limit;
        if lim.hard > 0 && q as u64 > lim.hard {
            self.cut();
            return;
        }
        if lim.soft > 0 && q as u64 > lim.soft {
            let now = now_ms();
            let since = self.soft_since.load(Ordering::Relaxed);
            if since == 0 {
                self.soft_since.store(now, Ordering::Relaxed);
            } else if now.saturating_sub(since) >= lim.soft_secs * 1000 {
                self.cut();
                return;
            }
        } else {
            self.soft_since.store(0, Ordering::Relaxed);
        }
        let _ = self.tx.send(data);
    }

    /// Closes the replica's connection.
    pub fn kill(&self) {
        self.handle.kill();
    }

    fn cut(&self) {
        if !self.handle.killed.load(Ordering::Relaxed) {
            tracing::warn!(
                id = self.id,
                "Client scheduled to be closed ASAP for overcoming of output buffer limits (replica)"
            );
        }
        self.handle.kill();
    }

    pub fn state_name(&self) -> &'static str {
        match self.state.load(Ordering::Relaxed) {
            STATE_WAIT_BGSAVE => "wait_bgsave",
            STATE_SEND_BULK => "send_bulk",
            _ => "online",
        }
    }

    /// Stream bytes queued for this replica and not yet written to its socket.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Seconds since the last ACK.
    pub fn lag(&self) -> u64 {
        now_ms().saturating_sub(self.last_ack_ms.load(Ordering::Relaxed)) / 1000
    }
}

/// The write subscriber: every write, in execution order, into the stream.
struct Feeder(Weak<Server>);

impl WriteSubscriber for Feeder {
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
        let mut sh = srv.repl.shared.lock();
        if sh.backlog.is_none() {
            return;
        }
        let mut b =
            BytesMut::with_capacity(64 + w.args.iter().map(|a| a.len() + 16).sum::<usize>());
        if sh.last_db != Some(w.db) {
            let mut dbn = itoa::Buffer::new();
            encode_into(&mut b, &[b"SELECT", dbn.format(w.db).as_bytes()]);
            sh.last_db = Some(w.db);
        }
        encode_into(&mut b, w.args);
        sh.push(b.freeze());
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
            let (period, max_lag, size) = {
                let c = srv.config.read();
                (
                    c.typed.repl_ping_replica_period.max(1) * 1000,
                    c.typed.min_replicas_max_lag,
                    c.typed.repl_backlog_size as usize,
                )
            };
            let now = now_ms();
            let offset = {
                let mut sh = srv.repl.shared.lock();
                if let Some(b) = sh.backlog.as_mut() {
                    b.resize(size);
                }
                srv.repl
                    .good_replicas
                    .store(good_count(&sh, max_lag), Ordering::Relaxed);
                if !srv.repl.is_replica()
                    && !sh.replicas.is_empty()
                    && !srv.repl.failover.active()
                    && now.saturating_sub(last_ping) >= period
                {
                    last_ping = now;
                    sh.push(encode(&[b"PING"]));
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

fn peer_ip(addr: &str) -> String {
    addr.parse::<std::net::SocketAddr>()
        .map(|a| a.ip().to_string())
        .unwrap_or_else(|_| addr.to_string())
}

/// Tries a partial resync: on success the replica is registered and the missing bytes are
/// returned with the replid to announce.
fn try_continue(
    sh: &mut Shared,
    info: &Arc<ReplicaInfo>,
    replid: &[u8],
    offset: &[u8],
) -> Option<(String, Vec<u8>)> {
    let off: u64 = std::str::from_utf8(offset).ok()?.parse().ok()?;
    let id = std::str::from_utf8(replid).ok()?;
    let ok_id = id.eq_ignore_ascii_case(&sh.replid)
        || (id.eq_ignore_ascii_case(&sh.replid2) && off as i64 <= sh.second_offset);
    if !ok_id {
        return None;
    }
    let data = sh.backlog.as_ref()?.since(off)?;
    info.ack_offset
        .store(off.saturating_sub(1), Ordering::Relaxed);
    sh.replicas.push(info.clone());
    Some((sh.replid.clone(), data))
}

/// The dataset as an RDB at an exact stream offset (see the module doc); registers the
/// replica at that offset. Sends (replid, offset) as soon as they are known.
fn snapshot(
    srv: &Server,
    info: &Arc<ReplicaInfo>,
    at: tokio::sync::oneshot::Sender<(String, u64)>,
) -> tessera_rdb::Result<Vec<u8>> {
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
        info.ack_offset.store(sh.offset, Ordering::Relaxed);
        sh.replicas.push(info.clone());
        (sh.replid.clone(), sh.offset)
    };
    drop(apply);
    let _ = at.send(point);
    // FUNCTION LOAD/DELETE/FLUSH/RESTORE hold every stripe, so the libraries read while
    // this snapshot holds them all belong to the same point of the stream.
    let libraries = srv.scripts.functions.libraries();
    let now = now_ms();
    let mut per_db: Vec<Vec<Copied>> = (0..ndb).map(|_| Vec::new()).collect();
    for g in guards.drain(..) {
        for (db, v) in per_db.iter_mut().enumerate() {
            copy_locked(&g, db, now, v);
        }
        drop(g);
    }
    let mut w = tessera_rdb::RdbWriter::new(Vec::new())?;
    w.standard_aux(&tessera_rdb::AuxInfo {
        used_mem: crate::alloc::used_memory(),
        ..Default::default()
    })?;
    // Function libraries come before the databases, as in dump.rdb.
    for lib in &libraries {
        w.function(&lib.code)?;
    }
    for (db, v) in per_db.into_iter().enumerate() {
        if v.is_empty() {
            continue;
        }
        let vol = v.iter().filter(|e| e.2.is_some()).count();
        w.select_db(db as u64, v.len() as u64, vol as u64)?;
        for (k, val, exp) in v {
            w.entry(&k, &val, exp)?;
        }
    }
    w.finish()
}

fn unregister(srv: &Server, id: u64) {
    srv.repl.shared.lock().replicas.retain(|r| r.id != id);
}

/// Serves a connection that sent SYNC or PSYNC until the link ends.
#[tracing::instrument(skip_all, fields(id = cl.id))]
pub async fn serve_replica(
    srv: &Arc<Server>,
    sock: &mut TcpStream,
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
    let (tx, mut rx) = mpsc::unbounded_channel();
    let info = Arc::new(ReplicaInfo {
        id: cl.id,
        ip: hs.ip.clone().unwrap_or_else(|| peer_ip(&cl.handle.addr)),
        port: AtomicU16::new(hs.listening_port),
        state: AtomicU8::new(STATE_WAIT_BGSAVE),
        ack_offset: AtomicU64::new(0),
        last_ack_ms: AtomicU64::new(now_ms()),
        tx,
        queued: AtomicUsize::new(0),
        soft_since: AtomicU64::new(0),
        limit: srv.config.read().cobl[1],
        handle: cl.handle.clone(),
    });
    let is_psync = psync.is_some();
    srv.repl.adopt_restored_as_master(
        backlog_size(srv),
        srv.stats.dirty.load(Ordering::Relaxed),
        srv.persist.last_load_keys_expired.load(Ordering::Relaxed),
    );
    let cont = psync.and_then(|(id, off)| {
        let mut sh = srv.repl.shared.lock();
        try_continue(&mut sh, &info, &id, &off)
    });
    let res = match cont {
        Some((replid, data)) => {
            srv.repl.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
            tracing::info!(
                addr = %cl.handle.addr,
                bytes = data.len(),
                "Partial resynchronization request accepted"
            );
            info.state.store(STATE_ONLINE, Ordering::Relaxed);
            let mut msg = format!("+CONTINUE {replid}\r\n").into_bytes();
            msg.extend_from_slice(&data);
            sock.write_all(&msg).await
        }
        None => {
            if is_psync {
                srv.repl.sync_partial_err.fetch_add(1, Ordering::Relaxed);
            }
            srv.repl.sync_full.fetch_add(1, Ordering::Relaxed);
            full_sync(srv, sock, &info, is_psync).await
        }
    };
    if let Err(e) = res {
        unregister(srv, info.id);
        return Err(e);
    }
    let r = stream(srv, sock, cl, inbuf, &info, &mut rx).await;
    unregister(srv, info.id);
    tracing::info!(addr = %cl.handle.addr, "Connection with replica lost.");
    r
}

/// +FULLRESYNC, the RDB as `$<len>\r\n<bytes>` (newlines keep the link alive meanwhile).
async fn full_sync(
    srv: &Arc<Server>,
    sock: &mut TcpStream,
    info: &Arc<ReplicaInfo>,
    is_psync: bool,
) -> std::io::Result<()> {
    let (at_tx, at_rx) = tokio::sync::oneshot::channel();
    let (srv2, info2) = (srv.clone(), info.clone());
    let started = std::time::Instant::now();
    let mut job = tokio::task::spawn_blocking(move || snapshot(&srv2, &info2, at_tx));
    let Ok((replid, offset)) = at_rx.await else {
        return Err(std::io::Error::other("snapshot thread failed"));
    };
    tracing::info!(%replid, offset, "Starting BGSAVE for SYNC with target: replicas sockets");
    if is_psync {
        sock.write_all(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes())
            .await?;
    }
    let rdb = loop {
        tokio::select! {
            r = &mut job => break r,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                sock.write_all(b"\n").await?;
            }
        }
    };
    let rdb = match rdb {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return Err(std::io::Error::other(e.to_string())),
        Err(e) => return Err(std::io::Error::other(e.to_string())),
    };
    info.state.store(STATE_SEND_BULK, Ordering::Relaxed);
    sock.write_all(format!("${}\r\n", rdb.len()).as_bytes())
        .await?;
    sock.write_all(&rdb).await?;
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

/// Streams the replica's buffer and reads its REPLCONF ACKs until the link ends.
async fn stream(
    srv: &Arc<Server>,
    sock: &mut TcpStream,
    cl: &mut ClientState,
    inbuf: &mut BytesMut,
    info: &Arc<ReplicaInfo>,
    rx: &mut mpsc::UnboundedReceiver<Bytes>,
) -> std::io::Result<()> {
    let handle = cl.handle.clone();
    let mut parser = Parser::new();
    let mut check = tokio::time::interval(Duration::from_secs(1));
    let mut batch: Vec<u8> = Vec::new();
    // Requests that arrived with the PSYNC (an early ACK).
    handle_input(srv, info, &mut parser, inbuf)?;
    loop {
        tokio::select! {
            biased;
            _ = handle.kill.notified() => return Ok(()),
            m = rx.recv() => {
                let Some(m) = m else { return Ok(()) };
                batch.clear();
                batch.extend_from_slice(&m);
                while batch.len() < 1 << 20 {
                    match rx.try_recv() {
                        Ok(m) => batch.extend_from_slice(&m),
                        Err(_) => break,
                    }
                }
                info.queued.fetch_sub(batch.len(), Ordering::Relaxed);
                srv.stats.net_output_bytes.fetch_add(batch.len() as u64, Ordering::Relaxed);
                srv.stats.net_repl_output_bytes.fetch_add(batch.len() as u64, Ordering::Relaxed);
                tokio::select! {
                    r = sock.write_all(&batch) => r?,
                    _ = handle.kill.notified() => return Ok(()),
                }
            }
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
