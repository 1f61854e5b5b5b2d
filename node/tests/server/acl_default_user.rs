//! ACL as redis-server 7.0 answers it for the `default` user, the only one tessera-node
//! has: the same replies in RESP2 and RESP3, without and with requirepass, ACL LOG after
//! failed AUTHs, and ACL SETUSER default changing the password. Where tessera refuses
//! (other users) the refusal is checked on its own.

use tessera_testkit::*;

fn start(bin: &str, extra: &[&str]) -> Server {
    Launch::new(bin).args(&["--save", ""]).args(extra).start()
}

/// A reply with the parts that differ run to run masked: ACL LOG's age-seconds and
/// client-info, GENPASS's random text (its length kept).
fn mask(cmd: &[&str], r: &R) -> String {
    let s = format!("{r:?}");
    if cmd.len() >= 2 && cmd[1].eq_ignore_ascii_case("genpass") {
        return match r {
            R::Bulk(b) => format!(
                "{} hex chars",
                b.iter().filter(|c| c.is_ascii_hexdigit()).count()
            ),
            other => format!("{other:?}"),
        };
    }
    if cmd.len() >= 2 && cmd[1].eq_ignore_ascii_case("log") {
        // Entries: [count, n, reason, .., age-seconds, X, client-info, Y]
        let mut out = String::new();
        if let R::Arr(entries) | R::Agg(_, entries) = r {
            for e in entries {
                if let R::Arr(f) | R::Agg(_, f) = e {
                    for pair in f.chunks(2) {
                        let k = pair[0].s();
                        let v = match k.as_str() {
                            "age-seconds" => "#".to_string(),
                            "client-info" => {
                                // The fields that say who failed, not when or how big.
                                let v = pair[1].s();
                                ["cmd=", "user=", "db="]
                                    .iter()
                                    .filter_map(|f| v.split(' ').find(|w| w.starts_with(f)))
                                    .collect::<Vec<_>>()
                                    .join(" ")
                            }
                            _ => pair[1].s(),
                        };
                        out.push_str(&format!("{k}={v};"));
                    }
                    out.push('|');
                }
            }
            return out;
        }
    }
    s
}

fn transcript(bin: &str, extra: &[&str], script: &[&[&str]]) -> Vec<String> {
    let srv = start(bin, extra);
    let mut c = Raw::connect(srv.port);
    script
        .iter()
        .map(|cmd| format!("{cmd:?} -> {}", mask(cmd, &c.cmd(cmd))))
        .collect()
}

const READS: &[&[&str]] = &[
    &["ACL", "WHOAMI"],
    &["ACL", "USERS"],
    &["ACL", "LIST"],
    &["ACL", "GETUSER", "default"],
    &["ACL", "GETUSER", "nobody"],
    &["ACL", "CAT"],
    &["ACL", "CAT", "nosuch"],
    &["ACL", "CAT", "a", "b"],
    &["ACL", "DRYRUN", "default", "get", "k"],
    &["ACL", "DRYRUN", "default", "get"],
    &["ACL", "DRYRUN", "default", "nosuch"],
    &["ACL", "DRYRUN", "nobody", "get", "k"],
    &["ACL", "GENPASS"],
    &["ACL", "GENPASS", "32"],
    &["ACL", "GENPASS", "5"],
    &["ACL", "GENPASS", "0"],
    &["ACL", "GENPASS", "4097"],
    &["ACL", "GENPASS", "x"],
    &["ACL", "DELUSER", "default"],
    &["ACL", "DELUSER", "nobody", "other"],
    &["ACL", "LOAD"],
    &["ACL", "SAVE"],
    &["ACL", "LOG"],
    &["ACL", "LOG", "RESET"],
    &["ACL", "LOG", "-1"],
    &["ACL", "LOG", "x"],
    &["ACL", "HELP"],
    &["ACL", "NOSUCH"],
    &["ACL"],
];

#[test]
fn reads_match_redis_without_and_with_a_password() {
    for (extra, auth) in [
        (&[][..], None),
        (&["--requirepass", "s3cret"][..], Some("s3cret")),
    ] {
        for resp3 in [false, true] {
            let mut script: Vec<&[&str]> = Vec::new();
            let hello: Vec<&str> = match (resp3, auth) {
                (true, Some(p)) => vec!["HELLO", "3", "AUTH", "default", p],
                (true, None) => vec!["HELLO", "3"],
                (false, Some(p)) => vec!["AUTH", p],
                (false, None) => vec!["PING"],
            };
            script.push(&hello);
            script.extend_from_slice(READS);
            let want = transcript(redis_bin(), extra, &script);
            let got = transcript(tessera_bin(), extra, &script);
            for (w, g) in want.iter().zip(&got).skip(1) {
                assert_eq!(g, w, "{extra:?} resp3={resp3}");
            }
        }
    }
}

