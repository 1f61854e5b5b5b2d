//! Command table and dispatcher.
//!
//! # Registering a command family
//! Each family is a file `cmd/<family>.rs` exposing `pub fn commands() -> Vec<CommandSpec>`
//! (see `strings.rs` for the pattern). [`all_commands`] concatenates them; add a family by
//! declaring its `mod` and one `v.extend(<family>::commands());` line at the marked spot.
//! The families of the layers above (script, repl, persist, cluster glue) live in their own
//! layer (`<subsystem>/commands.rs`) and reach [`all_commands`] as [`UpperFamilies`], which
//! the top of the crate assembles (`crate::all_commands`) and installs ([`install_table`]).
//! Handlers take `(&mut Ctx, &[&[u8]])` (arguments borrowed from the connection's read
//! buffer: anything kept beyond the command is copied, see [`owned_args`]), read and write
//! keys through `ctx.ks` (which holds the locks of the keys the command's `KeyPos` names)
//! and write one reply into `ctx.out`, or return a [`CmdError`].
//!
//! # Effects
//! A write handler reports everything it did besides its reply through its context, and
//! nothing else derives it from the command's name: its keyspace events in Redis's order
//! (`ctx.notify(class, event, key)`; a key's creation fires `new` by itself), what replicas
//! and the AOF get when it is not the command as received (`ctx.propagate_as(argv)`), how
//! many changes it made (`ctx.changed_by(n)`, `ctx.unchanged()` for a write that changed
//! nothing). [`run_locked`] publishes, counts and propagates them after the handler
//! succeeded (see [`ctx::Effects`]); `cmd/fx_tests.rs` checks them per family.

pub mod ctx;
#[cfg(test)]
mod fx_tests;
pub mod key_effects;
pub mod propagation;
pub mod spec;

pub mod acl;
mod acl_check;
mod bitmap;
mod client;
pub use client::may_replicate;
mod command;
mod config_cmd;
mod connection;
pub mod info;
mod keys;
mod latency;
mod lolwut;
mod migrate;
mod pubsub;
mod server_cmds;
mod sort;
mod strings;
pub mod transaction;
// ---- TYPES-HELPER: declare collection families here (hash, list, set, zset, hll) ----
mod geo;
mod hash;
mod hll;
mod list;
mod set;
pub mod stream;
mod stream_claim;
mod stream_group;
mod stream_info;
mod zset;
// ---- end of types-helper mod declarations ----

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

pub use ctx::{Ctx, KeyView};
pub use spec::{flags, CommandSpec, Handler, KeyPos};

use crate::blocking::WaitHandle;
use crate::config::{Config, Settings};
use crate::resp::Out;
use crate::server::stats::CmdTimer;
use crate::server::{ClientState, Server};

/// The command families of the layers above this one, which this layer cannot name: the
/// top of the crate fills them in (`crate::all_commands`).
#[derive(Default)]
pub struct UpperFamilies {
    /// CLUSTER, READONLY, READWRITE, ASKING (cluster glue).
    pub cluster: Vec<CommandSpec>,
    /// SAVE, BGSAVE, BGREWRITEAOF, LASTSAVE (persist).
    pub persist: Vec<CommandSpec>,
    /// REPLICAOF, PSYNC, WAIT, ... (repl).
    pub repl: Vec<CommandSpec>,
    /// EVAL*, SCRIPT, FCALL*, FUNCTION (script).
    pub script: Vec<CommandSpec>,
}

/// A hook that reads a command's arguments (SHUTDOWN's modifiers).
pub type ArgsHook = fn(&Server, &[&[u8]]);

