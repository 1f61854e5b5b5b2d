//! Blocking list and sorted-set commands driven with the `redis` crate: FIFO wake-up among
//! blocked clients, fractional timeouts, BLMOVE chains, BZPOPMIN/BZMPOP/BLMPOP, and the
//! non-blocking behaviour inside MULTI.

use std::thread;
use std::time::{Duration, Instant};
use tessera_testkit::diff::*;

fn client(port: u16) -> redis::Connection {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let con = c.get_connection().expect("connect");
    con.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    con
}

/// Polls INFO until `n` clients are blocked (generous deadline, no timing assertion).
fn wait_blocked(con: &mut redis::Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info: String = redis::cmd("INFO").arg("clients").query(con).expect("info");
        let cur = info
            .lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if cur == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never saw {n} blocked clients (saw {cur})"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn blpop_wakes_clients_in_fifo_order() {
    let s = tessera();
    let port = s.port;
    let mut ctl = client(port);
    let mut handles = Vec::new();
    for i in 0..3 {
        handles.push(thread::spawn(move || {
            let mut c = client(port);
            let r: Option<(String, String)> = redis::cmd("BLPOP")
                .arg("other")
                .arg("q")
                .arg(30)
                .query(&mut c)
                .expect("blpop");
            (i, r)
        }));
        wait_blocked(&mut ctl, i + 1);
    }
    let n: i64 = redis::cmd("RPUSH")
        .arg("q")
        .arg(&["a", "b", "c", "d"])
        .query(&mut ctl)
        .expect("rpush");
    // RPUSH replies with the length before any blocked client is served.
    assert_eq!(n, 4);
    for h in handles {
        let (i, r) = h.join().expect("thread");
        let want = ["a", "b", "c"][i];
        assert_eq!(r, Some(("q".to_string(), want.to_string())), "client {i}");
    }
    let rest: Vec<String> = redis::cmd("LRANGE")
        .arg("q")
        .arg(0)
        .arg(-1)
        .query(&mut ctl)
        .expect("lrange");
    assert_eq!(rest, vec!["d"]);
    wait_blocked(&mut ctl, 0);
}

#[test]
fn fractional_timeouts_and_multi() {
    let s = tessera();
    let mut c = client(s.port);
    let t0 = Instant::now();
    let r: Option<(String, String)> = redis::cmd("BRPOP")
        .arg("nokey")
        .arg(0.3)
        .query(&mut c)
        .expect("brpop");
    assert_eq!(r, None);
    assert!(
        t0.elapsed() >= Duration::from_millis(250),
        "returned before its timeout"
    );
    let r: Option<String> = redis::cmd("BLMOVE")
        .arg(&["nokey", "dst", "LEFT", "RIGHT", "0.05"])
        .query(&mut c)
        .expect("blmove");
    assert_eq!(r, None);
    let e = redis::cmd("BLPOP")
        .arg("k")
        .arg(-1)
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("timeout is negative"), "{e}");
    let e = redis::cmd("BLPOP")
        .arg("k")
        .arg("abc")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("timeout is not a float"), "{e}");
    // Inside MULTI a blocking command never blocks: it answers as a timeout at once.
    type Replies = (
        Option<(String, String)>,
        Option<String>,
        Option<(String, String, f64)>,
    );
    let (a, b, z): Replies = redis::pipe()
        .atomic()
        .cmd("BLPOP")
        .arg("nokey")
        .arg(0)
        .cmd("BRPOPLPUSH")
        .arg("nokey")
        .arg("d")
        .arg(0)
        .cmd("BZPOPMIN")
        .arg("nokey")
        .arg(0)
        .query(&mut c)
        .expect("multi");
    assert_eq!((a, b, z), (None, None, None));
}

#[test]
fn blmove_chain_and_zset_blocking() {
    let s = tessera();
    let port = s.port;
    let mut ctl = client(port);
    // A waits to move src→mid; B waits on mid. One push to src must reach B.
    let a = thread::spawn(move || {
        let mut c = client(port);
        redis::cmd("BLMOVE")
            .arg(&["src", "mid", "RIGHT", "LEFT", "30"])
            .query::<Option<String>>(&mut c)
            .expect("blmove")
    });
    wait_blocked(&mut ctl, 1);
    let b = thread::spawn(move || {
        let mut c = client(port);
        redis::cmd("BLPOP")
            .arg("mid")
            .arg(30)
            .query::<Option<(String, String)>>(&mut c)
            .expect("blpop")
    });
    wait_blocked(&mut ctl, 2);
    let _: i64 = redis::cmd("LPUSH")
        .arg("src")
        .arg("v1")
        .query(&mut ctl)
        .expect("lpush");
    assert_eq!(a.join().expect("a"), Some("v1".to_string()));
    assert_eq!(
        b.join().expect("b"),
        Some(("mid".to_string(), "v1".to_string()))
    );
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&["src", "mid"])
        .query(&mut ctl)
        .expect("exists");
    assert_eq!(exists, 0);

    // BZPOPMAX is woken by ZADD and gets the highest score.
    let z = thread::spawn(move || {
        let mut c = client(port);
        redis::cmd("BZPOPMAX")
            .arg("z")
            .arg(30)
            .query::<Option<(String, String, f64)>>(&mut c)
            .expect("bzpopmax")
    });
    wait_blocked(&mut ctl, 1);
    let _: i64 = redis::cmd("ZADD")
        .arg(&["z", "1", "a", "2.5", "b"])
        .query(&mut ctl)
        .expect("zadd");
    assert_eq!(
        z.join().expect("z"),
        Some(("z".to_string(), "b".to_string(), 2.5))
    );

    // BZMPOP and BLMPOP with COUNT.
    let zm = thread::spawn(move || {
        let mut c = client(port);
        redis::cmd("BZMPOP")
            .arg(&["30", "2", "z0", "z2", "MIN", "COUNT", "5"])
            .query::<Option<(String, Vec<(String, f64)>)>>(&mut c)
            .expect("bzmpop")
    });
    wait_blocked(&mut ctl, 1);
    let _: i64 = redis::cmd("ZADD")
        .arg(&["z2", "3", "x", "1", "y"])
        .query(&mut ctl)
        .expect("zadd");
    assert_eq!(
        zm.join().expect("zm"),
        Some((
            "z2".to_string(),
            vec![("y".to_string(), 1.0), ("x".to_string(), 3.0)]
        ))
    );
    let lm = thread::spawn(move || {
        let mut c = client(port);
        redis::cmd("BLMPOP")
            .arg(&["30", "1", "l", "RIGHT", "COUNT", "2"])
            .query::<Option<(String, Vec<String>)>>(&mut c)
            .expect("blmpop")
    });
    wait_blocked(&mut ctl, 1);
    let _: i64 = redis::cmd("RPUSH")
        .arg(&["l", "1", "2", "3"])
        .query(&mut ctl)
        .expect("rpush");
    assert_eq!(
        lm.join().expect("lm"),
        Some(("l".to_string(), vec!["3".to_string(), "2".to_string()]))
    );
    // A client that disconnects while blocked is forgotten.
    let mut raw = tessera_testkit::diff::Conn::connect(port);
    raw.send(&["BLPOP", "gone", "30"]);
    wait_blocked(&mut ctl, 1);
    drop(raw);
    wait_blocked(&mut ctl, 0);
}