/// ACL CAT <category>: the same commands as redis lists, apart from commands the node
/// does not have.
#[test]
fn categories_list_the_same_commands() {
    let redis = start(redis_bin(), &[]);
    let tessera = start(tessera_bin(), &[]);
    let mut r = Raw::connect(redis.port);
    let mut t = Raw::connect(tessera.port);
    let names = |c: &mut Raw, args: &[&str]| -> Vec<String> {
        let R::Arr(v) = c.cmd(args) else {
            panic!("{args:?}")
        };
        let mut v: Vec<String> = v.iter().map(|x| x.s()).collect();
        v.sort();
        v
    };
    // Every command tessera has, subcommands as "a|b".
    let mut have = names(&mut t, &["COMMAND", "LIST"]);
    for c in have.clone() {
        if let R::Arr(info) = t.cmd(&["COMMAND", "INFO", &c]) {
            if let Some(R::Arr(entry)) = info.first() {
                if let Some(R::Arr(subs)) = entry.get(9) {
                    for s in subs {
                        if let R::Arr(se) = s {
                            have.push(se[0].s());
                        }
                    }
                }
            }
        }
    }
    for cat in names(&mut r, &["ACL", "CAT"]) {
        let want: Vec<String> = names(&mut r, &["ACL", "CAT", &cat])
            .into_iter()
            .filter(|c| have.contains(c))
            .collect();
        let got = names(&mut t, &["ACL", "CAT", &cat]);
        assert_eq!(got, want, "@{cat}");
    }
}

/// Failed AUTHs land in ACL LOG as in redis (grouped, newest first, HELLO's too), and
/// ACL SETUSER default >password changes the password the way AUTH then sees it.
#[test]
fn log_and_password_changes_match_redis() {
    let script: &[&[&str]] = &[
        &["AUTH", "wrong"],
        &["AUTH", "wrong"],
        &["AUTH", "default", "wrong"],
        &["AUTH", "nobody", "x"],
        &["HELLO", "2", "AUTH", "default", "bad"],
        &["AUTH", "s3cret"],
        &["ACL", "LOG"],
        &["ACL", "LOG", "1"],
        &["ACL", "LOG", "RESET"],
        &["ACL", "LOG"],
        &[
            "ACL", "SETUSER", "default", "on", ">n3w", "~*", "&*", "+@all",
        ],
        &["ACL", "LIST"],
        &["CONFIG", "GET", "requirepass"],
        &["AUTH", "s3cret"],
        &["AUTH", "n3w"],
        &["ACL", "SETUSER", "default", "<s3cret"],
        &["ACL", "SETUSER", "default", "<nosuch"],
        &["AUTH", "s3cret"],
        &["ACL", "LIST"],
        &["ACL", "SETUSER", "default", "nopass"],
        &["ACL", "LIST"],
        &["AUTH", "anything"],
        &["CONFIG", "GET", "requirepass"],
        &["ACL", "SETUSER", "default", "resetpass"],
        &["ACL", "GETUSER", "default"],
        &["AUTH", "n3w"],
        &["CONFIG", "SET", "requirepass", "again"],
        &["ACL", "LIST"],
        &["AUTH", "again"],
        &["ACL", "WHOAMI"],
    ];
    let want = transcript(redis_bin(), &["--requirepass", "s3cret"], script);
    let got = transcript(tessera_bin(), &["--requirepass", "s3cret"], script);
    assert_eq!(got, want);
}

#[test]
fn other_users_are_kept_and_default_takes_rules() {
    // Issue 19: other users are created and `default` takes the whole grammar
    // (node/tests/security/acl_users.rs compares both with redis-server).
    let srv = start(tessera_bin(), &[]);
    let mut c = Raw::connect(srv.port);
    let r = c
        .cmd(&["ACL", "SETUSER", "alice", "on", ">pw", "~*", "+@all"])
        .s();
    assert_eq!(r, "OK");
    let r = c.cmd(&["ACL", "SETUSER", "default", "-@all", "+acl"]).s();
    assert_eq!(r, "OK");
    assert_eq!(
        c.cmd(&["ACL", "USERS"]),
        R::Arr(vec![
            R::Bulk(b"alice".to_vec()),
            R::Bulk(b"default".to_vec())
        ])
    );
    assert!(c.cmd(&["GET", "k"]).s().starts_with("NOPERM"));
}
