//! Running programs to completion, bounded: redis-cli and one-shot runs of the servers
//! (a refused config, a checker).

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// [`Command::output`] bounded by `max`: stdout and stderr go to files (no pipe to fill),
/// and a program still running after `max` is killed and fails the test with what it
/// printed, instead of hanging it.
pub fn output_within(cmd: &mut Command, max: Duration) -> Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let file = |p: &std::path::Path| {
        std::fs::File::create(p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()))
    };
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(file(&out))
        .stderr(file(&err))
        .spawn()
        .unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    let status = crate::server::wait_exit(&mut child, max);
    crate::server::kill(&mut child);
    let read = |p: &std::path::Path| std::fs::read(p).unwrap_or_default();
    let Some(status) = status else {
        panic!(
            "{cmd:?} still ran after {max:?}:\n{}{}",
            String::from_utf8_lossy(&read(&out)),
            String::from_utf8_lossy(&read(&err))
        );
    };
    Output {
        status,
        stdout: read(&out),
        stderr: read(&err),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_within_keeps_both_streams_and_the_status() {
        let o = output_within(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(10),
        );
        assert_eq!(o.status.code(), Some(3));
        assert_eq!(o.stdout, b"out\n");
        assert_eq!(o.stderr, b"err\n");
    }

    #[test]
    #[should_panic(expected = "still ran after")]
    fn output_within_fails_a_program_that_does_not_stop() {
        output_within(
            Command::new("sh").args(["-c", "echo started; sleep 30"]),
            Duration::from_millis(300),
        );
    }
}
