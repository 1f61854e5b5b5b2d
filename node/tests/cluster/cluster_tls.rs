//! The cluster bus over TLS (`tls-cluster yes`, issue 20): tessera-node and redis-server 7.0
//! in one cluster whose bus, replication and client traffic are all TLS, made by
//! `redis-cli --tls --cluster create`, with a master killed and its replica taking over; and
//! a TLS-only node (`--port 0`), as the operator runs node pods.

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

use tessera_testkit::cli::cli_out;
use tessera_testkit::cluster::*;
use tessera_testkit::resp::Reply;
use tessera_testkit::tls::{tls_only_server, Authority, Certs, TlsConn};
use tessera_testkit::*;

/// A cluster node of `bin` with a TLS port, tls-cluster and tls-replication on, showing
/// the authority's client certificate on the links it makes (the server certificate is for
/// server use only, as in Redis's own TLS tests). Returns the node and its TLS port.
fn tls_node(bin: &'static str, a: &Authority) -> (Proc, u16) {
    let tls_port = free_port();
    let srv = Launch::new(bin)
        .args(&["--save", "", "--appendonly", "no"])
        .args(&["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"])
        .args(&a.server_args(tls_port))
        .args(&[
            "--tls-cluster",
            "yes",
            "--tls-replication",
            "yes",
            "--tls-client-cert-file",
            &a.client_cert.display().to_string(),
            "--tls-client-key-file",
            &a.client_key.display().to_string(),
        ])
        .logfile()
        .start();
    (Proc { srv }, tls_port)
}

