//! metrics-port: the node's own /metrics (issue 22), scraped over HTTP from a running
//! tessera-node and compared with what INFO and CLUSTER INFO say over RESP at the same time.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use tessera_testkit::cluster::{cluster_client, cluster_create, Proc};
use tessera_testkit::*;

/// GET /metrics; (status line, Content-Type, body).
fn scrape(ip: &str, port: u16, accept: Option<&str>) -> (String, String, String) {
    let mut s = TcpStream::connect((ip, port)).expect("connect to metrics-port");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {ip}\r\n{accept}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or_default().to_string();
    let ctype = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    (status, ctype, body.to_string())
}

/// The value of `series` (name and labels exactly as written) in an exposition.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn info_num(info: &str, field: &str) -> f64 {
    info_field(info, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("INFO has no number {field}"))
}

fn info_text(c: &mut Conn, section: &str) -> String {
    match c.cmd(&["INFO", section]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO {section}: {other:?}"),
    }
}

#[test]
fn scrape_agrees_with_info() {
    let mport = free_port();
    let srv = Launch::tessera()
        .args(&["--save", "", "--metrics-port", &mport.to_string()])
        .start();
    let mut c = srv.resp();
    for i in 0..50 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    for i in 0..7 {
        c.cmd(&["EXPIRE", &format!("k{i}"), "1000"]);
    }
    c.cmd(&["GET", "k1"]);
    c.cmd(&["GET", "missing"]);
    c.cmd(&["LPUSH", "k2", "x"]); // WRONGTYPE
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "metrics-port"]),
        Reply::Array(vec![
            Reply::Bulk(b"metrics-port".to_vec()),
            Reply::Bulk(mport.to_string().into_bytes())
        ])
    );

    let (status, ctype, body) = scrape(&srv.ip, mport, None);
    let info = info_text(&mut c, "everything");
    assert!(status.contains(" 200"), "{status}");
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    assert!(!body.contains("# EOF"), "Prometheus text has no EOF marker");

    // Figures that did not move between the scrape and INFO are equal.
    for (series, field) in [
        (r#"redis_db_keys{db="db0"}"#, None),
        ("redis_connected_clients", Some("connected_clients")),
        ("redis_keyspace_hits_total", Some("keyspace_hits")),
        ("redis_keyspace_misses_total", Some("keyspace_misses")),
        ("redis_memory_max_bytes", Some("maxmemory")),
        ("redis_process_id", Some("process_id")),
        ("redis_connected_slaves", Some("connected_slaves")),
        ("redis_aof_enabled", Some("aof_enabled")),
    ] {
        let want = match field {
            Some(f) => info_num(&info, f),
            None => 50.0,
        };
        assert_eq!(value(&body, series), Some(want), "{series}\n{body}");
    }
    assert_eq!(
        value(&body, r#"redis_db_keys_expiring{db="db0"}"#),
        Some(7.0)
    );
    assert_eq!(
        value(&body, r#"redis_commands_total{cmd="set"}"#),
        Some(50.0)
    );
    assert_eq!(
        value(&body, r#"redis_commands_total{cmd="expire"}"#),
        Some(7.0)
    );
    assert_eq!(
        value(&body, r#"redis_errors_total{err="WRONGTYPE"}"#),
        Some(1.0)
    );
    assert_eq!(
        value(&body, r#"redis_commands_failed_calls_total{cmd="lpush"}"#),
        Some(1.0)
    );
    // The commands counted before the scrape; INFO and CONFIG GET came after.
    let scraped = value(&body, "redis_commands_processed_total").expect("commands processed");
    let later = info_num(&info, "total_commands_processed");
    assert!(
        scraped >= 61.0 && scraped <= later,
        "{scraped} vs INFO {later}"
    );
    let used = value(&body, "redis_memory_used_bytes").expect("memory");
    assert!(used > 0.0, "{used}");
    assert_eq!(value(&body, "redis_up"), Some(1.0));
    // What the operator chart's alert rules and dashboard read (operator/tests/chart.rs,
    // REDIS_EXPORTER_NAMES).
    for name in [
        "redis_commands_processed_total",
        "redis_memory_used_bytes",
        "redis_memory_max_bytes",
        "redis_connected_clients",
    ] {
        assert!(value(&body, name).is_some(), "{name} missing from\n{body}");
    }
    assert!(
        value(
            &body,
            r#"redis_latency_percentiles_usec{cmd="set",quantile="0.5"}"#
        )
        .is_some(),
        "{body}"
    );
    assert!(
        !body.contains("redis_cluster_state"),
        "no cluster series on a standalone node"
    );

    // OpenMetrics when asked for.
    let (status, ctype, body) = scrape(
        &srv.ip,
        mport,
        Some("application/openmetrics-text;version=1.0.0,text/plain;q=0.5"),
    );
    assert!(status.contains(" 200"), "{status}");
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    assert!(body.trim_end().ends_with("# EOF"), "{body}");

    // Another path is not found, and the data port is not HTTP.
    let mut s = TcpStream::connect((srv.ip.as_str(), mport)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 404"), "{out}");
}

#[test]
fn off_by_default_and_hidden_from_config_get_star() {
    let srv = Launch::tessera().args(&["--save", ""]).start();
    let mut c = srv.resp();
    let all = c.cmd(&["CONFIG", "GET", "*"]);
    assert!(
        !format!("{all:?}").contains("metrics-port"),
        "CONFIG GET * lists only redis-server's directives"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "metrics-port"]),
        Reply::Array(vec![
            Reply::Bulk(b"metrics-port".to_vec()),
            Reply::Bulk(b"0".to_vec())
        ])
    );
    // Set at start only: a listener is not moved under a running scraper.
    assert!(matches!(
        c.cmd(&["CONFIG", "SET", "metrics-port", "9121"]),
        Reply::Error(_)
    ));
}

#[test]
fn a_taken_metrics_port_stops_the_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let exit = Launch::tessera()
        .args(&["--save", "", "--metrics-port", &port.to_string()])
        .run_to_exit(dir.path(), Duration::from_secs(20));
    assert!(
        exit.failed(),
        "started with metrics-port in use: {}",
        exit.output
    );
    assert!(
        exit.output.contains(&port.to_string()),
        "the message names the port: {}",
        exit.output
    );
}

#[test]
fn cluster_series_agree_with_cluster_info_and_keys() {
    let started: Vec<(Proc, u16)> = (0..3)
        .map(|_| {
            let mport = free_port();
            let srv = Launch::tessera()
                .args(&[
                    "--save",
                    "",
                    "--cluster-enabled",
                    "yes",
                    "--cluster-node-timeout",
                    "2000",
                    "--metrics-port",
                    &mport.to_string(),
                ])
                .start();
            (Proc { srv }, mport)
        })
        .collect();
    let nodes: Vec<&Proc> = started.iter().map(|(p, _)| p).collect();
    let ports: Vec<u16> = started.iter().map(|(_, m)| *m).collect();
    let (ok, out) = cluster_create(&nodes, 0);
    assert!(ok, "{out}");
    wait_until("cluster ok", Duration::from_secs(30), || {
        nodes
            .iter()
            .all(|n| n.cluster_info("cluster_state") == "ok")
    });
    let mut client = cluster_client(nodes.iter().copied())
        .get_connection()
        .expect("cluster connection");
    for i in 0..300 {
        let _: () = redis::cmd("SET")
            .arg(format!("key:{i}"))
            .arg(i)
            .query(&mut client)
            .expect("SET");
    }
    let mut total = 0.0;
    for (n, mport) in nodes.iter().zip(&ports) {
        let (_, _, body) = scrape(&n.ip, *mport, None);
        assert_eq!(value(&body, "redis_cluster_state"), Some(1.0), "{body}");
        // INFO's redis_mode, as redis-server says it in cluster mode.
        assert!(body.contains(r#"redis_mode="cluster""#), "{body}");
        assert_eq!(
            info_field(&n.cli(&["INFO", "server"]), "redis_mode").as_deref(),
            Some("cluster")
        );
        assert_eq!(value(&body, "redis_cluster_known_nodes"), Some(3.0));
        assert_eq!(value(&body, "redis_cluster_slots_assigned"), Some(16384.0));
        let dbsize: f64 = n.cli(&["DBSIZE"]).trim().parse().unwrap();
        let in_ranges: f64 = body
            .lines()
            .filter(|l| l.starts_with("tessera_cluster_slot_range_keys{"))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum();
        assert_eq!(in_ranges, dbsize, "keys by slot range = DBSIZE\n{body}");
        let pings = value(
            &body,
            r#"tessera_cluster_bus_messages_total{type="ping",direction="sent"}"#,
        )
        .expect("pings sent");
        assert!(pings > 0.0);
        assert_eq!(value(&body, "tessera_cluster_slots_migrating"), Some(0.0));
        total += in_ranges;
    }
    assert_eq!(total, 300.0);
}

/// The metrics port serves a few connections at once: idle peers cannot pile up file
/// descriptors (the node's clients share them), and once they go a scrape goes through.
#[test]
fn idle_connections_cannot_take_more_than_a_few_slots() {
    let mport = free_port();
    let srv = Launch::tessera()
        .args(&["--save", "", "--metrics-port", &mport.to_string()])
        .start();
    let idle: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect((srv.ip.as_str(), mport)).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    // A ninth connection is left in the backlog: its request gets no answer yet.
    let mut s = TcpStream::connect((srv.ip.as_str(), mport)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 64];
    let waited = s.read(&mut buf);
    assert!(
        waited.is_err(),
        "answered while 8 idle connections held every slot: {waited:?}"
    );
    drop(idle);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .expect("answered once the idle ones left");
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    // The node's own clients were never affected.
    assert_eq!(srv.resp().cmd(&["PING"]), Reply::Simple("PONG".into()));
}

fn promtool() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("PROMTOOL") {
        return p.into();
    }
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin/promtool");
    assert!(
        p.exists(),
        "promtool not found at {}: run `make deps` (or set PROMTOOL)",
        p.display()
    );
    p
}

/// Prometheus's own linter reads the text format without an error (promtool 2.42 reads only
/// that one, not OpenMetrics). What it still says is only about names kept as
/// redis_exporter has them (so dashboards work unchanged).
#[test]
fn promtool_reads_the_text_format() {
    let mport = free_port();
    let srv = Launch::tessera()
        .args(&["--save", "", "--metrics-port", &mport.to_string()])
        .start();
    let mut c = srv.resp();
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["GET", "k"]);
    c.cmd(&["LPUSH", "k", "x"]);
    let (_, _, body) = scrape(&srv.ip, mport, None);
    let mut child = std::process::Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let unexpected: Vec<&str> = said
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| {
            !(l.contains("should not contain abbreviated units")
                || l.contains("non-summary metrics should not have \"quantile\" label"))
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "promtool check metrics:\n{}",
        unexpected.join("\n")
    );
}
