//! COMMAND: COUNT INFO DOCS LIST GETKEYS. ACL categories, tips and key specifications are
//! redis-server 7.0.15's, recorded per command (`command_meta`); commands redis doesn't have
//! fall back to ones derived from the command's flags and `KeyPos`.

use super::{eq_ic, flags, table, CmdError, CmdResult, CommandSpec, Ctx, KeyPos};
use crate::resp::Out;

// Declared here rather than in cmd/mod.rs: COMMAND reads it (and ACL CAT, for the categories).
#[path = "command_meta.rs"]
pub(crate) mod command_meta;
use command_meta::{meta, token_len};

pub fn commands() -> Vec<CommandSpec> {
    let s = |name, arity, h| CommandSpec::new(name, arity, "loading stale", (0, 0, 0), h);
    vec![
        CommandSpec::new("command", -1, "loading stale", (0, 0, 0), command)
            .group("server")
            .since("2.8.13")
            .subs(vec![
                s("count", 2, count),
                s("info", -2, info),
                s("docs", -2, docs),
                s("list", -2, list),
                s("getkeys", -4, getkeys),
                s("getkeysandflags", -4, getkeysandflags),
                s("help", 2, help),
            ]),
    ]
}

fn all_names() -> impl Iterator<Item = &'static CommandSpec> {
    table().cmds.iter()
}

fn command(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let n = table().cmds.len();
    ctx.out.array(n);
    for c in all_names() {
        write_info(ctx.out, c);
    }
    Ok(())
}

fn count(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.out.int(table().cmds.len() as i64);
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let lines = [
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all Redis commands.",
        "COUNT",
        "    Return the total number of commands in this Redis server.",
        "LIST",
        "    Return a list of all commands in this Redis server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "GETKEYS <full-command>",
        "    Return the keys from a full Redis command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and the access flags from a full Redis command.",
        "HELP",
        "    Prints this help.",
    ];
    super::help_lines(ctx, &lines)
}

/// Redis's ACL categories of `c` (from the metadata table; a heuristic on the command's
/// group and flags for commands redis doesn't have).
fn acl_categories(c: &CommandSpec) -> Vec<&'static str> {
    if let Some(m) = meta(&c.full_name) {
        return m.acl.clone();
    }
    let mut v = Vec::new();
    match c.group {
        "generic" => v.push("@keyspace"),
        "string" | "bitmap" => v.push("@string"),
        "hash" => v.push("@hash"),
        "list" => v.push("@list"),
        "set" => v.push("@set"),
        "sorted-set" => v.push("@sortedset"),
        "geo" => v.push("@geo"),
        "hyperloglog" => v.push("@hyperloglog"),
        "pubsub" => v.push("@pubsub"),
        "transactions" => v.push("@transaction"),
        "connection" => v.push("@connection"),
        _ => {}
    }
    if c.has(flags::WRITE) {
        v.push("@write");
    }
    if c.has(flags::READONLY) {
        v.push("@read");
    }
    if c.has(flags::ADMIN) {
        v.push("@admin");
        v.push("@dangerous");
    }
    if c.has(flags::BLOCKING) {
        v.push("@blocking");
    }
    v.push(if c.has(flags::FAST) { "@fast" } else { "@slow" });
    // Redis lists them in the order of its category bits.
    v.sort_by_key(|cat| ACL_ORDER.iter().position(|o| o == cat));
    v
}

/// Redis 7.0's ACL categories in bit order (ACL_CATEGORY_KEYSPACE ... _SCRIPTING).
const ACL_ORDER: [&str; 21] = [
    "@keyspace",
    "@read",
    "@write",
    "@set",
    "@sortedset",
    "@list",
    "@hash",
    "@string",
    "@bitmap",
    "@hyperloglog",
    "@geo",
    "@stream",
    "@pubsub",
    "@admin",
    "@fast",
    "@slow",
    "@blocking",
    "@dangerous",
    "@connection",
    "@transaction",
    "@scripting",
];

/// Key-spec flags of the `nth` key spec: redis's (metadata table), else the command table's,
/// else derived from the command flags. Keys past the last spec share the last one's flags
/// (MSET's one spec covers all its keys; SINTERSTORE's second covers every source).
fn key_spec_flags(c: &CommandSpec, nth: usize) -> &'static [&'static str] {
    if let Some(m) = meta(&c.full_name) {
        if let Some(last) = m.spec_flags.len().checked_sub(1) {
            return &m.spec_flags[nth.min(last)];
        }
    }
    match c.key_flags {
        [] if c.has(flags::WRITE) => &["RW", "update"],
        [] => &["RO", "access"],
        f => f[nth.min(f.len() - 1)],
    }
}

