//! The source's side of an atomic slot migration: one task per export job. It connects to
//! the target's data port (its TLS port over TLS with `tls-replication yes`, as Valkey picks
//! the replication connection type for this link), authenticates with masteruser/masterauth when set, sends
//! ESTABLISH, then the snapshot of the job's slots as write commands, then the live stream
//! of writes to them, and answers the target's REQUEST-PAUSE / REQUEST-FAILOVER. Every
//! decision is the pure machine's (`tessera_cluster::asm::machine`); this file does its I/O.
//!
//! The snapshot needs no fork: [`Feed`] is subscribed to the write stream first, then the
//! copier walks the job's stripes one lock at a time and marks each stripe copied while it
//! still holds its lock. A write to a stripe not copied yet is left out of the stream (the
//! copy will hold its effect); a write to a copied stripe is streamed after the snapshot.
//! In cluster mode every command touches one slot, so each write falls on one side.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use tessera_cluster::asm::{self, Effect, JobName, SlotSet, SyncMsg};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::db::{stripe_of, SLOTS_PER_STRIPE, STRIPES};
use crate::propagate::{Write, WriteSubscriber};
use crate::repl::decoder::{Decoder, Event, StreamLimits};
use crate::resp::recycle_view;
use crate::server::unix::ClientStream;
use crate::server::Server;

const TICK: Duration = Duration::from_millis(100);
/// Snapshot chunks in flight between the copier and the socket (bounds its memory).
const CHUNKS_IN_FLIGHT: usize = 8;
/// A snapshot chunk is sent once it holds this much.
const CHUNK_BYTES: usize = 256 * 1024;
/// The connect and AUTH timeout (Valkey's repl-syncio-timeout default).
const SYNC_IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The live writes to the job's slots, in replication form, waiting for the socket.
pub struct Feed {
    slots: SlotSet,
    /// Per stripe: its keys are in the snapshot already, so its writes are streamed.
    copied: Box<[AtomicBool]>,
    buf: Mutex<FeedBuf>,
    ready: tokio::sync::Notify,
    /// client-output-buffer-limit's replica hard limit (0: none), as Valkey bounds its
    /// export client: past it the buffer is dropped and the link closed.
    limit: u64,
    overflow: AtomicBool,
}

#[derive(Default)]
struct FeedBuf {
    bytes: Vec<u8>,
    /// The database the target's link has selected (None: unknown, send SELECT).
    db: Option<usize>,
}

impl Feed {
    fn new(slots: SlotSet, limit: u64) -> Feed {
        Feed {
            slots,
            copied: (0..STRIPES).map(|_| AtomicBool::new(false)).collect(),
            buf: Mutex::new(FeedBuf::default()),
            ready: tokio::sync::Notify::new(),
            limit,
            overflow: AtomicBool::new(false),
        }
    }

    /// The buffer went past its limit (a stalled target): the link must close.
    fn overflowed(&self) -> bool {
        self.overflow.load(Ordering::Acquire)
    }

    fn pending(&self) -> usize {
        self.buf.lock().bytes.len()
    }

    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut self.buf.lock().bytes)
    }

    /// The snapshot switched databases: the stream must say SELECT again.
    fn forget_db(&self) {
        self.buf.lock().db = None;
    }
}

impl WriteSubscriber for Feed {
    /// Called with the command's stripes locked, in execution order.
    fn feed(&self, w: &Write<'_>) {
        // Keyless commands (MULTI/EXEC around a transaction, FLUSHALL, FUNCTION LOAD) have
        // no slot: Valkey drops them too. The slot comes from the first key, not from the
        // stripes the command held (a script holds them all).
        let Ok(cmd) = crate::cmd::table().resolve(w.args) else {
            return;
        };
        let mut idx = Vec::new();
        cmd.key_indices(w.args, &mut idx);
        let Some(key) = idx.first().and_then(|&i| w.args.get(i)) else {
            return;
        };
        let slot = crate::slot::key_hash_slot(key);
        if !self.slots.contains(slot) || !self.copied[stripe_of(slot)].load(Ordering::Acquire) {
            return;
        }
        if self.overflowed() {
            return;
        }
        let mut b = self.buf.lock();
        if self.limit > 0 && b.bytes.len() as u64 > self.limit {
            tracing::warn!(
                limit = self.limit,
                "slot migration: the export's buffer is over client-output-buffer-limit replica; closing its link"
            );
            b.bytes = Vec::new();
            self.overflow.store(true, Ordering::Release);
            drop(b);
            self.ready.notify_one();
            return;
        }
        if b.db != Some(w.db) {
            let d = w.db.to_string();
            tessera_rdb::aof::encode_command(&mut b.bytes, &[b"SELECT".as_slice(), d.as_bytes()]);
            b.db = Some(w.db);
        }
        tessera_rdb::aof::encode_command(&mut b.bytes, w.args);
        drop(b);
        self.ready.notify_one();
    }

