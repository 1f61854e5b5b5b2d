//! Which events a successful write command emits, in Redis 7.0's order: derived from the
//! command name, its arguments, the first level of its reply and its keys' states before
//! and after. One table for every command family, so the handlers stay untouched.
//!
//! Generic rules: a key that did not exist before and exists after gets `new` first; a
//! key that existed and is gone after a non-deleting command (a pop that emptied it) gets
//! `del` after the command's event.

use bytes::Bytes;

use super::{Event, KeyState, Snapshot, GENERIC, NEW, SET, ZSET};
use crate::cmd::{eq_ic, CommandSpec, Ctx};

/// The first level of a reply, enough to tell whether the command changed something.
#[derive(Debug)]
pub enum Reply {
    Err,
    Nil,
    Int(i64),
    Simple,
    Bulk,
    /// An array (or set/push) of `n` elements and its first element if it is a bulk.
    Array(i64, Option<Bytes>),
}

impl Reply {
    pub fn parse(b: &[u8]) -> Reply {
        let Some(&t) = b.first() else {
            return Reply::Nil;
        };
        let line_end = b.windows(2).position(|w| w == b"\r\n").unwrap_or(b.len());
        let line = &b[1..line_end.max(1)];
        let num = || {
            std::str::from_utf8(line)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
        };
        match t {
            b'-' | b'!' => Reply::Err,
            b'_' => Reply::Nil,
            b':' => Reply::Int(num().unwrap_or(0)),
            b'+' => Reply::Simple,
            b'$' | b'=' | b',' => match num() {
                Some(n) if n < 0 => Reply::Nil,
                _ => Reply::Bulk,
            },
            b'*' | b'~' | b'>' => match num() {
                Some(n) if n < 0 => Reply::Nil,
                Some(n) => {
                    let rest = &b[(line_end + 2).min(b.len())..];
                    Reply::Array(n, first_bulk(rest))
                }
                None => Reply::Nil,
            },
            _ => Reply::Simple,
        }
    }

    fn int(&self) -> i64 {
        match self {
            Reply::Int(n) => *n,
            _ => 0,
        }
    }

    /// A non-nil, non-empty reply (a pop that returned something).
    fn some(&self) -> bool {
        match self {
            Reply::Nil | Reply::Err => false,
            Reply::Array(n, _) => *n > 0,
            _ => true,
        }
    }
}

fn first_bulk(b: &[u8]) -> Option<Bytes> {
    if b.first() != Some(&b'$') {
        return None;
    }
    let end = b.windows(2).position(|w| w == b"\r\n")?;
    let n: usize = std::str::from_utf8(&b[1..end]).ok()?.parse().ok()?;
    b.get(end + 2..end + 2 + n).map(Bytes::copy_from_slice)
}

struct Acc<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    out: Vec<Event>,
}

impl Acc<'_, '_> {
    fn push(&mut self, class: u32, event: &'static str, key: &[u8], db: usize) {
        self.out.push(Event {
            class,
            event,
            key: Bytes::copy_from_slice(key),
            db,
        });
    }

    fn now(&mut self, db: usize, key: &[u8]) -> KeyState {
        super::state(self.ctx, db, key)
    }

    /// `new` if the key was created by the command.
    fn new_if_created(&mut self, before: KeyState, key: &[u8], db: usize) {
        if !before.exists && self.now(db, key).exists {
            self.push(NEW, "new", key, db);
        }
    }

    /// `del` if the command emptied (and so removed) the key.
    fn del_if_gone(&mut self, before: KeyState, key: &[u8], db: usize) {
        if before.exists && !self.now(db, key).exists {
            self.push(GENERIC, "del", key, db);
        }
    }

    /// The common shape: [new] event [del].
    fn modified(&mut self, before: KeyState, class: u32, ev: &'static str, key: &[u8], db: usize) {
        self.new_if_created(before, key, db);
        self.push(class, ev, key, db);
        self.del_if_gone(before, key, db);
    }

