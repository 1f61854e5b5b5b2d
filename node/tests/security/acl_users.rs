//! ACL users (issue 19) against redis-server 7.0: ACL SETUSER's grammar and error texts, and
//! the descriptions ACL GETUSER and ACL LIST print, in RESP2 and RESP3.

use tessera_testkit::*;

/// Redis prints the single-command rules after the categories in its command dict's order,
/// which is random per process: those are compared as a sorted list, the rest in order.
fn normalize_rules(s: &str) -> String {
    let toks: Vec<&str> = s.split(' ').collect();
    let cut = toks
        .iter()
        .position(|t| {
            (t.starts_with('+') || t.starts_with('-'))
                && !t.starts_with("+@")
                && !t.starts_with("-@")
        })
        .unwrap_or(toks.len());
    let (head, tail) = toks.split_at(cut);
    // Selectors' text follows `(`: keep it whole after the sorted commands.
    let mut cmds: Vec<&str> = Vec::new();
    let mut rest: Vec<&str> = Vec::new();
    for t in tail {
        if !rest.is_empty() || t.starts_with('(') {
            rest.push(t);
        } else {
            cmds.push(t);
        }
    }
    cmds.sort_unstable();
    let rest = rest.join(" ");
    let rest = if rest.is_empty() {
        String::new()
    } else {
        // A selector: normalise its own rules inside the parentheses.
        rest.split(" (")
            .map(|p| normalize_rules(p.trim_start_matches('(').trim_end_matches(')')))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    format!("{} [{}] {}", head.join(" "), cmds.join(" "), rest)
}

fn normalize(r: Reply) -> Reply {
    match r {
        Reply::Bulk(b) => Reply::Bulk(normalize_rules(&String::from_utf8_lossy(&b)).into_bytes()),
        Reply::Array(v) => Reply::Array(v.into_iter().map(normalize).collect()),
        Reply::Set(v) => Reply::Set(v.into_iter().map(normalize).collect()),
        Reply::Map(v) => Reply::Map(v.into_iter().map(|(k, v)| (k, normalize(v))).collect()),
        r => r,
    }
}

const RULES: &[&[&str]] = &[
    &["on", ">p1", "~app:*", "+@read", "-get"],
    &["+@all", "-debug"],
    &["+@all", "-@dangerous", "+flushall"],
    &["-@all", "+select|0", "+config|get", "+client|list"],
    &[
        "%R~r*", "%W~w*", "%RW~rw*", "~k", "~k", "&c1", "&c*", "+@string", "-@write",
    ],
    &[
        "reset",
        "on",
        "nopass",
        "allkeys",
        "allchannels",
        "allcommands",
        "-@admin",
    ],
    &["(~x +get)", "(%R~y", "+@read)", "+set"],
    &["+@pubsub", "+@fast", "-@keyspace", "skip-sanitize-payload"],
    &[
        "#0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ">a",
        ">b",
        "<a",
    ],
    &["+nosuchcommand"],
    &["+@nosuchcategory"],
    &["bogus"],
    &["~*", "~x"],
    &["&*", "&x"],
    &["<missing"],
    &["#tooshort"],
    &["!ABCDEF"],
    &["+config|get|x"],
    &["+select|"],
    &["-select|0"],
    &["(~x", "+get"],
    &["(~x bogus)"],
    &["%X~x"],
    &["~a b"],
    &["", "on"],
    &["+acl|whoami", "+@connection", "-auth"],
    &["clearselectors", "(+@all ~*)", "clearselectors"],
];

#[test]
fn setuser_getuser_list_match_redis() {
    let r = diff::redis();
    let t = diff::tessera();
    let mut diffs = Vec::new();
    for proto in ["2", "3"] {
        let (mut rc, mut tc) = (r.resp(), t.resp());
        rc.cmd(&["HELLO", proto]);
        tc.cmd(&["HELLO", proto]);
        for (i, rules) in RULES.iter().enumerate() {
            let name = format!("u{proto}x{i}");
            let mut args = vec!["ACL", "SETUSER", name.as_str()];
            args.extend_from_slice(rules);
            let mut check = |a: &[&str]| {
                let (want, got) = (normalize(rc.cmd(a)), normalize(tc.cmd(a)));
                if want != got {
                    diffs.push(format!(
                        "RESP{proto} {rules:?} {a:?}:\n  redis   {want:?}\n  tessera {got:?}"
                    ));
                }
            };
            check(&args);
            check(&["ACL", "GETUSER", &name]);
        }
        let mut check = |a: &[&str]| {
            let (want, got) = (normalize(rc.cmd(a)), normalize(tc.cmd(a)));
            if want != got {
                diffs.push(format!(
                    "RESP{proto} {a:?}:\n  redis   {want:?}\n  tessera {got:?}"
                ));
            }
        };
        check(&["ACL", "LIST"]);
        check(&["ACL", "USERS"]);
        check(&["ACL", "DELUSER", "u2x0", "nosuch", "u3x1"]);
        check(&["ACL", "USERS"]);
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// An ACL LOG entry's fields that do not depend on timing or addresses.
fn log_fields(r: Reply) -> Vec<Vec<String>> {
    let Reply::Array(entries) = r else {
        return vec![vec![format!("{r:?}")]];
    };
    entries
        .into_iter()
        .map(|e| {
            let pairs: Vec<(Reply, Reply)> = match e {
                Reply::Map(m) => m,
                Reply::Array(v) => v
                    .chunks(2)
                    .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or(Reply::Null)))
                    .collect(),
                other => vec![(other, Reply::Null)],
            };
            pairs
                .into_iter()
                .filter(|(k, _)| {
                    matches!(k, Reply::Bulk(b) if ["count", "reason", "context", "object", "username"].contains(&String::from_utf8_lossy(b).as_ref()))
                })
                .map(|(k, v)| format!("{k:?}={v:?}"))
                .collect()
        })
        .collect()
}

/// AUTH and HELLO AUTH as another user, then the checks of commands, keys (by read/write
/// access), channels and MULTI, the ACL LOG they leave, CLIENT KILL USER and DELUSER closing
/// the user's connections: replies compared with redis-server in RESP2 and RESP3.
#[test]
fn login_and_permission_checks_match_redis() {
    let r = diff::redis();
    let t = diff::tessera();
    let mut diffs = Vec::new();
    for proto in ["2", "3"] {
        let (mut ra, mut ta) = (r.resp(), t.resp());
        let (mut ru, mut tu) = (r.resp(), t.resp());
        let both = |ra: &mut Conn, ta: &mut Conn, a: &[&str], diffs: &mut Vec<String>| {
            let (want, got) = (ra.cmd(a), ta.cmd(a));
            if want != got {
                diffs.push(format!(
                    "RESP{proto} {a:?}:\n  redis   {want:?}\n  tessera {got:?}"
                ));
            }
        };
        for a in [
            &["ACL", "LOG", "RESET"][..],
            &[
                "ACL",
                "SETUSER",
                "app",
                "on",
                ">pw",
                "~app:*",
                "%R~ro:*",
                "&news.*",
                "+@read",
                "+@write",
                "-@dangerous",
                "+publish",
                "+psubscribe",
                "+multi",
                "+exec",
            ],
            &["ACL", "SETUSER", "offuser", "off", ">pw", "+@all"],
            &["SET", "ro:1", "v"],
        ] {
            both(&mut ra, &mut ta, a, &mut diffs);
        }
        // HELLO's reply carries the server's version and the connection id: only its
        // success is compared, through what follows.
        if proto == "3" {
            let (a, b) = (
                ru.cmd(&["HELLO", "3", "AUTH", "app", "pw"]),
                tu.cmd(&["HELLO", "3", "AUTH", "app", "pw"]),
            );
            assert!(
                matches!(a, Reply::Map(_)) && matches!(b, Reply::Map(_)),
                "{a:?} {b:?}"
            );
        }
        for a in [
            &["AUTH", "app", "wrong"][..],
            &["AUTH", "nosuch", "pw"],
            &["AUTH", "offuser", "pw"],
            &["AUTH", "app", "pw"],
            &["ACL", "WHOAMI"],
            &["SET", "app:1", "x"],
            &["GET", "app:1"],
            &["SET", "other", "x"],
            &["GET", "ro:1"],
            &["SET", "ro:1", "y"],
            &["MGET", "app:1", "other"],
            &["FLUSHALL"],
            &["CONFIG", "GET", "maxmemory"],
            &["PUBLISH", "news.1", "hi"],
            &["PUBLISH", "other", "hi"],
            &["MULTI"],
            &["SET", "other", "x"],
            &["SET", "app:2", "x"],
            &["EXEC"],
            &["PSUBSCRIBE", "news.*"],
        ] {
            both(&mut ru, &mut tu, a, &mut diffs);
        }
        let (want, got) = (
            log_fields(ra.cmd(&["ACL", "LOG"])),
            log_fields(ta.cmd(&["ACL", "LOG"])),
        );
        if want != got {
            diffs.push(format!(
                "RESP{proto} ACL LOG:\n  redis   {want:?}\n  tessera {got:?}"
            ));
        }
        // A second connection of the user, killed by CLIENT KILL USER; the first closed by
        // DELUSER.
        let (mut rk, mut tk) = (r.resp(), t.resp());
        both(&mut rk, &mut tk, &["AUTH", "app", "pw"], &mut diffs);
        for a in [
            &["CLIENT", "KILL", "USER", "nosuch"][..],
            &["CLIENT", "KILL", "USER", "app"],
            &["ACL", "DELUSER", "app", "offuser"],
            &["ACL", "USERS"],
        ] {
            both(&mut ra, &mut ta, a, &mut diffs);
        }
        for (rc, tc, who) in [(&mut rk, &mut tk, "killed"), (&mut ru, &mut tu, "deleted")] {
            let (a, b) = (rc.cmd(&["PING"]), tc.cmd(&["PING"]));
            let closed = |x: &Reply| matches!(x, Reply::Eof);
            if closed(&a) != closed(&b) {
                diffs.push(format!(
                    "RESP{proto} {who} connection: redis {a:?}, tessera {b:?}"
                ));
            }
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// ACL DRYRUN of users other than default: allowed, refused command, key and channel.
#[test]
fn dryrun_matches_redis() {
    let r = diff::redis();
    let t = diff::tessera();
    let (mut rc, mut tc) = (r.resp(), t.resp());
    let mut diffs = Vec::new();
    for a in [
        &[
            "ACL",
            "SETUSER",
            "d",
            "on",
            "nopass",
            "~app:*",
            "%R~ro:*",
            "&news.*",
            "+@read",
            "+set",
            "+publish",
            "+config|get",
            "-@all",
            "+get",
            "+set",
            "+publish",
            "+config|get",
            "+select|1",
        ][..],
        &["ACL", "DRYRUN", "d", "GET", "app:1"],
        &["ACL", "DRYRUN", "d", "GET", "other"],
        &["ACL", "DRYRUN", "d", "SET", "ro:1", "x"],
        &["ACL", "DRYRUN", "d", "SET", "app:1", "x"],
        &["ACL", "DRYRUN", "d", "INCR", "app:1"],
        &["ACL", "DRYRUN", "d", "PUBLISH", "news.a", "x"],
        &["ACL", "DRYRUN", "d", "PUBLISH", "other", "x"],
        &["ACL", "DRYRUN", "d", "CONFIG", "GET", "x"],
        &["ACL", "DRYRUN", "d", "CONFIG", "SET", "x", "y"],
        &["ACL", "DRYRUN", "d", "CONFIG", "NOSUCH"],
        &["ACL", "DRYRUN", "d", "SELECT", "1"],
        &["ACL", "DRYRUN", "d", "SELECT", "2"],
        &["ACL", "DRYRUN", "d", "NOSUCH"],
        &["ACL", "DRYRUN", "d", "GET"],
        &["ACL", "DRYRUN", "nosuch", "GET", "x"],
        &["ACL", "DRYRUN", "default", "GET", "x"],
    ] {
        let (want, got) = (rc.cmd(a), tc.cmd(a));
        if want != got {
            diffs.push(format!("{a:?}:\n  redis   {want:?}\n  tessera {got:?}"));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// `user` lines in the config (here on the command line) create users as ACL SETUSER would:
/// ACL LIST, AUTH and the permission checks as redis-server's.
#[test]
fn config_user_directives_match_redis() {
    let args = [
        "--user", "alice", "on", ">pw", "~app:*", "+get", "+set", "(%R~ro:*", "+get)", "--user",
        "bob", "off", "nopass", "+@all",
    ];
    let [r, t] = [Launch::redis(), Launch::tessera()].map(|l| l.args(&args).start());
    let (mut rc, mut tc) = (r.resp(), t.resp());
    let mut diffs = Vec::new();
    for a in [
        &["ACL", "LIST"][..],
        &["ACL", "USERS"],
        &["AUTH", "bob", "x"],
        &["AUTH", "alice", "pw"],
        &["SET", "app:1", "v"],
        &["GET", "ro:1"],
        &["SET", "ro:1", "v"],
        &["DEL", "app:1"],
        &["ACL", "WHOAMI"],
    ] {
        let (want, got) = (normalize(rc.cmd(a)), normalize(tc.cmd(a)));
        if want != got {
            diffs.push(format!("{a:?}:\n  redis   {want:?}\n  tessera {got:?}"));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// Queued commands are checked again at EXEC: a rule changed meanwhile refuses that command
/// only, with Redis's EXEC-time text and an ACL LOG entry in the `multi` context.
#[test]
fn exec_rechecks_changed_rules_like_redis() {
    let r = diff::redis();
    let t = diff::tessera();
    let (mut ra, mut ta) = (r.resp(), t.resp());
    let (mut ru, mut tu) = (r.resp(), t.resp());
    let mut diffs = Vec::new();
    let mut both = |a: &mut Conn, b: &mut Conn, args: &[&str]| {
        let (want, got) = (a.cmd(args), b.cmd(args));
        if want != got {
            diffs.push(format!("{args:?}:\n  redis   {want:?}\n  tessera {got:?}"));
        }
    };
    both(
        &mut ra,
        &mut ta,
        &["ACL", "SETUSER", "e", "on", "nopass", "~*", "&*", "+@all"],
    );
    both(&mut ru, &mut tu, &["AUTH", "e", "x"]);
    for a in [
        &["MULTI"][..],
        &["SET", "k", "v"],
        &["GET", "k"],
        &["PUBLISH", "c", "m"],
    ] {
        both(&mut ru, &mut tu, a);
    }
    both(
        &mut ra,
        &mut ta,
        &["ACL", "SETUSER", "e", "-set", "resetchannels"],
    );
    both(&mut ru, &mut tu, &["EXEC"]);
    let (want, got) = (
        log_fields(ra.cmd(&["ACL", "LOG"])),
        log_fields(ta.cmd(&["ACL", "LOG"])),
    );
    if want != got {
        diffs.push(format!("ACL LOG:\n  redis   {want:?}\n  tessera {got:?}"));
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// Commands a script calls are checked for the script's caller: Redis's texts, ACL LOG
/// context `lua`.
#[test]
fn script_calls_are_checked_like_redis() {
    let r = diff::redis();
    let t = diff::tessera();
    let (mut ra, mut ta) = (r.resp(), t.resp());
    let (mut ru, mut tu) = (r.resp(), t.resp());
    let mut diffs = Vec::new();
    let mut both = |a: &mut Conn, b: &mut Conn, args: &[&str]| {
        let (want, got) = (a.cmd(args), b.cmd(args));
        if want != got {
            diffs.push(format!("{args:?}:\n  redis   {want:?}\n  tessera {got:?}"));
        }
    };
    both(&mut ra, &mut ta, &["ACL", "LOG", "RESET"]);
    both(
        &mut ra,
        &mut ta,
        &[
            "ACL", "SETUSER", "s", "on", "nopass", "~app:*", "&news", "+eval", "+get", "+set",
            "+publish",
        ],
    );
    both(&mut ru, &mut tu, &["AUTH", "s", "x"]);
    for a in [
        &["EVAL", "return redis.call('set', 'app:1', 'v')", "0"][..],
        &["EVAL", "return redis.call('get', 'other')", "0"],
        &["EVAL", "return redis.call('incr', 'app:2')", "0"],
        &["EVAL", "return redis.pcall('publish', 'other', 'm')", "0"],
        &["EVAL", "return redis.pcall('publish', 'news', 'm')", "0"],
    ] {
        both(&mut ru, &mut tu, a);
    }
    let (want, got) = (
        log_fields(ra.cmd(&["ACL", "LOG"])),
        log_fields(ta.cmd(&["ACL", "LOG"])),
    );
    if want != got {
        diffs.push(format!("ACL LOG:\n  redis   {want:?}\n  tessera {got:?}"));
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// ACL CAT names an unknown category as given (case kept, at most 128 bytes).
#[test]
fn acl_cat_unknown_category_like_redis() {
    let r = diff::redis();
    let t = diff::tessera();
    let (mut rc, mut tc) = (r.resp(), t.resp());
    let long = "X".repeat(200);
    for a in [
        &["ACL", "CAT", "NON_EXISTS"][..],
        &["ACL", "CAT", "nope"],
        &["ACL", "CAT", &long],
    ] {
        let (want, got) = (rc.cmd(a), tc.cmd(a));
        assert_eq!(got, want, "{:?}", &a[..2]);
    }
}

/// ACL SETUSER that takes channels away closes the user's subscribers that hold one
/// (channel by glob, pattern literally, shard channels too); the others stay.
#[test]
fn revoked_channels_close_subscribers_like_redis() {
    let r = diff::redis();
    let t = diff::tessera();
    let mut diffs = Vec::new();
    let (mut ra, mut ta) = (r.resp(), t.resp());
    let pair = |ra: &mut Conn, ta: &mut Conn, a: &[&str], diffs: &mut Vec<String>| {
        let (want, got) = (ra.cmd(a), ta.cmd(a));
        if want != got {
            diffs.push(format!("{a:?}:\n  redis   {want:?}\n  tessera {got:?}"));
        }
    };
    pair(
        &mut ra,
        &mut ta,
        &[
            "ACL",
            "SETUSER",
            "ps",
            "on",
            "nopass",
            "+@all",
            "resetchannels",
            "&foo:1",
            "&bar:*",
            "&zap",
        ],
        &mut diffs,
    );
    let subs: &[&[&str]] = &[
        &["SUBSCRIBE", "foo:1"],
        &["PSUBSCRIBE", "bar:*"],
        &["SSUBSCRIBE", "zap"],
    ];
    let mut conns: Vec<(Conn, Conn, &[&str])> = Vec::new();
    for s in subs {
        let (mut rc, mut tc) = (r.resp(), t.resp());
        rc.cmd(&["HELLO", "3"]);
        tc.cmd(&["HELLO", "3"]);
        pair(&mut rc, &mut tc, &["AUTH", "ps", "x"], &mut diffs);
        pair(&mut rc, &mut tc, s, &mut diffs);
        conns.push((rc, tc, s));
    }
    // Adding channels closes nobody; taking the pattern and the shard channel away closes
    // those two subscribers.
    for rules in [&["&more"][..], &["resetchannels", "&foo:*", "&more"]] {
        let mut a = vec!["ACL", "SETUSER", "ps"];
        a.extend_from_slice(rules);
        pair(&mut ra, &mut ta, &a, &mut diffs);
        for (rc, tc, s) in conns.iter_mut() {
            let (x, y) = (rc.cmd(&["PING"]), tc.cmd(&["PING"]));
            let closed = |r: &Reply| matches!(r, Reply::Eof);
            if closed(&x) != closed(&y) {
                diffs.push(format!(
                    "after {rules:?}, {s:?}: redis {x:?}, tessera {y:?}"
                ));
            }
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// The default user takes the whole grammar too: restricted, its connections are checked;
/// off, new connections must AUTH as another user and AUTH default fails.
#[test]
fn default_user_rules_match_redis() {
    let r = diff::redis();
    let t = diff::tessera();
    let (mut ra, mut ta) = (r.resp(), t.resp());
    let mut diffs = Vec::new();
    let mut check = |a: &mut Conn, b: &mut Conn, args: &[&str]| {
        let (want, got) = (normalize(a.cmd(args)), normalize(b.cmd(args)));
        if want != got {
            diffs.push(format!("{args:?}:\n  redis   {want:?}\n  tessera {got:?}"));
        }
    };
    check(
        &mut ra,
        &mut ta,
        &["ACL", "SETUSER", "admin", "on", ">pw", "+@all", "~*", "&*"],
    );
    check(
        &mut ra,
        &mut ta,
        &[
            "ACL",
            "SETUSER",
            "default",
            "resetchannels",
            "-@all",
            "+ping",
            "+get",
            "resetkeys",
            "~a*",
        ],
    );
    for a in [
        &["PING"][..],
        &["GET", "a1"],
        &["GET", "b1"],
        &["SET", "a1", "v"],
        &["ACL", "WHOAMI"],
        &["AUTH", "admin", "pw"],
        &["ACL", "GETUSER", "default"],
        &["ACL", "LIST"],
        &["ACL", "DRYRUN", "default", "GET", "b"],
        &["ACL", "SETUSER", "default", "off"],
    ] {
        check(&mut ra, &mut ta, a);
    }
    let (mut rn, mut tn) = (r.resp(), t.resp());
    for a in [
        &["PING"][..],
        &["AUTH", "default", "x"],
        &["AUTH", "x"],
        &["AUTH", "admin", "pw"],
        &["ACL", "WHOAMI"],
        &[
            "ACL", "SETUSER", "default", "on", "nopass", "+@all", "~*", "&*",
        ],
        &["ACL", "LIST"],
    ] {
        check(&mut rn, &mut tn, a);
    }
    let (mut rm, mut tm) = (r.resp(), t.resp());
    check(&mut rm, &mut tm, &["SET", "b", "1"]);
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// Runs each command on both servers' connections and collects the differing replies.
fn compare_all(ra: &mut Conn, ta: &mut Conn, cmds: &[&[&str]], diffs: &mut Vec<String>) {
    for args in cmds {
        let (want, got) = (ra.cmd(args), ta.cmd(args));
        if want != got {
            diffs.push(format!("{args:?}:\n  redis   {want:?}\n  tessera {got:?}"));
        }
    }
}

/// `redis.acl_check_cmd` answers for the script's caller (unit/scripting "Script ACL check"):
/// true, false for a refused command or key, an error for an unknown command, and no ACL
/// LOG entry.
#[test]
fn script_acl_check_cmd_like_redis() {
    let r = diff::redis();
    let t = diff::tessera();
    let (mut ra, mut ta) = (r.resp(), t.resp());
    let (mut ru, mut tu) = (r.resp(), t.resp());
    let mut diffs = Vec::new();
    compare_all(
        &mut ra,
        &mut ta,
        &[
            &["ACL", "LOG", "RESET"],
            &[
                "ACL",
                "SETUSER",
                "bob",
                "on",
                ">123",
                "+@scripting",
                "+set",
                "~x*",
            ],
        ],
        &mut diffs,
    );
    compare_all(
        &mut ru,
        &mut tu,
        &[
            &["AUTH", "bob", "123"],
            &[
                "EVAL",
                "return redis.acl_check_cmd('set','xx',1)",
                "1",
                "xx",
            ],
            &[
                "EVAL",
                "return redis.acl_check_cmd('hset','xx','f',1)",
                "1",
                "xx",
            ],
            &["EVAL", "return redis.acl_check_cmd('set','yy',1)", "0"],
            &["EVAL", "return redis.acl_check_cmd('set','xx',1.5)", "0"],
            &[
                "EVAL",
                "return redis.acl_check_cmd('config','get','x')",
                "0",
            ],
            &["EVAL", "return redis.acl_check_cmd('config')", "0"],
            &["EVAL", "return redis.acl_check_cmd('config','nosuch')", "0"],
            &[
                "EVAL",
                "return redis.acl_check_cmd('invalid-cmd','arg')",
                "0",
            ],
            &["EVAL", "return redis.acl_check_cmd()", "0"],
            &["EVAL", "return redis.acl_check_cmd({})", "0"],
        ],
        &mut diffs,
    );
    compare_all(&mut ra, &mut ta, &[&["ACL", "LOG"]], &mut diffs);
    // The default user may run everything.
    compare_all(
        &mut ra,
        &mut ta,
        &[
            &["EVAL", "return redis.acl_check_cmd('hset','yy','f',1)", "0"],
            &["EVAL", "return redis.acl_check_cmd('nosuch')", "0"],
        ],
        &mut diffs,
    );
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// MIGRATE's keys skip AUTH's password and AUTH2's user and password, as Redis's
/// migrateGetKeys (unit/acl-v2 "Test various odd commands for key permissions"), for
/// COMMAND GETKEYS and ACL DRYRUN alike.
#[test]
fn migrate_keys_skip_auth_like_redis() {
    let r = diff::redis();
    let t = diff::tessera();
    let (mut ra, mut ta) = (r.resp(), t.resp());
    let mut diffs = Vec::new();
    compare_all(
        &mut ra,
        &mut ta,
        &[
            &[
                "ACL",
                "SETUSER",
                "m",
                "on",
                "nopass",
                "+@all",
                "%R~read*",
                "%W~write*",
                "%RW~rw*",
            ],
            &["COMMAND", "GETKEYS", "MIGRATE", "a", "1", "k", "0", "500"],
            &[
                "COMMAND", "GETKEYS", "MIGRATE", "a", "1", "", "0", "500", "KEYS", "k1", "k2",
            ],
            &[
                "COMMAND", "GETKEYS", "MIGRATE", "a", "1", "", "0", "500", "AUTH", "KEYS", "KEYS",
                "k1",
            ],
            &[
                "COMMAND", "GETKEYS", "MIGRATE", "a", "1", "", "0", "500", "AUTH2", "KEYS", "KEYS",
                "KEYS", "k2",
            ],
            &[
                "COMMAND", "GETKEYS", "MIGRATE", "a", "1", "", "0", "500", "COPY", "REPLACE",
                "AUTH", "p", "KEYS", "k3",
            ],
            &[
                "COMMAND", "GETKEYS", "MIGRATE", "a", "1", "", "0", "500", "AUTH",
            ],
            &[
                "COMMAND", "GETKEYS", "MIGRATE", "a", "1", "", "0", "500", "AUTH2", "u",
            ],
            &[
                "COMMAND", "GETKEYS", "MIGRATE", "a", "1", "", "0", "500", "KEYS",
            ],
            &[
                "COMMAND", "GETKEYS", "MIGRATE", "a", "1", "", "0", "500", "COPY",
            ],
            &[
                "ACL", "DRYRUN", "m", "MIGRATE", "whatever", "whatever", "rw", "0", "500",
            ],
            &[
                "ACL", "DRYRUN", "m", "MIGRATE", "whatever", "whatever", "read", "0", "500",
            ],
            &[
                "ACL", "DRYRUN", "m", "MIGRATE", "whatever", "whatever", "", "0", "500", "KEYS",
                "rw",
            ],
            &[
                "ACL", "DRYRUN", "m", "MIGRATE", "whatever", "whatever", "", "0", "500", "KEYS",
                "write",
            ],
            &[
                "ACL", "DRYRUN", "m", "MIGRATE", "whatever", "whatever", "", "0", "500", "AUTH",
                "KEYS", "KEYS", "rw",
            ],
            &[
                "ACL", "DRYRUN", "m", "MIGRATE", "whatever", "whatever", "", "0", "500", "AUTH",
                "KEYS", "KEYS", "write",
            ],
            &[
                "ACL", "DRYRUN", "m", "MIGRATE", "whatever", "whatever", "", "0", "500", "AUTH2",
                "KEYS", "123", "KEYS", "rw",
            ],
            &[
                "ACL", "DRYRUN", "m", "MIGRATE", "whatever", "whatever", "", "0", "500", "AUTH2",
                "USER", "KEYS", "KEYS", "write",
            ],
        ],
        &mut diffs,
    );
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
