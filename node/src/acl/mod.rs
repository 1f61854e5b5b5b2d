//! Redis 7.0's ACL users as pure data: the rule grammar of ACL SETUSER (with Redis's error
//! texts), the canonical description ACL LIST / GETUSER print, and the permission checks
//! (command, first argument, keys by access, channels) over selectors, and the ACL file
//! format (`file`, the module's only I/O). No server: the command layer supplies the
//! [`Catalog`] and the keys and channels a call touches.

pub mod catalog;
mod check;
mod describe;
pub mod file;

pub use catalog::{category_bit, Catalog, CatalogEntry, CommandDesc, CATEGORIES};
pub use check::{channel_in_list, ChannelRef, Denied, DeniedKind, KeyRef};

use sha2::{Digest, Sha256};

/// Why a rule was refused; `Display` is Redis's text after `Error in ACL SETUSER modifier '<op>': `.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("Unknown command or category name in ACL")]
    UnknownName,
    #[error("Syntax error")]
    Syntax,
    #[error("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns")]
    KeyAfterAll,
    #[error("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels")]
    ChannelAfterAll,
    #[error("The password you are trying to remove from the user does not exist")]
    NoSuchPassword,
    #[error("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")]
    BadHash,
    #[error("Allowing first-arg of a subcommand is not supported")]
    SubcommandFirstArg,
}

/// A failed ACL SETUSER: Redis's whole message (without the `ERR ` prefix).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetUserError {
    #[error("Error in ACL SETUSER modifier '{op}': {err}")]
    Rule { op: String, err: RuleError },
    #[error("Unmatched parenthesis in acl selector starting at '{0}'.")]
    Unmatched(String),
}

/// Read permission of a key pattern (`%R~`).
pub const PERM_READ: u8 = 1;
/// Write permission of a key pattern (`%W~`).
pub const PERM_WRITE: u8 = 2;
const PERM_ALL: u8 = PERM_READ | PERM_WRITE;

/// A key pattern and the accesses it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    pub perms: u8,
    pub pattern: Vec<u8>,
}

/// A command bitmap: one bit per catalog id plus a last bit, set only by `+@all`, for the
/// commands a catalog does not know yet (Redis's "future commands" bit).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Bits(Vec<u64>);

impl Bits {
    fn new(ids: usize) -> Bits {
        Bits(vec![0; (ids + 1).div_ceil(64)])
    }
    fn get(&self, id: usize) -> bool {
        self.0
            .get(id / 64)
            .is_some_and(|w| w & (1u64 << (id % 64)) != 0)
    }
    fn set(&mut self, id: usize, v: bool) {
        if let Some(w) = self.0.get_mut(id / 64) {
            if v {
                *w |= 1u64 << (id % 64);
            } else {
                *w &= !(1u64 << (id % 64));
            }
        }
    }
    fn fill(&mut self, v: bool) {
        let x = if v { u64::MAX } else { 0 };
        self.0.iter_mut().for_each(|w| *w = x);
    }
}

/// One selector: the root permissions of a user or a `(...)` one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    pub allkeys: bool,
    pub allchannels: bool,
    /// Redis's ALLCOMMANDS flag: set by `+@all`, dropped when any command bit is cleared.
    pub allcommands: bool,
    pub(crate) cmds: Bits,
    /// Allowed first arguments of otherwise refused commands (`+select|0`), per command id,
    /// in the order given.
    pub(crate) firstargs: Vec<(usize, Vec<Vec<u8>>)>,
    pub patterns: Vec<KeyPattern>,
    pub channels: Vec<Vec<u8>>,
}

/// What new users and selectors start with, and the commands rules name.
#[derive(Clone, Copy)]
pub struct Env<'a> {
    pub catalog: &'a Catalog,
    /// `acl-pubsub-default allchannels`.
    pub pubsub_allchannels: bool,
}

impl Selector {
    /// An empty selector (no commands, keys; channels per `acl-pubsub-default`).
    pub fn new(env: Env<'_>) -> Selector {
        Selector {
            allkeys: false,
            allchannels: env.pubsub_allchannels,
            allcommands: false,
            cmds: Bits::new(env.catalog.len()),
            firstargs: Vec::new(),
            patterns: Vec::new(),
            channels: Vec::new(),
        }
    }

    fn future_bit(cat: &Catalog) -> usize {
        cat.len()
    }

