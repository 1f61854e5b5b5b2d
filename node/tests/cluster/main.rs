//! Cluster mode: topology, redis-cli --cluster, mixed clusters with redis-server and
//! valkey-server, DUMP/RESTORE/MIGRATE both ways, failover on shutdown, the bus's send path.

mod asm_interop;
mod blocked_redirect_diff;
mod cluster_announce_runtime;
mod cluster_conform;
mod cluster_links_debug;
mod cluster_mixed;
mod cluster_redis_cli;
mod cluster_sendbuf;
mod cluster_tls;
mod cluster_topology;
mod dump_migrate;
mod shutdown_failover;
