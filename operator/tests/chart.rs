//! The Helm chart: rendered with the real helm (.tools/bin/helm from `make deps`, or $HELM),
//! every rendered document checked against the Kubernetes API types (unknown or mistyped
//! fields fail), and the RBAC compared with `tessera_operator::rbac::REQUIRED`.
//!
//! Offline schema check: each document is deserialized into its k8s-openapi type and
//! re-serialized; every field of the original must come back with the same value. A field
//! the type does not know is dropped by serde and so reported, which gives the
//! deny-unknown-fields semantics of `kubectl apply --validate=strict` without a server.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tessera_operator::rbac::{Scope, REQUIRED};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn helm() -> PathBuf {
    if let Some(h) = std::env::var_os("HELM") {
        return h.into();
    }
    let local = root().join(".tools/bin/helm");
    if local.exists() {
        return local;
    }
    let in_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("helm"))
            .find(|c| c.exists())
    });
    in_path.unwrap_or_else(|| panic!("helm not found: run `make deps` (or set HELM)"))
}

/// `helm template` with extra `--set` flags, as JSON documents.
fn render(sets: &[&str]) -> Vec<Value> {
    let mut cmd = Command::new(helm());
    cmd.args([
        "template",
        "rel",
        "charts/tessera-operator",
        "--namespace",
        "ops",
        "--include-crds",
    ])
    .current_dir(root());
    for s in sets {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().expect("running helm");
    assert!(
        out.status.success(),
        "helm template failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_docs(&String::from_utf8(out.stdout).unwrap())
}

fn yaml_docs(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde_json::to_value(serde_yaml::Value::deserialize(d).unwrap()).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

/// Every leaf of `orig` must be present and equal in `round`; returns the mismatching paths.
fn missing(orig: &Value, round: &Value, path: &str, out: &mut Vec<String>) {
    match (orig, round) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                match b.get(k) {
                    Some(w) => missing(v, w, &format!("{path}.{k}"), out),
                    None if v.is_null() => {}
                    None => out.push(format!("{path}.{k} (unknown field)")),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                out.push(format!("{path} (list length)"));
            }
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                missing(v, w, &format!("{path}[{i}]"), out);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{path} ({a} became {b})")),
    }
}

fn check_as<K: DeserializeOwned + Serialize>(doc: &Value) -> Result<(), String> {
    let typed: K = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    let round = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let mut problems = Vec::new();
    missing(doc, &round, "", &mut problems);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join(", "))
    }
}

/// Validates one manifest against its Kubernetes type.
fn validate_doc(doc: &Value) -> Result<(), String> {
    use k8s_openapi::api::{apps::v1 as apps, core::v1 as core, rbac::v1 as rbac};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let kind = doc["kind"].as_str().unwrap_or("");
    let api = doc["apiVersion"].as_str().unwrap_or("");
    match (api, kind) {
        ("v1", "ServiceAccount") => check_as::<core::ServiceAccount>(doc),
        ("v1", "Service") => check_as::<core::Service>(doc),
        ("v1", "Secret") => check_as::<core::Secret>(doc),
        ("apps/v1", "Deployment") => check_as::<apps::Deployment>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => check_as::<rbac::ClusterRole>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            check_as::<rbac::ClusterRoleBinding>(doc)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => check_as::<rbac::Role>(doc),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => check_as::<rbac::RoleBinding>(doc),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            check_as::<CustomResourceDefinition>(doc)
        }
        ("tessera.rs/v1alpha1", "RedisCluster") => {
            check_as::<tessera_operator::crd::RedisCluster>(doc)
        }
        // Not a Kubernetes built-in: check the fields the Prometheus Operator requires.
        ("monitoring.coreos.com/v1", "ServiceMonitor") => {
            if doc["metadata"]["name"].is_string()
                && doc["spec"]["endpoints"][0]["port"].is_string()
                && doc["spec"]["selector"].is_object()
            {
                Ok(())
            } else {
                Err(
                    "ServiceMonitor needs metadata.name, spec.selector, spec.endpoints[].port"
                        .into(),
                )
            }
        }
        _ => Err(format!("unexpected document {api} {kind}")),
    }
}

