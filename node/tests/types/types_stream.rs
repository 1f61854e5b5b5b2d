//! Streams against redis-server 7.0: the same scripts on both servers, RESP2 and RESP3,
//! replies compared byte for byte (explicit IDs only: `*` IDs depend on the clock).

use tessera_testkit::diff::*;

#[test]
fn stream_basic_commands_match_redis() {
    diff_script(
        "stream-basic",
        r#"
        xadd s 1-1 a 1 b 2
        xadd s 1-1 a 1
        xadd s 1-0 a 1
        xadd s 0-0 a 1
        xadd s 0 a 1
        xadd s 1-* c 3
        xadd s 2-* d 4
        xadd s 5 e 5 f 6 g 7
        xadd s 6-3 e
        xadd s 6-3 e 5 f
        xadd s 6-x a 1
        xadd s -1 a 1
        xadd s 18446744073709551616-0 a 1
        xadd s + a 1
        xadd s - a 1
        xadd s abc a 1
        xadd s nomkstream 7-0 h 8
        xadd nokey nomkstream 1-0 a 1
        exists nokey
        xlen s
        xlen nokey
        type s
        object encoding s
        xrange s - +
        xrange s - + count 2
        xrange s - + count 0
        xrange s - + count -1
        xrange s - + count x
        xrange s - + foo 1
        xrange s 1 1
        xrange s 1-1 2
        xrange s (1-1 +
        xrange s - (5-0
        xrange s (18446744073709551615-18446744073709551615 +
        xrange s - (0-0
        xrange s (- +
        xrange s 5 1
        xrange nokey - +
        xrange nokey - + count 0
        xrevrange s + -
        xrevrange s + - count 1
        xrevrange s (5 -
        xrevrange s 2 1-2
        xrevrange nokey + -
        xdel s 1-2 1-2 99-0
        xdel s bad
        xdel s 3-0 1-1
        xdel nokey 1-0
        xlen s
        xrange s - +
        xadd s 1-5 a 1
        xadd t maxlen 2 1-0 a 1
        xadd t maxlen 2 2-0 a 1
        xadd t maxlen = 2 3-0 a 1
        xrange t - +
        xadd t minid 3 4-0 a 1
        xrange t - +
        xadd t maxlen -1 5-0 a 1
        xadd t maxlen x 5-0 a 1
        xadd t maxlen 1 minid 1 5-0 a 1
        xadd t limit 10 5-0 a 1
        xadd t maxlen 1 limit 10 5-0 a 1
        xadd t maxlen ~ 1 limit -1 5-0 a 1
        xadd t minid bad 5-0 a 1
        xadd t maxlen ~ 1 5-0 a 1
        xrange t - +
        xadd t maxlen
        xadd t
        xtrim t maxlen 1
        xrange t - +
        xtrim t minid 100
        xlen t
        xtrim t
        xtrim t foo 1
        xtrim t maxlen ~ 0 limit 5
        xtrim t maxlen 0 limit 5
        xtrim nokey maxlen 0
        xtrim t maxlen 0 extra
        xadd t 10-0 a 1
        xadd t 9-0 a 1
        set str x
        xadd str 1-0 a 1
        xlen str
        xrange str - +
        xdel str 1-0
        xtrim str maxlen 0
        xread streams str 0
        xread count 1 streams s t 0 0
        xread streams s t 5-0 10-0
        xread streams s t 0
        xread streams s $
        xread streams nokey 0
        xread count x streams s 0
        xread foo streams s 0
        xread streams s bad
        xread count 0 streams s 0
        "#,
    );
}

#[test]
fn stream_approximate_trimming_matches_redis() {
    // Small entries: Redis's listpack nodes hold 100 entries each, so `~` trims whole
    // hundreds; LIMIT caps the entries removed.
    let mut script = String::new();
    for i in 1..=450 {
        script.push_str(&format!("xadd s {i}-0 f {i}\n"));
    }
    script.push_str(
        "xlen s\nxadd s maxlen ~ 260 451-0 f x\nxlen s\nxrange s - + count 1\n\
         xtrim s maxlen ~ 10 limit 100\nxlen s\nxtrim s minid ~ 390\nxlen s\n\
         xtrim s maxlen ~ 10\nxlen s\nxrange s - + count 1\nxtrim s maxlen ~ 0 limit 0\nxlen s\n",
    );
    diff_script("stream-approx", &script);
}

/// `*` IDs: increasing, `<ms>-<seq>` with ms near now, and after a future explicit ID the
/// sequence increments.
#[test]
fn auto_ids_increase() {
    let s = tessera();
    let mut c = Conn::connect(s.port);
    let mut last = (0u64, 0u64);
    for _ in 0..50 {
        let Reply::Bulk(b) = c.cmd(&["XADD", "s", "*", "f", "v"]) else {
            panic!("xadd reply");
        };
        let t = String::from_utf8(b).expect("utf8");
        let (ms, seq) = t.split_once('-').expect("dash");
        let id = (ms.parse().expect("ms"), seq.parse().expect("seq"));
        assert!(id > last, "{id:?} after {last:?}");
        last = id;
    }
    let far = "99999999999999-5";
    c.cmd(&["XADD", "s", far, "f", "v"]);
    let r = c.cmd(&["XADD", "s", "*", "f", "v"]);
    assert_eq!(r, Reply::Bulk(b"99999999999999-6".to_vec()));
    assert_eq!(c.cmd(&["XLEN", "s"]), Reply::Int(52));
}

#[test]
fn stream_group_commands_match_redis() {
    diff_script(
        "stream-groups",
        r#"
        xadd s 1-0 a 1
        xadd s 2-0 b 2
        xadd s 3-0 c 3
        xadd s 4-0 d 4
        xgroup create s g1 0
        xgroup create s g1 0
        xgroup create s g2 $
        xgroup create s g3 2-0 entriesread 1
        xgroup create s g4 0 entriesread -2
        xgroup create s g4 0 entriesread x
        xgroup create s g4 0 foo
        xgroup create s g4 bad
        xgroup create nokey g 0
        xgroup create nokey g $ mkstream
        type nokey
        xlen nokey
        xgroup create s
        xgroup foo s g
        xgroup help
        xgroup createconsumer s g1 alice
        xgroup createconsumer s g1 alice
        xgroup createconsumer s nog alice
        xgroup createconsumer nokey2 g alice
        xreadgroup group g1 alice count 2 streams s >
        xreadgroup group g1 bob streams s >
        xreadgroup group g1 bob streams s >
        xreadgroup group g1 alice streams s 0
        xreadgroup group g1 alice count 1 streams s 0
        xreadgroup group g1 alice streams s 1-0
        xreadgroup group g1 carol streams s 0
        xreadgroup group g1 alice streams s $
        xreadgroup group g1 alice streams s
        xreadgroup group nog alice streams s >
        xreadgroup group g1 alice streams nokey9 >
        xreadgroup streams s >
        xreadgroup group g1 alice streams s bad
        xreadgroup group g1 alice foo streams s >
        xread group g1 alice streams s 0
        xread noack streams s 0
        xread streams s >
        xpending s g1
        xpending s g2
        xpending s nog
        xpending nokey9 g1
        xpending s g1 - + 10 nobody
        xpending s g1 idle 999999999 - + 10
        xpending s g1 idle 999999999 - + 10 alice
        xpending s g1 - +
        xpending s g1 idle 5 - +
        xpending s g1 - + x
        xpending s g1 bad + 10
        xpending s g1 (18446744073709551615-18446744073709551615 + 10
        xack s g1 1-0 9-0
        xack s g1 1-0
        xack s g1 bad
        xack s nog 1-0
        xack s nog bad
        xack nokey9 g 1-0
        xpending s g1
        xdel s 3-0
        xreadgroup group g1 bob streams s 0
        xadd s 5-0 e 5
        xreadgroup group g2 dave noack streams s >
        xpending s g2
        xreadgroup group g1 alice streams s >
        xpending s g1
        xgroup setid s g1 0
        xgroup setid s g1 $ entriesread 3
        xgroup setid s g1 bad
        xgroup setid s nog 0
        xgroup setid s g1 0 foo
        xgroup setid s g1 0 entriesread 1 x
        xgroup setid s g1 1-0
        xreadgroup group g1 eve count 1 streams s >
        xpending s g1
        xgroup delconsumer s g1 eve
        xgroup delconsumer s g1 nobody
        xgroup delconsumer s nog x
        xpending s g1
        xgroup destroy s g3
        xgroup destroy s g3
        xgroup destroy nokey9 g3
        xreadgroup group g3 x streams s >
        set str v
        xgroup create str g 0
        xreadgroup group g a streams str >
        xack str g 1-0
        xpending str g
        xgroup create s2 g 0 mkstream
        xreadgroup group g a streams s2 >
        xreadgroup group g a streams s2 0
        xreadgroup group g1 alice streams s s2 > >
        xreadgroup group g alice streams s2 s > >
        "#,
    );
}

#[test]
fn stream_claim_and_setid_match_redis() {
    diff_script(
        "stream-claim",
        r#"
        xadd s 1-0 a 1
        xadd s 2-0 b 2
        xadd s 3-0 c 3
        xadd s 4-0 d 4
        xadd s 5-0 e 5
        xgroup create s g 0
        xreadgroup group g alice streams s >
        xclaim s g bob 0 1-0 2-0
        xclaim s g bob 0 1-0 justid
        xclaim s g bob 0 9-0
        xclaim s g bob 0 9-0 force
        xclaim s g carol 0 3-0 retrycount 7 justid
        xclaim s g carol 0 3-0 idle 10 time 5 justid
        xclaim s g carol 999999999 4-0
        xclaim s g carol 999999999 4-0 justid lastid 8-0
        xclaim s g carol 0 4-0 foo
        xclaim s g carol x 4-0
        xclaim s g carol 0 4-0 idle x
        xclaim s g carol 0 4-0 time x
        xclaim s g carol 0 4-0 retrycount x
        xclaim s g carol 0 4-0 lastid x
        xclaim s nog carol 0 4-0
        xclaim nokey g carol 0 4-0
        xpending s g
        xgroup createconsumer s g dave
        xdel s 2-0
        xclaim s g dave 0 2-0 5-0
        xpending s g
        xclaim s g dave 0 1-0 force justid
        xadd s 6-0 f 6
        xclaim s g dave 0 6-0 force justid
        xpending s g
        xautoclaim s g erin 0 0
        xpending s g
        xautoclaim s g frank 0 0 count 2
        xautoclaim s g frank 0 (4-0 count 2 justid
        xautoclaim s g frank 0 0 count 0
        xautoclaim s g frank 0 0 count x
        xautoclaim s g frank 0 0 foo
        xautoclaim s g frank x 0
        xautoclaim s g frank 0 bad
        xautoclaim s g frank 999999999 0
        xautoclaim s nog frank 0 0
        xautoclaim nokey g frank 0 0
        xdel s 4-0 5-0
        xautoclaim s g gina 0 - count 1
        xautoclaim s g gina 0 - justid
        xpending s g
        xautoclaim s g gina 0 (18446744073709551615-18446744073709551615
        xsetid s 100-0
        xadd s 100-0 x 1
        xadd s 100-* x 1
        xsetid s 1-0
        xsetid s 200-0 entriesadded 1
        xsetid s 200-0 entriesadded -1
        xsetid s 200-0 entriesadded 50 maxdeletedid 150-0
        xsetid s 200-0 maxdeletedid 300-0
        xsetid s 140-0
        xsetid s 200-0 foo 1
        xsetid s bad
        xsetid nokey 1-0
        xsetid s 0-0
        xadd e 1-0 a 1
        xdel e 1-0
        xsetid e 0-5
        xsetid e 1-0
        xadd e 1-* a 1
        set str v
        xsetid str 1-0
        xclaim str g c 0 1-0
        xautoclaim str g c 0 0
        "#,
    );
}

#[test]
fn stream_xinfo_matches_redis() {
    // XINFO STREAM is compared in types_stream_persist (without the rax node counts).
    diff_script(
        "stream-xinfo",
        r#"
        xadd s 1-0 a 1
        xadd s 2-0 b 2
        xadd s 3-0 c 3
        xinfo groups s
        xgroup create s g1 0
        xgroup create s g2 $
        xgroup create s g3 1-0 entriesread 1
        xgroup create s g4 2-0
        xinfo groups s
        xreadgroup group g1 a count 1 streams s >
        xinfo groups s
        xdel s 2-0
        xinfo groups s
        xreadgroup group g1 a streams s >
        xreadgroup group g4 a streams s >
        xinfo groups s
        xadd s 4-0 d 4
        xinfo groups s
        xinfo consumers s g2
        xinfo consumers s nog
        xinfo consumers nokey g
        xinfo groups nokey
        xinfo stream nokey
        xinfo help
        xinfo foo
        xinfo groups
        xadd e 1-0 a 1
        xdel e 1-0
        xgroup create e g 0
        xinfo groups e
        xgroup create new g $ mkstream
        xinfo groups new
        set str v
        xinfo groups str
        xinfo stream str
        xinfo consumers str g
        "#,
    );
}
