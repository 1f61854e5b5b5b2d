//! The topology engine (`tessera-operator converge`) drives tessera nodes with real keys in
//! them: 3 shards × (master + 1 replica), grow to 4 shards, shrink to 2 (slot migration
//! through MIGRATE both ways), with a checker that no key is lost and `redis-cli --cluster
//! check` agreeing after every step.

use std::process::Command;
use std::time::{Duration, Instant};

use redis::Commands;
use tessera_testkit::cluster::*;
use tessera_testkit::*;

/// Runs one `converge` to `shards` × (1 + `replicas`) over `nodes`; returns its duration and
/// what it printed (its actions, for a failure message).
fn converge(operator: &str, shards: u32, replicas: u32, nodes: &[Proc]) -> (Duration, String) {
    let start = Instant::now();
    let out = tessera_testkit::output_within(
        Command::new(operator)
            .args(["converge", "--shards", &shards.to_string()])
            .args(["--replicas", &replicas.to_string(), "--timeout", "180"])
            .args(nodes.iter().map(|n| n.addr())),
        // Above converge's own --timeout, so the operator reports its failure itself.
        std::time::Duration::from_secs(240),
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && text.contains("converged"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (start.elapsed(), text)
}

/// Every node's role, key count and view of the cluster, for a failure message.
fn describe(nodes: &[Proc]) -> String {
    nodes
        .iter()
        .map(|n| {
            format!(
                "{} {} dbsize={}\n{}",
                n.addr(),
                n.cli(&["ROLE"]).lines().next().unwrap_or_default(),
                n.cli(&["DBSIZE"]).trim(),
                n.cli(&["CLUSTER", "NODES"])
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every key reads back through a cluster client with its value.
fn check_keys(nodes: &[&Proc], n: usize) {
    let client = cluster_client(nodes.iter().copied());
    let mut con = client.get_connection().expect("cluster connection");
    for i in 0..n {
        let v: Option<usize> = con.get(format!("t:{i}")).expect("get");
        assert_eq!(v, Some(i), "t:{i}");
    }
}

/// Keys held by masters (replicas hold copies).
fn master_keys(nodes: &[Proc]) -> usize {
    nodes
        .iter()
        .filter(|n| n.cli(&["ROLE"]).starts_with("master"))
        .map(|n| n.cli(&["DBSIZE"]).trim().parse::<usize>().unwrap_or(0))
        .sum()
}

fn wait_check(n: &Proc, what: &str) {
    wait_for(Duration::from_secs(60), what, || cluster_check(n).0);
}

/// Form 3 × (master + replica), load keys, grow to 4 shards (4096 slot moves), shrink to
/// 2 (8192 more): ~25 s in a debug build on a loaded 2-core machine.
#[test]
fn operator_converges_tessera_nodes() {
    let operator = workspace_bin("tessera-operator");
    let total = Instant::now();
    let nodes = cluster_nodes(tessera_bin(), 8, 5000);
    let (form, _) = converge(&operator, 3, 1, &nodes[..6]);
    wait_check(&nodes[0], "check after forming");
    let client = cluster_client(&nodes[..6]);
    let mut con = client.get_connection().expect("cluster connection");
    const N: usize = 1000;
    for i in 0..N {
        let _: () = con.set(format!("t:{i}"), i).expect("set");
    }
    let (grow, grow_log) = converge(&operator, 4, 1, &nodes);
    wait_check(&nodes[6], "check after growth");
    let new_master = nodes[6..]
        .iter()
        .map(|n| n.cli(&["DBSIZE"]).trim().parse::<usize>().unwrap_or(0))
        .max()
        .unwrap_or(0);
    assert!(
        new_master > 0,
        "the new shard received no keys; converge did:\n{grow_log}\nnodes:\n{}",
        describe(&nodes)
    );
    check_keys(&nodes.iter().collect::<Vec<_>>(), N);
    assert_eq!(master_keys(&nodes), N);
    let (shrink, _) = converge(&operator, 2, 1, &nodes);
    wait_check(&nodes[0], "check after shrinking");
    check_keys(&nodes[..4].iter().collect::<Vec<_>>(), N);
    let masters_with_slots: Vec<&Proc> = nodes[..4]
        .iter()
        .filter(|n| n.cli(&["ROLE"]).starts_with("master"))
        .collect();
    assert_eq!(masters_with_slots.len(), 2, "two shards remain");
    let kept: usize = masters_with_slots
        .iter()
        .map(|n| n.cli(&["DBSIZE"]).trim().parse::<usize>().unwrap_or(0))
        .sum();
    assert_eq!(kept, N, "every key lives on the two remaining masters");
    eprintln!(
        "converge: form {form:?}, grow {grow:?}, shrink {shrink:?}, total {:?}",
        total.elapsed()
    );
}
