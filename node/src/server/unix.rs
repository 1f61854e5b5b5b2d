//! The unix socket listener (`unixsocket`, `unixsocketperm`) and the stream a client is
//! served over, TCP or unix, as Redis 7.0: one connection path for both, a unix client
//! listed as `<unixsocket>:0` (addr and laddr) with flag U and never refused by protected
//! mode, the socket file replaced at start and removed at shutdown.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::BufMut;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::Server;

/// Redis's default tcp-backlog, which it also gives the unix socket.
const BACKLOG: i32 = 511;
/// The longest path sun_path holds (108 bytes with the NUL on Linux).
const SUN_PATH_MAX: usize = 107;

/// Binds the unix socket at `path`: a file already there (a stale socket of an earlier
/// run) is removed first, as Redis's listenToPort does; `perm` (unixsocketperm, 0 = leave
/// the umask's mode) is applied to the new file. A path sun_path cannot hold is refused
/// with Redis's words (anetUnixServer).
pub fn bind(path: &str, perm: u32) -> io::Result<std::os::unix::net::UnixListener> {
    // As Redis: "don't care if this fails".
    let _ = std::fs::remove_file(path);
    if path.len() > SUN_PATH_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "unix socket path too long ({}), must be under {}",
                path.len(),
                SUN_PATH_MAX + 1
            ),
        ));
    }
    let addr = socket2::SockAddr::unix(path)?;
    let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    s.bind(&addr)?;
    s.listen(BACKLOG)?;
    // Redis ignores a failed chmod.
    if perm != 0 {
        if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm)) {
            tracing::warn!("Can't set the unix socket's mode: {e}");
        }
    }
    s.set_nonblocking(true)?;
    Ok(std::os::unix::net::UnixListener::from(
        std::os::fd::OwnedFd::from(s),
    ))
}

/// Removes the socket file at shutdown (Redis: "Removing the unix socket file.").
pub fn remove(path: &str) {
    tracing::info!("Removing the unix socket file.");
    if let Err(e) = std::fs::remove_file(path) {
        tracing::warn!("Error removing the unix socket file: {e}");
    }
}

/// A listening socket of either kind, registered with the accept thread's runtime.
pub enum Listener {
    Tcp(tokio::net::TcpListener),
    /// A `tls-port` listener: its connections speak TLS with the server's settings of the
    /// moment they are accepted.
    Tls(tokio::net::TcpListener, Arc<Server>),
    /// The unix socket and its path (the address its clients are listed under).
    Unix(tokio::net::UnixListener, String),
}

impl Listener {
    /// The next connection, still a std socket (the accept thread hands it to an I/O
    /// thread, which registers it with its own runtime).
    pub async fn accept(&self) -> io::Result<Accepted> {
        match self {
            Listener::Tcp(l) => {
                let (s, peer) = l.accept().await?;
                Ok(Accepted::Tcp(s.into_std()?, peer))
            }
            Listener::Tls(l, srv) => loop {
                let (s, peer) = l.accept().await?;
                // TLS turned off since (CONFIG SET): the listener is about to close.
                if let Some(cfg) = srv.tls.load_full() {
                    break Ok(Accepted::Tls(s.into_std()?, peer, cfg));
                }
            },
            Listener::Unix(l, path) => {
                let (s, _) = l.accept().await?;
                Ok(Accepted::Unix(s.into_std()?, path.clone()))
            }
        }
    }
}

/// An accepted connection on its way to an I/O thread.
pub enum Accepted {
    Tcp(std::net::TcpStream, SocketAddr),
    /// A connection to a TLS port, with the TLS settings it is to be served with.
    Tls(std::net::TcpStream, SocketAddr, Arc<rustls::ServerConfig>),
    /// A unix socket client and the socket's path.
    Unix(std::os::unix::net::UnixStream, String),
}

impl Accepted {
    /// The peer's IP (None for a unix socket client: it is local by construction).
    pub fn peer_ip(&self) -> Option<std::net::IpAddr> {
        match self {
            Accepted::Tcp(_, peer) | Accepted::Tls(_, peer, _) => Some(peer.ip()),
            Accepted::Unix(..) => None,
        }
    }

