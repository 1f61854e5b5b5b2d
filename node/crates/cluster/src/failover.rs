//! Automatic replica failover (clusterHandleSlaveFailover): a replica of a FAIL master asks
//! the slot-owning masters for votes and, with a majority, takes its master's slots.

use rand::Rng;
use tracing::{info, instrument};

use crate::msg::{self, Body, Message, Name, SLOTS};
use crate::state::*;

/// Election bookkeeping of a replica.
#[derive(Clone, Debug, Default)]
pub struct Election {
    /// When the election may start (or started), ms.
    pub auth_time: u64,
    pub auth_count: usize,
    pub auth_sent: bool,
    pub rank: u64,
    pub auth_epoch: u64,
}

impl ClusterState {
    /// Sibling replicas with a larger replication offset (clusterGetSlaveRank).
    fn replica_rank(&self) -> u64 {
        let me = self.me();
        let Some(master) = me.master else { return 0 };
        self.nodes
            .values()
            .filter(|n| n.name != self.myself && n.master == Some(master))
            .filter(|n| n.flags & FLAG_NOFAILOVER == 0 && n.repl_offset > me.repl_offset)
            .count() as u64
    }

    /// Called from the cron (and when a vote arrives) while we are a replica.
    #[instrument(skip(self), level = "debug")]
    pub fn handle_replica_failover(&mut self, now: u64) {
        let nt = self.config.node_timeout_ms;
        let auth_timeout = (nt * 2).max(2000);
        let auth_retry = auth_timeout * 2;
        let me = self.me();
        let Some(master) = me.master.and_then(|m| self.nodes.get(&m)) else {
            return;
        };
        if me.is_master()
            || !master.failed()
            || self.config.replica_no_failover
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
        if factor != 0 && data_age > self.config.repl_ping_replica_period_s * 1000 + nt * factor {
            return;
        }
        let auth_age = now.saturating_sub(self.election.auth_time);
        if auth_age > auth_retry {
            let jitter = self.rng.random_range(0..500);
            let rank = self.replica_rank();
            self.election = Election {
                auth_time: now + 500 + jitter + rank * 1000,
                auth_count: 0,
                auth_sent: false,
                rank,
                auth_epoch: 0,
            };
            info!(
                rank,
                delay_ms = self.election.auth_time - now,
                "scheduling replica failover election"
            );
            return;
        }
        if !self.election.auth_sent {
            let rank = self.replica_rank();
            if rank > self.election.rank {
                self.election.auth_time += (rank - self.election.rank) * 1000;
                self.election.rank = rank;
            }
        }
        if now < self.election.auth_time || auth_age > auth_timeout {
            return;
        }
        if !self.election.auth_sent {
            self.current_epoch += 1;
            self.election.auth_epoch = self.current_epoch;
            self.election.auth_sent = true;
            info!(epoch = self.current_epoch, "starting failover election");
            self.broadcast(msg::TYPE_FAILOVER_AUTH_REQUEST, Body::Empty);
            self.todo_save = true;
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
    fn replace_my_master(&mut self, now: u64) {
        let Some(old) = self.me().master else { return };
        let me = self.myself;
        self.set_node_as_master(&me);
        self.out.push(Out::SetMaster { ip: None });
        for j in 0..SLOTS {
            if self.slots[j] == Some(old) {
                self.del_slot(j);
                self.add_slot(me, j);
            }
        }
        self.update_state(now);
        self.todo_save = true;
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
