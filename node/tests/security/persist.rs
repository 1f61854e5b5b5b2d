//! Hostile input: persist (issue 15). A failing disk must stop writes as redis-server 7.0
//! stops them (-MISCONF until the condition clears), `appendfsync always` must never
//! acknowledge a write it could not persist, and an AOF manifest must not make the node read,
//! append to or delete a file outside its AOF directory.
//!
//! Tests run as root, which ignores permission bits, so a "full disk" is made with a
//! file-size limit (`prlimit --fsize` on the running server: writes past it fail with EFBIG)
//! or with an AOF file that is a symlink to /dev/full (ENOSPC) or /dev/null (fsync EINVAL).
//! redis-server dies of SIGXFSZ past a file-size limit (only its fork child when saving), so
//! the comparisons with it use the symlinks; the file-size limit also shows that tessera-node
//! recovers once the file can grow again.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tessera_testkit::*;

const BGSAVE_MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

fn aof_misconf(reason: &str) -> String {
    format!("MISCONF Errors writing to the AOF file: {reason}")
}

/// The real redis-server first (it defines the expected behaviour), then tessera-node.
fn bins() -> [&'static str; 2] {
    [redis_bin(), tessera_bin()]
}

fn start(bin: &str, dir: &Path, args: &[&str]) -> Server {
    Launch::new(bin).dir(dir).logfile().args(args).start()
}

/// Sets the soft RLIMIT_FSIZE of a running process (`unlimited` lifts it).
fn set_fsize(pid: u32, limit: &str) {
    let st = Command::new("prlimit")
        .arg("--pid")
        .arg(pid.to_string())
        .arg(format!("--fsize={limit}:"))
        .status()
        .expect("run prlimit");
    assert!(st.success(), "prlimit --fsize={limit}: failed");
}

/// `n` incompressible bytes (LZF must not shrink the RDB below the file-size limit).
fn noise(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn alive(srv: &mut Server) -> bool {
    matches!(srv.child.try_wait(), Ok(None))
}

fn set_bytes(c: &mut Raw, key: &str, value: &[u8]) -> R {
    c.send(&encode(&[b"SET", key.as_bytes(), value]));
    c.read()
}

fn persistence(c: &mut Raw, field: &str) -> String {
    let info = c.cmd(&["INFO", "persistence"]).s();
    info_field(&info, field).unwrap_or_default()
}

fn err(s: &str) -> R {
    R::Err(s.to_string())
}

fn ok() -> R {
    R::Simple("OK".into())
}

/// Writes refused, reads served, PING refused (a master), a MULTI with a write refused at
/// queueing, a script refused at its write call.
fn assert_writes_refused(bin: &str, c: &mut Raw, misconf: &str, key: &str) {
    assert_eq!(c.cmd(&["SET", "a", "2"]), err(misconf), "{bin}: SET");
    assert_eq!(c.cmd(&["PING"]), err(misconf), "{bin}: PING");
    assert!(matches!(c.cmd(&["GET", key]), R::Bulk(_)), "{bin}: GET");
    assert_eq!(c.cmd(&["MULTI"]), ok(), "{bin}");
    assert_eq!(
        c.cmd(&["SET", "x", "1"]),
        err(misconf),
        "{bin}: SET in MULTI"
    );
    assert_eq!(c.cmd(&["GET", "x"]), R::Simple("QUEUED".into()), "{bin}");
    assert_eq!(
        c.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors."),
        "{bin}"
    );
    let r = c.cmd(&["EVAL", "return redis.call('set','k','v')", "0"]);
    assert!(
        matches!(&r, R::Err(e) if e.starts_with(misconf)),
        "{bin}: a script's write: {r:?}"
    );
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('get','k')", "0"]),
        R::Nil,
        "{bin}: a script's read"
    );
}

