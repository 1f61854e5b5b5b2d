//! Pure parsers for the text replies the engine reads (CLUSTER NODES, CLUSTER INFO, INFO).
//!
//! Kept free of I/O so the planner's tests can build snapshots from literal text.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::TopologyError;

/// One line of some node's CLUSTER NODES reply: how that node sees one cluster member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct NodeView {
    pub id: String,
    pub host: String,
    pub port: u16,
    pub cport: u16,
    pub myself: bool,
    /// Role flag `master` (a replica has `replica_of` set instead).
    pub master: bool,
    pub replica_of: Option<String>,
    pub pfail: bool,
    pub fail: bool,
    pub handshake: bool,
    pub noaddr: bool,
    pub config_epoch: u64,
    pub connected: bool,
    /// Inclusive slot ranges, as printed.
    pub slots: Vec<(u16, u16)>,
}

impl NodeView {
    /// Number of slots this line claims.
    pub fn slot_count(&self) -> u32 {
        self.slots
            .iter()
            .map(|(a, b)| u32::from(*b) - u32::from(*a) + 1)
            .sum()
    }

    /// Whether the line is in a failure state (PFAIL or FAIL).
    pub fn failing(&self) -> bool {
        self.pfail || self.fail
    }
}

/// The parsed CLUSTER NODES reply of one node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodesReply {
    pub myself: NodeView,
    pub others: Vec<NodeView>,
    /// slot -> destination node id, from `[s->-id]` on the myself line.
    pub migrating: BTreeMap<u16, String>,
    /// slot -> source node id, from `[s-<-id]` on the myself line.
    pub importing: BTreeMap<u16, String>,
}

fn bad(what: &str, line: &str) -> TopologyError {
    TopologyError::Protocol(format!("{what}: {line:?}"))
}

/// Split `ip:port@cport[,hostname]` into its parts. The address is found via the last `@` then
/// the last `:` (IPv6 literals contain colons), the same way redis-cli does.
pub fn parse_addr(addr: &str) -> Option<(String, u16, u16)> {
    let addr = addr.split(',').next()?;
    let (hostport, cport) = match addr.rsplit_once('@') {
        Some((hp, c)) => (hp, c.parse().ok()?),
        None => (addr, 0),
    };
    let (host, port) = hostport.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let cport = if cport == 0 && port != 0 {
        port.checked_add(10000).unwrap_or(0)
    } else {
        cport
    };
    Some((host.to_string(), port, cport))
}

fn parse_slot(s: &str, line: &str) -> Result<u16, TopologyError> {
    let v: u16 = s.parse().map_err(|_| bad("bad slot", line))?;
    if v >= super::SLOTS {
        return Err(bad("slot out of range", line));
    }
    Ok(v)
}

/// Parse one CLUSTER NODES line; open-slot entries are returned separately.
fn parse_line(
    line: &str,
    migrating: &mut BTreeMap<u16, String>,
    importing: &mut BTreeMap<u16, String>,
) -> Result<NodeView, TopologyError> {
    let mut f = line.split_ascii_whitespace();
    let id = f.next().ok_or_else(|| bad("empty line", line))?;
    let addr = f.next().ok_or_else(|| bad("no address", line))?;
    let flags = f.next().ok_or_else(|| bad("no flags", line))?;
    let master_id = f.next().ok_or_else(|| bad("no master", line))?;
    let _ping = f.next().ok_or_else(|| bad("no ping", line))?;
    let _pong = f.next().ok_or_else(|| bad("no pong", line))?;
    let epoch = f.next().ok_or_else(|| bad("no epoch", line))?;
    let link = f.next().ok_or_else(|| bad("no link state", line))?;
    let (host, port, cport) = parse_addr(addr).ok_or_else(|| bad("bad address", line))?;
    let mut v = NodeView {
        id: id.to_string(),
        host,
        port,
        cport,
        config_epoch: epoch.parse().map_err(|_| bad("bad epoch", line))?,
        connected: link == "connected",
        ..NodeView::default()
    };
    for flag in flags.split(',') {
        match flag {
            "myself" => v.myself = true,
            "master" => v.master = true,
            "slave" | "replica" => {}
            "fail?" => v.pfail = true,
            "fail" => v.fail = true,
            "handshake" => v.handshake = true,
            "noaddr" => v.noaddr = true,
            _ => {}
        }
    }
    if master_id != "-" {
        v.replica_of = Some(master_id.to_string());
    }
    for s in f {
        if let Some(inner) = s.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
            if let Some((slot, dst)) = inner.split_once("->-") {
                migrating.insert(parse_slot(slot, line)?, dst.to_string());
            } else if let Some((slot, src)) = inner.split_once("-<-") {
                importing.insert(parse_slot(slot, line)?, src.to_string());
            }
            continue;
        }
        let (a, b) = match s.split_once('-') {
            Some((a, b)) => (parse_slot(a, line)?, parse_slot(b, line)?),
            None => {
                let a = parse_slot(s, line)?;
                (a, a)
            }
        };
        v.slots.push((a.min(b), a.max(b)));
    }
    Ok(v)
}

