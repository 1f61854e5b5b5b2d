//! The RedisCluster controller: validate → observe (every API read, `crate::observe`) → the
//! pure steps (`crate::steps`, storage, auth, restart, status) → executing their actions
//! (applies, deletes, the password switch, the topology engine, a restart step, the status
//! patch, Events), once per reconcile. After its own writes it keeps the observed value in
//! step with the API's answers instead of reading again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::{info, instrument, warn};

use crate::auth::{self, AuthStep};
use crate::children::{self, LABEL_CLUSTER};
use crate::crd::{Phase, RedisCluster, RedisClusterStatus};
use crate::metrics::{ErrorCategory, FailoverReason, Metrics};
use crate::observe::{self, ObserveError, Observed, SecretError};
use crate::pods::{all_desired_ready, endpoints, shard_of};
use crate::restart::{self, Next, RestartAction, RestartInput, RestartPlan};
use crate::status::{self, StatusInput, TopologyOutcome};
use crate::steps::{self, Child, NodeAuth, Passwords};
use crate::validate::validate;
use tessera_topology::shrink::Known;
use tessera_topology::{Desired, EngineOptions, PodEndpoint, TopologyError, TopologyReport};

/// The single server-side-apply field manager of every object the operator writes.
pub const FIELD_MANAGER: &str = "tessera-operator";

/// Errors of one reconcile (the error policy requeues with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("building children: {0}")]
    Children(#[from] children::ChildError),
    #[error("the RedisCluster has no namespace")]
    NoNamespace,
    /// The password Secret is there but unusable (no such key, not UTF-8).
    #[error("auth secret {0}: {1}")]
    Secret(String, String),
    /// Reading the password Secret failed (404: it does not exist; 403: RBAC).
    #[error("auth secret {0}: {1}")]
    SecretApi(String, #[source] kube::Error),
    #[error("password change: {0}")]
    Auth(#[from] auth::AuthError),
}

impl From<ObserveError> for Error {
    fn from(e: ObserveError) -> Self {
        match e {
            ObserveError::Kube(e) => Error::Kube(e),
            // As when the password step read the record itself.
            ObserveError::ActiveSecret(why) | ObserveError::AdminSecret(why) => {
                Error::Auth(auth::AuthError::BadSecret(why))
            }
        }
    }
}

impl From<SecretError> for Error {
    fn from(e: SecretError) -> Self {
        match e {
            SecretError::Api(name, e) => Error::SecretApi(name, e),
            SecretError::Bad(name, why) => Error::Secret(name, why),
        }
    }
}

impl Error {
    /// The metric category of this error (see `crate::metrics::ErrorCategory`).
    pub fn category(&self) -> ErrorCategory {
        match self {
            Error::Kube(_) | Error::Auth(auth::AuthError::Kube(_)) => ErrorCategory::KubeApi,
            // A Secret the spec names but that does not exist is the user's to fix.
            Error::SecretApi(_, kube::Error::Api(e)) if e.code == 404 => ErrorCategory::Validation,
            Error::SecretApi(..) => ErrorCategory::KubeApi,
            Error::Children(_)
            | Error::NoNamespace
            | Error::Secret(..)
            | Error::Auth(auth::AuthError::Children(_) | auth::AuthError::BadSecret(_)) => {
                ErrorCategory::Validation
            }
            Error::Auth(auth::AuthError::Node(e)) => topology_category(e),
        }
    }
}

/// node_unreachable when the node could not be talked to at all, else topology.
pub fn topology_category(e: &TopologyError) -> ErrorCategory {
    match e {
        TopologyError::NoneReachable => ErrorCategory::NodeUnreachable,
        TopologyError::Redis { source, .. }
            if source.is_io_error()
                || source.is_timeout()
                || source.is_connection_refusal()
                || source.is_connection_dropped() =>
        {
            ErrorCategory::NodeUnreachable
        }
        _ => ErrorCategory::Topology,
    }
}

/// The topology step, behind a trait so reconcile tests can run without node processes.
pub trait TopologyEngine: Send + Sync {
    fn reconcile<'a>(
        &'a self,
        desired: &'a Desired,
        pods: &'a [PodEndpoint],
        opts: &'a EngineOptions,
    ) -> BoxFuture<'a, Result<TopologyReport, TopologyError>>;
}

/// The real engine in `tessera_topology`.
pub struct RealEngine;

impl TopologyEngine for RealEngine {
    fn reconcile<'a>(
        &'a self,
        desired: &'a Desired,
        pods: &'a [PodEndpoint],
        opts: &'a EngineOptions,
    ) -> BoxFuture<'a, Result<TopologyReport, TopologyError>> {
        Box::pin(tessera_topology::reconcile(desired, pods, opts))
    }
}

