//! The node's tests start servers and signal processes only through the test kit
//! (tessera-testkit, issue 17: "the test kit is the only spawner"): no `Command::new` of a
//! server binary and no `kill` command may come back in a test file. One-shot client tools
//! (redis-cli, redis-check-rdb, redis-benchmark, the operator's `converge`) stay plain
//! `Command`s found through the kit.

use std::path::{Path, PathBuf};

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

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

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
    let me = Path::new(file!()).file_name().expect("file name");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 20, "read the test files: {files:?}");
    let found: Vec<String> = files
        .iter()
        .filter(|p| p.file_name() != Some(me))
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            offences(&p.display().to_string(), &text)
        })
        .collect();
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
