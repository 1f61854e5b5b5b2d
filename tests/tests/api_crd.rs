//! CustomResourceDefinitions on the kiab API server: registering a kind by applying a CRD,
//! schema defaults/pruning/validation with the real server's messages, status and scale
//! subresources, printer columns — through kubectl and kube-rs. Uses the fixture CRD in
//! `testing::FIXTURE_CRD`, and the operator's generated CRD when crds/ has it.

use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{json, Value};
use std::path::Path;
use tessera_tests::kiab::api::testing::{
    kube_client, kubectl_binaries, start, Kubectl, FIXTURE_CRD,
};

fn rc_api(client: kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tessera.rs", "v1alpha1", "RedisCluster"),
        "redisclusters",
    );
    Api::namespaced_with(client, "default", &ar)
}

fn rc(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "tessera.rs/v1alpha1", "kind": "RedisCluster",
        "metadata": {"name": name}, "spec": spec,
    }))
    .expect("valid object")
}

fn api_err(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_custom_resources_validate_default_prune() {
    let h = start().await;
    let client = kube_client(&h).await.expect("client");
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    // The fixture plus a second served version (conversion strategy None).
    let mut crd: Value = serde_yaml::from_str(FIXTURE_CRD).expect("fixture parses");
    let mut v2 = crd["spec"]["versions"][0].clone();
    v2["name"] = json!("v1beta1");
    v2["storage"] = json!(false);
    if let Some(vs) = crd["spec"]["versions"].as_array_mut() {
        vs.push(v2);
    }
    let crd = serde_json::from_value(crd).expect("CRD");
    let created = crds
        .create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    let established = created
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    assert!(established
        .iter()
        .any(|c| c.type_ == "Established" && c.status == "True"));

    let api = rc_api(client.clone());
    let o = api
        .create(
            &PostParams::default(),
            &rc(
                "a",
                json!({"image": "redis:7.0", "bogus": 1, "extra": {"kept": true}}),
            ),
        )
        .await
        .expect("create");
    assert_eq!(o.data["spec"]["shards"], 3, "default applied");
    assert_eq!(o.data["spec"]["replicasPerShard"], 1, "default applied");
    assert_eq!(o.data["spec"].get("bogus"), None, "unknown field pruned");
    assert_eq!(
        o.data["spec"]["extra"]["kept"], true,
        "preserve-unknown-fields kept"
    );
    assert_eq!(o.metadata.generation, Some(1));

    let e = api_err(
        api.create(&PostParams::default(), &rc("bad", json!({"shards": 0})))
            .await
            .expect_err("invalid"),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(e.message, "RedisCluster.tessera.rs \"bad\" is invalid: spec.shards: Invalid value: 0: spec.shards in body should be greater than or equal to 1");
    let e = api_err(
        api.create(
            &PostParams::default(),
            &rc(
                "bad",
                json!({"shards": "two", "pullPolicy": "Sometimes", "storageClass": "UPPER"}),
            ),
        )
        .await
        .expect_err("invalid"),
    );
    assert!(e.message.contains("spec.shards: Invalid value: \"string\": spec.shards in body must be of type integer: \"string\""), "{}", e.message);
    assert!(e.message.contains("spec.pullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\""), "{}", e.message);
    assert!(e.message.contains("spec.storageClass: Invalid value: \"UPPER\": spec.storageClass in body should match '^[a-z0-9.-]+$'"), "{}", e.message);
    let e = api_err(api.create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "tessera.rs/v1alpha1", "kind": "RedisCluster", "metadata": {"name": "nospec"}})).expect("obj")).await.expect_err("required"));
    assert!(e.message.contains("spec: Required value"), "{}", e.message);

    // CEL rules (x-kubernetes-validations): a map rule, and a transition rule on updates.
    let e = api_err(
        api.create(
            &PostParams::default(),
            &rc("cel", json!({"config": {"port": "1"}})),
        )
        .await
        .expect_err("owned directive"),
    );
    assert!(
        e.message.contains("spec.config: Invalid value: \"object\": spec.config sets a directive the operator owns"),
        "{}",
        e.message
    );
    let e = api_err(
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "remove", "path": "/spec/image"}]))
                    .expect("patch"),
            ),
        )
        .await
        .expect_err("transition rule"),
    );
    assert!(
        e.message.contains("spec.image cannot be added or removed"),
        "{}",
        e.message
    );

    // The same object through the other served version: only apiVersion differs.
    let ar2 = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tessera.rs", "v1beta1", "RedisCluster"),
        "redisclusters",
    );
    let beta: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar2);
    let b = beta.get("a").await.expect("served as v1beta1");
    assert_eq!(
        b.types.map(|t| t.api_version).as_deref(),
        Some("tessera.rs/v1beta1")
    );
    assert_eq!(b.data["spec"]["shards"], 3);

    // Status subresource: status ignored on the main endpoint, generation untouched by status.
    let s = api
        .patch_status(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready", "shards": 3}})),
        )
        .await
        .expect("status");
    assert_eq!(
        (s.data["status"]["phase"].as_str(), s.metadata.generation),
        (Some("Ready"), Some(1))
    );
    let s = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Hacked"}})),
        )
        .await
        .expect("patch");
    assert_eq!(s.data["status"]["phase"], "Ready");
    // Scale subresource maps to .spec.shards / .status.shards.
    let sc: Value = client
        .request(
            http::Request::get(
                "/apis/tessera.rs/v1alpha1/namespaces/default/redisclusters/a/scale",
            )
            .body(vec![])
            .expect("req"),
        )
        .await
        .expect("scale");
    assert_eq!(
        (
            sc["spec"]["replicas"].as_i64(),
            sc["status"]["replicas"].as_i64()
        ),
        (Some(3), Some(3))
    );
    let s = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"shards": 4}})),
        )
        .await
        .expect("spec");
    assert_eq!(s.metadata.generation, Some(2));
    // Updates are validated too.
    let e = api_err(
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"shards": 1001}})),
        )
        .await
        .expect_err("too many"),
    );
    assert!(
        e.message
            .contains("spec.shards in body should be less than or equal to 1000"),
        "{}",
        e.message
    );
    // Server-side apply of a custom resource.
    let applied = api.patch("b", &PatchParams::apply("tests"), &Patch::Apply(json!({"apiVersion": "tessera.rs/v1alpha1", "kind": "RedisCluster", "metadata": {"name": "b"}, "spec": {"shards": 2}}))).await.expect("apply");
    assert_eq!(applied.data["spec"]["shards"], 2);

    // Deleting the CRD removes its objects and the endpoint.
    crds.delete("redisclusters.tessera.rs", &Default::default())
        .await
        .expect("delete CRD");
    let e = api_err(api.get("a").await.expect_err("gone"));
    assert_eq!(e.code, 404);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_registers_crd_and_rejects_bad_manifests() {
    let valid = "apiVersion: tessera.rs/v1alpha1\nkind: RedisCluster\nmetadata: {name: demo}\nspec: {shards: 3, image: 'redis:7.0'}\n";
    for bin in kubectl_binaries() {
        let h = start().await;
        let k = Kubectl::new(bin, &h.kubeconfig()).expect("kubectl setup");
        k.ok_stdin(&["apply", "-f", "-"], FIXTURE_CRD).await;
        k.ok(&[
            "wait",
            "--for",
            "condition=Established",
            "crd/redisclusters.tessera.rs",
            "--timeout",
            "30s",
        ])
        .await;
        let out = k.ok_stdin(&["apply", "-f", "-"], valid).await;
        assert!(
            out.contains("rediscluster.tessera.rs/demo created"),
            "{out}"
        );
        let table = k.ok(&["get", "rcl"]).await;
        assert!(
            table.contains("SHARDS") && table.contains("PHASE") && table.contains("demo"),
            "{table}"
        );

        let r = k
            .run_with(
                &["apply", "-f", "-"],
                Some(&valid.replace("shards: 3", "shards: 0")),
                std::time::Duration::from_secs(60),
            )
            .await;
        assert!(!r.ok, "{r:?}");
        assert!(r.stderr.contains("spec.shards: Invalid value: 0: spec.shards in body should be greater than or equal to 1"), "{}", r.stderr);

        // kubectl asks for strict field validation: a typo is an error, not silently pruned.
        let r = k
            .run_with(
                &["apply", "-f", "-"],
                Some(&valid.replace("shards: 3", "shard: 3")),
                std::time::Duration::from_secs(60),
            )
            .await;
        assert!(
            !r.ok
                && r.stderr
                    .contains("strict decoding error: unknown field \"spec.shard\""),
            "{}",
            r.stderr
        );
        k.ok(&["scale", "rcl", "demo", "--replicas", "5"]).await;
        let o: Value =
            serde_json::from_str(&k.ok(&["get", "rcl", "demo", "-o", "json"]).await).expect("json");
        assert_eq!(o["spec"]["shards"], 5);
        k.ok(&[
            "patch",
            "rcl",
            "demo",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"phase":"Ready","conditions":[{"type":"Ready","status":"True"}]}}"#,
        ])
        .await;
        let table = k.ok(&["get", "rediscluster", "demo"]).await;
        assert!(table.contains("Ready") && table.contains("True"), "{table}");
        let out = k.ok(&["delete", "rcl", "demo"]).await;
        assert!(out.contains("deleted"), "{out}");
        h.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_generated_crd_registers_when_present() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds/redisclusters.tessera.rs.yaml");
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("{} not generated yet: nothing to check", path.display());
        return;
    };
    let h = start().await;
    let client = kube_client(&h).await.expect("client");
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    let crd = serde_yaml::from_str(&text).expect("CRD parses");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("register the operator's CRD");
    let api = rc_api(client);
    let e = api_err(
        api.create(&PostParams::default(), &rc("zero", json!({"shards": 0})))
            .await
            .expect_err("shards 0 is invalid"),
    );
    assert_eq!(e.code, 422, "{}", e.message);
    let ok = api
        .create(
            &PostParams::default(),
            &rc("ok", json!({"shards": 3, "image": "redis:7.0"})),
        )
        .await
        .expect("valid object");
    assert_eq!(ok.data["spec"]["shards"], 3);
    h.shutdown().await;
}
