//! The ACL check of every call (Redis's ACLCheckAllPerm in processCommand), of EXEC's
//! queued commands, of `redis.call` and `redis.acl_check_cmd`, and SORT's BY/GET rule
//! (ACLUserCheckCmdWithUnrestrictedKeyAccess), over the pure rules of `crate::acl`.
//!
//! The hot path: a connection of the unrestricted default user pays two relaxed loads. Any
//! other keeps a copy of its user's rules ([`AclView`] in its `ClientState`), valid while
//! the users' version ([`crate::server::auth::Watched`], bumped by every change) and its
//! own login generation are unchanged: two more loads, no lock, no map lookup. The command's
//! catalog id and key-spec access are worked out once per command ([`AclInfo`]), and its
//! keys are gathered on the stack (fixed-position and keynum keys allocate nothing).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::acl::{Catalog, ChannelRef, Denied, DeniedKind, KeyRef, User, PERM_READ, PERM_WRITE};
use crate::server::auth::{Access, AclView};
use crate::server::clients::{ClientHandle, ClientState};
use crate::server::Server;

use super::spec::{keynum_keys, KeyPos};
use super::CommandSpec;

/// Key specs whose access is remembered per command; later keys take the last one's.
const SPECS: usize = 8;

/// What the ACL check needs of one command, worked out on its first check.
#[derive(Debug)]
pub struct AclInfo {
    /// Its catalog id (None: a command the catalog does not list, run only with `+@all`).
    id: Option<usize>,
    /// The argument a `+cmd|arg` rule names: after the subcommand for a subcommand.
    first_arg: usize,
    /// Its key specs are all `not_key` (the shard channels of SPUBLISH...) or absent.
    keyless: bool,
    /// The access of the n-th key (by key-spec flags), the last repeating.
    perms: [u8; SPECS],
    /// The flags depend on the arguments (SET ... GET, BITFIELD's subcommands).
    per_call: bool,
    channels: Channels,
}

/// Which arguments are channels the ACL check looks at (Redis's PUBLISH and SUBSCRIBE
/// channel flags; unsubscribing is never refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Channels {
    None,
    /// The first argument (PUBLISH, SPUBLISH).
    Publish,
    /// Every argument (SUBSCRIBE, SSUBSCRIBE).
    Subscribe,
    /// Every argument, matched as patterns (PSUBSCRIBE).
    Patterns,
}

/// Read / write permission asked by a key's key-spec flags: `access` reads, `insert`,
/// `delete` and `update` write (EXISTS-like keys ask neither).
fn perms_of(flags: &[&str]) -> u8 {
    let mut p = 0;
    if flags.contains(&"access") {
        p |= PERM_READ;
    }
    if flags
        .iter()
        .any(|f| matches!(*f, "insert" | "delete" | "update"))
    {
        p |= PERM_WRITE;
    }
    p
}

fn info<'c>(cmd: &'c CommandSpec, cat: &Catalog) -> &'c AclInfo {
    cmd.acl.get_or_init(|| {
        // Catalog ids are a function of the static command table (every server builds its
        // catalog from it the same way), so one id per command serves them all.
        let per_call = matches!(cmd.full_name.as_str(), "set" | "bitfield");
        let mut perms = [0u8; SPECS];
        for (n, p) in perms.iter_mut().enumerate() {
            *p = perms_of(super::command::key_flags_of_call(cmd, &[], n));
        }
        AclInfo {
            id: cat.lookup(cmd.full_name.as_bytes()),
            first_arg: if cmd.full_name.contains('|') { 2 } else { 1 },
            keyless: matches!(cmd.keys, KeyPos::None)
                || (!cmd.key_flags.is_empty()
                    && cmd.key_flags.iter().all(|f| f.contains(&"not_key"))),
            perms,
            per_call,
            channels: match cmd.full_name.as_str() {
                "publish" | "spublish" => Channels::Publish,
                "subscribe" | "ssubscribe" => Channels::Subscribe,
                "psubscribe" => Channels::Patterns,
                _ => Channels::None,
            },
        }
    })
}

type Keys<'a> = SmallVec<[KeyRef<'a>; 8]>;

