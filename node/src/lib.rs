//! tessera-node: a Redis 7.0-compatible server and cluster node.
