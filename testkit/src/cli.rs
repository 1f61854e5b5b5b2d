//! redis-cli, bounded.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs redis-cli with `conn` args then `args`, killed after 120 s; stdout and stderr are
/// drained while it runs (`--cluster reshard` prints a lot).
pub fn cli_out(conn: &[&str], args: &[&str]) -> Output {
    let mut child = Command::new(crate::bins::redis_cli_bin())
        .args(conn)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    let drain = |p: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut p) = p {
                let _ = p.read_to_end(&mut v);
            }
            v
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let start = Instant::now();
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break st;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}
