//! Migration jobs and the job log: what `CLUSTER GETSLOTMIGRATIONS` lists (spec §2.3, §5).
//!
//! Pure data: times are passed in (Unix milliseconds) and stored as Unix seconds, as Valkey
//! shows them.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;

use rand::Rng;

use crate::msg::{Name, NAME_LEN, SLOTS};

/// A job's id: 40 bytes, shared by the source, the target and the target's replicas.
///
/// The source generates it as lower-case hex; a target accepts any 40 bytes in ESTABLISH
/// (Valkey checks only the length), so this is bytes, not text.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobName(pub [u8; NAME_LEN]);

impl JobName {
    /// 40 random lower-case hex characters, as the source makes at MIGRATESLOTS time.
    pub fn random<R: Rng + ?Sized>(rng: &mut R) -> JobName {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut n = [0u8; NAME_LEN];
        for c in n.iter_mut() {
            *c = HEX[rng.random_range(0..16)];
        }
        JobName(n)
    }

    /// [`JobName::random`] from the thread's generator (names only need to be unique).
    pub fn generate() -> JobName {
        JobName::random(&mut rand::rng())
    }

    /// Exactly 40 bytes, whatever they are (the wire rule); `None` otherwise.
    pub fn from_bytes(b: &[u8]) -> Option<JobName> {
        let arr: [u8; NAME_LEN] = b.try_into().ok()?;
        Some(JobName(arr))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The name as text for logs (lossy only for a peer that sent non-UTF-8).
    pub fn to_str_lossy(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }
}

impl fmt::Debug for JobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobName({})", self.to_str_lossy())
    }
}

impl fmt::Display for JobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_str_lossy())
    }
}

/// Which end of a migration this node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    Import,
    Export,
}

impl Operation {
    /// The `operation` field of GETSLOTMIGRATIONS.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Import => "IMPORT",
            Operation::Export => "EXPORT",
        }
    }
}

/// An inclusive slot range, kept in the order the user gave (never merged: GETSLOTMIGRATIONS
/// and ESTABLISH show them as given).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotRange {
    pub start: u16,
    pub end: u16,
}

impl SlotRange {
    /// A valid range (`start <= end < 16384`), or `None`.
    pub fn new(start: u16, end: u16) -> Option<SlotRange> {
        (start <= end && (end as usize) < SLOTS).then_some(SlotRange { start, end })
    }
    pub fn contains(self, slot: u16) -> bool {
        self.start <= slot && slot <= self.end
    }
    /// Valkey's overlap test: the ranges share at least one slot.
    pub fn overlaps(self, other: SlotRange) -> bool {
        self.end >= other.start && self.start <= other.end
    }
    pub fn slots(self) -> std::ops::RangeInclusive<u16> {
        self.start..=self.end
    }
}

impl fmt::Display for SlotRange {
    /// `"<start>-<end>"`, also for a single slot (`16383-16383`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.start, self.end)
    }
}

/// The `slot_ranges` field: ranges in the given order, joined by single spaces.
pub fn format_ranges(ranges: &[SlotRange]) -> String {
    let parts: Vec<String> = ranges.iter().map(|r| r.to_string()).collect();
    parts.join(" ")
}

/// True when some range holds the slot.
pub fn ranges_contain(ranges: &[SlotRange], slot: u16) -> bool {
    ranges.iter().any(|r| r.contains(slot))
}

/// The one node owning every slot of the ranges, or `None` when a slot is unowned or the
/// owners differ (what the ownership checks of §6.2 compare against).
pub fn ranges_owner(ranges: &[SlotRange], owner: impl Fn(u16) -> Option<Name>) -> Option<Name> {
    let mut found: Option<Name> = None;
    for r in ranges {
        for s in r.slots() {
            let o = owner(s)?;
            match found {
                None => found = Some(o),
                Some(f) if f != o => return None,
                Some(_) => {}
            }
        }
    }
    found
}

/// A set of hash slots as a 16384-bit bitmap: cheap membership for the per-key "hidden"
/// check and for overlap tests.
#[derive(Clone, PartialEq, Eq)]
pub struct SlotSet {
    bits: Box<[u64; SLOTS / 64]>,
}

impl Default for SlotSet {
    fn default() -> Self {
        SlotSet {
            bits: Box::new([0; SLOTS / 64]),
        }
    }
}

