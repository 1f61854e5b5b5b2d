//! Issue 16: `spec.storage.size` can grow (kube-in-a-box, the real operator binary and kubectl,
//! tessera-node pods, a writer running throughout). The operator patches every claim to the
//! new size and recreates each StatefulSet with orphan deletion (volume claim templates are
//! immutable); the pods keep running and are adopted by the new StatefulSets.

mod e2e_common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::ListParams;
use kube::Api;
use tessera_tests::kiab::testkit::wait_for;

use e2e_common::*;

/// Bound on the cluster reaching Ready again.
const READY_WITHIN: Duration = Duration::from_secs(180);

/// Pod name -> (uid, total container restarts).
async fn pods_by_name(client: &kube::Client, name: &str) -> Vec<(String, String, i32)> {
    let mut out: Vec<_> = tessera_tests::kiab::testkit::pods(
        client,
        "default",
        &format!("tessera.rs/cluster={name}"),
    )
    .await
    .unwrap_or_default()
    .into_iter()
    .map(|p| {
        let restarts = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map(|cs| cs.iter().map(|c| c.restart_count).sum())
            .unwrap_or(0);
        (
            p.metadata.name.unwrap_or_default(),
            p.metadata.uid.unwrap_or_default(),
            restarts,
        )
    })
    .collect();
    out.sort();
    out
}

/// (name, requested size, capacity) of every claim of cluster `name`.
async fn claims(
    client: &kube::Client,
    name: &str,
) -> Result<Vec<(String, String, String)>, String> {
    let api: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
    let list = api
        .list(&ListParams::default().labels(&format!("tessera.rs/cluster={name}")))
        .await
        .map_err(|e| e.to_string())?;
    let mut out: Vec<_> = list
        .items
        .into_iter()
        .map(|c| {
            let req = c
                .spec
                .and_then(|s| s.resources)
                .and_then(|r| r.requests)
                .and_then(|r| r.get("storage").map(|q| q.0.clone()))
                .unwrap_or_default();
            let cap = c
                .status
                .and_then(|s| s.capacity)
                .and_then(|r| r.get("storage").map(|q| q.0.clone()))
                .unwrap_or_default();
            (c.metadata.name.unwrap_or_default(), req, cap)
        })
        .collect();
    out.sort();
    Ok(out)
}

