//! Leader election through a coordination.k8s.io/v1 Lease, so two operator replicas can run
//! and only one reconciles.
//!
//! Hand-rolled on `Api<Lease>` because no well-kept crate targets kube 5 yet. Semantics follow
//! client-go's leaderelection: a holder renews `renewTime` every `renew_every`; a candidate
//! takes the Lease only when it is unheld or `renewTime + leaseDurationSeconds` has passed;
//! every write carries the read resourceVersion, so two candidates never both win. A leader
//! that cannot renew within the lease duration must stop reconciling. On shutdown the leader
//! releases the Lease (clears the holder) so a standby takes over at once.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use kube::Client;
use tracing::{debug, info};

/// Lease settings.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    /// Unique per replica (pod name + random suffix).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_every: Duration,
}

impl LeaseConfig {
    /// Defaults: 15 s lease, renewed every 5 s.
    pub fn new(name: &str, namespace: &str, identity: &str) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
        }
    }
}

/// One candidate.
pub struct LeaderElector {
    api: Api<Lease>,
    cfg: LeaseConfig,
}

fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

impl LeaderElector {
    pub fn new(client: Client, cfg: LeaseConfig) -> Self {
        Self {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
        }
    }

    pub fn config(&self) -> &LeaseConfig {
        &self.cfg
    }

    /// One attempt to acquire or renew; Ok(true) means we hold the Lease now.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let Some(mut lease) = self.api.get_opt(&self.cfg.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.held_spec(now, now, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    info!(identity = %self.cfg.identity, "created lease, now leader");
                    Ok(true)
                }
                Err(e) if conflict(&e) => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let ours = holder.as_deref() == Some(self.cfg.identity.as_str());
        let transitions = spec.lease_transitions.unwrap_or(0);
        let new_spec = if ours {
            let acquired = spec.acquire_time.map_or(now, |t| t.0);
            self.held_spec(acquired, now, transitions)
        } else {
            if holder.is_some() && !expired(&spec, now) {
                debug!(holder = ?holder, "lease held by another replica");
                return Ok(false);
            }
            self.held_spec(now, now, transitions + 1)
        };
        lease.spec = Some(new_spec);
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                if !ours {
                    info!(identity = %self.cfg.identity, previous = ?holder, "took over lease, now leader");
                }
                Ok(true)
            }
            Err(e) if conflict(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the Lease up if we hold it (best effort).
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.cfg.name).await? else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.acquire_time = None;
        spec.renew_time = None;
        spec.lease_duration_seconds = Some(1);
        lease.spec = Some(spec);
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                info!(identity = %self.cfg.identity, "released lease");
                Ok(())
            }
            Err(e) if conflict(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn held_spec(&self, acquired: Timestamp, renewed: Timestamp, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.cfg.identity.clone()),
            lease_duration_seconds: Some(self.cfg.lease_duration.as_secs().max(1) as i32),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(renewed)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }
}

/// True when the holder missed its renewal window.
pub fn expired(spec: &LeaseSpec, now: Timestamp) -> bool {
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return true;
    };
    let secs = i64::from(spec.lease_duration_seconds.unwrap_or(15).max(1));
    renewed.0 + SignedDuration::from_secs(secs) < now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry() {
        let now = Timestamp::now();
        let mut spec = LeaseSpec {
            holder_identity: Some("a".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(now - SignedDuration::from_secs(10))),
            ..LeaseSpec::default()
        };
        assert!(!expired(&spec, now));
        spec.renew_time = Some(MicroTime(now - SignedDuration::from_secs(16)));
        assert!(expired(&spec, now));
        spec.renew_time = None;
        assert!(expired(&spec, now));
    }
}