/// DEBUG subcommands of an upper layer: None when `args[1]` is not one of them.
pub type DebugHook = fn(&mut Ctx<'_>, &[&[u8]]) -> Option<CmdResult>;
/// See [`UpperHooks::script_writes`].
pub type ScriptWritesHook = fn(&Server, &CommandSpec, &[&[u8]]) -> Option<bool>;

/// What the layers above hand this one besides their families, as plain functions (this
/// layer cannot name them): the INFO sections they keep and SHUTDOWN's steps. Installed with the table; a table
/// built without one ([`table`] before [`install_table`]) leaves those sections empty.
#[derive(Default, Clone, Copy)]
pub struct UpperHooks {
    /// INFO's `# Persistence` section (persist).
    pub info_persistence: Option<fn(&Server) -> String>,
    /// INFO's `# Replication` section (repl).
    pub info_replication: Option<fn(&Server) -> String>,
    /// The replication lines at the end of INFO's `# Stats` section (repl).
    pub info_repl_stats: Option<fn(&Server) -> String>,
    /// INFO's `# Cluster` section (cluster glue).
    pub info_cluster: Option<fn(&Server, &mut String)>,
    /// Records SHUTDOWN's arguments (NOSAVE / SAVE / NOW / FAILOVER) for the exit (persist).
    pub shutdown_note_args: Option<ArgsHook>,
    /// The final AOF flush and RDB save of a SHUTDOWN that exits on the spot (persist).
    pub shutdown_now: Option<fn(&Server)>,
    /// DEBUG's subcommands of the layers above (persist's RELOAD and LOADAOF, repl's
    /// CHANGE-REPL-ID): Some(result) when `args[1]` is one of them.
    pub debug_upper: Option<DebugHook>,
    /// FLUSHALL's foreground save when `save` points are set (persist), run by `execute`
    /// once the command has let go of the keyspace (the save takes the stripes itself).
    pub save_after_flushall: Option<fn(&Server)>,
    /// A script command's write flag as its script declares it, None when it declares none
    /// (script): what CLIENT PAUSE WRITE holds.
    pub script_writes: Option<ScriptWritesHook>,
    /// After a CONFIG SET took effect (cluster glue): the cluster state takes its cluster-*
    /// settings at once, so the bus's next message carries them (a new
    /// cluster-announce-hostname in the very next PONG, as Redis's config apply does).
    pub config_set: Option<fn(&Server)>,
}

/// Every command family's table entries: this layer's own with `upper` spliced in where those
/// families always stood (the table's order is COMMAND's order).
pub fn all_commands(upper: UpperFamilies) -> Vec<CommandSpec> {
    let mut v = Vec::new();
    v.extend(connection::commands());
    v.extend(server_cmds::commands());
    v.extend(client::commands());
    v.extend(command::commands());
    v.extend(config_cmd::commands());
    v.extend(acl::commands());
    v.extend(latency::commands());
    v.extend(lolwut::commands());
    v.extend(info::commands());
    v.extend(keys::commands());
    v.extend(strings::commands());
    v.extend(bitmap::commands());
    v.extend(transaction::commands());
    v.extend(pubsub::commands());
    v.extend(upper.cluster);
    v.extend(migrate::commands());
    v.extend(upper.persist);
    v.extend(upper.repl);
    v.extend(sort::commands());
    v.extend(upper.script);
    // ---- TYPES-HELPER: register collection families here, e.g. v.extend(hash::commands()); ----
    v.extend(hash::commands());
    v.extend(list::commands());
    v.extend(set::commands());
    v.extend(zset::commands());
    v.extend(hll::commands());
    v.extend(geo::commands());
    v.extend(stream::commands());
    v.extend(stream_group::commands());
    v.extend(stream_claim::commands());
    v.extend(stream_info::commands());
    // ---- end of types-helper registrations ----
    v
}

/// A command error; the dispatcher writes it as `-<message>`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CmdError {
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    #[error("ERR syntax error")]
    Syntax,
    #[error("ERR value is not an integer or out of range")]
    NotInt,
    #[error("ERR value is not a valid float")]
    NotFloat,
    #[error("ERR increment or decrement would overflow")]
    Overflow,
    #[error("ERR no such key")]
    NoSuchKey,
    #[error("ERR index out of range")]
    OutOfRange,
    #[error("ERR timeout is not a float or out of range")]
    Timeout,
    #[error("ERR timeout is negative")]
    TimeoutNegative,
    /// The full message, e.g. "ERR invalid expire time in 'set' command".
    #[error("{0}")]
    Msg(Cow<'static, str>),
    /// An error already counted in INFO errorstats: a script re-raising the error a command
    /// it called returned (Redis's `ERR_REPLY_FLAG_NO_STATS_UPDATE`). Written like `Msg`;
    /// the dispatcher counts only the command's `failed_calls`, not the error again.
    #[error("{0}")]
    Counted(Cow<'static, str>),
}

impl CmdError {
    pub fn msg(s: impl Into<Cow<'static, str>>) -> Self {
        CmdError::Msg(s.into())
    }
}

pub type CmdResult = Result<(), CmdError>;

/// Parses an integer argument like Redis's `getLongLongFromObject` (strict).
pub fn arg_i64(b: &[u8]) -> Result<i64, CmdError> {
    crate::types::parse_i64_strict(b).ok_or(CmdError::NotInt)
}

/// Parses a float argument like Redis's `getLongDoubleFromObject`/`strtod`.
pub fn arg_f64(b: &[u8]) -> Result<f64, CmdError> {
    crate::types::parse_f64(b).ok_or(CmdError::NotFloat)
}

/// Parses a blocking timeout in seconds (float) into ms; 0 = forever.
pub fn arg_timeout(b: &[u8]) -> Result<u64, CmdError> {
    let t = crate::types::parse_f64(b).ok_or(CmdError::Timeout)?;
    if t < 0.0 {
        return Err(CmdError::TimeoutNegative);
    }
    if !t.is_finite() || t * 1000.0 > i64::MAX as f64 / 2.0 {
        return Err(CmdError::Timeout);
    }
    Ok((t * 1000.0).ceil() as u64)
}

/// ASCII-case-insensitive compare of an argument with a lower-case word.
#[inline]
pub fn eq_ic(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

const LAST_NAME_MAX: usize = 16;

thread_local! {
    /// A per-thread lookup cache, not a contract (a miss just looks the name up):
    /// (name as sent, its length, command index) of the last successful lookup; the length
    /// starts out impossible so nothing matches before the first lookup.
    static LAST_NAME: std::cell::Cell<([u8; LAST_NAME_MAX], u8, u16)> =
        const { std::cell::Cell::new(([0; LAST_NAME_MAX], u8::MAX, 0)) };
}

/// The command table, built once.
pub struct CommandTable {
    pub cmds: Vec<CommandSpec>,
    /// The upper layers' pieces that commands of this layer call (INFO sections, SHUTDOWN).
    pub hooks: UpperHooks,
    index: hashbrown::HashMap<&'static str, usize>,
}

/// True in cluster mode. Read from the server's state (the cluster node it holds), so
/// handlers need not call the cluster glue, which sits above the command layer.
#[inline]
pub fn cluster_mode(srv: &Server) -> bool {
    srv.cluster.get().is_some()
}

static TABLE: OnceLock<CommandTable> = OnceLock::new();

/// Installs the command table: every family (`crate::all_commands`, assembled at the top
/// where every layer is visible) and the config's `rename-command` lines. Must run before the
/// first [`table`] call (the server start does it first thing); a second call changes nothing.
pub fn install_table(cmds: Vec<CommandSpec>, hooks: UpperHooks, renames: &[(String, String)]) {
    if TABLE.set(CommandTable::new(cmds, hooks, renames)).is_err() && !renames.is_empty() {
        tracing::warn!("the command table was installed twice in one process; the first stays");
    }
}

/// The command table. Without [`install_table`] (a library user that never started a server)
/// it holds this layer's own families only; unit tests get every family.
pub fn table() -> &'static CommandTable {
    TABLE.get_or_init(|| {
        #[cfg(test)]
        let (cmds, hooks) = (test_table::every_family(), test_table::hooks());
        #[cfg(not(test))]
        let (cmds, hooks) = (
            all_commands(UpperFamilies::default()),
            UpperHooks::default(),
        );
        CommandTable::new(cmds, hooks, &[])
    })
}

/// Unit tests drive commands in-process without a server start: they see the whole table.
#[cfg(test)]
mod test_table {
    pub(super) fn every_family() -> Vec<super::CommandSpec> {
        crate::all_commands()
    }

    pub(super) fn hooks() -> super::UpperHooks {
        crate::upper_hooks()
    }
}

impl CommandTable {
    fn new(
        cmds: Vec<CommandSpec>,
        hooks: UpperHooks,
        renames: &[(String, String)],
    ) -> CommandTable {
        let mut index: hashbrown::HashMap<&'static str, usize> =
            cmds.iter().enumerate().map(|(i, c)| (c.name, i)).collect();
        // rename-command: the command answers to its new name only ("" removes it), for
        // clients and scripts alike, as in Redis.
        for (old, new) in renames {
            if let Some(i) = index.remove(old.as_str()) {
                if !new.is_empty() {
                    index.insert(Box::leak(new.clone().into_boxed_str()), i);
                }
            }
        }
        CommandTable { cmds, hooks, index }
    }

    /// Case-insensitive lookup without allocating. The last name found on this thread is
    /// remembered as sent: a pipeline repeats one command, and comparing up to 16 bytes is
    /// cheaper than lower-casing, hashing and probing (~4% of a -P 16 LPUSH's CPU).
    #[inline]
    pub fn get(&self, name: &[u8]) -> Option<&CommandSpec> {
        if name.len() <= LAST_NAME_MAX {
            let (b, len, i) = LAST_NAME.get();
            // An OR of XORs over at most 16 bytes, unrolled, rather than a slice compare
            // (a call to memcmp for 3 bytes: 1.5% of a -P 16 SET's CPU).
            if len as usize == name.len()
                && b.iter().zip(name).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
            {
                return self.cmds.get(i as usize);
            }
        }
        let i = self.lookup(name)?;
        if name.len() <= LAST_NAME_MAX {
            let mut b = [0u8; LAST_NAME_MAX];
            b[..name.len()].copy_from_slice(name);
            LAST_NAME.set((b, name.len() as u8, i as u16));
        }
        self.cmds.get(i)
    }

    fn lookup(&self, name: &[u8]) -> Option<usize> {
        let mut buf = [0u8; 32];
        if name.len() > buf.len() {
            // Only a rename-command target can be this long (often a 40-char secret).
            let s = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
            return self.index.get(s.as_str()).copied();
        }
        for (d, s) in buf.iter_mut().zip(name) {
            *d = s.to_ascii_lowercase();
        }
        let s = std::str::from_utf8(&buf[..name.len()]).ok()?;
        self.index.get(s).copied()
    }

    /// Resolves a subcommand (CLIENT SETNAME) if the command has any.
    pub fn resolve<'t>(&'t self, args: &[&[u8]]) -> Result<&'t CommandSpec, CmdError> {
        let Some(c) = self.get(args[0]) else {
            return Err(unknown_command(args));
        };
        if c.subcommands.is_empty() || args.len() < 2 {
            return Ok(c);
        }
        match c
            .subcommands
            .iter()
            .find(|s| args[1].eq_ignore_ascii_case(s.name.as_bytes()))
        {
            Some(s) => Ok(s),
            None => Err(CmdError::msg(format!(
                "ERR unknown subcommand '{}'. Try {} HELP.",
                trunc(args[1], 128),
                c.name.to_ascii_uppercase()
            ))),
        }
    }
}

