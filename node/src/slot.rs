//! Redis Cluster hash slot of a key: CRC16/XMODEM of the key, or of the first non-empty
//! `{hashtag}`, modulo 16384.

pub const SLOTS: usize = 16384;

/// The bytes that are hashed for `key` (the hashtag if there is a non-empty one).
pub fn hash_part(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&c| c == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&c| c == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

#[inline]
pub fn key_hash_slot(key: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(hash_part(key)) & 0x3fff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_slots() {
        // Values from `redis-cli CLUSTER KEYSLOT`.
        assert_eq!(key_hash_slot(b"foo"), 12182);
        assert_eq!(key_hash_slot(b"bar"), 5061);
        assert_eq!(
            key_hash_slot(b"{user1000}.following"),
            key_hash_slot(b"user1000")
        );
        assert_eq!(key_hash_slot(b"foo{}{bar}"), key_hash_slot(b"foo{}{bar}"));
        assert_eq!(hash_part(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_part(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(key_hash_slot(b""), 0);
    }
}
