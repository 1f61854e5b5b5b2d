//! The client listeners and their run-time rebinding (CONFIG SET port / bind), as Redis
//! 7.0's changeListenPort / changeBindAddr: existing connections stay, and a failed change
//! keeps (or restores) the listeners the server had.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use super::unix::Listener;
use super::{Server, Workers};

/// Why a set of addresses could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("{addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// The accept thread is not running yet (or stopped): nothing to rebind.
    #[error("the listeners are not started")]
    NotStarted,
}

/// One `bind` word: an address, optional when it had a `-` prefix.
struct BindWord {
    /// The address as written (error messages).
    text: String,
    ip: Option<IpAddr>,
    optional: bool,
}

/// The words of `bind` (`-` prefix = optional, `*` = all IPv4, `::*` = all IPv6). A word
/// that is no IP literal is resolved as a host name, as Redis's getaddrinfo does; one that
/// does not resolve has no address (binding it fails unless it is optional).
fn bind_words(bind: &str) -> Vec<BindWord> {
    bind.split_whitespace()
        .map(|w| {
            let (optional, a) = match w.strip_prefix('-') {
                Some(a) => (true, a),
                None => (false, w),
            };
            let ip = match a {
                "*" => Some(Ipv4Addr::UNSPECIFIED.into()),
                "::*" => Some(Ipv6Addr::UNSPECIFIED.into()),
                other => other.parse().ok().or_else(|| {
                    (other, 0u16)
                        .to_socket_addrs()
                        .ok()
                        .and_then(|mut it| it.next())
                        .map(|sa| sa.ip())
                }),
            };
            BindWord {
                text: a.to_string(),
                ip,
                optional,
            }
        })
        .collect()
}

/// A listening socket on `addr` (SO_REUSEADDR, IPv6 sockets IPv6-only, backlog 511 like
/// Redis's default tcp-backlog), non-blocking for tokio.
fn listen_on(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let domain = socket2::Domain::for_address(addr);
    let s = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&addr.into())?;
    s.listen(511)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

fn skippable(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EADDRNOTAVAIL
                | libc::EPROTONOSUPPORT
                | libc::ENOPROTOOPT
                | libc::ESOCKTNOSUPPORT
                | libc::EAFNOSUPPORT
        )
    )
}

/// Binds every address of `bind` on `port`; an optional address that fails is skipped, any
/// other failure closes what was bound and is returned.
pub fn bind_all(bind: &str, port: u16) -> Result<Vec<std::net::TcpListener>, ListenError> {
    let mut out = Vec::new();
    for w in bind_words(bind) {
        let res = match w.ip {
            Some(ip) => listen_on(SocketAddr::new(ip, port)),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "Name or service not known",
            )),
        };
        match res {
            Ok(l) => out.push(l),
            // As Redis's listenToPort: `-` forgives only an address this host lacks or a
            // protocol it does not have, not a name that does not resolve.
            Err(e) if w.optional && w.ip.is_some() && skippable(&e) => {
                tracing::debug!(addr = %w.text, error = %e, "optional bind address unavailable");
            }
            Err(e) => {
                tracing::warn!(
                    "Could not create server TCP listening socket {}:{port}: {e}",
                    w.text
                );
                return Err(ListenError::Bind {
                    addr: format!("{}:{port}", w.text),
                    source: e,
                });
            }
        }
    }
    Ok(out)
}

/// A running accept loop: telling it to stop hands back a channel it answers once its
/// socket is closed.
struct Running {
    stop: tokio::sync::oneshot::Sender<std::sync::mpsc::SyncSender<()>>,
    /// The listening socket, owned by the accept loop (see [`Listeners::stop_accepting`]).
    fd: std::os::fd::RawFd,
}

#[derive(Default)]
struct State {
    /// The accept thread's runtime (where accept loops run) and the I/O threads.
    runtime: Option<(tokio::runtime::Handle, Arc<Workers>)>,
    running: Vec<Running>,
    /// The `tls-port` listeners' accept loops.
    tls_running: Vec<Running>,
    /// The unix socket's accept loop: a TCP rebind leaves it alone (unixsocket is
    /// immutable); it ends with the accept thread.
    unix: Option<Running>,
    /// The unix socket's path: its file is removed when the listeners close for good.
    unix_path: Option<String>,
}

/// The server's client listeners.
#[derive(Default)]
pub struct Listeners {
    state: parking_lot::Mutex<State>,
}

