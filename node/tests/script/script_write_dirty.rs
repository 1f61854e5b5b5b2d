//! A script that has written once may write on whatever the server's state becomes
//! (Redis's SCRIPT_WRITE_DIRTY in scriptVerifyWriteCommandAllow), compared with
//! redis-server 7.0. unit/scripting's "not enough good replicas state change during long
//! script" relies on it: the replica drops while the script runs, and the script's second
//! write must still be applied. Here the state changes from inside the script (CONFIG SET
//! min-replicas-to-write, allowed by DEBUG SET-DISABLE-DENY-SCRIPTS), so no replica and no
//! timing is involved.

use tessera_testkit::diff::*;

const EXTRA: &[&str] = &[
    "--save",
    "",
    "--appendonly",
    "no",
    "--enable-debug-command",
    "yes",
];

/// After a write, raising min-replicas-to-write does not stop the script's next write;
/// before any write it does (NOREPLICAS), for EVAL and FCALL alike.
const STEPS: &[&[&str]] = &[
    &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"],
    &[
        "EVAL",
        "redis.call('set','x','1') redis.call('config','set','min-replicas-to-write','1') return redis.pcall('set','y','2')",
        "0",
    ],
    &["EVAL", "return redis.pcall('set','z','3')", "0"],
    &[
        "EVAL",
        "redis.call('get','x') return redis.pcall('set','z','3')",
        "0",
    ],
    &["CONFIG", "SET", "min-replicas-to-write", "0"],
    &[
        "FUNCTION",
        "LOAD",
        "#!lua name=wd\nredis.register_function('wd', function() redis.call('set','fx','1') redis.call('config','set','min-replicas-to-write','1') return redis.pcall('set','fy','2') end)",
    ],
    &["FCALL", "wd", "0"],
    &["CONFIG", "SET", "min-replicas-to-write", "0"],
    &["MGET", "x", "y", "z", "fx", "fy"],
];

fn transcript(srv: &Server) -> Vec<Reply> {
    let mut c = srv.resp();
    STEPS.iter().map(|s| c.cmd(s)).collect()
}

#[test]
fn write_after_first_write_skips_min_replicas_check() {
    let r = Server::redis(EXTRA);
    let t = tessera_with(EXTRA);
    let want = transcript(&r);
    // The case this test is about, as redis answers it (so a changed reference fails loudly).
    assert_eq!(want[1], Reply::Simple("OK".into()), "redis: {want:?}");
    assert!(
        matches!(&want[2], Reply::Error(e) if e.starts_with("NOREPLICAS")),
        "redis: {want:?}"
    );
    let got = transcript(&t);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "step {i} {:?}", STEPS[i]);
    }
}