// The argument helpers live in resp/ (below the layers that keep commands); re-exported so
// handlers keep one import.
pub use crate::resp::{arg_view, owned_args};

fn trunc(b: &[u8], n: usize) -> String {
    String::from_utf8_lossy(&b[..b.len().min(n)]).into_owned()
}

fn unknown_command(args: &[&[u8]]) -> CmdError {
    let mut m = format!(
        "ERR unknown command '{}', with args beginning with: ",
        trunc(args[0], 128)
    );
    for a in &args[1..] {
        if m.len() >= 128 + 60 {
            break;
        }
        m.push('\'');
        m.push_str(&trunc(a, 128));
        m.push_str("' ");
    }
    CmdError::Msg(m.into())
}

pub fn arity_error(c: &CommandSpec) -> CmdError {
    CmdError::msg(format!(
        "ERR wrong number of arguments for '{}' command",
        c.full_name
    ))
}

/// Counts one error reply written to `cl` in INFO errorstats and `total_error_replies`
/// (Redis's afterErrorReply); an error our master gets is also `unexpected_error_replies`.
/// `msg` is the message without the wire's `-`.
///
/// The dispatcher counts the errors of the commands it runs (their result, their refusal);
/// a layer that writes an error reply of its own (a script's checks before `redis.call`
/// runs a command, say) counts it here, and when it re-raises an error already counted it
/// returns [`CmdError::Counted`].
pub fn count_error(srv: &Server, cl: &ClientState, msg: &[u8]) {
    srv.stats.errors.count(msg);
    if cl.from_master {
        srv.stats
            .unexpected_error_replies
            .fetch_add(1, Ordering::Relaxed);
    }
}