impl SlotSet {
    pub fn new() -> SlotSet {
        SlotSet::default()
    }
    /// Adds a slot (slots past 16383 are ignored).
    pub fn insert(&mut self, slot: u16) {
        if let Some(w) = self.bits.get_mut(slot as usize / 64) {
            *w |= 1 << (slot % 64);
        }
    }
    pub fn insert_range(&mut self, r: SlotRange) {
        for s in r.slots() {
            self.insert(s);
        }
    }
    pub fn contains(&self, slot: u16) -> bool {
        self.bits
            .get(slot as usize / 64)
            .is_some_and(|w| w & (1 << (slot % 64)) != 0)
    }
    /// True when any slot of the range is in the set.
    pub fn intersects(&self, r: SlotRange) -> bool {
        r.slots().any(|s| self.contains(s))
    }
    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|w| *w == 0)
    }
    pub fn len(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }
    /// The slots in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..SLOTS as u16).filter(|s| self.contains(*s))
    }
}

impl fmt::Debug for SlotSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// Source-side states, in their normal order (spec §5; internal names in Valkey differ,
/// e.g. `Replicating` is STREAMING).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExportState {
    Connecting,
    SendingAuth,
    ReadingAuthResponse,
    SendingEstablish,
    ReadingEstablishResponse,
    WaitingToSnapshot,
    Snapshotting,
    Replicating,
    WaitingToPause,
    FailoverPaused,
    FailoverGranted,
    Success,
    Failed,
    Cancelled,
}

impl ExportState {
    pub const ALL: [ExportState; 14] = [
        ExportState::Connecting,
        ExportState::SendingAuth,
        ExportState::ReadingAuthResponse,
        ExportState::SendingEstablish,
        ExportState::ReadingEstablishResponse,
        ExportState::WaitingToSnapshot,
        ExportState::Snapshotting,
        ExportState::Replicating,
        ExportState::WaitingToPause,
        ExportState::FailoverPaused,
        ExportState::FailoverGranted,
        ExportState::Success,
        ExportState::Failed,
        ExportState::Cancelled,
    ];

    /// The `state` string of GETSLOTMIGRATIONS.
    pub fn as_str(self) -> &'static str {
        match self {
            ExportState::Connecting => "connecting",
            ExportState::SendingAuth => "sending-auth-command",
            ExportState::ReadingAuthResponse => "reading-auth-response",
            ExportState::SendingEstablish => "sending-establish-command",
            ExportState::ReadingEstablishResponse => "reading-establish-response",
            ExportState::WaitingToSnapshot => "waiting-to-snapshot",
            ExportState::Snapshotting => "snapshotting",
            ExportState::Replicating => "replicating",
            ExportState::WaitingToPause => "waiting-to-pause",
            ExportState::FailoverPaused => "failover-paused",
            ExportState::FailoverGranted => "failover-granted",
            ExportState::Success => "success",
            ExportState::Failed => "failed",
            ExportState::Cancelled => "cancelled",
        }
    }

    /// Finished: the entry is only a log line now (trimmable).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            ExportState::Success | ExportState::Failed | ExportState::Cancelled
        )
    }
}

/// Target-side states (spec §5). `OccurringOnPrimary` is the tracking state of replicas and
/// of imports restored from RDB/AOF; `CleaningUp` is a failed import whose keys are still
/// being deleted. Imports cannot be cancelled, so there is no `Cancelled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImportState {
    WaitingForAck,
    ReceivingSnapshot,
    WaitingForPaused,
    FailoverRequested,
    FailoverGranted,
    OccurringOnPrimary,
    CleaningUp,
    Success,
    Failed,
}

impl ImportState {
    pub const ALL: [ImportState; 9] = [
        ImportState::WaitingForAck,
        ImportState::ReceivingSnapshot,
        ImportState::WaitingForPaused,
        ImportState::FailoverRequested,
        ImportState::FailoverGranted,
        ImportState::OccurringOnPrimary,
        ImportState::CleaningUp,
        ImportState::Success,
        ImportState::Failed,
    ];

    /// The `state` string of GETSLOTMIGRATIONS.
    pub fn as_str(self) -> &'static str {
        match self {
            ImportState::WaitingForAck => "waiting-for-ack",
            ImportState::ReceivingSnapshot => "receiving-snapshot",
            ImportState::WaitingForPaused => "waiting-for-paused",
            ImportState::FailoverRequested => "failover-requested",
            ImportState::FailoverGranted => "failover-granted",
            ImportState::OccurringOnPrimary => "occurring-on-primary",
            ImportState::CleaningUp => "cleaning-up",
            ImportState::Success => "success",
            ImportState::Failed => "failed",
        }
    }

    /// Finished: the entry is only a log line now (trimmable). `CleaningUp` is not.
    pub fn is_terminal(self) -> bool {
        matches!(self, ImportState::Success | ImportState::Failed)
    }
}

