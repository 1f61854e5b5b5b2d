//! `spec.storage.size` growth. A StatefulSet's volumeClaimTemplates are immutable, so a grown
//! size is rolled out in three steps per shard: every existing claim of the StatefulSet is
//! patched to the new request (Kubernetes expands the volume if its StorageClass allows it),
//! then the StatefulSet is deleted with `propagationPolicy: Orphan` (its pods keep running) and
//! applied again with the new template; the new StatefulSet adopts the running pods (same
//! template, so no pod is restarted). Shrinking is refused: a claim cannot shrink.
//!
//! [`plan`] and [`plan_all`] are pure (unit-tested) and read the claims the observe step
//! listed (`crate::observe`); [`converge`] runs their actions against the API.

use std::cmp::Ordering;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PropagationPolicy};
use kube::{Api, Client, ResourceExt};
use tracing::{info, warn};

/// Name of the claim template (and volume) holding a node's data.
pub const CLAIM_TEMPLATE: &str = "data";

/// A quantity string that is not a Kubernetes quantity (or too large to compare).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a storage quantity")]
pub struct QuantityError(pub String);

/// A Kubernetes quantity (`10Gi`, `1.5G`, `500M`, `1e9`) in thousandths of a unit, rounded up
/// (storage sizes are whole bytes; milli only keeps `500m`-style inputs comparable).
pub fn parse_quantity(q: &str) -> Result<u128, QuantityError> {
    let err = || QuantityError(q.to_string());
    let s = q.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let number = number.strip_prefix('+').unwrap_or(number);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(err());
    }
    if !int_part
        .chars()
        .chain(frac_part.chars())
        .all(|c| c.is_ascii_digit())
    {
        return Err(err());
    }
    // value = digits / 10^frac_len * mult_num / mult_den, in milli-units.
    let digits: u128 = format!("{int_part}{frac_part}")
        .parse()
        .map_err(|_| err())?;
    let frac_len = u32::try_from(frac_part.len()).map_err(|_| err())?;
    let (mult_num, mult_den): (u128, u128) = match suffix {
        "" => (1, 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        "n" => (1, 1_000_000_000),
        "u" => (1, 1_000_000),
        "m" => (1, 1_000),
        "k" => (1_000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        exp => {
            let e = exp
                .strip_prefix('e')
                .or_else(|| exp.strip_prefix('E'))
                .ok_or_else(err)?;
            let e: i32 = e.parse().map_err(|_| err())?;
            let pow = |n: i32| 10u128.checked_pow(n.unsigned_abs()).ok_or_else(err);
            if e >= 0 {
                (pow(e)?, 1)
            } else {
                (1, pow(e)?)
            }
        }
    };
    let numerator = digits
        .checked_mul(mult_num)
        .and_then(|v| v.checked_mul(1000))
        .ok_or_else(err)?;
    let denominator = 10u128
        .checked_pow(frac_len)
        .and_then(|v| v.checked_mul(mult_den))
        .ok_or_else(err)?;
    Ok(numerator.div_ceil(denominator))
}

/// Compares two quantities by value (`1Gi` == `1024Mi`).
pub fn compare_quantities(a: &str, b: &str) -> Result<Ordering, QuantityError> {
    Ok(parse_quantity(a)?.cmp(&parse_quantity(b)?))
}

/// The data claim template's storage class and requested size, if the StatefulSet has one.
fn claim_shape(sts: &StatefulSet) -> Option<(Option<String>, Option<String>)> {
    let template = sts
        .spec
        .as_ref()?
        .volume_claim_templates
        .as_ref()?
        .iter()
        .find(|t| t.metadata.name.as_deref() == Some(CLAIM_TEMPLATE))?;
    let spec = template.spec.as_ref();
    Some((
        spec.and_then(|s| s.storage_class_name.clone()),
        spec.and_then(requested),
    ))
}

fn requested(spec: &k8s_openapi::api::core::v1::PersistentVolumeClaimSpec) -> Option<String> {
    spec.resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
        .map(|q| q.0.clone())
}

/// A claim's requested size.
pub fn claim_request(pvc: &PersistentVolumeClaim) -> Option<String> {
    pvc.spec.as_ref().and_then(requested)
}

/// A claim's provisioned size (`status.capacity.storage`).
pub fn claim_capacity(pvc: &PersistentVolumeClaim) -> Option<String> {
    pvc.status
        .as_ref()?
        .capacity
        .as_ref()?
        .get("storage")
        .map(|q| q.0.clone())
}

/// Why a claim's expansion cannot finish, if Kubernetes says so
/// (`status.allocatedResourceStatuses.storage` is `ControllerResizeInfeasible` or
/// `NodeResizeInfeasible`); a resize merely in progress is not reported.
pub fn resize_infeasible(pvc: &PersistentVolumeClaim) -> Option<String> {
    pvc.status
        .as_ref()?
        .allocated_resource_statuses
        .as_ref()?
        .get("storage")
        .filter(|s| s.ends_with("Infeasible"))
        .cloned()
}

/// Whether `pvc` is one of `sts`'s data claims: `data-<sts>-<ordinal>`.
pub fn claim_of(pvc: &PersistentVolumeClaim, sts: &str) -> bool {
    let name = pvc.name_any();
    name.strip_prefix(CLAIM_TEMPLATE)
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| r.strip_prefix(sts))
        .and_then(|r| r.strip_prefix('-'))
        .is_some_and(|ord| !ord.is_empty() && ord.chars().all(|c| c.is_ascii_digit()))
}

