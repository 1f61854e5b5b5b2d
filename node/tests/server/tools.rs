use std::io::Write;
use std::process::{Command, Stdio};

use tessera_testkit::Node;

#[test]
fn redis_cli_one_shot_and_stdin() {
    let n = Node::start();
    assert_eq!(n.cli(&["SET", "greeting", "hi there"]).trim(), "OK");
    assert_eq!(n.cli(&["GET", "greeting"]).trim(), "hi there");
    assert_eq!(n.cli(&["INCR", "c"]).trim(), "1");
    assert!(n.cli(&["INFO", "server"]).contains("redis_version:7.0.15"));
    // Commands from stdin, like `redis-cli < file`.
    let mut child = Command::new(tessera_testkit::redis_cli_bin())
        .args(["-p", &n.port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"SET a 1\nINCRBY a 41\nGET a\nMGET a nokey\nCOMMAND DOCS get\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(&lines[..4], &["OK", "42", "42", "42"], "{s}");
    // --pipe mass insertion.
    let mut proto = Vec::new();
    for i in 0..1000 {
        proto.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\npipe{i}\r\n$1\r\nx\r\n",
                4 + i.to_string().len()
            )
            .as_bytes(),
        );
    }
    let mut child = Command::new(tessera_testkit::redis_cli_bin())
        .args(["-p", &n.port.to_string(), "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&proto).unwrap();
    let out = child.wait_with_output().unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("errors: 0, replies: 1000"), "{s}");
}

#[test]
fn redis_benchmark_runs_clean() {
    let n = Node::start();
    let out = tessera_testkit::output_within(
        Command::new(tessera_testkit::bins::tool("redis-benchmark")).args([
            "-p",
            &n.port.to_string(),
            "-n",
            "2000",
            "-q",
            "-t",
            "set,get,incr,mset,ping",
        ]),
        std::time::Duration::from_secs(60),
    );
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("SET:") && s.contains("GET:") && s.contains("MSET"),
        "{s}"
    );
    assert!(!s.to_lowercase().contains("error"), "{s}");
}

#[test]
fn redis_cli_interactive_session() {
    // Interactive mode needs a terminal: `script` provides a pty; TERM=dumb keeps linenoise
    // from sending escape queries. Interactive redis-cli fetches COMMAND DOCS at start.
    let script = tessera_testkit::bins::tool("script");
    let n = Node::start();
    let cli = tessera_testkit::redis_cli_bin();
    let mut child = Command::new(script)
        .args(["-qc", &format!("{cli} -p {}", n.port), "/dev/null"])
        .env("TERM", "dumb")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"set a 1\nget a\nhello 3\nincr a\nexit\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let s = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    assert!(s.contains("> OK"), "{s}");
    assert!(s.contains("> \"1\""), "{s}");
    assert!(s.contains("\"proto\" => (integer) 3"), "{s}");
    assert!(s.contains("> (integer) 2"), "{s}");
}
