//! CLUSTER subcommands with Redis 7.0's replies and error strings.

use std::fmt::Write as _;

use crate::bus::{now_ms, ClusterNode};
use crate::msg::{self, SLOTS};
use crate::nodes_conf;
use crate::reply::Reply;
use crate::routing::{key_hash_slot, preferred_endpoint};
use crate::state::*;
use crate::Host;

/// Runs `CLUSTER <args...>` (args exclude the word CLUSTER).
/// `tls_client`: the client is on a TLS connection (with tls-cluster, plaintext clients are
/// shown the nodes' plaintext ports, as in Redis 7.0).
pub fn cluster_command(node: &ClusterNode, args: &[&[u8]], tls_client: bool) -> Reply {
    // The keyspace is read before the cluster state is locked, so the node may hold its own
    // keyspace locks while routing (which takes the state lock) without lock-order inversion.
    let facts = Prefetched::gather(&**node.host(), args);
    node.with_state(|st| execute(st, &facts, args, now_ms(), tls_client))
}

/// Keyspace answers gathered up front for one CLUSTER command.
struct Prefetched {
    db_size: usize,
    slot_count: Option<(u16, usize)>,
    slot_keys: Option<(u16, Vec<Vec<u8>>)>,
}

impl Prefetched {
    fn gather(host: &dyn Host, args: &[&[u8]]) -> Prefetched {
        let sub = args
            .first()
            .map(|a| a.to_ascii_lowercase())
            .unwrap_or_default();
        let slot = |i: usize| {
            args.get(i)
                .and_then(|a| parse_i64(a))
                .filter(|s| (0..SLOTS as i64).contains(s))
                .map(|s| s as u16)
        };
        // Counting every key locks every stripe: only for the subcommands that check it.
        let needs_size = matches!(sub.as_slice(), b"flushslots" | b"reset" | b"replicate");
        let mut p = Prefetched {
            db_size: if needs_size { host.db_size() } else { 0 },
            slot_count: None,
            slot_keys: None,
        };
        match sub.as_slice() {
            b"countkeysinslot" | b"setslot" => {
                p.slot_count = slot(1).map(|s| (s, host.count_keys_in_slot(s)));
            }
            b"getkeysinslot" => {
                let n = args.get(2).and_then(|a| parse_i64(a)).filter(|n| *n >= 0);
                if let (Some(s), Some(n)) = (slot(1), n) {
                    p.slot_keys = Some((s, host.keys_in_slot(s, n as usize)));
                }
            }
            _ => {}
        }
        p
    }
}

impl Host for Prefetched {
    fn count_keys_in_slot(&self, slot: u16) -> usize {
        self.slot_count
            .filter(|(s, _)| *s == slot)
            .map(|(_, n)| n)
            .unwrap_or(0)
    }
    fn keys_in_slot(&self, slot: u16, _count: usize) -> Vec<Vec<u8>> {
        match &self.slot_keys {
            Some((s, k)) if *s == slot => k.clone(),
            _ => Vec::new(),
        }
    }
    fn delete_keys_in_slot(&self, _slot: u16) -> usize {
        0
    }
    fn db_size(&self) -> usize {
        self.db_size
    }
    fn publish_local(&self, _channel: &[u8], _message: &[u8], _shard: bool) {}
}

fn parse_i64(a: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(a).ok()?;
    if s.starts_with('+') || (s.len() > 1 && s.starts_with('0')) || s.starts_with("-0") {
        return None;
    }
    s.parse().ok()
}

fn slot_arg(a: &[u8]) -> Result<usize, Reply> {
    match parse_i64(a) {
        Some(s) if (0..SLOTS as i64).contains(&s) => Ok(s as usize),
        _ => Err(Reply::err("ERR Invalid or out of range slot")),
    }
}

fn wrong_args(sub: &str) -> Reply {
    Reply::err(format!(
        "ERR wrong number of arguments for 'cluster|{sub}' command"
    ))
}

fn lookup(st: &ClusterState, a: &[u8]) -> Option<msg::Name> {
    parse_name(a).filter(|n| st.nodes.contains_key(n))
}

fn lossy(a: &[u8]) -> String {
    String::from_utf8_lossy(a).into_owned()
}

