//! Issue 16's lifecycle scenarios against redis-server 7.0 nodes on loopback (the node image
//! does not matter to them): the topology engine alone, driven as the controller drives it,
//! with a writer counting failed and lost writes where the scenario promises none.

mod common_topology;

use std::time::{Duration, Instant};

use common_topology::*;
use tessera_topology::{reconcile, Desired, PodEndpoint};

const LIMIT: Duration = Duration::from_secs(60);

fn redis() -> String {
    tessera_testkit::redis_bin().to_string()
}

fn desired(shards: u32, replicas: u32) -> Desired {
    Desired {
        shards,
        replicas_per_shard: replicas,
        paused: false,
    }
}

fn pods_of(nodes: &[Node]) -> Vec<PodEndpoint> {
    let refs: Vec<&Node> = nodes.iter().collect();
    endpoints(&refs, 2)
}

/// Scale 3 -> 4 -> 2 -> 3 shards (1 replica each, no storage: every new pod is a fresh node)
/// with a writer running throughout: no write fails, none is lost, no preloaded key is lost.
/// Scaling in drains shards 2 and 3 first; their pods then go and are forgotten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_scale_3_4_2_3_with_a_writer() {
    let tmp = tempfile::tempdir().expect("tmp");
    let bin = redis();
    let t0 = Instant::now();
    let mut nodes = start_nodes(&bin, tmp.path(), 6, &[]).await;
    converge(3, 1, &pods_of(&nodes), &test_opts(), LIMIT).await;
    let conn = cluster_conn(&nodes[0]).await;
    let keys = 2000;
    load_keys(&conn, 0..keys).await;
    let writer = Writer::start(cluster_conn(&nodes[0]).await, "w");

    eprintln!("formed 3x1 in {:?}", t0.elapsed());

    nodes.extend(start_nodes(&bin, tmp.path(), 2, &[]).await);
    converge(4, 1, &pods_of(&nodes), &test_opts(), LIMIT).await;
    eprintln!("3->4 done at {:?}", t0.elapsed());

    converge(2, 1, &pods_of(&nodes), &test_opts(), LIMIT).await;
    eprintln!("4->2 drained at {:?}", t0.elapsed());
    nodes.truncate(4); // the StatefulSets of shards 2 and 3 are deleted
    let reports = converge(2, 1, &pods_of(&nodes), &test_opts(), LIMIT).await;
    assert!(
        reports
            .iter()
            .any(|r| r.actions.iter().any(|a| a.starts_with("forget node"))),
        "the removed nodes are forgotten"
    );
    eprintln!("4->2 forgotten at {:?}", t0.elapsed());

    nodes.extend(start_nodes(&bin, tmp.path(), 2, &[]).await);
    let reports = converge(3, 1, &pods_of(&nodes), &test_opts(), LIMIT).await;
    let last = reports.last().expect("report");
    for v in last.shards.iter().take(3) {
        let n: u32 = v
            .slot_ranges
            .iter()
            .map(|(a, b)| u32::from(b - a) + 1)
            .sum();
        assert!((5461..=5462).contains(&n), "shard {}: {n} slots", v.shard);
        assert_eq!(v.replicas_in_sync(), v.replicas, "{v:?}");
        assert_eq!(v.replicas.len(), 1, "{v:?}");
    }
    wait_check(&nodes[0].addr()).await;
    let conn = cluster_conn(&nodes[0]).await;
    let tally = writer.finish(&conn).await;
    eprintln!("3->4->2->3 in {:?}: {tally:?}", t0.elapsed());
    assert!(tally.acked > 0, "the writer wrote nothing");
    assert_eq!(tally.lost, 0, "acknowledged writes lost: {tally:?}");
    assert_eq!(
        tally.failed, 0,
        "scaling promises no failed write: {tally:?}"
    );
    assert_eq!(missing_keys(&conn, 0..keys).await, 0);
}

