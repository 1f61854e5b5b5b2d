//! Handling of received bus messages and link events (clusterProcessPacket and friends).

use tracing::{debug, info, warn};

use crate::msg::{self, Body, Ext, Gossip, Message, Name};
use crate::state::*;

const NULL_NAME: Name = [0u8; 40];

impl ClusterState {
    /// An outbound connection for `link` is established: send MEET or PING.
    pub fn link_connected(&mut self, link: LinkId, now: u64) {
        let Some(name) = self.links.get(&link).and_then(|l| l.node) else {
            return;
        };
        let Some(n) = self.nodes.get_mut(&name) else {
            return;
        };
        n.link_connected = true;
        let meet = n.flags & FLAG_MEET != 0;
        let old_ping_sent = n.ping_sent;
        self.send_ping(
            link,
            if meet { msg::TYPE_MEET } else { msg::TYPE_PING },
            now,
        );
        if let Some(n) = self.nodes.get_mut(&name) {
            if old_ping_sent != 0 {
                n.ping_sent = old_ping_sent;
            }
            n.flags &= !FLAG_MEET;
        }
    }

    /// Dials a node that has no link yet. The cron redials from here; a MEET and a node
    /// learned by gossip call it at once rather than wait up to a tick (100 ms), as a cluster
    /// being formed waits on these handshakes.
    pub(crate) fn connect_now(&mut self, name: &Name, now: u64) {
        let Some(n) = self.nodes.get(name) else {
            return;
        };
        if n.link.is_some() || n.cport == 0 || n.ip.is_empty() || n.flags & FLAG_NOADDR != 0 {
            return;
        }
        let (ip, cport) = (n.ip.clone(), n.cport);
        let link = self.alloc_link(Some(*name), false, now);
        if let Some(n) = self.nodes.get_mut(name) {
            n.link = Some(link);
            n.link_connected = false;
        }
        self.out.push(Out::Connect { link, ip, cport });
    }

    /// A link went away (connect failure, EOF, protocol error, or we closed it).
    pub fn link_closed(&mut self, link: LinkId, now: u64) {
        let Some(info) = self.links.remove(&link) else {
            return;
        };
        let Some(name) = info.node else { return };
        let Some(n) = self.nodes.get_mut(&name) else {
            return;
        };
        if n.link == Some(link) {
            if n.ping_sent == 0 {
                // A failed connect or a dropped link counts as a pending ping: the node
                // times out node-timeout after we lost it, not after the next routine ping.
                // A live node answers the redial's PING and clears it.
                n.ping_sent = now;
            }
            n.link = None;
            n.link_connected = false;
        }
        if n.inbound_link == Some(link) {
            n.inbound_link = None;
        }
    }

    /// Frees every link whose unsent bytes exceed cluster-link-sendbuf-limit (Redis 7.0
    /// clusterNodeCronFreeLinkOnBufferLimitReached); an outbound link is redialled by the
    /// cron. Returns how many were freed.
    pub fn free_links_over_sendbuf_limit(&mut self, now: u64) -> usize {
        let limit = self.config.link_sendbuf_limit;
        if limit == 0 {
            return 0;
        }
        let over: Vec<LinkId> = self
            .links
            .iter()
            .filter(|(_, l)| l.send_queued.load(std::sync::atomic::Ordering::Relaxed) > limit)
            .map(|(id, _)| *id)
            .collect();
        for &l in &over {
            warn!(
                link = l,
                limit, "cluster link send buffer over the limit: freeing it"
            );
            self.link_closed(l, now);
            self.out.push(Out::Close { link: l });
            self.stats.links_buffer_limit_exceeded += 1;
        }
        over.len()
    }

    /// A peer connected to our bus port. Anyone can connect, so inbound links not yet bound
    /// to a known node are bounded: at [`MAX_PENDING_INBOUND_LINKS`] the oldest is closed.
    pub fn link_accepted(&mut self, now: u64) -> LinkId {
        let pending = self
            .links
            .iter()
            .filter(|(_, l)| l.inbound && l.node.is_none());
        let (count, oldest) = pending.fold((0usize, None::<(u64, LinkId)>), |(n, o), (id, l)| {
            let key = (l.ctime, *id);
            (n + 1, Some(o.map_or(key, |o| o.min(key))))
        });
        if count >= MAX_PENDING_INBOUND_LINKS {
            if let Some((_, old)) = oldest {
                debug!(
                    link = old,
                    "too many unidentified bus links: closing the oldest"
                );
                self.drop_inbound_link(old, now);
            }
        }
        self.alloc_link(None, true, now)
    }