/// Executes a CLUSTER subcommand against the state.
pub fn execute(
    st: &mut ClusterState,
    host: &dyn Host,
    args: &[&[u8]],
    now: u64,
    tls_client: bool,
) -> Reply {
    // Redis's use_pport: a plaintext client of a TLS cluster is given plaintext ports.
    let pp = st.config.tls_cluster && !tls_client;
    let Some(sub0) = args.first() else {
        return Reply::err("ERR wrong number of arguments for 'cluster' command");
    };
    let sub = String::from_utf8_lossy(sub0).to_ascii_lowercase();
    let argc = args.len() + 1; // as Redis counts, including CLUSTER
    let arity_ok = |min: usize, exact: bool| if exact { argc == min } else { argc >= min };
    let check = |min: usize, exact: bool| {
        if arity_ok(min, exact) {
            Ok(())
        } else {
            Err(wrong_args(&sub))
        }
    };
    // Past a subcommand's maximum arity Redis answers with the generic subcommand error.
    let too_many = || {
        Reply::err(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLUSTER HELP.",
            lossy(sub0)
        ))
    };
    let r: Result<Reply, Reply> = (|| match sub.as_str() {
        "info" => check(2, true).map(|_| Reply::Verbatim(info(st))),
        "myid" => check(2, true).map(|_| Reply::bulk(st.myself)),
        "myshardid" => check(2, true).map(|_| Reply::bulk(st.me().shard_id)),
        "nodes" => check(2, true).map(|_| Reply::Verbatim(nodes_conf::nodes_text(st, false, pp))),
        "slots" => check(2, true).map(|_| slots_reply(st, pp)),
        "shards" => check(2, true).map(|_| shards_reply(st)),
        "links" => check(2, true).map(|_| links_reply(st)),
        "keyslot" => {
            check(3, true)?;
            Ok(Reply::Int(key_hash_slot(args[1]) as i64))
        }
        "countkeysinslot" => {
            check(3, true)?;
            let s = parse_i64(args[1])
                .ok_or_else(|| Reply::err("ERR value is not an integer or out of range"))?;
            if !(0..SLOTS as i64).contains(&s) {
                return Err(Reply::err("ERR Invalid slot"));
            }
            Ok(Reply::Int(host.count_keys_in_slot(s as u16) as i64))
        }
        "getkeysinslot" => {
            check(4, true)?;
            let bad = || Reply::err("ERR value is not an integer or out of range");
            let s = parse_i64(args[1]).ok_or_else(bad)?;
            let n = parse_i64(args[2]).ok_or_else(bad)?;
            if n < 0 || !(0..SLOTS as i64).contains(&s) {
                return Err(Reply::err("ERR Invalid slot or number of keys"));
            }
            let keys = host.keys_in_slot(s as u16, n as usize);
            Ok(Reply::Array(keys.into_iter().map(Reply::Bulk).collect()))
        }
        "addslots" | "delslots" => {
            check(3, false)?;
            let mut seen = vec![false; SLOTS];
            let mut slots = Vec::new();
            for a in &args[1..] {
                slots.push(slot_arg(a)?);
            }
            change_slots(st, &slots, sub == "addslots", &mut seen)
        }
        "addslotsrange" | "delslotsrange" => {
            if argc % 2 == 1 || argc < 4 {
                return Err(wrong_args(&sub));
            }
            let mut slots = Vec::new();
            for pair in args[1..].chunks(2) {
                let (a, b) = (slot_arg(pair[0])?, slot_arg(pair[1])?);
                if a > b {
                    return Err(Reply::err(format!(
                        "ERR start slot number {a} is greater than end slot number {b}"
                    )));
                }
                slots.extend(a..=b);
            }
            let mut seen = vec![false; SLOTS];
            change_slots(st, &slots, sub == "addslotsrange", &mut seen)
        }
        "flushslots" => {
            check(2, true)?;
            if host.db_size() != 0 {
                return Err(Reply::err(
                    "ERR DB must be empty to perform CLUSTER FLUSHSLOTS.",
                ));
            }
            let me = st.myself;
            st.del_node_slots(&me);
            st.todo_save = true;
            st.todo_update_state = true;
            Ok(Reply::Ok)
        }
        "meet" => {
            if argc < 4 {
                return Err(wrong_args(&sub));
            }
            if argc > 5 {
                return Err(too_many());
            }
            let port = parse_i64(args[2]).ok_or_else(|| {
                Reply::err(format!(
                    "ERR Invalid TCP base port specified: {}",
                    lossy(args[2])
                ))
            })?;
            let cport = match args.get(3) {
                Some(c) => parse_i64(c).ok_or_else(|| {
                    Reply::err(format!("ERR Invalid TCP bus port specified: {}", lossy(c)))
                })?,
                // Out of range either way; no overflow on a huge port.
                None => port.saturating_add(10000),
            };
            if !start_handshake(st, &lossy(args[1]), port, cport, now) {
                return Err(Reply::err(format!(
                    "ERR Invalid node address specified: {}:{}",
                    lossy(args[1]),
                    lossy(args[2])
                )));
            }
            Ok(Reply::Ok)
        }
        "forget" => {
            check(3, true)?;
            let n = lookup(st, args[1])
                .ok_or_else(|| Reply::err(format!("ERR Unknown node {}", lossy(args[1]))))?;
            if n == st.myself {
                return Err(Reply::err("ERR I tried hard but I can't forget myself..."));
            }
            if st.me().is_replica() && st.me().master == Some(n) {
                return Err(Reply::err("ERR Can't forget my master!"));
            }
            st.blacklist_add(n, now);
            st.del_node(&n);
            Ok(Reply::Ok)
        }
        "reset" => {
            if argc > 3 {
                return Err(too_many());
            }
            let hard = match args.get(1).map(|a| a.to_ascii_lowercase()) {
                None => false,
                Some(a) if a == b"hard" => true,
                Some(a) if a == b"soft" => false,
                Some(_) => return Err(Reply::err("ERR syntax error")),
            };
            if st.me().is_master() && host.db_size() != 0 {
                return Err(Reply::err(
                    "ERR CLUSTER RESET can't be called with master nodes containing keys",
                ));
            }
            reset(st, hard);
            Ok(Reply::Ok)
        }
        "saveconfig" => {
            check(2, true)?;
            let path = st.config.config_file.clone();
            nodes_conf::save(st, &path).map_err(|e| {
                Reply::err(format!("ERR error saving the cluster node config: {e}"))
            })?;
            Ok(Reply::Ok)
        }
        "set-config-epoch" => {
            check(3, true)?;
            let e = parse_i64(args[1])
                .ok_or_else(|| Reply::err("ERR value is not an integer or out of range"))?;
            if e < 0 {
                return Err(Reply::err(format!(
                    "ERR Invalid config epoch specified: {e}"
                )));
            }
            if st.nodes.len() > 1 {
                return Err(Reply::err(
                    "ERR The user can assign a config epoch only when the node does not know any other node.",
                ));
            }
            if st.me().config_epoch != 0 {
                return Err(Reply::err("ERR Node config epoch is already non-zero"));
            }
            st.me_mut().config_epoch = e as u64;
            st.current_epoch = st.current_epoch.max(e as u64);
            st.todo_save = true;
            st.todo_update_state = true;
            Ok(Reply::Ok)
        }
        "bumpepoch" => {
            check(2, true)?;
            let (bumped, e) = bump_epoch(st);
            Ok(Reply::Simple(format!(
                "{} {e}",
                if bumped { "BUMPED" } else { "STILL" }
            )))
        }
        "setslot" => setslot(st, host, args, now),
        "failover" => {
            if argc > 3 {
                return Err(too_many());
            }
            let (force, takeover) = match args.get(1).map(|a| a.to_ascii_lowercase()) {
                None => (false, false),
                Some(a) if a == b"force" => (true, false),
                Some(a) if a == b"takeover" => (false, true),
                Some(_) => return Err(Reply::err("ERR syntax error")),
            };
            st.start_manual_failover(force, takeover, now)
                .map_err(Reply::err)?;
            Ok(Reply::Ok)
        }
        "replicas" | "slaves" => {
            check(3, true)?;
            let n = lookup(st, args[1])
                .ok_or_else(|| Reply::err(format!("ERR Unknown node {}", lossy(args[1]))))?;
            if st.nodes[&n].is_replica() {
                return Err(Reply::err("ERR The specified node is not a master"));
            }
            // Each replica's CLUSTER NODES line, without its newline.
            let lines = st
                .replicas_of(&n)
                .iter()
                .filter_map(|r| st.nodes.get(r))
                .map(|r| {
                    let line = nodes_conf::node_line(st, r, pp);
                    Reply::Bulk(line.trim_end_matches('\n').as_bytes().to_vec())
                })
                .collect();
            Ok(Reply::Array(lines))
        }
        "count-failure-reports" => {
            check(3, true)?;
            let n = lookup(st, args[1])
                .ok_or_else(|| Reply::err(format!("ERR Unknown node {}", lossy(args[1]))))?;
            Ok(Reply::Int(st.failure_reports(&n, now) as i64))
        }
        "replicate" => {
            check(3, true)?;
            let n = lookup(st, args[1])
                .ok_or_else(|| Reply::err(format!("ERR Unknown node {}", lossy(args[1]))))?;
            if n == st.myself {
                return Err(Reply::err("ERR Can't replicate myself"));
            }
            if st.nodes[&n].is_replica() {
                return Err(Reply::err(
                    "ERR I can only replicate a master, not a replica.",
                ));
            }
            if st.me().is_master() && (st.me().numslots != 0 || host.db_size() != 0) {
                return Err(Reply::err(
                    "ERR To set a master the node must be empty and without assigned slots.",
                ));
            }
            st.set_my_master(n);
            // Tell every peer at once (as after a failover), so no node keeps listing this
            // replica as a master until the next ping round.
            broadcast_pong(st, now);
            Ok(Reply::Ok)
        }
        _ => Err(Reply::err(format!(
            "ERR unknown subcommand '{}'. Try CLUSTER HELP.",
            lossy(sub0)
        ))),
    })();
    r.unwrap_or_else(|e| e)
}

