//! End-to-end lifecycle scenarios of issue 16 (kube-in-a-box, the real operator binary and
//! kubectl; see e2e_operator.rs for the setup), on tessera-node pods, a writer running
//! throughout. Each asserts: Ready within a bound, every replica linked and at its master's
//! offset, zero acknowledged writes lost; failed writes are counted and reported.

mod e2e_common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tessera_tests::kiab::testkit::wait_for;

use e2e_common::*;

/// Bound on each step of a scenario reaching Ready.
const READY_WITHIN: Duration = Duration::from_secs(180);

/// Scale 3 -> 2 -> 3 with `storage`: the recreated shard's pods come back on the PVCs of the
/// drained shard, with node identities the cluster forgot (or that follow another shard's
/// master). The operator resets them and the shard gets a master and slots again.
/// `delete`: reclaimPolicy Delete, so the drained shard's claims are deleted with its
/// StatefulSet and it comes back on fresh volumes (nothing to reset); else they are retained
/// and its old node identities must be reset.
async fn scale_in_then_out_with_storage(ip_base: &str, name: &str, delete: bool) {
    let storage = if delete {
        "    size: 1Gi\n    reclaimPolicy: Delete\n"
    } else {
        "    size: 1Gi\n"
    };
    let mut env = Env::start(ip_base, true).await;
    let extra = format!("  nodeTimeoutMs: 2000\n  storage:\n{storage}");
    env.apply(&manifest(name, 3, 1, &extra)).await;
    env.wait_ready(name, 3, 6, WAIT).await;
    let ips = pod_ips(&env.client, name).await;
    let checker = DataChecker::start(&ips, name, 300).await;
    let rcl = format!("rcl/{name}");

    let t0 = Instant::now();
    env.kubectl.ok(&["scale", &rcl, "--replicas=2"]).await;
    env.wait_ready(name, 2, 4, READY_WITHIN).await;
    let to_two = t0.elapsed();
    // The drained shard's claims: deleted with its StatefulSet, or kept.
    let client = env.client.clone();
    let claims = |client: kube::Client| async move {
        let api: kube::Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
            kube::Api::default_namespaced(client);
        api.list(&Default::default())
            .await
            .map(|l| {
                l.items
                    .into_iter()
                    .filter_map(|c| c.metadata.name)
                    .filter(|n| n.starts_with(&format!("data-{name}-2-")))
                    .count()
            })
            .map_err(|e| e.to_string())
    };
    let want = if delete { 0 } else { 2 };
    let r = wait_for("shard 2's claims", READY_WITHIN, || {
        let c = claims(client.clone());
        async move {
            match c.await? {
                n if n == want => Ok(()),
                n => Err(format!("{n} claims of shard 2, want {want}")),
            }
        }
    })
    .await;
    if let Err(e) = r {
        panic!("{e}\n{}", env.operator_state());
    }

    let t1 = Instant::now();
    env.kubectl.ok(&["scale", &rcl, "--replicas=3"]).await;
    env.wait_ready(name, 3, 6, READY_WITHIN).await;
    let to_three = t1.elapsed();

    checker.stop.store(true, Ordering::SeqCst);
    let client = env.client.clone();
    let r = wait_for("replicas linked and in sync", READY_WITHIN, || {
        replicas_linked(&client, name, 3, 1)
    })
    .await;
    if let Err(e) = r {
        panic!("{e}\n{}", env.operator_state());
    }
    // On kept claims the recreated shard's pods came back with their old identities and were
    // reset; on fresh ones there was nothing to reset.
    let events = env
        .kubectl
        .ok(&["get", "events", "--field-selector", "reason=NodeReset"])
        .await;
    assert_eq!(events.contains(&format!("{name}-2-")), !delete, "{events}");
    let ips = pod_ips(&env.client, name).await;
    let tally = checker.verify(&ips).await;
    eprintln!("scale 3->2 Ready after {to_two:?}, 2->3 Ready after {to_three:?}; {tally}");
    let policy = if delete { "Delete" } else { "Retain" };
    report_scenario(
        &format!("scale 3->2->3 storage {policy}"),
        to_two + to_three,
        &tally,
    );
    assert!(tally.acked >= 300, "{tally}");
    assert_eq!(tally.failed, 0, "scaling promises no failed write: {tally}");
    env.stop().await;
}

#[test]
fn scale_in_then_out_with_storage_retained() {
    serial(scale_in_then_out_with_storage("127.0.19.1", "pv", false));
}

#[test]
fn scale_in_then_out_with_storage_deleted() {
    serial(scale_in_then_out_with_storage("127.0.21.1", "pvd", true));
}