    /// Closes an inbound link for the link-hygiene rules (counted in CLUSTER INFO).
    fn drop_inbound_link(&mut self, link: LinkId, now: u64) {
        self.link_closed(link, now);
        self.out.push(Out::Close { link });
        self.stats.links_timed_out += 1;
    }

    /// Closes inbound links that are of no use (clusterCron): one not bound to a known node
    /// after the handshake timeout (max(node timeout, 1 s): it sent nothing, stalled inside
    /// a frame, or never named a node we know) or once it leaves more than
    /// [`msg::MAX_UNIDENTIFIED_MSG_LEN`] of our replies unread, or a bound one that has
    /// carried no valid message for twice the handshake timeout (a live peer pings at least
    /// every node timeout / 2).
    pub(crate) fn close_stale_inbound_links(&mut self, now: u64) {
        let handshake = self.config.node_timeout_ms.max(1000);
        let idle = handshake.saturating_mul(2);
        let unread_max = msg::MAX_UNIDENTIFIED_MSG_LEN as u64;
        let stale: Vec<LinkId> = self
            .links
            .iter()
            .filter(|(_, l)| {
                l.inbound
                    && match l.node {
                        None => {
                            now.saturating_sub(l.ctime) > handshake
                                || l.send_queued.load(std::sync::atomic::Ordering::Relaxed)
                                    > unread_max
                        }
                        Some(_) => now.saturating_sub(l.last_rx.max(l.ctime)) > idle,
                    }
            })
            .map(|(id, _)| *id)
            .collect();
        for l in stale {
            debug!(link = l, "closing an unidentified or idle inbound bus link");
            self.drop_inbound_link(l, now);
        }
    }

