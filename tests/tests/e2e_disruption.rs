//! Disruptions of issue 16 that the operator does not drive, and scaling under them
//! (kube-in-a-box, the real operator binary and kubectl; see e2e_operator.rs for the setup),
//! on tessera-node pods with a writer running throughout: scale 3 -> 4 -> 2 -> 3, a master
//! SIGTERMed by a graceful pod deletion, evictions under the per-shard PodDisruptionBudgets,
//! and the operator SIGKILLed while slots move. Each asserts Ready within a bound, every
//! replica linked and at its master's offset, zero acknowledged writes lost, and prints its
//! line of the closing table (`SCENARIO ...`).

mod e2e_common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::EvictParams;
use kube::Api;
use tessera_tests::kiab::testkit::{is_ready, pod_ip, wait_for};

use e2e_common::*;

/// Bound on each step of a scenario reaching Ready (generous: 2 shared cores).
const READY_WITHIN: Duration = Duration::from_secs(180);
const NODE_TIMEOUT: &str = "  nodeTimeoutMs: 2000\n";

/// The value of `r`, or a panic with the error and the operator's log tail.
macro_rules! check {
    ($env:expr, $r:expr $(,)?) => {
        match $r {
            Ok(v) => v,
            Err(e) => panic!("{e}\n{}", $env.operator_state()),
        }
    };
}

/// Stops the writer, waits until every replica is linked at its master's offset and every
/// slot is owned once with none left open, then checks every acknowledged write.
async fn settle(
    env: &mut Env,
    name: &str,
    shards: usize,
    replicas: usize,
    checker: DataChecker,
) -> WriteTally {
    checker.stop.store(true, Ordering::SeqCst);
    let client = env.client.clone();
    let r = wait_for("replicas linked and in sync", READY_WITHIN, || {
        replicas_linked(&client, name, shards, replicas)
    })
    .await;
    check!(env, r);
    let r = wait_for("every slot owned once, none open", READY_WITHIN, || {
        slots_settled(&client, name)
    })
    .await;
    check!(env, r);
    let ips = pod_ips(&env.client, name).await;
    checker.verify(&ips).await
}

/// Shard `shard`'s master pod and its first replica pod, from the RedisCluster status.
async fn shard_pods(env: &Env, name: &str, shard: usize) -> Result<(String, String), String> {
    let o = env.rcl().get(name).await.map_err(|e| e.to_string())?;
    let s = &o.data["status"]["shardStatuses"][shard];
    let master = s["masterPod"]
        .as_str()
        .ok_or_else(|| format!("shard {shard} has no master in status"))?;
    let replica = s["replicaPods"][0]
        .as_str()
        .ok_or_else(|| format!("shard {shard} has no replica in status"))?;
    Ok((master.to_string(), replica.to_string()))
}

async fn pod(env: &Env, name: &str) -> Result<Pod, String> {
    Api::<Pod>::default_namespaced(env.client.clone())
        .get(name)
        .await
        .map_err(|e| format!("pod {name}: {e}"))
}

/// The node's process id (kube-in-a-box reports `kiab://PID` as the container ID).
fn node_pid(p: &Pod) -> Option<i32> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .container_id
        .as_deref()?
        .strip_prefix("kiab://")?
        .parse()
        .ok()
}

/// Whether process `pid` still runs (a zombie has exited).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|st| st != "Z"))
        })
        .unwrap_or(false)
}

/// The `myself` line of the node at `ip`, and the whole CLUSTER NODES text.
async fn myself(ip: &str) -> Result<(String, String), String> {
    let nodes = cluster_nodes(ip).await?;
    let me = nodes
        .lines()
        .find(|l| l.contains("myself"))
        .ok_or_else(|| format!("{ip}: no myself line"))?
        .to_string();
    Ok((me, nodes))
}

/// Waits until pod `name` is a new pod (not `old_uid`), Ready.
async fn replaced(env: &mut Env, name: &str, old_uid: &Option<String>) {
    let client = env.client.clone();
    let r = wait_for(&format!("{name} recreated and Ready"), READY_WITHIN, || {
        let client = client.clone();
        async move {
            let p = Api::<Pod>::default_namespaced(client)
                .get(name)
                .await
                .map_err(|e| e.to_string())?;
            if &p.metadata.uid == old_uid || !is_ready(&p) {
                return Err("not yet".to_string());
            }
            Ok(())
        }
    })
    .await;
    check!(env, r);
}

