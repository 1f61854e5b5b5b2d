//! One connection: read → parse every complete request → execute → flush once.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::busy_io::Share;
use super::clients::{ClientHandle, ClientState, ReplyMode};
use super::prefetch::Lookahead;
use super::{now_ms, Server};
use crate::cmd::{self, Outcome};
use crate::resp::{recycle_view, Limits, Out, Parser};

const DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// A connection as its I/O thread admitted it (see [`admit`]).
pub struct Admission {
    handle: Arc<ClientHandle>,
    rx: tokio::sync::mpsc::UnboundedReceiver<Bytes>,
    reg: super::busy_io::Registration,
    counted: Counted,
}

/// A client's place in the registry (and under maxclients), given back when dropped: also
/// when its task panics or never runs, so a lost task cannot leak a slot.
struct Counted {
    srv: Arc<Server>,
    id: u64,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.srv.clients.remove(self.id);
    }
}

/// Admits a connection where its I/O thread picks it up, before its task first runs: a
/// script may start on this thread before then, and its hook must already know the
/// connection to answer it (crate::server::busy_io). So maxclients and protected mode are
/// checked here, before the connection is counted and registered with the hook, or the
/// hook could serve a connection that should have been refused (SHUTDOWN from a client
/// over maxclients). A refused connection gets redis's error and is closed; None then.
///
/// The caller lets the thread's closing connections run first (see
/// `super::serve_handoffs`): a client that has just closed must not count any more.
pub fn admit(
    srv: &Arc<Server>,
    sock: std::net::TcpStream,
    peer: SocketAddr,
) -> Option<(TcpStream, Admission)> {
    if protected_denies(&srv.config.read(), &srv.default_user, peer.ip()) {
        srv.stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        refuse(sock, DENIED.as_bytes());
        return None;
    }
    let _ = sock.set_nodelay(true);
    let laddr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let id = srv.clients.next_id();
    let (handle, rx) = ClientHandle::new(id, peer.to_string(), laddr);
    let maxclients = srv.config.read().typed.maxclients as usize;
    if !srv.clients.try_add(handle.clone(), maxclients) {
        srv.stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        refuse(sock, b"-ERR max number of clients reached\r\n");
        return None;
    }
    let counted = Counted {
        srv: srv.clone(),
        id,
    };
    let sock = match TcpStream::from_std(sock) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "handing off a connection failed");
            return None;
        }
    };
    let reg = super::busy_io::register(srv, handle.clone(), sock.as_raw_fd());
    // Nothing read yet and a fresh client state: answerable while parked.
    reg.share.park(!srv.requires_auth());
    Some((
        sock,
        Admission {
            handle,
            rx,
            reg,
            counted,
        },
    ))
}

/// Sends a refused connection its error and closes it. Written at once, on the
/// non-blocking socket (a fresh socket takes it whole): a script starting on this thread
/// right after must not hold the answer back.
fn refuse(sock: std::net::TcpStream, msg: &'static [u8]) {
    let sent = std::io::Write::write(&mut &sock, msg).unwrap_or(0);
    if let Some(rest) = msg.get(sent..).filter(|r| !r.is_empty()) {
        if let Ok(mut sock) = TcpStream::from_std(sock) {
            tokio::spawn(async move {
                let _ = sock.write_all(rest).await;
            });
        }
    }
}

/// Serves one admitted client until it quits, is killed, or sends a protocol error.
pub async fn handle(srv: Arc<Server>, mut sock: TcpStream, admission: Admission) {
    let Admission {
        handle,
        mut rx,
        reg,
        counted,
    } = admission;
    let id = handle.id;
    let mut cl = ClientState::new(handle.clone(), !srv.requires_auth());
    let res = serve(&srv, &mut sock, &mut cl, &mut rx, &reg.share).await;
    drop(reg);
    if let Err(e) = res {
        tracing::debug!(id, error = %e, "connection ended");
    }
    cleanup(&srv, &mut cl);
    drop(counted);
}

/// Drops subscriptions, watches and monitor registration of a closing client.
fn cleanup(srv: &Server, cl: &mut ClientState) {
    srv.pubsub.unsubscribe_all(cl);
    srv.watch.unwatch(cl);
    srv.monitors.remove(cl.id);
    crate::tracking::disable(srv, cl);
}

