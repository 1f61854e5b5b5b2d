//! Scripting: EVAL and FUNCTION (libraries, persistence, cluster mode), busy scripts,
//! cjson/cmsgpack/struct, each compared with redis-server 7.0.

mod functions;
mod functions_cluster;
mod functions_persist;
mod functions_reload;
mod script_busy;
mod script_busy_held;
mod script_busy_tx;
mod script_cjson;
mod script_cluster_replica;
mod script_cluster_slots;
mod script_errorstats;
mod script_ldb;
mod script_libs;
mod script_misc;
mod script_oom;
mod script_refusals;
mod script_repl;
mod script_tracking;
mod script_write_dirty;
mod scripting;
