//! Planner cases of issue 16's lost master (see `plan/takeover.rs`), from observed topologies
//! (CLUSTER NODES text as each pod would print it, INFO replication fields): a shard whose
//! master is gone while the other masters are no majority gets its best-synced replica
//! promoted with CLUSTER FAILOVER TAKEOVER, and only then.

mod support;

use support::observed::observed_at;
use tessera_topology::plan::{plan_full, Planned, SILENCE_TIMEOUTS};
use tessera_topology::snapshot::{PodState, ReplicationInfo, Snapshot};
use tessera_topology::{Desired, PodEndpoint, Step};

/// The node timeout every case runs with (as the e2e's `nodeTimeoutMs: 2000`).
const TIMEOUT_MS: u64 = 2000;
/// Seconds of silence after which a takeover is due.
const DUE: u64 = TIMEOUT_MS * SILENCE_TIMEOUTS / 1000;

/// A node of the cluster: id (40 hex chars, shard digit first), shard, ordinal.
#[derive(Clone, Copy)]
struct N {
    shard: u32,
    ordinal: u32,
}

impl N {
    fn id(self) -> String {
        format!("{}{}{}", self.shard, self.ordinal, "0".repeat(38))
    }
    fn host(self) -> String {
        format!("10.0.{}.{}", self.shard, self.ordinal + 1)
    }
    fn pod(self) -> String {
        format!("lost-{}-{}", self.shard, self.ordinal)
    }
}

/// The cluster: `shards` shards of `1 + replicas` nodes, ordinal 0 the master of shard s's
/// even share of the slots.
struct Cluster {
    shards: u32,
    replicas: u32,
}

impl Cluster {
    fn nodes(&self) -> Vec<N> {
        (0..self.shards)
            .flat_map(|shard| (0..=self.replicas).map(move |ordinal| N { shard, ordinal }))
            .collect()
    }

    fn slots(&self, shard: u32) -> String {
        let per = 16384 / self.shards;
        let end = if shard + 1 == self.shards {
            16383
        } else {
            (shard + 1) * per - 1
        };
        format!("{}-{end}", shard * per)
    }

    /// One CLUSTER NODES line for `n` as `me` sees it; `failing` nodes carry `flag`.
    fn line(&self, n: N, me: bool, flag: &str) -> String {
        let role = if n.ordinal == 0 { "master" } else { "slave" };
        let master = if n.ordinal == 0 {
            "-".to_string()
        } else {
            N {
                shard: n.shard,
                ordinal: 0,
            }
            .id()
        };
        let mut flags = if me {
            format!("myself,{role}")
        } else {
            role.to_string()
        };
        if !flag.is_empty() {
            flags.push(',');
            flags.push_str(flag);
        }
        let link = if flag.is_empty() {
            "connected"
        } else {
            "disconnected"
        };
        let slots = if n.ordinal == 0 {
            self.slots(n.shard)
        } else {
            String::new()
        };
        format!(
            "{} {}:6379@16379 {flags} {master} 0 1700000000000 {} {link} {slots}\n",
            n.id(),
            n.host(),
            n.shard + 1
        )
    }

    /// The CLUSTER NODES reply of `me`, which sees the nodes in `lost` with `flag`.
    fn text(&self, me: N, lost: &[N], flag: &str) -> String {
        let mut t = self.line(me, true, "");
        for n in self.nodes() {
            if n.id() != me.id() {
                let f = if lost.iter().any(|l| l.id() == n.id()) {
                    flag
                } else {
                    ""
                };
                t.push_str(&self.line(n, false, f));
            }
        }
        t
    }
}

/// INFO replication of a replica: its offset and how long it has heard nothing from its
/// master (link down for that long; `None`: never synced).
fn replica_info(offset: u64, silent: Option<u64>) -> ReplicationInfo {
    ReplicationInfo {
        role: "slave".into(),
        master_link_status: Some("down".into()),
        master_last_io_seconds_ago: Some(-1),
        slave_repl_offset: Some(offset),
        master_link_down_since_seconds: silent,
        ..ReplicationInfo::default()
    }
}