/// Shared state of every reconcile.
pub struct Context {
    pub client: Client,
    reporter: Reporter,
    recorders: Mutex<HashMap<String, KeyedRecorder>>,
    pub metrics: Arc<Metrics>,
    pub engine: Arc<dyn TopologyEngine>,
    pub engine_options: EngineOptions,
    /// Requeue interval while the cluster is not Ready.
    pub requeue_converging: Duration,
    /// Requeue interval once Ready (drift checks).
    pub requeue_ready: Duration,
    /// How often the password Secrets of clusters with spec.auth are polled for a change
    /// (there is no Secret watch; see `crate::auth::secret_changes`).
    pub secret_poll: Duration,
    /// After the TLS Secret's CA changed, how long every node keeps being reloaded before
    /// the change counts as done: the kubelet refreshes a mounted Secret within about a
    /// minute or two, and nothing shows which CA a node loaded (crate::tls::plan).
    pub tls_ca_window: Duration,
    failures: Mutex<HashMap<String, u32>>,
    /// `<cluster>-node-auth` as last applied (namespace/name → hash, when): it is not read
    /// back (see `apply_node_auth`), so an unchanged one is re-applied only every
    /// `requeue_ready`, which also brings back one deleted by hand.
    node_auth_applied: Mutex<HashMap<String, (String, Instant)>>,
}

impl Context {
    /// A context with default intervals.
    pub fn new(client: Client, metrics: Arc<Metrics>, engine: Arc<dyn TopologyEngine>) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            reporter,
            recorders: Mutex::new(HashMap::new()),
            client,
            metrics,
            engine,
            engine_options: EngineOptions::default(),
            requeue_converging: Duration::from_secs(10),
            requeue_ready: Duration::from_secs(300),
            secret_poll: Duration::from_secs(10),
            tls_ca_window: Duration::from_secs(120),
            failures: Mutex::new(HashMap::new()),
            node_auth_applied: Mutex::new(HashMap::new()),
        }
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        match self.failures.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The recorder for an Event of `key` (object, type, reason, action, related object)
    /// saying `note`. kube's Recorder folds an Event into the earlier one of the same key for
    /// minutes and keeps the earlier note: right for a repeat, wrong for news ("shard 1..."
    /// then "shard 2..."). So the recorder is kept while the note repeats, and a changed note
    /// gets a fresh one, hence an Event of its own. Entries idle for longer than the
    /// Recorder's own cache lives are dropped.
    fn recorder_for(&self, key: String, note: &str) -> Recorder {
        /// Longer than kube's Recorder keeps an Event to fold repeats into (6 minutes).
        const IDLE: Duration = Duration::from_secs(600);
        let now = Instant::now();
        let mut map = match self.recorders.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.retain(|_, r| now.duration_since(r.used) < IDLE);
        let entry = map.entry(key).or_insert_with(|| KeyedRecorder {
            note: note.to_string(),
            recorder: Recorder::new(self.client.clone(), self.reporter.clone()),
            used: now,
        });
        if entry.note != note {
            entry.note = note.to_string();
            entry.recorder = Recorder::new(self.client.clone(), self.reporter.clone());
        }
        entry.used = now;
        entry.recorder.clone()
    }
}

/// The recorder of one Event key and the note it last published.
struct KeyedRecorder {
    note: String,
    recorder: Recorder,
    used: Instant,
}

fn key(rc: &RedisCluster) -> String {
    format!("{}/{}", rc.namespace().unwrap_or_default(), rc.name_any())
}

