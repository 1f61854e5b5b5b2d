//! PSYNC with an offset that is not an integer answers "ERR value is not an integer or out
//! of range" and logs "Replica ... asks for synchronization but with a wrong offset", the
//! connection staying a normal client, as Redis 7.0.15 (integration/replication "PSYNC
//! with wrong offset should throw error"). Compared with redis-server.

use tessera_testkit::*;

use crate::start;

fn wrong_offset(tessera: bool) -> Vec<String> {
    let srv = start(tessera, &["--save", ""]);
    let mut c = srv.resp();
    let reply = R::from(c.cmd(&["PSYNC", "replicationid", "offset_str"])).s();
    let ping = R::from(c.cmd(&["PING"])).s();
    let log = std::fs::read_to_string(srv.output_path()).unwrap_or_default();
    let logged = log.lines().any(|l| {
        l.contains("Replica ") && l.contains("asks for synchronization but with a wrong offset")
    });
    vec![reply, ping, format!("logged {logged}")]
}

#[test]
fn psync_with_a_wrong_offset_is_an_error_like_redis() {
    let theirs = wrong_offset(false);
    let ours = wrong_offset(true);
    assert_eq!(ours, theirs);
}
