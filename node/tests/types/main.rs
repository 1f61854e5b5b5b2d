//! Data types: every collection type's commands compared byte for byte with redis-server 7.0
//! (fixed and random scripts, RESP2 and RESP3), streams (blocking, persistence,
//! propagation, notifications), COMMAND INFO, memory, encodings, the RESP codec.

mod command_info_all;
mod memory_release;
mod pipeline_prefetch;
mod polish_encoding;
mod polish_incrbyfloat;
mod resp_codec;
mod types_blocking;
mod types_command_info;
mod types_conform_keyspace;
mod types_diff;
mod types_geo;
mod types_hll;
mod types_memory;
mod types_random_diff;
mod types_scan_random;
mod types_sort;
mod types_stream;
mod types_stream_blocking;
mod types_stream_info;
mod types_stream_notify;
mod types_stream_persist;
mod types_stream_propagate;
mod types_stream_random;
mod types_stream_unblock;
