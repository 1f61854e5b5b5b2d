//! nodes.conf in Redis 7.0's format, and the CLUSTER NODES lines it shares.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use thiserror::Error;

use crate::config::ClusterConfig;
use crate::msg::{Name, SLOTS};
use crate::state::*;
use crate::validate::{is_addr, is_hostname, is_node_name};

/// Why nodes.conf could not be loaded or saved.
#[derive(Debug, Error)]
pub enum NodesConfError {
    #[error("{path}:{line}: {reason}: '{text}'")]
    Corrupt {
        path: String,
        line: usize,
        text: String,
        reason: String,
    },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// Flags in CLUSTER NODES order (representClusterNodeFlags).
pub fn flags_string(flags: u16) -> String {
    const NAMES: [(u16, &str); 8] = [
        (FLAG_MYSELF, "myself"),
        (FLAG_MASTER, "master"),
        (FLAG_SLAVE, "slave"),
        (FLAG_PFAIL, "fail?"),
        (FLAG_FAIL, "fail"),
        (FLAG_HANDSHAKE, "handshake"),
        (FLAG_NOADDR, "noaddr"),
        (FLAG_NOFAILOVER, "nofailover"),
    ];
    let v: Vec<&str> = NAMES
        .iter()
        .filter(|(f, _)| flags & f != 0)
        .map(|(_, s)| *s)
        .collect();
    if v.is_empty() {
        "noflags".into()
    } else {
        v.join(",")
    }
}

/// One CLUSTER NODES line, with its trailing newline (clusterGenNodeDescription); `pp`:
/// the plaintext port where the node has one (a plaintext client of a TLS cluster).
pub fn node_line(st: &ClusterState, n: &Node, pp: bool) -> String {
    node_line_with(st, n, &st.slot_ranges(&n.name), pp)
}

fn node_line_with(st: &ClusterState, n: &Node, ranges: &[(usize, usize)], pp: bool) -> String {
    let mut s = String::with_capacity(128);
    let port = n.client_port(pp);
    let _ = write!(s, "{} {}:{}@{}", n.name_str(), n.ip, port, n.cport);
    if !n.hostname.is_empty() {
        let _ = write!(s, ",{}", n.hostname);
    }
    let _ = write!(s, " {} ", flags_string(n.flags));
    match &n.master {
        Some(m) => s.push_str(name_str(m)),
        None => s.push('-'),
    }
    let connected = n.link.is_some() || n.flags & FLAG_MYSELF != 0;
    let _ = write!(
        s,
        " {} {} {} {}",
        n.ping_sent,
        n.pong_received,
        st.node_epoch(n),
        if connected {
            "connected"
        } else {
            "disconnected"
        }
    );
    for &(a, b) in ranges {
        if a == b {
            let _ = write!(s, " {a}");
        } else {
            let _ = write!(s, " {a}-{b}");
        }
    }
    if n.flags & FLAG_MYSELF != 0 {
        // By slot; a slot both migrating and importing shows as migrating (as before).
        let mut open: Vec<(usize, bool, Name)> = st
            .migrating
            .iter()
            .map(|(j, t)| (j, true, t))
            .chain(
                st.importing
                    .iter()
                    .filter(|(j, _)| st.migrating[*j].is_none())
                    .map(|(j, f)| (j, false, f)),
            )
            .collect();
        open.sort_unstable_by_key(|(j, _, _)| *j);
        for (j, migrating, other) in open {
            if migrating {
                let _ = write!(s, " [{}->-{}]", j, name_str(&other));
            } else {
                let _ = write!(s, " [{}-<-{}]", j, name_str(&other));
            }
        }
    }
    s.push('\n');
    s
}

/// CLUSTER NODES (all nodes), or the nodes.conf body (without handshake nodes, with the
/// ports nodes are known by: `pp` false).
pub fn nodes_text(st: &ClusterState, skip_handshake: bool, pp: bool) -> String {
    let mut out = String::new();
    let ranges = st.all_slot_ranges();
    for n in st.nodes.values() {
        if skip_handshake && n.in_handshake() {
            continue;
        }
        let r = ranges.get(&n.name).map(Vec::as_slice).unwrap_or(&[]);
        out.push_str(&node_line_with(st, n, r, pp));
    }
    out
}

/// The full nodes.conf content.
pub fn render(st: &ClusterState) -> String {
    let mut s = nodes_text(st, true, false);
    let _ = writeln!(
        s,
        "vars currentEpoch {} lastVoteEpoch {}",
        st.current_epoch, st.last_vote_epoch
    );
    s
}

/// Writes nodes.conf atomically with fsync (CLUSTER SAVECONFIG, tools).
pub fn save(st: &ClusterState, path: &Path) -> Result<(), NodesConfError> {
    write_file(path, &render(st), true)
}

/// Writes `content` as nodes.conf. With `fsync` (CLUSTER_TODO_FSYNC_CONFIG changes: epochs,
/// votes) atomically and durably: temp file, fsync, rename, directory fsync. Without it in
/// place, as Redis 7.0's clusterSaveConfig does: a resharding saves once per SETSLOT, and a
/// create+rename costs ~40x an overwrite here (ext4 also starts writeback on every
/// rename-replace). A shorter content is padded with newlines to the old length and then
/// truncated, so a process dying in between leaves only blank lines (skipped on load).
pub fn write_file(path: &Path, content: &str, fsync: bool) -> Result<(), NodesConfError> {
    let io = |source| NodesConfError::Io {
        path: path.display().to_string(),
        source,
    };
    if !fsync {
        return overwrite(path, content).map_err(io);
    }
    replace(path, content).map_err(io)
}

fn overwrite(path: &Path, content: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let old_len = f.metadata().map(|m| m.len() as usize).unwrap_or(0);
    if old_len > content.len() {
        let mut padded = Vec::with_capacity(old_len);
        padded.extend_from_slice(content.as_bytes());
        padded.resize(old_len, b'\n');
        f.write_all(&padded)?;
        f.set_len(content.len() as u64)
    } else {
        f.write_all(content.as_bytes())
    }
}

/// Every call uses its own temp name, so concurrent writers never share a file.
fn replace(path: &Path, content: &str) -> std::io::Result<()> {
    static TMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = TMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp-{}-{n}", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    let written = f.write_all(content.as_bytes()).and_then(|_| f.sync_all());
    drop(f);
    if let Err(e) = written.and_then(|_| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

fn get_or_create(st: &mut ClusterState, name: Name, now: u64) -> &mut Node {
    st.nodes
        .entry(name)
        .or_insert_with(|| Node::new(name, 0, now))
}

/// Loads nodes.conf text into a state built from `config` (clusterLoadConfig).
pub fn parse(
    text: &str,
    path: &str,
    config: ClusterConfig,
    now: u64,
    seed: u64,
) -> Result<ClusterState, NodesConfError> {
    let mut st = ClusterState::new(config, now, seed);
    st.nodes.clear();
    let mut myself: Option<Name> = None;
    let mut max_epoch = 0;
    // Node ids that had a line of their own: a second line for one id is a corrupt file (the
    // node writes one line per node), and merging the two gave a state that wrote back a file
    // that did not load (fuzz target nodes_conf).
    let mut lined: std::collections::HashSet<Name> = std::collections::HashSet::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let corrupt = |reason: &str| NodesConfError::Corrupt {
            path: path.to_string(),
            line: i + 1,
            text: raw.to_string(),
            reason: reason.to_string(),
        };
        let argv: Vec<&str> = line.split(' ').filter(|a| !a.is_empty()).collect();
        if argv[0] == "vars" {
            if argv.len() % 2 != 1 {
                return Err(corrupt("odd number of fields in vars line"));
            }
            for kv in argv[1..].chunks(2) {
                let v: u64 = kv[1]
                    .parse()
                    .map_err(|_| corrupt("bad number in vars line"))?;
                match kv[0] {
                    "currentEpoch" => st.current_epoch = v,
                    "lastVoteEpoch" => st.last_vote_epoch = v,
                    _ => {}
                }
            }
            continue;
        }
        if argv.len() < 8 {
            return Err(corrupt("fewer than 8 fields"));
        }
        // Every field is checked as a peer's would be: what loads is what the node could
        // have learned, and writes back as lines that load again.
        let node_name = |s: &str| parse_name(s.as_bytes()).filter(|n| is_node_name(n));
        let name = node_name(argv[0]).ok_or_else(|| corrupt("bad node name"))?;
        if !lined.insert(name) {
            return Err(corrupt("a second line for the same node"));
        }
        // Address: ip:port@cport[,hostname]
        let (addr, hostname) = match argv[1].split_once(',') {
            Some((a, h)) => (a, h),
            None => (argv[1], ""),
        };
        let (ipport, cport) = match addr.rsplit_once('@') {
            Some((a, c)) => (
                a,
                Some(c.parse::<u16>().map_err(|_| corrupt("bad bus port"))?),
            ),
            None => (addr, None),
        };
        let (ip, port) = ipport
            .rsplit_once(':')
            .ok_or_else(|| corrupt("bad address"))?;
        let port: u16 = port.parse().map_err(|_| corrupt("bad port"))?;
        if !is_addr(ip) {
            return Err(corrupt("bad ip address"));
        }
        if !is_hostname(hostname.as_bytes()) {
            return Err(corrupt("bad hostname"));
        }
        let mut flags = 0u16;
        for f in argv[2].split(',') {
            flags |= match f {
                "myself" => FLAG_MYSELF,
                "master" => FLAG_MASTER,
                "slave" => FLAG_SLAVE,
                "fail?" => FLAG_PFAIL,
                "fail" => FLAG_FAIL,
                "handshake" => FLAG_HANDSHAKE,
                "noaddr" => FLAG_NOADDR,
                "nofailover" => FLAG_NOFAILOVER,
                "noflags" => 0,
                _ => return Err(corrupt("unknown flag")),
            };
        }
        let master = if argv[3] == "-" {
            None
        } else {
            Some(node_name(argv[3]).ok_or_else(|| corrupt("bad master name"))?)
        };
        let ping: u64 = argv[4].parse().map_err(|_| corrupt("bad ping-sent"))?;
        let pong: u64 = argv[5].parse().map_err(|_| corrupt("bad pong-received"))?;
        let epoch: u64 = argv[6].parse().map_err(|_| corrupt("bad config epoch"))?;
        if let Some(m) = master {
            get_or_create(&mut st, m, now);
        }
        let n = get_or_create(&mut st, name, now);
        n.ip = ip.to_string();
        n.port = port;
        n.cport = cport.unwrap_or(port.wrapping_add(10000));
        n.hostname = hostname.to_string();
        n.flags = flags;
        n.master = master;
        n.config_epoch = epoch;
        n.ping_sent = if ping != 0 { now } else { 0 };
        n.pong_received = if pong != 0 { now } else { 0 };
        if flags & FLAG_FAIL != 0 {
            n.fail_time = now;
        }
        max_epoch = max_epoch.max(epoch);
        if flags & FLAG_MYSELF != 0 {
            if myself.is_some() {
                return Err(corrupt("more than one myself node"));
            }
            myself = Some(name);
        }
        for tok in &argv[8..] {
            if let Some(inner) = tok.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                let (slot, dir, other) = if let Some((s, o)) = inner.split_once("->-") {
                    (s, true, o)
                } else if let Some((s, o)) = inner.split_once("-<-") {
                    (s, false, o)
                } else {
                    return Err(corrupt("bad open slot"));
                };
                let slot: usize = slot
                    .parse()
                    .ok()
                    .filter(|s| *s < SLOTS)
                    .ok_or_else(|| corrupt("bad slot"))?;
                let other =
                    node_name(other).ok_or_else(|| corrupt("bad node name in open slot"))?;
                get_or_create(&mut st, other, now);
                if dir {
                    st.migrating.set(slot, Some(other));
                } else {
                    st.importing.set(slot, Some(other));
                }
                continue;
            }
            let (a, b) = match tok.split_once('-') {
                Some((a, b)) => (a, b),
                None => (*tok, *tok),
            };
            let a: usize = a
                .parse()
                .ok()
                .filter(|s| *s < SLOTS)
                .ok_or_else(|| corrupt("bad slot"))?;
            let b: usize = b
                .parse()
                .ok()
                .filter(|s| *s < SLOTS && *s >= a)
                .ok_or_else(|| corrupt("bad slot range"))?;
            for s in a..=b {
                st.del_slot(s);
                st.add_slot(name, s);
            }
        }
    }
    let Some(me) = myself else {
        return Err(NodesConfError::Invalid {
            path: path.to_string(),
            reason: "no 'myself' node".into(),
        });
    };
    st.myself = me;
    // Our own address comes from the config (the IP is relearned from peers).
    let cfg = st.config.clone();
    let m = st.me_mut();
    m.port = cfg.announced_port();
    m.pport = cfg.announced_pport();
    m.cport = cfg.announced_bus_port();
    m.hostname = cfg.announce_hostname.clone().unwrap_or_default();
    if let Some(ip) = &cfg.announce_ip {
        m.ip = ip.clone();
    }
    m.ping_sent = 0;
    m.pong_received = 0;
    st.current_epoch = st.current_epoch.max(max_epoch);
    // Masters with replicas in the file are replica-migration targets (as Redis's load
    // adds each replica to its master).
    let masters: Vec<Name> = st.nodes.values().filter_map(|n| n.master).collect();
    for m in masters {
        st.note_replica_added(&m);
    }
    st.todo_save = true;
    Ok(st)
}

/// Loads `path` if it exists; `Ok(None)` when there is no file yet.
pub fn load(
    path: &Path,
    config: ClusterConfig,
    now: u64,
    seed: u64,
) -> Result<Option<ClusterState>, NodesConfError> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes).map_err(|_| NodesConfError::Invalid {
                path: path.display().to_string(),
                reason: "not UTF-8".into(),
            })?;
            if text.trim().is_empty() {
                return Ok(None);
            }
            parse(&text, &path.display().to_string(), config, now, seed).map(Some)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(NodesConfError::Io {
            path: path.display().to_string(),
            source,
        }),
    }
}
