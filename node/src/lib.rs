//! tessera-node: a Redis 7.0-compatible server and cluster node.
//!
//! Layout: [`resp`] (protocol), [`db`] (the striped, per-slot keyspace), [`cmd`] (command
//! table and one file per command family), [`blocking`] (clients blocked on keys),
//! [`pubsub`], [`propagate`] (the write stream to replicas and the AOF), [`config`]
//! (redis.conf), [`server`] (listener, connections, expiry, eviction), [`types`]
//! (collection values). Layers, bottom to top, as design.md states them and the `layers`
//! test checks: resp, types, db, slot; config and server state; notify, tracking,
//! blocking, pubsub, propagate; cmd; script, repl, persist, cluster glue; networking.

pub mod acl;
pub mod alloc;
pub mod blocking;
pub mod cluster;
pub mod cmd;
pub mod config;
pub mod counter;
pub mod db;
pub mod glob;
pub mod latency;
pub mod metrics;
pub mod notify;
pub mod persist;
pub mod propagate;
pub mod pubsub;
pub mod repl;
pub mod resp;
pub mod script;
pub mod server;
pub mod slot;
pub mod tracking;
pub mod types;

/// The Redis version tessera-node reports (HELLO, INFO): clients gate features on it.
pub const REDIS_VERSION: &str = "7.0.15";

use std::sync::Arc;

/// Starts a server from a parsed config on the current tokio runtime; returns when it stops.
/// `title`: the process's command line area (the binary's), where the process title goes.
/// `listening` runs once every listener is bound, before the data loads (where Redis prints
/// its logo: its test harness connects as soon as it reads the logo's PID line).
pub async fn run(
    config: config::Config,
    title: Option<server::title::Area>,
    listening: impl FnOnce(),
) -> Result<(), server::ServerError> {
    cmd::install_table(all_commands(), upper_hooks(), &config.renames);
    let srv = server::Server::new(config);
    if let Err(e) = cmd::acl::load_at_startup(&srv) {
        tracing::warn!("{e}");
        return Err(server::ServerError::Acl(e));
    }
    if let Some(area) = title {
        srv.title.install(area, &srv.config.read());
    }
    // /metrics (metrics-port): bound before the data ports, so a port in use stops the
    // start as theirs would.
    let metrics_listeners = metrics::bind(&srv)?;
    metrics::spawn(srv.clone(), metrics_listeners)?;
    server::run(srv, listening).await
}

/// Builds the shared server state (used by tests that drive commands in-process).
pub fn new_server(config: config::Config) -> Arc<server::Server> {
    cmd::install_table(all_commands(), upper_hooks(), &config.renames);
    let srv = server::Server::new(config);
    if let Err(e) = cmd::acl::load_at_startup(&srv) {
        tracing::warn!("{e}");
    }
    srv
}

/// Every command family, in table order. Assembled here, where every layer is visible: the
/// subsystems' families live in their own layer, above `cmd`, which cannot name them.
pub fn all_commands() -> Vec<cmd::CommandSpec> {
    let mut script = script::commands::commands();
    script.extend(script::function_commands::commands());
    cmd::all_commands(cmd::UpperFamilies {
        cluster: cluster::commands::commands(),
        persist: persist::commands::commands(),
        repl: repl::commands::commands(),
        script,
    })
}

/// The subsystems' pieces that commands in `cmd` call (INFO sections, SHUTDOWN's steps),
/// handed down with the table.
pub fn upper_hooks() -> cmd::UpperHooks {
    cmd::UpperHooks {
        info_persistence: Some(persist::info),
        info_replication: Some(repl::info),
        info_repl_stats: Some(repl::info_stats),
        info_cluster: Some(cluster::info_section),
        shutdown_note_args: Some(persist::note_shutdown_args),
        shutdown_now: Some(persist::on_shutdown),
        debug_upper: Some(debug_upper),
        save_after_flushall: Some(persist::save_after_flushall),
        script_writes: Some(script::declared_writes),
        config_set: Some(cluster::config_set),
    }
}

