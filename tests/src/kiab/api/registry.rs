//! The resource types the server knows: built-in kinds kubectl and the operator use, plus every
//! kind registered by a CustomResourceDefinition. Discovery documents are generated from here.

use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Where the scale subresource reads and writes its numbers (JSON paths like `.spec.replicas`).
#[derive(Debug, Clone)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// One served resource (group, version, plural) and how it behaves.
#[derive(Debug, Clone)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Has a `/status` subresource: the main endpoint then ignores status changes.
    pub status: bool,
    pub scale: Option<ScalePaths>,
    /// For CRD kinds: the openAPIV3Schema of the served version.
    pub schema: Option<Value>,
    /// For CRD kinds: additionalPrinterColumns.
    pub printer_columns: Vec<Value>,
    /// True for kinds defined by a CRD (validated and pruned against `schema`).
    pub custom: bool,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn builtin(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        ResourceType {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_ascii_lowercase(),
            namespaced,
            short_names: vec![],
            categories: vec![],
            status: false,
            scale: None,
            schema: None,
            printer_columns: vec![],
            custom: false,
        }
    }

    fn short(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    fn with_status(mut self) -> Self {
        self.status = true;
        self
    }

    fn all(mut self) -> Self {
        self.categories = vec!["all".into()];
        self
    }

    /// The APIResource entry of a discovery document (plus subresource entries).
    pub fn discovery_entries(&self) -> Vec<Value> {
        let verbs = json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ]);
        let mut main = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": verbs,
        });
        if !self.short_names.is_empty() {
            main["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            main["categories"] = json!(self.categories);
        }
        let mut out = vec![main];
        if self.status {
            out.push(json!({
                "name": format!("{}/status", self.plural), "singularName": "",
                "namespaced": self.namespaced, "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if self.group.is_empty() && self.kind == "Pod" {
            out.push(
                json!({"name": "pods/log", "singularName": "", "namespaced": true,
                            "kind": "Pod", "verbs": ["get"]}),
            );
            out.push(
                json!({"name": "pods/eviction", "singularName": "", "namespaced": true,
                            "kind": "Eviction", "group": "policy", "version": "v1",
                            "verbs": ["create"]}),
            );
        }
        if self.scale.is_some() {
            out.push(json!({
                "name": format!("{}/scale", self.plural), "singularName": "",
                "namespaced": self.namespaced, "kind": "Scale", "group": "autoscaling",
                "version": "v1", "verbs": ["get", "patch", "update"],
            }));
        }
        out
    }
}

/// Group + resource: the key objects are stored under.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

/// All served resource types, keyed by (group, version, plural).
#[derive(Debug, Clone)]
pub struct Registry {
    types: BTreeMap<(String, String, String), ResourceType>,
    /// Bumped on every change, so discovery/openapi hashes change when CRDs come and go.
    generation: u64,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// The built-in kinds kubectl, the operator and kube-in-a-box's controllers use.
    pub fn new() -> Self {
        let rt = ResourceType::builtin;
        let mut sts = rt("apps", "v1", "StatefulSet", "statefulsets", true)
            .short(&["sts"])
            .with_status()
            .all();
        sts.scale = Some(ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: Some(".status.selector".into()),
        });
        let builtins = vec![
            rt("", "v1", "Namespace", "namespaces", false)
                .short(&["ns"])
                .with_status(),
            rt("", "v1", "Pod", "pods", true)
                .short(&["po"])
                .with_status()
                .all(),
            rt("", "v1", "Service", "services", true)
                .short(&["svc"])
                .with_status()
                .all(),
            rt("", "v1", "Endpoints", "endpoints", true).short(&["ep"]),
            rt("", "v1", "ConfigMap", "configmaps", true).short(&["cm"]),
            rt("", "v1", "Secret", "secrets", true),
            rt("", "v1", "ServiceAccount", "serviceaccounts", true).short(&["sa"]),
            rt("", "v1", "Event", "events", true).short(&["ev"]),
            rt(
                "",
                "v1",
                "PersistentVolumeClaim",
                "persistentvolumeclaims",
                true,
            )
            .short(&["pvc"])
            .with_status(),
            rt("", "v1", "Node", "nodes", false)
                .short(&["no"])
                .with_status(),
            sts,
            rt("events.k8s.io", "v1", "Event", "events", true).short(&["ev"]),
            rt(
                "policy",
                "v1",
                "PodDisruptionBudget",
                "poddisruptionbudgets",
                true,
            )
            .short(&["pdb"])
            .with_status(),
            rt("coordination.k8s.io", "v1", "Lease", "leases", true),
            rt(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
                false,
            )
            .short(&["crd", "crds"])
            .with_status(),
        ];
        let mut r = Registry {
            types: BTreeMap::new(),
            generation: 0,
        };
        for t in builtins {
            r.insert(t);
        }
        r
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn insert(&mut self, t: ResourceType) {
        self.generation += 1;
        self.types
            .insert((t.group.clone(), t.version.clone(), t.plural.clone()), t);
    }

    /// Removes every version of a CRD-defined resource.
    pub fn remove_custom(&mut self, group: &str, plural: &str) {
        self.generation += 1;
        self.types
            .retain(|(g, _, p), t| !(t.custom && g == group && p == plural));
    }

    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
    }

    /// Finds a type by group and kind (for ownerReferences and involvedObject lookups).
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&ResourceType> {
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        self.types
            .values()
            .find(|t| t.group == group && t.kind == kind)
    }

    /// The type stored under a group/resource (any served version).
    pub fn by_resource(&self, gr: &GroupResource) -> Option<&ResourceType> {
        self.types
            .values()
            .find(|t| t.group == gr.group && t.plural == gr.resource)
    }

    pub fn all(&self) -> impl Iterator<Item = &ResourceType> {
        self.types.values()
    }

    /// Groups with their versions, in a stable order (core group first).
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for t in self.types.values() {
            let v = m.entry(t.group.clone()).or_default();
            if !v.contains(&t.version) {
                v.push(t.version.clone());
            }
        }
        m
    }
}