#[test]
fn failed_bgsave_refuses_writes_until_a_save_succeeds() {
    for bin in bins() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut srv = start(bin, dir.path(), &["--save", "3600 1", "--appendonly", "no"]);
        let mut c = Raw::connect(srv.port);
        let big = noise(100_000);
        assert_eq!(set_bytes(&mut c, "big", &big), ok(), "{bin}");
        let lib = "#!lua name=l\nredis.register_function('w', function() return 1 end)\n\
                   redis.register_function{function_name='r', callback=function() return 2 end, \
                   flags={'no-writes'}}";
        assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), R::Bulk(b"l".to_vec()));
        set_fsize(srv.pid(), "20000");
        assert_eq!(
            c.cmd(&["BGSAVE"]),
            R::Simple("Background saving started".into()),
            "{bin}"
        );
        wait_for(Duration::from_secs(20), "the failed BGSAVE", || {
            persistence(&mut c, "rdb_bgsave_in_progress") == "0"
                && persistence(&mut c, "rdb_last_bgsave_status") == "err"
        });
        assert!(alive(&mut srv), "{bin} died of the file-size limit");
        assert_writes_refused(bin, &mut c, BGSAVE_MISCONF, "big");
        assert_eq!(c.cmd(&["STRLEN", "big"]), R::Int(100_000), "{bin}");
        // Scripts and functions that declare writes are refused before they run.
        for (call, reply) in [
            (["FCALL", "w", "0"], err(BGSAVE_MISCONF)),
            (["FCALL_RO", "w", "0"], err(BGSAVE_MISCONF)),
            (["FCALL", "r", "0"], R::Int(2)),
            (["FCALL_RO", "r", "0"], R::Int(2)),
            (["EVAL", "#!lua\nreturn 1", "0"], err(BGSAVE_MISCONF)),
            (["EVAL_RO", "#!lua\nreturn 1", "0"], err(BGSAVE_MISCONF)),
            (["EVAL", "#!lua flags=no-writes\nreturn 1", "0"], R::Int(1)),
            (["EVAL_RO", "return 1", "0"], R::Int(1)),
        ] {
            assert_eq!(c.cmd(&call), reply, "{bin}: {call:?}");
        }
        // Only with stop-writes-on-bgsave-error and save points configured.
        for (name, off, on) in [
            ("stop-writes-on-bgsave-error", "no", "yes"),
            ("save", "", "3600 1"),
        ] {
            assert_eq!(c.cmd(&["CONFIG", "SET", name, off]), ok(), "{bin}");
            assert_eq!(c.cmd(&["SET", "a", "1"]), ok(), "{bin}: {name} {off}");
            assert_eq!(c.cmd(&["CONFIG", "SET", name, on]), ok(), "{bin}");
            assert_eq!(
                c.cmd(&["SET", "a", "1"]),
                err(BGSAVE_MISCONF),
                "{bin}: {name} {on}"
            );
        }
        // A save that succeeds clears the condition.
        set_fsize(srv.pid(), "unlimited");
        assert_eq!(
            c.cmd(&["BGSAVE"]),
            R::Simple("Background saving started".into()),
            "{bin}"
        );
        wait_for(Duration::from_secs(20), "the good BGSAVE", || {
            persistence(&mut c, "rdb_bgsave_in_progress") == "0"
                && persistence(&mut c, "rdb_last_bgsave_status") == "ok"
        });
        assert_eq!(c.cmd(&["SET", "a", "3"]), ok(), "{bin}");
        assert_eq!(c.cmd(&["PING"]), R::Simple("PONG".into()), "{bin}");
    }
}

/// The AOF directory's incremental file, from the manifest (redis and tessera-node name it
/// alike).
fn incr_file(dir: &Path) -> PathBuf {
    let aof = dir.join("appendonlydir");
    let text = std::fs::read_to_string(aof.join("appendonly.aof.manifest")).expect("manifest");
    let line = text
        .lines()
        .find(|l| l.ends_with("type i"))
        .expect("an incr file in the manifest");
    let name = line.split_whitespace().nth(1).expect("file name");
    aof.join(name)
}

/// Starts `bin` with `appendonly yes` in a fresh dir to create its AOF, stops it, and
/// replaces the incremental file with a symlink to `dev`.
fn aof_on_device(bin: &str, dev: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let _srv = start(bin, dir.path(), &["--save", "", "--appendonly", "yes"]);
    }
    let incr = incr_file(dir.path());
    std::fs::remove_file(&incr).expect("remove incr");
    std::os::unix::fs::symlink(dev, &incr).expect("symlink");
    dir
}