    /// Whether `+@all` is in force for commands the catalog does not list.
    pub fn can_run_future_commands(&self, cat: &Catalog) -> bool {
        self.cmds.get(Self::future_bit(cat))
    }

    pub(crate) fn bit(&self, id: usize) -> bool {
        self.cmds.get(id)
    }

    fn set_bit(&mut self, id: usize, v: bool) {
        self.cmds.set(id, v);
        if !v {
            self.allcommands = false;
        }
    }

    fn reset_firstargs_for(&mut self, id: usize) {
        self.firstargs.retain(|(i, _)| *i != id);
    }

    pub(crate) fn firstargs_of(&self, id: usize) -> Option<&[Vec<u8>]> {
        self.firstargs
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, v)| v.as_slice())
    }

    /// Redis's ACLChangeSelectorPerm: the command and all its subcommands.
    fn change_perm(&mut self, cat: &Catalog, id: usize, allow: bool) {
        self.set_bit(id, allow);
        self.reset_firstargs_for(id);
        if let Some(e) = cat.entry(id) {
            for &s in &e.subs {
                self.set_bit(s, allow);
            }
        }
    }

    fn set_category(&mut self, cat: &Catalog, bit: u32, allow: bool) {
        for &id in cat.top() {
            let Some(e) = cat.entry(id) else { continue };
            if e.cats & bit != 0 {
                self.change_perm(cat, id, allow);
            }
            for &s in &e.subs {
                if cat.entry(s).is_some_and(|se| se.cats & bit != 0) {
                    self.change_perm(cat, s, allow);
                }
            }
        }
    }

    fn add_firstarg(&mut self, id: usize, sub: &[u8]) {
        if let Some((_, v)) = self.firstargs.iter_mut().find(|(i, _)| *i == id) {
            if !v.iter().any(|x| x.eq_ignore_ascii_case(sub)) {
                v.push(sub.to_vec());
            }
        } else {
            self.firstargs.push((id, vec![sub.to_vec()]));
        }
    }

    /// Redis's ACLSetSelector: one selector rule.
    pub fn apply(&mut self, cat: &Catalog, op: &[u8]) -> Result<(), RuleError> {
        let is = |s: &str| op.eq_ignore_ascii_case(s.as_bytes());
        if is("allkeys") || is("~*") {
            self.allkeys = true;
            self.patterns.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.patterns.clear();
        } else if is("allchannels") || is("&*") {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.cmds.fill(true);
            self.allcommands = true;
            self.firstargs.clear();
        } else if is("nocommands") || is("-@all") {
            self.cmds.fill(false);
            self.allcommands = false;
            self.firstargs.clear();
        } else if op.first() == Some(&b'~') || op.first() == Some(&b'%') {
            if self.allkeys {
                return Err(RuleError::KeyAfterAll);
            }
            let mut perms = 0u8;
            let mut offset = 1;
            if op[0] == b'%' {
                while offset < op.len() {
                    let c = op[offset];
                    if c.eq_ignore_ascii_case(&b'R') && perms & PERM_READ == 0 {
                        perms |= PERM_READ;
                    } else if c.eq_ignore_ascii_case(&b'W') && perms & PERM_WRITE == 0 {
                        perms |= PERM_WRITE;
                    } else if c == b'~' {
                        offset += 1;
                        break;
                    } else {
                        return Err(RuleError::Syntax);
                    }
                    offset += 1;
                }
                // Redis 7.0.15 accepts `%` without permissions and then cannot print the
                // pattern (it aborts); refused here instead.
                if perms == 0 {
                    return Err(RuleError::Syntax);
                }
            } else {
                perms = PERM_ALL;
            }
            let pat = op.get(offset..).unwrap_or_default();
            if has_spaces(pat) {
                return Err(RuleError::Syntax);
            }
            if let Some(p) = self.patterns.iter_mut().find(|p| p.pattern == pat) {
                p.perms |= perms;
            } else {
                self.patterns.push(KeyPattern {
                    perms,
                    pattern: pat.to_vec(),
                });
            }
            self.allkeys = false;
        } else if op.first() == Some(&b'&') {
            if self.allchannels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pat = &op[1..];
            if has_spaces(pat) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pat) {
                self.channels.push(pat.to_vec());
            }
            self.allchannels = false;
        } else if op.first() == Some(&b'+') && op.get(1) != Some(&b'@') {
            let name = &op[1..];
            match name.iter().rposition(|&b| b == b'|') {
                None => {
                    let id = cat.lookup(name).ok_or(RuleError::UnknownName)?;
                    self.change_perm(cat, id, true);
                }
                Some(bar) => {
                    let (base, sub) = (&name[..bar], &name[bar + 1..]);
                    let id = cat.lookup(base).ok_or(RuleError::UnknownName)?;
                    let e = cat.entry(id).ok_or(RuleError::UnknownName)?;
                    if e.parent.is_some() {
                        return Err(RuleError::SubcommandFirstArg);
                    }
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if e.subs.is_empty() {
                        self.add_firstarg(id, sub);
                    } else {
                        let sid = cat.lookup(name).ok_or(RuleError::UnknownName)?;
                        self.change_perm(cat, sid, true);
                    }
                }
            }
        } else if op.first() == Some(&b'-') && op.get(1) != Some(&b'@') {
            let id = cat.lookup(&op[1..]).ok_or(RuleError::UnknownName)?;
            self.change_perm(cat, id, false);
        } else if (op.first() == Some(&b'+') || op.first() == Some(&b'-'))
            && op.get(1) == Some(&b'@')
        {
            let bit = category_bit(&op[2..]).ok_or(RuleError::UnknownName)?;
            self.set_category(cat, bit, op[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }
}

/// Redis's ACLStringHasSpaces: patterns may hold no whitespace and no NUL.
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&c| c == 0 || c == b' ' || (b'\t'..=b'\r').contains(&c))
}

