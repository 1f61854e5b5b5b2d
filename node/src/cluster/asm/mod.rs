//! Atomic slot migration (Valkey 9's `CLUSTER MIGRATESLOTS` protocol) in the node: the job
//! log, the keyspace's hidden slots, the CLUSTER subcommands and the effects of the pure
//! state machines (`tessera_cluster::asm`), which decide everything; this module does the
//! I/O they ask for.
//!
//! The target side is here: a source (tessera-node or valkey-server 9) connects to our data
//! port, sends `CLUSTER SYNCSLOTS ESTABLISH`, and the connection becomes the import link
//! ([`import`]). Until the hand-off the imported slots are hidden from keyspace-wide reads;
//! on FAILOVER-GRANTED this node claims them with an epoch bumped without consensus.
//! Replicas learn of the job from the ESTABLISH and FINISH this node propagates.
//!
//! Lock order: the cluster state (`ClusterNode::with_state`) before the job log; effects
//! run with neither held.

pub mod export;
pub mod import;

use parking_lot::Mutex;
use tessera_cluster::asm::{self, Effect, JobLog, JobName};
use tessera_cluster::{ClusterNode, Reply};

use crate::server::{now_ms, Server};

/// `cluster-manual-failover-timeout`: fixed in Redis 7.0 (CLUSTER_MF_TIMEOUT); the
/// source's write pause lasts twice this.
const MF_TIMEOUT_MS: u64 = 5000;

/// The node's migration jobs.
#[derive(Default)]
pub struct Runtime {
    pub log: Mutex<JobLog>,
    /// Woken when a job changes outside its link's task (a FLUSHALL, a topology change),
    /// so the link looks at its job at once.
    pub changed: tokio::sync::Notify,
    /// An export paused the node's writes (and no other pause is to be lifted with it).
    pub paused: std::sync::atomic::AtomicBool,
    /// DEBUG SLOTMIGRATION PREVENT-PAUSE / PREVENT-FAILOVER (test hooks).
    pub prevent_pause: std::sync::atomic::AtomicBool,
    pub prevent_failover: std::sync::atomic::AtomicBool,
}

