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
        max: u64,
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
const I64: Kind = Kind::Int {
    min: i64::MIN,
    max: i64::MAX,
};
const U64: Kind = Kind::Int {
    min: 0,
    max: i64::MAX,
};
const MEM: Kind = Kind::Mem { max: u64::MAX };

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

pub const LOGLEVELS: &[&str] = &["debug", "verbose", "notice", "warning", "nothing"];

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
            max: i32::MAX as i64,
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
    d("maxmemory-samples", Kind::Int { min: 1, max: 64 }, "5"),
    d(
        "maxmemory-eviction-tenacity",
        Kind::Int { min: 0, max: 100 },
        "10",
    ),
    d(
        "proto-max-bulk-len",
        Kind::Mem {
            max: i64::MAX as u64,
        },
        "536870912",
    ),
    d("client-query-buffer-limit", MEM, "1073741824"),
    d("client-output-buffer-limit", Kind::Special, ""),
    d("hz", Kind::Int { min: 1, max: 500 }, "10"),
    d("dynamic-hz", Kind::Bool, "yes"),
    d("slowlog-log-slower-than", I64, "10000"),
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
    d("rdbchecksum", Kind::Bool, "yes"),
    d("dbfilename", Kind::Str, "dump.rdb"),
    d("rdb-del-sync-files", Kind::Bool, "no"),
    d("appendonly", Kind::Bool, "no"),
    im("appendfilename", Kind::Str, "appendonly.aof"),
    im("appenddirname", Kind::Str, "appendonlydir"),
    d(
        "appendfsync",
        Kind::Enum(&["always", "everysec", "no"]),
        "everysec",
    ),
    d("no-appendfsync-on-rewrite", Kind::Bool, "no"),
    d("auto-aof-rewrite-percentage", U32, "100"),
    d("auto-aof-rewrite-min-size", MEM, "67108864"),
    d("aof-load-truncated", Kind::Bool, "yes"),
    d("aof-use-rdb-preamble", Kind::Bool, "yes"),
    d("aof-timestamp-enabled", Kind::Bool, "no"),
    d("replicaof", Kind::Special, ""),
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
    d("repl-backlog-size", MEM, "1048576"),
    d("repl-backlog-ttl", U32, "3600"),
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
    d("hash-max-listpack-value", U64, "64"),
    d("hash-max-ziplist-entries", U64, "512"),
    d("hash-max-ziplist-value", U64, "64"),
    d("list-max-listpack-size", I32, "-2"),
    d("list-max-ziplist-size", I32, "-2"),
    d("list-compress-depth", U32, "0"),
    d("set-max-intset-entries", U64, "512"),
    d("zset-max-listpack-entries", U64, "128"),
    d("zset-max-listpack-value", U64, "64"),
    d("zset-max-ziplist-entries", U64, "128"),
    d("zset-max-ziplist-value", U64, "64"),
    d(
        "hll-sparse-max-bytes",
        Kind::Mem {
            max: i32::MAX as u64,
        },
        "3000",
    ),
    d("stream-node-max-bytes", MEM, "4096"),
    d("stream-node-max-entries", U64, "100"),
    d("activerehashing", Kind::Bool, "yes"),
    d("activedefrag", Kind::Bool, "no"),
    d("lua-time-limit", I64, "5000"),
    d("busy-reply-threshold", I64, "5000"),
    d("io-threads", Kind::Int { min: 1, max: 128 }, "1"),
    // tessera-node only: I/O threads, each with its own event loop (0 = half the cores).
    im("worker-threads", Kind::Int { min: 0, max: 1024 }, "0"),
    d("io-threads-do-reads", Kind::Bool, "no"),
    // Valkey 8.1's: how many pipelined requests' keys are prefetched ahead (0 = off).
    d(
        "prefetch-batch-max-size",
        Kind::Int { min: 0, max: 128 },
        "16",
    ),
    d("always-show-logo", Kind::Bool, "no"),
    d("set-proc-title", Kind::Bool, "yes"),
    d(
        "proc-title-template",
        Kind::Str,
        "{title} {listen-addr} {server-mode}",
    ),
    d(
        "enable-debug-command",
        Kind::Enum(&["yes", "no", "local"]),
        "yes",
    ),
    d(
        "enable-protected-configs",
        Kind::Enum(&["yes", "no", "local"]),
        "no",
    ),
    d(
        "enable-module-command",
        Kind::Enum(&["yes", "no", "local"]),
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
    d("unixsocket", Kind::Str, ""),
    d("unixsocketperm", U32, "0"),
    d("syslog-enabled", Kind::Bool, "no"),
    d("syslog-ident", Kind::Str, "redis"),
    d("locale-collate", Kind::Str, ""),
];

/// Old names Redis still accepts.
pub fn canonical(name: &str) -> &str {
    match name {
        "slaveof" => "replicaof",
        "slave-serve-stale-data" => "replica-serve-stale-data",
        "slave-read-only" => "replica-read-only",
        "slave-priority" => "replica-priority",
        "min-slaves-to-write" => "min-replicas-to-write",
        "min-slaves-max-lag" => "min-replicas-max-lag",
        "slave-announce-ip" => "replica-announce-ip",
        "slave-announce-port" => "replica-announce-port",
        "cluster-slave-validity-factor" => "cluster-replica-validity-factor",
        "cluster-slave-no-failover" => "cluster-replica-no-failover",
        other => other,
    }
}

pub fn find(name: &str) -> Option<&'static Directive> {
    let n = canonical(name);
    DIRECTIVES.iter().find(|d| d.name == n)
}