/// SHA-256 of a password, as the lower-case hex Redis keeps and prints.
pub fn hash_password(p: &[u8]) -> String {
    Sha256::digest(p)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// `sanitize-payload` / `skip-sanitize-payload`, when a rule set one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sanitize {
    Sanitize,
    Skip,
}

/// One ACL user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub enabled: bool,
    pub nopass: bool,
    pub sanitize: Option<Sanitize>,
    /// SHA-256 hex of each password, in the order added.
    pub passwords: Vec<String>,
    pub root: Selector,
    pub selectors: Vec<Selector>,
}

impl User {
    /// A new user as ACL SETUSER creates it: off, no password, no permissions.
    pub fn new(env: Env<'_>) -> User {
        User {
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            root: Selector::new(env),
            selectors: Vec::new(),
        }
    }

    /// The `default` user at start: on, nopass, every command, key and channel.
    pub fn default_user(env: Env<'_>) -> User {
        let mut u = User::new(env);
        for r in ["+@all", "~*", "&*", "on", "nopass"] {
            let _ = u.apply(env, r.as_bytes());
        }
        u
    }

    /// Redis's ACLSetUser: one rule (a whole `(...)` selector counts as one).
    pub fn apply(&mut self, env: Env<'_>, op: &[u8]) -> Result<(), RuleError> {
        let is = |s: &str| op.eq_ignore_ascii_case(s.as_bytes());
        if op.is_empty() {
            return Ok(());
        }
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Some(Sanitize::Skip);
        } else if is("sanitize-payload") {
            self.sanitize = Some(Sanitize::Sanitize);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let h = if op[0] == b'>' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            if !self.passwords.contains(&h) {
                self.passwords.push(h);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let h = if op[0] == b'<' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            let before = self.passwords.len();
            self.passwords.retain(|p| *p != h);
            if self.passwords.len() == before {
                return Err(RuleError::NoSuchPassword);
            }
        } else if op[0] == b'(' && op.last() == Some(&b')') {
            let mut s = Selector::new(env);
            let inner = &op[1..op.len() - 1];
            for r in inner
                .split(|c| c.is_ascii_whitespace())
                .filter(|r| !r.is_empty())
            {
                s.apply(env.catalog, r)?;
            }
            if !selector_survives_save(&s.describe(env.catalog)) {
                return Err(RuleError::Syntax);
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.clear();
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            self.root.allkeys = false;
            self.root.patterns.clear();
            self.root.allchannels = env.pubsub_allchannels;
            self.root.channels.clear();
            self.enabled = false;
            self.sanitize = Some(Sanitize::Sanitize);
            self.selectors.clear();
            self.root.apply(env.catalog, b"-@all")?;
        } else {
            self.root.apply(env.catalog, op)?;
        }
        Ok(())
    }

    /// Redis's ACLStringSetUser: the rules (selectors spread over several arguments are
    /// merged first), all or nothing: on an error `self` is unchanged.
    pub fn apply_all(&mut self, env: Env<'_>, args: &[&[u8]]) -> Result<(), SetUserError> {
        let ops = merge_selector_args(args)?;
        let mut tmp = self.clone();
        for op in &ops {
            tmp.apply(env, op).map_err(|err| SetUserError::Rule {
                op: String::from_utf8_lossy(op).into_owned(),
                err,
            })?;
        }
        *self = tmp;
        Ok(())
    }

    /// Whether `pass` is one of the passwords (or the user is nopass). Every stored hash is
    /// compared in full, so the time does not tell where a guess differs.
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let given = hash_password(pass);
        self.passwords.iter().fold(false, |ok, p| {
            let diff = p
                .bytes()
                .zip(given.bytes())
                .fold(0u8, |acc, (x, y)| acc | (x ^ y));
            (std::hint::black_box(diff) == 0 && p.len() == given.len()) | ok
        })
    }

