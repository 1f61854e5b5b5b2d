//! The operator's tests start servers, pick ports and find programs only through the test
//! kit (tessera-testkit, issue 17 item 3): no hand-rolled spawner, port scheme or binary
//! lookup may come back in a test file. The operator's own binary (CARGO_BIN_EXE) runs in the
//! kit's `Process` guard (log file, killed on drop) and is signalled through it; helm is a
//! one-shot tool and out of scope.

use std::path::Path;

/// What a second spawner, port scheme or lookup looks like in source.
const FORBIDDEN: &[(&str, &str)] = &[
    (
        "fn program(",
        "a binary lookup: use tessera_testkit::{redis_bin, valkey_bin, tool}",
    ),
    (
        "target/debug",
        "a checkout path: use tessera_testkit::tessera_bin",
    ),
    (
        "fn free_port",
        "a port scheme: use tessera_testkit::free_port",
    ),
    (
        "fn pick_port",
        "a port scheme: use tessera_testkit::free_port",
    ),
    (
        "fn free_ip",
        "an address scheme: use tessera_testkit::ports::free_ip_for",
    ),
    ("Command::new(bin", "a spawner: use tessera_testkit::Launch"),
    (
        "Command::new(&self.bin",
        "a spawner: use tessera_testkit::Launch",
    ),
    (
        "Command::new(program(",
        "a spawner: use tessera_testkit::Launch",
    ),
    (
        "Command::new(\"redis-cli\")",
        "redis-cli: use tessera_testkit::cli::cli_out",
    ),
    (
        ".spawn()",
        "a raw child process: hand the Command to tessera_testkit::Process::spawn (or Launch)",
    ),
    (
        "kill_on_drop",
        "a raw child process: hand the Command to tessera_testkit::Process::spawn",
    ),
    (
        "Command::new(\"kill\")",
        "a signal: use Process::signal / Server::signal",
    ),
];

/// `file: pattern (what to use)` for every forbidden pattern in `text`.
fn offences(file: &str, text: &str) -> Vec<String> {
    FORBIDDEN
        .iter()
        .filter(|(pat, _)| text.contains(pat))
        .map(|(pat, fix)| format!("{file}: `{pat}` ({fix})"))
        .collect()
}

#[test]
fn servers_ports_and_programs_come_from_the_test_kit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let found = tessera_testkit::guard::scan(&root, file!(), 11, offences);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_check_sees_a_hand_rolled_spawner() {
    let text = "fn program(name: &str) -> String { todo!() }\nlet c = Command::new(bin);\n\
                let o = Command::new(env!(\"CARGO_BIN_EXE_tessera-operator\")).spawn();\n\
                Command::new(\"kill\").args([\"-TERM\", &pid]);";
    assert_eq!(
        offences("x.rs", text).len(),
        4,
        "{:?}",
        offences("x.rs", text)
    );
}
