//! Automatic replica failover (clusterHandleSlaveFailover): a replica of a FAIL master asks
//! the slot-owning masters for votes and, with a majority, takes its master's slots.

use rand::Rng;
use tracing::{info, instrument};

use crate::msg::{self, Body, Message, Name, SLOTS};
use crate::state::*;

/// Manual failover (CLUSTER FAILOVER) state, on the replica and on its master.
#[derive(Clone, Debug, Default)]
pub struct ManualFailover {
    /// Deadline (ms); 0 when no manual failover is in progress.
    pub end: u64,
    /// Replica: the election may start (FORCE, or offsets caught up).
    pub can_start: bool,
    /// Replica: the master's offset announced while it was paused.
    pub master_offset: Option<u64>,
    /// Master: the replica that asked.
    pub replica: Option<Name>,
    /// Master: the node confirmed client writes are paused and `repl_offset` is final, so
    /// pings may carry the PAUSED flag (an offset announced before that would be stale).
    pub paused: bool,
    /// Master: the link MFSTART came in on, for the first PAUSED ping.
    pub link: Option<LinkId>,
}

/// Manual failover timeout (CLUSTER_MF_TIMEOUT).
pub const MF_TIMEOUT_MS: u64 = 5000;

/// Election bookkeeping of a replica.
#[derive(Clone, Debug, Default)]
pub struct Election {
    /// When the election may start (or started), ms.
    pub auth_time: u64,
    pub auth_count: usize,
    pub auth_sent: bool,
    pub rank: u64,
    /// [`ClusterState::failed_master_rank`] when the election was scheduled.
    pub failed_rank: u64,
    pub auth_epoch: u64,
}

/// Header flag of a replica whose master it sees as FAIL (Valkey's
/// CLUSTER_NODE_MY_PRIMARY_FAIL): once every sibling carries it, their announced offsets are
/// final and the best-ranked replica need not wait. Redis 7.0 ignores unknown header flags.
pub const WIRE_FLAG_MY_MASTER_FAIL: u16 = 1 << 13;

/// The fixed part of the election delay: long enough for FAIL to reach the voters and for
/// sibling replicas to swap offsets, which on one network takes milliseconds, so it scales
/// with the node timeout (Valkey 8.1's min(node_timeout / 30, 500)) rather than Redis's
/// flat 500 ms.
fn election_delay_ms(node_timeout_ms: u64) -> u64 {
    (node_timeout_ms / 30).clamp(1, 500)
}

impl ClusterState {
    /// Sibling replicas ahead of us: a larger replication offset, or the same offset and a
    /// smaller name, so two replicas with equal offsets never share rank 0
    /// (clusterGetSlaveRank, with Valkey's tie-break).
    fn replica_rank(&self) -> u64 {
        let me = self.me();
        let Some(master) = me.master else { return 0 };
        self.nodes
            .values()
            .filter(|n| n.name != self.myself && n.master == Some(master))
            .filter(|n| n.flags & FLAG_NOFAILOVER == 0)
            .filter(|n| {
                n.repl_offset > me.repl_offset
                    || (n.repl_offset == me.repl_offset && n.name < me.name)
            })
            .count() as u64
    }

    /// Failed slot-owning masters with replicas whose names sort before our master's: when
    /// several masters fail at once their replicas stagger their elections by this, so they
    /// do not split the votes of one epoch (Valkey's failed-primary rank; names rather than
    /// shard ids, which Redis 7.0 peers do not announce).
    fn failed_master_rank(&self, now: u64) -> u64 {
        let Some(mine) = self.me().master else {
            return 0;
        };
        let nt = self.config.node_timeout_ms;
        let factor = self.config.replica_validity_factor;
        self.nodes
            .values()
            .filter(|n| n.failed() && n.is_master() && n.numslots > 0 && n.name < mine)
            .filter(|n| factor == 0 || now.saturating_sub(n.fail_time) <= nt.saturating_mul(factor))
            .filter(|n| {
                self.nodes
                    .values()
                    .any(|r| r.master == Some(n.name) && r.is_replica())
            })
            .count() as u64
    }