    /// Every selector, the root first (the order checks go through).
    pub fn all_selectors(&self) -> impl Iterator<Item = &Selector> {
        std::iter::once(&self.root).chain(self.selectors.iter())
    }
}

/// Redis's ACLMergeSelectorArguments: `(` ... `)` spread over arguments joined by spaces.
pub fn merge_selector_args(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, SetUserError> {
    let mut out = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, op) in args.iter().enumerate() {
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.to_vec()));
            continue;
        }
        if let Some((start, mut sel)) = open.take() {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(sel);
            } else {
                open = Some((start, sel));
            }
            continue;
        }
        out.push(op.to_vec());
    }
    if let Some((start, _)) = open {
        let first = args.get(start).copied().unwrap_or_default();
        return Err(SetUserError::Unmatched(
            String::from_utf8_lossy(first).into_owned(),
        ));
    }
    Ok(out)
}

/// Whether a selector described as `desc` reads back as itself from ACL SAVE's
/// `(<desc>)`: a load merges space-separated tokens up to the first that ends in `)`, so a
/// key or channel pattern (or first-arg rule) ending in `)` anywhere but last would cut the
/// selector short and the rest would fail as top-level rules. Redis 7.0 accepts such a
/// selector and then saves a file that no longer loads (every user locked out at the next
/// start); it is refused when set instead.
fn selector_survives_save(desc: &[u8]) -> bool {
    let mut tokens = desc.split(|&b| b == b' ').filter(|t| !t.is_empty());
    // The last token may end in ')': the closing one is added after it.
    tokens.next_back();
    tokens.all(|t| t.last() != Some(&b')'))
}

/// Redis's ACLAppendUserForLoading: checks a config file's `user <name> <rules...>` line
/// (`args` without `user`) before the commands are known, so unknown command and category
/// names pass here. `default` may be declared (once), like any user. The error is Redis's
/// text, which names `argv[j]` of the whole line for the j-th rule (as Redis 7.0.15 indexes
/// it).
pub fn validate_config_user(args: &[String], earlier: &[Vec<String>]) -> Result<(), String> {
    let full: Vec<&str> = std::iter::once("user")
        .chain(args.iter().map(String::as_str))
        .collect();
    let at = |j: usize| full.get(j).copied().unwrap_or_default().to_string();
    let Some(name) = args.first() else {
        return Err("Bad directive or wrong number of arguments".into());
    };
    if earlier.iter().any(|u| u.first() == Some(name)) {
        return Err(format!(
            "Error in user declaration '{}': Duplicate user found. A user can only be defined once in config files",
            at(1)
        ));
    }
    let rules: Vec<&[u8]> = args[1..].iter().map(|a| a.as_bytes()).collect();
    let merged = match merge_selector_args(&rules) {
        Ok(m) => m,
        Err(_) => {
            return Err(format!(
                "Error in user declaration '{}': Syntax error",
                at(0)
            ))
        }
    };
    let cat = Catalog::default();
    let env = Env {
        catalog: &cat,
        pubsub_allchannels: false,
    };
    let mut u = User::new(env);
    for (j, op) in merged.iter().enumerate() {
        match u.apply(env, op) {
            Ok(()) | Err(RuleError::UnknownName) => {}
            Err(e) => return Err(format!("Error in user declaration '{}': {e}", at(j))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
