//! The StatefulSet controller: a polling loop over StatefulSets, their pods and PVCs that
//! applies `plan::plan` and writes status. (Polling instead of watches keeps it simple and
//! robust against restarts of the API; the tick is short enough for tests and the demo.)

pub mod plan;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use tokio::sync::watch;
use tracing::{debug, info, instrument, warn};

use self::plan::{plan, revision, Action, PlanInput};

/// Runs the controller until `shutdown` flips to true.
pub async fn run(client: Client, tick: Duration, mut shutdown: watch::Receiver<bool>) {
    let mut ctl = Controller {
        client,
        templates: HashMap::new(),
        last_status: HashMap::new(),
    };
    info!("statefulset controller started");
    loop {
        if *shutdown.borrow() {
            return;
        }
        if let Err(e) = ctl.pass().await {
            debug!(error = %e, "statefulset pass failed");
        }
        tokio::select! {
            _ = shutdown.changed() => {}
            _ = tokio::time::sleep(tick) => {}
        }
    }
}

struct Controller {
    client: Client,
    /// Templates seen per revision (stands in for ControllerRevision objects), so pods below
    /// a rollout partition are recreated at their old revision.
    templates: HashMap<String, PodTemplateSpec>,
    /// Last status written per StatefulSet uid, to skip no-op writes.
    last_status: HashMap<String, serde_json::Value>,
}

