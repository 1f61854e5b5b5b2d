use super::*;
use crate::crd::{SecretKeyRef, UserSpec};

fn spec(users: &[(&str, &str)]) -> RedisClusterSpec {
    let mut s = crate::restart::tests::spec(1, 0);
    s.users = users
        .iter()
        .map(|(n, r)| UserSpec {
            name: n.to_string(),
            password_secret: Some(SecretKeyRef {
                name: format!("{n}-pw"),
                key: "password".into(),
            }),
            rules: r.to_string(),
        })
        .collect();
    s.user_password_overlap_seconds = 30;
    s
}

fn pws(v: &[(&str, &str)]) -> BTreeMap<String, Result<String, String>> {
    v.iter()
        .map(|(n, p)| (n.to_string(), Ok(p.to_string())))
        .collect()
}

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).expect("time")
}

#[test]
fn rules_are_checked_by_the_node_grammar() {
    assert!(validate(&spec(&[("app", "~app:* +@read +@write -@dangerous")])).is_empty());
    assert!(validate(&spec(&[("app", "")])).is_empty());
    assert!(validate(&spec(&[(
        "app",
        "%R~ro:* &chan:* +get +config|get (~x +set)"
    )]))
    .is_empty());
    let p = validate(&spec(&[("ok", "+@read"), ("app", "~app:* +@bogus")]));
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].user, "app");
    assert_eq!(
        p[0].message,
        "spec.users[1] (\"app\"): Error in ACL SETUSER modifier '+@bogus': Unknown command or category name in ACL"
    );
    // An unknown command, a bad pattern, an unclosed selector.
    for bad in ["+nosuchcmd", "~a allkeys ~b", "allkeys ~b", "(~x +get"] {
        let p = validate(&spec(&[("u", bad)]));
        assert_eq!(p.len(), 1, "{bad}: {p:?}");
    }
}

#[test]
fn names_and_password_rules_are_refused() {
    let p = validate(&spec(&[("tessera-operator", "+@all")]));
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].user, "tessera-operator");
    assert!(p[0].message.contains("reserved"), "{p:?}");
    // `default`: rules only.
    let p = validate(&spec(&[("default", "off")]));
    assert!(p[0].message.contains("rules only"), "{p:?}");
    let mut s = spec(&[("default", "off"), ("app", "+@read")]);
    s.users[0].password_secret = None;
    assert_eq!(validate(&s), vec![]);
    s.users[1].password_secret = None;
    let p = validate(&s);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].user, "app");
    assert!(p[0].message.contains("passwordSecret is required"), "{p:?}");
    let p = validate(&spec(&[("a", "+@read"), ("a", "+@write")]));
    assert_eq!(p.len(), 1);
    assert!(p[0].message.contains("declared twice"));
    assert_eq!(validate(&spec(&[("a b", "")])).len(), 1);
    for bad in [">pw", "<pw", "nopass", "#abc", "resetpass", "RESET"] {
        let p = validate(&spec(&[("u", &format!("~x {bad}"))]));
        assert_eq!(p.len(), 1, "{bad}");
        assert!(p[0].message.contains(bad), "{p:?}");
    }
}

#[test]
fn canonical_lines_are_what_acl_list_prints() {
    let h = sha256("pw");
    assert_eq!(
        canonical("app", "~app:* +@read", std::slice::from_ref(&h)).as_deref(),
        Ok(format!("user app on sanitize-payload #{h} ~app:* resetchannels -@all +@read").as_str())
    );
    let args = setuser_args("~app:*  +get", std::slice::from_ref(&h));
    assert_eq!(
        args,
        ["reset", "on", "~app:*", "+get", format!("#{h}").as_str()]
    );
}

fn desired(name: &str, rules: &str, hs: &[String]) -> DesiredUser {
    DesiredUser {
        name: name.into(),
        args: setuser_args(rules, hs),
        line: canonical(name, rules, hs).expect("valid"),
    }
}

