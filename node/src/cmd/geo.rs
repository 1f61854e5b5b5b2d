//! GEO commands: GEOADD GEODIST GEOHASH GEOPOS GEOSEARCH GEOSEARCHSTORE GEORADIUS
//! GEORADIUSBYMEMBER and the _RO forms. A geo key is a sorted set whose scores are 52-bit
//! geohashes (`crate::types::geo`); GEOADD is ZADD with computed scores, as in Redis.

use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx, KeyPos};
use crate::db::Value;
use crate::notify::{GENERIC, ZSET};
use crate::resp::Out;
use crate::types::geo::{self, Shape};
use crate::types::zset::ScoreBound;
use crate::types::{parse_f64, ZSetValue};

pub fn commands() -> Vec<CommandSpec> {
    let c = |name, arity, fl, keys, h| {
        CommandSpec::new(name, arity, fl, keys, h)
            .group("geo")
            .since("3.2.0")
    };
    vec![
        c("geoadd", -5, "write denyoom", (1, 1, 1), geoadd),
        c("geodist", -4, "readonly", (1, 1, 1), geodist),
        c("geohash", -2, "readonly", (1, 1, 1), geohash),
        c("geopos", -2, "readonly", (1, 1, 1), geopos),
        c("geosearch", -7, "readonly", (1, 1, 1), geosearch).since("6.2.0"),
        c(
            "geosearchstore",
            -8,
            "write denyoom",
            (1, 2, 1),
            geosearchstore,
        )
        .since("6.2.0")
        .key_flags(&[&["OW", "update"], &["RO", "access"]]),
        c("georadius", -6, "write denyoom", (1, 1, 1), georadius).keys(KeyPos::Custom(radius_keys)),
        c("georadius_ro", -6, "readonly", (1, 1, 1), georadius_ro).since("3.2.10"),
        c(
            "georadiusbymember",
            -5,
            "write denyoom",
            (1, 1, 1),
            georadiusbymember,
        )
        .keys(KeyPos::Custom(member_keys)),
        c(
            "georadiusbymember_ro",
            -5,
            "readonly",
            (1, 1, 1),
            georadiusbymember_ro,
        )
        .since("3.2.10"),
    ]
}

/// Keys of GEORADIUS: the source, then the key after the last STORE/STOREDIST.
fn radius_keys(args: &[&[u8]], out: &mut Vec<usize>) {
    store_keys(args, 6, out);
}

/// Keys of GEORADIUSBYMEMBER (options start one argument earlier).
fn member_keys(args: &[&[u8]], out: &mut Vec<usize>) {
    store_keys(args, 5, out);
}

