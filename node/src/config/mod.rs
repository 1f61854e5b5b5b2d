//! redis.conf parsing, validation and CONFIG GET/SET/REWRITE support.

#[macro_use]
mod typed;
pub mod directives;
pub mod keyspace_events;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;

pub use directives::{
    find, Appendfsync, Directive, Kind, LogLevel, MaxmemoryPolicy, PreferredEndpoint, Protected,
    Settings, DIRECTIVES,
};

/// Output buffer limits of one client class (bytes, bytes, seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BufLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
}

/// The node's configuration: every directive's normalised value (what CONFIG GET shows and
/// REWRITE writes) and the same values typed ([`Settings`], what the node reads). Published
/// as an immutable snapshot through [`Shared`].
#[derive(Debug, Clone)]
pub struct Config {
    values: BTreeMap<&'static str, String>,
    /// Every directive, typed (rebuilt whenever a value changes).
    pub typed: Settings,
    /// notify-keyspace-events as flag bits ([`keyspace_events`]).
    pub notify_flags: u32,
    /// normal, replica, pubsub
    pub cobl: [BufLimit; 3],
    pub file: Option<PathBuf>,
    /// `bind` was given explicitly (protected mode only applies to the default bind).
    pub bind_explicit: bool,
    /// `rename-command old new` lines, in order (lower-case names; "" removes).
    pub renames: Vec<(String, String)>,
    /// `user <name> <rules...>` lines, in order (applied by `cmd::acl` at startup). CONFIG
    /// REWRITE writes these as the file's `user` lines: its caller puts the live users here
    /// first (Redis's rewriteConfigUserOption), or none with an `aclfile`.
    pub acl_users: Vec<Vec<String>>,
    /// How deep `include` currently nests (a loop of includes is an error, not a hang).
    include_depth: usize,
    /// The startup config (file and command line) is being read: a `save` line then adds
    /// to the ones before it instead of replacing them (Redis's reading_config_file).
    reading_file: bool,
    /// A `save` line was read at startup: the first one replaced the defaults, the next
    /// ones add to it (Redis's save_loaded).
    save_loaded: bool,
    /// The command table's names, which rename-command is checked against. Given by whoever
    /// loads the config ([`Config::load`], [`Config::with_command_names`]): the command
    /// layer sits above config. Empty: every rename-command is refused (no such command).
    command_names: Arc<[String]>,
}

/// The node's published configuration. Readers take the current snapshot without a lock
/// ([`Shared::read`]: one `ArcSwap::load`, cheap enough for every command); CONFIG SET,
/// CONFIG REWRITE and the config file load build a whole new [`Config`] and publish it, so
/// a reader never sees half of a multi-directive CONFIG SET.
pub struct Shared {
    cur: ArcSwap<Config>,
    /// Bumped after every publish: a reader that loaded a snapshot earlier can tell with one
    /// relaxed load whether it is still current ([`Shared::generation`]).
    generation: std::sync::atomic::AtomicU64,
    /// Serialises writers: two CONFIG SETs must not both start from the same snapshot and
    /// lose one's change.
    writer: parking_lot::Mutex<()>,
}

impl Shared {
    pub fn new(c: Config) -> Shared {
        Shared {
            cur: ArcSwap::from_pointee(c),
            generation: std::sync::atomic::AtomicU64::new(0),
            writer: parking_lot::Mutex::new(()),
        }
    }

    /// The current snapshot. Hold it only briefly (not across an await or a long job; use
    /// [`Shared::snapshot`] then).
    #[inline]
    pub fn read(&self) -> arc_swap::Guard<Arc<Config>> {
        self.cur.load()
    }

    /// Counts the snapshots published so far. A command loads one snapshot for its checks
    /// and its stats; when this moved meanwhile (it ran CONFIG SET) the stats read a fresh
    /// one, without paying a second load for every other command.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The current snapshot with the [`Shared::generation`] it is at least as new as.
    #[inline]
    pub fn read_marked(&self) -> (u64, arc_swap::Guard<Arc<Config>>) {
        let g = self.generation();
        (g, self.cur.load())
    }

    /// [`Shared::read_marked`], owned: for a reader that keeps the snapshot across awaits
    /// while its generation stays current.
    #[inline]
    pub fn snapshot_marked(&self) -> (u64, Arc<Config>) {
        let g = self.generation();
        (g, self.cur.load_full())
    }

    /// The current snapshot, owned.
    pub fn snapshot(&self) -> Arc<Config> {
        self.cur.load_full()
    }

    /// Applies `f` to a copy of the current config and publishes it, or publishes nothing
    /// when `f` fails (CONFIG SET's all-or-nothing multi-set).
    pub fn update<T, E>(&self, f: impl FnOnce(&mut Config) -> Result<T, E>) -> Result<T, E> {
        let _w = self.writer.lock();
        let mut next = Config::clone(&self.cur.load());
        let r = f(&mut next)?;
        self.cur.store(Arc::new(next));
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        Ok(r)
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Shared").field(&**self.cur.load()).finish()
    }
}

/// Includes nested deeper than this are refused (Redis has no limit; a file including
/// itself would otherwise recurse until the stack overflows).
const MAX_INCLUDE_DEPTH: usize = 16;

/// A configuration error that stops the node (file/line/directive/reason).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("Fatal error, can't open config file '{path}': {reason}")]
    Unreadable { path: String, reason: String },
    #[error("\n*** FATAL CONFIG FILE ERROR (tessera-node) ***\nReading the configuration file{}, at line {line}\n>>> '{text}'\n{reason}", source_name(.file))]
    Line {
        file: Option<String>,
        line: usize,
        text: String,
        reason: String,
    },
}

fn source_name(f: &Option<String>) -> String {
    match f {
        Some(f) => format!(" {f}"),
        None => " (command line)".to_string(),
    }
}