    /// Handles one decoded message that arrived on `link`. `peer_ip` is the socket's peer
    /// address, `local_ip` our side of it (how a MEET teaches us our own address).
    /// A message with a field that fails [`Message::validate`] is dropped and counted.
    pub fn process(
        &mut self,
        link: LinkId,
        mut m: Message,
        peer_ip: &str,
        local_ip: &str,
        now: u64,
    ) {
        if !self.links.contains_key(&link) {
            return;
        }
        if let Err(e) = m.validate() {
            self.note_rejected(peer_ip, &e, now);
            return;
        }
        let Some(linfo) = self.links.get_mut(&link) else {
            return;
        };
        linfo.last_rx = now;
        let linfo = linfo.clone();
        let h = &m.header;
        let ty = h.ty;
        if let Some(c) = self.stats.received.get_mut(ty as usize) {
            *c += 1;
        }
        if self.drop_packet_filter == i64::from(ty) {
            tracing::warn!("Dropping packet that matches debug drop filter");
            return;
        }
        let link_node = linfo.node.filter(|n| self.nodes.contains_key(n));
        let sender: Option<Name> = match link_node {
            Some(n) if !linfo.inbound && !self.nodes[&n].in_handshake() => Some(n),
            _ => self
                .nodes
                .get(&h.sender)
                .filter(|n| !n.in_handshake())
                .map(|n| n.name),
        };
        let sender = sender.filter(|s| *s != self.myself);
        if let Some(s) = sender {
            if linfo.inbound {
                if let Some(n) = self.nodes.get_mut(&s) {
                    if n.inbound_link != Some(link) {
                        // A peer that reconnected: its newest inbound link replaces the old one.
                        if let Some(old) = n.inbound_link.replace(link) {
                            self.links.remove(&old);
                            self.out.push(Out::Close { link: old });
                        }
                        if let Some(li) = self.links.get_mut(&link) {
                            li.node = Some(s);
                        }
                    }
                }
            }
        }
        let mut sender_config_epoch = 0;
        if let Some(s) = sender {
            let n = self.nodes.get_mut(&s).expect("sender is known");
            n.data_received = now;
            n.wire_flags = h.flags;
            if h.current_epoch > self.current_epoch {
                self.current_epoch = h.current_epoch;
                self.todo_save = true;
            }
            sender_config_epoch = h.config_epoch;
            let n = self.nodes.get_mut(&s).expect("sender is known");
            if h.config_epoch > n.config_epoch {
                n.config_epoch = h.config_epoch;
                self.todo_save = true;
            }
            n.repl_offset = h.offset;
        }

        // Manual failover: our master, paused, tells us the offset to reach. The latest
        // announcement wins (a write that was in flight when the pause began moves it on).
        if let Some(s) = sender {
            if self.mf.end != 0
                && self.me().is_replica()
                && self.me().master == Some(s)
                && h.mflags[0] & msg::MFLAG0_PAUSED != 0
                && !self.mf.can_start
            {
                self.mf.master_offset = Some(h.offset);
            }
        }
        let is_ping_family = matches!(ty, msg::TYPE_PING | msg::TYPE_PONG | msg::TYPE_MEET);
        if ty == msg::TYPE_PING || ty == msg::TYPE_MEET {
            if (ty == msg::TYPE_MEET || self.me().ip.is_empty())
                && self.config.announce_ip.is_none()
                && !local_ip.is_empty()
                && self.me().ip != local_ip
            {
                info!(ip = local_ip, "learned my IP address from a bus peer");
                self.me_mut().ip = local_ip.to_string();
                self.todo_save = true;
            }
            if sender.is_none() && ty == msg::TYPE_MEET {
                let name = self.new_name();
                let mut n = Node::new(name, FLAG_HANDSHAKE, now);
                n.ip = announced_or_peer(&h.myip, peer_ip);
                n.port = h.port;
                n.pport = h.pport;
                n.cport = h.cport;
                self.nodes.insert(name, n);
                self.todo_save = true;
                if let Body::Gossip { entries, .. } = &m.body {
                    self.process_gossip(None, entries, now);
                }
            }
            self.send_ping(link, msg::TYPE_PONG, now);
        }

        if is_ping_family {
            if !linfo.inbound {
                if let Some(ln) = link_node {
                    if self.nodes[&ln].in_handshake() {
                        if let Some(s) = sender {
                            // We already know this node: take the address, drop the duplicate.
                            self.update_address_if_needed(&s, link, &h.myip, peer_ip, h, now);
                            self.del_node(&ln);
                            return;
                        }
                        if h.sender == self.myself || msg_name_invalid(&h.sender) {
                            self.del_node(&ln);
                            return;
                        }
                        debug!(name = name_str(&h.sender), "handshake completed");
                        self.rename_node(&ln, h.sender);
                        let n = self.nodes.get_mut(&h.sender).expect("just renamed");
                        n.flags &= !FLAG_HANDSHAKE;
                        n.flags |= h.flags & (FLAG_MASTER | FLAG_SLAVE);
                        self.todo_save = true;
                        return self.process_after_handshake(link, m, peer_ip, now);
                    } else if ln != h.sender {
                        // The node at this address is not who we thought: forget its address.
                        let n = self.nodes.get_mut(&ln).expect("link node exists");
                        n.flags |= FLAG_NOADDR;
                        n.ip.clear();
                        n.port = 0;
                        n.pport = 0;
                        n.cport = 0;
                        self.free_link_of(&ln);
                        self.todo_save = true;
                        return;
                    }
                }
            }
            self.process_ping_body(sender, link, &linfo, &m, sender_config_epoch, peer_ip, now);
        } else if ty == msg::TYPE_FAIL {
            if let (Some(_), Body::Fail { name }) = (sender, &m.body) {
                if let Some(f) = self.nodes.get_mut(name) {
                    if f.flags & (FLAG_FAIL | FLAG_MYSELF) == 0 {
                        info!(node = name_str(name), "FAIL message received");
                        f.flags |= FLAG_FAIL;
                        f.fail_time = now;
                        f.flags &= !FLAG_PFAIL;
                        self.todo_save = true;
                        self.todo_update_state = true;
                        if self.me().master == Some(*name) {
                            self.my_master_failed(now);
                        }
                    }
                }
            }
        } else if ty == msg::TYPE_PUBLISH || ty == msg::TYPE_PUBLISHSHARD {
            if let (Some(_), Body::Publish { channel, message }) = (sender, m.body) {
                self.out.push(Out::Publish {
                    channel,
                    message,
                    shard: ty == msg::TYPE_PUBLISHSHARD,
                });
            }
        } else if ty == msg::TYPE_FAILOVER_AUTH_REQUEST {
            if let Some(s) = sender {
                self.vote_if_needed(&s, h, now);
            }
        } else if ty == msg::TYPE_FAILOVER_AUTH_ACK {
            if let Some(s) = sender {
                self.count_vote(&s, h.current_epoch, now);
            }
        } else if ty == msg::TYPE_MFSTART {
            if let Some(s) = sender {
                self.on_mfstart(&s, link, now);
            }
        } else if ty == msg::TYPE_UPDATE {
            if let (
                Some(_),
                Body::Update {
                    config_epoch,
                    name,
                    slots,
                },
            ) = (sender, &m.body)
            {
                let Some(n) = self.nodes.get(name) else {
                    return;
                };
                if n.config_epoch >= *config_epoch {
                    return;
                }
                if n.is_replica() {
                    self.set_node_as_master(name);
                }
                if let Some(n) = self.nodes.get_mut(name) {
                    n.config_epoch = *config_epoch;
                }
                self.todo_save = true;
                self.update_slots_config_with(*name, *config_epoch, slots);
            }
        }
    }

