//! INFO with Redis's sections and field names.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use super::{table, CmdResult, CommandSpec, Ctx};
use crate::server::Server;

pub fn commands() -> Vec<CommandSpec> {
    vec![CommandSpec::new("info", -1, "loading stale global", (0, 0, 0), info).group("server")]
}

/// Every section, in the order INFO prints them (`INFO everything`).
pub const EVERYTHING: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];

fn info(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut wanted: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let all = wanted.iter().any(|w| w == "all" || w == "everything");
    if wanted.is_empty() || wanted.iter().any(|w| w == "default") {
        wanted.extend(DEFAULT.iter().map(|s| s.to_string()));
    }
    if all {
        wanted.extend(DEFAULT.iter().map(|s| s.to_string()));
        wanted.push("commandstats".into());
        wanted.push("latencystats".into());
    }
    let mut s = String::new();
    for sec in EVERYTHING {
        if !wanted.iter().any(|w| w == sec) {
            continue;
        }
        if !s.is_empty() {
            s.push_str("\r\n");
        }
        let srv = ctx.srv;
        section(srv, sec, &mut s, &mut |db| {
            super::server_cmds::db_keys(ctx, db)
        });
    }
    ctx.out.verbatim(s.as_bytes(), "txt");
    Ok(())
}

fn human(n: u64) -> String {
    let f = n as f64;
    if f < 1024.0 {
        format!("{n}B")
    } else if f < 1024.0 * 1024.0 {
        format!("{:.2}K", f / 1024.0)
    } else if f < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}M", f / 1024.0 / 1024.0)
    } else {
        format!("{:.2}G", f / 1024.0 / 1024.0 / 1024.0)
    }
}

fn cpu_times(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_stime), t(ru.ru_utime))
}

/// (allocator_active, allocator_resident): mimalloc has one figure for both, the memory it
/// has committed from the OS; `used` when it reports none.
fn allocator_pages(used: u64) -> (u64, u64) {
    let (mut elapsed, mut utime, mut stime, mut rss, mut peak_rss) = (0, 0, 0, 0, 0);
    let (mut commit, mut peak_commit, mut faults) = (0usize, 0, 0);
    // SAFETY: mi_process_info only writes the eight usize outputs we pass.
    unsafe {
        libmimalloc_sys::mi_process_info(
            &mut elapsed,
            &mut utime,
            &mut stime,
            &mut rss,
            &mut peak_rss,
            &mut commit,
            &mut peak_commit,
            &mut faults,
        )
    };
    let c = (commit as u64).max(used);
    (c, c)
}

/// MemTotal of /proc/meminfo in bytes (Redis's total_system_memory; 0 if unreadable).
fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines().find_map(|l| {
                l.strip_prefix("MemTotal:")
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
        })
        .map_or(0, |kb| kb.saturating_mul(1024))
}

/// INFO's text of `sections` (lower-case names, in INFO's order), as `INFO <sections...>`
/// answers it: for readers outside a client connection (the node's /metrics).
pub fn text(srv: &Server, sections: &[&str]) -> String {
    let mut s = String::new();
    for sec in sections {
        if !s.is_empty() {
            s.push_str("\r\n");
        }
        section(srv, sec, &mut s, &mut |db| {
            super::server_cmds::db_keys_locking(srv, db)
        });
    }
    s
}

