//! Answering the other connections of an I/O thread stuck in a busy script.
//!
//! A script runs inline on its connection's I/O thread, and the thread's other connections
//! are tokio tasks that cannot run until it returns. Other threads answer `-BUSY` through
//! the dispatcher's gate (`crate::script::busy`); for this thread's own connections Redis's
//! answer is the one we give too: serve them from inside the script's count hook (Redis's
//! processEventsWhileBlocked). Once the script is past busy-reply-threshold the hook calls
//! [`serve_stuck_thread`], which finds this thread's idle connections with input waiting,
//! *peeks* at their sockets, runs each complete request through the dispatcher (-BUSY for
//! most; SCRIPT KILL, FUNCTION KILL/STATS and SHUTDOWN run), writes the replies and only
//! then consumes the requests' bytes.
//!
//! A TLS connection is answered the same way through its stream, which its parked task does
//! not touch meanwhile: what the socket has is decrypted (the bytes leave the socket, and
//! whatever is not answered stays decrypted in the stream for the task), the replies are
//! encrypted and sent.
//!
//! Only connections parked between requests count as idle: nothing buffered in either
//! direction, no transaction, subscription, tracking or reply mode, authenticated. Their
//! task then finds its socket as if it had answered those requests itself. A request that
//! needs the connection's own state (AUTH, HELLO, RESET, MULTI, WATCH...), an incomplete
//! or malformed one, or one whose reply would not fit the socket's send buffer stays in the
//! socket with everything after it: that connection waits for the script's end, and its
//! task reads the rest then (the data that arrived meanwhile left the socket readable in
//! the thread's epoll set).
//!
//! Hand-rolled on raw fds (poll, recv MSG_PEEK, TIOCOUTQ) because the tokio reactor that
//! owns these sockets is this very thread, which is inside the script and cannot poll it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::clients::{ClientHandle, ClientState, ReplyMode};
use super::tls::{Parked, TlsStream};
use super::Server;
use crate::cmd::{self, flags, Outcome};
use crate::resp::{Limits, Out, Parser};

/// Most bytes peeked per connection and round: a longer request is left to the task.
const PEEK_MAX: usize = 64 * 1024;
/// Most reply bytes written per connection and round, and only into an empty send queue:
/// far under any socket send buffer, so the write is never short.
const REPLY_MAX: usize = 8 * 1024;
/// Rounds are at least this far apart (the hook fires about every millisecond).
const ROUND_EVERY: Duration = Duration::from_millis(2);

/// One connection of this thread, as seen from the hook.
pub struct Share {
    handle: Arc<ClientHandle>,
    fd: RawFd,
    /// The socket carries the protocol in the clear: the hook may answer on it.
    plain: bool,
    /// A TLS connection: the hook answers through its stream (decrypting what the socket
    /// has, encrypting the replies), which its parked task does not touch meanwhile.
    tls: Option<Arc<TlsStream>>,
    /// Parked between requests in a state the hook may answer for (see the module doc).
    idle: AtomicBool,
    /// The hook changed the connection's transaction state (MULTI, a refused command that
    /// dooms the transaction, EXEC refused, DISCARD): applied by the task when it runs
    /// again ([`Share::resume`]).
    tx_changed: AtomicBool,
    tx: parking_lot::Mutex<TxChange>,
    /// The hook ran HELLO for the connection: its protocol (`ClientHandle::resp3`) may
    /// have changed; the task's reply buffer follows it in [`Share::resume`].
    hello: AtomicBool,
}

/// What the hook did to a connection's transaction, as Redis would have done it to the
/// client: the task's own state catches up in [`Share::resume`].
#[derive(Default)]
struct TxChange {
    /// A transaction ended (DISCARD, or EXEC refused: discarded, watches dropped).
    ended: bool,
    /// In a transaction afterwards.
    in_multi: bool,
    /// That transaction had a command refused: its EXEC answers EXECABORT.
    flagged: bool,
}

impl Share {
    /// Called by the connection loop before it waits for input: `servable` says whether
    /// nothing is buffered and the client state is a plain one.
    #[inline]
    pub fn park(&self, servable: bool) {
        self.idle.store(servable, Ordering::Relaxed);
    }

    /// Called as soon as the connection loop runs again.
    #[inline]
    pub fn unpark(&self) {
        self.idle.store(false, Ordering::Relaxed);
    }

    /// Called by the connection loop when it runs again (after [`Share::unpark`]): applies
    /// to its client state what the hook did to its transaction meanwhile. One relaxed
    /// load when nothing happened.
    #[inline]
    pub fn resume(&self, srv: &Server, cl: &mut ClientState, out: &mut Out) {
        if self.tx_changed.load(Ordering::Relaxed) {
            self.apply_tx(srv, cl);
        }
        if self.hello.load(Ordering::Relaxed) {
            self.hello.store(false, Ordering::Relaxed);
            out.resp3 = self.handle.resp3.load(Ordering::Relaxed);
        }
    }

