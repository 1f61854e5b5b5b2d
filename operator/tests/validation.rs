//! Bad manifests (tests/fixtures/invalid/*.yaml, first line `# expect: <substring>`) are
//! reported by `validate` with a readable message; the examples and defaults are valid.

use std::path::PathBuf;

use tessera_operator::crd::RedisCluster;
use tessera_operator::validate::validate;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn invalid_manifests_are_reported() {
    let dir = root().join("tests/fixtures/invalid");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    assert!(paths.len() >= 10);
    let mut failures = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{}: first line must be `# expect: ...`", path.display()))
            .to_string();
        let rc: RedisCluster = serde_yaml::from_str(&text).unwrap();
        let problems = validate(&rc.metadata.name.clone().unwrap(), &rc.spec);
        if !problems.iter().any(|p| p.contains(&expect)) {
            failures.push(format!(
                "{}: want {expect:?}, got {problems:?}",
                path.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn examples_and_fixtures_are_valid() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("../examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.push(root().join("tests/fixtures/children/minimal.yaml"));
    files.push(root().join("tests/fixtures/children/production.yaml"));
    let mut clusters = 0;
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v = serde_yaml::Value::deserialize(doc).unwrap();
            if v.get("kind").and_then(|k| k.as_str()) != Some("RedisCluster") {
                continue;
            }
            let rc: RedisCluster = serde_yaml::from_value(v).unwrap();
            let problems = validate(&rc.metadata.name.clone().unwrap(), &rc.spec);
            assert!(problems.is_empty(), "{}: {problems:?}", path.display());
            clusters += 1;
        }
    }
    assert!(
        clusters >= 4,
        "examples/ must hold the minimal and production clusters"
    );
}

#[test]
fn defaults_apply() {
    let rc: RedisCluster = serde_yaml::from_str(
        "apiVersion: tessera.rs/v1alpha1\nkind: RedisCluster\nmetadata: {name: d}\nspec: {}\n",
    )
    .unwrap();
    assert_eq!(
        (
            rc.spec.shards,
            rc.spec.replicas_per_shard,
            rc.spec.node_timeout_ms
        ),
        (3, 1, 15000)
    );
    assert!(validate("d", &rc.spec).is_empty());
    assert!(rc
        .spec
        .image_or_default()
        .starts_with("tessera/tessera-node:"));
}

use serde::Deserialize;