/// Appends INFO's section `sec`. `db_keys` counts a database's keys and keys with a TTL:
/// through the client's held locks inside EXEC, by locking each stripe otherwise.
fn section(
    srv: &Server,
    sec: &str,
    s: &mut String,
    db_keys: &mut dyn FnMut(usize) -> (usize, usize),
) {
    // The sections the layers above keep, handed down with the table.
    let hooks = table().hooks;
    let st = &srv.stats;
    let ld = |a: &crate::server::stats::Counter| a.load(Ordering::Relaxed);
    match sec {
        "server" => {
            let up = srv.started.elapsed().as_secs();
            let c = srv.config.read();
            let _ = write!(
                s,
                "# Server\r\nredis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:{}\r\nos:{} {}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nlru_clock:{}\r\nexecutable:{}\r\nconfig_file:{}\r\nio_threads_active:0\r\ntessera_version:{}\r\n",
                crate::REDIS_VERSION,
                // As Redis: "cluster" with cluster-enabled (no sentinel mode here).
                if c.typed.cluster_enabled {
                    "cluster"
                } else {
                    "standalone"
                },
                std::env::consts::OS,
                std::env::consts::ARCH,
                std::process::id(),
                srv.run_id,
                // Redis's `server.port ? server.port : server.tls_port` (a TLS-only node).
                match srv.port() {
                    0 => c.typed.tls_port,
                    p => p,
                },
                crate::server::now_ms() * 1000,
                up,
                up / 86400,
                c.typed.hz,
                c.typed.hz,
                srv.access_clock(crate::server::now_ms()),
                std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
                c.file.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
                env!("CARGO_PKG_VERSION"),
            );
            // Only while a shutdown waits for replicas (Redis 7.0).
            if let Some(ms) = srv.repl.shutdown.remaining_ms() {
                let _ = write!(s, "shutdown_in_milliseconds:{ms}\r\n");
            }
        }
        "clients" => {
            let (recent_in, recent_out) = srv.clients.recent_max_buffers();
            let _ = write!(
                s,
                "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nclient_recent_max_input_buffer:{}\r\nclient_recent_max_output_buffer:{}\r\nblocked_clients:{}\r\ntracking_clients:{}\r\nclients_in_timeout_table:{}\r\n",
                // Replica links are not counted (Redis: clients minus slaves).
                srv.clients
                    .len()
                    .saturating_sub(srv.repl.shared.lock().replicas.len()),
                srv.config.read().typed.maxclients,
                recent_in,
                recent_out,
                srv.blocking.blocked_clients(),
                crate::tracking::clients(srv),
                srv.blocking.blocked_clients(),
            );
        }
        "memory" => {
            let used = crate::alloc::used_memory();
            let peak = srv.memory_peak.fetch_max(used, Ordering::Relaxed).max(used);
            let rss = crate::alloc::rss_bytes();
            let (max, policy) = {
                let c = &srv.config.read().typed;
                (c.maxmemory, c.maxmemory_policy.name())
            };
            let (repl_backlog, repl_total, repl_slaves) = srv.repl.buffer_memory();
            let startup = srv.stats.startup_memory.0;
            let (cached, scripts_eval) = srv.scripts.cache_stats();
            let vm_eval = srv.scripts.eval_vm_memory() as u64;
            let (libs, funcs) = srv.scripts.functions.counts();
            let vm_funcs = srv.scripts.functions.vm_memory() as u64;
            let funcs_mem = srv.scripts.functions.memory() as u64;
            let scripts_mem = scripts_eval as u64 + funcs_mem;
            // Per-client buffers are not accounted (CLIENT LIST's tot-mem is 0 too), the
            // cluster bus lives in a layer above, and the AOF buffer is always flushed
            // before the reply (INFO persistence's aof_buffer_length is 0).
            let (clients_normal, cluster_links, aof_buffer) = (0u64, 0u64, 0u64);
            // Redis's freeMemoryGetNotCountedMemory: what replicas hold past the backlog.
            let not_counted = crate::server::evict::not_counted_memory(srv) + aof_buffer;
            let overhead =
                (startup + repl_total + clients_normal + cluster_links + aof_buffer + scripts_mem)
                    .min(used);
            let dataset = used - overhead;
            let net = if used > startup { used - startup } else { 1 };
            let (active, resident) = allocator_pages(used);
            let pct = |a: u64, b: u64| {
                if b > 0 {
                    a as f64 * 100.0 / b as f64
                } else {
                    0.0
                }
            };
            let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
            let diff = |a: u64, b: u64| a as i64 - b as i64;
            let total_sys = total_system_memory();
            let _ = write!(
                s,
                "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_peak_perc:{:.2}%\r\nused_memory_overhead:{overhead}\r\nused_memory_startup:{startup}\r\nused_memory_dataset:{dataset}\r\nused_memory_dataset_perc:{:.2}%\r\nallocator_allocated:{used}\r\nallocator_active:{active}\r\nallocator_resident:{resident}\r\ntotal_system_memory:{total_sys}\r\ntotal_system_memory_human:{}\r\n",
                human(used),
                human(rss),
                human(peak),
                pct(used, peak),
                pct(dataset, net),
                human(total_sys),
            );
            let _ = write!(
                s,
                "used_memory_lua:{vm_eval}\r\nused_memory_vm_eval:{vm_eval}\r\nused_memory_lua_human:{}\r\nused_memory_scripts_eval:{scripts_eval}\r\nnumber_of_cached_scripts:{cached}\r\nnumber_of_functions:{funcs}\r\nnumber_of_libraries:{libs}\r\nused_memory_vm_functions:{vm_funcs}\r\nused_memory_vm_total:{}\r\nused_memory_vm_total_human:{}\r\nused_memory_functions:{funcs_mem}\r\nused_memory_scripts:{scripts_mem}\r\nused_memory_scripts_human:{}\r\n",
                human(vm_eval),
                vm_eval + vm_funcs,
                human(vm_eval + vm_funcs),
                human(scripts_mem),
            );
            let _ = write!(
                s,
                "maxmemory:{max}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{policy}\r\nallocator_frag_ratio:{:.2}\r\nallocator_frag_bytes:{}\r\nallocator_rss_ratio:{:.2}\r\nallocator_rss_bytes:{}\r\nrss_overhead_ratio:{:.2}\r\nrss_overhead_bytes:{}\r\nmem_fragmentation_ratio:{:.2}\r\nmem_fragmentation_bytes:{}\r\nmem_not_counted_for_evict:{not_counted}\r\nmem_replication_backlog:{repl_backlog}\r\nmem_total_replication_buffers:{repl_total}\r\nmem_clients_slaves:{repl_slaves}\r\nmem_clients_normal:{clients_normal}\r\nmem_cluster_links:{cluster_links}\r\nmem_aof_buffer:{aof_buffer}\r\nmem_allocator:{}\r\n",
                human(max),
                ratio(active, used),
                diff(active, used),
                ratio(resident, active),
                diff(resident, active),
                ratio(rss, resident),
                diff(rss, resident),
                ratio(rss, used),
                diff(rss, used),
                crate::alloc::allocator_name(),
            );
            // No active defragmentation exists in tessera-node (mimalloc, no defrag pass).
            let _ = write!(
                s,
                "active_defrag_running:0\r\nlazyfree_pending_objects:{}\r\nlazyfreed_objects:{}\r\n",
                srv.stats.lazyfree.pending(),
                srv.stats.lazyfree.freed(),
            );
        }
        "persistence" => {
            if let Some(f) = hooks.info_persistence {
                s.push_str(&f(srv));
            }
        }
        "stats" => {
            let (tk, ti, tp) = crate::tracking::totals(srv);
            // Ops and kbps are not sampled (instantaneous_ops_per_sec is 0 as well); the
            // replica side's incoming stream is not counted apart from other input.
            let _ = write!(
                s,
                "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:0\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\ntotal_net_repl_input_bytes:0\r\ntotal_net_repl_output_bytes:{}\r\ninstantaneous_input_kbps:0.00\r\ninstantaneous_output_kbps:0.00\r\ninstantaneous_input_repl_kbps:0.00\r\ninstantaneous_output_repl_kbps:0.00\r\nrejected_connections:{}\r\n",
                ld(&st.total_connections),
                ld(&st.total_commands),
                ld(&st.net_input_bytes),
                ld(&st.net_output_bytes),
                ld(&st.net_repl_output_bytes),
                ld(&st.rejected_connections),
            );
            if let Some(f) = hooks.info_repl_stats {
                s.push_str(&f(srv));
            }
            // The active expire cycle keeps no stale/time-cap/CPU figures; eviction keeps
            // no time over maxmemory.
            let _ = write!(
                s,
                "expired_keys:{}\r\nexpired_stale_perc:0.00\r\nexpired_time_cap_reached_count:0\r\nexpire_cycle_cpu_milliseconds:0\r\nevicted_keys:{}\r\nevicted_clients:{}\r\ntotal_eviction_exceeded_time:0\r\ncurrent_eviction_exceeded_time:0\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\n",
                ld(&st.expired_keys),
                ld(&st.evicted_keys),
                srv.clients.mem.evicted.load(Ordering::Relaxed),
                ld(&st.keyspace_hits),
                ld(&st.keyspace_misses),
                srv.pubsub.channels(None).len(),
                srv.pubsub.numpat(),
                srv.pubsub.shard_channels(None).len(),
            );
            // Forks: the background save's writer child (persist::child). No active
            // defrag: Redis's values for it.
            let _ = write!(
                s,
                "latest_fork_usec:{}\r\ntotal_forks:{}\r\nmigrate_cached_sockets:{}\r\nslave_expires_tracked_keys:{}\r\nactive_defrag_hits:0\r\nactive_defrag_misses:0\r\nactive_defrag_key_hits:0\r\nactive_defrag_key_misses:0\r\ntotal_active_defrag_time:0\r\ncurrent_active_defrag_time:0\r\n",
                srv.persist.latest_fork_usec.load(Ordering::Relaxed),
                srv.persist.total_forks.load(Ordering::Relaxed),
                srv.migrate_sockets.len(),
                srv.replica_ttls.len(),
            );
            // No io-threads and no reply-buffer resizing; RESTORE's deep sanitization
            // is not counted.
            let _ = write!(
                s,
                "tracking_total_keys:{tk}\r\ntracking_total_items:{ti}\r\ntracking_total_prefixes:{tp}\r\nunexpected_error_replies:{}\r\ntotal_error_replies:{}\r\ndump_payload_sanitizations:0\r\ntotal_reads_processed:{}\r\ntotal_writes_processed:{}\r\nio_threaded_reads_processed:0\r\nio_threaded_writes_processed:0\r\nreply_buffer_shrinks:{}\r\nreply_buffer_expands:{}\r\ntessera_prefetch_batches:{}\r\n",
                ld(&st.unexpected_error_replies),
                st.errors.total(),
                ld(&st.reads_processed),
                ld(&st.writes_processed),
                srv.clients.reply_buffer_shrinks.load(Ordering::Relaxed),
                srv.clients.reply_buffer_expands.load(Ordering::Relaxed),
                ld(&st.prefetch_batches),
            );
        }
        "replication" => {
            if let Some(f) = hooks.info_replication {
                s.push_str(&f(srv));
            }
        }
        "cpu" => {
            let (sys, user) = cpu_times(libc::RUSAGE_SELF);
            // Redis's main thread runs the commands: here, the worker thread running INFO.
            let (tsys, tuser) = cpu_times(libc::RUSAGE_THREAD);
            let _ = write!(
                s,
                "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\nused_cpu_sys_main_thread:{tsys:.6}\r\nused_cpu_user_main_thread:{tuser:.6}\r\n"
            );
        }
        "modules" => s.push_str("# Modules\r\n"),
        "errorstats" => {
            s.push_str("# Errorstats\r\n");
            st.errors.info_lines(s);
        }
        "latencystats" => {
            let p = srv
                .config
                .read()
                .typed
                .latency_tracking_info_percentiles
                .clone();
            super::latency::info_section(&p, s);
        }
        "cluster" => {
            if let Some(f) = hooks.info_cluster {
                f(srv, s);
            }
        }
        "commandstats" => {
            s.push_str("# Commandstats\r\n");
            let mut emit = |c: &CommandSpec| {
                let Some(st) = c.stats.seen() else {
                    return;
                };
                let calls = ld(&st.calls);
                if calls == 0 && ld(&st.rejected) == 0 {
                    return;
                }
                let us = ld(&st.usec);
                let _ = write!(
                    s,
                    "cmdstat_{}:calls={},usec={},usec_per_call={:.2},rejected_calls={},failed_calls={}\r\n",
                    c.full_name,
                    calls,
                    us,
                    if calls > 0 { us as f64 / calls as f64 } else { 0.0 },
                    ld(&st.rejected),
                    ld(&st.failed)
                );
            };
            for c in &table().cmds {
                emit(c);
                for sc in &c.subcommands {
                    emit(sc);
                }
            }
        }
        "keyspace" => {
            s.push_str("# Keyspace\r\n");
            for db in 0..srv.ks.databases() {
                let (n, v) = db_keys(db);
                if n > 0 {
                    let _ = write!(s, "db{db}:keys={n},expires={v},avg_ttl=0\r\n");
                }
            }
        }
        _ => {}
    }
}