fn master_info(offset: u64) -> ReplicationInfo {
    ReplicationInfo {
        role: "master".into(),
        master_repl_offset: Some(offset),
        ..ReplicationInfo::default()
    }
}

fn endpoint(n: N) -> PodEndpoint {
    PodEndpoint {
        pod: n.pod(),
        shard: n.shard,
        ordinal: n.ordinal,
        host: n.host(),
        port: 6379,
    }
}

fn readable(text: &str, ep: PodEndpoint, repl: ReplicationInfo) -> PodState {
    PodState {
        cluster_state: "fail".into(),
        current_epoch: 3,
        dbsize: 10,
        replication: Some(repl),
        ..observed_at(ep, text)
    }
}

fn unreachable(ep: PodEndpoint) -> PodState {
    PodState {
        endpoint: ep,
        reachable: false,
        error: Some("connection timed out".into()),
        cluster_state: "unknown".into(),
        ..PodState::default()
    }
}

/// The snapshot with the masters in `lost` frozen (unreachable, seen with `flag` by all the
/// others); every replica of a lost master has heard nothing for `silent` seconds, at
/// offset 1000 (overridden per pod by `tweak`).
fn snapshot(
    c: &Cluster,
    lost: &[N],
    flag: &str,
    silent: u64,
    tweak: impl Fn(N, &mut PodState),
) -> Snapshot {
    let pods = c
        .nodes()
        .into_iter()
        .map(|n| {
            if lost.iter().any(|l| l.id() == n.id()) {
                let mut p = unreachable(endpoint(n));
                tweak(n, &mut p);
                return p;
            }
            let of_lost = lost.iter().any(|l| l.shard == n.shard);
            let repl = match (n.ordinal, of_lost) {
                (0, _) => master_info(1000),
                (_, true) => replica_info(1000, Some(silent)),
                (_, false) => ReplicationInfo {
                    master_link_status: Some("up".into()),
                    master_last_io_seconds_ago: Some(0),
                    master_link_down_since_seconds: None,
                    ..replica_info(1000, None)
                },
            };
            let mut p = readable(&c.text(n, lost, flag), endpoint(n), repl);
            tweak(n, &mut p);
            p
        })
        .collect();
    Snapshot {
        pods,
        node_timeout_ms: Some(TIMEOUT_MS),
    }
}

fn desired(c: &Cluster) -> Desired {
    Desired {
        shards: c.shards,
        replicas_per_shard: c.replicas,
        paused: false,
    }
}

/// (replica pod, lost master pod, lost master id) of every Takeover step.
fn takeovers(p: &Planned) -> Vec<(String, String, String)> {
    p.steps
        .iter()
        .filter_map(|s| match s {
            Step::Takeover { node, master, .. } => {
                Some((node.pod.clone(), master.pod.clone(), master.id.clone()))
            }
            _ => None,
        })
        .collect()
}

const M0: N = N {
    shard: 0,
    ordinal: 0,
};
const R0: N = N {
    shard: 0,
    ordinal: 1,
};

#[test]
fn two_shards_lost_master_is_taken_over_by_its_replica() {
    let c = Cluster {
        shards: 2,
        replicas: 1,
    };
    // A minority never gets to FAIL: the one live master only flags PFAIL.
    for flag in ["fail?", "fail"] {
        let snap = snapshot(&c, &[M0], flag, DUE + 1, |_, _| {});
        let planned = plan_full(&desired(&c), &snap);
        assert_eq!(
            takeovers(&planned),
            vec![(R0.pod(), M0.pod(), M0.id())],
            "{flag}: {:?} {:?}",
            planned.steps,
            planned.stuck
        );
        let step = planned
            .steps
            .iter()
            .find(|s| matches!(s, Step::Takeover { .. }))
            .expect("takeover");
        assert!(step.is_repair(), "a takeover gets an Event of its own");
        let line = step.describe();
        assert!(
            line.contains("CLUSTER FAILOVER TAKEOVER")
                && line.contains(&R0.pod())
                && line.contains(&M0.pod()),
            "{line}"
        );
    }
}

