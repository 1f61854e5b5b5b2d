//! End-to-end rolling restarts: a pod template change (spec.config) rolls every pod, the
//! operator failing masters over first, with kube-in-a-box, the real operator binary and
//! kubectl (see e2e_operator.rs for the setup), on tessera-node pods.

mod e2e_common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;
use tessera_tests::kiab::testkit::{pod_ip, pods, wait_for};

use e2e_common::*;

/// A 3x1 roll with a writer running: every master is failed over (CLUSTER FAILOVER, the
/// master pausing writes) before its restart, and no acknowledged write is lost.
#[test]
fn config_change_rolls_every_pod_without_losing_writes() {
    serial(async {
        let mut env = Env::start("127.0.15.1", true).await;
        env.apply(&manifest_on(None, "roll", 3, 1, "")).await;
        env.wait_ready("roll", 3, 6, WAIT).await;
        let ips = pod_ips(&env.client, "roll").await;
        let checker = DataChecker::start(&ips, "roll", 1000).await;
        let before: Vec<String> = pods(&env.client, "default", "tessera.rs/cluster=roll")
            .await
            .expect("pods")
            .into_iter()
            .filter_map(|p| p.metadata.uid)
            .collect();
        assert_eq!(before.len(), 6);

        let t0 = Instant::now();
        env.kubectl
            .ok(&[
                "patch",
                "rcl",
                "roll",
                "--type=merge",
                "-p",
                r#"{"spec":{"config":{"maxmemory-policy":"allkeys-lru"}}}"#,
            ])
            .await;
        // Every pod replaced (one at a time, by the operator) and running the new config.
        let client = env.client.clone();
        let r = wait_for(
            "every pod restarted with the new config",
            Duration::from_secs(600),
            || async {
                let ps = pods(&client, "default", "tessera.rs/cluster=roll").await?;
                let old = ps
                    .iter()
                    .filter(|p| p.metadata.uid.as_ref().is_some_and(|u| before.contains(u)))
                    .count();
                if old > 0 {
                    return Err(format!("{old} pods not restarted yet"));
                }
                for p in &ps {
                    let ip = pod_ip(p).ok_or("no ip")?;
                    let policy = config_get(&ip, "maxmemory-policy").await?;
                    if policy != "allkeys-lru" {
                        return Err(format!("{ip}: maxmemory-policy {policy}"));
                    }
                }
                cluster_ok(&client, "roll", 6).await
            },
        )
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let took = t0.elapsed();
        env.wait_ready("roll", 3, 6, WAIT).await;
        let st = env.rcl().get("roll").await.expect("rcl").data["status"].clone();
        for s in st["shardStatuses"].as_array().expect("shard statuses") {
            assert!(
                s.get("staleConfigPods")
                    .and_then(Value::as_array)
                    .is_none_or(|a| a.is_empty()),
                "{s}"
            );
        }
        let events = env
            .kubectl
            .ok(&["get", "events", "--field-selector", "reason=RollingRestart"])
            .await;
        assert!(events.contains("failing over shard"), "{events}");

        let ips = pod_ips(&env.client, "roll").await;
        let checked = checker.verify(&ips).await;
        assert_eq!(
            checked.failed, 0,
            "a rolling restart promises no failed write: {checked}"
        );
        let check = tokio::process::Command::new("redis-cli")
            .args(["--cluster", "check", &format!("{}:6379", ips[0])])
            .output()
            .await
            .expect("redis-cli");
        let out = String::from_utf8_lossy(&check.stdout);
        assert!(
            check.status.success() && out.contains("[OK] All 16384 slots covered"),
            "redis-cli --cluster check:\n{out}"
        );
        eprintln!("rolling restart of 3x1 (6 pods) took {took:?}; {checked}");
        env.stop().await;
    });
}

#[test]
fn config_change_restarts_lone_masters_on_their_volumes() {
    serial(async {
        let mut env = Env::start("127.0.16.1", true).await;
        env.apply(&manifest("lone", 3, 0, "  storage:\n    size: 1Gi\n"))
            .await;
        env.wait_ready("lone", 3, 3, WAIT).await;
        let ips = pod_ips(&env.client, "lone").await;
        let checker = DataChecker::start(&ips, "lone", 300).await;
        checker.stop.store(true, Ordering::SeqCst);
        let ids_before = node_ids(&ips).await;
        let before: Vec<String> = pods(&env.client, "default", "tessera.rs/cluster=lone")
            .await
            .expect("pods")
            .into_iter()
            .filter_map(|p| p.metadata.uid)
            .collect();

        env.kubectl
            .ok(&[
                "patch",
                "rcl",
                "lone",
                "--type=merge",
                "-p",
                r#"{"spec":{"config":{"maxmemory-policy":"allkeys-lru"}}}"#,
            ])
            .await;
        let client = env.client.clone();
        let r = wait_for("every lone master restarted", WAIT, || async {
            let ps = pods(&client, "default", "tessera.rs/cluster=lone").await?;
            if ps
                .iter()
                .any(|p| p.metadata.uid.as_ref().is_some_and(|u| before.contains(u)))
            {
                return Err("old pods left".into());
            }
            for p in &ps {
                let ip = pod_ip(p).ok_or("no ip")?;
                if config_get(&ip, "maxmemory-policy").await? != "allkeys-lru" {
                    return Err(format!("{ip}: old config"));
                }
            }
            cluster_ok(&client, "lone", 3).await
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        env.wait_ready("lone", 3, 3, WAIT).await;
        // Same node ids (nodes.conf on the volume), every key back (AOF on the volume).
        let ips = pod_ips(&env.client, "lone").await;
        assert_eq!(node_ids(&ips).await, ids_before);
        let checked = checker.verify(&ips).await;
        let events = env
            .kubectl
            .ok(&["get", "events", "--field-selector", "type=Warning"])
            .await;
        assert!(events.contains("has no replica"), "{events}");
        eprintln!("3 lone masters restarted on their volumes: same ids, {checked}");
        env.stop().await;
    });
}