    fn process_after_handshake(&mut self, link: LinkId, m: Message, peer_ip: &str, now: u64) {
        // Re-run with the renamed node now known as the sender.
        let linfo = match self.links.get(&link) {
            Some(l) => l.clone(),
            None => return,
        };
        let sender = Some(m.header.sender);
        let cfg = m.header.config_epoch;
        if let Some(n) = self.nodes.get_mut(&m.header.sender) {
            n.data_received = now;
            if cfg > n.config_epoch {
                n.config_epoch = cfg;
            }
        }
        if m.header.current_epoch > self.current_epoch {
            self.current_epoch = m.header.current_epoch;
        }
        self.process_ping_body(sender, link, &linfo, &m, cfg, peer_ip, now);
    }

    #[allow(clippy::too_many_arguments)]
    fn process_ping_body(
        &mut self,
        sender: Option<Name>,
        link: LinkId,
        linfo: &LinkInfo,
        m: &Message,
        sender_config_epoch: u64,
        peer_ip: &str,
        now: u64,
    ) {
        let h = &m.header;
        if let Some(s) = sender {
            let n = self.nodes.get_mut(&s).expect("sender known");
            n.flags = (n.flags & !FLAG_NOFAILOVER) | (h.flags & FLAG_NOFAILOVER);
            if h.ty == msg::TYPE_PING && !n.in_handshake() {
                self.update_address_if_needed(&s, link, &h.myip, peer_ip, h, now);
            }
        }
        if !linfo.inbound && h.ty == msg::TYPE_PONG {
            if let Some(ln) = linfo.node {
                if let Some(n) = self.nodes.get_mut(&ln) {
                    n.pong_received = now;
                    n.ping_sent = 0;
                    if n.timed_out() {
                        n.flags &= !FLAG_PFAIL;
                        self.todo_update_state = true;
                    } else if n.failed() {
                        self.clear_failure_if_needed(&ln, now);
                    }
                }
            }
        }
        let Some(s) = sender else { return };
        // Role switch.
        if h.slaveof == NULL_NAME {
            self.set_node_as_master(&s);
        } else {
            let master = self.nodes.get(&h.slaveof).map(|n| n.name);
            if self.nodes[&s].is_master() {
                self.del_node_slots(&s);
                let n = self.nodes.get_mut(&s).expect("sender known");
                n.flags &= !(FLAG_MASTER | FLAG_MIGRATE_TO);
                n.flags |= FLAG_SLAVE;
                self.todo_save = true;
                self.todo_update_state = true;
            }
            if let Some(mn) = master {
                let n = self.nodes.get_mut(&s).expect("sender known");
                if n.master != Some(mn) {
                    n.master = Some(mn);
                    self.note_replica_added(&mn);
                    self.todo_save = true;
                }
            }
            // My master became a replica of a master I already know with its slots: no
            // claim will differ from what I hold, so the check must run here as well.
            if self.me().master == Some(s) {
                self.follow_grandmaster_if_sub_replica();
            }
        }
        // Slots.
        let sender_master = if self.nodes[&s].is_master() {
            Some(s)
        } else {
            self.nodes[&s].master
        };
        let mut dirty = false;
        if let Some(sm) = sender_master {
            dirty = self.nodes.get(&sm).is_none_or(|n| *n.slot_bits != *h.slots);
        }
        if self.nodes[&s].is_master() && dirty {
            self.update_slots_config_with(s, sender_config_epoch, &h.slots);
        }
        if dirty {
            // The first claimed slot whose owner has a newer config: tell the sender. Slots
            // already the sender's (its bitmap) cannot qualify, so only the difference is
            // visited (usually a handful of slots, not 16384).
            let mut stale_claim: Option<Name> = None;
            msg::for_each_slot_in_diff(&h.slots, &self.nodes[&s].slot_bits, |j| {
                if stale_claim.is_some() {
                    return;
                }
                let Some(owner) = self.slots[j] else { return };
                if owner != s
                    && self
                        .nodes
                        .get(&owner)
                        .is_some_and(|o| o.config_epoch > sender_config_epoch)
                {
                    stale_claim = Some(owner);
                }
            });
            if let Some(owner) = stale_claim {
                if let Some(l) = self.nodes.get(&s).and_then(|n| n.link) {
                    self.send_update(l, &owner);
                }
            }
        }
        if self.me().is_master()
            && self.nodes[&s].is_master()
            && sender_config_epoch == self.me().config_epoch
        {
            self.handle_epoch_collision(&s);
        }
        if let Body::Gossip { entries, exts } = &m.body {
            self.process_gossip(Some(s), entries, now);
            self.process_exts(&s, h.flags, exts, now);
        }
    }