/// Parses a memory amount like Redis's `memtoull`: 1k=1000, 1kb=1024, m/mb, g/gb.
pub fn parse_memory(s: &str) -> Option<u64> {
    let l = s.to_ascii_lowercase();
    let (num, mul) = [
        ("gb", 1u64 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
        ("g", 1_000_000_000),
        ("m", 1_000_000),
        ("k", 1_000),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suf, m)| l.strip_suffix(suf).map(|n| (n.to_string(), *m)))
    .unwrap_or((l.clone(), 1));
    // As memtoull: no digits at all ("" or "kb") reads as 0.
    if num.is_empty() {
        return Some(0);
    }
    if !num.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    num.parse::<u64>().ok()?.checked_mul(mul)
}

/// Parses an integer as Redis's string2ll: an optional '-', then digits without a leading
/// zero (only "0" itself), no '+', no spaces, no overflow.
pub fn parse_ll(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let ok = s == "0"
        || (digits
            .as_bytes()
            .first()
            .is_some_and(|c| (b'1'..=b'9').contains(c))
            && digits.bytes().all(|c| c.is_ascii_digit()));
    if ok {
        s.parse().ok()
    } else {
        None
    }
}

/// Redis's proc-title-template check: every `{variable}` known, braces balanced, and
/// something left once expanded with an empty title.
fn valid_title_template(t: &str) -> bool {
    const VARS: &[&str] = &[
        "title",
        "listen-addr",
        "server-mode",
        "port",
        "tls-port",
        "unixsocket",
        "config-file",
    ];
    let mut out = String::new();
    let mut rest = t;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{") {
            out.push('{');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            out.push('}');
            rest = after;
        } else if let Some(after) = tail.strip_prefix('{') {
            let Some(end) = after.find('}') else {
                return false;
            };
            let var = &after[..end];
            if !VARS.contains(&var) {
                return false;
            }
            if var != "title" {
                out.push('x');
            }
            rest = &after[end + 1..];
        } else {
            return false;
        }
    }
    out.push_str(rest);
    !out.trim_matches(' ').is_empty()
}

