//! MIGRATE's connection cache (Redis's migrateCachedSocket): one connection per target
//! `host:port`, reused by the next MIGRATE to it (which then skips SELECT when the
//! database is the same), closed once unused for 10 s. INFO shows how many are open
//! (migrate_cached_sockets).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::Rng;

/// Unused this long, a cached connection is closed (Redis's MIGRATE_SOCKET_CACHE_TTL).
const TTL: Duration = Duration::from_secs(10);
/// At most this many targets are cached; a new one replaces a random one (Redis's
/// MIGRATE_SOCKET_CACHE_ITEMS).
const MAX_ITEMS: usize = 64;

/// A MIGRATE connection: TLS when the cluster bus is (tls-cluster), as Redis's
/// migrateGetSocket makes it; blocking, like the command that uses it.
pub enum MigrateStream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl MigrateStream {
    /// The TCP socket under it (timeouts).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            MigrateStream::Plain(s) => s,
            MigrateStream::Tls(s) => s.get_ref(),
        }
    }
}

impl Read for MigrateStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            MigrateStream::Plain(s) => s.read(buf),
            MigrateStream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for MigrateStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            MigrateStream::Plain(s) => s.write(buf),
            MigrateStream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            MigrateStream::Plain(s) => s.flush(),
            MigrateStream::Tls(s) => s.flush(),
        }
    }
}

/// One cached connection.
pub struct CachedSocket {
    pub stream: MigrateStream,
    /// The database the target last selected on it (None: unknown, SELECT again).
    pub last_db: Option<i64>,
    last_use: Instant,
}

impl CachedSocket {
    pub fn new(stream: MigrateStream) -> CachedSocket {
        CachedSocket {
            stream,
            last_db: None,
            last_use: Instant::now(),
        }
    }
}

/// The cache, keyed by `host:port` as the client wrote them.
#[derive(Default)]
pub struct MigrateSockets {
    map: Mutex<HashMap<String, CachedSocket>>,
}

impl MigrateSockets {
    /// Takes the target's connection out for one MIGRATE (None: connect anew). An idle
    /// one past its TTL is closed instead.
    pub fn take(&self, target: &str) -> Option<CachedSocket> {
        let mut m = self.map.lock();
        let c = m.remove(target)?;
        (c.last_use.elapsed() <= TTL).then_some(c)
    }

    /// Puts a connection back after a MIGRATE that left it in a known state.
    pub fn put(&self, target: String, mut c: CachedSocket) {
        c.last_use = Instant::now();
        let mut m = self.map.lock();
        if m.len() >= MAX_ITEMS && !m.contains_key(&target) {
            let victim = m.keys().nth(rand::rng().random_range(0..m.len())).cloned();
            if let Some(v) = victim {
                m.remove(&v);
            }
        }
        m.insert(target, c);
    }

    /// Closes the connections unused for longer than the TTL (Redis's serverCron
    /// migrateCloseTimedoutSockets).
    pub fn close_idle(&self) {
        let mut m = self.map.lock();
        if !m.is_empty() {
            m.retain(|_, c| c.last_use.elapsed() <= TTL);
        }
    }

    /// Open cached connections (INFO migrate_cached_sockets), idle ones closed first.
    pub fn len(&self) -> usize {
        self.close_idle();
        self.map.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caches_per_target_and_expires() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let cache = MigrateSockets::default();
        let s = TcpStream::connect(addr).expect("connect");
        let mut c = CachedSocket::new(MigrateStream::Plain(s));
        c.last_db = Some(9);
        cache.put("127.0.0.1:1".into(), c);
        assert_eq!(cache.len(), 1);
        assert!(cache.take("127.0.0.1:2").is_none());
        let back = cache.take("127.0.0.1:1").expect("cached");
        assert_eq!(back.last_db, Some(9));
        assert!(cache.is_empty(), "taken out while in use");
        let mut old = back;
        old.last_use = Instant::now() - TTL - Duration::from_secs(1);
        cache.map.lock().insert("127.0.0.1:1".into(), old);
        assert_eq!(cache.len(), 0, "an idle one is closed");
    }
}
