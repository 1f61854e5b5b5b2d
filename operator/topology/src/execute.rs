//! Execute: run planned steps against the nodes. Each step is idempotent; the pass stops
//! starting new work once its time budget is spent, so a reconcile stays bounded.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use tokio::sync::Mutex;
use tokio::time::Instant;
use tracing::{debug, info, instrument, warn};

use super::conn::{cluster, connect, NodeConn};
use super::migrate::{move_keys, set_node};
use super::nodes::parse_cluster_nodes;
use super::plan::{NodeRef, Step};
use super::snapshot::Snapshot;
use super::{EngineOptions, TopologyError};

/// What a pass did.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub actions: Vec<String>,
    /// The actions that repaired a node (see `Step::is_repair`).
    pub repairs: Vec<String>,
    /// The failovers done before a StatefulSet shrinks (see `Step::Failover`).
    pub handovers: Vec<String>,
    pub errors: Vec<String>,
    pub slots_moved: u32,
}

/// Lazily opened connections, one per node and timeout class, shared by concurrent tasks
/// (multiplexed, so concurrent slot jobs pipeline on one socket).
struct Pool {
    opts: EngineOptions,
    timeout: Duration,
    conns: Mutex<HashMap<String, NodeConn>>,
}

impl Pool {
    fn new(opts: &EngineOptions, timeout: Duration) -> Self {
        Self {
            opts: opts.clone(),
            timeout,
            conns: Mutex::new(HashMap::new()),
        }
    }

    async fn get(&self, n: &NodeRef) -> Result<NodeConn, TopologyError> {
        let key = format!("{}:{}", n.host, n.port);
        let mut conns = self.conns.lock().await;
        if let Some(c) = conns.get(&key) {
            return Ok(c.clone());
        }
        let c = connect(&n.host, n.port, &self.opts, self.timeout).await?;
        conns.insert(key, c.clone());
        Ok(c)
    }
}

/// CLUSTER MEET needs an IP literal: resolve a host name first.
async fn meet_ip(host: &str, port: u16) -> Option<String> {
    if host.parse::<IpAddr>().is_ok() {
        return Some(host.to_string());
    }
    let mut addrs = tokio::net::lookup_host((host, port)).await.ok()?;
    addrs.next().map(|a| a.ip().to_string())
}

/// Every reachable master in the snapshot (SETSLOT NODE is sent to all of them).
fn masters(snap: &Snapshot) -> Vec<NodeRef> {
    (0..snap.pods.len())
        .filter(|&i| snap.pods[i].reachable && snap.pods[i].is_master())
        .filter_map(|i| super::plan::node_ref(snap, i))
        .collect()
}

/// Run `steps` in order; consecutive MigrateSlots steps run together, slot jobs in parallel.
#[instrument(skip_all, fields(steps = steps.len()))]
pub async fn execute(steps: &[Step], snap: &Snapshot, opts: &EngineOptions) -> Outcome {
    let deadline = Instant::now() + opts.pass_budget;
    let small = Pool::new(opts, opts.command_timeout);
    let big = Arc::new(Pool::new(
        opts,
        opts.migrate_timeout + Duration::from_secs(5),
    ));
    let all_masters = masters(snap);
    let mut out = Outcome::default();
    let mut i = 0;
    while i < steps.len() {
        if Instant::now() >= deadline {
            out.actions
                .push("pass budget spent; continuing next pass".to_string());
            break;
        }
        if let Step::MigrateSlots { .. } = &steps[i] {
            let mut jobs = Vec::new();
            while let Some(Step::MigrateSlots { from, to, slots }) = steps.get(i) {
                for s in slots {
                    jobs.push((*s, from.clone(), to.clone()));
                }
                i += 1;
            }
            migrate_all(jobs, &big, &all_masters, opts, deadline, &mut out).await;
            continue;
        }
        let step = &steps[i];
        i += 1;
        let desc = step.describe();
        match run_step(step, &small, &big, &all_masters, opts).await {
            Ok(()) => {
                info!(action = %desc, "done");
                if step.is_repair() {
                    out.repairs.push(desc.clone());
                }
                if let Step::Failover { .. } = step {
                    out.handovers.push(desc.clone());
                }
                out.actions.push(desc);
            }
            Err(e) => {
                warn!(action = %desc, error = %e, "step failed");
                out.errors.push(format!("{desc}: {e}"));
            }
        }
    }
    out
}