/// Runs the controller for the given namespaces (empty = all) until `shutdown` resolves.
pub async fn run(
    ctx: Arc<Context>,
    namespaces: Vec<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    let scopes: Vec<Option<String>> = if namespaces.is_empty() {
        vec![None]
    } else {
        namespaces.into_iter().map(Some).collect()
    };
    let runs = scopes.into_iter().map(|ns| {
        let client = ctx.client.clone();
        let ctx = ctx.clone();
        let shutdown = shutdown.clone();
        let metrics = ctx.metrics.clone();
        async move {
            let owned =
                watcher::Config::default().labels("app.kubernetes.io/managed-by=tessera-operator");
            let pods_cfg = watcher::Config::default().labels(LABEL_CLUSTER);
            let controller = Controller::new(
                api::<RedisCluster>(&client, ns.as_deref()),
                watcher::Config::default(),
            );
            let clusters = controller.store();
            controller
                .owns(api::<StatefulSet>(&client, ns.as_deref()), owned.clone())
                .owns(api::<Service>(&client, ns.as_deref()), owned.clone())
                .owns(api::<ConfigMap>(&client, ns.as_deref()), owned.clone())
                .owns(api::<PodDisruptionBudget>(&client, ns.as_deref()), owned)
                .watches(api::<Pod>(&client, ns.as_deref()), pods_cfg, |pod: Pod| {
                    let ns = pod.namespace();
                    pod.labels()
                        .get(LABEL_CLUSTER)
                        .map(|c| {
                            let r = ObjectRef::<RedisCluster>::new(c);
                            match ns {
                                Some(ns) => r.within(&ns),
                                None => r,
                            }
                        })
                        .into_iter()
                        .collect::<Vec<_>>()
                })
                // A changed password Secret reaches the clusters that use it within one poll,
                // not at their next periodic reconcile (see crate::auth).
                .reconcile_on(auth::secret_changes(
                    client.clone(),
                    clusters,
                    ctx.secret_poll,
                ))
                .graceful_shutdown_on(shutdown)
                .run(reconcile, error_policy, ctx)
                .for_each(|res| {
                    let metrics = metrics.clone();
                    async move {
                        match res {
                            Ok(_) => {}
                            // A deleted cluster: drop its gauges (children go with the GC).
                            Err(kube::runtime::controller::Error::ObjectNotFound(r)) => {
                                metrics.forget_cluster(
                                    r.namespace.as_deref().unwrap_or_default(),
                                    &r.name,
                                );
                            }
                            Err(e) => warn!(error = %e, "controller"),
                        }
                    }
                })
                .await;
        }
    });
    futures::future::join_all(runs).await;
}