    #[cold]
    fn apply_tx(&self, srv: &Server, cl: &mut ClientState) {
        let t = std::mem::take(&mut *self.tx.lock());
        self.tx_changed.store(false, Ordering::Relaxed);
        if t.ended {
            cmd::transaction::end_multi(srv, cl);
        }
        if t.in_multi {
            if cl.multi.is_none() {
                cl.multi = Some(Vec::new());
                cl.multi_error = false;
            }
            cl.multi_error |= t.flagged;
            self.handle.in_multi.store(true, Ordering::Relaxed);
        }
    }

    /// Records what one request answered by the hook did to the transaction (`was`: in
    /// one before it; `cl`: the hook's view of the client after it).
    fn note_tx(&self, was: bool, cl: &ClientState) {
        let now = cl.multi.is_some();
        if was == now && !(now && cl.multi_error) {
            return;
        }
        let mut t = self.tx.lock();
        if was && !now {
            t.ended = true;
            t.flagged = false;
        }
        t.in_multi = now;
        t.flagged |= now && cl.multi_error;
        self.tx_changed.store(true, Ordering::Relaxed);
    }
}

/// Whether a parked client's state lets the hook answer for it.
pub fn servable(cl: &ClientState) -> bool {
    // A transaction is allowed: the hook refuses its commands with BUSY (dooming it), as
    // Redis does, and records that for the task (`Share::resume`).
    cl.authenticated
        && cl.tracking == 0
        && !cl.close_after_reply
        && matches!(cl.reply_mode, ReplyMode::On)
        && !cl.in_pubsub_context()
}

// Per-thread by nature, not contracts between layers: the I/O thread's own connections
// (and the server they belong to), which only this thread's stuck script can answer.
thread_local! {
    /// This I/O thread's servable connections, by client id.
    static CONNS: RefCell<HashMap<u64, Arc<Share>>> = RefCell::new(HashMap::new());
    /// The server this I/O thread's connections belong to (set when one registers).
    static SERVER: RefCell<Option<Arc<Server>>> = const { RefCell::new(None) };
    /// When this thread last served its connections from the hook (rate limit).
    static LAST_ROUND: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// A connection's entry in its thread's table; removed on drop.
pub struct Registration {
    pub share: Arc<Share>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let id = self.share.handle.id;
        let _ = CONNS.try_with(|c| c.borrow_mut().remove(&id));
    }
}

/// Enters a connection in this thread's table.
pub fn register(
    srv: &Arc<Server>,
    handle: Arc<ClientHandle>,
    fd: RawFd,
    plain: bool,
    tls: Option<Arc<TlsStream>>,
) -> Registration {
    SERVER.with(|s| {
        if s.borrow().is_none() {
            *s.borrow_mut() = Some(srv.clone());
        }
    });
    let share = Arc::new(Share {
        handle,
        fd,
        plain,
        tls,
        idle: AtomicBool::new(false),
        tx_changed: AtomicBool::new(false),
        tx: parking_lot::Mutex::new(TxChange::default()),
        hello: AtomicBool::new(false),
    });
    CONNS.with(|c| c.borrow_mut().insert(share.handle.id, share.clone()));
    Registration { share }
}

/// The socket of this thread's connection `id`: the Lua debugger (SCRIPT DEBUG SYNC)
/// talks to its client over it from inside the script, as Redis's does.
pub fn socket_of(id: u64) -> Option<RawFd> {
    CONNS.with(|c| c.borrow().get(&id).filter(|s| s.plain).map(|s| s.fd))
}