/// A command refused before it ran by a layer other than the dispatcher (a script's
/// pre-call checks: OOM, a write in a read-only script, ...): its `rejected_calls` and the
/// error counted, as Redis's scriptCall does with the Lua client's rejection.
pub fn count_rejected(srv: &Server, cl: &ClientState, cmd: &CommandSpec, msg: &[u8]) {
    cmd.stats.live().rejected.fetch_add(1, Ordering::Relaxed);
    count_error(srv, cl, msg);
}

/// The message of `reply` when it is a top-level error (without `-` and CRLF).
fn error_text(reply: &[u8]) -> Option<&[u8]> {
    let rest = reply.strip_prefix(b"-")?;
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    Some(&rest[..end])
}

/// What the connection must do after a command.
pub enum Outcome {
    Done,
    /// Flush, then close the connection.
    Close,
    /// The client is blocked; wait on the handle (the reply arrives through it).
    Blocked(WaitHandle),
    /// Clients are paused (CLIENT PAUSE) until this instant; retry the command then.
    Paused(Instant),
}

/// Why `execute` refuses a command without running it: the error written back, what it
/// does to an open MULTI, and which counter it bumps. Every refusal goes through
/// [`reject`], so the replies and their side effects are the same wherever they come from.
struct Reject {
    msg: Cow<'static, str>,
    multi: OnMulti,
    count: Count,
}

/// What a refusal does to the client's open transaction.
#[derive(Clone, Copy, PartialEq)]
enum OnMulti {
    /// Nothing (NOAUTH, a cluster redirect, the pub/sub context, OOM).
    Keep,
    /// Marks it failed: its EXEC answers EXECABORT (Redis's flagTransaction).
    Flag,
    /// Discards it (an EXEC refused by MISCONF).
    Discard,
}

/// Which counter a refusal bumps.
#[derive(Clone, Copy, PartialEq)]
enum Count {
    None,
    /// The command's `rejected_calls` (INFO commandstats).
    Rejected,
}

impl Reject {
    fn new(msg: impl Into<Cow<'static, str>>, multi: OnMulti, count: Count) -> Self {
        Reject {
            msg: msg.into(),
            multi,
            count,
        }
    }

    /// The common kind: flags the transaction, counts as rejected.
    fn flagged(msg: impl Into<Cow<'static, str>>) -> Self {
        Reject::new(msg, OnMulti::Flag, Count::Rejected)
    }

    /// EXEC refused: the transaction is discarded and the error names why (Redis's
    /// rejectCommand → execCommandAbort).
    fn exec_abort(why: impl std::fmt::Display) -> Self {
        Reject::new(
            format!("EXECABORT Transaction discarded because of: {why}"),
            OnMulti::Discard,
            Count::Rejected,
        )
    }

    /// `why` refuses `cmd`: EXEC aborts its transaction, anything else is flagged.
    fn refusing(cmd: &CommandSpec, why: impl Into<Cow<'static, str>>) -> Self {
        let why = why.into();
        if is_exec(cmd) {
            Reject::exec_abort(why)
        } else {
            Reject::flagged(why)
        }
    }
}

/// The transaction's EXEC (not a command of the same name in another table).
fn is_exec(cmd: &CommandSpec) -> bool {
    cmd.name == "exec" && cmd.has(flags::CONN)
}

/// Writes a refusal and applies its side effects.
fn reject(srv: &Server, cl: &mut ClientState, cmd: &CommandSpec, out: &mut Out, r: Reject) {
    match r.multi {
        OnMulti::Keep => {}
        OnMulti::Flag => {
            if cl.multi.is_some() {
                cl.multi_error = true;
            }
        }
        OnMulti::Discard => transaction::end_multi(srv, cl),
    }
    if r.count == Count::Rejected {
        cmd.stats.live().rejected.fetch_add(1, Ordering::Relaxed);
    }
    count_error(srv, cl, r.msg.as_bytes());
    out.error(&r.msg);
}

