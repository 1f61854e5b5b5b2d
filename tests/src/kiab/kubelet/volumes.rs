//! Pod volumes as host directories: ConfigMap/Secret (and projected) volumes as files,
//! PersistentVolumeClaims as directories under the box's state dir that outlive the pod,
//! emptyDir (and anything unsupported) as a per-pod directory.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, KeyToPath, Pod, Volume};

use super::env::PodSources;
use crate::kiab::error::KiabError;
use crate::kiab::expand::MountRewriter;

/// Host directory that backs a PVC: stable across pods, so data survives pod deletion.
pub fn pvc_dir(state_dir: &Path, namespace: &str, claim: &str) -> PathBuf {
    state_dir.join("pvc").join(namespace).join(claim)
}

/// The directory of a claim belongs to one PVC object, by uid (recorded in `<claim>.uid`
/// next to it): a claim deleted and created again under the same name is a new, empty
/// volume, as a dynamically provisioned volume is (its reclaim policy Delete). A directory
/// without a record is adopted as it is.
fn bind_claim_dir(dir: &Path, uid: &str) -> Result<(), KiabError> {
    let mut record = dir.as_os_str().to_owned();
    record.push(".uid");
    let record = PathBuf::from(record);
    match std::fs::read_to_string(&record) {
        Ok(old) if old == uid => return Ok(()),
        Ok(_) => {
            if dir.exists() {
                std::fs::remove_dir_all(dir).map_err(|e| KiabError::io(dir, e))?;
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(KiabError::io(&record, e)),
    }
    mkdir(dir)?;
    std::fs::write(&record, uid).map_err(|e| KiabError::io(&record, e))
}

/// The PVC names a pod mounts.
pub fn claims(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| {
            v.persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.clone())
        })
        .collect()
}

/// Creates (or refreshes) every volume of the pod; returns volume name → host path.
/// `existing_claims` are the PVCs known to exist (name -> uid); a missing one keeps the pod
/// Pending.
pub fn prepare(
    pod: &Pod,
    sources: &PodSources,
    pod_dir: &Path,
    state_dir: &Path,
    existing_claims: &HashMap<String, String>,
) -> Result<HashMap<String, PathBuf>, KiabError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut out = HashMap::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let path = prepare_one(v, ns, sources, pod_dir, state_dir, existing_claims)?;
        out.insert(v.name.clone(), path);
    }
    Ok(out)
}

