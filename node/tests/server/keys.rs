use std::collections::HashSet;
use std::time::{Duration, Instant};

use tessera_testkit::{Node, R};

#[test]
fn del_exists_type_rename_copy_move() {
    let n = Node::start();
    let mut c = n.raw();
    c.cmd(&["MSET", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(c.cmd(&["EXISTS", "a", "a", "zz"]), R::Int(2));
    assert_eq!(c.cmd(&["DEL", "a", "zz"]), R::Int(1));
    assert_eq!(c.cmd(&["UNLINK", "b"]), R::Int(1));
    assert_eq!(c.cmd(&["TYPE", "c"]), R::Simple("string".into()));
    assert_eq!(c.cmd(&["TYPE", "a"]), R::Simple("none".into()));
    assert_eq!(
        c.cmd(&["RENAME", "nokey", "x"]),
        R::Err("ERR no such key".into())
    );
    c.cmd(&["EXPIRE", "c", "100"]);
    assert_eq!(c.cmd(&["RENAME", "c", "d"]), R::Simple("OK".into()));
    assert_eq!(c.cmd(&["TTL", "d"]), R::Int(100));
    c.cmd(&["SET", "e", "5"]);
    assert_eq!(c.cmd(&["RENAMENX", "d", "e"]), R::Int(0));
    assert_eq!(c.cmd(&["RENAMENX", "d", "f"]), R::Int(1));
    assert_eq!(c.cmd(&["COPY", "f", "g"]), R::Int(1));
    assert_eq!(c.cmd(&["COPY", "f", "g"]), R::Int(0));
    assert_eq!(c.cmd(&["COPY", "f", "g", "REPLACE"]), R::Int(1));
    assert_eq!(
        c.cmd(&["COPY", "f", "f"]),
        R::Err("ERR source and destination objects are the same".into())
    );
    assert_eq!(c.cmd(&["COPY", "f", "f", "DB", "3"]), R::Int(1));
    assert_eq!(c.cmd(&["MOVE", "g", "2"]), R::Int(1));
    assert_eq!(c.cmd(&["EXISTS", "g"]), R::Int(0));
    assert_eq!(c.cmd(&["SELECT", "2"]), R::Simple("OK".into()));
    assert_eq!(c.cmd(&["GET", "g"]), R::Bulk(b"3".to_vec()));
    assert_eq!(c.cmd(&["SELECT", "3"]), R::Simple("OK".into()));
    assert_eq!(c.cmd(&["GET", "f"]), R::Bulk(b"3".to_vec()));
    assert_eq!(
        c.cmd(&["SELECT", "16"]),
        R::Err("ERR DB index is out of range".into())
    );
    assert_eq!(c.cmd(&["SWAPDB", "3", "0"]), R::Simple("OK".into()));
    assert_eq!(c.cmd(&["GET", "f"]), R::Bulk(b"3".to_vec()));
    assert_eq!(c.cmd(&["DBSIZE"]), R::Int(2));
}

#[test]
fn expire_options_and_ttls() {
    let n = Node::start();
    let mut c = n.raw();
    c.cmd(&["SET", "k", "v"]);
    assert_eq!(c.cmd(&["TTL", "k"]), R::Int(-1));
    assert_eq!(c.cmd(&["TTL", "nokey"]), R::Int(-2));
    assert_eq!(c.cmd(&["EXPIRE", "k", "100", "XX"]), R::Int(0));
    assert_eq!(c.cmd(&["EXPIRE", "k", "100", "GT"]), R::Int(0));
    assert_eq!(c.cmd(&["EXPIRE", "k", "100", "NX"]), R::Int(1));
    assert_eq!(c.cmd(&["EXPIRE", "k", "200", "NX"]), R::Int(0));
    assert_eq!(c.cmd(&["EXPIRE", "k", "50", "GT"]), R::Int(0));
    assert_eq!(c.cmd(&["EXPIRE", "k", "200", "GT"]), R::Int(1));
    assert_eq!(c.cmd(&["EXPIRE", "k", "300", "LT"]), R::Int(0));
    assert_eq!(c.cmd(&["EXPIRE", "k", "150", "LT"]), R::Int(1));
    assert_eq!(c.cmd(&["TTL", "k"]), R::Int(150));
    assert_eq!(
        c.cmd(&["EXPIRE", "k", "1", "NX", "XX"]),
        R::Err("ERR NX and XX, GT or LT options at the same time are not compatible".into())
    );
    assert_eq!(
        c.cmd(&["EXPIRE", "k", "1", "GT", "LT"]),
        R::Err("ERR GT and LT options at the same time are not compatible".into())
    );
    assert_eq!(
        c.cmd(&["EXPIRE", "k", "1", "FOO"]),
        R::Err("ERR Unsupported option FOO".into())
    );
    assert_eq!(c.cmd(&["PERSIST", "k"]), R::Int(1));
    assert_eq!(c.cmd(&["PERSIST", "k"]), R::Int(0));
    assert_eq!(c.cmd(&["EXPIREAT", "k", "4102444800"]), R::Int(1));
    assert_eq!(c.cmd(&["EXPIRETIME", "k"]), R::Int(4102444800));
    assert_eq!(c.cmd(&["PEXPIRETIME", "k"]), R::Int(4102444800000));
    assert_eq!(c.cmd(&["PEXPIRE", "k", "-1"]), R::Int(1));
    assert_eq!(c.cmd(&["EXISTS", "k"]), R::Int(0));
    // Lazy expiry on access.
    c.cmd(&["SET", "short", "v", "PX", "50"]);
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(c.cmd(&["GET", "short"]), R::Nil);
}

#[test]
fn active_expiry_reclaims_keys() {
    let n = Node::start();
    let mut con = n.client();
    let mut pipe = redis::pipe();
    for i in 0..20_000 {
        pipe.cmd("SET")
            .arg(format!("exp:{i}"))
            .arg("x")
            .arg("PX")
            .arg(200)
            .ignore();
    }
    pipe.cmd("SET").arg("keep").arg("1").ignore();
    let _: () = pipe.query(&mut con).unwrap();
    // No key is read: only the active cycle can remove them.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
        if n == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "active expiry left {n} keys");
        std::thread::sleep(Duration::from_millis(100));
    }
    let info: String = redis::cmd("INFO").arg("stats").query(&mut con).unwrap();
    assert!(info.contains("expired_keys:20000"), "{info}");
}