/// Whether protected mode refuses a client from `peer`: as Redis 7.0's
/// clientAcceptHandler, when protected-mode is on and the default user has no password,
/// every client not on loopback, whatever `bind` says (Redis 6 skipped the check when bind
/// was set; 7.0 does not). Loopback is all of 127.0.0.0/8 and ::1 (Redis compares the
/// strings "127.0.0.1" and "::1"; our tests and local pods use other 127.x addresses).
fn protected_denies(
    c: &crate::config::Config,
    auth: &super::auth::DefaultUserAuth,
    peer: std::net::IpAddr,
) -> bool {
    c.typed.protected_mode && !auth.requires_auth(&c.typed.requirepass) && !peer.is_loopback()
}

/// client-query-buffer-limit, checked after every read as Redis's readQueryFromClient does:
/// true (logged) when the unprocessed input plus what the parser holds for the request in
/// progress (`parsed`: its argument table) passes the limit, and the client must close.
/// Counting the table keeps `*<huge>` followed by millions of empty arguments bounded too.
fn over_query_limit(srv: &Server, cl: &ClientState, inbuf: &[u8], parsed: usize) -> bool {
    let limit = srv.config.read().typed.client_query_buffer_limit;
    let used = inbuf.len().saturating_add(parsed) as u64;
    if used <= limit {
        return false;
    }
    let mut head = String::new();
    super::stats::repr(&mut head, inbuf.get(..64).unwrap_or(inbuf));
    tracing::warn!(
        "Closing client that reached max query buffer length: {} (qbuf initial bytes: {head})",
        cl.handle.info_line(srv)
    );
    true
}

async fn serve(
    srv: &Arc<Server>,
    sock: &mut TcpStream,
    cl: &mut ClientState,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Bytes>,
    share: &Share,
) -> std::io::Result<()> {
    let mut inbuf = BytesMut::with_capacity(QueryBuf::IO_LEN);
    let mut out = Out::new(false);
    let mut rd = Requests {
        args: Vec::with_capacity(8),
        qb: QueryBuf::new(&inbuf),
        ..Default::default()
    };
    let handle = cl.handle.clone();
    rd.qb.publish(&handle, &inbuf);
    // The query buffer's resize check (Redis's clientsCron), armed while it holds memory.
    let cron = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(cron);
    let mut cron_armed = false;
    loop {
        if handle.killed.load(Ordering::Relaxed) {
            return Ok(());
        }
        // While parked with nothing buffered, a busy script's hook on this thread may
        // answer this connection's requests (super::busy_io).
        share.park(
            inbuf.is_empty()
                && out.buf.is_empty()
                && rd.parser.is_idle()
                && super::busy_io::servable(cl),
        );
        tokio::select! {
            biased;
            // `ClientHandle::kill` also sends an empty message here, so a kill wakes this
            // branch (no per-iteration `kill.notified()` registration).
            msg = rx.recv() => {
                share.unpark();
                share.resume(srv, cl, &mut out);
                let Some(msg) = msg else { return Ok(()) };
                out.raw(&msg);
                handle.queued.fetch_sub(msg.len(), Ordering::Relaxed);
                while let Ok(m) = rx.try_recv() {
                    out.raw(&m);
                    handle.queued.fetch_sub(m.len(), Ordering::Relaxed);
                }
                if handle.killed.load(Ordering::Relaxed) {
                    return Ok(());
                }
                flush(sock, &mut out, srv, &handle, cl.aof_mark).await?;
            }
            _ = &mut cron, if cron_armed => {
                share.unpark();
                share.resume(srv, cl, &mut out);
                let idle_ms = now_ms().saturating_sub(handle.last_active_ms.load(Ordering::Relaxed));
                cron_armed = rd.qb.cron(&mut inbuf, idle_ms);
                rd.qb.publish(&handle, &inbuf);
                if cron_armed {
                    cron.as_mut().reset(tokio::time::Instant::now() + QueryBuf::CRON);
                }
            }
            r = sock.readable() => {
                share.unpark();
                share.resume(srv, cl, &mut out);
                r?;
                // Room to read into (a buffer freed while idle is allocated again here).
                rd.qb.reserve(&mut inbuf, 4096);
                let n = match sock.try_read_buf(&mut inbuf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                };
                if n == 0 {
                    return Ok(());
                }
                rd.qb.note_read(&handle, &inbuf);
                if !cron_armed {
                    cron_armed = true;
                    cron.as_mut().reset(tokio::time::Instant::now() + QueryBuf::CRON);
                }
                if handle.killed.load(Ordering::Relaxed) {
                    return Ok(());
                }
                super::spin::activity();
                srv.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                srv.stats.reads_processed.fetch_add(1, Ordering::Relaxed);
                if over_query_limit(srv, cl, &inbuf, rd.parser.mem()) {
                    return Ok(());
                }
                let now = now_ms();
                handle.last_active_ms.store(now, Ordering::Relaxed);
                cl.now_ms = now;
                let keep = process(srv, sock, cl, &mut out, &mut rd, &mut inbuf, rx).await?;
                rd.qb.publish(&handle, &inbuf);
                // BCAST invalidations of the batch's writes, sent once per batch.
                crate::tracking::flush_bcast(srv);
                end_of_tick(handle.id, sock.as_raw_fd(), &mut out).await;
                flush(sock, &mut out, srv, &handle, cl.aof_mark).await?;
                if !keep {
                    return Ok(());
                }
            }
        }
    }
}

