//! The DELs of keys a master's start-up load dropped as expired (Redis 7.0's
//! `RDBFLAGS_FEED_REPL`): they become the first bytes of the history the master restores
//! from dump.rdb, so its offset grows by them and a replica continuing from the file's
//! offset deletes those keys too. When they outgrow the backlog, only the tail is kept and
//! such a replica resyncs fully, as in Redis.

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::BytesMut;
use parking_lot::Mutex;

use super::backlog::encode_into;

/// Collects while armed (only during the start-up load of dump.rdb on a master).
#[derive(Default)]
pub struct LoadFeed {
    armed: AtomicBool,
    fed: Mutex<Fed>,
}

/// What the load fed: the stream's last `cap` bytes and its whole length.
#[derive(Default)]
pub struct Fed {
    /// The most recent bytes (at most the backlog's size, beyond a slack).
    pub tail: Vec<u8>,
    /// Every byte fed, kept or not: the offset grows by this much.
    pub total: u64,
    /// The database the last DEL was fed in (its SELECT is in the stream).
    pub last_db: Option<usize>,
    cap: usize,
    unlink: bool,
}

/// Disarms the feed when the load ends, however it ends.
pub struct Armed<'a>(&'a LoadFeed);

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        self.0.armed.store(false, Ordering::Release);
    }
}

impl LoadFeed {
    /// Starts collecting (anything collected before is dropped): `cap` is the backlog
    /// size, `unlink` lazyfree-lazy-expire (Redis then feeds UNLINK).
    pub fn arm(&self, cap: usize, unlink: bool) -> Armed<'_> {
        *self.fed.lock() = Fed {
            cap,
            unlink,
            ..Fed::default()
        };
        self.armed.store(true, Ordering::Release);
        Armed(self)
    }

    /// A key of `db` the load dropped as expired (a no-op unless armed).
    pub fn note(&self, db: usize, key: &[u8]) {
        if !self.armed.load(Ordering::Acquire) {
            return;
        }
        let mut f = self.fed.lock();
        let mut b = BytesMut::with_capacity(key.len() + 48);
        if f.last_db != Some(db) {
            let mut n = itoa::Buffer::new();
            encode_into(&mut b, &[b"SELECT", n.format(db).as_bytes()]);
            f.last_db = Some(db);
        }
        let cmd: &[u8] = if f.unlink { b"UNLINK" } else { b"DEL" };
        encode_into(&mut b, &[cmd, key]);
        f.total += b.len() as u64;
        f.tail.extend_from_slice(&b);
        // Trimmed by halves so the copy stays amortised.
        let cap = f.cap.max(1);
        if f.tail.len() > cap.saturating_mul(2) {
            let cut = f.tail.len() - cap;
            f.tail.drain(..cut);
        }
    }

    /// What was collected, leaving nothing behind.
    pub fn take(&self) -> Fed {
        std::mem::take(&mut *self.fed.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feeds_select_then_dels_and_keeps_the_tail() {
        let f = LoadFeed::default();
        f.note(0, b"ignored");
        {
            let _a = f.arm(64, false);
            f.note(3, b"a");
            f.note(3, b"b");
        }
        f.note(3, b"after");
        let fed = f.take();
        let want = b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n*2\r\n$3\r\nDEL\r\n$1\r\na\r\n*2\r\n$3\r\nDEL\r\n$1\r\nb\r\n";
        assert_eq!(fed.tail, want.to_vec());
        assert_eq!(fed.total, want.len() as u64);
        assert_eq!(fed.last_db, Some(3));

        let _a = f.arm(64, true);
        for i in 0..100 {
            f.note(0, format!("k{i}").as_bytes());
        }
        let fed = f.take();
        assert!(fed.tail.len() <= 128);
        assert!(fed.total > 1000);
        assert!(fed.tail.ends_with(b"UNLINK\r\n$3\r\nk99\r\n"));
    }
}
