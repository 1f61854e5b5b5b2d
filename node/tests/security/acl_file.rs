//! ACL users from files (issue 19) against redis-server 7.0: `aclfile` with ACL LOAD/SAVE
//! (Redis's file format, errors with line numbers, all or nothing, connections of the old
//! users closed), `user` lines in the config (`default` included) and CONFIG REWRITE of
//! them, the start-up refusals, and ACL GENPASS/LOG/HELP, in RESP2 and RESP3.

use std::path::Path;
use std::time::Duration;

use tessera_testkit::*;

/// A user per line; each rule set has at most one single-command rule, whose place Redis
/// does not fix (its command dict's order).
const USERS: &str = "user alice on >alice ~* &* +@all\n\
                     user bob on >bob ~set* resetchannels -@all +@set +acl\n\
                     user carol off #2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae %R~r* (~w* +@write)\n\
                     user default on nopass ~* &* +@all\n";

/// A server of `launch` over `dir` (which holds users.acl), `aclfile users.acl`.
fn with_aclfile(launch: Launch, dir: &Path) -> Server {
    launch.dir(dir).args(&["--aclfile", "users.acl"]).start()
}

fn both_with_file(text: &str) -> (tempfile::TempDir, Server, tempfile::TempDir, Server) {
    let (rd, td) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(rd.path().join("users.acl"), text).unwrap();
    std::fs::write(td.path().join("users.acl"), text).unwrap();
    let r = with_aclfile(Launch::redis().args(&["--save", ""]), rd.path());
    let t = with_aclfile(Launch::tessera(), td.path());
    (rd, r, td, t)
}

/// The same commands on both servers; the replies that differ.
fn compare(rc: &mut Conn, tc: &mut Conn, what: &str, cmds: &[&[&str]], diffs: &mut Vec<String>) {
    for c in cmds {
        let (want, got) = (rc.cmd(c), tc.cmd(c));
        if want != got {
            diffs.push(format!(
                "{what} {c:?}:\n  redis   {want:?}\n  tessera {got:?}"
            ));
        }
    }
}

