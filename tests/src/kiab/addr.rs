//! Pod address allocation: every pod gets its own loopback address, and a recreated pod gets
//! a new one (as in a real cluster, where a pod IP is not stable). Addresses are never reused
//! within one allocator, and one that is already in use on this host (another box, another
//! test) is skipped.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};

use parking_lot::Mutex;

use super::error::KiabError;

/// Hands out 127.x.y.z addresses upwards from a base, skipping .0 and .255 host parts.
#[derive(Debug)]
pub struct AddressPool {
    next: Mutex<u32>,
    /// Ports that must be bindable on an address before it is handed out.
    probe_ports: Vec<u16>,
}

impl AddressPool {
    /// `base` must be inside 127.0.0.0/8 (e.g. 127.0.1.1).
    pub fn new(base: Ipv4Addr, probe_ports: Vec<u16>) -> Self {
        Self {
            next: Mutex::new(u32::from(base)),
            probe_ports,
        }
    }

    /// The next unused address.
    pub fn allocate(&self) -> Result<Ipv4Addr, KiabError> {
        let mut next = self.next.lock();
        loop {
            let candidate = Ipv4Addr::from(*next);
            if candidate.octets()[0] != 127 || *next == u32::from(Ipv4Addr::new(127, 255, 255, 255))
            {
                return Err(KiabError::AddressesExhausted);
            }
            *next += 1;
            let last = candidate.octets()[3];
            if last == 0 || last == 255 {
                continue;
            }
            if self.is_free(candidate) {
                return Ok(candidate);
            }
        }
    }

    fn is_free(&self, ip: Ipv4Addr) -> bool {
        self.probe_ports
            .iter()
            .all(|p| TcpListener::bind(SocketAddrV4::new(ip, *p)).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_reuses_and_skips_busy() {
        // Occupy 127.0.201.2:24901 so the pool must skip it.
        let _busy = TcpListener::bind("127.0.201.2:24901").expect("bind test port");
        let pool = AddressPool::new(Ipv4Addr::new(127, 0, 200, 254), vec![24901]);
        let got: Vec<Ipv4Addr> = (0..3).map(|_| pool.allocate().expect("address")).collect();
        assert_eq!(
            got,
            vec![
                Ipv4Addr::new(127, 0, 200, 254),
                Ipv4Addr::new(127, 0, 201, 1),
                Ipv4Addr::new(127, 0, 201, 3)
            ]
        );
    }
}
