//! The cluster and DUMP/MIGRATE tests' helpers: tessera-node / redis-server / valkey-server
//! in cluster mode, redis-cli --cluster, and byte-exact single-line replies.

use std::time::Duration;

pub use crate::cli::cli_out;
use crate::server::{Launch, Server};
pub use crate::wait::wait_for;

/// One server process (tessera-node, redis-server or valkey-server) in its own temp dir,
/// log in `dir/log`; derefs to the shared guard (`port`, `ip`, `addr`, `kill`).
pub struct Proc {
    pub srv: Server,
}

crate::deref_server!(Proc);

impl Proc {
    fn launch(bin: &'static str, extra: &[String]) -> Launch {
        Launch::new(bin)
            .args(&["--save", "", "--appendonly", "no"])
            .args(extra)
            .logfile()
    }

    /// Starts `bin` in cluster mode on `ip`.
    pub fn cluster(bin: &'static str, ip: &str, node_timeout_ms: u64) -> Proc {
        let extra = [
            "--cluster-enabled".to_string(),
            "yes".into(),
            "--cluster-node-timeout".into(),
            node_timeout_ms.to_string(),
        ];
        Proc {
            srv: Proc::launch(bin, &extra).ip(ip).start(),
        }
    }

    /// Starts `bin` standalone on 127.0.0.1.
    pub fn standalone(bin: &'static str) -> Proc {
        Proc {
            srv: Proc::launch(bin, &[]).start(),
        }
    }

    /// (Re)starts the process on a fresh port of `self.ip`, same dir (and nodes.conf).
    pub fn spawn(&mut self) {
        self.srv.restart();
    }

    /// redis-cli output (raw mode, no -c) for one command.
    pub fn cli(&self, args: &[&str]) -> String {
        let o = cli_out(&["-h", &self.ip, "-p", &self.port.to_string()], args);
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    pub fn myid(&self) -> String {
        self.cli(&["CLUSTER", "MYID"]).trim().to_string()
    }

    /// CLUSTER NODES lines.
    pub fn nodes(&self) -> Vec<String> {
        self.cli(&["CLUSTER", "NODES"])
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.to_string())
            .collect()
    }

    pub fn cluster_info(&self, field: &str) -> String {
        crate::info_field(&self.cli(&["CLUSTER", "INFO"]), field).unwrap_or_default()
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://{}/", self.addr()))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .expect("connect")
    }
}

/// `n` nodes of `bin` in cluster mode on 127.0.0.1, not joined yet.
pub fn cluster_nodes(bin: &'static str, n: usize, node_timeout_ms: u64) -> Vec<Proc> {
    (0..n)
        .map(|_| Proc::cluster(bin, "127.0.0.1", node_timeout_ms))
        .collect()
}

/// A `redis` crate cluster client seeded with every node's address.
pub fn cluster_client<'a>(
    nodes: impl IntoIterator<Item = &'a Proc>,
) -> redis::cluster::ClusterClient {
    let urls: Vec<String> = nodes
        .into_iter()
        .map(|n| format!("redis://{}/", n.addr()))
        .collect();
    redis::cluster::ClusterClient::new(urls).expect("cluster client")
}

/// Sends one command over a raw socket and returns the first reply line, CRLF included
/// (for byte-exact error checks).
pub fn raw_line(addr: &str, args: &[&[u8]]) -> String {
    raw_lines(addr, &[args]).pop().unwrap_or_default()
}

/// Pipelines commands and returns the first line of each reply (status/error/int replies).
pub fn raw_lines(addr: &str, cmds: &[&[&[u8]]]) -> Vec<String> {
    use std::io::{BufRead, BufReader, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut buf = Vec::new();
    for args in cmds {
        buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in *args {
            buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            buf.extend_from_slice(a);
            buf.extend_from_slice(b"\r\n");
        }
    }
    s.write_all(&buf).expect("write");
    let mut rd = BufReader::new(s);
    let mut out = Vec::new();
    for _ in 0..cmds.len() {
        let mut line = String::new();
        rd.read_line(&mut line).expect("read");
        out.push(line);
    }
    out
}

/// `redis-cli --cluster create` with `--cluster-yes`; returns (success, output).
pub fn cluster_create(nodes: &[&Proc], replicas: u32) -> (bool, String) {
    let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
    args.extend(nodes.iter().map(|n| n.addr()));
    args.extend([
        "--cluster-replicas".into(),
        replicas.to_string(),
        "--cluster-yes".into(),
    ]);
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let o = cli_out(&[], &a);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

/// `redis-cli --cluster check`; returns (success, output).
pub fn cluster_check(n: &Proc) -> (bool, String) {
    let o = cli_out(&[], &["--cluster", "check", &n.addr()]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let ok = o.status.success()
        && text.contains("[OK] All nodes agree about slots configuration.")
        && text.contains("[OK] All 16384 slots covered.");
    (ok, text)
}

/// Waits until every node reports cluster_state:ok.
pub fn wait_state_ok(nodes: &[&Proc]) {
    wait_for(
        Duration::from_secs(30),
        "cluster_state:ok everywhere",
        || {
            nodes
                .iter()
                .all(|n| n.cluster_info("cluster_state") == "ok")
        },
    );
}