    fn update_address_if_needed(
        &mut self,
        name: &Name,
        link: LinkId,
        myip: &str,
        peer_ip: &str,
        h: &msg::Header,
        _now: u64,
    ) -> bool {
        let ip = announced_or_peer(myip, peer_ip);
        let Some(n) = self.nodes.get_mut(name) else {
            return false;
        };
        if n.link == Some(link) {
            return false;
        }
        if n.port == h.port && n.cport == h.cport && n.pport == h.pport && n.ip == ip {
            return false;
        }
        info!(
            node = name_str(name),
            ip,
            port = h.port,
            "node address updated"
        );
        n.ip = ip;
        n.port = h.port;
        n.cport = h.cport;
        n.pport = h.pport;
        n.flags &= !FLAG_NOADDR;
        self.free_link_of(name);
        self.repoint_if_my_master(name);
        self.todo_save = true;
        self.todo_update_state = true;
        true
    }

    fn clear_failure_if_needed(&mut self, name: &Name, now: u64) {
        let nt = self.config.node_timeout_ms;
        let Some(n) = self.nodes.get_mut(name) else {
            return;
        };
        if n.is_replica()
            || n.numslots == 0
            || now.saturating_sub(n.fail_time) > nt.saturating_mul(2)
        {
            info!(node = name_str(name), "clearing FAIL state");
            n.flags &= !FLAG_FAIL;
            self.todo_save = true;
            self.todo_update_state = true;
        }
    }

