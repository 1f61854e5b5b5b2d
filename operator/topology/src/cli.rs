//! `tessera-operator converge`: the engine outside Kubernetes, looping passes to convergence.
//!
//! Addresses are grouped into shards in order: with `--replicas R`, addresses `k*(R+1) ..
//! (k+1)*(R+1)` form shard k (ordinal = position in the group). Groups past `--shards` are
//! drained. Every node of the cluster must be listed: unlisted nodes without slots are forgotten.

use std::net::IpAddr;
use std::time::Duration;

use tokio::time::Instant;

use super::{reconcile, Desired, EngineOptions, PodEndpoint, TopologyError};

/// Arguments of `converge`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConvergeArgs {
    /// Desired number of shards (masters).
    #[arg(long)]
    pub shards: u32,
    /// Replicas per shard.
    #[arg(long, default_value_t = 0)]
    pub replicas: u32,
    /// Password of the nodes (AUTH).
    #[arg(long, env = "REDIS_PASSWORD")]
    pub password: Option<String>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Keys per MIGRATE batch.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Slots migrated in parallel.
    #[arg(long, default_value_t = 16)]
    pub parallel: usize,
    /// Node addresses, HOST:PORT.
    #[arg(required = true)]
    pub nodes: Vec<String>,
}

/// Turn HOST:PORT strings into endpoints (host names resolved to IPs, as nodes report IPs).
pub async fn endpoints(nodes: &[String], replicas: u32) -> Result<Vec<PodEndpoint>, TopologyError> {
    let group = replicas as usize + 1;
    let mut out = Vec::with_capacity(nodes.len());
    for (k, n) in nodes.iter().enumerate() {
        let (host, port) = n
            .rsplit_once(':')
            .ok_or_else(|| TopologyError::Invalid(format!("{n}: expected HOST:PORT")))?;
        let port: u16 = port
            .parse()
            .map_err(|_| TopologyError::Invalid(format!("{n}: bad port")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let ip = if host.parse::<IpAddr>().is_ok() {
            host.to_string()
        } else {
            tokio::net::lookup_host((host, port))
                .await
                .ok()
                .and_then(|mut a| a.next())
                .map(|a| a.ip().to_string())
                .ok_or_else(|| TopologyError::Invalid(format!("{n}: cannot resolve")))?
        };
        out.push(PodEndpoint {
            pod: n.clone(),
            shard: (k / group) as u32,
            ordinal: (k % group) as u32,
            host: ip,
            port,
        });
    }
    Ok(out)
}

/// Run passes until converged (printing each action) or the timeout.
pub async fn run(args: ConvergeArgs) -> Result<(), TopologyError> {
    let pods = endpoints(&args.nodes, args.replicas).await?;
    let desired = Desired {
        shards: args.shards,
        replicas_per_shard: args.replicas,
        paused: false,
    };
    let opts = EngineOptions {
        password: args.password.clone(),
        migrate_batch: args.batch,
        migrate_parallel: args.parallel,
        ..EngineOptions::default()
    };
    let timeout = Duration::from_secs(args.timeout);
    let start = Instant::now();
    let mut last_stuck = Vec::new();
    loop {
        let report = match reconcile(&desired, &pods, &opts).await {
            Ok(r) => r,
            Err(TopologyError::NoneReachable) if start.elapsed() < timeout => {
                println!("no node reachable yet");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        for a in &report.actions {
            println!("{a}");
        }
        if report.converged {
            println!(
                "converged: {} shards, {} slots assigned, cluster_state {}",
                desired.shards, report.slots_assigned, report.cluster_state
            );
            return Ok(());
        }
        if report.stuck != last_stuck {
            for s in &report.stuck {
                println!("waiting: {s}");
            }
            last_stuck = report.stuck.clone();
        }
        if start.elapsed() >= timeout {
            return Err(TopologyError::Timeout(timeout, report.stuck.join("; ")));
        }
        // Give gossip a moment to spread what the pass changed. A pass is a few round trips
        // per node, and what it waits on (a handshake, a pong) takes milliseconds on one
        // network, so polling briskly is what makes forming fast.
        let pause = if report.actions.is_empty() { 100 } else { 20 };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}