    fn is_replication(&self) -> bool {
        true
    }
}

/// Starts the task of export job `name` (just created by MIGRATESLOTS).
pub fn spawn(srv: &Arc<Server>, name: JobName) {
    let srv = srv.clone();
    tokio::spawn(async move {
        run(&srv, name).await;
    });
}

/// What woke the task.
enum Ev {
    /// Live writes to stream.
    Wake,
    /// `Runtime::changed`: the job or the slot table changed outside the link.
    Changed,
    Chunk(Option<Vec<u8>>),
    /// Bytes read (0: the link closed or failed).
    Read(usize),
    Tick,
}

/// What the task holds while the job runs.
struct Link {
    /// Plain TCP, or TLS over it with `tls-replication yes`.
    sock: ClientStream,
    dec: Decoder,
    feed: Option<Arc<Feed>>,
    sub: Option<Arc<dyn WriteSubscriber>>,
    /// Snapshot chunks from the copier; None once the snapshot is over.
    chunks: Option<mpsc::Receiver<Vec<u8>>>,
    /// The snapshot is over: feed writes flow to the socket.
    streaming: bool,
    /// repl-timeout: a write the target takes nothing of for this long ends the link.
    stall: Duration,
}

async fn run(srv: &Arc<Server>, name: JobName) {
    let mut link = match connect(srv, &name).await {
        Some(l) => l,
        None => return,
    };
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut args: Vec<&'static [u8]> = Vec::with_capacity(4);
    loop {
        if !alive(srv, &name) {
            break;
        }
        if link.feed.as_ref().is_some_and(|f| f.overflowed()) {
            let fx = step(srv, &name, asm::machine::on_link_closed);
            let _ = perform(srv, &name, &mut link, fx).await;
            break;
        }
        let mut chunks = link.chunks.take();
        let ev = {
            let feed = link.feed.clone();
            let streaming = link.streaming;
            let feed_ready = async {
                match &feed {
                    Some(f) if streaming => f.ready.notified().await,
                    _ => std::future::pending().await,
                }
            };
            let chunk = async {
                match chunks.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = srv.asm.changed.notified() => Ev::Changed,
                _ = feed_ready => Ev::Wake,
                c = chunk => Ev::Chunk(c),
                n = link.sock.read_buf(link.dec.read_space()) => Ev::Read(n.map_or(0, |n| n)),
                _ = tick.tick() => Ev::Tick,
            }
        };
        let mut fx = Vec::new();
        let mut closed = false;
        // The copier's channel stays until it reports the snapshot's end.
        if !matches!(ev, Ev::Chunk(None)) {
            link.chunks = chunks;
        }
        match ev {
            Ev::Wake => {}
            Ev::Chunk(Some(bytes)) => {
                if put(&mut link.sock, &bytes, link.feed.as_deref(), link.stall)
                    .await
                    .is_err()
                {
                    closed = true;
                }
            }
            Ev::Chunk(None) => {
                // The copier is done: SNAPSHOT-EOF ends the snapshot, then the live writes
                // held meanwhile follow.
                let eof = SyncMsg::SnapshotEof.bytes();
                let ok = put(&mut link.sock, &eof, link.feed.as_deref(), link.stall)
                    .await
                    .is_ok();
                fx = step(srv, &name, |job, ctx| {
                    asm::machine::on_snapshot_done(job, ok, 0, ctx)
                });
            }
            Ev::Read(0) => closed = true,
            Ev::Read(_) => loop {
                let mut a = recycle_view(std::mem::take(&mut args));
                let msg = match link.dec.next(&mut a) {
                    Ok(Some(Event::Command { .. })) if a.len() >= 3 => {
                        match asm::dispatch(&a[2..], asm::Origin::Migration) {
                            asm::Dispatch::Link(m) => Some(m),
                            _ => Some(asm::LinkMsg::Unknown),
                        }
                    }
                    Ok(Some(_)) => Some(asm::LinkMsg::Unknown),
                    Ok(None) => None,
                    Err(_) => {
                        closed = true;
                        None
                    }
                };
                args = recycle_view(a);
                let Some(msg) = msg else { break };
                let more = step(srv, &name, |job, ctx| {
                    asm::machine::on_message(job, msg, ctx)
                });
                fx.extend(more);
            },
            // Something outside the link changed (the target's claim, a FLUSHALL): look now
            // rather than at the next tick, as writes may be paused meanwhile.
            Ev::Tick | Ev::Changed => {
                let pending = link.feed.as_ref().map_or(0, |f| f.pending());
                fx = cron(srv, &name, pending);
            }
        }
        if closed {
            let fx = step(srv, &name, asm::machine::on_link_closed);
            let _ = perform(srv, &name, &mut link, fx).await;
            // In failover-granted the job waits for the new owner without its link (the
            // target may close it once it claimed the slots): the claim's arrival wakes it.
            while alive(srv, &name) {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = srv.asm.changed.notified() => {}
                }
                let fx = cron(srv, &name, 0);
                if perform(srv, &name, &mut link, fx).await.is_err() {
                    break;
                }
            }
            break;
        }
        if perform(srv, &name, &mut link, fx).await.is_err() {
            let fx = step(srv, &name, asm::machine::on_link_closed);
            let _ = perform(srv, &name, &mut link, fx).await;
        }
        if link.streaming {
            if let Some(f) = &link.feed {
                let bytes = f.take();
                if !bytes.is_empty()
                    && put(&mut link.sock, &bytes, link.feed.as_deref(), link.stall)
                        .await
                        .is_err()
                {
                    let fx = step(srv, &name, asm::machine::on_link_closed);
                    let _ = perform(srv, &name, &mut link, fx).await;
                }
            }
        }
    }
    if let Some(sub) = link.sub.take() {
        srv.persist.prop.unsubscribe(&sub);
    }
    let (state, message) = srv.asm.log.lock().get(&name).map_or_else(
        || ("unknown".to_string(), String::new()),
        |j| (j.state.as_str().to_string(), j.message.clone()),
    );
    tracing::info!(job = %name.to_str_lossy(), %state, %message, "slot migration: export ended");
}