// Per-thread by nature (one tick of this thread's runtime), not a contract between layers.
thread_local! {
    /// Replies of this I/O thread's connections held for the end of the tick: the
    /// connection's id, socket and output buffer (see [`end_of_tick`]).
    static HELD: RefCell<Vec<(u64, RawFd, BytesMut)>> = const { RefCell::new(Vec::new()) };
}

/// Waits until every connection the thread found readable has run its batch, so that the
/// replies go out back to back, as Redis writes them all before it sleeps: the first send
/// wakes a client that sleeps in epoll_wait (on a VM an inter-processor interrupt, 26% of
/// the CPU of pipelined EVALs when each batch was sent as soon as it ran), the sends right
/// after it find the client awake. A yielded task runs again after the runtime has polled
/// its sockets (tokio defers it), so this costs one zero-timeout poll per tick.
///
/// Meanwhile the replies sit in [`HELD`], where a script that runs past
/// busy-reply-threshold on this thread sends them ([`send_held`]), as Redis sends pending
/// replies while a script is busy.
async fn end_of_tick(id: u64, fd: RawFd, out: &mut Out) {
    /// Takes the buffer back, also when the task is dropped while it waits.
    struct Held<'a> {
        id: u64,
        out: &'a mut Out,
    }
    impl Drop for Held<'_> {
        fn drop(&mut self) {
            let _ = HELD.try_with(|h| {
                let mut h = h.borrow_mut();
                // From the end: tokio resumes deferred tasks last in, first out, so the
                // entry is usually the last one (no quadratic search with many clients).
                if let Some(i) = h.iter().rposition(|e| e.0 == self.id) {
                    self.out.buf = h.swap_remove(i).2;
                }
            });
        }
    }
    let buf = std::mem::take(&mut out.buf);
    HELD.with(|h| h.borrow_mut().push((id, fd, buf)));
    let _held = Held { id, out };
    tokio::task::yield_now().await;
}