    /// True when this replica is sure to be its shard's best candidate: rank 0 among its
    /// siblings and first among failed masters, with an offset (a new empty replica may not
    /// know its siblings yet), and every sibling already sees the master as FAIL, so the
    /// offsets compared are final. Such a replica starts its election at once.
    fn best_ranked_replica(&self, now: u64) -> bool {
        let me = self.me();
        let Some(master) = me.master else {
            return false;
        };
        me.repl_offset != 0
            && self.replica_rank() == 0
            && self.failed_master_rank(now) == 0
            && self
                .nodes
                .values()
                .filter(|n| n.name != self.myself && n.master == Some(master))
                .all(|n| n.wire_flags & WIRE_FLAG_MY_MASTER_FAIL != 0)
    }

    /// Our master has just been flagged FAIL (by our own count or a FAIL message): tell the
    /// siblings at once (the flag rides on the pong) and consider the election now rather
    /// than at the next cron tick.
    pub(crate) fn my_master_failed(&mut self, now: u64) {
        if !self.me().is_replica() {
            return;
        }
        let Some(master) = self.me().master else {
            return;
        };
        let siblings: Vec<LinkId> = self
            .nodes
            .values()
            .filter(|n| n.name != self.myself && n.master == Some(master) && n.link_connected)
            .filter_map(|n| n.link)
            .collect();
        for l in siblings {
            self.send_ping(l, msg::TYPE_PONG, now);
        }
        self.handle_replica_failover(now);
    }

    /// Called from the cron (and when a vote arrives) while we are a replica.
    #[instrument(skip(self), level = "debug")]
    pub fn handle_replica_failover(&mut self, now: u64) {
        let nt = self.config.node_timeout_ms;
        let auth_timeout = nt.saturating_mul(2).max(2000);
        let auth_retry = auth_timeout.saturating_mul(2);
        let me = self.me();
        let Some(master) = me.master.and_then(|m| self.nodes.get(&m)) else {
            return;
        };
        let master_name = master.name;
        let manual = self.mf.end != 0 && self.mf.can_start;
        if me.is_master()
            || (!master.failed() && !manual)
            || (self.config.replica_no_failover && !manual)
            || master.numslots == 0
        {
            return;
        }
        // Data age: how long we have not heard from our master, minus the time it took to
        // flag it as failed. `repl_last_io` is maintained by the replication side (0: unknown,
        // treated as fresh until replication is wired in).
        let mut data_age = if self.repl_last_io == 0 {
            0
        } else {
            now.saturating_sub(self.repl_last_io)
        };
        if data_age > nt {
            data_age -= nt;
        }
        let factor = self.config.replica_validity_factor;
        if !manual
            && factor != 0
            && data_age
                > self
                    .config
                    .repl_ping_replica_period_s
                    .saturating_mul(1000)
                    .saturating_add(nt.saturating_mul(factor))
        {
            return;
        }
        let delay = election_delay_ms(nt);
        let auth_age = now.saturating_sub(self.election.auth_time);
        if auth_age > auth_retry {
            let rank = self.replica_rank();
            if manual {
                // A manual failover starts its election at once.
                self.election = Election {
                    auth_time: now,
                    rank,
                    ..Default::default()
                };
                return self.handle_replica_failover(now);
            }
            let failed_rank = self.failed_master_rank(now);
            let mut auth_time = now
                + delay
                + self.rng.random_range(0..delay)
                + rank * 2 * delay
                + failed_rank * delay;
            if self.me().repl_offset == 0 {
                // A replica that never synced may not know its siblings yet.
                auth_time += 500;
            }
            if self.best_ranked_replica(now) {
                auth_time = now;
            }
            self.election = Election {
                auth_time,
                auth_count: 0,
                auth_sent: false,
                rank,
                failed_rank,
                auth_epoch: 0,
            };
            info!(
                rank,
                failed_rank,
                delay_ms = auth_time - now,
                "scheduling replica failover election"
            );
            if auth_time > now {
                return;
            }
        } else if !self.election.auth_sent && self.mf.end == 0 {
            // Offsets or FAIL flags heard since: re-rank, or go now if we became the best.
            let rank = self.replica_rank();
            if rank > self.election.rank {
                self.election.auth_time += (rank - self.election.rank) * 2 * delay;
                self.election.rank = rank;
            }
            let failed_rank = self.failed_master_rank(now);
            if failed_rank > self.election.failed_rank {
                self.election.auth_time += (failed_rank - self.election.failed_rank) * delay;
                self.election.failed_rank = failed_rank;
            }
            if self.election.auth_time > now && self.best_ranked_replica(now) {
                info!("best-ranked replica: starting the election now");
                self.election.auth_time = now;
            }
        }
        let auth_age = now.saturating_sub(self.election.auth_time);
        if now < self.election.auth_time || auth_age > auth_timeout {
            return;
        }
        if !self.election.auth_sent {
            // A peer may have announced u64::MAX: saturate rather than wrap.
            self.current_epoch = self.current_epoch.saturating_add(1);
            self.election.auth_epoch = self.current_epoch;
            self.election.auth_sent = true;
            info!(epoch = self.current_epoch, "starting failover election");
            if !manual {
                // A voter grants only if it sees the master as FAIL. A voter that has not
                // heard the FAIL yet gets it first on the same link, so an election started
                // right after FAIL is not refused for a race (and retried 4 x node timeout
                // later).
                self.broadcast(msg::TYPE_FAIL, Body::Fail { name: master_name });
            }
            let mut h = self.build_header(msg::TYPE_FAILOVER_AUTH_REQUEST);
            if manual {
                h.mflags[0] |= msg::MFLAG0_FORCEACK;
            }
            self.broadcast_header(h, Body::Empty);
            self.todo_save = true;
            self.todo_fsync = true;
            self.todo_update_state = true;
            return;
        }
        let quorum = self.size / 2 + 1;
        if self.election.auth_count >= quorum {
            info!(
                votes = self.election.auth_count,
                epoch = self.election.auth_epoch,
                "failover won"
            );
            if self.me().config_epoch < self.election.auth_epoch {
                let e = self.election.auth_epoch;
                self.me_mut().config_epoch = e;
            }
            self.replace_my_master(now);
        }
    }

