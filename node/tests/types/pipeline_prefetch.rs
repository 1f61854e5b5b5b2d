//! Pipelined batches and the key prefetch (prefetch-batch-max-size): the look-ahead reads
//! requests before they run, so these tests send long pipelines in one write — mixed
//! commands over many keys, SELECT between databases, MULTI, inline requests, unknown
//! commands, wrong arity — and check that tessera-node with the prefetch (default 16), with
//! it off (0) and redis-server 7.0 give the same replies, that a malformed frame after
//! valid requests still answers those first, and that no key of a large pipelined load is
//! lost. The prefetch only runs with at least 64k keys (below, the tables are in the CPU
//! caches), so the tessera servers get filler keys in database 9 first.

use tessera_testkit::diff::*;

fn resp(args: &[String]) -> Vec<u8> {
    let mut b = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        b.extend_from_slice(a.as_bytes());
        b.extend_from_slice(b"\r\n");
    }
    b
}

/// One pseudo-random request (RESP, or now and then inline) over `keys` keys.
fn request(r: &mut Rng, keys: u64) -> Vec<u8> {
    let k = |r: &mut Rng| format!("key:{}", r.below(keys));
    let v = |r: &mut Rng| format!("v{}", r.below(1000));
    let args: Vec<String> = match r.below(24) {
        0..=4 => vec!["SET".into(), k(r), v(r)],
        5..=9 => vec!["GET".into(), k(r)],
        10 => vec!["MSET".into(), k(r), v(r), k(r), v(r), k(r), v(r)],
        11 => vec!["MGET".into(), k(r), k(r), k(r), k(r)],
        12 => vec!["DEL".into(), k(r), k(r)],
        13 => vec!["INCR".into(), format!("n:{}", r.below(50))],
        14 => vec!["HSET".into(), format!("h:{}", r.below(50)), v(r), v(r)],
        15 => vec!["HGETALL".into(), format!("h:{}", r.below(50))],
        16 => vec!["RPUSH".into(), format!("l:{}", r.below(50)), v(r)],
        17 => vec![
            "LRANGE".into(),
            format!("l:{}", r.below(50)),
            "0".into(),
            "-1".into(),
        ],
        18 => vec!["SELECT".into(), r.below(3).to_string()],
        19 => vec!["EXISTS".into(), k(r), k(r)],
        20 => vec!["GET".into()],
        21 => vec!["NOSUCHCMD".into(), k(r)],
        22 => return format!("GET {}\r\n", k(r)).into_bytes(),
        _ => {
            let key = k(r);
            let mut b = resp(&["MULTI".into()]);
            b.extend(resp(&["SET".into(), key.clone(), v(r)]));
            b.extend(resp(&["GET".into(), key]));
            b.extend(resp(&["EXEC".into()]));
            return b;
        }
    };
    resp(&args)
}

fn info_field(c: &mut Conn, section: &str, field: &str) -> u64 {
    let Reply::Bulk(b) = c.cmd(&["INFO", section]) else {
        panic!("INFO {section}");
    };
    String::from_utf8_lossy(&b)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_owned))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

/// Loads `n` keys of 100-byte values into database 9 (pipelined), then returns to db 0.
fn fill(c: &mut Conn, n: usize) {
    let mut bytes = resp(&["SELECT".into(), "9".into()]);
    for i in 0..n {
        bytes.extend(resp(&["SET".into(), format!("fill:{i}"), "f".repeat(100)]));
    }
    bytes.extend(resp(&["SELECT".into(), "0".into()]));
    let replies = c.pipeline(bytes, n + 2);
    assert!(replies.iter().all(|r| *r == Reply::Simple("OK".into())));
}

/// Sends small pipelines until the server reports prefetched batches (it decides on its
/// periodic tick, from the number of keys); panics after 30 s.
fn wait_prefetching(c: &mut Conn) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while info_field(c, "stats", "tessera_prefetch_batches") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the prefetch never started"
        );
        let mut bytes = Vec::new();
        for i in 0..20 {
            bytes.extend(resp(&["GET".into(), format!("probe:{i}")]));
        }
        c.pipeline(bytes, 20);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Replies a request from [`request`] gets (MULTI ... EXEC gets four).
fn replies_of(req: &[u8]) -> usize {
    if req.starts_with(b"*1\r\n$5\r\nMULTI") {
        4
    } else {
        1
    }
}