/// True while the job is in progress.
fn alive(srv: &Server, name: &JobName) -> bool {
    srv.asm
        .log
        .lock()
        .get(name)
        .is_some_and(|j| j.is_in_progress())
}

/// Runs `f` on the job with the machine's facts; returns its effects (not performed).
fn step(
    srv: &Server,
    name: &JobName,
    f: impl FnOnce(&mut asm::Job, &asm::Ctx) -> Vec<Effect>,
) -> Vec<Effect> {
    let mut ctx = super::machine_ctx(srv, true);
    ctx.pause_active = srv.clients_paused();
    match srv.asm.log.lock().get_mut(name) {
        Some(job) => f(job, &ctx),
        None => Vec::new(),
    }
}

/// The job's cron: ownership (the target's claim ends it), timeouts, the pause retry, ACKs.
fn cron(srv: &Server, name: &JobName, pending: usize) -> Vec<Effect> {
    let Some(node) = crate::cluster::node(srv) else {
        return Vec::new();
    };
    let ranges = match srv.asm.log.lock().get(name) {
        Some(j) => j.ranges.clone(),
        None => return Vec::new(),
    };
    let (me, owner) = node.with_state(|st| {
        let owner = asm::ranges_owner(&ranges, |s| st.slots.get(s as usize).copied().flatten());
        (st.myself, owner)
    });
    let mut ctx = super::machine_ctx(srv, true);
    ctx.pause_active = srv.clients_paused();
    ctx.reply_bytes = pending as u64;
    ctx.pending_write = pending > 0;
    let mut log = srv.asm.log.lock();
    let Some(job) = log.get_mut(name) else {
        return Vec::new();
    };
    let mut fx = asm::machine::on_topology(job, owner, &me, &ctx);
    if job.is_in_progress() {
        fx.extend(asm::machine::tick(job, &ctx));
    }
    fx
}