#[test]
fn keys_scan_randomkey_touch() {
    let n = Node::start();
    let mut con = n.client();
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("SET").arg(format!("user:{i}")).arg(i).ignore();
    }
    pipe.cmd("SET").arg("other").arg(1).ignore();
    let _: () = pipe.query(&mut con).unwrap();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("user:1??").query(&mut con).unwrap();
    keys.sort();
    assert_eq!(keys.len(), 100);
    // SCAN returns every key exactly once over the full iteration (keys present all along),
    // even while other keys are added and removed.
    let mut seen = HashSet::new();
    let mut cursor = 0u64;
    let mut calls = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("user:*")
            .arg("COUNT")
            .arg(50)
            .query(&mut con)
            .unwrap();
        for k in batch {
            seen.insert(k);
        }
        let _: () = redis::cmd("SET")
            .arg(format!("churn:{calls}"))
            .arg(1)
            .query(&mut con)
            .unwrap();
        calls += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
        assert!(calls < 10_000);
    }
    assert_eq!(seen.len(), 1000);
    let (_, typed): (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("TYPE")
        .arg("hash")
        .arg("COUNT")
        .arg(100000)
        .query(&mut con)
        .unwrap();
    assert!(typed.is_empty());
    let rk: Option<String> = redis::cmd("RANDOMKEY").query(&mut con).unwrap();
    assert!(rk.is_some());
    let t: i64 = redis::cmd("TOUCH")
        .arg("user:1")
        .arg("user:2")
        .arg("nope")
        .query(&mut con)
        .unwrap();
    assert_eq!(t, 2);
    let _: () = redis::cmd("FLUSHDB").query(&mut con).unwrap();
    let rk: Option<String> = redis::cmd("RANDOMKEY").query(&mut con).unwrap();
    assert!(rk.is_none());
}