#[test]
fn pipelines_answer_alike_with_and_without_prefetch() {
    let with = tessera_with(&["--save", "", "--appendonly", "no"]);
    let without = tessera_with(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--prefetch-batch-max-size",
        "0",
    ]);
    let reference = redis();
    let mut ports = vec![with.port, without.port];
    let r = &reference;
    ports.push(r.port);
    let mut conns: Vec<Conn> = ports.iter().map(|&p| Conn::connect(p)).collect();
    fill(&mut conns[0], 120_000);
    fill(&mut conns[1], 120_000);
    wait_prefetching(&mut conns[0]);
    let mut r = Rng(0x5eed_cafe);
    for round in 0..20 {
        // Pipelines from a few requests to a few thousand, over a small and a large keyspace.
        let n = [3, 17, 64, 500, 3000][round % 5];
        let keys = if round % 2 == 0 { 40 } else { 5000 };
        let mut bytes = Vec::new();
        let mut expect = 0;
        for _ in 0..n {
            let q = request(&mut r, keys);
            expect += replies_of(&q);
            bytes.extend(q);
        }
        let all: Vec<Vec<Reply>> = conns
            .iter_mut()
            .map(|c| c.pipeline(bytes.clone(), expect))
            .collect();
        for (i, other) in all.iter().enumerate().skip(1) {
            for (j, (a, b)) in all[0].iter().zip(other).enumerate() {
                assert_eq!(
                    a,
                    b,
                    "round {round}, reply {j}: prefetching tessera vs {}",
                    ["", "tessera without prefetch", "redis-server"][i]
                );
            }
        }
    }
    let before = info_field(&mut conns[0], "stats", "tessera_prefetch_batches");
    assert!(before > 20, "only {before} batches prefetched");
    assert_eq!(
        info_field(&mut conns[1], "stats", "tessera_prefetch_batches"),
        0,
        "prefetch-batch-max-size 0 still prefetched"
    );
    // The last round's SELECT may have left any database current: compare all three.
    for db in 0..3 {
        let sizes: Vec<Reply> = conns
            .iter_mut()
            .map(|c| {
                c.cmd(&["SELECT", &db.to_string()]);
                c.cmd(&["DBSIZE"])
            })
            .collect();
        assert!(sizes.windows(2).all(|w| w[0] == w[1]), "db {db}: {sizes:?}");
    }
}

#[test]
fn malformed_frame_after_a_pipeline_answers_the_valid_requests_first() {
    let with = tessera_with(&["--save", "", "--appendonly", "no"]);
    let reference = redis();
    let mut ports = vec![with.port];
    let r = &reference;
    ports.push(r.port);
    let mut got = Vec::new();
    for port in ports {
        let mut c = Conn::connect(port);
        if port == with.port {
            fill(&mut c, 120_000);
            wait_prefetching(&mut c);
        }
        let mut bytes = Vec::new();
        for i in 0..40 {
            bytes.extend(resp(&["SET".into(), format!("m:{i}"), i.to_string()]));
            bytes.extend(resp(&["GET".into(), format!("m:{i}")]));
        }
        bytes.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$x\r\n");
        let replies = c.pipeline(bytes, 81);
        got.push(replies);
        // The connection is closed after the error; the data stays.
        let mut d = Conn::connect(port);
        assert_eq!(d.cmd(&["GET", "m:39"]), Reply::Bulk(b"39".to_vec()));
    }
    assert!(matches!(&got[0][80], Reply::Error(e) if e.starts_with("ERR Protocol error")));
    if got.len() == 2 {
        assert_eq!(got[0], got[1]);
    }
}

#[test]
fn large_pipelined_load_loses_no_key() {
    let t = tessera_with(&["--save", "", "--appendonly", "no"]);
    let mut c = Conn::connect(t.port);
    let n = 150_000;
    let mut bytes = Vec::new();
    for i in 0..n {
        bytes.extend(resp(&[
            "SET".into(),
            format!("big:{i}"),
            format!("val:{i}"),
        ]));
    }
    let replies = c.pipeline(bytes, n);
    assert!(replies.iter().all(|r| *r == Reply::Simple("OK".into())));
    wait_prefetching(&mut c);
    // Read back in pipelined MGETs of 10 keys and GETs: every value is there.
    let mut bytes = Vec::new();
    for i in (0..n).step_by(10) {
        let mut args = vec!["MGET".to_string()];
        args.extend((i..i + 10).map(|j| format!("big:{j}")));
        bytes.extend(resp(&args));
    }
    let replies = c.pipeline(bytes, n / 10);
    for (b, r) in replies.iter().enumerate() {
        let want: Vec<Reply> = (b * 10..b * 10 + 10)
            .map(|j| Reply::Bulk(format!("val:{j}").into_bytes()))
            .collect();
        assert_eq!(r, &Reply::Array(want), "MGET batch {b}");
    }
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(n as i64));
    assert!(info_field(&mut c, "stats", "tessera_prefetch_batches") > 100);
}