/// What to do with one StatefulSet's claim template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateStep {
    /// Nothing to change (no storage, or the same class and size).
    Keep,
    /// The size grew: delete the StatefulSet with orphan propagation, apply it again.
    Recreate { from: String, to: String },
    /// The desired size is smaller than the live one: apply with the live size, warn.
    KeepLiveSize { live: String, desired: String },
    /// Storage added, removed or its class changed (the CRD refuses these; an old CRD may
    /// not): the StatefulSet is not applied at all, warn.
    Refuse(String),
}

/// The plan for one StatefulSet: its template step and the claims to patch to `size`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StsPlan {
    pub template: TemplateStep,
    /// The desired claim size, if the desired StatefulSet has storage.
    pub size: Option<String>,
    /// Names of this StatefulSet's claims whose request is below `size`.
    pub patch_claims: Vec<String>,
}

/// Plans `desired` against its live StatefulSet and the namespace's claims. Pure.
pub fn plan(
    desired: &StatefulSet,
    live: &StatefulSet,
    claims: &[PersistentVolumeClaim],
) -> Result<StsPlan, QuantityError> {
    let name = desired.name_any();
    let want = claim_shape(desired);
    let have = claim_shape(live);
    let template = match (&want, &have) {
        (None, None) => TemplateStep::Keep,
        (Some(_), None) => TemplateStep::Refuse(format!(
            "{name}: storage cannot be added to a StatefulSet that has none"
        )),
        (None, Some(_)) => TemplateStep::Refuse(format!(
            "{name}: storage cannot be removed from a StatefulSet"
        )),
        (Some((want_class, want_size)), Some((have_class, have_size))) => {
            if want_class != have_class {
                TemplateStep::Refuse(format!(
                    "{name}: the storage class cannot change ({} -> {})",
                    have_class.as_deref().unwrap_or("default"),
                    want_class.as_deref().unwrap_or("default"),
                ))
            } else {
                match (want_size, have_size) {
                    (Some(to), Some(from)) => match compare_quantities(to, from)? {
                        Ordering::Greater => TemplateStep::Recreate {
                            from: from.clone(),
                            to: to.clone(),
                        },
                        Ordering::Less => TemplateStep::KeepLiveSize {
                            live: from.clone(),
                            desired: to.clone(),
                        },
                        // Same value, maybe spelt differently: nothing to roll out.
                        Ordering::Equal if to != from => TemplateStep::KeepLiveSize {
                            live: from.clone(),
                            desired: to.clone(),
                        },
                        Ordering::Equal => TemplateStep::Keep,
                    },
                    _ => TemplateStep::Keep,
                }
            }
        }
    };
    // Claims are raised only to a size the template rolls out (or already has).
    let size = match &template {
        TemplateStep::Keep | TemplateStep::Recreate { .. } => want.and_then(|(_, s)| s),
        TemplateStep::KeepLiveSize { .. } | TemplateStep::Refuse(_) => None,
    };
    let mut patch_claims = Vec::new();
    if let Some(size) = &size {
        for c in claims.iter().filter(|c| claim_of(c, &name)) {
            if c.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let below = match claim_request(c) {
                Some(req) => compare_quantities(&req, size)? == Ordering::Less,
                None => true,
            };
            if below {
                patch_claims.push(c.name_any());
            }
        }
        patch_claims.sort();
    }
    Ok(StsPlan {
        template,
        size,
        patch_claims,
    })
}

