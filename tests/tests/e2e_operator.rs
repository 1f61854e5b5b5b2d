//! End-to-end: kube-in-a-box in-process + the real tessera-operator binary + the real kubectl.
//! The pods run the operator's default image tessera/tessera-node (→ the workspace's built
//! tessera-node); one small suite runs valkey/valkey:9 pods (and e2e_rolling.rs one redis:7.0
//! suite) to prove the operator drives any Redis Cluster node.
//!
//! The tests share one machine's two cores, so at most two run at once (`serial`), each with its
//! own pod address range. The operator binary must be built (`make test` builds every bin
//! first); if it is missing the tests fail and say how to build it.

mod e2e_common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::Api;
use tessera_tests::kiab::testkit::{is_ready, pod_ip, pods, wait_for};

use e2e_common::*;

#[test]
fn invalid_manifest_is_rejected() {
    serial(async {
        let env = Env::start("127.0.10.1", false).await;
        let bad = manifest("bad", 0, 1, "");
        let r = env
            .kubectl
            .run_with(&["apply", "-f", "-"], Some(&bad), Duration::from_secs(60))
            .await;
        assert!(!r.ok, "shards: 0 must be rejected; stdout {}", r.stdout);
        assert!(
            r.stderr.contains("shards"),
            "error names the field: {}",
            r.stderr
        );
        let bad_type = manifest("bad2", 3, 1, "").replace("shards: 3", "shards: three");
        let r = env
            .kubectl
            .run_with(
                &["apply", "-f", "-"],
                Some(&bad_type),
                Duration::from_secs(60),
            )
            .await;
        assert!(!r.ok, "a string shard count must be rejected");
        assert!(env
            .rcl()
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty());
        env.stop().await;
    });
}

#[test]
fn apply_becomes_ready_and_delete_removes_every_child() {
    serial(async {
        let mut env = Env::start("127.0.11.1", true).await;
        env.apply(&manifest("e2e", 3, 1, "")).await;
        env.wait_ready("e2e", 3, 6, WAIT).await;
        let out = env.kubectl.ok(&["get", "rcl", "e2e"]).await;
        assert!(out.contains("Ready"), "{out}");
        let uid = env
            .rcl()
            .get("e2e")
            .await
            .expect("get rcl")
            .metadata
            .uid
            .expect("uid");

        env.kubectl
            .ok(&["delete", "rcl", "e2e", "--wait=false"])
            .await;
        let client = env.client.clone();
        let kiab = &env.kiab;
        let r = wait_for("every child gone", WAIT, || {
            let (client, uid) = (client.clone(), uid.clone());
            async move {
                let mut left = Vec::new();
                for (group, version, kind, plural) in [
                    ("apps", "v1", "StatefulSet", "statefulsets"),
                    ("", "v1", "Pod", "pods"),
                    ("", "v1", "Service", "services"),
                    ("", "v1", "ConfigMap", "configmaps"),
                    (
                        "policy",
                        "v1",
                        "PodDisruptionBudget",
                        "poddisruptionbudgets",
                    ),
                ] {
                    let ar = ApiResource {
                        group: group.into(),
                        version: version.into(),
                        api_version: if group.is_empty() {
                            version.into()
                        } else {
                            format!("{group}/{version}")
                        },
                        kind: kind.into(),
                        plural: plural.into(),
                    };
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), "default", &ar);
                    for o in api
                        .list(&ListParams::default())
                        .await
                        .map_err(|e| e.to_string())?
                        .items
                    {
                        let owned = o
                            .metadata
                            .owner_references
                            .iter()
                            .flatten()
                            .any(|r| r.uid == uid);
                        let labelled = o.metadata.labels.as_ref().is_some_and(|l| {
                            l.get("tessera.rs/cluster").map(String::as_str) == Some("e2e")
                        });
                        if owned || labelled {
                            left.push(format!("{kind}/{}", o.metadata.name.unwrap_or_default()));
                        }
                    }
                }
                if left.is_empty() && kiab.live_processes() == 0 {
                    Ok(())
                } else {
                    Err(format!(
                        "left: {left:?}, {} processes",
                        kiab.live_processes()
                    ))
                }
            }
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        env.stop().await;
    });
}