/// redis-cli over TLS with the authority's client certificate; (exit 0, stdout + stderr).
fn tls_cli(a: &Authority, port: u16, args: &[&str]) -> (bool, String) {
    let p = port.to_string();
    let mut conn: Vec<String> = vec!["-h".into(), "127.0.0.1".into(), "-p".into(), p];
    conn.extend(a.client_args(true));
    let conn: Vec<&str> = conn.iter().map(String::as_str).collect();
    let o = cli_out(&conn, args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

/// Polls `check` for up to 20 s until it is Ok; fails with its last complaint otherwise
/// (what a node showed, rather than only that the wait timed out).
fn until_ok(what: &str, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = check();
    while last.is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        last = check();
    }
    assert_eq!(last, Ok(()), "{what}");
}

/// The CLUSTER NODES line of `id` as `n` sees it.
fn line_of(n: &Proc, id: &str) -> String {
    n.nodes()
        .into_iter()
        .find(|l| l.starts_with(id))
        .unwrap_or_default()
}

#[test]
fn tls_cluster_of_tessera_and_redis_forms_and_fails_over() {
    let certs = Certs::new();
    let a = &certs.main;
    // Masters first (redis-cli makes the first three masters): tessera, redis, tessera;
    // then replicas of both kinds.
    let bins = [
        tessera_bin(),
        redis_bin(),
        tessera_bin(),
        redis_bin(),
        tessera_bin(),
        redis_bin(),
    ];
    let mut nodes: Vec<(Proc, u16)> = bins.iter().map(|b| tls_node(b, a)).collect();
    let mut ids: Vec<String> = nodes.iter().map(|(n, _)| n.myid()).collect();

    // Created through the TLS ports: MEET gives each node's TLS port, whose bus port is
    // that plus 10000 on both implementations.
    let mut args = vec!["--cluster".to_string(), "create".into()];
    args.extend(nodes.iter().map(|(_, p)| format!("127.0.0.1:{p}")));
    args.extend([
        "--cluster-replicas".into(),
        "1".into(),
        "--cluster-yes".into(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out) = tls_cli(a, nodes[0].1, &args);
    assert!(ok, "{out}");
    let refs: Vec<&Proc> = nodes.iter().map(|(n, _)| n).collect();
    wait_state_ok(&refs);

    // Every node sees every other connected over the TLS bus, and names it by its TLS port
    // to TLS clients and by its plaintext port to plaintext ones (Redis 7.0's pport), the
    // bus port being the TLS port plus 10000 on both implementations.
    let mesh = || -> Result<(), String> {
        for (n, tls) in &nodes {
            let (_, tls_view) = tls_cli(a, *tls, &["CLUSTER", "NODES"]);
            let plain_view = n.cli(&["CLUSTER", "NODES"]);
            for ((m, m_tls), id) in nodes.iter().zip(&ids) {
                for (view, port) in [(&tls_view, *m_tls), (&plain_view, m.port)] {
                    let l = view
                        .lines()
                        .find(|l| l.starts_with(id.as_str()))
                        .unwrap_or("");
                    let good = l.contains(&format!("127.0.0.1:{port}@{}", m_tls + 10000))
                        && l.contains(" connected")
                        && !l.contains("fail")
                        && !l.contains("handshake");
                    if !good {
                        return Err(format!("{} ({}) shows: {l}", n.port, n.bin()));
                    }
                }
            }
        }
        Ok(())
    };
    until_ok("a full mesh over TLS", mesh);

    // Redirects: a plaintext client is sent to the owner's plaintext port, a TLS client to
    // its TLS port, by either implementation.
    let owns = |range: &str, slot: u16| -> bool {
        let (x, y) = range.split_once('-').unwrap_or((range, range));
        matches!((x.parse::<u16>(), y.parse::<u16>()), (Ok(x), Ok(y)) if x <= slot && slot <= y)
    };
    let owner_of = |slot: u16| -> Option<usize> {
        let id = nodes[0].0.nodes().into_iter().find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            f.iter()
                .skip(8)
                .any(|r| owns(r, slot))
                .then(|| f[0].to_string())
        })?;
        ids.iter().position(|i| *i == id)
    };
    let slot: u16 = nodes[0]
        .0
        .cli(&["CLUSTER", "KEYSLOT", "k1"])
        .trim()
        .parse()
        .expect("slot");
    let owner = owner_of(slot).expect("an owner of k1's slot");
    for (i, (n, tls)) in nodes.iter().enumerate() {
        if i == owner || line_of(n, &ids[owner]).is_empty() || n.cli(&["ROLE"]).starts_with("slave")
        {
            continue;
        }
        let plain = raw_line(&n.addr(), &[b"GET", b"k1"]);
        assert_eq!(
            plain.trim(),
            format!("-MOVED {slot} 127.0.0.1:{}", nodes[owner].0.port),
            "{}",
            n.bin()
        );
        let (_, over_tls) = tls_cli(a, *tls, &["GET", "k1"]);
        assert!(
            over_tls.contains(&format!("MOVED {slot} 127.0.0.1:{}", nodes[owner].1)),
            "{}: {over_tls}",
            n.bin()
        );
    }
    // CLUSTER SHARDS names both ports of every node, on both implementations.
    for (n, tls) in &nodes {
        let shards = n.cli(&["CLUSTER", "SHARDS"]);
        for ((m, m_tls), id) in nodes.iter().zip(&ids) {
            let at = shards
                .find(id.as_str())
                .unwrap_or_else(|| panic!("{id} in {shards}"));
            let entry = &shards[at..];
            assert!(
                entry.starts_with(&format!("{id}\nport\n{}\ntls-port\n{m_tls}\nip\n", m.port)),
                "{} ({}) SHARDS entry of {id}: {}",
                n.port,
                n.bin(),
                &entry[..entry.len().min(120)]
            );
            let _ = tls;
        }
    }

    // Replicas of both kinds are in sync with masters of both kinds (TLS replication).
    wait_for(Duration::from_secs(20), "replicas linked", || {
        nodes
            .iter()
            .filter(|(n, _)| n.cli(&["ROLE"]).starts_with("slave"))
            .all(|(n, _)| n.info("replication", "master_link_status").as_deref() == Some("up"))
    });

    // Writes through TLS clients, redirected across the two implementations.
    for i in 0..30 {
        let k = format!("k{i}");
        let (ok, out) = tls_cli(a, nodes[i % 6].1, &["-c", "SET", &k, &i.to_string()]);
        assert!(ok && out.trim() == "OK", "SET {k}: {out}");
    }

    // Resharding over TLS, as redis-cli does it (SETSLOT IMPORTING / MIGRATING, MIGRATE,
    // SETSLOT NODE): a slot with keys moved from a tessera master to a redis-server one
    // (tessera's MIGRATE on TLS) and back (redis-server's MIGRATE to tessera on TLS).
    let tag_slot: u16 = nodes[0]
        .0
        .cli(&["CLUSTER", "KEYSLOT", "{t}"])
        .trim()
        .parse()
        .expect("slot");
    let tagged: Vec<String> = (0..40).map(|i| format!("{{t}}:{i}")).collect();
    for k in &tagged {
        let (ok, out) = tls_cli(a, nodes[0].1, &["-c", "SET", k, k]);
        assert!(ok && out.trim() == "OK", "SET {k}: {out}");
    }
    let masters: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].0.cli(&["ROLE"]).starts_with("master"))
        .collect();
    let master_of = |bin: &str| {
        masters
            .iter()
            .copied()
            .find(|&i| nodes[i].0.bin() == bin)
            .unwrap_or_else(|| panic!("a master of {bin}"))
    };
    let move_slot = |src: usize, dst: usize| {
        let s = tag_slot.to_string();
        let ok = |i: usize, args: &[&str]| {
            let (ok, out) = tls_cli(a, nodes[i].1, args);
            assert!(
                ok && out.trim() == "OK",
                "{} {args:?}: {out}",
                nodes[i].0.bin()
            );
        };
        ok(dst, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &ids[src]]);
        ok(src, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &ids[dst]]);
        let (_, keys) = tls_cli(a, nodes[src].1, &["CLUSTER", "GETKEYSINSLOT", &s, "100"]);
        let keys: Vec<&str> = keys.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(keys.len(), tagged.len(), "keys of slot {s}");
        let dst_port = nodes[dst].1.to_string();
        let mut args = vec!["MIGRATE", "127.0.0.1", &dst_port, "", "0", "5000", "KEYS"];
        args.extend(keys.iter().copied());
        ok(src, &args);
        for &m in &masters {
            ok(m, &["CLUSTER", "SETSLOT", &s, "NODE", &ids[dst]]);
        }
        for k in &tagged {
            let (ok, out) = tls_cli(a, nodes[dst].1, &["GET", k]);
            assert!(
                ok && out.trim() == k.as_str(),
                "GET {k} on the new owner: {out}"
            );
        }
        let (_, left) = tls_cli(a, nodes[src].1, &["CLUSTER", "COUNTKEYSINSLOT", &s]);
        assert_eq!(left.trim(), "0", "keys left on the old owner");
    };
    let (t, r) = (master_of(tessera_bin()), master_of(redis_bin()));
    if owner_of(tag_slot) != Some(t) {
        let from = owner_of(tag_slot).expect("an owner of {t}");
        move_slot(from, t);
    }
    move_slot(t, r);
    move_slot(r, t);
    wait_state_ok(&nodes.iter().map(|(n, _)| n).collect::<Vec<_>>());

    // SIGKILL each master of a kind in turn; its replica takes over and the cluster is ok
    // again, with every key still readable over TLS.
    for kind in [tessera_bin(), redis_bin()] {
        let Some(victim) = (0..nodes.len())
            .find(|&i| nodes[i].0.bin() == kind && nodes[i].0.cli(&["ROLE"]).starts_with("master"))
        else {
            panic!("no master of {kind}");
        };
        let dead = ids[victim].clone();
        let replica = (0..nodes.len())
            .find(|&i| line_of(&nodes[0].0, &ids[i]).contains(&format!("slave {dead}")))
            .unwrap_or_else(|| panic!("no replica of {dead}"));
        nodes[victim].0.kill();
        let live: Vec<&Proc> = nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != victim)
            .map(|(_, (n, _))| n)
            .collect();
        wait_for(Duration::from_secs(30), "the replica promoted", || {
            nodes[replica].0.cli(&["ROLE"]).starts_with("master")
        });
        wait_state_ok(&live);
        for i in 0..30 {
            let k = format!("k{i}");
            let from = live[i % live.len()].port;
            let from = nodes
                .iter()
                .find(|(n, _)| n.port == from)
                .map(|(_, t)| *t)
                .unwrap_or_default();
            let (ok, out) = tls_cli(a, from, &["-c", "GET", &k]);
            assert!(ok && out.trim() == i.to_string(), "GET {k}: {out}");
        }
        nodes.remove(victim);
        ids.remove(victim);
    }

    // cluster-announce-tls-port set at run time on each kind: every other node shows it, to
    // plaintext clients too (Redis 7.0 then announces cluster-announce-port as the
    // plaintext port, here unset: none).
    for kind in [tessera_bin(), redis_bin()] {
        let i = (0..nodes.len())
            .find(|&i| nodes[i].0.bin() == kind)
            .unwrap_or_else(|| panic!("a live {kind}"));
        let announced = free_port();
        let p = announced.to_string();
        let (ok, out) = tls_cli(
            a,
            nodes[i].1,
            &["CONFIG", "SET", "cluster-announce-tls-port", &p],
        );
        assert!(ok && out.trim() == "OK", "{out}");
        let id = ids[i].clone();
        let seen = || -> Result<(), String> {
            for (j, (n, tls)) in nodes.iter().enumerate() {
                if j == i {
                    continue;
                }
                let (_, tls_view) = tls_cli(a, *tls, &["CLUSTER", "NODES"]);
                let plain_view = n.cli(&["CLUSTER", "NODES"]);
                let line = |view: &str| {
                    view.lines()
                        .find(|l| l.starts_with(id.as_str()))
                        .unwrap_or("")
                        .to_string()
                };
                let (t, p) = (line(&tls_view), line(&plain_view));
                if !t.contains(&format!(":{announced}@")) || !p.contains(&format!(":{announced}@"))
                {
                    return Err(format!("{} sees {kind} as\n{t}\n{p}", n.bin()));
                }
            }
            Ok(())
        };
        until_ok(
            &format!("cluster-announce-tls-port {announced} of a {kind} node"),
            seen,
        );
    }
}