/// A latency-tracking-info-percentiles value as Redis prints it (CONFIG GET and INFO's
/// `p<label>=`): "%f" with the trailing zeros trimmed.
pub fn percentile_label(p: f64) -> String {
    let f = format!("{p:.6}");
    f.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A new `dir` as Redis's chdir() leaves it: a relative path starts from the current `dir`
/// (Redis changes directory at once, so `dir` lines and CONFIG SETs compound), the directory
/// must exist, and it is kept absolute (what CONFIG GET shows and files are joined to; the
/// node itself never changes directory, several servers can share a process).
fn resolve_dir(cur: &str, new: &str) -> Result<String, String> {
    let p = Path::new(cur).join(new);
    match std::fs::canonicalize(&p) {
        Ok(abs) if abs.is_dir() => Ok(abs.display().to_string()),
        Ok(_) => Err("Not a directory".into()),
        // strerror's words, without Rust's " (os error N)".
        Err(e) => {
            let text = e.to_string();
            Err(text.split(" (os error").next().unwrap_or(&text).to_string())
        }
    }
}

/// Redis's error for a value outside an enum's options.
fn one_of(opts: &[&str]) -> String {
    format!(
        "argument(s) must be one of the following: {}",
        opts.join(", ")
    )
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

impl Default for Config {
    fn default() -> Self {
        let mut values = BTreeMap::new();
        for d in DIRECTIVES {
            if !matches!(d.kind, Kind::Special) || d.name != "client-output-buffer-limit" {
                values.insert(d.name, d.default.to_string());
            }
        }
        let mut c = Config {
            typed: Settings::decode_from(|n| {
                Cow::Borrowed(values.get(n).map_or("", |v| v.as_str()))
            }),
            values,
            notify_flags: 0,
            cobl: [
                BufLimit::default(),
                BufLimit {
                    hard: 256 << 20,
                    soft: 64 << 20,
                    soft_secs: 60,
                },
                BufLimit {
                    hard: 32 << 20,
                    soft: 8 << 20,
                    soft_secs: 60,
                },
            ],
            file: None,
            bind_explicit: false,
            renames: Vec::new(),
            acl_users: Vec::new(),
            include_depth: 0,
            reading_file: false,
            save_loaded: false,
            command_names: Arc::from(Vec::new()),
        };
        c.refresh_typed();
        c
    }
}

impl Config {
    /// A directive's normalised value as [`Settings`] decodes it.
    fn shown(&self, name: &'static str) -> Cow<'_, str> {
        match name {
            // Kept as BufLimits, shown as CONFIG GET formats them.
            "client-output-buffer-limit" => Cow::Owned(self.get(name).unwrap_or_default()),
            _ => Cow::Borrowed(self.values.get(name).map_or("", |v| v.as_str())),
        }
    }

    /// Rebuilds [`Settings`] from the values (after every change).
    fn refresh_typed(&mut self) {
        self.typed = Settings::decode_from(|n| self.shown(n));
    }

    /// The default config, with the command names rename-command lines are checked against.
    pub fn with_command_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Config {
        Config {
            command_names: names.into_iter().map(str::to_string).collect(),
            ..Config::default()
        }
    }

    /// Builds the config from an optional file and the command line's options (as
    /// [`parse_args`] joins them, or `(directive, args)` pairs); `command_names` is the
    /// command table rename-command lines are checked against.
    pub fn load<'a>(
        file: Option<&Path>,
        cli: &(impl CliOptions + ?Sized),
        command_names: impl IntoIterator<Item = &'a str>,
    ) -> Result<Config, ConfigError> {
        let mut c = Config::with_command_names(command_names);
        c.reading_file = true;
        // As Redis, the options are lines appended to the file's text after a newline, so
        // they are numbered on from the file's last line.
        let mut first_option_line = 2;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Unreadable {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
            let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            c.file = Some(abs);
            first_option_line += text.matches('\n').count();
            c.apply_text(&text, Some(path.display().to_string()))?;
        }
        c.apply_lines(&cli.options_text(), None, first_option_line)?;
        c.reading_file = false;
        Ok(c)
    }

    /// Applies redis.conf text; errors name the line.
    pub fn apply_text(&mut self, text: &str, file: Option<String>) -> Result<(), ConfigError> {
        self.apply_lines(text, file, 1)
    }

    /// Applies config text whose first line is line `first` of its source.
    fn apply_lines(
        &mut self,
        text: &str,
        file: Option<String>,
        first: usize,
    ) -> Result<(), ConfigError> {
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |reason: String| ConfigError::Line {
                file: file.clone(),
                line: n + first,
                text: line.to_string(),
                reason,
            };
            let words = split_words(line)
                .ok_or_else(|| err("Unbalanced quotes in configuration line".into()))?;
            let Some((name, args)) = words.split_first() else {
                continue;
            };
            if name.eq_ignore_ascii_case("include") {
                let [path] = args else {
                    return Err(err("Bad directive or wrong number of arguments".into()));
                };
                self.include(path).map_err(|e| match e {
                    // The included file's own error names its file and line.
                    e @ ConfigError::Line { .. } => e,
                    ConfigError::Unreadable { path, reason } => err(format!(
                        "Fatal error, can't open config file '{path}': {reason}"
                    )),
                })?;
                continue;
            }
            // Redis's MULTI_ARG_CONFIGs given one non-empty argument split it again, so
            // `--replicaof "host port"` and `save "900 1"` mean what two words would.
            let split;
            let args = match args {
                [one]
                    if !one.is_empty()
                        && MULTI_ARG.contains(&name.to_ascii_lowercase().as_str()) =>
                {
                    split = split_words(one)
                        .ok_or_else(|| err("Unbalanced quotes in configuration line".into()))?;
                    &split[..]
                }
                _ => args,
            };
            self.apply_line(name, args).map_err(err)?;
        }
        Ok(())
    }

    /// `include path`: the file's lines are read where the include stands (a path relative
    /// to the working directory, as Redis).
    fn include(&mut self, path: &str) -> Result<(), ConfigError> {
        if self.include_depth >= MAX_INCLUDE_DEPTH {
            return Err(ConfigError::Unreadable {
                path: path.to_string(),
                reason: format!("includes nested more than {MAX_INCLUDE_DEPTH} deep"),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Unreadable {
            path: path.to_string(),
            reason: e.to_string(),
        })?;
        self.include_depth += 1;
        let r = self.apply_text(&text, Some(path.to_string()));
        self.include_depth -= 1;
        r
    }

    /// One directive from a file or the command line, including the ones that are not
    /// settings (rename-command) and the ones tessera refuses with a reason.
    pub fn apply_line(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        match name.to_ascii_lowercase().as_str() {
            "rename-command" => {
                let [old, new] = args else {
                    return Err("Bad directive or wrong number of arguments".into());
                };
                let (old, new) = (old.to_ascii_lowercase(), new.to_ascii_lowercase());
                // Checked against the table as the renames so far left it, as Redis does.
                let mut names: Vec<String> = self.command_names.to_vec();
                for (o, n) in &self.renames {
                    names.retain(|x| x != o);
                    if !n.is_empty() {
                        names.push(n.clone());
                    }
                }
                if !names.contains(&old) {
                    return Err("No such command in rename-command".into());
                }
                if !new.is_empty() && names.contains(&new) && new != old {
                    return Err("Target command name already exists".into());
                }
                self.renames.push((old, new));
                Ok(())
            }
            "include" => {
                let [path] = args else {
                    return Err("Bad directive or wrong number of arguments".into());
                };
                self.include(path)
                    .map_err(|e| e.to_string().trim().to_string())
            }
            "user" => {
                crate::acl::validate_config_user(args, &self.acl_users)?;
                self.acl_users.push(args.to_vec());
                Ok(())
            }
            "loadmodule" => Err("Redis modules are not supported by tessera-node".into()),
            _ => self.set_directive(name, args),
        }
    }

    /// Validates and stores one directive. The error is the reason text Redis prints.
    pub fn set_directive(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        let lname = name.to_ascii_lowercase();
        let d = find(&lname).ok_or("Bad directive or wrong number of arguments")?;
        let val = match d.kind {
            Kind::Special => {
                let r = self.set_special(d.name, args);
                self.refresh_typed();
                return r;
            }
            _ if args.len() != 1 => {
                return Err("wrong number of arguments".into());
            }
            Kind::Bool => {
                if parse_bool(&args[0]).ok_or("argument must be 'yes' or 'no'")? {
                    "yes".to_string()
                } else {
                    "no".to_string()
                }
            }
            Kind::Int { min, max } => {
                let v = parse_ll(&args[0])
                    .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
                if v < min || v > max {
                    return Err(format!(
                        "argument must be between {min} and {max} inclusive"
                    ));
                }
                // Redis clamps these where it applies them, and shows the clamped value.
                match d.name {
                    "hz" => v.clamp(1, 500).to_string(),
                    _ => v.to_string(),
                }
            }
            Kind::Mem { min, max } => {
                let v = parse_memory(&args[0]).ok_or("argument must be a memory value")?;
                if v < min || v > max {
                    return Err(format!(
                        "argument must be between {min} and {max} inclusive"
                    ));
                }
                match d.name {
                    // Redis's smallest replication backlog.
                    "repl-backlog-size" => v.max(16 * 1024).to_string(),
                    _ => v.to_string(),
                }
            }
            Kind::SignedMem { min, max } => {
                let v = match args[0].strip_prefix('-') {
                    Some(_) => parse_ll(&args[0]),
                    None => parse_memory(&args[0]).and_then(|v| i64::try_from(v).ok()),
                }
                .ok_or("argument must be a memory value")?;
                if v < min || v > max {
                    return Err(format!(
                        "argument must be between {min} and {max} inclusive"
                    ));
                }
                v.to_string()
            }
            Kind::Octal { max } => {
                let v = i64::from_str_radix(&args[0], 8)
                    .ok()
                    .filter(|_| !args[0].starts_with(['+', '-']))
                    .ok_or("argument couldn't be parsed as an octal number")?;
                if v > max {
                    return Err(format!("argument must be between 0 and {max} inclusive"));
                }
                format!("{v:o}")
            }
            Kind::Enum(opts) => {
                let l = args[0].to_ascii_lowercase();
                if !opts.contains(&l.as_str()) {
                    return Err(one_of(opts));
                }
                l
            }
            Kind::Str if d.name == "notify-keyspace-events" => {
                let (shown, bits) = keyspace_events::normalize(&args[0])?;
                self.notify_flags = bits;
                shown
            }
            Kind::Str if d.name == "cluster-announce-hostname" => {
                // Redis's isValidAnnouncedHostname: under NET_HOST_STR_LEN (256) bytes.
                if args[0].len() >= 256 {
                    return Err("Hostnames must be less than 256 characters".into());
                }
                if !args[0]
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
                {
                    return Err(
                        "Hostnames may only contain alphanumeric characters, hyphens or dots"
                            .into(),
                    );
                }
                args[0].clone()
            }
            Kind::Str if d.name == "dir" => resolve_dir(
                self.values.get("dir").map_or("./", |v| v.as_str()),
                &args[0],
            )?,
            Kind::Str if d.name == "proc-title-template" => {
                if !valid_title_template(&args[0]) {
                    return Err("template format is invalid or contains unknown variables".into());
                }
                args[0].clone()
            }
            Kind::Str => args[0].clone(),
        };
        // Tessera has no active defragmenter; Redis gives this answer when it has none.
        if d.name == "activedefrag" && val == "yes" {
            return Err("Active defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc like the one shipped by default with the Redis source distribution".into());
        }
        // Old listpack/ziplist names are aliases of each other.
        let alias = match d.name {
            "hash-max-ziplist-entries" => Some("hash-max-listpack-entries"),
            "hash-max-ziplist-value" => Some("hash-max-listpack-value"),
            "zset-max-ziplist-entries" => Some("zset-max-listpack-entries"),
            "zset-max-ziplist-value" => Some("zset-max-listpack-value"),
            "list-max-ziplist-size" => Some("list-max-listpack-size"),
            "hash-max-listpack-entries" => Some("hash-max-ziplist-entries"),
            "hash-max-listpack-value" => Some("hash-max-ziplist-value"),
            "zset-max-listpack-entries" => Some("zset-max-ziplist-entries"),
            "zset-max-listpack-value" => Some("zset-max-ziplist-value"),
            "list-max-listpack-size" => Some("list-max-ziplist-size"),
            // Redis 7.0 renamed lua-time-limit; both names are one setting.
            "lua-time-limit" => Some("busy-reply-threshold"),
            "busy-reply-threshold" => Some("lua-time-limit"),
            _ => None,
        };
        if let Some(a) = alias {
            self.values.insert(a, val.clone());
        }
        self.values.insert(d.name, val);
        self.refresh_typed();
        Ok(())
    }

    fn set_special(&mut self, name: &'static str, args: &[String]) -> Result<(), String> {
        match name {
            "maxmemory-clients" => {
                let [v] = args else {
                    return Err("wrong number of arguments".into());
                };
                let shown = match v.strip_suffix('%') {
                    Some(p) => {
                        let p: i64 = p
                            .parse()
                            .map_err(|_| "argument must be a memory or percent value")?;
                        if p > 100 {
                            return Err("percentage argument must be less or equal to 100".into());
                        }
                        if p < 0 {
                            return Err("argument must be a memory or percent value".into());
                        }
                        if p == 0 {
                            "0".to_string()
                        } else {
                            format!("{p}%")
                        }
                    }
                    None => parse_memory(v)
                        .filter(|m| *m <= i64::MAX as u64)
                        .ok_or("argument must be a memory or percent value")?
                        .to_string(),
                };
                self.values.insert(name, shown);
            }
            "oom-score-adj-values" => {
                let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
                if words.len() != 3 {
                    return Err("wrong number of arguments".into());
                }
                let mut vals = Vec::with_capacity(3);
                for w in words {
                    match w.parse::<i64>() {
                        Ok(v) if (-2000..=2000).contains(&v) => vals.push(v.to_string()),
                        _ => {
                            return Err("Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into())
                        }
                    }
                }
                self.values.insert(name, vals.join(" "));
            }
            "shutdown-on-sigint" | "shutdown-on-sigterm" => {
                // `failover` is valkey 9's (persist::shutdown); the error lists Redis 7.0's.
                const FLAGS: [&str; 6] = ["default", "save", "nosave", "now", "force", "failover"];
                let words: Vec<String> = args
                    .iter()
                    .flat_map(|a| a.split_whitespace())
                    .map(|w| w.to_ascii_lowercase())
                    .collect();
                let mut set = [false; 6];
                if words.is_empty() {
                    return Err(one_of(&FLAGS[..5]));
                }
                for w in &words {
                    let i = FLAGS
                        .iter()
                        .position(|f| f == w)
                        .ok_or_else(|| one_of(&FLAGS[..5]))?;
                    set[i] = true;
                }
                if set[1] && set[2] {
                    return Err(
                        "shutdown options SAVE and NOSAVE can't be used simultaneously".into(),
                    );
                }
                let shown: Vec<&str> = (1..6).filter(|&i| set[i]).map(|i| FLAGS[i]).collect();
                self.values.insert(
                    name,
                    if shown.is_empty() {
                        "default".to_string()
                    } else {
                        shown.join(" ")
                    },
                );
            }
            "latency-tracking-info-percentiles" => {
                let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
                let mut shown = Vec::with_capacity(words.len());
                for w in words {
                    let p: f64 = w
                        .parse()
                        .ok()
                        .filter(|p: &f64| !p.is_nan())
                        .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
                    if !(0.0..=100.0).contains(&p) {
                        return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into());
                    }
                    shown.push(percentile_label(p));
                }
                self.values.insert(name, shown.join(" "));
            }
            "bind" => {
                // No address (or one empty word, Redis's `bind ""`) listens on no TCP
                // address; CONFIG SET bind "" relies on it.
                let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
                if words.len() > BIND_ADDR_MAX {
                    return Err("Too many bind addresses specified.".into());
                }
                // An address is a host name or IP literal: one printable ASCII word. Quotes,
                // backslashes and control bytes (NUL included) could never bind, and a
                // rewritten `bind` line holding them would load back as other words.
                let bindable = |w: &str| {
                    w.bytes()
                        .all(|c| c.is_ascii_graphic() && !matches!(c, b'"' | b'\'' | b'\\'))
                };
                if !words.iter().all(|w| bindable(w)) {
                    return Err("Failed to bind to specified addresses.".into());
                }
                self.bind_explicit = true;
                self.values.insert(name, words.join(" "));
            }
            "save" => {
                let joined: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
                // As Redis: seconds at least 1, changes at least 0.
                let nums: Option<Vec<i64>> = joined
                    .iter()
                    .enumerate()
                    .map(|(i, w)| w.parse::<i64>().ok().filter(|v| *v >= 1 - (i % 2) as i64))
                    .collect();
                let nums = match nums {
                    Some(n) if n.len().is_multiple_of(2) => n,
                    _ => return Err("Invalid save parameters".into()),
                };
                let mut shown: Vec<String> = Vec::new();
                // Reading the startup config, the first save line replaces the defaults and
                // the next ones add to it; an empty one clears (Redis's save_loaded).
                if self.reading_file && self.save_loaded && !nums.is_empty() {
                    if let Some(cur) = self.values.get(name).filter(|v| !v.is_empty()) {
                        shown.push(cur.clone());
                    }
                }
                if self.reading_file {
                    self.save_loaded = true;
                }
                shown.extend(nums.iter().map(i64::to_string));
                self.values.insert(name, shown.join(" "));
            }
            "replicaof" => {
                let [host, port] = args else {
                    return Err("wrong number of arguments".into());
                };
                if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") {
                    self.values.insert(name, String::new());
                    return Ok(());
                }
                let port = port
                    .parse::<i64>()
                    .ok()
                    .filter(|p| (0..=65535).contains(p))
                    .ok_or("Invalid master port")?;
                self.values.insert(name, format!("{host} {port}"));
            }
            "client-output-buffer-limit" => {
                let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
                if words.is_empty() {
                    // As Redis: nothing given, nothing changed.
                    return Ok(());
                }
                if !words.len().is_multiple_of(4) {
                    return Err("Wrong number of arguments in buffer limit configuration.".into());
                }
                let mut new = self.cobl;
                for ch in words.chunks(4) {
                    let class = match ch[0].to_ascii_lowercase().as_str() {
                        "normal" => 0,
                        "slave" | "replica" => 1,
                        "pubsub" => 2,
                        _ => {
                            return Err(
                                "Invalid client class specified in buffer limit configuration."
                                    .into(),
                            )
                        }
                    };
                    let hard = parse_memory(ch[1]);
                    let soft = parse_memory(ch[2]);
                    let secs = ch[3].parse::<u64>().ok();
                    match (hard, soft, secs) {
                        (Some(hard), Some(soft), Some(soft_secs)) => {
                            new[class] = BufLimit {
                                hard,
                                soft,
                                soft_secs,
                            }
                        }
                        _ => return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into()),
                    }
                }
                self.cobl = new;
            }
            _ => return Err("Bad directive or wrong number of arguments".into()),
        }
        Ok(())
    }

    /// The CONFIG GET value of a directive (or of an alias' directive).
    pub fn get(&self, name: &str) -> Option<String> {
        let name = directives::canonical(name);
        if name == "client-output-buffer-limit" {
            let c = &self.cobl;
            return Some(format!(
                "normal {} {} {} slave {} {} {} pubsub {} {} {}",
                c[0].hard,
                c[0].soft,
                c[0].soft_secs,
                c[1].hard,
                c[1].soft,
                c[1].soft_secs,
                c[2].hard,
                c[2].soft,
                c[2].soft_secs
            ));
        }
        if name == "dir" {
            // The default "./" until a `dir` is set (then already absolute): shown absolute,
            // as Redis's getcwd().
            let d = self.values.get(name).map_or("./", |v| v.as_str());
            return Some(
                std::fs::canonicalize(d)
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| d.to_string()),
            );
        }
        self.values.get(name).cloned()
    }

    /// Where the log goes: None for stdout (`logfile ""`). A relative `logfile` names a file
    /// in `dir`, wherever the two stand in the config: Redis applies config lines in order,
    /// `dir` changes directory at once and the log is opened after (Redis 7.0 opens it at
    /// every write), so `dir ./redis_1` then `logfile log.txt` logs to redis_1/log.txt.
    pub fn log_path(&self) -> Option<PathBuf> {
        let f = &self.typed.logfile;
        if f.is_empty() {
            return None;
        }
        Some(self.typed.dir.join(f))
    }

    /// All directive names and old aliases (CONFIG GET pattern matching, as Redis lists
    /// both).
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        DIRECTIVES
            .iter()
            .map(|d| d.name)
            .chain(directives::ALIASES.iter().map(|(a, _)| *a))
    }

    /// CONFIG REWRITE: rewrites the file in place, replacing known directives' lines with
    /// current values and appending the ones that differ from their defaults.
    pub fn rewrite(&self) -> Result<(), String> {
        self.rewrite_file(false)
    }

    /// DEBUG CONFIG-REWRITE-FORCE-ALL: as [`Config::rewrite`], appending every directive,
    /// defaults included (Redis's rewriteConfig with force_write).
    pub fn rewrite_force_all(&self) -> Result<(), String> {
        self.rewrite_file(true)
    }

    fn rewrite_file(&self, force_all: bool) -> Result<(), String> {
        let Some(path) = &self.file else {
            return Err("The server is running without a config file".into());
        };
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let mut done = std::collections::HashSet::new();
        let mut out = String::new();
        // Users go where the old `user` lines stood, the rest at the end; with an aclfile
        // the users live there and every `user` line goes (rewriteConfigUserOption).
        let user_lines: Vec<String> = if self.typed.aclfile.is_empty() {
            self.acl_users
                .iter()
                .map(|u| format!("user {}", u.join(" ")))
                .collect()
        } else {
            Vec::new()
        };
        let mut user_lines = user_lines.into_iter();
        for raw in text.lines() {
            let line = raw.trim();
            if !line.starts_with('#')
                && line
                    .split_whitespace()
                    .next()
                    .is_some_and(|n| n.eq_ignore_ascii_case("user"))
            {
                if let Some(u) = user_lines.next() {
                    out.push_str(&u);
                    out.push('\n');
                }
                continue;
            }
            let name = line.split_whitespace().next().map(|n| {
                rewritten_name(directives::canonical(&n.to_ascii_lowercase())).to_string()
            });
            match name.as_deref().and_then(find) {
                Some(d) if !line.starts_with('#') => {
                    // A master's file keeps no replicaof line (Redis has no "none" value).
                    let no_master =
                        d.name == "replicaof" && self.get(d.name).unwrap_or_default().is_empty();
                    if done.insert(d.name) && !no_master {
                        out.push_str(&self.directive_line(d.name));
                        out.push('\n');
                    }
                }
                _ => {
                    out.push_str(raw);
                    out.push('\n');
                }
            }
        }
        let mut appended = false;
        for d in DIRECTIVES {
            if done.contains(d.name) || rewritten_name(d.name) != d.name {
                continue;
            }
            let cur = self.get(d.name).unwrap_or_default();
            let default = if d.name == "client-output-buffer-limit" {
                Config::default().get(d.name).unwrap_or_default()
            } else {
                d.default.to_string()
            };
            // Forced, every directive is written, except replicaof when not a replica (as
            // Redis: it has no "none" value).
            let forced = force_all && !(d.name == "replicaof" && cur.is_empty());
            if forced || (d.name != "dir" && cur != default) {
                if !appended {
                    out.push_str("# Generated by CONFIG REWRITE\n");
                    appended = true;
                }
                out.push_str(&self.directive_line(d.name));
                out.push('\n');
            }
        }
        for u in user_lines {
            if !appended {
                out.push_str("# Generated by CONFIG REWRITE\n");
                appended = true;
            }
            out.push_str(&u);
            out.push('\n');
        }
        let tmp = path.with_extension("tmp-rewrite");
        std::fs::write(&tmp, out).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, path).map_err(|e| e.to_string())
    }

    fn directive_line(&self, name: &str) -> String {
        let v = self.get(name).unwrap_or_default();
        match name {
            // The host is everything before the port, spaces or control bytes included: one
            // quoted word, so the line loads back as two arguments. (Redis writes the host
            // raw, and a host with a space would not load back.)
            "replicaof" if !v.is_empty() => match v.rsplit_once(' ') {
                Some((host, port)) => format!("{name} {} {port}", quote(host)),
                None => format!("{name} {}", quote(&v)),
            },
            // Several words: each quoted on its own (the numeric ones never need it).
            "save" | "bind" | "client-output-buffer-limit" if !v.is_empty() => {
                let words: Vec<String> = v.split(' ').map(quote).collect();
                format!("{name} {}", words.join(" "))
            }
            _ => format!("{name} {}", quote(&v)),
        }
    }
}