/// The checks a command passes before it is queued (inside MULTI) or run, in Redis's
/// order: arity, protected commands, authentication, loading, a busy script, cluster
/// routing, MISCONF, replica and min-replicas rules, the pub/sub context, MULTI rules.
fn admit(
    srv: &Arc<Server>,
    cl: &mut ClientState,
    cmd: &'static CommandSpec,
    args: &[&[u8]],
    resp3: bool,
    cfg: &Settings,
) -> Result<(), Reject> {
    if !cmd.arity_ok(args.len()) {
        return Err(Reject::flagged(arity_error(cmd).to_string()));
    }
    if cmd.has(flags::PROTECTED)
        && !config_cmd::protected_action_allowed(cfg.enable_debug_command, cl)
    {
        return Err(Reject::flagged("ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."));
    }
    if !cl.authenticated && !cmd.has(flags::NO_AUTH) {
        if srv.requires_auth() {
            return Err(Reject::new(
                "NOAUTH Authentication required.",
                OnMulti::Keep,
                Count::Rejected,
            ));
        }
        cl.authenticated = true;
    }
    // ACL users (crate::acl): one relaxed load for a connection of the default user.
    if let Some(e) = acl::check_call(srv, cl, cmd, args) {
        // EXEC refused (its user lost +exec after MULTI) discards the transaction.
        return Err(Reject::refusing(cmd, e));
    }
    // A replica loading its master's RDB has a partial dataset: like Redis, refuse every
    // command not flagged `loading` (EXEC: if any queued command isn't) to connections;
    // the AOF replay itself runs as an internal client (a short load was waited out in
    // `execute`).
    if srv.persist.loading.load(Ordering::Relaxed) && !cl.internal && denied_while_loading(cl, cmd)
    {
        return Err(Reject::flagged(LOADING));
    }
    // A running script holds every stripe: wait for it or answer BUSY here rather than
    // sleep on its locks (crate::script::busy). One relaxed load when no script runs.
    if srv.scripts.busy.active() {
        if let Some(e) = srv.scripts.busy.gate(cmd) {
            return Err(Reject::refusing(cmd, e));
        }
    }
    // The master's stream is never redirected (crate::repl).
    if !cl.from_master && !cl.slot_import {
        if let Some(e) = crate::cluster::route(srv, cl, cmd, args) {
            return Err(Reject::new(e, OnMulti::Keep, Count::None));
        }
    }
    // maxmemory: evict, or refuse a command that may grow memory (an EXEC that queued one,
    // and inside MULTI anything but EXEC, DISCARD, QUIT and RESET: the queue grows) before
    // it is queued or run, as Redis's processCommand.
    let exec = is_exec(cmd);
    let queued = cl.multi.is_some() && !matches!(cmd.name, "exec" | "discard" | "quit" | "reset");
    if cmd.has(flags::DENYOOM) || queued || (exec && queues_flag(cl, flags::DENYOOM)) {
        if let Err(e) = crate::server::evict::ensure_memory_with(srv, cfg) {
            return Err(Reject::refusing(cmd, e.to_string()));
        }
    } else {
        // Every other command evicts too, and runs whatever the outcome (Redis's
        // performEvictions before each command): a lowered maxmemory empties the keyspace
        // down to it even when only reads follow.
        let _ = crate::server::evict::ensure_memory_with(srv, cfg);
    }
    // A disk that cannot persist refuses writes, PING, and an EXEC with queued writes, as
    // redis's MISCONF (crate::persist::writes_denied: two atomic loads when all is well).
    if let Some(e) = crate::persist::writes_denied(srv, cl) {
        if cmd.has(flags::WRITE) || cmd.name == "ping" {
            return Err(Reject::flagged(e.to_string()));
        }
        if exec && queues_flag(cl, flags::WRITE) {
            return Err(Reject::exec_abort(e));
        }
    }
    // Read-only replica, stale-data and min-replicas checks (crate::repl::deny). EXEC is
    // checked as the commands it queued (Redis's mstate flags): refused, it discards them.
    if let Some(e) = crate::repl::deny_with(srv, cl, cmd, cfg) {
        return Err(Reject::flagged(e));
    }
    if exec {
        if let Some(e) = queued_denied(srv, cl) {
            return Err(Reject::exec_abort(e));
        }
    }
    if cl.in_pubsub_context() && !resp3 && !pubsub::allowed_in_context(cmd.name) {
        return Err(Reject::new(
            format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                cmd.full_name
            ),
            OnMulti::Keep,
            Count::Rejected,
        ));
    }
    if cl.multi.is_some() && cmd.has(flags::NO_MULTI) {
        return Err(Reject::flagged(
            "ERR Command not allowed inside a transaction",
        ));
    }
    Ok(())
}

const LOADING: &str = "LOADING Redis is loading the dataset in memory";

/// Runs one request for a connection: lookup, checks, MULTI queueing, locking, handler,
/// WATCH invalidation, serving of blocked clients, stats.
pub fn execute(srv: &Arc<Server>, cl: &mut ClientState, out: &mut Out, args: &[&[u8]]) -> Outcome {
    let (generation, cfg) = srv.config.read_marked();
    execute_with(srv, cl, out, args, (generation, &cfg))
}

