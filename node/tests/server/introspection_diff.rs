//! Redis 7.0.15's unit/introspection and introspection-2 against redis-server 7.0 (issue 18):
//! the command line as Redis reads it (options appended to the config file as lines, its
//! error texts), `save` lines that add to the file's, CONFIG SET's checks and its rollback
//! when applying fails, CONFIG GET * listing what Redis lists (and each value settable to
//! itself).

use std::time::Duration;

use tessera_testkit::*;

fn both() -> [Launch; 2] {
    [Launch::redis(), Launch::tessera()]
}

/// The `>>> 'line'` and reason lines of a fatal config error (the banner names the program).
fn config_error(out: &str) -> String {
    let lines: Vec<&str> = out.lines().collect();
    match lines.iter().position(|l| l.starts_with(">>> ")) {
        Some(i) => lines[i..lines.len().min(i + 2)].join("\n"),
        None => format!("no config error in: {out}"),
    }
}

/// Bad command lines (the cases of 'redis-server command line arguments - error cases'):
/// the same offending line, reason and failure status as redis-server.
#[test]
fn command_line_errors_like_redis() {
    let cases: &[&[&str]] = &[
        &["--port"],
        &["--port", "6380", "--loglevel"],
        &["--port", "6379", "6380"],
        &["--port", "--loglevel", "verbose"],
        &["--port", "--bla", "--loglevel", "verbose"],
        &["--logfile", "--my--log--file", "--loglevel", "--bla"],
        &["--shutdown-on-sigint"],
        &["--shutdown-on-sigint", "now force", "--shutdown-on-sigterm"],
        &["--replicaof", "127.0.0.1", "abc"],
        &["--replicaof", "--127.0.0.1", "abc"],
        &["--replicaof", "--127.0.0.1", "--abc"],
        &["--maxmemory 10mb 20mb"],
        &["--save", "1", "--save", "x y"],
    ];
    let mut diffs = Vec::new();
    for args in cases {
        let mut seen = Vec::new();
        for l in both() {
            let dir = tempfile::tempdir().expect("tempdir");
            let e = l
                .verbatim()
                .args(args)
                .run_to_exit(dir.path(), Duration::from_secs(10));
            seen.push(format!(
                "exit {:?}\n{}",
                e.status.and_then(|s| s.code()),
                config_error(&e.output)
            ));
        }
        if seen[0] != seen[1] {
            diffs.push(format!(
                "{args:?}:\nredis:\n{}\ntessera:\n{}",
                seen[0], seen[1]
            ));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n\n"));
}

/// A config file, then the command lines Redis's tests start servers with: the answers to
/// CONFIG GET of the settings they name, as redis-server's.
#[test]
fn command_line_options_like_redis() {
    let file = "save 900 1\nloglevel notice\nappendonly no\n";
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--maxmemory 700mb", "--maxmemory-policy volatile-lru"],
            &["maxmemory", "maxmemory-policy"],
        ),
        (
            &[
                "loglevel",
                "verbose",
                "--maxmemory '700mb'",
                "--maxmemory-policy 'volatile-lru'",
            ],
            &["loglevel", "maxmemory", "maxmemory-policy"],
        ),
        (
            &[
                "--proc-title-template",
                "--my--title--template",
                "--loglevel",
                "verbose",
            ],
            &["proc-title-template", "loglevel"],
        ),
        (
            &[
                "--proc-title-template --my--title--template",
                "--loglevel verbose",
            ],
            &["proc-title-template", "loglevel"],
        ),
        (&["--save", "--loglevel", "verbose"], &["save", "loglevel"]),
        (&["--loglevel", "verbose", "--save"], &["save", "loglevel"]),
        (
            &["--save", "", "--loglevel", "verbose"],
            &["save", "loglevel"],
        ),
        (
            &[
                "--proc-title-template",
                "--save",
                "--save",
                "",
                "--loglevel",
                "verbose",
            ],
            &["proc-title-template", "save", "loglevel"],
        ),
        (
            &[
                "--shutdown-on-sigint",
                "nosave",
                "force",
                "now",
                "--shutdown-on-sigterm",
                "nosave force",
            ],
            &["shutdown-on-sigint", "shutdown-on-sigterm"],
        ),
        // 'CONFIG save params special case handled properly': the first save line replaces
        // the defaults, the next ones add to it, an empty one clears.
        (&["--save", "100", "100"], &["save"]),
        (&["--save", ""], &["save"]),
        (&["--save", "100 100", "--save", "200", "200"], &["save"]),
    ];
    let mut diffs = Vec::new();
    for (args, names) in cases {
        let mut seen = Vec::new();
        for l in both() {
            let dir = tempfile::tempdir().expect("tempdir");
            let conf = dir.path().join("node.conf");
            std::fs::write(&conf, file).expect("conf");
            let conf_arg = conf.display().to_string();
            // As the suite: the case's arguments right after the file.
            let mut all: Vec<&str> = vec![&conf_arg];
            all.extend_from_slice(args);
            all.extend_from_slice(&["--port", "{port}", "--bind", "{ip}", "--dir", "{dir}"]);
            let answers = match l.dir(dir.path()).verbatim().args(&all).start_or_exit() {
                Ok(s) => {
                    let mut c = s.raw();
                    names
                        .iter()
                        .map(|n| c.cmd(&["CONFIG", "GET", n]).s())
                        .collect::<Vec<_>>()
                        .join(" | ")
                }
                Err(e) => format!("did not start: {}", config_error(&e.output)),
            };
            seen.push(answers);
        }
        if seen[0] != seen[1] {
            diffs.push(format!(
                "{args:?}: redis {:?}, tessera {:?}",
                seen[0], seen[1]
            ));
        }
    }
    // Without a save line in the file, the first one given replaces the defaults.
    let mut seen = Vec::new();
    for l in both() {
        let s = l.args(&["--save", "100", "100", "--save", "7 7"]).start();
        seen.push(s.raw().cmd(&["CONFIG", "GET", "save"]).s());
    }
    if seen[0] != seen[1] {
        diffs.push(format!(
            "no save in file: redis {:?}, tessera {:?}",
            seen[0], seen[1]
        ));
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// CONFIG SET checks every name (unknown, immutable, protected, given twice) before any
/// value, and names the argument as the client spelled it, as Redis 7.0.
#[test]
fn config_set_checks_like_redis() {
    let cases: &[&[&str]] = &[
        &["maxmemory", "10000001", "maxmemory", "10000002"],
        &["MAXmemory", "1", "MaxMemory", "2"],
        &["maxmemory", "x", "maxmemory", "1"],
        &["maxmemory", "1", "nosuch", "2", "maxmemory", "3"],
        &["maxmemory", "x", "NoSuch", "1"],
        &["NoSuch", "1"],
        &["DAEMONIZE", "yes"],
        &["maxmemory", "x", "daemonize", "no"],
        &["MaxMemory", "x"],
        &["slave-read-only", "yes", "replica-read-only", "no"],
        &["lua-time-limit", "100", "busy-reply-threshold", "200"],
        &[
            "hash-max-ziplist-entries",
            "1",
            "hash-max-listpack-entries",
            "2",
        ],
        &["save", "0 1"],
        &["save", "1 0"],
        &["save", "1 -1"],
        &["dir", "/tmp", "maxmemory", "1", "Dir", "/tmp"],
    ];
    let [r, t] = both().map(|l| l.args(&["--save", ""]).start());
    let (mut rc, mut tc) = (r.raw(), t.raw());
    let mut diffs = Vec::new();
    for args in cases {
        let mut cmd = vec!["CONFIG", "SET"];
        cmd.extend_from_slice(args);
        let (want, got) = (rc.cmd(&cmd), tc.cmd(&cmd));
        let get = [
            "CONFIG",
            "GET",
            "maxmemory",
            "save",
            "lua-time-limit",
            "replica-read-only",
            "hash-max-listpack-entries",
        ];
        let pairs = |r: R| {
            let mut v: Vec<String> = match r {
                R::Arr(v) => v
                    .chunks(2)
                    .map(|kv| format!("{} {}", kv[0].s(), kv[1].s()))
                    .collect(),
                other => vec![other.s()],
            };
            v.sort();
            v
        };
        let (want_after, got_after) = (pairs(rc.cmd(&get)), pairs(tc.cmd(&get)));
        if want != got || want_after != got_after {
            diffs.push(format!(
                "{args:?}: redis {want:?} {want_after:?}\n  tessera {got:?} {got_after:?}"
            ));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// 'CONFIG SET rollback on apply error': a port in use fails the set, and every setting of
/// the call (oom-score-adj included, whose own apply succeeded) reads back as before.
#[test]
fn config_set_rolls_back_on_apply_error_like_redis() {
    let mut diffs = Vec::new();
    for l in both() {
        let s = l.args(&["--save", ""]).start();
        let mut c = s.raw();
        let names = [
            "oom-score-adj",
            "oom-score-adj-values",
            "maxmemory",
            "port",
            "client-query-buffer-limit",
        ];
        let before: Vec<String> = names
            .iter()
            .map(|n| c.cmd(&["CONFIG", "GET", n]).s())
            .collect();
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let used = taken.local_addr().expect("addr").port().to_string();
        let r = c.cmd(&[
            "CONFIG",
            "SET",
            "oom-score-adj",
            "yes",
            "oom-score-adj-values",
            "1 1 1",
            "maxmemory",
            "10000001",
            "port",
            &used,
            "client-query-buffer-limit",
            "10m",
        ]);
        let err = r.s();
        if !err.starts_with(
            "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port",
        ) {
            diffs.push(format!("{}: {err}", s.bin()));
        }
        let after: Vec<String> = names
            .iter()
            .map(|n| c.cmd(&["CONFIG", "GET", n]).s())
            .collect();
        if after != before {
            diffs.push(format!("{}: {before:?} became {after:?}", s.bin()));
        }
        assert_eq!(s.raw().cmd(&["PING"]).s(), "PONG");
        drop(taken);
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// 'CONFIG sanity': every name CONFIG GET * lists is one Redis lists, and each (but the
/// ones the test skips, as it does) can be set to the value shown, as on redis-server.
#[test]
fn config_get_all_settable_like_redis() {
    const SKIP: &[&str] = &[
        "rdbchecksum",
        "daemonize",
        "io-threads-do-reads",
        "tcp-backlog",
        "always-show-logo",
        "syslog-enabled",
        "cluster-enabled",
        "disable-thp",
        "aclfile",
        "unixsocket",
        "pidfile",
        "syslog-ident",
        "appendfilename",
        "appenddirname",
        "supervised",
        "syslog-facility",
        "databases",
        "io-threads",
        "logfile",
        "unixsocketperm",
        "replicaof",
        "slaveof",
        "requirepass",
        "server_cpulist",
        "bio_cpulist",
        "aof_rewrite_cpulist",
        "bgsave_cpulist",
        "set-proc-title",
        "cluster-config-file",
        "cluster-port",
        "oom-score-adj",
        "oom-score-adj-values",
        "enable-protected-configs",
        "enable-debug-command",
        "enable-module-command",
        "dbfilename",
        "dir",
        "socket-mark-id",
    ];
    let mut names = Vec::new();
    for l in both() {
        let s = l.args(&["--save", ""]).start();
        let mut c = s.raw();
        let R::Arr(items) = c.cmd(&["CONFIG", "GET", "*"]) else {
            panic!("CONFIG GET * is no array");
        };
        let mut listed = Vec::new();
        for kv in items.chunks(2) {
            let (k, v) = (kv[0].s(), kv[1].s());
            listed.push(k.clone());
            if SKIP.contains(&k.as_str()) || k.starts_with("tls-") {
                continue;
            }
            let before = c.cmd(&["CONFIG", "GET", &k]);
            let r = c.cmd(&["CONFIG", "SET", &k, &v]);
            assert_eq!(r.s(), "OK", "{}: CONFIG SET {k} {v:?}", s.bin());
            assert_eq!(
                c.cmd(&["CONFIG", "GET", &k]),
                before,
                "{}: {k} changed",
                s.bin()
            );
        }
        listed.sort();
        names.push(listed);
    }
    let extra: Vec<&String> = names[1].iter().filter(|n| !names[0].contains(n)).collect();
    assert!(
        extra.is_empty(),
        "CONFIG GET * lists what redis does not: {extra:?}"
    );
}

/// 'CONFIG REWRITE handles alias config properly': an old name and its new one are one
/// setting (CONFIG GET of either after a SET of the other), and REWRITE writes it once,
/// under the new name, so the file loads back to the value set, in either order.
#[test]
fn config_rewrite_of_old_names_like_redis() {
    const NAMES: &[&str] = &[
        "hash-max-listpack-entries",
        "hash-max-ziplist-entries",
        "zset-max-listpack-entries",
        "zset-max-ziplist-entries",
        "busy-reply-threshold",
        "lua-time-limit",
    ];
    let files = [
        "save \"\"\nhash-max-listpack-entries 20\nhash-max-ziplist-entries 21\nzset-max-ziplist-entries 5\n",
        "save \"\"\nhash-max-ziplist-entries 20\nhash-max-listpack-entries 21\nlua-time-limit 300\n",
    ];
    let mut diffs = Vec::new();
    for text in files {
        let mut seen = Vec::new();
        for l in both() {
            let dir = tempfile::tempdir().expect("tempdir");
            let conf = dir.path().join("node.conf");
            std::fs::write(&conf, text).expect("conf");
            let conf_arg = conf.display().to_string();
            let s = l
                .dir(dir.path())
                .verbatim()
                .args(&[
                    &conf_arg, "--port", "{port}", "--bind", "{ip}", "--dir", "{dir}",
                ])
                .start();
            let mut c = s.raw();
            let mut out = Vec::new();
            out.push(
                c.cmd(&["CONFIG", "SET", "hash-max-listpack-entries", "100"])
                    .s(),
            );
            out.push(c.cmd(&["CONFIG", "SET", "busy-reply-threshold", "77"]).s());
            for n in NAMES {
                out.push(c.cmd(&["CONFIG", "GET", n]).s());
            }
            out.push(c.cmd(&["CONFIG", "REWRITE"]).s());
            let written = std::fs::read_to_string(&conf).expect("read conf");
            out.extend(
                written
                    .lines()
                    .filter(|l| NAMES.iter().any(|n| l.starts_with(n)))
                    .map(str::to_string),
            );
            seen.push(out);
        }
        if seen[0] != seen[1] {
            diffs.push(format!(
                "{text:?}:\nredis   {:?}\ntessera {:?}",
                seen[0], seen[1]
            ));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// 'config during loading': while a replica loads its master's data, CONFIG SET of `dir`
/// and `appendonly` answers -LOADING (Redis 7.0's DENY_LOADING_CONFIG), other settings
/// change as usual.
#[test]
fn config_set_while_loading_like_redis() {
    let master = Launch::redis().args(&["--save", ""]).start();
    let mut m = master.raw();
    let fill = "for i = 1, 3000 do redis.call('set', 'key:' .. i, i) end";
    assert_eq!(m.cmd(&["EVAL", fill, "0"]).s(), "(nil)");
    let port = master.port.to_string();
    let mut seen = Vec::new();
    for l in both() {
        // 3000 keys at 5 ms each: 15 s of loading (cut short below), with clients served
        // every KB of it.
        let s = l
            .args(&[
                "--save",
                "",
                "--key-load-delay",
                "5000",
                "--loading-process-events-interval-bytes",
                "1024",
                "--enable-protected-configs",
                "yes",
            ])
            .start();
        let mut c = s.raw();
        let dir = c.cmd(&["CONFIG", "GET", "dir"]);
        let R::Arr(dir) = dir else {
            panic!("CONFIG GET dir: {dir:?}")
        };
        let dir = dir[1].s();
        assert_eq!(c.cmd(&["REPLICAOF", "127.0.0.1", &port]).s(), "OK");
        wait_until(
            "the replica loading",
            std::time::Duration::from_secs(30),
            || c.cmd(&["INFO", "persistence"]).s().contains("loading:1"),
        );
        let mut out = Vec::new();
        for args in [
            &["CONFIG", "SET", "loglevel", "debug"][..],
            &["CONFIG", "GET", "loglevel"][..],
            &["CONFIG", "SET", "dir", &dir][..],
            &["CONFIG", "SET", "appendonly", "yes"][..],
            &["CONFIG", "SET", "maxmemory", "1mb", "dir", &dir][..],
            &["CONFIG", "SET", "daemonize", "no", "dir", &dir][..],
            &["CONFIG", "SET", "nosuch", "1", "dir", &dir][..],
            &["CONFIG", "GET", "maxmemory"][..],
        ] {
            out.push(format!("{:?} -> {}", &args[..3], c.cmd(args).s()));
        }
        assert!(
            c.cmd(&["INFO", "persistence"]).s().contains("loading:1"),
            "{}: the load ended before the checks",
            s.bin()
        );
        assert_eq!(c.cmd(&["CONFIG", "SET", "key-load-delay", "0"]).s(), "OK");
        seen.push(out);
    }
    assert_eq!(seen[1], seen[0], "tessera (left), redis (right)");
}
