//! A node restarted with its nodes.conf keeps name, epochs and slots, and rejoins from a new
//! IP address (127.0.0.2 instead of 127.0.0.1), as a pod does after rescheduling.

mod common;

use std::time::Duration;

use common::*;

const NT: u64 = 2000;

#[test]
fn restart_with_nodes_conf_on_a_new_address() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut ours = TestNode::start_in(tmp.path(), port, "127.0.0.1", NT);
    let r1 = ServerProc::start(redis_bin(), NT);
    let r2 = ServerProc::start(redis_bin(), NT);
    assert_eq!(
        ours.cluster_str(&["MEET", "127.0.0.1", &r1.port.to_string()]),
        "OK"
    );
    assert_eq!(
        ours.cluster_str(&["MEET", "127.0.0.1", &r2.port.to_string()]),
        "OK"
    );
    let ids = vec![ours.myid(), r1.myid(), r2.myid()];
    wait_for(Duration::from_secs(30), "cluster to form", || {
        sees_all_connected(&ours.nodes(), &ids)
            && [&r1, &r2]
                .iter()
                .all(|s| sees_all_connected(&s.nodes(), &ids))
    });
    assert_eq!(ours.cluster_str(&["ADDSLOTSRANGE", "0", "5000"]), "OK");
    r1.cmd(&["CLUSTER", "ADDSLOTSRANGE", "5001", "10000"])
        .expect("addslots");
    r2.cmd(&["CLUSTER", "ADDSLOTSRANGE", "10001", "16383"])
        .expect("addslots");
    wait_for(Duration::from_secs(30), "slots agreed", || {
        let v = slot_view(&ours.nodes());
        v.values().filter(|s| !s.is_empty()).count() == 3
            && slot_view(&r1.nodes()) == v
            && slot_view(&r2.nodes()) == v
    });
    let before = parse_nodes(&ours.nodes())[&ids[0]].clone();
    let epoch_line = ours.cluster_str(&["INFO"]);
    let current_epoch = epoch_line
        .lines()
        .find(|l| l.starts_with("cluster_current_epoch"))
        .map(String::from);

    ours.stop();
    wait_for(
        Duration::from_secs(60),
        "redis to mark our node failed",
        || flags_of(&r1.nodes(), &ids[0]).iter().any(|f| f == "fail"),
    );

    // Same directory (same nodes.conf), same port, new IP.
    let ours = TestNode::start_in(tmp.path(), port, "127.0.0.2", NT);
    assert_eq!(ours.myid(), ids[0], "name kept");
    let after = parse_nodes(&ours.nodes())[&ids[0]].clone();
    assert_eq!(after.slots, before.slots, "slots kept");
    assert_eq!(after.epoch, before.epoch, "config epoch kept");
    let info = ours.cluster_str(&["INFO"]);
    assert!(
        current_epoch.is_some_and(|c| info.contains(&c)),
        "current epoch kept"
    );

    let new_addr = format!("127.0.0.2:{port}@{}", port + 10000);
    wait_for(
        Duration::from_secs(60),
        "redis nodes to see us at the new address, healthy",
        || {
            [&r1, &r2].iter().all(|s| {
                let v = parse_nodes(&s.nodes());
                v.get(&ids[0]).is_some_and(|n| {
                    n.addr == new_addr
                        && n.link == "connected"
                        && !n.flags.iter().any(|f| f.starts_with("fail"))
                })
            }) && sees_all_connected(&ours.nodes(), &ids)
        },
    );
    wait_for(
        Duration::from_secs(30),
        "cluster_state ok everywhere",
        || {
            ours.cluster_str(&["INFO"]).contains("cluster_state:ok")
                && [&r1, &r2]
                    .iter()
                    .all(|s| cmd_string(s.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok"))
        },
    );
}
