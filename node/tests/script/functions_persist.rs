//! Function libraries outside one server's memory: FUNCTION DUMP / RESTORE both ways with
//! redis-server 7.0, RDB files both ways (redis-check-rdb accepts ours), SAVE + restart,
//! the AOF (RDB and RESP bases), and replication to tessera and redis-server replicas.

use std::path::Path;
use std::time::Duration;

use tessera_testkit::*;

fn start(bin: &str, dir: &Path, extra: &[&str]) -> Server {
    Launch::new(bin).dir(dir).args(extra).start()
}

fn conn(s: &Server) -> redis::Connection {
    let c = redis::Client::open(format!("redis://127.0.0.1:{}/", s.port)).expect("client");
    let con = c.get_connection().expect("connect");
    con.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    con
}

/// A library long enough for redis to LZF-compress it in RDB files and DUMP payloads.
const LIB_A: &str = "#!lua name=liba
-- a comment to make this library long enough to be compressed by redis: aaaaaaaaaaaaaaaa
redis.register_function('seta', function(keys, args) return redis.call('set', keys[1], args[1]) end)
redis.register_function{function_name='geta', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads'}
";
const LIB_B: &str = "#!lua name=libb\nredis.register_function('incrb', function(k) return redis.call('incr', k[1]) end)";

fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&[u8]]) -> redis::RedisResult<T> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).expect("name"));
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

fn load(c: &mut redis::Connection, code: &str) {
    let name: String = q(c, &[b"FUNCTION", b"LOAD", code.as_bytes()]).expect("FUNCTION LOAD");
    assert!(code.contains(&format!("name={name}")));
}

fn dump(c: &mut redis::Connection) -> Vec<u8> {
    q(c, &[b"FUNCTION", b"DUMP"]).expect("FUNCTION DUMP")
}

fn restore(c: &mut redis::Connection, payload: &[u8], policy: &str) -> Result<String, String> {
    let mut args: Vec<&[u8]> = vec![b"FUNCTION", b"RESTORE", payload];
    if !policy.is_empty() {
        args.push(policy.as_bytes());
    }
    q::<String>(c, &args).map_err(|e| {
        format!(
            "{} {}",
            e.code().unwrap_or("?"),
            e.detail().unwrap_or_default()
        )
    })
}

/// FUNCTION LIST WITHCODE as sorted text, functions sorted inside each library (redis
/// lists both in hash order).
fn listing(c: &mut redis::Connection) -> Vec<String> {
    let v: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("WITHCODE")
        .query(c)
        .expect("FUNCTION LIST");
    let redis::Value::Array(libs) = v else {
        panic!("FUNCTION LIST: {v:?}");
    };
    let mut out: Vec<String> = libs
        .into_iter()
        .map(|l| {
            let redis::Value::Array(mut fields) = l else {
                panic!("library: {l:?}");
            };
            if let Some(redis::Value::Array(funcs)) = fields.get_mut(5) {
                funcs.sort_by_key(|f| format!("{f:?}"));
            }
            format!("{fields:?}")
        })
        .collect();
    out.sort();
    out
}

/// Both libraries work on `c`: writes through one, reads through the other.
fn works(c: &mut redis::Connection, tag: &str) {
    let r: String = redis::cmd("FCALL")
        .arg("seta")
        .arg(1)
        .arg("fk")
        .arg(tag)
        .query(c)
        .expect("FCALL seta");
    assert_eq!(r, "OK");
    let v: String = redis::cmd("FCALL_RO")
        .arg("geta")
        .arg(1)
        .arg("fk")
        .query(c)
        .expect("FCALL_RO geta");
    assert_eq!(v, tag);
    let n: i64 = redis::cmd("FCALL")
        .arg("incrb")
        .arg(1)
        .arg("fn")
        .query(c)
        .expect("FCALL incrb");
    assert!(n >= 1);
}