/// Sets the data claim template's requested size (for [`TemplateStep::KeepLiveSize`]).
pub fn set_template_size(sts: &mut StatefulSet, size: &str) {
    let templates = sts
        .spec
        .as_mut()
        .and_then(|s| s.volume_claim_templates.as_mut());
    for t in templates.into_iter().flatten() {
        if t.metadata.name.as_deref() != Some(CLAIM_TEMPLATE) {
            continue;
        }
        if let Some(req) = t
            .spec
            .as_mut()
            .and_then(|s| s.resources.as_mut())
            .and_then(|r| r.requests.as_mut())
        {
            req.insert(
                "storage".into(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(size.into()),
            );
        }
    }
}

/// Gives `desired` the claim size of its live StatefulSet (if both have one): for a
/// StatefulSet applied outside [`converge`], whose template must not change.
pub fn keep_live_size(desired: &mut StatefulSet, live: &[StatefulSet]) {
    let name = desired.name_any();
    let live_size = live
        .iter()
        .find(|l| l.name_any() == name)
        .and_then(claim_shape)
        .and_then(|(_, size)| size);
    if let Some(size) = live_size {
        set_template_size(desired, &size);
    }
}

/// Something [`converge`] did or could not do, for an Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// How long [`converge`] waits for an orphan-deleted StatefulSet to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(15);

/// What the storage step does to one desired StatefulSet that exists (see [`plan_all`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StsActions {
    pub name: String,
    /// Claims to patch to this size (the size, the claims' names).
    pub resize: Option<(String, Vec<String>)>,
    /// What the plan alone says (claims that cannot be expanded, a refused change), for
    /// Events after the resize's own.
    pub notes: Vec<Note>,
    /// The claim template grew (from, to): delete the StatefulSet with orphan propagation,
    /// then apply it again.
    pub recreate: Option<(String, String)>,
    /// Not applied this reconcile (an invalid size, a refused change).
    pub skip: bool,
}

/// Plans the storage step of every desired StatefulSet that exists, against the live ones and
/// the observed claims, and edits `desired` so that an immutable template is never applied
/// changed (a smaller size keeps the live one). Pure.
pub fn plan_all(
    desired: &mut [StatefulSet],
    live: &[StatefulSet],
    claims: &[PersistentVolumeClaim],
) -> Vec<StsActions> {
    let mut out = Vec::new();
    for sts in desired.iter_mut() {
        let name = sts.name_any();
        let Some(current) = live.iter().find(|l| l.name_any() == name) else {
            continue;
        };
        let mut a = StsActions {
            name: name.clone(),
            resize: None,
            notes: Vec::new(),
            recreate: None,
            skip: false,
        };
        let plan = match plan(sts, current, claims) {
            Ok(p) => p,
            Err(e) => {
                a.notes.push(Note {
                    warning: true,
                    reason: "StorageSizeInvalid",
                    message: format!("{name}: {e}"),
                });
                a.skip = true;
                out.push(a);
                continue;
            }
        };
        a.resize = plan
            .size
            .clone()
            .map(|size| (size, plan.patch_claims.clone()));
        let stuck: Vec<String> = claims
            .iter()
            .filter(|c| claim_of(c, &name))
            .filter_map(|c| resize_infeasible(c).map(|why| format!("{} ({why})", c.name_any())))
            .collect();
        if !stuck.is_empty() {
            a.notes.push(Note {
                warning: true,
                reason: "StorageResizeFailed",
                message: format!("cannot be expanded: {}", stuck.join(", ")),
            });
        }
        match plan.template {
            TemplateStep::Keep => {}
            TemplateStep::KeepLiveSize { live, desired } => {
                if compare_quantities(&desired, &live) != Ok(Ordering::Equal) {
                    a.notes.push(Note {
                        warning: true,
                        reason: "StorageShrinkRefused",
                        message: format!(
                            "{name}: spec.storage.size {desired} is below the live {live}; a claim cannot shrink, keeping {live}"
                        ),
                    });
                }
                set_template_size(sts, &live);
            }
            TemplateStep::Refuse(why) => {
                a.notes.push(Note {
                    warning: true,
                    reason: "StorageChangeRefused",
                    message: why,
                });
                a.skip = true;
            }
            TemplateStep::Recreate { from, to } => a.recreate = Some((from, to)),
        }
        out.push(a);
    }
    out
}