#[test]
fn aof_on_a_full_disk_refuses_writes() {
    for bin in bins() {
        let dir = aof_on_device(bin, "/dev/full");
        let srv = start(bin, dir.path(), &["--save", "", "--appendonly", "yes"]);
        let mut c = Raw::connect(srv.port);
        // A transaction queued before the disk filled up is discarded at EXEC.
        let mut t = Raw::connect(srv.port);
        assert_eq!(t.cmd(&["MULTI"]), ok(), "{bin}");
        assert_eq!(t.cmd(&["SET", "x", "1"]), R::Simple("QUEUED".into()));
        // The write that fails to reach the file was already applied: it is answered.
        assert_eq!(c.cmd(&["SET", "a", "1"]), ok(), "{bin}");
        wait_for(Duration::from_secs(10), "aof_last_write_status:err", || {
            persistence(&mut c, "aof_last_write_status") == "err"
        });
        assert_writes_refused(bin, &mut c, &aof_misconf("No space left on device"), "a");
        assert_eq!(
            t.cmd(&["EXEC"]),
            err(&format!(
                "EXECABORT Transaction discarded because of: {}",
                aof_misconf("No space left on device")
            )),
            "{bin}"
        );
        assert_eq!(t.cmd(&["EXEC"]), err("ERR EXEC without MULTI"), "{bin}");
        assert_eq!(c.cmd(&["GET", "a"]), R::Bulk(b"1".to_vec()), "{bin}");
    }
}

#[test]
fn aof_write_error_clears_once_the_file_can_grow() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = [
        "--save",
        "",
        "--appendonly",
        "yes",
        "--aof-load-truncated",
        "no",
    ];
    let mut srv = start(tessera_bin(), dir.path(), &args);
    let mut c = Raw::connect(srv.port);
    assert_eq!(c.cmd(&["SET", "small", "1"]), ok());
    set_fsize(srv.pid(), "20000");
    let big = noise(100_000);
    assert_eq!(set_bytes(&mut c, "big", &big), ok());
    assert_eq!(persistence(&mut c, "aof_last_write_status"), "err");
    assert!(alive(&mut srv), "tessera-node died of the file-size limit");
    assert_writes_refused(
        "tessera-node",
        &mut c,
        &aof_misconf("File too large"),
        "big",
    );
    // The write is retried (once a second) and succeeds once the limit is lifted.
    set_fsize(srv.pid(), "unlimited");
    wait_for(Duration::from_secs(10), "aof_last_write_status:ok", || {
        persistence(&mut c, "aof_last_write_status") == "ok"
    });
    assert_eq!(c.cmd(&["SET", "after", "1"]), ok());
    // Nothing was lost or half-written: the AOF replays (truncated tails refused).
    srv.restart();
    let mut c = Raw::connect(srv.port);
    assert_eq!(c.cmd(&["GET", "big"]), R::Bulk(big));
    assert_eq!(c.cmd(&["GET", "after"]), R::Bulk(b"1".to_vec()));
    assert_eq!(c.cmd(&["GET", "small"]), R::Bulk(b"1".to_vec()));
}

#[test]
fn aof_fsync_error_refuses_writes() {
    // fsync of /dev/null fails with EINVAL. redis-server ignores EINVAL from its background
    // fsync (a closed and reused descriptor in its case); tessera-node has no such race and
    // treats every failed fsync as data not on disk.
    let dir = aof_on_device(tessera_bin(), "/dev/null");
    let srv = start(
        tessera_bin(),
        dir.path(),
        &[
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
        ],
    );
    let mut c = Raw::connect(srv.port);
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    wait_for(Duration::from_secs(10), "aof_last_write_status:err", || {
        persistence(&mut c, "aof_last_write_status") == "err"
    });
    assert_writes_refused(
        "tessera-node",
        &mut c,
        &aof_misconf("Invalid argument"),
        "a",
    );
}

