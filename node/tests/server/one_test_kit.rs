//! The node's tests start servers and signal processes only through the test kit
//! (tessera-testkit, issue 17: "the test kit is the only spawner"): no `Command::new` of a
//! server binary and no `kill` command may come back in a test file. One-shot client tools
//! (redis-cli, redis-check-rdb, redis-benchmark, the operator's `converge`) stay plain
//! `Command`s found through the kit.

use std::path::Path;

/// The programs that are servers: started only by `Launch` / `Server` (or `Node`, `Proc`).
const SERVERS: &[&str] = &[
    "bin",
    "tessera_bin",
    "redis_bin",
    "valkey_bin",
    "\"tessera-node\"",
    "\"redis-server\"",
    "\"valkey-server\"",
];

/// `file: what (what to use)` for every raw server spawn or kill command in `text`.
fn offences(file: &str, text: &str) -> Vec<String> {
    // Whitespace out, so a call rustfmt broke over lines reads as one.
    let flat: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let mut found = Vec::new();
    for (at, _) in flat.match_indices("Command::new(") {
        // The argument: up to the parenthesis that closes `Command::new(`.
        let rest = &flat[at + "Command::new(".len()..];
        let mut depth = 0usize;
        let end = rest
            .char_indices()
            .find(|&(_, c)| match c {
                '(' => {
                    depth += 1;
                    false
                }
                ')' if depth == 0 => true,
                ')' => {
                    depth -= 1;
                    false
                }
                _ => false,
            })
            .map_or(rest.len(), |(i, _)| i);
        let arg = rest[..end].trim_start_matches('&');
        let call = arg.strip_suffix("()").unwrap_or(arg);
        // The last path or field segment: `tessera_testkit::redis_bin`, `self.bin`.
        let name = call.rsplit([':', '.']).next().unwrap_or(call);
        if SERVERS.contains(&name) || arg.starts_with("env!(\"CARGO_BIN_EXE") {
            found.push(format!(
                "{file}: `Command::new({arg})` (a server: use tessera_testkit::Launch, \
                 verbatim() with run_to_exit / start_or_exit for a config probe)"
            ));
        } else if name == "\"kill\"" {
            found.push(format!(
                "{file}: `Command::new(\"kill\")` (a signal: use Server::signal)"
            ));
        }
    }
    if flat.contains("kill_on_drop") {
        found.push(format!(
            "{file}: `kill_on_drop` (a background process: use Launch or tessera_testkit::Process)"
        ));
    }
    found
}

#[test]
fn servers_and_signals_go_through_the_test_kit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let found = tessera_testkit::guard::scan(&root, file!(), 21, offences);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// What the spawns this guard replaced looked like: each is caught, a tool is not.
#[test]
fn the_check_sees_raw_server_spawns() {
    for raw in [
        "let out = output_within(Command::new(bin()).arg(&path), max);",
        "let mut child = Command::new(bin)\n    .args([\"--port\", &p]);",
        "std::process::Command::new(tessera_bin())\n    .arg(&conf)",
        "std::process::Command::new(tessera_testkit::redis_bin()).args([\"--port\", \"0\"])",
        "Command::new(&self.bin);",
        "Command::new(\"redis-server\").arg(\"--port\");",
        "let st = Command::new(\"kill\")\n    .args([sig, &pid.to_string()])",
        "tokio::process::Command::new(x).kill_on_drop(true);",
    ] {
        assert_eq!(offences("x.rs", raw).len(), 1, "{raw}");
    }
    for tool in [
        "Command::new(tessera_testkit::redis_cli_bin()).args(&args)",
        "Command::new(tessera_testkit::bins::tool(\"redis-check-rdb\")).arg(&rdb)",
        "Command::new(operator)\n    .args([\"converge\"])",
        "Command::new(script).args([\"-qc\"])",
    ] {
        assert_eq!(offences("x.rs", tool), Vec::<String>::new(), "{tool}");
    }
}
