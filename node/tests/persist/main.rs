//! Persistence: RDB and AOF written, loaded and compared with redis-server's, over real
//! tessera-node processes (tessera-testkit starts them).

mod aof_load_conform;
mod aofrw_conform;
mod corrupt_restore;
mod persist_aof;
mod persist_rdb;
mod rdb_conform;
mod short_load;