/// A cluster node of `bin` serving TLS only, as the operator runs node pods: `--port 0
/// --tls-port P` with tls-cluster and tls-replication.
fn tls_only_node(bin: &'static str, a: &Authority) -> (Process, u16, tempfile::TempDir) {
    let cert = a.client_cert.display().to_string();
    let key = a.client_key.display().to_string();
    tls_only_server(
        bin,
        a,
        &[
            "--appendonly",
            "no",
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            "2000",
            "--tls-cluster",
            "yes",
            "--tls-replication",
            "yes",
            "--tls-client-cert-file",
            &cert,
            "--tls-client-key-file",
            &key,
        ],
    )
}

/// The TCP ports process `pid` listens on: its sockets in /proc/net/tcp and tcp6 in state
/// LISTEN.
fn listening_ports(pid: u32) -> BTreeSet<u16> {
    let inodes: HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.flatten().collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            let l = l.to_str()?;
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let mut ports = BTreeSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st ... inode (the 10th field); 0A is LISTEN.
            if f.len() > 9 && f[3] == "0A" && inodes.contains(f[9]) {
                let port = f[1].rsplit(':').next();
                if let Some(p) = port.and_then(|h| u16::from_str_radix(h, 16).ok()) {
                    ports.insert(p);
                }
            }
        }
    }
    ports
}

