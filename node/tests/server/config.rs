use std::time::Duration;

use tessera_testkit::{free_port, Exit, Launch, Node, Raw, R};

/// Runs the node with exactly `args` (no address or dir added), expecting it to stop by
/// itself: its exit code and everything it printed.
fn run_refused(args: &[&str]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let Exit { status, output } = Launch::tessera()
        .verbatim()
        .args(args)
        .run_to_exit(dir.path(), Duration::from_secs(60));
    let status = status.unwrap_or_else(|| panic!("{args:?} did not stop:\n{output}"));
    (status.code().unwrap_or(-1), output)
}

fn run_with_conf(text: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.conf");
    std::fs::write(&path, text).unwrap();
    let path = path.display().to_string();
    let (code, all) = run_refused(&[&path]);
    (code, all.replace(&path, "FILE"))
}

#[test]
fn bad_config_lines_stop_the_node() {
    let (code, msg) = run_with_conf("port 7000\n# comment\nmaxmemory lots\n");
    assert_ne!(code, 0);
    assert!(msg.contains("FATAL CONFIG FILE ERROR"), "{msg}");
    assert!(msg.contains("FILE, at line 3"), "{msg}");
    assert!(msg.contains(">>> 'maxmemory lots'"), "{msg}");
    assert!(msg.contains("argument must be a memory value"), "{msg}");

    let (code, msg) = run_with_conf("nosuchdirective yes\n");
    assert_ne!(code, 0);
    assert!(
        msg.contains("at line 1") && msg.contains("Bad directive"),
        "{msg}"
    );

    let (code, msg) = run_with_conf("protected-mode maybe\n");
    assert_ne!(code, 0);
    assert!(msg.contains("argument must be 'yes' or 'no'"), "{msg}");

    let (code, msg) = run_with_conf("maxmemory-policy lru\n");
    assert_ne!(code, 0);
    assert!(msg.contains("maxmemory-policy"), "{msg}");

    let (code, msg) = run_refused(&["/nonexistent/x.conf"]);
    assert_ne!(code, 0);
    assert!(
        msg.contains("can't open config file '/nonexistent/x.conf'"),
        "{msg}"
    );

    let (code, msg) = run_refused(&["--port", "notaport"]);
    assert_ne!(code, 0);
    assert!(msg.contains("port"), "{msg}");
}

#[test]
fn config_file_and_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let path = dir.path().join("node.conf");
    std::fs::write(
        &path,
        format!("port {port}\nbind 127.0.0.1\nmaxmemory 100mb\nsave \"\"\nmaxmemory-policy allkeys-lru\n"),
    )
    .unwrap();
    // The port is the config file's: the kit adds nothing to the command line and waits
    // for the node on that port.
    let conf = path.display().to_string();
    let node = Launch::tessera()
        .verbatim()
        .dir(dir.path())
        .cwd()
        .args(&[
            conf.as_str(),
            "--hz",
            "20",
            "--client-output-buffer-limit",
            "pubsub",
            "1mb",
            "512kb",
            "30",
        ])
        .start_at(port);
    let mut c = Raw::connect(node.port);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxmemory"]).s(),
        "[maxmemory,104857600]"
    );
    assert_eq!(c.cmd(&["CONFIG", "GET", "hz"]).s(), "[hz,20]");
    assert!(c
        .cmd(&["CONFIG", "GET", "client-output-buffer-limit"])
        .s()
        .contains("pubsub 1048576 524288 30"));
    let R::Arr(many) = c.cmd(&["CONFIG", "GET", "maxmemory*", "port"]) else {
        panic!()
    };
    assert!(many.len() >= 8);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", "200mb", "timeout", "30"]),
        R::Simple("OK".into())
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", "x"]),
        R::Err("ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value".into())
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "nosuch", "1"]),
        R::Err("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'".into())
    );
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), R::Simple("OK".into()));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("maxmemory 209715200"), "{text}");
    assert!(text.contains("timeout 30"), "{text}");
    assert!(text.contains(&format!("port {port}")), "{text}");
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), R::Simple("OK".into()));
    // The rewritten file is valid for a restart.
    let mut conf = tessera_node::config::Config::default();
    conf.apply_text(&text, None)
        .expect("rewritten config parses");
}

#[test]
fn idle_timeout_closes_clients() {
    let n = Node::start_with(&["--timeout", "1"]);
    let mut c = n.raw();
    assert_eq!(c.cmd(&["PING"]), R::Simple("PONG".into()));
    assert!(c.closed(), "idle client should be closed after timeout");
}
