//! The engine is its own crate so that it carries no Kubernetes client (issue 17 item 2): the
//! `converge` CLI and the planner tests build without kube, and nothing in it can reach the API.

/// Dependency names a manifest declares, in any `[*dependencies]` table.
fn dependency_names(manifest: &str) -> Vec<String> {
    let mut in_deps = false;
    let mut names = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line.trim_matches(['[', ']']).ends_with("dependencies");
            continue;
        }
        if !in_deps || line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((name, _)) = line.split_once('=') {
            let name = name.trim();
            names.push(name.split('.').next().unwrap_or(name).to_string());
        }
    }
    names
}

/// Names that would pull a Kubernetes client (or the operator, which has one) into the engine.
fn kube_dependencies(manifest: &str) -> Vec<String> {
    dependency_names(manifest)
        .into_iter()
        .filter(|n| n.starts_with("kube") || n.starts_with("k8s") || n == "tessera-operator")
        .collect()
}

#[test]
fn the_engine_depends_on_no_kubernetes_crate() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let manifest = std::fs::read_to_string(&path).unwrap();
    assert!(
        dependency_names(&manifest).iter().any(|n| n == "redis"),
        "the check reads the manifest's dependencies"
    );
    assert_eq!(kube_dependencies(&manifest), Vec::<String>::new());
}

#[test]
fn the_check_sees_a_kube_dependency() {
    let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nredis.workspace = true\nkube = { workspace = true }\n\n[dev-dependencies]\nk8s-openapi.workspace = true\n";
    assert_eq!(kube_dependencies(manifest), vec!["kube", "k8s-openapi"]);
}
