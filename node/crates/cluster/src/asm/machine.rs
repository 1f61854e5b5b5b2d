//! The job state machines (spec §3.3-§3.6, §5, §6) as pure functions.
//!
//! Each event (a SYNCSLOTS message on a migration link, a handshake step, a cron tick, a
//! topology change, a cancel, a failure) updates the [`Job`] in place and returns the
//! [`Effect`]s the I/O layer must perform, in order. Nothing here touches a socket, the
//! keyspace or the clock: [`Ctx`] carries the time and the few facts the rules read.

use super::job::{ExportState, ImportState, Job, JobLog, JobName, Operation, Outcome, State};
use super::wire::{self, EstablishReply, SyncMsg};
use super::*;
use crate::msg::Name;

/// Valkey pauses for `cluster-manual-failover-timeout` times this (CLUSTER_MF_PAUSE_MULT).
pub const PAUSE_MULT: u64 = 2;
/// REQUEST-FAILOVER extends the pause to at least now + this (CLUSTER_OPERATION_TIMEOUT).
pub const OPERATION_TIMEOUT_MS: u64 = 2000;
/// Periodic ACKs are at most this often.
pub const ACK_INTERVAL_MS: u64 = 1000;

/// A SYNCSLOTS command received on a migration link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkMsg {
    Sync(SyncMsg),
    /// Ignored whatever the state.
    Capa,
    /// ESTABLISH or FINISH on an established link (Valkey never sends them there).
    Misplaced,
    /// A subcommand nobody knows: fails the job.
    Unknown,
}

/// What the I/O layer must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Write `CLUSTER SYNCSLOTS <msg>` ([`SyncMsg::bytes`]) on the job's link.
    Send(SyncMsg),
    /// Source: write `AUTH` ([`wire::auth`]), then report with [`on_auth_sent`] and
    /// [`on_auth_reply`].
    SendAuth,
    /// Source: write these ESTABLISH bytes, then read the reply ([`on_establish_reply`]).
    SendEstablish(Vec<u8>),
    /// Source: fork the snapshot now, then report with [`on_snapshot_started`].
    StartSnapshot,
    /// Source: the snapshot is over; flush the live writes held since it began.
    BeginStreaming,
    /// Source: pause writes node-wide (slot-migration purpose) until this Unix ms.
    Pause { until_ms: u64 },
    /// Source: this job holds no pause any more; unpause when [`JobLog::pause_until`] is
    /// `None`.
    ReleasePause,
    /// Target: bump the configEpoch without consensus, claim the job's slots, save and
    /// fsync nodes.conf, broadcast a PONG. The job is already `success` (keys visible in
    /// the same turn).
    TakeOver,
    /// Close the job's link or connection attempt, if any.
    CloseLink,
    /// Target primary: delete the keys of the job's slots this node does not own
    /// (propagating UNLINK), then call [`cleanup_done`].
    CleanupKeys,
    /// The job's slots stopped being hidden: recompute [`JobLog::hidden_slots`].
    Unhide,
    /// Target primary: propagate this argv (SYNCSLOTS FINISH) to replicas and the AOF.
    PropagateFinish(Vec<Vec<u8>>),
}

/// The facts the rules read, filled by the I/O layer for each call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ctx {
    /// Unix milliseconds.
    pub now_ms: u64,
    /// `repl-timeout`, seconds.
    pub repl_timeout_s: u64,
    /// `cluster-manual-failover-timeout`, ms.
    pub mf_timeout_ms: u64,
    /// `slot-migration-max-failover-repl-bytes` (-1: no limit).
    pub max_failover_repl_bytes: i64,
    /// Bytes pending in this job's export link output (`reply_bytes`).
    pub reply_bytes: u64,
    /// This job's export link has output queued but not yet written.
    pub pending_write: bool,
    /// Some child process (save, rewrite, snapshot) is running.
    pub child_active: bool,
    /// The node's slot-migration write pause is still in force (it may have been lifted
    /// under the job).
    pub pause_active: bool,
    /// This node is a primary.
    pub is_primary: bool,
    /// The node is loading its dataset (no cleanup of failed imports then).
    pub loading: bool,
    /// `DEBUG SLOTMIGRATION PREVENT-PAUSE`.
    pub prevent_pause: bool,
    /// `DEBUG SLOTMIGRATION PREVENT-FAILOVER`.
    pub prevent_failover: bool,
}