/// Runs the storage actions ([`plan_all`]): patches lagging claims, recreates grown
/// StatefulSets (orphan delete; the caller applies `desired` afterwards, and `live` loses the
/// deleted ones so the apply is not skipped), and takes out of `desired` what must not be
/// applied this reconcile. Returns Events to publish.
pub async fn converge(
    client: &Client,
    ns: &str,
    sel: &ListParams,
    actions: &[StsActions],
    desired: &mut Vec<StatefulSet>,
    live: &mut Vec<StatefulSet>,
) -> Result<Vec<Note>, kube::Error> {
    if actions.is_empty() {
        return Ok(Vec::new());
    }
    let pvc_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    let mut notes = Vec::new();
    let mut skip = Vec::new();
    for a in actions {
        let name = &a.name;
        if let Some((size, claims)) = &a.resize {
            let patch = serde_json::json!({
                "spec": { "resources": { "requests": { "storage": size } } }
            });
            let mut failed = Vec::new();
            for claim in claims {
                match pvc_api
                    .patch(claim, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => info!(pvc = %claim, %size, "claim resized"),
                    Err(e) => {
                        warn!(pvc = %claim, error = %e, "claim not resized");
                        failed.push(format!("{claim}: {e}"));
                    }
                }
            }
            let done = claims.len() - failed.len();
            if done > 0 {
                notes.push(Note {
                    warning: false,
                    reason: "StorageResized",
                    message: format!("{name}: {done} claim(s) requested at {size}"),
                });
            }
            if !failed.is_empty() {
                notes.push(Note {
                    warning: true,
                    reason: "StorageResizeFailed",
                    message: format!(
                        "not resized to {size} (does the StorageClass allow volume expansion?): {}",
                        failed.join("; ")
                    ),
                });
            }
        }
        notes.extend(a.notes.iter().cloned());
        if a.skip {
            skip.push(name.clone());
        }
        if let Some((from, to)) = &a.recreate {
            info!(statefulset = %name, %from, %to, "recreating StatefulSet for a grown claim template (pods orphaned, then adopted)");
            let dp = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Orphan),
                ..DeleteParams::default()
            };
            match sts_api.delete(name, &dp).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
            if wait_gone(&sts_api, sel, name).await? {
                live.retain(|l| l.name_any() != *name);
                notes.push(Note {
                    warning: false,
                    reason: "StorageExpanded",
                    message: format!(
                        "{name}: volume claim template {from} -> {to}; StatefulSet recreated, pods kept running"
                    ),
                });
            } else {
                // Still terminating: applied by a later reconcile once gone.
                skip.push(name.clone());
            }
        }
    }
    desired.retain(|d| !skip.contains(&d.name_any()));
    Ok(merge_notes(notes))
}

/// One note per reason, its messages joined: the Recorder folds Events of one reason into a
/// series that keeps the first note, which would hide every shard but the first.
pub fn merge_notes(notes: Vec<Note>) -> Vec<Note> {
    let mut merged: Vec<Note> = Vec::new();
    for n in notes {
        match merged.iter_mut().find(|m| m.reason == n.reason) {
            Some(m) => {
                m.message.push_str("; ");
                m.message.push_str(&n.message);
            }
            None => merged.push(n),
        }
    }
    merged
}

