//! The directive table: names, value kinds, ranges and defaults (Redis 7.0 names).

/// How a directive's arguments are validated and normalised.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Bool,
    Int {
        min: i64,
        max: i64,
    },
    /// Memory amount with units (1k, 1kb, 1gb...), stored in bytes.
    Mem {
        min: u64,
        max: u64,
    },
    /// An octal number (unixsocketperm).
    Octal {
        max: i64,
    },
    Enum(&'static [&'static str]),
    Str,
    /// Multi-argument directives with their own parser (save, bind, client-output-buffer-limit).
    Special,
}

#[derive(Debug)]
pub struct Directive {
    pub name: &'static str,
    pub kind: Kind,
    pub default: &'static str,
    /// Can't be changed with CONFIG SET.
    pub immutable: bool,
}

const fn d(name: &'static str, kind: Kind, default: &'static str) -> Directive {
    Directive {
        name,
        kind,
        default,
        immutable: false,
    }
}

const fn im(name: &'static str, kind: Kind, default: &'static str) -> Directive {
    Directive {
        name,
        kind,
        default,
        immutable: true,
    }
}

const I32: Kind = Kind::Int {
    min: i32::MIN as i64,
    max: i32::MAX as i64,
};
const U32: Kind = Kind::Int {
    min: 0,
    max: i32::MAX as i64,
};
const I32_POS: Kind = Kind::Int {
    min: 1,
    max: i32::MAX as i64,
};
const U32_FULL: Kind = Kind::Int {
    min: 0,
    max: u32::MAX as i64,
};
const U64: Kind = Kind::Int {
    min: 0,
    max: i64::MAX,
};
const MEM: Kind = Kind::Mem {
    min: 0,
    max: u64::MAX,
};
/// Redis's LONG_MAX / LLONG_MAX bound for size and long long settings.
const MEM_I64: Kind = Kind::Mem {
    min: 0,
    max: i64::MAX as u64,
};

pub const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

pub const LOGLEVELS: &[&str] = &["debug", "verbose", "notice", "warning"];