#[test]
fn appendfsync_always_never_acknowledges_an_unpersisted_write() {
    for (dev, message) in [
        (
            "/dev/full",
            "Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...",
        ),
        (
            "/dev/null",
            "Can't persist AOF for fsync error when the AOF fsync policy is 'always': Invalid argument. Exiting...",
        ),
    ] {
        for bin in bins() {
            let dir = aof_on_device(bin, dev);
            let mut srv = start(
                bin,
                dir.path(),
                &["--save", "", "--appendonly", "yes", "--appendfsync", "always"],
            );
            let mut c = Raw::connect(srv.port);
            c.send(&encode(&[b"SET", b"a", b"1"]));
            let r = c.read();
            assert_eq!(r, R::Other(0, String::new()), "{bin} {dev}: answered {r:?}");
            let st = srv.wait_exit(Duration::from_secs(20));
            assert_eq!(st.and_then(|s| s.code()), Some(1), "{bin} {dev}: exit");
            let log = log_tail(&dir.path().join("log"), 20);
            assert!(log.contains(message), "{bin} {dev}: log:\n{log}");
        }
    }
}

#[test]
fn aof_manifest_naming_a_path_is_refused() {
    let outside = tempfile::tempdir().expect("tempdir");
    let abs_victim = outside.path().join("victim");
    for bin in bins() {
        for victim in ["../victim".to_string(), abs_victim.display().to_string()] {
            let dir = tempfile::tempdir().expect("tempdir");
            let aof = dir.path().join("appendonlydir");
            std::fs::create_dir(&aof).expect("mkdir");
            let victim_path = aof.join(&victim);
            std::fs::write(&victim_path, "precious").expect("victim");
            std::fs::write(
                aof.join("appendonly.aof.1.base.aof"),
                encode(&[b"SET", b"k", b"v"]),
            )
            .expect("base");
            std::fs::write(aof.join("appendonly.aof.1.incr.aof"), "").expect("incr");
            // A history entry: the next rewrite would delete it.
            std::fs::write(
                aof.join("appendonly.aof.manifest"),
                format!(
                    "file appendonly.aof.1.base.aof seq 1 type b\n\
                     file {victim} seq 1 type h\n\
                     file appendonly.aof.1.incr.aof seq 1 type i\n"
                ),
            )
            .expect("manifest");
            let st = Launch::new(bin)
                .logfile()
                .args(&["--save", "", "--appendonly", "yes"])
                .run_to_exit(dir.path(), Duration::from_secs(20))
                .status;
            assert_eq!(
                std::fs::read_to_string(&victim_path).ok().as_deref(),
                Some("precious"),
                "{bin} {victim}: victim touched"
            );
            assert!(
                st.is_some_and(|s| !s.success()),
                "{bin} {victim}: started with a manifest naming a path"
            );
            let log = log_tail(&dir.path().join("log"), 20);
            assert!(
                log.contains("File can't be a path, just a filename")
                    && log.contains(&format!(">>> 'file {victim} seq 1 type h'")),
                "{bin} {victim}: log:\n{log}"
            );
        }
    }
}

#[test]
fn aof_names_from_the_config_must_be_bare() {
    for (directive, message) in [
        (
            "--appendfilename",
            "appendfilename can't be a path, just a filename",
        ),
        (
            "--appenddirname",
            "appenddirname can't be a path, just a dirname",
        ),
    ] {
        for bin in bins() {
            let dir = tempfile::tempdir().expect("tempdir");
            let data = dir.path().join("data");
            std::fs::create_dir(&data).expect("mkdir");
            let exit = Launch::new(bin)
                .args(&["--save", "", "--appendonly", "yes", directive, "../x"])
                .run_to_exit(&data, Duration::from_secs(20));
            let (st, text) = (exit.status, exit.output);
            assert!(
                st.is_some_and(|s| !s.success()),
                "{bin} {directive}: started"
            );
            assert!(text.contains(message), "{bin} {directive}: output:\n{text}");
            let outside: Vec<_> = std::fs::read_dir(dir.path())
                .expect("read dir")
                .filter_map(|e| e.ok())
                .map(|e| e.file_name())
                .filter(|n| n != "data")
                .collect();
            assert!(outside.is_empty(), "{bin} {directive}: wrote {outside:?}");
        }
    }
}
