//! Container environment: env, envFrom, valueFrom (fieldRef, configMapKeyRef, secretKeyRef),
//! resolved from a snapshot of the ConfigMaps and Secrets the pod references.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use kube::{Api, Client};

use crate::kiab::error::KiabError;
use crate::kiab::expand::{expand_vars, MountRewriter};

/// The ConfigMaps and Secrets a pod refers to (absent names are simply missing).
#[derive(Debug, Default, Clone)]
pub struct PodSources {
    pub configmaps: HashMap<String, ConfigMap>,
    pub secrets: HashMap<String, Secret>,
}

impl PodSources {
    /// Reads every ConfigMap and Secret named by the pod's containers and volumes.
    pub async fn fetch(client: &Client, pod: &Pod) -> Result<Self, KiabError> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let (cms, secrets) = referenced_names(pod);
        let cm_api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let sec_api: Api<Secret> = Api::namespaced(client.clone(), ns);
        let mut out = Self::default();
        for name in cms {
            if let Some(cm) = cm_api.get_opt(&name).await? {
                out.configmaps.insert(name, cm);
            }
        }
        for name in secrets {
            if let Some(s) = sec_api.get_opt(&name).await? {
                out.secrets.insert(name, s);
            }
        }
        Ok(out)
    }

    /// A ConfigMap key as text (data, else binaryData decoded lossily).
    pub fn configmap_key(&self, name: &str, key: &str) -> Option<String> {
        let cm = self.configmaps.get(name)?;
        if let Some(v) = cm.data.as_ref().and_then(|d| d.get(key)) {
            return Some(v.clone());
        }
        cm.binary_data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
    }

    /// A Secret key as text (data is already base64-decoded by the client; stringData too).
    pub fn secret_key(&self, name: &str, key: &str) -> Option<String> {
        let s = self.secrets.get(name)?;
        if let Some(v) = s.data.as_ref().and_then(|d| d.get(key)) {
            return Some(String::from_utf8_lossy(&v.0).into_owned());
        }
        s.string_data.as_ref().and_then(|d| d.get(key)).cloned()
    }
}

fn referenced_names(pod: &Pod) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut cms = BTreeSet::new();
    let mut secrets = BTreeSet::new();
    let Some(spec) = pod.spec.as_ref() else {
        return (cms, secrets);
    };
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in containers {
        for e in c.env.iter().flatten() {
            if let Some(vf) = &e.value_from {
                if let Some(r) = &vf.config_map_key_ref {
                    cms.insert(r.name.clone());
                }
                if let Some(r) = &vf.secret_key_ref {
                    secrets.insert(r.name.clone());
                }
            }
        }
        for ef in c.env_from.iter().flatten() {
            if let Some(r) = &ef.config_map_ref {
                cms.insert(r.name.clone());
            }
            if let Some(r) = &ef.secret_ref {
                secrets.insert(r.name.clone());
            }
        }
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(cm) = &v.config_map {
            cms.insert(cm.name.clone());
        }
        if let Some(s) = &v.secret {
            if let Some(n) = &s.secret_name {
                secrets.insert(n.clone());
            }
        }
        if let Some(p) = &v.projected {
            for src in p.sources.iter().flatten() {
                if let Some(cm) = &src.config_map {
                    cms.insert(cm.name.clone());
                }
                if let Some(s) = &src.secret {
                    secrets.insert(s.name.clone());
                }
            }
        }
    }
    (cms, secrets)
}

/// Resolves a downward-API field path (`metadata.name`, `status.podIP`, `metadata.labels['k']`...).
pub fn field_ref(pod: &Pod, pod_ip: &str, path: &str) -> Option<String> {
    let md = &pod.metadata;
    let spec = pod.spec.as_ref();
    let bracket = |prefix: &str| -> Option<String> {
        let rest = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(rest.to_string())
    };
    if let Some(k) = bracket("metadata.labels['") {
        return md.labels.as_ref().and_then(|l| l.get(&k)).cloned();
    }
    if let Some(k) = bracket("metadata.annotations['") {
        return md.annotations.as_ref().and_then(|l| l.get(&k)).cloned();
    }
    match path {
        "metadata.name" => md.name.clone(),
        "metadata.namespace" => Some(md.namespace.clone().unwrap_or_else(|| "default".into())),
        "metadata.uid" => md.uid.clone(),
        "status.podIP" | "status.podIPs" => Some(pod_ip.to_string()),
        "status.hostIP" | "status.hostIPs" => Some("127.0.0.1".into()),
        "spec.nodeName" => Some(
            spec.and_then(|s| s.node_name.clone())
                .unwrap_or_else(|| super::NODE_NAME.into()),
        ),
        "spec.serviceAccountName" => Some(
            spec.and_then(|s| s.service_account_name.clone())
                .unwrap_or_else(|| "default".into()),
        ),
        _ => None,
    }
}

