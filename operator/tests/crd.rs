//! The checked-in CRD must be exactly what `tessera-operator crd` prints, and the chart's copy
//! must match it (run `make crds` after changing crd.rs).

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn checked_in_crd_matches_the_types() {
    let generated = tessera_operator::crd::crd_yaml().unwrap();
    let path = root().join("crds/redisclusters.tessera.rs.yaml");
    let on_disk = std::fs::read_to_string(&path).unwrap();
    assert!(
        generated == on_disk,
        "{} drifted from the Rust types: run `make crds`",
        path.display()
    );
}

#[test]
fn chart_crd_is_identical() {
    let a = std::fs::read_to_string(root().join("crds/redisclusters.tessera.rs.yaml")).unwrap();
    let b = std::fs::read_to_string(
        root().join("charts/tessera-operator/crds/redisclusters.tessera.rs.yaml"),
    )
    .unwrap();
    assert!(a == b, "charts/tessera-operator/crds/ differs from crds/: run `make crds` and copy crds/redisclusters.tessera.rs.yaml into the chart");
}

#[test]
fn crd_has_the_agreed_shape() {
    use kube::CustomResourceExt;
    let crd = tessera_operator::crd::RedisCluster::crd();
    let v = serde_json::to_value(&crd).unwrap();
    assert_eq!(v["spec"]["group"], "tessera.rs");
    assert_eq!(v["spec"]["scope"], "Namespaced");
    assert_eq!(v["spec"]["names"]["shortNames"][0], "rcl");
    let ver = &v["spec"]["versions"][0];
    assert_eq!(ver["name"], "v1alpha1");
    assert_eq!(
        ver["subresources"]["scale"]["specReplicasPath"],
        ".spec.shards"
    );
    assert_eq!(
        ver["subresources"]["scale"]["statusReplicasPath"],
        ".status.shards"
    );
    assert!(ver["subresources"]["status"].is_object());
    let cols: Vec<&str> = ver["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        cols,
        ["Shards", "Replicas", "Ready", "Slots", "Phase", "Age", "Lag", "Migrated"]
    );
    // Lag and Migrated only with -o wide.
    let wide: Vec<&str> = ver["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["priority"].as_i64().unwrap_or(0) > 0)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(wide, ["Lag", "Migrated"]);
    let spec = &ver["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(spec["shards"]["minimum"], 1.0);
    assert_eq!(spec["shards"]["maximum"], 1000.0);
    assert_eq!(spec["shards"]["default"], 3);
    assert_eq!(spec["replicasPerShard"]["maximum"], 5.0);
    assert_eq!(spec["replicasPerShard"]["default"], 1);
    assert!(spec["config"]["x-kubernetes-validations"][0]["rule"]
        .as_str()
        .unwrap()
        .contains("'cluster-enabled'"));
}

/// The CEL list of owned directives and the Rust list must agree.
#[test]
fn cel_rule_lists_every_owned_directive() {
    use kube::CustomResourceExt;
    let v = serde_json::to_value(tessera_operator::crd::RedisCluster::crd()).unwrap();
    let rule = v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["properties"]["config"]["x-kubernetes-validations"][0]["rule"]
        .as_str()
        .unwrap()
        .to_string();
    for d in tessera_operator::crd::OPERATOR_OWNED_DIRECTIVES {
        assert!(rule.contains(&format!("'{d}'")), "CEL rule misses {d}");
    }
    assert_eq!(
        rule.matches('\'').count() / 2,
        tessera_operator::crd::OPERATOR_OWNED_DIRECTIVES.len()
    );
}
