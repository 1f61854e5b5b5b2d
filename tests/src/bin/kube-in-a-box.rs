//! kube-in-a-box: a Kubernetes API emulator, a StatefulSet controller and a process kubelet
//! on loopback, for trying tessera without a cluster. `up` starts it, `down` stops it.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use tessera_tests::kiab::images::workspace_root;
use tessera_tests::kiab::{BoxConfig, KubeInABox};

#[derive(Parser)]
#[command(
    name = "kube-in-a-box",
    about = "Kubernetes-in-a-box for tessera (test and demo tool)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start the API server and controllers; writes STATE_DIR/kubeconfig.
    Up {
        #[arg(long)]
        state_dir: PathBuf,
        /// API server port on 127.0.0.1 (0 = any free port).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// First pod address.
        #[arg(long, default_value = "127.0.1.1")]
        ip_base: Ipv4Addr,
        /// Directory of CRD manifests applied at start.
        #[arg(long)]
        crds: Option<PathBuf>,
        /// Keep API objects in STATE_DIR/api across restarts.
        #[arg(long)]
        persist: bool,
        /// Run in the background (pidfile STATE_DIR/kiab.pid, log STATE_DIR/kiab.log).
        #[arg(long)]
        detach: bool,
    },
    /// Stop a box started with `up` and everything it runs.
    Down {
        #[arg(long)]
        state_dir: PathBuf,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Up {
            state_dir,
            port,
            ip_base,
            crds,
            persist,
            detach,
        } => {
            if let Some(pid) = running_pid(&state_dir) {
                bail!(
                    "kube-in-a-box already runs for {} (pid {pid}); run `kube-in-a-box down --state-dir {}` first",
                    state_dir.display(),
                    state_dir.display()
                );
            }
            std::fs::create_dir_all(&state_dir)
                .with_context(|| format!("creating {}", state_dir.display()))?;
            let state_dir = state_dir.canonicalize()?;
            let crds = crds.unwrap_or_else(|| workspace_root().join("crds"));
            if detach {
                return detach_up(&state_dir);
            }
            init_tracing();
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(up(state_dir, port, ip_base, crds, persist))
        }
        Cmd::Down { state_dir } => down(&state_dir),
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn,hyper=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

async fn up(
    state_dir: PathBuf,
    port: u16,
    ip_base: Ipv4Addr,
    crds: PathBuf,
    persist: bool,
) -> Result<()> {
    let ready = state_dir.join("kiab.ready");
    let _ = std::fs::remove_file(&ready);
    let mut cfg = BoxConfig::new(&state_dir);
    cfg.api_addr = SocketAddr::from(([127, 0, 0, 1], port));
    cfg.ip_base = ip_base;
    cfg.persist = persist;
    let kiab = KubeInABox::start(cfg).await?;
    let pidfile = state_dir.join("kiab.pid");
    std::fs::write(&pidfile, std::process::id().to_string())?;
    if crds.is_dir() {
        let n = kiab
            .apply_crds(&crds)
            .await
            .with_context(|| format!("applying CRDs from {}", crds.display()))?;
        tracing::info!(count = n, dir = %crds.display(), "CRDs applied");
    } else {
        tracing::warn!(dir = %crds.display(), "no CRD directory");
    }
    std::fs::write(&ready, kiab.api_url())?;
    println!(
        "kube-in-a-box up at {}\n  export KUBECONFIG={}\n  stop with: kube-in-a-box down --state-dir {}",
        kiab.api_url(),
        kiab.kubeconfig_path().display(),
        state_dir.display()
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("stopping");
    kiab.stop().await;
    let _ = std::fs::remove_file(&ready);
    let _ = std::fs::remove_file(&pidfile);
    Ok(())
}

/// Re-runs `up` without `--detach` in a new session, and waits until it is ready.
fn detach_up(state_dir: &Path) -> Result<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--detach")
        .collect();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(state_dir.join("kiab.log"))?;
    let ready = state_dir.join("kiab.ready");
    let _ = std::fs::remove_file(&ready);
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log));
    // SAFETY: setsid is async-signal-safe; it detaches the daemon from our terminal.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .context("starting kube-in-a-box in the background")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if ready.exists() {
            let url = std::fs::read_to_string(&ready).unwrap_or_default();
            println!(
                "kube-in-a-box up at {url} (pid {})\n  export KUBECONFIG={}\n  log: {}\n  stop with: kube-in-a-box down --state-dir {}",
                child.id(),
                state_dir.join("kubeconfig").display(),
                state_dir.join("kiab.log").display(),
                state_dir.display()
            );
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            bail!(
                "kube-in-a-box exited during start ({status}); see {}",
                state_dir.join("kiab.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    bail!(
        "kube-in-a-box did not become ready within 60 s; see {}",
        state_dir.join("kiab.log").display()
    )
}

fn running_pid(state_dir: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(state_dir.join("kiab.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    alive(pid).then_some(pid)
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let exists = pid > 1 && unsafe { libc::kill(pid, 0) } == 0;
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.contains(") Z "))
        .unwrap_or(false);
    exists && !zombie
}

fn down(state_dir: &Path) -> Result<()> {
    let Some(pid) = running_pid(state_dir) else {
        println!("kube-in-a-box: nothing running for {}", state_dir.display());
        let _ = std::fs::remove_file(state_dir.join("kiab.pid"));
        return Ok(());
    };
    // SAFETY: signalling the pid recorded by our own `up`.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(40);
    while Instant::now() < deadline && alive(pid) {
        std::thread::sleep(Duration::from_millis(100));
    }
    if alive(pid) {
        // SAFETY: as above; its pod processes die with it (PR_SET_PDEATHSIG).
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = std::fs::remove_file(state_dir.join("kiab.pid"));
    let _ = std::fs::remove_file(state_dir.join("kiab.ready"));
    println!("kube-in-a-box stopped (pid {pid})");
    Ok(())
}