/// The ACL command catalog of the whole command table (Redis 7.0's commands, subcommands and
/// categories), for programs that check ACL rules without running a server: the operator
/// validates spec.users with it, the fuzz targets parse ACL files with it. Installs the
/// command table (no renames) on first use, as a server does at start.
pub fn standalone_acl_catalog() -> &'static acl::Catalog {
    static CATALOG: std::sync::OnceLock<acl::Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(|| {
        cmd::install_table(all_commands(), upper_hooks(), &[]);
        cmd::acl::build_catalog()
    })
}

/// DEBUG's subcommands of the layers above `cmd`: the cluster bus's, then persist's and repl's.
fn debug_upper(ctx: &mut cmd::Ctx<'_>, args: &[&[u8]]) -> Option<cmd::CmdResult> {
    cluster::debug::debug_upper(ctx, args).or_else(|| persist::debug::debug_upper(ctx, args))
}

/// Every top-level command name (config validation of rename-command).
pub fn command_names() -> impl Iterator<Item = &'static str> {
    all_commands().into_iter().map(|c| c.name)
}

/// The layering rule of design.md ("Nothing imports a layer above it"), checked on the source:
/// every `crate::` path (and every `super::` path that leaves its top-level module) in the
/// library's non-test code is mapped to the layer of its target, and must not point above the
/// layer of the file it is in. Imports within one layer are free. The upward imports that remain
/// are listed in [`layers::ALLOWED`] with their reason, so the debt is visible and can only shrink:
/// a new upward import fails, and so does an entry that no longer matches anything.
#[cfg(test)]
mod layers {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    /// Units bottom to top. A unit is a top-level module, except `server`, whose files are split:
    /// `server/mod.rs`, `stats.rs` and `clients.rs` hold the server's state (`server`); eviction,
    /// which commands call to make room before a write, is an effect (`server::evict`); the
    /// connection, busy-poll and prefetch code and the active expiry task, which drive the
    /// keyspace like a client does, are the runtime on top (`server::net`).
    const LAYERS: &[(&str, &[&str])] = &[
        (
            "codec and utilities",
            &["resp", "slot", "counter", "alloc", "glob"],
        ),
        ("values", &["types"]),
        ("keyspace", &["db"]),
        (
            "config and server state",
            &["config", "server", "latency", "acl"],
        ),
        (
            "effects",
            &[
                "notify",
                "tracking",
                "blocking",
                "watch",
                "pubsub",
                "propagate",
                "server::evict",
            ],
        ),
        ("commands", &["cmd"]),
        ("subsystems", &["script", "repl", "persist", "cluster"]),
        ("runtime", &["server::net", "metrics"]),
    ];

    /// Files of `server/` that belong to the runtime layer (see [`LAYERS`]).
    const SERVER_RUNTIME: &[&str] = &["conn", "busy_io", "spin", "prefetch", "expire"];

    /// Known upward imports: (file under node/src, target unit, why it is still there).
    const ALLOWED: &[(&str, &str, &str)] = &[
        (
            "cmd/mod.rs",
            "cluster",
            "the dispatcher's cluster redirect (cluster::route)",
        ),
        (
            "cmd/mod.rs",
            "persist",
            "the dispatcher's MISCONF gate (persist::writes_denied)",
        ),
        (
            "cmd/mod.rs",
            "repl",
            "the dispatcher's read-only replica / min-replicas gate (repl::deny)",
        ),
        (
            "script/busy.rs",
            "server::net",
            "a busy script serves its thread's stuck connections (server::busy_io)",
        ),
        (
            "script/mod.rs",
            "server::net",
            "the Lua debugger (SCRIPT DEBUG SYNC) talks over its client's socket while the script runs (server::busy_io::socket_of)",
        ),
        (
            "server/clients.rs",
            "cluster",
            "ClientState holds the cluster router's ClientFlags",
        ),
        (
            "server/clients.rs",
            "tracking",
            "CLIENT LIST's tracking fields come from tracking::list_info",
        ),
        (
            "server/mod.rs",
            "blocking",
            "Server owns each subsystem's state (the narrow pieces are not split out yet)",
        ),
        (
            "server/mod.rs",
            "cluster",
            "Server owns each subsystem's state, and run() starts the cluster bus",
        ),
        (
            "server/mod.rs",
            "notify",
            "Server owns each subsystem's state (the narrow pieces are not split out yet)",
        ),
        (
            "server/mod.rs",
            "persist",
            "Server owns each subsystem's state, and run() loads and starts persistence",
        ),
        (
            "server/mod.rs",
            "pubsub",
            "Server owns each subsystem's state (the narrow pieces are not split out yet)",
        ),
        (
            "server/mod.rs",
            "repl",
            "Server owns each subsystem's state, and run() starts replication",
        ),
        (
            "server/mod.rs",
            "script",
            "Server owns each subsystem's state (script cache, functions, busy state)",
        ),
        (
            "server/mod.rs",
            "tracking",
            "Server owns each subsystem's state (CLIENT TRACKING's tables)",
        ),
        (
            "server/mod.rs",
            "server::evict",
            "a new key's LFU start value (evict::lfu_new)",
        ),
        (
            "server/mod.rs",
            "server::net",
            "server/mod.rs still holds run(): the listener and the runtime's tasks",
        ),
    ];