/// Scale 3 -> 4 -> 2 -> 3 without storage, one step after the other reaching Ready: every
/// slot moves with its keys, removed shards are drained first, so no write fails.
#[test]
fn scale_three_four_two_three() {
    serial(async {
        let name = "sc";
        let mut env = Env::start("127.0.40.1", true).await;
        env.apply(&manifest(name, 3, 1, NODE_TIMEOUT)).await;
        env.wait_ready(name, 3, 6, WAIT).await;
        let ips = pod_ips(&env.client, name).await;
        let checker = DataChecker::start(&ips, name, 300).await;
        let rcl = format!("rcl/{name}");
        let t0 = Instant::now();
        for (shards, pods) in [(4, 8), (2, 4), (3, 6)] {
            env.kubectl
                .ok(&["scale", &rcl, &format!("--replicas={shards}")])
                .await;
            env.wait_ready(name, shards, pods, READY_WITHIN).await;
        }
        let ready = t0.elapsed();
        let tally = settle(&mut env, name, 3, 1, checker).await;
        report_scenario("scale 3->4->2->3", ready, &tally);
        assert!(tally.acked >= 300, "{tally}");
        assert_eq!(tally.failed, 0, "scaling promises no failed write: {tally}");
        env.stop().await;
    });
}

/// A master pod deleted gracefully gets SIGTERM (kube-in-a-box's kubelet, as the real one,
/// then waits terminationGracePeriodSeconds before SIGKILL). With `shutdown-on-sigterm
/// failover` (set by the operator) it hands its slots to its in-sync replica before it exits:
/// the replica is master while the old master is not flagged FAIL (a failure-driven
/// election needs the FAIL flag, set only node-timeout after the old master went silent).
async fn sigterm_master_hands_over(image: Option<&str>, ip_base: &str, name: &str) {
    let mut env = Env::start(ip_base, true).await;
    env.apply(&manifest_on(image, name, 3, 1, NODE_TIMEOUT))
        .await;
    env.wait_ready(name, 3, 6, WAIT).await;
    let checker = DataChecker::start_following(&env.client, name, name, 300).await;
    let client = env.client.clone();
    let r = wait_for("replicas in sync", READY_WITHIN, || {
        replicas_online(&client, name)
    })
    .await;
    check!(env, r);
    let (master, replica) = check!(env, shard_pods(&env, name, 0).await);
    let master_pod = check!(env, pod(&env, &master).await);
    let replica_ip = check!(
        env,
        pod(&env, &replica)
            .await
            .and_then(|p| pod_ip(&p).ok_or_else(|| "replica has no ip".to_string())),
    );
    let master_ip = pod_ip(&master_pod).expect("master ip");
    let pid = node_pid(&master_pod).expect("master pid");
    let (me, _) = check!(env, myself(&master_ip).await);
    let master_id = me.split_whitespace().next().unwrap_or_default().to_string();

    let t0 = Instant::now();
    env.kubectl
        .ok(&["delete", "pod", &master, "--wait=false"])
        .await;
    // Poll the replica's view until it is master; note when the old process exits.
    let mut exited_at = None;
    let mut promoted = None;
    while t0.elapsed() < Duration::from_secs(60) {
        if exited_at.is_none() && !alive(pid) {
            exited_at = Some(t0.elapsed());
        }
        if let Ok((me, nodes)) = myself(&replica_ip).await {
            if me
                .split_whitespace()
                .nth(2)
                .is_some_and(|f| f.contains("master"))
            {
                let old = nodes
                    .lines()
                    .find(|l| l.starts_with(&master_id))
                    .unwrap_or("")
                    .to_string();
                promoted = Some((t0.elapsed(), alive(pid), old));
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let Some((promoted_at, still_alive, old_line)) = promoted else {
        panic!(
            "{replica} never became master within 60 s\n{}",
            env.operator_state()
        );
    };
    let old_flags = old_line.split_whitespace().nth(2).unwrap_or("");
    assert!(
        !old_flags.split(',').any(|f| f == "fail"),
        "{replica} was promoted by a failure-driven election, not a handover (old master: {old_line}); the old process exited at {exited_at:?}"
    );
    // The old process exits by itself after the handover, well before its grace period.
    let r = wait_for(
        "old master process exits",
        Duration::from_secs(60),
        || async {
            if alive(pid) {
                Err(format!("pid {pid} still runs"))
            } else {
                Ok(())
            }
        },
    )
    .await;
    check!(env, r);
    let exited = exited_at.unwrap_or_else(|| t0.elapsed());
    eprintln!(
        "SIGTERM: {replica} master after {promoted_at:?} (old master process still running: {still_alive}), old master exited after ~{exited:?}"
    );
    replaced(&mut env, &master, &master_pod.metadata.uid).await;
    env.wait_ready(name, 3, 6, READY_WITHIN).await;
    let ready = t0.elapsed();
    let tally = settle(&mut env, name, 3, 1, checker).await;
    let image = image.unwrap_or("tessera-node");
    report_scenario(&format!("SIGTERM a master ({image})"), ready, &tally);
    assert!(tally.acked >= 300, "{tally}");
    env.stop().await;
}

#[test]
fn sigterm_master_hands_over_first() {
    serial(sigterm_master_hands_over(IMAGE, "127.0.41.1", "term"));
}

/// The same on valkey 9 pods (its shutdown failover): the reference behaviour, and a check
/// of the scenario itself.
#[test]
fn sigterm_valkey_master_hands_over_first() {
    serial(sigterm_master_hands_over(
        Some(VALKEY_IMAGE),
        "127.0.45.1",
        "termv",
    ));
}

/// The HTTP status of a refused call (panics on success or a non-API error).
fn refused(r: Result<impl std::fmt::Debug, kube::Error>, what: &str) -> u16 {
    match r {
        Err(kube::Error::Api(s)) => s.code,
        other => panic!("{what}: expected a refusal, got {other:?}"),
    }
}

/// Evictions (policy/v1, what `kubectl drain` uses) against the operator's per-shard budgets:
/// on a shard with a replica the first eviction is allowed (the master hands over on
/// SIGTERM), a second while the shard is not whole is refused with 429; with
/// replicasPerShard 0 the budget allows nothing and every eviction is refused.
#[test]
fn evictions_honour_the_shard_budgets() {
    serial(async {
        let name = "ev";
        let mut env = Env::start("127.0.42.1", true).await;
        // Three shards: should a SIGTERMed master fail to hand over, the others still form
        // the majority a failure-driven election needs (with two, one is not a majority).
        env.apply(&manifest(name, 3, 1, NODE_TIMEOUT)).await;
        env.wait_ready(name, 3, 6, WAIT).await;
        let checker = DataChecker::start_following(&env.client, name, name, 300).await;
        let client = env.client.clone();
        let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(client.clone());
        let budget = |shard: u32, allowed: i32, max_unavailable: i32| {
            let pdbs = pdbs.clone();
            async move {
                let b = pdbs
                    .get(&format!("{name}-{shard}"))
                    .await
                    .map_err(|e| e.to_string())?;
                let mu = b.spec.as_ref().and_then(|s| s.max_unavailable.clone());
                let da = b.status.as_ref().map(|s| s.disruptions_allowed);
                let want =
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(max_unavailable);
                if mu.as_ref() != Some(&want) || da != Some(allowed) {
                    return Err(format!(
                        "budget {name}-{shard}: maxUnavailable {mu:?}, disruptionsAllowed {da:?}"
                    ));
                }
                Ok(())
            }
        };
        let r = wait_for("replicas in sync", READY_WITHIN, || {
            replicas_online(&client, name)
        })
        .await;
        check!(env, r);
        let r = wait_for("shard 0 allows one disruption", READY_WITHIN, || {
            budget(0, 1, 1)
        })
        .await;
        check!(env, r);

        let (master, replica) = check!(env, shard_pods(&env, name, 0).await);
        let old_uid = check!(env, pod(&env, &master).await).metadata.uid;
        let evict = Api::<Pod>::default_namespaced(env.client_without_retry());
        let t0 = Instant::now();
        if let Err(e) = evict.evict(&master, &EvictParams::default()).await {
            panic!("evicting {master} (shard whole, budget 1): {e}");
        }
        let code = refused(
            evict.evict(&replica, &EvictParams::default()).await,
            "a second eviction in shard 0",
        );
        assert_eq!(code, 429, "the budget refuses a second eviction");
        replaced(&mut env, &master, &old_uid).await;
        env.wait_ready(name, 3, 6, READY_WITHIN).await;
        let ready_evicted = t0.elapsed();

        // No replicas: the budget allows no disruption, so every eviction is refused.
        env.kubectl
            .ok(&[
                "patch",
                "rcl",
                name,
                "--type=merge",
                "-p",
                r#"{"spec":{"replicasPerShard":0}}"#,
            ])
            .await;
        env.wait_ready(name, 3, 3, READY_WITHIN).await;
        for shard in 0..3 {
            let r = wait_for(
                &format!("shard {shard}'s budget allows nothing"),
                READY_WITHIN,
                || budget(shard, 0, 0),
            )
            .await;
            check!(env, r);
        }
        let ps = tessera_tests::kiab::testkit::pods(
            &client,
            "default",
            &format!("tessera.rs/cluster={name}"),
        )
        .await
        .expect("pods");
        // A replica pod the scale-down is still deleting may be evicted (the API lets a
        // terminating pod go): only the pods that stay are checked, here and below.
        let stay: Vec<String> = ps
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        for p in ps
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
        {
            let pn = p.metadata.name.clone().unwrap_or_default();
            let code = refused(
                evict.evict(&pn, &EvictParams::default()).await,
                &format!("evicting {pn} of a shard without replicas"),
            );
            assert_eq!(code, 429, "{pn}: maxUnavailable 0 refuses every eviction");
        }
        let still = tessera_tests::kiab::testkit::pods(
            &client,
            "default",
            &format!("tessera.rs/cluster={name}"),
        )
        .await
        .expect("pods");
        let deleted: Vec<&str> = still
            .iter()
            .filter(|p| p.metadata.uid.as_ref().is_some_and(|u| stay.contains(u)))
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        assert!(deleted.is_empty(), "no pod may be deleted: {deleted:?}");
        env.wait_ready(name, 3, 3, READY_WITHIN).await;
        let tally = settle(&mut env, name, 3, 0, checker).await;
        report_scenario("evict under the PDB", ready_evicted, &tally);
        assert!(tally.acked >= 300, "{tally}");
        env.stop().await;
    });
}

/// Scales to `shards`, SIGKILLs the operator while a slot is MIGRATING/IMPORTING, starts it
/// again, and waits for Ready; returns the time to Ready.
async fn scale_killing_operator(env: &mut Env, name: &str, shards: u64, pods: usize) -> Duration {
    let client = env.client.clone();
    let t0 = Instant::now();
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    env.kubectl
        .ok(&[
            "scale",
            &format!("rcl/{name}"),
            &format!("--replicas={shards}"),
        ])
        .await;
    let r = wait_for("a slot migrating", Duration::from_secs(120), || async {
        if slot_migrating(&client, name, since).await {
            Ok(())
        } else {
            Err("no slot MIGRATING/IMPORTING yet".to_string())
        }
    })
    .await;
    check!(env, r);
    env.kill_operator().await;
    let open = slot_migrating(&client, name, since).await;
    eprintln!(
        "operator SIGKILLed {:?} after the scale to {shards}; a slot still open: {open}",
        t0.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    env.start_operator();
    env.wait_ready(name, shards, pods, READY_WITHIN).await;
    let r = wait_for("every slot owned once, none open", READY_WITHIN, || {
        slots_settled(&client, name)
    })
    .await;
    check!(env, r);
    t0.elapsed()
}

/// The operator SIGKILLed while slots move (scale 3 -> 4, then 4 -> 3) and started again: it
/// resumes from what the cluster and the API say, so the cluster ends Ready, every slot owned
/// by one master, none left MIGRATING/IMPORTING, nothing lost.
#[test]
fn operator_killed_mid_scale() {
    serial(async {
        let name = "opk";
        let mut env = Env::start("127.0.43.1", true).await;
        env.apply(&manifest(name, 3, 1, NODE_TIMEOUT)).await;
        env.wait_ready(name, 3, 6, WAIT).await;
        let ips = pod_ips(&env.client, name).await;
        let checker = DataChecker::start(&ips, name, 1000).await;
        let out = scale_killing_operator(&mut env, name, 4, 8).await;
        let tally = settle(&mut env, name, 4, 1, checker).await;
        report_scenario("operator killed mid-scale 3->4", out, &tally);
        assert!(tally.acked >= 1000, "{tally}");
        assert_eq!(tally.failed, 0, "scaling promises no failed write: {tally}");

        let ips = pod_ips(&env.client, name).await;
        let checker = DataChecker::start(&ips, &format!("{name}in"), 1000).await;
        let back = scale_killing_operator(&mut env, name, 3, 6).await;
        let tally = settle(&mut env, name, 3, 1, checker).await;
        report_scenario("operator killed mid-scale 4->3", back, &tally);
        assert!(tally.acked >= 1000, "{tally}");
        assert_eq!(tally.failed, 0, "scaling promises no failed write: {tally}");
        env.stop().await;
    });
}

/// The master of one shard of a two-shard cluster lost for good (its process frozen, as on
/// a partitioned or dead Kubernetes node, and its pod force-deleted, so it is recreated
/// empty on a new address). Its replica cannot win an election (one live master of two is
/// no majority), so the operator must promote it (CLUSTER FAILOVER TAKEOVER) for the shard
/// to serve again; the cluster ends Ready, in sync, with every acknowledged write.
#[test]
fn lost_master_of_two_shards_is_replaced() {
    serial(async {
        let name = "lost";
        let mut env = Env::start("127.0.44.1", true).await;
        env.apply(&manifest(name, 2, 1, NODE_TIMEOUT)).await;
        env.wait_ready(name, 2, 4, WAIT).await;
        let checker = DataChecker::start_following(&env.client, name, name, 300).await;
        let client = env.client.clone();
        let r = wait_for("replicas online", READY_WITHIN, || {
            replicas_online(&client, name)
        })
        .await;
        check!(env, r);
        let (master, _) = check!(env, shard_pods(&env, name, 0).await);
        let master_pod = check!(env, pod(&env, &master).await);
        let pid = node_pid(&master_pod).expect("master pid");
        let t0 = Instant::now();
        // SAFETY: kill(2) on the node process kube-in-a-box started for this pod.
        unsafe {
            libc::kill(pid, libc::SIGSTOP);
        }
        env.kubectl
            .ok(&[
                "delete",
                "pod",
                &master,
                "--grace-period=0",
                "--force",
                "--wait=false",
            ])
            .await;
        replaced(&mut env, &master, &master_pod.metadata.uid).await;
        env.wait_ready(name, 2, 4, READY_WITHIN).await;
        let ready = t0.elapsed();
        let tally = settle(&mut env, name, 2, 1, checker).await;
        report_scenario("lost master of 2 shards", ready, &tally);
        assert!(tally.acked >= 300, "{tally}");
        env.stop().await;
    });
}

/// What the SIGTERM scenario relies on kube-in-a-box for, as the kubelet does it: a pod
/// deleted gracefully gets SIGTERM and up to its terminationGracePeriodSeconds to exit by
/// itself (its handler finishes); a handler longer than the grace period is cut by SIGKILL.
#[test]
fn graceful_pod_deletion_honours_the_grace_period() {
    serial(async {
        let env = Env::start("127.0.46.1", false).await;
        let dir = tempfile::tempdir().expect("tempdir");
        let pod = |name: &str, grace: u32, handler_secs: u32| {
            let mark = dir.path().join(name);
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: {grace}\n  containers:\n  - name: c\n    image: busybox\n    env:\n    - name: MARK\n      value: {}\n    command: [\"sh\", \"-c\", \"trap 'sleep {handler_secs}; echo done > $(MARK); exit 0' TERM; while true; do sleep 0.1; done\"]\n",
                mark.display()
            )
        };
        env.apply(&pod("patient", 10, 2)).await;
        env.apply(&pod("hasty", 1, 5)).await;
        let api: Api<Pod> = Api::default_namespaced(env.client.clone());
        for name in ["patient", "hasty"] {
            wait_for(
                &format!("{name} running"),
                Duration::from_secs(60),
                || async {
                    let p = api.get(name).await.map_err(|e| e.to_string())?;
                    node_pid(&p)
                        .filter(|&pid| alive(pid))
                        .map(|_| ())
                        .ok_or_else(|| "not running".to_string())
                },
            )
            .await
            .expect("pod running");
        }
        let t0 = Instant::now();
        env.kubectl
            .ok(&["delete", "pod", "patient", "hasty", "--wait=false"])
            .await;
        for name in ["patient", "hasty"] {
            wait_for(&format!("{name} gone"), Duration::from_secs(60), || async {
                match api.get_opt(name).await.map_err(|e| e.to_string())? {
                    None => Ok(()),
                    Some(_) => Err("still there".to_string()),
                }
            })
            .await
            .expect("pod deleted");
        }
        assert!(
            dir.path().join("patient").exists(),
            "the 2 s SIGTERM handler ran to completion within the 10 s grace period"
        );
        assert!(
            !dir.path().join("hasty").exists(),
            "the 5 s handler was cut by SIGKILL after the 1 s grace period"
        );
        assert!(t0.elapsed() >= Duration::from_secs(2), "{:?}", t0.elapsed());
        env.stop().await;
    });
}
