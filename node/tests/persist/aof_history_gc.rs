//! integration/aof-multi-part "AOF enable/disable auto gc" (issue 18): with
//! aof-disable-auto-gc yes the files a rewrite replaces stay on disk, listed in the manifest
//! as history (type h, newest first); turning it off removes them at once. Manifests and
//! files compared with redis-server's.

use std::time::Duration;

use tessera_testkit::*;

fn settle(s: &Server) {
    wait_until("no rewrite", Duration::from_secs(20), || {
        s.info("persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
            && s.info("persistence", "aof_rewrite_scheduled").as_deref() == Some("0")
    });
}

/// The manifest's text and the appendonlydir's file names (sorted).
fn state(s: &Server) -> (String, Vec<String>) {
    let dir = s.dir.join("appendonlydir");
    let m = std::fs::read_to_string(dir.join("appendonly.aof.manifest")).unwrap_or_default();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (m, names)
}

#[test]
fn history_kept_until_auto_gc_is_back_like_redis() {
    let mut seen = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let s = l.args(&["--save", "", "--appendonly", "yes"]).start();
        let mut c = s.resp();
        settle(&s);
        c.cmd(&["SET", "k", "v"]);
        c.cmd(&["CONFIG", "SET", "aof-disable-auto-gc", "yes"]);
        for _ in 0..2 {
            c.cmd(&["BGREWRITEAOF"]);
            settle(&s);
            c.cmd(&["INCR", "n"]);
        }
        let kept = state(&s);
        c.cmd(&["CONFIG", "SET", "aof-disable-auto-gc", "no"]);
        let mut after = state(&s);
        wait_until("history files removed", Duration::from_secs(5), || {
            after = state(&s);
            after.1.len() <= 3
        });
        seen.push((kept, after));
    }
    assert_eq!(seen[1], seen[0], "tessera (left) vs redis (right)");
    assert!(seen[0].0 .0.contains("type h"), "{:?}", seen[0]);
}
