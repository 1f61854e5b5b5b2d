//! Write propagation: every command that changed the dataset, in execution order, rewritten
//! into a deterministic form (relative TTLs become absolute, blocking pops become their
//! non-blocking forms), fed to subscribers. The AOF is the first subscriber; replication
//! will be the next.
//!
//! The dispatcher calls [`propagate`] with the command's locks still held, so the order
//! subscribers see is the execution order for every key. When no subscriber is registered
//! the cost is one relaxed atomic load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;

use crate::cmd::{eq_ic, CommandSpec, Ctx};

/// What a subscriber is told about one write.
pub struct Write<'a> {
    /// Database the command ran in.
    pub db: usize,
    /// The command in its deterministic form.
    pub args: &'a [&'a [u8]],
    /// Stripes the command held locked (empty: a keyless or whole-keyspace command).
    pub stripes: &'a [u16],
}

/// A consumer of the write stream (AOF, replication).
pub trait WriteSubscriber: Send + Sync {
    /// Called with the command's key locks held: keep it short (buffer, don't block).
    fn feed(&self, w: &Write<'_>);
}

/// The registered subscribers.
#[derive(Default)]
pub struct Propagator {
    active: AtomicBool,
    subs: RwLock<Vec<Arc<dyn WriteSubscriber>>>,
}

impl Propagator {
    pub fn subscribe(&self, s: Arc<dyn WriteSubscriber>) {
        let mut v = self.subs.write();
        v.push(s);
        self.active.store(true, Ordering::Release);
    }

    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }
}

/// Feeds a successful write command to the subscribers (called by the dispatcher).
/// `reply_at`: where the command's reply starts in `ctx.out` (SPOP is propagated as SREM of
/// the members it replied with).
/// Commands that changed nothing (a blocking command that blocked, a DEL of missing keys...)
/// never get here: `run_locked` decides.
/// `rewrite`: what the handler asked to propagate instead (`Ctx::propagate_as`).
pub fn propagate(
    ctx: &Ctx<'_>,
    cmd: &CommandSpec,
    args: &[&[u8]],
    reply_at: usize,
    rewrite: Option<Vec<Vec<Bytes>>>,
) {
    let p = &ctx.srv.persist.prop;
    let rewritten = if let Some(mut cmds) = rewrite {
        if cmds.len() != 1 {
            return propagate_many(ctx, cmds);
        }
        cmds.pop()
    } else if cmd.name == "spop" {
        let members = ctx
            .out
            .buf
            .get(reply_at..)
            .map(reply_bulks)
            .unwrap_or_default();
        if members.is_empty() {
            return;
        }
        let mut v = Vec::with_capacity(members.len() + 2);
        v.push(Bytes::from_static(b"SREM"));
        v.push(Bytes::copy_from_slice(args[1]));
        v.extend(members);
        Some(v)
    } else {
        deterministic(cmd.name, args, ctx.ks.now)
    };
    if ctx.in_exec {
        // Inside EXEC: collected, then fed as one MULTI ... EXEC block by `end_exec`.
        let owned = rewritten.unwrap_or_else(|| crate::cmd::owned_args(args));
        TX.with(|t| t.borrow_mut().push((ctx.ks.db, owned)));
        return;
    }
    let view;
    let args = match &rewritten {
        Some(v) => {
            view = crate::cmd::arg_view(v);
            &view[..]
        }
        None => args,
    };
    let stripes = held_stripes(ctx);
    let w = Write {
        db: ctx.ks.db,
        args,
        stripes: &stripes,
    };
    for s in p.subs.read().iter() {
        s.feed(&w);
    }
}