/// Finished jobs GETSLOTMIGRATIONS keeps (cluster-slot-migration-log-max-len).
fn log_max_len(srv: &Server) -> usize {
    let n = srv.config.read().typed.cluster_slot_migration_log_max_len;
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The facts the state machines read, at `now`.
pub fn machine_ctx(srv: &Server, is_primary: bool) -> asm::Ctx {
    let mut c = asm::Ctx::new(now_ms());
    {
        let cfg = &srv.config.read().typed;
        c.repl_timeout_s = cfg.repl_timeout;
        c.max_failover_repl_bytes = cfg.slot_migration_max_failover_repl_bytes;
    }
    c.mf_timeout_ms = MF_TIMEOUT_MS;
    c.is_primary = is_primary;
    c.loading = srv
        .persist
        .loading
        .load(std::sync::atomic::Ordering::Relaxed);
    c.prevent_pause = srv
        .asm
        .prevent_pause
        .load(std::sync::atomic::Ordering::Relaxed);
    c.prevent_failover = srv
        .asm
        .prevent_failover
        .load(std::sync::atomic::Ordering::Relaxed);
    c
}

/// True when this cluster node is a primary.
pub fn is_primary(node: &ClusterNode) -> bool {
    node.with_state(|st| st.me().is_master())
}

/// Makes the keyspace's hidden slots those of the log's unfinished imports.
pub fn sync_hidden(srv: &Server, log: &JobLog) {
    let want = log.hidden_slots();
    for slot in 0..crate::slot::SLOTS as u16 {
        if want.contains(slot) {
            srv.ks.hidden.hide(slot);
        } else {
            srv.ks.hidden.show(slot);
        }
    }
}

/// Feeds `argv` (SYNCSLOTS ESTABLISH / FINISH) to replicas and the AOF, as a keyless
/// command, so replicas keep a tracking job and hide the same slots.
fn propagate(srv: &Server, argv: &[Vec<u8>]) {
    if !srv.persist.prop.active() {
        return;
    }
    let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
    srv.persist
        .prop
        .feed(&[(0, &args, crate::propagate::Target::All)], &[], false);
}

/// Performs the effects of job `name` that need no link (a link's task sends its own
/// messages and closes itself when it sees its job finished). Returns the SYNCSLOTS
/// messages to send, for the link's task.
pub fn run_effects(srv: &Server, name: &JobName, fx: Vec<Effect>) -> Vec<u8> {
    let mut send = Vec::new();
    let mut queue = fx;
    while !queue.is_empty() {
        let mut next = Vec::new();
        for e in queue {
            match e {
                Effect::Send(m) => send.extend_from_slice(&m.bytes()),
                Effect::TakeOver => take_over(srv, name),
                Effect::CleanupKeys => next.extend(cleanup(srv, name)),
                Effect::Unhide => sync_hidden(srv, &srv.asm.log.lock()),
                Effect::PropagateFinish(argv) => propagate(srv, &argv),
                Effect::CloseLink => srv.asm.changed.notify_waiters(),
                Effect::ReleasePause => export::release_pause(srv, name),
                // Only an export's own task can do these (it holds the link).
                Effect::SendAuth
                | Effect::SendEstablish(_)
                | Effect::StartSnapshot
                | Effect::BeginStreaming
                | Effect::Pause { .. } => {
                    tracing::warn!(?e, "slot migration: a link effect outside the link's task");
                }
            }
        }
        queue = next;
    }
    send
}

/// FAILOVER-GRANTED on the target: claim the job's slots (the job is already `success`,
/// so the keys show in the same turn, once [`Effect::Unhide`] runs next).
fn take_over(srv: &Server, name: &JobName) {
    let Some(node) = crate::cluster::node(srv) else {
        return;
    };
    let ranges: Vec<(u16, u16)> = match srv.asm.log.lock().get(name) {
        Some(j) => j.ranges.iter().map(|r| (r.start, r.end)).collect(),
        None => return,
    };
    let epoch = node.with_state(|st| {
        tessera_cluster::commands::claim_granted_slots(st, &ranges, crate::server::now_ms())
    });
    tracing::info!(
        job = %name.to_str_lossy(),
        epoch,
        "slot migration: took over the imported slots"
    );
}

/// A failed import on a primary: delete the keys of its slots this node does not own,
/// then let the machine finish the job.
fn cleanup(srv: &Server, name: &JobName) -> Vec<Effect> {
    let Some(node) = crate::cluster::node(srv) else {
        return Vec::new();
    };
    let ranges = match srv.asm.log.lock().get(name) {
        Some(j) => j.ranges.clone(),
        None => return Vec::new(),
    };
    let mine: Vec<bool> = node.with_state(|st| {
        let me = st.myself;
        ranges
            .iter()
            .flat_map(|r| r.slots())
            .map(|s| st.slots.get(s as usize).copied().flatten() == Some(me))
            .collect()
    });
    let mut deleted = 0;
    for (slot, mine) in ranges.iter().flat_map(|r| r.slots()).zip(mine) {
        if !mine {
            deleted += crate::cluster::host::delete_slot(srv, slot);
        }
    }
    tracing::info!(job = %name.to_str_lossy(), deleted, "slot migration: removed the keys of a failed import");
    let ctx = machine_ctx(srv, true);
    let mut log = srv.asm.log.lock();
    match log.get_mut(name) {
        Some(job) => asm::machine::cleanup_done(job, &ctx),
        None => Vec::new(),
    }
}

/// The node's own slot-migration cron (the links run their jobs' crons): a replica
/// promoted while its primary imported (its job only tracks the primary's) fails the
/// import and removes the keys, as Valkey's "A failover occurred during slot import".
pub async fn cron(srv: std::sync::Weak<Server>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(srv) = srv.upgrade() else { return };
        let Some(node) = crate::cluster::node(&srv) else {
            return;
        };
        // A lowered log length applies at the next cron, on every role (as Valkey's).
        let max_len = log_max_len(&srv);
        srv.asm.log.lock().trim(max_len);
        if !is_primary(node) {
            continue;
        }
        let ctx = machine_ctx(&srv, true);
        let fx: Vec<(JobName, Vec<Effect>)> = {
            let mut log = srv.asm.log.lock();
            log.iter_mut()
                .filter(|j| j.is_in_progress() && j.is_tracking_only())
                .map(|j| {
                    let fx =
                        asm::machine::fail_if_in_progress(j, asm::FAILOVER_DURING_IMPORT, &ctx);
                    (j.name, fx)
                })
                .collect()
        };
        for (name, fx) in fx {
            tracing::warn!(job = %name.to_str_lossy(), "slot migration: promoted during an import; rolling it back");
            run_effects(&srv, &name, fx);
        }
    }
}

/// Fails every job in progress with `message` (FLUSHALL/FLUSHDB: `Data was flushed`).
pub fn fail_all(srv: &Server, message: &str) {
    let Some(node) = crate::cluster::node(srv) else {
        return;
    };
    let ctx = machine_ctx(srv, is_primary(node));
    let fx = {
        let mut log = srv.asm.log.lock();
        if !log.iter().any(|j| j.is_in_progress()) {
            return;
        }
        asm::machine::fail_all(&mut log, None, message, &ctx)
    };
    for (name, fx) in fx {
        run_effects(srv, &name, fx);
    }
}

