//! Prometheus metrics served by the node itself on `metrics-port` (HTTP `GET /metrics`), so a
//! pod needs no redis_exporter sidecar: a sidecar costs a container, needs the password, and
//! cannot reach a node that binds only its pod IP.
//!
//! Names and labels are redis_exporter's, so its Grafana dashboards and alert rules work
//! unchanged. The figures are read from the same INFO and CLUSTER INFO text a client gets, at
//! scrape time, so the two never disagree and the command path pays nothing for them. The
//! `tessera_*` series add what an exporter cannot see cheaply: keys per owned slot range, open
//! (migrating / importing) slots, bus messages per type and failovers.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::server::Server;

type G = Gauge<f64, AtomicU64>;
type C = Counter<f64, AtomicU64>;
type Labels = Vec<(String, String)>;

/// INFO fields shown as gauges, with redis_exporter's names.
const GAUGES: &[(&str, &str)] = &[
    ("uptime_in_seconds", "redis_uptime_in_seconds"),
    ("process_id", "redis_process_id"),
    ("connected_clients", "redis_connected_clients"),
    ("blocked_clients", "redis_blocked_clients"),
    ("tracking_clients", "redis_tracking_clients"),
    ("maxclients", "redis_config_maxclients"),
    (
        "client_recent_max_input_buffer",
        "redis_client_recent_max_input_buffer_bytes",
    ),
    (
        "client_recent_max_output_buffer",
        "redis_client_recent_max_output_buffer_bytes",
    ),
    ("used_memory", "redis_memory_used_bytes"),
    ("used_memory_rss", "redis_memory_used_rss_bytes"),
    ("used_memory_peak", "redis_memory_used_peak_bytes"),
    ("used_memory_overhead", "redis_memory_used_overhead_bytes"),
    ("used_memory_startup", "redis_memory_used_startup_bytes"),
    ("used_memory_dataset", "redis_memory_used_dataset_bytes"),
    ("used_memory_lua", "redis_memory_used_lua_bytes"),
    ("used_memory_scripts", "redis_memory_used_scripts_bytes"),
    ("maxmemory", "redis_memory_max_bytes"),
    ("total_system_memory", "redis_total_system_memory_bytes"),
    ("mem_fragmentation_ratio", "redis_mem_fragmentation_ratio"),
    ("mem_fragmentation_bytes", "redis_mem_fragmentation_bytes"),
    ("loading", "redis_loading_dump_file"),
    (
        "rdb_changes_since_last_save",
        "redis_rdb_changes_since_last_save",
    ),
    ("rdb_bgsave_in_progress", "redis_rdb_bgsave_in_progress"),
    (
        "rdb_last_save_time",
        "redis_rdb_last_save_timestamp_seconds",
    ),
    (
        "rdb_last_bgsave_time_sec",
        "redis_rdb_last_bgsave_duration_sec",
    ),
    (
        "rdb_current_bgsave_time_sec",
        "redis_rdb_current_bgsave_duration_sec",
    ),
    ("aof_enabled", "redis_aof_enabled"),
    ("aof_rewrite_in_progress", "redis_aof_rewrite_in_progress"),
    ("aof_rewrite_scheduled", "redis_aof_rewrite_scheduled"),
    (
        "instantaneous_ops_per_sec",
        "redis_instantaneous_ops_per_sec",
    ),
    ("instantaneous_input_kbps", "redis_instantaneous_input_kbps"),
    (
        "instantaneous_output_kbps",
        "redis_instantaneous_output_kbps",
    ),
    ("pubsub_channels", "redis_pubsub_channels"),
    ("pubsub_patterns", "redis_pubsub_patterns"),
    ("connected_slaves", "redis_connected_slaves"),
    ("master_repl_offset", "redis_master_repl_offset"),
    ("second_repl_offset", "redis_second_repl_offset"),
    ("repl_backlog_active", "redis_repl_backlog_is_active"),
    ("repl_backlog_size", "redis_repl_backlog_size"),
    ("repl_backlog_histlen", "redis_repl_backlog_history_bytes"),
    (
        "master_last_io_seconds_ago",
        "redis_master_last_io_seconds_ago",
    ),
    ("master_sync_in_progress", "redis_master_sync_in_progress"),
    ("cluster_enabled", "redis_cluster_enabled"),
    // Counts that redis_exporter names without `_total`, which this crate's counters always
    // get: gauges, so the names match (rate() reads them the same).
    ("total_error_replies", "redis_total_error_replies"),
    ("sync_full", "redis_replica_resyncs_full"),
    ("sync_partial_ok", "redis_replica_partial_resync_accepted"),
    ("sync_partial_err", "redis_replica_partial_resync_denied"),
];