    /// A FAILOVER_AUTH_ACK from a slot-owning master for the current election.
    pub(crate) fn count_vote(&mut self, sender: &Name, sender_current_epoch: u64, now: u64) {
        let Some(n) = self.nodes.get(sender) else {
            return;
        };
        if n.is_master() && n.numslots > 0 && sender_current_epoch >= self.election.auth_epoch {
            self.election.auth_count += 1;
            self.handle_replica_failover(now);
        }
    }

    /// Becomes master in place of our master and takes its slots (clusterFailoverReplaceYourMaster).
    pub(crate) fn replace_my_master(&mut self, now: u64) {
        self.mf = ManualFailover::default();
        // The election is over. Kept, its votes would let this node, once a replica again,
        // "win" its next manual failover within 4 node timeouts without asking, under the
        // old epoch, a claim the current master's higher epoch undoes at once (Redis 7.0
        // reuses them so).
        self.election = Election::default();
        let Some(old) = self.me().master else { return };
        let me = self.myself;
        self.stats.failovers += 1;
        self.set_node_as_master(&me);
        self.set_replication(None);
        for j in 0..SLOTS {
            if self.slots[j] == Some(old) {
                self.del_slot(j);
                self.add_slot(me, j);
            }
        }
        self.update_state(now);
        self.todo_save = true;
        self.todo_fsync = true;
        let links: Vec<LinkId> = self
            .nodes
            .values()
            .filter(|n| n.flags & (FLAG_MYSELF | FLAG_HANDSHAKE) == 0 && n.link_connected)
            .filter_map(|n| n.link)
            .collect();
        for l in links {
            self.send_ping(l, msg::TYPE_PONG, now);
        }
    }