#[test]
fn a_node_gets_only_what_differs() {
    let h = vec![sha256("pw")];
    let app = desired("app", "~app:* +@read", &h);
    let ro = desired("ro", "~* +@read", &h);
    let default = "user default on nopass ~* &* +@all".to_string();
    // A new node: both users.
    let ops = plan_node(
        &[app.clone(), ro.clone()],
        &[],
        std::slice::from_ref(&default),
    );
    assert_eq!(ops.len(), 2);
    assert!(matches!(&ops[0], NodeOp::Set { name, args } if name == "app" && args == &app.args));
    // A node in sync: nothing.
    let synced = vec![default.clone(), app.line.clone(), ro.line.clone()];
    assert!(plan_node(&[app.clone(), ro.clone()], &[], &synced).is_empty());
    // Changed by hand (rules or password): set again, with reset.
    let drifted = vec![
        default.clone(),
        app.line.replace("+@read", "+@all"),
        ro.line.clone(),
        "user handmade on nopass ~* +@all".into(),
    ];
    assert_eq!(
        plan_node(&[app.clone(), ro.clone()], &["old".into()], &drifted),
        vec![NodeOp::Set {
            name: "app".into(),
            args: app.args.clone()
        }]
    );
    // A removed user the node still has: deleted; hand-made users are not named, so kept.
    let with_old = vec![default, "user old on #00 ~* +@all".into()];
    assert_eq!(
        plan_node(&[], &["old".into(), "gone".into()], &with_old),
        vec![NodeOp::Del("old".into())]
    );
}

#[test]
fn rotation_adds_then_waits_the_overlap_then_removes() {
    let s = spec(&[("app", "~app:* +@write")]);
    let (a, b) = (sha256("first"), sha256("second"));
    // First sight: one password.
    let p = plan(&s, &pws(&[("app", "first")]), &[], at(0));
    assert_eq!(p.desired[0].args.last(), Some(&format!("#{a}")));
    let rec = record_after(&p, true, at(0));
    assert_eq!(rec[0].password_sha256, a);
    assert_eq!(rec[0].previous_password_sha256, None);
    // The Secret changes: both hashes sent, the old one recorded (hash only).
    let p = plan(&s, &pws(&[("app", "second")]), &rec, at(10));
    assert!(p.desired[0]
        .args
        .ends_with(&[format!("#{b}"), format!("#{a}")]));
    // One node failed: the overlap has not started; the next reconcile sends both again.
    let rec = record_after(&p, false, at(10));
    assert_eq!(rec[0].previous_password_sha256.as_deref(), Some(a.as_str()));
    assert_eq!(rec[0].overlap_since, None);
    assert!(!p
        .record
        .iter()
        .any(|r| r.password_sha256.contains("second")));
    let p = plan(&s, &pws(&[("app", "second")]), &rec, at(12));
    assert_eq!(p.desired[0].args.len(), 6);
    let rec = record_after(&p, true, at(12));
    assert_eq!(rec[0].overlap_since, Some(at(12).to_string()));
    let conds = conditions(&[], Some(&p), Some(&NodesOutcome::default()), &rec);
    assert!(conds[1].1, "UsersRotating: {conds:?}");
    assert_eq!(
        next_check(&rec, at(20), Duration::from_secs(30)),
        Some(Duration::from_secs(23))
    );
    // Inside the window: both still.
    let p = plan(&s, &pws(&[("app", "second")]), &rec, at(41));
    assert_eq!(p.desired[0].args.len(), 6);
    assert_eq!(record_after(&p, true, at(41)), rec);
    // After it: the old one goes.
    let p = plan(&s, &pws(&[("app", "second")]), &rec, at(42));
    assert_eq!(p.desired[0].args.len(), 5);
    assert!(p.desired[0].args.ends_with(&[format!("#{b}")]));
    let rec = record_after(&p, true, at(42));
    assert_eq!(rec[0].previous_password_sha256, None);
    assert_eq!(next_check(&rec, at(42), Duration::from_secs(30)), None);
    let conds = conditions(&[], Some(&p), Some(&NodesOutcome::default()), &rec);
    assert!(conds[0].1 && !conds[1].1, "{conds:?}");
}

#[test]
fn a_second_change_mid_rotation_drops_the_oldest() {
    let (a, b, c) = (sha256("a"), sha256("b"), sha256("c"));
    let rec = UserStatus {
        name: "u".into(),
        password_sha256: b.clone(),
        previous_password_sha256: Some(a),
        overlap_since: Some(at(0).to_string()),
        removing: false,
    };
    let t = target(Some(&rec), "u", &c, at(1), Duration::from_secs(60));
    assert_eq!(hashes(&t), vec![c, b]);
    assert_eq!(t.overlap_since, None);
}