/// Sends what it can of the held replies without blocking (the script hook of a busy
/// script, `busy_io`): the sockets belong to tasks that cannot run until the script ends.
pub fn send_held(srv: &Server) {
    HELD.with(|h| {
        for (_, fd, buf) in h.borrow_mut().iter_mut() {
            if buf.is_empty() {
                continue;
            }
            // SAFETY: the fd is the socket of a live connection task (its entry leaves
            // HELD before the task drops the socket); the buffer outlives the call.
            let n = unsafe {
                libc::send(
                    *fd,
                    buf.as_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if n > 0 {
                srv.stats
                    .net_output_bytes
                    .fetch_add(n as u64, Ordering::Relaxed);
                buf.advance(n as usize);
            }
        }
    });
}

/// Writes the output buffer. A client killed while the write is stuck (a reader that
/// stopped reading, cut off by client-output-buffer-limit) ends the connection.
async fn flush(
    sock: &mut TcpStream,
    out: &mut Out,
    srv: &Server,
    handle: &ClientHandle,
    aof_mark: u64,
) -> std::io::Result<()> {
    if out.buf.is_empty() {
        return Ok(());
    }
    // appendfsync always: the writes behind these replies reach the disk first (one fsync
    // per flushed batch, shared across clients).
    crate::persist::aof::before_reply(srv, aof_mark).await;
    srv.stats
        .net_output_bytes
        .fetch_add(out.buf.len() as u64, Ordering::Relaxed);
    srv.stats.writes_processed.fetch_add(1, Ordering::Relaxed);
    // Fast path: the socket takes the whole batch now (the usual case), without setting up
    // the kill-aware wait below.
    let mut sent = 0;
    while sent < out.buf.len() {
        match sock.try_write(&out.buf[sent..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if sent < out.buf.len() {
        tokio::select! {
            r = sock.write_all(&out.buf[sent..]) => r?,
            _ = handle.kill.notified() => {
                return Err(std::io::Error::other("client killed"));
            }
        }
    }
    out.buf.clear();
    if out.buf.capacity() > 1 << 20 {
        out.buf = BytesMut::with_capacity(16 * 1024);
    }
    Ok(())
}

/// The query buffer's size as Redis manages and reports it (CLIENT LIST qbuf and
/// qbuf-free; unit/querybuf): 16 KiB to start, grown by reads, freed after 2 s idle, and
/// trimmed back toward the recent peak once it is more than twice that peak.
#[derive(Default)]
struct QueryBuf {
    /// The buffer's allocation: its capacity with nothing consumed.
    alloc: usize,
    /// The most the buffer held since the last check.
    peak: usize,
}

impl QueryBuf {
    /// Redis's PROTO_IOBUF_LEN: the room a read asks for.
    const IO_LEN: usize = 16 * 1024;
    /// Redis's PROTO_RESIZE_THRESHOLD: a buffer this large is trimmed toward its peak.
    const RESIZE_THRESHOLD: usize = 32 * 1024;
    /// How often a connection holding a buffer checks it (Redis's clientsCron visits a
    /// client about this often when few are connected).
    const CRON: Duration = Duration::from_millis(200);

    fn new(inbuf: &BytesMut) -> QueryBuf {
        QueryBuf {
            alloc: inbuf.capacity(),
            peak: 0,
        }
    }

    /// Makes room for `min_free` more bytes (a 16 KiB step); a reserve that had to act
    /// leaves the data at the start of the allocation, so the capacity is all of it.
    fn reserve(&mut self, inbuf: &mut BytesMut, min_free: usize) {
        if inbuf.capacity() - inbuf.len() < min_free {
            inbuf.reserve(Self::IO_LEN);
            self.alloc = inbuf.capacity();
        }
    }

    fn note_read(&mut self, handle: &ClientHandle, inbuf: &BytesMut) {
        self.peak = self.peak.max(inbuf.len());
        self.publish(handle, inbuf);
    }

    fn publish(&self, handle: &ClientHandle, inbuf: &BytesMut) {
        handle.qbuf.store(inbuf.len(), Ordering::Relaxed);
        handle
            .qbuf_free
            .store(self.alloc.saturating_sub(inbuf.len()), Ordering::Relaxed);
    }

    /// Redis's clientsCronResizeQueryBuffer: with more than 4 KiB unused, an idle (over
    /// 2 s) buffer keeps only its data, a big one shrinks to its recent peak. Returns
    /// whether to check again (the buffer still holds memory).
    fn cron(&mut self, inbuf: &mut BytesMut, idle_ms: u64) -> bool {
        let len = inbuf.len();
        if self.alloc.saturating_sub(len) > 4 * 1024 {
            let target = if idle_ms / 1000 > 2 {
                Some(len)
            } else if self.alloc > Self::RESIZE_THRESHOLD && self.alloc / 2 > self.peak {
                Some(len.max(self.peak))
            } else {
                None
            };
            if let Some(t) = target {
                let mut fresh = BytesMut::with_capacity(t);
                fresh.extend_from_slice(inbuf);
                *inbuf = fresh;
                self.alloc = inbuf.capacity();
            }
        }
        self.peak = len;
        self.alloc > 0
    }
}

/// A connection's request parser and its look-ahead (which parses ahead with its own),
/// the argument view's allocation and the query buffer's bookkeeping.
#[derive(Default)]
struct Requests {
    parser: Parser,
    ahead: Lookahead,
    /// The argument view's allocation, reused by every request of the connection.
    args: Vec<&'static [u8]>,
    /// The query buffer's size bookkeeping.
    qb: QueryBuf,
}

/// Executes every complete request in `inbuf`. Returns false when the connection must close
/// (QUIT, protocol error, kill).
async fn process(
    srv: &Arc<Server>,
    sock: &mut TcpStream,
    cl: &mut ClientState,
    out: &mut Out,
    rd: &mut Requests,
    inbuf: &mut BytesMut,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Bytes>,
) -> std::io::Result<bool> {
    loop {
        // One snapshot load per request for the settings this loop reads.
        let (max_bulk, batch, out_hard) = {
            let c = srv.config.read();
            (
                c.typed.proto_max_bulk_len,
                c.typed.prefetch_batch_max_size as usize,
                c.cobl[0].hard,
            )
        };
        let lim = Limits {
            max_bulk: max_bulk as i64,
            authenticated: cl.authenticated,
        };
        let Requests {
            parser,
            ahead,
            args: store,
            ..
        } = rd;
        let len = match parser.parse(inbuf, lim) {
            Ok(None) => return Ok(true),
            Ok(Some(len)) => len,
            Err(e) => {
                out.error(&format!("ERR Protocol error: {e}"));
                tracing::debug!(id = cl.id, error = %e, "protocol error");
                srv.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                return Ok(false);
            }
        };
        ahead.before(srv, cl.db, inbuf, len, lim, batch);
        // The arguments borrow `inbuf` until the request has run; then the request's bytes
        // are dropped (before anything below may read more into `inbuf`).
        let mut args = recycle_view(std::mem::take(store));
        parser.args(inbuf, &mut args);
        if args.is_empty() {
            *store = recycle_view(args);
            inbuf.advance(len);
            ahead.consumed(len);
            continue;
        }
        // Redis's processCommand first evicts tracked keys past tracking-table-max-keys: an
        // invalidation for this client goes out ahead of the command's reply.
        if crate::tracking::enforce_limit(srv) {
            while let Ok(m) = rx.try_recv() {
                out.raw(&m);
                cl.handle.queued.fetch_sub(m.len(), Ordering::Relaxed);
            }
        }
        let mark = out.buf.len();
        let outcome = loop {
            match cmd::execute(srv, cl, out, &args) {
                Outcome::Paused(until) => {
                    flush(sock, out, srv, &cl.handle, cl.aof_mark).await?;
                    tokio::time::sleep_until(until.into()).await;
                    cl.now_ms = 0;
                }
                o => break o,
            }
        };
        let is_client_cmd = args[0].eq_ignore_ascii_case(b"client");
        let is_client_reply =
            is_client_cmd && args.len() >= 2 && args[1].eq_ignore_ascii_case(b"reply");
        if cl.tracking != 0 {
            crate::tracking::after_command(cl, is_client_cmd);
        }
        *store = recycle_view(args);
        inbuf.advance(len);
        ahead.consumed(len);
        // SYNC/PSYNC (the connection becomes a replica link) and WAIT.
        if let Some(p) = cl.pending.take() {
            if !crate::repl::run_pending(srv, sock, cl, out, inbuf, p).await? {
                return Ok(false);
            }
        }
        apply_reply_mode(cl, out, mark, is_client_reply);
        if !cl.kept_pushes.is_empty() {
            out.raw(&cl.kept_pushes);
            cl.kept_pushes.clear();
        }
        if !matches!(outcome, Outcome::Done) {
            // Time passed (pause, block): later commands of the batch need a fresh clock.
            cl.now_ms = 0;
        }
        match outcome {
            Outcome::Done => {}
            Outcome::Close => return Ok(false),
            Outcome::Blocked(w) => {
                flush(sock, out, srv, &cl.handle, cl.aof_mark).await?;
                if !wait_blocked(srv, sock, cl, out, inbuf, w, &mut rd.qb).await? {
                    return Ok(false);
                }
            }
            Outcome::Paused(_) => {}
        }
        if cl.handle.killed.load(Ordering::Relaxed) {
            return Ok(false);
        }
        // Normal-class output buffer hard limit (a client pipelining huge replies).
        if out_hard > 0 && out.buf.len() as u64 > out_hard {
            tracing::info!(
                id = cl.id,
                "client closed for overcoming of output buffer limits"
            );
            out.buf.clear();
            return Ok(false);
        }
        if out.buf.len() > 64 * 1024 {
            flush(sock, out, srv, &cl.handle, cl.aof_mark).await?;
        }
    }
}

/// CLIENT REPLY OFF|SKIP: drops the reply just written (`is_client_reply`: the command was
/// CLIENT REPLY itself).
fn apply_reply_mode(cl: &mut ClientState, out: &mut Out, mark: usize, is_client_reply: bool) {
    match cl.reply_mode {
        ReplyMode::On => {}
        ReplyMode::Off => out.buf.truncate(mark),
        ReplyMode::SkipNext => {
            // Set by this very command: skip starting with the next one.
            if is_client_reply {
                out.buf.truncate(mark);
                cl.reply_mode = ReplyMode::Skip;
            }
        }
        ReplyMode::Skip => {
            out.buf.truncate(mark);
            cl.reply_mode = ReplyMode::On;
        }
    }
}

/// Waits for a blocked command's reply, its timeout, a kill, or the client going away.
async fn wait_blocked(
    srv: &Arc<Server>,
    sock: &mut TcpStream,
    cl: &mut ClientState,
    out: &mut Out,
    inbuf: &mut BytesMut,
    mut w: crate::blocking::WaitHandle,
    qb: &mut QueryBuf,
) -> std::io::Result<bool> {
    let sleep = async {
        if w.timeout_ms == 0 {
            std::future::pending::<()>().await
        } else {
            tokio::time::sleep(Duration::from_millis(w.timeout_ms)).await
        }
    };
    tokio::pin!(sleep);
    let handle = cl.handle.clone();
    loop {
        tokio::select! {
            r = &mut w.rx => {
                if let Ok(reply) = r {
                    out.raw(&reply);
                }
                return Ok(true);
            }
            _ = &mut sleep => {
                if srv.blocking.cancel(w.id) {
                    out.null_array();
                    return Ok(true);
                }
                // Served concurrently: the reply is on its way.
                if let Ok(reply) = (&mut w.rx).await {
                    out.raw(&reply);
                }
                return Ok(true);
            }
            _ = handle.kill.notified() => {
                srv.blocking.cancel(w.id);
                return Ok(false);
            }
            n = sock.read_buf(inbuf) => {
                // Requests sent while blocked wait in the buffer; EOF means the client left.
                if n? == 0 {
                    if !srv.blocking.cancel(w.id) {
                        let _ = (&mut w.rx).await;
                    }
                    return Ok(false);
                }
                // Redis reads a blocked client's input and applies the limit to it too.
                if over_query_limit(srv, cl, inbuf, 0) {
                    if !srv.blocking.cancel(w.id) {
                        let _ = (&mut w.rx).await;
                    }
                    return Ok(false);
                }
                qb.note_read(&cl.handle, inbuf);
                qb.reserve(inbuf, 1024);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(directives: &[(&str, &str)]) -> crate::config::Config {
        let cli: Vec<(String, Vec<String>)> = directives
            .iter()
            .map(|(k, v)| (k.to_string(), vec![v.to_string()]))
            .collect();
        crate::config::Config::load(None, &cli, []).expect("config")
    }

    /// Redis 7.0 applies protected mode whenever it is on and the default user has no
    /// password, to every client not on loopback, whatever `bind` says. (Unit-tested: the
    /// integration tests may only use 127.0.0.0/8, all loopback.)
    #[test]
    fn protected_mode_ignores_bind() {
        let outside: std::net::IpAddr = "192.0.2.9".parse().unwrap();
        let outside6: std::net::IpAddr = "fd00::9".parse().unwrap();
        let local: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let local6: std::net::IpAddr = "::1".parse().unwrap();
        for bind in [None, Some("192.0.2.2"), Some("* -::*"), Some("0.0.0.0")] {
            let mut d = vec![];
            if let Some(b) = bind {
                d.push(("bind", b));
            }
            let c = config(&d);
            assert!(
                protected_denies(&c, &Default::default(), outside),
                "bind {bind:?}"
            );
            assert!(
                protected_denies(&c, &Default::default(), outside6),
                "bind {bind:?}"
            );
            assert!(
                !protected_denies(&c, &Default::default(), local),
                "bind {bind:?}"
            );
            assert!(
                !protected_denies(&c, &Default::default(), local6),
                "bind {bind:?}"
            );
            d.push(("protected-mode", "no"));
            assert!(
                !protected_denies(&config(&d), &Default::default(), outside),
                "bind {bind:?}, off"
            );
            d.pop();
            d.push(("requirepass", "pw"));
            assert!(
                !protected_denies(&config(&d), &Default::default(), outside),
                "bind {bind:?}, password"
            );
        }
    }
}