fn validate_all(docs: &[Value]) {
    let errs: Vec<String> = docs
        .iter()
        .filter_map(|d| {
            validate_doc(d)
                .err()
                .map(|e| format!("{} {}: {e}", d["kind"], d["metadata"]["name"]))
        })
        .collect();
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

type Grant = (String, String, String);

fn grants(role: &Value) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().into_iter().flatten() {
        for g in rule["apiGroups"].as_array().into_iter().flatten() {
            for r in rule["resources"].as_array().into_iter().flatten() {
                for v in rule["verbs"].as_array().into_iter().flatten() {
                    out.insert((
                        g.as_str().unwrap().into(),
                        r.as_str().unwrap().into(),
                        v.as_str().unwrap().into(),
                    ));
                }
            }
        }
    }
    out
}

fn required(scope: Scope) -> BTreeSet<Grant> {
    REQUIRED
        .iter()
        .filter(|p| p.scope == scope)
        .flat_map(|p| {
            p.verbs
                .iter()
                .map(|v| (p.group.to_string(), p.resource.to_string(), v.to_string()))
        })
        .collect()
}

#[test]
fn default_values_render_valid_manifests_and_exact_rbac() {
    let docs = render(&[]);
    validate_all(&docs);
    let cluster_roles = of_kind(&docs, "ClusterRole");
    assert_eq!(
        cluster_roles.len(),
        1,
        "watching all namespaces needs one ClusterRole"
    );
    assert_eq!(
        grants(cluster_roles[0]),
        required(Scope::Watched),
        "ClusterRole must grant exactly rbac::REQUIRED"
    );
    let roles = of_kind(&docs, "Role");
    assert_eq!(roles.len(), 1);
    assert_eq!(roles[0]["metadata"]["namespace"], "ops");
    assert_eq!(grants(roles[0]), required(Scope::OperatorNamespace));

    let crb = of_kind(&docs, "ClusterRoleBinding")[0];
    assert_eq!(crb["roleRef"]["name"], cluster_roles[0]["metadata"]["name"]);
    let sa = of_kind(&docs, "ServiceAccount")[0];
    assert_eq!(crb["subjects"][0]["name"], sa["metadata"]["name"]);
    assert_eq!(crb["subjects"][0]["namespace"], "ops");

    let dep = of_kind(&docs, "Deployment")[0];
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], sa["metadata"]["name"]);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0];
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args,
        [
            "run",
            "--log-format=text",
            "--metrics-addr=0.0.0.0:8080",
            "--leader-election=true"
        ]
    );
    assert_eq!(c["image"], "tessera/tessera-operator:0.1.0");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");

    let crd = of_kind(&docs, "CustomResourceDefinition")[0];
    let ours: Value = serde_json::to_value(
        <tessera_operator::crd::RedisCluster as kube::CustomResourceExt>::crd(),
    )
    .unwrap();
    assert_eq!(crd, &ours, "chart CRD = generated CRD");
    assert!(of_kind(&docs, "ServiceMonitor").is_empty());
}

