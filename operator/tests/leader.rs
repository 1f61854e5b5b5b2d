//! Leader election on a Lease in the in-memory API: one holder at a time, renewals, release on
//! shutdown, takeover after expiry.

mod support;

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;
use support::fake_api::FakeApi;
use tessera_operator::leader::{LeaderElector, LeaseConfig};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/ops/leases";

fn elector(api: &FakeApi, id: &str) -> LeaderElector {
    let mut cfg = LeaseConfig::new("tessera-operator", "ops", id);
    cfg.lease_duration = Duration::from_secs(15);
    LeaderElector::new(api.client(), cfg)
}

#[tokio::test]
async fn one_leader_at_a_time() {
    let api = FakeApi::new();
    let a = elector(&api, "a");
    let b = elector(&api, "b");
    assert!(
        a.try_acquire_or_renew().await.unwrap(),
        "first candidate creates the lease"
    );
    assert!(!b.try_acquire_or_renew().await.unwrap(), "second must wait");
    assert!(a.try_acquire_or_renew().await.unwrap(), "holder renews");
    assert!(!b.try_acquire_or_renew().await.unwrap());
    let lease = api.get(LEASES, "tessera-operator").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "a");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 15);
    assert_eq!(lease["spec"]["leaseTransitions"], 0);

    // Graceful shutdown: a releases, b takes over at once.
    a.release().await.unwrap();
    assert!(api.get(LEASES, "tessera-operator").unwrap()["spec"]["holderIdentity"].is_null());
    assert!(b.try_acquire_or_renew().await.unwrap());
    let lease = api.get(LEASES, "tessera-operator").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    // Releasing a lease someone else holds is a no-op.
    a.release().await.unwrap();
    assert_eq!(
        api.get(LEASES, "tessera-operator").unwrap()["spec"]["holderIdentity"],
        "b"
    );
}

#[tokio::test]
async fn expired_lease_is_taken_over() {
    let api = FakeApi::new();
    let a = elector(&api, "a");
    let b = elector(&api, "b");
    assert!(a.try_acquire_or_renew().await.unwrap());
    // a stops renewing: age its renewTime past the lease duration.
    let mut lease = api.get(LEASES, "tessera-operator").unwrap();
    let old = Timestamp::now() - SignedDuration::from_secs(16);
    lease["spec"]["renewTime"] = json!(old.to_string());
    api.insert(LEASES, lease);
    assert!(
        b.try_acquire_or_renew().await.unwrap(),
        "expired lease is free"
    );
    assert_eq!(
        api.get(LEASES, "tessera-operator").unwrap()["spec"]["holderIdentity"],
        "b"
    );
    // The old leader notices on its next renewal that it lost.
    assert!(!a.try_acquire_or_renew().await.unwrap());
}

#[tokio::test]
async fn writes_carry_the_read_resource_version() {
    let api = FakeApi::new();
    let a = elector(&api, "a");
    assert!(a.try_acquire_or_renew().await.unwrap());
    // Every write carries the resourceVersion it read: a PUT with a stale one is a conflict.
    let calls = api.take_calls();
    assert!(calls.iter().any(|c| c.method == "POST"));
    assert!(a.try_acquire_or_renew().await.unwrap());
    let put = api.calls().into_iter().find(|c| c.method == "PUT").unwrap();
    assert!(put.body.unwrap()["metadata"]["resourceVersion"].is_string());
}