    /// Take the slots a sender claims with a higher config epoch (clusterUpdateSlotsConfigWith).
    pub(crate) fn update_slots_config_with(
        &mut self,
        sender: Name,
        epoch: u64,
        slots: &msg::SlotBitmap,
    ) {
        if sender == self.myself {
            return;
        }
        let curmaster = self.my_master();
        let mut newmaster = None;
        let sender_slots = msg::bitmap_count(slots);
        let mut migrated_ours = 0;
        let mut dirty = Vec::new();
        // Slots the sender owns already (its bitmap) need nothing: visit only the claimed
        // slots outside it (a few during a resharding, instead of 16384 per message).
        let known: Box<msg::SlotBitmap> = match self.nodes.get(&sender) {
            Some(n) => n.slot_bits.clone(),
            None => Box::new([0; msg::SLOTS_BYTES]),
        };
        let mut candidates = Vec::new();
        msg::for_each_slot_in_diff(slots, &known, |j| candidates.push(j));
        for j in candidates {
            if self.slots[j] == Some(sender) || self.importing[j].is_some() {
                continue;
            }
            let granted = self
                .granted_exports
                .iter()
                .any(|(t, s, e)| *t == sender && (*s as usize..=*e as usize).contains(&j));
            let take = granted
                || match self.slots[j] {
                    None => true,
                    Some(o) => self.nodes.get(&o).is_none_or(|o| o.config_epoch < epoch),
                };
            if take {
                if self.slots[j] == Some(self.myself) {
                    dirty.push(j);
                }
                if self.slots[j].is_some() && self.slots[j] == curmaster {
                    newmaster = Some(sender);
                    migrated_ours += 1;
                }
                self.del_slot(j);
                self.add_slot(sender, j);
                self.todo_save = true;
                self.todo_update_state = true;
            }
        }
        let cur_empty = curmaster
            .and_then(|c| self.nodes.get(&c))
            .is_some_and(|c| c.numslots == 0);
        if let Some(nm) = newmaster {
            if cur_empty && (self.config.allow_replica_migration || sender_slots == migrated_ours) {
                info!(
                    master = name_str(&nm),
                    "lost my last slot: becoming a replica"
                );
                self.set_my_master(nm);
                // Tell every peer at once: until a master hears it from us, it does not
                // count us as its replica and ignores our CLUSTER FAILOVER (MFSTART), and
                // voters refuse us as a master node.
                crate::commands::broadcast_pong(self, crate::bus::now_ms());
                return;
            }
        }
        if self.follow_grandmaster_if_sub_replica() {
            return;
        }
        for s in dirty {
            self.out.push(Out::DeleteSlotKeys { slot: s as u16 });
        }
    }

    /// Safeguard against sub-replicas (Redis's, in clusterUpdateSlotsConfigWith): when my
    /// master turned into a replica, follow its master. Nothing else would move me if I
    /// heard of the demotion before the new owner's claim: by then my master held no slots,
    /// so the claim took none from it. Only a grandmaster I see as a master qualifies, so an
    /// unsettled chain cannot make me resync from a node without slots.
    fn follow_grandmaster_if_sub_replica(&mut self) -> bool {
        if !self.me().is_replica() {
            return false;
        }
        let Some(gm) = self
            .me()
            .master
            .and_then(|m| self.nodes.get(&m))
            .filter(|m| m.is_replica())
            .and_then(|m| m.master)
        else {
            return false;
        };
        if gm == self.myself || !self.nodes.get(&gm).is_some_and(|g| g.is_master()) {
            return false;
        }
        info!(
            grandmaster = name_str(&gm),
            "I'm a sub-replica! Reconfiguring myself as a replica of grandmaster"
        );
        self.set_my_master(gm);
        crate::commands::broadcast_pong(self, crate::bus::now_ms());
        true
    }

    /// Makes myself a replica of `master` (CLUSTER REPLICATE, or losing all slots).
    pub fn set_my_master(&mut self, master: Name) {
        let me = self.myself;
        if self.me().is_master() {
            self.del_node_slots(&me);
            self.importing.clear();
            self.migrating.clear();
        }
        let (ip, port) = match self.nodes.get(&master) {
            Some(m) => (m.ip.clone(), m.port),
            None => return,
        };
        let n = self.me_mut();
        n.flags &= !(FLAG_MASTER | FLAG_MIGRATE_TO);
        n.flags |= FLAG_SLAVE;
        n.master = Some(master);
        self.note_replica_added(&master);
        self.set_replication(Some((ip, port)));
        // A manual failover this node took part in as a master is over (Redis's
        // resetManualFailover in clusterSetMaster); the host lifts its pause of writes when
        // it follows the new master.
        self.mf = crate::failover::ManualFailover::default();
        self.todo_save = true;
        self.todo_update_state = true;
    }

