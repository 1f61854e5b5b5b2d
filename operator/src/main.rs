//! tessera-operator binary: `run` (the controller), `crd` (print the CRD), `converge` (one-shot
//! topology convergence against node addresses, no Kubernetes needed).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use futures::FutureExt;
use tessera_operator::controller::{self, Context, RealEngine};
use tessera_operator::leader::{LeaderElector, LeaseConfig};
use tessera_operator::metrics::Metrics;
use tessera_operator::server::{self, Health};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

#[derive(Parser)]
#[command(
    name = "tessera-operator",
    version,
    about = "Kubernetes operator for Tessera Redis Clusters"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the controller.
    Run(RunArgs),
    /// Print the RedisCluster CRD as YAML.
    Crd,
    /// Converge node processes to N shards × R replicas once, without Kubernetes.
    Converge(tessera_topology::cli::ConvergeArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Namespace to watch (repeat for several); none means all namespaces.
    #[arg(long = "namespace", env = "WATCH_NAMESPACES", value_delimiter = ',')]
    namespaces: Vec<String>,
    /// Take a Lease before reconciling, so several replicas can run.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    leader_election: bool,
    /// Namespace of the Lease (defaults to the pod's namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    /// Name of the Lease.
    #[arg(long, default_value = "tessera-operator")]
    lease_name: String,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Requeue interval while a cluster converges.
    #[arg(long, default_value_t = 10)]
    requeue_seconds: u64,
    /// After a TLS Secret's ca.crt changed, seconds every node keeps being reloaded before
    /// the change is recorded: at least the time the kubelet takes to refresh a mounted
    /// Secret (about a minute, up to two).
    #[arg(long, env = "TESSERA_TLS_CA_WINDOW_SECONDS", default_value_t = 120)]
    tls_ca_window_seconds: u64,
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Crd => {
            print!("{}", tessera_operator::crd::crd_yaml()?);
            Ok(())
        }
        Cmd::Converge(args) => {
            init_tracing(LogFormat::Text);
            let rt = tokio::runtime::Runtime::new()?;
            rt.block_on(tessera_topology::cli::run(args))?;
            Ok(())
        }
        Cmd::Run(args) => {
            init_tracing(args.log_format);
            let rt = tokio::runtime::Runtime::new()?;
            rt.block_on(run(args))
        }
    }
}

/// Resolves on SIGTERM or SIGINT.
async fn termination() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = ctrl_c => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let client = kube::Client::try_default()
        .await
        .context("building a Kubernetes client (KUBECONFIG / in-cluster config)")?;
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health {
        metrics: metrics.clone(),
        ready: Default::default(),
    });
    let token = CancellationToken::new();
    let shutdown = {
        let t = token.clone();
        async move { t.cancelled().await }.boxed().shared()
    };

    let (addr, http) = server::bind(args.metrics_addr, health.clone(), shutdown.clone())
        .await
        .with_context(|| format!("binding {}", args.metrics_addr))?;
    info!(%addr, "metrics listening");
    let http = tokio::spawn(http);

    {
        let t = token.clone();
        tokio::spawn(async move {
            termination().await;
            info!("termination signal: shutting down");
            t.cancel();
        });
    }

    let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let elector = if args.leader_election {
        let identity = format!(
            "{}-{:08x}",
            std::env::var("POD_NAME")
                .or_else(|_| std::env::var("HOSTNAME"))
                .unwrap_or_else(|_| "tessera-operator".into()),
            rand::random::<u32>()
        );
        let elector = Arc::new(LeaderElector::new(
            client.clone(),
            LeaseConfig::new(&args.lease_name, &args.lease_namespace, &identity),
        ));
        health.ready.store(true, Ordering::Relaxed);
        info!(%identity, lease = %args.lease_name, namespace = %args.lease_namespace, "waiting for leadership");
        loop {
            match elector.try_acquire_or_renew().await {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => warn!(error = %e, "leader election"),
            }
            tokio::select! {
                _ = token.cancelled() => {
                    info!("shut down while standby");
                    let _ = http.await;
                    return Ok(());
                }
                _ = tokio::time::sleep(elector.config().renew_every) => {}
            }
        }
        metrics.is_leader.set(1);
        spawn_renewal(elector.clone(), token.clone(), lost.clone());
        Some(elector)
    } else {
        metrics.is_leader.set(1);
        None
    };
    health.ready.store(true, Ordering::Relaxed);

    let mut ctx = Context::new(client, metrics.clone(), Arc::new(RealEngine));
    ctx.requeue_converging = Duration::from_secs(args.requeue_seconds.max(1));
    ctx.tls_ca_window = Duration::from_secs(args.tls_ca_window_seconds);
    info!(namespaces = ?args.namespaces, "controller starting");
    controller::run(Arc::new(ctx), args.namespaces, shutdown).await;
    info!("controller stopped");
    metrics.is_leader.set(0);
    if let Some(e) = elector {
        if !lost.load(Ordering::Relaxed) {
            if let Err(err) = e.release().await {
                warn!(error = %err, "releasing the lease");
            }
        }
    }
    token.cancel();
    let _ = http.await;
    if lost.load(Ordering::Relaxed) {
        anyhow::bail!("lost leadership");
    }
    Ok(())
}

/// Renews the Lease; if it cannot for a whole lease duration (or someone else took it),
/// stops the controller: two leaders must never reconcile at once.
fn spawn_renewal(
    elector: Arc<LeaderElector>,
    token: CancellationToken,
    lost: Arc<std::sync::atomic::AtomicBool>,
) {
    tokio::spawn(async move {
        let cfg = elector.config().clone();
        let mut last_ok = Instant::now();
        loop {
            tokio::select! {
                _ = token.cancelled() => return,
                _ = tokio::time::sleep(cfg.renew_every) => {}
            }
            match elector.try_acquire_or_renew().await {
                Ok(true) => last_ok = Instant::now(),
                Ok(false) => {
                    error!("another replica holds the lease: stepping down");
                    lost.store(true, Ordering::Relaxed);
                    token.cancel();
                    return;
                }
                Err(e) => {
                    warn!(error = %e, "renewing the lease");
                    // Give up a little before the lease expires for the others.
                    if last_ok.elapsed() + cfg.renew_every >= cfg.lease_duration {
                        error!("could not renew the lease in time: stepping down");
                        lost.store(true, Ordering::Relaxed);
                        token.cancel();
                        return;
                    }
                }
            }
        }
    });
}
