//! nodes.conf saving: every config-changing CLUSTER command returns only once its change is
//! in the file; concurrent changes share writes; only epoch/vote changes are fsynced
//! (CLUSTER_TODO_FSYNC_CONFIG in Redis 7.0).

mod common;

use std::sync::Arc;

use common::*;
use tessera_cluster::nodes_conf;

fn conf_text(t: &TestNode) -> String {
    std::fs::read_to_string(t.dir.join("nodes.conf")).expect("nodes.conf exists")
}

/// The slot ranges of myself in a nodes.conf text.
fn my_slots(text: &str) -> String {
    text.lines()
        .find(|l| l.contains("myself"))
        .map(|l| l.split(' ').skip(8).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[test]
fn every_reply_follows_its_save() {
    let t = TestNode::start(5000);
    let before = t.node().save_stats();
    for s in 0..200 {
        assert_eq!(t.cluster_str(&["ADDSLOTS", &s.to_string()]), "OK");
        // The reply came back, so the file already holds the slot.
        let want = if s == 0 {
            "0".to_string()
        } else {
            format!("0-{s}")
        };
        assert_eq!(my_slots(&conf_text(&t)), want, "after ADDSLOTS {s}");
    }
    let after = t.node().save_stats();
    // The cron may save some of them first (its save then covers the command's change).
    assert!(after.writes > before.writes, "{before:?} {after:?}");
    // Plain slot changes are written, not fsynced (as Redis saves them in beforeSleep).
    assert_eq!(after.fsyncs, before.fsyncs, "{before:?} {after:?}");
    // An epoch bump is fsynced before the reply.
    let r = t.cluster_str(&["BUMPEPOCH"]);
    assert!(r.starts_with("BUMPED"), "{r}");
    let epoch: u64 = r
        .split(' ')
        .nth(1)
        .and_then(|e| e.parse().ok())
        .unwrap_or(0);
    assert!(conf_text(&t).contains(&format!("vars currentEpoch {epoch} ")));
    assert_eq!(t.node().save_stats().fsyncs, after.fsyncs + 1);
    // The file parses back to the same slots.
    let st = nodes_conf::parse(
        &conf_text(&t),
        "nodes.conf",
        tessera_cluster::ClusterConfig::default(),
        0,
        1,
    )
    .expect("parses");
    assert_eq!(st.me().numslots, 200);
}

#[test]
fn concurrent_changes_share_saves_and_all_land() {
    let t = Arc::new(TestNode::start(5000));
    let me = t.myid();
    assert_eq!(t.cluster_str(&["ADDSLOTSRANGE", "0", "16383"]), "OK");
    let before = t.node().save_stats();
    const THREADS: usize = 8;
    const EACH: usize = 150;
    std::thread::scope(|sc| {
        for th in 0..THREADS {
            let t = t.clone();
            let me = me.clone();
            sc.spawn(move || {
                for i in 0..EACH {
                    let slot = (th * EACH + i).to_string();
                    // Migrating to myself is refused; STABLE and NODE self change state.
                    assert_eq!(t.cluster_str(&["SETSLOT", &slot, "NODE", &me]), "OK");
                    assert_eq!(t.cluster_str(&["SETSLOT", &slot, "STABLE"]), "OK");
                }
            });
        }
    });
    let after = t.node().save_stats();
    let changes = (THREADS * EACH * 2) as u64;
    assert!(
        after.writes - before.writes <= changes,
        "{before:?} {after:?}"
    );
    assert_eq!(after.fsyncs, before.fsyncs);
    assert_eq!(my_slots(&conf_text(&t)), "0-16383");
    eprintln!(
        "{changes} config changes: {} writes, {} fsyncs",
        after.writes - before.writes,
        after.fsyncs - before.fsyncs
    );
}

/// A SETSLOT NODE that changes nothing (a resharding's bystander, already told by the
/// importing node's PONG) writes nothing.
#[test]
fn unchanged_setslot_node_writes_nothing() {
    let t = TestNode::start(5000);
    let me = t.myid();
    assert_eq!(t.cluster_str(&["ADDSLOTSRANGE", "0", "16383"]), "OK");
    let before = t.node().save_stats();
    for s in 0..1000 {
        assert_eq!(
            t.cluster_str(&["SETSLOT", &s.to_string(), "NODE", &me]),
            "OK"
        );
    }
    let after = t.node().save_stats();
    // Only the cron's own saves (at most one per 100 ms tick) may land meanwhile.
    assert!(after.writes - before.writes < 100, "{before:?} {after:?}");
    assert_eq!(my_slots(&conf_text(&t)), "0-16383");
}
