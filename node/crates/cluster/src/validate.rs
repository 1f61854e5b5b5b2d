//! Checks for the strings peers and files give us. Each of them ends up in a nodes.conf or
//! CLUSTER NODES line (space-separated fields, one node per line) or in a log line, so a
//! newline, a space or a separator inside one would corrupt those formats or forge lines.

use std::net::IpAddr;

/// Longest hostname accepted from a peer or nodes.conf (a DNS name is at most 253).
pub const MAX_HOSTNAME_LEN: usize = 255;
/// Longest human node name (Valkey's extension) accepted from a peer.
pub const MAX_HUMAN_NODENAME_LEN: usize = 255;

/// A node id as Redis's verifyClusterNodeId accepts it: 40 characters of `[a-z0-9]` (the
/// names Redis and Valkey generate are lowercase hex).
pub fn is_node_name(n: &[u8]) -> bool {
    n.len() == 40
        && n.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// A shard id: 40 lowercase hex characters, as Redis 7.2 and Valkey generate them.
pub fn is_shard_id(n: &[u8]) -> bool {
    n.len() == 40 && n.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// `cluster-announce-hostname`'s rule (Redis's isValidAnnouncedHostname): alphanumerics,
/// '-' and '.'. Empty means "no hostname".
pub fn is_hostname(h: &[u8]) -> bool {
    h.len() <= MAX_HOSTNAME_LEN
        && h.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
}

/// A human node name (Valkey's extension): no control characters. We only keep it (it is in
/// no file or reply), and Valkey itself allows non-ASCII names, so this is deliberately lax.
pub fn is_human_nodename(h: &[u8]) -> bool {
    h.len() <= MAX_HUMAN_NODENAME_LEN && h.iter().all(|c| *c >= 0x20 && *c != 0x7f)
}

/// `s` as an IPv4 or IPv6 literal in canonical text; None if it is anything else.
pub fn canonical_ip(s: &str) -> Option<String> {
    s.parse::<IpAddr>().ok().map(|a| a.to_string())
}

/// An address field: empty ("unknown", as Redis writes a node without one) or an IP.
pub fn is_addr(s: &str) -> bool {
    s.is_empty() || s.parse::<IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_node_name(b"0123456789abcdef0123456789abcdef01234567"));
        assert!(is_node_name(&[b'z'; 40]));
        assert!(!is_node_name(&[b'A'; 40]));
        assert!(!is_node_name(&[b'a'; 39]));
        assert!(!is_node_name(b"0123456789abcdef0123456789abcdef0123456\n"));
        assert!(is_shard_id(&[b'f'; 40]));
        assert!(!is_shard_id(&[b'z'; 40]));
    }

    #[test]
    fn hostnames_and_addresses() {
        assert!(is_hostname(b""));
        assert!(is_hostname(b"node-1.example.com"));
        for bad in [&b"a b"[..], b"a\nb", b"a,b", b"a@b:1", b"a_b"] {
            assert!(!is_hostname(bad), "{bad:?}");
        }
        assert!(!is_hostname(&[b'a'; MAX_HOSTNAME_LEN + 1]));
        assert!(is_human_nodename(b"my node #1"));
        assert!(!is_human_nodename(b"a\nb"));
        assert!(is_human_nodename("é".as_bytes()));
        assert!(!is_human_nodename(b"a\x7fb"));
        assert_eq!(canonical_ip("10.0.0.1").as_deref(), Some("10.0.0.1"));
        assert_eq!(canonical_ip("0:0::1").as_deref(), Some("::1"));
        for bad in [
            "10.9.9.9\ngarbage",
            "999.1.1.1",
            "host",
            " 10.0.0.1",
            "fe80::1%eth0",
        ] {
            assert_eq!(canonical_ip(bad), None, "{bad:?}");
        }
        assert!(is_addr(""));
        assert!(!is_addr("x"));
    }
}