    /// Sends a FAILOVER_AUTH_ACK on the requester's outbound link.
    pub(crate) fn send_vote(&mut self, link: LinkId) {
        let header = self.build_header(msg::TYPE_FAILOVER_AUTH_ACK);
        self.send(
            link,
            Message {
                header,
                body: Body::Empty,
            },
        );
    }
}

impl ClusterState {
    /// CLUSTER FAILOVER [FORCE|TAKEOVER] preconditions and start; Err is the error line.
    pub fn start_manual_failover(
        &mut self,
        force: bool,
        takeover: bool,
        now: u64,
    ) -> Result<(), &'static str> {
        let me = self.me();
        if me.is_master() {
            return Err("ERR You should send CLUSTER FAILOVER to a replica");
        }
        let Some(master) = me.master.and_then(|m| self.nodes.get(&m)) else {
            return Err("ERR I'm a replica but my master is unknown to me");
        };
        if !force && !takeover && (master.failed() || master.link.is_none()) {
            return Err("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE");
        }
        let master_link = master.link;
        self.mf = ManualFailover {
            end: now + MF_TIMEOUT_MS,
            ..Default::default()
        };
        // A manual failover runs an election of its own, at once, under a new epoch; never
        // the votes of an earlier one.
        self.election = Election::default();
        if takeover {
            crate::commands::bump_epoch(self);
            self.replace_my_master(now);
        } else if force {
            self.mf.can_start = true;
        } else if let Some(l) = master_link {
            let h = self.build_header(msg::TYPE_MFSTART);
            self.send(
                l,
                Message {
                    header: h,
                    body: Body::Empty,
                },
            );
        }
        Ok(())
    }

    /// Master side: our replica asked for a coordinated failover; pause writes and ping it.
    pub(crate) fn on_mfstart(&mut self, sender: &Name, link: LinkId, now: u64) {
        if self.nodes.get(sender).and_then(|n| n.master) != Some(self.myself) {
            return;
        }
        self.mf = ManualFailover {
            end: now + MF_TIMEOUT_MS,
            replica: Some(*sender),
            link: Some(link),
            ..Default::default()
        };
        self.out.push(Out::PauseWrites {
            until: now + MF_TIMEOUT_MS * 2,
        });
        self.send_ping(link, msg::TYPE_PING, now);
    }

    /// Master side: the host paused client writes (after [`Out::PauseWrites`]) and reports
    /// the replication offset they stopped at; from now on pings announce it as PAUSED.
    pub fn manual_failover_paused(&mut self, offset: Option<u64>) {
        if self.mf.end != 0 && self.me().is_master() {
            if let Some(o) = offset {
                self.me_mut().repl_offset = o;
            }
            self.mf.paused = true;
            // Announce at once (the cron repeats it every tick), as Redis pings right after
            // pausing.
            if let Some(l) = self.mf.link {
                self.send_ping(l, msg::TYPE_PING, crate::bus::now_ms());
            }
        }
    }

    /// Replica side, each tick: start once our offset matches the paused master's; expire.
    pub(crate) fn manual_failover_cron(&mut self, now: u64) {
        if self.mf.end == 0 {
            return;
        }
        if self.mf.end < now {
            info!("manual failover timed out");
            self.mf = ManualFailover::default();
            if self.me().is_master() {
                self.out.push(Out::PauseWrites { until: 0 });
            }
            return;
        }
        if self.me().is_replica()
            && !self.mf.can_start
            && self.mf.master_offset == Some(self.me().repl_offset)
        {
            info!("replica caught up with the paused master: manual failover can start");
            self.mf.can_start = true;
        }
    }
}

/// How long a master must stay orphaned before a replica migrates to it, so the natural
/// replicas of a failed-over master can announce their new master first
/// (CLUSTER_SLAVE_MIGRATION_DELAY).
pub const REPLICA_MIGRATION_DELAY_MS: u64 = 5000;

impl ClusterState {
    /// Working (not FAIL) replicas of a master (clusterCountNonFailingSlaves).
    fn ok_replicas(&self, master: &Name) -> usize {
        self.nodes
            .values()
            .filter(|n| n.is_replica() && n.master.as_ref() == Some(master) && !n.failed())
            .count()
    }

