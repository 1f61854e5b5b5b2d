//! Atomic slot migration (ASM), wire-compatible with Valkey 9.1: the pure model.
//!
//! See `docs/design/atomic-slot-migration-valkey9.md` (cited as "spec §n"). Everything here
//! is plain data and functions: no I/O, no clock, no locks. The I/O layer owns the links,
//! the snapshot fork, the write pause and the keyspace; it feeds events in and executes the
//! [`machine::Effect`]s that come back.
//!
//! - [`job`]: jobs, states and the job log (GETSLOTMIGRATIONS' list);
//! - [`parse`]: MIGRATESLOTS, SYNCSLOTS ESTABLISH / FINISH and subcommand routing, with
//!   Valkey's exact error texts in its validation order;
//! - [`machine`]: state transitions for link messages, handshake steps, cron, cancel,
//!   ownership changes and failures;
//! - [`wire`]: the exact bytes of every node-to-node message;
//! - [`render`]: the GETSLOTMIGRATIONS reply.
//!
//! Error texts are stored without the `ERR ` prefix (it is not part of a job's message, and
//! ESTABLISH errors travel to the source inside one); [`err_reply`] makes the reply, the
//! way `commands.rs` spells its errors (`Reply::err("ERR ...")`).

pub mod job;
pub mod machine;
pub mod parse;
pub mod render;
pub mod wire;

pub use job::{
    format_ranges, ranges_owner, ExportState, ImportState, Job, JobLog, JobName, Operation,
    Outcome, SlotRange, SlotSet, State,
};
pub use machine::{Ctx, Effect, LinkMsg, Step};
pub use parse::{
    dispatch, parse_establish, parse_migrateslots, parse_ranges, parse_syncslots, Dispatch,
    Establish, Finish, Origin, StateView, SyncSlotsCmd, View,
};
pub use render::render;
pub use wire::{EstablishReply, SyncMsg};

use crate::reply::Reply;

/// `-ERR <text>`, as `commands.rs` replies.
pub fn err_reply(text: &str) -> Reply {
    Reply::err(format!("ERR {text}"))
}

// --- Command errors (spec §2.2, §2.4, §3.2, §5), without the `ERR ` prefix. ---

pub const SYNTAX_ERROR: &str = "syntax error";
pub const ONLY_PRIMARY: &str = "Slot migration can only be used on primary nodes.";
pub const MANUALLY_IMPORTED: &str = "Slots are being manually imported";
pub const MANUALLY_MIGRATED: &str = "Slots are being manually migrated";
pub const INVALID_SLOT: &str = "Invalid or out of range slot";
pub const NO_END_SLOT: &str = "No end slot for final slot range";
pub const SPAN_SHARDS: &str = "Requested slots span multiple shards";
pub const NO_RANGES: &str = "No slot ranges specified";
pub const NOT_SERVED: &str = "Slots are not served by this node.";
pub const MIGRATIONS_OVERLAP: &str = "Slot ranges in migrations overlap";
pub const TARGET_IS_MYSELF: &str = "Target node can not be this node.";
pub const UNKNOWN_SOURCE: &str = "Target node does not know the source node";
pub const SOURCE_IS_MYSELF: &str = "Source node is target node itself";
pub const ALREADY_IMPORTING: &str =
    "Slot is already being imported on the target by a different migration";
pub const OWNERSHIP_DISAGREES: &str = "Target node does not agree about current slot ownership";
pub const NO_MIGRATIONS: &str = "No migrations ongoing";
pub const NO_SUCH_JOB: &str = "No such slot migration job";

/// A loaded module has not opted in to ASM (checked first).
pub fn module_unsupported(module: &str) -> String {
    format!(
        "The module {module} does not support atomic slot migrations. Please ensure all \
         modules have declared support for atomic slot migration and try again"
    )
}
pub fn start_after_end(start: u16, end: u16) -> String {
    format!("Start slot number {start} is greater than end slot number {end}.")
}
pub fn no_node_served(slot: u16) -> String {
    format!("Slot {slot} has no node served.")
}
/// The new range is printed first, then the earlier one it overlaps.
pub fn range_overlap(new: SlotRange, prev: SlotRange) -> String {
    format!(
        "Slot range {}-{} overlaps with previous range {}-{}.",
        new.start, new.end, prev.start, prev.end
    )
}
pub fn already_migrating(slot: u16) -> String {
    format!("I am already migrating slot {slot}.")
}
pub fn invalid_node_name(raw: &[u8]) -> String {
    format!("Invalid node name: {}", String::from_utf8_lossy(raw))
}
pub fn unknown_node_name(raw: &[u8]) -> String {
    format!("Unknown node name: {}", String::from_utf8_lossy(raw))
}
/// What a normal client gets for a link-only subcommand (`msg` named as Valkey spells it).
pub fn only_for_migration_clients(msg: SyncMsg) -> String {
    format!(
        "CLUSTER SYNCSLOTS {} should only be used by slot migration clients",
        msg.as_str()
    )
}

