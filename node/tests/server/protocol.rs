use std::io::Write;
use std::time::Duration;

use tessera_testkit::{Node, Raw, R};

#[test]
fn inline_and_pipelined_requests() {
    let n = Node::start();
    let mut c = n.raw();
    c.send(b"PING\r\nSET k v\r\nGET k\r\n*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n");
    assert_eq!(c.read(), R::Simple("PONG".into()));
    assert_eq!(c.read(), R::Simple("OK".into()));
    assert_eq!(c.read(), R::Bulk(b"v".to_vec()));
    assert_eq!(c.read(), R::Bulk(b"abc".to_vec()));
    // Quoted inline arguments.
    c.send(b"SET q \"a b\\x41\"\r\nGET q\r\n");
    assert_eq!(c.read(), R::Simple("OK".into()));
    assert_eq!(c.read(), R::Bulk(b"a bA".to_vec()));
    // A request split byte by byte is reassembled.
    for b in b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$5\r\nhello\r\n" {
        c.send(&[*b]);
    }
    assert_eq!(c.read(), R::Simple("OK".into()));
}

fn expect_protocol_error(n: &Node, input: &[u8], msg: &str) {
    let mut c = n.raw();
    c.send(input);
    assert_eq!(
        c.read(),
        R::Err(format!("ERR Protocol error: {msg}")),
        "input {:?}",
        String::from_utf8_lossy(input)
    );
    assert!(c.closed(), "connection must close after a protocol error");
}

#[test]
fn protocol_errors_close_the_connection() {
    let n = Node::start();
    expect_protocol_error(&n, b"*abc\r\n", "invalid multibulk length");
    expect_protocol_error(&n, b"*1\r\n+foo\r\n", "expected '$', got '+'");
    expect_protocol_error(&n, b"*1\r\n$abc\r\n", "invalid bulk length");
    expect_protocol_error(&n, b"*1\r\n$999999999999\r\n", "invalid bulk length");
    expect_protocol_error(&n, b"*3000000000\r\n", "invalid multibulk length");
    expect_protocol_error(&n, b"SET \"a\r\n", "unbalanced quotes in request");
    let big = vec![b'a'; 70 * 1024];
    expect_protocol_error(&n, &big, "too big inline request");
    // The server is still fine.
    assert_eq!(n.raw().cmd(&["PING"]), R::Simple("PONG".into()));
}

#[test]
fn huge_declared_lengths_allocate_nothing() {
    let n = Node::start();
    let mut conns: Vec<Raw> = (0..20).map(|_| n.raw()).collect();
    for c in conns.iter_mut() {
        c.send(b"*2147483647\r\n$536870912\r\nabc");
    }
    let mut c = n.raw();
    let info = c.cmd(&["INFO", "memory"]).s();
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(u64::MAX);
    // 20 clients declaring 512 MB each would be 10 GB if preallocated.
    assert!(used < 200 << 20, "used_memory {used}");
    drop(conns);
}

#[test]
fn malformed_flood_does_not_hurt_other_clients() {
    let n = Node::start();
    let port = n.port;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let flooder = std::thread::spawn(move || {
        let bad: [&[u8]; 6] = [
            b"*x\r\n",
            b"*1\r\n$-3\r\n",
            b"*2\r\n:1\r\n",
            b"\"unbalanced\r\n",
            b"*1\r\n$99999999999999999999\r\n",
            b"*-\r\n",
        ];
        let mut sent = 0;
        while sent < 3000 && !s2.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                let _ = s.write_all(bad[sent % bad.len()]);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = [0u8; 256];
                let _ = std::io::Read::read(&mut s, &mut buf);
            }
            sent += 1;
        }
        sent
    });
    let mut good = n.client();
    for i in 0..500 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut good)
            .unwrap();
        let v: i64 = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query(&mut good)
            .unwrap();
        assert_eq!(v, i);
    }
    let sent = flooder.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(sent >= 3000);
    let n_keys: i64 = redis::cmd("DBSIZE").query(&mut good).unwrap();
    assert_eq!(n_keys, 500);
}

#[test]
fn resp3_types_via_hello() {
    let n = Node::start();
    let mut c = n.raw();
    assert!(matches!(c.cmd(&["HELLO", "3"]), R::Agg(b'%', _)));
    assert_eq!(c.cmd(&["GET", "missing"]), R::Nil);
    c.send(b"GET missing\r\n");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut c.r, &mut line).unwrap();
    assert_eq!(line, "_\r\n");
    let mut c2 = n.raw();
    c2.send(b"GET missing\r\n");
    assert_eq!(c2.read_line(), "$-1");
    assert_eq!(
        c.cmd(&["HELLO", "4"]),
        R::Err("NOPROTO unsupported protocol version".into())
    );
}

#[test]
fn unknown_command_and_arity_errors() {
    let n = Node::start();
    let mut c = n.raw();
    assert_eq!(
        c.cmd(&["FOOBAR", "a", "b"]),
        R::Err("ERR unknown command 'FOOBAR', with args beginning with: 'a' 'b' ".into())
    );
    assert_eq!(
        c.cmd(&["GET"]),
        R::Err("ERR wrong number of arguments for 'get' command".into())
    );
    assert_eq!(
        c.cmd(&["CLIENT", "nosuch"]),
        R::Err("ERR unknown subcommand 'nosuch'. Try CLIENT HELP.".into())
    );
    c.cmd(&["SET", "s", "x"]);
    assert_eq!(
        c.cmd(&["INCR", "s"]),
        R::Err("ERR value is not an integer or out of range".into())
    );
}

#[test]
fn maxclients_is_enforced() {
    let n = Node::start_with(&["--maxclients", "3"]);
    let _a = n.raw();
    let _b = n.raw();
    let mut c = n.raw();
    assert_eq!(c.cmd(&["PING"]), R::Simple("PONG".into()));
    let mut d = n.raw();
    assert_eq!(d.read(), R::Err("ERR max number of clients reached".into()));
}

#[test]
fn requirepass_and_auth() {
    let n = Node::start_with(&["--requirepass", "s3cret"]);
    let mut c = n.raw();
    assert_eq!(
        c.cmd(&["GET", "x"]),
        R::Err("NOAUTH Authentication required.".into())
    );
    assert_eq!(
        c.cmd(&["AUTH", "wrong"]),
        R::Err("WRONGPASS invalid username-password pair or user is disabled.".into())
    );
    assert_eq!(c.cmd(&["AUTH", "s3cret"]), R::Simple("OK".into()));
    assert_eq!(c.cmd(&["GET", "x"]), R::Nil);
    let mut d = n.raw();
    assert!(matches!(
        d.cmd(&["HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "me"]),
        R::Agg(b'%', _)
    ));
    assert_eq!(d.cmd(&["CLIENT", "GETNAME"]), R::Bulk(b"me".to_vec()));
}