#[test]
fn namespaced_values_use_roles_only() {
    let docs = render(&[
        "watchNamespaces={apps,cache}",
        "leaderElection.enabled=false",
        "logFormat=json",
        "metrics.serviceMonitor.enabled=true",
        "replicaCount=2",
    ]);
    validate_all(&docs);
    assert!(
        of_kind(&docs, "ClusterRole").is_empty(),
        "no cluster-wide grants when namespaces are listed"
    );
    assert!(of_kind(&docs, "ClusterRoleBinding").is_empty());
    let roles = of_kind(&docs, "Role");
    let namespaces: BTreeSet<&str> = roles
        .iter()
        .map(|r| r["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(
        namespaces,
        BTreeSet::from(["apps", "cache"]),
        "no lease Role without leader election"
    );
    for r in roles {
        assert_eq!(grants(r), required(Scope::Watched));
    }
    assert_eq!(of_kind(&docs, "RoleBinding").len(), 2);
    let dep = of_kind(&docs, "Deployment")[0];
    assert_eq!(dep["spec"]["replicas"], 2);
    let args = dep["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    for want in [
        "--leader-election=false",
        "--log-format=json",
        "--namespace=apps",
        "--namespace=cache",
    ] {
        assert!(args.contains(want), "{want} missing in {args}");
    }
    assert_eq!(of_kind(&docs, "ServiceMonitor").len(), 1);
}

#[test]
fn helm_lint_passes() {
    let out = Command::new(helm())
        .args(["lint", "--strict", "charts/tessera-operator"])
        .current_dir(root())
        .output()
        .expect("running helm");
    assert!(
        out.status.success(),
        "helm lint: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn examples_are_valid_manifests() {
    for name in ["minimal.yaml", "production.yaml"] {
        let text = std::fs::read_to_string(root().join("examples").join(name)).unwrap();
        let docs = yaml_docs(&text);
        assert!(!docs.is_empty());
        validate_all(&docs);
    }
}

/// The validator itself must catch an unknown field and a wrong type.
#[test]
fn validator_rejects_unknown_and_mistyped_fields() {
    let good = serde_json::json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
        "spec": {"ports": [{"port": 80}]}});
    assert!(validate_doc(&good).is_ok());
    let unknown = serde_json::json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
        "spec": {"prots": [{"port": 80}]}});
    assert!(validate_doc(&unknown).unwrap_err().contains("spec.prots"));
    let mistyped = serde_json::json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
        "spec": {"ports": [{"port": "eighty"}]}});
    assert!(validate_doc(&mistyped).is_err());
}

/// The Secret rules of a rendered role: (verbs, resourceNames) per rule naming `secrets`.
fn secret_rules(role: &Value) -> Vec<(Vec<String>, Vec<String>)> {
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| strs(&r["resources"]).iter().any(|x| x == "secrets"))
        .map(|r| (strs(&r["verbs"]), strs(&r["resourceNames"])))
        .collect()
}

/// Secrets: never list or watch (that would expose every Secret of the namespace); `get`
/// restricted to `rbac.secretNames` when set; create/patch/delete (the operator's own Secrets,
/// whose names RBAC cannot know ahead) never restricted, never with get.
#[test]
fn secret_rules_are_narrow_and_names_restrict_get() {
    for p in REQUIRED.iter().filter(|p| p.resource == "secrets") {
        assert!(
            !p.verbs.iter().any(|v| *v == "list" || *v == "watch"),
            "rbac.rs grants {:?} on secrets",
            p.verbs
        );
    }
    let docs = render(&[]);
    let role = of_kind(&docs, "ClusterRole")[0];
    for (verbs, names) in secret_rules(role) {
        assert!(
            !verbs.iter().any(|v| v == "list" || v == "watch"),
            "{verbs:?}"
        );
        assert!(names.is_empty(), "no names by default: {names:?}");
    }

    let docs = render(&[
        "rbac.secretNames={pw,demo-auth-active}",
        "watchNamespaces={apps}",
    ]);
    validate_all(&docs);
    let role = of_kind(&docs, "Role")
        .into_iter()
        .find(|r| r["metadata"]["namespace"] == "apps")
        .expect("the apps Role");
    assert_eq!(grants(role), required(Scope::Watched));
    let rules = secret_rules(role);
    let get: Vec<_> = rules
        .iter()
        .filter(|(v, _)| v.iter().any(|v| v == "get"))
        .collect();
    assert_eq!(get.len(), 1, "{rules:?}");
    assert_eq!(get[0].0, ["get"], "get has a rule of its own: {rules:?}");
    assert_eq!(get[0].1, ["pw", "demo-auth-active"]);
    for (verbs, names) in rules.iter().filter(|(v, _)| !v.iter().any(|v| v == "get")) {
        assert!(names.is_empty(), "{verbs:?} restricted to {names:?}");
    }
}
