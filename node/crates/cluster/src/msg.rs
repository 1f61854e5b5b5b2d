//! RCmb v1 cluster-bus message codec (Redis 7.0 layout, big-endian integers).
//!
//! Pure: no I/O. `decode` validates the signature, version, total length and the length implied
//! by the type before touching the body, and never allocates more than the input it was given.

use thiserror::Error;

/// Length of the fixed header every message starts with.
pub const HEADER_LEN: usize = 2256;
/// Size of one gossip entry in PING/PONG/MEET bodies.
pub const GOSSIP_LEN: usize = 104;
/// Node names are 40 lowercase hex characters.
pub const NAME_LEN: usize = 40;
/// Bytes of the slot bitmap.
pub const SLOTS_BYTES: usize = 2048;
/// Number of hash slots.
pub const SLOTS: usize = 16384;
/// Largest message we accept; bigger ones can only be a broken or hostile peer.
pub const MAX_MSG_LEN: usize = 64 * 1024 * 1024;
/// Largest message accepted on an inbound link not yet bound to a known node. A peer's first
/// messages are MEET/PING (about 100 KB of gossip in a 1000-node cluster), so this bounds what
/// an unauthenticated connection can make us buffer.
pub const MAX_UNIDENTIFIED_MSG_LEN: usize = 1024 * 1024;
const IP_LEN: usize = 46;

pub const TYPE_PING: u16 = 0;
pub const TYPE_PONG: u16 = 1;
pub const TYPE_MEET: u16 = 2;
pub const TYPE_FAIL: u16 = 3;
pub const TYPE_PUBLISH: u16 = 4;
pub const TYPE_FAILOVER_AUTH_REQUEST: u16 = 5;
pub const TYPE_FAILOVER_AUTH_ACK: u16 = 6;
pub const TYPE_UPDATE: u16 = 7;
pub const TYPE_MFSTART: u16 = 8;
pub const TYPE_MODULE: u16 = 9;
pub const TYPE_PUBLISHSHARD: u16 = 10;

pub const FLAG_MASTER: u16 = 1;
pub const FLAG_SLAVE: u16 = 2;
pub const FLAG_PFAIL: u16 = 4;
pub const FLAG_FAIL: u16 = 8;
pub const FLAG_MYSELF: u16 = 16;
pub const FLAG_HANDSHAKE: u16 = 32;
pub const FLAG_NOADDR: u16 = 64;
pub const FLAG_MEET: u16 = 128;
pub const FLAG_MIGRATE_TO: u16 = 256;
pub const FLAG_NOFAILOVER: u16 = 512;

pub const MFLAG0_PAUSED: u8 = 1;
pub const MFLAG0_FORCEACK: u8 = 2;
pub const MFLAG0_EXT_DATA: u8 = 4;

pub const EXT_HOSTNAME: u16 = 0;
pub const EXT_HUMAN_NODENAME: u16 = 1;
pub const EXT_FORGOTTEN_NODE: u16 = 2;
pub const EXT_SHARDID: u16 = 3;

/// A 40-byte node name (hex, as on the wire).
pub type Name = [u8; NAME_LEN];
/// The 16384-bit slot bitmap.
pub type SlotBitmap = [u8; SLOTS_BYTES];

/// Why a buffer is not a valid bus message.
#[derive(Debug, Error, PartialEq, Eq, Clone)]
pub enum MsgError {
    #[error("bad signature")]
    BadSignature,
    #[error("total length {0} out of range")]
    BadTotlen(usize),
    #[error("truncated message: have {have} of {need} bytes")]
    Truncated { have: usize, need: usize },
    #[error("unsupported protocol version {0}")]
    BadVersion(u16),
    #[error("length {got} does not match the {expected} implied by type {ty}")]
    LengthMismatch {
        ty: u16,
        got: usize,
        expected: usize,
    },
    #[error("bad ping extension")]
    BadExtension,
    #[error("unknown message type {0}")]
    UnknownType(u16),
    /// A well-framed message with a field that fails validation (see [`Message::validate`]):
    /// the message is dropped, the link kept.
    #[error("invalid {0}")]
    BadField(&'static str),
}

/// The fixed header fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub ty: u16,
    pub port: u16,
    pub current_epoch: u64,
    pub config_epoch: u64,
    pub offset: u64,
    pub sender: Name,
    pub slots: Box<SlotBitmap>,
    /// All zero when the sender is a master.
    pub slaveof: Name,
    /// Announced IP; empty means "use the socket's peer address".
    pub myip: String,
    pub pport: u16,
    pub cport: u16,
    pub flags: u16,
    /// 0 ok, 1 fail.
    pub state: u8,
    pub mflags: [u8; 3],
}