    fn handle_epoch_collision(&mut self, sender: &Name) {
        if sender <= &self.myself {
            return;
        }
        // A peer may have announced u64::MAX: saturate rather than wrap.
        self.current_epoch = self.current_epoch.saturating_add(1);
        let e = self.current_epoch;
        self.me_mut().config_epoch = e;
        self.todo_save = true;
        self.todo_fsync = true;
        warn!(epoch = e, "configEpoch collision resolved");
    }

    fn process_gossip(&mut self, sender: Option<Name>, entries: &[Gossip], now: u64) {
        let sender_is_master = sender
            .and_then(|s| self.nodes.get(&s))
            .is_some_and(|n| n.is_master());
        for g in entries {
            let flags = g.flags;
            if self.nodes.contains_key(&g.name) {
                if let Some(s) = sender {
                    if sender_is_master && g.name != self.myself {
                        if flags & (FLAG_FAIL | FLAG_PFAIL) != 0 {
                            self.add_failure_report(&g.name, s, now);
                            self.mark_failing_if_needed(&g.name, now);
                        } else {
                            self.del_failure_report(&g.name, &s);
                        }
                    }
                }
                let nreports = self.failure_reports(&g.name, now);
                let n = self.nodes.get_mut(&g.name).expect("checked");
                if flags & (FLAG_FAIL | FLAG_PFAIL) == 0 && n.ping_sent == 0 && nreports == 0 {
                    let pongtime = g.pong_received as u64 * 1000;
                    if pongtime <= now + 500 && pongtime > n.pong_received {
                        n.pong_received = pongtime;
                    }
                }
                if n.flags & (FLAG_FAIL | FLAG_PFAIL) != 0
                    && flags & (FLAG_NOADDR | FLAG_FAIL | FLAG_PFAIL) == 0
                    && (n.ip != g.ip || n.port != g.port || n.cport != g.cport)
                {
                    n.ip = g.ip.clone();
                    n.port = g.port;
                    n.pport = g.pport;
                    n.cport = g.cport;
                    n.flags &= !FLAG_NOADDR;
                    let name = g.name;
                    self.free_link_of(&name);
                    // Redis 7.0 leaves this to a link that may never report a change.
                    self.repoint_if_my_master(&name);
                    self.todo_save = true;
                }
            } else if sender.is_some()
                && flags & FLAG_NOADDR == 0
                && !self.blacklisted(&g.name, now)
                && !msg_name_invalid(&g.name)
            {
                let mut n = Node::new(
                    g.name,
                    flags & (FLAG_MASTER | FLAG_SLAVE | FLAG_NOFAILOVER),
                    now,
                );
                n.ip = g.ip.clone();
                n.port = g.port;
                n.pport = g.pport;
                n.cport = g.cport;
                self.nodes.insert(g.name, n);
                self.connect_now(&g.name, now);
                self.todo_save = true;
            }
        }
    }

    fn process_exts(&mut self, sender: &Name, _hdr_flags: u16, exts: &[Ext], now: u64) {
        let mut hostname = None;
        let mut human = None;
        for e in exts {
            match e {
                // Checked by Message::validate (it goes verbatim into CLUSTER NODES and
                // nodes.conf).
                Ext::Hostname(h) => hostname = Some(String::from_utf8_lossy(h).into_owned()),
                Ext::HumanNodename(h) => human = Some(String::from_utf8_lossy(h).into_owned()),
                Ext::ShardId(id) => {
                    if let Some(n) = self.nodes.get_mut(sender) {
                        n.shard_id = *id;
                    }
                }
                Ext::ForgottenNode { name, ttl } => {
                    if name != &self.myself
                        && name != sender
                        && self.me().master.as_ref() != Some(name)
                    {
                        if self.nodes.contains_key(name) {
                            info!(node = name_str(name), "forgetting node on a peer's request");
                            self.del_node(name);
                        }
                        self.blacklist
                            .insert(*name, now + ttl.saturating_mul(1000).min(BLACKLIST_TTL_MS));
                    }
                }
                Ext::Unknown { .. } => {}
            }
        }
        if let Some(n) = self.nodes.get_mut(sender) {
            let h = hostname.unwrap_or_default();
            if n.hostname != h {
                n.hostname = h;
                self.todo_save = true;
            }
            n.human_nodename = human.unwrap_or_default();
        }
    }

