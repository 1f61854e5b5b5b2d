//! Persistence: RDB and AOF written, loaded and compared with redis-server's, over real
//! tessera-node processes (tessera-testkit starts them).

mod aof_history_gc;
mod aof_load_conform;
mod aof_off_seq;
mod aofrw_conform;
mod corrupt_restore;
mod functions_rdb;
mod legacy_stream;
mod migrate_aof;
mod persist_aof;
mod persist_rdb;
mod rdb_conform;
mod rewrite_child;
mod save_child;
mod short_load;