impl Ctx {
    /// A primary at `now_ms` with Valkey's default settings and an idle link.
    pub fn new(now_ms: u64) -> Ctx {
        Ctx {
            now_ms,
            repl_timeout_s: 60,
            mf_timeout_ms: 5000,
            max_failover_repl_bytes: 0,
            reply_bytes: 0,
            pending_write: false,
            child_active: false,
            pause_active: true,
            is_primary: true,
            loading: false,
            prevent_pause: false,
            prevent_failover: false,
        }
    }
    pub fn now_s(&self) -> u64 {
        self.now_ms / 1000
    }
}

/// The pure answer to one link message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Move to the state and perform the effects.
    To(State, Vec<Effect>),
    /// Nothing changes.
    Stay,
    /// The job fails with this message.
    Fail(&'static str),
}

const EX_REPLICATING: State = State::Export(ExportState::Replicating);
const EX_GRANTED: State = State::Export(ExportState::FailoverGranted);
const IM_GRANTED: State = State::Import(ImportState::FailoverGranted);
const IM_TRACKING: State = State::Import(ImportState::OccurringOnPrimary);
const IM_CLEANING: State = State::Import(ImportState::CleaningUp);

/// The pause end if the source may pause now: not prevented, and the export output is
/// within `slot-migration-max-failover-repl-bytes` (-1: any).
fn try_pause(ctx: &Ctx) -> Option<u64> {
    let over = u64::try_from(ctx.max_failover_repl_bytes).is_ok_and(|max| ctx.reply_bytes > max);
    if ctx.prevent_pause || over {
        return None;
    }
    Some(
        ctx.now_ms
            .saturating_add(ctx.mf_timeout_ms.saturating_mul(PAUSE_MULT)),
    )
}

/// The job's pause ended or was lifted.
fn pause_over(job: &Job, ctx: &Ctx) -> bool {
    job.pause_until_ms < ctx.now_ms || !ctx.pause_active
}

fn paused_steps(ctx: &Ctx, mut fx: Vec<Effect>) -> Step {
    match try_pause(ctx) {
        Some(until_ms) => {
            fx.push(Effect::Pause { until_ms });
            fx.push(Effect::Send(SyncMsg::Paused));
            Step::To(State::Export(ExportState::FailoverPaused), fx)
        }
        None => Step::To(State::Export(ExportState::WaitingToPause), fx),
    }
}

/// What a link message does to a job in its current state (no mutation). Any message in
/// the wrong state, including every message meant for the other side, is `Unexpected state
/// machine transition`; ACK and CAPA are accepted in every state.
pub fn transition(job: &Job, msg: LinkMsg, ctx: &Ctx) -> Step {
    use ExportState as E;
    use ImportState as I;
    if !job.is_in_progress() || job.state == IM_TRACKING {
        // A finished job's link is closing; a tracking job has no link.
        return Step::Stay;
    }
    let m = match msg {
        LinkMsg::Capa => return Step::Stay,
        LinkMsg::Unknown => return Step::Fail(UNKNOWN_SUBCOMMAND),
        LinkMsg::Misplaced => return Step::Fail(UNEXPECTED_TRANSITION),
        LinkMsg::Sync(m) => m,
    };
    match (job.state, m) {
        (State::Import(I::WaitingForAck), SyncMsg::Ack) => {
            Step::To(State::Import(I::ReceivingSnapshot), vec![])
        }
        (_, SyncMsg::Ack) => Step::Stay,
        (State::Import(I::ReceivingSnapshot), SyncMsg::SnapshotEof) => Step::To(
            State::Import(I::WaitingForPaused),
            vec![Effect::Send(SyncMsg::RequestPause)],
        ),
        (State::Import(I::WaitingForPaused), SyncMsg::Paused) => Step::To(
            State::Import(I::FailoverRequested),
            vec![Effect::Send(SyncMsg::RequestFailover)],
        ),
        (State::Import(I::FailoverRequested), SyncMsg::FailoverGranted) => {
            Step::To(IM_GRANTED, vec![])
        }
        // The child may not have been reaped yet: REQUEST-PAUSE also ends the snapshot.
        (State::Export(E::Snapshotting), SyncMsg::RequestPause) => {
            paused_steps(ctx, vec![Effect::BeginStreaming])
        }
        (State::Export(E::Replicating), SyncMsg::RequestPause) => paused_steps(ctx, vec![]),
        (State::Export(E::FailoverPaused), SyncMsg::RequestFailover) => {
            if pause_over(job, ctx) {
                return Step::Fail(UNPAUSED_BEFORE_FAILOVER);
            }
            let mut fx = Vec::new();
            let deadline = ctx.now_ms.saturating_add(OPERATION_TIMEOUT_MS);
            if job.pause_until_ms < deadline {
                fx.push(Effect::Pause { until_ms: deadline });
            }
            fx.push(Effect::Send(SyncMsg::FailoverGranted));
            Step::To(EX_GRANTED, fx)
        }
        _ => Step::Fail(UNEXPECTED_TRANSITION),
    }
}