fn change_slots(
    st: &mut ClusterState,
    slots: &[usize],
    add: bool,
    seen: &mut [bool],
) -> Result<Reply, Reply> {
    for &s in slots {
        if add && st.slots[s].is_some() {
            return Err(Reply::err(format!("ERR Slot {s} is already busy")));
        }
        if !add && st.slots[s].is_none() {
            return Err(Reply::err(format!("ERR Slot {s} is already unassigned")));
        }
        if seen[s] {
            return Err(Reply::err(format!("ERR Slot {s} specified multiple times")));
        }
        seen[s] = true;
    }
    let me = st.myself;
    for &s in slots {
        if add {
            // Adding a slot we were importing closes the import.
            st.importing.set(s, None);
            st.add_slot(me, s);
        } else {
            st.del_slot(s);
        }
    }
    st.todo_save = true;
    st.todo_update_state = true;
    Ok(Reply::Ok)
}

/// Starts a MEET handshake (clusterStartHandshake); false for an invalid address.
pub fn start_handshake(st: &mut ClusterState, ip: &str, port: i64, cport: i64, now: u64) -> bool {
    let Ok(addr) = ip.parse::<std::net::IpAddr>() else {
        return false;
    };
    if !(1..=65535).contains(&port) || !(1..=65535).contains(&cport) {
        return false;
    }
    let ip = addr.to_string();
    let (port, cport) = (port as u16, cport as u16);
    if st
        .nodes
        .values()
        .any(|n| n.in_handshake() && n.ip == ip && n.port == port && n.cport == cport)
    {
        return true;
    }
    let name = st.new_name();
    let mut n = Node::new(name, FLAG_HANDSHAKE | FLAG_MEET, now);
    n.ip = ip;
    n.port = port;
    n.cport = cport;
    st.nodes.insert(name, n);
    // Whoever forms the cluster waits on this handshake before it can REPLICATE.
    st.connect_now(&name, now);
    true
}

