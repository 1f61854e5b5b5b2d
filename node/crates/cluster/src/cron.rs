//! Timers (clusterCron, run at 10 Hz) and outgoing message construction.

use rand::Rng;
use tracing::{debug, info};

use crate::msg::{self, Body, Ext, Gossip, Header, Message, Name};
use crate::state::*;

/// How long a newly learned node is included in every gossip section.
const FRESH_NODE_GOSSIP_MS: u64 = 5000;

impl ClusterState {
    /// The header every message we send starts with (clusterBuildMessageHdr).
    pub fn build_header(&self, ty: u16) -> Header {
        let me = self.me();
        let master = self.my_master().and_then(|m| self.nodes.get(&m));
        let slots = match master {
            Some(m) => self.slot_bitmap(&m.name),
            None => Box::new([0u8; msg::SLOTS_BYTES]),
        };
        Header {
            ty,
            port: self.config.announced_port(),
            current_epoch: self.current_epoch,
            config_epoch: master.map(|m| m.config_epoch).unwrap_or(me.config_epoch),
            // A loading replica has no master offset yet: peers show it as loading.
            offset: if self.host_loading && me.is_replica() {
                0
            } else {
                me.repl_offset
            },
            sender: self.myself,
            slots,
            slaveof: if me.is_replica() {
                me.master.unwrap_or([0; 40])
            } else {
                [0; 40]
            },
            myip: self.config.announce_ip.clone().unwrap_or_default(),
            pport: self.config.announced_pport(),
            cport: self.config.announced_bus_port(),
            flags: if me.is_replica() && master.is_some_and(|m| m.failed()) {
                me.flags | crate::failover::WIRE_FLAG_MY_MASTER_FAIL
            } else {
                me.flags
            },
            state: if self.state_ok { 0 } else { 1 },
            mflags: [
                if me.is_master() && self.mf.end != 0 && self.mf.paused {
                    msg::MFLAG0_PAUSED
                } else {
                    0
                },
                0,
                0,
            ],
        }
    }

    pub(crate) fn send(&mut self, link: LinkId, m: Message) {
        self.count_sent(m.header.ty);
        self.out.push(Out::Send { link, msg: m });
    }

    /// Sends to every connected node but myself and handshake nodes (clusterBroadcastMessage).
    pub(crate) fn broadcast(&mut self, ty: u16, body: Body) {
        let header = self.build_header(ty);
        self.broadcast_header(header, body);
    }

    /// Broadcast with a prepared header.
    pub(crate) fn broadcast_header(&mut self, header: Header, body: Body) {
        let targets: Vec<LinkId> = self
            .nodes
            .values()
            .filter(|n| n.flags & (FLAG_MYSELF | FLAG_HANDSHAKE) == 0)
            .filter_map(|n| n.link)
            .collect();
        for l in targets {
            self.send(
                l,
                Message {
                    header: header.clone(),
                    body: body.clone(),
                },
            );
        }
    }

    /// Cluster-wide PUBLISH (or SPUBLISH to my shard when `shard`).
    pub fn publish(&mut self, channel: &[u8], message: &[u8], shard: bool) {
        let body = Body::Publish {
            channel: channel.to_vec(),
            message: message.to_vec(),
        };
        if !shard {
            return self.broadcast(msg::TYPE_PUBLISH, body);
        }
        let Some(master) = self.my_master() else {
            return;
        };
        let header = self.build_header(msg::TYPE_PUBLISHSHARD);
        let targets: Vec<LinkId> = self
            .nodes
            .values()
            .filter(|n| n.name != self.myself && (n.name == master || n.master == Some(master)))
            .filter_map(|n| n.link)
            .collect();
        for l in targets {
            self.send(
                l,
                Message {
                    header: header.clone(),
                    body: body.clone(),
                },
            );
        }
    }

    pub(crate) fn send_update(&mut self, link: LinkId, about: &Name) {
        let Some(n) = self.nodes.get(about) else {
            return;
        };
        let body = Body::Update {
            config_epoch: n.config_epoch,
            name: n.name,
            slots: self.slot_bitmap(about),
        };
        let header = self.build_header(msg::TYPE_UPDATE);
        self.send(link, Message { header, body });
    }

