//! The kiab API server driven by a real kube-rs client (as the operator uses it): CRUD,
//! conflicts, watch and watcher(), 410 Gone, subresources, server-side apply, finalizers and
//! owner-reference garbage collection.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;
use serde_json::json;
use tessera_tests::kiab::api::testing::{eventually, kube_client, start};

fn api_err(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other}"),
    }
}

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}
    }))
    .expect("valid configmap")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_conflict_selectors_and_dry_run() {
    let h = start().await;
    let client = kube_client(&h).await.expect("client");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();

    let a = cms
        .create(&pp, &cm("a", json!({"app": "x", "tier": "1"})))
        .await
        .expect("create a");
    assert!(a.metadata.uid.is_some() && a.metadata.creation_timestamp.is_some());
    cms.create(&pp, &cm("b", json!({"app": "y"})))
        .await
        .expect("create b");
    let e = api_err(
        cms.create(&pp, &cm("a", json!({})))
            .await
            .expect_err("duplicate"),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));

    let names = |l: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        l.items.iter().map(|c| c.name_any()).collect()
    };
    assert_eq!(
        names(
            cms.list(&ListParams::default().labels("app=x"))
                .await
                .expect("list")
        ),
        ["a"]
    );
    assert_eq!(
        names(
            cms.list(&ListParams::default().labels("app in (x,y),tier notin (1)"))
                .await
                .expect("list")
        ),
        ["b"]
    );
    assert_eq!(
        names(
            cms.list(&ListParams::default().labels("!tier"))
                .await
                .expect("list")
        ),
        ["b"]
    );
    assert_eq!(
        names(
            cms.list(&ListParams::default().fields("metadata.name=b"))
                .await
                .expect("list")
        ),
        ["b"]
    );

    // Optimistic concurrency: replacing with a stale resourceVersion is a 409 Conflict.
    let mut fresh = cms.get("a").await.expect("get");
    fresh.data = Some([("k".to_string(), "v2".to_string())].into());
    let updated = cms.replace("a", &pp, &fresh).await.expect("replace");
    assert_ne!(updated.resource_version(), a.resource_version());
    let e = api_err(cms.replace("a", &pp, &fresh).await.expect_err("stale"));
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(
        e.message.contains("the object has been modified"),
        "{}",
        e.message
    );

    // Patches: merge, JSON, strategic.
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"m": "1"}})),
    )
    .await
    .expect("merge");
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "add", "path": "/data/j", "value": "2"}]))
                .expect("patch"),
        ),
    )
    .await
    .expect("json");
    let s = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"data": {"k": null}})),
        )
        .await
        .expect("strategic");
    let data = s.data.clone().unwrap_or_default();
    assert_eq!(
        (
            data.get("m").map(String::as_str),
            data.get("j").map(String::as_str),
            data.get("k")
        ),
        (Some("1"), Some("2"), None)
    );

    // A no-op patch does not bump the resourceVersion (controllers rely on this to settle).
    let again = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"m": "1"}})),
        )
        .await
        .expect("noop");
    assert_eq!(again.resource_version(), s.resource_version());

    // Dry run: validated and returned, not stored.
    cms.create(
        &PostParams {
            dry_run: true,
            ..Default::default()
        },
        &cm("dry", json!({})),
    )
    .await
    .expect("dry run");
    assert!(cms.get_opt("dry").await.expect("get_opt").is_none());

    let e = api_err(cms.get("nope").await.expect_err("missing"));
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, "configmaps \"nope\" not found");
    let e = api_err(
        Api::<ConfigMap>::namespaced(client, "nowhere")
            .create(&pp, &cm("c", json!({})))
            .await
            .expect_err("no ns"),
    );
    assert_eq!(e.code, 404);

    cms.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(cms.get_opt("a").await.expect("get_opt").is_none());
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_streams_events_and_old_versions_are_gone() {
    let h = start().await;
    let client = kube_client(&h).await.expect("client");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    cms.create(&pp, &cm("before", json!({"w": "1"})))
        .await
        .expect("create");

    let mut stream = watcher(cms.clone(), watcher::Config::default().labels("w=1"))
        .applied_objects()
        .boxed();
    let first = tokio::time::timeout(std::time::Duration::from_secs(30), stream.try_next()).await;
    assert_eq!(
        first
            .expect("in time")
            .expect("ok")
            .map(|c| c.name_any())
            .as_deref(),
        Some("before")
    );

    cms.create(&pp, &cm("after", json!({"w": "1"})))
        .await
        .expect("create");
    cms.create(&pp, &cm("unlabelled", json!({})))
        .await
        .expect("create");
    cms.patch(
        "after",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"x": "y"}})),
    )
    .await
    .expect("patch");
    let mut seen = vec![];
    while seen.len() < 2 {
        let ev = tokio::time::timeout(std::time::Duration::from_secs(30), stream.try_next()).await;
        let obj = ev.expect("in time").expect("ok").expect("stream open");
        seen.push((
            obj.name_any(),
            obj.data.unwrap_or_default().get("x").cloned(),
        ));
    }
    assert_eq!(
        seen,
        [
            ("after".to_string(), None),
            ("after".to_string(), Some("y".to_string()))
        ]
    );

    // The streaming-list initial mode (sendInitialEvents + the initial-events-end bookmark).
    let mut streaming = watcher(
        cms.clone(),
        watcher::Config::default().labels("w=1").streaming_lists(),
    )
    .applied_objects()
    .boxed();
    let mut names = vec![];
    while names.len() < 2 {
        let ev =
            tokio::time::timeout(std::time::Duration::from_secs(30), streaming.try_next()).await;
        names.push(ev.expect("in time").expect("ok").expect("open").name_any());
    }
    names.sort();
    assert_eq!(names, ["after", "before"]);

    // A raw watch from an old resourceVersion: events after it arrive in order, with DELETED.
    let rv = cms
        .get("after")
        .await
        .expect("get")
        .resource_version()
        .expect("rv");
    cms.delete("after", &DeleteParams::default())
        .await
        .expect("delete");
    let mut raw = cms
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .expect("watch")
        .boxed();
    match tokio::time::timeout(std::time::Duration::from_secs(30), raw.try_next()).await {
        Ok(Ok(Some(WatchEvent::Deleted(o)))) => assert_eq!(o.name_any(), "after"),
        other => panic!("expected DELETED, got {other:?}"),
    }

    // After compaction that resourceVersion is too old: 410 Gone, as etcd compaction causes.
    h.store().compact();
    let mut raw = cms
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .expect("watch")
        .boxed();
    match tokio::time::timeout(std::time::Duration::from_secs(30), raw.try_next()).await {
        Ok(Ok(Some(WatchEvent::Error(e)))) => assert_eq!(e.code, 410),
        other => panic!("expected a 410 error event, got {other:?}"),
    }
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_status_scale_and_server_side_apply() {
    let h = start().await;
    let client = kube_client(&h).await.expect("client");
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let manifest = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "labels": {"a": "1", "b": "2"}},
        "spec": {"replicas": 2, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "redis:7.0"}]}}}
    });
    let ssa = PatchParams::apply("tessera-operator");
    let s = sts
        .patch("web", &ssa, &Patch::Apply(&manifest))
        .await
        .expect("apply creates");
    assert_eq!(s.metadata.generation, Some(1));
    let mf = s.metadata.managed_fields.clone().unwrap_or_default();
    assert!(
        mf.iter()
            .any(|m| m.manager.as_deref() == Some("tessera-operator")
                && m.operation.as_deref() == Some("Apply")),
        "{mf:?}"
    );

    // Status changes through /status leave generation alone; spec changes bump it.
    let st = sts
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 2, "readyReplicas": 1}})),
        )
        .await
        .expect("status");
    assert_eq!(
        (
            st.metadata.generation,
            st.status.as_ref().and_then(|s| s.ready_replicas)
        ),
        (Some(1), Some(1))
    );
    // ... and status sent to the main endpoint is ignored.
    let ig = sts
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"readyReplicas": 9}})),
        )
        .await
        .expect("patch");
    assert_eq!(ig.status.and_then(|s| s.ready_replicas), Some(1));

    // Scale subresource.
    let sc = sts.get_scale("web").await.expect("scale");
    assert_eq!(sc.spec.and_then(|s| s.replicas), Some(2));
    sts.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .expect("patch scale");
    let s = sts.get("web").await.expect("get");
    assert_eq!(
        (
            s.spec.as_ref().and_then(|x| x.replicas),
            s.metadata.generation
        ),
        (Some(4), Some(2))
    );

    // Re-applying without the field another manager now owns conflicts; force wins.
    let e = api_err(
        sts.patch("web", &ssa, &Patch::Apply(&manifest))
            .await
            .expect_err("conflict"),
    );
    assert_eq!(e.code, 409);
    assert!(e.message.contains(".spec.replicas"), "{}", e.message);
    let mut dropped = manifest.clone();
    dropped["metadata"]["labels"] = json!({"a": "1"});
    let s = sts
        .patch("web", &ssa.clone().force(), &Patch::Apply(&dropped))
        .await
        .expect("forced apply");
    assert_eq!(s.spec.as_ref().and_then(|x| x.replicas), Some(2));
    // The label this manager stopped applying is removed.
    assert_eq!(s.labels().get("b"), None);
    assert_eq!(s.labels().get("a").map(String::as_str), Some("1"));

    // Leases as leader election uses them: create, then replace with the read resourceVersion.
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let l: Lease = serde_json::from_value(json!({"metadata": {"name": "tessera-operator"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})).expect("lease");
    let mut l = leases
        .create(&PostParams::default(), &l)
        .await
        .expect("lease create");
    if let Some(spec) = l.spec.as_mut() {
        spec.holder_identity = Some("b".into());
    }
    let l2 = leases
        .replace("tessera-operator", &PostParams::default(), &l)
        .await
        .expect("renew");
    assert_eq!(
        l2.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("b")
    );
    assert_eq!(
        api_err(
            leases
                .replace("tessera-operator", &PostParams::default(), &l)
                .await
                .expect_err("stale")
        )
        .code,
        409
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_and_owner_reference_garbage_collection() {
    let h = start().await;
    let client = kube_client(&h).await.expect("client");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();

    // Finalizers hold a deleted object until they are removed.
    let mut held = cm("held", json!({}));
    held.metadata.finalizers = Some(vec!["tessera.rs/test".into()]);
    cms.create(&pp, &held).await.expect("create");
    cms.delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    let o = cms.get("held").await.expect("still there");
    assert!(o.metadata.deletion_timestamp.is_some());
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("unfinalize");
    assert!(cms.get_opt("held").await.expect("get_opt").is_none());

    // Background propagation: dependents go after their owner.
    let owner = cms
        .create(&pp, &cm("owner", json!({})))
        .await
        .expect("owner");
    let oref = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.uid(), "controller": true, "blockOwnerDeletion": true}]);
    for n in ["dep1", "dep2"] {
        let mut d = cm(n, json!({}));
        d.metadata.owner_references = Some(serde_json::from_value(oref.clone()).expect("refs"));
        cms.create(&pp, &d).await.expect("dependent");
    }
    cms.delete("owner", &DeleteParams::default())
        .await
        .expect("delete owner");
    let gone = eventually(20, || async {
        let l = cms.list(&ListParams::default()).await.ok()?;
        l.items
            .iter()
            .all(|c| !c.name_any().starts_with("dep"))
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "dependents were not garbage collected");

    // Foreground propagation: the owner waits (deletionTimestamp set) for a held dependent.
    let owner = cms.create(&pp, &cm("fg", json!({}))).await.expect("owner");
    let mut d = cm("fg-dep", json!({}));
    d.metadata.owner_references = Some(
        serde_json::from_value(
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "fg", "uid": owner.uid()}]),
        )
        .expect("refs"),
    );
    d.metadata.finalizers = Some(vec!["tessera.rs/test".into()]);
    cms.create(&pp, &d).await.expect("dependent");
    cms.delete("fg", &DeleteParams::foreground())
        .await
        .expect("delete fg");
    let marked = eventually(20, || async {
        cms.get_opt("fg-dep")
            .await
            .ok()??
            .metadata
            .deletion_timestamp
            .map(|_| ())
    })
    .await;
    assert!(marked.is_some(), "dependent not marked for deletion");
    assert!(cms
        .get("fg")
        .await
        .expect("owner waits")
        .metadata
        .deletion_timestamp
        .is_some());
    cms.patch(
        "fg-dep",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    let gone = eventually(20, || async {
        cms.get_opt("fg").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "foreground owner not deleted after its dependents"
    );

    // Pods on a node are deleted gracefully: marked, then removed by a zero-grace delete.
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"nodeName": "kiab", "containers": [{"name": "c", "image": "redis:7.0"}]}})).expect("pod");
    pods.create(&pp, &p).await.expect("pod");
    pods.delete("p", &DeleteParams::default())
        .await
        .expect("delete pod");
    let p = pods.get("p").await.expect("terminating pod stays");
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(30));
    pods.delete(
        "p",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .expect("force");
    assert!(pods.get_opt("p").await.expect("get_opt").is_none());
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_dir_snapshot_survives_a_restart() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    use tessera_tests::kiab::api::{serve, testing::FIXTURE_CRD};

    let dir = tempfile::tempdir().expect("tempdir");
    let h = serve(([127, 0, 0, 1], 0).into(), Some(dir.path().to_path_buf()))
        .await
        .expect("serve");
    let client = kube_client(&h).await.expect("client");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(
        &PostParams::default(),
        &serde_yaml::from_str(FIXTURE_CRD).expect("crd"),
    )
    .await
    .expect("crd");
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tessera.rs", "v1alpha1", "RedisCluster"),
        "redisclusters",
    );
    let rcs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let obj = serde_json::from_value(json!({"apiVersion": "tessera.rs/v1alpha1", "kind": "RedisCluster", "metadata": {"name": "kept"}, "spec": {"shards": 2}})).expect("obj");
    let before = rcs
        .create(&PostParams::default(), &obj)
        .await
        .expect("create");
    h.shutdown().await;
    assert!(dir.path().join("store.json").is_file());

    let h = serve(([127, 0, 0, 1], 0).into(), Some(dir.path().to_path_buf()))
        .await
        .expect("restart");
    let client = kube_client(&h).await.expect("client");
    let rcs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let after = rcs
        .get("kept")
        .await
        .expect("custom object survived, its kind re-registered");
    assert_eq!(
        (after.uid(), after.data["spec"]["shards"].as_i64()),
        (before.uid(), Some(2))
    );
    let cm = Api::<ConfigMap>::namespaced(client, "default")
        .create(&PostParams::default(), &cm("new", json!({})))
        .await
        .expect("create");
    let (old_rv, new_rv): (u64, u64) = (
        before
            .resource_version()
            .and_then(|r| r.parse().ok())
            .expect("rv"),
        cm.resource_version()
            .and_then(|r| r.parse().ok())
            .expect("rv"),
    );
    assert!(
        new_rv > old_rv,
        "resourceVersion continues after a restart ({new_rv} > {old_rv})"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disruption_budget_status_and_eviction() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use kube::api::EvictParams;

    let h = start().await;
    let client = tessera_tests::kiab::api::testing::kube_client_with(&h, false)
        .await
        .expect("client");
    let pp = PostParams::default();
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let owner: StatefulSet = serde_json::from_value(json!({"metadata": {"name": "db"}, "spec": {
        "replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "redis:7.0"}]}}}}))
    .expect("sts");
    let owner = sts.create(&pp, &owner).await.expect("owner");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for i in 0..3 {
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": format!("db-{i}"), "labels": {"app": "db"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": owner.uid(), "controller": true}]},
            "spec": {"nodeName": "kiab", "containers": [{"name": "c", "image": "redis:7.0"}]}}))
        .expect("pod");
        pods.create(&pp, &p).await.expect("pod");
        pods.patch_status(&format!("db-{i}"), &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})))
            .await
            .expect("ready");
    }
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client, "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "db"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "db"}}}})).expect("pdb");
    pdbs.create(&pp, &pdb).await.expect("pdb");
    let allowed = |n: i32| {
        let pdbs = pdbs.clone();
        async move {
            eventually(20, || async {
                let s = pdbs.get("db").await.ok()?.status?;
                (s.disruptions_allowed == n).then_some((
                    s.expected_pods,
                    s.current_healthy,
                    s.desired_healthy,
                ))
            })
            .await
        }
    };
    assert_eq!(allowed(1).await, Some((3, 3, 2)));
    pods.evict("db-0", &EvictParams::default())
        .await
        .expect("first eviction allowed");
    assert!(pods
        .get("db-0")
        .await
        .expect("terminating")
        .metadata
        .deletion_timestamp
        .is_some());
    let e = api_err(
        pods.evict("db-1", &EvictParams::default())
            .await
            .expect_err("budget exhausted"),
    );
    assert_eq!((e.code, e.reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(allowed(0).await, Some((3, 2, 2)));
    h.shutdown().await;
}
