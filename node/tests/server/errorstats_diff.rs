//! INFO errorstats, `total_error_replies` and commandstats' `rejected_calls` /
//! `failed_calls` against redis-server 7.0 (issue 18, Redis's unit/info): which errors are
//! refusals before the command runs and which are the command's own failures, inside
//! MULTI/EXEC, inside scripts and for blocked clients, and CONFIG RESETSTAT clearing them.

use std::time::Duration;

use tessera_testkit::*;

fn both() -> [Launch; 2] {
    [Launch::redis(), Launch::tessera()]
}

fn text(r: Reply) -> String {
    match r {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO answered {other:?}"),
    }
}

/// The error counters as comparable text: every errorstat line, the total, and each
/// command's calls / rejected_calls / failed_calls (its timings left out).
fn counters(c: &mut Conn) -> String {
    let mut out = Vec::new();
    let errs = text(c.cmd(&["INFO", "errorstats"]));
    out.extend(
        errs.lines()
            .filter(|l| l.starts_with("errorstat_"))
            .map(str::to_string),
    );
    let stats = text(c.cmd(&["INFO", "stats"]));
    out.push(format!(
        "total_error_replies:{}",
        info_field(&stats, "total_error_replies").unwrap_or_default()
    ));
    let cmds = text(c.cmd(&["INFO", "commandstats"]));
    // Redis lists them in its dict's order: compare them sorted.
    let mut lines: Vec<&str> = cmds.lines().filter(|l| l.starts_with("cmdstat_")).collect();
    lines.sort_unstable();
    for l in lines {
        // INFO itself is counted while it runs: leave it out.
        if l.starts_with("cmdstat_info:") || l.starts_with("cmdstat_config|resetstat:") {
            continue;
        }
        let (name, fields) = l.split_once(':').unwrap_or((l, ""));
        let kept: Vec<&str> = fields
            .split(',')
            .filter(|f| {
                f.starts_with("calls=")
                    || f.starts_with("rejected_calls=")
                    || f.starts_with("failed_calls=")
            })
            .collect();
        out.push(format!("{name}:{}", kept.join(",")));
    }
    out.join("\n")
}

/// Renders a reply without the parts that differ by nature (none here but error texts'
/// argument echoes are kept: they are the same on both).
fn shown(r: &Reply) -> String {
    format!("{r:?}")
}

/// Runs `steps` on a fresh pair of servers after CONFIG RESETSTAT; compares every reply and
/// then the counters.
fn same_counters(what: &str, setup: &[&[&str]], steps: &[&[&str]]) -> Vec<String> {
    let [r, t] = both().map(|l| l.args(&["--save", ""]).start());
    let (mut rc, mut tc) = (r.resp(), t.resp());
    let mut diffs = Vec::new();
    for s in setup {
        rc.cmd(s);
        tc.cmd(s);
    }
    rc.cmd(&["CONFIG", "RESETSTAT"]);
    tc.cmd(&["CONFIG", "RESETSTAT"]);
    for s in steps {
        let (want, got) = (rc.cmd(s), tc.cmd(s));
        if shown(&want) != shown(&got) {
            diffs.push(format!("{what}: {s:?}: redis {want:?}, tessera {got:?}"));
        }
    }
    let (want, got) = (counters(&mut rc), counters(&mut tc));
    if want != got {
        diffs.push(format!(
            "{what}: counters differ\n--- redis\n{want}\n--- tessera\n{got}"
        ));
    }
    // CONFIG RESETSTAT clears them all.
    rc.cmd(&["CONFIG", "RESETSTAT"]);
    tc.cmd(&["CONFIG", "RESETSTAT"]);
    let (want, got) = (counters(&mut rc), counters(&mut tc));
    if want != got {
        diffs.push(format!(
            "{what}: after RESETSTAT\n--- redis\n{want}\n--- tessera\n{got}"
        ));
    }
    diffs
}

/// A scenario: its name, its setup (before CONFIG RESETSTAT), its steps.
type Case<'a> = (&'a str, &'a [&'a [&'a str]], &'a [&'a [&'a str]]);