/// Performs a [`Step`] on the job: records pauses and ACKs it sends, or fails it.
pub fn apply(job: &mut Job, step: Step, ctx: &Ctx) -> Vec<Effect> {
    match step {
        Step::Stay => Vec::new(),
        Step::Fail(msg) => finish(job, Outcome::Failed, Some(msg), ctx),
        Step::To(state, fx) => {
            job.set_state(state, ctx.now_ms);
            for e in &fx {
                match e {
                    Effect::Pause { until_ms } => job.pause_until_ms = *until_ms,
                    Effect::Send(SyncMsg::Ack) => job.ack_sent_ms = ctx.now_ms,
                    _ => {}
                }
            }
            fx
        }
    }
}

/// A SYNCSLOTS command arrived on the job's link. ACK refreshes `last_ack_time`; a
/// FAILOVER-GRANTED on the target takes the slots at once unless prevented.
pub fn on_message(job: &mut Job, msg: LinkMsg, ctx: &Ctx) -> Vec<Effect> {
    if !job.is_in_progress() {
        return Vec::new();
    }
    if msg == LinkMsg::Sync(SyncMsg::Ack) {
        job.note_ack(ctx.now_ms);
    }
    let before = job.state;
    let step = transition(job, msg, ctx);
    let mut fx = apply(job, step, ctx);
    if job.state == IM_GRANTED && before != IM_GRANTED {
        fx.extend(proceed(job, ctx));
    }
    fx
}

/// The work a state does on its own (Valkey's `proceedWithSlotMigration`, run from the
/// cron and before sleeping): start the snapshot once no child runs and the link is
/// flushed, retry the pause, expire pauses, take over after FAILOVER-GRANTED.
pub fn proceed(job: &mut Job, ctx: &Ctx) -> Vec<Effect> {
    match job.state {
        State::Export(ExportState::WaitingToSnapshot)
            if !ctx.child_active && !ctx.pending_write =>
        {
            vec![Effect::StartSnapshot]
        }
        State::Export(ExportState::WaitingToPause) => match try_pause(ctx) {
            Some(_) => apply(job, paused_steps(ctx, vec![]), ctx),
            None => Vec::new(),
        },
        State::Export(ExportState::FailoverPaused) if pause_over(job, ctx) => {
            finish(job, Outcome::Failed, Some(PAUSE_TIMED_OUT), ctx)
        }
        State::Export(ExportState::FailoverGranted) if pause_over(job, ctx) => {
            // "Write loss risk!": the new owner may still announce itself after we unpause.
            finish(job, Outcome::Failed, Some(UNPAUSED_BEFORE_MIGRATION), ctx)
        }
        State::Import(ImportState::FailoverGranted) if !ctx.prevent_failover => {
            let mut fx = vec![Effect::TakeOver];
            fx.extend(finish(job, Outcome::Success, None, ctx));
            fx
        }
        _ => Vec::new(),
    }
}

/// States that send periodic ACKs: not before the handshake is done, not while the
/// snapshot child owns the stream, not a target still waiting for the source's first ACK
/// (so the ESTABLISH reply is the only thing the source reads), not tracking jobs.
fn can_send_ack(state: State) -> bool {
    use ExportState as E;
    !matches!(
        state,
        State::Export(
            E::Connecting
                | E::SendingAuth
                | E::ReadingAuthResponse
                | E::SendingEstablish
                | E::ReadingEstablishResponse
                | E::Snapshotting
                | E::FailoverGranted
        ) | State::Import(ImportState::WaitingForAck | ImportState::OccurringOnPrimary)
    )
}

