//! One connection: read → parse every complete request → execute → flush once.

use std::cell::{Cell, RefCell};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::busy_io::Share;
use super::clients::{ClientHandle, ClientState, ReplyMode, REPLY_CHUNK, REPLY_MIN};
use super::prefetch::Lookahead;
use super::unix::{Accepted, ClientStream};
use super::{now_ms, Server};
use crate::cmd::{self, Outcome};
use crate::resp::{recycle_view, Limits, Out, Parser};

const DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// A connection as its I/O thread admitted it (see [`admit`]).
pub struct Admission {
    handle: Arc<ClientHandle>,
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
pub fn admit(srv: &Arc<Server>, sock: Accepted) -> Option<(ClientStream, Admission)> {
    // A unix socket client is local: protected mode never refuses it (Redis's
    // CLIENT_UNIX_SOCKET).
    let denied = sock
        .peer_ip()
        .is_some_and(|ip| protected_denies(&srv.config.read(), &srv.default_user, ip));
    if denied {
        srv.stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        refuse(sock, DENIED.as_bytes());
        return None;
    }
    sock.set_nodelay();
    let (addr, laddr) = sock.addrs();
    let id = srv.clients.next_id();
    let handle = ClientHandle::new(id, addr, laddr);
    handle.charge.attach(srv.clients.mem.clone());
    handle.unix_socket.store(sock.is_unix(), Ordering::Relaxed);
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
    let sock = match sock.into_stream() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "handing off a connection failed");
            return None;
        }
    };
    let plain = sock.plain_fd().is_some();
    let reg = super::busy_io::register(srv, handle.clone(), sock.as_raw_fd(), plain, sock.tls());
    // Nothing read yet and a fresh client state: answerable while parked.
    reg.share.park(!srv.requires_auth());
    Some((
        sock,
        Admission {
            handle,
            reg,
            counted,
        },
    ))
}

/// Sends a refused connection its error and closes it. Written at once, on the
/// non-blocking socket (a fresh socket takes it whole): a script starting on this thread
/// right after must not hold the answer back.
fn refuse(sock: Accepted, msg: &'static [u8]) {
    let sent = sock.write_now(msg);
    if let Some(rest) = msg.get(sent..).filter(|r| !r.is_empty()) {
        if let Ok(mut sock) = sock.into_stream() {
            tokio::spawn(async move {
                // A TLS client gets it once its handshake is done (flush); one that never
                // finishes it is dropped after a while.
                let send = async {
                    sock.write_all(rest).await?;
                    sock.flush().await?;
                    sock.shutdown().await
                };
                let _ = tokio::time::timeout(Duration::from_secs(10), send).await;
            });
        }
    }
}