/// A job's state; the variant is the job's side, so operation and state cannot disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    Export(ExportState),
    Import(ImportState),
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Export(s) => s.as_str(),
            State::Import(s) => s.as_str(),
        }
    }
    pub fn operation(self) -> Operation {
        match self {
            State::Export(_) => Operation::Export,
            State::Import(_) => Operation::Import,
        }
    }
    /// Valkey's "finished": success, failed or cancelled.
    pub fn is_terminal(self) -> bool {
        match self {
            State::Export(s) => s.is_terminal(),
            State::Import(s) => s.is_terminal(),
        }
    }
    /// Valkey's "in progress": not finished and not cleaning up. Only these jobs react to
    /// messages, timeouts, cancel and ownership changes.
    pub fn is_in_progress(self) -> bool {
        !self.is_terminal() && self != State::Import(ImportState::CleaningUp)
    }
}

/// How a job ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    Success,
    Failed,
    /// Exports only (CANCELSLOTMIGRATIONS); an import asked to cancel fails instead.
    Cancelled,
}

impl Outcome {
    /// The terminal state of this outcome on a job of `op`.
    pub fn state(self, op: Operation) -> State {
        match (op, self) {
            (Operation::Export, Outcome::Success) => State::Export(ExportState::Success),
            (Operation::Export, Outcome::Failed) => State::Export(ExportState::Failed),
            (Operation::Export, Outcome::Cancelled) => State::Export(ExportState::Cancelled),
            (Operation::Import, Outcome::Success) => State::Import(ImportState::Success),
            (Operation::Import, _) => State::Import(ImportState::Failed),
        }
    }
}

/// One migration job (export on the source, import on the target or a tracking entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub name: JobName,
    /// In the order given by the user (ESTABLISH carries the same order).
    pub ranges: Vec<SlotRange>,
    /// `None` on tracking-only jobs (replicas, RDB/AOF restores, demoted targets); they
    /// render without `source_node`/`target_node`.
    pub source_node: Option<Name>,
    pub target_node: Option<Name>,
    /// Unix seconds.
    pub create_time: u64,
    /// Unix seconds of the last state change.
    pub last_update_time: u64,
    /// Unix seconds of the last ACK received (starts at `create_time`); the source's idle
    /// timeout runs on it.
    pub last_ack_time: u64,
    pub state: State,
    /// Status or error text, `""` when none.
    pub message: String,
    /// Copy-on-write bytes of the snapshot fork (source only).
    pub cow_size: u64,
    /// Bytes pending in the export link's output buffer; the I/O layer keeps it current
    /// while the link lives (rendered as 0 for imports).
    pub remaining_repl_size: u64,
    /// Export only: end of the node-wide write pause this job holds (Unix ms, 0 = none).
    pub pause_until_ms: u64,
    /// Import only: Unix seconds of the last bytes received on the link (the target's idle
    /// timeout runs on it; the I/O layer updates it with [`Job::note_recv`]).
    pub last_recv_time: u64,
    /// Unix ms of the last periodic ACK this node sent (one a second at most).
    pub ack_sent_ms: u64,
}

impl Job {
    fn base(name: JobName, ranges: Vec<SlotRange>, state: State, now_ms: u64) -> Job {
        let now = now_ms / 1000;
        Job {
            name,
            ranges,
            source_node: None,
            target_node: None,
            create_time: now,
            last_update_time: now,
            last_ack_time: now,
            state,
            message: String::new(),
            cow_size: 0,
            remaining_repl_size: 0,
            pause_until_ms: 0,
            last_recv_time: now,
            ack_sent_ms: 0,
        }
    }

    /// A new export made by MIGRATESLOTS (source = myself), in `connecting`.
    pub fn new_export(
        name: JobName,
        ranges: Vec<SlotRange>,
        source: Name,
        target: Name,
        now_ms: u64,
    ) -> Job {
        let mut j = Job::base(name, ranges, State::Export(ExportState::Connecting), now_ms);
        j.source_node = Some(source);
        j.target_node = Some(target);
        j
    }

