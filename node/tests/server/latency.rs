//! LATENCY and latency tracking against redis-server 7.0: the same replies where they do
//! not depend on timing (help, errors, empty states, call counts, the events recorded,
//! the shape of graphs and histograms, INFO latencystats' fields), in RESP2 and RESP3.

use tessera_testkit::*;

fn start(bin: &str) -> Server {
    Launch::new(bin)
        .args(&["--save", "", "--enable-debug-command", "yes"])
        .start()
}

/// A reply with every integer replaced by `#` (timestamps, latencies), and each
/// `histogram_usec` map (how many buckets depends on timing) by `H`.
fn masked(r: &R) -> String {
    let s = masked_ints(r);
    let mut out = String::new();
    let mut rest = s.as_str();
    while let Some(i) = rest.find("histogram_usec,") {
        let (head, tail) = rest.split_at(i + "histogram_usec,".len());
        out.push_str(head);
        out.push('H');
        let end = tail.find(']').map_or(tail.len(), |e| e + 1);
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

fn masked_ints(r: &R) -> String {
    match r {
        R::Int(_) => "#".into(),
        R::Arr(v) => format!(
            "[{}]",
            v.iter().map(masked_ints).collect::<Vec<_>>().join(",")
        ),
        R::Agg(t, v) => format!(
            "{}[{}]",
            *t as char,
            v.iter().map(masked_ints).collect::<Vec<_>>().join(",")
        ),
        other => other.s(),
    }
}

/// Runs the same script of commands on both servers; `check` compares each pair.
fn both(script: &[&[&str]]) -> (Vec<R>, Vec<R>) {
    let redis = start(redis_bin());
    let tessera = start(tessera_bin());
    let mut r = Raw::connect(redis.port);
    let mut t = Raw::connect(tessera.port);
    let mut out = (Vec::new(), Vec::new());
    for cmd in script {
        out.0.push(r.cmd(cmd));
        out.1.push(t.cmd(cmd));
    }
    out
}

#[test]
fn empty_states_help_and_errors_match_redis() {
    let script: &[&[&str]] = &[
        &["LATENCY", "HELP"],
        &["LATENCY", "LATEST"],
        &["LATENCY", "HISTORY", "command"],
        &["LATENCY", "RESET"],
        &["LATENCY", "RESET", "command", "nosuch"],
        &["LATENCY", "GRAPH", "command"],
        &["LATENCY", "DOCTOR"],
        &["LATENCY", "HISTOGRAM", "nosuch"],
        &["LATENCY", "NOSUCH"],
        &["LATENCY"],
        &["LATENCY", "GRAPH"],
        &["LATENCY", "LATEST", "x"],
        &["HELLO", "3"],
        &["LATENCY", "DOCTOR"],
        &["LATENCY", "HISTOGRAM", "nosuch"],
    ];
    let (want, got) = both(script);
    for ((cmd, w), g) in script.iter().zip(&want).zip(&got) {
        if cmd == &["HELLO", "3"] {
            continue;
        }
        assert_eq!(g, w, "{cmd:?}");
    }
}

#[test]
fn monitor_events_match_redis() {
    let script: &[&[&str]] = &[
        &["CONFIG", "SET", "latency-monitor-threshold", "20"],
        // Under the threshold: no event.
        &["PING"],
        &["LATENCY", "LATEST"],
        // A slow command (not flagged fast): a "command" event of at least 50 ms.
        &["DEBUG", "SLEEP", "0.05"],
        &["LATENCY", "LATEST"],
        &["LATENCY", "HISTORY", "command"],
        &["LATENCY", "RESET", "command"],
        &["LATENCY", "LATEST"],
        &["DEBUG", "SLEEP", "0.03"],
        &["LATENCY", "RESET"],
    ];
    let (want, got) = both(script);
    for ((cmd, w), g) in script.iter().zip(&want).zip(&got) {
        assert_eq!(masked(g), masked(w), "{cmd:?}: {g:?} vs {w:?}");
    }
    // The latencies themselves: at least what was slept, on both.
    for r in [&want[4], &got[4]] {
        let R::Arr(rows) = r else { panic!("{r:?}") };
        let R::Arr(row) = &rows[0] else {
            panic!("{r:?}")
        };
        assert_eq!(row[0], R::Bulk(b"command".to_vec()));
        assert!(matches!(row[2], R::Int(ms) if ms >= 50), "{row:?}");
    }
}

#[test]
fn graph_and_doctor_after_a_spike() {
    let srv = start(tessera_bin());
    let mut c = Raw::connect(srv.port);
    c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "10"]);
    c.cmd(&["DEBUG", "SLEEP", "0.02"]);
    let g = c.cmd(&["LATENCY", "GRAPH", "command"]).s();
    let lines: Vec<&str> = g.lines().collect();
    assert!(
        lines[0].starts_with("command - high ") && lines[0].contains("(all time high "),
        "{g}"
    );
    assert_eq!(lines[1], "-".repeat(80));
    // Four sparkline rows (one sample: the lowest mark), a blank, then "0s" downwards.
    assert_eq!(&lines[2..9], &[" ", " ", " ", "_", " ", "0", "s"], "{g}");
    let d = c.cmd(&["LATENCY", "DOCTOR"]).s();
    assert!(d.contains("1. command: 1 latency spikes"), "{d}");
}