    fn gossip_entry(n: &Node) -> Gossip {
        Gossip {
            name: n.name,
            ping_sent: (n.ping_sent / 1000) as u32,
            pong_received: (n.pong_received / 1000) as u32,
            ip: n.ip.clone(),
            port: n.port,
            cport: n.cport,
            flags: n.flags,
            pport: n.pport,
        }
    }

    /// Sends PING, PONG or MEET with gossip and extensions (clusterSendPing).
    pub fn send_ping(&mut self, link: LinkId, ty: u16, now: u64) {
        let link_node = self.links.get(&link).and_then(|l| l.node);
        self.pings_sent += 1;
        let round = self.pings_sent;
        let total = self.nodes.len();
        let mut freshnodes = total.saturating_sub(2);
        let wanted = (total / 10).max(3).min(freshnodes);
        let mut entries = Vec::new();
        let names: Vec<Name> = self.nodes.keys().copied().collect();
        let mut maxiter = wanted * 3;
        while freshnodes > 0 && entries.len() < wanted && maxiter > 0 {
            maxiter -= 1;
            let pick = names[self.rng.random_range(0..names.len())];
            let n = &self.nodes[&pick];
            if pick == self.myself || n.timed_out() {
                continue;
            }
            if n.flags & (FLAG_HANDSHAKE | FLAG_NOADDR) != 0
                || (n.link.is_none() && n.numslots == 0)
            {
                freshnodes -= 1;
                continue;
            }
            if n.last_in_ping_gossip == round {
                continue;
            }
            entries.push(Self::gossip_entry(n));
            if let Some(n) = self.nodes.get_mut(&pick) {
                n.last_in_ping_gossip = round;
            }
            freshnodes -= 1;
        }
        // Beyond Redis's random sample, nodes we learned in the last few seconds ride along in
        // every message: a new node spreads epidemically instead of waiting to be sampled, so a
        // freshly MEETed cluster converges in about a second. At rest this adds nothing.
        for n in self.nodes.values() {
            if n.name != self.myself
                && n.last_in_ping_gossip != round
                && now.saturating_sub(n.ctime) < FRESH_NODE_GOSSIP_MS
                && n.flags & (FLAG_HANDSHAKE | FLAG_NOADDR | FLAG_PFAIL) == 0
            {
                entries.push(Self::gossip_entry(n));
            }
        }
        for n in self.nodes.values() {
            if n.timed_out() && n.flags & (FLAG_HANDSHAKE | FLAG_NOADDR) == 0 {
                entries.push(Self::gossip_entry(n));
            }
        }
        let mut exts = Vec::new();
        let me = self.me();
        if !me.hostname.is_empty() {
            exts.push(Ext::Hostname(me.hostname.clone().into_bytes()));
        }
        // Redis 7.0 logs a warning per unknown extension, so the newer ones only go to peers
        // that advertise extension support (Valkey's header flag 1<<10).
        let peer_ext = link_node
            .and_then(|n| self.nodes.get(&n))
            .is_some_and(|n| n.wire_flags & (1 << 10) != 0);
        if peer_ext {
            exts.push(Ext::ShardId(me.shard_id));
            for (name, exp) in &self.blacklist {
                if *exp > now {
                    exts.push(Ext::ForgottenNode {
                        name: *name,
                        ttl: (*exp - now) / 1000,
                    });
                }
            }
        }
        let header = self.build_header(ty);
        if ty == msg::TYPE_PING {
            if let Some(n) = link_node.and_then(|n| self.nodes.get_mut(&n)) {
                n.ping_sent = now;
            }
        }
        self.send(
            link,
            Message {
                header,
                body: Body::Gossip { entries, exts },
            },
        );
    }