/// One round of answering this thread's idle connections (called by the script hook while
/// the script is past the threshold). Never blocks.
pub fn serve_stuck_thread() {
    let now = Instant::now();
    if LAST_ROUND.with(|l| l.get().is_some_and(|t| now.duration_since(t) < ROUND_EVERY)) {
        return;
    }
    LAST_ROUND.with(|l| l.set(Some(now)));
    let Some(srv) = SERVER.with(|s| s.borrow().clone()) else {
        return;
    };
    // Replies computed in the tick the script started in, before it; their connections
    // count as parked once those are out.
    super::conn::flush_held(&srv);
    drop_hung_up_replicas(&srv);
    // Collected first: the dispatcher runs below, and nothing may hold the table then.
    let idle: Vec<Arc<Share>> = CONNS.with(|c| {
        c.borrow()
            .values()
            .filter(|s| {
                (s.plain || s.tls.is_some())
                    && s.idle.load(Ordering::Relaxed)
                    && !s.handle.killed.load(Ordering::Relaxed)
            })
            .cloned()
            .collect()
    });
    if idle.is_empty() {
        return;
    }
    let mut fds: Vec<libc::pollfd> = idle
        .iter()
        .map(|s| libc::pollfd {
            fd: s.fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `fds` is a valid array of `fds.len()` pollfd entries for the whole call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    if n <= 0 {
        return;
    }
    for (share, p) in idle.iter().zip(&fds) {
        if p.revents & libc::POLLIN != 0 {
            serve_one(&srv, share);
        }
    }
}

/// Replica links of this thread whose peer hung up leave the master's replica list now,
/// as Redis frees such a client from processEventsWhileBlocked: a script waiting for
/// `connected_slaves:0` (or counting good replicas for min-replicas-to-write) sees it
/// gone. Their tasks close the sockets once the script is over.
fn drop_hung_up_replicas(srv: &Arc<Server>) {
    let links: Vec<(u64, RawFd)> = CONNS.with(|c| {
        c.borrow()
            .iter()
            .filter(|(_, s)| {
                s.handle.kind.load(Ordering::Relaxed) == super::clients::KIND_REPLICA
                    && !s.handle.killed.load(Ordering::Relaxed)
            })
            .map(|(id, s)| (*id, s.fd))
            .collect()
    });
    if links.is_empty() {
        return;
    }
    // POLLRDHUP: the peer closed even with its last REPLCONF ACKs still unread.
    let mut fds: Vec<libc::pollfd> = links
        .iter()
        .map(|(_, fd)| libc::pollfd {
            fd: *fd,
            events: libc::POLLRDHUP,
            revents: 0,
        })
        .collect();
    // SAFETY: `fds` is a valid array of `fds.len()` pollfd entries for the whole call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    if n <= 0 {
        return;
    }
    for ((id, _), p) in links.iter().zip(&fds) {
        if p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            crate::repl::master::link_lost(srv, *id);
        }
    }
}

/// Bytes in the socket's send queue not yet taken by the peer; None if unknown.
fn unsent(fd: RawFd) -> Option<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ writes one int through the pointer, which outlives the call.
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) };
    (r == 0 && n >= 0).then_some(n as usize)
}

