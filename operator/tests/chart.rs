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
        ("v1", "ConfigMap") => check_as::<core::ConfigMap>(doc),
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
        ("monitoring.coreos.com/v1", "PodMonitor") => {
            if doc["metadata"]["name"].is_string()
                && doc["spec"]["podMetricsEndpoints"][0]["port"].is_string()
                && doc["spec"]["selector"].is_object()
            {
                Ok(())
            } else {
                Err("PodMonitor needs metadata.name, spec.selector, spec.podMetricsEndpoints[].port".into())
            }
        }
        // promtool checks the rules themselves (alert_rules_pass_promtool).
        ("monitoring.coreos.com/v1", "PrometheusRule") => {
            let groups = doc["spec"]["groups"].as_array();
            let ok = doc["metadata"]["name"].is_string()
                && groups.is_some_and(|g| {
                    !g.is_empty()
                        && g.iter().all(|g| {
                            g["name"].is_string()
                                && g["rules"].as_array().is_some_and(|r| {
                                    r.iter().all(|r| {
                                        r["expr"].is_string()
                                            && (r["alert"].is_string() || r["record"].is_string())
                                    })
                                })
                        })
                });
            if ok {
                Ok(())
            } else {
                Err("PrometheusRule needs spec.groups[].name and rules[] with expr and alert or record".into())
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

fn promtool() -> PathBuf {
    if let Some(p) = std::env::var_os("PROMTOOL") {
        return p.into();
    }
    let local = root().join(".tools/bin/promtool");
    if local.exists() {
        return local;
    }
    panic!("promtool not found: run `make deps` (or set PROMTOOL)")
}

const MONITORING: [&str; 3] = [
    "metrics.serviceMonitor.enabled=true",
    "metrics.prometheusRule.enabled=true",
    "metrics.dashboard.enabled=true",
];

#[test]
fn monitoring_objects_render_only_when_asked() {
    let off = render(&[]);
    for kind in ["ServiceMonitor", "PodMonitor", "PrometheusRule"] {
        assert!(of_kind(&off, kind).is_empty(), "{kind} rendered by default");
    }
    assert!(
        of_kind(&off, "ConfigMap").is_empty(),
        "dashboard rendered by default"
    );

    let on = render(&MONITORING);
    validate_all(&on);
    assert_eq!(of_kind(&on, "PrometheusRule").len(), 1);
    let sm = of_kind(&on, "ServiceMonitor");
    assert_eq!(sm.len(), 1);
    // The per-cluster series' own namespace label must survive the scrape.
    assert_eq!(sm[0]["spec"]["endpoints"][0]["honorLabels"], true);
    // The nodes: every pod with the cluster label, on the port the operator names `metrics`.
    let pm = of_kind(&on, "PodMonitor");
    assert_eq!(pm.len(), 1);
    assert_eq!(pm[0]["spec"]["podMetricsEndpoints"][0]["port"], "metrics");
    assert_eq!(
        pm[0]["spec"]["selector"]["matchExpressions"][0]["key"],
        tessera_operator::pods::LABEL_CLUSTER
    );
    assert_eq!(pm[0]["spec"]["namespaceSelector"]["any"], true);
    let scoped = render(&[
        "metrics.serviceMonitor.enabled=true",
        "watchNamespaces={apps,cache}",
    ]);
    assert_eq!(
        of_kind(&scoped, "PodMonitor")[0]["spec"]["namespaceSelector"]["matchNames"],
        serde_json::json!(["apps", "cache"])
    );
    let no_nodes = render(&[
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.nodes=false",
    ]);
    assert!(of_kind(&no_nodes, "PodMonitor").is_empty());
    let cms = of_kind(&on, "ConfigMap");
    assert_eq!(cms.len(), 1);
    assert_eq!(cms[0]["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(cms[0]["metadata"]["namespace"], "ops");
    let moved = render(&[
        "metrics.dashboard.enabled=true",
        "metrics.dashboard.namespace=grafana",
    ]);
    assert_eq!(
        of_kind(&moved, "ConfigMap")[0]["metadata"]["namespace"],
        "grafana"
    );
}

/// Metric names in a PromQL expression: identifiers followed by `{`, `[`, `)` or an operator,
/// that are not functions, keywords or label names.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let mut in_braces = false;
    let mut in_string = false;
    let mut in_by = false;
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            if c == '"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => in_braces = true,
            '}' => in_braces = false,
            ')' => in_by = false,
            _ => {}
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == '_') {
                i += 1;
            }
            let word: String = bytes[start..i].iter().collect();
            let next = bytes[i..].iter().find(|c| !c.is_whitespace()).copied();
            let keyword = matches!(
                word.as_str(),
                "by" | "on" | "and" | "or" | "unless" | "without" | "ignoring" | "bool"
                    // aggregations, which may take `by (...)` before their `(`
                    | "sum" | "min" | "max" | "avg" | "count" | "group" | "stddev" | "stdvar"
                    | "topk" | "bottomk" | "quantile" | "count_values"
            );
            if matches!(word.as_str(), "by" | "on" | "without" | "ignoring") {
                in_by = true;
            }
            let is_duration = start > 0 && bytes[start - 1].is_ascii_digit();
            if !in_braces && !in_by && !keyword && !is_duration && next != Some('(') {
                out.insert(word);
            }
            continue;
        }
        i += 1;
    }
    out
}