/// The keys of a call with the access their key specs ask, in Redis's order.
fn call_keys<'a>(cmd: &CommandSpec, info: &AclInfo, args: &[&'a [u8]], out: &mut Keys<'a>) {
    if info.keyless {
        return;
    }
    let perm = |nth: usize| {
        if info.per_call {
            perms_of(super::command::key_flags_of_call(cmd, args, nth))
        } else {
            info.perms[nth.min(SPECS - 1)]
        }
    };
    let mut push = |pos: usize, perms: u8| {
        if let Some(key) = args.get(pos) {
            out.push(KeyRef { pos, key, perms });
        }
    };
    match cmd.keys {
        KeyPos::None => {}
        KeyPos::Range { first, last, step } => {
            for (nth, pos) in
                super::spec::range_positions(first, last, step, args.len()).enumerate()
            {
                push(pos, perm(nth));
            }
        }
        KeyPos::Keynum {
            numkeys,
            first,
            step,
        } => {
            if let Some(k) = keynum_keys(args, numkeys, first, step) {
                for (nth, pos) in k.positions().enumerate() {
                    push(pos, if k.from_spec { perm(nth) } else { 0 });
                }
            }
        }
        KeyPos::DestThenKeynum { dest, numkeys } => {
            let Some(k) = keynum_keys(args, numkeys, 1, 1) else {
                return;
            };
            let dest = dest as usize;
            if k.from_spec {
                push(dest, perm(0));
                for (nth, pos) in k.positions().enumerate() {
                    push(pos, perm(nth + 1));
                }
            } else {
                // Redis's fallback (genericGetKeys): the sources, then the destination,
                // none with key-spec flags.
                for pos in k.positions() {
                    push(pos, 0);
                }
                push(dest, 0);
            }
        }
        KeyPos::Custom(_) => {
            let mut idx = Vec::new();
            cmd.key_indices(args, &mut idx);
            for (nth, &pos) in idx.iter().enumerate() {
                push(pos, perm(nth));
            }
        }
    }
}

/// The channels of a call.
fn call_channels<'a>(info: &AclInfo, args: &[&'a [u8]], out: &mut SmallVec<[ChannelRef<'a>; 4]>) {
    let (to, is_pattern) = match info.channels {
        Channels::None => return,
        Channels::Publish => (2, false),
        Channels::Subscribe => (args.len(), false),
        Channels::Patterns => (args.len(), true),
    };
    for (pos, channel) in args.iter().enumerate().take(to).skip(1) {
        out.push(ChannelRef {
            pos,
            channel,
            is_pattern,
        });
    }
}

/// What a check of `u` looks at: the command's id and first argument, keys, channels.
/// Keys are not gathered when every selector allows all keys, nor channels likewise.
struct Call<'a> {
    id: usize,
    first: Option<&'a [u8]>,
    keys: Keys<'a>,
    channels: SmallVec<[ChannelRef<'a>; 4]>,
}

/// None: a command the catalog does not list (allowed only by `+@all`).
fn gather<'a>(u: &User, cat: &Catalog, cmd: &CommandSpec, args: &[&'a [u8]]) -> Option<Call<'a>> {
    let info = info(cmd, cat);
    let id = info.id?;
    let mut keys = Keys::new();
    if !u.all_selectors().all(|s| s.allkeys) {
        call_keys(cmd, info, args, &mut keys);
    }
    let mut channels = SmallVec::new();
    if info.channels != Channels::None && !u.all_selectors().all(|s| s.allchannels) {
        call_channels(info, args, &mut channels);
    }
    Some(Call {
        id,
        first: args.get(info.first_arg).copied(),
        keys,
        channels,
    })
}

/// Checks a user's permission for a call (Redis's ACLCheckAllUserCommandPerm): `Err` is the
/// argument index (0 for the command) and Redis's reason.
pub(crate) fn check_user(
    u: &User,
    cat: &Catalog,
    cmd: &CommandSpec,
    args: &[&[u8]],
) -> Result<(), Denied> {
    let Some(c) = gather(u, cat, cmd, args) else {
        return if u.all_selectors().any(|s| s.can_run_future_commands(cat)) {
            Ok(())
        } else {
            Err(Denied {
                kind: DeniedKind::Command,
                pos: 0,
            })
        };
    };
    u.check(cat, c.id, c.first, &c.keys, &c.channels)
        .map(|_| ())
}

