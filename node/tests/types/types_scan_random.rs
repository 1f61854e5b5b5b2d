//! HSCAN/SSCAN/ZSCAN on large (hashtable/skiplist) values return every element present for
//! the whole scan even while the value changes; SRANDMEMBER/HRANDFIELD/ZRANDMEMBER/SPOP obey
//! their count rules and pick fairly.

use std::collections::{HashMap, HashSet};
use tessera_testkit::diff::*;

fn bulks(r: &Reply) -> Vec<String> {
    match r {
        Reply::Array(v) | Reply::Set(v) => v
            .iter()
            .map(|x| match x {
                Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("not a bulk: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// Runs a full SCAN-family iteration while `mutate` runs between steps; returns what it saw.
fn full_scan(
    c: &mut Conn,
    cmd: &str,
    key: &str,
    mut mutate: impl FnMut(&mut Conn, usize),
) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    let mut step = 0;
    loop {
        let r = c.cmd(&[cmd, key, &cursor, "COUNT", "7"]);
        let Reply::Array(parts) = r else {
            panic!("{cmd}: {r:?}")
        };
        cursor = match &parts[0] {
            Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("cursor {other:?}"),
        };
        seen.extend(bulks(&parts[1]));
        mutate(c, step);
        step += 1;
        assert!(step < 100_000, "{cmd} does not terminate");
        if cursor == "0" {
            return seen;
        }
    }
}

#[test]
fn scans_return_stable_elements_under_churn() {
    let s = tessera();
    let mut c = Conn::connect(s.port);
    for i in 0..600 {
        c.line(&format!("SADD set stable{i}"));
        c.line(&format!("HSET hash stable{i} v"));
        c.line(&format!("ZADD zset {i} stable{i}"));
    }
    for (cmd, key, add, del) in [
        ("SSCAN", "set", "SADD set", "SREM set"),
        ("HSCAN", "hash", "HSET hash", "HDEL hash"),
        ("ZSCAN", "zset", "ZADD zset 1", "ZREM zset"),
    ] {
        for i in 0..300 {
            c.line(&format!(
                "{add} churn{i}{}",
                if cmd == "HSCAN" { " v" } else { "" }
            ));
        }
        let seen: HashSet<String> = full_scan(&mut c, cmd, key, |c, step| {
            // Remove old churn members and add new ones while the scan runs.
            c.line(&format!("{del} churn{step}"));
            let extra = if cmd == "HSCAN" { " v" } else { "" };
            c.line(&format!("{add} fresh{step}{extra}"));
        })
        .into_iter()
        .collect();
        for i in 0..600 {
            assert!(
                seen.contains(&format!("stable{i}")),
                "{cmd} missed stable{i}"
            );
        }
    }
    // MATCH filters; a small (listpack) value answers in one call with cursor 0.
    c.line("HSET small a 1 b 2 ab 3");
    let r = c.line("HSCAN small 0 MATCH a*");
    let Reply::Array(parts) = r else { panic!() };
    assert_eq!(parts[0], Reply::Bulk(b"0".to_vec()));
    assert_eq!(bulks(&parts[1]), vec!["a", "1", "ab", "3"]);
}

#[test]
fn random_member_commands_follow_count_rules_and_are_fair() {
    let s = tessera();
    let mut c = Conn::connect(s.port);
    for i in 0..20 {
        c.line(&format!("SADD s m{i}"));
        c.line(&format!("SADD big m{i}"));
        c.line(&format!("HSET h f{i} v{i}"));
        c.line(&format!("ZADD z {i} m{i}"));
    }
    for i in 20..200 {
        c.line(&format!("SADD big m{i}"));
    }
    // Positive count: distinct, at most the size. Negative: exactly |count|, repeats allowed.
    for key in ["s", "big"] {
        let v = bulks(&c.line(&format!("SRANDMEMBER {key} 10")));
        assert_eq!(v.len(), 10);
        assert_eq!(v.iter().collect::<HashSet<_>>().len(), 10, "distinct");
    }
    assert_eq!(bulks(&c.line("SRANDMEMBER s 100")).len(), 20);
    assert_eq!(bulks(&c.line("HRANDFIELD h 100")).len(), 20);
    let with = bulks(&c.line("HRANDFIELD h -30 WITHVALUES"));
    assert_eq!(with.len(), 60);
    for p in with.chunks(2) {
        assert_eq!(p[0][1..], p[1][1..], "field/value pairs stay together");
    }
    let zs = bulks(&c.line("ZRANDMEMBER z 5 WITHSCORES"));
    for p in zs.chunks(2) {
        assert_eq!(p[0][1..], p[1], "member/score pairs stay together");
    }
    // Fairness: 40000 draws over 200 members (hashtable) -> ~200 each.
    let draws = bulks(&c.line("SRANDMEMBER big -40000"));
    assert_eq!(draws.len(), 40000);
    let mut counts: HashMap<String, usize> = HashMap::new();
    for d in draws {
        *counts.entry(d).or_default() += 1;
    }
    assert_eq!(counts.len(), 200, "every member drawn");
    // Binomial(40000, 1/200): mean 200, sd ~14; 120..280 is > 5 sd.
    assert!(
        counts.values().all(|&n| (120..280).contains(&n)),
        "{counts:?}"
    );
    // SPOP empties the set exactly once per member.
    let mut popped = HashSet::new();
    while let Reply::Bulk(b) = c.line("SPOP big") {
        assert!(popped.insert(b), "popped twice");
    }
    assert_eq!(popped.len(), 200);
    assert_eq!(c.line("EXISTS big"), Reply::Int(0));
}
