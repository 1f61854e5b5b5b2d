//! The programs the tests start, each found once per test process.
//!
//! tessera-node is the workspace's own build: next to the test executable
//! (`target/<profile>/deps/<test>` -> `target/<profile>/tessera-node`). The reference
//! programs come from PATH, then `<workspace root>/.tools/bin` (where
//! `scripts/install-deps.sh` puts what the distribution lacks). A missing program panics
//! with what to run: a test never passes by not running.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The workspace root, from this crate's manifest dir at compile time.
pub fn workspace_root() -> &'static Path {
    let kit = Path::new(env!("CARGO_MANIFEST_DIR"));
    kit.parent().unwrap_or(kit)
}

/// `name` on `path` (a PATH-style list), then in `tools`.
fn search(name: &str, path: Option<&std::ffi::OsStr>, tools: &Path) -> Option<PathBuf> {
    let on_path = path
        .into_iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(name));
    on_path
        .chain(std::iter::once(tools.join(name)))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A reference program by name, or the panic message for its absence.
pub fn find_tool(name: &str) -> Result<String, String> {
    let tools = workspace_root().join(".tools/bin");
    search(name, std::env::var_os("PATH").as_deref(), &tools)
        .map(|p| p.display().to_string())
        .ok_or_else(|| {
            format!(
                "{name} not found on PATH or in .tools/bin: run `make deps` (scripts/install-deps.sh)"
            )
        })
}

/// Another reference program (redis-check-rdb, redis-benchmark...) by name; panics with
/// what to run when it is missing.
pub fn tool(name: &str) -> String {
    find_tool(name).unwrap_or_else(|msg| panic!("{msg}"))
}

fn cached(cell: &'static OnceLock<Result<String, String>>, name: &str) -> &'static str {
    match cell.get_or_init(|| find_tool(name)) {
        Ok(p) => p,
        Err(msg) => panic!("{msg}"),
    }
}

/// redis-server 7.0, the reference the differential tests compare with.
pub fn redis_bin() -> &'static str {
    static CELL: OnceLock<Result<String, String>> = OnceLock::new();
    cached(&CELL, "redis-server")
}

/// redis-cli (cluster create/check/reshard, and plain commands).
pub fn redis_cli_bin() -> &'static str {
    static CELL: OnceLock<Result<String, String>> = OnceLock::new();
    cached(&CELL, "redis-cli")
}

/// valkey-server (mixed-cluster and replication interop tests).
pub fn valkey_bin() -> &'static str {
    static CELL: OnceLock<Result<String, String>> = OnceLock::new();
    cached(&CELL, "valkey-server")
}

/// The tessera-node binary of this build: next to the test executable's directory.
/// Cargo builds it before tessera-node's own integration tests; other packages' tests must
/// build it first (`cargo build -p tessera-node`).
pub fn tessera_bin() -> &'static str {
    static CELL: OnceLock<Result<String, String>> = OnceLock::new();
    let found = CELL.get_or_init(|| {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let candidates: Vec<PathBuf> = exe
            .ancestors()
            .skip(1)
            .take(2)
            .map(|d| d.join("tessera-node"))
            .collect();
        candidates
            .iter()
            .find(|p| is_executable(p))
            .map(|p| p.display().to_string())
            .ok_or_else(|| {
                format!(
                    "tessera-node not found next to the test executable ({candidates:?}): \
                     run `cargo build -p tessera-node`"
                )
            })
    });
    match found {
        Ok(p) => p,
        Err(msg) => panic!("{msg}"),
    }
}

/// Another program of this workspace's build (tessera-operator), looked up as
/// [`tessera_bin`]: next to the test executable's directory. Panics with what to build when
/// it is missing.
pub fn workspace_bin(name: &str) -> String {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let candidates: Vec<PathBuf> = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|d| d.join(name))
        .collect();
    match candidates.iter().find(|p| is_executable(p)) {
        Some(p) => p.display().to_string(),
        None => panic!(
            "{name} not found next to the test executable ({candidates:?}): \
             run `cargo build -p {name}` (make test builds it)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_the_workspace() {
        assert!(workspace_root().join("Cargo.toml").is_file());
        assert!(workspace_root().join("testkit").is_dir());
    }

    #[test]
    fn path_wins_over_tools_then_tools_is_used() {
        let a = tempfile::tempdir().expect("tmp");
        let b = tempfile::tempdir().expect("tmp");
        let make = |d: &Path| {
            use std::os::unix::fs::PermissionsExt;
            let p = d.join("fake-server");
            std::fs::write(&p, "#!/bin/sh\n").expect("write");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            p
        };
        let in_a = make(a.path());
        let in_b = make(b.path());
        let path = std::env::join_paths([a.path()]).expect("join");
        assert_eq!(search("fake-server", Some(&path), b.path()), Some(in_a));
        let empty = std::env::join_paths([Path::new("/nonexistent-dir")]).expect("join");
        assert_eq!(search("fake-server", Some(&empty), b.path()), Some(in_b));
        assert_eq!(
            search("fake-server", None, Path::new("/nonexistent-dir")),
            None
        );
    }

    #[test]
    fn a_non_executable_file_is_not_a_program() {
        let a = tempfile::tempdir().expect("tmp");
        std::fs::write(a.path().join("plain"), "x").expect("write");
        let path = std::env::join_paths([a.path()]).expect("join");
        assert_eq!(search("plain", Some(&path), a.path()), None);
    }

    #[test]
    fn a_missing_tool_names_the_fix() {
        let err = find_tool("no-such-server-xyz").expect_err("must be missing");
        assert_eq!(
            err,
            "no-such-server-xyz not found on PATH or in .tools/bin: run `make deps` (scripts/install-deps.sh)"
        );
    }

    #[test]
    fn reference_programs_are_found() {
        for p in [redis_bin(), redis_cli_bin(), valkey_bin()] {
            assert!(is_executable(Path::new(p)), "{p}");
        }
    }
}
