//! Parsing and validation of `CLUSTER MIGRATESLOTS` (spec §2.2) and `CLUSTER SYNCSLOTS`
//! (§3.2, §5), with Valkey's exact error texts in Valkey's order: validation is interleaved
//! with parsing there (an unknown SOURCE is reported before a bad SLOTSRANGE that follows
//! it), so the order of checks here is part of the wire behaviour.
//!
//! Errors are the text after `ERR ` (see [`super::err_reply`]). Tokens are never trusted:
//! no function here panics on any input.

use super::job::{JobLog, JobName, Outcome, SlotRange, SlotSet};
use super::wire::SyncMsg;
use super::*;
use crate::msg::{Name, SLOTS};
use crate::state::{parse_name, ClusterState};

/// What validation needs to know about this node, read-only.
pub trait View {
    fn myself(&self) -> Name;
    fn is_primary(&self) -> bool;
    /// The primary serving the slot, if any.
    fn owner(&self, slot: u16) -> Option<Name>;
    /// The node is in our node table.
    fn knows(&self, node: &Name) -> bool;
    /// Some slot is in legacy `SETSLOT ... IMPORTING`.
    fn manual_importing(&self) -> bool;
    /// Some slot is in legacy `SETSLOT ... MIGRATING`.
    fn manual_migrating(&self) -> bool;
    /// A loaded module that has not opted in to ASM (Tessera has none).
    fn module_without_asm(&self) -> Option<String> {
        None
    }
    /// The slot is in an unfinished export job.
    fn exporting_slot(&self, slot: u16) -> bool;
    /// The slot is in an unfinished import job (tracking ones included).
    fn importing_slot(&self, slot: u16) -> bool;
}

/// [`View`] over the cluster state and the job log, with the slot sets precomputed so the
/// per-slot checks stay cheap.
pub struct StateView<'a> {
    pub state: &'a ClusterState,
    exporting: SlotSet,
    importing: SlotSet,
}

impl<'a> StateView<'a> {
    pub fn new(state: &'a ClusterState, log: &JobLog) -> StateView<'a> {
        StateView {
            state,
            exporting: log.exporting_slots(),
            importing: log.hidden_slots(),
        }
    }
}

impl View for StateView<'_> {
    fn myself(&self) -> Name {
        self.state.myself
    }
    fn is_primary(&self) -> bool {
        self.state.me().is_master()
    }
    fn owner(&self, slot: u16) -> Option<Name> {
        self.state.slots.get(slot as usize).copied().flatten()
    }
    fn knows(&self, node: &Name) -> bool {
        self.state.nodes.contains_key(node)
    }
    fn manual_importing(&self) -> bool {
        self.state.importing.iter().next().is_some()
    }
    fn manual_migrating(&self) -> bool {
        self.state.migrating.iter().next().is_some()
    }
    fn exporting_slot(&self, slot: u16) -> bool {
        self.exporting.contains(slot)
    }
    fn importing_slot(&self, slot: u16) -> bool {
        self.importing.contains(slot)
    }
}

/// Valkey's `string2ll`: optional `-`, no `+`, no leading zeros, no spaces, fits an i64.
fn parse_int(tok: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(tok).ok()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || s == "-0"
    {
        return None;
    }
    s.parse().ok()
}

fn slot_arg(tok: &[u8]) -> Result<u16, String> {
    match parse_int(tok) {
        Some(s) if (0..SLOTS as i64).contains(&s) => Ok(s as u16),
        _ => Err(INVALID_SLOT.to_string()),
    }
}

fn is(tok: &[u8], word: &str) -> bool {
    tok.eq_ignore_ascii_case(word.as_bytes())
}

/// The modules / primary / legacy-migration checks that come before any argument.
fn check_can_start(view: &dyn View) -> Result<(), String> {
    if let Some(m) = view.module_without_asm() {
        return Err(module_unsupported(&m));
    }
    if !view.is_primary() {
        return Err(ONLY_PRIMARY.to_string());
    }
    if view.manual_importing() {
        return Err(MANUALLY_IMPORTED.to_string());
    }
    if view.manual_migrating() {
        return Err(MANUALLY_MIGRATED.to_string());
    }
    Ok(())
}

/// Parsed slot ranges of one SLOTSRANGE list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ranges {
    /// In the given order.
    pub ranges: Vec<SlotRange>,
    /// The node serving all of them.
    pub owner: Name,
    /// Tokens used: the first token that is not an integer (or the end).
    pub next: usize,
}