impl Listeners {
    /// Called on the accept thread's runtime: registers it and starts accepting on `ls`
    /// and the unix socket (its listener and path).
    pub(super) fn start(
        &self,
        srv: &Arc<Server>,
        handle: tokio::runtime::Handle,
        workers: Arc<Workers>,
        ls: Vec<std::net::TcpListener>,
        tls: Vec<std::net::TcpListener>,
        unix: Option<(std::os::unix::net::UnixListener, String)>,
    ) {
        let mut st = self.state.lock();
        st.runtime = Some((handle, workers));
        start_all(srv, &mut st, ls, Port::Plain);
        start_all(srv, &mut st, tls, Port::Tls);
        if let Some((l, path)) = unix {
            st.unix_path = Some(path.clone());
            let fd = std::os::fd::AsRawFd::as_raw_fd(&l);
            st.unix = spawn_any(srv, &st, fd, move || {
                tokio::net::UnixListener::from_std(l).map(|l| Listener::Unix(l, path))
            });
        }
    }

    /// Rebinds to the config's current `bind` and `port` (CONFIG SET). New listeners are
    /// bound before the old ones close; when that fails (the new set overlaps the old one),
    /// the old ones are closed first and, if the new set still cannot be bound, `old_bind`
    /// / `old_port` are bound again, as Redis does. Port 0 (or an empty bind) leaves no TCP
    /// listener, as Redis's listenToPort.
    pub fn rebind(
        &self,
        srv: &Arc<Server>,
        (bind, port): (&str, u16),
        (old_bind, old_port): (&str, u16),
    ) -> Result<(), ListenError> {
        self.rebind_kind(srv, Port::Plain, (bind, port), (old_bind, old_port))
    }

    /// [`Self::rebind`] for the `tls-port` listeners.
    pub fn rebind_tls(
        &self,
        srv: &Arc<Server>,
        (bind, port): (&str, u16),
        (old_bind, old_port): (&str, u16),
    ) -> Result<(), ListenError> {
        self.rebind_kind(srv, Port::Tls, (bind, port), (old_bind, old_port))
    }