async fn run_step(
    step: &Step,
    small: &Pool,
    big: &Pool,
    all_masters: &[NodeRef],
    opts: &EngineOptions,
) -> Result<(), TopologyError> {
    match step {
        Step::Reset { node, flush, .. } => reset_node(node, *flush, small).await,
        Step::SetConfigEpoch { node, epoch } => {
            let mut c = small.get(node).await?;
            // Refused once the node knows others or has an epoch: then the nodes' own
            // collision handling gives distinct epochs, so this is not an error.
            if let Err(e) = c.run::<()>(cluster("SET-CONFIG-EPOCH").arg(*epoch)).await {
                warn!(node = %node.pod, error = %e, "SET-CONFIG-EPOCH refused");
            }
            Ok(())
        }
        Step::AssignSlots { node, ranges } | Step::AssignUnassigned { node, ranges } => {
            let mut c = small.get(node).await?;
            let mut cmd = cluster("ADDSLOTS");
            for (a, b) in ranges {
                for s in *a..=*b {
                    cmd.arg(s);
                }
            }
            c.run::<()>(&cmd).await
        }
        Step::Meet {
            node,
            target,
            cport,
        } => {
            let ip = meet_ip(&target.host, target.port)
                .await
                .ok_or_else(|| TopologyError::Invalid(format!("cannot resolve {}", target.host)))?;
            let mut c = small.get(node).await?;
            c.run::<()>(cluster("MEET").arg(ip).arg(target.port).arg(*cport))
                .await
        }
        Step::Forget { id, on } => {
            let jobs = on.iter().map(|n| async move {
                let mut c = small.get(n).await?;
                match c.run::<()>(cluster("FORGET").arg(id)).await {
                    Err(TopologyError::Redis { source, .. })
                        if source.to_string().contains("Unknown node") =>
                    {
                        Ok(())
                    }
                    r => r,
                }
            });
            let results = futures::future::join_all(jobs).await;
            results
                .into_iter()
                .collect::<Result<Vec<()>, _>>()
                .map(|_| ())
        }
        Step::Replicate { node, master_id }
        | Step::RepairReplication {
            node, master_id, ..
        } => {
            let mut c = small.get(node).await?;
            c.run::<()>(cluster("REPLICATE").arg(master_id)).await
        }
        Step::FixOpenSlot {
            slot,
            current,
            owner,
            sources,
            open_on,
        } => {
            let nodes = SlotNodes {
                current: current.as_ref(),
                owner,
                sources,
                open_on,
            };
            fix_open_slot(*slot, &nodes, big, all_masters, opts).await
        }
        Step::MigrateSlots { .. } => Ok(()), // handled in batches by `execute`
        Step::Failover { node, master, .. } => failover(node, master, small, all_masters).await,
        Step::Takeover { node, master, .. } => takeover(node, master, small, opts).await,
    }
}

/// How long a probe of a lost master may take to answer before it counts as gone.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a pass waits for a TAKEOVER to show (the node switches at once).
const TAKEOVER_WAIT: Duration = Duration::from_secs(5);

