//! A client blocked on a key in cluster mode, against redis-server 7.0 (issue 18, Redis's
//! unit/cluster "Verify command got unblocked after resharding" / "... after cluster
//! failure"): when the key's slot moves to another node the wait ends with -MOVED to the
//! new owner, and when the cluster goes down with -CLUSTERDOWN, as Redis's
//! clusterRedirectBlockedClientIfNeeded does; neither leaves a client blocked.

use std::io::BufRead;
use std::time::{Duration, Instant};

use tessera_testkit::cluster::*;
use tessera_testkit::*;

/// In slot 10923, the first slot of the third node of `redis-cli --cluster create`.
const KEY: &str = "key9184688";
const SLOT: &str = "10923";

fn blocked(n: &Proc) -> String {
    info_field(&n.cli(&["INFO", "clients"]), "blocked_clients").unwrap_or_default()
}

/// Waits (bounded) until `n` reports `want` blocked clients; returns what it saw last.
fn wait_blocked(n: &Proc, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = blocked(n);
    while seen != want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        seen = blocked(n);
    }
    seen
}

/// The blocked client's reply, or what happened instead within 20 s.
fn reply_of(c: &mut Conn) -> String {
    if let Err(e) = c.w.set_read_timeout(Some(Duration::from_secs(20))) {
        return format!("no timeout: {e}");
    }
    match c.r.fill_buf() {
        Ok([]) => "closed".into(),
        Ok(_) => format!("{:?}", c.read()),
        Err(e) => format!("no reply ({e})"),
    }
}

/// One server kind's transcript, ports replaced by the node's name.
fn scenario(bin: &'static str) -> Vec<String> {
    let nodes = cluster_nodes(bin, 3, 1000);
    let refs: Vec<&Proc> = nodes.iter().collect();
    let (ok, out) = cluster_create(&refs, 0);
    assert!(ok, "cluster create: {out}");
    wait_state_ok(&refs);
    let (n1, n3) = (&nodes[0], &nodes[2]);
    let named = |s: String| {
        s.replace(&format!(":{}", n1.port), ":<node1>")
            .replace(&format!(":{}", n3.port), ":<node3>")
    };
    let mut t = Vec::new();

    // Blocked on node 3, then its slot moves to node 1.
    let mut rd = Conn::connect(n3.port);
    rd.send(&["BRPOP", KEY, "0"]);
    t.push(format!("node3 blocked: {}", wait_blocked(n3, "1")));
    let (id1, id3) = (n1.myid(), n3.myid());
    for (n, args) in [
        (n1, ["CLUSTER", "SETSLOT", SLOT, "IMPORTING", id3.as_str()]),
        (n3, ["CLUSTER", "SETSLOT", SLOT, "MIGRATING", id1.as_str()]),
        (n1, ["CLUSTER", "SETSLOT", SLOT, "NODE", id1.as_str()]),
        (n3, ["CLUSTER", "SETSLOT", SLOT, "NODE", id1.as_str()]),
    ] {
        t.push(format!("SETSLOT {}: {}", args[3], n.cli(&args).trim()));
    }
    t.push(named(format!("moved away: {}", reply_of(&mut rd))));
    t.push(format!("node3 blocked after: {}", wait_blocked(n3, "0")));

    // Blocked on node 1 (now the owner), then the cluster fails (node 3 stopped).
    wait_state_ok(&refs);
    let mut rd1 = Conn::connect(n1.port);
    rd1.send(&["BRPOP", KEY, "0"]);
    t.push(format!("node1 blocked: {}", wait_blocked(n1, "1")));
    n3.signal("STOP");
    wait_for(
        Duration::from_secs(30),
        "node 1 sees the cluster down",
        || n1.cluster_info("cluster_state") == "fail",
    );
    t.push(format!("cluster down: {}", reply_of(&mut rd1)));
    t.push(format!("node1 blocked after: {}", wait_blocked(n1, "0")));
    n3.signal("CONT");
    t
}

#[test]
fn blocked_clients_follow_their_slot_like_redis() {
    let want = scenario(redis_bin());
    let got = scenario(tessera_bin());
    assert_eq!(want, got, "redis, then tessera");
}
