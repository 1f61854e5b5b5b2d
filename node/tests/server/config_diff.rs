//! Configuration compatibility with redis-server 7.0, derived from the real program: the
//! names and defaults CONFIG GET * lists, what CONFIG SET accepts or refuses (reply text
//! and the value read back) for a spread of values per directive, the same values as
//! startup arguments, and Debian's stock /etc/redis/redis.conf as a config file.

use std::collections::BTreeMap;
use std::time::Duration;

use tessera_testkit::*;

/// Directives only tessera has (documented in the README).
const TESSERA_ONLY: &[&str] = &[
    "worker-threads",
    "busy-poll-usec",
    "prefetch-batch-max-size",
    "locale-collate",
];

/// Values that depend on the run, not on the server.
const PER_RUN: &[&str] = &["port", "dir", "pidfile", "logfile"];

/// Defaults tessera-node chooses differently, with its value (README "Where it differs").
const OUR_DEFAULTS: &[(&str, &str)] = &[("repl-diskless-sync-delay", "0")];

/// Not probed with CONFIG SET: they would move, lock out or stop the test's connection
/// (port, bind, dir, requirepass, maxclients, timeout, maxmemory-clients), start work in
/// the background (appendonly), or are TLS settings, which tessera refuses to take on
/// without TLS support (own test below).
const NOT_PROBED: &[&str] = &[
    "port",
    "bind",
    "dir",
    "requirepass",
    "maxclients",
    "timeout",
    "maxmemory-clients",
    "appendonly",
];

fn start(bin: &str) -> Server {
    Launch::new(bin)
        .args(&["--save", "", "--appendonly", "no"])
        .start()
}

fn all_config(c: &mut Raw) -> BTreeMap<String, String> {
    let R::Arr(items) = c.cmd(&["CONFIG", "GET", "*"]) else {
        panic!("CONFIG GET * did not answer an array");
    };
    items.chunks(2).map(|kv| (kv[0].s(), kv[1].s())).collect()
}

#[test]
fn config_get_all_matches_redis() {
    let redis = start(redis_bin());
    let tessera = start(tessera_bin());
    let want = all_config(&mut Raw::connect(redis.port));
    let got = all_config(&mut Raw::connect(tessera.port));
    let mut diffs = Vec::new();
    for (name, v) in &want {
        if PER_RUN.contains(&name.as_str()) {
            continue;
        }
        let v = OUR_DEFAULTS
            .iter()
            .find(|d| d.0 == name)
            .map_or(v.as_str(), |d| d.1);
        match got.get(name) {
            None => diffs.push(format!("{name}: missing (redis: {v:?})")),
            Some(g) if g != v => diffs.push(format!("{name}: {g:?}, redis {v:?}")),
            _ => {}
        }
    }
    for name in got.keys() {
        if !want.contains_key(name) && !TESSERA_ONLY.contains(&name.as_str()) {
            diffs.push(format!("{name}: tessera only"));
        }
    }
    assert!(
        diffs.is_empty(),
        "CONFIG GET * differs:\n{}",
        diffs.join("\n")
    );
}

/// One-word values tried on every directive: booleans, integers at the edges of i32/i64,
/// memory units, percentages, words, the empty string.
const PROBES: &[&str] = &[
    "yes",
    "no",
    "0",
    "1",
    "-1",
    "7",
    "100",
    "0777",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "9223372036854775807",
    "9223372036854775808",
    "1k",
    "1kb",
    "10mb",
    "1gb",
    "5%",
    "1.5",
    "abc",
    "",
];

