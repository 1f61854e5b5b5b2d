//! Keeping a replica's replication pointed at its master (issue 16).
//!
//! Redis re-points replication when its master's address changes on the bus
//! (nodeUpdateAddressIfNeeded -> replicationSetMaster) and, from clusterCron, when a replica
//! has no replication target while its master's address is known (so a node loaded from
//! nodes.conf as a replica starts replicating at once, even to a stale address, and keeps
//! retrying). We do the same, and the cron check also repairs drift: an address learned by
//! any path (PING, handshake, gossip about a failing node) or a host that did not take a
//! re-point ends with replication at the master's current address.

use tracing::info;

use crate::msg::Name;
use crate::state::*;

/// How long the cron waits before asking the host again for the same re-point.
const REPAIR_RETRY_MS: u64 = 1000;

impl ClusterState {
    /// Tells the host whom to replicate (`None`: we are a master) and remembers it.
    pub(crate) fn set_replication(&mut self, target: Option<(String, u16)>) {
        self.repl_target.clone_from(&target);
        self.out.push(Out::SetMaster { ip: target });
    }

    /// The address this node must replicate: its master's, when it is a replica and the
    /// master's address is known (nodeHasAddr). The client port, not the TLS port:
    /// tessera-node refuses TLS, so `tls-replication` is never on.
    pub fn replication_address(&self) -> Option<(String, u16)> {
        let me = self.me();
        if !me.is_replica() {
            return None;
        }
        let m = self.nodes.get(&me.master?)?;
        if m.flags & FLAG_NOADDR != 0 || m.ip.is_empty() || m.port == 0 {
            return None;
        }
        Some((m.ip.clone(), m.port))
    }

    /// Records where the host's replication points now (polled outside the state lock, just
    /// before the cron runs): the cron compares it with [`Self::replication_address`].
    pub fn note_replication_target(&mut self, target: Option<(String, u16)>) {
        self.repl_target = target;
    }

    /// A node whose master's address changed re-points its replication at once.
    pub(crate) fn repoint_if_my_master(&mut self, name: &Name) {
        if self.me().is_replica() && self.me().master.as_ref() == Some(name) {
            if let Some(addr) = self.replication_address() {
                self.set_replication(Some(addr));
            }
        }
    }

    /// clusterCron's replication check: a replica whose replication is not pointed at its
    /// master's current address is re-pointed (at most once per [`REPAIR_RETRY_MS`] while
    /// the host keeps reporting another target).
    pub(crate) fn repair_replication(&mut self, now: u64) {
        let Some(want) = self.replication_address() else {
            return;
        };
        if self.repl_target.as_ref() == Some(&want) || now < self.repl_repair_after {
            return;
        }
        info!(
            master_ip = %want.0,
            master_port = want.1,
            was = ?self.repl_target,
            "replication does not follow my master's address: re-pointing it"
        );
        self.repl_repair_after = now.saturating_add(REPAIR_RETRY_MS);
        self.set_replication(Some(want));
    }
}