#[test]
fn redis_gets_its_chance_first() {
    let c = Cluster {
        shards: 2,
        replicas: 1,
    };
    let snap = snapshot(&c, &[M0], "fail?", DUE - 1, |_, _| {});
    let planned = plan_full(&desired(&c), &snap);
    assert!(takeovers(&planned).is_empty(), "{:?}", planned.steps);
    assert!(
        planned
            .stuck
            .iter()
            .any(|s| s.contains("TAKEOVER") && s.contains(&R0.pod())),
        "the wait is explained: {:?}",
        planned.stuck
    );
}

#[test]
fn three_shards_leave_it_to_redis_election() {
    let c = Cluster {
        shards: 3,
        replicas: 1,
    };
    let snap = snapshot(&c, &[M0], "fail", 600, |_, _| {});
    let planned = plan_full(&desired(&c), &snap);
    assert!(takeovers(&planned).is_empty(), "{:?}", planned.steps);
    assert!(
        planned.stuck.iter().any(|s| s.contains("election")),
        "{:?}",
        planned.stuck
    );
}

#[test]
fn four_shards_two_lost_both_taken_over() {
    let c = Cluster {
        shards: 4,
        replicas: 1,
    };
    let m1 = N {
        shard: 1,
        ordinal: 0,
    };
    let r1 = N {
        shard: 1,
        ordinal: 1,
    };
    let snap = snapshot(&c, &[M0, m1], "fail?", DUE, |_, _| {});
    let planned = plan_full(&desired(&c), &snap);
    let mut got = takeovers(&planned);
    got.sort();
    assert_eq!(
        got,
        vec![(R0.pod(), M0.pod(), M0.id()), (r1.pod(), m1.pod(), m1.id())],
        "{:?}",
        planned.stuck
    );
}

#[test]
fn a_master_the_operator_reads_is_not_taken_over() {
    let c = Cluster {
        shards: 2,
        replicas: 1,
    };
    // The nodes lost M0 (a partition between them), but the operator reads it: not lost.
    let mut snap = snapshot(&c, &[M0], "fail?", 600, |_, _| {});
    snap.pods[0] = readable(&c.text(M0, &[], ""), endpoint(M0), master_info(1000));
    let planned = plan_full(&desired(&c), &snap);
    assert!(takeovers(&planned).is_empty(), "{:?}", planned.steps);
}

#[test]
fn a_master_some_node_still_sees_healthy_is_not_taken_over() {
    let c = Cluster {
        shards: 2,
        replicas: 1,
    };
    let other = N {
        shard: 1,
        ordinal: 0,
    };
    let snap = snapshot(&c, &[M0], "fail?", 600, |n, p| {
        if n.id() == other.id() {
            *p = readable(&c.text(n, &[], ""), endpoint(n), master_info(1000));
        }
    });
    let planned = plan_full(&desired(&c), &snap);
    assert!(takeovers(&planned).is_empty(), "{:?}", planned.steps);
}

#[test]
fn the_replica_with_the_best_offset_takes_over() {
    let c = Cluster {
        shards: 2,
        replicas: 2,
    };
    let r2 = N {
        shard: 0,
        ordinal: 2,
    };
    let snap = snapshot(&c, &[M0], "fail?", 600, |n, p| {
        if n.id() == r2.id() {
            p.replication = Some(replica_info(5000, Some(600)));
        }
    });
    let planned = plan_full(&desired(&c), &snap);
    assert_eq!(
        takeovers(&planned),
        vec![(r2.pod(), M0.pod(), M0.id())],
        "{:?}",
        planned.stuck
    );
}

#[test]
fn a_replica_that_never_synced_does_not_take_over() {
    let c = Cluster {
        shards: 2,
        replicas: 1,
    };
    let snap = snapshot(&c, &[M0], "fail?", 600, |n, p| {
        if n.id() == R0.id() {
            // Redis prints master_link_down_since_seconds:-1 before the first sync.
            p.replication = Some(replica_info(1, None));
        }
    });
    let planned = plan_full(&desired(&c), &snap);
    assert!(takeovers(&planned).is_empty(), "{:?}", planned.steps);
    assert!(
        planned.stuck.iter().any(|s| s.contains("in sync")),
        "{:?}",
        planned.stuck
    );
}

