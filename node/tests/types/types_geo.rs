//! GEO commands against the real redis-server 7.0: a fixed script (options, errors,
//! WRONGTYPE, missing keys/members, STORE forms) and a seeded random script (points across
//! the globe incl. near-pole latitudes and the antimeridian, radius 0 / huge, COUNT, ANY,
//! BYBOX), every reply compared exactly in RESP2 and RESP3, including unsorted result order.

use tessera_testkit::diff::*;

#[test]
fn geo_fixed_script_matches_redis() {
    diff_script(
        "geo",
        r#"
        geoadd Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
        geoadd Sicily 13.361389 38.115556 Palermo
        geoadd Sicily ch 13.361390 38.115556 Palermo 12.5 37.8 Marsala
        geoadd Sicily nx 0 0 Palermo 1 1 Null
        geoadd Sicily xx ch 13.361389 38.115556 Palermo 2 2 Absent
        geoadd Sicily nx xx 1 1 a
        geoadd Sicily 1 2
        geoadd Sicily 181 10 bad
        geoadd Sicily 10 86 bad
        geoadd Sicily -180.0001 -85.06 bad
        geoadd Sicily abc 10 bad
        geoadd Sicily ch
        geoadd Sicily gt 1 1 x
        zrange Sicily 0 -1 withscores
        geoadd edges 180 85.05112878 ne -180 -85.05112878 sw 0 0 origin -0.0000001 0 negzero 179.99999 -0.5 am1 -179.99999 -0.5 am2
        zrange edges 0 -1 withscores
        geopos edges ne sw origin negzero am1 am2 nope
        geohash edges ne sw origin negzero am1 am2 nope
        geopos Sicily Palermo Catania Marsala nope
        geopos nokey a b
        geohash Sicily Palermo Catania nope
        geohash nokey a
        geodist Sicily Palermo Catania
        geodist Sicily Palermo Catania km
        geodist Sicily Palermo Catania MI
        geodist Sicily Palermo Catania ft
        geodist Sicily Palermo Catania yd
        geodist Sicily Palermo nope
        geodist nokey a b
        geodist Sicily Palermo Catania km extra
        geodist edges am1 am2
        geodist edges ne sw km
        geodist edges origin negzero
        georadius Sicily 15 37 200 km
        georadius Sicily 15 37 200 km asc
        georadius Sicily 15 37 200 km desc withdist withcoord withhash
        georadius Sicily 15 37 200 km withdist count 1
        georadius Sicily 15 37 200 km count 2 any
        georadius Sicily 15 37 200 km any
        georadius Sicily 15 37 200 km count 0
        georadius Sicily 15 37 200 km count -3
        georadius Sicily 15 37 200 km count x
        georadius Sicily 15 37 -1 km
        georadius Sicily 15 37 abc km
        georadius Sicily 15 37 200 parsecs
        georadius Sicily 15 91 200 km
        georadius Sicily 15 37 200 km bogus
        georadius Sicily 15 37 200 km store dst
        zrange dst 0 -1 withscores
        georadius Sicily 15 37 200 km storedist dst2 asc count 2
        zrange dst2 0 -1 withscores
        georadius Sicily 15 37 200 km store dst withdist
        georadius Sicily 15 37 1 m store dst
        exists dst
        georadius_ro Sicily 15 37 200 km store dst
        georadius_ro Sicily 15 37 200 km withcoord asc
        georadiusbymember Sicily Palermo 100 km withdist asc
        georadiusbymember Sicily Palermo 0 km withdist
        georadiusbymember Sicily nope 100 km
        georadiusbymember nokey nope 100 km
        georadiusbymember nokey nope 100 km store dst3
        georadiusbymember_ro Sicily Catania 500 km desc withhash
        geosearch Sicily frommember Palermo byradius 200 km asc withdist
        geosearch Sicily fromlonlat 15 37 bybox 400 400 km asc withcoord withdist withhash
        geosearch Sicily fromlonlat 15 37 bybox 200 200 km desc
        geosearch Sicily fromlonlat 15 37 bybox 1 1 m
        geosearch Sicily fromlonlat 15 37 bybox -1 1 m
        geosearch Sicily fromlonlat 15 37 bybox 1 x m
        geosearch Sicily fromlonlat 15 37 byradius 200 km bybox 1 1 km
        geosearch Sicily frommember Palermo fromlonlat 15 37 byradius 200 km
        geosearch Sicily byradius 200 km
        GEOSEARCH Sicily frommember Palermo
        geosearch Sicily frommember nope byradius 200 km
        geosearch nokey frommember nope byradius 200 km
        geosearch nokey fromlonlat 1 1 byradius 200 km asc
        geosearch Sicily fromlonlat 15 37 byradius 200 km count 1 any
        geosearch Sicily fromlonlat 15 37 byradius 200 km any
        geosearch Sicily fromlonlat 15 37 byradius 200 km store x
        geosearchstore dst Sicily fromlonlat 15 37 byradius 200 km asc count 2
        zrange dst 0 -1 withscores
        geosearchstore dst Sicily fromlonlat 15 37 byradius 200 km storedist
        zrange dst 0 -1 withscores
        geosearchstore dst Sicily fromlonlat 15 37 byradius 200 km withdist
        geosearchstore dst Sicily fromlonlat 0 0 byradius 1 km
        exists dst
        geosearchstore dst nokey fromlonlat 0 0 byradius 1 km
        zadd odd -1 neg 1e300 huge inf pinf -inf ninf 4503599627370496 b52 9007199254740991 b53 0.5 half 18446744073709551615 u64max
        geopos odd neg huge pinf ninf b52 b53 half u64max
        geohash odd neg huge pinf ninf b52 b53 half u64max
        geodist odd neg b52 km
        geodist odd pinf ninf
        geosearch odd frommember neg byradius 20000 km asc withhash
        georadiusbymember odd b52 100 km withcoord
        set str x
        geoadd str 1 1 a
        geopos str a
        geohash str a
        geodist str a b
        georadius str 1 1 1 km
        geosearch str fromlonlat 1 1 byradius 1 km
        geosearchstore dst str fromlonlat 1 1 byradius 1 km
        geosearchstore str Sicily fromlonlat 15 37 byradius 200 km
        type str
        geoadd
        geopos
        geosearch Sicily fromlonlat 15 37 byradius
        "#,
    );
}

