//! SORT and SORT_RO with Redis 7.0 semantics: numeric or ALPHA (binary, as under the C
//! locale) order, BY / GET patterns with `*` substitution and `->field` hash lookups,
//! `GET #`, LIMIT, and STORE into a list.
//!
//! BY/GET patterns name keys that can't be known before the sorted value is read, so when
//! a pattern needs lookups the handler swaps its key locks for all stripes (in order, so
//! no deadlock) and reads everything under them; plain sorts keep the one-stripe lock.

use std::cmp::Ordering;

use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx, KeyPos};
use crate::db::{LockSet, Value};
use crate::types::{ListValue, ZSetValue};

/// Key-spec flags: the sorted key is read, STORE's destination overwritten.
const SORT_FLAGS: &[&[&str]] = &[&["RO", "access"], &["OW", "update"]];

pub fn commands() -> Vec<CommandSpec> {
    vec![
        CommandSpec::new("sort", -2, "write denyoom", (1, 1, 1), sort)
            .group("generic")
            .since("1.0.0")
            .keys(KeyPos::Custom(sort_keys))
            .key_flags(SORT_FLAGS),
        CommandSpec::new("sort_ro", -2, "readonly", (1, 1, 1), sort_ro)
            .group("generic")
            .since("7.0.0")
            .keys(KeyPos::Custom(sort_ro_keys)),
    ]
}

/// Key positions of SORT: the sorted key, then the last STORE destination (skipping the
/// arguments of LIMIT, BY and GET so a key named "store" there is not mistaken for it).
fn sort_keys(args: &[&[u8]], out: &mut Vec<usize>) {
    if args.len() < 2 {
        return;
    }
    out.push(1);
    let mut store = None;
    let mut j = 2;
    while j < args.len() {
        let a = &args[j];
        if eq_ic(a, "limit") {
            j += 2;
        } else if eq_ic(a, "get") || eq_ic(a, "by") {
            j += 1;
        } else if eq_ic(a, "store") && j + 1 < args.len() {
            store = Some(j + 1);
            j += 1;
        }
        j += 1;
    }
    out.extend(store);
}

/// SORT_RO's only key is the sorted one (its key list still depends on the arguments in
/// Redis's view: `movablekeys`).
fn sort_ro_keys(args: &[&[u8]], out: &mut Vec<usize>) {
    if args.len() >= 2 {
        out.push(1);
    }
}

fn sort(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    sort_generic(ctx, args, false)
}

fn sort_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    sort_generic(ctx, args, true)
}

/// Parsed options of one SORT call.
struct Opts<'a> {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    store: Option<&'a [u8]>,
    by: Option<&'a [u8]>,
    dontsort: bool,
    gets: Vec<&'a [u8]>,
}