/// Connects, authenticates and establishes the job; None when the job failed.
async fn connect(srv: &Arc<Server>, name: &JobName) -> Option<Link> {
    let target = {
        let log = srv.asm.log.lock();
        log.get(name).and_then(|j| j.target_node)
    }?;
    let node = crate::cluster::node(srv)?;
    let (tls_replication, tls_cluster) = {
        let c = &srv.config.read().typed;
        (c.tls_replication, c.tls_cluster)
    };
    // A node's `port` is the one the bus speaks (TLS with tls-cluster) and `pport` the other.
    let addr = node.with_state(|st| {
        st.nodes.get(&target).map(|n| {
            let port = if tls_replication == tls_cluster {
                n.port
            } else {
                n.pport
            };
            (n.ip.clone(), port)
        })
    });
    let fail = |msg: String| {
        let fx = step(srv, name, |job, ctx| {
            asm::machine::on_connect_result(job, Err(&msg), false, ctx)
        });
        super::run_effects(srv, name, fx);
    };
    let Some((ip, port)) = addr.filter(|&(_, port)| port != 0) else {
        fail(asm::TARGET_NOT_FOUND.to_string());
        return None;
    };
    let sock = match tokio::time::timeout(SYNC_IO_TIMEOUT, TcpStream::connect((ip.as_str(), port)))
        .await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            fail(connect_error(&e));
            return None;
        }
        Err(_) => {
            fail("Connection timed out".to_string());
            return None;
        }
    };
    let _ = sock.set_nodelay(true);
    let sock = if tls_replication {
        let cfg = crate::server::tls::client_config(&srv.config.read());
        match cfg.map_err(|e| e.to_string()).and_then(|cfg| {
            crate::server::tls::TlsStream::connect(sock, cfg, &ip).map_err(|e| e.to_string())
        }) {
            Ok(tls) => ClientStream::Tls(Arc::new(tls)),
            Err(e) => {
                fail(e);
                return None;
            }
        }
    } else {
        ClientStream::Tcp(sock)
    };
    let limits = {
        let c = srv.config.read();
        StreamLimits::new(
            c.typed.proto_max_bulk_len,
            c.typed.client_query_buffer_limit,
        )
    };
    let mut link = Link {
        sock,
        dec: Decoder::stream(limits),
        feed: None,
        sub: None,
        chunks: None,
        streaming: false,
        stall: Duration::from_secs(srv.config.read().typed.repl_timeout.max(1)),
    };
    let with_auth = !srv.config.read().typed.masterauth.is_empty();
    let fx = step(srv, name, |job, ctx| {
        asm::machine::on_connect_result(job, Ok(()), with_auth, ctx)
    });
    perform(srv, name, &mut link, fx).await.ok()?;
    alive(srv, name).then_some(link)
}