/// Failed calls (the command's own error) and refusals (unknown command, arity, OOM,
/// MULTI queueing errors, EXECABORT, the pub/sub context), as unit/info checks them.
#[test]
fn errorstats_and_command_failures_match_redis() {
    let mut diffs = Vec::new();
    let cases: &[Case] = &[
        ("auth failure", &[], &[&["AUTH", "k"]]),
        (
            "failure inside MULTI/EXEC",
            &[],
            &[
                &["MULTI"],
                &["SET", "a", "b"],
                &["AUTH", "a"],
                &["EXEC"],
                &["EXEC"],
            ],
        ),
        (
            "failure inside a script",
            &[],
            &[
                &[
                    "EVAL",
                    "redis.pcall('XGROUP', 'CREATECONSUMER', 's1', 'mygroup', 'consumer') return",
                    "0",
                ],
                &["EVAL", "a"],
            ],
        ),
        ("NOSCRIPT", &[], &[&["EVALSHA", "NotValidShaSUM", "0"]]),
        (
            "NOGROUP",
            &[&["XADD", "mystream", "*", "f", "v"]],
            &[&[
                "XGROUP",
                "CREATECONSUMER",
                "mystream",
                "mygroup",
                "consumer",
            ]],
        ),
        (
            "unknown command and subcommand",
            &[],
            &[&["asdf"], &["CONFIG", "NOSUCH"]],
        ),
        (
            "refusal inside MULTI",
            &[],
            &[&["MULTI"], &["SET"], &["SAVE"], &["EXEC"]],
        ),
        (
            "wrong arity",
            &[],
            &[&["SET", "k"], &["SET", "k1", "v1"], &["SET", "k2", "v2"]],
        ),
        (
            "OOM",
            &[],
            &[
                &["CONFIG", "SET", "maxmemory", "1"],
                &["SET", "a", "b"],
                &["MULTI"],
                &["SET", "a", "b"],
                &["GET", "a"],
                &["EXEC"],
                &["CONFIG", "SET", "maxmemory", "0"],
            ],
        ),
        (
            "WRONGTYPE and other failures",
            &[&["SET", "foo", "1"]],
            &[
                &["LPUSH", "foo", "x"],
                &["INCR", "nosuchnumber", "x"],
                &["SET", "foo", "x", "EX", "-1"],
                &["MULTI"],
                &["WATCH", "x"],
                &["LPUSH", "foo", "y"],
                &["EXEC"],
                &["DISCARD"],
                &["GEOADD", "foo", "0", "0", "bar"],
            ],
        ),
        (
            "bad CONFIG SET (latencystats percentiles)",
            &[],
            &[
                &[
                    "CONFIG",
                    "SET",
                    "latency-tracking-info-percentiles",
                    "10.0 50.0 a",
                ],
                &[
                    "CONFIG",
                    "SET",
                    "latency-tracking-info-percentiles",
                    "10.0 50.0 101.0",
                ],
            ],
        ),
    ];
    for (what, setup, steps) in cases {
        diffs.extend(same_counters(what, setup, steps));
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n\n"));
}

/// The refusal in the pub/sub context counts as the command's rejected call.
#[test]
fn pubsub_context_refusal_counts_like_redis() {
    let [r, t] = both().map(|l| l.args(&["--save", ""]).start());
    let mut got = Vec::new();
    for s in [&r, &t] {
        let mut c = s.resp();
        c.cmd(&["CONFIG", "RESETSTAT"]);
        let mut sub = s.resp();
        sub.cmd(&["SUBSCRIBE", "ch"]);
        let refused = sub.cmd(&["GET", "x"]);
        got.push((format!("{refused:?}"), counters(&mut c)));
    }
    assert_eq!(got[0], got[1], "redis first, tessera second");
}

fn blocked_clients(c: &mut Conn) -> String {
    info_field(&text(c.cmd(&["INFO", "clients"])), "blocked_clients").unwrap_or_default()
}

/// Errors a blocked client gets: CLIENT UNBLOCK ... ERROR, a group destroyed under
/// XREADGROUP. The call was counted when it blocked; the failure when it ended.
#[test]
fn blocked_client_errors_count_like_redis() {
    let [r, t] = both().map(|l| l.args(&["--save", ""]).start());
    let mut got = Vec::new();
    for s in [&r, &t] {
        let mut c = s.resp();
        c.cmd(&["XGROUP", "CREATE", "mystream", "mygroup", "$", "MKSTREAM"]);
        c.cmd(&["CONFIG", "RESETSTAT"]);
        let mut rd = s.resp();
        let id = match rd.cmd(&["CLIENT", "ID"]) {
            Reply::Int(i) => i.to_string(),
            other => panic!("CLIENT ID answered {other:?}"),
        };
        rd.send(&["BLPOP", "list1{t}", "0"]);
        wait_until("BLPOP blocked", Duration::from_secs(10), || {
            blocked_clients(&mut c) == "1"
        });
        let unblocked = c.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]);
        let answer = rd.read();
        rd.send(&[
            "XREADGROUP",
            "GROUP",
            "mygroup",
            "Alice",
            "BLOCK",
            "0",
            "STREAMS",
            "mystream",
            ">",
        ]);
        wait_until("XREADGROUP blocked", Duration::from_secs(10), || {
            blocked_clients(&mut c) == "1"
        });
        let destroyed = c.cmd(&["XGROUP", "DESTROY", "mystream", "mygroup"]);
        let answer2 = rd.read();
        got.push(format!(
            "{unblocked:?} {answer:?} {destroyed:?} {answer2:?}\n{}",
            counters(&mut c)
        ));
    }
    assert_eq!(got[0], got[1], "redis first, tessera second");
}

/// EXEC is refused as the commands it queued would be when the replication state changed
/// since (min-replicas-to-write, a stale replica): EXECABORT with the reason, nothing run,
/// counted as EXEC's rejected call (unit/multi).
#[test]
fn exec_refused_by_replication_state_like_redis() {
    let [r, t] = both().map(|l| l.args(&["--save", ""]).start());
    let mut got = Vec::new();
    for s in [&r, &t] {
        let (mut c, mut admin) = (s.resp(), s.resp());
        let mut seen = Vec::new();
        c.cmd(&["SET", "xx", "1"]);
        c.cmd(&["CONFIG", "RESETSTAT"]);
        c.cmd(&["MULTI"]);
        c.cmd(&["INCR", "xx"]);
        admin.cmd(&["CONFIG", "SET", "min-replicas-to-write", "2"]);
        seen.push(format!("{:?}", c.cmd(&["EXEC"])));
        admin.cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"]);
        seen.push(format!("{:?}", c.cmd(&["GET", "xx"])));
        // Reads are not refused by min-replicas-to-write.
        c.cmd(&["MULTI"]);
        c.cmd(&["GET", "xx"]);
        admin.cmd(&["CONFIG", "SET", "min-replicas-to-write", "2"]);
        seen.push(format!("{:?}", c.cmd(&["EXEC"])));
        admin.cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"]);
        seen.push(counters(&mut c));
        got.push(seen.join("\n"));
    }
    assert_eq!(got[0], got[1], "redis first, tessera second");
}