/// BUMPEPOCH without consensus; returns (bumped, my config epoch).
pub fn bump_epoch(st: &mut ClusterState) -> (bool, u64) {
    let max = st
        .nodes
        .values()
        .map(|n| n.config_epoch)
        .max()
        .unwrap_or(0)
        .max(st.current_epoch);
    let mine = st.me().config_epoch;
    if mine == 0 || mine != max {
        // Peers may have announced u64::MAX: saturate rather than wrap.
        st.current_epoch = st.current_epoch.saturating_add(1);
        let e = st.current_epoch;
        st.me_mut().config_epoch = e;
        st.todo_save = true;
        st.todo_fsync = true;
        (true, e)
    } else {
        (false, mine)
    }
}

/// CLUSTER RESET (clusterReset).
pub fn reset(st: &mut ClusterState, hard: bool) {
    if st.me().is_replica() {
        let me = st.myself;
        st.set_node_as_master(&me);
        st.set_replication(None);
        st.out.push(Out::FlushAll);
    }
    for s in 0..SLOTS {
        st.importing.set(s, None);
        st.migrating.set(s, None);
        st.del_slot(s);
    }
    let others: Vec<msg::Name> = st
        .nodes
        .keys()
        .filter(|n| **n != st.myself)
        .copied()
        .collect();
    for n in others {
        st.del_node(&n);
    }
    if hard {
        st.current_epoch = 0;
        st.last_vote_epoch = 0;
        st.me_mut().config_epoch = 0;
        let old = st.myself;
        let new = st.new_name();
        st.rename_node(&old, new);
        st.myself = new;
    }
    // clusterReset saves with fsync before replying.
    st.todo_save = true;
    st.todo_fsync = true;
    st.todo_update_state = true;
}