#[test]
fn dump_restore_both_ways_with_redis() {
    let (d1, d2, d3) = (tempdir(), tempdir(), tempdir());
    let r = start(
        redis_bin(),
        d1.path(),
        &["--save", "", "--appendonly", "no"],
    );
    let t = start(tessera_bin(), d2.path(), &["--save", ""]);
    let r2 = start(
        redis_bin(),
        d3.path(),
        &["--save", "", "--appendonly", "no"],
    );
    let (mut rc, mut tc, mut r2c) = (conn(&r), conn(&t), conn(&r2));
    load(&mut rc, LIB_A);
    load(&mut rc, LIB_B);
    let from_redis = dump(&mut rc);
    assert_eq!(restore(&mut tc, &from_redis, ""), Ok("OK".into()));
    works(&mut tc, "t1");
    assert_eq!(listing(&mut tc), listing(&mut rc));
    // Our payload restores into redis-server.
    let ours = dump(&mut tc);
    assert_eq!(restore(&mut r2c, &ours, ""), Ok("OK".into()));
    works(&mut r2c, "r1");
    assert_eq!(listing(&mut r2c), listing(&mut rc));
    // Policies and errors, the same on both servers.
    let mut bad = ours.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    let key_dump: Vec<u8> = {
        let _: () = redis::cmd("SET")
            .arg("s")
            .arg("v")
            .query(&mut rc)
            .expect("SET");
        redis::cmd("DUMP").arg("s").query(&mut rc).expect("DUMP")
    };
    for (payload, policy) in [
        (&ours, ""),
        (&ours, "APPEND"),
        (&ours, "replace"),
        (&ours, "FLUSH"),
        (&bad, ""),
        (&key_dump, ""),
        (&ours, "bogus"),
    ] {
        // Which of the two libraries redis finds first depends on its hash seed.
        let unnamed = |r: Result<String, String>| r.map_err(|e| e.replace("libb", "liba"));
        let a = unnamed(restore(&mut tc, payload, policy));
        let b = unnamed(restore(&mut r2c, payload, policy));
        assert_eq!(a, b, "FUNCTION RESTORE {policy}");
    }
    // A conflicting function name in another library stops the whole restore.
    let clash = "#!lua name=clash\nredis.register_function('incrb', function() return 0 end)";
    let _: String = q(&mut rc, &[b"FUNCTION", b"FLUSH"]).expect("flush");
    load(&mut rc, clash);
    let clash_dump = dump(&mut rc);
    let a = restore(&mut tc, &clash_dump, "");
    let b = restore(&mut r2c, &clash_dump, "");
    assert_eq!(a, b);
    assert!(a.is_err());
    assert_eq!(listing(&mut tc), listing(&mut r2c));
    // An empty registry dumps the same bytes.
    for c in [&mut tc, &mut rc] {
        let _: String = q(c, &[b"FUNCTION", b"FLUSH"]).expect("flush");
    }
    assert_eq!(dump(&mut tc), dump(&mut rc));
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

#[test]
fn rdb_files_both_ways_and_restart() {
    let (d1, d2, d3) = (tempdir(), tempdir(), tempdir());
    {
        let r = start(
            redis_bin(),
            d1.path(),
            &["--save", "", "--appendonly", "no"],
        );
        let mut rc = conn(&r);
        load(&mut rc, LIB_A);
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query(&mut rc)
            .expect("SET");
        let _: String = redis::cmd("SAVE").query(&mut rc).expect("SAVE");
    }
    std::fs::copy(d1.path().join("dump.rdb"), d2.path().join("dump.rdb")).expect("copy");
    let mut t = start(tessera_bin(), d2.path(), &["--save", ""]);
    let mut tc = conn(&t);
    let v: String = redis::cmd("FCALL_RO")
        .arg("geta")
        .arg(1)
        .arg("k")
        .query(&mut tc)
        .expect("FCALL_RO after loading redis's RDB");
    assert_eq!(v, "v");
    load(&mut tc, LIB_B);
    works(&mut tc, "saved");
    let before = listing(&mut tc);
    let _: String = redis::cmd("SAVE").query(&mut tc).expect("SAVE");
    t.restart();
    let mut tc = conn(&t);
    assert_eq!(listing(&mut tc), before, "libraries after SAVE + restart");
    works(&mut tc, "again");
    let _: String = redis::cmd("SAVE").query(&mut tc).expect("SAVE");
    let rdb = d2.path().join("dump.rdb");
    let check = tessera_testkit::output_within(
        std::process::Command::new(tessera_testkit::bins::tool("redis-check-rdb")).arg(&rdb),
        std::time::Duration::from_secs(60),
    );
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success() && text.contains("RDB looks OK"),
        "{text}"
    );
    // redis-server loads our file, libraries included.
    std::fs::copy(&rdb, d3.path().join("dump.rdb")).expect("copy");
    let r = start(
        redis_bin(),
        d3.path(),
        &["--save", "", "--appendonly", "no"],
    );
    let mut rc = conn(&r);
    assert_eq!(listing(&mut rc), before);
    let v: String = redis::cmd("FCALL_RO")
        .arg("geta")
        .arg(1)
        .arg("fk")
        .query(&mut rc)
        .expect("FCALL_RO in redis");
    assert_eq!(v, "again");
}