    /// Replica migration (clusterCron's orphan count + clusterHandleSlaveMigration): a
    /// master serving slots that used to have replicas and has no working one left gets a
    /// replica from the master with the most, once it stayed orphaned for
    /// [`REPLICA_MIGRATION_DELAY_MS`]. Of the replicas of the best-provided masters, the one
    /// with the smallest name moves, and only if its master keeps more than
    /// cluster-migration-barrier replicas. Called by the cron on replicas.
    pub(crate) fn handle_replica_migration(&mut self, now: u64) {
        let me = self.myself;
        let Some(my_master) = self.me().master else {
            return;
        };
        // clusterCron: orphaned masters, and the most working replicas any master has.
        let mut orphaned = 0;
        let mut max_replicas = 0;
        let mut mine = 0;
        for n in self.nodes.values() {
            if n.flags & (FLAG_MYSELF | FLAG_NOADDR | FLAG_HANDSHAKE) != 0
                || !n.is_master()
                || n.failed()
            {
                continue;
            }
            let ok = self.ok_replicas(&n.name);
            if ok == 0 && n.numslots > 0 && n.flags & FLAG_MIGRATE_TO != 0 {
                orphaned += 1;
            }
            max_replicas = max_replicas.max(ok);
            if n.name == my_master {
                mine = ok;
            }
        }
        if orphaned == 0
            || max_replicas < 2
            || mine != max_replicas
            || !self.config.allow_replica_migration
            || !self.state_ok
        {
            return;
        }
        // My master must keep more than the barrier of working, reachable replicas.
        let staying = self
            .nodes
            .values()
            .filter(|n| {
                n.is_replica() && n.master == Some(my_master) && !n.failed() && !n.timed_out()
            })
            .count() as u64;
        if staying <= self.config.migration_barrier {
            return;
        }
        let mut target: Option<Name> = None;
        let mut candidate = me;
        let names: Vec<Name> = self.nodes.keys().copied().collect();
        for name in names {
            let Some(n) = self.nodes.get(&name) else {
                continue;
            };
            let ok = if n.is_master() {
                self.ok_replicas(&name)
            } else {
                0
            };
            let is_orphaned =
                n.is_master() && !n.failed() && n.flags & FLAG_MIGRATE_TO != 0 && ok == 0;
            let numslots = n.numslots;
            if ok == max_replicas {
                for r in self.replicas_of(&name) {
                    if r < candidate {
                        candidate = r;
                    }
                }
            }
            if let Some(n) = self.nodes.get_mut(&name) {
                if is_orphaned {
                    if target.is_none() && numslots > 0 {
                        target = Some(name);
                    }
                    if n.orphaned_time == 0 {
                        n.orphaned_time = now;
                    }
                } else {
                    n.orphaned_time = 0;
                }
            }
        }
        let Some(t) = target else { return };
        let since = self.nodes.get(&t).map(|n| n.orphaned_time).unwrap_or(now);
        if candidate == me && now.saturating_sub(since) > REPLICA_MIGRATION_DELAY_MS {
            info!(master = name_str(&t), "migrating to orphaned master");
            self.set_my_master(t);
            crate::commands::broadcast_pong(self, now);
        }
    }
}

/// One of our replicas, as a shutdown failover chooses among them: its replication
/// connection is matched to its node by client address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaNode {
    pub name: Name,
    pub ip: String,
    pub port: u16,
}

impl ClusterState {
    /// The replicas a master shutting down may hand its slots to (valkey 9's
    /// `SHUTDOWN FAILOVER`); None unless we are a master serving slots.
    pub fn shutdown_failover_replicas(&self) -> Option<Vec<ReplicaNode>> {
        let me = self.me();
        if !me.is_master() || me.numslots == 0 {
            return None;
        }
        Some(
            self.nodes
                .values()
                .filter(|n| n.is_replica() && n.master == Some(self.myself) && !n.failed())
                .map(|n| ReplicaNode {
                    name: n.name,
                    ip: n.ip.clone(),
                    port: n.port,
                })
                .collect(),
        )
    }

