//! The unix socket listener (unixsocket / unixsocketperm), against redis-server 7.0
//! (issue 18: unit/networking 'Default bind address configuration handling' and the
//! harness's `redis-cli -s` / `redis-benchmark -s` use it): a stale file is replaced, the
//! mode applied, clients are served and listed as `<path>:0` with flag U, protected mode
//! lets them in, CLIENT KILL ADDR reaches them, rebinding TCP leaves the socket alone, a
//! node with no TCP address still serves it, and shutdown removes the file.

use std::io::{BufReader, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use tessera_testkit::resp::{encode, read_reply};
use tessera_testkit::*;

/// A RESP connection over a unix socket.
struct Unix {
    w: UnixStream,
    r: BufReader<UnixStream>,
}

impl Unix {
    fn connect(path: &Path) -> std::io::Result<Unix> {
        let w = UnixStream::connect(path)?;
        w.set_read_timeout(Some(Duration::from_secs(10)))?;
        let r = BufReader::new(w.try_clone()?);
        Ok(Unix { w, r })
    }

    fn cmd(&mut self, args: &[&str]) -> Reply {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.w.write_all(&encode(&a)).expect("write");
        read_reply(&mut self.r)
    }
}

/// PING over the socket at `path` on a new connection, or why it could not connect.
fn unix_ping(path: &Path) -> String {
    match Unix::connect(path) {
        Ok(mut c) => format!("{:?}", c.cmd(&["PING"])),
        Err(e) => format!("connect: {}", e.kind()),
    }
}

/// `reply` as text (bulk strings as strings) with the socket's directory written `<dir>`
/// (it differs per server).
fn masked(reply: &Reply, dir: &Path) -> String {
    let text = match reply {
        Reply::Array(v) => v
            .iter()
            .map(|r| match r {
                Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => format!("{other:?}"),
    };
    text.replace(&dir.display().to_string(), "<dir>")
}

/// The fields of CLIENT LIST's line for the calling client that do not vary by run.
fn own_line(reply: &Reply, dir: &Path) -> String {
    let Reply::Bulk(b) = reply else {
        return format!("not a bulk: {reply:?}");
    };
    let text = String::from_utf8_lossy(b).replace(&dir.display().to_string(), "<dir>");
    text.split_whitespace()
        .filter(|f| {
            ["addr=", "laddr=", "flags="]
                .iter()
                .any(|p| f.starts_with(p))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What one server does with its unix socket, compared whole between the two servers.
fn unix_story(l: Launch) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("s");
    // A stale file where the socket goes: Redis removes it before binding.
    std::fs::write(&sock, b"stale").expect("stale file");
    let sock_arg = sock.display().to_string();
    let mut s = l
        .args(&["--unixsocket", &sock_arg, "--unixsocketperm", "700"])
        .start();
    let mut out = Vec::new();
    let meta = std::fs::symlink_metadata(&sock).expect("socket file");
    out.push(format!(
        "socket: {} mode {:o}",
        meta.file_type().is_socket(),
        meta.permissions().mode() & 0o777
    ));
    let mut u = Unix::connect(&sock).expect("connect to the unix socket");
    let d = dir.path();
    out.push(format!(
        "protected-mode: {:?}",
        u.cmd(&["CONFIG", "GET", "protected-mode"])
    ));
    out.push(format!("ping: {:?}", u.cmd(&["PING"])));
    out.push(format!(
        "list: {}",
        own_line(&u.cmd(&["CLIENT", "INFO"]), d)
    ));
    // One CONFIG GET per name: a pattern's order follows Redis's dict, which varies.
    for name in ["unixsocket", "unixsocketperm"] {
        out.push(format!(
            "get: {}",
            masked(&u.cmd(&["CONFIG", "GET", name]), d)
        ));
    }
    out.push(format!(
        "set: {:?}",
        u.cmd(&["CONFIG", "SET", "unixsocket", "/tmp/elsewhere"])
    ));
    out.push(format!(
        "set perm: {:?}",
        u.cmd(&["CONFIG", "SET", "unixsocketperm", "777"])
    ));
    // MONITOR names a unix client `unix:<path>`.
    let mut mon = s.resp();
    out.push(format!("monitor: {:?}", mon.cmd(&["MONITOR"])));
    u.cmd(&["SET", "k", "v"]);
    let line = match mon.read() {
        Reply::Simple(l) => l
            .split_once(' ')
            .map_or(l.clone(), |(_, rest)| rest.to_string()),
        other => format!("{other:?}"),
    };
    out.push(format!(
        "monitored: {}",
        line.replace(&d.display().to_string(), "<dir>")
    ));
    drop(mon);
    // A TCP client's view of the unix one, and CLIENT KILL ADDR by its address.
    let mut t = s.resp();
    let list = match t.cmd(&["CLIENT", "LIST"]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => format!("{other:?}"),
    };
    let unix_line = list
        .lines()
        .find(|l| l.contains(&format!("addr={sock_arg}:0")))
        .map(|l| own_line(&Reply::Bulk(l.as_bytes().to_vec()), d));
    out.push(format!("seen from tcp: {unix_line:?}"));
    out.push(format!(
        "kill addr: {:?}",
        t.cmd(&["CLIENT", "KILL", "ADDR", &format!("{sock_arg}:0")])
    ));
    out.push(format!("killed client reads: {:?}", read_reply(&mut u.r)));
    // Moving the TCP listener leaves the unix socket alone.
    out.push(format!(
        "bind none: {:?}",
        t.cmd(&["CONFIG", "SET", "bind", ""])
    ));
    out.push(format!("tcp after: {}", Conn::try_connect(s.port).is_ok()));
    out.push(format!("unix after: {}", unix_ping(&sock)));
    let mut u2 = Unix::connect(&sock).expect("connect again");
    out.push(format!(
        "bind back: {:?}",
        u2.cmd(&["CONFIG", "SET", "bind", "127.0.0.1"])
    ));
    out.push(format!("tcp back: {}", Conn::try_connect(s.port).is_ok()));
    // Shutdown removes the socket file.
    out.push(format!("shutdown: {:?}", u2.cmd(&["SHUTDOWN", "NOSAVE"])));
    let exited = s.wait_exit(Duration::from_secs(15));
    out.push(format!("exited: {}", exited.is_some()));
    out.push(format!("file after exit: {}", sock.exists()));
    out
}

#[test]
fn unix_socket_serves_like_redis() {
    let want = unix_story(Launch::redis());
    let got = unix_story(Launch::tessera());
    assert_eq!(got, want, "tessera (left) vs redis-server (right)");
}

/// A node started with no TCP address (`bind ""`) and a unix socket serves the socket
/// (Redis only refuses to start when it would listen nowhere), as unit/networking's
/// restart with an empty bind expects; with no socket either it refuses to start.
fn no_tcp_story(l: Launch) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("s");
    let sock_arg = sock.display().to_string();
    let port = free_port();
    let mut out = Vec::new();
    {
        let l = l.clone().args(&["--bind", "", "--unixsocket", &sock_arg]);
        let _p = Process::spawn(l.command("127.0.0.1", port, dir.path()));
        let mut last = String::new();
        let served = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            last = unix_ping(&sock);
            last.contains("PONG")
        });
        out.push(format!("unix served: {served} ({last})"));
        out.push(format!("tcp refused: {}", Conn::try_connect(port).is_err()));
        if let Ok(mut u) = Unix::connect(&sock) {
            out.push(format!("bind: {:?}", u.cmd(&["CONFIG", "GET", "bind"])));
        }
    }
    let nowhere = l
        .args(&["--bind", ""])
        .run_to_exit(dir.path(), Duration::from_secs(15));
    out.push(format!("no socket, no bind: refused {}", nowhere.failed()));
    out
}

#[test]
fn node_without_tcp_serves_its_unix_socket_like_redis() {
    let want = no_tcp_story(Launch::redis());
    let got = no_tcp_story(Launch::tessera());
    assert_eq!(got, want, "tessera (left) vs redis-server (right)");
}

/// The process title as /proc/<pid>/cmdline shows it (what `ps` and unit/other's
/// 'Process title set as expected' read), with the binary, port and directory masked:
/// the text up to the first NUL, then how long the whole is (the original argv area, or
/// the title and its NUL) and where a '.' follows (Redis marks argv[0]'s old end).
fn cmdline(s: &Server, dir: &Path) -> String {
    let pid = s.pid();
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let f: Vec<usize> = stat[stat.rfind(')').expect("stat") + 1..]
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let argv_len = f[46] - f[45];
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let title = String::from_utf8_lossy(&raw[..end])
        .replace(s.bin(), "<bin>")
        .replace(&dir.display().to_string(), "<dir>")
        .replace(&s.port.to_string(), "<port>");
    let len = if raw.len() == argv_len {
        "argv".to_string()
    } else if raw.len() == end + 1 {
        "title".to_string()
    } else {
        format!("{} of argv {argv_len}", raw.len())
    };
    let marks: Vec<String> = raw
        .iter()
        .enumerate()
        .skip(end)
        .filter(|(_, &b)| b != 0)
        .map(|(i, &b)| match i == s.bin().len() {
            true => format!("{:?} at argv0's end", b as char),
            false => format!("{:?} at {i}", b as char),
        })
        .collect();
    format!("{title} (len {len}, marks {marks:?})")
}

/// The title at start (default template), after CONFIG SET proc-title-template of the
/// unit's template, of a short one, and a refused one.
fn title_story(l: Launch) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("s").display().to_string();
    let s = l.args(&["--unixsocket", &sock]).start();
    let mut c = s.resp();
    let mut out = vec![format!("start: {}", cmdline(&s, dir.path()))];
    for t in [
        "TEST {title} {listen-addr} {port} {tls-port} {unixsocket} {config-file}",
        "x",
        "  {{braces}} {server-mode} {title}  ",
        "{invalid-var}",
    ] {
        let r = c.cmd(&["CONFIG", "SET", "proc-title-template", t]);
        out.push(format!("{t:?}: {r:?} {}", cmdline(&s, dir.path())));
    }
    out
}

#[test]
fn process_title_like_redis() {
    let want = title_story(Launch::redis());
    let got = title_story(Launch::tessera());
    assert_eq!(got, want, "tessera (left) vs redis-server (right)");
}

/// With set-proc-title no the command line stays as started, and CONFIG SET
/// proc-title-template still sets the title at once (Redis's updateProcTitleTemplate).
fn title_off_story(l: Launch) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = l.args(&["--set-proc-title", "no"]).start();
    let mut c = s.resp();
    // Untouched: the arguments as started (paths masked).
    let raw = std::fs::read(format!("/proc/{}/cmdline", s.pid())).expect("cmdline");
    let args: Vec<String> = String::from_utf8_lossy(&raw)
        .split('\0')
        .map(|a| match a {
            a if a == s.bin() => "<bin>".to_string(),
            a if a == s.port.to_string() => "<port>".to_string(),
            a if a.starts_with('/') => "<path>".to_string(),
            a => a.to_string(),
        })
        .collect();
    let mut out = vec![format!("start: {args:?}")];
    let r = c.cmd(&["CONFIG", "SET", "proc-title-template", "T {title}"]);
    out.push(format!("set: {r:?} {}", cmdline(&s, dir.path())));
    out
}

