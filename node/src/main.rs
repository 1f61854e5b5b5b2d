//! tessera-node binary: `tessera-node [file.conf] [--directive value ...]`.

use std::sync::Arc;

use anyhow::Context;
use tessera_node::config::Config;

mod crash;
mod ready_probe;

#[global_allocator]
static ALLOC: tessera_node::alloc::CountingAlloc = tessera_node::alloc::CountingAlloc;

fn main() -> anyhow::Result<()> {
    tessera_node::alloc::init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The pod readiness check (the node image has no shell or redis-cli to run one).
    if args.first().map(String::as_str) == Some("--ready-probe") {
        std::process::exit(ready_probe::run(args.get(1..).unwrap_or_default()));
    }
    // A background save's writer child (persist/child.rs): the server starts its own
    // executable in this mode rather than forking itself.
    if args.first().map(String::as_str) == Some(tessera_node::persist::child::WRITER_FLAG) {
        std::process::exit(tessera_node::persist::child::writer_main(
            args.get(1..).unwrap_or_default(),
        ));
    }
    if args.iter().any(|a| a == "-v" || a == "--version") {
        println!(
            "Redis server v={} (tessera-node {})",
            tessera_node::REDIS_VERSION,
            env!("CARGO_PKG_VERSION")
        );
        return Ok(());
    }
    // The command line area, for the process title: taken now, while this is the only
    // thread (its environment strings move to the heap).
    let title = std::env::args_os()
        .next()
        .and_then(tessera_node::server::title::Area::take_over);
    let (file, cli) = tessera_node::config::parse_args(&args);
    let config = match tessera_node::config::Config::load(
        file.as_deref(),
        &cli,
        tessera_node::command_names(),
    ) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let log = init_logging(&config);
    startup_lines(&config);
    // mimalloc turned transparent huge pages off in its own start-up, before main (see
    // .cargo/config.toml); this keeps them off or, for `disable-thp no`, turns them back on.
    let off = config.typed.disable_thp;
    if let Err(e) = tessera_node::alloc::set_thp_disabled(off) {
        let what = if off { "disable" } else { "enable" };
        tracing::warn!("Failed to {what} transparent huge pages: {e}");
    }
    if !tessera_node::alloc::size_classes_match() {
        tracing::warn!(
            "mimalloc was built without MI_MAX_ALIGN_SIZE=8 (.cargo/config.toml): used_memory undercounts small blocks"
        );
    }
    if let Err(e) = crash::install(log.fd()) {
        tracing::warn!("Can't install the crash report handler: {e}");
    }
    // The main thread runs the cluster bus, replication and timers; `server::Workers`
    // starts the I/O threads that serve clients.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    let port = config.typed.port;
    let to_file = matches!(log, Log::File(_));
    let logo = {
        let c = config.clone();
        move || logo(&c, &log)
    };
    if let Err(e) = rt.block_on(tessera_node::run(config, title, logo)) {
        if let tessera_node::server::ServerError::Bind { .. } = e {
            // Redis's words: its test harness reads them to retry on another port.
            tracing::warn!("Warning: {e}");
            tracing::warn!("Failed listening on port {port} (TCP), aborting.");
        }
        if to_file {
            // As Redis, which logs why it stops with the rest: Redis's cluster suite counts
            // anything an instance writes to stderr as a failed test (its valgrind check).
            tracing::warn!("{e}");
        } else {
            eprintln!("# {e}");
        }
        std::process::exit(1);
    }
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok(())
}

/// Where the log goes: stdout, or the `logfile` ([`Config::log_path`]) opened for appending.
enum Log {
    Stdout,
    File(Arc<std::fs::File>),
}

impl Log {
    /// The descriptor a crash report is written to (it stays open for the process's life).
    fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        match self {
            Log::Stdout => std::io::stdout().as_raw_fd(),
            Log::File(f) => f.as_raw_fd(),
        }
    }

    /// Writes `text` as is (Redis's LL_RAW lines: the logo).
    fn raw(&self, text: &str) {
        use std::io::Write;
        let r = match self {
            Log::Stdout => std::io::stdout().lock().write_all(text.as_bytes()),
            Log::File(f) => (&**f).write_all(text.as_bytes()),
        };
        if let Err(e) = r {
            eprintln!("Can't write to the log: {e}");
        }
    }
}

fn init_logging(c: &Config) -> Log {
    use tessera_node::config::LogLevel;
    let level = match c.typed.loglevel {
        LogLevel::Debug => "debug",
        LogLevel::Verbose | LogLevel::Notice => "info",
        LogLevel::Warning => "warn",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("TESSERA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false);
    let Some(path) = c.log_path() else {
        builder.with_writer(std::io::stdout).init();
        return Log::Stdout;
    };
    match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        Ok(f) => {
            let f = Arc::new(f);
            builder.with_writer(f.clone()).init();
            Log::File(f)
        }
        Err(e) => {
            eprintln!("Can't open the log file {}: {e}", path.display());
            std::process::exit(1);
        }
    }
}

/// Redis's first startup lines, before the listeners are bound.
fn startup_lines(c: &Config) {
    let pid = std::process::id();
    let version = tessera_node::REDIS_VERSION;
    tracing::warn!("oO0OoO0OoO0Oo Redis is starting oO0OoO0OoO0Oo");
    tracing::warn!(
        "Redis version={version}, bits=64, commit=00000000, modified=0, pid={pid}, just started (tessera-node {})",
        env!("CARGO_PKG_VERSION")
    );
    match &c.file {
        Some(f) => tracing::warn!("Configuration loaded from {}", f.display()),
        None => tracing::warn!(
            "Warning: no config file specified, using the default config. In order to specify a config file use tessera-node /path/to/redis.conf"
        ),
    }
}

/// Redis's logo, printed once the listeners are bound (as Redis's redisAsciiArt after
/// initServer). With the logo shown (always-show-logo, or a terminal on stdout), its
/// ` PID: <pid>` line is what Redis's test harness waits for before it connects; without
/// it, Redis logs "Running mode=..., port=...".
fn logo(c: &Config, log: &Log) {
    use std::io::IsTerminal;
    let pid = std::process::id();
    let version = tessera_node::REDIS_VERSION;
    let mode = if c.typed.cluster_enabled {
        "cluster"
    } else {
        "standalone"
    };
    let port = c.typed.port;
    let show_logo = c.typed.always_show_logo
        || (matches!(log, Log::Stdout)
            && !c.typed.syslog_enabled
            && std::io::stdout().is_terminal());
    if matches!(c.typed.loglevel, tessera_node::config::LogLevel::Warning) {
        return;
    }
    if show_logo {
        log.raw(&format!(
            "\n    tessera-node {} (Redis {version} compatible) 64 bit\n\n    Running in {mode} mode\n    Port: {port}\n    PID: {pid}\n\n",
            env!("CARGO_PKG_VERSION")
        ));
    } else {
        tracing::info!("Running mode={mode}, port={port}.");
    }
}