impl Default for Header {
    fn default() -> Self {
        Header {
            ty: 0,
            port: 0,
            current_epoch: 0,
            config_epoch: 0,
            offset: 0,
            sender: [b'0'; NAME_LEN],
            slots: Box::new([0; SLOTS_BYTES]),
            slaveof: [0; NAME_LEN],
            myip: String::new(),
            pport: 0,
            cport: 0,
            flags: 0,
            state: 0,
            mflags: [0; 3],
        }
    }
}

/// One gossip entry about a third node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gossip {
    pub name: Name,
    /// Seconds (Redis sends ms/1000 truncated to u32).
    pub ping_sent: u32,
    pub pong_received: u32,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub flags: u16,
    pub pport: u16,
}

/// A ping extension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ext {
    Hostname(Vec<u8>),
    HumanNodename(Vec<u8>),
    ForgottenNode {
        name: Name,
        ttl: u64,
    },
    ShardId(Name),
    /// Any type we do not interpret; ignored by the state machine.
    Unknown {
        ty: u16,
        payload: Vec<u8>,
    },
}

/// Message bodies by type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// PING, PONG, MEET.
    Gossip {
        entries: Vec<Gossip>,
        exts: Vec<Ext>,
    },
    Fail {
        name: Name,
    },
    Update {
        config_epoch: u64,
        name: Name,
        slots: Box<SlotBitmap>,
    },
    /// PUBLISH and PUBLISHSHARD.
    Publish {
        channel: Vec<u8>,
        message: Vec<u8>,
    },
    /// FAILOVER_AUTH_REQUEST / ACK, MFSTART.
    Empty,
    /// MODULE messages: kept raw, not interpreted.
    Raw(Vec<u8>),
}

/// A whole bus message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub header: Header,
    pub body: Body,
}

impl Message {
    /// Checks every name and string a peer sent before any of it reaches the node table
    /// (and so nodes.conf and CLUSTER NODES): node names as Redis's verifyClusterNodeId,
    /// addresses as IP literals (rewritten in canonical form), hostnames as
    /// cluster-announce-hostname, shard ids as 40 hex, human node names printable.
    pub fn validate(&mut self) -> Result<(), MsgError> {
        use crate::validate::{is_hostname, is_human_nodename, is_node_name, is_shard_id};
        let h = &mut self.header;
        if !is_node_name(&h.sender) {
            return Err(MsgError::BadField("sender name"));
        }
        if h.slaveof != [0; NAME_LEN] && !is_node_name(&h.slaveof) {
            return Err(MsgError::BadField("master name"));
        }
        h.myip = addr(&h.myip, "sender ip")?;
        match &mut self.body {
            Body::Gossip { entries, exts } => {
                for g in entries.iter_mut() {
                    if !is_node_name(&g.name) {
                        return Err(MsgError::BadField("gossip node name"));
                    }
                    g.ip = addr(&g.ip, "gossip ip")?;
                }
                for e in exts.iter() {
                    let ok = match e {
                        Ext::Hostname(v) => is_hostname(v),
                        Ext::HumanNodename(v) => is_human_nodename(v),
                        Ext::ForgottenNode { name, .. } => is_node_name(name),
                        Ext::ShardId(id) => is_shard_id(id),
                        Ext::Unknown { .. } => true,
                    };
                    if !ok {
                        return Err(MsgError::BadField(ext_field(e)));
                    }
                }
            }
            Body::Fail { name } | Body::Update { name, .. } => {
                if !is_node_name(name) {
                    return Err(MsgError::BadField("node name"));
                }
            }
            Body::Publish { .. } | Body::Empty | Body::Raw(_) => {}
        }
        Ok(())
    }
}

/// An address field: empty (unknown) or an IP literal, returned in canonical text.
fn addr(ip: &str, field: &'static str) -> Result<String, MsgError> {
    if ip.is_empty() {
        return Ok(String::new());
    }
    crate::validate::canonical_ip(ip).ok_or(MsgError::BadField(field))
}