/// [`execute`] with a config snapshot the caller loaded for this request, and the
/// generation it was loaded at (`Shared::read_marked`): the checks and the stats read it
/// rather than each loading its own (five loads per request were 7% of a pipelined SET's
/// CPU). The stats load a fresh one when a CONFIG SET was published meanwhile, as Redis's
/// call() reads the slow log settings after the command ran.
pub fn execute_with(
    srv: &Arc<Server>,
    cl: &mut ClientState,
    out: &mut Out,
    args: &[&[u8]],
    (generation, cfg): (u64, &Config),
) -> Outcome {
    let t = table();
    let cmd = match t.resolve(args) {
        Ok(c) => c,
        Err(e) => {
            // No command to count it on: errorstats only, as Redis's rejectCommand
            // without a command.
            if cl.multi.is_some() {
                cl.multi_error = true;
            }
            let msg = e.to_string();
            count_error(srv, cl, msg.as_bytes());
            out.error(&msg);
            return Outcome::Done;
        }
    };
    // A short load is waited out first, as Redis's clients wait on its event loop
    // (persist::wait_short_load); the epoch below is then the one after it.
    if srv.persist.loading.load(Ordering::Relaxed) && !cl.internal && denied_while_loading(cl, cmd)
    {
        crate::persist::wait_short_load(srv);
    }
    // Read before `loading` and before the command reads the keyspace (see the check after
    // it ran): a load that starts meanwhile is then noticed.
    let load_epoch = srv.persist.load_epoch.load(Ordering::Acquire);
    if let Err(r) = admit(srv, cl, cmd, args, out.resp3, &cfg.typed) {
        reject(srv, cl, cmd, out, r);
        return Outcome::Done;
    }
    if cl.multi.is_some() && !transaction::runs_inside_multi(cmd.name) {
        if let Some(q) = cl.multi.as_mut() {
            q.push(owned_args(args));
        }
        // CLIENT LIST's cmd= names a queued command too (Redis sets lastcmd before
        // queueing).
        cl.handle.touch_cmd(cmd.full_name.as_str());
        out.simple("QUEUED");
        return Outcome::Done;
    }
    if !cl.internal {
        if let Some(until) = srv.pause_until(|| client::held_by_write_pause(srv, cl, cmd, args)) {
            // CLIENT LIST shows the held command, as Redis sets lastcmd before pausing.
            cl.handle.touch_cmd(cmd.full_name.as_str());
            return Outcome::Paused(until);
        }
    }
    if is_exec(cmd) {
        let start = CmdTimer::start();
        let o = transaction::exec(srv, cl, out, cmd);
        record(srv, cl, cmd, args, start);
        save_after_flushall(srv, cl);
        return o;
    }
    let start = CmdTimer::start();
    let now = match cl.now_ms {
        0 => crate::server::now_ms(),
        t => t,
    };
    let db = cl.db;
    // The context is built first and the locks (with the keys' slots) taken into it: the
    // view is a few hundred bytes, moved whole otherwise (4% of a GET's user CPU). For the
    // same reason it is dropped in place, at the end of this block (releasing the locks):
    // `drop(ctx)` copied it into the call first, 3% of a GET's instructions.
    let (outcome, ready, mark) = {
        let mut ctx = Ctx {
            srv,
            cl,
            out,
            ks: KeyView::new(srv, crate::db::LockSet::empty(), db, now),
            block: None,
            in_exec: false,
            serving_blocked: false,
            noop: false,
            untouched: false,
            changes: 1,
        };
        ctx.ks.locks = if cmd.has(flags::LOCK_ALL) {
            srv.ks.lock_all()
        } else if cmd.has(flags::GLOBAL) {
            crate::db::LockSet::empty()
        } else {
            lock_keys(srv, ctx.cl, cmd, args, &mut ctx.ks.slot_hints)
        };
        ctx.ks.from_master = ctx.cl.from_master;
        let mark = ctx.out.len();
        run_locked(&mut ctx, cmd, args);
        let block = ctx.block.take();
        let ready = std::mem::take(&mut ctx.ks.ready);
        // Register a blocked client while its keys are still locked, so a concurrent push
        // either happened before our check or will find us registered.
        let outcome = match block {
            Some(req) => Outcome::Blocked(srv.blocking.register(
                req,
                ctx.cl,
                args,
                ctx.out.resp3,
                &transaction::WAITER_OPS,
            )),
            None => Outcome::Done,
        };
        (outcome, ready, mark)
    };
    // A replica began loading its master's RDB while this ran: what it read may be half
    // flushed, half loaded. Answer as if it had arrived during the load.
    if matches!(outcome, Outcome::Done)
        && !cl.internal
        && srv.persist.load_epoch.load(Ordering::Relaxed) != load_epoch
        && denied_while_loading(cl, cmd)
        && !crate::cluster::commands::reads_no_keys(&cmd.full_name, args)
    {
        out.truncate(mark);
        // Redis, single-threaded, would have run this read before or after a short
        // load, never during it: wait the load out and read again (a read-only command
        // changes nothing, so running it twice is safe).
        if cmd.has(flags::READONLY)
            && !cmd.has(flags::BLOCKING)
            && cl.multi.is_none()
            && crate::persist::wait_short_load(srv)
        {
            return execute(srv, cl, out, args);
        }
        out.error(LOADING);
    }
    let blocked = matches!(outcome, Outcome::Blocked(_));
    let us = start.elapsed_us();
    if srv.config.generation() == generation {
        record_run(srv, cl, cmd, args, us, blocked, &cfg.typed);
    } else {
        record_run(srv, cl, cmd, args, us, blocked, &srv.config.read().typed);
    }
    // The clients this command made ready are served after it was counted and logged, as
    // Redis's handleClientsBlockedOnKeys runs after call().
    if !ready.is_empty() {
        crate::blocking::serve(srv, ready);
    }
    save_after_flushall(srv, cl);
    if cl.close_after_reply {
        return Outcome::Close;
    }
    outcome
}

/// FLUSHALL's save, once nothing of the keyspace is held (see `UpperHooks`).
fn save_after_flushall(srv: &Server, cl: &mut ClientState) {
    if std::mem::take(&mut cl.save_after_command) {
        if let Some(save) = table().hooks.save_after_flushall {
            save(srv);
        }
    }
}

/// Locks the stripes of the command's keys, recording each key's slot in `hints`.
fn lock_keys<'s>(
    srv: &'s Server,
    cl: &mut ClientState,
    cmd: &CommandSpec,
    args: &[&[u8]],
    hints: &mut ctx::SlotHints,
) -> crate::db::LockSet<'s> {
    match cmd.keys {
        KeyPos::None => crate::db::LockSet::empty(),
        KeyPos::Range {
            first: 1, last: 1, ..
        } => {
            let slot = crate::slot::key_hash_slot(args[1]);
            ctx::push_slot_hint(hints, args[1], slot);
            srv.ks.lock_slot(slot)
        }
        _ => {
            cl.scratch_idx.clear();
            cmd.key_indices(args, &mut cl.scratch_idx);
            cl.scratch_slots.clear();
            for &i in &cl.scratch_idx {
                let slot = crate::slot::key_hash_slot(args[i]);
                ctx::push_slot_hint(hints, args[i], slot);
                cl.scratch_slots.push(slot);
            }
            srv.ks.lock(&mut cl.scratch_slots)
        }
    }
}

/// Writes a HELP subcommand's reply: one status line each, as Redis's addReplyHelp.
pub(crate) fn help_lines(ctx: &mut Ctx<'_>, lines: &[&str]) -> CmdResult {
    ctx.out.array(lines.len());
    for l in lines {
        ctx.out.simple(l);
    }
    Ok(())
}

