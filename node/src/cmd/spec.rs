//! Command metadata: flags, key positions (for locking, COMMAND GETKEYS, key specs) and
//! per-command statistics.

use std::sync::atomic::Ordering;

use crate::server::stats::Counter;

use super::{CmdResult, Ctx};

/// A command handler: reads `args` (args[0] is the command name), writes exactly one reply
/// into `ctx.out`, or returns an error that the dispatcher writes. The arguments are borrowed
/// (usually from the connection's read buffer): no refcount traffic per argument.
pub type Handler = fn(&mut Ctx<'_>, &[&[u8]]) -> CmdResult;

pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const FAST: u32 = 1 << 9;
    pub const NO_AUTH: u32 = 1 << 10;
    pub const NO_MULTI: u32 = 1 << 11;
    pub const ALLOW_BUSY: u32 = 1 << 12;
    /// Not in Redis's flag list: the command touches the whole keyspace (KEYS, SCAN,
    /// FLUSHALL...) and takes its locks itself; inside EXEC every stripe is locked.
    pub const GLOBAL: u32 = 1 << 20;
    /// Not in Redis's flag list: handled by the connection (MULTI/EXEC/DISCARD/WATCH...).
    pub const CONN: u32 = 1 << 21;
    /// Not in Redis's flag list: a whole-keyspace write (FLUSHALL, FLUSHDB, SWAPDB) that
    /// runs with every stripe locked, from before it starts until it is propagated. Stripe
    /// by stripe, a write on another thread could land in an already-flushed stripe and
    /// reach the replication stream before the flush: kept on the master, deleted on its
    /// replicas; and two ordered writes could end up one flushed, one kept.
    pub const LOCK_ALL: u32 = 1 << 22;
    /// Redis's CMD_PROTECTED (not shown by COMMAND INFO in 7.0): DEBUG, refused unless
    /// enable-debug-command allows it.
    pub const PROTECTED: u32 = 1 << 23;

    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
    ];

    /// Parses "write denyoom fast" into a bit set (unknown words panic at startup: a typo
    /// in the static command table is a programming error).
    pub fn parse(s: &str) -> u32 {
        let mut f = 0;
        for w in s.split_whitespace() {
            f |= match w {
                "global" => GLOBAL,
                "conn" => CONN,
                "lock_all" => GLOBAL | LOCK_ALL,
                "protected" => PROTECTED,
                _ => {
                    NAMES
                        .iter()
                        .find(|(_, n)| *n == w)
                        .unwrap_or_else(|| panic!("unknown command flag {w}"))
                        .0
                }
            };
        }
        f
    }
}

/// Where a command's keys are.
#[derive(Clone, Copy, Debug)]
pub enum KeyPos {
    None,
    /// Keys at first..=last (negative last counts from the end) every `step`.
    Range {
        first: i32,
        last: i32,
        step: i32,
    },
    /// The number of keys is at `numkeys`; keys follow at `first` (relative to numkeys+1)
    /// every `step` (ZUNION, LMPOP, SINTERCARD...).
    Keynum {
        numkeys: i32,
        first: i32,
        step: i32,
    },
    /// A destination key at `dest`, then a keynum spec at `numkeys` with keys right after
    /// it (Z*STORE): two key specs in COMMAND INFO, legacy range `dest dest 1`.
    DestThenKeynum {
        dest: i32,
        numkeys: i32,
    },
    /// Custom extraction (e.g. SORT, XREAD-like): fills indices into the vector.
    Custom(fn(&[&[u8]], &mut Vec<usize>)),
}

impl KeyPos {
    /// Redis's `movablekeys`: the key positions depend on the arguments, so a cluster client
    /// has to ask COMMAND GETKEYS instead of using first/last/step.
    pub fn movable(&self) -> bool {
        matches!(
            self,
            KeyPos::Keynum { .. } | KeyPos::DestThenKeynum { .. } | KeyPos::Custom(_)
        )
    }
}

/// A command's statistics, allocated on its first call or rejection: most of the ~400
/// table entries are never used, and the four sharded counters take 2.3 KB, so allocated
/// up front they made 1.1 MB of an empty node's used_memory (Redis's is 0.9 MB in all),
/// which left maxmemory that much less room than Redis.
#[derive(Default)]
pub struct CmdStats(std::sync::OnceLock<Box<Stats>>);

#[derive(Default)]
pub struct Stats {
    pub calls: Counter,
    pub usec: Counter,
    pub rejected: Counter,
    pub failed: Counter,
    /// Latency histogram (INFO latencystats, LATENCY HISTOGRAM).
    pub hist: crate::latency::Histogram,
}

impl CmdStats {
    /// The statistics to count into (allocated on first use).
    #[inline]
    pub fn live(&self) -> &Stats {
        self.0.get_or_init(Box::default)
    }