#[test]
fn acl_load_and_save_like_redis() {
    let (rd, r, td, t) = both_with_file(USERS);
    let mut diffs = Vec::new();
    for proto in ["2", "3"] {
        let (mut rc, mut tc) = (r.resp(), t.resp());
        rc.cmd(&["HELLO", proto]);
        tc.cmd(&["HELLO", proto]);
        let what = format!("RESP{proto}");
        compare(
            &mut rc,
            &mut tc,
            &what,
            &[
                &["ACL", "LIST"],
                &["ACL", "USERS"],
                &["ACL", "GETUSER", "carol"],
                &["AUTH", "carol", "foo"],
                &["AUTH", "bob", "bob"],
                &["SADD", "set1", "a"],
                &["SET", "k", "v"],
                &["ACL", "SETUSER", "eve", "on", ">eve", "+get", "allkeys"],
                &["ACL", "SAVE"],
            ],
            &mut diffs,
        );
        let (rf, tf) = (
            std::fs::read_to_string(rd.path().join("users.acl")).unwrap(),
            std::fs::read_to_string(td.path().join("users.acl")).unwrap(),
        );
        if rf != tf {
            diffs.push(format!(
                "{what} saved file:\n  redis   {rf:?}\n  tessera {tf:?}"
            ));
        }
        // Nothing else than the saved file is left in the directory (the temp file is
        // renamed over it).
        let names: Vec<String> = std::fs::read_dir(td.path())
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("users.acl"))
            .collect();
        assert_eq!(names, ["users.acl"], "temp file left behind");

        // Another connection, logged in as alice, and one as default.
        let (mut ra, mut ta) = (r.resp(), t.resp());
        compare(
            &mut ra,
            &mut ta,
            &what,
            &[&["AUTH", "alice", "alice"]],
            &mut diffs,
        );
        let (mut rdef, mut tdef) = (r.resp(), t.resp());
        // ACL LOAD answers OK, then closes every connection of a user other than default
        // (this one as well, after the reply).
        compare(&mut rc, &mut tc, &what, &[&["ACL", "LOAD"]], &mut diffs);
        assert!(
            rc.closed() && tc.closed(),
            "{what}: the loading bob's connection stays"
        );
        assert!(
            ra.closed() && ta.closed(),
            "{what}: alice's connection stays"
        );
        compare(&mut rdef, &mut tdef, &what, &[&["PING"]], &mut diffs);
        let (mut rc, mut tc) = (r.resp(), t.resp());
        rc.cmd(&["HELLO", proto]);
        tc.cmd(&["HELLO", proto]);
        compare(
            &mut rc,
            &mut tc,
            &what,
            &[
                &["ACL", "USERS"],
                &["AUTH", "eve", "eve"],
                &["GET", "k"],
                &["SET", "k", "v"],
                &["AUTH", "default", "x"],
                &["ACL", "DELUSER", "eve"],
            ],
            &mut diffs,
        );
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// Broken files: ACL LOAD refuses them with Redis's list of errors and keeps the users.
#[test]
fn broken_acl_file_is_refused_like_redis() {
    let (rd, r, td, t) = both_with_file(USERS);
    let broken = [
        "user alice on >a ~*\n\nuser bob on <nopw bogus\nuser alice on\n  foo bar\n",
        "user x on +nosuchcmd +@nosuchcat ~a* ~*\r\nuser a\tb on\nuser\n",
        "user default on nopass ~* -@all\nuser default on\n",
        "user y on ~* %X~k &* &x\nuser z on #abc resetkeys\n",
        "user q on (~x +get) +set\nuser  spaced on\nuser w  on\n",
    ];
    let mut diffs = Vec::new();
    for proto in ["2", "3"] {
        let (mut rc, mut tc) = (r.resp(), t.resp());
        rc.cmd(&["HELLO", proto]);
        tc.cmd(&["HELLO", proto]);
        for text in broken {
            std::fs::write(rd.path().join("users.acl"), text).unwrap();
            std::fs::write(td.path().join("users.acl"), text).unwrap();
            let what = format!("RESP{proto} {text:?}");
            compare(
                &mut rc,
                &mut tc,
                &what,
                &[&["ACL", "LOAD"], &["ACL", "LIST"]],
                &mut diffs,
            );
        }
        std::fs::remove_file(rd.path().join("users.acl")).unwrap();
        std::fs::remove_file(td.path().join("users.acl")).unwrap();
        compare(
            &mut rc,
            &mut tc,
            "missing file",
            &[&["ACL", "LOAD"], &["ACL", "USERS"]],
            &mut diffs,
        );
        std::fs::write(rd.path().join("users.acl"), USERS).unwrap();
        std::fs::write(td.path().join("users.acl"), USERS).unwrap();
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// Without an aclfile, ACL LOAD and SAVE are refused as Redis refuses them.
#[test]
fn load_and_save_without_a_file_like_redis() {
    let (r, t) = (diff::redis(), diff::tessera());
    let (mut rc, mut tc) = (r.resp(), t.resp());
    let mut diffs = Vec::new();
    compare(
        &mut rc,
        &mut tc,
        "no aclfile",
        &[
            &["ACL", "LOAD"],
            &["ACL", "SAVE"],
            &["CONFIG", "GET", "aclfile"],
        ],
        &mut diffs,
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// The line a refused start logged for Redis's reason (after its timestamp).
fn refusal(exit: &Exit, needle: &str) -> Option<String> {
    exit.output
        .lines()
        .find_map(|l| l.find(needle).map(|i| l[i..].to_string()))
}

#[test]
fn refused_starts_like_redis() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.acl"),
        "user alice on >a ~*\nuser bob on <nopw\nuser alice on\nfoo\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("good.acl"), USERS).unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--aclfile", "good.acl", "--user", "bob"],
            "Configuring Redis with users defined in redis.conf",
        ),
        (&["--aclfile", "bad.acl"], "Aborting Redis startup"),
        (&["--aclfile", "missing.acl"], "Aborting Redis startup"),
        (&["--user", "bob on +nosuchcmd"], "Spaces not allowed"),
        (&["--user", "bob", "--user", "bob"], "Duplicate user"),
        (
            &["--user", "default", "--user", "default"],
            "Duplicate user",
        ),
    ];
    let mut diffs = Vec::new();
    for (args, needle) in cases {
        let mut outcome = Vec::new();
        for l in [Launch::redis(), Launch::tessera()] {
            let exit = l
                .args(args)
                .dir(dir.path())
                .run_to_exit(dir.path(), Duration::from_secs(20));
            outcome.push((exit.failed(), refusal(&exit, needle)));
        }
        if outcome[0] != outcome[1] || !outcome[0].0 {
            diffs.push(format!(
                "{args:?}:\n  redis   {:?}\n  tessera {:?}",
                outcome[0], outcome[1]
            ));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// `user` lines in the config, `default` included: the users they declare, requirepass
/// overridden by the `default` line, CONFIG REWRITE's `user` lines, and the same users
/// after a restart from the rewritten file.
#[test]
fn config_users_and_rewrite_like_redis() {
    let conf = "requirepass foo\n\
                user default on nopass ~* &* +@all -flushdb\n\
                user bob on >bob ~b* +@read\n";
    let mut servers = Vec::new();
    let mut dirs = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("node.conf"), conf).unwrap();
        let s = l
            .dir(d.path())
            .verbatim()
            .args(&[
                "{dir}/node.conf",
                "--port",
                "{port}",
                "--bind",
                "{ip}",
                "--dir",
                "{dir}",
                "--save",
                "",
            ])
            .start();
        servers.push(s);
        dirs.push(d);
    }
    let mut diffs = Vec::new();
    let script: &[&[&str]] = &[
        &["ACL", "LIST"],
        &["FLUSHDB"],
        &["CONFIG", "GET", "requirepass"],
        &["AUTH", "foo"],
        &["AUTH", "bob", "bob"],
        &["GET", "bx"],
        &["SET", "bx", "1"],
        &["AUTH", "default", "whatever"],
        &["ACL", "SETUSER", "zed", "on", ">z", "~z*", "+@string"],
    ];
    for proto in ["2", "3"] {
        let (mut rc, mut tc) = (servers[0].resp(), servers[1].resp());
        rc.cmd(&["HELLO", proto]);
        tc.cmd(&["HELLO", proto]);
        compare(
            &mut rc,
            &mut tc,
            &format!("RESP{proto}"),
            script,
            &mut diffs,
        );
    }
    let users_of = |d: &Path| -> Vec<String> {
        std::fs::read_to_string(d.join("node.conf"))
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("user "))
            .map(str::to_string)
            .collect()
    };
    for s in &servers {
        let mut c = s.resp();
        assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), Reply::Simple("OK".into()));
    }
    let (ru, tu) = (users_of(dirs[0].path()), users_of(dirs[1].path()));
    if ru != tu {
        diffs.push(format!("rewritten:\n  redis   {ru:?}\n  tessera {tu:?}"));
    }
    // Requirepass changes the default user's password again; the rewrite keeps both.
    for s in &servers {
        let mut c = s.resp();
        c.cmd(&["CONFIG", "SET", "requirepass", "bar"]);
        c.cmd(&["CONFIG", "REWRITE"]);
    }
    let (ru, tu) = (users_of(dirs[0].path()), users_of(dirs[1].path()));
    if ru != tu {
        diffs.push(format!(
            "rewritten after requirepass:\n  redis   {ru:?}\n  tessera {tu:?}"
        ));
    }
    for s in servers.iter_mut() {
        s.restart();
    }
    let (mut rc, mut tc) = (servers[0].resp(), servers[1].resp());
    compare(
        &mut rc,
        &mut tc,
        "restarted",
        &[
            &["PING"],
            &["AUTH", "bar"],
            &["ACL", "LIST"],
            &["FLUSHDB"],
            &["AUTH", "zed", "z"],
            &["SET", "zk", "1"],
        ],
        &mut diffs,
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// ACL GENPASS lengths and errors, ACL HELP, ACL LOG's grouping of repeated failures (an
/// entry seen again moves to the top) and RESET, in RESP2 and RESP3.
#[test]
fn genpass_help_and_log_like_redis() {
    let (r, t) = (diff::redis(), diff::tessera());
    let mut diffs = Vec::new();
    for proto in ["2", "3"] {
        let (mut rc, mut tc) = (r.resp(), t.resp());
        rc.cmd(&["HELLO", proto]);
        tc.cmd(&["HELLO", proto]);
        let what = format!("RESP{proto}");
        for bits in ["1", "4", "5", "7", "64", "255", "4096"] {
            let (a, b) = (
                rc.cmd(&["ACL", "GENPASS", bits]),
                tc.cmd(&["ACL", "GENPASS", bits]),
            );
            match (&a, &b) {
                (Reply::Bulk(x), Reply::Bulk(y))
                    if x.len() == y.len() && y.iter().all(|c| c.is_ascii_hexdigit()) => {}
                _ => diffs.push(format!("{what} GENPASS {bits}: {a:?} vs {b:?}")),
            }
        }
        compare(
            &mut rc,
            &mut tc,
            &what,
            &[
                &["ACL", "GENPASS", "0"],
                &["ACL", "GENPASS", "-3"],
                &["ACL", "GENPASS", "4097"],
                &["ACL", "GENPASS", "x"],
                &["ACL", "GENPASS", "1", "2"],
                &["ACL", "HELP"],
                &["acl", "help"],
                &["ACL", "HELP", "x"],
                &["ACL", "LOG", "RESET"],
                &["ACL", "SETUSER", "u", "on", "nopass", "+get", "~k*"],
                &["AUTH", "nobody", "x"],
            ],
            &mut diffs,
        );
        let (mut ru, mut tu) = (r.resp(), t.resp());
        compare(
            &mut ru,
            &mut tu,
            &what,
            &[
                &["AUTH", "u", "x"],
                &["GET", "other"],
                &["SET", "k1", "v"],
                &["GET", "other"],
            ],
            &mut diffs,
        );
        compare(
            &mut rc,
            &mut tc,
            &what,
            &[&["AUTH", "nobody", "x"]],
            &mut diffs,
        );
        // The entries without their client-info and age (the connections differ).
        let log = |c: &mut Conn| -> Vec<Vec<(String, String)>> {
            let Reply::Array(v) = c.cmd(&["ACL", "LOG"]) else {
                return Vec::new();
            };
            v.into_iter()
                .map(|e| {
                    let pairs: Vec<(Reply, Reply)> = match e {
                        Reply::Map(kv) => kv,
                        Reply::Array(flat) => flat
                            .chunks(2)
                            .map(|p| (p[0].clone(), p[1].clone()))
                            .collect(),
                        _ => Vec::new(),
                    };
                    pairs
                        .into_iter()
                        .filter(|(k, _)| !matches!(k, Reply::Bulk(b) if b == b"client-info" || b == b"age-seconds"))
                        .map(|(k, v)| (format!("{k:?}"), format!("{v:?}")))
                        .collect()
                })
                .collect()
        };
        let (rl, tl) = (log(&mut rc), log(&mut tc));
        if rl != tl {
            diffs.push(format!(
                "{what} ACL LOG:\n  redis   {rl:?}\n  tessera {tl:?}"
            ));
        }
        compare(
            &mut rc,
            &mut tc,
            &what,
            &[
                &["ACL", "LOG", "RESET"],
                &["ACL", "LOG"],
                &["ACL", "DELUSER", "u"],
            ],
            &mut diffs,
        );
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