/// (name, uid, claim template size) of every StatefulSet of cluster `name`.
async fn stateful_sets(client: &kube::Client, name: &str) -> Vec<(String, String, String)> {
    let api: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let list = api
        .list(&ListParams::default().labels(&format!("tessera.rs/cluster={name}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut out: Vec<_> = list
        .into_iter()
        .map(|s| {
            let size = s
                .spec
                .and_then(|s| s.volume_claim_templates)
                .and_then(|t| t.into_iter().next())
                .and_then(|t| t.spec)
                .and_then(|s| s.resources)
                .and_then(|r| r.requests)
                .and_then(|r| r.get("storage").map(|q| q.0.clone()))
                .unwrap_or_default();
            (
                s.metadata.name.unwrap_or_default(),
                s.metadata.uid.unwrap_or_default(),
                size,
            )
        })
        .collect();
    out.sort();
    out
}

/// 3x1 with `storage: 1Gi`, then 2Gi with the writer running: Ready again, every claim
/// requested and provisioned at 2Gi, every StatefulSet recreated with the 2Gi template, no
/// pod replaced or restarted, every replica in sync, 0 lost and 0 failed writes. A shrink
/// back to 1Gi is refused by the CRD.
#[test]
fn storage_size_grows_without_restarting_pods() {
    serial(async {
        let name = "grow";
        let mut env = Env::start("127.0.31.1", true).await;
        let extra = "  nodeTimeoutMs: 2000\n  storage:\n    size: 1Gi\n";
        env.apply(&manifest(name, 3, 1, extra)).await;
        env.wait_ready(name, 3, 6, WAIT).await;
        let ips = pod_ips(&env.client, name).await;
        let checker = DataChecker::start(&ips, name, 300).await;
        let pods_before = pods_by_name(&env.client, name).await;
        let sts_before = stateful_sets(&env.client, name).await;
        assert_eq!(pods_before.len(), 6, "{pods_before:?}");
        assert_eq!(sts_before.len(), 3, "{sts_before:?}");

        let t0 = Instant::now();
        let r = env
            .kubectl
            .run_with(
                &[
                    "patch",
                    "rcl",
                    name,
                    "--type=merge",
                    "-p",
                    r#"{"spec":{"storage":{"size":"2Gi"}}}"#,
                ],
                None,
                Duration::from_secs(60),
            )
            .await;
        assert!(r.ok, "storage.size may grow: {}", r.stderr);
        let client = env.client.clone();
        let r = wait_for("claims and StatefulSets at 2Gi", READY_WITHIN, || {
            let client = client.clone();
            async move {
                let c = claims(&client, name).await?;
                let at_2gi = c
                    .iter()
                    .filter(|(_, req, cap)| req == "2Gi" && cap == "2Gi");
                if c.len() != 6 || at_2gi.count() != 6 {
                    return Err(format!("claims {c:?}"));
                }
                let s = stateful_sets(&client, name).await;
                if s.len() != 3 || s.iter().any(|(_, _, size)| size != "2Gi") {
                    return Err(format!("statefulsets {s:?}"));
                }
                Ok(())
            }
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        env.wait_ready(name, 3, 6, READY_WITHIN).await;
        let to_ready = t0.elapsed();
        // The writer stops first: replicas catch up with a master that takes no more writes.
        checker.stop.store(true, Ordering::SeqCst);
        let r = wait_for("replicas linked and in sync", READY_WITHIN, || {
            replicas_linked(&client, name, 3, 1)
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        // The orphaned pods were adopted: owned by the new StatefulSets.
        let sts_after = stateful_sets(&env.client, name).await;
        for ((n, before, _), (_, after, _)) in sts_before.iter().zip(&sts_after) {
            assert_ne!(before, after, "{n} was not recreated");
        }
        let pods = tessera_tests::kiab::testkit::pods(
            &env.client,
            "default",
            &format!("tessera.rs/cluster={name}"),
        )
        .await
        .unwrap_or_default();
        for p in &pods {
            let owner = p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone());
            assert!(
                sts_after
                    .iter()
                    .any(|(_, uid, _)| Some(uid) == owner.as_ref()),
                "{:?} not owned by a new StatefulSet: {owner:?}",
                p.metadata.name
            );
        }
        let pods_after = pods_by_name(&env.client, name).await;
        assert_eq!(pods_before, pods_after, "no pod replaced or restarted");
        let events = env
            .kubectl
            .ok(&[
                "get",
                "events",
                "--field-selector",
                "reason=StorageExpanded",
            ])
            .await;
        for shard in 0..3 {
            assert!(events.contains(&format!("{name}-{shard}:")), "{events}");
        }

        // A claim cannot shrink: the CRD refuses it.
        let r = env
            .kubectl
            .run_with(
                &[
                    "patch",
                    "rcl",
                    name,
                    "--type=merge",
                    "-p",
                    r#"{"spec":{"storage":{"size":"1Gi"}}}"#,
                ],
                None,
                Duration::from_secs(60),
            )
            .await;
        assert!(!r.ok, "storage.size may not shrink");
        assert!(r.stderr.contains("can only grow"), "{}", r.stderr);

        let ips = pod_ips(&env.client, name).await;
        let tally = checker.verify(&ips).await;
        eprintln!("storage 1Gi -> 2Gi Ready after {to_ready:?}; {tally}");
        report_scenario("storage size increase", to_ready, &tally);
        assert!(tally.acked >= 300, "{tally}");
        assert_eq!(
            tally.failed, 0,
            "growing storage promises no failed write: {tally}"
        );
        env.stop().await;
    });
}

/// kube-in-a-box refuses what the real API server refuses, so that the scenario above proves
/// the operator's orphan-and-recreate: a StatefulSet's volume claim templates cannot change,
/// and a claim's spec cannot change but for a request that does not shrink.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kiab_refuses_claim_template_changes_and_claim_shrinks() {
    use kube::api::{Patch, PatchParams, PostParams};
    use serde_json::json;
    use tessera_tests::kiab::api::testing::{kube_client, start};

    let h = start().await;
    let client = kube_client(&h).await.expect("client");
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let sts: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "s"},
        "spec": {
            "replicas": 1, "serviceName": "s",
            "selector": {"matchLabels": {"app": "s"}},
            "template": {"metadata": {"labels": {"app": "s"}},
                         "spec": {"containers": [{"name": "c", "image": "redis:7"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}}}]
        }
    }))
    .expect("statefulset");
    sts_api
        .create(&PostParams::default(), &sts)
        .await
        .expect("create statefulset");
    let merge = |v: serde_json::Value| Patch::Merge(v);
    let grown = json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "2Gi"}}}}]}});
    match sts_api
        .patch("s", &PatchParams::default(), &merge(grown))
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            assert!(
                e.message
                    .contains("updates to statefulset spec for fields other than"),
                "{}",
                e.message
            );
        }
        other => panic!("a claim template change must be refused: {other:?}"),
    }
    sts_api
        .patch(
            "s",
            &PatchParams::default(),
            &merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .expect("replicas may change");

    let pvc_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-s-0"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("claim");
    pvc_api
        .create(&PostParams::default(), &pvc)
        .await
        .expect("create claim");
    let request =
        |size: &str| merge(json!({"spec": {"resources": {"requests": {"storage": size}}}}));
    pvc_api
        .patch("data-s-0", &PatchParams::default(), &request("2Gi"))
        .await
        .expect("a claim may grow");
    let refused = |r: Result<PersistentVolumeClaim, kube::Error>| match r {
        Err(kube::Error::Api(e)) => (e.code, e.message),
        other => panic!("expected a refusal: {other:?}"),
    };
    let (code, msg) = refused(
        pvc_api
            .patch("data-s-0", &PatchParams::default(), &request("1536Mi"))
            .await,
    );
    assert_eq!(code, 422);
    assert!(msg.contains("can not be less than previous value"), "{msg}");
    let (code, msg) = refused(
        pvc_api
            .patch(
                "data-s-0",
                &PatchParams::default(),
                &merge(json!({"spec": {"storageClassName": "fast"}})),
            )
            .await,
    );
    assert_eq!(code, 422);
    assert!(msg.contains("spec is immutable after creation"), "{msg}");
    h.shutdown().await;
}