/// xorshift64*: a fixed seed makes the random script the same on every run.
/// A point: mostly around a few centres (so searches find something), some anywhere.
fn point(r: &mut Rng) -> (f64, f64) {
    const CENTRES: [(f64, f64); 5] = [
        (13.4, 38.1),
        (179.9, 10.0),
        (-179.9, -10.0),
        (0.0, 85.0),
        (-70.0, -84.9),
    ];
    let (lon, lat) = if r.below(4) == 0 {
        (r.range(-180.0, 180.0), r.range(-85.05112878, 85.05112878))
    } else {
        let (x, y) = CENTRES[r.below(CENTRES.len() as u64) as usize];
        (x + r.range(-3.0, 3.0), y + r.range(-2.0, 2.0))
    };
    let lon = if lon > 180.0 {
        lon - 360.0
    } else if lon < -180.0 {
        lon + 360.0
    } else {
        lon
    };
    // Inside the limits after formatting with seven decimals.
    (lon, lat.clamp(-85.0511287, 85.0511287))
}

fn random_query(r: &mut Rng, members: usize) -> String {
    let units = ["m", "km", "mi", "ft"];
    let unit = units[r.below(4) as usize];
    let dist = match r.below(6) {
        0 => "0".to_string(),
        1 => "20000".to_string(),
        2 => format!("{:.3}", r.range(0.0, 50.0)),
        _ => format!("{:.3}", r.range(0.0, 800.0)),
    };
    let dist = if unit == "m" || unit == "ft" {
        format!("{dist}000")
    } else {
        dist
    };
    let (lon, lat) = point(r);
    let from = if r.below(2) == 0 {
        format!("fromlonlat {lon:.6} {lat:.6}")
    } else {
        format!("frommember m{}", r.below(members as u64 + 2))
    };
    let by = if r.below(2) == 0 {
        format!("byradius {dist} {unit}")
    } else {
        let h = format!("{:.3}", r.range(0.0, 1500.0));
        format!("bybox {dist} {h} {unit}")
    };
    let mut opts = Vec::new();
    match r.below(3) {
        0 => opts.push("asc"),
        1 => opts.push("desc"),
        _ => {}
    }
    let count = format!("count {}", 1 + r.below(8));
    match r.below(4) {
        0 => opts.push(&count),
        1 => {
            opts.push(&count);
            opts.push("any");
        }
        _ => {}
    }
    for w in ["withdist", "withcoord", "withhash"] {
        if r.below(2) == 0 {
            opts.push(w);
        }
    }
    let opts = opts.join(" ");
    match r.below(6) {
        0 => format!("georadius g {lon:.6} {lat:.6} {dist} {unit} {opts}"),
        1 => format!(
            "georadiusbymember_ro g m{} {dist} {unit} {opts}",
            r.below(members as u64)
        ),
        2 => {
            let store = if r.below(2) == 0 { "" } else { "storedist" };
            let o = opts
                .replace("withdist", "")
                .replace("withcoord", "")
                .replace("withhash", "");
            format!("geosearchstore dst g {from} {by} {o} {store}")
        }
        _ => format!("geosearch g {from} {by} {opts}"),
    }
}