fn ext_field(e: &Ext) -> &'static str {
    match e {
        Ext::Hostname(_) => "hostname extension",
        Ext::HumanNodename(_) => "human nodename extension",
        Ext::ForgottenNode { .. } => "forgotten node extension",
        Ext::ShardId(_) => "shard id extension",
        Ext::Unknown { .. } => "extension",
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}
fn name_at(b: &[u8], at: usize) -> Name {
    let mut n = [0u8; NAME_LEN];
    n.copy_from_slice(&b[at..at + NAME_LEN]);
    n
}
fn cstr(b: &[u8]) -> &[u8] {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    &b[..end]
}
fn ip_at(b: &[u8], at: usize) -> String {
    String::from_utf8_lossy(cstr(&b[at..at + IP_LEN])).into_owned()
}

/// Checks the first 8 bytes of a frame; returns the total length to read.
/// A failure here means the link must be closed (the stream cannot be resynchronised).
pub fn frame_len(prefix: &[u8]) -> Result<usize, MsgError> {
    if prefix.len() < 8 {
        return Err(MsgError::Truncated {
            have: prefix.len(),
            need: 8,
        });
    }
    if &prefix[..4] != b"RCmb" {
        return Err(MsgError::BadSignature);
    }
    let totlen = be32(prefix, 4) as usize;
    if !(HEADER_LEN..=MAX_MSG_LEN).contains(&totlen) {
        return Err(MsgError::BadTotlen(totlen));
    }
    Ok(totlen)
}

fn aligned_ext_len(payload: usize) -> usize {
    (8 + payload).div_ceil(8) * 8
}

/// Decodes one complete message (exactly `totlen` bytes).
pub fn decode(b: &[u8]) -> Result<Message, MsgError> {
    let totlen = frame_len(b)?;
    if b.len() < totlen {
        return Err(MsgError::Truncated {
            have: b.len(),
            need: totlen,
        });
    }
    if b.len() != totlen {
        return Err(MsgError::LengthMismatch {
            ty: be16(b, 12),
            got: b.len(),
            expected: totlen,
        });
    }
    let ver = be16(b, 8);
    if ver != 1 {
        return Err(MsgError::BadVersion(ver));
    }
    let ty = be16(b, 12);
    let count = be16(b, 14) as usize;
    let mut slots = Box::new([0u8; SLOTS_BYTES]);
    slots.copy_from_slice(&b[80..80 + SLOTS_BYTES]);
    let mut mflags = [0u8; 3];
    mflags.copy_from_slice(&b[2253..2256]);
    let header = Header {
        ty,
        port: be16(b, 10),
        current_epoch: be64(b, 16),
        config_epoch: be64(b, 24),
        offset: be64(b, 32),
        sender: name_at(b, 40),
        slots,
        slaveof: name_at(b, 2128),
        myip: ip_at(b, 2168),
        pport: be16(b, 2246),
        cport: be16(b, 2248),
        flags: be16(b, 2250),
        state: b[2252],
        mflags,
    };
    let n_ext = be16(b, 2214) as usize;
    let mismatch = |expected: usize| MsgError::LengthMismatch {
        ty,
        got: totlen,
        expected,
    };
    let body = match ty {
        TYPE_PING | TYPE_PONG | TYPE_MEET => {
            // count <= 65535, but the arithmetic is checked all the same.
            let gossip_end = GOSSIP_LEN
                .checked_mul(count)
                .and_then(|g| g.checked_add(HEADER_LEN))
                .ok_or(MsgError::BadTotlen(totlen))?;
            if gossip_end > totlen {
                return Err(mismatch(gossip_end));
            }
            let mut entries = Vec::with_capacity(count);
            for i in 0..count {
                let at = HEADER_LEN + i * GOSSIP_LEN;
                entries.push(Gossip {
                    name: name_at(b, at),
                    ping_sent: be32(b, at + 40),
                    pong_received: be32(b, at + 44),
                    ip: ip_at(b, at + 48),
                    port: be16(b, at + 94),
                    cport: be16(b, at + 96),
                    flags: be16(b, at + 98),
                    pport: be16(b, at + 100),
                });
            }
            let mut exts = Vec::new();
            let mut at = gossip_end;
            if header.mflags[0] & MFLAG0_EXT_DATA != 0 {
                for _ in 0..n_ext {
                    // Bytes left after `at` (at <= totlen holds; checked anyway).
                    let left = totlen.checked_sub(at).ok_or(MsgError::BadExtension)?;
                    if left < 8 {
                        return Err(MsgError::BadExtension);
                    }
                    let len = be32(b, at) as usize;
                    let ety = be16(b, at + 4);
                    if len < 8 || !len.is_multiple_of(8) || len > left {
                        return Err(MsgError::BadExtension);
                    }
                    let payload = &b[at + 8..at + len];
                    exts.push(decode_ext(ety, payload)?);
                    at += len;
                }
            }
            if at != totlen {
                return Err(mismatch(at));
            }
            Body::Gossip { entries, exts }
        }
        TYPE_FAIL => {
            if totlen != HEADER_LEN + NAME_LEN {
                return Err(mismatch(HEADER_LEN + NAME_LEN));
            }
            Body::Fail {
                name: name_at(b, HEADER_LEN),
            }
        }
        TYPE_UPDATE => {
            let want = HEADER_LEN + 8 + NAME_LEN + SLOTS_BYTES;
            if totlen != want {
                return Err(mismatch(want));
            }
            let mut s = Box::new([0u8; SLOTS_BYTES]);
            s.copy_from_slice(&b[HEADER_LEN + 48..want]);
            Body::Update {
                config_epoch: be64(b, HEADER_LEN),
                name: name_at(b, HEADER_LEN + 8),
                slots: s,
            }
        }
        TYPE_PUBLISH | TYPE_PUBLISHSHARD => {
            if totlen < HEADER_LEN + 8 {
                return Err(mismatch(HEADER_LEN + 8));
            }
            let cl = be32(b, HEADER_LEN) as usize;
            let ml = be32(b, HEADER_LEN + 4) as usize;
            let want = (HEADER_LEN + 8)
                .checked_add(cl)
                .and_then(|w| w.checked_add(ml))
                .ok_or(MsgError::BadTotlen(totlen))?;
            if totlen != want {
                return Err(mismatch(want));
            }
            let c0 = HEADER_LEN + 8;
            Body::Publish {
                channel: b[c0..c0 + cl].to_vec(),
                message: b[c0 + cl..want].to_vec(),
            }
        }
        TYPE_FAILOVER_AUTH_REQUEST | TYPE_FAILOVER_AUTH_ACK | TYPE_MFSTART => {
            if totlen != HEADER_LEN {
                return Err(mismatch(HEADER_LEN));
            }
            Body::Empty
        }
        TYPE_MODULE => Body::Raw(b[HEADER_LEN..].to_vec()),
        other => return Err(MsgError::UnknownType(other)),
    };
    Ok(Message { header, body })
}