/// INFO fields shown as counters (the encoder adds `_total`).
const COUNTERS: &[(&str, &str)] = &[
    ("total_connections_received", "redis_connections_received"),
    ("total_commands_processed", "redis_commands_processed"),
    ("rejected_connections", "redis_rejected_connections"),
    ("total_net_input_bytes", "redis_net_input_bytes"),
    ("total_net_output_bytes", "redis_net_output_bytes"),
    ("expired_keys", "redis_expired_keys"),
    ("evicted_keys", "redis_evicted_keys"),
    ("evicted_clients", "redis_evicted_clients"),
    ("keyspace_hits", "redis_keyspace_hits"),
    ("keyspace_misses", "redis_keyspace_misses"),
    ("used_cpu_sys", "redis_cpu_sys_seconds"),
    ("used_cpu_user", "redis_cpu_user_seconds"),
    ("used_cpu_sys_children", "redis_cpu_sys_children_seconds"),
    ("used_cpu_user_children", "redis_cpu_user_children_seconds"),
];

/// INFO fields holding a word: 1 when it is the good one, else 0.
const STATUS: &[(&str, &str, &str)] = &[
    (
        "rdb_last_bgsave_status",
        "redis_rdb_last_bgsave_status",
        "ok",
    ),
    (
        "aof_last_bgrewrite_status",
        "redis_aof_last_bgrewrite_status",
        "ok",
    ),
    ("aof_last_write_status", "redis_aof_last_write_status", "ok"),
    ("master_link_status", "redis_master_link_up", "up"),
];

/// CLUSTER INFO fields shown as gauges.
const CLUSTER_GAUGES: &[(&str, &str)] = &[
    ("cluster_slots_assigned", "redis_cluster_slots_assigned"),
    ("cluster_slots_ok", "redis_cluster_slots_ok"),
    ("cluster_slots_pfail", "redis_cluster_slots_pfail"),
    ("cluster_slots_fail", "redis_cluster_slots_fail"),
    ("cluster_known_nodes", "redis_cluster_known_nodes"),
    ("cluster_size", "redis_cluster_size"),
    ("cluster_current_epoch", "redis_cluster_current_epoch"),
    ("cluster_my_epoch", "redis_cluster_my_epoch"),
];

/// One scrape's registry: every series is made fresh from the text read now.
struct Scrape {
    reg: Registry,
    families: BTreeMap<&'static str, Family<Labels, G>>,
    counter_families: BTreeMap<&'static str, Family<Labels, C>>,
}

impl Scrape {
    fn new() -> Self {
        Scrape {
            reg: Registry::default(),
            families: BTreeMap::new(),
            counter_families: BTreeMap::new(),
        }
    }

    fn gauge(&mut self, name: &str, help: &str, v: f64) {
        let g = G::default();
        g.set(v);
        self.reg.register(name, help, g);
    }

    fn counter(&mut self, name: &str, help: &str, v: f64) {
        let c = C::default();
        c.inc_by(v.max(0.0));
        self.reg.register(name, help, c);
    }

    /// A labelled gauge; the family is registered on first use.
    fn gauge_with(&mut self, name: &'static str, help: &str, labels: Labels, v: f64) {
        let fam = self.families.entry(name).or_insert_with(|| {
            let f = Family::<Labels, G>::default();
            self.reg.register(name, help, f.clone());
            f
        });
        fam.get_or_create(&labels).set(v);
    }

    /// A labelled counter; the family is registered on first use.
    fn counter_with(&mut self, name: &'static str, help: &str, labels: Labels, v: f64) {
        let fam = self.counter_families.entry(name).or_insert_with(|| {
            let f = Family::<Labels, C>::default();
            self.reg.register(name, help, f.clone());
            f
        });
        fam.get_or_create(&labels).inc_by(v.max(0.0));
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `key:value` lines of INFO-style text.
fn fields(text: &str) -> BTreeMap<&str, &str> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim_end().split_once(':'))
        .collect()
}

