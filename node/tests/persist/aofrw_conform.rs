//! BGREWRITEAOF and CONFIG SET appendonly as Redis 7.0 does them (issue 18, Redis's
//! unit/aofrw): a rewrite runs whatever appendonly says, waits for a running BGSAVE
//! (scheduled), is refused while one runs; turning the AOF on rewrites it, turning it off
//! stops a running rewrite. Replies, INFO fields and the appendonlydir's files are compared
//! with redis-server's.

use std::time::Duration;

use tessera_testkit::*;

fn both(args: &[&str]) -> [Server; 2] {
    [Launch::redis(), Launch::tessera()].map(|l| l.args(&["--save", ""]).args(args).start())
}

fn field(s: &Server, name: &str) -> String {
    s.info("persistence", name).unwrap_or_default()
}

/// Waits until no rewrite runs nor is scheduled, and no BGSAVE runs.
fn settle(s: &Server) {
    wait_until(
        &format!("{}: rewrite and save done", s.bin()),
        Duration::from_secs(30),
        || {
            field(s, "aof_rewrite_in_progress") == "0"
                && field(s, "aof_rewrite_scheduled") == "0"
                && field(s, "rdb_bgsave_in_progress") == "0"
        },
    );
}

/// The appendonlydir's file names (sorted) and its manifest's text.
fn aof_files(s: &Server) -> (Vec<String>, String) {
    let dir = s.dir.join("appendonlydir");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let manifest = std::fs::read_to_string(dir.join("appendonly.aof.manifest")).unwrap_or_default();
    (names, manifest)
}

/// Runs one command and records it with its reply.
fn step(out: &mut Vec<String>, c: &mut Conn, args: &[&str]) {
    out.push(format!("{args:?} -> {:?}", c.cmd(args)));
}

/// BGREWRITEAOF with appendonly no writes a base (and a manifest naming only it), then
/// CONFIG SET appendonly yes rewrites again and starts an incr file; appendonly no again.
#[test]
fn rewrite_with_aof_off_and_turning_it_on_like_redis() {
    let servers = both(&[]);
    let mut log: Vec<Vec<String>> = vec![Vec::new(), Vec::new()];
    for (s, out) in servers.iter().zip(log.iter_mut()) {
        let mut c = s.resp();
        step(out, &mut c, &["SET", "a", "1"]);
        step(out, &mut c, &["BGREWRITEAOF"]);
        settle(s);
        out.push(format!("after off rewrite: {:?}", aof_files(s)));
        step(out, &mut c, &["BGREWRITEAOF"]);
        settle(s);
        out.push(format!("after second off rewrite: {:?}", aof_files(s)));
        step(out, &mut c, &["CONFIG", "SET", "appendonly", "yes"]);
        out.push(format!("aof_enabled {}", field(s, "aof_enabled")));
        settle(s);
        step(out, &mut c, &["SET", "b", "2"]);
        out.push(format!("after turning on: {:?}", aof_files(s)));
        out.push(format!(
            "aof_last_bgrewrite_status {}",
            field(s, "aof_last_bgrewrite_status")
        ));
        step(out, &mut c, &["CONFIG", "SET", "appendonly", "no"]);
        out.push(format!("aof_enabled {}", field(s, "aof_enabled")));
        step(out, &mut c, &["SET", "c", "3"]);
        step(out, &mut c, &["BGREWRITEAOF"]);
        settle(s);
        out.push(format!("after off again: {:?}", aof_files(s)));
    }
    assert_eq!(log[1], log[0], "tessera (left) vs redis (right)");
}

/// A rewrite asked for while a BGSAVE runs is scheduled (INFO aof_rewrite_scheduled) and
/// starts when the save ends; while it runs, BGREWRITEAOF is refused and BGSAVE answers
/// as Redis 7.0 does with another child active; inside EXEC it is scheduled.
#[test]
fn rewrite_scheduling_and_refusals_like_redis() {
    let servers = both(&["--appendonly", "yes"]);
    let mut log: Vec<Vec<String>> = vec![Vec::new(), Vec::new()];
    for (s, out) in servers.iter().zip(log.iter_mut()) {
        settle(s);
        let mut c = s.resp();
        for i in 0..20 {
            c.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        // 0.1 s per key saved: each background job takes about 2 s.
        step(
            out,
            &mut c,
            &["CONFIG", "SET", "rdb-key-save-delay", "100000"],
        );
        step(out, &mut c, &["BGSAVE"]);
        step(out, &mut c, &["BGSAVE"]);
        step(out, &mut c, &["BGSAVE", "SCHEDULE"]);
        step(out, &mut c, &["BGREWRITEAOF"]);
        out.push(format!("scheduled {}", field(s, "aof_rewrite_scheduled")));
        wait_until("scheduled rewrite running", Duration::from_secs(30), || {
            field(s, "aof_rewrite_in_progress") == "1"
        });
        out.push(format!(
            "bgsave running {}",
            field(s, "rdb_bgsave_in_progress")
        ));
        step(out, &mut c, &["BGREWRITEAOF"]);
        step(out, &mut c, &["BGSAVE"]);
        step(out, &mut c, &["BGSAVE", "SCHEDULE"]);
        wait_until("rewrite done", Duration::from_secs(30), || {
            field(s, "aof_rewrite_in_progress") == "0"
        });
        step(out, &mut c, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        settle(s);
        step(out, &mut c, &["MULTI"]);
        step(out, &mut c, &["BGREWRITEAOF"]);
        step(out, &mut c, &["EXEC"]);
        settle(s);
        out.push(format!("status {}", field(s, "aof_last_bgrewrite_status")));
    }
    assert_eq!(log[1], log[0], "tessera (left) vs redis (right)");
}

/// CONFIG SET appendonly no stops a running rewrite at once and logs Redis's "Killing
/// running AOF rewrite child" line (unit/aofrw greps for it).
#[test]
fn turning_aof_off_stops_the_rewrite() {
    let s = Server::tessera(&["--save", "", "--appendonly", "yes"]);
    settle(&s);
    let mut c = s.resp();
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000000"]);
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        Reply::Simple("Background append only file rewriting started".into())
    );
    assert_eq!(field(&s, "aof_rewrite_in_progress"), "1");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "appendonly", "no"]),
        Reply::Simple("OK".into())
    );
    assert_eq!(field(&s, "aof_rewrite_in_progress"), "0");
    assert_eq!(field(&s, "aof_enabled"), "0");
    wait_until("the kill is logged", Duration::from_secs(5), || {
        s.log_tail(5).contains("Killing running AOF rewrite child")
    });
    c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
}
