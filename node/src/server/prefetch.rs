//! Look-ahead over a connection's pipelined requests: the keys of the next few complete
//! requests in the read buffer are prefetched as one batch before the first of them runs
//! (see [`crate::db::Keyspace::prefetch`]). Only a hint: nothing here changes what the
//! requests do. An incomplete or malformed request ends the batch; an inline, unknown or
//! wrong-arity one is skipped.

use std::sync::atomic::Ordering;

use smallvec::SmallVec;

use crate::cmd::{self, KeyPos};
use crate::resp::{recycle_view, Limits, Parser};
use crate::server::Server;
use crate::slot::key_hash_slot;

/// Keys per batch at most: a pipelined MSET of hundreds of keys gets its first ones.
const MAX_KEYS: usize = 64;

/// Below this many keys the hash tables a lookup walks (~80 bytes a key: node and bucket)
/// sit in the CPU caches and reading ahead only costs (measured at -P 16 on one hot key:
/// +60 ns per GET, +770 ns per 10-key MSET, against -40% CPU per GET over 1M random keys).
/// Keys, not used_memory: one big list holds megabytes in a single, always cached key
/// (bench-node's LPUSH test left the prefetch on for the tests after it).
const MIN_KEYS: usize = 64 * 1024;

/// Re-evaluates, from the periodic server tick, whether the keyspace (`keys`, an
/// estimate) is big enough for the look-ahead to pay.
pub fn refresh(srv: &Server, keys: usize) {
    srv.prefetch_active
        .store(keys >= MIN_KEYS, Ordering::Relaxed);
}

/// The look-ahead's reusable state, one per connection.
#[derive(Default)]
pub struct Lookahead {
    parser: Parser,
    view: Vec<&'static [u8]>,
    idx: Vec<usize>,
    stripes: Vec<u16>,
    /// Bytes at the front of the read buffer whose requests were already prefetched.
    covered: usize,
}

impl Lookahead {
    /// Called before running the request that fills the first `first` bytes of `buf`.
    /// When that request is followed by more input and isn't already covered by the last
    /// batch, prefetches the keys of up to `batch` requests from the front of `buf`.
    #[inline]
    pub fn before(
        &mut self,
        srv: &Server,
        db: usize,
        buf: &[u8],
        first: usize,
        lim: Limits,
        batch: usize,
    ) {
        if batch < 2
            || self.covered >= first
            || buf.len() <= first
            || !srv.prefetch_active.load(Ordering::Relaxed)
            // It locks stripes: never sleep on a running script's locks (script::busy).
            || srv.scripts.busy.active()
        {
            return;
        }
        self.batch(srv, db, buf, lim, batch);
    }

    #[cold]
    fn batch(&mut self, srv: &Server, db: usize, buf: &[u8], lim: Limits, batch: usize) {
        let mut keys: SmallVec<[(u16, &[u8]); 32]> = SmallVec::new();
        let mut view = recycle_view(std::mem::take(&mut self.view));
        let mut off = 0;
        for _ in 0..batch {
            self.parser.reset();
            let rest = &buf[off..];
            let Ok(Some(len)) = self.parser.parse(rest, lim) else {
                break;
            };
            let multibulk = self.parser.buf_args(rest, &mut view);
            off += len;
            if !multibulk {
                continue;
            }
            let Some(c) = view.first().and_then(|name| cmd::table().get(name)) else {
                continue;
            };
            if matches!(c.keys, KeyPos::None)
                || !c.subcommands.is_empty()
                || !c.arity_ok(view.len())
            {
                continue;
            }
            self.idx.clear();
            c.key_indices(&view, &mut self.idx);
            for &i in &self.idx {
                if let Some(&k) = view.get(i) {
                    // A pipeline hitting one key again and again needs it fetched once.
                    if keys.last().is_some_and(|&(_, last)| last == k) {
                        continue;
                    }
                    keys.push((key_hash_slot(k), k));
                    if keys.len() >= MAX_KEYS {
                        break;
                    }
                }
            }
            if keys.len() >= MAX_KEYS {
                break;
            }
        }
        self.parser.reset();
        self.view = recycle_view(view);
        self.covered = off;
        if keys.len() >= 2 {
            srv.stats.prefetch_batches.fetch_add(1, Ordering::Relaxed);
            srv.ks.prefetch(db, &keys, &mut self.stripes);
        }
    }

    /// The first `n` bytes of the read buffer were consumed.
    pub fn consumed(&mut self, n: usize) {
        self.covered = self.covered.saturating_sub(n);
    }
}