fn setslot(
    st: &mut ClusterState,
    host: &dyn Host,
    args: &[&[u8]],
    now: u64,
) -> Result<Reply, Reply> {
    if args.len() < 3 {
        return Err(wrong_args("setslot"));
    }
    if st.me().is_replica() {
        return Err(Reply::err("ERR Please use SETSLOT only with masters."));
    }
    let slot = slot_arg(args[1])?;
    let action = args[2].to_ascii_lowercase();
    let me = st.myself;
    let unknown = |a: &[u8]| Reply::err(format!("ERR I don't know about node {}", lossy(a)));
    match (action.as_slice(), args.len()) {
        (b"migrating", 4) => {
            if st.slots[slot] != Some(me) {
                return Err(Reply::err(format!(
                    "ERR I'm not the owner of hash slot {slot}"
                )));
            }
            let n = lookup(st, args[3]).ok_or_else(|| unknown(args[3]))?;
            if st.nodes[&n].is_replica() {
                return Err(Reply::err("ERR Target node is not a master"));
            }
            st.migrating.set(slot, Some(n));
        }
        (b"importing", 4) => {
            if st.slots[slot] == Some(me) {
                return Err(Reply::err(format!(
                    "ERR I'm already the owner of hash slot {slot}"
                )));
            }
            let n = lookup(st, args[3]).ok_or_else(|| unknown(args[3]))?;
            if st.nodes[&n].is_replica() {
                return Err(Reply::err("ERR Target node is not a master"));
            }
            st.importing.set(slot, Some(n));
        }
        (b"stable", 3) => {
            st.importing.set(slot, None);
            st.migrating.set(slot, None);
        }
        (b"node", 4) => {
            let n = lookup(st, args[3])
                .ok_or_else(|| Reply::err(format!("ERR Unknown node {}", lossy(args[3]))))?;
            if st.nodes[&n].is_replica() {
                return Err(Reply::err("ERR Target node is not a master"));
            }
            let keys = host.count_keys_in_slot(slot as u16);
            if st.slots[slot] == Some(me) && n != me && keys != 0 {
                return Err(Reply::err(format!(
                    "ERR Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
                )));
            }
            let unchanged = st.slots[slot] == Some(n)
                && (keys != 0 || st.migrating[slot].is_none())
                && !(n == me && st.importing[slot].is_some());
            if unchanged {
                // Typical for the bystanders of a resharding, told by the importing node's
                // PONG already: nothing to save or reroute. Whatever that PONG changed may
                // still wait for the cron's save, so it is written before this reply (Redis
                // saved it in the beforeSleep after reading the PONG).
                st.todo_flush = true;
                return Ok(Reply::Ok);
            }
            if keys == 0 && st.migrating[slot].is_some() {
                st.migrating.set(slot, None);
            }
            let was_mine = st.slots[slot] == Some(me);
            st.del_slot(slot);
            st.add_slot(n, slot);
            if was_mine && n != me && st.me().numslots == 0 && st.config.allow_replica_migration {
                st.set_my_master(n);
            }
            if n == me && st.importing[slot].is_some() {
                st.importing.set(slot, None);
                bump_epoch(st);
                broadcast_pong(st, now);
            }
        }
        _ => {
            return Err(Reply::err(
                "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP",
            ))
        }
    }
    st.todo_save = true;
    st.todo_update_state = true;
    Ok(Reply::Ok)
}

