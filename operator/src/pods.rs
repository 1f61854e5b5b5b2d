//! The lowest layer of the reconcile: labels and pure questions about pods and children
//! (which shard, which ordinal, Ready, started) that observe, status, restart and the
//! controller all ask. It imports nothing of the operator but the topology engine's
//! [`PodEndpoint`], so none of those modules has to import another for them.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use tessera_topology::PodEndpoint;

/// Label with the owning cluster's name, on every child and pod.
pub const LABEL_CLUSTER: &str = "tessera.rs/cluster";
/// Label with the shard index, on shard-scoped children and pods.
pub const LABEL_SHARD: &str = "tessera.rs/shard";
/// Label the StatefulSet controller puts on each pod: the revision of its template.
pub const REVISION_LABEL: &str = "controller-revision-hash";
/// Port every node serves clients on (the bus is this + 10000).
pub const CLIENT_PORT: i32 = 6379;

/// True when a pod's Ready condition is True.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Shard index from a child's `tessera.rs/shard` label.
pub fn shard_of(meta: &ObjectMeta) -> Option<u32> {
    meta.labels.as_ref()?.get(LABEL_SHARD)?.parse().ok()
}

/// Ordinal of a StatefulSet pod from its name (`<sts>-<ordinal>`).
pub fn ordinal_of(pod_name: &str) -> Option<u32> {
    pod_name.rsplit_once('-')?.1.parse().ok()
}

/// Pods that can be talked to: shard label, parsable ordinal, an IP, not terminating.
/// Sorted by (shard, ordinal) so the engine sees a stable order.
pub fn endpoints(pods: &[Pod]) -> Vec<PodEndpoint> {
    let mut out: Vec<PodEndpoint> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let name = p.name_any();
            let host = p
                .status
                .as_ref()?
                .pod_ip
                .clone()
                .filter(|ip| !ip.is_empty())?;
            Some(PodEndpoint {
                shard: shard_of(&p.metadata)?,
                ordinal: ordinal_of(&name)?,
                pod: name,
                host,
                port: CLIENT_PORT as u16,
            })
        })
        .collect();
    out.sort_by_key(|e| (e.shard, e.ordinal));
    out
}

/// True when every pod the spec asks for exists, is Ready and has an IP.
pub fn all_desired_ready(pods: &[Pod], shards: u32, replicas_per_shard: u32) -> bool {
    (0..shards).all(|shard| {
        (0..=replicas_per_shard).all(|ordinal| {
            pods.iter().any(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && shard_of(&p.metadata) == Some(shard)
                    && ordinal_of(&p.name_any()) == Some(ordinal)
                    && pod_ready(p)
                    && p.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some()
            })
        })
    })
}

/// True when every pod the spec asks for exists, has an IP and has started (its startup probe
/// passed): enough to form the cluster. Readiness is not asked for: a pod back on a kept volume
/// as the replica of a master whose address changed is unready (its link is down) until the
/// cluster is joined up again, which is what forming does.
pub fn all_desired_started(pods: &[Pod], shards: u32, replicas_per_shard: u32) -> bool {
    (0..shards).all(|shard| {
        (0..=replicas_per_shard).all(|ordinal| {
            pods.iter().any(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && shard_of(&p.metadata) == Some(shard)
                    && ordinal_of(&p.name_any()) == Some(ordinal)
                    && p.status.as_ref().is_some_and(|s| {
                        s.pod_ip.as_ref().is_some_and(|ip| !ip.is_empty())
                            && s.container_statuses.as_ref().is_some_and(|cs| {
                                !cs.is_empty() && cs.iter().all(|c| c.started == Some(true))
                            })
                    })
            })
        })
    })
}
