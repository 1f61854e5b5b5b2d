//! The command catalog the ACL rules are written against: every command and subcommand with
//! an id (its bit in a selector's command bitmap), its ACL categories and its parent. Built by
//! the command layer from its table; kept here so the ACL module needs no I/O and no server.

use hashbrown::HashMap;

/// Redis 7.0's ACL categories, in its order (the order of `ACL CAT` and of the category
/// rules an ACL description prints).
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The bit of a category name (case-insensitive, without the `@`).
pub fn category_bit(name: &[u8]) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1u32 << i)
}

/// One command or subcommand of the catalog.
#[derive(Debug, Clone)]
pub struct CatalogEntry {
    /// Lower-case full name (`get`, `config|get`).
    pub name: String,
    /// Category bits (see [`CATEGORIES`]).
    pub cats: u32,
    /// The container's id, for a subcommand.
    pub parent: Option<usize>,
    /// Subcommand ids, for a container.
    pub subs: Vec<usize>,
    /// Commands any user may run (AUTH, HELLO...): Redis's `no_auth` flag.
    pub no_auth: bool,
}

/// What the command layer hands over for each command.
pub struct CommandDesc<'a> {
    /// Full name, `container|sub` for a subcommand.
    pub name: &'a str,
    /// Category names with or without the leading `@`.
    pub categories: &'a [&'a str],
    pub no_auth: bool,
}

/// All commands, ids in insertion order; top-level commands iterate in that order too.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    entries: Vec<CatalogEntry>,
    top: Vec<usize>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    /// Builds the catalog. A subcommand whose container is not listed is dropped.
    pub fn new<'a>(cmds: impl IntoIterator<Item = CommandDesc<'a>>) -> Catalog {
        let mut c = Catalog::default();
        let (mut tops, mut subs) = (Vec::new(), Vec::new());
        for d in cmds {
            if d.name.contains('|') {
                subs.push(d);
            } else {
                tops.push(d);
            }
        }
        let cats = |list: &[&str]| {
            list.iter()
                .filter_map(|n| category_bit(n.trim_start_matches('@').as_bytes()))
                .fold(0u32, |a, b| a | b)
        };
        for d in tops {
            let name = d.name.to_ascii_lowercase();
            if c.by_name.contains_key(&name) {
                continue;
            }
            let id = c.entries.len();
            c.entries.push(CatalogEntry {
                name: name.clone(),
                cats: cats(d.categories),
                parent: None,
                subs: Vec::new(),
                no_auth: d.no_auth,
            });
            c.top.push(id);
            c.by_name.insert(name, id);
        }
        for d in subs {
            let name = d.name.to_ascii_lowercase();
            let Some((parent, _)) = name.split_once('|') else {
                continue;
            };
            let Some(&pid) = c.by_name.get(parent) else {
                continue;
            };
            if c.by_name.contains_key(&name) {
                continue;
            }
            let id = c.entries.len();
            c.entries.push(CatalogEntry {
                name: name.clone(),
                cats: cats(d.categories),
                parent: Some(pid),
                subs: Vec::new(),
                no_auth: d.no_auth,
            });
            if let Some(p) = c.entries.get_mut(pid) {
                p.subs.push(id);
            }
            c.by_name.insert(name, id);
        }
        c
    }

    /// Number of ids (commands and subcommands).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entry(&self, id: usize) -> Option<&CatalogEntry> {
        self.entries.get(id)
    }

    /// Top-level command ids, in catalog order.
    pub fn top(&self) -> &[usize] {
        &self.top
    }

    /// Redis's `ACLLookupCommand`: `cmd` or `container|sub` (one level), case-insensitive;
    /// `cmd|x` of a command without subcommands is not a command.
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        let mut parts = name.split('|');
        let base = parts.next()?;
        let sub = parts.next();
        if parts.next().is_some() {
            return None;
        }
        let id = *self.by_name.get(base)?;
        match sub {
            None => Some(id),
            Some(_) => self.by_name.get(name.as_str()).copied(),
        }
    }

    /// The id of a command as it is run: the container's subcommand when `first_arg` names
    /// one, else the command.
    pub fn lookup_run(&self, cmd: &[u8], first_arg: Option<&[u8]>) -> Option<usize> {
        let id = self.lookup(cmd)?;
        let e = self.entries.get(id)?;
        if e.subs.is_empty() || e.parent.is_some() {
            return Some(id);
        }
        let mut full = cmd.to_vec();
        full.push(b'|');
        full.extend_from_slice(first_arg?);
        self.lookup(&full)
    }
}
