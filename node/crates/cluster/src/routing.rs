//! Key routing: hash slots and the redirect decision (Redis 7.0 getNodeByQuery).

use crate::config::EndpointType;
use crate::msg::SLOTS;
use crate::state::{ClusterState, Node};

/// CRC16/XMODEM with slice-by-16 tables (8 KiB, built at compile time): a typical 10-20
/// byte key takes one or two table rounds instead of one dependent lookup per byte, which
/// made the slot computation ~6% of a pipelined INCR's CPU.
static XMODEM: crc::Crc<u16, crc::Table<16>> =
    crc::Crc::<u16, crc::Table<16>>::new(&crc::CRC_16_XMODEM);

/// CRC16/XMODEM of the key, or of its first non-empty `{hash tag}`, mod 16384.
/// `#[inline]`: the node calls it on every keyed command, across the crate boundary.
#[inline]
pub fn key_hash_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&c| c == b'{')
        .and_then(|s| {
            key[s + 1..]
                .iter()
                .position(|&c| c == b'}')
                .map(|len| &key[s + 1..s + 1 + len])
        })
        .filter(|t| !t.is_empty());
    let k = tagged.unwrap_or(key);
    xmodem(k) & (SLOTS as u16 - 1)
}

/// CRC16/XMODEM over the crate's slice-by-16 tables. The loop is ours rather than
/// `Crc::checksum` because that generic `const fn` runs well only when inlined where the
/// algorithm's constants fold: left out of line (a codegen decision that moved with
/// unrelated changes), it cost a 16-byte key 112 instructions instead of ~50. XMODEM
/// starts at 0, reflects nothing and XORs nothing out, so the update is all there is.
#[inline]
fn xmodem(bytes: &[u8]) -> u16 {
    let t = XMODEM.table();
    let mut crc: u16 = 0;
    let mut blocks = bytes.chunks_exact(16);
    for b in &mut blocks {
        let [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15] =
            <[u8; 16]>::try_from(b).unwrap_or_default();
        let c0 = b0 ^ (crc >> 8) as u8;
        let c1 = b1 ^ crc as u8;
        crc = t[0][b15 as usize]
            ^ t[1][b14 as usize]
            ^ t[2][b13 as usize]
            ^ t[3][b12 as usize]
            ^ t[4][b11 as usize]
            ^ t[5][b10 as usize]
            ^ t[6][b9 as usize]
            ^ t[7][b8 as usize]
            ^ t[8][b7 as usize]
            ^ t[9][b6 as usize]
            ^ t[10][b5 as usize]
            ^ t[11][b4 as usize]
            ^ t[12][b3 as usize]
            ^ t[13][b2 as usize]
            ^ t[14][c1 as usize]
            ^ t[15][c0 as usize];
    }
    for &b in blocks.remainder() {
        crc = t[0][((crc >> 8) as u8 ^ b) as usize] ^ (crc << 8);
    }
    crc
}

/// What the routing decision needs to know about a command (or a whole MULTI block).
#[derive(Clone, Debug, Default)]
pub struct RouteQuery<'a> {
    /// Every key the command (or the queued transaction) touches, in order.
    pub keys: Vec<&'a [u8]>,
    /// The client sent ASKING (or the command is flagged ASKING, e.g. RESTORE-ASKING).
    pub asking: bool,
    /// The client sent READONLY.
    pub readonly: bool,
    pub is_write: bool,
    /// SPUBLISH / SSUBSCRIBE / SUNSUBSCRIBE.
    pub is_pubsubshard: bool,
    /// MIGRATE works locally on open slots.
    pub is_migrate: bool,
    /// The client is on TLS: with tls-cluster, other clients are redirected to plaintext
    /// ports (Redis 7.0's use_pport).
    pub tls_client: bool,
}

/// The outcome. `Route::error()` renders Redis's exact error text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Serve here (`slot` is None when the command has no keys).
    Local {
        slot: Option<u16>,
    },
    Moved {
        slot: u16,
        endpoint: String,
        port: u16,
    },
    Ask {
        slot: u16,
        endpoint: String,
        port: u16,
    },
    TryAgain,
    CrossSlot,
    DownUnbound,
    Down,
    DownReadOnly,
}

impl Route {
    /// The error line without the leading '-' (None for `Local`).
    pub fn error(&self) -> Option<String> {
        Some(match self {
            Route::Local { .. } => return None,
            Route::Moved {
                slot,
                endpoint,
                port,
            } => format!("MOVED {slot} {endpoint}:{port}"),
            Route::Ask {
                slot,
                endpoint,
                port,
            } => format!("ASK {slot} {endpoint}:{port}"),
            Route::TryAgain => "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            Route::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
            Route::DownUnbound => "CLUSTERDOWN Hash slot not served".into(),
            Route::Down => "CLUSTERDOWN The cluster is down".into(),
            Route::DownReadOnly => {
                "CLUSTERDOWN The cluster is down and only accepts read commands".into()
            }
        })
    }
}

