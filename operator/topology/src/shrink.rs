//! When a shard's StatefulSet may shrink (pure).
//!
//! Lowering `replicasPerShard` removes the pods with the highest ordinals. The controller
//! keeps the StatefulSet at its size until the topology report shows that none of those
//! pods is a master: the engine first fails the shard over to a pod that stays (see
//! `plan/handover.rs`), and a removed replica costs nothing.

use super::TopologyReport;

/// What the controller knows of the topology when it decides.
#[derive(Debug, Clone, Copy)]
pub enum Known<'a> {
    /// The engine ran this pass.
    Report(&'a TopologyReport),
    /// The engine did not run (no cluster formed yet, no pod has an IP): nothing to protect.
    NotRun,
    /// The engine failed: roles are unknown.
    Failed,
}

/// `None` when shard `shard`'s StatefulSet may shrink to `keep` pods now, else why not.
/// Pods are named `<statefulset>-<ordinal>`; those with ordinal `>= keep` go.
pub fn shrink_blocked(known: Known<'_>, shard: u32, keep: u32) -> Option<String> {
    let report = match known {
        Known::NotRun => return None,
        Known::Failed => {
            return Some(format!(
                "shard {shard}: not shrinking while the cluster's roles are unknown"
            ))
        }
        Known::Report(r) => r,
    };
    report
        .shards
        .iter()
        .filter_map(|v| v.master_pod.as_deref().map(|p| (v.shard, p)))
        .find(|(s, pod)| *s == shard && ordinal(pod).is_some_and(|o| o >= keep))
        .map(|(_, pod)| {
            format!("shard {shard}: {pod} is its master; waiting for the failover away from it")
        })
}

fn ordinal(pod: &str) -> Option<u32> {
    pod.rsplit_once('-')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ShardView;

    fn report(masters: &[&str]) -> TopologyReport {
        TopologyReport {
            shards: masters
                .iter()
                .enumerate()
                .map(|(s, m)| ShardView {
                    shard: s as u32,
                    master_pod: Some(m.to_string()),
                    ..ShardView::default()
                })
                .collect(),
            ..TopologyReport::default()
        }
    }

    #[test]
    fn a_removed_master_blocks_only_its_shard() {
        let r = report(&["rc-0-2", "rc-1-0"]);
        assert!(shrink_blocked(Known::Report(&r), 0, 2).is_some());
        assert!(shrink_blocked(Known::Report(&r), 0, 3).is_none());
        assert!(shrink_blocked(Known::Report(&r), 1, 1).is_none());
        // Down to the master alone: only ordinal 0 stays.
        assert!(shrink_blocked(Known::Report(&r), 0, 1).is_some());
    }

    #[test]
    fn unknown_roles_block_and_an_unformed_cluster_does_not() {
        assert!(shrink_blocked(Known::Failed, 0, 1).is_some());
        assert!(shrink_blocked(Known::NotRun, 0, 1).is_none());
        let r = report(&[]);
        assert!(shrink_blocked(Known::Report(&r), 0, 1).is_none());
    }
}