/// Multi-word or special values for the directives that take them.
const SPECIAL_PROBES: &[(&str, &str)] = &[
    ("save", "100 10"),
    ("save", "100 10 50"),
    ("save", "100 10 60 1000"),
    ("save", "a b"),
    ("save", ""),
    ("client-output-buffer-limit", "normal 0 0 0"),
    ("client-output-buffer-limit", "pubsub 1mb 512kb 10"),
    ("client-output-buffer-limit", "replica 1gb 1 1"),
    ("client-output-buffer-limit", "nosuch 1 1 1"),
    ("client-output-buffer-limit", "normal 1 1"),
    ("client-output-buffer-limit", "normal x 1 1"),
    ("oom-score-adj-values", "0 200 800"),
    ("oom-score-adj-values", "10 20 30"),
    ("oom-score-adj-values", "1 2"),
    ("oom-score-adj-values", "-2001 0 0"),
    ("oom-score-adj-values", "a b c"),
    ("oom-score-adj-values", "900 200 800"),
    ("latency-tracking-info-percentiles", "50 99 99.9"),
    ("latency-tracking-info-percentiles", "10.5 20"),
    ("latency-tracking-info-percentiles", "101"),
    ("latency-tracking-info-percentiles", "-1"),
    ("latency-tracking-info-percentiles", "x"),
    ("latency-tracking-info-percentiles", ""),
    ("notify-keyspace-events", "KEA"),
    ("notify-keyspace-events", "Ex"),
    ("notify-keyspace-events", "Kz"),
    ("notify-keyspace-events", "q"),
    ("shutdown-on-sigterm", "save now"),
    ("shutdown-on-sigterm", "nosave force"),
    ("shutdown-on-sigterm", "save nosave"),
    ("shutdown-on-sigterm", "default now"),
    ("shutdown-on-sigint", "force"),
    ("shutdown-on-sigint", "bogus"),
    ("maxmemory-policy", "ALLKEYS-LRU"),
    ("loglevel", "WARNING"),
    ("proc-title-template", "{title} {port}"),
    ("proc-title-template", "{nosuch}"),
    ("proc-title-template", "no title"),
    ("dbfilename", "a/b.rdb"),
    ("dbfilename", "x.rdb"),
    ("cluster-announce-hostname", "bad host!"),
    ("cluster-announce-hostname", "node-1.example"),
];

/// CONFIG SET `name value` then CONFIG GET `name`, as one transcript line.
fn probe(c: &mut Raw, name: &str, value: &str) -> String {
    let set = c.cmd(&["CONFIG", "SET", name, value]).s();
    let get = match c.cmd(&["CONFIG", "GET", name]) {
        R::Arr(kv) if kv.len() == 2 => kv[1].s(),
        other => format!("{other:?}"),
    };
    format!("{name} {value:?}: {set} -> {get:?}")
}