    /// A shutdown failover is over: `replica` is a master now, or we are no longer one
    /// (it claimed our slots with a newer epoch).
    pub fn shutdown_failover_done(&self, replica: &Name) -> bool {
        !self.me().is_master() || self.nodes.get(replica).is_some_and(|n| n.is_master())
    }

    /// `CLUSTER FAILOVER [FORCE|TAKEOVER] [REPLICAID <id>]` as it arrives in our master's
    /// replication stream (args exclude the word CLUSTER): a valkey 9 master (or ours) that
    /// is shutting down names the in-sync replica that is to take over at once, instead of
    /// after cluster-node-timeout. Other replicas ignore it. Clients may not send REPLICAID
    /// (valkey answers them a syntax error too).
    pub fn failover_from_master(&mut self, args: &[&[u8]], now: u64) -> Result<(), &'static str> {
        let (mut force, mut takeover, mut replica) = (false, false, None);
        let mut it = args.iter().skip(1);
        while let Some(a) = it.next() {
            if a.eq_ignore_ascii_case(b"force") {
                force = true;
            } else if a.eq_ignore_ascii_case(b"takeover") {
                takeover = true;
            } else if a.eq_ignore_ascii_case(b"replicaid") {
                replica = Some(it.next().ok_or("ERR syntax error")?);
            } else {
                return Err("ERR syntax error");
            }
        }
        if force && takeover {
            return Err("ERR syntax error");
        }
        if let Some(id) = replica {
            if *id != self.myself.as_slice() {
                return Ok(());
            }
        }
        self.start_manual_failover(force, takeover, now)?;
        info!(force, takeover, "Forced failover primary request accepted");
        if self.mf.can_start {
            self.handle_replica_failover(now);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClusterConfig;
    use crate::state::{Node, FLAG_MASTER, FLAG_SLAVE};

    /// Myself a replica of a master owning slot 0, beside two other slot-owning masters,
    /// holding the state of an election it won under epoch 3 at `won_at`.
    fn replica_that_won_before(won_at: u64) -> (ClusterState, Name) {
        let mut st = ClusterState::new(ClusterConfig::default(), 0, 7);
        let mut masters = Vec::new();
        for i in 0..3u16 {
            let name = st.new_name();
            st.nodes.insert(name, Node::new(name, FLAG_MASTER, 0));
            st.add_slot(name, i as usize);
            masters.push(name);
        }
        let me = st.me_mut();
        me.flags = (me.flags & !FLAG_MASTER) | FLAG_SLAVE;
        me.master = Some(masters[0]);
        st.size = 3;
        st.current_epoch = 5;
        st.election = Election {
            auth_time: won_at,
            auth_count: 2,
            auth_sent: true,
            auth_epoch: 3,
            ..Default::default()
        };
        (st, masters[0])
    }

    #[test]
    fn a_manual_failover_holds_a_new_election() {
        let now = 100_000;
        // Within the 4 node timeouts a replica keeps an election's state.
        let (mut st, master) = replica_that_won_before(now - 1000);
        st.failover_from_master(&[b"FAILOVER", b"FORCE"], now)
            .expect("accepted");
        assert!(
            st.me().is_replica(),
            "promoted on an earlier election's votes"
        );
        assert_eq!(st.me().master, Some(master));
        assert!(st.election.auth_sent, "the election asks at once");
        assert_eq!(st.election.auth_count, 0);
        assert_eq!(st.election.auth_epoch, 6, "under a new epoch");
        assert_eq!(st.current_epoch, 6);
    }

    #[test]
    fn winning_ends_the_election() {
        let now = 100_000;
        let (mut st, _) = replica_that_won_before(now - 1000);
        st.replace_my_master(now);
        assert!(st.me().is_master());
        assert!(!st.election.auth_sent);
        assert_eq!(st.election.auth_count, 0);
    }
}