/// `a=1,b=2` (the value of a commandstats or keyspace line).
fn pairs(v: &str) -> BTreeMap<&str, &str> {
    v.split(',').filter_map(|p| p.split_once('=')).collect()
}

fn num(v: &str) -> Option<f64> {
    v.trim().parse::<f64>().ok().filter(|f| f.is_finite())
}

/// The whole /metrics body: OpenMetrics text (with its `# EOF`) when `openmetrics`, else the
/// Prometheus text format.
pub fn render(srv: &Server, openmetrics: bool) -> String {
    let info = crate::cmd::info::text(srv, crate::cmd::info::EVERYTHING);
    let cluster = crate::cluster::metrics_view(srv);
    let mut out = String::new();
    let sc = build(&info, cluster.as_ref());
    let done = if openmetrics {
        text::encode(&mut out, &sc.reg)
    } else {
        text::encode_registry(&mut out, &sc.reg)
    };
    if done.is_err() {
        return String::new();
    }
    if openmetrics {
        out
    } else {
        prometheus_counter_names(&out)
    }
}

/// prometheus-client writes a counter family OpenMetrics' way: `# HELP x` / `# TYPE x
/// counter` over samples named `x_total`. The Prometheus text format names the family as its
/// samples (`x_total`), or Prometheus files the samples under no metadata; the crate has no
/// option for it, so the two header lines are renamed here.
fn prometheus_counter_names(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::with_capacity(text.len() + 256);
    for (i, line) in lines.iter().enumerate() {
        let counter_of = |l: &str| -> Option<String> {
            let name = l.strip_prefix("# TYPE ")?.strip_suffix(" counter")?;
            Some(name.to_string())
        };
        if let Some(name) = counter_of(line) {
            out.push_str(&format!("# TYPE {name}_total counter\n"));
            continue;
        }
        // A HELP line whose family's TYPE (the next line) is a counter.
        let next_counter = lines.get(i + 1).and_then(|l| counter_of(l));
        if let (Some(name), Some(rest)) = (next_counter, line.strip_prefix("# HELP ")) {
            if let Some(help) = rest.strip_prefix(name.as_str()) {
                out.push_str(&format!("# HELP {name}_total{help}\n"));
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The registry of one scrape, from INFO's text and the cluster's view. Pure, for tests.
fn build(info: &str, cluster: Option<&crate::cluster::MetricsView>) -> Scrape {
    let f = fields(info);
    let mut sc = Scrape::new();
    sc.gauge(
        "redis_up",
        "1 while the node answers (it is serving this scrape)",
        1.0,
    );
    let get = |k: &str| f.get(k).copied();
    let role = get("role").unwrap_or("master");
    sc.gauge_with(
        "redis_instance_info",
        "Information about the node, in labels",
        labels(&[
            ("role", role),
            ("redis_version", get("redis_version").unwrap_or_default()),
            ("redis_mode", get("redis_mode").unwrap_or_default()),
            ("run_id", get("run_id").unwrap_or_default()),
            ("tcp_port", get("tcp_port").unwrap_or_default()),
            (
                "tessera_version",
                get("tessera_version").unwrap_or_default(),
            ),
        ]),
        1.0,
    );
    if let (Some(now), Some(up)) = (
        get("server_time_usec").and_then(num),
        get("uptime_in_seconds").and_then(num),
    ) {
        sc.gauge(
            "redis_start_time_seconds",
            "When the node started (Unix time)",
            (now / 1e6 - up).floor(),
        );
    }
    for (field, name) in GAUGES {
        if let Some(v) = get(field).and_then(num) {
            sc.gauge(name, &format!("INFO {field}"), v);
        }
    }
    for (field, name) in COUNTERS {
        if let Some(v) = get(field).and_then(num) {
            sc.counter(name, &format!("INFO {field}"), v);
        }
    }
    for (field, name, good) in STATUS {
        if let Some(v) = get(field) {
            sc.gauge(
                name,
                &format!("INFO {field}: 1 when {good}"),
                f64::from(v == *good),
            );
        }
    }
    if let Some(v) = get("latest_fork_usec").and_then(num) {
        sc.gauge(
            "redis_latest_fork_seconds",
            "INFO latest_fork_usec",
            v / 1e6,
        );
    }
    if let Some(v) = get("slave_repl_offset").and_then(num) {
        sc.gauge_with(
            "redis_slave_repl_offset",
            "INFO slave_repl_offset: the replication offset this replica has",
            labels(&[
                ("master_host", get("master_host").unwrap_or_default()),
                ("master_port", get("master_port").unwrap_or_default()),
            ]),
            v,
        );
    }

    for (k, v) in &f {
        if let Some(cmd) = k.strip_prefix("cmdstat_") {
            let p = pairs(v);
            let l = labels(&[("cmd", cmd)]);
            let n = |key: &str| p.get(key).copied().and_then(num).unwrap_or(0.0);
            sc.counter_with(
                "redis_commands",
                "Calls per command (INFO commandstats)",
                l.clone(),
                n("calls"),
            );
            sc.counter_with(
                "redis_commands_duration_seconds",
                "Time spent per command (INFO commandstats usec)",
                l.clone(),
                n("usec") / 1e6,
            );
            sc.counter_with(
                "redis_commands_rejected_calls",
                "Calls refused before running (INFO commandstats)",
                l.clone(),
                n("rejected_calls"),
            );
            sc.counter_with(
                "redis_commands_failed_calls",
                "Calls that ran and failed (INFO commandstats)",
                l,
                n("failed_calls"),
            );
        } else if let Some(err) = k.strip_prefix("errorstat_") {
            if let Some(n) = pairs(v).get("count").copied().and_then(num) {
                sc.counter_with(
                    "redis_errors",
                    "Error replies by error prefix (INFO errorstats)",
                    labels(&[("err", err)]),
                    n,
                );
            }
        } else if let Some(cmd) = k.strip_prefix("latency_percentiles_usec_") {
            for (p, v) in pairs(v) {
                let (Some(pct), Some(v)) = (p.strip_prefix('p').and_then(num), num(v)) else {
                    continue;
                };
                // p99.9 -> 0.999 (not 0.9990000000000001).
                let q = format!("{}", (pct * 1e4).round() / 1e6);
                sc.gauge_with(
                    "redis_latency_percentiles_usec",
                    "Command latency percentiles in microseconds (INFO latencystats)",
                    labels(&[("cmd", cmd), ("quantile", &q)]),
                    v,
                );
            }
        } else if k.len() > 2 && k.starts_with("db") && k[2..].bytes().all(|b| b.is_ascii_digit()) {
            let p = pairs(v);
            let l = labels(&[("db", k)]);
            if let Some(n) = p.get("keys").copied().and_then(num) {
                sc.gauge_with("redis_db_keys", "Keys per database", l.clone(), n);
            }
            if let Some(n) = p.get("expires").copied().and_then(num) {
                sc.gauge_with(
                    "redis_db_keys_expiring",
                    "Keys with a TTL per database",
                    l.clone(),
                    n,
                );
            }
            if let Some(n) = p.get("avg_ttl").copied().and_then(num) {
                sc.gauge_with(
                    "redis_db_avg_ttl_seconds",
                    "Average TTL per database",
                    l,
                    n / 1000.0,
                );
            }
        } else if k.len() > 5
            && k.starts_with("slave")
            && k[5..].bytes().all(|b| b.is_ascii_digit())
        {
            // A master's replicas: slave0:ip=..,port=..,state=online,offset=..,lag=..
            let p = pairs(v);
            let l = labels(&[
                ("slave_ip", p.get("ip").copied().unwrap_or_default()),
                ("slave_port", p.get("port").copied().unwrap_or_default()),
                ("slave_state", p.get("state").copied().unwrap_or_default()),
            ]);
            if let Some(n) = p.get("offset").copied().and_then(num) {
                sc.gauge_with(
                    "redis_connected_slave_offset_bytes",
                    "Replication offset each replica acknowledged",
                    l.clone(),
                    n,
                );
            }
            if let Some(n) = p.get("lag").copied().and_then(num) {
                sc.gauge_with(
                    "redis_connected_slave_lag_seconds",
                    "Seconds since each replica last acknowledged",
                    l,
                    n,
                );
            }
        }
    }

    if let Some(c) = cluster {
        cluster_series(&mut sc, c);
    }
    sc
}

fn cluster_series(sc: &mut Scrape, c: &crate::cluster::MetricsView) {
    let f = fields(&c.info);
    if let Some(v) = f.get("cluster_state") {
        sc.gauge(
            "redis_cluster_state",
            "CLUSTER INFO cluster_state: 1 when ok",
            f64::from(*v == "ok"),
        );
    }
    for (field, name) in CLUSTER_GAUGES {
        if let Some(v) = f.get(field).copied().and_then(num) {
            sc.gauge(name, &format!("CLUSTER INFO {field}"), v);
        }
    }
    for (dir, name) in [
        ("sent", "redis_cluster_messages_sent"),
        ("received", "redis_cluster_messages_received"),
    ] {
        if let Some(v) = f
            .get(format!("cluster_stats_messages_{dir}").as_str())
            .copied()
            .and_then(num)
        {
            sc.counter(
                name,
                &format!("CLUSTER INFO cluster_stats_messages_{dir}"),
                v,
            );
        }
    }
    for (k, v) in &f {
        let Some(rest) = k.strip_prefix("cluster_stats_messages_") else {
            continue;
        };
        let Some((kind, dir)) = rest.rsplit_once('_') else {
            continue;
        };
        if !matches!(dir, "sent" | "received") {
            continue;
        }
        if let Some(n) = num(v) {
            sc.counter_with(
                "tessera_cluster_bus_messages",
                "Cluster bus messages by type and direction",
                labels(&[("type", kind), ("direction", dir)]),
                n,
            );
        }
    }
    for (a, b, keys) in &c.ranges {
        let range = if a == b {
            a.to_string()
        } else {
            format!("{a}-{b}")
        };
        sc.gauge_with(
            "tessera_cluster_slot_range_keys",
            "Keys in each slot range this node serves",
            labels(&[("range", &range)]),
            *keys as f64,
        );
    }
    sc.gauge(
        "tessera_cluster_slots_migrating",
        "Slots this node is migrating to another (MIGRATING)",
        c.migrating as f64,
    );
    sc.gauge(
        "tessera_cluster_slots_importing",
        "Slots this node is importing from another (IMPORTING)",
        c.importing as f64,
    );
    sc.counter(
        "tessera_cluster_failovers",
        "Times this node took over its master's slots (election, manual failover, takeover)",
        c.failovers as f64,
    );
}

async fn metrics(State(srv): State<Arc<Server>>, headers: HeaderMap) -> impl IntoResponse {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    // The INFO text locks each stripe in turn: off the async workers.
    let body = tokio::task::spawn_blocking(move || render(&srv, openmetrics))
        .await
        .unwrap_or_default();
    let ctype = if openmetrics {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; version=0.0.4; charset=utf-8"
    };
    if body.is_empty() {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain")],
            String::from("metrics could not be encoded\n"),
        );
    }
    (StatusCode::OK, [(header::CONTENT_TYPE, ctype)], body)
}

/// Binds `metrics-port` on every `bind` address; empty when the port is 0 (off).
pub fn bind(srv: &Server) -> Result<Vec<std::net::TcpListener>, crate::server::ServerError> {
    let (bind, port) = {
        let c = &srv.config.read().typed;
        (c.bind.clone(), c.metrics_port)
    };
    if port == 0 {
        return Ok(Vec::new());
    }
    crate::server::listen::bind_all(&bind, port).map_err(|e| match e {
        crate::server::listen::ListenError::Bind { addr, source } => {
            crate::server::ServerError::Bind { addr, source }
        }
        other => crate::server::ServerError::Bind {
            addr: format!("{bind}:{port}"),
            source: std::io::Error::other(other.to_string()),
        },
    })
}

/// Connections served at once on each metrics listener; a scraper needs one. More wait in
/// the kernel's backlog, so a flood of them costs the node no file descriptors its clients
/// need.
const MAX_CONNECTIONS: usize = 8;

/// How long one connection may stay open: a scrape takes milliseconds, and a peer that
/// connects and sends nothing must not hold a slot.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(30);

/// A metrics listener that serves at most [`MAX_CONNECTIONS`] connections, each for at most
/// [`CONNECTION_LIFETIME`] (axum's own TcpListener has neither bound: the port is open to
/// the pod network, whose peers are untrusted).
struct Bounded {
    inner: tokio::net::TcpListener,
    slots: Arc<tokio::sync::Semaphore>,
}

impl axum::serve::Listener for Bounded {
    type Io = BoundedStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok(slot) = self.slots.clone().acquire_owned().await else {
                // The semaphore is never closed; wait rather than spin if it ever is.
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    let stream = BoundedStream {
                        stream,
                        deadline: Box::pin(tokio::time::sleep(CONNECTION_LIFETIME)),
                        _slot: slot,
                    };
                    return (stream, addr);
                }
                // EMFILE and the like: back off, as axum's own accept loop does.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection holding its slot until it is dropped, and failing once its time is up.
struct BoundedStream {
    stream: tokio::net::TcpStream,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl BoundedStream {
    fn expired(&mut self, cx: &mut std::task::Context<'_>) -> bool {
        self.deadline.as_mut().poll(cx).is_ready()
    }
}

fn timed_out() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, "metrics connection lifetime")
}

impl tokio::io::AsyncRead for BoundedStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.expired(cx) {
            return std::task::Poll::Ready(Err(timed_out()));
        }
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for BoundedStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.expired(cx) {
            return std::task::Poll::Ready(Err(timed_out()));
        }
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Serves /metrics on `listeners` until the process ends.
pub fn spawn(srv: Arc<Server>, listeners: Vec<std::net::TcpListener>) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .with_state(srv);
    for l in listeners {
        l.set_nonblocking(true)?;
        let addr = l.local_addr()?;
        let listener = Bounded {
            inner: tokio::net::TcpListener::from_std(l)?,
            slots: Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS)),
        };
        let app = app.clone();
        tracing::info!(%addr, "metrics listening");
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(%addr, error = %e, "metrics listener stopped");
            }
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(sc: &Scrape) -> String {
        let mut out = String::new();
        text::encode_registry(&mut out, &sc.reg).unwrap();
        out
    }

    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn info_text_becomes_exporter_series() {
        let info = "# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\ntcp_port:7000\r\nuptime_in_seconds:10\r\nserver_time_usec:1700000010000000\r\n\
            # Clients\r\nconnected_clients:3\r\n\
            # Memory\r\nused_memory:1024\r\nmaxmemory:0\r\n\
            # Persistence\r\nrdb_last_bgsave_status:err\r\naof_last_write_status:ok\r\n\
            # Stats\r\ntotal_commands_processed:42\r\nkeyspace_hits:5\r\nlatest_fork_usec:2000\r\n\
            # Replication\r\nrole:slave\r\nmaster_host:10.0.0.1\r\nmaster_port:6379\r\nmaster_link_status:up\r\nslave_repl_offset:99\r\n\
            # Commandstats\r\ncmdstat_get:calls=7,usec=1500000,usec_per_call=1.00,rejected_calls=1,failed_calls=2\r\ncmdstat_config|get:calls=1,usec=3,usec_per_call=3.00,rejected_calls=0,failed_calls=0\r\n\
            # Errorstats\r\nerrorstat_WRONGTYPE:count=4\r\n\
            # Latencystats\r\nlatency_percentiles_usec_get:p50=1.003,p99=2.007,p99.9=3.007\r\n\
            # Keyspace\r\ndb0:keys=12,expires=3,avg_ttl=5000\r\n";
        let text = body(&build(info, None));
        for (series, want) in [
            ("redis_up", 1.0),
            ("redis_connected_clients", 3.0),
            ("redis_memory_used_bytes", 1024.0),
            ("redis_memory_max_bytes", 0.0),
            ("redis_rdb_last_bgsave_status", 0.0),
            ("redis_aof_last_write_status", 1.0),
            ("redis_commands_processed_total", 42.0),
            ("redis_keyspace_hits_total", 5.0),
            ("redis_latest_fork_seconds", 0.002),
            ("redis_master_link_up", 1.0),
            ("redis_start_time_seconds", 1_700_000_000.0),
            (
                r#"redis_slave_repl_offset{master_host="10.0.0.1",master_port="6379"}"#,
                99.0,
            ),
            (r#"redis_commands_total{cmd="get"}"#, 7.0),
            (r#"redis_commands_total{cmd="config|get"}"#, 1.0),
            (r#"redis_commands_duration_seconds_total{cmd="get"}"#, 1.5),
            (r#"redis_commands_rejected_calls_total{cmd="get"}"#, 1.0),
            (r#"redis_commands_failed_calls_total{cmd="get"}"#, 2.0),
            (r#"redis_errors_total{err="WRONGTYPE"}"#, 4.0),
            (
                r#"redis_latency_percentiles_usec{cmd="get",quantile="0.99"}"#,
                2.007,
            ),
            (
                r#"redis_latency_percentiles_usec{cmd="get",quantile="0.999"}"#,
                3.007,
            ),
            (r#"redis_db_keys{db="db0"}"#, 12.0),
            (r#"redis_db_keys_expiring{db="db0"}"#, 3.0),
            (r#"redis_db_avg_ttl_seconds{db="db0"}"#, 5.0),
        ] {
            assert_eq!(value(&text, series), Some(want), "{series} in\n{text}");
        }
        assert!(text.contains(r#"role="slave""#), "{text}");
        assert!(
            !text.contains("redis_cluster_state"),
            "no cluster series without cluster mode"
        );
    }

    #[test]
    fn cluster_view_becomes_series() {
        let view = crate::cluster::MetricsView {
            info: "cluster_state:fail\r\ncluster_slots_assigned:16384\r\ncluster_known_nodes:6\r\ncluster_stats_messages_ping_sent:10\r\ncluster_stats_messages_auth-req_received:2\r\ncluster_stats_messages_sent:10\r\ncluster_stats_messages_received:2\r\n".into(),
            ranges: vec![(0, 5460, 100), (9000, 9000, 1)],
            migrating: 2,
            importing: 0,
            failovers: 1,
        };
        let text = body(&build("", Some(&view)));
        for (series, want) in [
            ("redis_cluster_state", 0.0),
            ("redis_cluster_slots_assigned", 16384.0),
            ("redis_cluster_known_nodes", 6.0),
            ("redis_cluster_messages_sent_total", 10.0),
            (
                r#"tessera_cluster_bus_messages_total{type="ping",direction="sent"}"#,
                10.0,
            ),
            (
                r#"tessera_cluster_bus_messages_total{type="auth-req",direction="received"}"#,
                2.0,
            ),
            (r#"tessera_cluster_slot_range_keys{range="0-5460"}"#, 100.0),
            (r#"tessera_cluster_slot_range_keys{range="9000"}"#, 1.0),
            ("tessera_cluster_slots_migrating", 2.0),
            ("tessera_cluster_failovers_total", 1.0),
        ] {
            assert_eq!(value(&text, series), Some(want), "{series} in\n{text}");
        }
    }

    #[test]
    fn counter_families_are_named_as_their_samples_in_prometheus_text() {
        let info = "total_commands_processed:3\r\ncmdstat_get:calls=1,usec=1\r\nused_memory:9\r\n";
        let text = prometheus_counter_names(&body(&build(info, None)));
        assert!(
            text.contains("# TYPE redis_commands_processed_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP redis_commands_processed_total INFO total_commands_processed"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE redis_commands_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE redis_memory_used_bytes gauge\n"),
            "{text}"
        );
        assert!(!text.contains("# TYPE redis_commands counter"), "{text}");
    }

    #[test]
    fn hostile_numbers_are_dropped_not_panicked_on() {
        let info = "used_memory:NaN\r\nconnected_clients:inf\r\ncmdstat_x:calls=-5,usec=zz\r\ndbx:keys=1\r\nlatency_percentiles_usec_get:pxx=1,p50=\r\n";
        let text = body(&build(info, None));
        assert!(!text.contains("redis_memory_used_bytes "), "{text}");
        assert!(!text.contains("redis_connected_clients "), "{text}");
        // A negative count cannot make a counter go down.
        assert_eq!(value(&text, r#"redis_commands_total{cmd="x"}"#), Some(0.0));
        assert!(!text.contains("redis_latency_percentiles_usec{"), "{text}");
    }
}