fn decode_ext(ty: u16, p: &[u8]) -> Result<Ext, MsgError> {
    Ok(match ty {
        EXT_HOSTNAME => Ext::Hostname(cstr(p).to_vec()),
        EXT_HUMAN_NODENAME => Ext::HumanNodename(cstr(p).to_vec()),
        EXT_FORGOTTEN_NODE => {
            if p.len() < NAME_LEN + 8 {
                return Err(MsgError::BadExtension);
            }
            Ext::ForgottenNode {
                name: name_at(p, 0),
                ttl: be64(p, NAME_LEN),
            }
        }
        EXT_SHARDID => {
            if p.len() < NAME_LEN {
                return Err(MsgError::BadExtension);
            }
            Ext::ShardId(name_at(p, 0))
        }
        other => Ext::Unknown {
            ty: other,
            payload: p.to_vec(),
        },
    })
}

fn put_ip(out: &mut [u8], ip: &str) {
    let bytes = ip.as_bytes();
    let n = bytes.len().min(IP_LEN - 1);
    out[..n].copy_from_slice(&bytes[..n]);
}

fn ext_payload(e: &Ext) -> (u16, Vec<u8>) {
    match e {
        Ext::Hostname(h) => (EXT_HOSTNAME, h.clone()),
        Ext::HumanNodename(h) => (EXT_HUMAN_NODENAME, h.clone()),
        Ext::ForgottenNode { name, ttl } => {
            let mut v = name.to_vec();
            v.extend_from_slice(&ttl.to_be_bytes());
            (EXT_FORGOTTEN_NODE, v)
        }
        Ext::ShardId(n) => (EXT_SHARDID, n.to_vec()),
        Ext::Unknown { ty, payload } => (*ty, payload.clone()),
    }
}