/// Answers the complete requests waiting on one connection (see the module doc).
fn serve_one(srv: &Arc<Server>, share: &Share) {
    if unsent(share.fd) != Some(0) {
        // The client is not reading its replies: leave it to its task.
        return;
    }
    if let Some(tls) = &share.tls {
        return serve_one_tls(srv, share, tls);
    }
    let mut peeked = vec![0u8; PEEK_MAX];
    // SAFETY: the buffer is valid for PEEK_MAX bytes; MSG_PEEK leaves the data queued.
    let got = unsafe {
        libc::recv(
            share.fd,
            peeked.as_mut_ptr().cast(),
            peeked.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if got <= 0 {
        // EOF or an error: the task sees it when it runs.
        return;
    }
    peeked.truncate(got as usize);
    let (used, out, quit) = answer_requests(srv, share, &peeked);
    if used == 0 {
        return;
    }
    if !out.is_empty() {
        // SAFETY: `out` is valid for its length; the socket is non-blocking.
        let w = unsafe {
            libc::send(
                share.fd,
                out.as_ptr().cast(),
                out.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if w != out.len() as isize {
            // Not expected into an empty send queue; the replies can't be sent in order
            // any more, so the connection ends rather than desynchronise.
            return abandon(share, "could not answer a client during a busy script");
        }
        srv.stats
            .net_output_bytes
            .fetch_add(out.len() as u64, Ordering::Relaxed);
    }
    // Consume exactly the requests answered.
    let mut sink = vec![0u8; used];
    // SAFETY: `sink` is valid for `used` bytes, which the peek showed are queued.
    let r = unsafe { libc::recv(share.fd, sink.as_mut_ptr().cast(), used, libc::MSG_DONTWAIT) };
    if r != used as isize {
        return abandon(share, "client input changed under a busy script");
    }
    answered(srv, share, used, quit);
}

/// [`serve_one`] for a TLS connection: the same answers, through its stream.
fn serve_one_tls(srv: &Arc<Server>, share: &Share, tls: &TlsStream) {
    let mut result = None;
    let done = tls.answer_parked(|plain| {
        let (used, out, quit) = answer_requests(srv, share, plain);
        result = Some((used, out.len(), quit));
        (used, out)
    });
    match done {
        Parked::Nothing => {}
        Parked::Broken => abandon(share, "could not answer a TLS client during a busy script"),
        Parked::Answered => {
            if let Some((used, sent, quit)) = result {
                srv.stats
                    .net_output_bytes
                    .fetch_add(sent as u64, Ordering::Relaxed);
                answered(srv, share, used, quit);
            }
        }
    }
}

/// Bookkeeping once `used` request bytes were answered and consumed.
fn answered(srv: &Arc<Server>, share: &Share, used: usize, quit: bool) {
    srv.stats
        .net_input_bytes
        .fetch_add(used as u64, Ordering::Relaxed);
    share
        .handle
        .last_active_ms
        .store(super::now_ms(), Ordering::Relaxed);
    if quit {
        close(share);
    }
}

/// Runs the complete requests at the start of `input` through the dispatcher: how many
/// bytes they took, their replies, and whether one was QUIT.
fn answer_requests(srv: &Arc<Server>, share: &Share, input: &[u8]) -> (usize, Vec<u8>, bool) {
    let resp3 = share.handle.resp3.load(Ordering::Relaxed);
    let mut out = Out::new(resp3);
    let mut cl = ClientState::new(share.handle.clone(), true);
    cl.db = share.handle.db.load(Ordering::Relaxed);
    // In a transaction: its queue stays with the task; here only refusals happen to it.
    if share.handle.in_multi.load(Ordering::Relaxed) {
        cl.multi = Some(Vec::new());
    }
    let lim = Limits {
        max_bulk: srv.config.read().typed.proto_max_bulk_len as i64,
        authenticated: true,
    };
    let mut parser = Parser::new();
    let mut used = 0;
    let mut quit = false;
    while used < input.len() && out.buf.len() < REPLY_MAX {
        let rest = &input[used..];
        let len = match parser.parse(rest, lim) {
            Ok(Some(len)) => len,
            // Incomplete, or malformed: the task's own parser reports it.
            Ok(None) | Err(_) => break,
        };
        let mut args: Vec<&[u8]> = Vec::with_capacity(8);
        parser.args(rest, &mut args);
        if args.is_empty() {
            used += len;
            continue;
        }
        let was = cl.multi.is_some();
        let a = answer(srv, share, &mut cl, &mut out, &args);
        if !matches!(a, Answer::Leave) {
            share.note_tx(was, &cl);
        }
        match a {
            Answer::Done => used += len,
            Answer::Quit => {
                used += len;
                quit = true;
                break;
            }
            Answer::Leave => {
                // From here on the connection needs its task: stop looking at it this script.
                share.unpark();
                break;
            }
        }
    }
    (used, out.buf.to_vec(), quit)
}

/// Closes a connection whose stream can no longer be kept in order, saying why.
fn abandon(share: &Share, why: &str) {
    tracing::warn!(id = share.handle.id, "{why}; closing it");
    close(share);
}

/// Ends a connection from here: its task reads EOF when it runs again and cleans up.
fn close(share: &Share) {
    share.unpark();
    // SAFETY: shutdown on a valid socket fd; the task still owns (and later closes) it.
    unsafe {
        libc::shutdown(share.fd, libc::SHUT_RDWR);
    }
}

enum Answer {
    /// Answered (the reply is in `out`).
    Done,
    /// QUIT: answered, then the connection closes.
    Quit,
    /// Needs the connection's own state: leave it and the rest to the task.
    Leave,
}

/// Runs one request for a connection of the stuck thread. Commands Redis allows during a
/// busy script either run here (they need no connection state) or are left to the task.
///
/// In a transaction, every command but MULTI, DISCARD and QUIT is refused with BUSY here
/// (EXEC too: EXECABORT), so nothing is ever queued in the hook's empty stand-in queue;
/// allowed commands that would be queued (SCRIPT KILL...) are left to the task.
fn answer(
    srv: &Arc<Server>,
    share: &Share,
    cl: &mut ClientState,
    out: &mut Out,
    args: &[&[u8]],
) -> Answer {
    let in_tx = cl.multi.is_some();
    if let Ok(spec) = cmd::table().resolve(args) {
        if spec.has(flags::ALLOW_BUSY) {
            match spec.full_name.as_str() {
                "multi" | "discard" => {}
                // HELLO [proto] [SETNAME name]: the name lives in the shared handle, the
                // protocol too (the task's buffer follows it when it runs again).
                "hello" if !in_tx => share.hello.store(true, Ordering::Relaxed),
                "script|kill" | "function|kill" | "function|stats" | "shutdown" if !in_tx => {}
                "quit" => {
                    out.simple("OK");
                    return Answer::Quit;
                }
                _ => return Answer::Leave,
            }
        }
    }
    let mark = out.buf.len();
    let outcome = srv
        .scripts
        .busy
        .serving_others(|| cmd::execute(srv, cl, out, args));
    match outcome {
        Outcome::Done => Answer::Done,
        Outcome::Close => Answer::Quit,
        // Paused (CLIENT PAUSE) or anything that would wait: the task runs it later.
        _ => {
            out.buf.truncate(mark);
            Answer::Leave
        }
    }
}
