//! Shard channels (Redis 7.0 SSUBSCRIBE / SPUBLISH): a namespace separate from plain
//! channels, with no patterns. In cluster mode a shard channel belongs to the hash slot of
//! its name; when the slot stops being served by this node's shard (SETSLOT NODE elsewhere,
//! a migration finishing, a failover) its subscribers get a `sunsubscribe` push, as Redis
//! 7.0's `removeChannelsInSlot` does. A small watcher task notices the owner change.
//!
//! The per-client channel sets live here rather than in `ClientState`, so the server side
//! can unsubscribe a client (slot loss) without going through its connection task.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use hashbrown::{HashMap, HashSet};
use parking_lot::RwLock;
use tessera_cluster::msg::Name;

use super::{encode, glob_match, PubSub};
use crate::config::BufLimit;
use crate::resp::Out;
use crate::server::{ClientHandle, ClientState, Server};
use crate::slot::key_hash_slot;

/// What shard channels need from the cluster: who serves a slot. Implemented by the cluster
/// state machine; a value of it comes from the server's state, so pubsub never calls the
/// cluster glue above it.
pub trait SlotOwners {
    /// The owner of each slot of `slots` (None: unassigned), read at one moment.
    fn owners(&self, slots: &[u16]) -> Vec<Option<Name>>;
}

impl SlotOwners for tessera_cluster::ClusterNode {
    fn owners(&self, slots: &[u16]) -> Vec<Option<Name>> {
        self.with_state(|st| {
            slots
                .iter()
                .map(|&s| st.slots.get(usize::from(s)).copied().flatten())
                .collect()
        })
    }
}

/// The slot owners in cluster mode; None standalone.
fn slot_owners(srv: &Server) -> Option<&dyn SlotOwners> {
    srv.cluster.get().map(|n| n as &dyn SlotOwners)
}

/// How often the watcher compares slot owners (only while shard subscriptions exist).
const WATCH_EVERY: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Inner {
    channels: HashMap<Bytes, HashMap<u64, Arc<ClientHandle>>>,
    by_client: HashMap<u64, HashSet<Bytes>>,
    /// Cluster mode: slot → (owner when its first channel was subscribed, channel count).
    owners: HashMap<u16, (Option<Name>, usize)>,
}

#[derive(Default)]
pub struct ShardSubs {
    inner: RwLock<Inner>,
    watcher: AtomicBool,
}

impl Inner {
    fn count(&self, id: u64) -> usize {
        self.by_client.get(&id).map_or(0, |s| s.len())
    }

    /// Removes one (client, channel) pair; true if it was subscribed.
    fn remove(&mut self, id: u64, channel: &Bytes) -> bool {
        let Some(set) = self.by_client.get_mut(&id) else {
            return false;
        };
        if !set.remove(channel) {
            return false;
        }
        if set.is_empty() {
            self.by_client.remove(&id);
        }
        if let Some(subs) = self.channels.get_mut(channel) {
            subs.remove(&id);
            if subs.is_empty() {
                self.channels.remove(channel);
                let slot = key_hash_slot(channel);
                if let Some(o) = self.owners.get_mut(&slot) {
                    o.1 = o.1.saturating_sub(1);
                    if o.1 == 0 {
                        self.owners.remove(&slot);
                    }
                }
            }
        }
        true
    }
}

fn sync_count(h: &ClientHandle, n: usize) {
    h.ssubs.store(n, Ordering::Relaxed);
}

impl PubSub {
    /// SSUBSCRIBE: replies `ssubscribe <channel> <shard subscription count>` per channel.
    pub fn ssubscribe(&self, srv: &Arc<Server>, cl: &ClientState, out: &mut Out, chans: &[&[u8]]) {
        let cluster = slot_owners(srv);
        for c in chans {
            let c = Bytes::copy_from_slice(c);
            let n = {
                let mut g = self.shard.inner.write();
                let inner = &mut *g;
                if inner.by_client.entry(cl.id).or_default().insert(c.clone()) {
                    let subs = inner.channels.entry(c.clone()).or_default();
                    let first = subs.is_empty();
                    subs.insert(cl.id, cl.handle.clone());
                    if let (true, Some(node)) = (first, cluster) {
                        let slot = key_hash_slot(&c);
                        let e = inner
                            .owners
                            .entry(slot)
                            .or_insert_with(|| (node.owners(&[slot]).pop().flatten(), 0));
                        e.1 += 1;
                    }
                }
                inner.count(cl.id)
            };
            sync_count(&cl.handle, n);
            out.push(3);
            out.bulk(b"ssubscribe");
            out.bulk(&c);
            out.int(n as i64);
        }
        if cluster.is_some() && !self.shard.watcher.swap(true, Ordering::Relaxed) {
            start_watcher(srv);
        }
    }