/// Valkey's text for a refused connection ("Connection refused"), without Rust's
/// "(os error N)".
fn connect_error(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Writes `bytes` to the target, giving up (the link is then closed) when the feed went
/// over its limit or the target took no byte for `repl-timeout`: a stalled target must not
/// hold the task in a write forever while the feed's memory grows.
async fn put(
    sock: &mut ClientStream,
    bytes: &[u8],
    feed: Option<&Feed>,
    stall: Duration,
) -> Result<(), ()> {
    let w = sock.write_all(bytes);
    tokio::pin!(w);
    let start = tokio::time::Instant::now();
    loop {
        tokio::select! {
            r = &mut w => return r.map_err(|_| ()),
            _ = tokio::time::sleep(TICK) => {
                if feed.is_some_and(Feed::overflowed) || start.elapsed() > stall {
                    return Err(());
                }
            }
        }
    }
}

/// Reads one reply line (AUTH, ESTABLISH) within the sync I/O timeout, up to 16 KiB.
async fn read_line(sock: &mut ClientStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let read = async {
        let mut byte = [0u8; 1];
        loop {
            match sock.read(&mut byte).await {
                Ok(1) => {
                    buf.push(byte[0]);
                    if buf.ends_with(b"\r\n") || buf.len() > asm::wire::ESTABLISH_REPLY_LIMIT {
                        return true;
                    }
                }
                _ => return false,
            }
        }
    };
    match tokio::time::timeout(SYNC_IO_TIMEOUT, read).await {
        Ok(true) => Some(buf),
        _ => None,
    }
}

/// Performs the effects for the job's link; Err when the link broke.
async fn perform(
    srv: &Arc<Server>,
    name: &JobName,
    link: &mut Link,
    fx: Vec<Effect>,
) -> Result<(), ()> {
    let mut queue: std::collections::VecDeque<Effect> = fx.into();
    while let Some(e) = queue.pop_front() {
        match e {
            Effect::SendAuth => {
                let (user, pass) = {
                    let c = srv.config.read();
                    (c.typed.masteruser.clone(), c.typed.masterauth.clone())
                };
                let user = (!user.is_empty()).then_some(user.as_bytes());
                let sent = link
                    .sock
                    .write_all(&asm::wire::auth(user, pass.as_bytes()))
                    .await
                    .map_err(|e| e.to_string());
                let more = step(srv, name, |job, ctx| {
                    asm::machine::on_auth_sent(
                        job,
                        sent.as_ref().map(|_| ()).map_err(|e| e.as_str()),
                        ctx,
                    )
                });
                queue.extend(more);
                if sent.is_ok() {
                    let line = read_line(&mut link.sock)
                        .await
                        .map(|l| l.strip_suffix(b"\r\n").map(<[u8]>::to_vec).unwrap_or(l));
                    let more = step(srv, name, |job, ctx| {
                        asm::machine::on_auth_reply(job, line.as_deref(), ctx)
                    });
                    queue.extend(more);
                }
            }
            Effect::SendEstablish(bytes) => {
                let reply = match link.sock.write_all(&bytes).await {
                    Ok(()) => match read_line(&mut link.sock).await {
                        Some(line) => asm::wire::parse_establish_reply(&line),
                        None => asm::wire::EstablishReply::Failed(asm::TIMED_OUT.to_string()),
                    },
                    Err(_) => asm::wire::EstablishReply::Failed(asm::CONN_LOST_TO_TARGET.into()),
                };
                let more = step(srv, name, |job, ctx| {
                    asm::machine::on_establish_reply(job, &reply, ctx)
                });
                queue.extend(more);
            }
            Effect::StartSnapshot => {
                let ok = start_snapshot(srv, name, link);
                let more = step(srv, name, |job, ctx| {
                    asm::machine::on_snapshot_started(job, ok, ctx)
                });
                queue.extend(more);
            }
            Effect::BeginStreaming => {
                link.streaming = true;
                link.chunks = None;
            }
            Effect::Send(m) => {
                // Everything written before PAUSED (or any marker) goes first.
                if link.streaming {
                    if let Some(f) = &link.feed {
                        let bytes = f.take();
                        if !bytes.is_empty() {
                            put(&mut link.sock, &bytes, link.feed.as_deref(), link.stall).await?;
                        }
                    }
                }
                if m == SyncMsg::FailoverGranted {
                    grant(srv, name);
                }
                put(&mut link.sock, &m.bytes(), link.feed.as_deref(), link.stall).await?;
            }
            Effect::Pause { until_ms } => pause(srv, until_ms),
            Effect::ReleasePause => release_pause(srv, name),
            Effect::CloseLink => {
                let _ = link.sock.shutdown().await;
                if let Some(sub) = link.sub.take() {
                    srv.persist.prop.unsubscribe(&sub);
                }
            }
            other => {
                let send = super::run_effects(srv, name, vec![other]);
                if !send.is_empty() {
                    put(&mut link.sock, &send, link.feed.as_deref(), link.stall).await?;
                }
            }
        }
    }
    Ok(())
}

/// Subscribes the job's feed and starts the copier. False when it could not start.
fn start_snapshot(srv: &Arc<Server>, name: &JobName, link: &mut Link) -> bool {
    let slots = match srv.asm.log.lock().get(name) {
        Some(j) => {
            let mut s = SlotSet::new();
            for r in &j.ranges {
                s.insert_range(*r);
            }
            s
        }
        None => return false,
    };
    let limit = srv.config.read().typed.client_output_buffer_limit[1].hard;
    let feed = Arc::new(Feed::new(slots.clone(), limit));
    let sub: Arc<dyn WriteSubscriber> = feed.clone();
    srv.persist.prop.subscribe(sub.clone());
    let (tx, rx) = mpsc::channel(CHUNKS_IN_FLIGHT);
    let srv2 = srv.clone();
    let feed2 = feed.clone();
    let started = std::thread::Builder::new()
        .name("tessera-asm-snap".into())
        .spawn(move || copy_slots(&srv2, &slots, &feed2, &tx));
    if started.is_err() {
        srv.persist.prop.unsubscribe(&sub);
        return false;
    }
    link.feed = Some(feed);
    link.sub = Some(sub);
    link.chunks = Some(rx);
    true
}

/// The copier: the job's slots, stripe by stripe, as write commands (SELECT, SET, RPUSH
/// ..., PEXPIREAT), in chunks; each stripe is marked copied under its lock.
fn copy_slots(srv: &Server, slots: &SlotSet, feed: &Feed, tx: &mpsc::Sender<Vec<u8>>) {
    let mut stripes: Vec<usize> = slots.iter().map(stripe_of).collect();
    stripes.sort_unstable();
    stripes.dedup();
    let ndb = srv.ks.databases();
    let mut chunk = Vec::with_capacity(CHUNK_BYTES + 4096);
    let mut db_sel: Option<usize> = None;
    let mut items: Vec<(usize, Bytes, tessera_rdb::RdbValue, Option<i64>)> = Vec::new();
    for idx in stripes {
        {
            let st = srv.ks.lock_stripe(idx);
            for db in 0..ndb {
                let mine = (0..SLOTS_PER_STRIPE)
                    .map(|l| (l * STRIPES + idx) as u16)
                    .filter(|s| slots.contains(*s));
                for slot in mine {
                    let Some(m) = st.map(db, slot) else { continue };
                    for (k, e) in m.iter() {
                        let at = e.expire_at();
                        let exp = (at != crate::db::NO_EXPIRE).then_some(at as i64);
                        items.push((
                            db,
                            Bytes::copy_from_slice(k),
                            crate::db::rdb::to_rdb(&e.value),
                            exp,
                        ));
                    }
                }
            }
            feed.copied[idx].store(true, Ordering::Release);
        }
        for (db, k, v, exp) in items.drain(..) {
            if db_sel != Some(db) {
                let d = db.to_string();
                tessera_rdb::aof::encode_command(&mut chunk, &[b"SELECT".as_slice(), d.as_bytes()]);
                db_sel = Some(db);
            }
            crate::persist::aof_base::key_commands(&mut chunk, &k, &v, exp);
            if chunk.len() >= CHUNK_BYTES && tx.blocking_send(std::mem::take(&mut chunk)).is_err() {
                return;
            }
        }
    }
    if !chunk.is_empty() {
        let _ = tx.blocking_send(chunk);
    }
    // The stream after the snapshot starts with its own SELECT (the snapshot's last one
    // is not the feed's).
    feed.forget_db();
}

/// FAILOVER-GRANTED: from now on the target's claim on these slots is taken whatever its
/// epoch (the target bumps its own without consensus).
fn grant(srv: &Server, name: &JobName) {
    let Some(node) = crate::cluster::node(srv) else {
        return;
    };
    let grant = match srv.asm.log.lock().get(name) {
        Some(j) => j.target_node.map(|t| {
            (
                t,
                j.ranges
                    .iter()
                    .map(|r| (r.start, r.end))
                    .collect::<Vec<_>>(),
            )
        }),
        None => None,
    };
    if let Some((t, ranges)) = grant {
        node.with_state(|st| {
            for (s, e) in ranges {
                st.granted_exports.push((t, s, e));
            }
        });
    }
}

/// Pauses every client write node-wide until `until_ms`, then waits for the writes
/// already running (they are in the feed once their locks are released).
fn pause(srv: &Server, until_ms: u64) {
    srv.asm.paused.store(true, Ordering::SeqCst);
    srv.pause.write_only.store(true, Ordering::SeqCst);
    srv.pause.until.store(until_ms, Ordering::SeqCst);
    tracing::info!("Pausing writes to allow slot migration to finalize failover");
    drop(srv.ks.lock_all());
}

/// The job holds no pause any more: lift it unless another export holds one; its grants
/// are withdrawn, and once the target owns the slots their keys here go (DELs propagated).
pub(super) fn release_pause(srv: &Server, name: &JobName) {
    let (still, job) = {
        let log = srv.asm.log.lock();
        (log.pause_until(), log.get(name).cloned())
    };
    // Only a pause an export set is lifted (a failed connect must not end a CLIENT PAUSE).
    if still.is_none() && srv.asm.paused.swap(false, Ordering::SeqCst) {
        srv.pause.lift();
    }
    let Some(node) = crate::cluster::node(srv) else {
        return;
    };
    let Some(job) = job else { return };
    let gone: Vec<u16> = node.with_state(|st| {
        st.granted_exports
            .retain(|(t, _, _)| Some(*t) != job.target_node);
        let me = st.myself;
        job.ranges
            .iter()
            .flat_map(|r| r.slots())
            .filter(|s| st.slots.get(*s as usize).copied().flatten() != Some(me))
            .collect()
    });
    let mut n = 0;
    for slot in gone {
        n += crate::cluster::host::delete_slot(srv, slot);
    }
    if n > 0 {
        tracing::info!(job = %name.to_str_lossy(), keys = n, "slot migration: deleted the exported keys");
    }
}