    /// One 100 ms tick (clusterCron).
    pub fn cron(&mut self, now: u64) {
        self.iteration += 1;
        let nt = self.config.node_timeout_ms;
        let handshake_timeout = nt.max(1000);
        self.stats_pfail_nodes = 0;
        let names: Vec<Name> = self.nodes.keys().copied().collect();
        for name in &names {
            let Some(n) = self.nodes.get(name) else {
                continue;
            };
            if n.flags & (FLAG_MYSELF | FLAG_NOADDR) != 0 {
                continue;
            }
            if n.timed_out() {
                self.stats_pfail_nodes += 1;
            }
            if n.in_handshake() && now.saturating_sub(n.ctime) > handshake_timeout {
                debug!(node = n.name_str(), "handshake timed out");
                self.del_node(name);
                continue;
            }
            self.connect_now(name, now);
        }
        if self.iteration.is_multiple_of(10) {
            let mut best: Option<(u64, Name)> = None;
            for _ in 0..5 {
                let pick = names[self.rng.random_range(0..names.len())];
                let Some(n) = self.nodes.get(&pick) else {
                    continue;
                };
                if !n.link_connected
                    || n.ping_sent != 0
                    || n.flags & (FLAG_MYSELF | FLAG_HANDSHAKE) != 0
                {
                    continue;
                }
                if best.is_none_or(|(p, _)| n.pong_received < p) {
                    best = Some((n.pong_received, pick));
                }
            }
            if let Some((_, name)) = best {
                if let Some(l) = self.nodes[&name].link {
                    self.send_ping(l, msg::TYPE_PING, now);
                }
            }
        }
        let mut update = false;
        let mut newly_pfail = Vec::new();
        for name in &names {
            let Some(n) = self.nodes.get(name) else {
                continue;
            };
            if n.flags & (FLAG_MYSELF | FLAG_NOADDR | FLAG_HANDSHAKE) != 0 {
                continue;
            }
            let ping_delay = now.saturating_sub(n.ping_sent);
            let data_delay = now.saturating_sub(n.data_received);
            if let Some(l) = n.link {
                let lctime = self.links.get(&l).map(|li| li.ctime).unwrap_or(now);
                if now.saturating_sub(lctime) > nt
                    && n.ping_sent != 0
                    && ping_delay > nt / 2
                    && data_delay > nt / 2
                {
                    self.free_link_of(name);
                }
            }
            let n = &self.nodes[name];
            if self.mf.end != 0
                && self.me().is_master()
                && self.mf.replica == Some(*name)
                && n.link_connected
            {
                if let Some(l) = n.link {
                    self.send_ping(l, msg::TYPE_PING, now);
                }
                continue;
            }
            if n.link_connected && n.ping_sent == 0 && now.saturating_sub(n.pong_received) > nt / 2
            {
                if let Some(l) = n.link {
                    self.send_ping(l, msg::TYPE_PING, now);
                }
                continue;
            }
            if n.ping_sent == 0 {
                continue;
            }
            if ping_delay.min(data_delay) > nt && n.flags & (FLAG_PFAIL | FLAG_FAIL) == 0 {
                info!(node = n.name_str(), "node timed out (PFAIL)");
                if let Some(n) = self.nodes.get_mut(name) {
                    n.flags |= FLAG_PFAIL;
                }
                update = true;
                newly_pfail.push(*name);
            }
        }
        if !newly_pfail.is_empty() {
            // Our failure report rides on every pong's gossip (PFAIL nodes are always
            // included): sent now, the masters reach FAIL's quorum in a round trip instead
            // of at their next routine ping, up to half a node timeout later. Reports that
            // came before our own timeout may already make a quorum.
            crate::commands::broadcast_pong(self, now);
            for name in &newly_pfail {
                self.mark_failing_if_needed(name, now);
            }
        }
        self.close_stale_inbound_links(now);
        self.manual_failover_cron(now);
        if self.me().is_replica() {
            self.repair_replication(now);
            self.handle_replica_failover(now);
            self.handle_replica_migration(now);
        }
        if update || !self.state_ok || self.todo_update_state {
            self.update_state(now);
        }
    }
}