/// Histogram bounds and call counts after known traffic; INFO latencystats' fields and the
/// percentiles setting; CONFIG RESETSTAT and latency-tracking no.
#[test]
fn histograms_and_latencystats_match_redis() {
    let mut script: Vec<Vec<String>> = Vec::new();
    let mut add = |a: &[&str]| script.push(a.iter().map(|s| s.to_string()).collect());
    for i in 0..5 {
        add(&["SET", &format!("k{i}"), "v"]);
    }
    for i in 0..7 {
        add(&["GET", &format!("k{i}")]);
    }
    add(&["CONFIG", "GET", "maxmemory"]);
    add(&["LATENCY", "HISTOGRAM", "set", "get", "nosuch", "config|get"]);
    add(&["LATENCY", "HISTOGRAM", "config"]);
    add(&["INFO", "latencystats"]);
    add(&[
        "CONFIG",
        "SET",
        "latency-tracking-info-percentiles",
        "50 99.99",
    ]);
    add(&["INFO", "latencystats"]);
    add(&["CONFIG", "SET", "latency-tracking-info-percentiles", ""]);
    add(&["INFO", "latencystats"]);
    add(&["CONFIG", "RESETSTAT"]);
    add(&["LATENCY", "HISTOGRAM", "set"]);
    add(&["CONFIG", "SET", "latency-tracking", "no"]);
    add(&["SET", "a", "b"]);
    add(&["LATENCY", "HISTOGRAM", "set"]);
    add(&["CONFIG", "SET", "latency-tracking", "yes"]);
    add(&["HELLO", "3"]);
    add(&["SET", "a", "b"]);
    add(&["LATENCY", "HISTOGRAM", "set"]);
    let views: Vec<Vec<&str>> = script
        .iter()
        .map(|c| c.iter().map(|s| s.as_str()).collect())
        .collect();
    let refs: Vec<&[&str]> = views.iter().map(|v| v.as_slice()).collect();
    let (want, got) = both(&refs);
    for ((cmd, w), g) in refs.iter().zip(&want).zip(&got) {
        if cmd[0] == "HELLO" {
            continue;
        }
        if cmd[0] == "INFO" {
            // Same fields; the values are timings.
            let keys = |r: &R| -> Vec<String> {
                r.s()
                    .lines()
                    .map(|l| {
                        l.split(',')
                            .map(|f| f.split(['=', ':']).next().unwrap_or("").to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .filter(|l| !l.starts_with("latency_percentiles_usec_hello"))
                    .collect()
            };
            let (mut k1, mut k2) = (keys(w), keys(g));
            k1.sort();
            k2.sort();
            assert_eq!(k2, k1, "{cmd:?}\n{}\n{}", g.s(), w.s());
            continue;
        }
        assert_eq!(masked(g), masked(w), "{cmd:?}: {g:?} vs {w:?}");
    }
    // Call counts are exact: 5 SETs, 7 GETs; the last bucket holds every call.
    let calls = |r: &R, name: &str| -> Option<i64> {
        let R::Arr(v) = r else { return None };
        let i = v
            .iter()
            .position(|x| *x == R::Bulk(name.as_bytes().to_vec()))?;
        let R::Arr(m) = &v[i + 1] else { return None };
        let R::Arr(h) = &m[3] else { return None };
        assert_eq!(h.last(), Some(&m[1]), "the cumulative count ends at calls");
        match m[1] {
            R::Int(n) => Some(n),
            _ => None,
        }
    };
    for r in [&want[13], &got[13]] {
        assert_eq!(calls(r, "set"), Some(5), "{r:?}");
        assert_eq!(calls(r, "get"), Some(7), "{r:?}");
        assert_eq!(calls(r, "config|get"), Some(1), "{r:?}");
    }
}