    /// A STORE command: the destination got a value, or was deleted by an empty result.
    fn store(&mut self, before: KeyState, class: u32, ev: &'static str, key: &[u8], db: usize) {
        if self.now(db, key).exists {
            self.new_if_created(before, key, db);
            self.push(class, ev, key, db);
        } else if before.exists {
            self.push(GENERIC, "del", key, db);
        }
    }
}

/// The events of one successful write command.
// One arm per command with its condition inside reads as the table it is; match guards
// would send a non-matching command on to the next arms.
#[allow(clippy::collapsible_match)]
pub fn derive(
    ctx: &mut Ctx<'_>,
    cmd: &CommandSpec,
    args: &[&[u8]],
    reply: &Reply,
    snap: &Snapshot,
) -> Vec<Event> {
    let db = ctx.ks.db;
    let st = |n: usize| snap.keys.get(n).map(|k| k.1).unwrap_or_default();
    let key = |n: usize| snap.keys.get(n).map(|k| Bytes::copy_from_slice(args[k.0]));
    let mut a = Acc {
        ctx,
        out: Vec::new(),
    };
    let Some(k0) = key(0) else {
        return a.out;
    };
    let s0 = st(0);
    let name = cmd.name;
    match name {
        "restore" | "restore-asking" => {
            a.push(NEW, "new", &k0, db);
            a.push(GENERIC, "restore", &k0, db);
        }
        "migrate" => {
            for (i, (_, b)) in snap.keys.iter().enumerate() {
                if let Some(k) = key(i) {
                    a.del_if_gone(*b, &k, db);
                }
            }
        }
        "bzpopmin" | "bzpopmax" | "zmpop" | "bzmpop" => {
            if let Reply::Array(_, Some(k)) = reply {
                let ev = pop_event(name, args);
                let class = ZSET;
                let before = snap
                    .keys
                    .iter()
                    .find(|(i, _)| args[*i] == *k)
                    .map(|x| x.1)
                    .unwrap_or_default();
                a.modified(before, class, ev, k, db);
            }
        }
        // Sets.
        "sadd" => {
            if reply.int() > 0 {
                a.modified(s0, SET, "sadd", &k0, db);
            }
        }
        "srem" => {
            if reply.int() > 0 {
                a.modified(s0, SET, "srem", &k0, db);
            }
        }
        "spop" => {
            if reply.some() {
                a.modified(s0, SET, "spop", &k0, db);
            }
        }
        "smove" => {
            if let (Some(k1), 1) = (key(1), reply.int()) {
                if k0 != k1 {
                    a.push(SET, "srem", &k0, db);
                    a.del_if_gone(s0, &k0, db);
                    if !snap.dst_had_member {
                        a.new_if_created(st(1), &k1, db);
                        a.push(SET, "sadd", &k1, db);
                    }
                }
            }
        }
        "sinterstore" | "sunionstore" | "sdiffstore" => {
            let ev = match name {
                "sinterstore" => "sinterstore",
                "sunionstore" => "sunionstore",
                _ => "sdiffstore",
            };
            a.store(s0, SET, ev, &k0, db);
        }
        // Sorted sets.
        "zadd" => {
            if zadd_has(args, "incr") {
                if reply.some() {
                    a.modified(s0, ZSET, "zincr", &k0, db);
                }
            } else if reply.int() > 0 || zadd_scores(a.ctx, args) != snap.zscores {
                a.modified(s0, ZSET, "zadd", &k0, db);
            }
        }
        "zincrby" => a.modified(s0, ZSET, "zincr", &k0, db),
        // GEOADD is a ZADD with geohash scores (Redis runs zaddCommand for it).
        "geoadd" => {
            if reply.int() > 0 || geoadd_scores(a.ctx, args) != snap.zscores {
                a.modified(s0, ZSET, "zadd", &k0, db);
            }
        }
        "geosearchstore" => a.store(s0, ZSET, "geosearchstore", &k0, db),
        // Their STORE / STOREDIST destination is the second key, when there is one.
        "georadius" | "georadiusbymember" => {
            if let Some(k1) = key(1) {
                a.store(st(1), ZSET, "georadiusstore", &k1, db);
            }
        }
        "zrem" | "zremrangebyrank" | "zremrangebyscore" | "zremrangebylex" => {
            if reply.int() > 0 {
                let ev = match name {
                    "zrem" => "zrem",
                    "zremrangebyrank" => "zremrangebyrank",
                    "zremrangebyscore" => "zremrangebyscore",
                    _ => "zremrangebylex",
                };
                a.modified(s0, ZSET, ev, &k0, db);
            }
        }
        "zpopmin" | "zpopmax" => {
            if reply.some() {
                let ev = if name == "zpopmin" {
                    "zpopmin"
                } else {
                    "zpopmax"
                };
                a.modified(s0, ZSET, ev, &k0, db);
            }
        }
        "zunionstore" | "zinterstore" | "zdiffstore" | "zrangestore" => {
            let ev = match name {
                "zunionstore" => "zunionstore",
                "zinterstore" => "zinterstore",
                "zdiffstore" => "zdiffstore",
                _ => "zrangestore",
            };
            a.store(s0, ZSET, ev, &k0, db);
        }
        _ => {}
    }
    a.out
}