/// The e2e's case: the lost master's pod was force-deleted and recreated as an empty node
/// (new id, knows nobody); its old node is no pod's any more.
#[test]
fn lost_master_whose_pod_came_back_empty_is_taken_over() {
    let c = Cluster {
        shards: 2,
        replicas: 1,
    };
    let fresh = "f".repeat(40);
    let snap = snapshot(&c, &[M0], "fail?", DUE + 5, |n, p| {
        if n.id() == M0.id() {
            let ep = PodEndpoint {
                host: "10.0.9.9".into(),
                ..endpoint(n)
            };
            let text = format!("{fresh} 10.0.9.9:6379@16379 myself,master - 0 0 0 connected\n");
            *p = readable(&text, ep, master_info(0));
            p.dbsize = 0;
        }
    });
    let planned = plan_full(&desired(&c), &snap);
    assert_eq!(
        takeovers(&planned),
        vec![(R0.pod(), format!("node {}", M0.id()), M0.id())],
        "{:?} {:?}",
        planned.steps,
        planned.stuck
    );
}

/// Once the replica has taken over, the old master (still unreachable, still failing) holds
/// no slot: nothing more to take over.
#[test]
fn nothing_to_take_over_once_the_replica_serves_the_slots() {
    let c = Cluster {
        shards: 2,
        replicas: 1,
    };
    let snap = snapshot(&c, &[M0], "fail?", 600, |_, p| {
        if p.myself.is_none() {
            return; // M0's own pod: unreachable
        }
        // Every view: R0 a master with shard 0's slots at a higher epoch, M0 slotless.
        let text: String = p
            .myself
            .iter()
            .chain(p.peers.iter())
            .map(|v| {
                let me = if v.myself { "myself," } else { "" };
                let fail = if v.id == M0.id() { ",fail?" } else { "" };
                let (role, master, slots, epoch) = if v.id == R0.id() {
                    ("master", "-".to_string(), c.slots(0), 9)
                } else if v.id == M0.id() {
                    ("slave", R0.id(), String::new(), 1)
                } else if v.master {
                    ("master", "-".to_string(), c.slots(1), 2)
                } else {
                    (
                        "slave",
                        v.replica_of.clone().unwrap_or_default(),
                        String::new(),
                        2,
                    )
                };
                format!(
                    "{} {}:6379@16379 {me}{role}{fail} {master} 0 1 {epoch} connected {slots}\n",
                    v.id, v.host
                )
            })
            .collect();
        let fresh = readable(&text, p.endpoint.clone(), master_info(1000));
        p.myself = fresh.myself;
        p.peers = fresh.peers;
    });
    let planned = plan_full(&desired(&c), &snap);
    assert!(takeovers(&planned).is_empty(), "{:?}", planned.steps);
}

/// A frozen master keeps its replication socket open: the replica's link stays `up` until
/// repl-timeout while `master_last_io_seconds_ago` grows; that silence counts the same.
#[test]
fn a_link_still_up_counts_its_silence() {
    let c = Cluster {
        shards: 2,
        replicas: 1,
    };
    for (silent, due) in [(DUE - 1, false), (DUE, true)] {
        let snap = snapshot(&c, &[M0], "fail?", 0, |n, p| {
            if n.id() == R0.id() {
                p.replication = Some(ReplicationInfo {
                    master_link_status: Some("up".into()),
                    master_last_io_seconds_ago: Some(silent as i64),
                    master_link_down_since_seconds: None,
                    ..replica_info(1000, None)
                });
            }
        });
        let planned = plan_full(&desired(&c), &snap);
        assert_eq!(
            !takeovers(&planned).is_empty(),
            due,
            "silent {silent}s: {:?}",
            planned.stuck
        );
    }
}
