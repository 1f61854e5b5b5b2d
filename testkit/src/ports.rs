//! The one port allocator.
//!
//! Scheme: bind-probe on 127.0.0.1 from a per-process random base, walking a process-wide
//! counter. Every port handed out also has its cluster-bus port (+10000) free, so any server
//! can run in cluster mode. Why this scheme: the servers bind their ports themselves, so a
//! port we held open would have to be released right before the spawn anyway (the same race
//! as probing); the random base puts test binaries running at once (other helpers, other
//! packages) far apart, the counter never gives one process the same port twice, and the
//! spawner retries on a fresh port when a start loses a race anyway.
//!
//! Range: 15000..=22767, whose bus ports (25000..=32767) stay below Linux's ephemeral range
//! (32768+), so outgoing connections never take them.

use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// First client port handed out.
pub const LO: u16 = 15000;
/// Last client port handed out.
pub const HI: u16 = 22767;
/// Where a cluster node's bus listens relative to its client port.
pub const BUS_OFFSET: u16 = 10000;

const SPAN: u32 = (HI - LO) as u32 + 1;

/// This process's random starting offset in the range.
fn base() -> u32 {
    static BASE: OnceLock<u32> = OnceLock::new();
    *BASE.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        (h.finish() % u64::from(SPAN)) as u32
    })
}

static NEXT: AtomicU32 = AtomicU32::new(0);

fn bindable(ip: &str, port: u16) -> bool {
    TcpListener::bind((ip, port)).is_ok()
}

/// A port free on `ip` right now, with its bus port (+10000) free too, never handed out
/// before by this process (until the range wraps).
pub fn free_port_on(ip: &str) -> u16 {
    for _ in 0..SPAN {
        let off = NEXT.fetch_add(1, Ordering::Relaxed);
        let p = LO + ((base() + off) % SPAN) as u16;
        if bindable(ip, p) && bindable(ip, p + BUS_OFFSET) {
            return p;
        }
    }
    panic!("no free port in {LO}-{HI} (with bus port +{BUS_OFFSET}) on {ip}");
}

/// [`free_port_on`] 127.0.0.1.
pub fn free_port() -> u16 {
    free_port_on("127.0.0.1")
}

/// For servers that must all listen on one fixed `port` (a pod's port): the next loopback
/// address `block.x`, x from `*next` up (advanced past it), where `port` and its bus port
/// are free. A suite keeps its own block (a third octet no other suite uses).
pub fn free_ip_for(port: u16, block: [u8; 3], next: &mut u8) -> String {
    while *next < 255 {
        let ip = format!("{}.{}.{}.{}", block[0], block[1], block[2], *next);
        *next += 1;
        if bindable(&ip, port)
            && port
                .checked_add(BUS_OFFSET)
                .is_some_and(|b| bindable(&ip, b))
        {
            return ip;
        }
    }
    panic!(
        "no loopback address in {}.{}.{}.0/24 with port {port} and its bus port free",
        block[0], block[1], block[2]
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ports_are_distinct_in_range_and_bindable_with_bus() {
        let mut seen = HashSet::new();
        for _ in 0..200 {
            let p = free_port();
            assert!((LO..=HI).contains(&p), "{p}");
            assert!(seen.insert(p), "{p} handed out twice");
            assert!(bindable("127.0.0.1", p));
            assert!(bindable("127.0.0.1", p + BUS_OFFSET));
        }
    }

    #[test]
    fn a_port_in_use_is_skipped() {
        let p = free_port();
        // Hold the next candidates: whatever comes back must not be one of them.
        let held: Vec<TcpListener> = (1..=3)
            .filter_map(|i| {
                let off = NEXT.load(Ordering::Relaxed) + i - 1;
                let q = LO + ((base() + off) % SPAN) as u16;
                TcpListener::bind(("127.0.0.1", q)).ok()
            })
            .collect();
        let held_ports: Vec<u16> = held
            .iter()
            .filter_map(|l| l.local_addr().ok().map(|a| a.port()))
            .collect();
        let q = free_port();
        assert_ne!(p, q);
        assert!(!held_ports.contains(&q), "{q} is held");
    }

    #[test]
    fn free_ip_for_skips_an_address_whose_port_is_taken() {
        let mut next = 1;
        let first = free_ip_for(6379, [127, 0, 191], &mut next);
        let octet: u8 = first
            .rsplit('.')
            .next()
            .and_then(|x| x.parse().ok())
            .expect("last octet");
        assert_eq!(next, octet + 1, "advanced past {first}");
        let held = TcpListener::bind((first.as_str(), 6379)).expect("hold the port");
        let mut from = octet;
        let second = free_ip_for(6379, [127, 0, 191], &mut from);
        assert_ne!(first, second, "{first} has 6379 taken");
        drop(held);
    }

    #[test]
    fn the_base_is_fixed_per_process() {
        assert_eq!(base(), base());
        assert!(base() < SPAN);
    }
}