/// Parse a whole CLUSTER NODES reply.
pub fn parse_cluster_nodes(text: &str) -> Result<NodesReply, TopologyError> {
    let mut migrating = BTreeMap::new();
    let mut importing = BTreeMap::new();
    let mut myself = None;
    let mut others = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut m = BTreeMap::new();
        let mut i = BTreeMap::new();
        let v = parse_line(line, &mut m, &mut i)?;
        if v.myself {
            migrating = m;
            importing = i;
            myself = Some(v);
        } else {
            others.push(v);
        }
    }
    let myself = myself.ok_or_else(|| bad("no myself line", text))?;
    Ok(NodesReply {
        myself,
        others,
        migrating,
        importing,
    })
}

/// Parse `key:value` lines (CLUSTER INFO and INFO sections) into a map.
pub fn parse_info(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Merge a sorted list of slots into inclusive ranges.
pub fn to_ranges(slots: impl IntoIterator<Item = u16>) -> Vec<(u16, u16)> {
    let mut out: Vec<(u16, u16)> = Vec::new();
    for s in slots {
        match out.last_mut() {
            Some((_, end)) if u32::from(*end) + 1 == u32::from(s) => *end = s,
            _ => out.push((s, s)),
        }
    }
    out
}

/// Expand inclusive ranges into slots.
pub fn from_ranges(ranges: &[(u16, u16)]) -> impl Iterator<Item = u16> + '_ {
    ranges.iter().flat_map(|(a, b)| *a..=*b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 master,fail? - 0 1426238318243 3 disconnected 10923-16383
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 [5461-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1] [100->-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]
";

    #[test]
    fn parses_sample() {
        let r = parse_cluster_nodes(SAMPLE).expect("parse");
        assert_eq!(r.myself.id, "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca");
        assert_eq!(r.myself.slots, vec![(0, 5460)]);
        assert_eq!(r.myself.port, 30001);
        assert_eq!(
            r.importing.get(&5461).map(String::as_str),
            Some("67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1")
        );
        assert_eq!(
            r.migrating.get(&100).map(String::as_str),
            Some("292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f")
        );
        assert_eq!(r.others.len(), 3);
        let rep = &r.others[0];
        assert_eq!(rep.host, "127.0.0.1");
        assert_eq!(rep.cport, 31004);
        assert!(!rep.master);
        assert!(rep.replica_of.is_some());
        assert!(r.others[2].pfail && !r.others[2].connected);
    }

    #[test]
    fn fresh_node_has_empty_ip() {
        let r = parse_cluster_nodes(
            "9b1b9e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e :6379@16379 myself,master - 0 0 0 connected\n",
        )
        .expect("parse");
        assert_eq!(r.myself.host, "");
        assert_eq!(r.myself.port, 6379);
    }

    #[test]
    fn ranges_roundtrip() {
        let r = to_ranges([1, 2, 3, 7, 9, 10]);
        assert_eq!(r, vec![(1, 3), (7, 7), (9, 10)]);
        assert_eq!(from_ranges(&r).collect::<Vec<_>>(), vec![1, 2, 3, 7, 9, 10]);
    }
}