/// Several commands standing for one (a stream read's XCLAIMs): none is sent for an empty
/// list, and more than one travel as MULTI ... EXEC (Redis 7.0's also-propagate).
fn propagate_many(ctx: &Ctx<'_>, cmds: Vec<Vec<Bytes>>) {
    if cmds.is_empty() {
        return;
    }
    if ctx.in_exec {
        TX.with(|t| {
            t.borrow_mut()
                .extend(cmds.into_iter().map(|c| (ctx.ks.db, c)))
        });
        return;
    }
    let stripes = held_stripes(ctx);
    let subs = ctx.srv.persist.prop.subs.read();
    let feed = |args: &[&[u8]]| {
        let w = Write {
            db: ctx.ks.db,
            args,
            stripes: &stripes,
        };
        for s in subs.iter() {
            s.feed(&w);
        }
    };
    let wrap = cmds.len() > 1;
    if wrap {
        feed(&[b"MULTI"]);
    }
    for c in &cmds {
        feed(&crate::cmd::arg_view(c));
    }
    if wrap {
        feed(&[b"EXEC"]);
    }
}

thread_local! {
    /// Writes of the EXEC running on this thread.
    static TX: std::cell::RefCell<Vec<(usize, Vec<Bytes>)>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn held_stripes(ctx: &Ctx<'_>) -> smallvec::SmallVec<[u16; 4]> {
    if ctx.ks.locks.all {
        smallvec::SmallVec::new()
    } else {
        ctx.ks.locks.guards.iter().map(|(i, _)| *i).collect()
    }
}

/// End of an EXEC (its locks still held): feeds its writes, wrapped in MULTI/EXEC when
/// there are several, so a crash never replays half a transaction.
pub fn end_exec(ctx: &Ctx<'_>) {
    let cmds = TX.with(|t| std::mem::take(&mut *t.borrow_mut()));
    if cmds.is_empty() {
        return;
    }
    let p = &ctx.srv.persist.prop;
    let stripes = held_stripes(ctx);
    let subs = p.subs.read();
    let db0 = cmds[0].0;
    let wrap = cmds.len() > 1;
    let feed = |db: usize, args: &[&[u8]]| {
        let w = Write {
            db,
            args,
            stripes: &stripes,
        };
        for s in subs.iter() {
            s.feed(&w);
        }
    };
    if wrap {
        feed(db0, &[b"MULTI"]);
    }
    for (db, args) in &cmds {
        feed(*db, &crate::cmd::arg_view(args));
    }
    if wrap {
        feed(cmds[cmds.len() - 1].0, &[b"EXEC"]);
    }
}

/// The bulk strings of a reply (one bulk, or an array/set of bulks); empty for nil or
/// anything else.
fn reply_bulks(r: &[u8]) -> Vec<Bytes> {
    fn line(r: &[u8], pos: &mut usize) -> Option<(u8, i64)> {
        let start = *pos;
        let end = start + memchr::memchr(b'\r', r.get(start..)?)?;
        let kind = *r.get(start)?;
        let n = std::str::from_utf8(r.get(start + 1..end)?)
            .ok()?
            .parse()
            .ok()?;
        *pos = end + 2;
        Some((kind, n))
    }
    fn bulk(r: &[u8], pos: &mut usize) -> Option<Bytes> {
        match line(r, pos)? {
            (b'$', n) if n >= 0 => {
                let s = r.get(*pos..*pos + n as usize)?;
                *pos += n as usize + 2;
                Some(Bytes::copy_from_slice(s))
            }
            _ => None,
        }
    }
    let mut pos = 0;
    match r.first() {
        Some(b'$') => bulk(r, &mut pos).into_iter().collect(),
        Some(b'*') | Some(b'~') => {
            let Some((_, n)) = line(r, &mut pos) else {
                return Vec::new();
            };
            (0..n.max(0)).map_while(|_| bulk(r, &mut pos)).collect()
        }
        _ => Vec::new(),
    }
}

/// A key removed by expiry or eviction: subscribers get `DEL key` (called with the key's
/// stripe locked, so it is ordered with the commands on that key).
pub fn deleted(srv: &crate::server::Server, db: usize, key: &[u8]) {
    let p = &srv.persist.prop;
    if !p.active() {
        return;
    }
    let stripe = [crate::db::stripe_of(crate::slot::key_hash_slot(key)) as u16];
    let args: [&[u8]; 2] = [b"DEL", key];
    let w = Write {
        db,
        args: &args,
        stripes: &stripe,
    };
    for s in p.subs.read().iter() {
        s.feed(&w);
    }
}

/// The active expiry sweep of one locked stripe and database when there are subscribers:
/// like `Stripe::expire_sweep`, but each removed key is propagated as DEL.
pub fn expire_sweep(
    srv: &crate::server::Server,
    st: &mut crate::db::Stripe,
    db: usize,
    now: u64,
) -> usize {
    let mut dead: Vec<Vec<u8>> = Vec::new();
    if let Some(d) = st.db(db) {
        for m in d.maps.iter() {
            for (k, e) in m.iter() {
                let at = e.expire_at();
                if at != crate::db::NO_EXPIRE && at <= now {
                    dead.push(k.as_slice().to_vec());
                }
            }
        }
    }
    for k in &dead {
        let slot = crate::slot::key_hash_slot(k);
        if st.remove(db, slot, k).is_some() {
            deleted(srv, db, k);
            crate::notify::expired(srv, db, k);
        }
    }
    dead.len()
}

fn num(n: u64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}

fn parse_i64(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// The command in a form whose replay gives the same result at any later time: None when
/// `args` already is (the common case costs no copy).
pub fn deterministic(name: &str, args: &[&[u8]], now: u64) -> Option<Vec<Bytes>> {
    let owned = Some;
    let copy = |a: &[&[u8]]| {
        a.iter()
            .map(|x| Bytes::copy_from_slice(x))
            .collect::<Vec<_>>()
    };
    let s = |x: &'static str| Bytes::from_static(x.as_bytes());
    match name {
        "restore" | "restore-asking" if args.len() >= 4 => {
            let absttl = args[4..].iter().any(|a| eq_ic(a, "absttl"));
            match parse_i64(args[2]) {
                Some(ttl) if ttl > 0 && !absttl => {
                    let mut v = copy(args);
                    v[0] = s("RESTORE");
                    v[2] = num(now + ttl as u64);
                    v.push(s("ABSTTL"));
                    owned(v)
                }
                _ => None,
            }
        }
        // Blocking pops replay as their non-blocking forms (same key order, same result).
        "bzpopmin" | "bzpopmax" if args.len() >= 3 => {
            let keys = &args[1..args.len() - 1];
            let (cmd, dir) = match name {
                "bzpopmin" => ("ZMPOP", "MIN"),
                _ => ("ZMPOP", "MAX"),
            };
            let mut v = vec![s(cmd), num(keys.len() as u64)];
            v.extend(copy(keys));
            v.push(s(dir));
            owned(v)
        }
        "bzmpop" if args.len() >= 3 => {
            let mut v = vec![s("ZMPOP")];
            v.extend(copy(&args[2..]));
            owned(v)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(v: &[&str]) -> Vec<Bytes> {
        v.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    fn det(name: &str, v: &[&str]) -> (Vec<Bytes>, bool) {
        let args = b(v);
        let r = deterministic(name, &crate::cmd::arg_view(&args), 1_000_000);
        let borrowed = r.is_none();
        (r.unwrap_or(args), borrowed)
    }

    #[test]
    fn spop_replies_parse_into_members() {
        assert_eq!(reply_bulks(b"$1\r\na\r\n"), b(&["a"]));
        assert_eq!(
            reply_bulks(b"*2\r\n$1\r\na\r\n$2\r\nbc\r\n"),
            b(&["a", "bc"])
        );
        assert_eq!(reply_bulks(b"~1\r\n$1\r\nz\r\n"), b(&["z"]));
        assert!(reply_bulks(b"$-1\r\n").is_empty());
        assert!(reply_bulks(b"*0\r\n").is_empty());
    }

    #[test]
    fn relative_ttls_become_absolute() {
        let r = det("bzpopmin", &["BZPOPMIN", "a", "b", "0"]).0;
        assert_eq!(r, b(&["ZMPOP", "2", "a", "b", "MIN"]));
        assert!(det("incr", &["INCR", "k"]).1);
    }
}
