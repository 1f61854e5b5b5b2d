//! Bus benchmark: N-node cluster on loopback — time to converge (every node sees every other
//! connected), then bus messages/s and CPU per node at rest. `--kind tessera` runs our nodes
//! in this process; `--kind redis|valkey` spawns one server process per node.
//!
//! Usage: bench_bus [--kind tessera|redis|valkey] [--nodes 30] [--settle-secs 5]
//!        [--rest-secs 10] [--node-timeout 15000]
//! "At rest" is measured over rest-secs, starting settle-secs after convergence.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_cluster::{commands, ClusterConfig, ClusterNode, NullHost, Reply};

struct Args {
    kind: String,
    nodes: usize,
    rest_secs: u64,
    settle_secs: u64,
    node_timeout: u64,
}

fn parse_args() -> Args {
    let mut a = Args {
        kind: "tessera".into(),
        nodes: 30,
        rest_secs: 10,
        settle_secs: 5,
        node_timeout: 15000,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i + 1 < v.len() {
        match v[i].as_str() {
            "--kind" => a.kind = v[i + 1].clone(),
            "--nodes" => a.nodes = v[i + 1].parse().unwrap_or(30),
            "--rest-secs" => a.rest_secs = v[i + 1].parse().unwrap_or(10),
            "--settle-secs" => a.settle_secs = v[i + 1].parse().unwrap_or(5),
            "--node-timeout" => a.node_timeout = v[i + 1].parse().unwrap_or(15000),
            _ => {}
        }
        i += 2;
    }
    a
}

/// Free client ports P (with P+10000 free) in the cluster crate's range.
fn free_ports(n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for p in 18000..19000u16 {
        if out.len() == n {
            break;
        }
        let a = std::net::TcpListener::bind(("127.0.0.1", p));
        let b = std::net::TcpListener::bind(("127.0.0.1", p + 10000));
        if a.is_ok() && b.is_ok() {
            out.push(p);
        }
    }
    out
}

/// Counts nodes in a CLUSTER NODES text that are connected and out of handshake.
fn connected_count(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            f.len() >= 8 && f[7] == "connected" && !f[2].contains("handshake")
        })
        .count()
}

fn process_cpu_secs() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn pid_cpu_secs(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of /proc/pid/stat (11 and 12 after the ')').
    (ticks(11) + ticks(12)) / 100.0
}

fn info_field(info: &str, key: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn report(kind: &str, n: usize, converge: Duration, msgs: u64, cpu: f64, secs: f64) {
    println!(
        "{kind:8} nodes={n} converge_ms={} msgs_per_s_per_node={:.1} cpu_pct_per_node={:.3}",
        converge.as_millis(),
        msgs as f64 / secs / n as f64,
        cpu / secs / n as f64 * 100.0
    );
}

fn run_tessera(a: &Args) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let tmp = tempfile::tempdir().expect("tempdir");
    let ports = free_ports(a.nodes);
    let nodes: Vec<ClusterNode> = ports
        .iter()
        .map(|&p| {
            let cfg = ClusterConfig {
                enabled: true,
                port: p,
                node_timeout_ms: a.node_timeout,
                config_file: tmp.path().join(format!("nodes-{p}.conf")),
                ..Default::default()
            };
            rt.block_on(ClusterNode::start(cfg, Arc::new(NullHost)))
                .expect("start")
        })
        .collect();
    let t0 = Instant::now();
    for &p in &ports[1..] {
        let args: Vec<&[u8]> = vec![b"MEET", b"127.0.0.1", p.to_string().leak().as_bytes()];
        commands::cluster_command(&nodes[0], &args, false);
    }
    let text = |n: &ClusterNode| match commands::cluster_command(n, &[b"NODES"], false) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        Reply::Verbatim(s) => s,
        _ => String::new(),
    };
    let mut last_print = Instant::now();
    while !nodes.iter().all(|n| connected_count(&text(n)) == a.nodes) {
        std::thread::sleep(Duration::from_millis(20));
        if std::env::var("BENCH_DEBUG").is_ok() && last_print.elapsed() > Duration::from_millis(500)
        {
            last_print = Instant::now();
            let known: Vec<usize> = nodes
                .iter()
                .map(|n| n.with_state(|st| st.nodes.len()))
                .collect();
            let conn: Vec<usize> = nodes.iter().map(|n| connected_count(&text(n))).collect();
            eprintln!("{:?} known={known:?} connected={conn:?}", t0.elapsed());
            for n in &nodes {
                let t = text(n);
                if t.lines().count() == a.nodes && connected_count(&t) < a.nodes {
                    let me = t
                        .lines()
                        .find(|l| l.contains("myself"))
                        .unwrap_or("")
                        .to_string();
                    let bad: Vec<&str> = t.lines().filter(|l| !l.contains(" connected")).collect();
                    eprintln!("  {me}\n  not connected: {bad:?}");
                }
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "did not converge");
    }
    let converge = t0.elapsed();
    std::thread::sleep(Duration::from_secs(a.settle_secs));
    let sent = |n: &ClusterNode| n.with_state(|st| st.stats.sent.iter().sum::<u64>());
    let m0: u64 = nodes.iter().map(sent).sum();
    let c0 = process_cpu_secs();
    std::thread::sleep(Duration::from_secs(a.rest_secs));
    let m1: u64 = nodes.iter().map(sent).sum();
    let c1 = process_cpu_secs();
    report(
        "tessera",
        a.nodes,
        converge,
        m1 - m0,
        c1 - c0,
        a.rest_secs as f64,
    );
}