/// Reads `<start> <end>` pairs until the first token that is not an integer.
///
/// Per range, in order: `Invalid or out of range slot` (start), `No end slot for final slot
/// range`, `Invalid or out of range slot` (end, any non-slot), `Start slot number ...`,
/// then per slot `Slot N has no node served.` / `Requested slots span multiple shards`
/// (one owner for the whole list), then `Slot range ... overlaps with previous range ...`;
/// at the end `No slot ranges specified`.
pub fn parse_ranges(args: &[&[u8]], view: &dyn View) -> Result<Ranges, String> {
    let mut ranges: Vec<SlotRange> = Vec::new();
    let mut covered = SlotSet::new();
    let mut owner: Option<Name> = None;
    let mut i = 0;
    while i < args.len() {
        if parse_int(args[i]).is_none() {
            break;
        }
        let start = slot_arg(args[i])?;
        let end_tok = args.get(i + 1).ok_or_else(|| NO_END_SLOT.to_string())?;
        let end = slot_arg(end_tok)?;
        if start > end {
            return Err(start_after_end(start, end));
        }
        for s in start..=end {
            let o = view.owner(s).ok_or_else(|| no_node_served(s))?;
            match owner {
                None => owner = Some(o),
                Some(prev) if prev != o => return Err(SPAN_SHARDS.to_string()),
                Some(_) => {}
            }
        }
        let new = SlotRange { start, end };
        if covered.intersects(new) {
            // The first earlier range (in list order) it overlaps is the one reported.
            if let Some(prev) = ranges.iter().find(|p| new.overlaps(**p)) {
                return Err(range_overlap(new, *prev));
            }
        }
        covered.insert_range(new);
        ranges.push(new);
        i += 2;
    }
    match owner {
        Some(owner) if !ranges.is_empty() => Ok(Ranges {
            ranges,
            owner,
            next: i,
        }),
        _ => Err(NO_RANGES.to_string()),
    }
}

/// `CLUSTER MIGRATESLOTS <args>` (`args` after MIGRATESLOTS): one `(ranges, target)` per
/// `SLOTSRANGE ... NODE <id>` group, in command order, or the first error (all-or-nothing).
/// The dispatcher's arity check (`argc > 3`) is the caller's.
pub fn parse_migrateslots(
    args: &[&[u8]],
    view: &dyn View,
) -> Result<Vec<(Vec<SlotRange>, Name)>, String> {
    check_can_start(view)?;
    let myself = view.myself();
    let mut groups: Vec<(Vec<SlotRange>, Name)> = Vec::new();
    let mut taken = SlotSet::new();
    let mut i = 0;
    while i < args.len() {
        if !is(args[i], "SLOTSRANGE") {
            return Err(SYNTAX_ERROR.to_string());
        }
        i += 1;
        let parsed = parse_ranges(args.get(i..).unwrap_or_default(), view)?;
        i += parsed.next;
        if parsed.owner != myself {
            return Err(NOT_SERVED.to_string());
        }
        for r in &parsed.ranges {
            if let Some(s) = r.slots().find(|s| view.exporting_slot(*s)) {
                return Err(already_migrating(s));
            }
        }
        if parsed.ranges.iter().any(|r| taken.intersects(*r)) {
            return Err(MIGRATIONS_OVERLAP.to_string());
        }
        if i + 1 >= args.len() || !is(args[i], "NODE") {
            return Err(SYNTAX_ERROR.to_string());
        }
        let id = args[i + 1];
        i += 2;
        if id.len() != crate::msg::NAME_LEN {
            return Err(invalid_node_name(id));
        }
        let target = parse_name(id)
            .filter(|n| view.knows(n))
            .ok_or_else(|| unknown_node_name(id))?;
        if target == myself {
            return Err(TARGET_IS_MYSELF.to_string());
        }
        for r in &parsed.ranges {
            taken.insert_range(*r);
        }
        groups.push((parsed.ranges, target));
    }
    Ok(groups)
}

/// An accepted ESTABLISH.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Establish {
    pub name: JobName,
    /// `None` for a tracking-only ESTABLISH (SOURCE is then not looked at).
    pub source: Option<Name>,
    pub ranges: Vec<SlotRange>,
}