/// A TLS-only cluster node (`--port 0 --tls-port P --tls-cluster yes --tls-replication
/// yes`) listens on P and on its bus port P+10000 and nowhere else (no plaintext port), INFO's
/// tcp_port is P, and CLUSTER NODES shows it as `ip:P@P+10000`, before and after a MEET with
/// the other kind over the TLS bus; as redis-server 7.0.
#[test]
fn tls_only_node_ports_like_redis() {
    let certs = Certs::new();
    let a = &certs.main;
    let nodes: Vec<(Process, u16, tempfile::TempDir)> = [redis_bin(), tessera_bin()]
        .iter()
        .map(|b| tls_only_node(b, a))
        .collect();
    let ids: Vec<String> = nodes
        .iter()
        .map(|(_, p, _)| tls_cli(a, *p, &["CLUSTER", "MYID"]).1.trim().to_string())
        .collect();
    // A CLUSTER NODES line with the node's ports written P and B (its bus port), its id ID:
    // the address, flags, master and link state.
    let norm = |line: &str, port: u16, id: &str| -> String {
        let f: Vec<&str> = line.split(' ').collect();
        let keep = [f.get(1), f.get(2), f.get(3), f.get(7)];
        keep.iter()
            .map(|x| x.copied().unwrap_or("?"))
            .collect::<Vec<_>>()
            .join(" ")
            .replace(id, "ID")
            .replace(&(port + 10000).to_string(), "B")
            .replace(&port.to_string(), "P")
    };
    let line_of = |at: usize, of: usize| -> String {
        let (_, view) = tls_cli(a, nodes[at].1, &["CLUSTER", "NODES"]);
        let l = view
            .lines()
            .find(|l| l.starts_with(ids[of].as_str()))
            .unwrap_or("")
            .to_string();
        norm(&l, nodes[of].1, &ids[of])
    };
    let mut seen: Vec<Vec<String>> = Vec::new();
    for (i, (p, port, _)) in nodes.iter().enumerate() {
        let listening: Vec<String> = listening_ports(p.pid())
            .into_iter()
            .map(|l| match l.checked_sub(*port) {
                Some(0) => "P".to_string(),
                Some(10000) => "P+10000".to_string(),
                _ => format!("other port {l}"),
            })
            .collect();
        let (_, info) = tls_cli(a, *port, &["INFO", "server"]);
        let tcp_port = info_field(&info, "tcp_port").unwrap_or_default();
        let (_, port_setting) = tls_cli(a, *port, &["CONFIG", "GET", "port"]);
        seen.push(vec![
            format!("listening: {listening:?}"),
            format!("tcp_port: {}", tcp_port.replace(&port.to_string(), "P")),
            format!("port: {:?}", port_setting.trim()),
            format!("myself before MEET: {}", line_of(i, i)),
        ]);
    }
    // The tessera node meets the redis-server one at its TLS port (bus: that plus 10000).
    let (ok, out) = tls_cli(
        a,
        nodes[1].1,
        &["CLUSTER", "MEET", "127.0.0.1", &nodes[0].1.to_string()],
    );
    assert!(ok && out.trim() == "OK", "MEET: {out}");
    until_ok("the two nodes connected over the TLS bus", || {
        for (at, of) in [(0, 1), (1, 0)] {
            let l = line_of(at, of);
            if l != "127.0.0.1:P@B master - connected" {
                return Err(format!("{} shows {l}", nodes[at].1));
            }
        }
        Ok(())
    });
    for (i, s) in seen.iter_mut().enumerate() {
        s.push(format!("myself after MEET: {}", line_of(i, i)));
        s.push(format!("peer after MEET: {}", line_of(i, 1 - i)));
    }
    assert_eq!(seen[1], seen[0], "tessera (left) vs redis-server (right)");
    assert_eq!(
        seen[0],
        [
            "listening: [\"P\", \"P+10000\"]",
            "tcp_port: P",
            "port: \"port\\n0\"",
            "myself before MEET: :P@B myself,master - connected",
            "myself after MEET: 127.0.0.1:P@B myself,master - connected",
            "peer after MEET: 127.0.0.1:P@B master - connected",
        ]
    );
}