struct Kill(Vec<Child>);
impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn redis_cmd(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn run_server(a: &Args, bin: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ports = free_ports(a.nodes);
    let mut kids = Kill(Vec::new());
    for &p in &ports {
        let c = Command::new(bin)
            .args([
                "--port",
                &p.to_string(),
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
            ])
            .arg("--cluster-config-file")
            .arg(tmp.path().join(format!("nodes-{p}.conf")))
            .args([
                "--cluster-node-timeout",
                &a.node_timeout.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server");
        kids.0.push(c);
    }
    for &p in &ports {
        while std::net::TcpStream::connect(("127.0.0.1", p)).is_err() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let t0 = Instant::now();
    for &p in &ports[1..] {
        redis_cmd(ports[0], &["CLUSTER", "MEET", "127.0.0.1", &p.to_string()]);
    }
    while !ports
        .iter()
        .all(|&p| connected_count(&redis_cmd(p, &["CLUSTER", "NODES"])) == a.nodes)
    {
        std::thread::sleep(Duration::from_millis(20));
        assert!(t0.elapsed() < Duration::from_secs(120), "did not converge");
    }
    let converge = t0.elapsed();
    std::thread::sleep(Duration::from_secs(a.settle_secs));
    let sent = |p: u16| {
        info_field(
            &redis_cmd(p, &["CLUSTER", "INFO"]),
            "cluster_stats_messages_sent",
        )
    };
    let cpu = |k: &Kill| k.0.iter().map(|c| pid_cpu_secs(c.id())).sum::<f64>();
    let m0: u64 = ports.iter().map(|&p| sent(p)).sum();
    let c0 = cpu(&kids);
    std::thread::sleep(Duration::from_secs(a.rest_secs));
    let m1: u64 = ports.iter().map(|&p| sent(p)).sum();
    let c1 = cpu(&kids);
    let name = if bin.contains("valkey") {
        "valkey"
    } else {
        "redis"
    };
    report(
        name,
        a.nodes,
        converge,
        m1 - m0,
        c1 - c0,
        a.rest_secs as f64,
    );
}

fn main() {
    let a = parse_args();
    match a.kind.as_str() {
        "tessera" => run_tessera(&a),
        "redis" => run_server(&a, "redis-server"),
        "valkey" => run_server(
            &a,
            &std::env::var("VALKEY_SERVER").unwrap_or_else(|_| ".tools/bin/valkey-server".into()),
        ),
        other => eprintln!("unknown --kind {other}"),
    }
}