/// Writes one key spec: flags, begin_search by index, then a range or keynum find_keys.
fn write_spec(o: &mut Out, spec_flags: &[&str], index: i64, find: FindKeys) {
    o.map(3);
    o.bulk(b"flags");
    o.set(spec_flags.len());
    for f in spec_flags {
        o.simple(f);
    }
    o.bulk(b"begin_search");
    o.map(2);
    o.bulk(b"type");
    o.bulk(b"index");
    o.bulk(b"spec");
    o.map(1);
    o.bulk(b"index");
    o.int(index);
    o.bulk(b"find_keys");
    o.map(2);
    o.bulk(b"type");
    match find {
        FindKeys::Range { lastkey, step } => {
            o.bulk(b"range");
            o.bulk(b"spec");
            o.map(3);
            o.bulk(b"lastkey");
            o.int(lastkey);
            o.bulk(b"keystep");
            o.int(step);
            o.bulk(b"limit");
            o.int(0);
        }
        FindKeys::Keynum { first, step } => {
            o.bulk(b"keynum");
            o.bulk(b"spec");
            o.map(3);
            o.bulk(b"keynumidx");
            o.int(0);
            o.bulk(b"firstkey");
            o.int(first);
            o.bulk(b"keystep");
            o.int(step);
        }
    }
}

enum FindKeys {
    Range { lastkey: i64, step: i64 },
    Keynum { first: i64, step: i64 },
}

fn write_key_specs(o: &mut Out, c: &CommandSpec) {
    match c.keys {
        KeyPos::None | KeyPos::Custom(_) => o.array(0),
        KeyPos::Range { first, last, step } if c.key_flags.len() > 1 && last > 0 => {
            // One spec per key, each with its own flags (SMOVE: source, then destination).
            let idx: Vec<i32> = (first..=last).step_by(step.max(1) as usize).collect();
            o.array(idx.len());
            for (n, i) in idx.into_iter().enumerate() {
                let find = FindKeys::Range {
                    lastkey: 0,
                    step: 1,
                };
                write_spec(o, key_spec_flags(c, n), i as i64, find);
            }
        }
        KeyPos::Range { first, last, step } if c.key_flags.len() > 1 => {
            // A destination, then the sources to the end (SINTERSTORE, PFMERGE).
            o.array(2);
            let dest = FindKeys::Range {
                lastkey: 0,
                step: 1,
            };
            write_spec(o, key_spec_flags(c, 0), first as i64, dest);
            let rest = FindKeys::Range {
                lastkey: last as i64,
                step: step as i64,
            };
            write_spec(o, key_spec_flags(c, 1), (first + step) as i64, rest);
        }
        KeyPos::Range { first, last, step } => {
            o.array(1);
            let lastkey = if last < 0 {
                last as i64
            } else {
                (last - first) as i64
            };
            let find = FindKeys::Range {
                lastkey,
                step: step as i64,
            };
            write_spec(o, key_spec_flags(c, 0), first as i64, find);
        }
        KeyPos::Keynum {
            numkeys,
            first,
            step,
        } => {
            o.array(1);
            let find = FindKeys::Keynum {
                first: first as i64,
                step: step as i64,
            };
            write_spec(o, key_spec_flags(c, 0), numkeys as i64, find);
        }
        KeyPos::DestThenKeynum { dest, numkeys } => {
            o.array(2);
            let range = FindKeys::Range {
                lastkey: 0,
                step: 1,
            };
            write_spec(o, key_spec_flags(c, 0), dest as i64, range);
            let keynum = FindKeys::Keynum { first: 1, step: 1 };
            write_spec(o, key_spec_flags(c, 1), numkeys as i64, keynum);
        }
    }
}

/// Redis command flags that describe, rather than drive, this node's behaviour: it never
/// loads asynchronously (so `no_async_loading` holds vacuously), EVAL takes zero keys
/// (`no_mandatory_keys`), RESTORE-ASKING is routed as if after ASKING (`asking`), EVAL &
/// co. reach MONITOR before their script runs rather than after (`skip_monitor`) and EXEC is
/// never slow-logged, the commands it ran are (`skip_slowlog`).
const DESCRIPTIVE_FLAGS: [&str; 5] = [
    "no_async_loading",
    "no_mandatory_keys",
    "asking",
    "skip_monitor",
    "skip_slowlog",
];