/// Serves one admitted client until it quits, is killed, or sends a protocol error.
pub async fn handle(srv: Arc<Server>, mut sock: ClientStream, admission: Admission) {
    let Admission {
        handle,
        reg,
        counted,
    } = admission;
    let id = handle.id;
    let mut cl = ClientState::new(handle.clone(), !srv.requires_auth());
    cl.tls = matches!(sock, ClientStream::Tls(_));
    let res = serve(&srv, &mut sock, &mut cl, &reg.share).await;
    // What was still queued for this client is dropped: no longer in flight. After
    // close() a send fails and undoes its own count (ClientHandle::send).
    for m in handle.mailbox.close() {
        handle.dequeued(m.len());
    }
    drop(reg);
    handle.charge.finish();
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
    use crate::config::directives::QUERY_BUFFER_LIMIT_MIN;
    let used = inbuf.len().saturating_add(parsed) as u64;
    // Within the least limit, the usual small read skips loading the configuration.
    if used <= QUERY_BUFFER_LIMIT_MIN || used <= srv.config.read().typed.client_query_buffer_limit {
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
    sock: &mut ClientStream,
    cl: &mut ClientState,
    share: &Arc<Share>,
) -> std::io::Result<()> {
    // Nothing allocated before the first read, as Redis's query buffer (qbuf-free=0 until
    // then): the read path makes the room.
    let mut inbuf = BytesMut::new();
    let mut out = Out::new(false);
    // Big stored values go out by reference on a plain socket (TLS copies them into its
    // records anyway).
    out.shares = sock.plain_fd().is_some();
    let mut rd = Requests {
        args: Vec::with_capacity(8),
        qb: QueryBuf::new(&inbuf),
        ..Default::default()
    };
    let handle = cl.handle.clone();
    // Replies held for the end of the tick (plain sockets on an I/O thread), dropped with
    // the connection; `holding` while the buffer is away.
    let outbox = match sock.plain_fd() {
        Some(fd) if HOLDS.with(|h| h.get()) => Some(Outbox::new(fd, share.clone())),
        _ => None,
    };
    struct Closes<'a>(Option<&'a Outbox>);
    impl Drop for Closes<'_> {
        fn drop(&mut self) {
            if let Some(ob) = self.0 {
                ob.close();
            }
        }
    }
    let _closes = Closes(outbox.as_deref());
    let mut holding = false;
    // The waker the mailbox holds for this task (see `Mailbox::poll_ready`).
    let mut mail_waker = None;
    macro_rules! take_back {
        () => {
            if holding {
                holding = false;
                if let Some(ob) = &outbox {
                    ob.take_back(&mut out, &mut rd.rb, &handle);
                }
            }
        };
    }
    rd.qb.publish(&handle, &inbuf, rd.parser.parsed_len());
    rd.rb.publish(&handle);
    // The buffers' resize checks (Redis's clientsCron), armed while they may change.
    let cron = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(cron);
    let mut cron_armed = false;
    macro_rules! arm_cron {
        () => {
            if !cron_armed {
                cron_armed = true;
                cron.as_mut().reset(next_cron(srv));
            }
        };
    }
    loop {
        if handle.killed.load(Ordering::Relaxed) {
            return Ok(());
        }
        // Woken by the flush (the socket did not take all the replies): the rest waits
        // for the socket to be writable.
        if holding && outbox.as_ref().is_some_and(|ob| ob.flushed()) {
            take_back!();
        }
        // While parked with nothing buffered, a busy script's hook on this thread may
        // answer this connection's requests (super::busy_io). Held replies park it once
        // they are out (`flush_held`).
        share.park(
            !holding
                && inbuf.is_empty()
                && out.is_empty()
                && rd.parser.is_idle()
                && super::busy_io::servable(cl),
        );
        tokio::select! {
            biased;
            // `ClientHandle::kill` also sends an empty message here, so a kill wakes this
            // branch (no per-iteration `kill.notified()` registration).
            _ = std::future::poll_fn(|cx| handle.mailbox.poll_ready(cx, &mut mail_waker)) => {
                share.unpark();
                take_back!();
                share.resume(srv, cl, &mut out);
                // The messages stay in flight (left out of key eviction's count) until
                // written: they are copied to the output buffer first.
                rd.rb.allocate(&mut out);
                let mut taken = 0;
                handle.mailbox.drain(|m| {
                    out.raw(&m);
                    taken += handle.taken(m.len());
                });
                if handle.killed.load(Ordering::Relaxed) {
                    handle.charge.in_flight(-taken);
                    return Ok(());
                }
                rd.rb.note(out.len());
                let flushed = flush_some(sock, &mut out, &mut rd.rb, srv, &handle, cl.aof_mark).await;
                handle.charge.in_flight(-taken);
                flushed?;
                publish_mem(srv, cl, &rd, &inbuf, &out);
                arm_cron!();
            }
            r = std::future::poll_fn(|cx| sock.poll_write_ready(cx)), if !out.is_empty() => {
                share.unpark();
                take_back!();
                share.resume(srv, cl, &mut out);
                r?;
                flush_some(sock, &mut out, &mut rd.rb, srv, &handle, cl.aof_mark).await?;
                publish_mem(srv, cl, &rd, &inbuf, &out);
            }
            _ = &mut cron, if cron_armed => {
                share.unpark();
                take_back!();
                share.resume(srv, cl, &mut out);
                let now = now_ms();
                let idle_ms = now.saturating_sub(handle.last_active_ms.load(Ordering::Relaxed));
                let q = rd.qb.cron(&mut inbuf, idle_ms, QueryBuf::big_arg_room(&rd.parser));
                let r = rd.rb.cron(srv, &mut out, now);
                rd.qb.publish(&handle, &inbuf, rd.parser.parsed_len());
                rd.rb.publish(&handle);
                publish_mem(srv, cl, &rd, &inbuf, &out);
                cron_armed = q || r;
                if cron_armed {
                    cron.as_mut().reset(next_cron(srv));
                }
            }
            r = std::future::poll_fn(|cx| sock.poll_read_ready(cx)) => {
                share.unpark();
                take_back!();
                share.resume(srv, cl, &mut out);
                r?;
                // Room to read into (a buffer freed while idle is allocated again here).
                rd.qb.reserve(&mut inbuf, 4096, &rd.parser);
                let n = match sock.try_read_buf(&mut inbuf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                };
                if n == 0 {
                    return Ok(());
                }
                rd.qb.note_read(&handle, &inbuf, rd.parser.parsed_len());
                arm_cron!();
                // A big request being read may push the clients past maxmemory-clients
                // (without that limit, the figures the batch publishes when it ends do).
                if srv.clients.mem.limited() {
                    publish_mem(srv, cl, &rd, &inbuf, &out);
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
                rd.rb.allocate(&mut out);
                let keep = process(srv, sock, cl, &mut out, &mut rd, &mut inbuf).await?;
                // A big argument's header was read: its room is made now, as Redis does.
                rd.qb.reserve(&mut inbuf, 0, &rd.parser);
                // A request of very many arguments leaves its argument view big: Redis
                // frees its argv after each command.
                if rd.args.capacity() > 1024 {
                    rd.args = Vec::with_capacity(8);
                }
                rd.qb.publish(&handle, &inbuf, rd.parser.parsed_len());
                // Evictions the batch caused (CONFIG SET maxmemory-clients) happen before
                // its replies go out.
                publish_mem(srv, cl, &rd, &inbuf, &out);
                if keep && out.is_empty() && QueryBuf::big_arg_room(&rd.parser) > 0 {
                    // Only the head of a big argument so far, nothing to send: read on at
                    // once instead of yielding the tick, so the argument's memory counts
                    // before commands that other clients sent after it run (Redis reads
                    // the rest on its next event-loop turn, ahead of them;
                    // unit/client-eviction's CLIENT LIST right after a big write).
                    if handle.killed.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    continue;
                }
                // BCAST invalidations of the batch's writes, sent once per batch.
                crate::tracking::flush_bcast(srv);
                rd.rb.note(out.len());
                if !keep {
                    flush(sock, &mut out, &mut rd.rb, srv, &handle, cl.aof_mark).await?;
                    return Ok(());
                }
                match &outbox {
                    Some(ob) if !out.is_empty() => {
                        // appendfsync always: the batch's writes reach the disk first.
                        crate::persist::aof::before_reply(srv, cl.aof_mark).await;
                        // Once its replies are out, the hook of a script that starts before
                        // this task runs again may answer the connection as if it were
                        // parked.
                        let parks = inbuf.is_empty()
                            && rd.parser.is_idle()
                            && super::busy_io::servable(cl);
                        // The task's waker, for a flush the socket does not take whole
                        // (cloned only when it changed).
                        std::future::poll_fn(|cx| {
                            ob.hold(srv, &mut out, parks, cx.waker());
                            std::task::Poll::Ready(())
                        })
                        .await;
                        holding = true;
                    }
                    _ => {
                        // What the client does not take now waits for the socket to be
                        // writable, while its next requests are still read and run (as
                        // Redis does).
                        flush_some(sock, &mut out, &mut rd.rb, srv, &handle, cl.aof_mark)
                            .await?;
                        publish_mem(srv, cl, &rd, &inbuf, &out);
                    }
                }
                if handle.killed.load(Ordering::Relaxed) {
                    return Ok(());
                }
            }
        }
    }
}

// Per-thread by nature (one tick of this thread's runtime), not a contract between layers.
thread_local! {
    /// Replies of this I/O thread's connections held for the end of the tick (see
    /// [`Outbox`]).
    static HELD: RefCell<Vec<Arc<Outbox>>> = const { RefCell::new(Vec::new()) };
    /// This thread's runtime sends the held replies before it parks ([`holds_replies`]).
    static HOLDS: Cell<bool> = const { Cell::new(false) };
}

/// Most connections whose replies wait for the end of the tick: the one that holds one more
/// sends them all at once (a tick can run thousands of connections; their clients should
/// not wait for all of them).
const HOLD_MAX: usize = 64;

/// Marks this thread's runtime as one whose `on_thread_park` hook calls [`flush_held`]
/// (the I/O threads): its connections hold their replies for the end of the tick. Other
/// runtimes' connections write theirs at once.
pub fn holds_replies() {
    HOLDS.with(|h| h.set(true));
}