#[test]
fn process_title_off_like_redis() {
    let want = title_off_story(Launch::redis());
    let got = title_off_story(Launch::tessera());
    assert_eq!(got, want, "tessera (left) vs redis-server (right)");
}

/// SHUTDOWN NOSAVE while a script is busy exits at once (Redis's finishShutdown); the
/// socket file goes too, as closeListeningSockets unlinks it.
fn busy_shutdown_story(l: Launch) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("s");
    let sock_arg = sock.display().to_string();
    let mut s = l
        .args(&["--unixsocket", &sock_arg, "--busy-reply-threshold", "100"])
        .start();
    let mut busy = s.resp();
    busy.send(&["EVAL", "while true do end", "0"]);
    let mut u = Unix::connect(&sock).expect("connect");
    let mut out = Vec::new();
    let mut last = Reply::Null;
    wait_until("the script is busy", Duration::from_secs(10), || {
        last = u.cmd(&["PING"]);
        matches!(&last, Reply::Error(e) if e.starts_with("BUSY"))
    });
    // The connection ends with the process (closed or reset): no reply to read.
    u.w.write_all(&encode(&[b"SHUTDOWN", b"NOSAVE"]))
        .expect("send SHUTDOWN");
    out.push(format!(
        "exited: {}",
        s.wait_exit(Duration::from_secs(15)).is_some()
    ));
    out.push(format!("file after exit: {}", sock.exists()));
    out
}

