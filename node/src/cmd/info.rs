//! INFO with Redis's sections and field names.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use super::{table, CmdResult, CommandSpec, Ctx};

pub fn commands() -> Vec<CommandSpec> {
    vec![CommandSpec::new("info", -1, "loading stale global", (0, 0, 0), info).group("server")]
}

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
    let order = [
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
    for sec in order {
        if !wanted.iter().any(|w| w == sec) {
            continue;
        }
        if !s.is_empty() {
            s.push_str("\r\n");
        }
        section(ctx, sec, &mut s);
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

fn cpu_times() -> (f64, f64) {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_stime), t(ru.ru_utime))
}

fn section(ctx: &mut Ctx<'_>, sec: &str, s: &mut String) {
    let srv = ctx.srv;
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
                "# Server\r\nredis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nlru_clock:{}\r\nexecutable:{}\r\nconfig_file:{}\r\nio_threads_active:0\r\ntessera_version:{}\r\n",
                crate::REDIS_VERSION,
                std::env::consts::OS,
                std::env::consts::ARCH,
                std::process::id(),
                srv.run_id,
                srv.port(),
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
            let _ = write!(
                s,
                "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nclient_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\nblocked_clients:{}\r\ntracking_clients:{}\r\nclients_in_timeout_table:{}\r\n",
                // Replica links are not counted (Redis: clients minus slaves).
                srv.clients
                    .len()
                    .saturating_sub(srv.repl.shared.lock().replicas.len()),
                srv.config.read().typed.maxclients,
                srv.blocking.blocked_clients(),
                crate::tracking::clients(ctx.srv),
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
            let _ = write!(
                s,
                "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_dataset:{used}\r\nmaxmemory:{max}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{policy}\r\nmem_fragmentation_ratio:{:.2}\r\nmem_replication_backlog:{repl_backlog}\r\nmem_total_replication_buffers:{repl_total}\r\nmem_clients_slaves:{repl_slaves}\r\nmem_allocator:{}\r\nlazyfree_pending_objects:{}\r\nlazyfreed_objects:{}\r\n",
                human(used),
                human(rss),
                human(peak),
                human(max),
                if used > 0 { rss as f64 / used as f64 } else { 0.0 },
                crate::alloc::allocator_name(),
                srv.stats.lazyfree.pending(),
                srv.stats.lazyfree.freed(),
            );
            // Redis 7.0's function lines (the Lua heap summed over the threads' states).
            let (libs, funcs) = srv.scripts.functions.counts();
            let _ = write!(
                s,
                "number_of_functions:{funcs}\r\nnumber_of_libraries:{libs}\r\nused_memory_vm_functions:{}\r\nused_memory_functions:{}\r\n",
                srv.scripts.functions.vm_memory(),
                srv.scripts.functions.memory()
            );
        }
        "persistence" => {
            if let Some(f) = hooks.info_persistence {
                s.push_str(&f(srv));
            }
        }
        "stats" => {
            let (tk, ti, tp) = crate::tracking::totals(ctx.srv);
            let _ = write!(
                s,
                "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:0\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:{}\r\nevicted_clients:0\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\ntotal_error_replies:{}\r\nunexpected_error_replies:{}\r\ntessera_prefetch_batches:{}\r\n",
                ld(&st.total_connections),
                ld(&st.total_commands),
                ld(&st.net_input_bytes),
                ld(&st.net_output_bytes),
                ld(&st.rejected_connections),
                ld(&st.expired_keys),
                ld(&st.evicted_keys),
                ld(&st.keyspace_hits),
                ld(&st.keyspace_misses),
                srv.pubsub.channels(None).len(),
                srv.pubsub.numpat(),
                tk,
                ti,
                tp,
                st.errors.total(),
                ld(&st.unexpected_error_replies),
                ld(&st.prefetch_batches),
            );
            if let Some(f) = hooks.info_repl_stats {
                s.push_str(&f(srv));
            }
        }
        "replication" => {
            if let Some(f) = hooks.info_replication {
                s.push_str(&f(srv));
            }
        }
        "cpu" => {
            let (sys, user) = cpu_times();
            let _ = write!(
                s,
                "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\n"
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
                let calls = ld(&c.stats.calls);
                if calls == 0 && ld(&c.stats.rejected) == 0 {
                    return;
                }
                let us = ld(&c.stats.usec);
                let _ = write!(
                    s,
                    "cmdstat_{}:calls={},usec={},usec_per_call={:.2},rejected_calls={},failed_calls={}\r\n",
                    c.full_name,
                    calls,
                    us,
                    if calls > 0 { us as f64 / calls as f64 } else { 0.0 },
                    ld(&c.stats.rejected),
                    ld(&c.stats.failed)
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
                let (n, v) = super::server_cmds::db_keys(ctx, db);
                if n > 0 {
                    let _ = write!(s, "db{db}:keys={n},expires={v},avg_ttl=0\r\n");
                }
            }
        }
        _ => {}
    }
}
