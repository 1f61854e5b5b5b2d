use tessera_testkit::{Node, R};

#[test]
fn multi_exec_discard() {
    let n = Node::start();
    let mut c = n.raw();
    assert_eq!(c.cmd(&["MULTI"]), R::Simple("OK".into()));
    assert_eq!(c.cmd(&["SET", "a", "1"]), R::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["INCR", "a"]), R::Simple("QUEUED".into()));
    assert_eq!(
        c.cmd(&["MULTI"]),
        R::Err("ERR MULTI calls can not be nested".into())
    );
    assert_eq!(c.cmd(&["EXEC"]).s(), "[OK,2]");
    assert_eq!(c.cmd(&["EXEC"]), R::Err("ERR EXEC without MULTI".into()));
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "a", "5"]);
    assert_eq!(c.cmd(&["DISCARD"]), R::Simple("OK".into()));
    assert_eq!(c.cmd(&["GET", "a"]), R::Bulk(b"2".to_vec()));
    // Queueing errors abort the transaction.
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "a", "9"]);
    assert!(matches!(c.cmd(&["NOSUCHCMD"]), R::Err(_)));
    assert!(matches!(c.cmd(&["GET"]), R::Err(_)));
    assert_eq!(
        c.cmd(&["EXEC"]),
        R::Err("EXECABORT Transaction discarded because of previous errors.".into())
    );
    assert_eq!(c.cmd(&["GET", "a"]), R::Bulk(b"2".to_vec()));
    // Runtime errors are reported in place.
    c.cmd(&["SET", "s", "x"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["INCR", "s"]);
    c.cmd(&["SET", "t", "1"]);
    assert_eq!(
        c.cmd(&["EXEC"]).s(),
        "[ERR value is not an integer or out of range,OK]"
    );
    // Global commands inside MULTI lock everything.
    c.cmd(&["MULTI"]);
    c.cmd(&["DBSIZE"]);
    c.cmd(&["FLUSHDB"]);
    c.cmd(&["DBSIZE"]);
    assert_eq!(c.cmd(&["EXEC"]).s(), "[3,OK,0]");
}

#[test]
fn watch_aborts_on_touch() {
    let n = Node::start();
    let mut c = n.raw();
    let mut other = n.raw();
    c.cmd(&["SET", "w", "1"]);
    assert_eq!(c.cmd(&["WATCH", "w"]), R::Simple("OK".into()));
    other.cmd(&["SET", "unrelated", "1"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "w", "2"]);
    assert_eq!(c.cmd(&["EXEC"]).s(), "[OK]");
    c.cmd(&["WATCH", "w"]);
    other.cmd(&["SET", "w", "3"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "w", "4"]);
    assert_eq!(c.cmd(&["EXEC"]), R::Nil);
    assert_eq!(c.cmd(&["GET", "w"]), R::Bulk(b"3".to_vec()));
    // UNWATCH clears.
    c.cmd(&["WATCH", "w"]);
    other.cmd(&["SET", "w", "5"]);
    c.cmd(&["UNWATCH"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["GET", "w"]);
    assert_eq!(c.cmd(&["EXEC"]).s(), "[5]");
    // FLUSHALL touches watched keys.
    c.cmd(&["WATCH", "w"]);
    other.cmd(&["FLUSHALL"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["PING"]);
    assert_eq!(c.cmd(&["EXEC"]), R::Nil);
    c.cmd(&["MULTI"]);
    assert_eq!(
        c.cmd(&["WATCH", "x"]),
        R::Err("ERR WATCH inside MULTI is not allowed".into())
    );
}

#[test]
fn concurrent_incr_is_atomic() {
    let n = Node::start();
    let port = n.port;
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
                let mut con = c.get_connection().unwrap();
                for _ in 0..500 {
                    let _: i64 = redis::cmd("INCR").arg("ctr").query(&mut con).unwrap();
                    let _: Vec<i64> = redis::pipe()
                        .atomic()
                        .cmd("INCR")
                        .arg("{t}a")
                        .cmd("INCR")
                        .arg("{t}b")
                        .query(&mut con)
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut con = n.client();
    let v: i64 = redis::cmd("GET").arg("ctr").query(&mut con).unwrap();
    assert_eq!(v, 2000);
    let (a, b): (i64, i64) = redis::cmd("MGET")
        .arg("{t}a")
        .arg("{t}b")
        .query(&mut con)
        .unwrap();
    assert_eq!((a, b), (2000, 2000));
}

#[test]
fn no_multi_commands_abort_the_transaction() {
    let n = Node::start();
    let mut c = n.raw();
    c.cmd(&["MULTI"]);
    assert_eq!(
        c.cmd(&["SHUTDOWN"]),
        R::Err("ERR Command not allowed inside a transaction".into())
    );
    assert!(matches!(c.cmd(&["EXEC"]), R::Err(e) if e.starts_with("EXECABORT")));
    assert_eq!(c.cmd(&["PING"]), R::Simple("PONG".into()));
}

#[test]
fn whole_keyspace_commands_in_concurrent_transactions_do_not_deadlock() {
    let n = Node::start_with(&["--worker-threads", "2"]);
    let port = n.port;
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
                let mut con = c.get_connection().unwrap();
                for i in 0..200 {
                    let _: redis::Value = redis::pipe()
                        .atomic()
                        .cmd("SET")
                        .arg(format!("k{t}:{i}"))
                        .arg(i)
                        .cmd("INFO")
                        .arg("keyspace")
                        .cmd("DBSIZE")
                        .query(&mut con)
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut con = n.client();
    let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(size, 800);
}