/// CLUSTER FAILOVER TAKEOVER on `node`, the replica the planner picked for the lost
/// `master`. Checked again first: the old master must not answer as itself at its address
/// (a takeover beside a live master would split the shard), and `node` must still be its
/// replica. Idempotent: a node already master is done.
async fn takeover(
    node: &NodeRef,
    master: &NodeRef,
    pool: &Pool,
    opts: &EngineOptions,
) -> Result<(), TopologyError> {
    let alive = match answering_id(master, opts).await {
        Probe::Silent => false,
        Probe::Node(id) => id == master.id,
        Probe::Unknown => true, // something answers there and we cannot tell what
    };
    if alive {
        return Err(TopologyError::Invalid(format!(
            "the old master {} answers at {}:{}; not taking over",
            master.pod, master.host, master.port
        )));
    }
    let mut c = pool.get(node).await?;
    let now = parse_cluster_nodes(&c.text(&cluster("NODES")).await?)?;
    if now.myself.id != node.id || now.myself.master {
        return Ok(());
    }
    if now.myself.replica_of.as_deref() != Some(master.id.as_str()) {
        return Err(TopologyError::Invalid(format!(
            "{} no longer replicates {}; not taking over",
            node.pod, master.pod
        )));
    }
    c.run::<()>(cluster("FAILOVER").arg("TAKEOVER")).await?;
    warn!(pod = %node.pod, lost = %master.pod, "CLUSTER FAILOVER TAKEOVER sent");
    let start = Instant::now();
    while start.elapsed() < TAKEOVER_WAIT {
        match c.text(&cluster("NODES")).await {
            Ok(text) if parse_cluster_nodes(&text)?.myself.master => return Ok(()),
            Ok(_) => {}
            Err(e) => warn!(pod = %node.pod, error = %e, "reading CLUSTER NODES after TAKEOVER"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(TopologyError::Timeout(
        TAKEOVER_WAIT,
        format!("{} did not become master", node.pod),
    ))
}

/// What answers at a lost master's address.
enum Probe {
    /// Nothing within [`PROBE_TIMEOUT`] (a frozen process accepts but never replies).
    Silent,
    /// A node with this id (the master itself, or a new node on a reused address).
    Node(String),
    /// Something that answered without telling its id (refused our credentials, LOADING).
    Unknown,
}

/// Ask whatever answers at `n`'s address for its node id, bounded by [`PROBE_TIMEOUT`].
async fn answering_id(n: &NodeRef, opts: &EngineOptions) -> Probe {
    let probe = async {
        let mut c = match connect(&n.host, n.port, opts, PROBE_TIMEOUT).await {
            Ok(c) => c,
            Err(e) if e.is_auth() => return Probe::Unknown,
            Err(_) => return Probe::Silent,
        };
        match c.text(&cluster("MYID")).await {
            Ok(id) => Probe::Node(id.trim().to_string()),
            Err(TopologyError::Redis { source, .. })
                if !(source.is_io_error() || source.is_timeout()) =>
            {
                Probe::Unknown
            }
            Err(_) => Probe::Silent,
        }
    };
    tokio::time::timeout(PROBE_TIMEOUT + opts.connect_timeout, probe)
        .await
        .unwrap_or(Probe::Silent)
}

/// How long a pass waits for a manual failover to show (redis-server gives up on a manual
/// failover after 5 s, so a retry next pass never overlaps the previous attempt).
const FAILOVER_WAIT: Duration = Duration::from_secs(15);

/// How long a handover waits for the cluster to agree on the target's role before asking.
/// A node that just became a replica tells its peers at their next ping (within about a
/// second); a pass that gives up leaves the handover to the next one.
const AGREE_WAIT: Duration = Duration::from_secs(5);

/// Whether `master` and every other slot-owning master among `voters` list `node` as
/// `master`'s replica, none of them failing. A manual failover needs both: the master
/// ignores MFSTART from a node it does not count as its replica (the replica's failover
/// then times out after 5 s, the pass after 15), and a voter that still sees `node` as a
/// master, or another node's replica, refuses its vote, so the election fails while the
/// master holds client writes paused (up to 5 s: a client with a shorter timeout fails).
/// A voter that does not answer is skipped: whether the rest make a majority is the
/// election's business. Err names the first node that disagrees.
async fn views_agree(
    node: &NodeRef,
    master: &NodeRef,
    voters: &[NodeRef],
    pool: &Pool,
) -> Result<(), String> {
    let asked = std::iter::once(master).chain(voters.iter().filter(|v| v.id != master.id));
    for v in asked {
        let Ok(mut c) = pool.get(v).await else {
            continue;
        };
        let Ok(text) = c.text(&cluster("NODES")).await else {
            continue;
        };
        let view = parse_cluster_nodes(&text).map_err(|e| format!("{}: {e}", v.pod))?;
        if view.myself.id != v.id || (v.id != master.id && view.myself.slot_count() == 0) {
            continue; // a new node at that address, or not a voter
        }
        if v.id == master.id && !view.myself.master {
            return Err(format!("{} is no longer a master", master.pod));
        }
        let line = view.others.iter().find(|n| n.id == node.id);
        match line {
            Some(n) if !n.master && n.replica_of.as_deref() == Some(&master.id) && !n.failing() => {
            }
            _ => {
                return Err(format!(
                    "{} does not list {} as {}'s replica yet",
                    v.pod, node.pod, master.pod
                ))
            }
        }
        if let Some(m) = view.others.iter().find(|n| n.id == master.id) {
            if m.failing() {
                return Err(format!("{} flags {} as failing", v.pod, master.pod));
            }
        }
    }
    Ok(())
}

/// CLUSTER FAILOVER (no FORCE: the master pauses writes until `node` has its whole stream,
/// so nothing acknowledged is lost) on `node`, once the cluster agrees on its role, then
/// wait until the old master follows it.
/// Idempotent: a node already master is done; one no longer `master`'s replica is left to
/// the next pass.
async fn failover(
    node: &NodeRef,
    master: &NodeRef,
    pool: &Pool,
    voters: &[NodeRef],
) -> Result<(), TopologyError> {
    let mut c = pool.get(node).await?;
    let now = parse_cluster_nodes(&c.text(&cluster("NODES")).await?)?;
    if now.myself.id != node.id || now.myself.master {
        return Ok(());
    }
    if now.myself.replica_of.as_deref() != Some(master.id.as_str()) {
        return Err(TopologyError::Invalid(format!(
            "{} no longer replicates {}; not failing over",
            node.pod, master.pod
        )));
    }
    // Ask only once the master and every voter know `node` as its replica (see
    // `views_agree`); until then the request would be ignored, or would hold the shard's
    // writes paused through an election that cannot win.
    let start = Instant::now();
    loop {
        match views_agree(node, master, voters, pool).await {
            Ok(()) => break,
            Err(why) if start.elapsed() >= AGREE_WAIT => {
                return Err(TopologyError::Invalid(format!(
                    "{why} after {AGREE_WAIT:?}; not failing over yet"
                )))
            }
            Err(why) => debug!(pod = %node.pod, %why, "waiting before CLUSTER FAILOVER"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.run::<()>(&cluster("FAILOVER")).await?;
    info!(pod = %node.pod, from = %master.pod, "CLUSTER FAILOVER sent");
    // Done when the old master follows `node`, not merely when `node` calls itself master:
    // a replica that won an election moments before (within 4 node timeouts) reuses that
    // election's votes (redis-server 7.0 does), promotes itself under its old, lower epoch
    // and is turned back into a replica as soon as its claim meets the current one.
    let start = Instant::now();
    while start.elapsed() < FAILOVER_WAIT {
        tokio::time::sleep(Duration::from_millis(100)).await;
        match handed_over(node, master, &mut c, pool).await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => warn!(pod = %node.pod, error = %e, "reading CLUSTER NODES after FAILOVER"),
        }
    }
    Err(TopologyError::Timeout(
        FAILOVER_WAIT,
        format!("{} did not become master", node.pod),
    ))
}

/// A coordinated failover to the replica at `host:port` (pod `pod`), with its master and the
/// voters as the replica itself lists them, each reached on `port` (every pod listens on
/// the same one): the rolling restart's hand-over, done as a scale-in's is. Ok at once when
/// the node is a master already.
pub async fn failover_to(
    pod: &str,
    host: &str,
    port: u16,
    opts: &EngineOptions,
) -> Result<(), TopologyError> {
    let pool = Pool::new(opts, opts.command_timeout);
    let at = |id: &str, pod: String, host: &str| NodeRef {
        id: id.to_string(),
        pod,
        host: host.to_string(),
        port,
    };
    let view = parse_cluster_nodes(
        &pool
            .get(&at("", pod.to_string(), host))
            .await?
            .text(&cluster("NODES"))
            .await?,
    )?;
    if view.myself.master {
        return Ok(());
    }
    let node = at(&view.myself.id, pod.to_string(), host);
    let master = view
        .myself
        .replica_of
        .as_deref()
        .and_then(|m| view.others.iter().find(|n| n.id == m))
        .map(|m| at(&m.id, format!("{}:{port}", m.host), &m.host))
        .ok_or_else(|| TopologyError::Invalid(format!("{pod} lists no master of its own")))?;
    let voters: Vec<NodeRef> = view
        .others
        .iter()
        .filter(|n| n.master && n.slot_count() > 0 && !n.failing())
        .map(|n| at(&n.id, format!("{}:{port}", n.host), &n.host))
        .collect();
    failover(&node, &master, &pool, &voters).await
}

/// Whether `node` calls itself master and `master`, the master it replaced, replicates it.
async fn handed_over(
    node: &NodeRef,
    master: &NodeRef,
    c: &mut NodeConn,
    pool: &Pool,
) -> Result<bool, TopologyError> {
    if !parse_cluster_nodes(&c.text(&cluster("NODES")).await?)?
        .myself
        .master
    {
        return Ok(false);
    }
    let old = parse_cluster_nodes(&pool.get(master).await?.text(&cluster("NODES")).await?)?;
    Ok(old.myself.id != master.id || old.myself.replica_of.as_deref() == Some(&node.id))
}

/// FLUSHALL (when asked, on a master) then CLUSTER RESET HARD, after checking again that the
/// node is the one planned (a second try finds a new id: already done) and holds no slots.
async fn reset_node(node: &NodeRef, flush: bool, pool: &Pool) -> Result<(), TopologyError> {
    let mut c = pool.get(node).await?;
    let now = parse_cluster_nodes(&c.text(&cluster("NODES")).await?)?;
    if now.myself.id != node.id {
        return Ok(());
    }
    if now.myself.slot_count() > 0 {
        return Err(TopologyError::Invalid(format!(
            "{} holds slots now; not resetting it",
            node.pod
        )));
    }
    if flush && now.myself.master {
        c.run::<()>(&redis::cmd("FLUSHALL")).await?;
    }
    c.run::<()>(cluster("RESET").arg("HARD")).await
}

/// The nodes involved in fixing one open slot.
struct SlotNodes<'a> {
    current: Option<&'a NodeRef>,
    owner: &'a NodeRef,
    sources: &'a [NodeRef],
    open_on: &'a [NodeRef],
}

/// Finish or roll back one open slot toward `owner`.
async fn fix_open_slot(
    slot: u16,
    n: &SlotNodes<'_>,
    pool: &Pool,
    all_masters: &[NodeRef],
    opts: &EngineOptions,
) -> Result<(), TopologyError> {
    let (owner, sources, open_on) = (n.owner, n.sources, n.open_on);
    let mut dst = pool.get(owner).await?;
    for s in sources {
        let mut src = pool.get(s).await?;
        let from_owner = n.current.is_some_and(|c| c.id == s.id) && s.id != owner.id;
        if from_owner {
            // Finishing a migration: the target must see the source as owner (a crash can
            // leave it seeing no owner, and then it refuses RESTORE-ASKING) and import from it.
            let _ = dst
                .run::<()>(cluster("SETSLOT").arg(slot).arg("NODE").arg(&s.id))
                .await;
        }
        // With the slot open on both sides the keys move as in a normal migration; otherwise
        // (the owner collects keys left on an importing node) MIGRATE works because the
        // source has the slot open.
        move_keys(slot, s, &mut src, owner, &mut dst, from_owner, opts).await?;
    }
    let mut failed_on = Vec::new();
    set_node(slot, owner, &mut dst).await?;
    for n in sources.iter().chain(all_masters).chain(open_on) {
        if n.id == owner.id {
            continue;
        }
        let mut c = pool.get(n).await?;
        if let Err(e) = set_node(slot, owner, &mut c).await {
            // Replicas refuse SETSLOT; a node still holding keys refuses too and keeps its
            // open state, which the next pass sees again.
            warn!(slot, node = %n.pod, error = %e, "SETSLOT NODE refused");
            failed_on.push(n.id.clone());
        }
    }
    for n in std::iter::once(owner).chain(open_on) {
        if failed_on.contains(&n.id) {
            continue;
        }
        let mut c = pool.get(n).await?;
        if let Err(e) = c
            .run::<()>(cluster("SETSLOT").arg(slot).arg("STABLE"))
            .await
        {
            warn!(slot, node = %n.pod, error = %e, "SETSLOT STABLE refused");
        }
    }
    Ok(())
}

/// (slot, from pod, to pod, keys moved or the error).
type SlotResult = (u16, String, String, Result<u64, TopologyError>);

/// Migrate slot jobs with bounded parallelism; no new slot starts after the deadline.
async fn migrate_all(
    jobs: Vec<(u16, NodeRef, NodeRef)>,
    pool: &Arc<Pool>,
    all_masters: &[NodeRef],
    opts: &EngineOptions,
    deadline: Instant,
    out: &mut Outcome,
) {
    // Atomically where every node involved supports it (the export link is TLS with
    // `tls-replication yes`, as replication is); what is left moves key by key.
    let jobs = migrate_atomic(jobs, pool, deadline, out).await;
    if jobs.is_empty() {
        return;
    }
    let total = jobs.len();
    let results: Vec<Option<SlotResult>> = stream::iter(jobs)
        .map(|(slot, from, to)| {
            let pool = pool.clone();
            async move {
                if Instant::now() >= deadline {
                    return None;
                }
                let r = migrate_one(slot, &from, &to, &pool, all_masters, opts).await;
                Some((slot, from.pod, to.pod, r))
            }
        })
        .buffer_unordered(opts.migrate_parallel.max(1))
        .collect()
        .await;
    let mut moved_keys = 0u64;
    let mut per_pair: std::collections::BTreeMap<(String, String), Vec<u16>> = Default::default();
    for (slot, from, to, r) in results.into_iter().flatten() {
        match r {
            Ok(k) => {
                moved_keys += k;
                out.slots_moved += 1;
                per_pair.entry((from, to)).or_default().push(slot);
            }
            Err(e) => out
                .errors
                .push(format!("migrate slot {slot} from {from} to {to}: {e}")),
        }
    }
    for ((from, to), mut slots) in per_pair {
        slots.sort_unstable();
        let r = super::nodes::to_ranges(slots.iter().copied());
        out.actions.push(format!(
            "migrated {} slots ({}) from {from} to {to}",
            slots.len(),
            r.iter()
                .take(6)
                .map(|(a, b)| if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                })
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    info!(
        slots = out.slots_moved,
        keys = moved_keys,
        of = total,
        "migration batch done"
    );
}

/// Moves what it can with atomic slot migration (one `CLUSTER MIGRATESLOTS` per source,
/// all sources at once) where the source and its targets speak it; returns the slot jobs
/// left for the key-by-key path (redis-server nodes, failed jobs).
async fn migrate_atomic(
    jobs: Vec<(u16, NodeRef, NodeRef)>,
    pool: &Arc<Pool>,
    deadline: Instant,
    out: &mut Outcome,
) -> Vec<(u16, NodeRef, NodeRef)> {
    type Groups = std::collections::BTreeMap<String, (NodeRef, Vec<u16>)>;
    let mut by_src: std::collections::BTreeMap<String, (NodeRef, Groups)> = Default::default();
    for (slot, from, to) in jobs {
        let (_, groups) = by_src
            .entry(from.id.clone())
            .or_insert_with(|| (from.clone(), Groups::new()));
        groups
            .entry(to.id.clone())
            .or_insert_with(|| (to.clone(), Vec::new()))
            .1
            .push(slot);
    }
    let tasks = by_src.into_values().map(|(from, groups)| {
        let pool = pool.clone();
        async move {
            let groups: Vec<(NodeRef, Vec<u16>)> = groups.into_values().collect();
            let r = async {
                let mut src = pool.get(&from).await.ok()?;
                let mut targets = Vec::new();
                for (t, _) in &groups {
                    targets.push(pool.get(t).await.ok()?);
                }
                if !super::atomic::supported(&mut src, &mut targets).await {
                    return None;
                }
                Some(super::atomic::migrate(&from, &mut src, &groups, deadline).await)
            }
            .await;
            (from, groups, r)
        }
    });
    let mut left = Vec::new();
    let all = |from: &NodeRef, groups: Vec<(NodeRef, Vec<u16>)>, left: &mut Vec<_>| {
        for (to, slots) in groups {
            left.extend(slots.into_iter().map(|s| (s, from.clone(), to.clone())));
        }
    };
    for (from, groups, r) in futures::future::join_all(tasks).await {
        match r {
            None => all(&from, groups, &mut left),
            Some(Err(e)) => {
                warn!(from = %from.pod, error = %e, "atomic slot migration refused; moving the keys one by one");
                all(&from, groups, &mut left);
            }
            Some(Ok(m)) => {
                for (to, slots) in m.done {
                    out.slots_moved += slots.len() as u32;
                    out.actions.push(format!(
                        "migrated {} slots from {} to {to} atomically",
                        slots.len(),
                        from.pod
                    ));
                }
                for (to, slots, why) in m.failed {
                    out.errors.push(format!(
                        "atomic migration from {} to {}: {why}",
                        from.pod, to.pod
                    ));
                    left.extend(slots.into_iter().map(|s| (s, from.clone(), to.clone())));
                }
                if m.later > 0 {
                    out.actions.push(format!(
                        "{} slots still moving from {}; continuing next pass",
                        m.later, from.pod
                    ));
                }
            }
        }
    }
    left
}

async fn migrate_one(
    slot: u16,
    from: &NodeRef,
    to: &NodeRef,
    pool: &Pool,
    all_masters: &[NodeRef],
    opts: &EngineOptions,
) -> Result<u64, TopologyError> {
    let mut src = pool.get(from).await?;
    let mut dst = pool.get(to).await?;
    let moved = move_keys(slot, from, &mut src, to, &mut dst, true, opts).await?;
    // Target first (it bumps its epoch and claims the slot), then the source, then the rest.
    set_node(slot, to, &mut dst).await?;
    match set_node(slot, to, &mut src).await {
        // The source already learned from the target's gossip that it lost its last slot and
        // turned replica (cluster-allow-replica-migration): the slot is moved, keys and all.
        Err(TopologyError::Redis { source, .. })
            if source.to_string().contains("only with masters") => {}
        r => r?,
    }
    for m in all_masters {
        if m.id == to.id || m.id == from.id {
            continue;
        }
        let mut c = pool.get(m).await?;
        match set_node(slot, to, &mut c).await {
            Ok(()) => {}
            // A master drained earlier in this pass has turned replica: it learns slot
            // owners from its master, nothing to tell it.
            Err(TopologyError::Redis { source, .. })
                if source.to_string().contains("only with masters") =>
            {
                debug!(slot, node = %m.pod, "bystander is a replica now; SETSLOT NODE skipped");
            }
            Err(e) => {
                warn!(slot, node = %m.pod, error = %e, "SETSLOT NODE on a bystander refused")
            }
        }
    }
    Ok(moved)
}