#[test]
fn users_leaving_the_spec_are_deleted_then_forgotten() {
    let s = spec(&[("keep", "+@read")]);
    let rec = vec![
        UserStatus {
            name: "keep".into(),
            password_sha256: sha256("k"),
            ..UserStatus::default()
        },
        UserStatus {
            name: "gone".into(),
            password_sha256: sha256("g"),
            ..UserStatus::default()
        },
    ];
    let p = plan(&s, &pws(&[("keep", "k")]), &rec, at(0));
    assert_eq!(p.remove, vec!["gone".to_string()]);
    let after = record_after(&p, false, at(0));
    assert!(after.iter().any(|r| r.name == "gone" && r.removing));
    let p = plan(&s, &pws(&[("keep", "k")]), &after, at(1));
    assert_eq!(p.remove, vec!["gone".to_string()]);
    let after = record_after(&p, true, at(1));
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].name, "keep");
}

#[test]
fn an_unreadable_secret_leaves_the_user_alone() {
    let s = spec(&[("a", "+@read"), ("b", "+@read")]);
    let rec = vec![UserStatus {
        name: "b".into(),
        password_sha256: sha256("old"),
        ..UserStatus::default()
    }];
    let mut pw = pws(&[("a", "x")]);
    pw.insert("b".into(), Err("secret b-pw: not found".into()));
    let p = plan(&s, &pw, &rec, at(0));
    assert_eq!(p.desired.len(), 1);
    assert!(p.remove.is_empty(), "b is not deleted");
    assert_eq!(record_after(&p, true, at(0))[1], rec[0]);
    let conds = conditions(&[], Some(&p), Some(&NodesOutcome::default()), &[]);
    assert_eq!(conds[0].2, "SecretUnavailable");
    assert!(conds[0].3.contains("not found"));
}

/// ACL LIST lines redis-server 7.0.15 printed for these SETUSERs (`reset on <rules> #<hash>`):
/// a node in sync must compare equal, or it would get its users again at every reconcile.
#[test]
fn canonical_lines_match_redis_server_7_0() {
    let h = vec![sha256("pw")];
    let hash = &h[0];
    let cases = [
        ("~app:* +@read", "~app:* resetchannels -@all +@read".to_string()),
        (
            "~app:* +@read +@write -@dangerous",
            "~app:* resetchannels -@all +@string +@hash +@geo +@blocking +@bitmap +@set +@hyperloglog +@stream +@sortedset +@list +@keyspace -sort_ro +memory|usage -flushall -pfdebug +lolwut -sort -flushdb -xgroup|help -xinfo|help -pfselftest -keys -migrate -restore -object|help +function|restore +function|load +function|delete +function|flush -restore-asking -swapdb".to_string(),
        ),
        (
            "%R~ro:* &chan:* +get +config|get (~x +set)",
            "%R~ro:* resetchannels &chan:* -@all +get +config|get (~x resetchannels -@all +set)".to_string(),
        ),
    ];
    for (rules, tail) in cases {
        let redis = format!("user app on sanitize-payload #{hash} {tail}");
        let ours = canonical("app", rules, &h).expect("valid");
        // Single commands come in another order than redis's hash order: same rules.
        assert!(same_rules(&ours, &redis), "{rules}:\n{ours}\n{redis}");
        let d = DesiredUser {
            name: "app".into(),
            args: setuser_args(rules, &h),
            line: ours,
        };
        assert!(plan_node(&[d], &[], &[redis]).is_empty(), "{rules}");
    }
    // valkey 9 prints the rules as given (and no sanitize-payload): the same user.
    let valkey = format!(
        "user app on #{hash} ~app:* resetchannels -@all +@read +@write -@dangerous +cluster|slots"
    );
    let ours = canonical(
        "app",
        "~app:* +@read +@write -@dangerous +cluster|slots",
        &h,
    )
    .expect("valid");
    assert!(same_rules(&ours, &valkey), "{ours}\n{valkey}");
    assert!(!same_rules(&ours, &valkey.replace(" +cluster|slots", "")));
    // Not the same: another rule, another password, a selector's rule outside it.
    let base = canonical("app", "~app:* +get (~x +set)", &h).expect("valid");
    for other in [
        canonical("app", "~app:* +set (~x +set)", &h),
        canonical("app", "~app:* +get (~x +set)", &[sha256("other")]),
        canonical("app", "~app:* +get +set (~x)", &h),
    ] {
        assert!(!same_rules(&base, &other.expect("valid")));
    }
}

