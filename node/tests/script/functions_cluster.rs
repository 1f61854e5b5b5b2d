//! FCALL in cluster mode, tessera-node and redis-server 7.0 side by side (two masters each,
//! slots 0-8191 and 8192-16383): keys of the other node get -MOVED, keys of two slots
//! -CROSSSLOT, an undeclared key of the other node the script error, a `no-cluster`
//! function is refused; the replies must be the same.

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use tessera_testkit::*;

const LIB: &str = "#!lua name=clib
redis.register_function('set1', function(keys, args) return redis.call('set', keys[1], args[1]) end)
redis.register_function('touch', function(keys, args) return redis.call('incr', args[1]) end)
redis.register_function{function_name='local_only', callback=function() return 1 end, flags={'no-cluster'}}
redis.register_function{function_name='cross', callback=function(keys, args) return redis.call('incr', args[1]) end, flags={'allow-cross-slot-keys'}}
redis.register_function{function_name='ro', callback=function(keys) return redis.call('exists', keys[1]) end, flags={'no-writes'}}
";

/// The first line of the reply to `args` (MOVED with its slot only: addresses differ).
fn line(port: u16, args: &[&str]) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut b = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        b.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    s.write_all(&b).expect("write");
    let mut l = String::new();
    BufReader::new(s).read_line(&mut l).expect("read");
    let l = l.trim_end().to_string();
    match l.strip_prefix("-MOVED ") {
        Some(rest) => format!("-MOVED {}", rest.split(' ').next().unwrap_or("")),
        None => l,
    }
}

fn node(bin: &str) -> Server {
    Launch::new(bin)
        .args(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            "5000",
        ])
        .start()
}

/// Two joined masters of `bin`; the first serves slot 3300 (key "b"), the second slot
/// 12182 (key "foo"). Returns the replies of the cases sent to the first.
fn replies(bin: &str) -> Vec<String> {
    let (a, b) = (node(bin), node(bin));
    assert_eq!(
        line(a.port, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]),
        "+OK"
    );
    assert_eq!(
        line(b.port, &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]),
        "+OK"
    );
    let bp = b.port.to_string();
    assert_eq!(line(a.port, &["CLUSTER", "MEET", "127.0.0.1", &bp]), "+OK");
    wait_for(Duration::from_secs(60), "cluster_state:ok", || {
        [&a, &b].iter().all(|n| {
            let mut s = match std::net::TcpStream::connect(("127.0.0.1", n.port)) {
                Ok(s) => s,
                Err(_) => return false,
            };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            if s.write_all(b"CLUSTER INFO\r\n").is_err() {
                return false;
            }
            let mut r = BufReader::new(s);
            let mut head = String::new();
            let _ = r.read_line(&mut head);
            let n: usize = head
                .trim_end()
                .get(1..)
                .and_then(|x| x.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0u8; n];
            if std::io::Read::read_exact(&mut r, &mut body).is_err() {
                return false;
            }
            info_field(&String::from_utf8_lossy(&body), "cluster_state").as_deref() == Some("ok")
        })
    });
    for n in [&a, &b] {
        assert_eq!(line(n.port, &["FUNCTION", "LOAD", LIB]), "$4");
    }
    let cases: &[&[&str]] = &[
        &["FCALL", "set1", "1", "b", "v"],
        &["FCALL", "set1", "1", "foo", "v"],
        &["FCALL", "set1", "2", "b", "bar", "v"],
        &["FCALL", "set1", "2", "b", "{b}x", "v"],
        &["FCALL", "touch", "0", "bar"],
        &["FCALL", "touch", "1", "b", "key2"],
        &["FCALL", "touch", "1", "b", "foo"],
        &["FCALL", "touch", "0", "foo"],
        &["FCALL", "cross", "1", "b", "key2"],
        &["FCALL", "cross", "1", "b", "foo"],
        &["FCALL", "local_only", "0"],
        &["FCALL_RO", "ro", "1", "b"],
        &["FCALL_RO", "ro", "1", "foo"],
        &["FCALL", "nosuch", "1", "foo"],
    ];
    cases.iter().map(|c| line(a.port, c)).collect()
}

#[test]
fn fcall_in_cluster_mode_matches_redis() {
    let ours = replies(tessera_bin());
    let theirs = replies(redis_bin());
    assert_eq!(ours, theirs);
    eprintln!("{} cluster FCALL cases identical: {ours:?}", ours.len());
}
