//! tessera-node binary: `tessera-node [file.conf] [--directive value ...]`.

use anyhow::Context;

mod ready_probe;

#[global_allocator]
static ALLOC: tessera_node::alloc::CountingAlloc = tessera_node::alloc::CountingAlloc;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The pod readiness check (the node image has no shell or redis-cli to run one).
    if args.first().map(String::as_str) == Some("--ready-probe") {
        std::process::exit(ready_probe::run(args.get(1..).unwrap_or_default()));
    }
    if args.iter().any(|a| a == "-v" || a == "--version") {
        println!(
            "Redis server v={} (tessera-node {})",
            tessera_node::REDIS_VERSION,
            env!("CARGO_PKG_VERSION")
        );
        return Ok(());
    }
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
    init_logging(&config);
    // The main thread runs the cluster bus, replication and timers; `server::Workers`
    // starts the I/O threads that serve clients.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    if let Err(e) = rt.block_on(tessera_node::run(config)) {
        eprintln!("# {e}");
        std::process::exit(1);
    }
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok(())
}

fn init_logging(c: &tessera_node::config::Config) {
    use tessera_node::config::LogLevel;
    let level = match c.typed.loglevel {
        LogLevel::Debug => "debug",
        LogLevel::Verbose | LogLevel::Notice => "info",
        LogLevel::Warning => "warn",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("TESSERA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let logfile = c.typed.logfile.clone();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false);
    if logfile.is_empty() {
        builder.with_writer(std::io::stdout).init();
    } else {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&logfile)
        {
            Ok(f) => builder.with_writer(std::sync::Mutex::new(f)).init(),
            Err(e) => {
                eprintln!("Can't open the log file: {e}");
                std::process::exit(1);
            }
        }
    }
}