    /// The statistics if the command was ever counted (readers never allocate them).
    pub fn seen(&self) -> Option<&Stats> {
        self.0.get().map(|b| &**b)
    }

    pub fn reset(&self) {
        if let Some(s) = self.seen() {
            s.calls.store(0, Ordering::Relaxed);
            s.usec.store(0, Ordering::Relaxed);
            s.rejected.store(0, Ordering::Relaxed);
            s.failed.store(0, Ordering::Relaxed);
            s.hist.reset();
        }
    }
}

/// One entry of the command table.
pub struct CommandSpec {
    /// Lower-case name ("get", or "setname" for a subcommand of "client").
    pub name: &'static str,
    /// Redis arity: N exact, -N at least N (counting the command name).
    pub arity: i32,
    pub flags: u32,
    pub keys: KeyPos,
    pub handler: Handler,
    /// COMMAND DOCS group ("string", "generic", "connection"...).
    pub group: &'static str,
    pub since: &'static str,
    pub summary: &'static str,
    pub subcommands: Vec<CommandSpec>,
    /// Key-spec flags as COMMAND INFO shows them ("RW", "access", "delete"), one list per key
    /// spec; empty means derived from the command flags. With several lists, a `Range`
    /// of several keys is shown as one spec per key (SMOVE, LMOVE, ZRANGESTORE).
    pub key_flags: &'static [&'static [&'static str]],
    /// "client|setname" for subcommands, same as `name` otherwise.
    pub full_name: String,
    pub stats: CmdStats,
    /// COMMAND INFO's legacy first/last/step for a command whose keys a custom finder
    /// locates (GEORADIUS ... STORE, SORT ... STORE): the range it was declared with before
    /// [`CommandSpec::keys`] replaced it, as Redis shows `1 1 1` for them.
    legacy: Option<(i32, i32, i32)>,
    /// What the ACL check needs of this command, worked out on its first check
    /// (`super::acl_check`).
    pub(crate) acl: std::sync::OnceLock<super::acl_check::AclInfo>,
}

impl CommandSpec {
    /// A command with keys at first..=last step `step` (0,0,0 for none).
    pub fn new(
        name: &'static str,
        arity: i32,
        flags_str: &str,
        (first, last, step): (i32, i32, i32),
        handler: Handler,
    ) -> Self {
        CommandSpec {
            name,
            arity,
            flags: flags::parse(flags_str),
            keys: if first == 0 {
                KeyPos::None
            } else {
                KeyPos::Range { first, last, step }
            },
            handler,
            group: "generic",
            since: "1.0.0",
            summary: "",
            subcommands: Vec::new(),
            key_flags: &[],
            full_name: name.to_string(),
            stats: CmdStats::default(),
            legacy: None,
            acl: std::sync::OnceLock::new(),
        }
    }

    pub fn group(mut self, g: &'static str) -> Self {
        self.group = g;
        self
    }

    pub fn since(mut self, s: &'static str) -> Self {
        self.since = s;
        self
    }

    pub fn summary(mut self, s: &'static str) -> Self {
        self.summary = s;
        self
    }

    pub fn keys(mut self, k: KeyPos) -> Self {
        if let (KeyPos::Range { first, last, step }, KeyPos::Custom(_)) = (&self.keys, &k) {
            self.legacy = Some((*first, *last, *step));
        }
        self.keys = k;
        self
    }

    /// Sets the key-spec flags (see [`CommandSpec::key_flags`]).
    pub fn key_flags(mut self, f: &'static [&'static [&'static str]]) -> Self {
        self.key_flags = f;
        self
    }

    /// Adds subcommands (CLIENT SETNAME...); their full names become "parent|sub".
    pub fn subs(mut self, subs: Vec<CommandSpec>) -> Self {
        self.subcommands = subs
            .into_iter()
            .map(|mut s| {
                s.full_name = format!("{}|{}", self.name, s.name);
                s.group = self.group;
                s
            })
            .collect();
        self
    }

    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        (a >= 0 && argc == a as usize) || (a < 0 && argc >= (-a) as usize)
    }

    /// Positions of the key arguments of `args`, appended to `out`.
    pub fn key_indices(&self, args: &[&[u8]], out: &mut Vec<usize>) {
        let argc = args.len() as i32;
        match self.keys {
            KeyPos::None => {}
            KeyPos::Range { first, last, step } => {
                out.extend(range_positions(first, last, step, args.len()))
            }
            KeyPos::Keynum {
                numkeys,
                first,
                step,
            } => {
                if let Some(k) = keynum_keys(args, numkeys, first, step) {
                    out.extend(k.positions());
                }
            }
            KeyPos::DestThenKeynum { dest, numkeys } => {
                let Some(k) = keynum_keys(args, numkeys, 1, 1) else {
                    return;
                };
                // Redis's fallback (genericGetKeys) lists the destination last.
                if k.from_spec && dest < argc {
                    out.push(dest as usize);
                }
                out.extend(k.positions());
                if !k.from_spec && dest < argc {
                    out.push(dest as usize);
                }
            }
            KeyPos::Custom(f) => f(args, out),
        }
    }