fn store_keys(args: &[&[u8]], from: usize, out: &mut Vec<usize>) {
    if args.len() > 1 {
        out.push(1);
    }
    let mut store = None;
    let mut i = from;
    while i + 1 < args.len() {
        if eq_ic(args[i], "store") || eq_ic(args[i], "storedist") {
            store = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    out.extend(store);
}

// ---- parsing helpers ----

fn float(b: &[u8], msg: &'static str) -> Result<f64, CmdError> {
    parse_f64(b).ok_or(CmdError::msg(msg))
}

/// Reads a `longitude latitude` pair and checks it can be indexed.
fn lonlat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), CmdError> {
    let x = parse_f64(lon).ok_or(CmdError::NotFloat)?;
    let y = parse_f64(lat).ok_or(CmdError::NotFloat)?;
    if !geo::valid_lonlat(x, y) {
        return Err(CmdError::msg(format!(
            "ERR invalid longitude,latitude pair {x:.6},{y:.6}"
        )));
    }
    Ok((x, y))
}

/// Meters per unit.
fn unit(u: &[u8]) -> Result<f64, CmdError> {
    if eq_ic(u, "m") {
        Ok(1.0)
    } else if eq_ic(u, "km") {
        Ok(1000.0)
    } else if eq_ic(u, "ft") {
        Ok(0.3048)
    } else if eq_ic(u, "mi") {
        Ok(1609.34)
    } else {
        Err(CmdError::msg(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        ))
    }
}

/// `radius unit` -> (radius in units, meters per unit).
fn radius_arg(r: &[u8], u: &[u8]) -> Result<(f64, f64), CmdError> {
    let d = float(r, "ERR need numeric radius")?;
    if d < 0.0 {
        return Err(CmdError::msg("ERR radius cannot be negative"));
    }
    Ok((d, unit(u)?))
}

/// `width height unit` -> (width, height, meters per unit).
fn box_arg(w: &[u8], h: &[u8], u: &[u8]) -> Result<(f64, f64, f64), CmdError> {
    let w = float(w, "ERR need numeric width")?;
    let h = float(h, "ERR need numeric height")?;
    if h < 0.0 || w < 0.0 {
        return Err(CmdError::msg("ERR height or width cannot be negative"));
    }
    Ok((w, h, unit(u)?))
}

/// Redis's "human" long double format (`%.17Lf`, trailing zeros dropped): coordinates.
fn human(d: f64) -> String {
    let s = format!("{d:.17}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

fn write_human(out: &mut Out, d: f64) {
    let s = human(d);
    if out.resp3 {
        out.raw(b",");
        out.raw(s.as_bytes());
        out.raw(b"\r\n");
    } else {
        out.bulk(s.as_bytes());
    }
}

/// Distances are always a bulk string with four decimals.
fn write_dist(out: &mut Out, d: f64) {
    out.bulk(format!("{d:.4}").as_bytes());
}

// ---- GEOADD / GEODIST / GEOHASH / GEOPOS ----

/// Rewrites to ZADD with geohash scores and runs it (Redis does the same).
fn geoadd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut idx = 2;
    let (mut nx, mut xx) = (false, false);
    while idx < args.len() {
        let a = &args[idx];
        if eq_ic(a, "nx") {
            nx = true;
        } else if eq_ic(a, "xx") {
            xx = true;
        } else if !eq_ic(a, "ch") {
            break;
        }
        idx += 1;
    }
    let rest = &args[idx..];
    if !rest.len().is_multiple_of(3) || (nx && xx) {
        return Err(CmdError::Syntax);
    }
    let scores = rest
        .chunks_exact(3)
        .map(|t| {
            let (x, y) = lonlat(t[0], t[1])?;
            let score = geo::score_of(x, y).ok_or(CmdError::NotFloat)?;
            Ok(score.to_string())
        })
        .collect::<Result<Vec<String>, CmdError>>()?;
    let mut zargs: Vec<&[u8]> = Vec::with_capacity(idx + rest.len() / 3 * 2);
    zargs.push(b"zadd");
    zargs.extend_from_slice(&args[1..idx]);
    for (t, score) in rest.chunks_exact(3).zip(&scores) {
        zargs.push(score.as_bytes());
        zargs.push(t[2]);
    }
    let zadd = super::table()
        .get(b"zadd")
        .ok_or(CmdError::msg("ERR zadd is not available"))?
        .handler;
    zadd(ctx, &zargs)
}

fn geodist(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let to_m = match args.len() {
        4 => 1.0,
        5 => unit(args[4])?,
        _ => return Err(CmdError::Syntax),
    };
    let Some(z) = ctx.ks.get_zset(args[1])? else {
        ctx.out.null();
        return Ok(());
    };
    match (z.score(args[2]), z.score(args[3])) {
        (Some(a), Some(b)) => {
            let (x1, y1) = geo::decode_score(a);
            let (x2, y2) = geo::decode_score(b);
            write_dist(ctx.out, geo::distance(x1, y1, x2, y2) / to_m);
        }
        _ => ctx.out.null(),
    }
    Ok(())
}

fn geohash(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let z = ctx.ks.get_zset(args[1])?;
    ctx.out.array(args.len() - 2);
    for m in &args[2..] {
        match z
            .as_ref()
            .and_then(|z| z.score(m))
            .and_then(geo::geohash_string)
        {
            Some(s) => ctx.out.bulk(s.as_bytes()),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn geopos(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let z = ctx.ks.get_zset(args[1])?;
    ctx.out.array(args.len() - 2);
    for m in &args[2..] {
        match z.as_ref().and_then(|z| z.score(m)) {
            Some(s) => {
                let (x, y) = geo::decode_score(s);
                ctx.out.array(2);
                write_human(ctx.out, x);
                write_human(ctx.out, y);
            }
            None => ctx.out.null_array(),
        }
    }
    Ok(())
}

// ---- the search family ----

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Radius,
    RadiusMember,
    Search,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// One match: member, score, distance in meters, coordinates.
struct Point {
    member: Vec<u8>,
    score: f64,
    dist: f64,
    lon: f64,
    lat: f64,
}

fn georadius(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    search(ctx, args, Kind::Radius, true)
}
fn georadius_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    search(ctx, args, Kind::Radius, false)
}
fn georadiusbymember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    search(ctx, args, Kind::RadiusMember, true)
}
fn georadiusbymember_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    search(ctx, args, Kind::RadiusMember, false)
}
fn geosearch(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    search(ctx, args, Kind::Search, false)
}
fn geosearchstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    search(ctx, args, Kind::Search, true)
}

fn member_pos(z: &ZSetValue, m: &[u8]) -> Result<(f64, f64), CmdError> {
    z.score(m)
        .map(geo::decode_score)
        .ok_or(CmdError::msg("ERR could not decode requested zset member"))
}

/// The common body of the search commands, in the order Redis checks things (argument
/// errors win over a missing key; WRONGTYPE wins over everything).
fn search(ctx: &mut Ctx<'_>, args: &[&[u8]], kind: Kind, can_store: bool) -> CmdResult {
    // GEOSEARCHSTORE names the destination first.
    let src = if kind == Kind::Search && can_store {
        &args[2]
    } else {
        &args[1]
    };
    let exists = ctx.ks.get_zset(src)?.is_some();
    let mut center = None;
    let mut shape = None; // (shape in units, meters per unit)
    let mut store: Option<&[u8]> = None;
    let base = match kind {
        Kind::Radius => {
            center = Some(lonlat(args[2], args[3])?);
            let (r, conv) = radius_arg(args[4], args[5])?;
            shape = Some((Shape::Radius(r), conv));
            6
        }
        Kind::RadiusMember => {
            if exists {
                if let Some(z) = ctx.ks.get_zset(src)? {
                    center = Some(member_pos(z, args[2])?);
                }
                let (r, conv) = radius_arg(args[3], args[4])?;
                shape = Some((Shape::Radius(r), conv));
            }
            5
        }
        Kind::Search if can_store => {
            store = Some(args[1]);
            3
        }
        Kind::Search => 2,
    };
    let search = kind == Kind::Search;
    let (mut withdist, mut withhash, mut withcoord, mut any, mut storedist) =
        (false, false, false, false, false);
    let (mut frommember, mut fromloc) = (false, false);
    let mut sort = Sort::None;
    let mut count: i64 = 0;
    let opts = &args[base.min(args.len())..];
    let mut i = 0;
    while i < opts.len() {
        let a = &opts[i];
        let left = opts.len() - i - 1;
        if eq_ic(a, "withdist") {
            withdist = true;
        } else if eq_ic(a, "withhash") {
            withhash = true;
        } else if eq_ic(a, "withcoord") {
            withcoord = true;
        } else if eq_ic(a, "any") {
            any = true;
        } else if eq_ic(a, "asc") {
            sort = Sort::Asc;
        } else if eq_ic(a, "desc") {
            sort = Sort::Desc;
        } else if eq_ic(a, "count") && left >= 1 {
            count = arg_i64(opts[i + 1])?;
            if count <= 0 {
                return Err(CmdError::msg("ERR COUNT must be > 0"));
            }
            i += 1;
        } else if (eq_ic(a, "store") || eq_ic(a, "storedist")) && left >= 1 && can_store && !search
        {
            storedist = eq_ic(a, "storedist");
            store = Some(opts[i + 1]);
            i += 1;
        } else if eq_ic(a, "storedist") && search && can_store {
            storedist = true;
        } else if eq_ic(a, "frommember") && left >= 1 && search && !fromloc {
            if let Some(z) = ctx.ks.get_zset(src)? {
                center = Some(member_pos(z, opts[i + 1])?);
            }
            frommember = true;
            i += 1;
        } else if eq_ic(a, "fromlonlat") && left >= 2 && search && !frommember {
            center = Some(lonlat(opts[i + 1], opts[i + 2])?);
            fromloc = true;
            i += 2;
        } else if eq_ic(a, "byradius")
            && left >= 2
            && search
            && !matches!(shape, Some((Shape::Box { .. }, _)))
        {
            let (r, conv) = radius_arg(opts[i + 1], opts[i + 2])?;
            shape = Some((Shape::Radius(r), conv));
            i += 2;
        } else if eq_ic(a, "bybox")
            && left >= 3
            && search
            && !matches!(shape, Some((Shape::Radius(_), _)))
        {
            let (w, h, conv) = box_arg(opts[i + 1], opts[i + 2], opts[i + 3])?;
            shape = Some((
                Shape::Box {
                    width: w,
                    height: h,
                },
                conv,
            ));
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        let what = if search {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(CmdError::msg(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = String::from_utf8_lossy(args[0]);
    if search && !(frommember || fromloc) {
        return Err(CmdError::msg(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if search && shape.is_none() {
        return Err(CmdError::msg(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(CmdError::msg(
            "ERR the ANY argument requires COUNT argument",
        ));
    }
    let (Some(center), Some((shape_u, conv)), true) = (center, shape, exists) else {
        // No source key.
        match store {
            Some(dst) => {
                let deleted = ctx.ks.del(dst);
                if deleted {
                    ctx.notify(GENERIC, "del", dst);
                }
                ctx.changed_if(deleted);
                ctx.out.int(0);
            }
            None => ctx.out.array(0),
        }
        return Ok(());
    };
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let shape_m = match shape_u {
        Shape::Radius(r) => Shape::Radius(r * conv),
        Shape::Box { width, height } => Shape::Box {
            width: width * conv,
            height: height * conv,
        },
    };
    let limit = if any { count as usize } else { 0 };
    let mut found = match ctx.ks.get_zset(src)? {
        Some(z) => collect(z, shape_m, center, limit),
        None => Vec::new(),
    };
    let returned = if count == 0 {
        found.len()
    } else {
        found.len().min(count as usize)
    };
    match sort {
        Sort::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
        Sort::None => {}
    }
    found.truncate(returned);
    for p in &mut found {
        p.dist /= conv;
    }
    match store {
        Some(dst) => {
            if found.is_empty() {
                let deleted = ctx.ks.del(dst);
                if deleted {
                    ctx.notify(GENERIC, "del", dst);
                }
                ctx.changed_if(deleted);
            } else {
                let lim = ctx.limits();
                let pairs = found.into_iter().map(|p| {
                    let s = if storedist { p.dist } else { p.score };
                    (p.member, s)
                });
                ctx.ks
                    .set(dst, Value::ZSet(ZSetValue::from_pairs(pairs, &lim)));
                let event = if kind == Kind::Search {
                    "geosearchstore"
                } else {
                    "georadiusstore"
                };
                ctx.notify(ZSET, event, dst);
                ctx.ks.signal_ready(dst);
            }
            ctx.out.int(returned as i64);
        }
        None => reply(ctx.out, &found, withdist, withhash, withcoord),
    }
    Ok(())
}

/// Scans the cells Redis scans, in its order, keeping the points inside the shape; stops
/// once `limit` (non-zero only with ANY) points are found.
fn collect(z: &ZSetValue, shape_m: Shape, center: (f64, f64), limit: usize) -> Vec<Point> {
    let mut found = Vec::new();
    for (min, max) in geo::search_ranges(shape_m, center) {
        if limit != 0 && found.len() >= limit {
            break;
        }
        let (a, b) = z.score_range(
            ScoreBound {
                value: min as f64,
                exclusive: false,
            },
            ScoreBound {
                value: max as f64,
                exclusive: true,
            },
        );
        for (member, score) in z.range(a, b, false) {
            if limit != 0 && found.len() >= limit {
                break;
            }
            let (lon, lat) = geo::decode_score(score);
            if let Some(dist) = geo::within(shape_m, center, (lon, lat)) {
                found.push(Point {
                    member,
                    score,
                    dist,
                    lon,
                    lat,
                });
            }
        }
    }
    found
}

fn reply(out: &mut Out, found: &[Point], withdist: bool, withhash: bool, withcoord: bool) {
    let extra = usize::from(withdist) + usize::from(withhash) + usize::from(withcoord);
    out.array(found.len());
    for p in found {
        if extra > 0 {
            out.array(extra + 1);
        }
        out.bulk(&p.member);
        if withdist {
            write_dist(out, p.dist);
        }
        if withhash {
            out.int(p.score as i64);
        }
        if withcoord {
            out.array(2);
            write_human(out, p.lon);
            write_human(out, p.lat);
        }
    }
}