/// One COMMAND INFO entry (10 fields in Redis 7.0).
pub fn write_info(o: &mut Out, c: &CommandSpec) {
    o.array(10);
    o.bulk(c.full_name.as_bytes());
    o.int(c.arity as i64);
    let mut fl: Vec<&str> = flags::NAMES
        .iter()
        .filter(|(b, _)| c.flags & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if c.keys.movable() {
        fl.push("movablekeys");
    }
    if let Some(m) = meta(&c.full_name) {
        // Redis flags the command model has no bit for but which hold here too.
        fl.extend(m.flags.iter().filter(|f| DESCRIPTIVE_FLAGS.contains(f)));
        fl.sort_by_key(|f| m.flags.iter().position(|x| x == f).unwrap_or(usize::MAX));
    }
    o.set(fl.len());
    for f in fl {
        o.simple(f);
    }
    let (first, last, step) = c.legacy_range();
    o.int(first);
    o.int(last);
    o.int(step);
    if let Some(m) = meta(&c.full_name) {
        // Redis's ACL categories, tips and key specs, as recorded.
        let mut toks = m.tokens.iter().copied();
        for _ in 0..3 {
            replay(o, &mut toks);
        }
    } else {
        let cats = acl_categories(c);
        o.set(cats.len());
        for a in cats {
            o.simple(a);
        }
        o.set(0);
        write_key_specs(o, c);
    }
    if c.subcommands.is_empty() {
        // Redis 7.0 answers an empty set here (a RESP3 client sees `~0`), an array otherwise.
        o.set(0);
    } else {
        o.array(c.subcommands.len());
    }
    for s in &c.subcommands {
        write_info(o, s);
    }
}

fn info(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() == 2 {
        return command(ctx, args);
    }
    ctx.out.array(args.len() - 2);
    for name in &args[2..] {
        match lookup_full(name) {
            Some(c) => write_info(ctx.out, c),
            None => ctx.out.null_array(),
        }
    }
    Ok(())
}

/// "get" or "config|get".
fn lookup_full(name: &[u8]) -> Option<&'static CommandSpec> {
    let s = String::from_utf8_lossy(name).to_ascii_lowercase();
    match s.split_once('|') {
        Some((p, sub)) => table()
            .get(p.as_bytes())?
            .subcommands
            .iter()
            .find(|c| c.name == sub),
        None => table().get(s.as_bytes()),
    }
}

/// Redis 7.0's COMMAND DOCS replies (summary, since, group, complexity, doc flags and
/// argument trees) for the commands this node has, as RESP3 token streams generated by
/// `scripts/gen-command-docs.py` from redis-server itself.
const DOCS_DATA: &str = include_str!("command_docs.txt");

/// Full command name → its tokens (see the generator for the format).
fn docs_data() -> &'static hashbrown::HashMap<&'static str, Vec<&'static str>> {
    static D: std::sync::OnceLock<hashbrown::HashMap<&'static str, Vec<&'static str>>> =
        std::sync::OnceLock::new();
    D.get_or_init(|| command_meta::sections(DOCS_DATA))
}

/// Writes one value of a token stream (recursively), in the client's protocol.
fn replay<'t>(o: &mut Out, toks: &mut impl Iterator<Item = &'t str>) {
    let Some(t) = toks.next() else { return };
    let body = t.get(1..).unwrap_or("");
    match t.as_bytes().first() {
        Some(b'%') => {
            let n = token_len(t);
            o.map(n);
            for _ in 0..2 * n {
                replay(o, toks);
            }
        }
        Some(b'*' | b'~') => {
            let n = token_len(t);
            if t.starts_with('~') {
                o.set(n);
            } else {
                o.array(n);
            }
            for _ in 0..n {
                replay(o, toks);
            }
        }
        Some(b'+') => o.simple(body),
        Some(b':') => o.int(body.parse().unwrap_or(0)),
        _ => o.bulk(body.as_bytes()),
    }
}

fn write_doc(o: &mut Out, c: &CommandSpec) {
    let subs = (!c.subcommands.is_empty()) as usize;
    if let Some(toks) = docs_data().get(c.full_name.as_str()) {
        let mut it = toks.iter().copied();
        let n = it.next().map(token_len).unwrap_or(0);
        o.map(n + subs);
        for _ in 0..2 * n {
            replay(o, &mut it);
        }
    } else {
        write_doc_from_table(o, c);
        return;
    }
    if subs == 1 {
        o.bulk(b"subcommands");
        o.map(c.subcommands.len());
        for s in &c.subcommands {
            o.bulk(s.full_name.as_bytes());
            write_doc(o, s);
        }
    }
}

/// Docs for a command Redis doesn't document: what the command table knows.
fn write_doc_from_table(o: &mut Out, c: &CommandSpec) {
    let n = 3 + (!c.subcommands.is_empty()) as usize;
    o.map(n);
    o.bulk(b"summary");
    o.bulk(c.summary.as_bytes());
    o.bulk(b"since");
    o.bulk(c.since.as_bytes());
    o.bulk(b"group");
    o.bulk(c.group.as_bytes());
    if !c.subcommands.is_empty() {
        o.bulk(b"subcommands");
        o.map(c.subcommands.len());
        for s in &c.subcommands {
            o.bulk(s.full_name.as_bytes());
            write_doc(o, s);
        }
    }
}

