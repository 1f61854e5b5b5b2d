//! Source guards: the test suites check their own files for patterns that must not come back
//! (a raw server spawn, a hand-rolled port picker). One walker for every suite's guard.

use std::path::{Path, PathBuf};

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

/// Every `.rs` file under `dir` except the guard's own (`me`, its `file!()`), through
/// `offences(path, text)`; all findings. Panics when fewer than `at_least` files were read
/// (a guard that reads nothing must not pass).
pub fn scan(
    dir: &Path,
    me: &str,
    at_least: usize,
    offences: impl Fn(&str, &str) -> Vec<String>,
) -> Vec<String> {
    let me = Path::new(me).file_name();
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    assert!(files.len() >= at_least, "read the test files: {files:?}");
    files
        .iter()
        .filter(|p| p.file_name() != me)
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            offences(&p.display().to_string(), &text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_reads_every_file_but_the_guard() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("a.rs"), "BAD").expect("write");
        std::fs::write(dir.path().join("sub/b.rs"), "BAD").expect("write");
        std::fs::write(dir.path().join("guard.rs"), "BAD").expect("write");
        std::fs::write(dir.path().join("c.txt"), "BAD").expect("write");
        let mut found = scan(dir.path(), "tests/guard.rs", 3, |f, t| {
            t.contains("BAD")
                .then(|| f.to_string())
                .into_iter()
                .collect()
        });
        found.sort();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].ends_with("a.rs") && found[1].ends_with("b.rs"),
            "{found:?}"
        );
    }
}
