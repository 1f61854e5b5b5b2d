//! Pub/sub registry: channel and pattern subscribers, message delivery (RESP2 arrays or
//! RESP3 pushes, encoded per subscriber).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::RwLock;

use crate::resp::Out;
use crate::server::{ClientHandle, ClientState};

pub mod shard;

type Subs = hashbrown::HashMap<Bytes, hashbrown::HashMap<u64, Arc<ClientHandle>>>;

#[derive(Default)]
pub struct PubSub {
    channels: RwLock<Subs>,
    patterns: RwLock<Subs>,
    /// Shard channels (SSUBSCRIBE): a namespace of their own, see [`shard`].
    pub(crate) shard: shard::ShardSubs,
}

/// Redis glob matching, kept in the utilities layer (`crate::glob`) for ACL's key and
/// channel patterns; re-exported here for pub/sub's own users.
pub use crate::glob::glob_match;

fn encode(resp3: bool, parts: &[&[u8]], count: Option<i64>) -> Bytes {
    let mut o = Out::with_buf(BytesMut::with_capacity(64), resp3);
    o.push(parts.len() + count.is_some() as usize);
    for p in parts {
        o.bulk(p);
    }
    if let Some(n) = count {
        o.int(n);
    }
    o.buf.freeze()
}

impl PubSub {
    /// Delivers a message; returns the number of receivers.
    pub fn publish(&self, channel: &[u8], msg: &[u8], limit: crate::config::BufLimit) -> usize {
        let mut n = 0;
        if let Some(subs) = self.channels.read().get(channel) {
            for h in subs.values().filter(|h| !h.killed.load(Ordering::Relaxed)) {
                let resp3 = h.resp3.load(Ordering::Relaxed);
                h.send(encode(resp3, &[b"message", channel, msg], None), limit);
                n += 1;
            }
        }
        for (pat, subs) in self.patterns.read().iter() {
            if glob_match(pat, channel, false) {
                for h in subs.values().filter(|h| !h.killed.load(Ordering::Relaxed)) {
                    let resp3 = h.resp3.load(Ordering::Relaxed);
                    h.send(
                        encode(resp3, &[b"pmessage", pat, channel, msg], None),
                        limit,
                    );
                    n += 1;
                }
            }
        }
        n
    }

    fn counts(cl: &ClientState) -> i64 {
        (cl.subs.len() + cl.psubs.len()) as i64
    }

    fn sync_counts(cl: &ClientState) {
        cl.handle.subs.store(cl.subs.len(), Ordering::Relaxed);
        cl.handle.psubs.store(cl.psubs.len(), Ordering::Relaxed);
    }

    pub fn subscribe(&self, cl: &mut ClientState, out: &mut Out, chans: &[&[u8]], pattern: bool) {
        let kind: &[u8] = if pattern { b"psubscribe" } else { b"subscribe" };
        for c in chans {
            let map = if pattern {
                &self.patterns
            } else {
                &self.channels
            };
            let set = if pattern { &mut cl.psubs } else { &mut cl.subs };
            let c = Bytes::copy_from_slice(c);
            if set.insert(c.clone()) {
                map.write()
                    .entry(c.clone())
                    .or_default()
                    .insert(cl.id, cl.handle.clone());
            }
            Self::sync_counts(cl);
            out.push(3);
            out.bulk(kind);
            out.bulk(&c);
            out.int(Self::counts(cl));
        }
    }

    pub fn unsubscribe(&self, cl: &mut ClientState, out: &mut Out, chans: &[&[u8]], pattern: bool) {
        let kind: &[u8] = if pattern {
            b"punsubscribe"
        } else {
            b"unsubscribe"
        };
        let targets: Vec<Bytes> = if chans.is_empty() {
            let set = if pattern { &cl.psubs } else { &cl.subs };
            set.iter().cloned().collect()
        } else {
            crate::resp::owned_args(chans)
        };
        if targets.is_empty() {
            out.push(3);
            out.bulk(kind);
            out.null();
            out.int(Self::counts(cl));
            return;
        }
        for c in targets {
            let map = if pattern {
                &self.patterns
            } else {
                &self.channels
            };
            let set = if pattern { &mut cl.psubs } else { &mut cl.subs };
            if set.remove(&c) {
                let mut m = map.write();
                if let Some(s) = m.get_mut(&c) {
                    s.remove(&cl.id);
                    if s.is_empty() {
                        m.remove(&c);
                    }
                }
            }
            Self::sync_counts(cl);
            out.push(3);
            out.bulk(kind);
            out.bulk(&c);
            out.int(Self::counts(cl));
        }
    }

    /// Drops every subscription of a client (disconnect, RESET).
    pub fn unsubscribe_all(&self, cl: &mut ClientState) {
        self.sunsubscribe_all(cl);
        let mut sink = Out::default();
        if !cl.subs.is_empty() {
            self.unsubscribe(cl, &mut sink, &[], false);
        }
        if !cl.psubs.is_empty() {
            self.unsubscribe(cl, &mut sink, &[], true);
        }
    }

    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.channels
            .read()
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c, false)))
            .cloned()
            .collect()
    }

    pub fn numsub(&self, channel: &[u8]) -> usize {
        self.channels
            .read()
            .get(channel)
            .map(|s| s.len())
            .unwrap_or(0)
    }

    pub fn numpat(&self) -> usize {
        self.patterns.read().len()
    }

    /// A client's subscriptions (channels, patterns, shard channels): what an ACL change
    /// checks to close a client whose channels were revoked.
    pub fn subscriptions_of(&self, id: u64) -> (Vec<Bytes>, Vec<Bytes>, Vec<Bytes>) {
        let scan = |m: &RwLock<Subs>| -> Vec<Bytes> {
            m.read()
                .iter()
                .filter(|(_, s)| s.contains_key(&id))
                .map(|(c, _)| c.clone())
                .collect()
        };
        (
            scan(&self.channels),
            scan(&self.patterns),
            self.shard_channels_of(id),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"news.*", b"news.art", false));
        assert!(!glob_match(b"news.*", b"new", false));
        assert!(glob_match(b"a\\*b", b"a*b", false));
        assert!(glob_match(b"MAX*", b"maxmemory", true));
    }
}