fn catalog(srv: &Server) -> &Catalog {
    srv.default_user
        .1
        .catalog
        .get_or_init(super::acl::build_catalog)
}

/// The version stamp a connection's [`AclView`] is valid for.
fn stamp(srv: &Server, handle: &ClientHandle) -> (u64, u64) {
    (
        srv.default_user.1.version.load(Ordering::Acquire),
        handle.acl_gen.load(Ordering::Acquire),
    )
}

/// The rules of the connection's user as they are now (locks the users; not per call).
fn resolve(srv: &Server, handle: &ClientHandle) -> Access {
    let name = handle.acl_user.lock().clone();
    match name {
        None => match srv.default_user.1.default_rules.lock().as_ref() {
            Some(u) if !u.allows_everything() => Access::User(Arc::new(u.clone())),
            _ => Access::All,
        },
        // Deleted meanwhile: the connection is being closed; refuse everything.
        Some(n) => match super::acl::acl_users(srv).get(&n[..]) {
            Some(u) => Access::User(Arc::new(u.clone())),
            None => Access::Gone,
        },
    }
}

/// True for a connection every call is allowed to without looking further (the default
/// user while it allows everything): two relaxed loads. The master's stream and the
/// server's own clients (AOF replay, blocked calls served on a client's behalf, checked when
/// they blocked) have no user and are never checked, as Redis's clients with a NULL user:
/// a replica whose `default` is off must still apply every write its master sends.
#[inline]
fn unrestricted(srv: &Server, cl: &ClientState) -> bool {
    if cl.from_master || cl.internal {
        return true;
    }
    !cl.handle.acl_restricted.load(Ordering::Relaxed)
        && !srv
            .default_user
            .1
            .default_restricted
            .load(Ordering::Relaxed)
}

/// Brings the connection's copy of its rules up to date (the stamp is read before the
/// rules: a change meanwhile leaves it stale, never wrongly fresh).
fn refresh(srv: &Server, cl: &mut ClientState) {
    let st = stamp(srv, &cl.handle);
    if cl.acl.stamp != Some(st) {
        cl.acl = AclView {
            stamp: Some(st),
            access: resolve(srv, &cl.handle),
        };
    }
}

/// Runs `f` on the connection's rules: its copy when current, else the rules as they are
/// now (a caller without `&mut` to refresh it: EXEC's queue, scripts).
fn with_access<R>(srv: &Server, cl: &ClientState, f: impl FnOnce(&Access) -> R) -> R {
    if cl.acl.stamp == Some(stamp(srv, &cl.handle)) {
        f(&cl.acl.access)
    } else {
        f(&resolve(srv, &cl.handle))
    }
}

/// Why the connection's user may not run the call, if it may not.
fn denial(srv: &Server, cl: &ClientState, cmd: &CommandSpec, args: &[&[u8]]) -> Option<Denied> {
    if unrestricted(srv, cl) {
        return None;
    }
    with_access(srv, cl, |a| match a {
        Access::All => None,
        Access::Gone => Some(Denied {
            kind: DeniedKind::Command,
            pos: 0,
        }),
        Access::User(u) => check_user(u, catalog(srv), cmd, args).err(),
    })
}

/// The ACL check every call passes before it is queued or run (Redis's processCommand step,
/// after authentication): None when allowed, else the -NOPERM error, with an ACL LOG entry.
pub fn check_call(
    srv: &Server,
    cl: &mut ClientState,
    cmd: &'static CommandSpec,
    args: &[&[u8]],
) -> Option<String> {
    if unrestricted(srv, cl) {
        return None;
    }
    refresh(srv, cl);
    check_logged(srv, cl, cmd, args, Where::Call)
}

/// The same check for each queued command when EXEC runs it (the rules may have changed
/// since it was queued), with Redis's EXEC-time error text.
pub fn check_exec_call(
    srv: &Server,
    cl: &ClientState,
    cmd: &'static CommandSpec,
    args: &[&[u8]],
) -> Option<String> {
    check_logged(srv, cl, cmd, args, Where::Exec)
}