/// The target of an atomic slot migration takes its slots once the source granted them
/// (Valkey 9's hand-off): its config epoch is bumped without consensus (the source, paused,
/// agreed, and stays paused until it sees the claim), every slot is assigned to this node,
/// nodes.conf is saved and fsynced before anything else leaves the node, and a PONG goes
/// to every peer so the claim spreads at once. Returns the config epoch it claimed with.
pub fn claim_granted_slots(st: &mut ClusterState, ranges: &[(u16, u16)], now: u64) -> u64 {
    let (_, epoch) = bump_epoch(st);
    let me = st.myself;
    for &(start, end) in ranges {
        for slot in start as usize..=(end as usize).min(msg::SLOTS - 1) {
            if st.slots[slot] != Some(me) {
                st.del_slot(slot);
                st.add_slot(me, slot);
            }
        }
    }
    st.todo_save = true;
    st.todo_fsync = true;
    st.todo_update_state = true;
    broadcast_pong(st, now);
    epoch
}

/// PONG to every connected node, so a config change spreads at once.
pub fn broadcast_pong(st: &mut ClusterState, now: u64) {
    let links: Vec<LinkId> = st
        .nodes
        .values()
        .filter(|n| n.flags & (FLAG_MYSELF | FLAG_HANDSHAKE) == 0 && n.link_connected)
        .filter_map(|n| n.link)
        .collect();
    for l in links {
        st.send_ping(l, msg::TYPE_PONG, now);
    }
}

const STAT_NAMES: [&str; 11] = [
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
];

/// CLUSTER INFO text.
pub fn info(st: &ClusterState) -> String {
    // Per owner from numslots (slots of owners missing from the table are not counted,
    // as before): no scan of the slot table.
    let (mut ok, mut pfail, mut fail, mut assigned) = (0, 0, 0, 0);
    for n in st.nodes.values().filter(|n| n.numslots > 0) {
        assigned += n.numslots;
        if n.failed() {
            fail += n.numslots;
        } else if n.timed_out() {
            pfail += n.numslots;
        } else {
            ok += n.numslots;
        }
    }
    let mut s = String::new();
    let _ = write!(
        s,
        "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{ok}\r\ncluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\ncluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{}\r\n",
        if st.state_ok { "ok" } else { "fail" },
        st.nodes.len(),
        st.size,
        st.current_epoch,
        st.node_epoch(st.me()),
    );
    for (dir, counts) in [("sent", &st.stats.sent), ("received", &st.stats.received)] {
        let mut total = 0;
        for (i, c) in counts.iter().enumerate() {
            if *c > 0 {
                let _ = write!(s, "cluster_stats_messages_{}_{dir}:{c}\r\n", STAT_NAMES[i]);
                total += c;
            }
        }
        let _ = write!(s, "cluster_stats_messages_{dir}:{total}\r\n");
    }
    let _ = write!(
        s,
        "total_cluster_links_buffer_limit_exceeded:{}\r\n",
        st.stats.links_buffer_limit_exceeded
    );
    s
}

fn node_entry(st: &ClusterState, n: &Node, pp: bool) -> Reply {
    let mut extra = Vec::new();
    let ep = st.config.preferred_endpoint_type;
    if ep != crate::config::EndpointType::Ip && !n.ip.is_empty() {
        extra.push((Reply::bulk("ip"), Reply::bulk(&n.ip)));
    }
    if ep != crate::config::EndpointType::Hostname && !n.hostname.is_empty() {
        extra.push((Reply::bulk("hostname"), Reply::bulk(&n.hostname)));
    }
    // unknown-endpoint: a null endpoint (addNodeToNodeReply).
    let endpoint = if ep == crate::config::EndpointType::UnknownEndpoint {
        Reply::Nil
    } else {
        Reply::Bulk(preferred_endpoint(st, n).into_bytes())
    };
    Reply::Array(vec![
        endpoint,
        Reply::Int(n.client_port(pp) as i64),
        Reply::bulk(n.name),
        Reply::Map(extra),
    ])
}