/// Every directive tessera-node accepts. Later subsystems (cluster, persistence,
/// replication) read theirs from here too, so they're accepted from day one.
pub static DIRECTIVES: &[Directive] = &[
    im("port", Kind::Int { min: 0, max: 65535 }, "6379"),
    im("bind", Kind::Special, "* -::*"),
    d("protected-mode", Kind::Bool, "yes"),
    d("requirepass", Kind::Str, ""),
    d(
        "maxclients",
        Kind::Int {
            min: 1,
            max: u32::MAX as i64,
        },
        "10000",
    ),
    d("timeout", U32, "0"),
    d("tcp-keepalive", U32, "300"),
    im("tcp-backlog", U32, "511"),
    im(
        "databases",
        Kind::Int {
            min: 1,
            max: i32::MAX as i64,
        },
        "16",
    ),
    d("dir", Kind::Str, "./"),
    im("logfile", Kind::Str, ""),
    d("loglevel", Kind::Enum(LOGLEVELS), "notice"),
    d("maxmemory", MEM, "0"),
    d("maxmemory-policy", Kind::Enum(POLICIES), "noeviction"),
    d("maxmemory-samples", I32_POS, "5"),
    d(
        "maxmemory-eviction-tenacity",
        Kind::Int { min: 0, max: 100 },
        "10",
    ),
    d(
        "proto-max-bulk-len",
        Kind::Mem {
            min: 1 << 20,
            max: i64::MAX as u64,
        },
        "536870912",
    ),
    d(
        "client-query-buffer-limit",
        Kind::Mem {
            min: 1 << 20,
            max: i64::MAX as u64,
        },
        "1073741824",
    ),
    d("client-output-buffer-limit", Kind::Special, ""),
    // Redis accepts any non-negative hz and clamps it to 1..500 where it is used.
    d("hz", U32, "10"),
    d("dynamic-hz", Kind::Bool, "yes"),
    d(
        "slowlog-log-slower-than",
        Kind::Int {
            min: -1,
            max: i64::MAX,
        },
        "10000",
    ),
    d("slowlog-max-len", U64, "128"),
    d("latency-monitor-threshold", U64, "0"),
    d("lfu-log-factor", U32, "10"),
    d("lfu-decay-time", U32, "1"),
    d("active-expire-effort", Kind::Int { min: 1, max: 10 }, "1"),
    d("lazyfree-lazy-eviction", Kind::Bool, "no"),
    d("lazyfree-lazy-expire", Kind::Bool, "no"),
    d("lazyfree-lazy-server-del", Kind::Bool, "no"),
    d("lazyfree-lazy-user-del", Kind::Bool, "no"),
    d("lazyfree-lazy-user-flush", Kind::Bool, "no"),
    d("notify-keyspace-events", Kind::Str, ""),
    im("daemonize", Kind::Bool, "no"),
    im(
        "supervised",
        Kind::Enum(&["no", "upstart", "systemd", "auto"]),
        "no",
    ),
    im("pidfile", Kind::Str, ""),
    d("save", Kind::Special, "3600 1 300 100 60 10000"),
    d("stop-writes-on-bgsave-error", Kind::Bool, "yes"),
    d("rdbcompression", Kind::Bool, "yes"),
    im("rdbchecksum", Kind::Bool, "yes"),
    d("dbfilename", Kind::Str, "dump.rdb"),
    d("rdb-del-sync-files", Kind::Bool, "no"),
    d("appendonly", Kind::Bool, "no"),
    im("appendfilename", Kind::Str, "appendonly.aof"),
    im("appenddirname", Kind::Str, "appendonlydir"),
    d(
        "appendfsync",
        Kind::Enum(&["everysec", "always", "no"]),
        "everysec",
    ),
    d("no-appendfsync-on-rewrite", Kind::Bool, "no"),
    d("auto-aof-rewrite-percentage", U32, "100"),
    d("auto-aof-rewrite-min-size", MEM_I64, "67108864"),
    d("aof-load-truncated", Kind::Bool, "yes"),
    d("aof-use-rdb-preamble", Kind::Bool, "yes"),
    d("aof-timestamp-enabled", Kind::Bool, "no"),
    im("replicaof", Kind::Special, ""),
    d("masterauth", Kind::Str, ""),
    d("masteruser", Kind::Str, ""),
    d("replica-serve-stale-data", Kind::Bool, "yes"),
    d("replica-read-only", Kind::Bool, "yes"),
    d("repl-diskless-sync", Kind::Bool, "yes"),
    d("repl-diskless-sync-delay", U32, "5"),
    d(
        "repl-diskless-load",
        Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
        "disabled",
    ),
    d(
        "repl-ping-replica-period",
        Kind::Int {
            min: 1,
            max: i32::MAX as i64,
        },
        "10",
    ),
    d(
        "repl-timeout",
        Kind::Int {
            min: 1,
            max: i32::MAX as i64,
        },
        "60",
    ),
    d(
        "repl-backlog-size",
        Kind::Mem {
            min: 1,
            max: i64::MAX as u64,
        },
        "1048576",
    ),
    d("repl-backlog-ttl", U64, "3600"),
    d("replica-priority", U32, "100"),
    d("min-replicas-to-write", U32, "0"),
    d("min-replicas-max-lag", U32, "10"),
    d("replica-announce-ip", Kind::Str, ""),
    d(
        "replica-announce-port",
        Kind::Int { min: 0, max: 65535 },
        "0",
    ),
    d("replica-announced", Kind::Bool, "yes"),
    im("cluster-enabled", Kind::Bool, "no"),
    im("cluster-config-file", Kind::Str, "nodes.conf"),
    d("cluster-node-timeout", U64, "15000"),
    im("cluster-port", Kind::Int { min: 0, max: 65535 }, "0"),
    d("cluster-replica-validity-factor", U32, "10"),
    d("cluster-migration-barrier", U32, "1"),
    d("cluster-allow-replica-migration", Kind::Bool, "yes"),
    d("cluster-require-full-coverage", Kind::Bool, "yes"),
    d("cluster-replica-no-failover", Kind::Bool, "no"),
    d("cluster-allow-reads-when-down", Kind::Bool, "no"),
    d("cluster-allow-pubsubshard-when-down", Kind::Bool, "yes"),
    d("cluster-announce-ip", Kind::Str, ""),
    d(
        "cluster-announce-port",
        Kind::Int { min: 0, max: 65535 },
        "0",
    ),
    d(
        "cluster-announce-bus-port",
        Kind::Int { min: 0, max: 65535 },
        "0",
    ),
    d("cluster-announce-hostname", Kind::Str, ""),
    d(
        "cluster-preferred-endpoint-type",
        Kind::Enum(&["ip", "hostname", "unknown-endpoint"]),
        "ip",
    ),
    d("cluster-link-sendbuf-limit", MEM, "0"),
    d("hash-max-listpack-entries", U64, "512"),
    d("hash-max-listpack-value", MEM_I64, "64"),
    d("hash-max-ziplist-entries", U64, "512"),
    d("hash-max-ziplist-value", MEM_I64, "64"),
    d("list-max-listpack-size", I32, "-2"),
    d("list-max-ziplist-size", I32, "-2"),
    d("list-compress-depth", U32, "0"),
    d("set-max-intset-entries", U64, "512"),
    d("zset-max-listpack-entries", U64, "128"),
    d("zset-max-listpack-value", MEM_I64, "64"),
    d("zset-max-ziplist-entries", U64, "128"),
    d("zset-max-ziplist-value", MEM_I64, "64"),
    d(
        "hll-sparse-max-bytes",
        Kind::Mem {
            min: 0,
            max: i64::MAX as u64,
        },
        "3000",
    ),
    d("stream-node-max-bytes", MEM_I64, "4096"),
    d("stream-node-max-entries", U64, "100"),
    d("activerehashing", Kind::Bool, "yes"),
    d("activedefrag", Kind::Bool, "no"),
    d("lua-time-limit", U64, "5000"),
    d("busy-reply-threshold", U64, "5000"),
    im("io-threads", Kind::Int { min: 1, max: 128 }, "1"),
    // tessera-node only: I/O threads, each with its own event loop (0 = half the cores).
    im("worker-threads", Kind::Int { min: 0, max: 1024 }, "0"),
    // tessera-node only: how long an I/O thread keeps polling after a request instead of
    // sleeping, while requests come that fast (server::spin; 0 = never).
    d(
        "busy-poll-usec",
        Kind::Int {
            min: 0,
            max: 1_000_000,
        },
        "50",
    ),
    im("io-threads-do-reads", Kind::Bool, "no"),
    // Valkey 8.1's: how many pipelined requests' keys are prefetched ahead (0 = off).
    d(
        "prefetch-batch-max-size",
        Kind::Int { min: 0, max: 128 },
        "16",
    ),
    im("always-show-logo", Kind::Bool, "no"),
    im("set-proc-title", Kind::Bool, "yes"),
    d(
        "proc-title-template",
        Kind::Str,
        "{title} {listen-addr} {server-mode}",
    ),
    im(
        "enable-debug-command",
        Kind::Enum(&["no", "yes", "local"]),
        "no",
    ),
    im(
        "enable-protected-configs",
        Kind::Enum(&["no", "yes", "local"]),
        "no",
    ),
    im(
        "enable-module-command",
        Kind::Enum(&["no", "yes", "local"]),
        "no",
    ),
    d("crash-log-enabled", Kind::Bool, "yes"),
    d("crash-memcheck-enabled", Kind::Bool, "yes"),
    d(
        "oom-score-adj",
        Kind::Enum(&["no", "yes", "relative", "absolute"]),
        "no",
    ),
    d("jemalloc-bg-thread", Kind::Bool, "yes"),
    d("tracking-table-max-keys", U64, "1000000"),
    d("acllog-max-len", U64, "128"),
    d("replica-lazy-flush", Kind::Bool, "no"),
    im("unixsocket", Kind::Str, ""),
    im("unixsocketperm", Kind::Octal { max: 0o777 }, "0"),
    im("syslog-enabled", Kind::Bool, "no"),
    im("syslog-ident", Kind::Str, "redis"),
    d("locale-collate", Kind::Str, ""),
    // Accepted and shown for redis.conf compatibility. Tessera has no active defragmenter
    // (mimalloc hands freed pages back itself), no CPU pinning, no THP switch, no client
    // eviction and no ACL file; these read the same as in redis and change nothing.
    d(
        "active-defrag-cycle-min",
        Kind::Int { min: 1, max: 99 },
        "1",
    ),
    d(
        "active-defrag-cycle-max",
        Kind::Int { min: 1, max: 99 },
        "25",
    ),
    d(
        "active-defrag-threshold-lower",
        Kind::Int { min: 0, max: 1000 },
        "10",
    ),
    d(
        "active-defrag-threshold-upper",
        Kind::Int { min: 0, max: 1000 },
        "100",
    ),
    d(
        "active-defrag-ignore-bytes",
        Kind::Mem {
            min: 1,
            max: i64::MAX as u64,
        },
        "104857600",
    ),
    d(
        "active-defrag-max-scan-fields",
        Kind::Int {
            min: 1,
            max: i64::MAX,
        },
        "1000",
    ),
    im("server_cpulist", Kind::Str, ""),
    im("bio_cpulist", Kind::Str, ""),
    im("aof_rewrite_cpulist", Kind::Str, ""),
    im("bgsave_cpulist", Kind::Str, ""),
    im("disable-thp", Kind::Bool, "yes"),
    d("maxmemory-clients", Kind::Special, "0"),
    im("aclfile", Kind::Str, ""),
    d(
        "acl-pubsub-default",
        Kind::Enum(&["allchannels", "resetchannels"]),
        "resetchannels",
    ),
    d("ignore-warnings", Kind::Str, ""),
    d("bind-source-addr", Kind::Str, ""),
    im("socket-mark-id", U32_FULL, "0"),
    im(
        "syslog-facility",
        Kind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
        "local0",
    ),
    d("oom-score-adj-values", Kind::Special, "0 200 800"),
    d("aof-disable-auto-gc", Kind::Bool, "no"),
    d("aof-rewrite-incremental-fsync", Kind::Bool, "yes"),
    d("rdb-save-incremental-fsync", Kind::Bool, "yes"),
    d("repl-disable-tcp-nodelay", Kind::Bool, "no"),
    d("repl-diskless-sync-max-replicas", U32, "0"),
    d("replica-ignore-disk-write-errors", Kind::Bool, "no"),
    d("replica-ignore-maxmemory", Kind::Bool, "yes"),
    d(
        "propagation-error-behavior",
        Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        "ignore",
    ),
    d(
        "sanitize-dump-payload",
        Kind::Enum(&["no", "yes", "clients"]),
        "no",
    ),
    d("shutdown-timeout", U32, "10"),
    d("shutdown-on-sigint", Kind::Special, "default"),
    d("shutdown-on-sigterm", Kind::Special, "default"),
    d("latency-tracking", Kind::Bool, "yes"),
    d(
        "latency-tracking-info-percentiles",
        Kind::Special,
        "50 99 99.9",
    ),
    d(
        "cluster-announce-tls-port",
        Kind::Int { min: 0, max: 65535 },
        "0",
    ),
    // TLS: accepted so that configs naming certificates load, but tessera-node serves no
    // TLS; enabling it (tls-port, tls-replication, tls-cluster) is refused (see mod.rs).
    d("tls-port", Kind::Int { min: 0, max: 65535 }, "0"),
    d("tls-cert-file", Kind::Str, ""),
    d("tls-key-file", Kind::Str, ""),
    d("tls-key-file-pass", Kind::Str, ""),
    d("tls-client-cert-file", Kind::Str, ""),
    d("tls-client-key-file", Kind::Str, ""),
    d("tls-client-key-file-pass", Kind::Str, ""),
    d("tls-dh-params-file", Kind::Str, ""),
    d("tls-ca-cert-file", Kind::Str, ""),
    d("tls-ca-cert-dir", Kind::Str, ""),
    d("tls-protocols", Kind::Str, ""),
    d("tls-ciphers", Kind::Str, ""),
    d("tls-ciphersuites", Kind::Str, ""),
    d(
        "tls-auth-clients",
        Kind::Enum(&["no", "yes", "optional"]),
        "yes",
    ),
    d("tls-prefer-server-ciphers", Kind::Bool, "no"),
    d("tls-session-caching", Kind::Bool, "yes"),
    d("tls-session-cache-size", U32, "20480"),
    d("tls-session-cache-timeout", U32, "300"),
    d("tls-cluster", Kind::Bool, "no"),
    d("tls-replication", Kind::Bool, "no"),
];

/// Old names Redis still accepts (and lists in CONFIG GET): (alias, name).
pub static ALIASES: &[(&str, &str)] = &[
    ("slaveof", "replicaof"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slave-read-only", "replica-read-only"),
    ("slave-priority", "replica-priority"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    (
        "cluster-slave-validity-factor",
        "cluster-replica-validity-factor",
    ),
    ("cluster-slave-no-failover", "cluster-replica-no-failover"),
];

/// The directive an old name stands for (itself when it is no alias).
pub fn canonical(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(a, _)| *a == name)
        .map_or(name, |(_, n)| n)
}

pub fn find(name: &str) -> Option<&'static Directive> {
    let n = canonical(name);
    DIRECTIVES.iter().find(|d| d.name == n)
}
