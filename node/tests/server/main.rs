//! The node as a server: the real tessera-node binary driven over loopback with raw RESP
//! bytes, the `redis` crate, redis-cli and redis-benchmark (the former `integration` suite),
//! and the differential suites for ACL, config, DEBUG, LATENCY, client tracking, pub/sub,
//! keyspace notifications, no-op writes and WATCH against redis-server 7.0.

// Former integration suite.
mod blocking;
mod config;
mod keys;
mod protocol;
mod pubsub;
mod server;
mod strings;
mod tls;
mod tls_busy;
mod tools;
mod transactions;

mod acl_default_user;
mod big_values_diff;
mod blocked_type_diff;
mod busy_poll;
mod client_evict_diff;
mod client_tracking;
mod clientmem_diff;
mod clients_diff;
mod command_list_diff;
mod config_diff;
mod conform_diff;
mod conform_start;
mod conn_memory;
mod crash_report;
mod debug_cmd;
mod debug_reload;
mod errorstats_diff;
mod evict_diff;
mod harness_proc;
mod info_fields_diff;
mod introspection_diff;
mod latency;
mod lazyfree_diff;
mod loading_start_diff;
mod lolwut_diff;
mod maxmemory_diff;
mod memefficiency_diff;
mod metrics;
mod migrate_cache_diff;
mod monitor_diff;
mod net_oom;
mod net_rebind;
mod net_source_addr;
mod net_stream_nodes;
mod net_unix;
mod noop_writes;
mod notify_diff;
mod obuf_diff;
mod one_test_kit;
mod pause_diff;
mod pubsub_client;
mod pubsub_shard;
mod slowlog_diff;
mod watch_diff;
