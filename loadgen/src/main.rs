//! `tessera-load`: thin binary over the `tessera_load` library.

use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "Load for Tessera's benchmarks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// SET `<prefix>:<task>:<n>` through a cluster client at a steady rate until SIGTERM or
    /// SIGINT (or `--seconds`), then read every acknowledged write back and print the tally.
    Writer(WriterArgs),
    /// A GET/SET mix over `--keys` keys with Zipf-distributed popularity for `--seconds`;
    /// prints requests/s and batch latencies.
    Mix(MixArgs),
    /// One of redis-benchmark's default commands (`--test set|get|...`), pipelined, from a
    /// client that spends little CPU per request; prints requests/s.
    Pipe(PipeArgs),
}

#[derive(clap::Args)]
struct PipeArgs {
    /// Server, HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:6379")]
    addr: String,
    #[arg(long, value_enum, ignore_case = true)]
    test: tessera_load::pipe::Test,
    #[arg(long, default_value_t = 50)]
    conns: u32,
    #[arg(long, default_value_t = 16)]
    pipeline: u32,
    #[arg(long, default_value_t = 1_000_000)]
    requests: u64,
}

#[derive(clap::Args)]
struct MixArgs {
    /// Server, HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:6379")]
    addr: String,
    #[arg(long, default_value_t = 50)]
    conns: u32,
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Share of GETs, 0..=1 (the rest are SETs).
    #[arg(long, default_value_t = 0.9)]
    get_ratio: f64,
    /// Zipf exponent (0: uniform).
    #[arg(long, default_value_t = 0.99)]
    zipf: f64,
    #[arg(long, default_value_t = 16)]
    value_size: usize,
    #[arg(long, default_value_t = 1)]
    pipeline: u32,
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// SET every key first.
    #[arg(long)]
    preload: bool,
}

#[derive(clap::Args)]
struct WriterArgs {
    /// Seed nodes, HOST:PORT.
    #[arg(required = true)]
    nodes: Vec<String>,
    /// Writes per second, all tasks together.
    #[arg(long, default_value_t = 2000)]
    rate: u32,
    /// Concurrent writers (each waits for its reply before its next write).
    #[arg(long, default_value_t = 4)]
    tasks: u32,
    /// Key prefix.
    #[arg(long, default_value = "w")]
    prefix: String,
    /// Retries the cluster client makes on a redirect, TRYAGAIN or a lost connection
    /// before a write counts as failed.
    #[arg(long, default_value_t = 5)]
    retries: u32,
    /// Stop after this many seconds instead of waiting for a signal.
    #[arg(long)]
    seconds: Option<f64>,
    /// Password (AUTH).
    #[arg(long, env = "REDIS_PASSWORD")]
    password: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // One thread, as redis-benchmark has: on a small machine the load generator must not
    // take more cores than the one it is compared with.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match cli.cmd {
        Cmd::Writer(a) => rt.block_on(async move {
            let cfg = tessera_load::writer::Config {
                nodes: a.nodes,
                rate: a.rate,
                tasks: a.tasks,
                prefix: a.prefix,
                retries: a.retries,
                password: a.password,
            };
            let stop = async move {
                match a.seconds {
                    Some(s) => tokio::time::sleep(Duration::from_secs_f64(s)).await,
                    None => termination().await,
                }
            };
            let tally = tessera_load::writer::run(cfg, stop).await?;
            println!("{tally}");
            Ok(())
        }),
        Cmd::Pipe(a) => rt.block_on(async move {
            let report = tessera_load::pipe::run(tessera_load::pipe::Config {
                addr: a.addr,
                test: a.test,
                conns: a.conns,
                pipeline: a.pipeline,
                requests: a.requests,
            })
            .await?;
            println!("{report}");
            Ok(())
        }),
        Cmd::Mix(a) => rt.block_on(async move {
            if a.preload {
                tessera_load::mix::preload(&a.addr, a.keys, a.value_size).await?;
            }
            let report = tessera_load::mix::run(tessera_load::mix::Config {
                addr: a.addr,
                conns: a.conns,
                keys: a.keys,
                get_ratio: a.get_ratio,
                zipf: a.zipf,
                value_size: a.value_size,
                pipeline: a.pipeline,
                seconds: a.seconds,
            })
            .await?;
            println!("{report}");
            Ok(())
        }),
    }
}

/// Resolves on SIGTERM or SIGINT.
async fn termination() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(t) => t,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