/// The container's environment in Kubernetes order (envFrom, then env, each value expanded
/// against what came before), with mount paths rewritten to host paths.
pub fn container_env(
    pod: &Pod,
    container: &Container,
    pod_ip: &str,
    sources: &PodSources,
    rewriter: &MountRewriter,
) -> Result<Vec<(String, String)>, KiabError> {
    let mut order: Vec<String> = Vec::new();
    let mut vars: HashMap<String, String> = HashMap::new();
    let set = |k: String, v: String, order: &mut Vec<String>, vars: &mut HashMap<_, _>| {
        if vars.insert(k.clone(), v).is_none() {
            order.push(k);
        }
    };
    for ef in container.env_from.iter().flatten() {
        let prefix = ef.prefix.clone().unwrap_or_default();
        if let Some(r) = &ef.config_map_ref {
            match sources.configmaps.get(&r.name) {
                Some(cm) => {
                    for (k, v) in cm.data.iter().flatten() {
                        set(format!("{prefix}{k}"), v.clone(), &mut order, &mut vars);
                    }
                }
                None if r.optional == Some(true) => {}
                None => return Err(KiabError::Spec(format!("configmap {:?} not found", r.name))),
            }
        }
        if let Some(r) = &ef.secret_ref {
            match sources.secrets.get(&r.name) {
                Some(s) => {
                    for (k, v) in s.data.iter().flatten() {
                        let v = String::from_utf8_lossy(&v.0).into_owned();
                        set(format!("{prefix}{k}"), v, &mut order, &mut vars);
                    }
                }
                None if r.optional == Some(true) => {}
                None => return Err(KiabError::Spec(format!("secret {:?} not found", r.name))),
            }
        }
    }
    for e in container.env.iter().flatten() {
        let value = if let Some(v) = &e.value {
            Some(expand_vars(v, &vars))
        } else if let Some(vf) = &e.value_from {
            if let Some(f) = &vf.field_ref {
                Some(field_ref(pod, pod_ip, &f.field_path).ok_or_else(|| {
                    KiabError::Spec(format!("unsupported fieldRef {:?}", f.field_path))
                })?)
            } else if let Some(r) = &vf.config_map_key_ref {
                match sources.configmap_key(&r.name, &r.key) {
                    Some(v) => Some(v),
                    None if r.optional == Some(true) => None,
                    None => {
                        return Err(KiabError::Spec(format!(
                            "configmap {:?} key {:?} not found",
                            r.name, r.key
                        )))
                    }
                }
            } else if let Some(r) = &vf.secret_key_ref {
                match sources.secret_key(&r.name, &r.key) {
                    Some(v) => Some(v),
                    None if r.optional == Some(true) => None,
                    None => {
                        return Err(KiabError::Spec(format!(
                            "secret {:?} key {:?} not found",
                            r.name, r.key
                        )))
                    }
                }
            } else {
                // resourceFieldRef: no resource accounting here; leave unset.
                None
            }
        } else {
            Some(String::new())
        };
        if let Some(v) = value {
            set(e.name.clone(), v, &mut order, &mut vars);
        }
    }
    Ok(order
        .into_iter()
        .map(|k| {
            let v = vars
                .get(&k)
                .map(|v| rewriter.rewrite(v))
                .unwrap_or_default();
            (k, v)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "rc-0-1", "namespace": "ns1", "uid": "u1", "labels": {"app": "x"}},
            "spec": {"containers": [{
                "name": "node", "image": "redis:7.0",
                "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"}],
                "env": [
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                    {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "password"}}},
                    {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k", "optional": true}}},
                    {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "mode"}}},
                    {"name": "ADDR", "value": "$(POD_IP):6379"},
                    {"name": "CONF", "value": "/etc/tessera/node.conf"}
                ]
            }]}
        }))
        .expect("pod json")
    }

    fn sources() -> PodSources {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "cm"}, "data": {"mode": "fast"}
        }))
        .expect("cm");
        let sec: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "sec"}, "data": {"password": "czNjcjN0"}
        }))
        .expect("secret");
        PodSources {
            configmaps: [("cm".to_string(), cm)].into_iter().collect(),
            secrets: [("sec".to_string(), sec)].into_iter().collect(),
        }
    }

    #[test]
    fn resolves_env_in_order() {
        let p = pod();
        let c = &p.spec.as_ref().expect("spec").containers[0];
        let rw = MountRewriter::new([("/etc/tessera".to_string(), "/host/cm".to_string())]);
        let env = container_env(&p, c, "127.0.1.9", &sources(), &rw).expect("env");
        let m: HashMap<_, _> = env.iter().cloned().collect();
        assert_eq!(m["CM_mode"], "fast");
        assert_eq!(m["POD_IP"], "127.0.1.9");
        assert_eq!(m["NAME"], "rc-0-1");
        assert_eq!(m["NS"], "ns1");
        assert_eq!(m["APP"], "x");
        assert_eq!(m["PASS"], "s3cr3t");
        assert!(!m.contains_key("OPT"));
        assert_eq!(m["MODE"], "fast");
        assert_eq!(m["ADDR"], "127.0.1.9:6379");
        assert_eq!(m["CONF"], "/host/cm/node.conf");
        assert_eq!(env[0].0, "CM_mode");
    }

    #[test]
    fn missing_required_secret_is_an_error() {
        let p = pod();
        let c = &p.spec.as_ref().expect("spec").containers[0];
        let err = container_env(
            &p,
            c,
            "127.0.1.9",
            &PodSources::default(),
            &Default::default(),
        );
        assert!(err.is_err());
        let (cms, secs) = referenced_names(&p);
        assert!(cms.contains("cm"));
        assert!(secs.contains("sec") && secs.contains("nope"));
    }
}