fn access(default_password: Option<Option<&str>>) -> Access {
    Access {
        admin_sha: sha256("admin-pw"),
        default_password: default_password.map(|p| p.map(str::to_string)),
    }
}

#[test]
fn the_operator_user_comes_first_on_every_node() {
    let s = spec(&[("app", "~app:* +@read")]);
    let p = with_access(
        plan(&s, &pws(&[("app", "x")]), &[], at(0)),
        &s,
        &[],
        &access(Some(None)),
    );
    let admin = &p.desired[0];
    assert_eq!(admin.name, "tessera-operator");
    assert_eq!(
        admin.args,
        [
            "reset",
            "on",
            "~*",
            "&*",
            "+@all",
            &format!("#{}", sha256("admin-pw"))
        ]
    );
    assert_eq!(
        admin.line,
        format!(
            "user tessera-operator on sanitize-payload #{} ~* &* +@all",
            sha256("admin-pw")
        )
    );
    assert_eq!(p.desired[1].name, "app");
    // Not recorded: never removed.
    assert!(p.record.iter().all(|r| r.name != "tessera-operator"));
    // A node without it (a pod from an older operator) gets it; one with it gets nothing.
    let ops = plan_node(&p.desired[..1], &[], &[]);
    assert!(matches!(&ops[..], [NodeOp::Set { name, .. }] if name == "tessera-operator"));
    assert!(plan_node(&p.desired[..1], &[], std::slice::from_ref(&admin.line)).is_empty());
}

#[test]
fn a_declared_default_keeps_spec_auths_password() {
    let mut s = spec(&[("default", "off"), ("app", "+@read")]);
    s.users[0].password_secret = None;
    let base = plan(&s, &pws(&[("app", "x")]), &[], at(0));
    assert!(base.unavailable.is_empty(), "{base:?}");
    // With spec.auth: its hash; without: nopass.
    let p = with_access(base.clone(), &s, &[], &access(Some(Some("secret"))));
    let d = p
        .desired
        .iter()
        .find(|d| d.name == "default")
        .expect("default");
    assert_eq!(
        d.args,
        ["reset", "on", "off", &format!("#{}", sha256("secret"))]
    );
    assert_eq!(
        d.line,
        format!(
            "user default off sanitize-payload #{} resetchannels -@all",
            sha256("secret")
        )
    );
    assert!(p.remove.is_empty());
    let rec = record_after(&p, true, at(0));
    assert!(rec
        .iter()
        .any(|r| r.name == "default" && r.password_sha256 == sha256("secret")));
    let p = with_access(base.clone(), &s, &[], &access(Some(None)));
    let d = p
        .desired
        .iter()
        .find(|d| d.name == "default")
        .expect("default");
    assert_eq!(d.args, ["reset", "on", "off", "nopass"]);
    // A password change under way: default is left alone (crate::auth owns it then).
    let p = with_access(base, &s, &rec, &access(None));
    assert!(p.desired.iter().all(|d| d.name != "default"));
    assert!(p.record.iter().any(|r| r.name == "default"));
    // Undeclared: Redis's own rules come back once, never a DELUSER, then it is forgotten.
    let plain = spec(&[("app", "+@read")]);
    let p = with_access(
        plan(&plain, &pws(&[("app", "x")]), &rec, at(1)),
        &plain,
        &rec,
        &access(Some(Some("secret"))),
    );
    assert!(p.remove.is_empty(), "{p:?}");
    let d = p
        .desired
        .iter()
        .find(|d| d.name == "default")
        .expect("default");
    assert_eq!(
        d.line,
        format!(
            "user default on sanitize-payload #{} ~* &* +@all",
            sha256("secret")
        )
    );
    assert!(record_after(&p, true, at(1))
        .iter()
        .all(|r| r.name != "default"));
}

#[test]
fn replication_login_changes_only_when_it_differs() {
    assert!(replication_login_differs("", "pw", "tessera-operator", "a"));
    assert!(replication_login_differs(
        "tessera-operator",
        "old",
        "tessera-operator",
        "a"
    ));
    assert!(!replication_login_differs(
        "tessera-operator",
        "a",
        "tessera-operator",
        "a"
    ));
}