#[test]
fn a_library_that_fails_stops_the_load() {
    let d = tempdir();
    // A well-formed RDB whose library registers an invalid function name.
    let mut w = tessera_rdb::RdbWriter::new(Vec::new()).expect("writer");
    w.standard_aux(&tessera_rdb::AuxInfo::default())
        .expect("aux");
    w.function(b"#!lua name=broken\nredis.register_function('in-rb', function() return 1 end)")
        .expect("function");
    std::fs::write(d.path().join("dump.rdb"), w.finish().expect("finish")).expect("write");
    // Output to a file and a bounded wait: a node that wrongly starts must not hang us.
    let exit = Launch::new(tessera_bin())
        .args(&["--save", ""])
        .run_to_exit(d.path(), Duration::from_secs(60));
    let (status, text) = (exit.status, exit.output);
    assert!(
        status.is_some_and(|s| !s.success()),
        "the node must refuse the file: {text}"
    );
    assert!(
        text.contains("broken") && text.contains("Library names can only contain"),
        "the error names the library and the reason: {text}"
    );
}

#[test]
fn aof_keeps_libraries_with_both_base_formats() {
    for preamble in ["yes", "no"] {
        let d = tempdir();
        let args = [
            "--save",
            "",
            "--appendonly",
            "yes",
            "--aof-use-rdb-preamble",
            preamble,
        ];
        let mut t = start(tessera_bin(), d.path(), &args);
        let mut tc = conn(&t);
        load(&mut tc, LIB_A);
        load(&mut tc, LIB_B);
        works(&mut tc, "aof1");
        let _: String = q(&mut tc, &[b"FUNCTION", b"DELETE", b"libb"]).expect("DELETE");
        t.restart();
        let mut tc = conn(&t);
        let names = listing(&mut tc);
        assert_eq!(
            names.len(),
            1,
            "liba only, after replaying the AOF: {names:?}"
        );
        load(&mut tc, LIB_B);
        let before = listing(&mut tc);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut tc).expect("rewrite");
        wait_for(Duration::from_secs(60), "AOF rewrite", || {
            let i: String = redis::cmd("INFO")
                .arg("persistence")
                .query(&mut tc)
                .unwrap_or_default();
            info_field(&i, "aof_rewrite_in_progress").as_deref() == Some("0")
                && info_field(&i, "aof_rewrites").as_deref() == Some("1")
        });
        t.restart();
        let mut tc = conn(&t);
        assert_eq!(listing(&mut tc), before, "preamble {preamble}");
        works(&mut tc, "aof2");
    }
}

fn replicate(replica: &Server, master: &Server) {
    let mut c = conn(replica);
    let _: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port)
        .query(&mut c)
        .expect("REPLICAOF");
    wait_for(Duration::from_secs(60), "master_link_status:up", || {
        let i: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut c)
            .unwrap_or_default();
        info_field(&i, "master_link_status").as_deref() == Some("up")
    });
}

fn wait_value(c: &mut redis::Connection, key: &str, want: &str) {
    wait_for(Duration::from_secs(60), key, || {
        redis::cmd("GET")
            .arg(key)
            .query::<Option<String>>(c)
            .ok()
            .flatten()
            .as_deref()
            == Some(want)
    });
}

