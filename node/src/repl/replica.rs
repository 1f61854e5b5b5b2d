//! Replica side: the link to our master. Handshake (AUTH, PING, REPLCONF, PSYNC), full
//! resync (RDB as `$<len>` or the `$EOF:<mark>` form, loaded in place of the dataset) or
//! partial resync (+CONTINUE), then the command stream: applied in order, counted into the
//! offset, kept in our own backlog byte for byte (so our replicas, and the replicas of our
//! old master after a promotion, can continue from us), acknowledged every second and on
//! REPLCONF GETACK. Reconnects with back-off, trying a partial resync first.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::backlog::{encode, Backlog};
use crate::cmd::{self, eq_ic, Outcome};
use crate::resp::{recycle_view, Limits, Out, Parser};
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
    #[error("loading the RDB from master failed: {0}")]
    Load(String),
    #[error("link closed by CLIENT KILL")]
    Killed,
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
        let r = session(&srv, &host, port, gen).await;
        let was_up = srv.repl.link_up.swap(false, Ordering::AcqRel);
        srv.repl.sync_in_progress.store(false, Ordering::Release);
        if was_up {
            srv.repl.link_down_since.store(now_ms(), Ordering::Relaxed);
            backoff = Duration::from_millis(100);
        }
        match r {
            Err(LinkError::Stale) => return,
            Err(e) => tracing::warn!(%host, port, error = %e, "MASTER link ended"),
            Ok(()) => {}
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
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

/// A buffered reader over the master socket.
struct Conn {
    sock: TcpStream,
    rd: BytesMut,
    timeout: Duration,
}

impl Conn {
    async fn fill(&mut self) -> Result<(), LinkError> {
        if self.rd.capacity() - self.rd.len() < 16 * 1024 {
            self.rd.reserve(64 * 1024);
        }
        let n = tokio::time::timeout(self.timeout, self.sock.read_buf(&mut self.rd))
            .await
            .map_err(|_| LinkError::Timeout)??;
        if n == 0 {
            return Err(LinkError::Proto("connection closed".into()));
        }
        Ok(())
    }

    /// One reply line without CRLF; lone newlines (keep-alives) are skipped.
    async fn line(&mut self) -> Result<String, LinkError> {
        loop {
            while self.rd.first() == Some(&b'\n') {
                let _ = self.rd.split_to(1);
            }
            if let Some(p) = memchr::memchr(b'\n', &self.rd) {
                let l = self.rd.split_to(p + 1);
                let s = String::from_utf8_lossy(&l[..p]);
                return Ok(s.trim_end_matches('\r').to_string());
            }
            if self.rd.len() > 64 * 1024 {
                return Err(LinkError::Proto("reply line too long".into()));
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
        self.line().await
    }
}

async fn session(srv: &Arc<Server>, host: &str, port: u16, gen: u64) -> Result<(), LinkError> {
    let (timeout, auth, user, announce_ip, announce_port) = {
        let c = srv.config.read();
        (
            Duration::from_secs(c.uint("repl-timeout").max(1)),
            c.str("masterauth").to_string(),
            c.str("masteruser").to_string(),
            c.str("replica-announce-ip").to_string(),
            c.uint("replica-announce-port"),
        )
    };
    let sock = tokio::time::timeout(timeout, TcpStream::connect((host, port)))
        .await
        .map_err(|_| LinkError::Timeout)??;
    let _ = sock.set_nodelay(true);
    tracing::info!(host, port, "MASTER <-> REPLICA sync started");
    let peer = sock.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let laddr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let id = srv.clients.next_id();
    let (handle, _rx) = ClientHandle::new(id, peer, laddr);
    *handle.name.lock() = None;
    handle
        .kind
        .store(crate::server::clients::KIND_MASTER, Ordering::Relaxed);
    srv.clients.add(handle.clone());
    let _reg = Registered(srv, id);
    let mut c = Conn {
        sock,
        rd: BytesMut::with_capacity(64 * 1024),
        timeout,
    };
    let stale = || srv.repl.generation.load(Ordering::Acquire) != gen;

    // Handshake.
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
    let r = c.cmd(&[b"PING"]).await?;
    if r.starts_with("-NOAUTH") || r.starts_with("-NOPERM") || r.starts_with("-ERR") {
        return Err(LinkError::Master(r));
    }
    let my_port = if announce_port > 0 {
        announce_port.to_string()
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
    let r = if fresh {
        c.cmd(&[b"PSYNC", b"?", b"-1"]).await?
    } else {
        c.cmd(&[b"PSYNC", replid.as_bytes(), next.as_bytes()])
            .await?
    };
    if stale() {
        return Err(LinkError::Stale);
    }
    if let Some(rest) = r.strip_prefix("+FULLRESYNC") {
        let mut w = rest.split_whitespace();
        let (Some(id), Some(off)) = (w.next(), w.next().and_then(|o| o.parse::<u64>().ok())) else {
            return Err(LinkError::Proto(format!("bad FULLRESYNC reply: {r}")));
        };
        let id = id.to_string();
        tracing::info!(replid = %id, offset = off, "Full resync from master");
        srv.repl.sync_in_progress.store(true, Ordering::Release);
        let payload = read_payload(&mut c).await?;
        if stale() {
            return Err(LinkError::Stale);
        }
        load(srv, payload, id, off, gen).await?;
        srv.repl.sync_in_progress.store(false, Ordering::Release);
    } else if let Some(rest) = r.strip_prefix("+CONTINUE") {
        let new = rest.trim();
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
        let size = srv.config.read().uint("repl-backlog-size") as usize;
        sh.ensure_backlog(size);
        tracing::info!(replid = %sh.replid, offset = sh.offset, "Successful partial resynchronization with master.");
    } else {
        return Err(LinkError::Master(r));
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

/// Reads the RDB payload after +FULLRESYNC.
async fn read_payload(c: &mut Conn) -> Result<Vec<u8>, LinkError> {
    let head = c.line().await?;
    if head.starts_with('-') {
        return Err(LinkError::Master(head));
    }
    let Some(spec) = head.strip_prefix('$') else {
        return Err(LinkError::Proto(format!("bad bulk payload header: {head}")));
    };
    if let Some(mark) = spec.strip_prefix("EOF:") {
        let mark = mark.as_bytes().to_vec();
        if mark.len() != 40 {
            return Err(LinkError::Proto("bad EOF mark".into()));
        }
        let mut searched = 0usize;
        loop {
            if let Some(p) = memchr::memmem::find(&c.rd[searched..], &mark) {
                let end = searched + p;
                let payload = c.rd.split_to(end).to_vec();
                let _ = c.rd.split_to(40);
                return Ok(payload);
            }
            searched = c.rd.len().saturating_sub(40);
            c.fill().await?;
        }
    }
    let len: usize = spec
        .parse()
        .map_err(|_| LinkError::Proto(format!("bad payload length: {head}")))?;
    while c.rd.len() < len {
        c.rd.reserve(len - c.rd.len());
        c.fill().await?;
    }
    Ok(c.rd.split_to(len).to_vec())
}

/// Replaces the dataset with the RDB and adopts the master's history at `offset`.
async fn load(
    srv: &Arc<Server>,
    payload: Vec<u8>,
    replid: String,
    offset: u64,
    gen: u64,
) -> Result<(), LinkError> {
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
        let r = crate::persist::snapshot::load_rdb_stream(
            &srv2,
            std::io::Cursor::new(payload),
            "master payload",
            true,
        );
        srv2.persist.loading.store(false, Ordering::Relaxed);
        r.map(|(n, _, _)| n)
    })
    .await
    .map_err(|e| LinkError::Load(e.to_string()))?
    .map_err(|e| LinkError::Load(e.to_string()))?;
    tracing::info!(
        keys = n,
        secs = started.elapsed().as_secs_f64(),
        "MASTER <-> REPLICA sync: Finished with success"
    );
    let size = srv.config.read().uint("repl-backlog-size") as usize;
    {
        let _apply = srv.repl.apply_lock.lock();
        if srv.repl.generation.load(Ordering::Acquire) != gen {
            return Err(LinkError::Stale);
        }
        let mut sh = srv.repl.shared.lock();
        sh.replid = replid;
        sh.offset = offset;
        sh.replid2 = "0".repeat(40);
        sh.second_offset = -1;
        sh.backlog = Some(Backlog::new(size, offset));
        sh.last_db = None;
    }
    // Our own replicas hold the old dataset: they must resync.
    super::master::disconnect_replicas(srv);
    srv.repl.master_db.store(0, Ordering::Relaxed);
    // The AOF must describe the new dataset, not the one it replaced.
    if srv.persist.aof.enabled() {
        if let Err(e) = crate::persist::aof::bgrewrite(srv) {
            tracing::warn!(error = e, "AOF rewrite after the full sync not started");
        }
    }
    Ok(())
}

/// Applies the master's stream until the link ends.
async fn stream(
    srv: &Arc<Server>,
    c: &mut Conn,
    handle: &Arc<ClientHandle>,
    gen: u64,
) -> Result<(), LinkError> {
    let mut cl = ClientState::new(handle.clone(), true);
    // A partial resync continues in the database the stream had selected.
    cl.db = srv.repl.master_db.load(Ordering::Relaxed);
    let mut out = Out::new(false);
    let mut parser = Parser::new();
    // The argument view's allocation, reused by every command of the stream.
    let mut args: Vec<&'static [u8]> = Vec::with_capacity(8);
    let mut pending = 0usize;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Bytes that arrived with the handshake replies are applied first.
        if let Some(ack) = apply(
            srv,
            gen,
            &mut cl,
            &mut out,
            &mut parser,
            &mut c.rd,
            &mut args,
            &mut pending,
        )? {
            c.sock.write_all(&ack).await?;
        }
        if c.rd.capacity() - c.rd.len() < 16 * 1024 {
            c.rd.reserve(64 * 1024);
        }
        tokio::select! {
            biased;
            _ = handle.kill.notified() => return Err(LinkError::Killed),
            n = c.sock.read_buf(&mut c.rd) => {
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

/// Applies every complete command in `rd`. Returns REPLCONF ACK replies to send (GETACK).
#[allow(clippy::too_many_arguments)]
fn apply(
    srv: &Arc<Server>,
    gen: u64,
    cl: &mut ClientState,
    out: &mut Out,
    parser: &mut Parser,
    rd: &mut BytesMut,
    store: &mut Vec<&'static [u8]>,
    pending: &mut usize,
) -> Result<Option<Vec<u8>>, LinkError> {
    let mut acks: Option<Vec<u8>> = None;
    loop {
        let lim = Limits {
            max_bulk: i64::MAX,
            authenticated: true,
        };
        let done = parser
            .parse(rd, lim)
            .map_err(|e| LinkError::Proto(e.to_string()))?;
        let Some(len) = done else {
            return Ok(acks);
        };
        *pending += len;
        let n = std::mem::take(pending);
        // The arguments borrow `rd` until the command is applied and logged; then its bytes
        // are dropped.
        let mut args = recycle_view(std::mem::take(store));
        parser.args(rd, &mut args);
        // One command at a time against REPLICAOF: after a promotion nothing more of the
        // old master's stream is applied or counted.
        let _apply = srv.repl.apply_lock.lock();
        if srv.repl.generation.load(Ordering::Acquire) != gen {
            return Err(LinkError::Stale);
        }
        if args.is_empty() {
            *store = recycle_view(args);
            rd.advance(len);
            srv.repl.shared.lock().push(Bytes::from(vec![b'\n'; n]));
            continue;
        }
        if args.len() >= 2 && eq_ic(args[0], "replconf") && eq_ic(args[1], "getack") {
            // The ACK covers the stream up to (not including) this GETACK, as Redis.
            let off = srv.repl.shared.lock().offset;
            let ack = encode(&[b"REPLCONF", b"ACK", off.to_string().as_bytes()]);
            acks.get_or_insert_with(Vec::new).extend_from_slice(&ack);
        } else if !(args.len() == 1 && eq_ic(args[0], "ping")) {
            execute(srv, cl, out, &args);
        }
        // Our backlog and offset hold the stream byte for byte (the master sends the
        // canonical multibulk form, which is what `encode` produces).
        let raw = encode(&args);
        *store = recycle_view(args);
        rd.advance(len);
        if raw.len() != n {
            tracing::debug!(
                read = n,
                encoded = raw.len(),
                "non-canonical command from master"
            );
        }
        srv.repl.shared.lock().push(raw);
    }
}

/// Runs one command of the master's stream; its reply is dropped (a master gets none).
fn execute(srv: &Arc<Server>, cl: &mut ClientState, out: &mut Out, args: &[&[u8]]) {
    super::as_master(|| loop {
        match cmd::execute(srv, cl, out, args) {
            Outcome::Paused(until) => {
                // CLIENT PAUSE on a replica: the stream waits (rare; blocks this thread).
                std::thread::sleep(until.saturating_duration_since(std::time::Instant::now()));
                cl.now_ms = 0;
            }
            Outcome::Blocked(w) => {
                srv.blocking.cancel(w.id);
                break;
            }
            _ => break,
        }
    });
    cl.now_ms = 0;
    out.buf.clear();
    srv.repl.master_db.store(cl.db, Ordering::Relaxed);
    // SYNC/WAIT have no meaning on the master's link: never leave them to a client.
    let _ = super::take_pending();
}