/// One seeded script: `members` points (under 128 the set stays listpack-encoded, above it
/// is a skiplist), reads of every point, some NX/XX/CH updates, then `queries` searches.
fn random_script(seed: u64, members: usize, queries: usize) -> Vec<String> {
    let mut rng = Rng(seed);
    let mut script = vec!["del g dst".to_string()];
    for chunk in 0..members.div_ceil(50) {
        let mut line = String::from("geoadd g");
        for i in chunk * 50..((chunk + 1) * 50).min(members) {
            let (lon, lat) = point(&mut rng);
            line.push_str(&format!(" {lon:.7} {lat:.7} m{i}"));
        }
        script.push(line);
    }
    for _ in 0..5 {
        let opt = ["nx", "xx", "ch", "xx ch", "nx ch"][rng.below(5) as usize];
        let (lon, lat) = point(&mut rng);
        let m = rng.below(members as u64 + 5);
        script.push(format!("geoadd g {opt} {lon:.7} {lat:.7} m{m}"));
    }
    script.push("zrange g 0 -1 withscores".into());
    script.push("object encoding g".into());
    let mut pos = String::from("geopos g");
    let mut hash = String::from("geohash g");
    for i in 0..members + 2 {
        pos.push_str(&format!(" m{i}"));
        hash.push_str(&format!(" m{i}"));
    }
    script.push(pos);
    script.push(hash);
    for _ in 0..40 {
        let (a, b) = (rng.below(members as u64), rng.below(members as u64));
        let unit = ["", "m", "km", "mi", "ft"][rng.below(5) as usize];
        script.push(format!("geodist g m{a} m{b} {unit}"));
    }
    for _ in 0..queries {
        script.push(random_query(&mut rng, members));
        if script
            .last()
            .is_some_and(|l| l.starts_with("geosearchstore"))
        {
            script.push("zrange dst 0 -1 withscores".into());
        }
    }
    script
}

#[test]
fn geo_random_script_matches_redis() {
    let t = tessera();
    let rs = redis();
    let mut script = Vec::new();
    for (seed, members, queries) in [
        (0x9E37_79B9_7F4A_7C15, 300, 400),
        (0xD1B5_4A32_D192_ED03, 100, 300),
        (0x2545_F491_4F6C_DD1D, 600, 300),
    ] {
        script.extend(random_script(seed, members, queries));
    }
    let mut compared = 0;
    let mut nonempty = 0;
    for resp3 in [false, true] {
        let mut a = Conn::with_proto(t.port, resp3);
        let mut b = Conn::with_proto(rs.port, resp3);
        a.cmd(&["FLUSHALL"]);
        b.cmd(&["FLUSHALL"]);
        let mut failures = Vec::new();
        for line in &script {
            let (x, y) = (a.line(line), b.line(line));
            if std::env::var("GEO_SHOW").is_ok() {
                eprintln!("{line}\n  => {y:?}");
            }
            if x != y {
                failures.push(format!("`{line}`:\n  tessera: {x:?}\n  redis:   {y:?}"));
            }
            if matches!(&y, Reply::Array(v) if !v.is_empty()) {
                nonempty += 1;
            }
            compared += 1;
        }
        assert!(
            failures.is_empty(),
            "{} of {} replies differ (RESP3: {resp3}):\n{}",
            failures.len(),
            script.len(),
            failures
                .iter()
                .take(10)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    eprintln!("geo random: {compared} replies identical, {nonempty} non-empty arrays");
    // The script must exercise real matches, not only empty results.
    assert!(nonempty > 200, "only {nonempty} non-empty replies");
}

#[test]
fn geo_command_info_matches_redis() {
    let t = tessera();
    let r = redis();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    for name in "geoadd geodist geohash geopos geosearch geosearchstore georadius georadius_ro \
                 georadiusbymember georadiusbymember_ro"
        .split_whitespace()
    {
        let (x, y) = command_info_pair(&mut a, &mut b, name);
        assert_eq!(x[1], y[1], "{name}: arity");
        assert_eq!(
            x[2].normalized(true),
            y[2].normalized(true),
            "{name}: flags"
        );
        assert_eq!(x[3..6], y[3..6], "{name}: first/last/step");
        assert_eq!(
            x[6].normalized(true),
            y[6].normalized(true),
            "{name}: ACL categories"
        );
    }
    for getkeys in [
        "GEORADIUS src 1 2 3 km STORE d1",
        "GEORADIUSBYMEMBER src m 3 km STORE d1",
        "GEOSEARCHSTORE d s FROMLONLAT 1 2 BYRADIUS 3 km",
        "GEOADD k 1 2 m",
    ] {
        let mut args = vec!["COMMAND", "GETKEYS"];
        args.extend(getkeys.split_whitespace());
        assert_eq!(a.cmd(&args), b.cmd(&args), "GETKEYS {getkeys}");
    }
}