    /// SUNSUBSCRIBE [channel ...]: without channels, every shard channel of the client.
    pub fn sunsubscribe(&self, cl: &ClientState, out: &mut Out, chans: &[&[u8]]) {
        let targets: Vec<Bytes> = if chans.is_empty() {
            let g = self.shard.inner.read();
            g.by_client
                .get(&cl.id)
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default()
        } else {
            crate::resp::owned_args(chans)
        };
        if targets.is_empty() {
            out.push(3);
            out.bulk(b"sunsubscribe");
            out.null();
            out.int(self.shard.inner.read().count(cl.id) as i64);
            return;
        }
        for c in targets {
            let n = {
                let mut g = self.shard.inner.write();
                g.remove(cl.id, &c);
                g.count(cl.id)
            };
            sync_count(&cl.handle, n);
            out.push(3);
            out.bulk(b"sunsubscribe");
            out.bulk(&c);
            out.int(n as i64);
        }
    }

    /// Drops every shard subscription of a client (disconnect, RESET), without replies.
    pub fn sunsubscribe_all(&self, cl: &ClientState) {
        if cl.handle.ssubs.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut g = self.shard.inner.write();
        let chans: Vec<Bytes> = g
            .by_client
            .get(&cl.id)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for c in chans {
            g.remove(cl.id, &c);
        }
        sync_count(&cl.handle, 0);
    }

    /// Delivers an `smessage` to this node's shard subscribers; returns how many got it.
    pub fn spublish(&self, channel: &[u8], msg: &[u8], limit: BufLimit) -> usize {
        let g = self.shard.inner.read();
        let Some(subs) = g.channels.get(channel) else {
            return 0;
        };
        let mut n = 0;
        for h in subs.values().filter(|h| !h.killed.load(Ordering::Relaxed)) {
            let resp3 = h.resp3.load(Ordering::Relaxed);
            h.send(encode(resp3, &[b"smessage", channel, msg], None), limit);
            n += 1;
        }
        n
    }

    /// PUBSUB SHARDCHANNELS \[pattern\].
    pub fn shard_channels(&self, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.shard
            .inner
            .read()
            .channels
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c, false)))
            .cloned()
            .collect()
    }

    /// PUBSUB SHARDNUMSUB: subscribers of one shard channel.
    /// The shard channels a client is subscribed to.
    pub fn shard_channels_of(&self, id: u64) -> Vec<Bytes> {
        self.shard
            .inner
            .read()
            .by_client
            .get(&id)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    pub fn shard_numsub(&self, channel: &[u8]) -> usize {
        self.shard
            .inner
            .read()
            .channels
            .get(channel)
            .map_or(0, |s| s.len())
    }

    /// Unsubscribes every client from the shard channels of `slot`, telling each with a
    /// `sunsubscribe` push (Redis 7.0 `removeChannelsInSlot`). Returns the channels dropped.
    pub fn drop_slot(&self, slot: u16, limit: BufLimit) -> usize {
        let mut g = self.shard.inner.write();
        g.owners.remove(&slot);
        let chans: Vec<Bytes> = g
            .channels
            .keys()
            .filter(|c| key_hash_slot(c) == slot)
            .cloned()
            .collect();
        for c in &chans {
            let clients: Vec<Arc<ClientHandle>> = g
                .channels
                .get(c)
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default();
            for h in clients {
                g.remove(h.id, c);
                let n = g.count(h.id);
                sync_count(&h, n);
                let resp3 = h.resp3.load(Ordering::Relaxed);
                h.send(encode(resp3, &[b"sunsubscribe", c], Some(n as i64)), limit);
            }
        }
        // A slot with no channel left must not keep an owner entry.
        g.owners.remove(&slot);
        chans.len()
    }

    /// Slots with shard subscribers whose owner changed since they were subscribed.
    fn moved_slots(&self, srv: &Server) -> Vec<u16> {
        let Some(node) = slot_owners(srv) else {
            return Vec::new();
        };
        let seen: Vec<(u16, Option<Name>)> = {
            let g = self.shard.inner.read();
            g.owners.iter().map(|(s, (o, _))| (*s, *o)).collect()
        };
        if seen.is_empty() {
            return Vec::new();
        }
        let slots: Vec<u16> = seen.iter().map(|(s, _)| *s).collect();
        let now = node.owners(&slots);
        seen.into_iter()
            .zip(now)
            .filter(|((_, was), is)| was != is)
            .map(|((s, _), _)| s)
            .collect()
    }
}

/// Starts the slot-owner watcher on the current runtime (it ends with the server).
fn start_watcher(srv: &Arc<Server>) {
    let weak: Weak<Server> = Arc::downgrade(srv);
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    rt.spawn(async move {
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            let Some(srv) = weak.upgrade() else { break };
            let moved = srv.pubsub.moved_slots(&srv);
            if moved.is_empty() {
                continue;
            }
            let limit = srv.config.read().cobl[2];
            for slot in moved {
                let n = srv.pubsub.drop_slot(slot, limit);
                tracing::debug!(slot, channels = n, "slot left this shard: sunsubscribed");
            }
        }
    });
}