/// A connection's replies held until its I/O thread has run every connection it found
/// readable, so that they go out back to back, as Redis writes them all before it sleeps:
/// the first send wakes a client that sleeps in epoll_wait (on a VM an inter-processor
/// interrupt, 26% of the CPU of pipelined EVALs when each batch was sent as soon as it
/// ran), the sends right after it find the client awake.
///
/// The runtime's park hook sends them ([`flush_held`]); the connection's task is not polled
/// again for it (it was, when it yielded until the end of the tick instead: one more poll
/// and one more zero-timeout epoll per tick, a fifth of a GET's user CPU). The task takes
/// the buffer back the next time it runs ([`Outbox::take_back`]); a write the socket does
/// not take whole wakes it to wait for the socket. While a script runs past
/// busy-reply-threshold on this thread, its hook sends them too, as Redis sends pending
/// replies while a script is busy.
struct Outbox {
    fd: RawFd,
    /// Parked once its replies are out, when the task would have parked then.
    share: Arc<Share>,
    held: parking_lot::Mutex<Held>,
}

#[derive(Default)]
struct Held {
    /// The replies (their protocol and sharing settings unused).
    out: Out,
    /// In [`HELD`], not sent yet: the task took nothing back since it held the buffer.
    waiting: bool,
    /// What the flush wrote of a buffer the socket did not take whole (the task then
    /// writes the rest).
    sent: usize,
    /// The task would have parked once these are out.
    parks: bool,
    waker: Option<std::task::Waker>,
}

impl Outbox {
    fn new(fd: RawFd, share: Arc<Share>) -> Arc<Outbox> {
        Arc::new(Outbox {
            fd,
            share,
            held: parking_lot::Mutex::new(Held::default()),
        })
    }

    /// Hands the replies in `out` to the end-of-tick flush; `parks`: the connection may be
    /// parked once they are out. Sends them all at once when [`HOLD_MAX`] are waiting.
    fn hold(self: &Arc<Self>, srv: &Server, out: &mut Out, parks: bool, waker: &std::task::Waker) {
        let mut h = self.held.lock();
        h.out.swap_replies(out);
        h.waiting = true;
        h.sent = 0;
        h.parks = parks;
        if !h.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            h.waker = Some(waker.clone());
        }
        drop(h);
        let full = HELD.with(|l| {
            let mut l = l.borrow_mut();
            l.push(self.clone());
            l.len() >= HOLD_MAX
        });
        if full {
            flush_held(srv);
        }
    }

    /// Whether the flush has dealt with the held buffer (or nothing is held).
    fn flushed(&self) -> bool {
        !self.held.lock().waiting
    }

    /// Takes the output buffer back, with what the flush did not send (all of it if the
    /// flush has not run yet: the new replies go after it).
    fn take_back(&self, out: &mut Out, rb: &mut ReplyBuf, handle: &ClientHandle) {
        let mut h = self.held.lock();
        h.out.swap_replies(out);
        h.waiting = false;
        let sent = std::mem::take(&mut h.sent);
        drop(h);
        if out.is_empty() {
            clear_out(out, rb);
        } else if sent > 0 {
            rb.written(out, sent);
        }
        handle.out_pending.store(out.len(), Ordering::Relaxed);
    }

    /// The connection is ending: whatever is still held is dropped with it (the socket is
    /// closed next, and its descriptor may be reused by another connection).
    fn close(&self) {
        let mut h = self.held.lock();
        h.waiting = false;
        h.out.reset();
        h.waker = None;
    }
}

/// Sends what the socket takes of every held reply, without blocking (the I/O thread's park
/// hook; a busy script's hook, `busy_io`: the sockets belong to tasks that cannot run until
/// the script ends). A connection whose replies are all out and whose task would have
/// parked is parked (a busy script's hook answers it from then on, else its next request,
/// sent after that reply, would wait unanswered for the script's end); one whose socket
/// took only part of them is woken to write the rest.
pub fn flush_held(srv: &Server) {
    // Taken only when something is held: the park hook and the polling loop call this every
    // tick, and taking an empty list would drop its allocation each time.
    let taken = HELD.try_with(|l| {
        let mut l = l.borrow_mut();
        (!l.is_empty()).then(|| std::mem::take(&mut *l))
    });
    let Ok(Some(mut list)) = taken else {
        return;
    };
    for ob in list.drain(..) {
        let mut h = ob.held.lock();
        if !h.waiting {
            continue;
        }
        h.waiting = false;
        let (sent, from_buf) = send_held(ob.fd, &mut h.out);
        count_written(srv, sent);
        if h.out.is_empty() {
            // All out: the allocation goes back now, on the connection's own thread (see
            // `clear_out`).
            h.out.reset();
            if h.parks {
                ob.share.park(true);
            }
        } else {
            // The socket is full (or failed): the task waits for it (or reports the error).
            h.sent = from_buf;
            if let Some(w) = h.waker.take() {
                w.wake();
            }
        }
    }
    // The list's allocation is kept for the next tick.
    let _ = HELD.try_with(|l| {
        let mut l = l.borrow_mut();
        if l.is_empty() {
            *l = list;
        }
    });
}

/// Sends what the socket takes of `out` without blocking, consuming it; returns how much
/// that was and how much of it came out of `out.buf`. One `send` per call for a plain
/// buffer (the usual case), `sendmsg` over its slices when shared values are queued.
fn send_held(fd: RawFd, out: &mut Out) -> (usize, usize) {
    let (mut sent, mut from_buf) = (0, 0);
    while !out.is_empty() {
        let w = if out.has_front() {
            let mut slices = [std::io::IoSlice::new(&[]); MAX_IOV];
            let n = out.io_slices(&mut slices);
            // SAFETY: an all-zero msghdr is a valid empty one (no name, no control data).
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            // IoSlice is ABI-compatible with iovec on Unix (its documented guarantee).
            msg.msg_iov = slices.as_mut_ptr().cast();
            msg.msg_iovlen = n;
            // SAFETY: the fd is the socket of a live connection task: its Outbox stops
            // waiting (`Outbox::close`) before the task drops the socket, and this runs
            // on the task's own thread. The slices borrow `out`, which outlives the call.
            unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) }
        } else {
            // SAFETY: as above; the buffer outlives the call.
            unsafe {
                libc::send(
                    fd,
                    out.buf.as_ptr().cast(),
                    out.buf.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            }
        };
        if w > 0 {
            sent += w as usize;
            from_buf += out.consume(w as usize);
        } else if w < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {
            continue;
        } else {
            break;
        }
    }
    (sent, from_buf)
}

