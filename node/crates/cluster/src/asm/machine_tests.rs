//! Tests of `machine.rs`: both happy paths, every message in every state, timeouts,
//! pauses, cancel, link loss, ownership changes and the cleanup path.

use super::*;
use crate::asm::job::SlotRange;

const ME: Name = [b'a'; 40];
const SRC: Name = [b's'; 40];
const TGT: Name = [b't'; 40];
const OTHER: Name = [b'o'; 40];
const T0: u64 = 1_000_000; // ms

fn jname() -> JobName {
    JobName([b'j'; 40])
}
fn ranges() -> Vec<SlotRange> {
    vec![
        SlotRange { start: 0, end: 9 },
        SlotRange { start: 20, end: 20 },
    ]
}
fn export_in(s: ExportState) -> Job {
    let mut j = Job::new_export(jname(), ranges(), ME, TGT, T0);
    j.state = State::Export(s);
    j
}
fn import_in(s: ImportState) -> Job {
    let mut j = Job::new_import(jname(), ranges(), SRC, ME, T0);
    j.state = State::Import(s);
    j
}
fn ctx() -> Ctx {
    Ctx::new(T0)
}
fn at(ms: u64) -> Ctx {
    Ctx::new(ms)
}
fn finish_argv(outcome: &str, msg: &str) -> Effect {
    let mut v: Vec<Vec<u8>> = ["CLUSTER", "SYNCSLOTS", "FINISH", "STATE", outcome, "NAME"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    v.push(jname().0.to_vec());
    v.push(b"MESSAGE".to_vec());
    v.push(msg.as_bytes().to_vec());
    Effect::PropagateFinish(v)
}
fn msg(m: SyncMsg) -> LinkMsg {
    LinkMsg::Sync(m)
}

#[test]
fn export_happy_path() {
    let mut j = Job::new_export(jname(), ranges(), ME, TGT, T0);
    let c = ctx();
    let fx = on_connect_result(&mut j, Ok(()), false, &c);
    assert_eq!(
        fx,
        vec![Effect::SendEstablish(wire::establish(
            &ME,
            &jname(),
            &ranges()
        ))]
    );
    assert_eq!(
        j.state,
        State::Export(ExportState::ReadingEstablishResponse)
    );
    assert!(tick(&mut j, &c).is_empty(), "no ACK during the handshake");
    assert!(on_establish_reply(&mut j, &EstablishReply::Incomplete, &c).is_empty());
    let fx = on_establish_reply(&mut j, &EstablishReply::Ok { consumed: 5 }, &c);
    assert_eq!(fx, vec![Effect::Send(SyncMsg::Ack)]);
    assert_eq!(j.state, State::Export(ExportState::WaitingToSnapshot));
    // A child is running: wait (and keep ACKing).
    let mut busy = at(T0 + 1000);
    busy.child_active = true;
    assert_eq!(tick(&mut j, &busy), vec![Effect::Send(SyncMsg::Ack)]);
    let c1 = at(T0 + 1500);
    assert_eq!(tick(&mut j, &c1), vec![Effect::StartSnapshot]);
    assert!(on_snapshot_started(&mut j, true, &c1).is_empty());
    assert_eq!(j.state, State::Export(ExportState::Snapshotting));
    assert!(
        tick(&mut j, &at(T0 + 3000)).is_empty(),
        "no ACK while snapshotting"
    );
    assert_eq!(
        on_snapshot_done(&mut j, true, 4096, &c1),
        vec![Effect::BeginStreaming]
    );
    assert_eq!((j.state, j.cow_size), (EX_REPLICATING, 4096));
    let fx = on_message(&mut j, msg(SyncMsg::RequestPause), &c1);
    let until = T0 + 1500 + 10_000;
    assert_eq!(
        fx,
        vec![
            Effect::Pause { until_ms: until },
            Effect::Send(SyncMsg::Paused)
        ]
    );
    assert_eq!(j.state, State::Export(ExportState::FailoverPaused));
    assert_eq!(j.pause_until_ms, until);
    let fx = on_message(&mut j, msg(SyncMsg::RequestFailover), &c1);
    assert_eq!(fx, vec![Effect::Send(SyncMsg::FailoverGranted)]);
    assert_eq!(j.state, EX_GRANTED);
    // Connection loss now does not fail the job.
    assert!(on_link_closed(&mut j, &c1).is_empty());
    assert_eq!(j.state, EX_GRANTED);
    // Still ours: nothing. The target's: success, pause released.
    assert!(on_topology(&mut j, Some(ME), &ME, &c1).is_empty());
    let fx = on_topology(&mut j, Some(TGT), &ME, &c1);
    assert_eq!(fx, vec![Effect::ReleasePause, Effect::CloseLink]);
    assert_eq!(j.state, State::Export(ExportState::Success));
    assert_eq!((j.message.as_str(), j.pause_until_ms), ("", 0));
}

#[test]
fn export_handshake_with_auth_and_failures() {
    let c = ctx();
    let mut j = export_in(ExportState::Connecting);
    assert_eq!(
        on_connect_result(&mut j, Ok(()), true, &c),
        vec![Effect::SendAuth]
    );
    assert_eq!(j.state, State::Export(ExportState::SendingAuth));
    assert!(on_auth_sent(&mut j, Ok(()), &c).is_empty());
    assert_eq!(j.state, State::Export(ExportState::ReadingAuthResponse));
    let fx = on_auth_reply(&mut j, Some(b"+OK"), &c);
    assert!(matches!(fx.as_slice(), [Effect::SendEstablish(_)]));

    let mut j = export_in(ExportState::ReadingAuthResponse);
    on_auth_reply(
        &mut j,
        Some(b"-WRONGPASS invalid username-password pair"),
        &c,
    );
    assert_eq!(
        j.message,
        "Failed to AUTH to target node: -WRONGPASS invalid username-password pair"
    );
    let mut j = export_in(ExportState::ReadingAuthResponse);
    on_auth_reply(&mut j, None, &c);
    assert_eq!(j.message, AUTH_NO_REPLY);
    let mut j = export_in(ExportState::SendingAuth);
    on_auth_sent(&mut j, Err("broken pipe"), &c);
    assert_eq!(
        j.message,
        "Failed to send AUTH command to target node: broken pipe"
    );
    let mut j = export_in(ExportState::Connecting);
    on_connect_result(&mut j, Err("Connection refused"), false, &c);
    assert_eq!(
        j.message,
        "Unable to connect to target node: Connection refused"
    );
    assert_eq!(j.state, State::Export(ExportState::Failed));
    let mut j = export_in(ExportState::ReadingEstablishResponse);
    let reply = wire::parse_establish_reply(b"-ERR Slots are being manually imported\r\n");
    on_establish_reply(&mut j, &reply, &c);
    assert_eq!(
        j.message,
        "Received error during handshake to target: -ERR Slots are being manually imported\r\n"
    );
    // Stale callbacks in other states do nothing.
    let mut j = export_in(ExportState::Replicating);
    assert!(on_connect_result(&mut j, Ok(()), false, &c).is_empty());
    assert!(on_auth_reply(&mut j, None, &c).is_empty());
    assert!(on_snapshot_started(&mut j, false, &c).is_empty());
    assert!(on_snapshot_done(&mut j, false, 0, &c).is_empty());
    assert_eq!(j.state, EX_REPLICATING);
    let mut j = export_in(ExportState::WaitingToSnapshot);
    on_snapshot_started(&mut j, false, &c);
    assert_eq!(j.message, SNAPSHOT_START_FAILED);
    let mut j = export_in(ExportState::Snapshotting);
    on_snapshot_done(&mut j, false, 0, &c);
    assert_eq!(j.message, SNAPSHOT_FAILED);
}

#[test]
fn import_happy_path_on_a_primary() {
    let mut j = Job::new_import(jname(), ranges(), SRC, ME, T0);
    let c = ctx();
    assert!(
        tick(&mut j, &c).is_empty(),
        "no ACK before the source's first"
    );
    assert!(on_message(&mut j, msg(SyncMsg::Ack), &at(T0 + 3000)).is_empty());
    assert_eq!(j.state, State::Import(ImportState::ReceivingSnapshot));
    assert_eq!(j.last_ack_time, (T0 + 3000) / 1000);
    assert_eq!(
        tick(&mut j, &at(T0 + 3000)),
        vec![Effect::Send(SyncMsg::Ack)]
    );
    assert!(tick(&mut j, &at(T0 + 3500)).is_empty(), "one ACK a second");
    let fx = on_message(&mut j, msg(SyncMsg::SnapshotEof), &c);
    assert_eq!(fx, vec![Effect::Send(SyncMsg::RequestPause)]);
    let fx = on_message(&mut j, msg(SyncMsg::Paused), &c);
    assert_eq!(fx, vec![Effect::Send(SyncMsg::RequestFailover)]);
    assert_eq!(j.state, State::Import(ImportState::FailoverRequested));
    let fx = on_message(&mut j, msg(SyncMsg::FailoverGranted), &c);
    assert_eq!(
        fx,
        vec![
            Effect::TakeOver,
            Effect::CloseLink,
            Effect::Unhide,
            finish_argv("SUCCESS", "")
        ]
    );
    assert_eq!(j.state, State::Import(ImportState::Success));
}

#[test]
fn prevented_failover_waits_in_failover_granted() {
    let mut j = import_in(ImportState::FailoverRequested);
    let mut c = ctx();
    c.prevent_failover = true;
    assert!(on_message(&mut j, msg(SyncMsg::FailoverGranted), &c).is_empty());
    assert_eq!(j.state, IM_GRANTED);
    assert!(!tick(&mut j, &c).contains(&Effect::TakeOver));
    c.prevent_failover = false;
    assert_eq!(tick(&mut j, &c).first(), Some(&Effect::TakeOver));
    assert_eq!(j.state, State::Import(ImportState::Success));
}

#[test]
fn every_message_in_every_export_state() {
    let valid = [
        (ExportState::Snapshotting, SyncMsg::RequestPause),
        (ExportState::Replicating, SyncMsg::RequestPause),
        (ExportState::FailoverPaused, SyncMsg::RequestFailover),
    ];
    let c = at(T0 + 5000);
    for s in ExportState::ALL {
        for m in SyncMsg::ALL {
            let mut j = export_in(s);
            j.pause_until_ms = T0 + 60_000;
            let fx = on_message(&mut j, msg(m), &c);
            let what = format!("{s:?} + {m:?}");
            if s.is_terminal() {
                assert!(fx.is_empty() && j.state == State::Export(s), "{what}");
            } else if m == SyncMsg::Ack {
                assert!(fx.is_empty() && j.state == State::Export(s), "{what}");
                assert_eq!(j.last_ack_time, c.now_s(), "{what}");
            } else if valid.contains(&(s, m)) {
                assert!(j.is_in_progress(), "{what}");
            } else {
                assert_eq!(j.state, State::Export(ExportState::Failed), "{what}");
                assert_eq!(j.message, UNEXPECTED_TRANSITION, "{what}");
                assert_eq!(fx, vec![Effect::ReleasePause, Effect::CloseLink], "{what}");
                assert_eq!(j.pause_until_ms, 0, "{what}");
            }
        }
    }
}

#[test]
fn every_message_in_every_import_state() {
    let valid = [
        (ImportState::ReceivingSnapshot, SyncMsg::SnapshotEof),
        (ImportState::WaitingForPaused, SyncMsg::Paused),
        (ImportState::FailoverRequested, SyncMsg::FailoverGranted),
    ];
    for primary in [true, false] {
        let mut c = ctx();
        c.is_primary = primary;
        for s in ImportState::ALL {
            for m in SyncMsg::ALL {
                let mut j = import_in(s);
                let fx = on_message(&mut j, msg(m), &c);
                let what = format!("{s:?} + {m:?} primary={primary}");
                let inert =
                    !State::Import(s).is_in_progress() || s == ImportState::OccurringOnPrimary;
                if inert {
                    assert!(fx.is_empty() && j.state == State::Import(s), "{what}");
                } else if m == SyncMsg::Ack {
                    let want = if s == ImportState::WaitingForAck {
                        ImportState::ReceivingSnapshot
                    } else {
                        s
                    };
                    assert_eq!(j.state, State::Import(want), "{what}");
                    assert!(fx.is_empty(), "{what}");
                } else if valid.contains(&(s, m)) {
                    assert_ne!(j.state, State::Import(ImportState::Failed), "{what}");
                    assert_ne!(j.state, IM_CLEANING, "{what}");
                } else if primary {
                    assert_eq!(j.state, IM_CLEANING, "{what}");
                    assert_eq!(j.message, UNEXPECTED_TRANSITION, "{what}");
                    assert_eq!(fx, vec![Effect::CloseLink, Effect::CleanupKeys], "{what}");
                } else {
                    assert_eq!(j.state, State::Import(ImportState::Failed), "{what}");
                    assert_eq!(fx, vec![Effect::CloseLink, Effect::Unhide], "{what}");
                }
            }
        }
    }
}

#[test]
fn unknown_misplaced_and_capa() {
    let c = ctx();
    let mut j = import_in(ImportState::ReceivingSnapshot);
    assert!(on_message(&mut j, LinkMsg::Capa, &c).is_empty());
    assert_eq!(j.state, State::Import(ImportState::ReceivingSnapshot));
    on_message(&mut j, LinkMsg::Unknown, &c);
    assert_eq!(j.message, UNKNOWN_SUBCOMMAND);
    let mut j = export_in(ExportState::Replicating);
    on_message(&mut j, LinkMsg::Misplaced, &c);
    assert_eq!(
        (j.state, j.message.as_str()),
        (State::Export(ExportState::Failed), UNEXPECTED_TRANSITION)
    );
}

#[test]
fn cleanup_then_failed_with_finish() {
    let c = ctx();
    let mut j = import_in(ImportState::WaitingForPaused);
    assert_eq!(
        fail_if_in_progress(&mut j, IMPORT_OOM, &c),
        vec![Effect::CloseLink, Effect::CleanupKeys]
    );
    assert_eq!(j.state, IM_CLEANING);
    assert!(fail_if_in_progress(&mut j, DATA_FLUSHED, &c).is_empty());
    assert!(on_link_closed(&mut j, &c).is_empty());
    assert!(
        tick(&mut j, &at(T0 + 999_999)).is_empty(),
        "no timeout while cleaning"
    );
    let fx = cleanup_done(&mut j, &c);
    assert_eq!(
        fx,
        vec![
            Effect::CloseLink,
            Effect::Unhide,
            finish_argv("FAILED", IMPORT_OOM)
        ]
    );
    assert_eq!(
        (j.state, j.message.as_str()),
        (State::Import(ImportState::Failed), IMPORT_OOM)
    );
    assert!(cleanup_done(&mut j, &c).is_empty());
    // While loading, a primary skips the cleanup pass.
    let mut j = import_in(ImportState::ReceivingSnapshot);
    let mut c = ctx();
    c.loading = true;
    let fx = fail_if_in_progress(&mut j, PROCESS_RESTARTED, &c);
    assert_eq!(fx[..2], [Effect::CloseLink, Effect::Unhide]);
    assert_eq!(j.state, State::Import(ImportState::Failed));
}

#[test]
fn pause_rules() {
    // Output not drained: wait, then pause on a later cron.
    let mut j = export_in(ExportState::Replicating);
    let mut c = ctx();
    c.reply_bytes = 10;
    assert!(on_message(&mut j, msg(SyncMsg::RequestPause), &c).is_empty());
    assert_eq!(j.state, State::Export(ExportState::WaitingToPause));
    assert!(tick(&mut j, &c)
        .iter()
        .all(|e| *e == Effect::Send(SyncMsg::Ack)));
    c.reply_bytes = 0;
    let fx = tick(&mut j, &c);
    assert_eq!(
        fx[..2],
        [
            Effect::Pause {
                until_ms: T0 + 10_000
            },
            Effect::Send(SyncMsg::Paused)
        ]
    );
    assert_eq!(j.state, State::Export(ExportState::FailoverPaused));
    // -1: no limit. A snapshotting job starts streaming first.
    let mut j = export_in(ExportState::Snapshotting);
    let mut c = ctx();
    c.reply_bytes = 50 << 20;
    c.max_failover_repl_bytes = -1;
    c.mf_timeout_ms = 100;
    let fx = on_message(&mut j, msg(SyncMsg::RequestPause), &c);
    assert_eq!(fx[0], Effect::BeginStreaming);
    assert_eq!(fx[1], Effect::Pause { until_ms: T0 + 200 });
    // DEBUG PREVENT-PAUSE.
    let mut j = export_in(ExportState::Replicating);
    let mut c = ctx();
    c.prevent_pause = true;
    on_message(&mut j, msg(SyncMsg::RequestPause), &c);
    assert_eq!(j.state, State::Export(ExportState::WaitingToPause));
}

#[test]
fn failover_request_and_pause_expiry() {
    // A short pause is extended to now + 2 s.
    let mut j = export_in(ExportState::FailoverPaused);
    j.pause_until_ms = T0 + 500;
    let fx = on_message(&mut j, msg(SyncMsg::RequestFailover), &ctx());
    assert_eq!(
        fx,
        vec![
            Effect::Pause {
                until_ms: T0 + 2000
            },
            Effect::Send(SyncMsg::FailoverGranted)
        ]
    );
    assert_eq!(j.pause_until_ms, T0 + 2000);
    // Pause over (expired, or lifted under us): denied.
    for lifted in [false, true] {
        let mut j = export_in(ExportState::FailoverPaused);
        let mut c = ctx();
        j.pause_until_ms = if lifted { T0 + 5000 } else { T0 - 1 };
        c.pause_active = !lifted;
        on_message(&mut j, msg(SyncMsg::RequestFailover), &c);
        assert_eq!(j.message, UNPAUSED_BEFORE_FAILOVER);
    }
    let mut j = export_in(ExportState::FailoverPaused);
    j.pause_until_ms = T0 + 10;
    assert!(tick(&mut j, &at(T0 + 10))
        .iter()
        .all(|e| *e == Effect::Send(SyncMsg::Ack)));
    let fx = tick(&mut j, &at(T0 + 11));
    assert_eq!(j.message, PAUSE_TIMED_OUT);
    assert_eq!(fx, vec![Effect::ReleasePause, Effect::CloseLink]);
    let mut j = export_in(ExportState::FailoverGranted);
    j.pause_until_ms = T0 + 10;
    assert!(
        tick(&mut j, &at(T0 + 10)).is_empty(),
        "no ACK in failover-granted"
    );
    tick(&mut j, &at(T0 + 11));
    assert_eq!(j.message, UNPAUSED_BEFORE_MIGRATION);
}

#[test]
fn idle_timeouts() {
    let limit = T0 + 60_000;
    // Source: only target ACKs count.
    let mut j = export_in(ExportState::Replicating);
    tick(&mut j, &at(limit + 999));
    assert!(
        j.is_in_progress(),
        "exactly repl-timeout is not yet too long"
    );
    tick(&mut j, &at(limit + 1000));
    assert_eq!(j.message, TIMED_OUT);
    // Connecting is bounded by the creation time too.
    let mut j = export_in(ExportState::Connecting);
    tick(&mut j, &at(limit + 1000));
    assert_eq!(j.message, TIMED_OUT);
    // Source in failover-granted: exempt (the pause bounds it).
    let mut j = export_in(ExportState::FailoverGranted);
    j.pause_until_ms = u64::MAX;
    tick(&mut j, &at(limit + 10_000));
    assert!(j.is_in_progress());
    // Target: any bytes count.
    let mut j = import_in(ImportState::ReceivingSnapshot);
    j.note_recv(limit);
    tick(&mut j, &at(limit + 1000));
    assert!(j.is_in_progress());
    let mut c = at(limit + 61_000);
    c.repl_timeout_s = 60;
    let fx = tick(&mut j, &c);
    assert_eq!((j.state, j.message.as_str()), (IM_CLEANING, TIMED_OUT));
    assert_eq!(fx, vec![Effect::CloseLink, Effect::CleanupKeys]);
    // Tracking jobs never time out.
    let mut j = Job::new_tracking(jname(), ranges(), T0);
    assert!(tick(&mut j, &at(T0 * 10)).is_empty());
}

#[test]
fn acks_skip_a_busy_export_link() {
    let mut j = export_in(ExportState::Replicating);
    let mut c = at(T0 + 1000);
    c.pending_write = true;
    assert!(tick(&mut j, &c).is_empty());
    c.pending_write = false;
    assert_eq!(tick(&mut j, &c), vec![Effect::Send(SyncMsg::Ack)]);
    assert_eq!(j.ack_sent_ms, T0 + 1000);
}

#[test]
fn link_loss() {
    let c = ctx();
    let mut j = export_in(ExportState::WaitingToSnapshot);
    j.remaining_repl_size = 5;
    on_link_closed(&mut j, &c);
    assert_eq!(
        (j.message.as_str(), j.remaining_repl_size),
        (CONN_LOST_TO_TARGET, 0)
    );
    let mut j = import_in(ImportState::FailoverRequested);
    on_link_closed(&mut j, &c);
    assert_eq!(j.message, CONN_LOST_TO_SOURCE);
    let mut j = Job::new_tracking(jname(), ranges(), T0);
    assert!(on_link_closed(&mut j, &c).is_empty());
}

#[test]
fn cancel_exports_only() {
    let c = ctx();
    let mut log = JobLog::new();
    log.push_new(import_in(ImportState::ReceivingSnapshot));
    assert_eq!(cancel_all(&mut log, &c), Err(NO_MIGRATIONS.into()));
    let mut ex = export_in(ExportState::FailoverPaused);
    ex.name = JobName([b'e'; 40]);
    ex.pause_until_ms = T0 + 100;
    ex.message = "old".into();
    log.push_new(ex);
    let mut done = export_in(ExportState::Failed);
    done.name = JobName([b'f'; 40]);
    log.push_new(done);
    let out = cancel_all(&mut log, &c).expect("ok");
    assert_eq!(
        out,
        vec![(
            JobName([b'e'; 40]),
            vec![Effect::ReleasePause, Effect::CloseLink]
        )]
    );
    let ex = log.get(&JobName([b'e'; 40])).expect("kept");
    assert_eq!(ex.state, State::Export(ExportState::Cancelled));
    assert_eq!(ex.message, "");
    assert_eq!(log.pause_until(), None);
    assert_eq!(
        log.get(&jname()).map(|j| j.state),
        Some(State::Import(ImportState::ReceivingSnapshot))
    );
    assert_eq!(cancel_all(&mut log, &c), Err(NO_MIGRATIONS.into()));
}

#[test]
fn fail_all_by_operation() {
    let c = ctx();
    let mut log = JobLog::new();
    log.push_new(import_in(ImportState::ReceivingSnapshot));
    let mut ex = export_in(ExportState::Replicating);
    ex.name = JobName([b'e'; 40]);
    log.push_new(ex);
    let out = fail_all(
        &mut log,
        Some(Operation::Import),
        FAILOVER_DURING_IMPORT,
        &c,
    );
    assert_eq!(out.len(), 1);
    assert!(log
        .get(&JobName([b'e'; 40]))
        .is_some_and(|j| j.is_in_progress()));
    let out = fail_all(&mut log, None, DATA_FLUSHED, &c);
    assert_eq!(out.len(), 1, "the import is already cleaning up");
}

#[test]
fn ownership_changes() {
    let c = ctx();
    let mut j = export_in(ExportState::Replicating);
    on_topology(&mut j, Some(OTHER), &ME, &c);
    assert_eq!(j.message, NOT_OWNED_BY_MYSELF);
    let mut j = export_in(ExportState::Replicating);
    on_topology(&mut j, None, &ME, &c);
    assert_eq!(j.message, NOT_OWNED_BY_MYSELF);
    // Import on a primary.
    let mut j = import_in(ImportState::ReceivingSnapshot);
    assert!(on_topology(&mut j, Some(SRC), &ME, &c).is_empty());
    on_topology(&mut j, Some(OTHER), &ME, &c);
    assert_eq!(
        (j.state, j.message.as_str()),
        (IM_CLEANING, NOT_OWNED_BY_SOURCE)
    );
    // Slots became ours: failed twice over in Valkey, no cleanup pass.
    let mut j = import_in(ImportState::ReceivingSnapshot);
    let fx = on_topology(&mut j, Some(ME), &ME, &c);
    assert_eq!(
        fx,
        vec![
            Effect::CloseLink,
            Effect::Unhide,
            finish_argv("FAILED", NOT_OWNED_BY_SOURCE)
        ]
    );
    assert_eq!(j.state, State::Import(ImportState::Failed));
    // Demoted: tracking-only, no cleanup.
    let mut j = import_in(ImportState::WaitingForPaused);
    let mut rc = ctx();
    rc.is_primary = false;
    assert_eq!(
        on_topology(&mut j, Some(SRC), &ME, &rc),
        vec![Effect::CloseLink]
    );
    assert_eq!(j.state, IM_TRACKING);
    assert!(j.is_tracking_only());
    assert!(on_topology(&mut j, Some(SRC), &ME, &rc).is_empty());
    // Tracking jobs on a primary are left for the promotion cleanup.
    let mut t = Job::new_tracking(jname(), ranges(), T0);
    assert!(on_topology(&mut t, Some(OTHER), &ME, &c).is_empty());
    // Log-wide, reading the slot table.
    let mut log = JobLog::new();
    log.push_new(export_in(ExportState::Replicating));
    let out = topology_all(&mut log, |_| Some(TGT), &ME, &c);
    assert_eq!(out.len(), 1);
    assert_eq!(
        log.iter().next().map(|j| j.state),
        Some(State::Export(ExportState::Success))
    );
}

#[test]
fn replica_finish() {
    // A FINISH from the primary: the tracking job settles, nothing propagates.
    let mut c = ctx();
    c.is_primary = false;
    let mut t = Job::new_tracking(jname(), ranges(), T0);
    let fx = finish(&mut t, Outcome::Failed, Some("boom"), &c);
    assert_eq!(fx, vec![Effect::CloseLink, Effect::Unhide]);
    assert_eq!(
        (t.state, t.message.as_str()),
        (State::Import(ImportState::Failed), "boom")
    );
}