/// Every pod deleted at once (appendonly, kept directories): all six nodes come back on new
/// addresses, but not at the same instant. The controller hands the engine only the pods that
/// have an IP, so its first passes see shard 0's two pods alone. The other shards' replicas
/// they know (from nodes.conf) must not be FORGOTTEN then: a forgotten id is blacklisted
/// for 60 s, and when its pod showed up the cluster did not take it back for a minute (the
/// kube-in-a-box scenario's ~66 s outliers). With every pod seen, the cluster heals in
/// seconds, every replica in sync, nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_every_pod_deleted_pods_seen_one_by_one() {
    let tmp = tempfile::tempdir().expect("tmp");
    let bin = redis();
    let mut nodes = start_nodes(&bin, tmp.path(), 6, &["--appendonly", "yes"]).await;
    converge(3, 1, &pods_of(&nodes), &test_opts(), LIMIT).await;
    let conn = cluster_conn(&nodes[0]).await;
    let keys = 3000;
    load_keys(&conn, 0..keys).await;
    drop(conn);
    readdress_all(&mut nodes).await;
    let pods = pods_of(&nodes);

    // Shard 0's pods got their IPs first: a few passes see only them.
    for _ in 0..3 {
        if let Ok(r) = reconcile(&desired(3, 1), &pods[..2], &test_opts()).await {
            let forgot: Vec<&String> = r
                .actions
                .iter()
                .filter(|a| a.starts_with("forget"))
                .collect();
            assert!(
                forgot.is_empty(),
                "forgot nodes of pods not seen yet: {forgot:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // Then every pod: healed well within the 60 s a wrong FORGET costs.
    let t = Instant::now();
    let reports = converge(3, 1, &pods, &test_opts(), Duration::from_secs(30)).await;
    let healed = t.elapsed();
    let last = reports.last().expect("report");
    assert_replicas_in_sync(last, 3, 1);
    wait_check(&nodes[0].addr()).await;
    let conn = cluster_conn(&nodes[0]).await;
    assert_eq!(missing_keys(&conn, 0..keys).await, 0);
    eprintln!("every pod deleted, seen one shard first: converged {healed:?} after all were seen");
}

/// One master pod deleted (appendonly, kept directory) and back on a new address, a writer
/// running: its replica's replication must follow the master's new address (redis-server
/// re-points by itself when the bus tells it the address; the engine's RepairReplication
/// covers images that do not, and REPLICAOF, which could break the link behind the engine's
/// back, is refused in cluster mode). Every replica ends linked at its master's offset; no
/// acknowledged write is lost; writes fail only while the master is down (counted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_master_pod_deleted_replica_follows_its_new_address() {
    let tmp = tempfile::tempdir().expect("tmp");
    let bin = redis();
    let mut nodes = start_nodes(&bin, tmp.path(), 6, &["--appendonly", "yes"]).await;
    let pods = pods_of(&nodes);
    let reports = converge(3, 1, &pods, &test_opts(), LIMIT).await;
    let master_pod = reports.last().expect("report").shards[0]
        .master_pod
        .clone()
        .expect("shard 0 master");
    let m = pods
        .iter()
        .position(|p| p.pod == master_pod)
        .expect("master index");
    let conn = cluster_conn(&nodes[0]).await;
    let keys = 2000;
    load_keys(&conn, 0..keys).await;
    let seed = if m == 0 { 2 } else { 0 };
    let writer = Writer::start(cluster_conn(&nodes[seed]).await, "w");
    tokio::time::sleep(Duration::from_millis(500)).await;

    let t = Instant::now();
    nodes[m].restart_on("127.0.0.8");
    wait_up(&nodes[m]).await;
    let pods = pods_of(&nodes);
    let reports = converge(3, 1, &pods, &test_opts(), Duration::from_secs(30)).await;
    let healed = t.elapsed();
    let last = reports.last().expect("report");
    assert_replicas_in_sync(last, 3, 1);
    // Shard 0's replica streams from the master's current address.
    let master = last.shards[0].master_pod.clone().expect("master");
    let replica = last.shards[0].replicas[0].clone();
    let ep = |name: &str| pods.iter().find(|p| p.pod == name).expect("pod").clone();
    let (mep, rep) = (ep(&master), ep(&replica));
    let info = replication_info(&rep).await;
    assert!(
        info.contains(&format!("master_host:{}\r", mep.host))
            && info.contains(&format!("master_port:{}\r", mep.port))
            && info.contains("master_link_status:up"),
        "{replica} does not stream from {master} at {}:{}: {info}",
        mep.host,
        mep.port
    );
    wait_check(&nodes[seed].addr()).await;
    let conn = cluster_conn(&nodes[seed]).await;
    let tally = writer.finish(&conn).await;
    let repairs: Vec<&String> = reports.iter().flat_map(|r| r.repairs.iter()).collect();
    eprintln!("master pod readdressed: healed {healed:?}; {tally:?}; repairs {repairs:?}");
    assert!(tally.acked > 0, "the writer wrote nothing");
    assert_eq!(tally.lost, 0, "acknowledged writes lost: {tally:?}");
    assert_eq!(missing_keys(&conn, 0..keys).await, 0);
}

/// tessera-node as `make test` builds it (the kit fails naming the build when it is missing).
fn tessera_node() -> String {
    tessera_testkit::tessera_bin().to_string()
}

/// `n`'s CLUSTER NODES, parsed (None if it does not answer).
async fn view_of(n: &Node) -> Option<tessera_topology::nodes::NodesReply> {
    let mut c = open(&format!("redis://{}/", n.addr())).await.ok()?;
    let text: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut c)
        .await
        .ok()?;
    tessera_topology::nodes::parse_cluster_nodes(&text).ok()
}