/// Writes the output buffer. A client killed while the write is stuck (a reader that
/// stopped reading, cut off by client-output-buffer-limit) ends the connection.
async fn flush(
    sock: &mut ClientStream,
    out: &mut Out,
    rb: &mut ReplyBuf,
    srv: &Server,
    handle: &ClientHandle,
    aof_mark: u64,
) -> std::io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    // A rare path (a blocking command, a pause, the last replies): shared values are
    // copied in, so the write below is of one buffer.
    out.flatten();
    // appendfsync always: the writes behind these replies reach the disk first (one fsync
    // per flushed batch, shared across clients).
    crate::persist::aof::before_reply(srv, aof_mark).await;
    srv.stats
        .net_output_bytes
        .fetch_add(out.buf.len() as u64, Ordering::Relaxed);
    srv.stats.writes_processed.fetch_add(1, Ordering::Relaxed);
    // Fast path: the socket takes the whole batch now (the usual case), without setting up
    // the kill-aware wait below.
    let sent = write_now(sock, &out.buf)?;
    if sent < out.buf.len() {
        handle
            .out_pending
            .store(out.buf.len() - sent, Ordering::Relaxed);
        tokio::select! {
            r = sock.write_all(&out.buf[sent..]) => r?,
            _ = handle.kill.notified() => {
                return Err(std::io::Error::other("client killed"));
            }
        }
        handle.out_pending.store(0, Ordering::Relaxed);
    }
    clear_out(out, rb);
    Ok(())
}

/// Counts one write of `sent` bytes to a client (INFO total_net_output_bytes and
/// total_writes_processed); a write that took nothing is not one.
fn count_written(srv: &Server, sent: usize) {
    if sent > 0 {
        srv.stats
            .net_output_bytes
            .fetch_add(sent as u64, Ordering::Relaxed);
        srv.stats.writes_processed.fetch_add(1, Ordering::Relaxed);
    }
}

/// The most slices one vectored write takes (each shared value adds two).
const MAX_IOV: usize = 64;

