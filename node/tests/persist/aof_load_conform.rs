//! Loading a bad AOF as Redis 7.0 does (issue 18, Redis's integration/aof): the same
//! outcome (refused, or loaded after cutting the file) and the same log line, which the
//! suite greps for; and aof-timestamp-enabled's `#TS:` annotations.

use std::path::Path;
use std::time::Duration;

use tessera_testkit::*;

const INCR: &str = "appendonly.aof.1.incr.aof";

fn resp(args: &[&str]) -> String {
    let mut s = format!("*{}\r\n", args.len());
    for a in args {
        s.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s
}

/// A data dir whose appendonlydir holds one incr file with `body`, and its manifest.
fn aof_dir(body: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    let a = d.path().join("appendonlydir");
    std::fs::create_dir_all(&a).expect("appendonlydir");
    std::fs::write(a.join(INCR), body).expect("incr file");
    std::fs::write(
        a.join("appendonly.aof.manifest"),
        format!("file {INCR} seq 1 type i\n"),
    )
    .expect("manifest");
    d
}

/// The message of a log line: Redis's after its level mark, ours after the target.
fn message(line: &str) -> Option<&str> {
    if let Some((_, m)) = line.split_once(" # ") {
        return Some(m);
    }
    if let Some((_, m)) = line.split_once(" * ") {
        return Some(m);
    }
    line.split_once("tessera_node::persist::aof: ")
        .map(|(_, m)| m)
}

/// How each server took `body`: refused (with its log lines about the AOF that name the
/// incr file or a transaction), or started (with GET of `keys` and the incr file's size).
fn outcome(launch: Launch, body: &str, truncated: &str, keys: &[&str]) -> String {
    let d = aof_dir(body);
    let args = [
        "--save",
        "",
        "--appendonly",
        "yes",
        "--aof-load-truncated",
        truncated,
    ];
    match launch
        .dir(d.path())
        .args(&args)
        .ready_within(Duration::from_secs(20))
        .start_or_exit()
    {
        Ok(s) => {
            let mut c = s.resp();
            let got: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}={:?}", c.cmd(&["GET", k])))
                .collect();
            let size = std::fs::metadata(Path::new(&s.dir).join("appendonlydir").join(INCR))
                .map(|m| m.len())
                .unwrap_or(0);
            format!("started {got:?} incr {size} bytes")
        }
        Err(exit) => {
            let lines: Vec<&str> = exit
                .output
                .lines()
                .filter_map(message)
                .filter(|m| m.contains(INCR) || m.contains("MULTI") || m.contains("last file"))
                .collect();
            format!("refused (failed: {}) {lines:#?}", exit.failed())
        }
    }
}