    /// (first, last, step) as COMMAND INFO reports them.
    pub fn legacy_range(&self) -> (i64, i64, i64) {
        match self.keys {
            KeyPos::Range { first, last, step } => (first as i64, last as i64, step as i64),
            KeyPos::DestThenKeynum { dest, .. } => (dest as i64, dest as i64, 1),
            _ => match self.legacy {
                Some((f, l, s)) => (f as i64, l as i64, s as i64),
                None => (0, 0, 0),
            },
        }
    }
}

/// Positions of a range spec's keys in a call of `argc` arguments: first..=last (a
/// negative last counts from the end) every `step`.
pub fn range_positions(
    first: i32,
    last: i32,
    step: i32,
    argc: usize,
) -> impl Iterator<Item = usize> {
    let argc = argc as i64;
    let (first, last) = (first as i64, last as i64);
    let last = if last < 0 {
        argc + last
    } else {
        last.min(argc - 1)
    };
    let end = last.min(argc - 1);
    let step = step.max(1) as usize;
    // Half-open, so that "no keys" is an ordinary empty range.
    let r = if first <= end && end >= 0 {
        first.max(0) as usize..end as usize + 1
    } else {
        0..0
    };
    r.step_by(step)
}

/// The keys of a keynum spec (EVAL, FCALL, ZUNION, LMPOP, SINTERCARD...): positions
/// `start`, `start + step`... (`count` of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeynumKeys {
    pub start: usize,
    pub count: usize,
    pub step: usize,
    /// Found by the key spec. Otherwise by Redis's fallback, whose keys carry no key-spec
    /// flags (any key pattern grants them).
    pub from_spec: bool,
}

impl KeynumKeys {
    pub fn positions(self) -> impl Iterator<Item = usize> {
        (0..self.count).map(move |k| self.start + k * self.step)
    }
}

/// Redis 7.0's keys of a keynum spec: the count at `numkeys`, keys from `numkeys + first`.
/// A count that is not an integer (string2ll), negative, zero or past the arguments makes
/// the spec invalid (getKeysUsingKeySpecs); Redis then asks the command's getkeys function
/// (genericGetKeys), which reads the count with atoi and finds keys only when
/// 1 <= count <= the arguments left. So `EVAL "" 3 a b` has no keys at all.
pub fn keynum_keys(args: &[&[u8]], numkeys: i32, first: i32, step: i32) -> Option<KeynumKeys> {
    let argc = args.len() as i64;
    let idx = usize::try_from(numkeys).ok()?;
    let count_arg = args.get(idx)?;
    let start = numkeys as i64 + first as i64;
    let step = step.max(1) as i64;
    if let Some(n) = crate::types::parse_i64_strict(count_arg).filter(|n| *n >= 0) {
        // Redis computes `last` with the count cast to int.
        let last = start + (n as i32) as i64 - 1;
        if last < argc && last >= start && start < argc {
            return Some(KeynumKeys {
                start: start as usize,
                count: ((last - start) / step + 1) as usize,
                step: step as usize,
                from_spec: true,
            });
        }
    }
    let n = crate::resp::parser::c_atoi(count_arg);
    if n < 1 || n > (argc - start) / step {
        return None;
    }
    Some(KeynumKeys {
        start: start as usize,
        count: n as usize,
        step: step as usize,
        from_spec: false,
    })
}

#[cfg(test)]
mod keynum_tests {
    use super::*;

    fn keys(args: &[&str], numkeys: i32, first: i32) -> Option<(Vec<usize>, bool)> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        keynum_keys(&a, numkeys, first, 1).map(|k| (k.positions().collect(), k.from_spec))
    }

    #[test]
    fn keynum_like_redis() {
        assert_eq!(
            keys(&["eval", "s", "2", "a", "b"], 2, 1),
            Some((vec![3, 4], true))
        );
        assert_eq!(keys(&["eval", "s", "3", "a", "b"], 2, 1), None);
        assert_eq!(keys(&["eval", "s", "0", "a"], 2, 1), None);
        assert_eq!(keys(&["eval", "s", "-1", "a"], 2, 1), None);
        assert_eq!(
            keys(&["eval", "s", "1x", "a"], 2, 1),
            Some((vec![3], false))
        );
        assert_eq!(
            keys(&["eval", "s", "01", "a"], 2, 1),
            Some((vec![3], false))
        );
        assert_eq!(keys(&["eval", "s", "x", "a"], 2, 1), None);
        assert_eq!(keys(&["eval", "s"], 2, 1), None);
        // (int)4294967297 == 1
        assert_eq!(
            keys(&["eval", "s", "4294967297", "a"], 2, 1),
            Some((vec![3], true))
        );
    }
}