/// The scalars of a reply, depth first (a map's keys and values in turn).
fn flatten(r: &Reply, out: &mut Vec<String>) {
    match r {
        Reply::Bulk(b) => out.push(String::from_utf8_lossy(b).into_owned()),
        Reply::Simple(s) | Reply::Error(s) => out.push(s.clone()),
        Reply::Int(i) => out.push(i.to_string()),
        Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => v.iter().for_each(|x| flatten(x, out)),
        Reply::Map(kv) => kv.iter().for_each(|(k, v)| {
            flatten(k, out);
            flatten(v, out);
        }),
        other => out.push(format!("{other:?}")),
    }
}

/// Atomic slot migration between two TLS-only tessera-nodes (as the operator runs pods):
/// with `tls-replication yes` the source's export link goes to the target's TLS port and
/// shows the client certificate (tls-auth-clients is on), as Valkey picks the replication
/// connection type for it. Every key of the moved slots ends on the target, every other key
/// stays, and both nodes agree on the owner.
#[test]
fn atomic_slot_migration_over_tls_moves_every_key() {
    let certs = Certs::new();
    let a = &certs.main;
    let (_src, src_port, _sd) = tls_only_node(tessera_bin(), a);
    let (_dst, dst_port, _dd) = tls_only_node(tessera_bin(), a);
    let mut src = TlsConn::open(src_port, a);
    let mut dst = TlsConn::open(dst_port, a);
    let text = |r: Reply| match r {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => format!("{other:?}"),
    };
    let dst_id = text(dst.query(&["CLUSTER", "MYID"]));
    assert_eq!(src.cmd("CLUSTER ADDSLOTSRANGE 0 16383"), "+OK");
    assert_eq!(
        src.cmd(&format!("CLUSTER MEET 127.0.0.1 {dst_port}")),
        "+OK"
    );
    until_ok("both nodes ok over the TLS bus", || {
        for (c, name) in [(&mut src, "source"), (&mut dst, "target")] {
            let info = text(c.query(&["CLUSTER", "INFO"]));
            if !info.contains("cluster_state:ok") || !info.contains("cluster_known_nodes:2") {
                return Err(format!("{name}: {info}"));
            }
        }
        Ok(())
    });

    const KEYS: u64 = 2000;
    for i in 0..KEYS {
        assert_eq!(src.cmd(&format!("SET k{i} {i}")), "+OK");
    }
    assert_eq!(
        src.cmd(&format!(
            "CLUSTER MIGRATESLOTS SLOTSRANGE 0 8191 NODE {dst_id}"
        )),
        "+OK"
    );
    until_ok("the export to succeed", || {
        let mut jobs = Vec::new();
        flatten(&src.query(&["CLUSTER", "GETSLOTMIGRATIONS"]), &mut jobs);
        let state = jobs
            .iter()
            .position(|f| f == "state")
            .and_then(|i| jobs.get(i + 1));
        if state.map(String::as_str) == Some("success") {
            Ok(())
        } else {
            Err(jobs.join(" "))
        }
    });

    // Each key reads back (INCRBY 0 answers its value) on exactly one node, the one that
    // owns its slot; the other redirects there.
    let (mut on_src, mut on_dst) = (0, 0);
    for i in 0..KEYS {
        let q = format!("INCRBY k{i} 0");
        let (s, d) = (src.cmd(&q), dst.cmd(&q));
        let want = format!(":{i}");
        match (s.as_str(), d.as_str()) {
            (v, m) if v == want && m.starts_with("-MOVED") => on_src += 1,
            (m, v) if v == want && m.starts_with("-MOVED") => on_dst += 1,
            _ => panic!("k{i}: source says {s}, target says {d}"),
        }
    }
    assert!(on_src > 0 && on_dst > 0, "src {on_src}, dst {on_dst}");
    assert_eq!(on_src + on_dst, KEYS);
    assert_eq!(src.cmd("CLUSTER COUNTKEYSINSLOT 0"), ":0");
}