#[test]
fn busy_shutdown_removes_the_socket_like_redis() {
    let want = busy_shutdown_story(Launch::redis());
    let got = busy_shutdown_story(Launch::tessera());
    assert_eq!(got, want, "tessera (left) vs redis-server (right)");
}

/// A replica that syncs over the unix socket (redis-cli --replica -s) is listed with
/// Redis's peer name for a unix socket, `ip=/unixsocket,port=0`.
fn unix_replica_line(l: Launch) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("s").display().to_string();
    let s = l
        .args(&["--unixsocket", &sock, "--repl-diskless-sync-delay", "0"])
        .start();
    let mut cmd = std::process::Command::new(tessera_testkit::redis_cli_bin());
    cmd.args(["-s", &sock, "--replica"]);
    let _replica = Process::spawn(cmd);
    let mut c = s.resp();
    let mut line = String::new();
    wait_until("the replica is listed", Duration::from_secs(20), || {
        let info = match c.cmd(&["INFO", "replication"]) {
            Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
            _ => String::new(),
        };
        line = info
            .lines()
            .find(|l| l.starts_with("slave0:"))
            .unwrap_or("")
            .to_string();
        !line.is_empty()
    });
    line.split(',').take(2).collect::<Vec<_>>().join(",")
}

#[test]
fn unix_replica_is_listed_like_redis() {
    let want = unix_replica_line(Launch::redis());
    let got = unix_replica_line(Launch::tessera());
    assert_eq!(got, want, "tessera (left) vs redis-server (right)");
}