fn prepare_one(
    v: &Volume,
    ns: &str,
    sources: &PodSources,
    pod_dir: &Path,
    state_dir: &Path,
    existing_claims: &HashMap<String, String>,
) -> Result<PathBuf, KiabError> {
    let vol_dir = pod_dir.join("volumes").join(&v.name);
    if let Some(c) = &v.persistent_volume_claim {
        let Some(uid) = existing_claims.get(&c.claim_name) else {
            return Err(KiabError::Spec(format!(
                "persistentvolumeclaim {:?} not found",
                c.claim_name
            )));
        };
        let dir = pvc_dir(state_dir, ns, &c.claim_name);
        bind_claim_dir(&dir, uid)?;
        return Ok(dir);
    }
    if let Some(cm) = &v.config_map {
        let files = match sources.configmaps.get(&cm.name) {
            Some(obj) => {
                let mut all: BTreeMap<String, Vec<u8>> = BTreeMap::new();
                for (k, val) in obj.data.iter().flatten() {
                    all.insert(k.clone(), val.clone().into_bytes());
                }
                for (k, val) in obj.binary_data.iter().flatten() {
                    all.insert(k.clone(), val.0.clone());
                }
                select(all, cm.items.as_deref())
            }
            None if cm.optional == Some(true) => BTreeMap::new(),
            None => {
                return Err(KiabError::Spec(format!(
                    "configmap {:?} not found",
                    cm.name
                )))
            }
        };
        write_files(&vol_dir, &files)?;
        return Ok(vol_dir);
    }
    if let Some(s) = &v.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        let files = match sources.secrets.get(&name) {
            Some(obj) => {
                let mut all: BTreeMap<String, Vec<u8>> = BTreeMap::new();
                for (k, val) in obj.data.iter().flatten() {
                    all.insert(k.clone(), val.0.clone());
                }
                for (k, val) in obj.string_data.iter().flatten() {
                    all.insert(k.clone(), val.clone().into_bytes());
                }
                select(all, s.items.as_deref())
            }
            None if s.optional == Some(true) => BTreeMap::new(),
            None => return Err(KiabError::Spec(format!("secret {name:?} not found"))),
        };
        write_files(&vol_dir, &files)?;
        return Ok(vol_dir);
    }
    if let Some(p) = &v.projected {
        let mut files = BTreeMap::new();
        for src in p.sources.iter().flatten() {
            if let Some(cm) = &src.config_map {
                if let Some(obj) = sources.configmaps.get(&cm.name) {
                    let all = obj
                        .data
                        .iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                        .collect();
                    files.extend(select(all, cm.items.as_deref()));
                }
            }
            if let Some(s) = &src.secret {
                if let Some(obj) = sources.secrets.get(&s.name) {
                    let all = obj
                        .data
                        .iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), v.0.clone()))
                        .collect();
                    files.extend(select(all, s.items.as_deref()));
                }
            }
        }
        write_files(&vol_dir, &files)?;
        return Ok(vol_dir);
    }
    // emptyDir, and every other kind (hostPath, downwardAPI...) as a plain per-pod directory.
    mkdir(&vol_dir)?;
    Ok(vol_dir)
}

fn select(
    all: BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
) -> BTreeMap<String, Vec<u8>> {
    match items {
        None => all,
        Some(items) => items
            .iter()
            .filter_map(|i| all.get(&i.key).map(|v| (i.path.clone(), v.clone())))
            .collect(),
    }
}

fn mkdir(dir: &Path) -> Result<(), KiabError> {
    std::fs::create_dir_all(dir).map_err(|e| KiabError::io(dir, e))
}

/// Writes files whose content changed, atomically (tmp + rename), refusing escaping paths.
fn write_files(dir: &Path, files: &BTreeMap<String, Vec<u8>>) -> Result<(), KiabError> {
    mkdir(dir)?;
    for (rel, content) in files {
        if rel.starts_with('/') || rel.split('/').any(|c| c == "..") {
            return Err(KiabError::Spec(format!(
                "volume item path {rel:?} escapes the volume"
            )));
        }
        let path = dir.join(rel);
        if std::fs::read(&path).ok().as_deref() == Some(content.as_slice()) {
            continue;
        }
        if let Some(parent) = path.parent() {
            mkdir(parent)?;
        }
        let tmp = path.with_extension("kiab-tmp");
        std::fs::write(&tmp, content).map_err(|e| KiabError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| KiabError::io(&path, e))?;
    }
    Ok(())
}

