//! The pub/sub, keyspace-notification and WATCH tests' helpers: servers with their own log
//! file, transcripts compared step by step, and key names for given slots.

use std::time::Duration;

pub use crate::resp::{encode, Raw, R};
use crate::server::{Launch, Server};
pub use crate::wait::wait_for;

/// One server process in its own temp dir (log in `dir/log`); derefs to the shared guard.
pub struct Proc {
    pub srv: Server,
}

crate::deref_server!(Proc);

impl Proc {
    /// Starts `bin` with extra `--directive value` arguments.
    pub fn start(bin: &'static str, extra: &[&str]) -> Proc {
        let srv = Launch::new(bin)
            .args(&["--save", "", "--appendonly", "no"])
            .args(extra)
            .logfile()
            .start();
        Proc { srv }
    }

    pub fn cluster(bin: &'static str) -> Proc {
        Proc::start(
            bin,
            &["--cluster-enabled", "yes", "--cluster-node-timeout", "3000"],
        )
    }

    pub fn myid(&self) -> String {
        self.cli(&["CLUSTER", "MYID"]).trim().to_string()
    }

    pub fn cluster_info(&self, field: &str) -> String {
        crate::info_field(&self.cli(&["CLUSTER", "INFO"]), field).unwrap_or_default()
    }
}

/// The same transcript from tessera-node (`ours`) and redis-server (`theirs`), step by step.
pub fn assert_same_transcript(ours: &[String], theirs: &[String]) {
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert_eq!(a, b, "step {i}: tessera vs redis-server");
    }
    assert_eq!(ours.len(), theirs.len());
}

/// Connects the nodes (MEET from the first) and waits until all see each other.
pub fn meet_all(nodes: &[&Proc]) {
    for n in &nodes[1..] {
        let r = nodes[0].cli(&["CLUSTER", "MEET", "127.0.0.1", &n.port.to_string()]);
        assert_eq!(r.trim(), "OK", "MEET: {r}");
    }
    let want = nodes.len();
    wait_for(
        Duration::from_secs(30),
        "every node knows every node",
        || {
            nodes.iter().all(|n| {
                let out = n.cli(&["CLUSTER", "NODES"]);
                out.lines().filter(|l| !l.contains("handshake")).count() == want
            })
        },
    );
}

/// A key name (no hash tag) whose slot is `slot`: brute force over "c<n>".
pub fn name_in_slot(prefix: &str, slot: u16) -> String {
    (0u64..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| tessera_cluster::key_hash_slot(k.as_bytes()) == slot)
        .expect("some name hashes to every slot")
}

/// A name whose slot lies in `lo..=hi`.
pub fn name_in_range(prefix: &str, lo: u16, hi: u16) -> String {
    (0u64..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| (lo..=hi).contains(&tessera_cluster::key_hash_slot(k.as_bytes())))
        .expect("some name hashes into the range")
}

pub fn slot_of(k: &str) -> u16 {
    tessera_cluster::key_hash_slot(k.as_bytes())
}