/// The endpoint clients are told to use for a node (cluster-preferred-endpoint-type).
pub fn preferred_endpoint(st: &ClusterState, n: &Node) -> String {
    match st.config.preferred_endpoint_type {
        EndpointType::Ip => n.ip.clone(),
        EndpointType::Hostname if !n.hostname.is_empty() => n.hostname.clone(),
        EndpointType::Hostname => "?".into(),
        // Redis 7.0's getPreferredEndpoint: empty (CLUSTER SLOTS shows a null instead).
        EndpointType::UnknownEndpoint => String::new(),
    }
}

/// Decides where a command runs, checking in Redis's order: no key → local; unbound slot;
/// cross slot; cluster down; migrating (some keys missing: TRYAGAIN, all: ASK) / importing
/// with ASKING (TRYAGAIN);
/// READONLY on a replica; otherwise MOVED. `key_exists` looks a key up locally.
pub fn route(st: &ClusterState, q: &RouteQuery, key_exists: impl Fn(&[u8]) -> bool) -> Route {
    let mut first: Option<&[u8]> = None;
    let mut slot = 0usize;
    let mut migrating = false;
    let mut importing = false;
    let mut multiple_keys = false;
    let mut missing = 0;
    let mut existing = 0;
    for &k in &q.keys {
        let s = key_hash_slot(k) as usize;
        match first {
            None => {
                first = Some(k);
                slot = s;
                let Some(owner) = st.slots[s] else {
                    return Route::DownUnbound;
                };
                if owner == st.myself && st.migrating[s].is_some() {
                    migrating = true;
                } else if st.importing[s].is_some() {
                    importing = true;
                }
            }
            Some(f) if f != k => {
                if s != slot {
                    return Route::CrossSlot;
                }
                multiple_keys = true;
            }
            _ => {}
        }
        // Shard channels are served by the owner until the slot moves: never counted.
        if (migrating || importing) && !q.is_pubsubshard {
            if key_exists(k) {
                existing += 1;
            } else {
                missing += 1;
            }
        }
    }
    if first.is_none() {
        return Route::Local { slot: None };
    }
    let Some(owner) = st.slots[slot] else {
        return Route::DownUnbound;
    };
    if !st.state_ok {
        if q.is_pubsubshard {
            if !st.config.allow_pubsubshard_when_down {
                return Route::Down;
            }
        } else if !st.config.allow_reads_when_down {
            return Route::Down;
        } else if q.is_write {
            return Route::DownReadOnly;
        }
    }
    let slot16 = slot as u16;
    if (migrating || importing) && q.is_migrate {
        return Route::Local { slot: Some(slot16) };
    }
    // Some keys here and some gone already: the client must retry once the slot settles
    // (Redis 7.0's TRYAGAIN); none here: they all moved, ASK the target.
    if migrating && missing > 0 && existing > 0 {
        return Route::TryAgain;
    }
    if migrating && missing > 0 {
        if let Some(t) = st.migrating[slot].and_then(|t| st.nodes.get(&t)) {
            return Route::Ask {
                slot: slot16,
                endpoint: preferred_endpoint(st, t),
                port: t.client_port(st.config.tls_cluster && !q.tls_client),
            };
        }
    }
    if importing && q.asking {
        if multiple_keys && missing > 0 {
            return Route::TryAgain;
        }
        return Route::Local { slot: Some(slot16) };
    }
    let me = st.me();
    if (q.readonly || q.is_pubsubshard)
        && !q.is_write
        && me.is_replica()
        && me.master == Some(owner)
    {
        return Route::Local { slot: Some(slot16) };
    }
    if owner == st.myself {
        return Route::Local { slot: Some(slot16) };
    }
    match st.nodes.get(&owner) {
        Some(n) => Route::Moved {
            slot: slot16,
            endpoint: preferred_endpoint(st, n),
            port: n.client_port(st.config.tls_cluster && !q.tls_client),
        },
        None => Route::DownUnbound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_slots_match_redis() {
        // Values from `redis-cli CLUSTER KEYSLOT`.
        assert_eq!(key_hash_slot(b"foo"), 12182);
        assert_eq!(key_hash_slot(b"bar"), 5061);
        assert_eq!(
            key_hash_slot(b"{user1000}.following"),
            key_hash_slot(b"user1000")
        );
        assert_eq!(key_hash_slot(b"foo{}{bar}"), key_hash_slot(b"foo{}{bar}"));
        assert_ne!(key_hash_slot(b"foo{}{bar}"), key_hash_slot(b"bar"));
        assert_eq!(key_hash_slot(b"foo{{bar}}zap"), key_hash_slot(b"{bar"));
        assert_eq!(key_hash_slot(b""), 0);
    }

    use proptest::prelude::*;

    proptest! {
        /// The slice-by-16 CRC agrees with the `crc16` crate's byte-at-a-time table for any
        /// key length (the tables change path at 16-byte boundaries).
        #[test]
        fn slice16_crc_matches_bytewise(
            key in proptest::collection::vec(any::<u8>().prop_filter("no hash tag", |b| *b != b'{'), 0..80)
        ) {
            let want = crc16::State::<crc16::XMODEM>::calculate(&key);
            prop_assert_eq!(xmodem(&key), want);
            prop_assert_eq!(key_hash_slot(&key), want & 16383);
        }
    }
}