/// Every directive redis lists, with every probe, then put back to its default; the
/// transcripts of the two servers must be equal line for line.
#[test]
fn config_set_probes_match_redis() {
    let redis = start(redis_bin());
    let tessera = start(tessera_bin());
    let mut r = Raw::connect(redis.port);
    let mut t = Raw::connect(tessera.port);
    let defaults = all_config(&mut r);
    // Our documented different defaults (OUR_DEFAULTS, checked on their own) start from
    // redis's value here, so the probes compare the parsing and not the default.
    for (name, _) in OUR_DEFAULTS {
        let set = t.cmd(&["CONFIG", "SET", name, &defaults[*name]]).s();
        assert_eq!(set, "OK", "{name}");
    }
    let mut diffs = Vec::new();
    let mut count = 0;
    let mut run = |name: &str, value: &str, diffs: &mut Vec<String>| {
        let want = probe(&mut r, name, value);
        let got = probe(&mut t, name, value);
        count += 1;
        if want != got {
            diffs.push(format!("redis:   {want}\ntessera: {got}"));
        }
    };
    for (name, default) in &defaults {
        if NOT_PROBED.contains(&name.as_str()) || name.starts_with("tls-") {
            continue;
        }
        for v in PROBES {
            run(name, v, &mut diffs);
        }
        run(name, default, &mut diffs);
    }
    for (name, v) in SPECIAL_PROBES {
        run(name, v, &mut diffs);
        run(name, &defaults[*name], &mut diffs);
    }
    assert!(
        diffs.is_empty(),
        "{} of {count} CONFIG SET probes differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// How a server started with `args` ends within a few seconds: "serving" or the reason
/// line of its fatal config error (the line after the offending directive).
fn startup(bin: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    match start_in(bin, None, args, dir.path()) {
        Ok(_) => "serving".into(),
        Err(reason) => reason,
    }
}

/// Starts `bin [conf] --port P --bind 127.0.0.1 --save "" args` in `dir` (its working
/// directory): the running server, or the reason its config was refused.
fn start_in(
    bin: &str,
    conf: Option<&std::path::Path>,
    args: &[&str],
    dir: &std::path::Path,
) -> Result<Server, String> {
    let conf = conf.map(|f| f.display().to_string());
    let exit = match Launch::new(bin)
        .verbatim()
        .dir(dir)
        .cwd()
        .ready_within(Duration::from_secs(30))
        .args(conf.as_slice())
        .args(&["--port", "{port}", "--bind", "{ip}", "--save", ""])
        .args(args)
        .start_or_exit()
    {
        Ok(srv) => return Ok(srv),
        Err(exit) => exit,
    };
    assert!(
        exit.status.is_some(),
        "{bin} {args:?} neither served nor stopped:\n{}",
        exit.output
    );
    let text = exit.output;
    // Both print ">>> 'line'" and then the reason.
    let mut lines = text.lines().skip_while(|l| !l.starts_with(">>> "));
    let _ = lines.next();
    Err(lines
        .next()
        .map_or_else(|| text.trim().to_string(), |l| l.trim().to_string()))
}

/// A sample of the probes as startup arguments: the same values start or stop both
/// servers, with the same reason.
#[test]
fn startup_arguments_match_redis() {
    let cases: &[&[&str]] = &[
        &["--hz", "abc"],
        &["--hz", "0"],
        &["--maxmemory", "10%"],
        &["--maxmemory-clients", "10%"],
        &["--maxmemory-clients", "200%"],
        &["--maxclients", "0"],
        &["--databases", "0"],
        &["--appendfsync", "sometimes"],
        &["--latency-tracking-info-percentiles", "50", "101"],
        &["--oom-score-adj-values", "0", "200"],
        &["--shutdown-on-sigterm", "nosave", "save"],
        &["--repl-diskless-sync-max-replicas", "3"],
        &["--slave-read-only", "maybe"],
        &["--unixsocketperm", "999"],
        &["--unixsocketperm", "700"],
        &["--syslog-facility", "local9"],
        &["--sanitize-dump-payload", "clients"],
        &["--propagation-error-behavior", "panic"],
        &["--nosuch-directive", "1"],
        &["--activedefrag", "yes"],
        &["--enable-debug-command", "sometimes"],
        &["--enable-protected-configs", "local"],
        &["--proc-title-template", "{nosuch}"],
        &["--hz", "100000"],
        &["--tls-port", "0"],
    ];
    let mut diffs = Vec::new();
    for args in cases {
        let want = startup(redis_bin(), args);
        let got = startup(tessera_bin(), args);
        if want != got {
            diffs.push(format!("{args:?}\n  redis:   {want}\n  tessera: {got}"));
        }
    }
    assert!(diffs.is_empty(), "startup differs:\n{}", diffs.join("\n"));
}

/// Redis 7.0's multi-argument directives given their words as one argument
/// (`--replicaof "host port"`, `--save "900 1"`) split it, as on two words.
#[test]
fn multi_word_single_arguments_split_like_redis() {
    let cases: &[(&str, &str)] = &[
        ("replicaof", "127.0.0.1 1"),
        ("save", "900 1 300 10"),
        ("oom-score-adj-values", "0 200 800"),
        ("client-output-buffer-limit", "pubsub 1mb 2mb 60"),
        ("latency-tracking-info-percentiles", "50 99"),
        ("shutdown-on-sigterm", "nosave now"),
    ];
    let mut diffs = Vec::new();
    for (name, value) in cases {
        let flag = format!("--{name}");
        let got = [redis_bin(), tessera_bin()].map(|bin| {
            let dir = tempfile::tempdir().expect("tempdir");
            match start_in(bin, None, &[&flag, value], dir.path()) {
                Ok(srv) => format!("{:?}", srv.resp().cmd(&["CONFIG", "GET", name])),
                Err(reason) => format!("refused: {reason}"),
            }
        });
        if got[0] != got[1] {
            diffs.push(format!(
                "{flag} {value:?}\n  redis:   {}\n  tessera: {}",
                got[0], got[1]
            ));
        }
    }
    assert!(diffs.is_empty(), "differs:\n{}", diffs.join("\n"));
}

/// Debian's stock redis.conf (shipped with redis-server 7.0) starts tessera, which then
/// reports the same configuration as redis-server started from the same file.
#[test]
fn debian_stock_redis_conf() {
    let stock = std::path::Path::new("/etc/redis/redis.conf");
    assert!(stock.exists(), "redis-server's package installs {stock:?}");
    let mut values = Vec::new();
    for bin in [redis_bin(), tessera_bin()] {
        let stock = stock.display().to_string();
        let srv = Launch::new(bin)
            .verbatim()
            .ready_within(Duration::from_secs(30))
            .args(&[stock.as_str(), "--port", "{port}", "--daemonize", "no"])
            .args(&["--logfile", "", "--dir", "{dir}", "--supervised", "no"])
            .args(&["--pidfile", "{dir}/pid", "--unixsocket", ""])
            .start_or_exit()
            .unwrap_or_else(|e| {
                panic!(
                    "{bin} stopped ({:?}) with the stock redis.conf:\n{}",
                    e.status, e.output
                )
            });
        let mut c = Raw::connect(srv.port);
        values.push(all_config(&mut c));
        drop(srv);
    }
    let (want, got) = (&values[0], &values[1]);
    let diffs: Vec<String> = want
        .iter()
        .filter(|(n, _)| !PER_RUN.contains(&n.as_str()))
        .filter(|(n, v)| got.get(*n) != Some(v))
        .map(|(n, v)| format!("{n}: {:?}, redis {v:?}", got.get(n)))
        .collect();
    assert!(diffs.is_empty(), "differs:\n{}", diffs.join("\n"));
}

/// DEBUG and the protected configs (dir, dbfilename) are refused by default and allowed
/// by enable-debug-command / enable-protected-configs, as in redis 7.0.
#[test]
fn protected_actions_match_redis() {
    let probes: &[&[&str]] = &[
        &["DEBUG", "SLEEP", "0"],
        &["CONFIG", "SET", "dbfilename", "other.rdb"],
        &["CONFIG", "GET", "dbfilename"],
        &["CONFIG", "SET", "dir", "."],
    ];
    for extra in [
        &[][..],
        &[
            "--enable-debug-command",
            "yes",
            "--enable-protected-configs",
            "yes",
        ],
        &[
            "--enable-debug-command",
            "local",
            "--enable-protected-configs",
            "local",
        ],
    ] {
        let mut logs = Vec::new();
        for bin in [redis_bin(), tessera_bin()] {
            let srv = Launch::new(bin).args(&["--save", ""]).args(extra).start();
            let mut c = Raw::connect(srv.port);
            let log: Vec<String> = probes.iter().map(|p| c.cmd(p).s()).collect();
            logs.push(log);
        }
        assert_eq!(logs[1], logs[0], "started with {extra:?}");
    }
}

/// tls-cluster without certificates stops the node as it stops redis-server (it needs the
/// TLS settings, tests/cluster/cluster_tls.rs runs a cluster with them); settings naming
/// certificates load without a TLS port.
#[test]
fn tls_cluster_without_certificates_is_refused_like_redis() {
    for bin in [redis_bin(), tessera_bin()] {
        let reason = startup(bin, &["--tls-cluster", "yes"]);
        assert!(
            reason.contains("No tls-cert-file configured!"),
            "{bin}: {reason}"
        );
    }
    let ok = startup(
        tessera_bin(),
        &[
            "--tls-cert-file",
            "/nonexistent.crt",
            "--tls-auth-clients",
            "optional",
        ],
    );
    assert_eq!(ok, "serving");
}

/// rename-command (a long secret name, removal with "", a plain rename) and include, from a
/// config file: the same transcript as redis, scripts included; and the same refusals.
#[test]
fn rename_command_and_include_match_redis() {
    let secret = "b840fc02d524045429941cc15f59e41cb7be6c52";
    let probes: Vec<Vec<String>> = [
        vec!["CONFIG", "GET", "maxmemory"],
        vec![secret, "GET", "maxmemory"],
        vec![secret, "GET", "hz"],
        vec!["SET", "k", "v"],
        vec!["FLUSHALL"],
        vec!["FETCH", "k"],
        vec!["GET", "k"],
        vec!["EVAL", "return redis.call('fetch', KEYS[1])", "1", "k"],
        vec!["EVAL", "return redis.pcall('get', KEYS[1])", "1", "k"],
        vec!["COMMAND", "INFO", "fetch"],
    ]
    .iter()
    .map(|p| p.iter().map(|s| s.to_string()).collect())
    .collect();
    let mut logs = Vec::new();
    for bin in [redis_bin(), tessera_bin()] {
        let dir = tempfile::tempdir().expect("tempdir");
        let inc = dir.path().join("included.conf");
        std::fs::write(&inc, "maxmemory 2mb\nhz 20\n").expect("write");
        let conf = dir.path().join("main.conf");
        std::fs::write(
            &conf,
            format!(
                "rename-command CONFIG {secret}\nrename-command FLUSHALL \"\"\n\
                 rename-command GET fetch\ninclude {}\nhz 30\n",
                inc.display()
            ),
        )
        .expect("write");
        let srv = start_in(bin, Some(&conf), &[], dir.path())
            .unwrap_or_else(|e| panic!("{bin} refused the config: {e}"));
        let mut c = Raw::connect(srv.port);
        let log: Vec<String> = probes
            .iter()
            .map(|p| {
                let a: Vec<&str> = p.iter().map(|s| s.as_str()).collect();
                c.cmd(&a).s()
            })
            .collect();
        drop(srv);
        logs.push(log);
    }
    assert_eq!(logs[1], logs[0]);
    for args in [
        &["--rename-command", "nosuch", "x"][..],
        &["--rename-command", "get", "set"],
        &["--rename-command", "get"],
        &[
            "--rename-command",
            "get",
            "fetch",
            "--rename-command",
            "get",
            "x",
        ],
    ] {
        let want = startup(redis_bin(), args);
        let got = startup(tessera_bin(), args);
        assert_eq!(got, want, "{args:?}");
    }
}

/// What tessera does not do is refused at startup with a reason, not ignored.
#[test]
fn unsupported_directives_are_refused_clearly() {
    for (args, want) in [
        (&["--loadmodule", "/x.so"][..], "modules are not supported"),
        (
            &["--include", "/nonexistent/redis.conf"],
            "/nonexistent/redis.conf",
        ),
    ] {
        let got = startup(tessera_bin(), args);
        assert!(got.contains(want), "{args:?}: {got}");
    }
}

/// shutdown-on-sigterm / shutdown-on-sigint decide whether a signal's shutdown saves, as in
/// redis: `save` without save points, `nosave` with them, `default` as configured.
#[test]
fn signal_shutdown_settings_match_redis() {
    let cases: &[(&str, &str, i32)] = &[
        ("", "default", libc::SIGTERM),
        ("", "save", libc::SIGTERM),
        ("3600 1", "nosave", libc::SIGTERM),
        ("3600 1", "default", libc::SIGTERM),
        ("", "save now", libc::SIGINT),
        ("3600 1", "nosave", libc::SIGINT),
    ];
    let mut seen = Vec::new();
    for &(save, flags, sig) in cases {
        let mut saved = Vec::new();
        for bin in [redis_bin(), tessera_bin()] {
            let dir = tempfile::tempdir().expect("tempdir");
            let setting = if sig == libc::SIGTERM {
                "--shutdown-on-sigterm"
            } else {
                "--shutdown-on-sigint"
            };
            let mut srv = start_in(bin, None, &["--save", save, setting, flags], dir.path())
                .unwrap_or_else(|e| panic!("{bin}: {e}"));
            let mut c = Raw::connect(srv.port);
            assert_eq!(c.cmd(&["SET", "k", "v"]), R::Simple("OK".into()));
            srv.signal(if sig == libc::SIGTERM { "TERM" } else { "INT" });
            assert!(
                srv.wait_exit(Duration::from_secs(30)).is_some(),
                "{bin} did not exit"
            );
            saved.push(dir.path().join("dump.rdb").exists());
        }
        assert_eq!(
            saved[1], saved[0],
            "save {save:?}, {flags:?} on signal {sig}: tessera saved {}, redis {}",
            saved[1], saved[0]
        );
        seen.push(saved[0]);
    }
    assert!(seen.contains(&true) && seen.contains(&false), "{seen:?}");
}