fn api<K>(client: &Client, ns: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Back-off on errors: 5 s doubling to 5 min, reset by a successful reconcile.
pub fn error_policy(rc: Arc<RedisCluster>, err: &Error, ctx: Arc<Context>) -> Action {
    let mut failures = ctx.failures();
    let n = failures.entry(key(&rc)).or_insert(0);
    *n = n.saturating_add(1);
    let delay = Duration::from_secs(5u64.saturating_mul(1u64 << (*n - 1).min(6)))
        .min(Duration::from_secs(300));
    warn!(cluster = %key(&rc), error = %err, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// One reconcile, timed and counted.
#[instrument(skip_all, fields(cluster = %key(&rc)))]
pub async fn reconcile(rc: Arc<RedisCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let start = Instant::now();
    let res = reconcile_inner(&rc, &ctx).await;
    ctx.metrics
        .reconciled(res.as_ref().err().map(Error::category), start.elapsed());
    if res.is_ok() {
        ctx.failures().remove(&key(&rc));
    }
    res
}

async fn reconcile_inner(rc: &RedisCluster, ctx: &Context) -> Result<Action, Error> {
    let ns = rc.namespace().ok_or(Error::NoNamespace)?;
    let name = rc.name_any();
    if rc.meta().deletion_timestamp.is_some() {
        // Owner references let the garbage collector delete every child.
        ctx.metrics.forget_cluster(&ns, &name);
        return Ok(Action::await_change());
    }
    let client = &ctx.client;
    let spec = &rc.spec;
    let previous = rc.status.as_ref();

    // validate (pure), then observe: every API read of this reconcile, once. Below, the
    // observed lists only follow the operator's own writes (the answers to them).
    let problems = validate(&name, spec);
    let mut obs = observe::observe(client, rc, &ns, problems.is_empty()).await?;
    let sel = observe::selector(&name);
    let recorded_before = obs.recorded_before;

    // desired children (pure) → apply. StatefulSets that would shrink are held: applied after
    // the topology step, at their new size once none of the pods they remove is a master.
    let mut held = Vec::new();
    if problems.is_empty() {
        // The operator's own user: its password is made once, before the node config that
        // carries its hash.
        if obs.admin_password.is_none() {
            obs.admin_password = Some(auth::create_admin(client, rc, &ns).await?);
        }
        // spec.tls.issuerRef: the Certificate cert-manager turns into the TLS Secret.
        if let Some(issuer) = spec.tls.as_ref().and_then(|t| t.issuer_ref.as_ref()) {
            let cert = crate::tls::certificate(rc, issuer, &obs.pods)?;
            if let Err(why) = crate::tls::apply_certificate(client, &ns, &cert, FIELD_MANAGER).await
            {
                publish(
                    ctx,
                    rc,
                    EventType::Warning,
                    "CertificateNotApplied",
                    "Certificate",
                    why,
                )
                .await;
            }
        }
        let plan = steps::children(rc, &obs)?;
        held = plan.held;
        apply_node_auth(ctx, &ns, &plan.node_auth).await?;
        // spec.storage.size grown: claims patched, StatefulSets recreated (pods orphaned).
        let mut desired = plan.desired;
        let notes = crate::storage::converge(
            client,
            &ns,
            &sel,
            &plan.storage,
            &mut desired.stateful_sets,
            &mut obs.stateful_sets,
        )
        .await?;
        for n in notes {
            let type_ = if n.warning {
                EventType::Warning
            } else {
                EventType::Normal
            };
            publish(ctx, rc, type_, n.reason, "Storage", n.message).await;
        }
        let (to_apply, up_to_date) = steps::children_to_apply(&desired, &obs);
        for _ in 0..up_to_date {
            ctx.metrics.child_apply(false);
        }
        for child in to_apply {
            apply_child(ctx, &ns, child, &mut obs).await?;
        }
    }

    // spec.tls: the Secret the nodes and the operator's connections use; until it is usable
    // (cert-manager has not issued it yet) no node is talked to.
    let tls = match obs.tls.take() {
        None => Ok(None),
        Some(Ok(m)) => Ok(Some(m)),
        Some(Err(why)) => Err(why),
    };

    // password step: a changed password is switched live on every running node
    let passwords = match (obs.passwords.take(), &tls) {
        (Some(observed), Ok(material)) if problems.is_empty() => {
            let mut p = Passwords::from_observed(observed)?;
            p.admin = obs.admin_password.clone();
            p.tls = material.as_ref().map(|m| m.client.clone());
            password_step(rc, ctx, &ns, &obs.pods, previous, &mut p).await?;
            Some(p)
        }
        _ => None,
    };

    // users step: spec.users on every node, masters and replicas (crate::users)
    let user_problems = crate::users::validate(spec);
    let users_record = previous.map(|s| s.users.clone()).unwrap_or_default();
    let mut users_done = None;
    // Every cluster: the operator's own user is one of them.
    if let Some(p) = passwords.as_ref() {
        users_done = Some(users_step(ctx, rc, spec, &obs, p, &user_problems, &users_record).await);
    }

    // topology step
    let topology = match &passwords {
        None => TopologyOutcome::NotRun(match &tls {
            Err(why) if problems.is_empty() => why.clone(),
            _ => "the spec is invalid".into(),
        }),
        Some(p) => match steps::topology_endpoints(spec, &obs.pods, previous) {
            Err(why) => TopologyOutcome::NotRun(why),
            Ok(eps) => topology_step(ctx, spec, &eps, p).await,
        },
    };

    if let TopologyOutcome::Report(r) = &topology {
        ctx.metrics.topology_pass(&ns, &name, r);
    }

    // certificate step: every node serves the TLS Secret's certificate (crate::tls)
    let tls_status = match (&tls, &passwords, spec.tls.as_ref()) {
        (Ok(Some(material)), Some(p), Some(tls_spec)) => {
            Some(tls_step(ctx, rc, &obs.pods, p, material, tls_spec).await)
        }
        // Not usable yet: what was known stays.
        _ => previous.and_then(|s| s.tls.clone()),
    };

    // fewer replicas per shard: shrink a StatefulSet once no pod it removes is a master
    if !held.is_empty() {
        let known = match &topology {
            TopologyOutcome::Report(r) => Known::Report(r),
            TopologyOutcome::NotRun(_) => Known::NotRun,
            TopologyOutcome::Error(_) => Known::Failed,
        };
        for (sts, why) in steps::shrinks(&held, known) {
            if let Some(why) = why {
                info!(%why, "StatefulSet shrink held");
            }
            match steps::outdated(&sts, &obs.stateful_sets) {
                Some(stamped) => {
                    apply_child(ctx, &ns, Child::StatefulSet(Box::new(stamped)), &mut obs).await?
                }
                None => ctx.metrics.child_apply(false),
            }
        }
    }

    // scale-in: a removed shard's StatefulSet goes only once its slots live elsewhere
    if let TopologyOutcome::Report(report) = &topology {
        let removed = steps::shards_to_remove(&name, spec.shards, report, &obs.stateful_sets);
        if !removed.is_empty() {
            let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
            let pdb_api: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
            for sts_name in &removed {
                delete_if_exists(&sts_api, sts_name).await?;
                delete_if_exists(&pdb_api, sts_name).await?;
            }
            obs.stateful_sets
                .retain(|s| shard_of(&s.metadata).is_some_and(|sh| sh < spec.shards));
            publish(
                ctx,
                rc,
                EventType::Normal,
                "ShardsRemoved",
                "Delete",
                format!("drained shards removed: {}", removed.join(", ")),
            )
            .await;
        }
    }

    // rolling restart: at most one pod restarted (or one failover) per reconcile
    let report = match &topology {
        TopologyOutcome::Report(r) => Some(r),
        _ => None,
    };
    let restart_plan = problems.is_empty().then(|| {
        restart::plan(&RestartInput {
            spec,
            stateful_sets: &obs.stateful_sets,
            pods: &obs.pods,
            report,
        })
    });
    if let (Some(plan), Some(p)) = (&restart_plan, &passwords) {
        rolling_restart(ctx, rc, &ns, plan, p).await?;
    }
    let settled = report.is_some_and(|r| r.converged)
        && all_desired_ready(&obs.pods, spec.shards, spec.replicas_per_shard);
    let rollout = restart_plan
        .as_ref()
        .and_then(|p| restart::rollout_view(p, previous, settled));

    // status
    let mut new_status = status::compute(&StatusInput {
        name: &name,
        generation: rc.meta().generation,
        spec,
        previous,
        stateful_sets: &obs.stateful_sets,
        pods: &obs.pods,
        problems: &problems,
        topology: &topology,
        rollout: rollout.as_ref(),
        now: Timestamp::now(),
    });
    let mut users_requeue = None;
    match users_done {
        Some(done) => {
            new_status.users = done.record;
            new_status.conditions.extend(done.conditions);
            users_requeue = done.requeue;
        }
        None => new_status.users = users_record,
    }
    // A node not serving the new certificate yet, or a CA change still in its window.
    let tls_pending = tls_status
        .as_ref()
        .is_some_and(|t| !t.pending_pods.is_empty() || t.ca_change_seen_at.is_some());
    new_status.tls = tls_status;
    new_status.password_recorded = passwords
        .as_ref()
        .map_or(recorded_before, |p| p.active.is_some());
    ctx.metrics.observe_status(&ns, &name, &new_status);
    events_for(ctx, rc, previous, &new_status, &topology, &obs.pods).await;
    if previous != Some(&new_status) {
        let api: Api<RedisCluster> = Api::namespaced(client.clone(), &ns);
        let patch = serde_json::json!({ "status": status_patch(&new_status) });
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    // The phase's reason and message too: why a cluster is not Ready is what a log is read for.
    let why = new_status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| format!("{}: {}", c.reason, c.message))
        .unwrap_or_default();
    info!(phase = new_status.phase.as_str(), ready = %new_status.ready_text, slots = new_status.slots_assigned, %why, "reconciled");
    let every = match new_status.phase {
        Phase::Ready | Phase::Failed => ctx.requeue_ready,
        _ => ctx.requeue_converging,
    };
    // A password overlap window ends on time, not at the next periodic reconcile; a node not
    // serving the new certificate yet is asked again soon.
    let every = if tls_pending {
        every.min(crate::tls::RETRY)
    } else {
        every
    };
    Ok(Action::requeue(
        users_requeue.map_or(every, |u| u.min(every)),
    ))
}

/// What the users step leaves for the status.
struct UsersDone {
    record: Vec<crate::crd::UserStatus>,
    conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    requeue: Option<Duration>,
}

/// Validates spec.users, plans (pure, `crate::users`) and brings every node to the plan; a
/// bad rule sends nothing. Node failures are reported in the UsersReady condition (and an
/// Event), not as a reconcile error: the next reconcile retries.
async fn users_step(
    ctx: &Context,
    rc: &RedisCluster,
    spec: &crate::crd::RedisClusterSpec,
    obs: &Observed,
    passwords: &Passwords,
    problems: &[crate::users::UserProblem],
    record: &[crate::crd::UserStatus],
) -> UsersDone {
    use crate::users;
    let previous = rc
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let now = Timestamp::now();
    let overlap = Duration::from_secs(u64::from(spec.user_password_overlap_seconds));
    if !problems.is_empty() {
        let wanted = users::conditions(problems, None, None, record);
        return UsersDone {
            record: record.to_vec(),
            conditions: users::to_conditions(wanted, previous, now, rc.meta().generation),
            requeue: None,
        };
    }
    let access = users::Access {
        admin_sha: passwords
            .admin
            .as_deref()
            .map(users::sha256)
            .unwrap_or_default(),
        // `default`'s password follows requirepass; mid-change, it is left alone.
        default_password: (passwords.desired == passwords.active)
            .then(|| passwords.desired.clone()),
    };
    let plan = users::with_access(
        users::plan(spec, &obs.user_passwords, record, now),
        spec,
        record,
        &access,
    );
    let eps = endpoints(&obs.pods);
    let opts = steps::engine_options(&ctx.engine_options, passwords);
    let outcome = users::apply(&eps, &opts, &plan).await;
    let all_ok = outcome.failed.is_empty() && !eps.is_empty();
    let after = Timestamp::now();
    let new_record = users::record_after(&plan, all_ok, after);
    if outcome.commands > 0 {
        publish(
            ctx,
            rc,
            EventType::Normal,
            "UsersUpdated",
            "AclSetUser",
            format!(
                "{} ACL commands sent to {} nodes",
                outcome.commands, outcome.visited
            ),
        )
        .await;
    }
    let wanted = users::conditions(&[], Some(&plan), Some(&outcome), &new_record);
    UsersDone {
        // A node not updated (a pod starting) is retried soon, even on a Ready cluster.
        requeue: users::next_check(&new_record, after, overlap)
            .into_iter()
            .chain((!all_ok).then_some(ctx.requeue_converging))
            .min(),
        conditions: users::to_conditions(wanted, previous, after, rc.meta().generation),
        record: new_record,
    }
}

/// The status as a JSON merge patch: optional fields that are now empty are sent as null, so
/// a merge patch removes them instead of leaving a stale value behind.
pub fn status_patch(status: &RedisClusterStatus) -> serde_json::Value {
    let mut v = serde_json::to_value(status).unwrap_or_default();
    if let Some(map) = v.as_object_mut() {
        for key in [
            "observedGeneration",
            "replicationLagBytes",
            "conditions",
            "shardStatuses",
            "progress",
            "passwordRecorded",
            "users",
            "tls",
        ] {
            map.entry(key).or_insert(serde_json::Value::Null);
        }
        // Objects merge field by field: emptied moves would otherwise stay.
        if let Some(p) = map.get_mut("progress").and_then(|p| p.as_object_mut()) {
            p.entry("moves").or_insert(serde_json::Value::Null);
        }
        // A finished CA change's time, or pods no longer pending, must go.
        if let Some(t) = map.get_mut("tls").and_then(|t| t.as_object_mut()) {
            for key in [
                "certificateFingerprint",
                "caFingerprint",
                "caChangeSeenAt",
                "pendingPods",
            ] {
                t.entry(key).or_insert(serde_json::Value::Null);
            }
        }
    }
    v
}

/// Brings every running node to the TLS Secret's certificate and CA when the status records
/// others (`crate::tls::plan`), with an Event once done; returns the new record.
async fn tls_step(
    ctx: &Context,
    rc: &RedisCluster,
    pods: &[Pod],
    passwords: &Passwords,
    material: &crate::tls::Material,
    tls_spec: &crate::crd::TlsSpec,
) -> crate::crd::TlsStatus {
    let secret_name = crate::tls::secret_name(&rc.name_any(), tls_spec);
    let recorded = rc
        .status
        .as_ref()
        .and_then(|s| s.tls.as_ref())
        .filter(|t| t.secret_name == secret_name);
    let now = Timestamp::now();
    let plan = crate::tls::plan(recorded, material, now, ctx.tls_ca_window);
    let mut record = crate::crd::TlsStatus {
        secret_name,
        certificate_fingerprint: recorded.and_then(|r| r.certificate_fingerprint.clone()),
        ca_fingerprint: recorded.and_then(|r| r.ca_fingerprint.clone()),
        ca_change_seen_at: plan.ca_seen_at.map(|t| t.to_string()),
        pending_pods: Vec::new(),
    };
    if !plan.check {
        return record;
    }
    let eps = endpoints(pods);
    if eps.is_empty() {
        return record;
    }
    let opts = steps::engine_options(&ctx.engine_options, passwords);
    let summary = crate::tls::summarize(
        crate::tls::reload_all(&eps, &opts, material, plan.force_reload).await,
    );
    crate::tls::log(&summary);
    record.pending_pods = summary.pending.keys().cloned().collect();
    if summary.pending.is_empty() && plan.may_record {
        record.certificate_fingerprint = Some(material.fingerprint.clone());
        record.ca_fingerprint = Some(material.ca_fingerprint.clone());
        record.ca_change_seen_at = None;
        // A first record (a new cluster) is no change worth an Event.
        if recorded.is_some_and(|r| r.certificate_fingerprint.is_some()) {
            publish(
                ctx,
                rc,
                EventType::Normal,
                "CertificateReloaded",
                "ConfigSet",
                format!(
                    "every node serves certificate {} and trusts CA bundle {} (reloaded without a restart on {})",
                    &material.fingerprint[..16],
                    &material.ca_fingerprint[..16],
                    if summary.reloaded.is_empty() {
                        "no node: they had it already".to_string()
                    } else {
                        summary.reloaded.join(", ")
                    }
                ),
            )
            .await;
        }
    }
    record
}

/// Calls the engine on the pods it manages (`steps::topology_endpoints`).
async fn topology_step(
    ctx: &Context,
    spec: &crate::crd::RedisClusterSpec,
    eps: &[PodEndpoint],
    passwords: &Passwords,
) -> TopologyOutcome {
    let opts = steps::engine_options(&ctx.engine_options, passwords);
    let desired = Desired {
        shards: spec.shards,
        replicas_per_shard: spec.replicas_per_shard,
        paused: spec.paused,
    };
    match ctx.engine.reconcile(&desired, eps, &opts).await {
        Ok(report) => TopologyOutcome::Report(report),
        Err(e) => {
            // The reconcile goes on (status says why), but the failure is counted.
            ctx.metrics.error(topology_category(&e));
            TopologyOutcome::Error(e.to_string())
        }
    }
}

/// Brings the nodes to the desired password (see `crate::auth`), with an Event when nodes
/// were switched or a switch failed; `passwords.active` follows the record. A failure does not
/// stop the reconcile: the topology engine still logs in with either password.
async fn password_step(
    rc: &RedisCluster,
    ctx: &Context,
    ns: &str,
    pods: &[Pod],
    previous: Option<&RedisClusterStatus>,
    passwords: &mut Passwords,
) -> Result<(), Error> {
    let (desired, active) = (passwords.desired.clone(), passwords.active.clone());
    let step = auth::plan(
        desired.as_deref(),
        active.as_deref(),
        status::was_formed(previous),
    );
    match step {
        AuthStep::InSync => {}
        AuthStep::Record => {
            auth::write_active(&ctx.client, rc, ns, desired.as_deref()).await?;
            passwords.active = desired.clone();
        }
        AuthStep::Switch => {
            let eps = endpoints(pods);
            let opts = steps::engine_options(&ctx.engine_options, passwords);
            match auth::switch(&eps, &opts, desired.as_deref(), active.as_deref()).await {
                Ok(changed) => {
                    auth::write_active(&ctx.client, rc, ns, desired.as_deref()).await?;
                    passwords.active = desired.clone();
                    if changed > 0 {
                        let what = if desired.is_some() {
                            "the new password"
                        } else {
                            "no password"
                        };
                        publish(
                            ctx,
                            rc,
                            EventType::Normal,
                            "PasswordChanged",
                            "ConfigSet",
                            format!("{changed} of {} nodes switched to {what}", eps.len()),
                        )
                        .await;
                    }
                }
                Err(e) => {
                    warn!(error = %e, "password change incomplete");
                    publish(
                        ctx,
                        rc,
                        EventType::Warning,
                        "PasswordChangeFailed",
                        "ConfigSet",
                        format!("not every node took the new password yet: {e}"),
                    )
                    .await;
                }
            }
        }
    }
    Ok(())
}

/// Runs the restart plan's action, if any, with an Event saying what was done (or why not).
async fn rolling_restart(
    ctx: &Context,
    rc: &RedisCluster,
    ns: &str,
    plan: &RestartPlan,
    passwords: &Passwords,
) -> Result<(), Error> {
    match &plan.next {
        Next::Act(action) => {
            let opts = steps::engine_options(&ctx.engine_options, passwords);
            let (type_, reason, note) = match restart::exec::execute(&ctx.client, ns, action, &opts)
                .await
            {
                Ok(done) => {
                    info!(%done, "rolling restart");
                    let cluster = rc.name_any();
                    match action {
                        RestartAction::Failover { .. } => {
                            ctx.metrics
                                .failed_over(ns, &cluster, FailoverReason::RollingRestart, 1)
                        }
                        RestartAction::DeleteReplica(_) | RestartAction::DeleteLoneMaster(_) => {
                            ctx.metrics.pod_restarted(ns, &cluster)
                        }
                    }
                    // Restarting a shard's only node is an outage of its slots: a Warning.
                    let type_ = match action {
                        RestartAction::DeleteLoneMaster(_) => EventType::Warning,
                        _ => EventType::Normal,
                    };
                    (type_, restart::REASON, done)
                }
                Err(e) => {
                    warn!(error = %e, "rolling restart step failed");
                    (EventType::Warning, "RollingRestartFailed", e.to_string())
                }
            };
            // One Event action per kind of step, and the pod as related object: the Recorder
            // folds repeats of a (type, reason, action, related) into one Event's series.
            let (verb, pod) = match action {
                RestartAction::Failover { master_pod, .. } => ("Failover", master_pod.as_str()),
                RestartAction::DeleteReplica(p) | RestartAction::DeleteLoneMaster(p) => {
                    ("DeletePod", p.name.as_str())
                }
            };
            publish_about(ctx, rc, type_, reason, verb, note, Some(pod)).await;
        }
        // Paused is already in the Progressing condition; other blocks are news.
        Next::Blocked(why) if !rc.spec.paused => {
            publish(
                ctx,
                rc,
                EventType::Warning,
                "RollingRestartBlocked",
                "Restart",
                format!("{} pods run an old template: {why}", plan.stale.len()),
            )
            .await;
        }
        Next::Wait(why) if !plan.stale.is_empty() => {
            info!(stale = plan.stale.len(), %why, "rolling restart waiting");
        }
        _ => {}
    }
    Ok(())
}

/// Applies `<cluster>-node-auth` as the children step decided (`steps::NodeAuth`). It is not
/// read back (the operator's `get` may be limited to the password Secrets), so the operator
/// remembers what it applied: a changed one is applied at once, an unchanged one every
/// `requeue_ready`.
async fn apply_node_auth(ctx: &Context, ns: &str, step: &NodeAuth) -> Result<(), Error> {
    match step {
        NodeAuth::Apply(secret) => {
            let key = format!("{ns}/{}", secret.name_any());
            let hash = crate::apply::desired_hash(secret.as_ref());
            let fresh = |m: &HashMap<String, (String, Instant)>| {
                m.get(&key)
                    .is_some_and(|(h, at)| *h == hash && at.elapsed() < ctx.requeue_ready)
            };
            let skip = match ctx.node_auth_applied.lock() {
                Ok(m) => fresh(&m),
                Err(poisoned) => fresh(&poisoned.into_inner()),
            };
            if skip {
                ctx.metrics.child_apply(false);
                return Ok(());
            }
            apply_stamped(ctx, ns, &crate::apply::stamped(secret.as_ref())).await?;
            let entry = (hash, Instant::now());
            match ctx.node_auth_applied.lock() {
                Ok(mut m) => m.insert(key, entry),
                Err(poisoned) => poisoned.into_inner().insert(key, entry),
            };
        }
        NodeAuth::Nothing => {}
        NodeAuth::Unreadable(e) => warn!(error = %e, "the nodes' password file is not written"),
    }
    Ok(())
}

/// Applies one child the children step found outdated, and keeps the observed list in step
/// with the API's answer (so status sees what was just applied without reading again).
async fn apply_child(
    ctx: &Context,
    ns: &str,
    child: Child,
    obs: &mut Observed,
) -> Result<(), Error> {
    match child {
        Child::ConfigMap(c) => {
            let live = apply_stamped(ctx, ns, c.as_ref()).await?;
            steps::replace_by_name(&mut obs.config_maps, live);
        }
        Child::Service(s) => {
            let live = apply_stamped(ctx, ns, s.as_ref()).await?;
            steps::replace_by_name(&mut obs.services, live);
        }
        Child::StatefulSet(s) => {
            let live = apply_stamped(ctx, ns, s.as_ref()).await?;
            steps::replace_by_name(&mut obs.stateful_sets, live);
        }
        Child::Pdb(p) => {
            let live = apply_stamped(ctx, ns, p.as_ref()).await?;
            steps::replace_by_name(&mut obs.pdbs, live);
        }
    }
    Ok(())
}

/// Server-side apply of a stamped object (`crate::apply::stamped`) under the operator's field
/// manager (force: the operator owns these); returns the object as the API stored it.
async fn apply_stamped<K>(ctx: &Context, ns: &str, stamped: &K) -> Result<K, Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let name = stamped.meta().name.clone().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), ns);
    let live = api
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(stamped),
        )
        .await?;
    ctx.metrics.child_apply(true);
    Ok(live)
}