/// The node id `n` reports, and the master it replicates (by its own CLUSTER NODES line).
async fn role_of(n: &Node) -> Option<(String, Option<String>)> {
    let me = view_of(n).await?.myself;
    Some((me.id, me.replica_of))
}

/// The e2e's lost master, without Kubernetes: 2 shards x 1 replica, shard 0's master frozen
/// (SIGSTOP). Its replica cannot win an election (one live master of two is no majority), so
/// the engine promotes it (CLUSTER FAILOVER TAKEOVER) once it has heard nothing for
/// `SILENCE_TIMEOUTS` node timeouts; writes to the shard's slots then succeed and nothing
/// acknowledged before is lost. Resumed (SIGCONT), the old master finds its slots taken
/// under a higher epoch and becomes the new master's replica; the engine converges with
/// every replica in sync.
async fn lost_master_of_two_shards(bin: &str) {
    let tmp = tempfile::tempdir().expect("tmp");
    let nodes = start_nodes(bin, tmp.path(), 4, &[]).await;
    let pods = pods_of(&nodes);
    let reports = converge(2, 1, &pods, &test_opts(), LIMIT).await;
    let shard0 = reports.last().expect("report").shards[0].clone();
    let index = |name: &str| pods.iter().position(|p| p.pod == name).expect("pod");
    let m = index(shard0.master_pod.as_deref().expect("shard 0 master"));
    let r = index(shard0.replicas.first().expect("shard 0 replica"));
    let seed = index(
        reports.last().expect("report").shards[1]
            .master_pod
            .as_deref()
            .expect("shard 1 master"),
    );
    let keys = 2000;
    {
        let conn = cluster_conn(&nodes[seed]).await;
        load_keys(&conn, 0..keys).await;
    }
    // Every acknowledged write has reached the replica before the freeze (replication is
    // asynchronous: a write the master acknowledged a moment before dying may be lost in any
    // Redis failover, which is not what this test is about).
    let mut mc = nodes[m].conn().await;
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(10_000)
        .query_async(&mut mc)
        .await
        .expect("WAIT");
    assert_eq!(acked, 1, "the replica acknowledged the master's stream");
    drop(mc);

    let (old_id, _) = role_of(&nodes[m]).await.expect("old master's id");
    let (new_id, _) = role_of(&nodes[r]).await.expect("replica's id");
    nodes[m].signal("STOP"); // a frozen or partitioned node
    let t = Instant::now();
    // A frozen node accepts connections and never answers: short timeouts keep passes short.
    let opts = tessera_topology::EngineOptions {
        connect_timeout: Duration::from_secs(1),
        command_timeout: Duration::from_secs(1),
        ..test_opts()
    };
    let mut took_over = Vec::new();
    while took_over.is_empty() {
        assert!(
            t.elapsed() < LIMIT,
            "no takeover within {LIMIT:?} of the freeze"
        );
        if let Ok(rep) = reconcile(&desired(2, 1), &pods, &opts).await {
            for s in rep.stuck.iter().take(3) {
                eprintln!("stuck: {s}");
            }
            took_over.extend(
                rep.repairs
                    .iter()
                    .filter(|a| a.contains("TAKEOVER"))
                    .cloned(),
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let promoted = t.elapsed();
    eprintln!("taken over {promoted:?} after the freeze: {took_over:?}");
    assert!(
        took_over[0].contains(&pods[r].pod) && took_over[0].contains(&pods[m].pod),
        "{took_over:?}"
    );

    // The shard serves again: new writes to every slot succeed (through a fresh client).
    let conn = cluster_conn(&nodes[seed]).await;
    load_keys(&conn, keys..keys + 1000).await;
    assert_eq!(missing_keys(&conn, 0..keys + 1000).await, 0);

    // The old master comes back and follows its former replica.
    nodes[m].signal("CONT");
    let t = Instant::now();
    loop {
        let now = role_of(&nodes[m]).await;
        if now
            .as_ref()
            .is_some_and(|(id, of)| *id == old_id && of.as_deref() == Some(&new_id))
        {
            break;
        }
        assert!(
            t.elapsed() < LIMIT,
            "the resumed old master never followed the new one: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reports = converge(2, 1, &pods, &test_opts(), LIMIT).await;
    let last = reports.last().expect("report");
    assert_replicas_in_sync(last, 2, 1);
    assert_eq!(
        last.shards[0].master_pod.as_deref(),
        Some(pods[r].pod.as_str())
    );
    wait_check(&nodes[seed].addr()).await;
    let conn = cluster_conn(&nodes[seed]).await;
    assert_eq!(missing_keys(&conn, 0..keys + 1000).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lost_master_of_two_shards_is_taken_over() {
    lost_master_of_two_shards(&redis()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tessera_lost_master_of_two_shards_is_taken_over() {
    lost_master_of_two_shards(&tessera_node()).await;
}

/// Lowering replicasPerShard 2 -> 1 right after a failover made shard 0's highest ordinal
/// its master (the e2e's sequence, without Kubernetes). The engine hands the shard over
/// (CLUSTER FAILOVER) to a replica that stays. The target became that master's replica a
/// moment ago, and redis-server tells its peers so only at their next ping: a master that
/// does not yet list the target as its replica ignores the request (MFSTART), and a voter
/// that does not refuses its vote while the master holds writes paused. The engine waits
/// until the master and every voter agree before asking, so the first handover succeeds and
/// no write fails.
async fn handover_right_after_a_failover(bin: &str) {
    let tmp = tempfile::tempdir().expect("tmp");
    let nodes = start_nodes(bin, tmp.path(), 6, &[]).await;
    let refs: Vec<&Node> = nodes.iter().collect();
    let pods = endpoints(&refs, 3);
    let reports = converge(2, 2, &pods, &test_opts(), LIMIT).await;
    let shard0 = reports.last().expect("report").shards[0].clone();
    let seed = &nodes[3..]
        .iter()
        .zip(&pods[3..])
        .find(|(_, p)| shard0.master_pod.as_deref() != Some(p.pod.as_str()))
        .expect("a shard 1 pod")
        .0;
    let writer = Writer::start(cluster_conn(seed).await, "h");

    for round in 0..3 {
        // Roles float: make ordinal 2 shard 0's master (the pod a shrink to 1 replica removes).
        let top = &nodes[2];
        let mut c = top.conn().await;
        // Done when every node sees it as master. Asked again after each 5 s manual-failover
        // timeout: its master may not have known it as its replica yet (the race the engine
        // waits out), or it won an election moments ago and redis-server reuses those votes
        // under its old epoch (the claim is then undone).
        let (top_id, _) = role_of(top).await.expect("ordinal 2's id");
        let t = Instant::now();
        let mut asked = None::<Instant>;
        while !all_see_master(&nodes, &top_id).await {
            assert!(t.elapsed() < LIMIT, "ordinal 2 never became master");
            if asked.is_none_or(|a| a.elapsed() > Duration::from_secs(6)) {
                let _: () = redis::cmd("CLUSTER")
                    .arg("FAILOVER")
                    .query_async(&mut c)
                    .await
                    .expect("CLUSTER FAILOVER");
                asked = Some(Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // At once: the engine finds the master on a removed pod and hands the shard over.
        let mut handed = false;
        let mut last = Vec::new();
        let t = Instant::now();
        while !handed {
            if t.elapsed() > LIMIT {
                dump(&pods).await;
                panic!("round {round}: no handover: {last:?}");
            }
            match reconcile(&desired(2, 1), &pods, &test_opts()).await {
                Err(e) => last = vec![e.to_string()],
                Ok(rep) => {
                    let failed: Vec<&String> = rep
                        .stuck
                        .iter()
                        .filter(|s| s.contains("CLUSTER FAILOVER"))
                        .collect();
                    assert!(
                        failed.is_empty(),
                        "round {round}: a handover was tried and did not happen: {failed:?}"
                    );
                    handed = !rep.handovers.is_empty();
                    last = rep.stuck;
                    last.extend(rep.actions);
                }
            }
        }
        eprintln!("round {round}: handed over in {:?}", t.elapsed());
        // Back to 2 replicas per shard for the next round (ordinal 2 is still there).
        converge(2, 2, &pods, &test_opts(), LIMIT).await;
    }
    let conn = cluster_conn(seed).await;
    let tally = writer.finish(&conn).await;
    eprintln!("handovers: {tally:?}");
    assert!(tally.acked > 0, "the writer wrote nothing");
    assert_eq!(tally.lost, 0, "acknowledged writes lost: {tally:?}");
    assert_eq!(
        tally.failed, 0,
        "a handover promises no failed write: {tally:?}"
    );
}

/// Whether every node's CLUSTER NODES shows `id` as a master that serves slots. A master
/// role alone is not enough: redis-server's claim under a reused old epoch makes every node
/// list it as a master for a moment, without the slots, before an UPDATE undoes it.
async fn all_see_master(nodes: &[Node], id: &str) -> bool {
    for n in nodes {
        let Some(view) = view_of(n).await else {
            return false;
        };
        let master = std::iter::once(&view.myself)
            .chain(&view.others)
            .any(|v| v.id == id && v.master && !v.slots.is_empty());
        if !master {
            return false;
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_handover_right_after_a_failover() {
    handover_right_after_a_failover(&redis()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tessera_handover_right_after_a_failover() {
    handover_right_after_a_failover(&tessera_node()).await;
}
