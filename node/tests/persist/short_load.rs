//! A replica loading a small RDB from its master: Redis 7.0 loads it inside its event loop
//! and only answers clients (with -LOADING) every loading-process-events-interval-bytes of
//! RDB, so a load shorter than that is never seen as LOADING: clients just wait. Redis's
//! cluster harness relies on it (CLUSTER NODES right after CLUSTER REPLICATE).

use std::time::{Duration, Instant};

use tessera_testkit::*;

/// Makes `replica` replicate `master` (holding about 300 KB of keys) while a second client
/// keeps sending GET; returns how many of those replies were -LOADING.
fn loading_replies_during_sync(master: &Server, replica: &Server) -> usize {
    let mut m = Conn::connect(master.port);
    assert_eq!(
        m.cmd(&["DEBUG", "POPULATE", "20000", "key", "10"]),
        Reply::Simple("OK".into())
    );
    let mut r = Conn::connect(replica.port);
    let mut probe = Conn::connect(replica.port);
    let port = master.port.to_string();
    // The full sync runs once per round (REPLICAOF NO ONE in between drops the link).
    let mut loading = 0;
    for _ in 0..3 {
        assert_eq!(
            r.cmd(&["REPLICAOF", "127.0.0.1", &port]),
            Reply::Simple("OK".into())
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match probe.cmd(&["GET", "key:1"]) {
                Reply::Error(e) if e.starts_with("LOADING") => loading += 1,
                Reply::Error(e) => panic!("unexpected error {e}"),
                _ => {}
            }
            let info = match r.cmd(&["INFO", "replication"]) {
                Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
                other => panic!("INFO: {other:?}"),
            };
            if info_field(&info, "master_link_status").as_deref() == Some("up")
                && r.cmd(&["DBSIZE"]) == Reply::Int(20000)
            {
                break;
            }
            assert!(Instant::now() < deadline, "replica never synced: {info}");
        }
        assert_eq!(
            r.cmd(&["REPLICAOF", "NO", "ONE"]),
            Reply::Simple("OK".into())
        );
        // Promoted, the replica took a new replication id: the next round syncs in full.
        assert_eq!(r.cmd(&["FLUSHALL"]), Reply::Simple("OK".into()));
    }
    loading
}

#[test]
fn short_replica_load_is_not_seen_as_loading_like_redis() {
    let args = [
        "--save",
        "",
        "--appendonly",
        "no",
        "--enable-debug-command",
        "yes",
        "--repl-diskless-load",
        "disabled",
    ];
    let (rm, rr) = (Server::redis(&args), Server::redis(&args));
    assert_eq!(loading_replies_during_sync(&rm, &rr), 0, "redis-server");
    let (tm, tr) = (Server::tessera(&args), Server::tessera(&args));
    assert_eq!(loading_replies_during_sync(&tm, &tr), 0, "tessera-node");
}