async fn delete_if_exists<K>(api: &Api<K>, name: &str) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Publishes the Events of this reconcile's outcome (`steps::events`).
async fn events_for(
    ctx: &Context,
    rc: &RedisCluster,
    previous: Option<&RedisClusterStatus>,
    new: &RedisClusterStatus,
    topology: &TopologyOutcome,
    pods: &[Pod],
) {
    for e in steps::events(previous, new, topology, pods) {
        let type_ = if e.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        publish_about(
            ctx,
            rc,
            type_,
            &e.reason,
            e.action,
            e.note,
            e.pod.as_deref(),
        )
        .await;
    }
}

async fn publish(
    ctx: &Context,
    rc: &RedisCluster,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    publish_about(ctx, rc, type_, reason, action, note, None).await;
}

/// Publishes an Event about the cluster, with `pod` (of the cluster's namespace) as related
/// object, so that repairs of different pods are Events of their own, each with its own
/// message (see `Context::recorder_for` for repeats of one key).
async fn publish_about(
    ctx: &Context,
    rc: &RedisCluster,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
    pod: Option<&str>,
) {
    // The Events API caps notes at 1 kB.
    let mut note = note;
    if note.len() > 1000 {
        let mut cut = 1000;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
    }
    let ev = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: pod.map(|name| ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name.into()),
            namespace: rc.namespace(),
            ..ObjectReference::default()
        }),
    };
    let type_name = match type_ {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    };
    let key = format!(
        "{}|{type_name}|{reason}|{action}|{}",
        key(rc),
        pod.unwrap_or_default()
    );
    let recorder = ctx.recorder_for(key, ev.note.as_deref().unwrap_or_default());
    if let Err(e) = recorder.publish(&ev, &rc.object_ref(&())).await {
        warn!(error = %e, reason, "publishing event failed");
    }
}