    fn rebind_kind(
        &self,
        srv: &Arc<Server>,
        kind: Port,
        (bind, port): (&str, u16),
        (old_bind, old_port): (&str, u16),
    ) -> Result<(), ListenError> {
        let mut st = self.state.lock();
        if st.runtime.is_none() {
            return Err(ListenError::NotStarted);
        }
        let new = if port == 0 {
            Ok(Vec::new())
        } else {
            bind_all(bind, port)
        };
        let new = match new {
            Ok(ls) => {
                close_all(&mut st, kind);
                Ok(ls)
            }
            Err(_) => {
                close_all(&mut st, kind);
                bind_all(bind, port).inspect_err(|_| {
                    // Back to what we had; if even that fails, nothing listens (Redis
                    // logs and carries on the same way).
                    let old = if old_port == 0 {
                        Ok(Vec::new())
                    } else {
                        bind_all(old_bind, old_port)
                    };
                    match old {
                        Ok(ls) => start_all(srv, &mut st, ls, kind),
                        Err(e2) => {
                            tracing::warn!(error = %e2, "Failed to restore the old listeners")
                        }
                    }
                })
            }
        };
        let ls = new.inspect_err(|e| tracing::warn!(error = %e, "Failed to bind"))?;
        start_all(srv, &mut st, ls, kind);
        if kind == Port::Plain {
            srv.port
                .store(u32::from(port), std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }
}

impl Listeners {
    /// Makes every listening socket refuse new connections at once, without waiting for
    /// the accept thread: the first step of a shutdown (call it before `shutting_down` is
    /// set, while the accept loops still own their sockets). At the exit the kernel closes
    /// descriptors in number order, and a client's connection numbered below a listener
    /// would otherwise end while that port still accepted.
    pub fn stop_accepting(&self) {
        let st = self.state.lock();
        for r in st
            .running
            .iter()
            .chain(&st.tls_running)
            .chain(st.unix.as_ref())
        {
            // SAFETY: shutdown(2) on a descriptor the accept loop keeps open until it is
            // stopped (close) or the server is shutting down, neither of which happened yet.
            unsafe {
                libc::shutdown(r.fd, libc::SHUT_RDWR);
            }
        }
    }

    /// Closes every listener, the unix socket's too, and waits (bounded) until their
    /// sockets are closed: a shutdown that exits right after refuses new connections from
    /// the moment its caller's connection closes, as Redis's closeListeningSockets. The
    /// socket file is removed (once), as Redis does at shutdown.
    pub fn close(&self) {
        let mut st = self.state.lock();
        if let Some(u) = st.unix.take() {
            st.running.push(u);
        }
        close_all(&mut st, Port::Plain);
        close_all(&mut st, Port::Tls);
        if let Some(path) = st.unix_path.take() {
            super::unix::remove(&path);
        }
    }
}

/// Which port a listener serves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Port {
    Plain,
    /// `tls-port`: its connections speak TLS.
    Tls,
}

fn start_all(srv: &Arc<Server>, st: &mut State, ls: Vec<std::net::TcpListener>, kind: Port) {
    for l in ls {
        if let Some(r) = spawn_loop(srv, st, l, kind) {
            match kind {
                Port::Plain => st.running.push(r),
                Port::Tls => st.tls_running.push(r),
            }
        }
    }
}

/// Stops every accept loop and waits (bounded) until each has closed its socket, so the
/// old port refuses connections once CONFIG SET has answered.
fn close_all(st: &mut State, kind: Port) {
    let mut acks = Vec::new();
    let running = match kind {
        Port::Plain => &mut st.running,
        Port::Tls => &mut st.tls_running,
    };
    for r in running.drain(..) {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        if r.stop.send(tx).is_ok() {
            acks.push(rx);
        }
    }
    for rx in acks {
        // An Err is a loop that already ended (its socket is closed too).
        let _ = rx.recv_timeout(Duration::from_secs(2));
    }
}

fn spawn_loop(
    srv: &Arc<Server>,
    st: &State,
    l: std::net::TcpListener,
    kind: Port,
) -> Option<Running> {
    let fd = std::os::fd::AsRawFd::as_raw_fd(&l);
    let tls_srv = (kind == Port::Tls).then(|| srv.clone());
    spawn_any(srv, st, fd, move || {
        let l = tokio::net::TcpListener::from_std(l)?;
        Ok(match tls_srv {
            Some(srv) => Listener::Tls(l, srv),
            None => Listener::Tcp(l),
        })
    })
}

/// Starts an accept loop on the accept thread's runtime for the listener `make` registers
/// there (registration must happen on that runtime).
fn spawn_any(
    srv: &Arc<Server>,
    st: &State,
    fd: std::os::fd::RawFd,
    make: impl FnOnce() -> std::io::Result<Listener> + Send + 'static,
) -> Option<Running> {
    let (handle, workers) = st.runtime.as_ref()?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (srv, workers) = (srv.clone(), workers.clone());
    handle.spawn(async move {
        match make() {
            Ok(l) => super::accept_loop(srv, l, workers, rx).await,
            Err(e) => tracing::error!(error = %e, "cannot register a listener"),
        }
    });
    Some(Running { stop: tx, fd })
}

/// Connects to `host`:`port` from `source` when it is set (bind-source-addr), as Redis's
/// anetTcpNonBlockBestEffortBindConnect: a source address that cannot be bound is dropped
/// and the connection made without it.
pub async fn connect_from(
    host: &str,
    port: u16,
    source: &str,
) -> std::io::Result<tokio::net::TcpStream> {
    let src: Option<IpAddr> = source.parse().ok();
    let mut last = None;
    for addr in tokio::net::lookup_host((host, port)).await? {
        let sock = if addr.is_ipv6() {
            tokio::net::TcpSocket::new_v6()?
        } else {
            tokio::net::TcpSocket::new_v4()?
        };
        if let Some(ip) = src.filter(|ip| ip.is_ipv6() == addr.is_ipv6()) {
            if let Err(e) = sock.bind(SocketAddr::new(ip, 0)) {
                tracing::debug!(%ip, error = %e, "bind-source-addr not bound");
            }
        }
        match sock.connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no address for the host")
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An address that is neither an IP nor a host name fails unless it is optional.
    #[test]
    fn bad_addresses_fail_unless_optional() {
        assert!(bind_all("999.999.999.999", 0).is_err());
        assert!(bind_all("-999.999.999.999", 0).is_err(), "as Redis");
        assert!(bind_all("-192.0.2.1", 0)
            .map(|v| v.is_empty())
            .unwrap_or(false));
    }
}