/// The current scores of ZADD's members (after its options), in argument order.
pub fn zadd_scores(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Vec<Option<f64>> {
    member_scores(ctx, args, &["nx", "xx", "gt", "lt", "ch", "incr"], 2)
}

/// The current scores of GEOADD's members (`longitude latitude member` triples).
pub fn geoadd_scores(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Vec<Option<f64>> {
    member_scores(ctx, args, &["nx", "xx", "ch"], 3)
}

/// Scores in key `args[1]` of the members of a ZADD-like command: after its `opts`, in
/// groups of `stride` arguments that end with the member.
fn member_scores(
    ctx: &mut Ctx<'_>,
    args: &[&[u8]],
    opts: &[&str],
    stride: usize,
) -> Vec<Option<f64>> {
    let first = 2 + args[2..]
        .iter()
        .take_while(|a| opts.iter().any(|o| eq_ic(a, o)))
        .count();
    // get_w: no keyspace hit/miss counted for this bookkeeping read.
    let Some(crate::db::Value::ZSet(z)) = ctx.ks.get_w(args[1]) else {
        return vec![None; args.len().saturating_sub(first) / stride];
    };
    args[first..]
        .chunks(stride)
        .filter_map(|p| p.get(stride - 1))
        .map(|m| z.score(m))
        .collect()
}

/// The pop event of the blocking / multi-key pops.
fn pop_event(name: &str, args: &[&[u8]]) -> &'static str {
    match name {
        "blpop" => "lpop",
        "brpop" => "rpop",
        "bzpopmin" => "zpopmin",
        "bzpopmax" => "zpopmax",
        "lmpop" | "blmpop" => {
            if direction(name, args).is_some_and(|w| eq_ic(w, "left")) {
                "lpop"
            } else {
                "rpop"
            }
        }
        _ => {
            if direction(name, args).is_some_and(|w| eq_ic(w, "min")) {
                "zpopmin"
            } else {
                "zpopmax"
            }
        }
    }
}

/// The LEFT|RIGHT / MIN|MAX word of [B]LMPOP / [B]ZMPOP: right after the keys (a key may
/// itself be called "left").
fn direction<'a>(name: &str, args: &'a [&'a [u8]]) -> Option<&'a [u8]> {
    let at = if name.starts_with('b') { 2 } else { 1 };
    let n: usize = std::str::from_utf8(args.get(at)?).ok()?.parse().ok()?;
    args.get(at + 1 + n).copied()
}

/// ZADD's options come before the first score (a member may be called "incr").
fn zadd_has(args: &[&[u8]], w: &str) -> bool {
    let opts = ["nx", "xx", "gt", "lt", "ch", "incr"];
    args.iter()
        .skip(2)
        .take_while(|a| opts.iter().any(|o| eq_ic(a, o)))
        .any(|a| eq_ic(a, w))
}