/// Encodes a message. `count`, the extension count, EXT_DATA and totlen are derived from the
/// body, so callers cannot produce an inconsistent header.
pub fn encode(m: &Message) -> Vec<u8> {
    let h = &m.header;
    let mut out = vec![0u8; HEADER_LEN];
    out[..4].copy_from_slice(b"RCmb");
    out[8..10].copy_from_slice(&1u16.to_be_bytes());
    out[10..12].copy_from_slice(&h.port.to_be_bytes());
    out[12..14].copy_from_slice(&h.ty.to_be_bytes());
    out[16..24].copy_from_slice(&h.current_epoch.to_be_bytes());
    out[24..32].copy_from_slice(&h.config_epoch.to_be_bytes());
    out[32..40].copy_from_slice(&h.offset.to_be_bytes());
    out[40..80].copy_from_slice(&h.sender);
    out[80..80 + SLOTS_BYTES].copy_from_slice(&h.slots[..]);
    out[2128..2168].copy_from_slice(&h.slaveof);
    put_ip(&mut out[2168..2168 + IP_LEN], &h.myip);
    out[2246..2248].copy_from_slice(&h.pport.to_be_bytes());
    out[2248..2250].copy_from_slice(&h.cport.to_be_bytes());
    out[2250..2252].copy_from_slice(&h.flags.to_be_bytes());
    out[2252] = h.state;
    out[2253..2256].copy_from_slice(&h.mflags);
    out[2253] &= !MFLAG0_EXT_DATA;
    match &m.body {
        Body::Gossip { entries, exts } => {
            let count = entries.len().min(u16::MAX as usize);
            out[14..16].copy_from_slice(&(count as u16).to_be_bytes());
            for g in entries.iter().take(count) {
                let mut e = [0u8; GOSSIP_LEN];
                e[..40].copy_from_slice(&g.name);
                e[40..44].copy_from_slice(&g.ping_sent.to_be_bytes());
                e[44..48].copy_from_slice(&g.pong_received.to_be_bytes());
                put_ip(&mut e[48..94], &g.ip);
                e[94..96].copy_from_slice(&g.port.to_be_bytes());
                e[96..98].copy_from_slice(&g.cport.to_be_bytes());
                e[98..100].copy_from_slice(&g.flags.to_be_bytes());
                e[100..102].copy_from_slice(&g.pport.to_be_bytes());
                out.extend_from_slice(&e);
            }
            if !exts.is_empty() {
                let n = exts.len().min(u16::MAX as usize);
                out[2214..2216].copy_from_slice(&(n as u16).to_be_bytes());
                out[2253] |= MFLAG0_EXT_DATA;
                for e in exts.iter().take(n) {
                    let (ty, mut payload) = ext_payload(e);
                    // Strings are NUL-terminated on the wire.
                    if matches!(e, Ext::Hostname(_) | Ext::HumanNodename(_)) {
                        payload.push(0);
                    }
                    let len = aligned_ext_len(payload.len());
                    out.extend_from_slice(&(len as u32).to_be_bytes());
                    out.extend_from_slice(&ty.to_be_bytes());
                    out.extend_from_slice(&[0, 0]);
                    out.extend_from_slice(&payload);
                    out.resize(out.len() + (len - 8 - payload.len()), 0);
                }
            }
        }
        Body::Fail { name } => out.extend_from_slice(name),
        Body::Update {
            config_epoch,
            name,
            slots,
        } => {
            out.extend_from_slice(&config_epoch.to_be_bytes());
            out.extend_from_slice(name);
            out.extend_from_slice(&slots[..]);
        }
        Body::Publish { channel, message } => {
            out.extend_from_slice(&(channel.len() as u32).to_be_bytes());
            out.extend_from_slice(&(message.len() as u32).to_be_bytes());
            out.extend_from_slice(channel);
            out.extend_from_slice(message);
        }
        Body::Empty => {}
        Body::Raw(r) => out.extend_from_slice(r),
    }
    let totlen = out.len() as u32;
    out[4..8].copy_from_slice(&totlen.to_be_bytes());
    out
}

/// Slot bitmap helpers (slot j = byte j>>3, bit j&7).
pub fn bitmap_get(b: &SlotBitmap, slot: usize) -> bool {
    b[slot >> 3] & (1 << (slot & 7)) != 0
}
pub fn bitmap_set(b: &mut SlotBitmap, slot: usize) {
    b[slot >> 3] |= 1 << (slot & 7);
}

