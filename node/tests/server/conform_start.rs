//! What Redis 7.0.15's test harness reads from a starting server, against redis-server 7.0
//! (issue 18, the runner's first trial): the startup output it waits for (` PID: <pid>`,
//! "Ready to accept", "Failed listening on port") and a `logfile` that follows an earlier
//! `dir` of the config file.

use std::time::Duration;

use tessera_testkit::*;

fn both() -> [Launch; 2] {
    [Launch::redis(), Launch::tessera()]
}

/// The process's output once it holds `what` (bounded wait; the caller asserts on it).
fn output_once(s: &Server, what: &str) -> String {
    let mut out = String::new();
    for _ in 0..200 {
        out = std::fs::read_to_string(s.output_path()).unwrap_or_default();
        if out.contains(what) {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    out
}

/// With always-show-logo (the suite's default.conf), the harness waits for ` PID: <pid>` in
/// the server's stdout and then counts "Ready to accept" lines; both servers print them.
#[test]
fn startup_output_has_pid_and_ready_like_redis() {
    for l in both() {
        let bin = l.bin().to_string();
        let s = l.args(&["--save", "", "--always-show-logo", "yes"]).start();
        let out = output_once(&s, "Ready to accept");
        let pid = format!(" PID: {}", s.pid());
        assert!(
            out.contains(&pid),
            "{bin}: no '{pid}' in its output:\n{out}"
        );
        assert_eq!(
            out.matches("Ready to accept").count(),
            1,
            "{bin}: one 'Ready to accept' line expected:\n{out}"
        );
    }
}

/// The harness's busy-port check: a server that cannot listen says "Failed listening on
/// port" in its output.
#[test]
fn busy_port_says_failed_listening_like_redis() {
    for l in both() {
        let bin = l.bin().to_string();
        let holder = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = holder.local_addr().expect("addr").port().to_string();
        let dir = tempfile::tempdir().expect("tempdir");
        let exit = l
            .verbatim()
            .args(&["--port", &port, "--bind", "127.0.0.1", "--save", ""])
            .args(&["--always-show-logo", "yes"])
            .args(&["--dir", &dir.path().display().to_string()])
            .run_to_exit(dir.path(), Duration::from_secs(20));
        assert!(exit.failed(), "{bin} kept running on a busy port");
        // The logo (and its PID line) comes once the port is bound, as Redis's after
        // initServer: the harness connects as soon as it reads the PID, and a logo printed
        // before binding let it connect to a port not open yet (integration/aof's
        // start_server_aof, on a loaded machine).
        assert!(
            !exit.output.contains(" PID: "),
            "{bin} printed its logo before failing to listen:\n{}",
            exit.output
        );
        assert!(
            exit.output
                .contains(&format!("Failed listening on port {port} (TCP), aborting.")),
            "{bin}:\n{}",
            exit.output
        );
    }
}

/// A node that cannot listen on its cluster bus port (here held by another socket) stops
/// with the reason in its `logfile` and nothing printed, as redis-server: Redis's cluster
/// suite counts any stderr output of an instance as a failed test, and its instances can
/// meet a bus port taken by some connection's ephemeral port.
#[test]
fn busy_bus_port_is_logged_not_printed_like_redis() {
    for l in both() {
        let bin = l.bin().to_string();
        let holder = std::net::TcpListener::bind("0.0.0.0:0").expect("bind");
        let bus = holder.local_addr().expect("addr").port();
        let Some(port) = bus.checked_sub(10000) else {
            continue;
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("log.txt");
        let exit = l
            .verbatim()
            .args(&["--port", &port.to_string(), "--cluster-enabled", "yes"])
            .args(&["--save", "", "--dir", &dir.path().display().to_string()])
            .args(&["--logfile", &log.display().to_string()])
            .run_to_exit(dir.path(), Duration::from_secs(20));
        assert!(exit.failed(), "{bin} kept running without its bus");
        // stdout and stderr together: with a logfile neither server prints anything.
        assert_eq!(exit.output, "", "{bin} printed instead of logging");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            text.contains(&bus.to_string()),
            "{bin}'s log does not name the bus port {bus}:\n{text}"
        );
    }
}

/// The cluster suite's instance config: `dir ./redis_N` then `logfile log.txt`. Redis
/// applies the lines in order and `dir` changes directory at once, so the log lands in
/// redis_N/.
#[test]
fn logfile_follows_dir_like_redis() {
    for l in both() {
        let bin = l.bin().to_string();
        let top = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(top.path().join("inst")).expect("mkdir");
        let conf = top.path().join("node.conf");
        std::fs::write(&conf, "save \"\"\ndir ./inst\nlogfile log.txt\n").expect("conf");
        let s = l
            .dir(top.path())
            .cwd()
            .verbatim()
            .args(&[
                conf.display().to_string().as_str(),
                "--port",
                "{port}",
                "--bind",
                "{ip}",
            ])
            .start();
        let log = top.path().join("inst").join("log.txt");
        let mut text = String::new();
        for _ in 0..200 {
            text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("Ready to accept") {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        assert!(
            text.contains("Ready to accept"),
            "{bin}: no inst/log.txt with the startup log ({})",
            log.display()
        );
        assert!(
            !top.path().join("log.txt").exists(),
            "{bin} opened log.txt in the start directory"
        );
        drop(s);
    }
}

/// `dir` as Redis's chdir leaves it: config lines compound (`dir ./inst` then `dir ./sub` is
/// inst/sub), CONFIG GET answers the absolute directory (what Redis's tests join file
/// names to), a relative CONFIG SET starts from the current dir, a missing one is refused.
#[test]
fn dir_like_redis() {
    let mut seen = Vec::new();
    for l in both() {
        let top = tempfile::tempdir().expect("tempdir");
        let top_path = std::fs::canonicalize(top.path()).expect("canonical");
        std::fs::create_dir_all(top_path.join("inst").join("sub")).expect("mkdir");
        let conf = top_path.join("node.conf");
        std::fs::write(
            &conf,
            "save \"\"\nenable-protected-configs yes\ndir ./inst\ndir ./sub\n",
        )
        .expect("conf");
        let s = l
            .dir(&top_path)
            .cwd()
            .verbatim()
            .args(&[
                conf.display().to_string().as_str(),
                "--port",
                "{port}",
                "--bind",
                "{ip}",
            ])
            .start();
        let mut c = s.raw();
        let top_text = top_path.display().to_string();
        let mut replies = Vec::new();
        for args in [
            &["CONFIG", "GET", "dir"][..],
            &["CONFIG", "SET", "dir", ".."][..],
            &["CONFIG", "GET", "dir"][..],
            &["CONFIG", "SET", "dir", "./missing"][..],
            &["CONFIG", "GET", "dir"][..],
            &["CONFIG", "SET", "dir", "sub"][..],
            &["CONFIG", "GET", "dir"][..],
        ] {
            let r = match c.cmd(args) {
                R::Arr(items) => items
                    .iter()
                    .map(|i| i.s().replace(&top_text, "<top>"))
                    .collect::<Vec<_>>()
                    .join(" "),
                other => other.s(),
            };
            replies.push(format!("{args:?} -> {r}"));
        }
        seen.push(replies);
    }
    assert_eq!(seen[1], seen[0], "tessera (left), redis (right)");
    assert_eq!(
        seen[0][0],
        "[\"CONFIG\", \"GET\", \"dir\"] -> dir <top>/inst/sub"
    );
}
