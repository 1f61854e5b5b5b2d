//! integration/aof-multi-part "AOF rewrite doesn't open new aof when AOF turn off" (issue
//! 18): with the AOF off, a rewrite writes a manifest naming only the new base; DEBUG
//! LOADAOF then reloads that manifest from disk as Redis's loadAppendOnlyFiles does, so the
//! incr file opened when the AOF is turned on again is numbered from it (seq 1). The
//! manifests are compared with redis-server's.

use std::time::Duration;

use tessera_testkit::*;

fn settle(s: &Server) {
    wait_until("no rewrite", Duration::from_secs(20), || {
        s.info("persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
            && s.info("persistence", "aof_rewrite_scheduled").as_deref() == Some("0")
    });
}

fn manifest(s: &Server) -> String {
    std::fs::read_to_string(s.dir.join("appendonlydir/appendonly.aof.manifest")).unwrap_or_default()
}

#[test]
fn incr_seq_after_loadaof_with_aof_off_like_redis() {
    let mut seen = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let s = l
            .args(&[
                "--save",
                "",
                "--appendonly",
                "yes",
                "--enable-debug-command",
                "yes",
            ])
            .start();
        let mut c = s.resp();
        settle(&s);
        c.cmd(&["SET", "k", "v"]);
        c.cmd(&["BGREWRITEAOF"]);
        settle(&s);
        c.cmd(&["CONFIG", "SET", "appendonly", "no"]);
        c.cmd(&["BGREWRITEAOF"]);
        settle(&s);
        let off = manifest(&s);
        let load = c.cmd(&["DEBUG", "LOADAOF"]);
        c.cmd(&["CONFIG", "SET", "appendonly", "yes"]);
        settle(&s);
        seen.push((off, load, manifest(&s), c.cmd(&["GET", "k"])));
    }
    assert_eq!(seen[1], seen[0], "tessera (left) vs redis (right)");
}