#[test]
fn scale_out_and_in_loses_no_key() {
    serial(async {
        let mut env = Env::start("127.0.12.1", true).await;
        env.apply(&manifest("scale", 3, 1, "")).await;
        env.wait_ready("scale", 3, 6, WAIT).await;
        let ips = pod_ips(&env.client, "scale").await;
        let checker = DataChecker::start(&ips, "scale", 2000).await;

        let t0 = Instant::now();
        let cluster = [("name", "scale")];
        let migrated = |text: &str| {
            metric_value(
                text,
                "tessera_operator_cluster_slots_migrated_total",
                &cluster,
            )
        };
        let before = migrated(&env.operator_metrics().await).expect("slots migrated metric");
        env.kubectl
            .ok(&["scale", "rcl/scale", "--replicas=4"])
            .await;
        // Scrape the operator while the slots move: the migrated count only grows, by the
        // 4096 slots the new shard gets, and the new shard's series show them.
        let mut seen = vec![before];
        let mut last;
        let deadline = Instant::now() + WAIT;
        loop {
            last = env.operator_metrics().await;
            if let Some(v) = migrated(&last) {
                assert!(
                    v >= *seen.last().unwrap(),
                    "slots_migrated went down: {seen:?} then {v}"
                );
                if v != *seen.last().unwrap() {
                    seen.push(v);
                }
            }
            let ready = metric_value(
                &last,
                "tessera_operator_cluster_phase",
                &[("name", "scale"), ("phase", "Ready")],
            ) == Some(1.0);
            let shard3 = metric_value(
                &last,
                "tessera_operator_shard_slots",
                &[("name", "scale"), ("shard", "3")],
            );
            if ready && shard3 == Some(4096.0) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no Ready 4-shard cluster in the metrics:\n{last}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let moved = seen.last().unwrap() - before;
        assert!(moved >= 4096.0, "slots migrated {seen:?}");
        assert_eq!(
            metric_value(
                &last,
                "tessera_operator_cluster_migration_slots_to_move",
                &cluster
            ),
            Some(0.0),
            "no resharding left once Ready"
        );
        eprintln!("3->4: slots_migrated_total {seen:?}");
        env.wait_ready("scale", 4, 8, WAIT).await;
        // kubectl get -o wide shows the lag of the furthest replica.
        let wide = env.kubectl.ok(&["get", "rcl", "scale", "-o", "wide"]).await;
        let mut rows = wide.lines();
        let header: Vec<&str> = rows.next().unwrap_or_default().split_whitespace().collect();
        let row: Vec<&str> = rows.next().unwrap_or_default().split_whitespace().collect();
        let lag_at = header.iter().position(|h| *h == "LAG");
        assert!(lag_at.is_some() && header.contains(&"MIGRATED"), "{wide}");
        let lag = lag_at
            .and_then(|i| row.get(i))
            .and_then(|v| v.parse::<u64>().ok());
        assert!(lag.is_some(), "a lag figure in\n{wide}");
        // Every node pod serves its own /metrics on the port the operator opens (9121).
        let mut slot_keys = 0.0;
        for ip in pod_ips(&env.client, "scale").await {
            let body = metrics_at(&format!("{ip}:9121")).await;
            assert_eq!(
                metric_value(&body, "redis_up", &[]),
                Some(1.0),
                "{ip}:\n{body}"
            );
            assert_eq!(
                metric_value(&body, "redis_cluster_state", &[]),
                Some(1.0),
                "{ip}"
            );
            assert_eq!(
                metric_value(&body, "redis_cluster_known_nodes", &[]),
                Some(8.0),
                "{ip}"
            );
            slot_keys += body
                .lines()
                .filter(|l| l.starts_with("tessera_cluster_slot_range_keys{"))
                .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
                .sum::<f64>();
        }
        assert!(
            slot_keys > 0.0,
            "the masters' slot ranges hold the written keys"
        );
        env.kubectl
            .ok(&[
                "patch",
                "rcl",
                "scale",
                "--type=merge",
                "-p",
                r#"{"spec":{"shards":2}}"#,
            ])
            .await;
        env.wait_ready("scale", 2, 4, WAIT).await;
        let ready = t0.elapsed();

        let ips = pod_ips(&env.client, "scale").await;
        let checked = checker.verify(&ips).await;
        report_scenario("scale 3->4->2", ready, &checked);
        assert!(checked.acked >= 2000, "checked {checked}");
        eprintln!("scale 3→4→2: {checked}");
        assert_eq!(
            checked.failed, 0,
            "scaling promises no failed write: {checked}"
        );
        env.stop().await;
    });
}

/// Pod name and IP of the master of shard 0, from the RedisCluster status.
async fn shard0_master(env: &Env, name: &str) -> Result<(String, String), String> {
    let o = env.rcl().get(name).await.map_err(|e| e.to_string())?;
    let pod = o.data["status"]["shardStatuses"][0]["masterPod"]
        .as_str()
        .ok_or("shard 0 has no master in status")?
        .to_string();
    let p: Pod = Api::<Pod>::default_namespaced(env.client.clone())
        .get(&pod)
        .await
        .map_err(|e| e.to_string())?;
    let ip = pod_ip(&p).ok_or("master pod has no ip")?;
    Ok((pod, ip))
}

#[test]
fn deleted_master_fails_over_and_returns_as_replica() {
    serial(async {
        let mut env = Env::start("127.0.13.1", true).await;
        env.apply(&manifest("fo", 3, 1, "  nodeTimeoutMs: 2000\n"))
            .await;
        env.wait_ready("fo", 3, 6, WAIT).await;
        let ips = pod_ips(&env.client, "fo").await;
        let checker = DataChecker::start(&ips, "fo", 500).await;
        checker.stop.store(true, Ordering::SeqCst);
        let client = env.client.clone();
        wait_for("replicas in sync", WAIT, || {
            replication_in_sync(&client, "fo")
        })
        .await
        .expect("replication in sync");
        let (master_pod, master_ip) = shard0_master(&env, "fo").await.expect("shard 0 master");
        let pod_api: Api<Pod> = Api::default_namespaced(env.client.clone());
        let old_uid = pod_api.get(&master_pod).await.expect("pod").metadata.uid;

        let t0 = Instant::now();
        env.kubectl
            .ok(&["delete", "pod", &master_pod, "--wait=false"])
            .await;
        // The pod comes back under the same name with a new address...
        let new_ip = wait_for("master pod recreated", WAIT, || async {
            let p = pod_api.get(&master_pod).await.map_err(|e| e.to_string())?;
            match pod_ip(&p) {
                Some(ip) if p.metadata.uid != old_uid && is_ready(&p) => Ok(ip),
                _ => Err("not yet".into()),
            }
        })
        .await
        .expect("recreated");
        assert_ne!(new_ip, master_ip, "a recreated pod gets a new address");
        // ...and rejoins as a replica of the promoted master; the old address is forgotten.
        let r = wait_for("recreated pod rejoins as a replica", WAIT, || async {
            let (now_master, now_master_ip) = shard0_master(&env, "fo").await?;
            if now_master == master_pod {
                return Err("shard 0 has not failed over".into());
            }
            let nodes = cluster_nodes(&now_master_ip).await?;
            let master_id = nodes
                .lines()
                .find(|l| l.contains("myself"))
                .and_then(|l| l.split_whitespace().next())
                .ok_or("no myself line")?;
            let line = nodes
                .lines()
                .find(|l| l.contains(&format!("{new_ip}:6379")))
                .ok_or_else(|| format!("{new_ip} not in CLUSTER NODES:\n{nodes}"))?;
            if !(line.contains("slave") && line.contains(master_id)) {
                return Err(format!("not yet a replica of {master_id}: {line}"));
            }
            if nodes.contains(&format!("{master_ip}:6379")) {
                return Err(format!("old address still known:\n{nodes}"));
            }
            Ok(())
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        env.wait_ready("fo", 3, 6, WAIT).await;
        let ready = t0.elapsed();
        let ips = pod_ips(&env.client, "fo").await;
        let checked = checker.verify(&ips).await;
        report_scenario("delete one master pod", ready, &checked);
        eprintln!("failover: of the writes before the master was deleted, {checked}");
        env.stop().await;
    });
}

#[test]
/// Deletes all six pods at once. The recovery time is measured and printed, not asserted:
/// a deadline would be timing-fragile on a loaded 2-core CI machine.
fn deleting_every_pod_recovers() {
    serial(async {
        let mut env = Env::start("127.0.14.1", true).await;
        env.apply(&manifest("all", 3, 1, "  nodeTimeoutMs: 2000\n"))
            .await;
        env.wait_ready("all", 3, 6, WAIT).await;
        let before: Vec<String> = pods(&env.client, "default", "tessera.rs/cluster=all")
            .await
            .expect("pods")
            .into_iter()
            .filter_map(|p| p.metadata.uid)
            .collect();
        let t0 = Instant::now();
        env.kubectl
            .ok(&[
                "delete",
                "pods",
                "-l",
                "tessera.rs/cluster=all",
                "--wait=false",
            ])
            .await;
        let client = env.client.clone();
        let r = wait_for(
            "cluster OK after deleting every pod",
            Duration::from_secs(180),
            || async {
                let ps = pods(&client, "default", "tessera.rs/cluster=all").await?;
                if ps
                    .iter()
                    .any(|p| p.metadata.uid.as_ref().is_some_and(|u| before.contains(u)))
                {
                    return Err("old pods still present".into());
                }
                cluster_ok(&client, "all", 6).await
            },
        )
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        eprintln!(
            "every pod deleted → cluster_state ok on 6 new pods after {:?}",
            t0.elapsed()
        );
        env.stop().await;
    });
}

/// A 3x1 cluster on a reference server image becomes Ready and keeps every acknowledged key.
async fn reference_server_serves(image: &str, ip_base: &str, name: &str) {
    let mut env = Env::start(ip_base, true).await;
    env.apply(&manifest_on(Some(image), name, 3, 1, "")).await;
    env.wait_ready(name, 3, 6, WAIT).await;
    let ips = pod_ips(&env.client, name).await;
    let version = {
        let mut c = node(&ips[0]).await.expect("node");
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut c)
            .await
            .expect("INFO server");
        // valkey reports a compatibility redis_version too; its own version line wins.
        ["valkey_version:", "redis_version:"]
            .iter()
            .find_map(|k| info.lines().find(|l| l.starts_with(k)))
            .unwrap_or("no version line")
            .to_string()
    };
    let checker = DataChecker::start(&ips, name, 300).await;
    let checked = checker.verify(&ips).await;
    assert!(checked.acked >= 300, "checked {checked}");
    eprintln!("{image} ({version}): 3x1 Ready, {checked}");
    env.stop().await;
}

#[test]
fn operator_drives_valkey_server_pods() {
    serial(reference_server_serves(
        VALKEY_IMAGE,
        "127.0.18.1",
        "onvalkey",
    ));
}