/// Whether `cmd` must wait for the end of a dataset load (see `execute`).
fn denied_while_loading(cl: &ClientState, cmd: &CommandSpec) -> bool {
    if !cmd.has(flags::LOADING) {
        return true;
    }
    if cmd.name == "exec" {
        let t = table();
        return cl.multi.as_ref().is_some_and(|q| {
            q.iter().any(|a| {
                t.resolve(&arg_view(a))
                    .is_ok_and(|c| !c.has(flags::LOADING))
            })
        });
    }
    false
}

/// The replication rule (crate::repl::deny) the first of the client's queued commands
/// breaks, if any.
fn queued_denied(srv: &Server, cl: &ClientState) -> Option<&'static str> {
    let t = table();
    cl.multi.as_ref()?.iter().find_map(|a| {
        let args = arg_view(a);
        let c = t.resolve(&args).ok()?;
        // A script whose shebang declares writes counts as a write (Redis's
        // getCommandFlags), checked as SET would be.
        let declared = t.hooks.script_writes.and_then(|f| f(srv, c, &args));
        let as_write = (declared == Some(true) && !c.has(flags::WRITE))
            .then(|| t.get(b"set"))
            .flatten();
        crate::repl::deny(srv, cl, as_write.unwrap_or(c))
    })
}

/// Whether the client's MULTI queue holds a command with `flag` (a write makes its EXEC a
/// write, a `denyoom` one makes it refused when out of memory).
fn queues_flag(cl: &ClientState, flag: u32) -> bool {
    let t = table();
    cl.multi.as_ref().is_some_and(|q| {
        q.iter()
            .any(|a| t.resolve(&arg_view(a)).is_ok_and(|c| c.has(flag)))
    })
}

/// Runs a handler with locks already held (by `execute` or EXEC): writes the reply or
/// error, and invalidates WATCHes on the keys of a successful write command.
pub fn run_locked(ctx: &mut Ctx<'_>, cmd: &CommandSpec, args: &[&[u8]]) {
    let reply_at = ctx.out.len();
    let missing = key_effects::missing_keys(ctx, cmd, args);
    let absent = if crate::tracking::live(ctx.srv) && cmd.has(flags::WRITE) {
        key_effects::absent_keys(ctx, cmd, args)
    } else {
        0
    };
    ctx.noop = false;
    ctx.untouched = false;
    ctx.changes = 1;
    let monitored = ctx.srv.monitors.active() && !cmd.has(flags::ADMIN);
    if monitored && !ctx.cl.in_script && skips_monitor(cmd) {
        // EVAL & co. are fed before they run, so their script's commands follow them.
        ctx.srv.monitors.feed(ctx.cl, &shown_args(cmd, args));
    }
    let res = (cmd.handler)(ctx, args);
    if monitored && ctx.cl.in_script {
        ctx.srv.monitors.feed_script(ctx.cl, &shown_args(cmd, args));
    }
    // The hints name `args`' memory: they must not outlive this call.
    ctx.ks.clear_slot_hints();
    // A write that changed nothing (its handler said so, or a blocking command blocked
    // or still had nothing to serve) is, as in redis, no write: it neither touches
    // WATCHes nor counts as a change nor reaches replicas and the AOF (nor invalidates
    // tracked keys). Redis's two halves, dirty (counted
    // and propagated) and signalModifiedKey (WATCH and tracking), can differ: see
    // `Ctx::metadata_only` and `Ctx::signal_only`.
    let writes = cmd.has(flags::WRITE)
        && ctx.block.is_none()
        && !(ctx.serving_blocked && ctx.out.len() == reply_at);
    let touches = writes && !ctx.untouched;
    let writes = writes && !ctx.noop;
    // Client-side caching: remember a tracking client's reads, invalidate the keys of a
    // write (one relaxed load when nobody tracks).
    if crate::tracking::live(ctx.srv) {
        key_effects::track_after_run(ctx, cmd, args, res.is_ok(), touches, absent);
    }
    // What the handler reported besides its reply (see `ctx::Effects`); both are empty
    // (no allocation) unless notifications are on or the command is rewritten.
    let events = std::mem::take(&mut ctx.ks.fx.events);
    let rewrite = ctx.ks.fx.propagate.take();
    let ok_reply = res.is_ok();
    match res {
        Ok(()) => {
            if !events.is_empty() {
                crate::notify::publish(ctx.srv, &events);
            }
            if let Some(missing) = missing {
                key_effects::keymiss(ctx, args, &missing);
            }
            if touches && ctx.srv.watch.active() {
                let mut idx = Vec::new();
                cmd.key_indices(args, &mut idx);
                for i in idx {
                    ctx.srv.watch.touch(ctx.ks.db, args[i]);
                }
            }
            if writes {
                ctx.srv
                    .stats
                    .dirty
                    .fetch_add(ctx.changes, Ordering::Relaxed);
                if ctx.srv.persist.prop.active() {
                    propagation::propagate(ctx, args, rewrite);
                }
            }
        }
        Err(e) => {
            cmd.stats.live().failed.fetch_add(1, Ordering::Relaxed);
            let msg = e.to_string();
            if !matches!(e, CmdError::Counted(_)) {
                count_error(ctx.srv, ctx.cl, msg.as_bytes());
            }
            ctx.out.error(&msg);
        }
    }
    // A handler that wrote an error reply itself failed as much as one that returned it.
    if ok_reply {
        if let Some(msg) = ctx.out.since(reply_at).and_then(error_text) {
            cmd.stats.live().failed.fetch_add(1, Ordering::Relaxed);
            count_error(ctx.srv, ctx.cl, msg);
        }
    }
}