fn parse_opts<'a>(ctx: &Ctx<'_>, args: &[&'a [u8]], readonly: bool) -> Result<Opts<'a>, CmdError> {
    let mut o = Opts {
        desc: false,
        alpha: false,
        limit_start: 0,
        limit_count: -1,
        store: None,
        by: None,
        dontsort: false,
        gets: Vec::new(),
    };
    let cluster = ctx.srv.cluster.get().is_some();
    // BY with a pattern and GET read keys the ACL check could not see: Redis 7.0 allows
    // them only to a user who may read every key (asked once, when first needed).
    let mut reads_all: Option<bool> = None;
    let mut reads_all_keys = |ctx: &Ctx<'_>| {
        *reads_all.get_or_insert_with(|| {
            super::table()
                .get(args[0])
                .is_some_and(|c| super::acl_check::reads_all_keys(ctx.srv, ctx.cl, c, args))
        })
    };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if eq_ic(a, "asc") {
            o.desc = false;
        } else if eq_ic(a, "desc") {
            o.desc = true;
        } else if eq_ic(a, "alpha") {
            o.alpha = true;
        } else if eq_ic(a, "limit") && left >= 2 {
            o.limit_start = arg_i64(args[j + 1])?;
            o.limit_count = arg_i64(args[j + 2])?;
            j += 2;
        } else if !readonly && eq_ic(a, "store") && left >= 1 {
            o.store = Some(args[j + 1]);
            j += 1;
        } else if eq_ic(a, "by") && left >= 1 {
            let p = args[j + 1];
            o.by = Some(p);
            if !p.contains(&b'*') {
                o.dontsort = true;
            } else if cluster {
                // Redis 7.0 refuses every real BY pattern in cluster mode (the keys it
                // forms may live on other nodes), hash tag or not.
                return Err(CmdError::msg(
                    "ERR BY option of SORT denied in Cluster mode.",
                ));
            } else if !reads_all_keys(ctx) {
                return Err(CmdError::msg(
                    "ERR BY option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            j += 1;
        } else if eq_ic(a, "get") && left >= 1 {
            let p = args[j + 1];
            if cluster {
                // Even `GET #` (Redis 7.0 checks no pattern).
                return Err(CmdError::msg(
                    "ERR GET option of SORT denied in Cluster mode.",
                ));
            }
            if !reads_all_keys(ctx) {
                return Err(CmdError::msg(
                    "ERR GET option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            o.gets.push(p);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// One element being sorted and the value it sorts by.
struct Item {
    elem: Vec<u8>,
    score: f64,
    /// ALPHA with BY: the BY value (None when the key is missing: sorts first).
    cmp: Option<Vec<u8>>,
}

/// A value found through a pattern.
fn lookup_pattern(ctx: &mut Ctx<'_>, pat: &[u8], subst: &[u8]) -> Option<Vec<u8>> {
    if pat == b"#" {
        return Some(subst.to_vec());
    }
    let star = pat.iter().position(|&c| c == b'*')?;
    let after = &pat[star + 1..];
    let field = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&f| f + 2 < after.len());
    let (postfix, field) = match field {
        Some(f) => (&after[..f], Some(&after[f + 2..])),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(pat.len() + subst.len());
    key.extend_from_slice(&pat[..star]);
    key.extend_from_slice(subst);
    key.extend_from_slice(postfix);
    let v = ctx.ks.get(&key)?;
    match field {
        Some(f) => match v {
            Value::Hash(h) => h.get(f).map(|x| x.to_vec()),
            _ => None,
        },
        None => {
            let mut tmp = itoa::Buffer::new();
            v.str_bytes(&mut tmp).map(|b| b.to_vec())
        }
    }
}

/// `strtod` as SORT uses it: leading whitespace allowed, the whole rest must parse, no
/// overflow/underflow (ERANGE), no NaN. An empty string is 0.
fn sort_strtod(b: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(b).ok()?;
    let t = t.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    if t.is_empty() {
        return Some(0.0);
    }
    let (neg, body) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let v = if body.len() > 2 && (body.starts_with("0x") || body.starts_with("0X")) {
        // Hex integers (strtod accepts them; Rust's parser doesn't). Hex floats are rare
        // enough in sort keys to leave out.
        let mut acc = 0f64;
        for c in body[2..].chars() {
            acc = acc * 16.0 + c.to_digit(16)? as f64;
        }
        acc
    } else {
        if body.starts_with(['+', '-']) {
            return None;
        }
        let v: f64 = body.parse().ok()?;
        let lower = body.to_ascii_lowercase();
        let literal_inf = lower == "inf" || lower == "infinity";
        if v.is_nan() || (v.is_infinite() && !literal_inf) {
            return None;
        }
        let nonzero_digits = body
            .split(['e', 'E'])
            .next()
            .is_some_and(|m| m.bytes().any(|c| (b'1'..=b'9').contains(&c)));
        if v != 0.0 && v.abs() < f64::MIN_POSITIVE || v == 0.0 && nonzero_digits {
            return None;
        }
        v
    };
    Some(if neg { -v } else { v })
}

fn sort_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], readonly: bool) -> CmdResult {
    let mut o = parse_opts(ctx, args, readonly)?;
    let needs_lookups = (o.by.is_some() && !o.dontsort) || o.gets.iter().any(|g| &g[..] != b"#");
    if needs_lookups && !ctx.ks.locks.all {
        // Release first: the mutexes are not reentrant, and lock_all takes them in order.
        ctx.ks.locks = LockSet::empty();
        ctx.ks.locks = ctx.srv.ks.lock_all();
    }
    let key = &args[1];
    #[derive(PartialEq)]
    enum Kind {
        List,
        Set,
        ZSet,
    }
    let kind = match ctx.ks.get(key) {
        None => None,
        Some(Value::List(_)) => Some(Kind::List),
        Some(Value::Set(_)) => Some(Kind::Set),
        Some(Value::ZSet(_)) => Some(Kind::ZSet),
        Some(_) => return Err(CmdError::WrongType),
    };
    if kind == Some(Kind::ZSet) {
        to_skiplist(ctx, key);
    }
    // A set has no order of its own: with STORE (replicated) or from a script Redis
    // forces ALPHA order.
    if o.dontsort && kind == Some(Kind::Set) && (o.store.is_some() || ctx.cl.in_script) {
        o.dontsort = false;
        o.alpha = true;
        o.by = None;
    }
    let mut elems: Vec<Vec<u8>> = Vec::new();
    let vlen = match ctx.ks.get(key) {
        Some(Value::List(l)) => l.len() as i64,
        Some(Value::Set(s)) => s.len() as i64,
        Some(Value::ZSet(z)) => z.len() as i64,
        _ => 0,
    };
    let mut start = o.limit_start.max(0);
    let mut end = if o.limit_count < 0 {
        vlen - 1
    } else {
        start.saturating_add(o.limit_count) - 1
    };
    if start >= vlen {
        start = vlen - 1;
        end = vlen - 2;
    }
    end = end.min(vlen - 1);
    let ranged = o.dontsort && matches!(kind, Some(Kind::List | Kind::ZSet));
    // Ascending indices [a, b] of the range (DESC counts from the tail).
    let (a, b) = if o.desc {
        ((vlen - 1 - end) as usize, (vlen - 1 - start) as usize)
    } else {
        (start as usize, end as usize)
    };
    match ctx.ks.get(key) {
        Some(Value::List(l)) if ranged && start <= end => {
            l.for_range(a, b, |e| elems.push(e.to_vec()));
            if o.desc {
                elems.reverse();
            }
        }
        Some(Value::ZSet(z)) if ranged && start <= end => {
            elems = z
                .range(a, b + 1, o.desc)
                .into_iter()
                .map(|(m, _)| m)
                .collect();
        }
        // An empty LIMIT window of an unsorted list/zset.
        _ if ranged => {}
        Some(Value::List(l)) => elems = l.iter().map(|e| e.to_vec()).collect(),
        Some(Value::Set(s)) => s.for_each(|m| elems.push(m.to_vec())),
        Some(Value::ZSet(z)) => z.for_each(|m, _| elems.push(m.to_vec())),
        _ => {}
    }
    if ranged {
        end -= start;
        start = 0;
    }
    let mut items: Vec<Item> = elems
        .into_iter()
        .map(|elem| Item {
            elem,
            score: 0.0,
            cmp: None,
        })
        .collect();
    let mut conversion_error = false;
    if !o.dontsort {
        for it in items.iter_mut() {
            let byval = match o.by {
                Some(p) => match lookup_pattern(ctx, p, &it.elem) {
                    Some(v) => v,
                    None => continue,
                },
                None => it.elem.clone(),
            };
            if o.alpha {
                if o.by.is_some() {
                    it.cmp = Some(byval);
                }
            } else {
                match sort_strtod(&byval) {
                    Some(s) => it.score = s,
                    None => conversion_error = true,
                }
            }
        }
        let (alpha, by, desc) = (o.alpha, o.by.is_some(), o.desc);
        items.sort_by(|a, b| {
            let c = compare(a, b, alpha, by);
            if desc {
                c.reverse()
            } else {
                c
            }
        });
    }
    if conversion_error {
        return Err(CmdError::msg(
            "ERR One or more scores can't be converted into double",
        ));
    }
    let picked: &[Item] = if start <= end && end >= 0 {
        &items[start as usize..=(end as usize).min(items.len().saturating_sub(1))]
    } else {
        &[]
    };
    let mut rows: Vec<Option<Vec<u8>>> = Vec::new();
    for it in picked {
        if o.gets.is_empty() {
            rows.push(Some(it.elem.clone()));
        }
        for g in &o.gets {
            rows.push(lookup_pattern(ctx, g, &it.elem));
        }
    }
    match o.store {
        None => {
            // Without STORE, SORT only reads: no change to count, propagate or signal.
            ctx.unchanged();
            ctx.out.array(rows.len());
            for r in &rows {
                match r {
                    Some(v) => ctx.out.bulk(v),
                    None => ctx.out.null(),
                }
            }
        }
        Some(dst) => store(ctx, dst, &rows),
    }
    Ok(())
}

/// Redis converts a listpack zset it sorts to a skiplist, for good (OBJECT ENCODING and
/// memory show it), so the node does the same.
fn to_skiplist(ctx: &mut Ctx<'_>, key: &[u8]) {
    let mut lim = ctx.limits();
    lim.zset_max_listpack_entries = 0;
    if let Some(Value::ZSet(z)) = ctx.ks.get_w(key) {
        if z.encoding() == "listpack" {
            let pairs = z.range(0, z.len(), false);
            *z = ZSetValue::from_pairs(pairs, &lim);
        }
    }
}

/// SORT's comparison (before DESC): numeric by score, ties broken by the element's bytes;
/// ALPHA by the BY value (missing first) or by the element.
fn compare(a: &Item, b: &Item, alpha: bool, by: bool) -> Ordering {
    if !alpha {
        return a
            .score
            .partial_cmp(&b.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.elem.cmp(&b.elem));
    }
    if by {
        return match (&a.cmp, &b.cmp) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(x), Some(y)) => x.cmp(y),
        };
    }
    a.elem.cmp(&b.elem)
}

/// STORE: the rows as a list at `dst` (missing GET values as empty strings), or `dst`
/// deleted when there are none; replies with the row count.
fn store(ctx: &mut Ctx<'_>, dst: &[u8], rows: &[Option<Vec<u8>>]) {
    if rows.is_empty() {
        if ctx.ks.del(dst) {
            ctx.notify(crate::notify::GENERIC, "del", dst);
        } else {
            ctx.unchanged();
        }
    } else {
        let lim = ctx.limits();
        let items = rows.iter().map(|r| r.as_deref().unwrap_or(b""));
        ctx.ks
            .set(dst, Value::List(ListValue::from_items(items, &lim)));
        ctx.ks.signal_ready(dst);
        ctx.notify(crate::notify::LIST, "sortstore", dst);
        ctx.count_changes(rows.len());
    }
    ctx.out.int(rows.len() as i64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_like_redis() {
        assert_eq!(sort_strtod(b""), Some(0.0));
        assert_eq!(sort_strtod(b"  2.5"), Some(2.5));
        assert_eq!(sort_strtod(b"0x10"), Some(16.0));
        assert_eq!(sort_strtod(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(sort_strtod(b"2.5 "), None);
        assert_eq!(sort_strtod(b"nan"), None);
        assert_eq!(sort_strtod(b"1e400"), None);
        assert_eq!(sort_strtod(b"1e-400"), None);
        assert_eq!(sort_strtod(b"abc"), None);
        assert_eq!(sort_strtod(b"0.000"), Some(0.0));
    }
}