/// The series names the operator exposes, from a Metrics holding a cluster in every state
/// the rules and the dashboard look at.
fn operator_series() -> BTreeSet<String> {
    use tessera_operator::crd::{Phase, RedisClusterStatus, ReshardProgress, ShardStatus};
    use tessera_operator::metrics::{ErrorCategory, FailoverReason, Metrics};
    let m = Metrics::new();
    m.reconciled(
        Some(ErrorCategory::Topology),
        std::time::Duration::from_millis(5),
    );
    m.is_leader.set(1);
    m.observe_status(
        "apps",
        "demo",
        &RedisClusterStatus {
            phase: Phase::Rebalancing,
            shard_statuses: vec![ShardStatus {
                shard: 0,
                replication_lag_bytes: Some(1),
                ..Default::default()
            }],
            progress: Some(ReshardProgress::default()),
            ..Default::default()
        },
    );
    m.topology_pass("apps", "demo", &Default::default());
    m.failed_over("apps", "demo", FailoverReason::RollingRestart, 1);
    m.pod_restarted("apps", "demo");
    m.render()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// Node metrics the rules and dashboard use, named as redis_exporter names them (so that its
/// existing dashboards and these agree); tessera-node's own /metrics serves each of them
/// (node/tests/server/metrics.rs checks the same list on a running node).
const REDIS_EXPORTER_NAMES: [&str; 4] = [
    "redis_commands_processed_total",
    "redis_memory_used_bytes",
    "redis_memory_max_bytes",
    "redis_connected_clients",
];

/// Every expression of the rules and of the dashboard names only series that exist: the
/// operator's (as it renders them) or redis_exporter's node names.
#[test]
fn rules_and_dashboard_name_only_real_series() {
    let docs = render(&MONITORING);
    let mut exprs: Vec<String> = Vec::new();
    let rule = of_kind(&docs, "PrometheusRule")[0];
    for g in rule["spec"]["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            exprs.push(r["expr"].as_str().unwrap().to_string());
        }
    }
    let cm = of_kind(&docs, "ConfigMap")[0];
    let dash: Value = serde_json::from_str(cm["data"]["tessera.json"].as_str().unwrap())
        .expect("the dashboard is JSON");
    let panels = dash["panels"].as_array().unwrap();
    assert!(panels.len() > 10);
    let mut ids = BTreeSet::new();
    for p in panels {
        assert!(ids.insert(p["id"].as_i64().unwrap()), "duplicate panel id");
        if p["type"] == "row" {
            continue;
        }
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "panel {} has no query", p["title"]);
        for t in targets {
            exprs.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    for v in dash["templating"]["list"].as_array().unwrap() {
        // label_values(<series selector>, <label>): the selector is PromQL, the label is not.
        if let Some(q) = v["query"]["query"].as_str() {
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|q| q.rsplit_once(','))
                .map_or(q, |(sel, _)| sel);
            exprs.push(inner.to_string());
        }
    }
    let ours = operator_series();
    let mut unknown = Vec::new();
    let mut named = 0;
    for e in &exprs {
        for name in metric_names(e) {
            named += 1;
            let known = if name.starts_with("tessera_operator_") {
                ours.contains(&name)
            } else if name == "up" {
                // Prometheus's own: whether a target's scrape succeeded.
                true
            } else {
                REDIS_EXPORTER_NAMES.contains(&name.as_str())
            };
            if !known {
                unknown.push(format!("{name} in {e}"));
            }
        }
    }
    assert!(named >= exprs.len(), "every expression names a series");
    assert!(
        unknown.is_empty(),
        "unknown series:\n{}",
        unknown.join("\n")
    );
}

#[test]
fn metric_names_are_found_in_promql() {
    let got = metric_names(
        r#"sum by (namespace, category) (rate(a_total{x="y(z)"}[5m])) > 0 unless on (n) (b == 1) and c"#,
    );
    let want: BTreeSet<String> = ["a_total", "b", "c"].map(String::from).into();
    assert_eq!(got, want);
}

/// promtool (Prometheus's own checker) accepts the rules, and its rule tests show the main
/// alerts fire on the series the operator exports and stay quiet on a healthy cluster.
#[test]
fn alert_rules_pass_promtool() {
    let docs = render(&MONITORING);
    let rule = of_kind(&docs, "PrometheusRule")[0];
    let dir = std::env::temp_dir().join(format!("tessera-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = serde_json::json!({ "groups": rule["spec"]["groups"] });
    std::fs::write(
        dir.join("rules.yaml"),
        serde_yaml::to_string(&rules).unwrap(),
    )
    .unwrap();
    std::fs::copy(
        root().join("operator/tests/fixtures/alerts_test.yaml"),
        dir.join("alerts_test.yaml"),
    )
    .unwrap();
    for args in [
        &["check", "rules", "rules.yaml"][..],
        &["test", "rules", "alerts_test.yaml"][..],
    ] {
        let out = Command::new(promtool())
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("running promtool");
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