/// The check of a command a script calls (redis.call / pcall) for the script's caller:
/// Redis's scriptVerifyACL text, ACL LOG context `lua`.
pub fn check_script_call(
    srv: &Server,
    cl: &ClientState,
    cmd: &'static CommandSpec,
    args: &[&[u8]],
) -> Option<String> {
    check_logged(srv, cl, cmd, args, Where::Script)
}

/// `redis.acl_check_cmd`: whether the connection's user may run the command with these
/// arguments (Redis's ACLCheckAllUserCommandPerm, no ACL LOG entry).
pub fn may_run(srv: &Server, cl: &ClientState, cmd: &'static CommandSpec, args: &[&[u8]]) -> bool {
    denial(srv, cl, cmd, args).is_none()
}

/// SORT's BY (with a pattern) and GET: Redis 7.0 allows them only when a selector that
/// allows the call also reads every key (`allkeys`, or a `%R~*` pattern): the keys they
/// name are not known before the sort runs (ACLUserCheckCmdWithUnrestrictedKeyAccess).
pub fn reads_all_keys(
    srv: &Server,
    cl: &ClientState,
    cmd: &'static CommandSpec,
    args: &[&[u8]],
) -> bool {
    if unrestricted(srv, cl) {
        return true;
    }
    with_access(srv, cl, |a| match a {
        Access::All => true,
        Access::Gone => false,
        Access::User(u) => {
            let cat = catalog(srv);
            let Some(c) = gather(u, cat, cmd, args) else {
                // A command the catalog does not list: no selector check to pass.
                return u
                    .all_selectors()
                    .any(|s| s.can_run_future_commands(cat) && s.reads_all_keys());
            };
            u.all_selectors().any(|s| {
                s.check(cat, c.id, c.first, &c.keys, &c.channels).is_ok() && s.reads_all_keys()
            })
        }
    })
}

/// Where a checked call comes from (its error text and ACL LOG context).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Where {
    Call,
    Exec,
    Script,
}

fn check_logged(
    srv: &Server,
    cl: &ClientState,
    cmd: &'static CommandSpec,
    args: &[&[u8]],
    from: Where,
) -> Option<String> {
    let denied = denial(srv, cl, cmd, args)?;
    let (reason, object, msg) = match denied.kind {
        DeniedKind::Command => (
            "command",
            cmd.full_name.clone(),
            format!(
                "NOPERM this user has no permissions to run the '{}' command",
                cmd.full_name
            ),
        ),
        DeniedKind::Key => (
            "key",
            String::from_utf8_lossy(args.get(denied.pos).copied().unwrap_or_default()).into_owned(),
            "NOPERM this user has no permissions to access one of the keys used as arguments"
                .to_string(),
        ),
        DeniedKind::Channel => (
            "channel",
            String::from_utf8_lossy(args.get(denied.pos).copied().unwrap_or_default()).into_owned(),
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .to_string(),
        ),
    };
    let msg = match from {
        Where::Call => msg,
        Where::Exec => {
            let reason = match denied.kind {
                DeniedKind::Command => "no permission to execute the command or subcommand",
                DeniedKind::Key => "no permission to touch the specified keys",
                DeniedKind::Channel => {
                    "no permission to access one of the channels used as arguments"
                }
            };
            format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}")
        }
        Where::Script => {
            let what = match denied.kind {
                DeniedKind::Command => "can't run this command or subcommand",
                DeniedKind::Key => {
                    "can't access at least one of the keys mentioned in the command arguments"
                }
                DeniedKind::Channel => "can't publish to the channel mentioned in the command",
            };
            format!("ERR The user executing the script {what}")
        }
    };
    cl.handle.db.store(cl.db, Ordering::Relaxed);
    cl.handle.touch_cmd(cmd.full_name.as_str());
    let name = cl.handle.acl_user.lock().clone();
    let context = match from {
        Where::Script => "lua",
        Where::Exec => "multi",
        Where::Call if cl.multi.is_some() => "multi",
        Where::Call => "toplevel",
    };
    super::acl::add_log_entry(
        srv,
        &cl.handle,
        reason,
        context,
        object,
        name.map_or_else(
            || "default".to_string(),
            |n| String::from_utf8_lossy(&n).into_owned(),
        ),
    );
    Some(msg)
}
