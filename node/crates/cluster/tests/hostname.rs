//! Hostname ping extensions both ways with redis-server 7.0 (cluster-announce-hostname), and
//! MOVED/CLUSTER SLOTS using hostnames when preferred.

mod common;

use std::time::Duration;

use common::*;
use tessera_cluster::EndpointType;

#[test]
fn hostnames_travel_in_ping_extensions_both_ways() {
    let ours = TestNode::start_custom(2000, |c| {
        c.announce_hostname = Some("tessera-a.example".into());
        c.preferred_endpoint_type = EndpointType::Hostname;
    });
    let r = ServerProc::start_args(
        redis_bin(),
        2000,
        &["--cluster-announce-hostname", "redis-b.example"],
    );
    assert_eq!(
        ours.cluster_str(&["MEET", "127.0.0.1", &r.port.to_string()]),
        "OK"
    );
    let (me, them) = (ours.myid(), r.myid());
    wait_for(
        Duration::from_secs(30),
        "hostnames seen on both sides",
        || {
            let theirs = r.nodes();
            let mine = ours.nodes();
            theirs.lines().any(|l| {
                l.starts_with(&me)
                    && l.contains(&format!("@{},tessera-a.example ", ours.port + 10000))
            }) && mine
                .lines()
                .any(|l| l.starts_with(&them) && l.contains(",redis-b.example "))
        },
    );
    // Our own line carries our hostname too, like Redis.
    assert!(ours
        .nodes()
        .lines()
        .any(|l| l.starts_with(&me) && l.contains(",tessera-a.example myself,master")));
    // Redis reports our hostname in CLUSTER SHARDS.
    r.cmd(&["CLUSTER", "ADDSLOTS", "5"]).expect("addslots");
    wait_for(Duration::from_secs(30), "slot 5 learned", || {
        slot_view(&ours.nodes())
            .get(&them)
            .is_some_and(|s| s == &vec!["5".to_string()])
    });
    let mut raw = Vec::new();
    ours.cluster(&["SLOTS"]).to_resp2(&mut raw);
    let slots = String::from_utf8_lossy(&raw).into_owned();
    assert!(
        slots.contains("redis-b.example"),
        "hostname endpoint in CLUSTER SLOTS: {slots}"
    );
    // A hostname that disappears from the peer's pings is dropped (Redis 7.0 semantics).
    r.cmd(&["CONFIG", "SET", "cluster-announce-hostname", ""])
        .expect("config set");
    wait_for(
        Duration::from_secs(30),
        "hostname removed after redis stops announcing it",
        || {
            ours.nodes()
                .lines()
                .any(|l| l.starts_with(&them) && !l.contains(",redis-b.example"))
        },
    );
}