    /// `addr` and `laddr` as CLIENT LIST shows them: `ip:port`, or `<path>:0` for both on
    /// a unix socket.
    pub fn addrs(&self) -> (String, String) {
        match self {
            Accepted::Tcp(s, peer) | Accepted::Tls(s, peer, _) => (
                peer.to_string(),
                s.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            ),
            Accepted::Unix(_, path) => (format!("{path}:0"), format!("{path}:0")),
        }
    }

    pub fn is_unix(&self) -> bool {
        matches!(self, Accepted::Unix(..))
    }

    /// TCP_NODELAY on a TCP connection (a unix socket has no such option).
    pub fn set_nodelay(&self) {
        if let Accepted::Tcp(s, _) | Accepted::Tls(s, _, _) = self {
            let _ = s.set_nodelay(true);
        }
    }

    /// Writes what the non-blocking socket takes of `msg` now; the count written (0 on a
    /// TLS connection: its bytes go out encrypted, once the handshake is done).
    pub fn write_now(&self, msg: &[u8]) -> usize {
        match self {
            Accepted::Tcp(s, _) => (&*s).write(msg),
            Accepted::Unix(s, _) => (&*s).write(msg),
            Accepted::Tls(..) => Ok(0),
        }
        .unwrap_or(0)
    }

    /// Registers the socket with the current thread's runtime.
    pub fn into_stream(self) -> io::Result<ClientStream> {
        Ok(match self {
            Accepted::Tcp(s, _) => ClientStream::Tcp(tokio::net::TcpStream::from_std(s)?),
            Accepted::Unix(s, _) => ClientStream::Unix(tokio::net::UnixStream::from_std(s)?),
            Accepted::Tls(s, _, cfg) => ClientStream::Tls(std::sync::Arc::new(
                super::tls::TlsStream::new(tokio::net::TcpStream::from_std(s)?, cfg)?,
            )),
        })
    }
}

/// A client connection, TCP or unix socket.
pub enum ClientStream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
    /// Shared with the busy-script hook, which may answer the client while a script holds
    /// the connection's thread (crate::server::busy_io).
    Tls(std::sync::Arc<super::tls::TlsStream>),
}

impl ClientStream {
    /// The TLS stream, which a busy script's hook answers through (crate::server::busy_io).
    pub fn tls(&self) -> Option<std::sync::Arc<super::tls::TlsStream>> {
        match self {
            ClientStream::Tls(s) => Some(s.clone()),
            _ => None,
        }
    }

    /// The socket, when its bytes are the protocol itself: what a busy script's hook may
    /// read and answer on directly (crate::server::busy_io). None for a TLS connection,
    /// which the hook answers through [`ClientStream::tls`].
    pub fn plain_fd(&self) -> Option<RawFd> {
        match self {
            ClientStream::Tcp(s) => Some(s.as_raw_fd()),
            ClientStream::Unix(s) => Some(s.as_raw_fd()),
            ClientStream::Tls(_) => None,
        }
    }

