//! spec.storage.size growth (issue 16), on the StatefulSets the builders make: which claims get
//! patched, and which StatefulSets are recreated (orphan delete + apply) or kept.

use std::path::PathBuf;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use tessera_operator::children;
use tessera_operator::crd::RedisCluster;
use tessera_operator::storage::{self, StsPlan, TemplateStep};

fn production(size: &str) -> RedisCluster {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/children/production.yaml");
    let mut rc: RedisCluster =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    rc.spec.storage.as_mut().unwrap().size = size.into();
    rc
}

fn stateful_sets(rc: &RedisCluster) -> Vec<StatefulSet> {
    children::build(rc).unwrap().stateful_sets
}

/// The claim a StatefulSet controller makes for `ordinal` from the template, at `size`.
fn claim(sts: &StatefulSet, ordinal: u32, size: &str) -> PersistentVolumeClaim {
    let mut c = sts
        .spec
        .as_ref()
        .unwrap()
        .volume_claim_templates
        .as_ref()
        .unwrap()[0]
        .clone();
    let sts_name = sts.metadata.name.clone().unwrap();
    c.metadata.name = Some(format!("data-{sts_name}-{ordinal}"));
    c.spec
        .as_mut()
        .unwrap()
        .resources
        .as_mut()
        .unwrap()
        .requests
        .as_mut()
        .unwrap()
        .insert(
            "storage".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity(size.into()),
        );
    c
}

#[test]
fn growth_recreates_every_statefulset_and_patches_its_claims() {
    let live = stateful_sets(&production("10Gi"));
    let desired = stateful_sets(&production("20Gi"));
    assert_eq!(live.len(), 2);
    // Shard 0 has 3 pods (1 + 2 replicas) and a claim kept from an earlier 4th replica;
    // shard 1's claim 0 was already patched (e.g. the operator stopped mid-way).
    let claims: Vec<_> = (0..4)
        .map(|o| claim(&live[0], o, "10Gi"))
        .chain([claim(&live[1], 0, "20Gi"), claim(&live[1], 1, "10Gi")])
        .collect();
    let p0 = storage::plan(&desired[0], &live[0], &claims).unwrap();
    assert_eq!(
        p0,
        StsPlan {
            template: TemplateStep::Recreate {
                from: "10Gi".into(),
                to: "20Gi".into()
            },
            size: Some("20Gi".into()),
            patch_claims: (0..4).map(|o| format!("data-cache-0-{o}")).collect(),
        }
    );
    let p1 = storage::plan(&desired[1], &live[1], &claims).unwrap();
    assert_eq!(p1.patch_claims, vec!["data-cache-1-1".to_string()]);
    assert!(matches!(p1.template, TemplateStep::Recreate { .. }));

    // Once recreated, nothing is left to do.
    let claims: Vec<_> = (0..3).map(|o| claim(&desired[0], o, "20Gi")).collect();
    let done = storage::plan(&desired[0], &desired[0], &claims).unwrap();
    assert_eq!(done.template, TemplateStep::Keep);
    assert!(done.patch_claims.is_empty());
}

#[test]
fn a_shrink_keeps_the_live_template_and_patches_nothing() {
    let live = stateful_sets(&production("20Gi"));
    let mut desired = stateful_sets(&production("10Gi"));
    let claims = [claim(&live[0], 0, "20Gi")];
    let p = storage::plan(&desired[0], &live[0], &claims).unwrap();
    assert_eq!(
        p.template,
        TemplateStep::KeepLiveSize {
            live: "20Gi".into(),
            desired: "10Gi".into()
        }
    );
    assert!(p.patch_claims.is_empty());
    // What converge applies instead: the live size, so the immutable template is unchanged.
    storage::keep_live_size(&mut desired[0], &live);
    assert_eq!(
        serde_json::to_value(&desired[0].spec.as_ref().unwrap().volume_claim_templates).unwrap(),
        serde_json::to_value(&live[0].spec.as_ref().unwrap().volume_claim_templates).unwrap()
    );
}

#[test]
fn without_storage_there_is_nothing_to_plan() {
    let mut rc = production("10Gi");
    rc.spec.storage = None;
    let s = stateful_sets(&rc);
    let p = storage::plan(&s[0], &s[0], &[]).unwrap();
    assert_eq!(
        p,
        StsPlan {
            template: TemplateStep::Keep,
            size: None,
            patch_claims: vec![]
        }
    );
}
