use tessera_testkit::{Node, R};

#[test]
fn subscribe_publish_resp2_and_resp3() {
    let n = Node::start();
    let mut sub = n.raw();
    assert_eq!(
        sub.cmd(&["SUBSCRIBE", "news", "sport"]).s(),
        "[subscribe,news,1]"
    );
    assert_eq!(sub.read().s(), "[subscribe,sport,2]");
    assert_eq!(
        sub.cmd(&["GET", "x"]),
        R::Err("ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context".into())
    );
    assert_eq!(sub.cmd(&["PING"]).s(), "[pong,]");
    let mut psub = n.raw();
    psub.cmd(&["HELLO", "3"]);
    let r = psub.cmd(&["PSUBSCRIBE", "n*"]);
    assert_eq!(
        r,
        R::Agg(
            b'>',
            vec![
                R::Bulk(b"psubscribe".to_vec()),
                R::Bulk(b"n*".to_vec()),
                R::Int(1)
            ]
        )
    );
    // RESP3 clients may run normal commands while subscribed.
    assert_eq!(psub.cmd(&["GET", "x"]), R::Nil);
    let mut p = n.raw();
    assert_eq!(p.cmd(&["PUBLISH", "news", "hello"]), R::Int(2));
    assert_eq!(sub.read().s(), "[message,news,hello]");
    assert_eq!(
        psub.read(),
        R::Agg(
            b'>',
            vec![
                R::Bulk(b"pmessage".to_vec()),
                R::Bulk(b"n*".to_vec()),
                R::Bulk(b"news".to_vec()),
                R::Bulk(b"hello".to_vec()),
            ]
        )
    );
    assert_eq!(
        p.cmd(&["PUBSUB", "NUMSUB", "news", "none"]).s(),
        "[news,1,none,0]"
    );
    assert_eq!(p.cmd(&["PUBSUB", "NUMPAT"]), R::Int(1));
    let mut chans = match p.cmd(&["PUBSUB", "CHANNELS"]) {
        R::Arr(v) => v.iter().map(|x| x.s()).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    chans.sort();
    assert_eq!(chans, vec!["news", "sport"]);
    // Unsubscribe-all order is unspecified (as in Redis); the counts go 1 then 0.
    let first = sub.cmd(&["UNSUBSCRIBE"]).s();
    let second = sub.read().s();
    let mut both = [first.clone(), second.clone()];
    both.sort();
    assert!(
        first.ends_with(",1]") && second.ends_with(",0]"),
        "{first} {second}"
    );
    assert!(
        both[0].contains("news") && both[1].contains("sport"),
        "{both:?}"
    );
    assert_eq!(sub.cmd(&["GET", "x"]), R::Nil);
    assert_eq!(p.cmd(&["PUBLISH", "sport", "x"]), R::Int(0));
}

#[test]
fn slow_subscriber_is_disconnected() {
    let n = Node::start_with(&["--client-output-buffer-limit", "pubsub 64kb 32kb 1"]);
    let mut sub = n.raw();
    sub.cmd(&["SUBSCRIBE", "flood"]);
    // The subscriber never reads; the publisher floods until it is cut off.
    let mut p = n.raw();
    let payload = "x".repeat(4096);
    let mut receivers = 1;
    for _ in 0..20_000 {
        if let R::Int(r) = p.cmd(&["PUBLISH", "flood", &payload]) {
            receivers = r;
        }
        if receivers == 0 {
            break;
        }
    }
    assert_eq!(
        receivers, 0,
        "slow subscriber should have been disconnected"
    );
    assert_eq!(p.cmd(&["PING"]), R::Simple("PONG".into()));
}