/// Stats, slowlog and MONITOR feed for one executed command.
pub fn record(
    srv: &Server,
    cl: &ClientState,
    cmd: &'static CommandSpec,
    args: &[&[u8]],
    start: CmdTimer,
) {
    record_run(
        srv,
        cl,
        cmd,
        args,
        start.elapsed_us(),
        false,
        &srv.config.read().typed,
    );
}

/// [`record`] for a run of `us` microseconds. A command that blocked is counted as a call
/// now, but its latency histogram and slow log entry wait for the end of the wait
/// ([`record_unblocked`]), as Redis's call() leaves them to updateStatsOnUnblock. EXEC is
/// never slow-logged (Redis's `skip_slowlog`): the commands it ran are.
fn record_run(
    srv: &Server,
    cl: &ClientState,
    cmd: &'static CommandSpec,
    args: &[&[u8]],
    us: u64,
    blocked: bool,
    cfg: &Settings,
) {
    let st = cmd.stats.live();
    st.calls.fetch_add(1, Ordering::Relaxed);
    st.usec.fetch_add(us, Ordering::Relaxed);
    if cfg.latency_tracking && !blocked {
        st.hist.record(us);
    }
    srv.latency.add_sample_if_needed(
        cfg,
        if cmd.has(flags::FAST) {
            "fast-command"
        } else {
            "command"
        },
        us / 1000,
    );
    srv.stats.total_commands.fetch_add(1, Ordering::Relaxed);
    cl.handle.touch_cmd(cmd.full_name.as_str());
    if !blocked && cmd.name != "exec" {
        srv.slowlog
            .maybe_record(cfg, &cl.handle, || shown_args(cmd, args), us);
    }
    if srv.monitors.active() && !cmd.has(flags::ADMIN) && !skips_monitor(cmd) {
        srv.monitors.feed(cl, &shown_args(cmd, args));
    }
}

/// Redis's `skip_monitor` commands (EVAL, EVALSHA, FCALL and their _RO forms): fed to
/// MONITOR by [`run_locked`] before they run instead of after.
fn skips_monitor(cmd: &CommandSpec) -> bool {
    command::command_meta::meta(cmd.full_name.as_str())
        .is_some_and(|m| m.flags.contains(&"skip_monitor"))
}

/// Stats of a blocked command whose wait ended (served, or CLIENT UNBLOCK): the time its
/// serving took, its latency histogram and slow log entry (with the client's own
/// arguments), and `failed_calls` if it ended in error (Redis's updateStatsOnUnblock). Its
/// call was counted when it blocked.
pub fn record_unblocked(
    srv: &Server,
    handle: &crate::server::ClientHandle,
    cmd: &CommandSpec,
    args: &[&[u8]],
    us: u64,
    failed: bool,
) {
    let st = cmd.stats.live();
    st.usec.fetch_add(us, Ordering::Relaxed);
    if failed {
        st.failed.fetch_add(1, Ordering::Relaxed);
    }
    let cfg = srv.config.read();
    if cfg.typed.latency_tracking {
        st.hist.record(us);
    }
    srv.slowlog
        .maybe_record(&cfg.typed, handle, || shown_args(cmd, args), us);
}

const REDACTED: &[u8] = b"(redacted)";

/// Directives whose values are secrets (Redis's SENSITIVE_CONFIG).
const SENSITIVE_CONFIGS: [&str; 3] = ["masterauth", "masteruser", "requirepass"];

/// The arguments as the slow log and MONITOR show them: what Redis 7.0's commands pass to
/// redactClientCommandArgument (AUTH's, HELLO AUTH's and MIGRATE AUTH / AUTH2's
/// credentials, ACL SETUSER's arguments, the values of sensitive CONFIG SETs) reads
/// "(redacted)". Borrowed unchanged for every other command.
fn shown_args<'s, 'a>(cmd: &CommandSpec, args: &'s [&'a [u8]]) -> Cow<'s, [&'a [u8]]> {
    let mut hide: smallvec::SmallVec<[usize; 4]> = smallvec::SmallVec::new();
    let n = args.len();
    match cmd.full_name.as_str() {
        "auth" if n <= 3 => hide.extend(1..n),
        "hello" => {
            // The protocol version first: a bad one answers before any redaction.
            let mut j = 1;
            if n >= 2 {
                match crate::types::parse_i64_strict(args[1]) {
                    Some(2 | 3) => j = 2,
                    _ => return Cow::Borrowed(args),
                }
            }
            while j < n {
                let more = n - 1 - j;
                if eq_ic(args[j], "auth") && more >= 2 {
                    hide.extend([j + 1, j + 2]);
                    j += 3;
                } else if eq_ic(args[j], "setname") && more >= 1 {
                    j += 2;
                } else {
                    break;
                }
            }
        }
        "acl|setuser" if n >= 3 => hide.extend(2..n),
        "config|set" => {
            let mut i = 2;
            while i + 1 < n {
                if SENSITIVE_CONFIGS.iter().any(|c| eq_ic(args[i], c)) {
                    hide.push(i + 1);
                }
                i += 2;
            }
        }
        "migrate" => {
            let mut j = 6;
            while j < n {
                let more = n - 1 - j;
                if eq_ic(args[j], "copy") || eq_ic(args[j], "replace") {
                    j += 1;
                } else if eq_ic(args[j], "auth") && more >= 1 {
                    hide.push(j + 1);
                    j += 2;
                } else if eq_ic(args[j], "auth2") && more >= 2 {
                    hide.extend([j + 1, j + 2]);
                    j += 3;
                } else {
                    break;
                }
            }
        }
        _ => {}
    }
    if hide.is_empty() {
        return Cow::Borrowed(args);
    }
    let mut v = args.to_vec();
    for i in hide {
        if let Some(a) = v.get_mut(i) {
            *a = REDACTED;
        }
    }
    Cow::Owned(v)
}