/// A master with LIB_A (loaded before the replicas attach when `before_sync`) and
/// replicas from tessera and redis-server: libraries and FCALL effects reach them.
fn replicas_get_libraries(before_sync: bool) {
    let (dm, d1, d2) = (tempdir(), tempdir(), tempdir());
    let m = start(tessera_bin(), dm.path(), &["--save", ""]);
    let mut mc = conn(&m);
    if before_sync {
        load(&mut mc, LIB_A);
    }
    let mut replicas = vec![start(tessera_bin(), d1.path(), &["--save", ""])];
    {
        replicas.push(start(
            redis_bin(),
            d2.path(),
            &["--save", "", "--appendonly", "no"],
        ));
    }
    for r in &replicas {
        replicate(r, &m);
    }
    if !before_sync {
        load(&mut mc, LIB_A);
    }
    // Loaded after the sync: propagated as sent.
    load(&mut mc, LIB_B);
    works(&mut mc, "m1");
    let _: i64 = redis::cmd("FCALL")
        .arg("incrb")
        .arg(1)
        .arg("last")
        .query(&mut mc)
        .expect("FCALL");
    let want = listing(&mut mc);
    for r in &replicas {
        let mut rc = conn(r);
        wait_value(&mut rc, "last", "1");
        assert_eq!(listing(&mut rc), want, "replica {}", r.bin());
        let v: String = redis::cmd("GET").arg("fk").query(&mut rc).expect("GET");
        assert_eq!(v, "m1");
        // A write function is refused on a read-only replica; a no-writes one runs.
        let e = redis::cmd("FCALL")
            .arg("seta")
            .arg(1)
            .arg("x")
            .arg("y")
            .query::<String>(&mut rc)
            .expect_err("write function on a replica");
        assert_eq!(e.code(), Some("READONLY"), "{e}");
        let v: String = redis::cmd("FCALL")
            .arg("geta")
            .arg(1)
            .arg("fk")
            .query(&mut rc)
            .expect("no-writes function on a replica");
        assert_eq!(v, "m1");
    }
    let _: String = q(&mut mc, &[b"FUNCTION", b"DELETE", b"liba"]).expect("DELETE");
    let _: () = redis::cmd("SET")
        .arg("marker")
        .arg("2")
        .query(&mut mc)
        .expect("SET");
    let want = listing(&mut mc);
    for r in &replicas {
        let mut rc = conn(r);
        wait_value(&mut rc, "marker", "2");
        assert_eq!(listing(&mut rc), want, "after DELETE on {}", r.bin());
    }
}

#[test]
fn replicas_get_function_commands_and_effects() {
    replicas_get_libraries(false);
}

/// Libraries loaded before a replica attaches reach it through the full sync's RDB
/// (repl/master.rs writes FUNCTION2 records like dump.rdb).
#[test]
fn full_sync_carries_libraries() {
    replicas_get_libraries(true);
}

/// redis-server master with a library before the replica attaches: its full-sync RDB
/// carries the library to a tessera replica, then FUNCTION LOAD and FCALL's effects stream.
#[test]
fn redis_master_full_sync_carries_libraries_to_tessera() {
    let (dm, dr) = (tempdir(), tempdir());
    let m = start(
        redis_bin(),
        dm.path(),
        &["--save", "", "--appendonly", "no"],
    );
    let mut mc = conn(&m);
    load(&mut mc, LIB_A);
    let r = start(tessera_bin(), dr.path(), &["--save", ""]);
    // A library the master does not have: the full sync replaces it.
    let mut rc = conn(&r);
    load(
        &mut rc,
        "#!lua name=stray\nredis.register_function('stray', function() return 1 end)",
    );
    replicate(&r, &m);
    load(&mut mc, LIB_B);
    works(&mut mc, "rm");
    let _: () = redis::cmd("SET")
        .arg("marker")
        .arg("1")
        .query(&mut mc)
        .expect("SET");
    let mut rc = conn(&r);
    wait_value(&mut rc, "marker", "1");
    assert_eq!(listing(&mut rc), listing(&mut mc));
    let v: String = redis::cmd("FCALL_RO")
        .arg("geta")
        .arg(1)
        .arg("fk")
        .query(&mut rc)
        .expect("FCALL_RO on the replica");
    assert_eq!(v, "rm");
}
