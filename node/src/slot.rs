//! Redis Cluster hash slot of a key: CRC16/XMODEM of the key, or of the first non-empty
//! `{hashtag}`, modulo 16384. One definition for the whole node: the cluster crate's, which
//! routing uses too, so the keyspace's stripes and the redirections can never disagree.

pub use tessera_cluster::key_hash_slot;

pub const SLOTS: usize = 16384;

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
        assert_eq!(key_hash_slot(b"foo{{bar}}zap"), key_hash_slot(b"{bar"));
        assert_eq!(key_hash_slot(b""), 0);
    }
}