    /// PFAIL → FAIL when enough masters agree (markNodeAsFailingIfNeeded).
    pub(crate) fn mark_failing_if_needed(&mut self, name: &Name, now: u64) {
        let quorum = self.size / 2 + 1;
        match self.nodes.get(name) {
            Some(n) if n.timed_out() && !n.failed() => {}
            _ => return,
        }
        let mut failures = self.failure_reports(name, now);
        if self.me().is_master() {
            failures += 1;
        }
        if failures < quorum {
            return;
        }
        info!(
            node = name_str(name),
            "marking node as FAIL (quorum reached)"
        );
        let n = self.nodes.get_mut(name).expect("checked");
        n.flags &= !FLAG_PFAIL;
        n.flags |= FLAG_FAIL;
        n.fail_time = now;
        let body = Body::Fail { name: *name };
        self.broadcast(msg::TYPE_FAIL, body);
        self.todo_save = true;
        self.todo_update_state = true;
        if self.me().master == Some(*name) {
            self.my_master_failed(now);
        }
    }

    /// Grant a failover vote if Redis's rules allow it (clusterSendFailoverAuthIfNeeded).
    fn vote_if_needed(&mut self, requester: &Name, h: &msg::Header, now: u64) {
        let me = self.me();
        if me.is_replica() || me.numslots == 0 {
            return;
        }
        // Refusals are logged as Redis's clusterSendFailoverAuthIfNeeded logs them: a
        // failover that stalls on missing votes is otherwise invisible.
        let who = name_str(requester);
        if h.current_epoch < self.current_epoch {
            warn!(
                "Failover auth denied to {who}: reqEpoch ({}) < curEpoch({})",
                h.current_epoch, self.current_epoch
            );
            return;
        }
        if self.last_vote_epoch == self.current_epoch {
            warn!(
                "Failover auth denied to {who}: already voted for epoch {}",
                self.current_epoch
            );
            return;
        }
        let force = h.mflags[0] & msg::MFLAG0_FORCEACK != 0;
        let Some(req) = self.nodes.get(requester) else {
            return;
        };
        if req.is_master() {
            warn!("Failover auth denied to {who}: it is a master node");
            return;
        }
        let Some(master) = req.master.and_then(|m| self.nodes.get(&m)) else {
            warn!("Failover auth denied to {who}: I don't know its master");
            return;
        };
        if !master.failed() && !force {
            warn!("Failover auth denied to {who}: its master is up");
            return;
        }
        let wait = self.config.node_timeout_ms.saturating_mul(2);
        if now.saturating_sub(master.voted_time) < wait {
            warn!(
                "Failover auth denied to {who}: can't vote about this master before {} milliseconds",
                wait - now.saturating_sub(master.voted_time)
            );
            return;
        }
        let mut newer_owner = None;
        msg::for_each_slot_in_diff(&h.slots, &[0; msg::SLOTS_BYTES], |j| {
            if let Some(o) = self.slots[j].and_then(|o| self.nodes.get(&o)) {
                if o.config_epoch > h.config_epoch && newer_owner.is_none() {
                    newer_owner = Some((j, o.config_epoch));
                }
            }
        });
        if let Some((slot, epoch)) = newer_owner {
            warn!(
                "Failover auth denied to {who}: slot {slot} epoch ({epoch}) > reqEpoch ({})",
                h.config_epoch
            );
            return;
        }
        let mname = master.name;
        self.last_vote_epoch = self.current_epoch;
        if let Some(m) = self.nodes.get_mut(&mname) {
            m.voted_time = now;
        }
        // The vote leaves only once lastVoteEpoch is on disk (held back by the bus).
        self.todo_save = true;
        self.todo_fsync = true;
        info!(
            "Failover auth granted to {who} for epoch {}",
            self.current_epoch
        );
        if let Some(l) = self.nodes.get(requester).and_then(|n| n.link) {
            self.send_vote(l);
        }
    }
}

fn announced_or_peer(myip: &str, peer_ip: &str) -> String {
    if myip.is_empty() {
        peer_ip.to_string()
    } else {
        myip.to_string()
    }
}

/// Names we accept must be node ids (we print them in CLUSTER NODES and nodes.conf).
fn msg_name_invalid(n: &Name) -> bool {
    !crate::validate::is_node_name(n)
}
