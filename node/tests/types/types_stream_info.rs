//! XINFO STREAM FULL [COUNT n] against redis-server 7.0.15, RESP2 and RESP3: the same
//! history built on both servers, the replies equal once the clock-dependent fields
//! (seen-time, PEL delivery times) are masked (radix-tree counts included: they are redis's).

use tessera_testkit::diff::*;

/// Replaces what depends on the clock with a marker.
fn mask(r: &Reply) -> Reply {
    tessera_testkit::diff::mask_times(r, &["seen-time"])
}

/// Streams with deletions, trimming, groups with and without entries-read, PELs shared by
/// consumers, an idle consumer, an empty stream and one without groups.
const SETUP: &[&str] = &[
    "xadd s 1-1 a 1",
    "xadd s 2-1 b 2 c 3",
    "xadd s 3-1 d 4",
    "xadd s 4-1 e 5",
    "xadd s 5-1 f 6",
    "xadd s 6-1 g 7",
    "xadd s 7-1 h 8",
    "xadd s 8-1 i 9",
    "xadd s 9-1 j 10",
    "xadd s 10-1 k 11",
    "xadd s 11-1 l 12",
    "xadd s 12-1 m 13",
    "xdel s 2-1",
    "xgroup create s g 0",
    "xgroup create s h $",
    "xgroup create s k 3-1",
    "xreadgroup group g alice count 3 streams s >",
    "xreadgroup group g bob count 2 streams s >",
    "xreadgroup group k carol noack count 2 streams s >",
    "xgroup createconsumer s g idle",
    "xack s g 4-1",
    "xadd t 1-1 a 1",
    "xadd t 2-1 b 2",
    "xtrim t maxlen 1",
    "xadd e 1-1 a 1",
    "xdel e 1-1",
    "xgroup create e g $",
    "set str x",
];

const QUERIES: &[&str] = &[
    "xinfo stream s full",
    "xinfo stream s FULL COUNT 0",
    "xinfo stream s full count 1",
    "xinfo stream s full count 2",
    "xinfo stream s full count 3",
    "xinfo stream s full count -5",
    "xinfo stream t full",
    "xinfo stream e full",
    "xinfo stream e full count 0",
    "xinfo stream nokey full",
    "xinfo stream nokey fulll",
    "xinfo stream s fulll",
    "xinfo STREAM s fulll",
    "xinfo stream s full count",
    "xinfo stream s full count x",
    "xinfo stream s full cnt 1",
    "xinfo stream s full count 1 count 2",
    "xinfo stream str full",
];

fn replies(port: u16, resp3: bool) -> Vec<Reply> {
    let mut c = Conn::with_proto(port, resp3);
    c.cmd(&["FLUSHALL"]);
    for l in SETUP {
        let r = c.line(l);
        assert!(!matches!(r, Reply::Error(_)), "{l}: {r:?}");
    }
    QUERIES.iter().map(|q| mask(&c.line(q))).collect()
}

#[test]
fn xinfo_stream_full_matches_redis() {
    let t = tessera();
    let r = redis();
    for resp3 in [false, true] {
        let got = replies(t.port, resp3);
        // Shape checks that hold without redis: COUNT limits entries and PEL rows.
        let Some(Reply::Array(v)) = got.get(2).map(|g| match g {
            Reply::Map(kv) => Reply::Array(
                kv.iter()
                    .flat_map(|(k, v)| [k.clone(), v.clone()])
                    .collect(),
            ),
            g => g.clone(),
        }) else {
            panic!("full count 1: {:?}", got[2]);
        };
        let entries = v
            .iter()
            .position(|x| matches!(x, Reply::Bulk(b) if b == b"entries"))
            .map(|i| &v[i + 1]);
        assert!(
            matches!(entries, Some(Reply::Array(e)) if e.len() == 1),
            "{entries:?}"
        );
        let want = replies(r.port, resp3);
        for (i, q) in QUERIES.iter().enumerate() {
            assert_eq!(got[i], want[i], "RESP{}: {q}", if resp3 { 3 } else { 2 });
        }
    }
}
