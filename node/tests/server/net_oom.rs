//! oom-score-adj applied to the process, against redis-server 7.0 (issue 18,
//! unit/oom-score-adj): /proc/<pid>/oom_score_adj follows the mode (relative / absolute /
//! no restores the score from before), the values and the role (master, replica).

use tessera_testkit::*;

fn read_score(pid: u32) -> i64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
        .unwrap_or_else(|e| panic!("read oom_score_adj of {pid}: {e}"));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("oom_score_adj {text:?}: {e}"))
}

fn write_score(pid: u32, v: i64) {
    std::fs::write(format!("/proc/{pid}/oom_score_adj"), format!("{v}\n"))
        .unwrap_or_else(|e| panic!("write oom_score_adj of {pid}: {e}"));
}

/// The scores (relative to the one the process started with) through unit/oom-score-adj's
/// steps.
fn oom_story(s: &Server) -> Vec<String> {
    let pid = s.pid();
    let mut c = s.resp();
    let mut out = Vec::new();
    let base = read_score(pid);
    let step = |c: &mut Conn, args: &[&str], out: &mut Vec<String>| {
        let reply = c.cmd(args);
        out.push(format!(
            "{args:?} -> {reply:?}, score {}",
            read_score(pid) - base
        ));
    };
    step(
        &mut c,
        &["CONFIG", "SET", "oom-score-adj-values", "10 20 30"],
        &mut out,
    );
    step(&mut c, &["CONFIG", "SET", "oom-score-adj", "yes"], &mut out);
    step(
        &mut c,
        &["CONFIG", "SET", "oom-score-adj-values", "15 20 30"],
        &mut out,
    );
    step(&mut c, &["REPLICAOF", "localhost", "1"], &mut out);
    step(&mut c, &["REPLICAOF", "NO", "ONE"], &mut out);
    step(&mut c, &["CONFIG", "SET", "oom-score-adj", "no"], &mut out);
    // Disabled: a new set of values leaves the process alone.
    write_score(pid, base + 2);
    step(
        &mut c,
        &["CONFIG", "SET", "oom-score-adj-values", "1 1 1"],
        &mut out,
    );
    // Restored on disable: the score from before the node changed it.
    write_score(pid, 22);
    let mut c2 = s.resp();
    let r = c2.cmd(&[
        "CONFIG",
        "SET",
        "oom-score-adj-values",
        "9 9 9",
        "oom-score-adj",
        "yes",
    ]);
    out.push(format!("multi set -> {r:?}, score {}", read_score(pid)));
    let r = c2.cmd(&["CONFIG", "SET", "oom-score-adj", "no"]);
    out.push(format!("off -> {r:?}, score {}", read_score(pid)));
    let r = c2.cmd(&["CONFIG", "SET", "oom-score-adj", "relative"]);
    out.push(format!("relative -> {r:?}, score {}", read_score(pid)));
    let r = c2.cmd(&["CONFIG", "SET", "oom-score-adj", "absolute"]);
    out.push(format!("absolute -> {r:?}, score {}", read_score(pid)));
    let r = c2.cmd(&["CONFIG", "SET", "oom-score-adj", "no"]);
    out.push(format!("off again -> {r:?}, score {}", read_score(pid)));
    out
}

#[test]
fn oom_score_adj_applies_to_the_process_like_redis() {
    let [r, t] = [Launch::redis(), Launch::tessera()].map(|l| l.args(&["--save", ""]).start());
    let (want, got) = (oom_story(&r), oom_story(&t));
    assert_eq!(got, want, "tessera (left) vs redis-server (right)");
}

/// The save child gets the third value of oom-score-adj-values (relative to the server's
/// starting score), as Redis's child sets its own: unit/oom-score-adj's "Check child
/// process" step.
#[test]
fn save_child_gets_its_class_score_like_redis() {
    let got = [Launch::redis(), Launch::tessera()].map(|l| {
        let s = l.args(&["--save", ""]).start();
        let mut c = s.resp();
        let base = read_score(s.pid());
        c.cmd(&["CONFIG", "SET", "oom-score-adj-values", "10 20 30"]);
        c.cmd(&["CONFIG", "SET", "oom-score-adj", "yes"]);
        c.cmd(&["SET", "key-a", "value-a"]);
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]);
        c.cmd(&["BGSAVE"]);
        let mut child = 0u32;
        wait_until("the save child", std::time::Duration::from_secs(5), || {
            child = process::children(s.pid()).first().copied().unwrap_or(0);
            child != 0
        });
        // Up to 2 s for the score to be set (Redis's child sets it itself, a moment later).
        let mut score = read_score(child) - base;
        for _ in 0..200 {
            if score == 30 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            score = read_score(child) - base;
        }
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        score
    });
    assert_eq!(got[1], got[0], "tessera (left) vs redis (right)");
}