/// `CLUSTER SYNCSLOTS ESTABLISH <args>` (`args` after ESTABLISH) on the target.
///
/// `tracking_only`: the sender is our primary or the AOF loader. Then the primary/legacy
/// checks and the SOURCE lookup are skipped (and SOURCE may repeat, as in Valkey, which only
/// notices a second SOURCE once one was looked up) but ranges, ownership of each slot and
/// "already being imported" are still checked against this node's view.
///
/// Fields in any order; a duplicate or unknown field, a SOURCE/NAME value that is not 40
/// bytes, or a missing NAME/SLOTSRANGE (SOURCE, unless tracking) is `syntax error`.
pub fn parse_establish(
    args: &[&[u8]],
    view: &dyn View,
    tracking_only: bool,
) -> Result<Establish, String> {
    if !tracking_only {
        check_can_start(view)?;
    }
    let syntax = || SYNTAX_ERROR.to_string();
    let mut source: Option<Name> = None;
    let mut name: Option<JobName> = None;
    let mut ranges: Option<Ranges> = None;
    let mut i = 0;
    while i < args.len() {
        let tok = args[i];
        let value = args.get(i + 1).copied();
        if is(tok, "SOURCE") {
            let id = value.and_then(parse_name);
            let Some(id) = id.filter(|_| source.is_none()) else {
                return Err(syntax());
            };
            i += 2;
            if tracking_only {
                continue;
            }
            if !view.knows(&id) {
                return Err(UNKNOWN_SOURCE.to_string());
            }
            if id == view.myself() {
                return Err(SOURCE_IS_MYSELF.to_string());
            }
            source = Some(id);
        } else if is(tok, "NAME") {
            let n = value.and_then(JobName::from_bytes);
            let Some(n) = n.filter(|_| name.is_none()) else {
                return Err(syntax());
            };
            name = Some(n);
            i += 2;
        } else if is(tok, "SLOTSRANGE") {
            if ranges.is_some() {
                return Err(syntax());
            }
            let parsed = parse_ranges(args.get(i + 1..).unwrap_or_default(), view)?;
            for r in &parsed.ranges {
                if r.slots().any(|s| view.importing_slot(s)) {
                    return Err(ALREADY_IMPORTING.to_string());
                }
            }
            i += 1 + parsed.next;
            ranges = Some(parsed);
        } else {
            return Err(syntax());
        }
    }
    let (Some(name), Some(ranges)) = (name, ranges) else {
        return Err(syntax());
    };
    if !tracking_only && source.is_none() {
        return Err(syntax());
    }
    if let Some(src) = source {
        if src != ranges.owner {
            return Err(OWNERSHIP_DISAGREES.to_string());
        }
    }
    Ok(Establish {
        name,
        source,
        ranges: ranges.ranges,
    })
}

/// A parsed `SYNCSLOTS FINISH STATE <s> NAME <n> [MESSAGE <m>]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finish {
    pub name: JobName,
    /// `None`: a STATE other than SUCCESS/FAILED. Valkey rejects it (`syntax error`) only
    /// after finding the job, so an unknown job wins; see [`Finish::resolve`].
    pub state: Option<Outcome>,
    pub message: Option<Vec<u8>>,
}

impl Finish {
    /// Fields in any order; duplicates, unknown fields, a missing value, a NAME that is not
    /// 40 bytes, or a missing STATE/NAME are `syntax error`.
    pub fn parse(args: &[&[u8]]) -> Result<Finish, String> {
        let syntax = || SYNTAX_ERROR.to_string();
        let mut state: Option<&[u8]> = None;
        let mut name: Option<JobName> = None;
        let mut message: Option<&[u8]> = None;
        let mut i = 0;
        while i < args.len() {
            let value = args.get(i + 1).copied();
            if is(args[i], "STATE") {
                if state.is_some() {
                    return Err(syntax());
                }
                state = Some(value.ok_or_else(syntax)?);
            } else if is(args[i], "NAME") {
                let n = value.and_then(JobName::from_bytes);
                name = Some(n.filter(|_| name.is_none()).ok_or_else(syntax)?);
            } else if is(args[i], "MESSAGE") {
                if message.is_some() {
                    return Err(syntax());
                }
                message = Some(value.ok_or_else(syntax)?);
            } else {
                return Err(syntax());
            }
            i += 2;
        }
        let (Some(state), Some(name)) = (state, name) else {
            return Err(syntax());
        };
        let state = if is(state, "SUCCESS") {
            Some(Outcome::Success)
        } else if is(state, "FAILED") {
            Some(Outcome::Failed)
        } else {
            None
        };
        Ok(Finish {
            name,
            state,
            message: message.map(|m| m.to_vec()),
        })
    }