/// Writes what the socket takes of the waiting replies without waiting, consuming it;
/// returns how much that was and how much of it came out of `out.buf`.
fn write_out(sock: &mut ClientStream, out: &mut Out) -> std::io::Result<(usize, usize)> {
    if !out.has_front() {
        let sent = write_now(sock, &out.buf)?;
        out.buf.advance(sent);
        return Ok((sent, sent));
    }
    let (mut sent, mut from_buf) = (0, 0);
    while !out.is_empty() {
        let mut slices = [std::io::IoSlice::new(&[]); MAX_IOV];
        let n = out.io_slices(&mut slices);
        match sock.try_write_vectored(&slices[..n]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(w) => {
                sent += w;
                from_buf += out.consume(w);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((sent, from_buf))
}

/// Writes what the socket takes without waiting; returns how much that was.
fn write_now(sock: &mut ClientStream, buf: &[u8]) -> std::io::Result<usize> {
    let mut sent = 0;
    while sent < buf.len() {
        match sock.try_write(&buf[sent..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// Empties a fully written output buffer and gives its allocation back: the next batch
/// allocates the reply buffer again ([`ReplyBuf::allocate`]). A connection waiting for its
/// next request then holds no reply buffer, as Valkey's clients do: with 5000 clients
/// connected, kept buffers were 16 KiB of used_memory and a touched page of RSS each. The
/// allocation comes back from the thread's own free list (about 14 ns for a 16 KiB
/// malloc and free with mimalloc), and Redis frees the reply blocks beyond its buffer
/// once written too. (A per-thread list of written buffers reused across connections
/// saved ~160 instructions per request at -P 1, but the memory it kept counted for
/// maxmemory: invalidations to ten tracking clients filled it, and the node evicted keys
/// to pay for it, maxmemory_diff::tracking_invalidations_do_not_feed_eviction_like_redis.)
fn clear_out(out: &mut Out, rb: &mut ReplyBuf) {
    out.reset();
    rb.off = 0;
}

/// Writes what the socket takes now and keeps the rest for when it is writable again
/// (published as the client's pending output: omem, the output limits, tot-mem), so a
/// client that does not read its replies can still send requests, as with Redis.
async fn flush_some(
    sock: &mut ClientStream,
    out: &mut Out,
    rb: &mut ReplyBuf,
    srv: &Server,
    handle: &ClientHandle,
    aof_mark: u64,
) -> std::io::Result<()> {
    if out.is_empty() {
        // A batch that wrote no reply (a partial request, CLIENT REPLY OFF) gives back the
        // buffer allocated for it.
        clear_out(out, rb);
        return Ok(());
    }
    crate::persist::aof::before_reply(srv, aof_mark).await;
    let (sent, from_buf) = write_out(sock, out)?;
    count_written(srv, sent);
    if out.is_empty() {
        clear_out(out, rb);
    } else {
        rb.written(out, from_buf);
    }
    handle.out_pending.store(out.len(), Ordering::Relaxed);
    Ok(())
}

/// Publishes what the client holds (CLIENT LIST argv-mem, multi-mem, tot-mem) and its share
/// of the clients' memory; past maxmemory-clients, evicts the biggest clients (this one
/// too, maybe: the caller checks `killed`).
fn publish_mem(srv: &Server, cl: &ClientState, rd: &Requests, inbuf: &BytesMut, out: &Out) {
    use super::client_evict::{CLIENT_OVERHEAD, ENTRY_OVERHEAD, PREFIX_OVERHEAD};
    let h = &cl.handle;
    // A client being closed (output limit, kill, eviction) no longer counts, and its
    // closing must not evict anyone (Redis frees it first).
    if h.killed.load(Ordering::Relaxed) {
        h.charge.retire();
        return;
    }
    // The partial request's parsed arguments (Redis's argv of a command being read).
    let argv = rd.parser.parsed_len();
    let multi = cl.multi.as_ref().map_or(0, |m| {
        m.iter()
            .map(|c| c.iter().map(|a| a.len() + 16).sum::<usize>() + 32)
            .sum()
    });
    let entries =
        cl.watched.len() + cl.subs.len() + cl.psubs.len() + h.ssubs.load(Ordering::Relaxed);
    h.argv_mem.store(argv, Ordering::Relaxed);
    h.multi_mem.store(multi, Ordering::Relaxed);
    h.multi_count
        .store(cl.multi.as_ref().map_or(0, |m| m.len()), Ordering::Relaxed);
    // The reply buffer's bytes are in rbs and pending output past it in omem; what the
    // output buffer's allocation holds beyond both is memory this client takes too.
    let out_slack = out
        .buf
        .capacity()
        .saturating_add(rd.rb.off)
        .saturating_sub(out.buf.len().max(rd.rb.size));
    let conn = rd
        .qb
        .alloc
        .max(inbuf.len())
        .saturating_add(multi)
        .saturating_add(rd.rb.size)
        .saturating_add(out_slack)
        .saturating_add(CLIENT_OVERHEAD)
        .saturating_add(entries.saturating_mul(ENTRY_OVERHEAD))
        .saturating_add(cl.tracking_prefixes.saturating_mul(PREFIX_OVERHEAD));
    h.conn_mem.store(conn, Ordering::Relaxed);
    if h.obuf_class() == 1 || h.kind.load(Ordering::Relaxed) == super::clients::KIND_MASTER {
        // Replica and master links are not clients eviction counts.
        h.charge.retire();
        return;
    }
    h.recharge();
    // The limit is resolved where the configuration changes (`Server::config_changed`,
    // before CONFIG SET's reply), so a batch that set it is checked against it here.
    if srv.clients.mem.over() {
        super::client_evict::evict(srv);
    }
}

/// How often a connection checks its buffers while they may change, with `clients`
/// connected: as often as Redis's clientsCron visits a client. Its 10 runs a second each
/// visit numclients/10 clients (at least 5): every client at each run when 5 or fewer are
/// connected, each client once a second from 50 on. A check every 100 ms whatever the
/// count woke each of 5000 busy connections 10 times a second, almost one wake-up per
/// request they served.
fn cron_period(clients: usize) -> Duration {
    let clients = clients.max(1);
    let per_run = if clients / 10 >= 5 {
        clients / 10
    } else {
        clients.min(5)
    };
    let runs = clients.div_ceil(per_run).min(10);
    Duration::from_millis(100 * runs as u64)
}

/// When a connection's next buffer check is due.
fn next_cron(srv: &Server) -> tokio::time::Instant {
    tokio::time::Instant::now() + cron_period(srv.clients.len())
}

/// The reply buffer's size as Redis manages and reports it (CLIENT LIST rbs and rbp;
/// unit/replybufsize): 16 KiB to start; the cron halves it (down to 1 KiB) when the peak
/// of replies waiting in it stayed under half, and doubles it (up to 16 KiB) when replies
/// filled it. The peak restarts every DEBUG REPLYBUFFER PEAK-RESET-TIME ms (5 s).
struct ReplyBuf {
    size: usize,
    peak: usize,
    peak_reset_at: u64,
    /// Written bytes still at the front of the output buffer's allocation (a partial
    /// write advances past them): memory the client holds, counted in its tot-mem.
    off: usize,
}

impl Default for ReplyBuf {
    fn default() -> Self {
        ReplyBuf {
            size: REPLY_CHUNK,
            peak: 0,
            peak_reset_at: now_ms(),
            off: 0,
        }
    }
}

impl ReplyBuf {
    /// Gives a connection's output buffer its whole reply-buffer allocation before the
    /// first replies are written into it. The buffer starts unallocated and is given back
    /// once written ([`clear_out`]), so an idle connection holds nothing. Had it grown
    /// reply by reply instead, a client's first big reply would raise used_memory right
    /// after the reply was built: INFO's ~6 KB reply moved used_memory 12 KB past the
    /// figure it reported, and unit/maxmemory, which sets maxmemory 10 KiB above that
    /// figure, then saw evictions. Redis's reply buffer is a fixed allocation made when the
    /// client is created.
    fn allocate(&self, out: &mut Out) {
        if out.buf.capacity() == 0 {
            out.buf.reserve(self.size);
        }
    }

    /// A partial write advanced the output buffer by `sent`. Once the written front is at
    /// least what waits behind it, the rest moves to an allocation of its own size: what a
    /// slow reader holds stays within twice its pending replies, and each byte is moved at
    /// most once on average (Redis frees each reply block once it is written).
    fn written(&mut self, out: &mut Out, sent: usize) {
        self.off = self.off.saturating_add(sent);
        if self.off >= out.buf.len() {
            let mut fresh = BytesMut::with_capacity(out.buf.len().max(self.size));
            fresh.extend_from_slice(&out.buf);
            out.buf = fresh;
            self.off = 0;
        }
    }

    /// Replies of `pending` bytes are waiting: the part in the reply buffer raises the peak.
    fn note(&mut self, pending: usize) {
        self.peak = self.peak.max(pending.min(self.size));
    }

    fn publish(&self, handle: &ClientHandle) {
        handle.rbs.store(self.size, Ordering::Relaxed);
        handle.rbp.store(self.peak, Ordering::Relaxed);
    }

    /// Redis's clientsCronResizeOutputBuffer. Returns whether to check again (the size may
    /// still change).
    fn cron(&mut self, srv: &Server, out: &mut Out, now: u64) -> bool {
        let sw = &srv.debug;
        if !sw.reply_buffer_resizing.load(Ordering::Relaxed) {
            return false;
        }
        let shrink_to = self.size / 2;
        let expand_to = self.size * 2;
        let mut new = 0;
        if shrink_to >= REPLY_MIN && self.peak < shrink_to {
            new = REPLY_MIN.max(self.peak + 1);
            srv.clients
                .reply_buffer_shrinks
                .fetch_add(1, Ordering::Relaxed);
        } else if expand_to < REPLY_CHUNK * 2 && self.peak == self.size {
            new = REPLY_CHUNK.min(expand_to);
            srv.clients
                .reply_buffer_expands
                .fetch_add(1, Ordering::Relaxed);
        }
        let reset = sw.reply_buffer_peak_reset_ms.load(Ordering::Relaxed);
        if reset >= 0 && now.saturating_sub(self.peak_reset_at) >= reset as u64 {
            self.peak = out.len().min(self.size);
            self.peak_reset_at = now;
        }
        if new != 0 {
            // Nothing to give back here: an output buffer is freed once written
            // (`clear_out`), so an idle connection holds none.
            self.size = new;
        }
        self.size > REPLY_MIN || (self.peak >= self.size && self.size < REPLY_CHUNK)
    }
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
    /// Where the buffer made for a big argument (or given after one was taken) starts; 0
    /// once another buffer replaced it: see [`QueryBuf::take_request`].
    big_base: usize,
}

impl QueryBuf {
    /// Redis's PROTO_IOBUF_LEN: the room a read asks for.
    const IO_LEN: usize = 16 * 1024;
    /// Redis's PROTO_MBULK_BIG_ARG: an argument this large gets a buffer of its own size.
    const BIG_ARG: usize = 32 * 1024;
    /// Redis's PROTO_RESIZE_THRESHOLD: a buffer this large is trimmed toward its peak.
    const RESIZE_THRESHOLD: usize = 32 * 1024;

    fn new(inbuf: &BytesMut) -> QueryBuf {
        QueryBuf {
            alloc: inbuf.capacity(),
            peak: 0,
            big_base: 0,
        }
    }

    /// Makes room for `min_free` more bytes (a 16 KiB step); a reserve that had to act
    /// leaves the data at the start of the allocation, so the capacity is all of it.
    /// The room a big argument being read needs (0 when none is).
    fn big_arg_room(parser: &Parser) -> usize {
        parser
            .pending_bulk()
            .filter(|n| *n >= Self::BIG_ARG)
            .map_or(0, |n| {
                parser.parsed_len().saturating_add(n).saturating_add(2)
            })
    }

    fn reserve(&mut self, inbuf: &mut BytesMut, min_free: usize, parser: &Parser) {
        // A big argument arriving: room for exactly all of it, so one read may take what
        // is there and the buffer is no bigger than the argument (Redis's
        // sdsMakeRoomForNonGreedy for arguments of PROTO_MBULK_BIG_ARG bytes or more).
        if let Some(n) = parser.pending_bulk().filter(|n| *n >= Self::BIG_ARG) {
            let full = parser.parsed_len().saturating_add(n).saturating_add(2);
            if inbuf.len() < full {
                // Never more than twice what has arrived (at least 1 MiB ahead): a declared
                // length is a claim, and 20 clients each declaring 512 MB must not make the
                // node allocate 10 GB before a byte of it came (tests/server/protocol.rs).
                let room = full.min(inbuf.len().saturating_mul(2).max(1 << 20));
                if inbuf.capacity() < room {
                    let mut fresh = BytesMut::with_capacity(room);
                    fresh.extend_from_slice(inbuf);
                    *inbuf = fresh;
                    self.alloc = inbuf.capacity();
                    self.big_base = inbuf.as_ptr() as usize;
                }
                // The next read takes at most what is left of the argument, as Redis reads
                // only the argument's remaining bytes: asking for 16 KiB more here would
                // double a buffer sized to the argument (unit/client-eviction).
                return;
            }
        }
        if inbuf.capacity() - inbuf.len() < min_free {
            let done = parser.parsed_len();
            if done >= Self::BIG_ARG {
                // A big argument already complete stays where it is: grow by what follows
                // it (16 KiB at least), not by doubling the whole buffer. Redis hands such an
                // argument its own allocation and reads on into a fresh buffer, so a client
                // holding 1 MB of argument shows about 1 MB of memory, not 2 MB
                // (unit/client-eviction). The tail still grows geometrically.
                let grow = inbuf.len().saturating_sub(done).max(Self::IO_LEN);
                let mut fresh = BytesMut::with_capacity(inbuf.len().saturating_add(grow));
                fresh.extend_from_slice(inbuf);
                *inbuf = fresh;
            } else {
                inbuf.reserve(Self::IO_LEN);
            }
            self.alloc = inbuf.capacity();
            self.big_base = 0;
        }
    }

    /// The request of `len` bytes at the front of `inbuf`, taken out whole when the buffer
    /// was made for its big argument and holds just the request (up to 1/16 unused): its
    /// arguments then live in a buffer of their own, which a handler may keep as a stored
    /// value ([`ClientState::req_buf`]).
    ///
    /// The connection reads on into a new empty buffer of the request's size, as Redis
    /// gives a client whose big argument took its query buffer a new one of the
    /// argument's size (unit/querybuf checks it). A request of the same shape next then
    /// arrives in one read and is taken in turn: no copy at all. The buffer check shrinks
    /// it if smaller requests follow.
    fn take_request(&mut self, inbuf: &mut BytesMut, len: usize) -> Option<Bytes> {
        let whole = self.big_base != 0
            && inbuf.as_ptr() as usize == self.big_base
            && inbuf.len() == len
            && inbuf.capacity() - len <= len / 16;
        if !whole {
            return None;
        }
        let req = std::mem::replace(inbuf, BytesMut::with_capacity(len)).freeze();
        self.alloc = inbuf.capacity();
        self.big_base = inbuf.as_ptr() as usize;
        Some(req)
    }

    fn note_read(&mut self, handle: &ClientHandle, inbuf: &BytesMut, parsed: usize) {
        self.peak = self.peak.max(inbuf.len());
        self.publish(handle, inbuf, parsed);
    }

    /// qbuf counts what is not parsed yet (`parsed`: the partial request's parsed bytes,
    /// which Redis has moved to the client's arguments).
    fn publish(&self, handle: &ClientHandle, inbuf: &BytesMut, parsed: usize) {
        handle
            .qbuf
            .store(inbuf.len().saturating_sub(parsed), Ordering::Relaxed);
        handle
            .qbuf_free
            .store(self.alloc.saturating_sub(inbuf.len()), Ordering::Relaxed);
    }

    /// Redis's clientsCronResizeQueryBuffer: with more than 4 KiB unused, an idle (over
    /// 2 s) buffer keeps only its data, a big one shrinks to its recent peak. Returns
    /// whether to check again (the buffer still holds memory).
    fn cron(&mut self, inbuf: &mut BytesMut, idle_ms: u64, floor: usize) -> bool {
        let len = inbuf.len();
        if self.alloc.saturating_sub(len) > 4 * 1024 {
            // Never below the room of a big argument still arriving (Redis keeps
            // bulklen + 2).
            let target = if idle_ms / 1000 > 2 {
                Some(len.max(floor))
            } else if self.alloc > Self::RESIZE_THRESHOLD && self.alloc / 2 > self.peak {
                Some(len.max(self.peak).max(floor))
            } else {
                None
            }
            .filter(|t| *t < self.alloc);
            if let Some(t) = target {
                let mut fresh = BytesMut::with_capacity(t);
                fresh.extend_from_slice(inbuf);
                *inbuf = fresh;
                self.alloc = inbuf.capacity();
                self.big_base = 0;
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
    /// The reply buffer's size bookkeeping.
    rb: ReplyBuf,
}

/// Executes every complete request in `inbuf`. Returns false when the connection must close
/// (QUIT, protocol error, kill).
async fn process(
    srv: &Arc<Server>,
    sock: &mut ClientStream,
    cl: &mut ClientState,
    out: &mut Out,
    rd: &mut Requests,
    inbuf: &mut BytesMut,
) -> std::io::Result<bool> {
    // The config snapshot for the settings this loop reads and for the commands' own
    // checks (`cmd::execute_with`): loaded once per batch of requests and again only when
    // a CONFIG SET published a newer one (one atomic load per request to tell, where a
    // load was 5% of a pipelined GET's instructions). Dropped when the batch ends, so an
    // idle connection keeps no old config alive.
    let mut snap: Option<(u64, Arc<crate::config::Config>)> = None;
    loop {
        let class = cl.handle.obuf_class();
        let current = srv.config.generation();
        let (generation, cfg) = match &mut snap {
            Some((g, c)) if *g == current => (*g, &**c),
            slot => {
                let (g, c) = slot.insert(srv.config.snapshot_marked());
                (*g, &**c)
            }
        };
        let (max_bulk, batch, obuf) = (
            cfg.typed.proto_max_bulk_len,
            cfg.typed.prefetch_batch_max_size as usize,
            cfg.cobl[class],
        );
        cl.reply_limit = if class == 1 { 0 } else { obuf.hard as usize };
        let lim = Limits {
            max_bulk: max_bulk as i64,
            authenticated: cl.authenticated,
        };
        let Requests {
            parser,
            ahead,
            args: store,
            qb,
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
        // A request that filled a buffer made for its big argument leaves `inbuf` (empty
        // then) with its buffer.
        let req = qb.take_request(inbuf, len);
        // The arguments borrow `inbuf` (or the request's own buffer) until the request has
        // run; then the request's bytes are dropped (before anything below may read more
        // into `inbuf`).
        let mut args = recycle_view(std::mem::take(store));
        parser.args(req.as_deref().unwrap_or(inbuf), &mut args);
        if args.is_empty() {
            *store = recycle_view(args);
            if req.is_none() {
                inbuf.advance(len);
            }
            ahead.consumed(len);
            continue;
        }
        // Redis's processCommand first evicts tracked keys past tracking-table-max-keys,
        // and keys past maxmemory: an invalidation for this client goes out ahead of the
        // command's reply.
        let evicted = cl.tracking != 0 && super::evict::evict_before_command(srv);
        if crate::tracking::enforce_limit(srv) || evicted {
            let h = &cl.handle;
            h.mailbox.drain(|m| {
                out.raw(&m);
                h.dequeued(m.len());
            });
        }
        let mark = out.len();
        cl.req_buf.clone_from(&req);
        // A client held by CLIENT PAUSE counts as blocked until its command runs.
        let mut held = None;
        let mut cfg = Some(cfg);
        let outcome = loop {
            let o = match cfg.take() {
                Some(c) => cmd::execute_with(srv, cl, out, &args, (generation, c)),
                // After a pause: whatever the config is now.
                None => cmd::execute(srv, cl, out, &args),
            };
            match o {
                Outcome::Paused(until) => {
                    if held.is_none() {
                        held = Some(srv.blocking.hold_paused(cl.id));
                    }
                    flush(sock, out, &mut rd.rb, srv, &cl.handle, cl.aof_mark).await?;
                    // Boxed, as the two waits below: a rare path's state would otherwise
                    // sit in every connection's task (`process` was 1.5 KB of it).
                    Box::pin(wait_unpaused(srv, until)).await;
                    cl.now_ms = 0;
                }
                o => break o,
            }
        };
        drop(held);
        cl.req_buf = None;
        let is_client_cmd = args[0].eq_ignore_ascii_case(b"client");
        let is_client_reply =
            is_client_cmd && args.len() >= 2 && args[1].eq_ignore_ascii_case(b"reply");
        if cl.tracking != 0 {
            crate::tracking::after_command(cl, is_client_cmd);
        }
        *store = recycle_view(args);
        if req.is_none() {
            inbuf.advance(len);
        }
        drop(req);
        ahead.consumed(len);
        // SYNC/PSYNC (the connection becomes a replica link) and WAIT.
        if let Some(p) = cl.pending.take() {
            if !Box::pin(crate::repl::run_pending(srv, sock, cl, out, inbuf, p)).await? {
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
                flush(sock, out, &mut rd.rb, srv, &cl.handle, cl.aof_mark).await?;
                if !Box::pin(wait_blocked(srv, sock, cl, out, inbuf, w, &mut rd.qb)).await? {
                    return Ok(false);
                }
            }
            Outcome::Paused(_) => {}
        }
        if cl.handle.killed.load(Ordering::Relaxed) {
            return Ok(false);
        }
        // The class's output buffer limits, checked as each reply is added (Redis's
        // closeClientOnOutputBufferLimitReached): the rest of the pipeline goes unanswered
        // and nothing of the replies is sent. Replica links have their own (crate::repl).
        let used = out
            .len()
            .saturating_add(cl.handle.queued.load(Ordering::Relaxed)) as u64;
        if class != 1
            && ((obuf.hard > 0 && used >= obuf.hard) || obuf.soft > 0)
            && cl.handle.obuf_limit_reached(used, obuf, now_ms())
        {
            cl.handle.close_for_obuf_limit();
            cl.handle.charge.retire();
            out.reset();
            cl.handle.out_pending.store(0, Ordering::Relaxed);
            return Ok(false);
        }
        // Replies piling up past the reply buffer count for maxmemory-clients as they grow
        // (Redis updates a client's memory after each command), not only once per batch.
        if out.len() > REPLY_CHUNK && srv.clients.mem.limited() {
            publish_mem(srv, cl, rd, inbuf, out);
            if cl.handle.killed.load(Ordering::Relaxed) {
                out.clear();
                return Ok(false);
            }
        }
        // Without limits, a long pipeline's replies start going out before it ends.
        if obuf.hard == 0 && obuf.soft == 0 && out.len() > 64 * 1024 {
            flush_some(sock, out, &mut rd.rb, srv, &cl.handle, cl.aof_mark).await?;
        }
    }
}

/// A paused client's wait: until its next check of the pause, or the pause is lifted.
async fn wait_unpaused(srv: &Server, until: std::time::Instant) {
    tokio::select! {
        _ = tokio::time::sleep_until(until.into()) => {}
        _ = srv.pause.lifted.notified() => {}
    }
}

/// CLIENT REPLY OFF|SKIP: drops the reply just written (`is_client_reply`: the command was
/// CLIENT REPLY itself).
fn apply_reply_mode(cl: &mut ClientState, out: &mut Out, mark: usize, is_client_reply: bool) {
    match cl.reply_mode {
        ReplyMode::On => {}
        ReplyMode::Off => out.truncate(mark),
        ReplyMode::SkipNext => {
            // Set by this very command: skip starting with the next one.
            if is_client_reply {
                out.truncate(mark);
                cl.reply_mode = ReplyMode::Skip;
            }
        }
        ReplyMode::Skip => {
            out.truncate(mark);
            cl.reply_mode = ReplyMode::On;
        }
    }
}

/// Waits for a blocked command's reply, its timeout, a kill, or the client going away.
async fn wait_blocked(
    srv: &Arc<Server>,
    sock: &mut ClientStream,
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
                qb.note_read(&cl.handle, inbuf, 0);
                qb.reserve(inbuf, 1024, &Parser::default());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_checks_come_as_often_as_redis_visits_a_client() {
        let ms = |n| cron_period(n).as_millis();
        assert_eq!(ms(0), 100);
        assert_eq!(ms(5), 100);
        assert_eq!(ms(6), 200);
        assert_eq!(ms(20), 400);
        assert_eq!(ms(49), 1000);
        assert_eq!(ms(50), 1000);
        assert_eq!(ms(5000), 1000);
        assert_eq!(ms(5009), 1000);
    }

    fn config(directives: &[(&str, &str)]) -> crate::config::Config {
        let cli: Vec<(String, Vec<String>)> = directives
            .iter()
            .map(|(k, v)| (k.to_string(), vec![v.to_string()]))
            .collect();
        crate::config::Config::load(None, &cli, []).expect("config")
    }

    /// The reads of a 1 MB argument in the pattern that doubled its buffer: the buffer
    /// already has the argument's size and its last bytes need one more read. The read
    /// must go into the room left, not into a buffer twice the size
    /// (unit/client-eviction).
    #[test]
    fn big_argument_room_is_not_doubled() {
        const SIZE: usize = 1 << 20;
        let mut req = format!("*2\r\n${SIZE}\r\n").into_bytes();
        req.resize(req.len() + SIZE, b'v');
        req.extend_from_slice(b"\r\n");
        // Reads of at most 3000 bytes, as a socket that has less than that buffered gives.
        let (mut inbuf, mut qb, parser, _) = read_in(&req, 3000, |qb, sent| {
            assert!(
                qb.alloc <= req.len() + QueryBuf::IO_LEN,
                "{} bytes allocated for a request of {} after {sent}",
                qb.alloc,
                req.len()
            );
        });
        assert_eq!(parser.parsed_len(), req.len());
        // A complete big argument followed by more: the tail grows, the argument is not
        // copied into a buffer twice its size.
        qb.reserve(&mut inbuf, 4096, &parser);
        assert!(qb.alloc <= req.len() + 2 * QueryBuf::IO_LEN, "{}", qb.alloc);
    }

    /// Reads `req` in chunks of at most `chunk` bytes into whatever room `reserve` made,
    /// the way the connection does, until the request is complete or all of it was read;
    /// `each` sees the bookkeeping and the bytes read after every read. Returns the query
    /// buffer, its bookkeeping, the parser and the parser's result.
    fn read_in(
        req: &[u8],
        chunk: usize,
        mut each: impl FnMut(&QueryBuf, usize),
    ) -> (BytesMut, QueryBuf, Parser, Option<usize>) {
        let mut parser = Parser::new();
        let mut inbuf = BytesMut::new();
        let mut qb = QueryBuf::new(&inbuf);
        let mut sent = 0;
        let mut done = None;
        while sent < req.len() && done.is_none() {
            qb.reserve(&mut inbuf, 4096, &parser);
            let room = inbuf.capacity() - inbuf.len();
            assert!(room > 0, "no room to read into at {sent}");
            let n = room.min(chunk).min(req.len() - sent);
            inbuf.extend_from_slice(&req[sent..sent + n]);
            sent += n;
            done = parser.parse(&inbuf, Limits::default()).expect("parse");
            qb.reserve(&mut inbuf, 0, &parser);
            each(&qb, sent);
        }
        (inbuf, qb, parser, done)
    }

    fn request(args: &[&[u8]]) -> Vec<u8> {
        let mut r = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            r.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            r.extend_from_slice(a);
            r.extend_from_slice(b"\r\n");
        }
        r
    }

    /// A request whose last argument is big fills a buffer made for it and is taken out
    /// whole (its value can be stored with no copy). Any other shape stays in the query
    /// buffer.
    #[test]
    fn a_request_ending_in_a_big_argument_is_taken_whole() {
        let big = vec![b'v'; 100 * 1024];
        for chunk in [1000, 16 * 1024, 1 << 20] {
            let req = request(&[b"SET", b"key", &big]);
            let (mut inbuf, mut qb, _, done) = read_in(&req, chunk, |_, _| {});
            assert_eq!(done, Some(req.len()), "chunk {chunk}");
            let taken = qb.take_request(&mut inbuf, req.len()).expect("taken");
            assert_eq!(&taken[..], &req[..]);
            // A new buffer the request's size, as Redis gives the client.
            assert_eq!((inbuf.len(), inbuf.capacity()), (0, req.len()));
            assert_eq!(qb.alloc, req.len());
            // The next request of that shape arrives in it whole and is taken too.
            let base = inbuf.as_ptr();
            qb.reserve(&mut inbuf, 4096, &Parser::new());
            inbuf.extend_from_slice(&req);
            assert_eq!(inbuf.as_ptr(), base, "read into the buffer given");
            let again = qb.take_request(&mut inbuf, req.len()).expect("taken again");
            assert_eq!(&again[..], &req[..]);
        }
        // A smaller request in that buffer is taken while it fills 15/16 of it.
        let req = request(&[b"SET", b"key", &big]);
        let (mut inbuf, mut qb, _, _) = read_in(&req, 1 << 20, |_, _| {});
        qb.take_request(&mut inbuf, req.len()).expect("taken");
        let near = request(&[b"SET", b"key", &big[..big.len() - 1000]]);
        inbuf.extend_from_slice(&near);
        assert!(qb.take_request(&mut inbuf, near.len()).is_some());
        let small = request(&[b"SET", b"key", &big[..big.len() / 2]]);
        inbuf.extend_from_slice(&small);
        assert!(qb.take_request(&mut inbuf, small.len()).is_none());
        // The big argument followed by another: the buffer grew past the request.
        let req = request(&[b"SET", b"key", &big, b"EX", b"100"]);
        let (mut inbuf, mut qb, _, done) = read_in(&req, 16 * 1024, |_, _| {});
        assert_eq!(done, Some(req.len()));
        assert!(qb.take_request(&mut inbuf, req.len()).is_none());
        // No big argument: the ordinary query buffer.
        let req = request(&[b"SET", b"key", &big[..1000]]);
        let (mut inbuf, mut qb, _, done) = read_in(&req, 16 * 1024, |_, _| {});
        assert_eq!(done, Some(req.len()));
        assert!(qb.take_request(&mut inbuf, req.len()).is_none());
        // The request is only the front of what is buffered.
        let req = request(&[b"SET", b"key", &big]);
        let (mut inbuf, mut qb, _, _) = read_in(&req, 1 << 20, |_, _| {});
        inbuf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        assert!(qb.take_request(&mut inbuf, req.len()).is_none());
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
