//! Shard channels (SSUBSCRIBE / SUNSUBSCRIBE / SPUBLISH / PUBSUB SHARD*) against
//! redis-server 7.0: standalone transcripts compared reply by reply (RESP2 and RESP3), and
//! in a cluster: routing (MOVED, CROSSSLOT), delivery inside one shard only, cluster-wide
//! PUBLISH across tessera and redis-server nodes, and `sunsubscribe` when a slot leaves.
// Sessions are transcripts: one push per step reads in the order the steps happen.
#![allow(clippy::vec_init_then_push)]

use std::time::Duration;

use tessera_testkit::pubsub::*;
use tessera_testkit::*;

/// A reply with sets/arrays of channel names sorted (their order follows hash order).
fn sorted(r: R) -> String {
    match r {
        R::Arr(mut v) => {
            v.sort_by_key(|x| x.s());
            R::Arr(v).s()
        }
        other => other.s(),
    }
}

/// Runs the same standalone session on a server and returns its transcript.
fn standalone_session(bin: &'static str) -> Vec<String> {
    let p = Proc::start(bin, &[]);
    let mut t = Vec::new();
    let mut sub = p.raw();
    let mut pubc = p.raw();
    t.push(sub.cmd(&["SSUBSCRIBE", "a", "b"]).s());
    t.push(sub.read().s());
    t.push(sub.cmd(&["SUBSCRIBE", "a"]).s());
    t.push(sub.cmd(&["SSUBSCRIBE", "a"]).s());
    t.push(sub.cmd(&["GET", "x"]).s());
    t.push(sub.cmd(&["PING"]).s());
    t.push(pubc.cmd(&["SPUBLISH", "a", "m1"]).s());
    t.push(sub.read().s());
    t.push(pubc.cmd(&["PUBLISH", "a", "m2"]).s());
    t.push(sub.read().s());
    t.push(pubc.cmd(&["SPUBLISH", "nobody", "m3"]).s());
    t.push(sorted(pubc.cmd(&["PUBSUB", "SHARDCHANNELS"])));
    t.push(sorted(pubc.cmd(&["PUBSUB", "SHARDCHANNELS", "[a]"])));
    t.push(pubc.cmd(&["PUBSUB", "SHARDNUMSUB", "a", "b", "c"]).s());
    t.push(pubc.cmd(&["PUBSUB", "SHARDNUMSUB"]).s());
    t.push(pubc.cmd(&["PUBSUB", "CHANNELS"]).s());
    t.push(pubc.cmd(&["PUBSUB", "HELP"]).s());
    t.push(pubc.cmd(&["SPUBLISH", "a"]).s());
    t.push(pubc.cmd(&["MULTI"]).s());
    t.push(pubc.cmd(&["SSUBSCRIBE", "z"]).s());
    t.push(pubc.cmd(&["EXEC"]).s());
    t.push(sub.cmd(&["SUNSUBSCRIBE", "a"]).s());
    t.push(sub.cmd(&["SUNSUBSCRIBE", "never"]).s());
    t.push(sub.cmd(&["SUNSUBSCRIBE"]).s());
    t.push(sub.cmd(&["SUNSUBSCRIBE"]).s());
    t.push(sub.cmd(&["UNSUBSCRIBE"]).s());
    t.push(sub.cmd(&["GET", "x"]).s());
    // RESP3: pushes, and normal commands while subscribed.
    let mut s3 = p.raw();
    s3.cmd(&["HELLO", "3"]);
    t.push(format!("{:?}", s3.cmd(&["SSUBSCRIBE", "c"])));
    t.push(format!("{:?}", s3.cmd(&["GET", "x"])));
    t.push(pubc.cmd(&["SPUBLISH", "c", "m4"]).s());
    t.push(format!("{:?}", s3.read()));
    t.push(format!("{:?}", s3.cmd(&["SUNSUBSCRIBE"])));
    t.push(format!("{:?}", s3.cmd(&["SUNSUBSCRIBE"])));
    // RESET drops shard subscriptions.
    t.push(s3.cmd(&["SSUBSCRIBE", "d"]).s());
    t.push(s3.cmd(&["RESET"]).s());
    t.push(pubc.cmd(&["PUBSUB", "SHARDNUMSUB", "d"]).s());
    t
}

#[test]
fn standalone_transcript_matches_redis() {
    assert_same_transcript(
        &standalone_session(tessera_bin()),
        &standalone_session(redis_bin()),
    );
}

#[test]
fn command_info_routes_on_the_channel() {
    let p = Proc::start(tessera_bin(), &[]);
    let r = Proc::start(redis_bin(), &[]);
    for c in ["ssubscribe", "sunsubscribe", "spublish"] {
        let a = p.cli(&["COMMAND", "INFO", c]);
        let b = r.cli(&["COMMAND", "INFO", c]);
        assert_eq!(a, b, "COMMAND INFO {c}");
    }
    for args in [
        ["COMMAND", "GETKEYS", "SSUBSCRIBE", "a", "b"].as_slice(),
        ["COMMAND", "GETKEYS", "SPUBLISH", "a", "msg"].as_slice(),
    ] {
        assert_eq!(p.cli(args), r.cli(args), "{args:?}");
    }
}