    /// Returns the source with comments, string and char literals blanked out (same length and
    /// line breaks, so offsets and line numbers still match the original).
    fn blank(src: &str) -> String {
        let b = src.as_bytes();
        let mut out = b.to_vec();
        let mut i = 0;
        let wipe = |out: &mut Vec<u8>, from: usize, to: usize| {
            for c in out.iter_mut().take(to).skip(from) {
                if *c != b'\n' {
                    *c = b' ';
                }
            }
        };
        while i < b.len() {
            match b[i] {
                b'/' if b.get(i + 1) == Some(&b'/') => {
                    let end = src[i..].find('\n').map_or(b.len(), |n| i + n);
                    wipe(&mut out, i, end);
                    i = end;
                }
                b'/' if b.get(i + 1) == Some(&b'*') => {
                    let (mut depth, mut j) = (1, i + 2);
                    while j < b.len() && depth > 0 {
                        if b[j..].starts_with(b"/*") {
                            depth += 1;
                            j += 2;
                        } else if b[j..].starts_with(b"*/") {
                            depth -= 1;
                            j += 2;
                        } else {
                            j += 1;
                        }
                    }
                    wipe(&mut out, i, j);
                    i = j;
                }
                b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                    && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
                {
                    let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                    let open = i + 1 + hashes;
                    if b.get(open) != Some(&b'"') {
                        i += 1;
                        continue;
                    }
                    let close = format!("\"{}", "#".repeat(hashes));
                    let end = src[open + 1..]
                        .find(&close)
                        .map_or(b.len(), |n| open + 1 + n + close.len());
                    wipe(&mut out, open + 1, end.saturating_sub(close.len()));
                    i = end;
                }
                b'"' => {
                    let mut j = i + 1;
                    while j < b.len() && b[j] != b'"' {
                        j += if b[j] == b'\\' { 2 } else { 1 };
                    }
                    wipe(&mut out, i + 1, j.min(b.len()));
                    i = j + 1;
                }
                b'\'' => {
                    // A char literal ('x', '\n', '\u{..}', 'é'); otherwise a lifetime.
                    let rest = &src[i + 1..];
                    let len = if rest.starts_with('\\') {
                        rest.find('\'').map(|n| n + 1)
                    } else {
                        rest.chars()
                            .next()
                            .map(|c| c.len_utf8())
                            .filter(|&n| rest[n..].starts_with('\''))
                            .map(|n| n + 1)
                    };
                    match len {
                        Some(n) => {
                            wipe(&mut out, i + 1, i + n);
                            i += n + 1;
                        }
                        None => i += 1,
                    }
                }
                _ => i += 1,
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    fn is_ident(c: u8) -> bool {
        c.is_ascii_alphanumeric() || c == b'_'
    }

    /// Skips whitespace from `i`.
    fn ws(b: &[u8], mut i: usize) -> usize {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    }

    /// The index just past the brace that closes the one at `open`.
    fn close_brace(b: &[u8], open: usize) -> usize {
        let mut depth = 0usize;
        for (j, &c) in b.iter().enumerate().skip(open) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return j + 1;
                    }
                }
                _ => {}
            }
        }
        b.len()
    }

    /// Blanks `#[cfg(test)]` inline modules out of `code`; returns the out-of-line test module
    /// files it declares (relative to `dir`, the directory their paths resolve against).
    fn drop_test_mods(code: &mut String, orig: &str, dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        let mut from = 0;
        while let Some(at) = code[from..].find("#[cfg(test)]").map(|n| n + from) {
            let b = code.as_bytes();
            let mut i = at + "#[cfg(test)]".len();
            let mut path_attr = None;
            loop {
                i = ws(b, i);
                if b[i..].starts_with(b"#[") {
                    let end = code[i..].find(']').map_or(b.len(), |n| i + n + 1);
                    let attr = &orig[i..end];
                    if let Some(p) = attr.strip_prefix("#[path = \"") {
                        path_attr = p.split('"').next().map(str::to_string);
                    }
                    i = end;
                } else {
                    break;
                }
            }
            for kw in ["pub(crate) ", "pub "] {
                if code[i..].starts_with(kw) {
                    i += kw.len();
                }
            }
            if !code[i..].starts_with("mod ") {
                from = i;
                continue;
            }
            i = ws(b, i + 4);
            let name_end = (i..b.len()).find(|&j| !is_ident(b[j])).unwrap_or(b.len());
            let name = code[i..name_end].to_string();
            let j = ws(b, name_end);
            if b.get(j) == Some(&b'{') {
                let end = close_brace(b, j);
                let blanked: String = code[at..end]
                    .chars()
                    .map(|c| if c == '\n' { '\n' } else { ' ' })
                    .collect();
                code.replace_range(at..end, &blanked);
                from = end;
            } else {
                files.push(dir.join(path_attr.unwrap_or(format!("{name}.rs"))));
                from = j;
            }
        }
        files
    }

    /// The leading segments (up to two) of each path named at `b[i..]`, which follows `crate::`
    /// (a plain path, or a `{..}` group of paths).
    fn paths_at<E: Extend<Vec<String>>>(b: &[u8], i: usize, prefix: &[String], out: &mut E) {
        let i = ws(b, i);
        if b.get(i) == Some(&b'{') {
            let end = close_brace(b, i);
            let inner = &b[i + 1..end.saturating_sub(1)];
            let (mut depth, mut start) = (0, 0);
            for j in 0..=inner.len() {
                let c = inner.get(j).copied().unwrap_or(b',');
                match c {
                    b'{' => depth += 1,
                    b'}' => depth -= 1,
                    b',' if depth == 0 => {
                        let part = &inner[start..j];
                        if part.iter().any(|c| !c.is_ascii_whitespace()) {
                            paths_at(part, 0, prefix, out);
                        }
                        start = j + 1;
                    }
                    _ => {}
                }
            }
            return;
        }
        let end = (i..b.len()).find(|&j| !is_ident(b[j])).unwrap_or(b.len());
        let seg = String::from_utf8_lossy(&b[i..end]).into_owned();
        let mut path = prefix.to_vec();
        path.push(seg);
        let k = ws(b, end);
        if path.len() < 2 && b[k..].starts_with(b"::") {
            paths_at(b, k + 2, &path, out);
        } else {
            out.extend(std::iter::once(path));
        }
    }

    /// The unit of a path below `crate` (its first one or two segments).
    fn unit_of_path(path: &[String]) -> String {
        match path {
            [top, file, ..] if top == "server" && SERVER_RUNTIME.contains(&file.as_str()) => {
                "server::net".into()
            }
            [top, file, ..] if top == "server" && file == "evict" => "server::evict".into(),
            [top, ..] => top.clone(),
            [] => String::new(),
        }
    }

    /// The unit of a file, from its path under node/src.
    fn unit_of_file(rel: &str) -> String {
        let mut parts: Vec<String> = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(String::from)
            .collect();
        if parts.len() == 1 && parts[0] == "lib" {
            return "crate".into();
        }
        parts.truncate(2);
        unit_of_path(&parts)
    }

    /// A sink for [`paths_at`] that tags each path with the offset `at` it was found at.
    struct RefsAt<'a> {
        refs: &'a mut Vec<(usize, Vec<String>)>,
        at: usize,
    }

    impl Extend<Vec<String>> for RefsAt<'_> {
        fn extend<I: IntoIterator<Item = Vec<String>>>(&mut self, it: I) {
            self.refs.extend(it.into_iter().map(|p| (self.at, p)));
        }
    }

    fn refs_of(refs: &mut Vec<(usize, Vec<String>)>, at: usize) -> RefsAt<'_> {
        RefsAt { refs, at }
    }

    fn rank(unit: &str) -> Option<usize> {
        LAYERS.iter().position(|(_, units)| units.contains(&unit))
    }

    /// Every upward import in the library: (file, target unit) -> the lines naming it.
    fn upward_imports() -> BTreeMap<(String, String), Vec<String>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
        // The library's modules, as lib.rs declares them; each must have a layer.
        let mut modules = BTreeSet::new();
        for line in blank(&lib).lines() {
            if let Some(name) = line
                .trim()
                .strip_prefix("pub mod ")
                .and_then(|l| l.strip_suffix(';'))
            {
                assert!(
                    rank(name).is_some(),
                    "module `{name}` has no layer in LAYERS"
                );
                modules.insert(name.to_string());
            }
        }
        let mut files = vec![src.join("lib.rs")];
        for m in &modules {
            files.push(src.join(format!("{m}.rs")));
            let mut stack = vec![src.join(m)];
            while let Some(dir) = stack.pop() {
                let Ok(entries) = std::fs::read_dir(&dir) else {
                    continue;
                };
                for e in entries.flatten() {
                    let p = e.path();
                    if p.is_dir() {
                        stack.push(p);
                    } else if p.extension().is_some_and(|x| x == "rs") {
                        files.push(p);
                    }
                }
            }
        }
        let mut texts = BTreeMap::new();
        let mut test_files = BTreeSet::new();
        for f in files.into_iter().filter(|f| f.is_file()) {
            let orig = std::fs::read_to_string(&f).expect("read source");
            let mut code = blank(&orig);
            // `x.rs` declares its children in `x/`; `mod.rs` and `lib.rs` in their own dir.
            let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            let parent = f.parent().unwrap_or(&src);
            let dir = if stem == "mod" || stem == "lib" {
                parent.to_path_buf()
            } else {
                parent.join(stem)
            };
            for t in drop_test_mods(&mut code, &orig, &dir) {
                test_files.insert(t.clone());
                // `#[path]` resolves against the declaring file's own dir.
                test_files.insert(parent.join(t.file_name().unwrap_or_default()));
            }
            texts.insert(f, code);
        }
        let mut found: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for (f, code) in &texts {
            if test_files.contains(f) {
                continue;
            }
            let rel = f
                .strip_prefix(&src)
                .unwrap_or(f)
                .to_string_lossy()
                .replace('\\', "/");
            let from = unit_of_file(&rel);
            let Some(from_rank) = (if from == "crate" {
                Some(usize::MAX)
            } else {
                rank(&from)
            }) else {
                panic!("{rel}: unit `{from}` has no layer");
            };
            // This file's module path below the crate root, to resolve `super::`, `self::` and
            // the bare names of the child modules it declares.
            let mut modpath: Vec<String> = rel
                .trim_end_matches(".rs")
                .split('/')
                .map(String::from)
                .collect();
            if modpath.last().is_some_and(|l| l == "mod" || l == "lib") {
                modpath.pop();
            }
            let children: Vec<String> = code
                .lines()
                .filter_map(|l| {
                    let l = l.trim();
                    let l = l
                        .strip_prefix("pub(crate) ")
                        .or_else(|| l.strip_prefix("pub "))
                        .unwrap_or(l);
                    l.strip_prefix("mod ")?
                        .strip_suffix(';')
                        .map(|n| n.trim().to_string())
                })
                .collect();
            let b = code.as_bytes();
            let starts = |at: usize| {
                at == 0 || !(is_ident(b[at - 1]) || b[at - 1] == b':' || b[at - 1] == b'$')
            };
            let mut refs = Vec::new();
            for (at, _) in code.match_indices("crate::").filter(|(at, _)| starts(*at)) {
                paths_at(b, at + "crate::".len(), &[], &mut refs_of(&mut refs, at));
            }
            for (at, _) in code.match_indices("self::").filter(|(at, _)| starts(*at)) {
                paths_at(
                    b,
                    at + "self::".len(),
                    &modpath,
                    &mut refs_of(&mut refs, at),
                );
            }
            for (at, _) in code.match_indices("super::").filter(|(at, _)| starts(*at)) {
                let (mut i, mut ups) = (at, 0);
                while code[i..].starts_with("super::") {
                    ups += 1;
                    i = ws(b, i + "super::".len());
                }
                let prefix = &modpath[..modpath.len().saturating_sub(ups)];
                paths_at(b, i, prefix, &mut refs_of(&mut refs, at));
            }
            for child in &children {
                let name = format!("{child}::");
                for (at, _) in code.match_indices(&name).filter(|(at, _)| starts(*at)) {
                    paths_at(b, at, &modpath, &mut refs_of(&mut refs, at));
                }
            }
            for (at, path) in refs {
                let to = unit_of_path(&path);
                if to == from || !path.first().is_some_and(|p| modules.contains(p)) {
                    continue;
                }
                let to_rank = rank(&to).unwrap_or_else(|| panic!("{rel}: `{to}` has no layer"));
                if to_rank > from_rank {
                    let line = code[..at].matches('\n').count() + 1;
                    found.entry((rel.clone(), to)).or_default().push(format!(
                        "{rel}:{line}: crate::{}",
                        path.join("::").trim_end_matches("::self")
                    ));
                }
            }
        }
        found
    }

    #[test]
    fn nothing_imports_a_layer_above_it() {
        let found = upward_imports();
        let allowed: BTreeSet<(String, String)> = ALLOWED
            .iter()
            .map(|(f, t, _)| (f.to_string(), t.to_string()))
            .collect();
        let new: Vec<String> = found
            .iter()
            .filter(|(k, _)| !allowed.contains(*k))
            .flat_map(|((f, t), lines)| {
                std::iter::once(format!("{f} -> {t}"))
                    .chain(lines.iter().map(|l| format!("    {l}")))
            })
            .collect();
        let stale: Vec<String> = allowed
            .iter()
            .filter(|k| !found.contains_key(*k))
            .map(|(f, t)| format!("{f} -> {t}"))
            .collect();
        assert!(
            new.is_empty() && stale.is_empty(),
            "upward imports not in ALLOWED (move the code down, or pass the piece it needs in):\n{}\n\
             ALLOWED entries that no longer match (delete them):\n{}",
            new.join("\n"),
            stale.join("\n")
        );
    }

    /// The scanner itself: groups, nested groups, comments, strings and test modules.
    #[test]
    fn scanner_reads_paths() {
        let mut out = Vec::new();
        let src = "{server::{Server, conn::Conn}, cmd, db::Db}";
        paths_at(src.as_bytes(), 0, &[], &mut out);
        let units: Vec<String> = out.iter().map(|p| unit_of_path(p)).collect();
        assert_eq!(units, ["server", "server::net", "cmd", "db"]);
        let code = blank("a // crate::cmd\n\"crate::cmd\" '{' /* crate::x */ b");
        assert!(!code.contains("crate::"), "{code}");
        assert_eq!(code.lines().count(), 2);
        let orig = "fn f() {}\n#[cfg(test)]\nmod tests {\n use crate::cmd;\n}\n#[cfg(test)]\n#[path = \"x_tests.rs\"]\nmod t;\n";
        let mut code = blank(orig);
        let files = drop_test_mods(&mut code, orig, Path::new("d"));
        assert!(!code.contains("crate::cmd"), "{code}");
        assert_eq!(files, [Path::new("d").join("x_tests.rs")]);
    }
}