/// The cluster cron (every 100 ms) for one job: the idle timeout of §6.1 (the source
/// counts only ACKs from the target, the target any bytes; the source in failover-granted
/// and tracking jobs are exempt), then [`proceed`], then a periodic ACK.
pub fn tick(job: &mut Job, ctx: &Ctx) -> Vec<Effect> {
    let export = job.operation() == Operation::Export;
    if job.is_in_progress() && job.state != EX_GRANTED && job.state != IM_TRACKING {
        let last = if export {
            job.last_ack_time
        } else {
            job.last_recv_time
        };
        if last != 0 && ctx.now_s().saturating_sub(last) > ctx.repl_timeout_s {
            return finish(job, Outcome::Failed, Some(TIMED_OUT), ctx);
        }
    }
    let mut fx = proceed(job, ctx);
    let forking = fx.contains(&Effect::StartSnapshot);
    if job.is_in_progress()
        && can_send_ack(job.state)
        && !forking
        && !(export && ctx.pending_write)
        && ctx.now_ms.saturating_sub(job.ack_sent_ms) >= ACK_INTERVAL_MS
    {
        job.ack_sent_ms = ctx.now_ms;
        fx.push(Effect::Send(SyncMsg::Ack));
    }
    fx
}

/// Ends a job (Valkey's `finishSlotMigrationJob`): sets the message (`""` for none), lifts
/// an export's pause, closes the link. A failed import on a primary (not while loading)
/// first goes to `cleaning-up` and asks for [`Effect::CleanupKeys`]; otherwise an import
/// becomes visible again and a primary propagates FINISH.
pub fn finish(job: &mut Job, outcome: Outcome, message: Option<&str>, ctx: &Ctx) -> Vec<Effect> {
    job.message = message.unwrap_or("").to_string();
    let op = job.operation();
    let mut fx = Vec::new();
    if op == Operation::Export {
        job.pause_until_ms = 0;
        job.remaining_repl_size = 0;
        fx.push(Effect::ReleasePause);
    }
    let cleanup = op == Operation::Import
        && ctx.is_primary
        && job.state != IM_CLEANING
        && !ctx.loading
        && outcome != Outcome::Success;
    let state = if cleanup {
        IM_CLEANING
    } else {
        outcome.state(op)
    };
    job.set_state(state, ctx.now_ms);
    fx.push(Effect::CloseLink);
    if cleanup {
        fx.push(Effect::CleanupKeys);
    } else if op == Operation::Import {
        fx.push(Effect::Unhide);
        if ctx.is_primary {
            // Valkey's message is never NULL after a finish, so MESSAGE is always sent.
            let outcome = if state == State::Import(ImportState::Success) {
                Outcome::Success
            } else {
                Outcome::Failed
            };
            fx.push(Effect::PropagateFinish(wire::finish_args(
                &job.name,
                outcome,
                Some(job.message.as_bytes()),
            )));
        }
    }
    fx
}

/// The keys of a `cleaning-up` import are gone: it becomes `failed` (keeping its message),
/// visible again, and FINISH FAILED is propagated.
pub fn cleanup_done(job: &mut Job, ctx: &Ctx) -> Vec<Effect> {
    if job.state != IM_CLEANING {
        return Vec::new();
    }
    let message = std::mem::take(&mut job.message);
    finish(job, Outcome::Failed, Some(&message), ctx)
}

/// Fails the job with `message` if it is still in progress (OOM on the import link, a
/// failed stream command, a module error ...).
pub fn fail_if_in_progress(job: &mut Job, message: &str, ctx: &Ctx) -> Vec<Effect> {
    if !job.is_in_progress() {
        return Vec::new();
    }
    finish(job, Outcome::Failed, Some(message), ctx)
}

/// The job's link closed. An export in failover-granted is kept (it stays paused until the
/// new owner shows up or the pause ends); anything else in progress fails.
pub fn on_link_closed(job: &mut Job, ctx: &Ctx) -> Vec<Effect> {
    job.remaining_repl_size = 0;
    if !job.is_in_progress() || job.is_tracking_only() || job.state == EX_GRANTED {
        return Vec::new();
    }
    let msg = match job.operation() {
        Operation::Export => CONN_LOST_TO_TARGET,
        Operation::Import => CONN_LOST_TO_SOURCE,
    };
    finish(job, Outcome::Failed, Some(msg), ctx)
}

