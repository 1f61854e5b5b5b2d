//! Replays every committed corpus file of every fuzz target through the target's body (on
//! stable, in `cargo test`): seeds, and the reproducers of crashes fuzzing found, stay fixed.

use std::path::{Path, PathBuf};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

#[test]
fn every_target_has_a_corpus_and_every_corpus_a_target() {
    let dirs: Vec<String> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"))
        .expect("corpus folder")
        .map(|e| {
            e.expect("corpus entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    for (name, _) in tessera_node_fuzz::TARGETS {
        assert!(dirs.iter().any(|d| d == name), "no corpus/{name}");
    }
    for d in &dirs {
        assert!(
            tessera_node_fuzz::TARGETS.iter().any(|(n, _)| n == d),
            "corpus/{d} belongs to no target"
        );
    }
}

/// The node's threads have 8 MiB stacks (server/mod.rs); test threads only 2 MiB, which a
/// deeply nested input can exhaust in a debug build where the node itself would not.
const STACK: usize = 8 << 20;

#[test]
fn replay_corpus() {
    std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(replay)
        .expect("replay thread")
        .join()
        .expect("the replay thread panicked");
}

fn replay() {
    let mut failed = Vec::new();
    for (name, body) in tessera_node_fuzz::TARGETS {
        let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir(name))
            .unwrap_or_else(|e| panic!("corpus/{name}: {e}"))
            .map(|e| e.expect("corpus entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "corpus/{name} is empty");
        for f in files {
            let data = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            if std::panic::catch_unwind(|| body(&data)).is_err() {
                failed.push(f.display().to_string());
            }
        }
    }
    assert!(failed.is_empty(), "corpus inputs that crash: {failed:#?}");
}
