//! integration/redis-cli "Dumping an RDB - functions only: yes" (issue 18): `redis-cli
//! --functions-rdb` asks with REPLCONF rdb-filter-only functions for an RDB of the function
//! libraries only; loaded back it gives the libraries and no keys. Compared with redis-server
//! (disk-based and diskless masters alike).

use std::time::Duration;

use tessera_testkit::*;

/// Dumps `kind`'s dataset with redis-cli --functions-rdb, then loads the file in a fresh
/// server of the same kind: (cli succeeded, DBSIZE, FUNCTION LIST).
fn dump_and_load(kind: fn() -> Launch, diskless: &str) -> (bool, Reply, Reply) {
    let s = kind()
        .args(&["--save", "", "--repl-diskless-sync", diskless])
        .start();
    let mut c = s.resp();
    for i in 0..200 {
        c.cmd(&["SET", &format!("key:{i}"), "value"]);
    }
    let lib = "#!lua name=lib1\nredis.register_function('func1', function() return 123 end)";
    assert_eq!(
        c.cmd(&["FUNCTION", "LOAD", lib]),
        Reply::Bulk(b"lib1".to_vec())
    );
    let out_dir = tempfile::tempdir().expect("tempdir");
    let file = out_dir.path().join("dump.rdb");
    let o = cli::cli_out(
        &["-h", &s.ip, "-p", &s.port.to_string()],
        &["--functions-rdb", &file.display().to_string()],
    );
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let ok = text.contains("Transfer finished with success");
    let loaded = kind().dir(out_dir.path()).args(&["--save", ""]).start();
    let mut l = loaded.resp();
    wait_until("loaded", Duration::from_secs(10), || {
        loaded.info("persistence", "loading").as_deref() == Some("0")
    });
    (ok, l.cmd(&["DBSIZE"]), l.cmd(&["FUNCTION", "LIST"]))
}

#[test]
fn functions_only_rdb_like_redis() {
    for diskless in ["no", "yes"] {
        let r = dump_and_load(Launch::redis, diskless);
        let t = dump_and_load(Launch::tessera, diskless);
        assert_eq!(
            t, r,
            "repl-diskless-sync {diskless}: tessera (left) vs redis (right)"
        );
        assert_eq!(r.1, Reply::Int(0));
    }
}