/// CLUSTER SLOTS: one entry per maximal run of slots with the same owner (`pp`: show
/// plaintext ports).
pub fn slots_reply(st: &ClusterState, pp: bool) -> Reply {
    let mut out = Vec::new();
    let mut start = 0;
    for j in 0..=SLOTS {
        let cur = if j < SLOTS { st.slots[j] } else { None };
        if j > 0 && (j == SLOTS || cur != st.slots[j - 1]) {
            if let Some(owner) = st.slots[j - 1].and_then(|o| st.nodes.get(&o)) {
                let mut e = vec![
                    Reply::Int(start as i64),
                    Reply::Int(j as i64 - 1),
                    node_entry(st, owner, pp),
                ];
                for r in st.replicas_of(&owner.name) {
                    // isReplicaAvailable: not failed and replicating (offset != 0).
                    if let Some(rn) = st
                        .nodes
                        .get(&r)
                        .filter(|rn| !rn.failed() && rn.repl_offset != 0)
                    {
                        e.push(node_entry(st, rn, pp));
                    }
                }
                out.push(Reply::Array(e));
            }
            start = j;
        } else if j == 0 {
            start = 0;
        }
    }
    Reply::Array(out)
}

fn shard_node(st: &ClusterState, n: &Node) -> Reply {
    let mut m = vec![(Reply::bulk("id"), Reply::bulk(n.name))];
    // The bus's TLS setting says which of a node's ports is its TLS one (Redis 7.0's
    // addNodeDetailsToShardReply); a port that is 0 is left out.
    let (plain, tls) = if st.config.tls_cluster {
        (n.pport, n.port)
    } else {
        (n.port, 0)
    };
    if plain != 0 {
        m.push((Reply::bulk("port"), Reply::Int(plain as i64)));
    }
    if tls != 0 {
        m.push((Reply::bulk("tls-port"), Reply::Int(tls as i64)));
    }
    m.extend([
        (Reply::bulk("ip"), Reply::bulk(&n.ip)),
        (
            Reply::bulk("endpoint"),
            Reply::Bulk(preferred_endpoint(st, n).into_bytes()),
        ),
    ]);
    if !n.hostname.is_empty() {
        m.push((Reply::bulk("hostname"), Reply::bulk(&n.hostname)));
    }
    m.push((
        Reply::bulk("role"),
        Reply::bulk(if n.is_replica() { "replica" } else { "master" }),
    ));
    m.push((
        Reply::bulk("replication-offset"),
        Reply::Int(n.repl_offset as i64),
    ));
    m.push((
        Reply::bulk("health"),
        Reply::bulk(if n.failed() {
            "fail"
        } else if n.is_replica() && n.repl_offset == 0 {
            "loading"
        } else {
            "online"
        }),
    ));
    Reply::Map(m)
}

/// CLUSTER SHARDS: per master, its slot ranges and its nodes.
pub fn shards_reply(st: &ClusterState) -> Reply {
    let mut out = Vec::new();
    for m in st.nodes.values().filter(|n| n.is_master()) {
        let mut slots = Vec::new();
        for (a, b) in st.slot_ranges(&m.name) {
            slots.push(Reply::Int(a as i64));
            slots.push(Reply::Int(b as i64));
        }
        let mut nodes = vec![shard_node(st, m)];
        for r in st.replicas_of(&m.name) {
            if let Some(rn) = st.nodes.get(&r) {
                nodes.push(shard_node(st, rn));
            }
        }
        out.push(Reply::Map(vec![
            (Reply::bulk("slots"), Reply::Array(slots)),
            (Reply::bulk("nodes"), Reply::Array(nodes)),
        ]));
    }
    Reply::Array(out)
}

/// CLUSTER LINKS.
pub fn links_reply(st: &ClusterState) -> Reply {
    let mut out = Vec::new();
    for n in st.nodes.values() {
        for (l, dir) in [(n.link, "to"), (n.inbound_link, "from")] {
            let Some(l) = l else { continue };
            let info = st.links.get(&l);
            let ctime = info.map(|i| i.ctime).unwrap_or(0);
            // One queue of whole messages per link: allocated and used are the same bytes.
            let queued = info
                .map(|i| i.send_queued.load(std::sync::atomic::Ordering::Relaxed) as i64)
                .unwrap_or(0);
            out.push(Reply::Map(vec![
                (Reply::bulk("direction"), Reply::bulk(dir)),
                (Reply::bulk("node"), Reply::bulk(n.name)),
                (Reply::bulk("create-time"), Reply::Int(ctime as i64)),
                (Reply::bulk("events"), Reply::bulk("r")),
                (Reply::bulk("send-buffer-allocated"), Reply::Int(queued)),
                (Reply::bulk("send-buffer-used"), Reply::Int(queued)),
            ]));
        }
    }
    Reply::Array(out)
}