/// spec.storage cannot change (volume claim templates are immutable) except its
/// reclaimPolicy, which the StatefulSets take over, and its size, which may only grow.
#[test]
fn storage_is_immutable_but_for_reclaim_policy() {
    serial(async {
        let env = Env::start("127.0.22.1", false).await;
        env.apply(&manifest("imm", 1, 0, "  storage:\n    size: 1Gi\n"))
            .await;
        let patch = |p: &'static str| {
            let k = &env.kubectl;
            async move {
                k.run_with(
                    &["patch", "rcl", "imm", "--type=merge", "-p", p],
                    None,
                    Duration::from_secs(60),
                )
                .await
            }
        };
        let r = patch(r#"{"spec":{"storage":{"reclaimPolicy":"Delete"}}}"#).await;
        assert!(r.ok, "reclaimPolicy may change: {}", r.stderr);
        // Growing is e2e_storage.rs' scenario; shrinking is refused.
        let r = patch(r#"{"spec":{"storage":{"size":"512Mi"}}}"#).await;
        assert!(!r.ok, "size may not shrink");
        assert!(r.stderr.contains("can only grow"), "{}", r.stderr);
        let r = patch(r#"{"spec":{"storage":{"storageClassName":"fast"}}}"#).await;
        assert!(!r.ok, "storageClassName may not change");
        assert!(
            r.stderr.contains("spec.storage is immutable"),
            "{}",
            r.stderr
        );
        let r = patch(r#"{"spec":{"storage":{"reclaimPolicy":"Sometimes"}}}"#).await;
        assert!(!r.ok, "an unknown policy is refused");
        env.stop().await;
    });
}

/// Every pod of a 3x1 cluster with storage (appendonly) deleted at once: all come back on
/// new addresses with their volumes. Ready again with every replica linked to its master at
/// its offset (the operator re-points a replica whose replication did not follow its
/// master's new address), no acknowledged write lost. Writes fail while no pod runs: counted.
#[test]
fn deleting_every_pod_with_storage_ends_in_sync() {
    serial(async {
        let name = "allpv";
        let mut env = Env::start("127.0.20.1", true).await;
        let extra = "  nodeTimeoutMs: 2000\n  storage:\n    size: 1Gi\n";
        env.apply(&manifest(name, 3, 1, extra)).await;
        env.wait_ready(name, 3, 6, WAIT).await;
        let checker = DataChecker::start_following(&env.client, name, name, 300).await;
        let before = pod_uids(&env, name).await;

        let t0 = Instant::now();
        env.kubectl
            .ok(&[
                "delete",
                "pods",
                "-l",
                &format!("tessera.rs/cluster={name}"),
                "--wait=false",
            ])
            .await;
        let client = env.client.clone();
        let r = wait_for("every pod replaced", READY_WITHIN, || async {
            let now = pod_uids_of(&client, name).await;
            if now.iter().any(|u| before.contains(u)) || now.len() != 6 {
                return Err(format!("{} pods, some old", now.len()));
            }
            Ok(())
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        env.wait_ready(name, 3, 6, READY_WITHIN).await;
        let to_ready = t0.elapsed();
        checker.stop.store(true, Ordering::SeqCst);
        let r = wait_for("replicas linked and in sync", READY_WITHIN, || {
            replicas_linked(&client, name, 3, 1)
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let in_sync = t0.elapsed();
        let ips = pod_ips(&env.client, name).await;
        let tally = checker.verify(&ips).await;
        eprintln!(
            "every pod deleted (storage, appendonly): Ready after {to_ready:?}, replicas in sync after {in_sync:?}; {tally}"
        );
        report_scenario("every pod deleted (storage, appendonly)", to_ready, &tally);
        env.stop().await;
    });
}

async fn pod_uids(env: &Env, name: &str) -> Vec<String> {
    pod_uids_of(&env.client, name).await
}

async fn pod_uids_of(client: &kube::Client, name: &str) -> Vec<String> {
    tessera_tests::kiab::testkit::pods(client, "default", &format!("tessera.rs/cluster={name}"))
        .await
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect()
}

/// The IP of pod `pod` of cluster `name`.
async fn ip_of(client: &kube::Client, name: &str, pod: &str) -> Result<String, String> {
    tessera_tests::kiab::testkit::pods(client, "default", &format!("tessera.rs/cluster={name}"))
        .await?
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(pod))
        .and_then(tessera_tests::kiab::testkit::pod_ip)
        .ok_or_else(|| format!("no pod {pod} with an IP"))
}

/// Whether the node at `ip` calls itself a master in CLUSTER NODES.
async fn is_master(ip: &str) -> Result<bool, String> {
    let nodes = cluster_nodes(ip).await?;
    let me = nodes
        .lines()
        .find(|l| l.contains("myself"))
        .ok_or_else(|| format!("{ip}: no myself line"))?;
    Ok(me
        .split_whitespace()
        .nth(2)
        .is_some_and(|f| f.contains("master")))
}

/// Whether every pod of cluster `name` lists the node at `ip` as a replica of one and the
/// same master.
async fn all_list_as_replica(client: &kube::Client, name: &str, ip: &str) -> Result<(), String> {
    let mine = cluster_nodes(ip).await?;
    let id = mine
        .lines()
        .find(|l| l.contains("myself"))
        .and_then(|l| l.split_whitespace().next())
        .ok_or_else(|| format!("{ip}: no myself line"))?
        .to_string();
    let mut masters = Vec::new();
    for peer in pod_ips(client, name).await {
        let nodes = cluster_nodes(&peer).await?;
        let line = nodes
            .lines()
            .find(|l| l.starts_with(&id))
            .ok_or_else(|| format!("{peer} does not know {id}"))?;
        let f: Vec<&str> = line.split_whitespace().collect();
        if !f.get(2).is_some_and(|f| f.contains("slave")) {
            return Err(format!("{peer} lists {ip} as: {line}"));
        }
        masters.push(f.get(3).copied().unwrap_or("-").to_string());
    }
    masters.dedup();
    match masters.len() {
        1 => Ok(()),
        _ => Err(format!("views differ on {ip}'s master: {masters:?}")),
    }
}

/// Lower replicasPerShard 2 -> 1 while shard 0's master is its highest ordinal (the pod the
/// StatefulSet removes), then raise it back to 2, a writer running throughout. Lowering must
/// fail over (coordinated) to a pod that stays before the StatefulSet shrinks, so no write
/// fails; the removed nodes are forgotten. Raising attaches the new pods as replicas.
#[test]
fn lowering_and_raising_replicas_per_shard() {
    serial(async {
        let name = "rps";
        let mut env = Env::start("127.0.23.1", true).await;
        env.apply(&manifest(name, 2, 2, "  nodeTimeoutMs: 2000\n"))
            .await;
        env.wait_ready(name, 2, 6, WAIT).await;
        let client = env.client.clone();

        // Roles float: make shard 0's master its highest ordinal.
        let top = format!("{name}-0-2");
        let ip = ip_of(&client, name, &top).await.expect("pod -2");
        // Ready says the operator is done, not that every node has heard of the last
        // CLUSTER REPLICATE yet; a master that still lists the pod as a master ignores its
        // vote request, as redis-server does, and the manual failover times out.
        let r = wait_for(
            &format!("every node listing {top} as a replica"),
            Duration::from_secs(30),
            || async { all_list_as_replica(&client, name, &ip).await },
        )
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let mut c = node(&ip).await.expect("connect");
        let _: () = redis::cmd("CLUSTER")
            .arg("FAILOVER")
            .query_async(&mut c)
            .await
            .expect("CLUSTER FAILOVER");
        let r = wait_for(
            &format!("{top} master"),
            Duration::from_secs(30),
            || async {
                match is_master(&ip).await? {
                    true => Ok(()),
                    false => Err(format!("{top} is not master yet")),
                }
            },
        )
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let r = wait_for("replicas linked after the failover", READY_WITHIN, || {
            replicas_linked(&client, name, 2, 2)
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        env.wait_ready(name, 2, 6, READY_WITHIN).await;

        // Lower to 1 replica per shard: pods -2 go, one of them shard 0's master.
        let ips = pod_ips(&client, name).await;
        let checker = DataChecker::start(&ips, name, 300).await;
        let t0 = Instant::now();
        env.kubectl
            .ok(&[
                "patch",
                "rcl",
                name,
                "--type=merge",
                "-p",
                r#"{"spec":{"replicasPerShard":1}}"#,
            ])
            .await;
        env.wait_ready(name, 2, 4, READY_WITHIN).await;
        let lowered = t0.elapsed();
        let ips = pod_ips(&client, name).await;
        let tally_low = checker.verify(&ips).await;
        let r = wait_for("replicas linked at 2x1", READY_WITHIN, || {
            replicas_linked(&client, name, 2, 1)
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let events = env
            .kubectl
            .ok(&[
                "get",
                "events",
                "--field-selector",
                "reason=ScaleInFailover",
            ])
            .await;
        assert!(
            events.contains(&top),
            "the operator failed over away from {top} before the shrink: {events}"
        );

        // Raise back to 2: the new pods are attached as replicas.
        let checker = DataChecker::start(&ips, &format!("{name}up"), 300).await;
        let t1 = Instant::now();
        env.kubectl
            .ok(&[
                "patch",
                "rcl",
                name,
                "--type=merge",
                "-p",
                r#"{"spec":{"replicasPerShard":2}}"#,
            ])
            .await;
        env.wait_ready(name, 2, 6, READY_WITHIN).await;
        let raised = t1.elapsed();
        let ips = pod_ips(&client, name).await;
        let tally_high = checker.verify(&ips).await;
        let r = wait_for("replicas linked at 2x2", READY_WITHIN, || {
            replicas_linked(&client, name, 2, 2)
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        eprintln!(
            "replicasPerShard 2->1 Ready after {lowered:?}: {tally_low}; 1->2 Ready after {raised:?}: {tally_high}"
        );
        report_scenario("lower replicasPerShard 2->1", lowered, &tally_low);
        report_scenario("raise replicasPerShard 1->2", raised, &tally_high);
        assert!(tally_low.acked >= 300 && tally_high.acked >= 300);
        assert_eq!(
            tally_low.failed, 0,
            "lowering fails over first, so no write fails: {tally_low}"
        );
        env.stop().await;
    });
}
