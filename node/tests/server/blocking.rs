//! The blocking facility (clients blocked on keys), driven through BLPOP/BRPOP/BLMOVE.

use std::time::{Duration, Instant};

use tessera_testkit::{Node, Raw, R};

fn send(c: &mut Raw, args: &[&str]) {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    c.send(&tessera_testkit::encode(&a));
}

/// Waits until `n` clients are blocked (INFO clients), bounded.
fn wait_blocked(c: &mut Raw, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = c.cmd(&["INFO", "clients"]).s();
        if info.contains(&format!("blocked_clients:{n}\r")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never reached {n} blocked clients: {info}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn blpop_times_out_with_null() {
    let n = Node::start();
    let mut c = n.raw();
    let t = Instant::now();
    assert_eq!(c.cmd(&["BLPOP", "empty", "0.2"]), R::Nil);
    assert!(t.elapsed() >= Duration::from_millis(150));
    let mut c3 = n.raw();
    c3.cmd(&["HELLO", "3"]);
    assert_eq!(c3.cmd(&["BLPOP", "empty", "0.05"]), R::Nil);
    assert_eq!(
        c.cmd(&["BLPOP", "empty", "-1"]),
        R::Err("ERR timeout is negative".into())
    );
    assert_eq!(
        c.cmd(&["BLPOP", "empty", "abc"]),
        R::Err("ERR timeout is not a float or out of range".into())
    );
}

#[test]
fn fifo_wakeup_and_served_before_pusher_reply() {
    let n = Node::start();
    let mut ctl = n.raw();
    let mut waiters: Vec<Raw> = Vec::new();
    for i in 0..3 {
        let mut w = n.raw();
        send(&mut w, &["BLPOP", "q", "0"]);
        wait_blocked(&mut ctl, i + 1);
        waiters.push(w);
    }
    // One push serves exactly the first blocked client, before the pusher's own reply.
    let mut p = n.raw();
    send(&mut p, &["RPUSH", "q", "a"]);
    send(&mut p, &["LLEN", "q"]);
    assert_eq!(p.read(), R::Int(1));
    assert_eq!(p.read(), R::Int(0));
    assert_eq!(waiters[0].read().s(), "[q,a]");
    p.cmd(&["RPUSH", "q", "b", "c"]);
    assert_eq!(waiters[1].read().s(), "[q,b]");
    assert_eq!(waiters[2].read().s(), "[q,c]");
    assert_eq!(p.cmd(&["EXISTS", "q"]), R::Int(0));
    wait_blocked(&mut ctl, 0);
}

#[test]
fn blocked_on_several_keys_and_blmove_cascade() {
    let n = Node::start();
    let mut ctl = n.raw();
    let mut a = n.raw();
    send(&mut a, &["BLMOVE", "src", "mid", "LEFT", "RIGHT", "0"]);
    wait_blocked(&mut ctl, 1);
    let mut b = n.raw();
    send(&mut b, &["BRPOP", "other", "mid", "0"]);
    wait_blocked(&mut ctl, 2);
    // Pushing into src serves a, whose move into mid serves b.
    assert_eq!(ctl.cmd(&["LPUSH", "src", "x"]), R::Int(1));
    assert_eq!(a.read(), R::Bulk(b"x".to_vec()));
    assert_eq!(b.read().s(), "[mid,x]");
    assert_eq!(ctl.cmd(&["EXISTS", "src", "mid"]), R::Int(0));
}

#[test]
fn disconnected_waiter_does_not_eat_data() {
    let n = Node::start();
    let mut ctl = n.raw();
    {
        let mut gone = n.raw();
        send(&mut gone, &["BLPOP", "k", "0"]);
        wait_blocked(&mut ctl, 1);
    }
    wait_blocked(&mut ctl, 0);
    ctl.cmd(&["RPUSH", "k", "v"]);
    assert_eq!(ctl.cmd(&["LRANGE", "k", "0", "-1"]).s(), "[v]");
}

#[test]
fn blocking_inside_multi_does_not_block() {
    let n = Node::start();
    let mut c = n.raw();
    c.cmd(&["MULTI"]);
    c.cmd(&["BLPOP", "nothing", "0"]);
    assert_eq!(c.cmd(&["EXEC"]).s(), "[(nil)]");
}
