//! unit/multi's "MULTI with BGREWRITEAOF" and "MULTI with config set appendonly" (issue 18):
//! inside MULTI/EXEC both schedule the rewrite (with Redis's log line for the second), the
//! cron then starts it in a child process, which INFO's total_forks counts; the rewrite's
//! child writes `temp-rewriteaof-bg-<pid>.aof`, and killing it fails the rewrite.
//! Compared with redis-server.

use std::time::Duration;

use tessera_testkit::*;

fn forks(s: &Server) -> u64 {
    s.info("stats", "total_forks")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn settle(s: &Server) {
    wait_until("the rewrite to end", Duration::from_secs(20), || {
        s.info("persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
            && s.info("persistence", "aof_rewrite_scheduled").as_deref() == Some("0")
    });
}

/// What EXEC answered, whether the rewrite forked, and the log line of the second case.
#[test]
fn rewrite_scheduled_in_exec_forks_like_redis() {
    let mut seen = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let s = l.args(&["--save", ""]).start();
        let mut c = s.resp();
        let before = forks(&s);
        c.cmd(&["MULTI"]);
        c.cmd(&["SET", "foo", "bar"]);
        c.cmd(&["BGREWRITEAOF"]);
        let exec1 = c.cmd(&["EXEC"]);
        wait_until("the first rewrite to fork", Duration::from_secs(10), || {
            forks(&s) > before
        });
        settle(&s);
        let mid = forks(&s);
        c.cmd(&["MULTI"]);
        c.cmd(&["SET", "foo", "bar"]);
        c.cmd(&["CONFIG", "SET", "appendonly", "yes"]);
        let exec2 = c.cmd(&["EXEC"]);
        wait_until(
            "the second rewrite to fork",
            Duration::from_secs(10),
            || forks(&s) > mid,
        );
        settle(&s);
        let log = std::fs::read_to_string(s.output_path()).unwrap_or_default();
        let line = log.contains(
            "AOF was enabled during a transaction. An AOF background was scheduled to start when possible.",
        );
        seen.push((exec1, exec2, forks(&s) - before, line));
    }
    assert_eq!(seen[1], seen[0], "tessera (left) vs redis (right)");
    assert!(seen[0].3);
}

/// The rewrite's child killed by SIGKILL: the rewrite fails (aof_last_bgrewrite_status err),
/// no temp file is left, and the next rewrite succeeds.
#[test]
fn killed_rewrite_child_fails_the_rewrite_like_redis() {
    let mut seen = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let s = l.args(&["--save", "", "--appendonly", "yes"]).start();
        let mut c = s.resp();
        for i in 0..10 {
            c.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000000"]);
        c.cmd(&["BGREWRITEAOF"]);
        let child = child_of(&s);
        process::signal(child, "KILL");
        wait_until("the rewrite to end", Duration::from_secs(10), || {
            s.info("persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
        });
        let status = s.info("persistence", "aof_last_bgrewrite_status");
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        c.cmd(&["BGREWRITEAOF"]);
        settle(&s);
        let after = s.info("persistence", "aof_last_bgrewrite_status");
        let temps = std::fs::read_dir(&s.dir)
            .into_iter()
            .chain(std::fs::read_dir(s.dir.join("appendonlydir")))
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("temp-"))
            .count();
        seen.push((status, after, temps));
    }
    assert_eq!(seen[1], seen[0], "tessera (left) vs redis (right)");
    assert_eq!(seen[0].0.as_deref(), Some("err"));
}

/// aof-multi-part "AOF will trigger limit when AOFRW fails many times": after three
/// rewrites failed in a row (their children killed) the automatic rewrite does not start
/// but logs that it triggered the limit.
#[test]
fn automatic_rewrite_backs_off_after_failures_like_redis() {
    let mut seen = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let s = l.args(&["--save", "", "--appendonly", "yes"]).start();
        let mut c = s.resp();
        settle(&s);
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000000"]);
        c.cmd(&["SET", "k", "v"]);
        for _ in 0..3 {
            c.cmd(&["BGREWRITEAOF"]);
            let child = child_of(&s);
            process::signal(child, "KILL");
            wait_until("the rewrite to fail", Duration::from_secs(10), || {
                s.info("persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
            });
        }
        c.cmd(&["CONFIG", "SET", "auto-aof-rewrite-percentage", "1"]);
        c.cmd(&["CONFIG", "SET", "auto-aof-rewrite-min-size", "1kb"]);
        c.cmd(&["SET", "x", &"x".repeat(1024)]);
        let mut limited = false;
        wait_until("the limit's log line", Duration::from_secs(5), || {
            let log = std::fs::read_to_string(s.output_path()).unwrap_or_default();
            limited = log.contains("repeatedly failed and triggered the limit");
            limited
        });
        let running = s.info("persistence", "aof_rewrite_in_progress");
        let failures = s.info("persistence", "aof_rewrites_consecutive_failures");
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        seen.push((limited, running, failures));
    }
    assert_eq!(seen[1], seen[0], "tessera (left) vs redis (right)");
}

/// The pid of `s`'s child, once there is one.
fn child_of(s: &Server) -> u32 {
    let mut child = 0u32;
    wait_until("a child", Duration::from_secs(5), || {
        child = process::children(s.pid()).first().copied().unwrap_or(0);
        child != 0
    });
    child
}

/// aof-multi-part "AOF will open a temporary INCR AOF ... when AOF is dynamically enabled":
/// the first rewrite after CONFIG SET appendonly yes killed, its temp incr file is removed
/// with Redis's log line, no manifest is written, and the rewrite is tried again.
#[test]
fn failed_first_rewrite_removes_temp_incr_like_redis() {
    let mut seen = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let s = l.args(&["--save", ""]).start();
        let mut c = s.resp();
        c.cmd(&["SET", "k", "v"]);
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000000"]);
        c.cmd(&["CONFIG", "SET", "appendonly", "yes"]);
        let first = child_of(&s);
        process::signal(first, "KILL");
        let mut logged = false;
        wait_until(
            "the temp incr file's removal",
            Duration::from_secs(5),
            || {
                let log = std::fs::read_to_string(s.output_path()).unwrap_or_default();
                logged = log.contains("Removing the temp incr aof file");
                logged
            },
        );
        let manifest = s.dir.join("appendonlydir/appendonly.aof.manifest").exists();
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        wait_until("the retried rewrite", Duration::from_secs(10), || {
            s.info("persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
                && s.dir.join("appendonlydir/appendonly.aof.manifest").exists()
        });
        seen.push((logged, manifest, c.cmd(&["GET", "k"])));
    }
    assert_eq!(seen[1], seen[0], "tessera (left) vs redis (right)");
}

/// A running rewrite keeps the rdb-key-save-delay it started with, as Redis's child keeps
/// its copy of the config: CONFIG SET rdb-key-save-delay 0 does not hurry it, so a kill
/// right after still fails it (aof-multi-part sets 0 and then kills the slow child).
#[test]
fn running_rewrite_keeps_its_key_save_delay_like_redis() {
    let mut seen = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let s = l.args(&["--save", "", "--appendonly", "yes"]).start();
        let mut c = s.resp();
        c.cmd(&["SET", "k", "v"]);
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000000"]);
        c.cmd(&["BGREWRITEAOF"]);
        let child = child_of(&s);
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        std::thread::sleep(Duration::from_millis(500));
        let running = s.info("persistence", "aof_rewrite_in_progress");
        process::signal(child, "KILL");
        settle(&s);
        let status = s.info("persistence", "aof_last_bgrewrite_status");
        seen.push((running, status));
    }
    assert_eq!(seen[1], seen[0], "tessera (left) vs redis (right)");
    assert_eq!(seen[0].0.as_deref(), Some("1"));
}