fn push_of(r: &R) -> String {
    r.s()
}

/// Reads pushes until one satisfies `f` (bounded by the socket's read timeout).
fn read_until(c: &mut Raw, f: impl Fn(&str) -> bool) -> String {
    for _ in 0..20 {
        let s = push_of(&c.read());
        if f(&s) {
            return s;
        }
    }
    panic!("expected push not seen");
}

/// Mixed cluster: T1 (tessera, slots 0-8191) with tessera replica T2 and redis-server
/// replica R2; R1 (redis-server, slots 8192-16383) with tessera replica T3.
#[test]
fn cluster_shard_channels_mixed() {
    let t1 = Proc::cluster(tessera_bin());
    let t2 = Proc::cluster(tessera_bin());
    let r1 = Proc::cluster(redis_bin());
    let t3 = Proc::cluster(tessera_bin());
    let r2 = Proc::cluster(redis_bin());
    meet_all(&[&t1, &t2, &r1, &t3, &r2]);
    assert_eq!(
        t1.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]).trim(),
        "OK"
    );
    assert_eq!(
        r1.cli(&["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"])
            .trim(),
        "OK"
    );
    let (id1, idr) = (t1.myid(), r1.myid());
    wait_for(Duration::from_secs(30), "slots known everywhere", || {
        [&t2, &t3, &r2].iter().all(|n| {
            let out = n.cli(&["CLUSTER", "NODES"]);
            out.lines()
                .any(|l| l.starts_with(&id1) && l.contains("0-8191"))
                && out
                    .lines()
                    .any(|l| l.starts_with(&idr) && l.contains("8192-16383"))
        })
    });
    assert_eq!(t2.cli(&["CLUSTER", "REPLICATE", &id1]).trim(), "OK");
    assert_eq!(t3.cli(&["CLUSTER", "REPLICATE", &idr]).trim(), "OK");
    assert_eq!(r2.cli(&["CLUSTER", "REPLICATE", &id1]).trim(), "OK");
    let all = [&t1, &t2, &r1, &t3, &r2];
    wait_for(
        Duration::from_secs(30),
        "cluster_state:ok and roles seen",
        || {
            all.iter().all(|n| {
                let nodes = n.cli(&["CLUSTER", "NODES"]);
                n.cluster_info("cluster_state") == "ok"
                    && nodes.lines().filter(|l| l.contains("slave")).count() == 3
            })
        },
    );

    let low = name_in_range("ch", 0, 8191);
    let high = name_in_range("ch", 8192, 16383);

    // Routing: MOVED from the wrong shard, CROSSSLOT across slots.
    let mut c = t1.raw();
    let moved = c.cmd(&["SSUBSCRIBE", &high]).s();
    assert_eq!(
        moved,
        format!("MOVED {} 127.0.0.1:{}", slot_of(&high), r1.port)
    );
    assert_eq!(
        c.cmd(&["SPUBLISH", &high, "x"]).s(),
        format!("MOVED {} 127.0.0.1:{}", slot_of(&high), r1.port)
    );
    let other_low = (0u64..)
        .map(|i| format!("zz{i}"))
        .find(|k| slot_of(k) <= 8191 && slot_of(k) != slot_of(&low))
        .expect("name");
    assert_eq!(
        c.cmd(&["SSUBSCRIBE", &low, &other_low]).s(),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );

    // Shard delivery: subscribers on both nodes of each shard.
    let mut s_t1 = t1.raw();
    let mut s_t2 = t2.raw();
    let mut s_r1 = r1.raw();
    let mut s_t3 = t3.raw();
    let mut s_r2 = r2.raw();
    // Each shard subscriber is the first on its connection.
    let ssub = |s: &mut Raw, ch: &str| {
        assert_eq!(
            s.cmd(&["SSUBSCRIBE", ch]).s(),
            format!("[ssubscribe,{ch},1]")
        )
    };
    ssub(&mut s_r2, &low);
    ssub(&mut s_t1, &low);
    ssub(&mut s_t2, &low);
    ssub(&mut s_r1, &high);
    ssub(&mut s_t3, &high);
    // Plain subscribers of the same names on the other shard must not see shard messages.
    let mut plain_r1 = r1.raw();
    plain_r1.cmd(&["SUBSCRIBE", &low]);

    // tessera master -> tessera and redis-server replicas.
    assert_eq!(c.cmd(&["SPUBLISH", &low, "m1"]), R::Int(1));
    assert_eq!(s_t1.read().s(), format!("[smessage,{low},m1]"));
    assert_eq!(s_t2.read().s(), format!("[smessage,{low},m1]"));
    assert_eq!(s_r2.read().s(), format!("[smessage,{low},m1]"));
    // tessera replica -> master and the other replica (a replica may SPUBLISH its
    // master's slots).
    assert_eq!(t2.raw().cmd(&["SPUBLISH", &low, "m2"]), R::Int(1));
    assert_eq!(s_t1.read().s(), format!("[smessage,{low},m2]"));
    assert_eq!(s_t2.read().s(), format!("[smessage,{low},m2]"));
    assert_eq!(s_r2.read().s(), format!("[smessage,{low},m2]"));
    // redis-server replica -> tessera master and replica.
    assert_eq!(r2.raw().cmd(&["SPUBLISH", &low, "m2b"]), R::Int(1));
    assert_eq!(s_r2.read().s(), format!("[smessage,{low},m2b]"));
    assert_eq!(s_t1.read().s(), format!("[smessage,{low},m2b]"));
    assert_eq!(s_t2.read().s(), format!("[smessage,{low},m2b]"));
    // redis-server master -> tessera replica, and back.
    assert_eq!(r1.raw().cmd(&["SPUBLISH", &high, "m3"]), R::Int(1));
    assert_eq!(s_r1.read().s(), format!("[smessage,{high},m3]"));
    assert_eq!(s_t3.read().s(), format!("[smessage,{high},m3]"));
    assert_eq!(t3.raw().cmd(&["SPUBLISH", &high, "m4"]), R::Int(1));
    assert_eq!(s_t3.read().s(), format!("[smessage,{high},m4]"));
    assert_eq!(s_r1.read().s(), format!("[smessage,{high},m4]"));

    // Cluster-wide PUBLISH: tessera -> redis-server and redis-server -> tessera. The first
    // message plain_r1 gets must be this one (the shard messages above never reached it).
    assert_eq!(c.cmd(&["PUBLISH", &low, "p1"]), R::Int(0));
    assert_eq!(plain_r1.read().s(), format!("[message,{low},p1]"));
    let mut plain_t3 = t3.raw();
    plain_t3.cmd(&["SUBSCRIBE", "everywhere"]);
    assert_eq!(r1.raw().cmd(&["PUBLISH", "everywhere", "p2"]), R::Int(0));
    assert_eq!(plain_t3.read().s(), "[message,everywhere,p2]");

    // Slot leaves the shard: SETSLOT NODE to redis-server (the slot holds no keys).
    let slot = slot_of(&low).to_string();
    assert_eq!(
        r1.cli(&["CLUSTER", "SETSLOT", &slot, "NODE", &idr]).trim(),
        "OK"
    );
    assert_eq!(
        t1.cli(&["CLUSTER", "SETSLOT", &slot, "NODE", &idr]).trim(),
        "OK"
    );
    let want = format!("[sunsubscribe,{low},0]");
    assert_eq!(
        read_until(&mut s_t1, |s| s.starts_with("[sunsubscribe")),
        want
    );
    // The replica learns it over the bus and drops its subscribers too.
    r1.cli(&["CLUSTER", "BUMPEPOCH"]);
    assert_eq!(
        read_until(&mut s_t2, |s| s.starts_with("[sunsubscribe")),
        want
    );
    assert_eq!(
        t1.raw().cmd(&["PUBSUB", "SHARDNUMSUB", &low]).s(),
        format!("[{low},0]")
    );
    // Subscribers may now use normal commands again (RESP2 context ended).
    assert_eq!(s_t1.cmd(&["PING"]).s(), "PONG");

    // A failover moves every slot of the shard to the new master: shard subscribers on
    // the promoted replica are told too.
    let kept = (0u64..)
        .map(|i| format!("f{i}"))
        .find(|k| slot_of(k) <= 8191 && slot_of(k) != slot_of(&low))
        .expect("name");
    let mut s_t2b = t2.raw();
    ssub(&mut s_t2b, &kept);
    assert_eq!(t2.cli(&["CLUSTER", "FAILOVER", "TAKEOVER"]).trim(), "OK");
    assert_eq!(
        read_until(&mut s_t2b, |s| s.starts_with("[sunsubscribe")),
        format!("[sunsubscribe,{kept},0]")
    );
}

/// cluster-allow-pubsubshard-when-down: with the cluster down, shard commands still work
/// when yes (the default) and get CLUSTERDOWN when no.
#[test]
fn pubsubshard_when_down() {
    for allow in ["yes", "no"] {
        let t = Proc::start(
            tessera_bin(),
            &[
                "--cluster-enabled",
                "yes",
                "--cluster-allow-pubsubshard-when-down",
                allow,
            ],
        );
        assert_eq!(
            t.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "100"]).trim(),
            "OK"
        );
        let ch = name_in_range("d", 0, 100);
        wait_for(Duration::from_secs(10), "slots taken", || {
            t.cluster_info("cluster_slots_assigned") == "101"
        });
        assert_eq!(t.cluster_info("cluster_state"), "fail");
        let r = t.raw().cmd(&["SPUBLISH", &ch, "x"]).s();
        if allow == "yes" {
            assert_eq!(r, "0");
        } else {
            assert_eq!(r, "CLUSTERDOWN The cluster is down");
        }
    }
}