    /// Ready when the socket may be read (tokio's `poll_read_ready`). A poll rather than
    /// tokio's `readable()` future: the connection's task is the only one waiting, and the
    /// future joins and leaves the socket's list of waiters (a lock each) on every wait,
    /// where the poll keeps the task's waker in the socket's one reader slot. At -P 1 that
    /// list was ~530 instructions of every request (callgrind).
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            ClientStream::Tcp(s) => s.poll_read_ready(cx),
            ClientStream::Unix(s) => s.poll_read_ready(cx),
            ClientStream::Tls(s) => s.poll_readable(cx),
        }
    }

    /// Ready when the socket may be written (tokio's `poll_write_ready`; a poll for the
    /// reason `poll_read_ready` gives).
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            ClientStream::Tcp(s) => s.poll_write_ready(cx),
            ClientStream::Unix(s) => s.poll_write_ready(cx),
            ClientStream::Tls(s) => s.poll_writable(cx),
        }
    }

    /// Reads what is there without waiting (WouldBlock when nothing is).
    ///
    /// A read that leaves room in `buf` took all the socket had, so the socket's readiness
    /// is cleared at once: otherwise the next wait for it returns at once and only a second
    /// recv, answering EAGAIN, clears it. That was two recv calls per request where Redis
    /// makes one. Clearing is safe with tokio's edge-triggered epoll: bytes that arrive
    /// after the read raise a new event, and a newer event than the one read is not
    /// cleared (tokio compares its tick); a peer's close stays ready.
    pub fn try_read_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        /// Reads into `buf`; on a short read, clears the socket's read readiness.
        fn read_plain<B: BufMut>(
            buf: &mut B,
            read: impl FnOnce(&mut B) -> io::Result<usize>,
            clear: impl FnOnce(),
        ) -> io::Result<usize> {
            let room = buf.chunk_mut().len();
            let n = read(buf)?;
            if n > 0 && n < room {
                clear();
            }
            Ok(n)
        }
        let drained = || Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock));
        match self {
            ClientStream::Tcp(s) => read_plain(
                buf,
                |b| s.try_read_buf(b),
                || {
                    let _ = s.try_io(tokio::io::Interest::READABLE, drained);
                },
            ),
            ClientStream::Unix(s) => read_plain(
                buf,
                |b| s.try_read_buf(b),
                || {
                    let _ = s.try_io(tokio::io::Interest::READABLE, drained);
                },
            ),
            ClientStream::Tls(s) => {
                // Decrypted through a stack buffer: rustls reads into initialized memory.
                let mut tmp = [0u8; 16 * 1024];
                let want = buf.remaining_mut().min(tmp.len());
                let n = s.try_read(&mut tmp[..want])?;
                buf.put_slice(&tmp[..n]);
                Ok(n)
            }
        }
    }

    /// Writes what the socket takes of `bufs` now, in one call on a plain socket
    /// (WouldBlock when it takes nothing). TLS takes the first slice only: its records are
    /// built by copying anyway.
    pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            ClientStream::Tcp(s) => s.try_write_vectored(bufs),
            ClientStream::Unix(s) => s.try_write_vectored(bufs),
            ClientStream::Tls(s) => match bufs.iter().find(|b| !b.is_empty()) {
                Some(b) => s.try_write(b),
                None => Ok(0),
            },
        }
    }

    /// Writes what the socket takes now (WouldBlock when it takes nothing).
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            ClientStream::Tcp(s) => s.try_write(buf),
            ClientStream::Unix(s) => s.try_write(buf),
            ClientStream::Tls(s) => s.try_write(buf),
        }
    }
}

impl AsRawFd for ClientStream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            ClientStream::Tcp(s) => s.as_raw_fd(),
            ClientStream::Unix(s) => s.as_raw_fd(),
            ClientStream::Tls(s) => s.tcp().as_raw_fd(),
        }
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            ClientStream::Unix(s) => Pin::new(s).poll_read(cx, buf),
            ClientStream::Tls(s) => s.poll_read_shared(cx, buf),
        }
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            ClientStream::Unix(s) => Pin::new(s).poll_write(cx, buf),
            ClientStream::Tls(s) => s.poll_write_shared(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Tcp(s) => Pin::new(s).poll_flush(cx),
            ClientStream::Unix(s) => Pin::new(s).poll_flush(cx),
            ClientStream::Tls(s) => s.poll_flush_shared(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            ClientStream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            ClientStream::Tls(s) => s.poll_shutdown_shared(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            ClientStream::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            ClientStream::Tls(s) => {
                let first = bufs
                    .iter()
                    .find(|b| !b.is_empty())
                    .map_or(&[][..], |b| &**b);
                s.poll_write_shared(cx, first)
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            ClientStream::Tcp(s) => s.is_write_vectored(),
            ClientStream::Unix(s) => s.is_write_vectored(),
            ClientStream::Tls(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stale file at the path is replaced by the socket, which gets the asked mode.
    #[test]
    fn bind_replaces_a_stale_file_and_applies_the_mode() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s");
        std::fs::write(&path, b"stale").expect("write");
        let p = path.display().to_string();
        let l = bind(&p, 0o700).expect("bind");
        let meta = std::fs::symlink_metadata(&path).expect("stat");
        use std::os::unix::fs::FileTypeExt;
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        drop(l);
        remove(&p);
        assert!(!path.exists());
    }

    /// A path longer than sun_path holds is refused with Redis's words (its log says
    /// "Failed opening Unix socket: unix socket path too long (129), must be under 108").
    #[test]
    fn a_long_path_is_refused_like_redis() {
        let dir = tempfile::tempdir().expect("tempdir");
        let long = dir.path().join("y".repeat(120)).display().to_string();
        let e = bind(&long, 0).expect_err("a long path");
        assert_eq!(
            e.to_string(),
            format!(
                "unix socket path too long ({}), must be under 108",
                long.len()
            )
        );
    }
}