// --- Job messages (spec §3.1, §3.4-§3.7, §5, §6): GETSLOTMIGRATIONS `message`. ---

pub const UNEXPECTED_TRANSITION: &str = "Unexpected state machine transition";
pub const UNKNOWN_SUBCOMMAND: &str = "Unknown SYNCSLOTS subcommand used";
pub const TIMED_OUT: &str = "Timed out after too long with no interaction";
pub const CONN_LOST_TO_TARGET: &str = "Connection lost to target. Check CLUSTER \
     GETSLOTMIGRATIONS on the target node for more information.";
pub const CONN_LOST_TO_SOURCE: &str = "Connection lost to source. Check CLUSTER \
     GETSLOTMIGRATIONS on the source node for more information.";
/// Source, failover-paused, pause expired.
pub const PAUSE_TIMED_OUT: &str = "Timed out before streaming completed";
/// Source, REQUEST-FAILOVER after the pause ended.
pub const UNPAUSED_BEFORE_FAILOVER: &str = "Unpaused before failover completed";
/// Source, failover-granted, pause expired before the new owner was seen.
pub const UNPAUSED_BEFORE_MIGRATION: &str =
    "Unpaused before migration completed (migration may have succeeded with lost writes)";
pub const SNAPSHOT_FAILED: &str = "Failed to perform snapshot";
pub const SNAPSHOT_START_FAILED: &str = "Failed to start snapshot";
pub const IMPORT_OOM: &str = "Ran out of memory (OOM) during slot import";
pub const DATA_FLUSHED: &str = "Data was flushed";
pub const NOT_OWNED_BY_MYSELF: &str = "Slots are no longer owned by myself";
pub const NOT_OWNED_BY_SOURCE: &str = "Slots are no longer owned by source node";
pub const ASSIGNED_TO_MYSELF: &str = "Slots were unexpectedly assigned to myself during import";
pub const FAILOVER_DURING_IMPORT: &str = "A failover occurred during slot import";
pub const FULL_RESYNC: &str = "Full resynchronization occurred";
pub const NEW_RDB_LOADED: &str = "A new RDB is being loaded";
pub const PROCESS_RESTARTED: &str = "Process restarted";
pub const COMMAND_FAILED: &str =
    "Failed to process command during slot migration. Check logs for more information";
pub const MODULE_UNKNOWN_COMMAND: &str = "A module replicated an unknown command";
pub const MODULE_CROSS_SLOT: &str = "A module replicated a cross-slot command";
pub const AUTH_NO_REPLY: &str = "Target node did not respond to AUTH command";
/// The connect error when the target was forgotten (9.0.5+/9.1).
pub const TARGET_NOT_FOUND: &str = "target node not found";
pub const ESTABLISH_TOO_LARGE: &str = "Response to establish job is larger than buffer limit";
/// Followed by the target's whole reply line, CRLF included.
pub const HANDSHAKE_ERROR_PREFIX: &str = "Received error during handshake to target: ";
/// The protocol error for inline commands on an import link.
pub const INLINE_ON_IMPORT: &str = "Import using the inline protocol. Desync?";

/// `Unable to connect to target node: <error>`.
pub fn connect_failed(err: &str) -> String {
    format!("Unable to connect to target node: {err}")
}
/// `Failed to AUTH to target node: <reply line>`.
pub fn auth_failed(line: &str) -> String {
    format!("Failed to AUTH to target node: {line}")
}
/// Writing AUTH failed.
pub fn auth_send_failed(err: &str) -> String {
    format!("Failed to send AUTH command to target node: {err}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_carry_the_err_prefix() {
        assert_eq!(
            err_reply(SYNTAX_ERROR),
            Reply::Error("ERR syntax error".into())
        );
        assert_eq!(
            only_for_migration_clients(SyncMsg::SnapshotEof),
            "CLUSTER SYNCSLOTS SNAPSHOT-EOF should only be used by slot migration clients"
        );
        assert_eq!(
            module_unsupported("m"),
            "The module m does not support atomic slot migrations. Please ensure all modules \
             have declared support for atomic slot migration and try again"
        );
        assert_eq!(
            CONN_LOST_TO_TARGET,
            "Connection lost to target. Check CLUSTER GETSLOTMIGRATIONS on the target node for more information."
        );
        assert_eq!(
            range_overlap(
                SlotRange { start: 5, end: 6 },
                SlotRange { start: 1, end: 5 }
            ),
            "Slot range 5-6 overlaps with previous range 1-5."
        );
    }
}
