//! Redis 7.0 compatibility of encodings and their directives, differential against
//! redis-server 7.0: a non-integer set is "hashtable" (no set listpack before 7.2, and no
//! set-max-listpack-* directives), hash-max-listpack-entries defaults to 512, and the cached
//! encoding limits follow CONFIG SET on every connection.

use tessera_testkit::diff::*;

#[test]
fn set_and_hash_encodings_match_redis_7_0() {
    diff_script(
        "encodings",
        r#"
        sadd ints 1 2 3
        object encoding ints
        sadd small a b c
        object encoding small
        sadd ints x
        object encoding ints
        sadd mixed 1 01
        object encoding mixed
        srem small a b c
        exists small
        config get set-max-listpack-entries
        config get set-max-listpack-value
        config set set-max-listpack-entries 5
        config get set-max-intset-entries
        config get hash-max-listpack-entries
        config get hash-max-listpack-value
        config get zset-max-listpack-entries
        config get list-max-listpack-size
        hset h f v
        object encoding h
        config set set-max-intset-entries 2
        sadd si 1 2
        object encoding si
        sadd si 3
        object encoding si
        config set set-max-intset-entries 512
        "#,
    );
}

/// 300 fields: a listpack under 7.0's default of 512 (it was 128 here before), a hashtable
/// once CONFIG SET lowers the limit (the limits snapshot is refreshed for every I/O thread).
#[test]
fn hash_listpack_limit_default_and_config_set() {
    let t = tessera();
    let mut a = Conn::connect(t.port);
    let mut fields: Vec<String> = vec!["HSET".into(), "big".into()];
    for i in 0..300 {
        fields.push(format!("f{i}"));
        fields.push("v".into());
    }
    let args: Vec<&str> = fields.iter().map(String::as_str).collect();
    assert_eq!(a.cmd(&args), Reply::Int(300));
    let enc = |c: &mut Conn, k: &str| c.cmd(&["OBJECT", "ENCODING", k]);
    assert_eq!(enc(&mut a, "big"), Reply::Bulk(b"listpack".to_vec()));
    assert_eq!(
        a.cmd(&["CONFIG", "SET", "hash-max-listpack-entries", "2"]),
        Reply::Simple("OK".into())
    );
    // Several connections (possibly on different I/O threads) see the new limit.
    for i in 0..8 {
        let mut c = Conn::connect(t.port);
        let k = format!("h{i}");
        c.cmd(&["HSET", &k, "a", "1", "b", "2"]);
        assert_eq!(enc(&mut c, &k), Reply::Bulk(b"listpack".to_vec()));
        c.cmd(&["HSET", &k, "c", "3"]);
        assert_eq!(enc(&mut c, &k), Reply::Bulk(b"hashtable".to_vec()));
    }
}