    /// Valkey's order after parsing: `No such slot migration job`, then the STATE value.
    /// (Valkey has already written `+OK` before either error; replies on the replication
    /// link and the AOF are dropped anyway.)
    pub fn resolve(&self, log: &JobLog) -> Result<Outcome, String> {
        if log.get(&self.name).is_none() {
            return Err(NO_SUCH_JOB.to_string());
        }
        self.state.ok_or_else(|| SYNTAX_ERROR.to_string())
    }
}

/// A `CLUSTER SYNCSLOTS` subcommand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyncSlotsCmd {
    /// Validated against the node by [`parse_establish`] (the arguments after ESTABLISH).
    Establish,
    Finish(Finish),
    /// ACK, SNAPSHOT-EOF, REQUEST-PAUSE, PAUSED, REQUEST-FAILOVER, FAILOVER-GRANTED.
    Msg(SyncMsg),
    /// Reserved; arguments ignored, nothing happens.
    Capa,
}

/// `args` after SYNCSLOTS (`args[0]` is the subcommand, case-insensitive). An unknown
/// subcommand, a missing one, or a bad FINISH is `syntax error`.
pub fn parse_syncslots(args: &[&[u8]]) -> Result<SyncSlotsCmd, String> {
    let Some(sub) = args.first() else {
        return Err(SYNTAX_ERROR.to_string());
    };
    let rest = args.get(1..).unwrap_or_default();
    if is(sub, "ESTABLISH") {
        Ok(SyncSlotsCmd::Establish)
    } else if is(sub, "FINISH") {
        Finish::parse(rest).map(SyncSlotsCmd::Finish)
    } else if is(sub, "CAPA") {
        Ok(SyncSlotsCmd::Capa)
    } else {
        SyncMsg::parse(sub)
            .map(SyncSlotsCmd::Msg)
            .ok_or_else(|| SYNTAX_ERROR.to_string())
    }
}

/// Who sent a SYNCSLOTS command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// An ordinary client (including a source's connection before ESTABLISH succeeds).
    Client,
    /// Our primary's replication link, or the AOF loader: ESTABLISH makes a tracking job.
    Replication,
    /// An established migration link (export client on the source, import client on the
    /// target).
    Migration,
}

/// What to do with a SYNCSLOTS command, by origin (Valkey's dispatcher).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// Run [`parse_establish`] on `args[1..]` with this `tracking_only`.
    Establish { tracking_only: bool },
    /// Run [`Finish::resolve`], then finish the job (`machine::finish`).
    Finish(Finish),
    /// Feed the link's job (`machine::on_message`).
    Link(super::machine::LinkMsg),
    /// No effect and no reply: CAPA, or a link-only message on the replication link
    /// (replicas ignore everything but ESTABLISH/FINISH from their primary).
    Nothing,
    /// Reply `-ERR <text>`.
    Error(String),
}

/// Routes `CLUSTER SYNCSLOTS <args>` (`args[0]` = subcommand).
///
/// On a migration link, ESTABLISH and FINISH (which Valkey never sends there) fail the job
/// as an unexpected transition, and an unknown subcommand fails it with `Unknown SYNCSLOTS
/// subcommand used`.
pub fn dispatch(args: &[&[u8]], origin: Origin) -> Dispatch {
    use super::machine::LinkMsg;
    let Some(sub) = args.first() else {
        return Dispatch::Error(SYNTAX_ERROR.to_string());
    };
    let is_establish = is(sub, "ESTABLISH");
    let is_finish = is(sub, "FINISH");
    if origin == Origin::Migration {
        return Dispatch::Link(if is_establish || is_finish {
            LinkMsg::Misplaced
        } else if is(sub, "CAPA") {
            LinkMsg::Capa
        } else {
            SyncMsg::parse(sub).map_or(LinkMsg::Unknown, LinkMsg::Sync)
        });
    }
    if is_establish {
        return Dispatch::Establish {
            tracking_only: origin == Origin::Replication,
        };
    }
    if is_finish {
        return match Finish::parse(args.get(1..).unwrap_or_default()) {
            Ok(f) => Dispatch::Finish(f),
            Err(e) => Dispatch::Error(e),
        };
    }
    if origin == Origin::Replication {
        return Dispatch::Nothing;
    }
    if is(sub, "CAPA") {
        return Dispatch::Nothing;
    }
    match SyncMsg::parse(sub) {
        Some(m) => Dispatch::Error(only_for_migration_clients(m)),
        None => Dispatch::Error(SYNTAX_ERROR.to_string()),
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
pub(crate) mod tests;
