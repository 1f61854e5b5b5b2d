//! Replication measurements, side by side in one run (ignored by default: run with
//! `TESSERA_BIN=target/release/tessera-node cargo test -p tessera-node --test repl repl_bench
//! -- --ignored --nocapture`):
//! - full-sync time of 1M keys, tessera → tessera vs redis → redis;
//! - replication lag (master offset − replica offset, in bytes) under a redis-benchmark
//!   SET load, and the time to catch up once the load stops.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use tessera_testkit::repl::*;

const KEYS: usize = 1_000_000;

fn tessera_bin() -> String {
    std::env::var("TESSERA_BIN").unwrap_or_else(|_| node_bin().to_string())
}

fn start(kind: &str, dir: &std::path::Path) -> Proc {
    match kind {
        "tessera" => Proc::start(
            "tessera",
            Box::leak(tessera_bin().into_boxed_str()),
            dir,
            &[],
        ),
        "redis-disk" => Proc::redis(dir, &["--repl-diskless-sync", "no"]),
        _ => Proc::redis(
            dir,
            &[
                "--repl-diskless-sync",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
            ],
        ),
    }
}

/// Writes `n` keys with one pipelined stream of SETs (replies read as they come).
fn fill(p: &Proc, n: usize) {
    let mut s = TcpStream::connect(("127.0.0.1", p.port)).expect("connect");
    let r = s.try_clone().expect("clone");
    let reader = std::thread::spawn(move || {
        let mut r = BufReader::new(r);
        let mut line = String::new();
        for _ in 0..n {
            line.clear();
            r.read_line(&mut line).expect("reply");
            assert!(line.starts_with("+OK"), "{line}");
        }
    });
    let mut buf = Vec::with_capacity(1 << 20);
    for i in 0..n {
        let k = format!("key:{i:07}");
        let v = format!("value-{i}");
        buf.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                k.len(),
                v.len()
            )
            .as_bytes(),
        );
        if buf.len() > 1 << 20 {
            s.write_all(&buf).expect("write");
            buf.clear();
        }
    }
    s.write_all(&buf).expect("write");
    reader.join().expect("reader");
}

fn full_sync_secs(kind: &str) -> f64 {
    let (dm, dr) = two_dirs();
    let master = start(kind, dm.path());
    let replica = start(kind, dr.path());
    fill(&master, KEYS);
    let t = Instant::now();
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port)
        .query(&mut replica.conn())
        .expect("replicaof");
    wait_for(Duration::from_secs(600), "link up", || {
        replica.info("replication", "master_link_status").as_deref() == Some("up")
    });
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(dbsizes(&replica, 1)[0], KEYS as i64);
    secs
}

/// (max lag bytes, mean lag bytes, catch-up ms after the load) under redis-benchmark SET.
fn lag_under_load(kind: &str) -> (u64, u64, u128, f64) {
    let (dm, dr) = two_dirs();
    let master = start(kind, dm.path());
    let replica = start(kind, dr.path());
    replicate(&replica, &master);
    let mut bench = Command::new(tessera_testkit::bins::tool("redis-benchmark"))
        .args(["-p", &master.port.to_string(), "-t", "set", "-n", "300000"])
        .args(["-r", "100000", "-c", "20", "-P", "8", "-q"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("redis-benchmark");
    let (mut mc, mut rc) = (master.conn(), replica.conn());
    let (mut max, mut sum, mut samples) = (0u64, 0u64, 0u64);
    while bench.try_wait().expect("wait").is_none() {
        let m: u64 = conn_info(&mut mc, "replication", "master_repl_offset")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let r: u64 = conn_info(&mut rc, "replication", "slave_repl_offset")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let lag = m.saturating_sub(r);
        max = max.max(lag);
        sum += lag;
        samples += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = bench.wait_with_output().expect("bench output");
    let rps = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find_map(|w| w.parse::<f64>().ok())
        .unwrap_or(0.0);
    let t = Instant::now();
    wait_caught_up(&master, &replica);
    (max, sum / samples.max(1), t.elapsed().as_millis(), rps)
}

#[test]
#[ignore]
fn full_sync_and_lag_tessera_vs_redis() {
    let t = full_sync_secs("tessera");
    let r = full_sync_secs("redis");
    let rd = full_sync_secs("redis-disk");
    println!(
        "full sync of {KEYS} keys: tessera->tessera {t:.2} s, redis->redis {r:.2} s (diskless, delay 0), {rd:.2} s (disk-based)"
    );
    for kind in ["tessera", "redis"] {
        let (max, mean, catch, rps) = lag_under_load(kind);
        println!(
            "{kind}->{kind} under redis-benchmark SET -c 20 -P 8 ({rps:.0} req/s): lag max {max} B, mean {mean} B, caught up {catch} ms after the load"
        );
    }
}