fn send_establish(job: &mut Job, ctx: &Ctx) -> Vec<Effect> {
    let source = job.source_node.unwrap_or([b'0'; crate::msg::NAME_LEN]);
    let bytes = wire::establish(&source, &job.name, &job.ranges);
    job.set_state(State::Export(ExportState::SendingEstablish), ctx.now_ms);
    job.set_state(
        State::Export(ExportState::ReadingEstablishResponse),
        ctx.now_ms,
    );
    vec![Effect::SendEstablish(bytes)]
}

/// Source, `connecting`: the TCP connect finished. `with_auth`: `masterauth` is set.
pub fn on_connect_result(
    job: &mut Job,
    result: Result<(), &str>,
    with_auth: bool,
    ctx: &Ctx,
) -> Vec<Effect> {
    if job.state != State::Export(ExportState::Connecting) {
        return Vec::new();
    }
    match result {
        Err(e) => finish(job, Outcome::Failed, Some(&connect_failed(e)), ctx),
        Ok(()) if with_auth => {
            job.set_state(State::Export(ExportState::SendingAuth), ctx.now_ms);
            vec![Effect::SendAuth]
        }
        Ok(()) => send_establish(job, ctx),
    }
}

/// Source, `sending-auth-command`: the AUTH write finished.
pub fn on_auth_sent(job: &mut Job, result: Result<(), &str>, ctx: &Ctx) -> Vec<Effect> {
    if job.state != State::Export(ExportState::SendingAuth) {
        return Vec::new();
    }
    match result {
        Err(e) => finish(job, Outcome::Failed, Some(&auth_send_failed(e)), ctx),
        Ok(()) => {
            job.set_state(State::Export(ExportState::ReadingAuthResponse), ctx.now_ms);
            Vec::new()
        }
    }
}

/// Source, `reading-auth-response`: the reply line without its CRLF, or `None` when none
/// came within `repl-syncio-timeout`.
pub fn on_auth_reply(job: &mut Job, line: Option<&[u8]>, ctx: &Ctx) -> Vec<Effect> {
    if job.state != State::Export(ExportState::ReadingAuthResponse) {
        return Vec::new();
    }
    match line {
        None => finish(job, Outcome::Failed, Some(AUTH_NO_REPLY), ctx),
        Some(l) if l.first() == Some(&b'-') => {
            let msg = auth_failed(&String::from_utf8_lossy(l));
            finish(job, Outcome::Failed, Some(&msg), ctx)
        }
        Some(_) => send_establish(job, ctx),
    }
}

/// Source, `reading-establish-response`: see [`wire::parse_establish_reply`]. Success
/// sends the first ACK, which takes the target out of waiting-for-ack.
pub fn on_establish_reply(job: &mut Job, reply: &EstablishReply, ctx: &Ctx) -> Vec<Effect> {
    if job.state != State::Export(ExportState::ReadingEstablishResponse) {
        return Vec::new();
    }
    match reply {
        EstablishReply::Incomplete => Vec::new(),
        EstablishReply::Failed(m) => finish(job, Outcome::Failed, Some(m), ctx),
        EstablishReply::Ok { .. } => apply(
            job,
            Step::To(
                State::Export(ExportState::WaitingToSnapshot),
                vec![Effect::Send(SyncMsg::Ack)],
            ),
            ctx,
        ),
    }
}

/// Source: the fork asked by [`Effect::StartSnapshot`] started (`ok`) or could not.
pub fn on_snapshot_started(job: &mut Job, ok: bool, ctx: &Ctx) -> Vec<Effect> {
    if job.state != State::Export(ExportState::WaitingToSnapshot) {
        return Vec::new();
    }
    if ok {
        job.set_state(State::Export(ExportState::Snapshotting), ctx.now_ms);
        Vec::new()
    } else {
        finish(job, Outcome::Failed, Some(SNAPSHOT_START_FAILED), ctx)
    }
}