/// mountPath → host path for one container (subPath honoured).
pub fn mounts_for(
    container: &Container,
    volumes: &HashMap<String, PathBuf>,
) -> Result<MountRewriter, KiabError> {
    let mut pairs = Vec::new();
    for m in container.volume_mounts.iter().flatten() {
        let base = volumes
            .get(&m.name)
            .ok_or_else(|| KiabError::Spec(format!("volumeMount {:?} names no volume", m.name)))?;
        let host = match m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            Some(sub) => base.join(sub),
            None => base.clone(),
        };
        pairs.push((m.mount_path.clone(), host.to_string_lossy().into_owned()));
    }
    Ok(MountRewriter::new(pairs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn volumes_become_directories() {
        let tmp = tempfile::tempdir().expect("tmp");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "containers": [{"name": "c", "volumeMounts": [
                    {"name": "conf", "mountPath": "/etc/tessera"},
                    {"name": "data", "mountPath": "/data"},
                    {"name": "scratch", "mountPath": "/tmp/x"}
                ]}],
                "volumes": [
                    {"name": "conf", "configMap": {"name": "cm"}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-p"}},
                    {"name": "scratch", "emptyDir": {}}
                ]
            }
        }))
        .expect("pod");
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "cm"}, "data": {"node.conf": "cluster-enabled yes\n"}
        }))
        .expect("cm");
        let sources = PodSources {
            configmaps: [("cm".to_string(), cm)].into_iter().collect(),
            ..Default::default()
        };
        let pod_dir = tmp.path().join("pods/p");
        let none = HashMap::new();
        assert!(prepare(&pod, &sources, &pod_dir, tmp.path(), &none).is_err());
        let claims: HashMap<String, String> = claims(&pod)
            .into_iter()
            .map(|c| (c, "uid-1".to_string()))
            .collect();
        let vols = prepare(&pod, &sources, &pod_dir, tmp.path(), &claims).expect("prepare");
        let conf = std::fs::read_to_string(vols["conf"].join("node.conf")).expect("conf file");
        assert_eq!(conf, "cluster-enabled yes\n");
        assert_eq!(vols["data"], tmp.path().join("pvc/ns/data-p"));
        assert!(vols["scratch"].is_dir());
        let c = &pod.spec.as_ref().expect("spec").containers[0];
        let rw = mounts_for(c, &vols).expect("mounts");
        assert_eq!(
            rw.rewrite("/data/nodes.conf"),
            format!("{}/nodes.conf", vols["data"].display())
        );

        // The same claim object again: same data. A new claim under the same name: empty.
        std::fs::write(vols["data"].join("nodes.conf"), "old").expect("write");
        prepare(&pod, &sources, &pod_dir, tmp.path(), &claims).expect("prepare");
        assert!(
            vols["data"].join("nodes.conf").exists(),
            "kept for the same claim"
        );
        let renewed: HashMap<String, String> = claims
            .keys()
            .map(|c| (c.clone(), "uid-2".to_string()))
            .collect();
        prepare(&pod, &sources, &pod_dir, tmp.path(), &renewed).expect("prepare");
        assert!(vols["data"].is_dir());
        assert!(
            !vols["data"].join("nodes.conf").exists(),
            "a recreated claim is a new volume"
        );
    }
}

#[cfg(test)]
mod secret_tests {
    use super::*;
    use k8s_openapi::api::core::v1::Secret;

    #[test]
    fn secret_items_and_sub_path() {
        let tmp = tempfile::tempdir().expect("tmp");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "c", "volumeMounts": [
                    {"name": "auth", "mountPath": "/etc/auth/pw", "subPath": "pw"}
                ]}],
                "volumes": [{"name": "auth", "secret": {"secretName": "s",
                    "items": [{"key": "password", "path": "pw"}]}}]
            }
        }))
        .expect("pod");
        let s: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "s"}, "data": {"password": "aHVudGVyMg==", "other": "eA=="}
        }))
        .expect("secret");
        let sources = PodSources {
            secrets: [("s".to_string(), s)].into_iter().collect(),
            ..Default::default()
        };
        let vols = prepare(
            &pod,
            &sources,
            &tmp.path().join("pod"),
            tmp.path(),
            &HashMap::new(),
        )
        .expect("prepare");
        assert_eq!(
            std::fs::read_to_string(vols["auth"].join("pw")).expect("pw"),
            "hunter2"
        );
        assert!(!vols["auth"].join("other").exists(), "items select keys");
        let c = &pod.spec.as_ref().expect("spec").containers[0];
        let rw = mounts_for(c, &vols).expect("mounts");
        assert_eq!(
            rw.rewrite("/etc/auth/pw"),
            vols["auth"].join("pw").display().to_string()
        );
        // Missing secret (not optional) keeps the pod from starting.
        assert!(prepare(
            &pod,
            &PodSources::default(),
            &tmp.path().join("pod2"),
            tmp.path(),
            &HashMap::new()
        )
        .is_err());
    }
}
