//! The kit's process spawner (tessera-testkit) with tessera-node: a started server serves,
//! a restart keeps its data directory, and dropping the guard kills and reaps the process.

use std::path::Path;
use std::time::Duration;

use tessera_testkit::*;

/// True while `pid` exists (a reaped child leaves /proc).
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn restart_keeps_the_dir_and_drop_reaps() {
    let mut s = Launch::new(tessera_bin())
        .args(&[
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ])
        .logfile()
        .start();
    assert!(answers_ping(&s.ip, s.port));
    let log = s.log_path().expect("started with a log file");
    assert!(log.starts_with(&s.dir));
    let ok: String = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(
            &mut redis::Client::open(format!("redis://{}/", s.addr()))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
                .expect("connect"),
        )
        .expect("set");
    assert_eq!(ok, "OK");

    let (old_pid, dir) = (s.pid(), s.dir.clone());
    s.restart();
    assert!(!alive(old_pid), "the first process was not reaped");
    assert_eq!(s.dir, dir);
    let mut c = redis::Client::open(format!("redis://{}/", s.addr()))
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
        .expect("connect after restart");
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut c).expect("get");
    assert_eq!(
        v.as_deref(),
        Some("v"),
        "the AOF in the same dir was not replayed"
    );
    assert!(!std::fs::read_to_string(&log).expect("log file").is_empty());

    let pid = s.pid();
    drop(c);
    drop(s);
    assert!(!alive(pid), "drop did not kill and reap the server");
    assert!(!dir.exists(), "the owned temp dir outlived the guard");
}

#[test]
fn info_value_finds_whole_field_names() {
    let text = "# Replication\r\nrole:master\r\nmaster_repl_offset:42\r\nrepl:x\r\n";
    assert_eq!(
        info_field(text, "master_repl_offset").as_deref(),
        Some("42")
    );
    assert_eq!(info_field(text, "repl").as_deref(), Some("x"));
    assert_eq!(info_field(text, "role").as_deref(), Some("master"));
    assert_eq!(info_field(text, "missing"), None);
}