impl Controller {
    async fn pass(&mut self) -> Result<(), kube::Error> {
        let lp = ListParams::default();
        let sets = Api::<StatefulSet>::all(self.client.clone())
            .list(&lp)
            .await?;
        if sets.items.is_empty() {
            return Ok(());
        }
        let pods = Api::<Pod>::all(self.client.clone()).list(&lp).await?;
        let pvcs = Api::<PersistentVolumeClaim>::all(self.client.clone())
            .list(&lp)
            .await?;
        let mut pods_by_owner: HashMap<String, Vec<Pod>> = HashMap::new();
        let mut orphans = Vec::new();
        for p in pods.items {
            let owner = p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| (o.uid.clone(), o.kind == "StatefulSet"));
            match owner {
                Some((uid, true)) => pods_by_owner.entry(uid).or_default().push(p),
                Some((_, false)) => {}
                None if p.metadata.deletion_timestamp.is_none() => orphans.push(p),
                None => {}
            }
        }
        for sts in &sets.items {
            if sts.metadata.deletion_timestamp.is_some() {
                continue;
            }
            for pod in adoptable(sts, &orphans) {
                if self.adopt(sts, pod).await {
                    let uid = sts.metadata.uid.clone().unwrap_or_default();
                    pods_by_owner.entry(uid).or_default().push(pod.clone());
                }
            }
        }
        self.expand_claims(&pvcs.items).await;
        let mut pvc_names: HashMap<String, HashSet<String>> = HashMap::new();
        for c in pvcs.items {
            let ns = c.metadata.namespace.clone().unwrap_or_default();
            if let Some(n) = c.metadata.name.clone() {
                pvc_names.entry(ns).or_default().insert(n);
            }
        }
        for sts in sets.items {
            if sts.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let uid = sts.metadata.uid.clone().unwrap_or_default();
            let ns = sts
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            let name = sts.metadata.name.clone().unwrap_or_default();
            let pods = pods_by_owner.remove(&uid).unwrap_or_default();
            let empty = HashSet::new();
            let pvcs = pvc_names.get(&ns).unwrap_or(&empty);
            if let Some(spec) = &sts.spec {
                self.templates.insert(
                    format!("{ns}/{}", revision(&name, &spec.template)),
                    spec.template.clone(),
                );
            }
            let current_template = sts
                .status
                .as_ref()
                .and_then(|s| s.current_revision.as_ref())
                .and_then(|r| self.templates.get(&format!("{ns}/{r}")))
                .cloned();
            let (actions, status) = plan(&PlanInput {
                sts: &sts,
                pods: &pods,
                pvcs,
                current_template: current_template.as_ref(),
            });
            for a in actions {
                if let Err(e) = self.execute(&ns, &name, a).await {
                    warn!(statefulset = %name, error = %e, "action failed");
                }
            }
            let value = serde_json::to_value(&status).unwrap_or_default();
            if self.last_status.get(&uid) != Some(&value) {
                let api: Api<StatefulSet> = Api::namespaced(self.client.clone(), &ns);
                let patch = serde_json::json!({ "status": value });
                match api
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => {
                        self.last_status.insert(uid, value);
                    }
                    Err(e) => debug!(statefulset = %name, error = %e, "status write failed"),
                }
            }
        }
        Ok(())
    }

    /// Takes an orphaned pod (e.g. left by an orphan delete of its StatefulSet) as its own:
    /// adds the controller ownerReference, as the real controller's adoption does. Its
    /// template is not compared: a pod of another revision is updated by the update strategy.
    async fn adopt(&self, sts: &StatefulSet, pod: &Pod) -> bool {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let mut refs = pod.metadata.owner_references.clone().unwrap_or_default();
        refs.push(plan::owner_ref(sts));
        let patch = serde_json::json!({
            "metadata": {
                "ownerReferences": refs,
                "uid": pod.metadata.uid,
            }
        });
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                info!(statefulset = ?sts.metadata.name, pod = %name, "adopted orphan pod");
                true
            }
            Err(e) => {
                debug!(pod = %name, error = %e, "adoption failed");
                false
            }
        }
    }

    /// Volume expansion as if every StorageClass allowed it: a bound claim whose request
    /// differs from its capacity gets the request as capacity at once.
    async fn expand_claims(&self, claims: &[PersistentVolumeClaim]) {
        for c in claims {
            let bound = c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
            let request = c
                .spec
                .as_ref()
                .and_then(|s| s.resources.as_ref())
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("storage"));
            let capacity = c
                .status
                .as_ref()
                .and_then(|s| s.capacity.as_ref())
                .and_then(|r| r.get("storage"));
            let Some(request) = request else { continue };
            if !bound || capacity == Some(request) {
                continue;
            }
            let ns = c.metadata.namespace.clone().unwrap_or_default();
            let name = c.metadata.name.clone().unwrap_or_default();
            let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
            let status = serde_json::json!({"status": {"capacity": {"storage": request}}});
            match api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
            {
                Ok(_) => info!(pvc = %name, size = %request.0, "claim expanded"),
                Err(e) => debug!(pvc = %name, error = %e, "claim expansion failed"),
            }
        }
    }

    #[instrument(skip(self, action), fields(action = action.describe()))]
    async fn execute(&self, ns: &str, sts: &str, action: Action) -> Result<(), kube::Error> {
        let pp = PostParams::default();
        match action {
            Action::CreatePvc(pvc) => {
                let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
                let name = pvc.metadata.name.clone().unwrap_or_default();
                info!(statefulset = sts, pvc = %name, "creating pvc");
                ignore_conflict(api.create(&pp, &pvc).await.map(|_| ()))?;
                // No provisioner here: a claim is bound as soon as it exists.
                let storage = pvc
                    .spec
                    .as_ref()
                    .and_then(|s| s.resources.as_ref())
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get("storage"))
                    .cloned();
                let status = serde_json::json!({"status": {
                    "phase": "Bound",
                    "accessModes": pvc.spec.as_ref().and_then(|s| s.access_modes.clone()),
                    "capacity": storage.map(|s| serde_json::json!({"storage": s})),
                }});
                if let Err(e) = api
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                {
                    debug!(pvc = %name, error = %e, "pvc status write failed");
                }
                Ok(())
            }
            Action::CreatePod(pod) => {
                let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
                info!(statefulset = sts, pod = ?pod.metadata.name, "creating pod");
                ignore_conflict(api.create(&pp, &pod).await.map(|_| ()))
            }
            Action::DeletePod { name, uid } => {
                let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
                info!(statefulset = sts, pod = %name, "deleting pod");
                let dp = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid,
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                match api.delete(&name, &dp).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
                    Err(e) => Err(e),
                }
            }
        }
    }
}

/// Orphans `sts` may adopt: same namespace, matching its selector's matchLabels (a selector
/// without them adopts nothing), named `<sts>-<ordinal>`.
fn adoptable<'a>(sts: &StatefulSet, orphans: &'a [Pod]) -> Vec<&'a Pod> {
    let Some(selector) = sts
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
        .filter(|m| !m.is_empty())
    else {
        return Vec::new();
    };
    let name = sts.metadata.name.clone().unwrap_or_default();
    orphans
        .iter()
        .filter(|p| p.metadata.namespace == sts.metadata.namespace)
        .filter(|p| {
            let labels = p.metadata.labels.clone().unwrap_or_default();
            selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        })
        .filter(|p| {
            p.metadata
                .name
                .as_deref()
                .and_then(|n| n.strip_prefix(name.as_str()))
                .and_then(|r| r.strip_prefix('-'))
                .is_some_and(|o| !o.is_empty() && o.chars().all(|c| c.is_ascii_digit()))
        })
        .collect()
}

fn ignore_conflict(r: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match r {
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        other => other,
    }
}