/// Polls until StatefulSet `name` is no longer listed; false if it still is after a while.
async fn wait_gone(
    api: &Api<StatefulSet>,
    sel: &ListParams,
    name: &str,
) -> Result<bool, kube::Error> {
    let start = tokio::time::Instant::now();
    loop {
        let listed = api.list(sel).await?.items;
        if !listed.iter().any(|s| s.name_any() == name) {
            return Ok(true);
        }
        if start.elapsed() > GONE_WITHIN {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, VolumeResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    #[test]
    fn quantities_compare_by_value() {
        assert_eq!(parse_quantity("1Ki"), Ok(1024 * 1000));
        assert_eq!(parse_quantity("1k"), Ok(1_000_000));
        assert_eq!(parse_quantity("1.5Gi"), Ok(1_610_612_736_000));
        assert_eq!(parse_quantity("500m"), Ok(500));
        assert_eq!(parse_quantity("1e3"), Ok(1_000_000));
        assert_eq!(compare_quantities("1Gi", "1024Mi"), Ok(Ordering::Equal));
        assert_eq!(compare_quantities("2Gi", "1Gi"), Ok(Ordering::Greater));
        assert_eq!(compare_quantities("1G", "1Gi"), Ok(Ordering::Less));
        assert_eq!(compare_quantities("0.5Gi", "512Mi"), Ok(Ordering::Equal));
        for bad in ["", "Gi", "1Gb", "1..5Gi", "-1Gi", "1e999", "x"] {
            assert!(parse_quantity(bad).is_err(), "{bad:?}");
        }
    }

    fn sts(name: &str, storage: Option<(&str, Option<&str>)>) -> StatefulSet {
        let templates = storage.map(|(size, class)| {
            vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(CLAIM_TEMPLATE.into()),
                    ..ObjectMeta::default()
                },
                spec: Some(PersistentVolumeClaimSpec {
                    storage_class_name: class.map(Into::into),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([("storage".into(), Quantity(size.into()))])),
                        ..VolumeResourceRequirements::default()
                    }),
                    ..PersistentVolumeClaimSpec::default()
                }),
                ..PersistentVolumeClaim::default()
            }]
        });
        StatefulSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(k8s_openapi::api::apps::v1::StatefulSetSpec {
                volume_claim_templates: templates,
                ..Default::default()
            }),
            status: None,
        }
    }

    fn claim(name: &str, size: &str) -> PersistentVolumeClaim {
        let mut c = sts("x", Some((size, None)))
            .spec
            .and_then(|s| s.volume_claim_templates)
            .and_then(|mut t| t.pop())
            .unwrap_or_default();
        c.metadata.name = Some(name.into());
        c
    }

    #[test]
    fn an_infeasible_resize_is_reported() {
        let mut c = claim("data-pv-0-0", "2Gi");
        assert_eq!(resize_infeasible(&c), None);
        let status = |v: &str| {
            Some(k8s_openapi::api::core::v1::PersistentVolumeClaimStatus {
                allocated_resource_statuses: Some(BTreeMap::from([(
                    "storage".to_string(),
                    v.to_string(),
                )])),
                ..Default::default()
            })
        };
        c.status = status("ControllerResizeInProgress");
        assert_eq!(resize_infeasible(&c), None);
        c.status = status("NodeResizeInfeasible");
        assert_eq!(resize_infeasible(&c), Some("NodeResizeInfeasible".into()));
    }

    #[test]
    fn notes_of_one_reason_become_one() {
        let n = |reason, message: &str| Note {
            warning: false,
            reason,
            message: message.into(),
        };
        assert_eq!(
            merge_notes(vec![n("A", "x-0"), n("B", "y"), n("A", "x-1")]),
            vec![n("A", "x-0; x-1"), n("B", "y")]
        );
    }

    #[test]
    fn claims_of_a_statefulset_are_named_by_ordinal() {
        assert!(claim_of(&claim("data-pv-1-0", "1Gi"), "pv-1"));
        assert!(claim_of(&claim("data-pv-1-12", "1Gi"), "pv-1"));
        assert!(!claim_of(&claim("data-pv-1-0", "1Gi"), "pv"));
        assert!(!claim_of(&claim("data-pv-10-0", "1Gi"), "pv-1"));
        assert!(!claim_of(&claim("other-pv-1-0", "1Gi"), "pv-1"));
        assert!(!claim_of(&claim("data-pv-1-", "1Gi"), "pv-1"));
    }

    #[test]
    fn growth_patches_the_smaller_claims_and_recreates() {
        let claims = [
            claim("data-pv-0-0", "1Gi"),
            claim("data-pv-0-1", "2Gi"),
            claim("data-pv-0-2", "1024Mi"),
            claim("data-pv-1-0", "1Gi"),
        ];
        let p = plan(
            &sts("pv-0", Some(("2Gi", None))),
            &sts("pv-0", Some(("1Gi", None))),
            &claims,
        );
        assert_eq!(
            p,
            Ok(StsPlan {
                template: TemplateStep::Recreate {
                    from: "1Gi".into(),
                    to: "2Gi".into()
                },
                size: Some("2Gi".into()),
                patch_claims: vec!["data-pv-0-0".into(), "data-pv-0-2".into()],
            })
        );
    }

    #[test]
    fn an_unchanged_template_still_raises_lagging_claims() {
        // E.g. the operator stopped between the claim patches and the recreation.
        let claims = [claim("data-pv-0-0", "2Gi"), claim("data-pv-0-1", "1Gi")];
        let p = plan(
            &sts("pv-0", Some(("2Gi", None))),
            &sts("pv-0", Some(("2Gi", None))),
            &claims,
        );
        assert_eq!(
            p.map(|p| (p.template, p.patch_claims)),
            Ok((TemplateStep::Keep, vec!["data-pv-0-1".to_string()]))
        );
    }

    #[test]
    fn plan_all_resizes_recreates_and_refuses_per_statefulset() {
        let claims = [
            claim("data-pv-0-0", "1Gi"),
            claim("data-pv-1-0", "2Gi"),
            claim("data-pv-2-0", "1Gi"),
        ];
        let mut infeasible = claim("data-pv-3-0", "1Gi");
        infeasible.status = Some(k8s_openapi::api::core::v1::PersistentVolumeClaimStatus {
            allocated_resource_statuses: Some(BTreeMap::from([(
                "storage".to_string(),
                "ControllerResizeInfeasible".to_string(),
            )])),
            ..Default::default()
        });
        let claims = [claims.as_slice(), &[infeasible]].concat();
        let mut desired = vec![
            sts("pv-0", Some(("2Gi", None))),         // grown
            sts("pv-1", Some(("1Gi", None))),         // smaller than the live 2Gi
            sts("pv-2", Some(("2Gi", Some("fast")))), // class changed
            sts("pv-3", Some(("1Gi", None))),         // unchanged, claim stuck
            sts("pv-4", Some(("1Gi", None))),         // not created yet
        ];
        let live = [
            sts("pv-0", Some(("1Gi", None))),
            sts("pv-1", Some(("2Gi", None))),
            sts("pv-2", Some(("1Gi", None))),
            sts("pv-3", Some(("1Gi", None))),
        ];
        let a = plan_all(&mut desired, &live, &claims);
        assert_eq!(a.len(), 4, "one entry per StatefulSet that exists");
        assert_eq!(
            a[0].resize,
            Some(("2Gi".to_string(), vec!["data-pv-0-0".to_string()]))
        );
        assert_eq!(a[0].recreate, Some(("1Gi".into(), "2Gi".into())));
        assert!(!a[0].skip);
        assert_eq!(a[1].resize, None);
        assert_eq!(a[1].notes[0].reason, "StorageShrinkRefused");
        assert_eq!(
            claim_shape(&desired[1]),
            Some((None, Some("2Gi".into()))),
            "applied with the live size"
        );
        assert!(a[2].skip);
        assert_eq!(a[2].notes[0].reason, "StorageChangeRefused");
        assert_eq!(a[3].resize, Some(("1Gi".to_string(), vec![])));
        assert_eq!(a[3].notes[0].reason, "StorageResizeFailed");
        assert!(a[3].recreate.is_none() && !a[3].skip);
        let mut bad = vec![sts("pv-0", Some(("lots", None)))];
        let a = plan_all(&mut bad, &live, &claims);
        assert!(a[0].skip);
        assert_eq!(a[0].notes[0].reason, "StorageSizeInvalid");
    }

    #[test]
    fn shrinking_and_other_changes_are_refused() {
        let claims = [claim("data-pv-0-0", "2Gi")];
        let p = plan(
            &sts("pv-0", Some(("1Gi", None))),
            &sts("pv-0", Some(("2Gi", None))),
            &claims,
        );
        assert_eq!(
            p.map(|p| (p.template, p.patch_claims)),
            Ok((
                TemplateStep::KeepLiveSize {
                    live: "2Gi".into(),
                    desired: "1Gi".into()
                },
                vec![]
            ))
        );
        let same_value = plan(
            &sts("pv-0", Some(("1024Mi", None))),
            &sts("pv-0", Some(("1Gi", None))),
            &[],
        );
        assert!(matches!(
            same_value.map(|p| p.template),
            Ok(TemplateStep::KeepLiveSize { .. })
        ));
        let class = plan(
            &sts("pv-0", Some(("2Gi", Some("fast")))),
            &sts("pv-0", Some(("1Gi", None))),
            &claims,
        );
        assert!(matches!(
            class.as_ref().map(|p| &p.template),
            Ok(TemplateStep::Refuse(_))
        ));
        assert_eq!(class.map(|p| p.patch_claims), Ok(vec![]));
        assert!(matches!(
            plan(&sts("pv-0", None), &sts("pv-0", Some(("1Gi", None))), &[]).map(|p| p.template),
            Ok(TemplateStep::Refuse(_))
        ));
        assert_eq!(
            plan(&sts("pv-0", None), &sts("pv-0", None), &[]).map(|p| p.template),
            Ok(TemplateStep::Keep)
        );
        let mut s = sts("pv-0", Some(("1Gi", None)));
        set_template_size(&mut s, "2Gi");
        assert_eq!(claim_shape(&s), Some((None, Some("2Gi".into()))));
    }
}