fn docs(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let list: Vec<&CommandSpec> = if args.len() == 2 {
        all_names().collect()
    } else {
        args[2..].iter().filter_map(|n| lookup_full(n)).collect()
    };
    ctx.out.map(list.len());
    for c in list {
        ctx.out.bulk(c.full_name.as_bytes());
        write_doc(ctx.out, c);
    }
    Ok(())
}

fn list(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut names: Vec<&str> = Vec::new();
    for c in all_names() {
        names.push(&c.full_name);
        for s in &c.subcommands {
            names.push(&s.full_name);
        }
    }
    if args.len() == 5 && eq_ic(args[2], "filterby") {
        let v = &args[4];
        if eq_ic(args[3], "pattern") {
            names.retain(|n| crate::pubsub::glob_match(v, n.as_bytes(), true));
        } else if eq_ic(args[3], "aclcat") {
            let cat = format!("@{}", String::from_utf8_lossy(v).to_ascii_lowercase());
            names.retain(|n| {
                lookup_full(n.as_bytes()).is_some_and(|c| acl_categories(c).contains(&cat.as_str()))
            });
        } else if eq_ic(args[3], "module") {
            names.clear();
        } else {
            return Err(CmdError::Syntax);
        }
    } else if args.len() != 2 {
        return Err(CmdError::Syntax);
    }
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk(n.as_bytes());
    }
    Ok(())
}

fn keys_of(args: &[&[u8]]) -> Result<(&'static CommandSpec, Vec<usize>), CmdError> {
    let sub = &args[2..];
    let c = table()
        .resolve(sub)
        .map_err(|_| CmdError::msg("ERR Invalid command specified"))?;
    // Redis checks that the command takes keys at all before its arity.
    let keyless = matches!(c.keys, KeyPos::None)
        || (!c.key_flags.is_empty() && c.key_flags.iter().all(|f| f.contains(&"not_key")));
    if keyless {
        return Err(CmdError::msg("ERR The command has no key arguments"));
    }
    if !c.arity_ok(sub.len()) {
        return Err(CmdError::msg(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let mut idx = Vec::new();
    // Channels of the shard pub/sub commands are "not_key" specs: routed on, but no keys.
    if c.key_flags.is_empty() || !c.key_flags.iter().all(|f| f.contains(&"not_key")) {
        c.key_indices(sub, &mut idx);
    }
    if idx.is_empty() {
        // Redis 7.0 (commandGetKeysCommand): a command that may take zero keys (EVAL and
        // FCALL with numkeys 0) has none; any other command given no keys is misused.
        let no_mandatory =
            meta(&c.full_name).is_some_and(|m| m.flags.contains(&"no_mandatory_keys"));
        if no_mandatory {
            return Ok((c, idx));
        }
        return Err(CmdError::msg("ERR Invalid arguments specified for command"));
    }
    Ok((c, idx))
}

fn getkeys(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (_, idx) = keys_of(args)?;
    ctx.out.array(idx.len());
    for i in idx {
        ctx.out.bulk(args[2 + i]);
    }
    Ok(())
}

/// Flags of the `nth` key GETKEYSANDFLAGS finds in `call`: the spec's flags, except where
/// redis's own key finder decides per call (SORT's STORE destination takes the last spec;
/// the `variable_flags` specs of SET and BITFIELD depend on the arguments).
pub(crate) fn key_flags_of_call(
    c: &CommandSpec,
    call: &[&[u8]],
    nth: usize,
) -> &'static [&'static str] {
    match c.full_name.as_str() {
        "sort" if nth > 0 => key_spec_flags(c, usize::MAX),
        "set" if call.iter().skip(3).any(|a| eq_ic(a, "get")) => &["RW", "access", "update"],
        "set" => &["OW", "update"],
        "bitfield" if bitfield_readonly(call) => &["RO", "access"],
        "bitfield" => &["RW", "access", "update"],
        _ => key_spec_flags(c, nth),
    }
}

/// Whether a BITFIELD call only reads: GET and OVERFLOW subcommands only (redis's
/// bitfieldGetKeys: anything it doesn't recognise counts as a write).
fn bitfield_readonly(call: &[&[u8]]) -> bool {
    let mut i = 2;
    while i < call.len() {
        let rem = call.len() - i - 1;
        let a = call[i];
        if eq_ic(a, "get") && rem >= 2 {
            i += 3;
        } else if eq_ic(a, "overflow") && rem >= 1 {
            i += 2;
        } else {
            return false;
        }
    }
    true
}

fn getkeysandflags(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (c, idx) = keys_of(args)?;
    ctx.out.array(idx.len());
    for (n, i) in idx.into_iter().enumerate() {
        let fl = key_flags_of_call(c, &args[2..], n);
        ctx.out.array(2);
        ctx.out.bulk(args[2 + i]);
        ctx.out.set(fl.len());
        for f in fl {
            ctx.out.simple(f);
        }
    }
    Ok(())
}