    /// A new import made by a successful ESTABLISH (target = myself), in `waiting-for-ack`.
    pub fn new_import(
        name: JobName,
        ranges: Vec<SlotRange>,
        source: Name,
        target: Name,
        now_ms: u64,
    ) -> Job {
        let mut j = Job::base(
            name,
            ranges,
            State::Import(ImportState::WaitingForAck),
            now_ms,
        );
        j.source_node = Some(source);
        j.target_node = Some(target);
        j
    }

    /// A tracking-only import (ESTABLISH from our primary or the AOF, or an RDB restore):
    /// `occurring-on-primary`, no node ids.
    pub fn new_tracking(name: JobName, ranges: Vec<SlotRange>, now_ms: u64) -> Job {
        Job::base(
            name,
            ranges,
            State::Import(ImportState::OccurringOnPrimary),
            now_ms,
        )
    }

    pub fn operation(&self) -> Operation {
        self.state.operation()
    }
    pub fn is_tracking_only(&self) -> bool {
        self.source_node.is_none() || self.target_node.is_none()
    }
    pub fn is_finished(&self) -> bool {
        self.state.is_terminal()
    }
    pub fn is_in_progress(&self) -> bool {
        self.state.is_in_progress()
    }
    pub fn contains_slot(&self, slot: u16) -> bool {
        ranges_contain(&self.ranges, slot)
    }
    pub fn slot_ranges_str(&self) -> String {
        format_ranges(&self.ranges)
    }
    /// Moves to `state`, stamping `last_update_time` (Valkey stamps every transition).
    pub fn set_state(&mut self, state: State, now_ms: u64) {
        self.state = state;
        self.last_update_time = now_ms / 1000;
    }
    /// An ACK arrived from the peer.
    pub fn note_ack(&mut self, now_ms: u64) {
        self.last_ack_time = now_ms / 1000;
    }
    /// Bytes arrived on an import link.
    pub fn note_recv(&mut self, now_ms: u64) {
        self.last_recv_time = now_ms / 1000;
    }
}

/// Every job this node knows, newest first (the GETSLOTMIGRATIONS order).
#[derive(Clone, Debug, Default)]
pub struct JobLog {
    jobs: VecDeque<Job>,
}

