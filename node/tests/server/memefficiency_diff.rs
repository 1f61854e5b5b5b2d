//! Memory per key against redis-server 7.0 (issue 18, Redis's unit/memefficiency): 10000
//! keys written through one pipelining client, used_memory grown by at most what Redis's
//! test allows for the bytes written (key + value + 2), on both servers.

use tessera_testkit::*;

fn used_memory(c: &mut Conn) -> u64 {
    let info = match c.cmd(&["INFO", "memory"]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO answered {other:?}"),
    };
    info_field(&info, "used_memory")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no used_memory in {info}"))
}

/// Redis's test_memory_efficiency with a fixed seed: bytes written / used_memory growth.
fn efficiency(s: &Server, range: u64, seed: u64) -> f64 {
    let mut c = s.resp();
    c.cmd(&["FLUSHALL"]);
    let base = used_memory(&mut c);
    let mut rng = diff::Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut pipe = Vec::new();
    let mut written = 0u64;
    for j in 0..10_000 {
        let key = format!("key:{j}");
        let val = "A".repeat(rng.below(range) as usize);
        written += (key.len() + val.len() + 2) as u64;
        pipe.extend(encode(&[b"SET", key.as_bytes(), val.as_bytes()]));
    }
    let mut rd = s.resp();
    let replies = rd.pipeline(pipe, 10_000);
    assert!(replies.iter().all(|r| *r == Reply::Simple("OK".into())));
    let used = used_memory(&mut c).saturating_sub(base).max(1);
    written as f64 / used as f64
}

#[test]
fn memory_efficiency_like_redis() {
    // Redis's (range, minimum efficiency) pairs.
    const CASES: [(u64, f64); 5] = [
        (32, 0.15),
        (64, 0.25),
        (128, 0.35),
        (1024, 0.75),
        (16384, 0.82),
    ];
    let [r, t] = [Launch::redis(), Launch::tessera()].map(|l| l.args(&["--save", ""]).start());
    let mut failed = Vec::new();
    for (range, min) in CASES {
        for seed in [1, 2, 3] {
            let (er, et) = (efficiency(&r, range, seed), efficiency(&t, range, seed));
            if er < min || et < min {
                failed.push(format!(
                    "range {range} seed {seed}: redis {er:.3}, tessera {et:.3} (minimum {min})"
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