#[test]
fn bad_aof_files_load_like_redis() {
    let set = resp(&["set", "foo", "hello"]);
    let short = resp(&["incr", "foo"]);
    let cases: Vec<(&str, String, &str)> = vec![
        ("bad format", format!("{set}!!!{set}"), "yes"),
        (
            "unknown command",
            format!("{set}{}{set}", resp(&["bla", "foo", "hello"])),
            "yes",
        ),
        (
            "unfinished MULTI, truncated no",
            format!(
                "{set}{}{}",
                resp(&["multi"]),
                resp(&["set", "bar", "world"])
            ),
            "no",
        ),
        (
            "unfinished MULTI, truncated yes",
            format!(
                "{set}{}{}",
                resp(&["multi"]),
                resp(&["set", "bar", "world"])
            ),
            "yes",
        ),
        (
            "short read, truncated no",
            format!("{short}{short}{}", &short[..short.len() - 1]),
            "no",
        ),
        (
            "short read, truncated yes",
            format!("{short}{short}{}", &short[..short.len() - 1]),
            "yes",
        ),
    ];
    let mut diffs = Vec::new();
    for (what, body, truncated) in &cases {
        let want = outcome(Launch::redis(), body, truncated, &["foo", "bar"]);
        let got = outcome(Launch::tessera(), body, truncated, &["foo", "bar"]);
        if want != got {
            diffs.push(format!("{what}:\n redis   {want}\n tessera {got}"));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// aof-timestamp-enabled: the incr file gets a `#TS:` line before the first write of a
/// second, a RESP base starts with one.
#[test]
fn timestamp_annotations_like_redis() {
    let first_line = |p: &Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .next()
            .map(|l| l.split(':').next().unwrap_or("").to_string())
            .unwrap_or_default()
    };
    let mut seen = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let s = l.args(&["--save", "", "--appendonly", "yes"]).start();
        let mut c = s.resp();
        c.cmd(&["CONFIG", "SET", "aof-timestamp-enabled", "yes"]);
        c.cmd(&["CONFIG", "SET", "aof-use-rdb-preamble", "no"]);
        c.cmd(&["SET", "foo", "bar"]);
        let dir = s.dir.join("appendonlydir");
        let incr = first_line(&dir.join(INCR));
        c.cmd(&["BGREWRITEAOF"]);
        wait_until("rewrite done", Duration::from_secs(30), || {
            s.info("persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
        });
        let base = first_line(&dir.join("appendonly.aof.2.base.aof"));
        seen.push((incr, base));
    }
    assert_eq!(seen[1], seen[0], "tessera (left) vs redis (right)");
    assert_eq!(seen[0], ("#TS".to_string(), "#TS".to_string()));
}

/// Starts a server on an appendonlydir holding `files` and `manifest`; the lines of its
/// output that contain `needle` (message part only), or "started".
fn refusal(launch: Launch, files: &[(&str, String)], manifest: &str, needle: &str) -> String {
    let d = tempfile::tempdir().expect("tempdir");
    let a = d.path().join("appendonlydir");
    std::fs::create_dir_all(&a).expect("appendonlydir");
    for (name, body) in files {
        std::fs::write(a.join(name), body).expect("aof file");
    }
    std::fs::write(a.join("appendonly.aof.manifest"), manifest).expect("manifest");
    match launch
        .dir(d.path())
        .args(&["--save", "", "--appendonly", "yes"])
        .ready_within(Duration::from_secs(20))
        .start_or_exit()
    {
        Ok(_) => "started".into(),
        Err(exit) => {
            // The distinct lines (this node also repeats its fatal error on stderr).
            let lines: std::collections::BTreeSet<&str> = exit
                .output
                .lines()
                .filter(|l| l.contains(needle))
                .filter_map(|l| l.find(needle).map(|i| &l[i..]))
                .collect();
            format!("refused (failed: {}) {lines:?}", exit.failed())
        }
    }
}

/// One load case: its name, the files written (name, contents), the manifest, and the log
/// line Redis prints.
type LoadCase = (
    &'static str,
    Vec<(&'static str, String)>,
    String,
    &'static str,
);

/// A file the manifest names is missing (any of them, the last incr file too, in Redis
/// 7.0.15), or the manifest has a blank line: the load is refused with Redis's line.
#[test]
fn missing_files_and_blank_manifest_lines_like_redis() {
    let set = |k: &str| resp(&["set", k, "v"]);
    let cases: Vec<LoadCase> = vec![
        (
            "incr 1 of 2 missing",
            vec![
                ("appendonly.aof.1.base.aof", set("k1")),
                ("appendonly.aof.2.incr.aof", set("k2")),
            ],
            "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\nfile appendonly.aof.2.incr.aof seq 2 type i\n".into(),
            "Unable to obtain the AOF file",
        ),
        (
            "last incr missing",
            vec![("appendonly.aof.1.base.aof", set("k1"))],
            "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n".into(),
            "Unable to obtain the AOF file",
        ),
        (
            "blank line",
            vec![
                ("appendonly.aof.1.incr.aof", set("k1")),
                ("appendonly.aof.3.incr.aof", set("k2")),
            ],
            "file appendonly.aof.1.incr.aof seq 1 type i\n\nfile appendonly.aof.3.incr.aof seq 3 type i\n".into(),
            "Invalid AOF manifest file format",
        ),
    ];
    let mut diffs = Vec::new();
    for (what, files, manifest, needle) in &cases {
        let want = refusal(Launch::redis(), files, manifest, needle);
        let got = refusal(Launch::tessera(), files, manifest, needle);
        if want != got || want == "started" {
            diffs.push(format!("{what}:\n redis   {want}\n tessera {got}"));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// What a start over an old-style AOF (Redis < 7.0: `appendonly.aof` in the data dir) left:
/// the keys, the appendonlydir's files and manifest, whether the old file is still there.
fn upgraded(launch: Launch, manifest: Option<&str>) -> String {
    let d = tempfile::tempdir().expect("tempdir");
    let body = format!(
        "{}{}",
        resp(&["set", "k1", "v1"]),
        resp(&["set", "k2", "v2"])
    );
    std::fs::write(d.path().join("appendonly.aof"), body).expect("old aof");
    let a = d.path().join("appendonlydir");
    if let Some(m) = manifest {
        std::fs::create_dir_all(&a).expect("appendonlydir");
        std::fs::write(a.join("appendonly.aof.manifest"), m).expect("manifest");
    }
    let s = launch
        .dir(d.path())
        .args(&["--save", "", "--appendonly", "yes"])
        .start();
    let mut c = s.resp();
    let keys = (c.cmd(&["GET", "k1"]), c.cmd(&["GET", "k2"]));
    let mut names: Vec<String> = std::fs::read_dir(&a)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let manifest = std::fs::read_to_string(a.join("appendonly.aof.manifest")).unwrap_or_default();
    let old_left = d.path().join("appendonly.aof").exists();
    format!("{keys:?} {names:?} {manifest:?} old file left: {old_left}")
}

/// Redis 7.0 moves an old-style AOF into the AOF directory as its base (fresh, or an
/// upgrade interrupted after the manifest was written), then starts incr file 1.
#[test]
fn old_style_aof_upgrades_like_redis() {
    for manifest in [None, Some("file appendonly.aof seq 1 type b\n")] {
        let want = upgraded(Launch::redis(), manifest);
        let got = upgraded(Launch::tessera(), manifest);
        assert_eq!(
            got, want,
            "manifest before: {manifest:?}; tessera (left) vs redis (right)"
        );
    }
}