impl JobLog {
    pub fn new() -> JobLog {
        JobLog::default()
    }
    pub fn len(&self) -> usize {
        self.jobs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
    /// Newest first.
    pub fn iter(&self) -> impl Iterator<Item = &Job> {
        self.jobs.iter()
    }
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Job> {
        self.jobs.iter_mut()
    }
    /// A job created now (MIGRATESLOTS, ESTABLISH) goes to the head.
    pub fn push_new(&mut self, job: Job) {
        self.jobs.push_front(job);
    }
    /// The jobs of one MIGRATESLOTS, in command order: Valkey ends up with the first group
    /// at the head, the others after it, then the older jobs.
    pub fn push_new_batch(&mut self, jobs: Vec<Job>) {
        for j in jobs.into_iter().rev() {
            self.jobs.push_front(j);
        }
    }
    /// A job restored from an RDB load goes to the tail.
    pub fn push_loaded(&mut self, job: Job) {
        self.jobs.push_back(job);
    }
    pub fn position(&self, name: &JobName) -> Option<usize> {
        self.jobs.iter().position(|j| j.name == *name)
    }
    pub fn get(&self, name: &JobName) -> Option<&Job> {
        self.jobs.iter().find(|j| j.name == *name)
    }
    pub fn get_mut(&mut self, name: &JobName) -> Option<&mut Job> {
        self.jobs.iter_mut().find(|j| j.name == *name)
    }

    /// Cron cleanup: while the log is longer than `max_len`, drops finished jobs walking
    /// from the tail (oldest first); unfinished jobs are never dropped, so the log may stay
    /// longer. `max_len` 0 empties it of finished jobs. Returns how many were dropped.
    pub fn trim(&mut self, max_len: usize) -> usize {
        let mut dropped = 0;
        let mut i = self.jobs.len();
        while self.jobs.len() > max_len && i > 0 {
            i -= 1;
            if self.jobs[i].is_finished() {
                self.jobs.remove(i);
                dropped += 1;
            }
        }
        dropped
    }

    /// Exports not finished yet (CANCELSLOTMIGRATIONS has work iff this is non-empty).
    pub fn unfinished_exports(&self) -> impl Iterator<Item = &Job> {
        self.jobs
            .iter()
            .filter(|j| j.operation() == Operation::Export && !j.is_finished())
    }
    pub fn any_unfinished_export(&self) -> bool {
        self.unfinished_exports().next().is_some()
    }
    pub fn any_unfinished_import(&self) -> bool {
        self.jobs
            .iter()
            .any(|j| j.operation() == Operation::Import && !j.is_finished())
    }
    /// The slot is in an unfinished export ("I am already migrating slot N.", and
    /// `SETSLOT`'s "Slot export in progress.").
    pub fn exporting_slot(&self, slot: u16) -> bool {
        self.unfinished_exports().any(|j| j.contains_slot(slot))
    }
    /// The slot is in an unfinished import, tracking ones included ("Slot is already being
    /// imported ...", `SETSLOT`'s "Slot import in progress.").
    pub fn importing_slot(&self, slot: u16) -> bool {
        self.jobs.iter().any(|j| {
            j.operation() == Operation::Import && !j.is_finished() && j.contains_slot(slot)
        })
    }
    /// The slot's export is in `failover-granted`: the source then accepts any claim on it,
    /// whatever the claimer's configEpoch (§3.6).
    pub fn failover_granted_slot(&self, slot: u16) -> bool {
        self.jobs
            .iter()
            .find(|j| {
                j.operation() == Operation::Export && j.is_in_progress() && j.contains_slot(slot)
            })
            .is_some_and(|j| j.state == State::Export(ExportState::FailoverGranted))
    }
    /// Slots of unfinished imports: hidden from DBSIZE, KEYS, SCAN, RANDOMKEY, expiry and
    /// eviction (§7). Recompute after any import changes state.
    pub fn hidden_slots(&self) -> SlotSet {
        let mut set = SlotSet::new();
        for j in self
            .jobs
            .iter()
            .filter(|j| j.operation() == Operation::Import && !j.is_finished())
        {
            for r in &j.ranges {
                set.insert_range(*r);
            }
        }
        set
    }
    /// Slots of unfinished exports (precomputed for MIGRATESLOTS validation).
    pub fn exporting_slots(&self) -> SlotSet {
        let mut set = SlotSet::new();
        for j in self.unfinished_exports() {
            for r in &j.ranges {
                set.insert_range(*r);
            }
        }
        set
    }
    /// The latest end of a write pause some export still holds, or `None`: after a
    /// `ReleasePause` effect the node unpauses its slot-migration pause when this is `None`.
    pub fn pause_until(&self) -> Option<u64> {
        self.jobs
            .iter()
            .map(|j| j.pause_until_ms)
            .filter(|t| *t != 0)
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn name(c: u8) -> JobName {
        JobName([c; NAME_LEN])
    }
    fn r(s: u16, e: u16) -> SlotRange {
        SlotRange { start: s, end: e }
    }
    fn finished(c: u8) -> Job {
        let mut j = Job::new_export(name(c), vec![r(0, 0)], [b'a'; 40], [b'b'; 40], 0);
        j.state = State::Export(ExportState::Success);
        j
    }
    fn running(c: u8) -> Job {
        Job::new_export(name(c), vec![r(0, 0)], [b'a'; 40], [b'b'; 40], 0)
    }
    fn names(log: &JobLog) -> Vec<u8> {
        log.iter().map(|j| j.name.0[0]).collect()
    }

    #[test]
    fn job_names_are_40_lower_hex() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let a = JobName::random(&mut rng);
        let b = JobName::random(&mut rng);
        assert_ne!(a, b);
        assert!(a
            .0
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)));
        assert_eq!(JobName::generate().as_bytes().len(), 40);
        assert!(JobName::from_bytes(&[b'x'; 39]).is_none());
        assert!(JobName::from_bytes(&[0xff; 40]).is_some());
    }

    #[test]
    fn state_strings_and_terminality() {
        let ex: Vec<&str> = ExportState::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            ex.join(" "),
            "connecting sending-auth-command reading-auth-response sending-establish-command reading-establish-response waiting-to-snapshot snapshotting replicating waiting-to-pause failover-paused failover-granted success failed cancelled"
        );
        let im: Vec<&str> = ImportState::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            im.join(" "),
            "waiting-for-ack receiving-snapshot waiting-for-paused failover-requested failover-granted occurring-on-primary cleaning-up success failed"
        );
        let term: Vec<_> = ExportState::ALL
            .iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(term.len(), 3);
        assert!(!State::Import(ImportState::CleaningUp).is_terminal());
        assert!(!State::Import(ImportState::CleaningUp).is_in_progress());
        assert!(State::Import(ImportState::OccurringOnPrimary).is_in_progress());
        assert_eq!(
            Outcome::Cancelled.state(Operation::Import),
            State::Import(ImportState::Failed)
        );
    }

    #[test]
    fn ranges_format_and_owner() {
        assert_eq!(format_ranges(&[r(16383, 16383)]), "16383-16383");
        assert_eq!(format_ranges(&[r(5, 9), r(0, 1)]), "5-9 0-1");
        assert!(r(0, 5).overlaps(r(5, 9)) && !r(0, 4).overlaps(r(5, 9)));
        assert!(SlotRange::new(3, 2).is_none() && SlotRange::new(0, 16384).is_none());
        let a = [b'a'; 40];
        let b = [b'b'; 40];
        let own = |s: u16| match s {
            0..=9 => Some(a),
            10..=19 => Some(b),
            _ => None,
        };
        assert_eq!(ranges_owner(&[r(0, 3), r(7, 9)], own), Some(a));
        assert_eq!(ranges_owner(&[r(0, 3), r(10, 10)], own), None);
        assert_eq!(ranges_owner(&[r(19, 20)], own), None);
    }

    #[test]
    fn slot_set() {
        let mut s = SlotSet::new();
        assert!(s.is_empty());
        s.insert_range(r(60, 70));
        s.insert(16383);
        s.insert(20000);
        assert_eq!(s.len(), 12);
        assert!(s.contains(64) && s.contains(16383) && !s.contains(59));
        assert!(s.intersects(r(0, 60)) && !s.intersects(r(71, 100)));
        assert_eq!(s.iter().next(), Some(60));
    }

    #[test]
    fn log_order_new_loaded_and_batch() {
        let mut log = JobLog::new();
        log.push_new(running(b'1'));
        log.push_new(running(b'2'));
        log.push_loaded(running(b'0'));
        assert_eq!(names(&log), b"210");
        log.push_new_batch(vec![running(b'a'), running(b'b')]);
        assert_eq!(names(&log), b"ab210");
        assert_eq!(log.position(&name(b'1')), Some(3));
        assert!(log.get(&name(b'z')).is_none());
    }

    #[test]
    fn trim_drops_finished_from_the_tail_only() {
        let mut log = JobLog::new();
        // Head to tail: f5 r4 f3 r2 f1 (f1 oldest).
        for (i, fin) in [(b'1', true), (b'2', false), (b'3', true), (b'4', false)] {
            log.push_new(if fin { finished(i) } else { running(i) });
        }
        log.push_new(finished(b'5'));
        assert_eq!(log.trim(10), 0);
        assert_eq!(log.trim(4), 1);
        assert_eq!(names(&log), b"5432");
        assert_eq!(log.trim(3), 1);
        assert_eq!(names(&log), b"542");
        // Only unfinished jobs left past the limit: they stay.
        assert_eq!(log.trim(0), 1);
        assert_eq!(names(&log), b"42");
        assert_eq!(log.trim(0), 0);
    }

    #[test]
    fn slot_lookups() {
        let mut log = JobLog::new();
        let mut ex = running(b'1');
        ex.ranges = vec![r(10, 20)];
        log.push_new(ex);
        let mut done = finished(b'2');
        done.ranges = vec![r(30, 40)];
        log.push_new(done);
        let mut im = Job::new_tracking(name(b'3'), vec![r(100, 100), r(5, 5)], 0);
        log.push_new(im.clone());
        assert!(log.exporting_slot(15) && !log.exporting_slot(35));
        assert!(log.importing_slot(5) && !log.importing_slot(15));
        assert_eq!(log.hidden_slots().iter().collect::<Vec<_>>(), [5, 100]);
        assert_eq!(log.exporting_slots().len(), 11);
        assert_eq!(log.unfinished_exports().count(), 1);
        assert!(log.any_unfinished_import());
        im.state = State::Import(ImportState::CleaningUp);
        if let Some(j) = log.get_mut(&name(b'3')) {
            *j = im;
        }
        assert!(log.importing_slot(5), "cleaning-up still hides its slots");
        assert!(!log.failover_granted_slot(15));
        if let Some(j) = log.get_mut(&name(b'1')) {
            j.state = State::Export(ExportState::FailoverGranted);
            j.pause_until_ms = 99;
        }
        assert!(log.failover_granted_slot(15));
        assert_eq!(log.pause_until(), Some(99));
    }
}