/// The name CONFIG REWRITE writes a setting under: an old name's line becomes its new
/// name's (Redis 7.0 rewrites `hash-max-ziplist-entries 21` as `hash-max-listpack-entries`,
/// once), so a file naming both loads back to the value CONFIG SET gave.
fn rewritten_name(name: &str) -> &str {
    match name {
        "hash-max-ziplist-entries" => "hash-max-listpack-entries",
        "hash-max-ziplist-value" => "hash-max-listpack-value",
        "zset-max-ziplist-entries" => "zset-max-listpack-entries",
        "zset-max-ziplist-value" => "zset-max-listpack-value",
        "list-max-ziplist-size" => "list-max-listpack-size",
        "lua-time-limit" => "busy-reply-threshold",
        other => other,
    }
}

/// A value as one word of a config line, as Redis's sdscatrepr writes it when it is not
/// a plain word: any space, quote, backslash or control byte is quoted and escaped, so the
/// line reads back to the same bytes (a raw NUL or form feed would split the value).
fn quote(v: &str) -> String {
    let plain = |c: u8| c > b' ' && c != 0x7f && c != b'"' && c != b'\'' && c != b'\\';
    if !v.is_empty() && v.bytes().all(plain) {
        return v.to_string();
    }
    let mut s = String::from("\"");
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if c.is_ascii_control() => s.push_str(&format!("\\x{:02x}", c as u8)),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// A config line's words as Redis's sdssplitargs splits them (None: unbalanced quotes).
fn split_words(line: &str) -> Option<Vec<String>> {
    crate::resp::parser::split_args(line.as_bytes()).map(|ws| {
        ws.into_iter()
            .map(|w| String::from_utf8_lossy(&w).into_owned())
            .collect()
    })
}

/// Redis's CONFIG_BINDADDR_MAX: at most this many `bind` addresses.
const BIND_ADDR_MAX: usize = 16;

/// Redis 7.0's MULTI_ARG_CONFIG directives: one argument holding several words is split.
const MULTI_ARG: [&str; 9] = [
    "shutdown-on-sigint",
    "shutdown-on-sigterm",
    "save",
    "client-output-buffer-limit",
    "oom-score-adj-values",
    "bind",
    "replicaof",
    "slaveof",
    "latency-tracking-info-percentiles",
];

/// The command line's options as config text: Redis's main() turns
/// `--port 6380 --save "" x` into the lines `port "6380"` and `save "" "x"`, read after the
/// config file. Also `(directive, args)` pairs, one line each.
pub trait CliOptions {
    fn options_text(&self) -> String;
}

impl CliOptions for str {
    fn options_text(&self) -> String {
        self.to_string()
    }
}

impl CliOptions for String {
    fn options_text(&self) -> String {
        self.clone()
    }
}

impl CliOptions for [(String, Vec<String>)] {
    fn options_text(&self) -> String {
        self.iter()
            .map(|(name, args)| {
                let mut line = name.clone();
                for a in args {
                    line.push(' ');
                    line.push_str(&repr(a));
                }
                line
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl CliOptions for Vec<(String, Vec<String>)> {
    fn options_text(&self) -> String {
        self.as_slice().options_text()
    }
}

/// A value quoted as Redis's sdscatrepr writes it (always in quotes), which config lines
/// read back to the same bytes.
fn repr(v: &str) -> String {
    let mut s = String::from("\"");
    for b in v.bytes() {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            7 => s.push_str("\\a"),
            8 => s.push_str("\\b"),
            b' '..=b'~' => s.push(char::from(b)),
            b => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    s
}

/// Parses the node's command line: `[file.conf] [--directive value...]`, into the file and
/// the options as config text, exactly as Redis 7.0's main(): `--name` starts a line; the
/// arguments after it are its values (quoted), even ones that start with `--` while the
/// name has none yet; `"--name value"` in one argument is a whole line; `--save` with no
/// value is `save ""`.
pub fn parse_args(args: &[String]) -> (Option<PathBuf>, String) {
    let mut file = None;
    let mut rest = args;
    if let Some((first, tail)) = args.split_first() {
        if !first.starts_with('-') {
            file = Some(PathBuf::from(first));
            rest = tail;
        }
    }
    let mut options = String::new();
    // The last option's name has had a value (or needs none).
    let mut handled = true;
    for (j, a) in rest.iter().enumerate() {
        let next_is_option = rest.get(j + 1).is_some_and(|n| n.starts_with("--"));
        let last = j + 1 == rest.len();
        match a.strip_prefix("--") {
            Some(name) if handled => {
                if !options.is_empty() {
                    options.push('\n');
                }
                options.push_str(name);
                options.push(' ');
                let words = crate::resp::parser::split_args(a.as_bytes()).map_or(0, |w| w.len());
                if words == 1 {
                    handled = false;
                    if a.eq_ignore_ascii_case("--save") && (next_is_option || last) {
                        options.push_str("\"\"");
                        handled = next_is_option;
                    }
                } else {
                    handled = true;
                }
            }
            _ => {
                options.push_str(&repr(a));
                options.push(' ');
                handled = true;
            }
        }
    }
    (file, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1kb"), Some(1024));
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("100MB"), Some(100 << 20));
        assert_eq!(parse_memory("x"), None);
    }

    #[test]
    fn file_errors_name_line() {
        let mut c = Config::default();
        let e = c
            .apply_text("port 7000\n\nport abc\n", Some("/x.conf".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/x.conf, at line 3"), "{e}");
        assert!(e.contains("'port abc'"), "{e}");
        assert!(e.contains("integer"), "{e}");
        let e = c.apply_text("nosuch 1\n", None).unwrap_err().to_string();
        assert!(e.contains("Bad directive"), "{e}");
    }

    #[test]
    fn specials() {
        let mut c = Config::default();
        c.apply_text(
            "save \"\"\nclient-output-buffer-limit pubsub 1mb 512kb 10\n",
            None,
        )
        .unwrap();
        assert_eq!(c.get("save").unwrap(), "");
        assert_eq!(c.cobl[2].hard, 1 << 20);
        let (f, a) = parse_args(&[
            "a.conf".into(),
            "--port".into(),
            "7000".into(),
            "--save".into(),
            "".into(),
        ]);
        assert_eq!(f.unwrap().to_str().unwrap(), "a.conf");
        assert_eq!(a, "port \"7000\" \nsave \"\" ");
    }

    /// Every directive's typed field reads its value: the defaults, every option of every
    /// enum, both ends of every range and the multi-word ones (a value the decoder could
    /// not read would silently fall back to the default).
    #[test]
    fn every_directive_decodes_into_its_field() {
        let c = Config::default();
        assert_eq!(Settings::undecodable(|n| c.shown(n)), Vec::<&str>::new());
        let mut samples: Vec<(&'static str, Vec<String>)> = Vec::new();
        for d in DIRECTIVES {
            let vals: Vec<Vec<String>> = match d.kind {
                Kind::Bool => vec![vec!["yes".into()], vec!["no".into()]],
                Kind::Int { min, max } => vec![vec![min.to_string()], vec![max.to_string()]],
                Kind::Mem { min, max } => vec![vec![min.to_string()], vec![max.to_string()]],
                Kind::SignedMem { min, max } => {
                    vec![
                        vec![min.to_string()],
                        vec!["1mb".into()],
                        vec![max.to_string()],
                    ]
                }
                Kind::Octal { max } => vec![vec![format!("{max:o}")]],
                Kind::Enum(opts) => opts.iter().map(|o| vec![o.to_string()]).collect(),
                Kind::Str => vec![vec!["a b".into()]],
                Kind::Special => match d.name {
                    "save" => vec![vec!["".into()], vec!["10 1 20 2".into()]],
                    "bind" => vec![vec!["127.0.0.1".into(), "::1".into()]],
                    "replicaof" => vec![vec!["10.0.0.1".into(), "6380".into()]],
                    "client-output-buffer-limit" => {
                        vec![vec![
                            "pubsub".into(),
                            "1mb".into(),
                            "2kb".into(),
                            "3".into(),
                        ]]
                    }
                    "latency-tracking-info-percentiles" => {
                        vec![vec!["".into()], vec!["50 99.9".into()]]
                    }
                    "maxmemory-clients" => vec![vec!["10%".into()], vec!["1mb".into()]],
                    "oom-score-adj-values" => vec![vec!["0 -200 2000".into()]],
                    _ => vec![vec!["save now".into()], vec!["default".into()]],
                },
            };
            for v in vals {
                samples.push((d.name, v));
            }
        }
        for (name, v) in samples {
            let mut c = Config::default();
            match c.set_directive(name, &v) {
                Ok(()) => {}
                // TLS switches and activedefrag are refused; some strings are checked
                // (notify-keyspace-events, hostnames): a string decodes whatever it holds.
                Err(e) => {
                    let str_kind = find(name).is_some_and(|d| matches!(d.kind, Kind::Str));
                    assert!(
                        str_kind || name.starts_with("tls") || name == "activedefrag",
                        "{name} {v:?}: {e}"
                    );
                    continue;
                }
            }
            assert_eq!(
                Settings::undecodable(|n| c.shown(n)),
                Vec::<&str>::new(),
                "after {name} {v:?}"
            );
        }
    }

    /// Fields follow the values: what CONFIG SET stores is what the node reads.
    #[test]
    fn typed_fields_follow_set() {
        let mut c = Config::default();
        assert_eq!(c.typed.maxmemory_policy, MaxmemoryPolicy::Noeviction);
        assert_eq!(c.typed.appendfsync, Appendfsync::Everysec);
        assert_eq!(c.typed.save, vec![(3600, 1), (300, 100), (60, 10000)]);
        assert_eq!(c.typed.replicaof, None);
        c.set_directive("maxmemory", &["1mb".into()]).unwrap();
        c.set_directive("maxmemory-policy", &["allkeys-lfu".into()])
            .unwrap();
        c.set_directive("appendfsync", &["always".into()]).unwrap();
        c.set_directive("slave-read-only", &["no".into()]).unwrap();
        c.set_directive("lua-time-limit", &["250".into()]).unwrap();
        c.set_directive("replicaof", &["h".into(), "7000".into()])
            .unwrap();
        c.set_directive("client-output-buffer-limit", &["normal 1 2 3".into()])
            .unwrap();
        c.set_directive("hz", &["100000".into()]).unwrap();
        let t = &c.typed;
        assert_eq!(t.maxmemory, 1 << 20);
        assert!(t.maxmemory_policy.is_lfu());
        assert_eq!(t.appendfsync, Appendfsync::Always);
        assert!(!t.replica_read_only);
        assert_eq!(t.busy_reply_threshold, 250);
        assert_eq!(t.replicaof, Some(("h".to_string(), 7000)));
        assert_eq!(t.client_output_buffer_limit, c.cobl);
        assert_eq!(t.client_output_buffer_limit[0].soft_secs, 3);
        assert_eq!(t.hz, 500);
    }

    /// A published snapshot never changes under a reader; a failed update publishes
    /// nothing (CONFIG SET's all-or-nothing).
    #[test]
    fn shared_publishes_whole_snapshots() {
        let shared = Shared::new(Config::default());
        let before = shared.read();
        shared
            .update(|c| {
                c.set_directive("maxmemory", &["100".into()])?;
                c.set_directive("timeout", &["7".into()])
            })
            .unwrap();
        assert_eq!(before.typed.maxmemory, 0, "an old snapshot is immutable");
        let now = shared.read();
        assert_eq!((now.typed.maxmemory, now.typed.timeout_secs), (100, 7));
        let r = shared.update(|c| {
            c.set_directive("maxmemory", &["200".into()])?;
            c.set_directive("timeout", &["x".into()])
        });
        assert!(r.is_err());
        assert_eq!(
            shared.read().typed.maxmemory,
            100,
            "nothing of a failed set"
        );
    }

    /// A snapshot's generation tells a command whether a CONFIG SET was published after
    /// it loaded its snapshot; a failed set publishes nothing and moves nothing.
    #[test]
    fn generation_moves_with_each_publish() {
        let shared = Shared::new(Config::default());
        let (g0, snap) = shared.read_marked();
        assert_eq!(shared.generation(), g0);
        assert!(shared
            .update(|c| c.set_directive("timeout", &["x".into()]))
            .is_err());
        assert_eq!(shared.generation(), g0, "a failed set publishes nothing");
        shared
            .update(|c| c.set_directive("slowlog-log-slower-than", &["0".into()]))
            .unwrap();
        assert_ne!(shared.generation(), g0);
        assert_eq!(
            snap.typed.slowlog_log_slower_than, 10000,
            "the old snapshot"
        );
        let (g1, now) = shared.read_marked();
        assert_eq!(
            (g1, now.typed.slowlog_log_slower_than),
            (shared.generation(), 0)
        );
    }

    /// CONFIG REWRITE's file must load back to the same values whatever bytes CONFIG SET
    /// or the file put in them (found by the config_set / config_file fuzz targets: a NUL
    /// or control byte written raw split the value, and the node did not restart).
    #[test]
    fn rewrite_round_trips_control_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.conf");
        std::fs::write(&path, "").unwrap();
        let mut c = Config {
            file: Some(path.clone()),
            ..Config::default()
        };
        c.set_directive("ignore-warnings", &["A\0\0-BUG".into()])
            .unwrap();
        c.set_directive("masterauth", &["a\x0bb\x0cc\rd\te\\f\"g'h\x7f".into()])
            .unwrap();
        c.set_directive("logfile", &["".into()]).unwrap();
        // An address with a control byte or a quote can never bind: refused up front (a
        // single such word read back from the file would be split again as `bind "a b"` is).
        for bad in [
            "-::\x01",
            "a\0b",
            "12/.0.\x00\x0007.0.",
            "a\"b",
            "a\\b",
            "a'b",
        ] {
            assert_eq!(
                c.set_directive("bind", &["127.0.0.1".into(), bad.into()]),
                Err("Failed to bind to specified addresses.".into()),
                "{bad:?}"
            );
        }
        let seventeen: Vec<String> = (1..=17).map(|i| format!("10.0.0.{i}")).collect();
        assert_eq!(
            c.set_directive("bind", &seventeen),
            Err("Too many bind addresses specified.".into())
        );
        c.set_directive("bind", &["127.0.0.1".into(), "-::1".into(), "".into()])
            .unwrap();
        // A replicaof host with a space or a NUL (from the file) is written as one word.
        c.set_directive("replicaof", &["a b\0c".into(), "6379".into()])
            .unwrap();
        c.rewrite().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut back = Config::default();
        back.apply_text(&text, None).unwrap();
        for name in [
            "ignore-warnings",
            "masterauth",
            "logfile",
            "bind",
            "replicaof",
        ] {
            assert_eq!(back.get(name), c.get(name), "{name} in:\n{text}");
        }
    }

    /// rename-command is checked against the command names the loader passes in (the
    /// command table sits above config), including the renames before it.
    #[test]
    fn rename_command_checks_the_names_passed_in() {
        let mut c = Config::with_command_names(["get", "set"]);
        c.apply_line("rename-command", &["GET".into(), "fetch".into()])
            .unwrap();
        assert_eq!(
            c.apply_line("rename-command", &["get".into(), "x".into()]),
            Err("No such command in rename-command".into())
        );
        assert_eq!(
            c.apply_line("rename-command", &["set".into(), "fetch".into()]),
            Err("Target command name already exists".into())
        );
        assert_eq!(c.renames, [("get".to_string(), "fetch".to_string())]);
        assert!(Config::default()
            .apply_line("rename-command", &["get".into(), "x".into()])
            .is_err());
    }
}
