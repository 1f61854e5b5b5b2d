//! Cluster suite 04-resharding "Verify keys after the restart" (issue 18): a key MIGRATEd
//! away must be gone when the source replays its AOF. Redis writes a successful MIGRATE to
//! its AOF and replicas as DEL of the keys the target took (nothing when none moved or with
//! COPY); replaying the MIGRATE itself would find the key again (the target answers
//! BUSYKEY), so a key that later came back by RESTORE kept its old value. Compared with
//! redis-server.

use tessera_testkit::*;

/// The AOF's incr file text of `s` (lower-cased, for command names).
fn incr_text(s: &Server) -> String {
    let dir = s.dir.join("appendonlydir");
    let mut text = String::new();
    for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().ends_with(".incr.aof") {
            text.push_str(&String::from_utf8_lossy(
                &std::fs::read(e.path()).unwrap_or_default(),
            ));
        }
    }
    text.to_lowercase()
}

#[test]
fn migrate_is_written_as_del_like_redis() {
    let mut seen = Vec::new();
    for kind in [Launch::redis, Launch::tessera] {
        let target = kind().args(&["--save", ""]).start();
        let src = kind()
            .args(&[
                "--save",
                "",
                "--appendonly",
                "yes",
                "--enable-debug-command",
                "yes",
            ])
            .start();
        let mut c = src.resp();
        c.cmd(&["SET", "moved", "v"]);
        c.cmd(&["SET", "copied", "v"]);
        let port = target.port.to_string();
        let m1 = c.cmd(&["MIGRATE", &target.ip, &port, "moved", "0", "5000"]);
        let m2 = c.cmd(&["MIGRATE", &target.ip, &port, "copied", "0", "5000", "COPY"]);
        let m3 = c.cmd(&["MIGRATE", &target.ip, &port, "absent", "0", "5000"]);
        // DEBUG LOADAOF writes out what was appended first (Redis may hold it back a
        // moment under appendfsync everysec).
        let reload = c.cmd(&["DEBUG", "LOADAOF"]);
        let aof = incr_text(&src);
        let logged = (aof.contains("migrate"), aof.matches("\r\ndel\r\n").count());
        let after = (c.cmd(&["EXISTS", "moved"]), c.cmd(&["EXISTS", "copied"]));
        seen.push((m1, m2, m3, logged, reload, after));
    }
    assert_eq!(seen[1], seen[0], "tessera (left) vs redis (right)");
    assert_eq!(seen[0].3, (false, 1));
}