/// `CLUSTER SYNCSLOTS ...` (`args` from the subcommand on). `origin` is who sent it: a
/// client, or our primary / the AOF (Replication). ESTABLISH from a client makes this
/// connection the import link (the caller sets `Pending::SlotImport`), so on success
/// the job's name comes back with the reply.
pub fn syncslots(
    srv: &Server,
    node: &ClusterNode,
    args: &[&[u8]],
    origin: asm::Origin,
) -> (Reply, Option<JobName>) {
    match asm::dispatch(args, origin) {
        asm::Dispatch::Error(e) => (asm::err_reply(&e), None),
        asm::Dispatch::Nothing => (Reply::Ok, None),
        // Only the import link's task feeds link messages; `dispatch` gives Link only to
        // the Migration origin.
        asm::Dispatch::Link(_) => (asm::err_reply(asm::SYNTAX_ERROR), None),
        asm::Dispatch::Establish { tracking_only } => {
            establish(srv, node, &args[1..], tracking_only)
        }
        asm::Dispatch::Finish(f) => {
            let primary = is_primary(node);
            let ctx = machine_ctx(srv, primary);
            let fx = {
                let mut log = srv.asm.log.lock();
                match f.resolve(&log) {
                    Err(e) => return (asm::err_reply(&e), None),
                    Ok(outcome) => match log.get_mut(&f.name) {
                        Some(job) if job.is_in_progress() => {
                            let msg = f.message.as_deref().map(String::from_utf8_lossy);
                            asm::machine::finish(job, outcome, msg.as_deref(), &ctx)
                        }
                        _ => Vec::new(),
                    },
                }
            };
            run_effects(srv, &f.name, fx);
            sync_hidden(srv, &srv.asm.log.lock());
            (Reply::Ok, None)
        }
    }
}

/// ESTABLISH: validate against the cluster state and the log, record the job, hide its
/// slots, and (from a client) hand the connection to the import link.
fn establish(
    srv: &Server,
    node: &ClusterNode,
    args: &[&[u8]],
    tracking_only: bool,
) -> (Reply, Option<JobName>) {
    let now = now_ms();
    let max_len = log_max_len(srv);
    let made = node.with_state(|st| {
        let mut log = srv.asm.log.lock();
        let view = asm::StateView::new(st, &log);
        let e = asm::parse_establish(args, &view, tracking_only)?;
        let job = match e.source {
            Some(source) if !tracking_only => {
                asm::Job::new_import(e.name, e.ranges.clone(), source, st.myself, now)
            }
            _ => asm::Job::new_tracking(e.name, e.ranges.clone(), now),
        };
        log.push_new(job);
        log.trim(max_len);
        sync_hidden(srv, &log);
        Ok::<_, String>(e)
    });
    match made {
        Err(e) => (asm::err_reply(&e), None),
        Ok(e) => {
            if tracking_only {
                return (Reply::Ok, None);
            }
            tracing::info!(
                job = %e.name.to_str_lossy(),
                ranges = %asm::format_ranges(&e.ranges),
                "slot migration: importing"
            );
            // Our replicas and the AOF keep a tracking job for the same slots.
            let source = e.source.unwrap_or([b'0'; 40]);
            propagate(srv, &asm::wire::establish_args(&source, &e.name, &e.ranges));
            (Reply::Ok, Some(e.name))
        }
    }
}

/// `CLUSTER MIGRATESLOTS SLOTSRANGE s e ... NODE id ...`: one export job per group, all
/// or none, each run by its own task (`export`).
pub fn migrateslots(srv: &std::sync::Arc<Server>, node: &ClusterNode, args: &[&[u8]]) -> Reply {
    let now = now_ms();
    let max_len = log_max_len(srv);
    let made = node.with_state(|st| {
        let mut log = srv.asm.log.lock();
        let view = asm::StateView::new(st, &log);
        let groups = asm::parse_migrateslots(args, &view)?;
        let me = st.myself;
        let jobs: Vec<asm::Job> = groups
            .into_iter()
            .map(|(ranges, target)| {
                asm::Job::new_export(JobName::generate(), ranges, me, target, now)
            })
            .collect();
        let names: Vec<JobName> = jobs.iter().map(|j| j.name).collect();
        log.push_new_batch(jobs);
        log.trim(max_len);
        Ok::<_, String>(names)
    });
    match made {
        Err(e) => asm::err_reply(&e),
        Ok(names) => {
            for name in names {
                tracing::info!(job = %name.to_str_lossy(), "slot migration: exporting");
                export::spawn(srv, name);
            }
            Reply::Ok
        }
    }
}

/// `CLUSTER CANCELSLOTMIGRATIONS`: every export in progress is cancelled (the target sees
/// its link drop and rolls back).
pub fn cancelslotmigrations(srv: &Server, node: &ClusterNode) -> Reply {
    let ctx = machine_ctx(srv, is_primary(node));
    let fx = match asm::machine::cancel_all(&mut srv.asm.log.lock(), &ctx) {
        Ok(fx) => fx,
        Err(e) => return asm::err_reply(&e),
    };
    for (name, fx) in fx {
        run_effects(srv, &name, fx);
    }
    Reply::Ok
}

/// CLUSTER SETSLOT while an atomic migration is unfinished here: Valkey's refusal.
pub fn setslot_refusal(srv: &Server) -> Option<&'static str> {
    let log = srv.asm.log.lock();
    if log.any_unfinished_import() {
        Some("ERR Slot import in progress.")
    } else if log.any_unfinished_export() {
        Some("ERR Slot export in progress.")
    } else {
        None
    }
}

/// `CLUSTER GETSLOTMIGRATIONS`.
pub fn getslotmigrations(srv: &Server) -> Reply {
    asm::render(&srv.asm.log.lock())
}
