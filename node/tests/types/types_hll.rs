//! HyperLogLog compatibility with redis-server 7.0: the same PFADDs produce byte-identical
//! values (sparse encoding, sparse→dense promotion, dense), identical PFCOUNTs, and values
//! created by one server are read and extended correctly by the other.

use tessera_testkit::diff::*;

fn get(c: &mut Conn, key: &str) -> Vec<u8> {
    match c.cmd(&["GET", key]) {
        Reply::Bulk(b) => b,
        r => panic!("GET {key}: {r:?}"),
    }
}

fn pfadd_batch(c: &mut Conn, key: &str, from: usize, n: usize) -> Reply {
    let elems: Vec<String> = (from..from + n).map(|i| format!("elem:{i}")).collect();
    let mut args = vec!["PFADD", key];
    args.extend(elems.iter().map(String::as_str));
    c.cmd(&args)
}

#[test]
fn hll_values_are_byte_identical_to_redis() {
    let t = tessera();
    let r = redis();
    let mut a = Conn::connect(t.port);
    let mut b = Conn::connect(r.port);
    // Small steps first (sparse, opcode splits and merges), then big ones (promotion to dense).
    let mut added = 0;
    let steps = [
        1, 1, 2, 5, 10, 20, 50, 100, 200, 400, 800, 2000, 5000, 20000,
    ];
    for (i, &n) in steps.iter().enumerate() {
        let ra = pfadd_batch(&mut a, "h", added, n);
        let rb = pfadd_batch(&mut b, "h", added, n);
        assert_eq!(ra, rb, "PFADD step {i}");
        added += n;
        let (va, vb) = (get(&mut a, "h"), get(&mut b, "h"));
        assert_eq!(va.len(), vb.len(), "length after {added} elements");
        assert!(va == vb, "bytes differ after {added} elements");
        let (ca, cb) = (a.cmd(&["PFCOUNT", "h"]), b.cmd(&["PFCOUNT", "h"]));
        assert_eq!(ca, cb, "PFCOUNT after {added}");
        // PFCOUNT caches the cardinality in the header: still identical.
        assert!(
            get(&mut a, "h") == get(&mut b, "h"),
            "cached header after {added}"
        );
    }
    assert_eq!(get(&mut a, "h").len(), 16 + 12288, "ends dense");
    // Standard error: 0.81%; allow 3 sigma on this single estimate.
    let est = a.cmd(&["PFCOUNT", "h"]).as_int().unwrap_or(0) as f64;
    let err = (est - added as f64).abs() / added as f64;
    eprintln!(
        "cardinality {added}: estimate {est}, error {:.3}%",
        err * 100.0
    );
    assert!(err < 0.0243, "estimate {est} for {added}");

    // Merges: sparse + sparse stays sparse, anything + dense becomes dense.
    for c in [&mut a, &mut b] {
        pfadd_batch(c, "s1", 100_000, 30);
        pfadd_batch(c, "s2", 100_030, 40);
        assert_eq!(
            c.cmd(&["PFMERGE", "m1", "s1", "s2"]),
            Reply::Simple("OK".into())
        );
        assert_eq!(
            c.cmd(&["PFMERGE", "m2", "s1", "h"]),
            Reply::Simple("OK".into())
        );
    }
    for k in ["m1", "m2"] {
        assert!(get(&mut a, k) == get(&mut b, k), "PFMERGE {k} bytes");
        assert_eq!(
            a.cmd(&["PFCOUNT", k]),
            b.cmd(&["PFCOUNT", k]),
            "PFCOUNT {k}"
        );
    }
    assert_eq!(
        a.cmd(&["PFCOUNT", "s1", "s2", "h"]),
        b.cmd(&["PFCOUNT", "s1", "s2", "h"])
    );

    // Cross-load: a value written by redis is served and extended by tessera, and back.
    let from_redis = get(&mut b, "s1");
    set_raw(&mut a, "x", &from_redis);
    set_raw(&mut b, "x", &from_redis);
    assert_eq!(a.cmd(&["PFCOUNT", "x"]), b.cmd(&["PFCOUNT", "x"]));
    assert_eq!(
        pfadd_batch(&mut a, "x", 7, 300),
        pfadd_batch(&mut b, "x", 7, 300)
    );
    assert!(
        get(&mut a, "x") == get(&mut b, "x"),
        "extended cross-loaded value"
    );

    // A corrupted value is detected the same way.
    let mut bad = get(&mut a, "s1");
    bad.push(0x00);
    set_raw(&mut a, "bad", &bad);
    set_raw(&mut b, "bad", &bad);
    assert_eq!(a.cmd(&["PFCOUNT", "bad"]), b.cmd(&["PFCOUNT", "bad"]));
    assert_eq!(
        a.cmd(&["PFADD", "bad", "zz"]),
        b.cmd(&["PFADD", "bad", "zz"])
    );
}

/// SET with a binary value (the text helpers split on spaces).
fn set_raw(c: &mut Conn, key: &str, val: &[u8]) {
    let mut buf = format!(
        "*3\r\n$3\r\nSET\r\n${}\r\n{}\r\n${}\r\n",
        key.len(),
        key,
        val.len()
    )
    .into_bytes();
    buf.extend_from_slice(val);
    buf.extend_from_slice(b"\r\n");
    c.raw_write(&buf);
    assert_eq!(c.read(), Reply::Simple("OK".into()));
}