/// Word `w` of a bitmap: slots 64w..64w+63, bit i = slot 64w+i. Indexes bytes directly
/// (no iterator adapters), since debug builds run the per-message slot loops too.
#[inline]
pub fn bitmap_word(b: &SlotBitmap, w: usize) -> u64 {
    let i = w * 8;
    u64::from_le_bytes([
        b[i],
        b[i + 1],
        b[i + 2],
        b[i + 3],
        b[i + 4],
        b[i + 5],
        b[i + 6],
        b[i + 7],
    ])
}

/// Number of 64-slot words in a bitmap.
pub const SLOT_WORDS: usize = SLOTS / 64;

/// Calls `f` with every slot set in `b` but not in `minus`, in order (64 slots per step).
#[inline]
pub fn for_each_slot_in_diff(b: &SlotBitmap, minus: &SlotBitmap, mut f: impl FnMut(usize)) {
    for w in 0..SLOT_WORDS {
        let mut x = bitmap_word(b, w) & !bitmap_word(minus, w);
        while x != 0 {
            f(w * 64 + x.trailing_zeros() as usize);
            x &= x - 1;
        }
    }
}

/// Number of slots set in a bitmap.
pub fn bitmap_count(b: &SlotBitmap) -> usize {
    let mut n = 0;
    for w in 0..SLOT_WORDS {
        n += bitmap_word(b, w).count_ones() as usize;
    }
    n
}

/// The set slots of a bitmap as (start, end) inclusive ranges, 64 slots per step (callers
/// run it per node on every nodes.conf save and routing rebuild, also in debug builds).
pub fn bitmap_ranges(b: &SlotBitmap) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    // The run being built, extended across words.
    let mut run: Option<(usize, usize)> = None;
    for w in 0..SLOT_WORDS {
        let mut word = bitmap_word(b, w);
        let base = w * 64;
        if word == 0 {
            continue;
        }
        let mut bit = 0usize;
        while word != 0 {
            let zeros = word.trailing_zeros() as usize;
            bit += zeros;
            // A full word shifted by 64 would overflow: take the all-ones case directly.
            let ones = if zeros == 0 && word == u64::MAX {
                64
            } else {
                word >>= zeros;
                word.trailing_ones() as usize
            };
            let (a, z) = (base + bit, base + bit + ones - 1);
            run = match run {
                Some((ra, rz)) if rz + 1 == a => Some((ra, z)),
                Some(r) => {
                    out.push(r);
                    Some((a, z))
                }
                None => Some((a, z)),
            };
            if ones == 64 {
                break;
            }
            word >>= ones;
            bit += ones;
            if bit >= 64 {
                break;
            }
        }
    }
    out.extend(run);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_2256_and_fields_at_offsets() {
        let mut h = Header {
            ty: TYPE_PONG,
            port: 7000,
            cport: 17000,
            flags: FLAG_MASTER,
            ..Default::default()
        };
        h.myip = "127.0.0.1".into();
        bitmap_set(&mut h.slots, 9);
        let b = encode(&Message {
            header: h.clone(),
            body: Body::Empty,
        });
        assert_eq!(b.len(), HEADER_LEN);
        assert_eq!(&b[..4], b"RCmb");
        assert_eq!(be16(&b, 2248), 17000);
        assert_eq!(b[80 + 1], 2);
        assert_eq!(&b[2168..2177], b"127.0.0.1");
    }

    #[test]
    fn extensions_are_aligned_and_round_trip() {
        let m = Message {
            header: Header {
                ty: TYPE_PING,
                ..Default::default()
            },
            body: Body::Gossip {
                entries: vec![],
                exts: vec![Ext::Hostname(b"host-a".to_vec()), Ext::ShardId([b'a'; 40])],
            },
        };
        let b = encode(&m);
        assert_eq!((b.len() - HEADER_LEN) % 8, 0);
        let mut want = m.clone();
        want.header.mflags[0] |= MFLAG0_EXT_DATA;
        assert_eq!(decode(&b).unwrap(), want);
    }

    #[test]
    fn rejects_bad_prefix() {
        assert_eq!(frame_len(b"XXmb\0\0\x08\xd0"), Err(MsgError::BadSignature));
        assert_eq!(frame_len(b"RCmb\0\0\0\x10"), Err(MsgError::BadTotlen(16)));
    }
}