/// Source: the snapshot child exited. Only a job still `snapshotting` cares (REQUEST-PAUSE
/// may have moved it on already); success records the child's copy-on-write size.
pub fn on_snapshot_done(job: &mut Job, ok: bool, cow_size: u64, ctx: &Ctx) -> Vec<Effect> {
    if job.state != State::Export(ExportState::Snapshotting) {
        return Vec::new();
    }
    if ok {
        job.cow_size = cow_size;
        job.set_state(EX_REPLICATING, ctx.now_ms);
        vec![Effect::BeginStreaming]
    } else {
        finish(job, Outcome::Failed, Some(SNAPSHOT_FAILED), ctx)
    }
}

/// The slot table changed. `owner` is the single node owning all the job's slots (see
/// [`super::job::ranges_owner`]).
///
/// Export: still ours, fine; all the target's, success; anything else fails. Import on a
/// demoted node: becomes tracking-only (`occurring-on-primary`, link closed, no cleanup).
/// Import on a primary: the source must still own them; if they became ours, Valkey fails
/// the job twice in a row, so the visible result is `failed` with `Slots are no longer
/// owned by source node`, without a cleanup pass (we own every slot anyway).
pub fn on_topology(job: &mut Job, owner: Option<Name>, myself: &Name, ctx: &Ctx) -> Vec<Effect> {
    if !job.is_in_progress() {
        return Vec::new();
    }
    if job.operation() == Operation::Export {
        return match owner {
            Some(o) if o == *myself => Vec::new(),
            Some(o) if Some(o) == job.target_node => finish(job, Outcome::Success, None, ctx),
            _ => finish(job, Outcome::Failed, Some(NOT_OWNED_BY_MYSELF), ctx),
        };
    }
    if !ctx.is_primary {
        if job.state == IM_TRACKING {
            return Vec::new();
        }
        job.set_state(IM_TRACKING, ctx.now_ms);
        job.source_node = None;
        job.target_node = None;
        return vec![Effect::CloseLink];
    }
    let Some(source) = job.source_node else {
        return Vec::new();
    };
    if owner == Some(source) {
        return Vec::new();
    }
    if owner == Some(*myself) {
        let mut fx = finish(job, Outcome::Failed, Some(ASSIGNED_TO_MYSELF), ctx);
        fx.extend(finish(job, Outcome::Failed, Some(NOT_OWNED_BY_SOURCE), ctx));
        fx.retain(|e| *e != Effect::CleanupKeys);
        fx.dedup();
        return fx;
    }
    finish(job, Outcome::Failed, Some(NOT_OWNED_BY_SOURCE), ctx)
}

/// Effects per job, for the log-wide events.
pub type JobEffects = Vec<(JobName, Vec<Effect>)>;

/// [`on_topology`] for every job; `owner_of` reads the slot table.
pub fn topology_all(
    log: &mut JobLog,
    owner_of: impl Fn(u16) -> Option<Name>,
    myself: &Name,
    ctx: &Ctx,
) -> JobEffects {
    let mut out = Vec::new();
    for job in log.iter_mut() {
        let owner = super::job::ranges_owner(&job.ranges, &owner_of);
        let fx = on_topology(job, owner, myself, ctx);
        if !fx.is_empty() {
            out.push((job.name, fx));
        }
    }
    out
}

/// CLUSTER CANCELSLOTMIGRATIONS: every in-progress export becomes `cancelled` (empty
/// message); imports are untouched. `Err` is `No migrations ongoing`.
pub fn cancel_all(log: &mut JobLog, ctx: &Ctx) -> Result<JobEffects, String> {
    if !log.any_unfinished_export() {
        return Err(NO_MIGRATIONS.to_string());
    }
    let mut out = Vec::new();
    for job in log.iter_mut() {
        if job.operation() == Operation::Export && job.is_in_progress() {
            let fx = finish(job, Outcome::Cancelled, None, ctx);
            out.push((job.name, fx));
        }
    }
    Ok(out)
}

/// Fails every in-progress job of `op` (all jobs when `None`) with `message`: FLUSHALL /
/// FLUSHDB (`Data was flushed`, all), promotion, full sync, RDB load, restart (imports),
/// module errors (exports).
pub fn fail_all(log: &mut JobLog, op: Option<Operation>, message: &str, ctx: &Ctx) -> JobEffects {
    let mut out = Vec::new();
    for job in log.iter_mut() {
        if op.is_none_or(|o| o == job.operation()) && job.is_in_progress() {
            let fx = finish(job, Outcome::Failed, Some(message), ctx);
            out.push((job.name, fx));
        }
    }
    out
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
